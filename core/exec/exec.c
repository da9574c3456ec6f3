/* Execution routes, long-polls, event streams and lifecycle (exec.h). */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "config/config.h"
#include "base/errors.h"
#include "exec/exec.h"
#include "exec/exec_validate.h"
#include "schema/jsonschema.h"
#include "base/log.h"
#include "exec/scheduler.h"
#include "exec/watch.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "obs/trace.h"
#include "base/util.h"
#include "base/worker.h"

#define EXEC_COMPONENT "exec"
#define EXEC_MAX_WAIT_S 60
#define EXEC_PROBE_WAIT_MS 35000   /* a POST waits this long for a backend's first probe */

/* app->exec: what the routes share (exec.h).  The live state of each
 * execution is the watch hub's; the runs are the scheduler's. */
struct eai_exec {
    struct eai_app *app;
    struct eai_sched *sched;          /* exec/scheduler.h */
    struct eai_watch *hub;            /* exec/watch.h */
    struct eai_park_set *parks;       /* requests parked on a worker job (http/park.h) */
    int stopping;
    int refs;                         /* eai_exec_start's + one per probe-wait timer */
};

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static struct eai_exec *state_of(struct eai_app *app)
{
    struct eai_exec *st = app ? app->exec : NULL;
    return st && !st->stopping ? st : NULL;
}

/* ------------------------------------------------------------ state, work */

static void exec_ref(struct eai_exec *st)
{
    st->refs++;
}

static void exec_unref(struct eai_exec *st)
{
    if (--st->refs > 0)
        return;
    eai_park_set_close(st->parks);
    free(st);
}

/* ------------------------------------------------------------ replies */

static void reply_storage_error(struct eai_req *r, const char *what, const struct eai_error *e)
{
    eai_park_reply_storage(r, what, e);
}

static json_t *detail1(const char *path, const char *msg)
{
    return json_pack("[{s:s, s:s}]", "path", path, "message", msg);
}

/* The error envelope with extra headers (429 Retry-After). */
static void reply_error_headers(struct eai_req *r, enum eai_code code, json_t *details,
                                const char *const *headers)
{
    const char *lang = eai_req_lang(r);
    json_t *env = json_pack("{s:{s:s, s:s, s:{s:s, s:s}, s:s, s:o}}", "error",
                            "code", eai_code_name(code), "message", eai_code_message(code, lang),
                            "message_i18n", "en", eai_code_message(code, "en"),
                            "fr", eai_code_message(code, "fr"),
                            "request_id", eai_req_id(r) ? eai_req_id(r) : "",
                            "details", details ? details : json_array());
    if (!env) {
        eai_reply_error(r, code, NULL);
        return;
    }
    eai_reply_json_headers(r, eai_code_http_status(code), env, headers);
}

static void audit_deny(struct eai_app *app, struct eai_req *r, const char *action,
                       const char *target, const char *reason)
{
    const char *tenant = eai_req_tenant(r);
    if (!tenant)
        return;
    json_t *ev = eai_req_audit_event(r, action, target ? target : "", "deny", reason);
    if (ev)
        eai_req_audit_async(app, tenant, ev);
}

/* ------------------------------------------------------------ create */

struct probe_snap {
    const struct eai_plugin_inst *iso;
    int ready;
    unsigned caps;
    char reason[256];
};

struct create_job {
    struct eai_app *app;
    struct eai_parked *hold;       /* parked while a backend's first probe runs */
    char tenant[64];
    char id[64];
    json_t *body;
    char *idem;
    char request_id[128];
    char trace_id[33], span_id[17], traceparent[56];
    json_t *audit;                 /* sandbox.execute allow */
    struct probe_snap *probes;     /* one per loaded isolation backend */
    int nprobes;
    /* results */
    int rc;                        /* eai_store_result or -1 */
    struct eai_error *err;         /* refusal or storage error */
    int refused;                   /* err is a refusal (4xx/503), not storage */
    json_t *existing;
    const struct eai_profile *prof;
    struct eai_exec *st;     /* held by the probe wait timer */
    struct event *park_ev;         /* waiting for a backend's first probe */
    int64_t park_until_ms;
};

static const struct probe_snap *snap_for(const struct create_job *j, const struct eai_profile *p)
{
    for (int i = 0; p && i < j->nprobes; i++)
        if (j->probes[i].iso == p->iso)
            return &j->probes[i];
    return NULL;
}

