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

void eai_req_audit_async(struct eai_app *app, const char *tenant, json_t *event)
{
    if (!event)
        return;
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
