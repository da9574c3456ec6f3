/*
 * Span export (docs/observability.md).
 *
 * core/obs/trace.c keeps a bounded queue of finished spans (2048) and, when an
 * exporter is started, hands batches (256 spans, or whatever is queued
 * after 1 s) to a telemetry plugin's export_spans on the loop thread.
 * Spans that do not fit, or whose batch fails, are counted in
 * eai_trace_spans_dropped_total.  Without an exporter each finished span
 * is written to the log at debug level.
 *
 * core/obs/otlp.c is the built-in telemetry plugin "otlp": OTLP/HTTP with the
 * JSON encoding, POST <endpoint>/v1/traces through host->http_request.
 */
#ifndef EAI_CORE_OTLP_H
#define EAI_CORE_OTLP_H

#include <eai/plugin.h>
#include <eai/sinks.h>

struct event_base;
struct eai_app;

#define EAI_TRACE_QUEUE_MAX 2048
#define EAI_TRACE_BATCH_MAX 256
#define EAI_TRACE_FLUSH_MS 1000

/* --- implemented in core/obs/trace.c */
/* Start exporting queued spans through ops on base's loop (0 or -1). */
int eai_trace_exporter_start(struct event_base *base, const struct eai_telemetry_ops *ops, void *self);
/* Hand everything queued to the exporter now (loop thread). */
void eai_trace_flush(void);
/* Stop the timer (queued spans are flushed first); later spans are logged. */
void eai_trace_exporter_stop(void);
/* Spans queued and not yet handed over; batches in flight. */
int eai_trace_queued(void);
int eai_trace_inflight(void);

/* --- implemented in core/obs/otlp.c */
/* The built-in telemetry descriptor (kind EAI_KIND_TELEMETRY, name "otlp").
 * Config: endpoint (string, required: base URL, "/v1/traces" is appended),
 * timeout_ms (int, default 10000), service_name (string, default "eaid"). */
const struct eai_plugin_descriptor *eai_builtin_telemetry_otlp(void);
/* OTLP/JSON ExportTraceServiceRequest for spans in the sinks.h shape (new
 * reference, NULL on bad input). */
json_t *eai_otlp_encode(const json_t *spans, const char *service_name);
/* OTEL_EXPORTER_OTLP_HEADERS ("k1=v1,k2=v2", values percent-encoded) as
 * malloc'd "k1: v1" strings into out (at most max); how many, or -1 when
 * malformed. */
int eai_otlp_parse_headers(const char *list, char **out, int max);

/* App wiring: with cfg->otlp_endpoint set, create the "otlp" exporter into
 * app->telemetry (unless one is loaded already) and start the export
 * timer; otherwise say once that spans go to the debug log.  0 or -1. */
int eai_telemetry_start(struct eai_app *app, struct eai_error **err);
/* Name and config of the telemetry backend chosen in cfg (endpoint added):
 * 0 with *conf NULL for the "log" fallback, else *conf is a new reference
 * (the built-in "otlp" registered).  -1 on out of memory. */
#define EAI_TELEMETRY_WHAT "telemetry exporter" /* start-up's name in errors */
struct eai_config;
int eai_telemetry_conf(const struct eai_config *cfg, const char **name, json_t **conf, struct eai_error **err);
/* Flush, stop the timer and destroy the exporter instance. */
void eai_telemetry_stop(struct eai_app *app);

/* --- implemented in core/obs/obs.c */
/* Describe (HELP/TYPE) every metric family of the service once at start,
 * so /metrics lists them before the first sample. */
void eai_obs_describe_metrics(void);

#endif
