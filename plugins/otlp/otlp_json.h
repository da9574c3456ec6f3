/* OTLP/HTTP JSON encoding of plugins/otlp (otlp_json.c, otlp_metrics.c). */
#ifndef EAI_PLUGIN_OTLP_JSON_H
#define EAI_PLUGIN_OTLP_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define EAI_OTLP_MAX_HEADERS 32

/* OTEL_EXPORTER_OTLP_HEADERS ("k1=v1,k2=v2", values percent-encoded) as
 * malloc'd "k1: v1" strings into out (at most max); how many, or -1 when
 * malformed (a key that is not an HTTP token, a control character). */
int eai_otlp_parse_headers(const char *list, char **out, int max);
/* {key: value, ...} (strings, integers, reals, booleans) as OTLP KeyValue[]. */
json_t *eai_otlp_attributes(const json_t *attrs);
/* ExportTraceServiceRequest of spans in the sinks.h shape (new reference,
 * NULL on bad input). */
json_t *eai_otlp_encode_spans(const json_t *spans, const char *service_name);
/* ExportMetricsServiceRequest of a Prometheus text exposition (format
 * 0.0.4, as eaid's /metrics): counters as monotonic cumulative sums,
 * gauges (and untyped) as gauges, histograms as explicit-bucket histograms
 * (per-bucket counts from the cumulative le buckets); start_ns is the start
 * of the cumulative series, now_ns the observation.  NULL on malformed input
 * (why says where) or out of memory.  At most EAI_OTLP_METRICS_MAX series. */
#define EAI_OTLP_METRICS_MAX 20000
json_t *eai_otlp_encode_metrics(const char *text, size_t len, const char *service_name, uint64_t start_ns,
                                uint64_t now_ns, char *why, size_t whylen);

#endif
