/*
 * A session's network (docs/sessions.md "Egress"): GET and PUT
 * /v1/sandbox/sessions/{id}/network.  A session created with
 * network.egress lives in a namespace of core's with a grant of the egress
 * engine, as an execution does (core/net/egress_host.c); PUT replaces the
 * grant's allow list, effective for the next DNS query and connection at
 * once (connections already open stay), checked against the profile's
 * allow list exactly as at creation, audited.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/session_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "exec/exec_validate.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "net/egress_host.h"
#include "schema/jsonschema.h"

static json_t *detail1(const char *path, const char *msg)
{
    return json_pack("[{s:s, s:s}]", "path", path, "message", msg);
}

static void deny(struct eai_app *app, struct eai_req *r, const char *action, const char *target, enum eai_code code,
                 json_t *details)
{
    json_t *ev = eai_req_audit_event(r, action, target, "deny", eai_code_name(code));
    if (ev)
        eai_req_audit_async(app, eai_req_tenant(r), ev);
    if (code == EAI_E_NOT_FOUND) {
        json_decref(details);
        eai_reply_not_found(r, EAI_MISSING_SESSION);
        return;
    }
    eai_reply_error(r, code, details);
}

static struct eai_session *session_here(struct eai_app *app, struct eai_req *r, const char *action,
                                        void (*route)(struct eai_app *, struct eai_req *))
{
    struct eai_sessions *reg = ses_reg(app);
    const char *id = eai_req_param(r, "id");
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return NULL;
    }
    struct eai_session *s = ses_id_ok(id) ? ses_find(reg, eai_req_tenant(r), id) : NULL;
    if (!s && ses_id_ok(id) && ses_store_on(app)) {
        ses_route_stored(app, r, action, route);
        return NULL;
    }
    if (!s)
        deny(app, r, action, ses_id_ok(id) ? id : "", EAI_E_NOT_FOUND, NULL);
    else if (ses_claim_wait(s, r, route)) /* being parked, or restored here (session_handoff.c) */
        return NULL;
    return s;
}

void eai_session_route_network_get(struct eai_app *app, struct eai_req *r)
{
    struct eai_session *s = session_here(app, r, "sandbox.session.network.get", eai_session_route_network_get);
    if (!s)
        return;
    json_t *log = s->lease ? eai_egress_lease_log(s->lease) : NULL;
    json_t *summary = log ? eai_egress_log_summary(log) : s->net_summary ? json_incref(s->net_summary) : NULL;
    json_t *v = json_pack("{s:s, s:o, s:o, s:o}", "session_id", s->id, "egress",
                          s->egress ? json_incref(s->egress) : json_array(), "log", log ? log : json_null(), "summary",
                          summary ? summary : json_null());
    if (v)
        eai_reply_json(r, 200, v);
    else
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
}

/* ------------------------------------------------------------ PUT */

struct net_job {
    struct eai_app *app;
    char tenant[64], id[48], actor[64];
    json_t *body;                  /* pseudo execution body: profile, image, network */
    json_t *rec;
    const struct eai_profile *prof;
    struct eai_error *err;
};

static void net_work(void *arg)
{
    struct net_job *j = arg;
    struct eai_exec_vopts o = {.files_max_total_bytes = 8 << 20};
    if (eai_exec_validate(j->body, NULL, j->app->profiles, j->app->nprofiles, &o, &j->rec, &j->prof, &j->err) < 0)
        j->rec = NULL;
}