static int image_known_cb(void *arg, const struct eai_profile *p, const char *image)
{
    const struct create_job *j = arg;
    const struct probe_snap *ps = snap_for(j, p);
    if (!ps || !(ps->caps & EAI_ISO_CAP_LOCAL_IMAGES))
        return 1; /* the backend resolves images itself (e.g. Kubernetes) */
    if (!ps->ready)
        return 1; /* no runtime: answer 503 sandbox_unavailable below, not unknown_image */
    const struct eai_host *h = j->app->host;
    char buf[4096];
    return h && h->image_rootfs && h->image_rootfs(h, image, buf, sizeof buf) == 0;
}

static void create_work(void *arg)
{
    struct create_job *j = arg;
    struct eai_app *app = j->app;
    json_t *tool_doc = NULL;
    const char *tool = jstr(j->body, "tool");
    if (tool) {
        if (app->store->manifest_get(app->storage.self, j->tenant, "tool", tool, &tool_doc, &j->err) < 0) {
            j->rc = -1;
            return;
        }
    }
    struct eai_exec_vopts o = {
        .files_max_total_bytes = app->cfg ? app->cfg->files_max_total_bytes : 8 << 20,
        .image_known = image_known_cb,
        .image_arg = j,
    };
    json_t *rec = NULL;
    int rc = eai_exec_validate(j->body, tool_doc, app->profiles, app->nprofiles, &o, &rec, &j->prof, &j->err);
    json_decref(tool_doc);
    if (rc < 0) {
        j->refused = 1;
        j->rc = -1;
        return;
    }
    const struct probe_snap *ps = snap_for(j, j->prof);
    if (!ps || !ps->ready) {
        j->err = eai_error_new(EAI_E_SANDBOX_UNAVAILABLE, 0, "backend of profile '%s' not ready: %s",
                               j->prof->name, ps ? ps->reason : "not loaded");
        j->refused = 1;
        j->rc = -1;
        json_decref(rec);
        return;
    }
    char now[32], hash[65];
    eai_time_rfc3339(eai_now_ms(), now);
    if (eai_exec_request_hash(j->body, hash) < 0) {
        j->err = eai_error_new(EAI_E_INTERNAL, 0, "out of memory hashing the request");
        j->rc = -1;
        json_decref(rec);
        return;
    }
    json_object_set_new(rec, "id", json_string(j->id));
    json_object_set_new(rec, "tenant_id", json_string(j->tenant));
    json_object_set_new(rec, "status", json_string("queued"));
    json_object_set_new(rec, "created_at", json_string(now));
    json_object_set_new(rec, "started_at", json_null());
    json_object_set_new(rec, "finished_at", json_null());
    json_object_set_new(rec, "exit_code", json_null());
    json_object_set_new(rec, "signal", json_null());
    json_object_set_new(rec, "error", json_null());
    json_object_set_new(rec, "usage", json_null());
    json_object_set_new(rec, "files", json_array());
    json_object_set_new(rec, "trace_id", j->trace_id[0] ? json_string(j->trace_id) : json_null());
    json_object_set_new(rec, "span_id", j->span_id[0] ? json_string(j->span_id) : json_null());
    json_object_set_new(rec, "traceparent", j->traceparent[0] ? json_string(j->traceparent) : json_null());
    json_object_set_new(rec, "request_id", json_string(j->request_id));
    json_object_set_new(rec, "idempotency_key", j->idem ? json_string(j->idem) : json_null());
    json_object_set_new(rec, "request_hash", json_string(hash));
    json_object_set_new(rec, "cancel_requested", json_false());
    j->rc = app->store->exec_create(app->storage.self, j->tenant, rec, j->audit, &j->existing, &j->err);
    json_decref(rec);
}

static void create_job_free(struct create_job *j)
{
    if (j->park_ev)
        event_free(j->park_ev);
    json_decref(j->body);
    json_decref(j->audit);
    json_decref(j->existing);
    eai_error_free(j->err);
    free(j->idem);
    free(j->probes);
    free(j);
}

static void reply_accepted(struct eai_req *r, int status, const char *id, const char *exec_status)
{
    char loc[160];
    snprintf(loc, sizeof loc, "Location: /v1/sandbox/executions/%s", id);
    const char *headers[] = {loc, NULL};
    eai_reply_json_headers(r, status, json_pack("{s:s, s:s}", "id", id, "status", exec_status), headers);
}

