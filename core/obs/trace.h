/*
 * W3C Trace Context and spans.  Spans are exported in batches through the
 * telemetry plugin (OTLP/HTTP JSON) or, without one, logged at debug level.
 */
#ifndef EAI_CORE_TRACE_H
#define EAI_CORE_TRACE_H

#include <stdint.h>
#include <jansson.h>

struct eai_trace_ctx {
    char trace_id[33];         /* 32 lowercase hex */
    char span_id[17];          /* 16 lowercase hex: the caller's (parent) span */
    unsigned flags;            /* trace-flags byte */
    int valid;                 /* parsed from a header (1) or generated (0) */
};

enum eai_span_kind { EAI_SPAN_INTERNAL = 1, EAI_SPAN_SERVER = 2, EAI_SPAN_CLIENT = 3, EAI_SPAN_KIND_MAX };

struct eai_span;

/* Strict parse of a traceparent header: version 00 (or future versions per
 * the spec's rules), exact lengths, lowercase hex, non-zero ids.  0 / -1. */
int eai_traceparent_parse(const char *header, struct eai_trace_ctx *out);
/* A fresh random trace context (valid = 0). */
void eai_trace_ctx_generate(struct eai_trace_ctx *out);
/* "00-<trace>-<span>-<flags>" for a span (or for ctx when span is NULL). */
void eai_traceparent_format(const char *trace_id, const char *span_id, unsigned flags, char out[56]);

/* 1 when finished spans are read (an exporter, or the log at debug): a
 * caller may skip building a span's name and attributes otherwise. */
int eai_trace_recording(void);

struct eai_span *eai_span_start(const char *name, enum eai_span_kind kind,
                                const char *trace_id, const char *parent_span_id);
/* Move the start back to an earlier wall-clock time (epoch ms), for spans
 * that cover a wait measured from a stored time (queueing). */
void eai_span_set_start_ms(struct eai_span *s, int64_t epoch_ms);
const char *eai_span_trace_id(const struct eai_span *s);
const char *eai_span_id(const struct eai_span *s);
void eai_span_set_str(struct eai_span *s, const char *key, const char *value);
void eai_span_set_int(struct eai_span *s, const char *key, int64_t value);
void eai_span_set_double(struct eai_span *s, const char *key, double value);
/* End and queue for export (the span is freed; NULL-safe). */
void eai_span_end(struct eai_span *s, int error);

#endif