static void net_answer(struct eai_req *r, void *arg)
{
    struct net_job *j = arg;
    const char *action = "sandbox.session.network";
    struct eai_sessions *reg = ses_reg(j->app);
    if (!r)
        return;
    struct eai_session *s = reg ? ses_find(reg, j->tenant, j->id) : NULL;
    if (!s) {
        deny(j->app, r, action, j->id, EAI_E_NOT_FOUND, NULL);
        return;
    }
    if (!j->rec) {
        deny(j->app, r, action, s->id, j->err ? j->err->code : EAI_E_INTERNAL,
             j->err && j->err->details ? json_incref(j->err->details) : NULL);
        return;
    }
    if (s->state != SES_RUNNING || !s->lease) {
        int ended = !ses_live(s) || s->state == SES_ENDING;
        deny(j->app, r, action, s->id, ended ? EAI_E_SESSION_ENDED : EAI_E_CONFLICT,
             detail1("/status", ended ? "the session has ended" : "the session is not running"));
        return;
    }
    json_t *eg = json_object_get(j->rec, "egress");
    size_t n = json_array_size(eg);
    const char **entries = calloc(n + 1, sizeof *entries);
    if (!entries) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    for (size_t i = 0; i < n; i++)
        entries[i] = json_string_value(json_array_get(eg, i));
    struct eai_error *err = NULL;
    int rc = eai_egress_lease_set_entries(s->lease, entries, &err);
    free(entries);
    if (rc < 0) {
        deny(j->app, r, action, s->id, err ? err->code : EAI_E_INTERNAL,
             err && err->message ? detail1("/egress", err->message) : NULL);
        eai_error_free(err);
        return;
    }
    json_decref(s->egress);
    s->egress = json_deep_copy(eg);
    s->last_used_ms = eai_now_ms();
    /* audited with the new list (the reason, at most 480 characters) */
    char why[512] = "egress=";
    size_t at = strlen(why);
    for (size_t i = 0; i < n && at < 480; i++)
        at += (size_t)snprintf(why + at, sizeof why - at, "%s%s", i ? "," : "",
                               json_string_value(json_array_get(eg, i)));
    json_t *ev = eai_req_audit_event(r, action, s->id, "allow", NULL);
    if (ev) {
        json_object_set_new(ev, "reason", json_string(why));
        eai_req_audit_async(j->app, s->tenant, ev);
    }
    eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s: allow list replaced (%zu entries)", s->id, n);
    ses_persist(s);
    json_t *v = json_pack("{s:s, s:o}", "session_id", s->id, "egress",
                          s->egress ? json_incref(s->egress) : json_array());
    if (v)
        eai_reply_json(r, 200, v);
    else
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
}

static void net_free(void *arg)
{
    struct net_job *j = arg;
    json_decref(j->body);
    json_decref(j->rec);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops net_ops = {
    .what = "session_network", .work = net_work, .answer = net_answer, .free = net_free,
};

void eai_session_route_network_put(struct eai_app *app, struct eai_req *r)
{
    const char *action = "sandbox.session.network";
    struct eai_session *s = session_here(app, r, action, eai_session_route_network_put);
    if (!s)
        return;
    json_t *body = eai_req_body_json(r, 0);
    if (!body)
        return;
    const char *k;
    json_t *v;
    const char *bad = !json_is_object(body) ? "" : NULL;
    json_object_foreach(body, k, v) {
        if (!bad && strcmp(k, "egress") != 0)
            bad = k;
    }
    if (bad || !json_is_array(json_object_get(body, "egress"))) {
        char p[300];
        snprintf(p, sizeof p, "/%s", bad ? bad : "egress");
        json_decref(body);
        deny(app, r, action, s->id, EAI_E_VALIDATION_FAILED,
             detail1(p, bad ? (bad[0] ? "unknown field" : "must be an object")
                            : "must be an array of host:port entries"));
        return;
    }
    if (!s->lease && s->state != SES_ENDED && s->state != SES_FAILED && s->state != SES_INTERRUPTED) {
        json_decref(body);
        deny(app, r, action, s->id, EAI_E_CONFLICT,
             detail1("/egress", "the session was created without network egress: it has no network to change"));
        return;
    }
    /* the same validation as at creation (schema, then the profile's
     * allow list), on a worker */
    json_t *pseudo = json_pack("{s:[s], s:s, s:s, s:{s:O}}", "command", "sh", "profile", s->profile, "image",
                               s->image, "network", "egress", json_object_get(body, "egress"));
    json_decref(body);
    if (!pseudo) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (app->schema_execution) {
        json_t *errors = NULL;
        eai_schema_validate(app->schema_execution, pseudo, &errors);
        if (json_array_size(errors) > 0) {
            json_decref(pseudo);
            deny(app, r, action, s->id, EAI_E_VALIDATION_FAILED, errors);
            return;
        }
        json_decref(errors);
    }
    struct net_job *j = calloc(1, sizeof *j);
    if (!j) {
        json_decref(pseudo);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->app = app;
    j->body = pseudo;
    snprintf(j->tenant, sizeof j->tenant, "%s", s->tenant);
    snprintf(j->id, sizeof j->id, "%s", s->id);
    eai_park(s->reg->parks, r, &net_ops, j);
}