static void create_answer(struct eai_req *r, void *arg)
{
    struct create_job *j = arg;
    struct eai_exec *st = state_of(j->app);
    if (!r) {
        /* answered by eai_exec_stop */
    } else if (j->rc < 0 && j->refused) {
        enum eai_code code = j->err ? j->err->code : EAI_E_INTERNAL;
        json_t *details = j->err && j->err->details ? json_incref(j->err->details) : NULL;
        audit_deny(j->app, r, "sandbox.execute", j->prof ? j->prof->name : "", eai_code_name(code));
        eai_log_req(EXEC_COMPONENT, EAI_LOG_INFO, eai_req_id(r), "execution refused: %s",
                    j->err && j->err->message ? j->err->message : eai_code_name(code));
        eai_reply_error(r, code, details);
    } else if (j->rc < 0) {
        reply_storage_error(r, "exec_create", j->err);
    } else if (j->rc == EAI_STORE_EXISTS) {
        const char *id = jstr(j->existing, "id") ? jstr(j->existing, "id") : j->id;
        const char *s = jstr(j->existing, "status") ? jstr(j->existing, "status") : "queued";
        reply_accepted(r, 200, id, s);
    } else if (j->rc == EAI_STORE_CONFLICT) {
        audit_deny(j->app, r, "sandbox.execute", "", "idempotency_conflict");
        eai_reply_error(r, EAI_E_IDEMPOTENCY_CONFLICT,
                        detail1("Idempotency-Key", "was used with a different request body"));
    } else {
        if (st) {
            eai_watch_queued(st->hub, j->id, j->tenant);
            eai_sched_kick(st->sched);
        }
        eai_log_req(EXEC_COMPONENT, EAI_LOG_INFO, eai_req_id(r), "execution %s queued (profile %s)",
                    j->id, j->prof ? j->prof->name : "?");
        reply_accepted(r, 202, j->id, "queued");
    }
}

static void create_free(void *arg)
{
    create_job_free(arg);
}

static const struct eai_park_ops create_ops = {
    .what = "exec_create", .work = create_work, .answer = create_answer, .free = create_free,
};

/* Readiness of every backend, taken on the loop (probe never blocks).
 * Returns how many are still starting (their first probe runs). */
static int take_probes(struct create_job *j)
{
    struct eai_app *app = j->app;
    int starting = 0;
    j->nprobes = 0;
    if (!j->probes && app->nisolation > 0 && !(j->probes = calloc((size_t)app->nisolation, sizeof *j->probes)))
        return 0; /* out of memory: every profile answers "not ready" */
    for (int i = 0; i < app->nisolation; i++) {
        struct eai_plugin_inst *iso = &app->isolation[i];
        struct probe_snap *ps = &j->probes[j->nprobes++];
        memset(ps, 0, sizeof *ps);
        ps->iso = iso;
        const struct eai_isolation_ops *ops = iso->desc ? iso->desc->ops : NULL;
        if (!ops || !iso->self) {
            snprintf(ps->reason, sizeof ps->reason, "backend not loaded");
            continue;
        }
        struct eai_iso_probe pr;
        memset(&pr, 0, sizeof pr);
        pr.size = sizeof pr;
        ops->probe(iso->self, &pr);
        ps->ready = pr.ready;
        ps->caps = pr.caps;
        snprintf(ps->reason, sizeof ps->reason, "%s", pr.reason[0] ? pr.reason : "starting");
        starting += !pr.ready && eai_iso_probe_pending(&pr);
    }
    return starting;
}

static void create_park_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct create_job *j = arg;
    struct eai_exec *st = j->st;
    struct eai_req *r = eai_park_release(j->hold);
    j->hold = NULL;
    if (!r) {
        /* answered by eai_exec_stop */
        create_job_free(j);
    } else if (take_probes(j) > 0 && eai_now_ms() < j->park_until_ms &&
               (j->hold = eai_park_hold(st->parks, r))) {
        struct timeval tv = {0, 100 * 1000};
        event_add(j->park_ev, &tv);
        return; /* keeps the reference */
    } else {
        eai_park(st->parks, r, &create_ops, j);
    }
    exec_unref(st);
}

/* Idempotency-Key: 1..255 printable ASCII characters. */
static int idem_ok(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > EAI_EXEC_IDEMPOTENCY_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] < 0x20 || (unsigned char)k[i] > 0x7e)
            return 0;
    return 1;
}

