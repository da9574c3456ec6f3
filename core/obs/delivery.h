/*
 * Delivery loops (docs/observability.md, FinOps delivery):
 *  - the usage outbox drains to the FinOps plugin (app->finops, e.g.
 *    eai-finops-http.so when EAI_FINOPS_URL is set), retried with capped
 *    exponential backoff, the event id as idempotency key; without the
 *    plugin each event goes to the in-process ledger (ledger_insert);
 *  - audit events after a durable per-tenant cursor (kv
 *    "audit_sink_cursor:<tenant>") ship to the audit sink plugin
 *    (app->audit_sink, eai-audit-http.so when EAI_AUDIT_URL is set);
 *  - the chain anchors for `eaid audit verify` are kept up to date.
 * Storage calls run on workers; plugin calls on the loop thread.
 * Gauges: eai_outbox_backlog, eai_audit_sink_backlog.
 */
#ifndef EAI_CORE_DELIVERY_H
#define EAI_CORE_DELIVERY_H

#include "app.h"

/* Load the finops/audit plugins named by cfg->finops_url / cfg->audit_url
 * when app->finops / app->audit_sink are not set yet, and start the
 * timers.  0 or -1 (+ *err). */
int eai_delivery_start(struct eai_app *app, struct eai_error **err);
/* How start-up names the two sinks in its errors (and `eaid config check`). */
#define EAI_DELIVERY_FINOPS_WHAT "FinOps delivery (finops.backend, EAI_FINOPS_URL)"
#define EAI_DELIVERY_AUDIT_WHAT "audit sink (audit.backend, EAI_AUDIT_URL)"
/* Name and config of the audit or FinOps backend chosen in cfg (its URL
 * added): 0 with *conf NULL for the in-process fallback, else *conf is a
 * new reference.  -1 on out of memory. */
int eai_delivery_sink_conf(const struct eai_config *cfg, enum eai_plugin_kind kind, const char **name,
                           json_t **conf, struct eai_error **err);
/* Stop the timers; in-flight work finishes in the background and frees
 * itself.  Destroys the plugins this module created. */
void eai_delivery_stop(struct eai_app *app);
/* Something was written to the outbox (an execution finished): drain now. */
void eai_delivery_kick(struct eai_app *app);

/* Backoff before retry number n (1-based), in ms: 250 * 2^(n-1), capped. */
int64_t eai_delivery_backoff_ms(int n);
#define EAI_DELIVERY_BACKOFF_CAP_MS 10000

#endif
