/*
 * Delivery plugins: audit sink (EAI_KIND_AUDIT), FinOps (EAI_KIND_FINOPS)
 * and telemetry exporter (EAI_KIND_TELEMETRY).  Core drains its durable
 * queues (audit_events by cursor, usage_outbox) into these ops on the loop
 * thread; a plugin delivers asynchronously (host->http_request) and calls
 * done(arg, ok) exactly once per deliver call.  Built-in fallbacks in core
 * use the same descriptors.
 */
#ifndef EAI_SINKS_H
#define EAI_SINKS_H

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*eai_deliver_done_fn)(void *arg, int ok, const char *error);

struct eai_audit_ops {
    size_t size;
    /* events: array of sealed audit events in chain order. */
    int (*deliver)(void *self, const json_t *events, eai_deliver_done_fn done, void *arg);
};
#define EAI_AUDIT_OPS_SIZE_1_0 (offsetof(struct eai_audit_ops, deliver) + sizeof(void (*)(void)))
#define EAI_AUDIT_OPS_SIZE_1_1 EAI_AUDIT_OPS_SIZE_1_0
#define EAI_AUDIT_OPS_SIZE_1_2 EAI_AUDIT_OPS_SIZE_1_0
#define EAI_AUDIT_OPS_SIZE_1_3 EAI_AUDIT_OPS_SIZE_1_2
#define EAI_AUDIT_OPS_SIZE_1_4 EAI_AUDIT_OPS_SIZE_1_3
#define EAI_AUDIT_OPS_SIZE_1_5 EAI_AUDIT_OPS_SIZE_1_4

struct eai_finops_ops {
    size_t size;
    /* One usage event (object with "id" used as the idempotency key). */
    int (*deliver)(void *self, const json_t *event, eai_deliver_done_fn done, void *arg);
};
#define EAI_FINOPS_OPS_SIZE_1_0 (offsetof(struct eai_finops_ops, deliver) + sizeof(void (*)(void)))
#define EAI_FINOPS_OPS_SIZE_1_1 EAI_FINOPS_OPS_SIZE_1_0
#define EAI_FINOPS_OPS_SIZE_1_2 EAI_FINOPS_OPS_SIZE_1_0
#define EAI_FINOPS_OPS_SIZE_1_3 EAI_FINOPS_OPS_SIZE_1_2
#define EAI_FINOPS_OPS_SIZE_1_4 EAI_FINOPS_OPS_SIZE_1_3
#define EAI_FINOPS_OPS_SIZE_1_5 EAI_FINOPS_OPS_SIZE_1_4

struct eai_telemetry_ops {
    size_t size;
    /* spans: array of finished spans as JSON objects:
     * {trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns,
     *  status ("ok"|"error"), attributes{...}} */
    int (*export_spans)(void *self, const json_t *spans, eai_deliver_done_fn done, void *arg);
    /* ---- Added in 1.1, optional (NULL: metrics stay on eaid's /metrics
     * only).  Every metric in the Prometheus text exposition format 0.0.4
     * (text, len bytes, valid until the call returns), one second after
     * start and then every 15 s; the next call waits for done(). */
    int (*export_metrics)(void *self, const char *text, size_t len, eai_deliver_done_fn done, void *arg);
};
#define EAI_TELEMETRY_OPS_SIZE_1_0 offsetof(struct eai_telemetry_ops, export_metrics)
#define EAI_TELEMETRY_OPS_SIZE_1_1 (offsetof(struct eai_telemetry_ops, export_metrics) + sizeof(void (*)(void)))
#define EAI_TELEMETRY_OPS_SIZE_1_2 EAI_TELEMETRY_OPS_SIZE_1_1
#define EAI_TELEMETRY_OPS_SIZE_1_3 EAI_TELEMETRY_OPS_SIZE_1_2
#define EAI_TELEMETRY_OPS_SIZE_1_4 EAI_TELEMETRY_OPS_SIZE_1_3
#define EAI_TELEMETRY_OPS_SIZE_1_5 EAI_TELEMETRY_OPS_SIZE_1_4

#ifdef __cplusplus
}
#endif
#endif
