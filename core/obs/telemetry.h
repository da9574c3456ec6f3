/*
 * Span and metrics export (docs/observability.md).
 *
 * core/obs/trace.c keeps a bounded queue of finished spans (2048) and, when an
 * exporter is started, hands batches (256 spans, or whatever is queued
 * after 1 s) to a telemetry plugin's export_spans on the loop thread.
 * Spans that do not fit, or whose batch fails, are counted in
 * eai_trace_spans_dropped_total.  Without an exporter each finished span
 * is written to the log at debug level.
 *
 * The OTLP exporter is the plugin plugins/otlp (eai-telemetry-otlp.so):
 * OTLP/HTTP with the JSON encoding, POST <endpoint>/v1/traces and
 * <endpoint>/v1/metrics through host->http_request.  core/obs/telemetry.c
 * chooses and starts the telemetry plugin.
 */
#ifndef EAI_CORE_TELEMETRY_H
#define EAI_CORE_TELEMETRY_H

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

/* --- implemented in core/obs/telemetry.c */
/* App wiring: with cfg->otlp_endpoint set, create the "otlp" exporter into
 * app->telemetry (unless one is loaded already) and start the export
 * timer; otherwise say once that spans go to the debug log.  0 or -1. */
int eai_telemetry_start(struct eai_app *app, struct eai_error **err);
/* Name and config of the telemetry backend chosen in cfg (endpoint added):
 * 0 with *conf NULL for the "log" fallback, else *conf is a new reference.
 * -1 on out of memory. */
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
