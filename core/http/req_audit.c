/* Audit events of a request (http/req_audit.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/req_audit.h"
#include "http/request_int.h"
#include "http/park.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "obs/metrics.h"

#define SRV_COMPONENT "http"


json_t *eai_req_audit_event(const struct eai_req *r, const char *action, const char *target,
                            const char *decision, const char *reason)
{
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    const char *trace_id = r->span ? eai_span_trace_id(r->span) : r->trace.trace_id;
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s?, s:s, s:s}",
                           "id", id, "time", now,
                           "tenant_id", r->tenant[0] ? r->tenant : EAI_SYSTEM_TENANT,
                           "actor", r->key_id[0] ? r->key_id : "anonymous",
                           "action", action ? action : "",
                           "target", target ? target : "",
                           "decision", decision ? decision : "allow",
                           "reason", reason,
                           "request_id", r->request_id,
                           "trace_id", trace_id ? trace_id : "");
    if (ev && !reason)
        json_object_set_new(ev, "reason", json_string(""));
    return ev;
}

struct audit_job {
    struct eai_app *app;
    char tenant[64];
    json_t *event;
    struct eai_error *err;
    int rc;
};

static void audit_work(void *arg)
{
    struct audit_job *j = arg;
    j->rc = j->app->store->audit_append(j->app->storage.self, j->tenant, j->event, &j->err);
}

static void audit_answer(struct eai_req *r, void *arg)
{
    (void)r; /* a background job: no request */
    struct audit_job *j = arg;
    if (j->rc < 0)
        eai_log(SRV_COMPONENT, EAI_LOG_ERROR, "audit append (%s) failed: %s",
                json_string_value(json_object_get(j->event, "action")),
                j->err && j->err->message ? j->err->message : "?");
}

static void audit_free(void *arg)
{
    struct audit_job *j = arg;
    eai_error_free(j->err);
    json_decref(j->event);
    free(j);
}

static const struct eai_park_ops audit_park_ops = {
    .what = "audit append", .work = audit_work, .answer = audit_answer, .free = audit_free,
};

/* Refusals of ids that do not exist ("deny", "not_found": reads, files,
 * cancels, sessions, runs) are what a probe or a buggy poller repeats
 * without end: each tenant records at most NF_BURST of them at once and
 * NF_PER_S a second after that.  The ones past it are counted; the next
 * one recorded carries "suppressed": how many were not written since
 * (docs/audit.md "Refusals of unknown ids").  Loop thread only.  A fixed
 * table of tenants: a tenant that lands on a slot another one holds takes
 * it over with a full bucket (at worst one more burst, never unbounded). */
#define NF_SLOTS 1024
#define NF_BURST 60.0
#define NF_PER_S 1.0

struct nf_slot {
    char tenant[64];
    double tokens;
    int64_t at_ms;
    int64_t suppressed;
};

static struct nf_slot g_nf[NF_SLOTS];

static int not_found_admit(const char *tenant, json_t *event)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = tenant; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    struct nf_slot *s = &g_nf[h % NF_SLOTS];
    int64_t now = eai_now_ms();
    if (strcmp(s->tenant, tenant) != 0) {
        snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
        s->tokens = NF_BURST;
        s->suppressed = 0;
    } else {
        s->tokens += (double)(now - s->at_ms) / 1000.0 * NF_PER_S;
        if (s->tokens > NF_BURST)
            s->tokens = NF_BURST;
    }
    s->at_ms = now;
    if (s->tokens < 1.0) {
        s->suppressed++;
        eai_metrics_add("eai_audit_suppressed_total", "reason=\"not_found\"", 1);
        return 0;
    }
    s->tokens -= 1.0;
    if (s->suppressed > 0) {
        json_object_set_new(event, "suppressed", json_integer(s->suppressed));
        s->suppressed = 0;
    }
    return 1;
}

void eai_req_audit_async(struct eai_app *app, const char *tenant, json_t *event)
{
    if (!event)
        return;
    const char *decision = json_string_value(json_object_get(event, "decision"));
    const char *reason = json_string_value(json_object_get(event, "reason"));
    if (decision && reason && !strcmp(decision, "deny") && !strcmp(reason, "not_found") &&
        !not_found_admit(tenant ? tenant : EAI_SYSTEM_TENANT, event)) {
        json_decref(event);
        return;
    }
    struct audit_job *j = calloc(1, sizeof(*j));
    if (!j || !app->store) {
        free(j);
        json_decref(event);
        return;
    }
    j->app = app;
    snprintf(j->tenant, sizeof(j->tenant), "%s", tenant ? tenant : EAI_SYSTEM_TENANT);
    json_object_set_new(event, "tenant_id", json_string(j->tenant));
    j->event = event;
    /* a full queue is logged by eai_park; the event is lost */
    eai_park(NULL, NULL, &audit_park_ops, j);
}