void eai_exec_route_create(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = state_of(app);
    if (!st) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    const char *tenant = eai_req_tenant(r);
    if (!tenant) {
        eai_reply_error(r, EAI_E_UNAUTHENTICATED, NULL);
        return;
    }
    json_t *body = eai_req_body_json(r, 0);
    if (!body)
        return; /* replied 400 / 415 */
    const char *idem = eai_req_header(r, "Idempotency-Key");
    if (idem && !idem_ok(idem)) {
        json_decref(body);
        audit_deny(app, r, "sandbox.execute", "", "validation_failed");
        eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                        detail1("Idempotency-Key", "must be 1 to 255 printable ASCII characters"));
        return;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        audit_deny(app, r, "sandbox.execute", "", "validation_failed");
        eai_reply_error(r, EAI_E_VALIDATION_FAILED, detail1("", "must be an object"));
        return;
    }
    if (app->schema_execution) {
        json_t *errors = NULL;
        eai_schema_validate(app->schema_execution, body, &errors);
        eai_exec_schema_filter(body, errors);
        if (json_array_size(errors) > 0) {
            json_decref(body);
            audit_deny(app, r, "sandbox.execute", "", "validation_failed");
            eai_reply_error(r, EAI_E_VALIDATION_FAILED, errors);
            return;
        }
        json_decref(errors);
    }
    int64_t maxq = app->cfg && app->cfg->max_queued_per_tenant > 0 ? app->cfg->max_queued_per_tenant : 1000;
    if (eai_watch_queued_count(st->hub, tenant) >= maxq) {
        json_decref(body);
        audit_deny(app, r, "sandbox.execute", "", "rate_limited");
        const char *h[] = {"Retry-After: 5", NULL};
        reply_error_headers(r, EAI_E_RATE_LIMITED,
                            detail1("", "too many queued executions for this tenant"), h);
        return;
    }

    struct create_job *j = calloc(1, sizeof *j);
    char uuid[37];
    if (!j) {
        json_decref(body);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->app = app;
    j->body = body;
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
    eai_uuid_v4(uuid);
    snprintf(j->id, sizeof j->id, "sbx_%s", uuid);
    snprintf(j->request_id, sizeof j->request_id, "%s", eai_req_id(r) ? eai_req_id(r) : "");
    if (idem && !(j->idem = strdup(idem))) {
        create_job_free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    /* trace: the request's server span is the parent of sandbox.run */
    struct eai_span *span = eai_req_span(r);
    const struct eai_trace_ctx *tc = eai_req_trace(r);
    unsigned flags = tc ? tc->flags : 1;
    if (span) {
        snprintf(j->trace_id, sizeof j->trace_id, "%s", eai_span_trace_id(span));
        snprintf(j->span_id, sizeof j->span_id, "%s", eai_span_id(span));
        eai_span_set_str(span, "eai.execution_id", j->id);
        eai_span_set_str(span, "eai.tenant_id", tenant);
        eai_span_set_str(span, "gen_ai.operation.name", "execute_tool");
        if (jstr(body, "tool"))
            eai_span_set_str(span, "gen_ai.tool.name", jstr(body, "tool"));
        if (jstr(body, "agent_id"))
            eai_span_set_str(span, "gen_ai.agent.id", jstr(body, "agent_id"));
        if (jstr(body, "run_id"))
            eai_span_set_str(span, "eai.run_id", jstr(body, "run_id"));
    } else if (tc) {
        snprintf(j->trace_id, sizeof j->trace_id, "%s", tc->trace_id);
        snprintf(j->span_id, sizeof j->span_id, "%s", tc->span_id);
    }
    if (strlen(j->trace_id) == 32 && strlen(j->span_id) == 16)
        eai_traceparent_format(j->trace_id, j->span_id, flags, j->traceparent);
    j->audit = eai_req_audit_event(r, "sandbox.execute", j->id, "allow", NULL);
    j->st = st;
    if (take_probes(j) > 0) {
        /* a backend is still probing (first start-up): decide once it has */
        j->park_until_ms = eai_now_ms() + EXEC_PROBE_WAIT_MS;
        j->park_ev = evtimer_new(app->base, create_park_cb, j);
        if (j->park_ev && (j->hold = eai_park_hold(st->parks, r))) {
            exec_ref(st);
            struct timeval tv = {0, 100 * 1000};
            event_add(j->park_ev, &tv);
            return;
        }
    }
    eai_park(st->parks, r, &create_ops, j);
}

/* ------------------------------------------------------------ reads */

struct read_job {
    struct eai_app *app;
    char tenant[64], id[160];
    json_t *out;
    int rc;
    struct eai_error *err;
    void (*then)(struct read_job *j);
    void *ctx;                      /* GET context or waiter */
    struct eai_req *r;              /* the parked request (GET, events); NULL for a waiter or once answered */
};

static void read_work(void *arg)
{
    struct read_job *j = arg;
    j->rc = j->app->store->exec_get(j->app->storage.self, j->tenant, j->id, &j->out, &j->err);
}

static void read_answer(struct eai_req *r, void *arg)
{
    struct read_job *j = arg;
    j->r = r;
    j->then(j);
    j->then = NULL;
}

static void read_free(void *arg)
{
    struct read_job *j = arg;
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops read_ops = {
    .what = "exec_get", .work = read_work, .answer = read_answer, .free = read_free,
};

/* Read one record on a worker, then then(j) on the loop.  r (may be NULL)
 * is parked meanwhile.  0, or -1 when the job could not be queued: r was
 * answered then and then() is not called. */
static int read_submit(struct eai_exec *st, struct eai_req *r, const char *tenant, const char *id,
                       void (*then)(struct read_job *), void *ctx)
{
    struct read_job *j = calloc(1, sizeof *j);
    if (!j) {
        if (r)
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return -1;
    }
    j->app = st->app;
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
    snprintf(j->id, sizeof j->id, "%s", id);
    j->then = then;
    j->ctx = ctx;
    return eai_park(st->parks, r, &read_ops, j);
}

/* An execution id as we issue them: "sbx_" + uuid. */
static int id_ok(const char *id)
{
    if (!id || strncmp(id, "sbx_", 4) != 0 || strlen(id) != 40)
        return 0;
    for (const char *p = id + 4; *p; p++)
        if (!isxdigit((unsigned char)*p) && *p != '-')
            return 0;
    return 1;
}

/* ------------------------------------------------------------ GET */

struct get_ctx {
    struct eai_app *app;
    int wait_s;
};

static void get_then(struct read_job *j)
{
    struct get_ctx *c = j->ctx;
    struct eai_req *r = j->r;
    struct eai_exec *st = state_of(c->app);
    if (!r) {
        /* answered by eai_exec_stop */
    } else if (j->rc < 0) {
        reply_storage_error(r, "exec_get", j->err);
    } else if (!j->out) {
        audit_deny(c->app, r, "sandbox.read", j->id, "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
    } else if (c->wait_s == 0 || eai_exec_status_terminal(jstr(j->out, "status")) || !st ||
               eai_watch_poll(st->hub, r, j->out, c->wait_s) < 0) {
        eai_reply_json(r, 200, eai_exec_view(j->out));
    }
    free(c);
}

/* wait_s: digits only, 0..60.  -1 when malformed. */
static int parse_wait(const char *s)
{
    if (!s)
        return 0;
    if (!*s || strlen(s) > 3)
        return -1;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    int v = atoi(s);
    return v <= EXEC_MAX_WAIT_S ? v : -1;
}

void eai_exec_route_get(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = state_of(app);
    if (!st) {
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    int wait_s = parse_wait(eai_req_query(r, "wait_s"));
    if (wait_s < 0) {
        eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                        detail1("/wait_s", "must be an integer from 0 to 60"));
        return;
    }
    const char *id = eai_req_param(r, "id");
    if (!id_ok(id)) {
        audit_deny(app, r, "sandbox.read", id ? id : "", "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    struct get_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    c->app = app;
    c->wait_s = wait_s;
    if (read_submit(st, r, eai_req_tenant(r), id, get_then, c) < 0)
        free(c);
}

/* ------------------------------------------------------------ events (SSE) */

static void events_then(struct read_job *j)
{
    struct get_ctx *c = j->ctx;
    struct eai_req *r = j->r;
    struct eai_exec *st = state_of(c->app);
    free(c);
    if (!r)
        return;
    if (j->rc < 0) {
        reply_storage_error(r, "exec_get", j->err);
        return;
    }
    if (!j->out) {
        audit_deny(j->app, r, "sandbox.read", j->id, "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    eai_stream_start(r, "text/event-stream");
    if (eai_exec_status_terminal(jstr(j->out, "status")) || !st) {
        eai_watch_sse_replay(r, j->out);
        return;
    }
    eai_watch_sse_status(r, j->out);
    if (eai_watch_stream(st->hub, r, j->out) < 0)
        eai_stream_end(r);
}

void eai_exec_route_events(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = state_of(app);
    if (!st) {
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    const char *id = eai_req_param(r, "id");
    if (!id_ok(id)) {
        audit_deny(app, r, "sandbox.read", id ? id : "", "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    struct get_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    c->app = app;
    if (read_submit(st, r, eai_req_tenant(r), id, events_then, c) < 0)
        free(c);
}

/* ------------------------------------------------------------ list */

/* Cursor: base64url (no padding) of "s<seq>". */
static void cursor_encode(int64_t seq, char *out, size_t len)
{
    char raw[32];
    snprintf(raw, sizeof raw, "s%lld", (long long)seq);
    char *b = eai_b64_encode(raw, strlen(raw));
    if (!b) {
        out[0] = '\0';
        return;
    }
    size_t k = 0;
    for (char *p = b; *p && k + 1 < len; p++) {
        if (*p == '=')
            break;
        out[k++] = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    }
    out[k] = '\0';
    free(b);
}

static int cursor_decode(const char *c, int64_t *seq)
{
    size_t n = strlen(c);
    if (n == 0 || n > 40)
        return -1;
    char buf[48];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = c[i];
        if (ch == '-')
            ch = '+';
        else if (ch == '_')
            ch = '/';
        else if (!isalnum((unsigned char)ch))
            return -1;
        buf[k++] = ch;
    }
    while (k % 4)
        buf[k++] = '=';
    buf[k] = '\0';
    size_t len = 0;
    unsigned char *raw = eai_b64_decode(buf, &len);
    if (!raw)
        return -1;
    int ok = len >= 2 && len < 24 && raw[0] == 's';
    int64_t v = 0;
    for (size_t i = 1; ok && i < len; i++) {
        if (!isdigit(raw[i]))
            ok = 0;
        else
            v = v * 10 + (raw[i] - '0');
    }
    free(raw);
    if (!ok)
        return -1;
    *seq = v;
    return 0;
}

struct list_job {
    struct eai_app *app;
    char tenant[64];
    json_t *filter;
    json_t *out;
    int rc;
    struct eai_error *err;
};

static void list_work(void *arg)
{
    struct list_job *j = arg;
    j->rc = j->app->store->exec_list(j->app->storage.self, j->tenant, j->filter, &j->out, &j->err);
}

static void list_answer(struct eai_req *r, void *arg)
{
    struct list_job *j = arg;
    if (!r) {
        /* answered by eai_exec_stop */
    } else if (j->rc < 0) {
        reply_storage_error(r, "exec_list", j->err);
    } else {
        json_t *items = json_array();
        size_t i;
        const json_t *e;
        int64_t last = -1;
        json_array_foreach(j->out, i, e) {
            /* summary items: output only through GET of one execution or its events */
            json_t *v = eai_exec_view(e);
            json_object_del(v, "stdout");
            json_object_del(v, "stderr");
            json_array_append_new(items, v);
            last = json_integer_value(json_object_get(e, "seq"));
        }
        json_int_t limit = json_integer_value(json_object_get(j->filter, "limit"));
        json_t *next = json_null();
        if (last > 0 && (json_int_t)json_array_size(j->out) >= limit) {
            char cur[64];
            cursor_encode(last, cur, sizeof cur);
            next = json_string(cur);
        }
        eai_reply_json(r, 200, json_pack("{s:o, s:o}", "items", items, "next", next));
    }
}

static void list_free(void *arg)
{
    struct list_job *j = arg;
    json_decref(j->filter);
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops list_ops = {
    .what = "exec_list", .work = list_work, .answer = list_answer, .free = list_free,
};

static const char *const all_statuses[] = {"queued", "running", "succeeded", "failed", "timeout",
                                           "oom_killed", "cancelled", "error", NULL};

void eai_exec_route_list(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = state_of(app);
    if (!st) {
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    json_t *details = json_array();
    json_t *filter = json_object();
    if (!details || !filter) {
        json_decref(details);
        json_decref(filter);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    const char *status = eai_req_query(r, "status");
    if (status && *status) {
        int ok = 0;
        for (const char *const *s = all_statuses; *s; s++)
            ok |= strcmp(*s, status) == 0;
        if (ok)
            json_object_set_new(filter, "status", json_string(status));
        else
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/status",
                                                     "message", "is not a status value"));
    }
    const char *run_id = eai_req_query(r, "run_id");
    if (run_id && *run_id) {
        if (strlen(run_id) > 128)
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/run_id",
                                                     "message", "is longer than 128 characters"));
        else
            json_object_set_new(filter, "run_id", json_string(run_id));
    }
    int limit = 20;
    const char *ls = eai_req_query(r, "limit");
    if (ls && *ls) {
        int ok = strlen(ls) <= 3;
        for (const char *p = ls; ok && *p; p++)
            ok = isdigit((unsigned char)*p);
        limit = ok ? atoi(ls) : 0;
        if (limit < 1 || limit > 100)
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/limit",
                                                     "message", "must be an integer from 1 to 100"));
    }
    json_object_set_new(filter, "limit", json_integer(limit));
    const char *after = eai_req_query(r, "after");
    if (after && *after) {
        int64_t seq;
        if (cursor_decode(after, &seq) < 0)
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/after",
                                                     "message", "is not a cursor from a previous page"));
        else
            json_object_set_new(filter, "after", json_integer(seq));
    }
    if (json_array_size(details) > 0) {
        json_decref(filter);
        eai_reply_error(r, EAI_E_VALIDATION_FAILED, details);
        return;
    }
    json_decref(details);
    struct list_job *j = calloc(1, sizeof *j);
    if (!j) {
        json_decref(filter);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->app = app;
    j->filter = filter;
    snprintf(j->tenant, sizeof j->tenant, "%s", eai_req_tenant(r));
    eai_park(st->parks, r, &list_ops, j);
}

/* ------------------------------------------------------------ cancel */

struct cancel_job {
    struct eai_app *app;
    char tenant[64], id[64], request_id[128];
    json_t *patch, *audit, *out;
    int rc;
    struct eai_error *err;
};

static void cancel_work(void *arg)
{
    struct cancel_job *j = arg;
    j->rc = j->app->store->exec_cancel(j->app->storage.self, j->tenant, j->id, j->patch, j->audit,
                                       &j->out, &j->err);
}

static void cancel_answer(struct eai_req *r, void *arg)
{
    struct cancel_job *j = arg;
    struct eai_exec *st = state_of(j->app);
    const char *status = jstr(j->out, "status");
    if (!r) {
        /* answered by eai_exec_stop */
    } else if (j->rc < 0) {
        reply_storage_error(r, "exec_cancel", j->err);
    } else if (!j->out) {
        audit_deny(j->app, r, "sandbox.cancel", j->id, "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
    } else if (status && strcmp(status, "running") == 0) {
        /* the local run stops now; a claim still in flight here stops it
         * right after its start; another replica sees cancel_requested at
         * its next lease renewal */
        if (st && !eai_sched_cancel_local(st->sched, j->id))
            eai_watch_cancel_pending(st->hub, j->id);
        reply_accepted(r, 202, j->id, "running");
    } else if (status && strcmp(status, "cancelled") == 0 && jstr(j->out, "cancel_request_id") &&
               strcmp(jstr(j->out, "cancel_request_id"), j->request_id) == 0) {
        /* queued -> cancelled by this very request */
        if (st)
            eai_watch_status(st->hub, j->id, j->tenant, "cancelled", j->out);
        reply_accepted(r, 202, j->id, "cancelled");
    } else {
        audit_deny(j->app, r, "sandbox.cancel", j->id, "already_finished");
        eai_reply_error(r, EAI_E_ALREADY_FINISHED, NULL);
    }
}

static void cancel_free(void *arg)
{
    struct cancel_job *j = arg;
    json_decref(j->patch);
    json_decref(j->audit);
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops cancel_ops = {
    .what = "exec_cancel", .work = cancel_work, .answer = cancel_answer, .free = cancel_free,
};

void eai_exec_route_cancel(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = state_of(app);
    if (!st) {
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    const char *id = eai_req_param(r, "id");
    if (!id_ok(id)) {
        audit_deny(app, r, "sandbox.cancel", id ? id : "", "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    struct cancel_job *j = calloc(1, sizeof *j);
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    char now[32];
    eai_time_rfc3339(eai_now_ms(), now);
    j->app = app;
    snprintf(j->tenant, sizeof j->tenant, "%s", eai_req_tenant(r));
    snprintf(j->id, sizeof j->id, "%s", id);
    snprintf(j->request_id, sizeof j->request_id, "%s", eai_req_id(r) ? eai_req_id(r) : "-");
    j->patch = json_pack("{s:s, s:n, s:n, s:n, s:s, s:s, s:s, s:s, s:b, s:b, s:{s:f, s:f, s:f}, s:s, s:s}",
                         "status", "cancelled", "exit_code", "signal", "error",
                         "stdout", "", "stderr", "", "stdout_encoding", "utf-8",
                         "stderr_encoding", "utf-8", "stdout_truncated", 0, "stderr_truncated", 0,
                         "usage", "cpu_seconds", 0.0, "memory_mb_seconds", 0.0, "duration_s", 0.0,
                         "finished_at", now, "cancel_request_id", j->request_id);
    j->audit = eai_req_audit_event(r, "sandbox.cancel", id, "allow", NULL);
    if (!j->patch) {
        cancel_free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_park(st->parks, r, &cancel_ops, j);
}

/* ------------------------------------------------------------ files */

struct file_job {
    struct eai_app *app;
    char tenant[64], id[64];
    char *path;
    unsigned char *data;
    size_t len;
    int rc;
    struct eai_error *err;
};

static void file_work(void *arg)
{
    struct file_job *j = arg;
    j->rc = j->app->store->file_get(j->app->storage.self, j->tenant, j->id, j->path, &j->data,
                                    &j->len, &j->err);
}

static void file_answer(struct eai_req *r, void *arg)
{
    struct file_job *j = arg;
    if (!r) {
        /* answered by eai_exec_stop */
    } else if (j->rc < 0) {
        reply_storage_error(r, "file_get", j->err);
    } else if (!j->data) {
        audit_deny(j->app, r, "sandbox.file", j->id, "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
    } else {
        eai_reply_raw(r, 200, "application/octet-stream", j->data, j->len);
    }
}

static void file_free(void *arg)
{
    struct file_job *j = arg;
    free(j->data);
    free(j->path);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops file_ops = {
    .what = "file_get", .work = file_work, .answer = file_answer, .free = file_free,
};

void eai_exec_route_file(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = state_of(app);
    if (!st) {
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    const char *id = eai_req_param(r, "id");
    const char *p = eai_req_param(r, "path");
    if (!id_ok(id) || !p || !*p || strlen(p) > 4096) {
        audit_deny(app, r, "sandbox.file", id ? id : "", "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    struct file_job *j = calloc(1, sizeof *j);
    size_t n = strlen(p) + 2;
    char *path = malloc(n);
    if (!j || !path) {
        free(j);
        free(path);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    snprintf(path, n, "%s%s", p[0] == '/' ? "" : "/", p);
    j->app = app;
    j->path = path;
    snprintf(j->tenant, sizeof j->tenant, "%s", eai_req_tenant(r));
    snprintf(j->id, sizeof j->id, "%s", id);
    eai_park(st->parks, r, &file_ops, j);
}

/* ------------------------------------------------------------ lifecycle */

int eai_exec_start(struct eai_app *app, struct eai_error **err)
{
    if (!app || !app->store || !app->base || !app->host) {
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "executions: storage, loop and host are needed");
        return -1;
    }
    struct eai_exec *st = calloc(1, sizeof *st);
    if (!st) {
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "out of memory");
        return -1;
    }
    st->app = app;
    st->refs = 1;
    st->parks = eai_park_set_new();
    st->hub = eai_watch_new(app);
    if (!st->parks || !st->hub) {
        eai_watch_close(st->hub);
        exec_unref(st);
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "out of memory");
        return -1;
    }
    app->exec = st;
    st->sched = eai_sched_start(app, st->hub, err);
    if (!st->sched) {
        app->exec = NULL;
        eai_watch_close(st->hub);
        exec_unref(st);
        return -1;
    }
    return 0;
}

void eai_exec_stop(struct eai_app *app)
{
    struct eai_exec *st = app ? app->exec : NULL;
    if (!st || st->stopping)
        return;
    st->stopping = 1;
    eai_sched_stop(st->sched);
    st->sched = NULL;
    /* every parked request gets its one reply now, every waiter too */
    eai_park_set_close(st->parks);
    st->parks = NULL;
    eai_watch_close(st->hub);
    st->hub = NULL;
    app->exec = NULL;
    exec_unref(st);
}

int eai_exec_running(const struct eai_app *app)
{
    return app && app->exec ? eai_sched_running(app->exec->sched) : 0;
}

void eai_exec_kick(struct eai_app *app)
{
    if (app && app->exec)
        eai_sched_kick(app->exec->sched);
}

int eai_exec_cancel_local(struct eai_app *app, const char *id)
{
    return app && app->exec ? eai_sched_cancel_local(app->exec->sched, id) : 0;
}

int eai_exec_local_output(struct eai_app *app, const char *id, enum eai_iso_stream s,
                          const char **data, size_t *len)
{
    *data = "";
    *len = 0;
    return app && app->exec ? eai_watch_local_output(app->exec->hub, id, s, data, len) : 0;
}
