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
#include "obs/trace.h"
#include "base/util.h"
#include "base/worker.h"

#define EXEC_COMPONENT "exec"
#define EXEC_POLL_MS 1000          /* waiters of executions not running here */
#define EXEC_MAX_WAIT_S 60
#define EXEC_PROBE_WAIT_MS 35000   /* a POST waits this long for a backend's first probe */

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static struct eai_exec_state *state_of(struct eai_app *app)
{
    struct eai_exec_state *st = app ? app->exec : NULL;
    return st && !st->stopping ? st : NULL;
}

/* ------------------------------------------------------------ state, work */

/* A request parked while a worker job runs.  eai_exec_stop answers every
 * one still parked (the server is stopped right after); the job's done
 * callback then finds no request and only frees. */
struct eai_pend {
    struct eai_pend *next;
    struct eai_req *r;
    struct eai_exec_state *st;
};

static void pend_add(struct eai_exec_state *st, struct eai_pend *p, struct eai_req *r)
{
    p->r = r;
    p->st = st;
    p->next = st->pending;
    st->pending = p;
}

/* The parked request (unparked), or NULL when eai_exec_stop answered it. */
static struct eai_req *pend_take(struct eai_pend *p)
{
    if (!p->r)
        return NULL;
    for (struct eai_pend **pp = &p->st->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    struct eai_req *r = p->r;
    p->r = NULL;
    p->next = NULL;
    return r;
}

void eai_exec_state_ref(struct eai_exec_state *st)
{
    st->refs++;
}

void eai_exec_state_unref(struct eai_exec_state *st)
{
    if (--st->refs > 0)
        return;
    eai_sched_free(st->sched);
    if (st->poll_ev)
        event_free(st->poll_ev);
    json_decref(st->queued);
    json_decref(st->cancel_pending);
    free(st);
}

struct submitted {
    struct eai_exec_state *st;
    void (*fn)(void *);
    void (*done)(void *);
    void *arg;
};

static void submitted_work(void *arg)
{
    struct submitted *s = arg;
    s->fn(s->arg);
}

static void submitted_done(void *arg)
{
    struct submitted *s = arg;
    struct eai_exec_state *st = s->st;
    if (s->done)
        s->done(s->arg);
    free(s);
    eai_exec_state_unref(st);
}

int eai_exec_submit(struct eai_exec_state *st, void (*fn)(void *), void (*done)(void *), void *arg)
{
    struct submitted *s = malloc(sizeof *s);
    if (!s)
        return -1;
    s->st = st;
    s->fn = fn;
    s->done = done;
    s->arg = arg;
    eai_exec_state_ref(st);
    if (eai_work_submit(submitted_work, submitted_done, s) < 0) {
        free(s);
        eai_exec_state_unref(st);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ replies */

static enum eai_code storage_code(const struct eai_error *e)
{
    if (e && e->code == EAI_E_STORAGE_UNAVAILABLE)
        return EAI_E_STORAGE_UNAVAILABLE;
    return EAI_E_INTERNAL;
}

static void reply_storage_error(struct eai_req *r, const char *what, const struct eai_error *e)
{
    eai_log_req(EXEC_COMPONENT, EAI_LOG_ERROR, eai_req_id(r), "%s: %s", what,
                e && e->message ? e->message : "storage error");
    eai_reply_error(r, storage_code(e), NULL);
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

/* ------------------------------------------------------------ views */

json_t *eai_exec_view(const json_t *rec)
{
    static const char *const copy[] = {"id", "status", "profile", "backend", "image", "command",
                                       "limits", "exit_code", "signal", "stdout", "stderr",
                                       "stdout_truncated", "stderr_truncated", "stdout_encoding",
                                       "stderr_encoding", "usage", "error", "tool", "project_id",
                                       "agent_id", "run_id", "trace_id", "created_at",
                                       "started_at", "finished_at"};
    json_t *v = json_object();
    if (!v)
        return NULL;
    for (size_t i = 0; i < sizeof copy / sizeof copy[0]; i++) {
        json_t *x = json_object_get(rec, copy[i]);
        json_object_set(v, copy[i], x ? x : json_null());
    }
    for (const char *const *k = (const char *const[]){"stdout", "stderr", NULL}; *k; k++) {
        char key[32];
        if (!json_is_string(json_object_get(v, *k)))
            json_object_set_new(v, *k, json_string(""));
        snprintf(key, sizeof key, "%s_truncated", *k);
        if (!json_is_boolean(json_object_get(v, key)))
            json_object_set_new(v, key, json_false());
        snprintf(key, sizeof key, "%s_encoding", *k);
        if (!json_is_string(json_object_get(v, key)))
            json_object_set_new(v, key, json_string("utf-8"));
    }
    json_t *files = json_array();
    size_t i;
    const json_t *f;
    json_array_foreach(json_object_get(rec, "files"), i, f)
        json_array_append_new(files, json_pack("{s:O?, s:O?, s:O?}", "path", json_object_get(f, "path"),
                                               "size", json_object_get(f, "size"),
                                               "sha256", json_object_get(f, "sha256")));
    json_object_set_new(v, "files", files);
    /* a collect cap (count, size, total) left files out */
    json_object_set_new(v, "files_truncated",
                        json_boolean(json_is_true(json_object_get(rec, "files_truncated"))));
    const json_t *eg = json_object_get(rec, "egress");
    if (json_array_size(eg) > 0)
        json_object_set_new(v, "network", json_pack("{s:O}", "egress", eg));
    return v;
}

/* ------------------------------------------------------------ queue bound */

static int64_t queued_get(struct eai_exec_state *st, const char *tenant)
{
    return json_integer_value(json_object_get(st->queued, tenant));
}

static void queued_add(struct eai_exec_state *st, const char *tenant, int64_t d)
{
    if (!tenant)
        return;
    int64_t v = queued_get(st, tenant) + d;
    if (v <= 0)
        json_object_del(st->queued, tenant);
    else
        json_object_set_new(st->queued, tenant, json_integer(v));
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
    struct eai_pend pend;
    char tenant[64];
    char id[64];
    json_t *body;
    char *idem;
    char request_id[128];
    char trace_id[33], span_id[17], traceparent[56];
    json_t *audit;                 /* sandbox.execute allow */
    struct probe_snap probes[8];
    int nprobes;
    /* results */
    int rc;                        /* eai_store_result or -1 */
    struct eai_error *err;         /* refusal or storage error */
    int refused;                   /* err is a refusal (4xx/503), not storage */
    json_t *existing;
    const struct eai_profile *prof;
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
    free(j);
}

static void reply_accepted(struct eai_req *r, int status, const char *id, const char *exec_status)
{
    char loc[160];
    snprintf(loc, sizeof loc, "Location: /v1/sandbox/executions/%s", id);
    const char *headers[] = {loc, NULL};
    eai_reply_json_headers(r, status, json_pack("{s:s, s:s}", "id", id, "status", exec_status), headers);
}

static void create_done(void *arg)
{
    struct create_job *j = arg;
    struct eai_exec_state *st = j->pend.st;
    struct eai_req *r = pend_take(&j->pend);
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
        if (!st->stopping) {
            queued_add(st, j->tenant, 1);
            eai_sched_kick(st);
        }
        eai_log_req(EXEC_COMPONENT, EAI_LOG_INFO, eai_req_id(r), "execution %s queued (profile %s)",
                    j->id, j->prof ? j->prof->name : "?");
        reply_accepted(r, 202, j->id, "queued");
    }
    create_job_free(j);
}

/* Readiness of every backend, taken on the loop (probe never blocks).
 * Returns how many are still starting (their first probe runs). */
static int take_probes(struct create_job *j)
{
    struct eai_app *app = j->app;
    int starting = 0;
    j->nprobes = 0;
    for (int i = 0; i < app->nisolation && j->nprobes < 8; i++) {
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

static void create_submit(struct eai_exec_state *st, struct create_job *j)
{
    if (eai_exec_submit(st, create_work, create_done, j) < 0) {
        struct eai_req *r = pend_take(&j->pend);
        create_job_free(j);
        if (r)
            eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
    }
}

static void create_park_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct create_job *j = arg;
    struct eai_exec_state *st = j->pend.st;
    if (!j->pend.r) {
        /* answered by eai_exec_stop */
        create_job_free(j);
    } else if (take_probes(j) > 0 && eai_now_ms() < j->park_until_ms) {
        struct timeval tv = {0, 100 * 1000};
        event_add(j->park_ev, &tv);
        return; /* keeps the reference */
    } else {
        create_submit(st, j);
    }
    eai_exec_state_unref(st);
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
    struct eai_exec_state *st = state_of(app);
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
    if (queued_get(st, tenant) >= maxq) {
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
    pend_add(st, &j->pend, r);
    if (take_probes(j) > 0) {
        /* a backend is still probing (first start-up): decide once it has */
        j->park_until_ms = eai_now_ms() + EXEC_PROBE_WAIT_MS;
        j->park_ev = evtimer_new(app->base, create_park_cb, j);
        if (j->park_ev) {
            eai_exec_state_ref(st);
            struct timeval tv = {0, 100 * 1000};
            event_add(j->park_ev, &tv);
            return;
        }
    }
    create_submit(st, j);
}

/* ------------------------------------------------------------ reads */

struct read_job {
    struct eai_app *app;
    char tenant[64], id[160];
    json_t *out;
    int rc;
    struct eai_error *err;
    void (*then)(struct read_job *j);
    void *ctx;                      /* request or waiter */
};

static void read_work(void *arg)
{
    struct read_job *j = arg;
    j->rc = j->app->store->exec_get(j->app->storage.self, j->tenant, j->id, &j->out, &j->err);
}

static void read_done(void *arg)
{
    struct read_job *j = arg;
    j->then(j);
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static int read_submit(struct eai_exec_state *st, const char *tenant, const char *id,
                       void (*then)(struct read_job *), void *ctx)
{
    struct read_job *j = calloc(1, sizeof *j);
    if (!j)
        return -1;
    j->app = st->app;
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
    snprintf(j->id, sizeof j->id, "%s", id);
    j->then = then;
    j->ctx = ctx;
    if (eai_exec_submit(st, read_work, read_done, j) < 0) {
        free(j);
        return -1;
    }
    return 0;
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

/* ------------------------------------------------------------ waiters */

enum waiter_kind { W_POLL = 1, W_SSE = 2 };

struct eai_waiter {
    struct eai_waiter *next;
    struct eai_exec_state *st;
    struct eai_req *r;              /* NULL once answered */
    enum waiter_kind kind;
    char id[64], tenant[64];
    int64_t deadline_ms;
    struct event *timer;
    int reading;                    /* a storage read is in flight */
    int attached;                   /* SSE: receives the local run's output live */
    char status[16];                /* SSE: last status sent */
};

static void waiter_unlink(struct eai_exec_state *st, struct eai_waiter *w)
{
    for (struct eai_waiter **pp = &st->waiters; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            w->next = NULL;
            return;
        }
}

/* Free w when it is answered and no read refers to it. */
static void waiter_maybe_free(struct eai_waiter *w)
{
    if (w->r || w->reading)
        return;
    if (w->timer)
        event_free(w->timer);
    eai_exec_state_unref(w->st);
    free(w);
}

static void waiter_answered(struct eai_waiter *w)
{
    w->r = NULL;
    if (w->timer)
        event_del(w->timer);
    waiter_unlink(w->st, w);
    waiter_maybe_free(w);
}

static void sse_event(struct eai_req *r, const char *event, json_t *data /* stolen */)
{
    char *d = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    if (!d)
        return;
    size_t n = strlen(event) + strlen(d) + 32;
    char *msg = malloc(n);
    if (msg) {
        int len = snprintf(msg, n, "event: %s\ndata: %s\n\n", event, d);
        eai_stream_send(r, msg, (size_t)len);
        free(msg);
    }
    free(d);
}

static void sse_chunk(struct eai_req *r, enum eai_iso_stream s, const char *data, size_t len)
{
    json_t *o;
    if (eai_utf8_valid(data, len)) {
        o = json_pack("{s:s%}", "data", data, len);
    } else {
        char *b = eai_b64_encode(data, len);
        o = b ? json_pack("{s:s, s:s}", "data", b, "encoding", "base64") : NULL;
        free(b);
    }
    sse_event(r, s == EAI_STREAM_STDERR ? "stderr" : "stdout", o);
}

static json_t *status_data(const json_t *rec)
{
    json_t *o = json_pack("{s:s}", "status", jstr(rec, "status") ? jstr(rec, "status") : "queued");
    if (o && eai_exec_status_terminal(jstr(rec, "status"))) {
        json_object_set(o, "exit_code", json_object_get(rec, "exit_code") ? json_object_get(rec, "exit_code") : json_null());
        json_object_set(o, "signal", json_object_get(rec, "signal") ? json_object_get(rec, "signal") : json_null());
        json_object_set(o, "error", json_object_get(rec, "error") ? json_object_get(rec, "error") : json_null());
    }
    return o;
}

/* Stored output of a terminal record, then its status; ends the stream. */
static void sse_replay_end(struct eai_req *r, const json_t *rec, int with_output)
{
    for (int k = 0; with_output && k < 2; k++) {
        const char *key = k ? "stderr" : "stdout";
        const char *s = jstr(rec, key);
        char ek[32];
        snprintf(ek, sizeof ek, "%s_encoding", key);
        if (!s || !*s)
            continue;
        json_t *o = json_pack("{s:s}", "data", s);
        if (o && jstr(rec, ek) && strcmp(jstr(rec, ek), "base64") == 0)
            json_object_set_new(o, "encoding", json_string("base64"));
        sse_event(r, key, o);
    }
    sse_event(r, "status", status_data(rec));
    eai_stream_end(r);
}

static void waiter_reread(struct eai_waiter *w);

static void waiter_read_then(struct read_job *j)
{
    struct eai_waiter *w = j->ctx;
    w->reading = 0;
    if (!w->r) {
        waiter_maybe_free(w);
        return;
    }
    struct eai_req *r = w->r;
    const char *status = jstr(j->out, "status");
    int terminal = eai_exec_status_terminal(status);
    if (w->kind == W_POLL) {
        if (j->rc < 0) {
            reply_storage_error(r, "exec_get", j->err);
            waiter_answered(w);
        } else if (!j->out) {
            eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
            waiter_answered(w);
        } else if (terminal || eai_now_ms() >= w->deadline_ms || w->st->stopping) {
            eai_reply_json(r, 200, eai_exec_view(j->out));
            waiter_answered(w);
        }
        return;
    }
    /* SSE */
    if (j->rc < 0 || !j->out) {
        eai_stream_end(r);
        waiter_answered(w);
        return;
    }
    if (terminal) {
        sse_replay_end(r, j->out, !w->attached);
        waiter_answered(w);
        return;
    }
    if (status && strcmp(status, w->status) != 0) {
        snprintf(w->status, sizeof w->status, "%s", status);
        sse_event(r, "status", status_data(j->out));
    }
}

static void waiter_reread(struct eai_waiter *w)
{
    if (w->reading || !w->r)
        return;
    w->reading = 1;
    if (read_submit(w->st, w->tenant, w->id, waiter_read_then, w) < 0)
        w->reading = 0; /* retried by the poll timer */
}

static void waiter_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_waiter *w = arg;
    w->deadline_ms = 0;
    waiter_reread(w);
}

static void waiter_gone_cb(void *arg)
{
    struct eai_waiter *w = arg;
    struct eai_req *r = w->r;
    if (!r)
        return;
    /* the reply only frees the request now */
    if (w->kind == W_SSE)
        eai_stream_end(r);
    else
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
    waiter_answered(w);
}

static void poll_arm(struct eai_exec_state *st)
{
    if (!event_pending(st->poll_ev, EV_TIMEOUT, NULL)) {
        struct timeval tv = {EXEC_POLL_MS / 1000, (EXEC_POLL_MS % 1000) * 1000};
        event_add(st->poll_ev, &tv);
    }
}

static struct eai_waiter *waiter_add(struct eai_exec_state *st, struct eai_req *r, enum waiter_kind kind,
                                     const json_t *rec, int wait_s)
{
    struct eai_waiter *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->st = st;
    w->r = r;
    w->kind = kind;
    snprintf(w->id, sizeof w->id, "%s", jstr(rec, "id"));
    snprintf(w->tenant, sizeof w->tenant, "%s", jstr(rec, "tenant_id") ? jstr(rec, "tenant_id")
                                                                        : eai_req_tenant(r));
    snprintf(w->status, sizeof w->status, "%s", jstr(rec, "status") ? jstr(rec, "status") : "");
    if (kind == W_POLL) {
        w->deadline_ms = eai_now_ms() + (int64_t)wait_s * 1000;
        w->timer = evtimer_new(st->app->base, waiter_deadline_cb, w);
        if (!w->timer) {
            free(w);
            return NULL;
        }
        struct timeval tv = {wait_s, 0};
        event_add(w->timer, &tv);
    }
    eai_exec_state_ref(st);
    w->next = st->waiters;
    st->waiters = w;
    eai_req_on_gone(r, waiter_gone_cb, w);
    poll_arm(st);
    /* ours, running when read, no longer here: it ended meanwhile */
    const char *owner = jstr(rec, "lease_owner");
    const char *node = st->app->host ? st->app->host->node_id : NULL;
    if (owner && node && strcmp(owner, node) == 0 && !eai_sched_find(st, w->id))
        waiter_reread(w);
    return w;
}

int eai_exec_take_cancel(struct eai_exec_state *st, const char *id)
{
    if (!st || !id || !json_object_get(st->cancel_pending, id))
        return 0;
    json_object_del(st->cancel_pending, id);
    return 1;
}

/* Waiters of executions not running here learn of changes by polling. */
static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_exec_state *st = arg;
    if (st->stopping)
        return;
    const char *k;
    json_t *v, *tmp;
    int64_t now = eai_now_ms();
    json_object_foreach_safe(st->cancel_pending, tmp, k, v)
        if (now - json_integer_value(v) > 60000)
            json_object_del(st->cancel_pending, k);
    if (!st->waiters && json_object_size(st->cancel_pending) == 0)
        return;
    for (struct eai_waiter *w = st->waiters; w; w = w->next)
        if (!eai_sched_find(st, w->id) && !w->attached)
            waiter_reread(w);
    struct timeval tv = {EXEC_POLL_MS / 1000, (EXEC_POLL_MS % 1000) * 1000};
    event_add(st->poll_ev, &tv);
}

void eai_exec_notify_output(struct eai_exec_state *st, const char *id, enum eai_iso_stream s,
                            const char *data, size_t len)
{
    for (struct eai_waiter *w = st->waiters; w; w = w->next)
        if (w->kind == W_SSE && w->r && strcmp(w->id, id) == 0) {
            w->attached = 1;
            sse_chunk(w->r, s, data, len);
        }
}

void eai_exec_notify_status(struct eai_exec_state *st, const char *id, const char *tenant,
                            const char *status)
{
    if (!id || !status)
        return;
    if (strcmp(status, "running") == 0)
        queued_add(st, tenant, -1);
    int terminal = eai_exec_status_terminal(status);
    for (struct eai_waiter *w = st->waiters, *next; w; w = next) {
        next = w->next;
        if (!w->r || strcmp(w->id, id) != 0)
            continue;
        if (terminal) {
            waiter_reread(w);
        } else if (w->kind == W_SSE && strcmp(w->status, status) != 0) {
            /* a local run starts: its output will come live */
            w->attached = 1;
            snprintf(w->status, sizeof w->status, "%s", status);
            sse_event(w->r, "status", json_pack("{s:s}", "status", status));
        }
    }
}

/* ------------------------------------------------------------ GET */

struct get_ctx {
    struct eai_app *app;
    struct eai_pend pend;
    int wait_s;
};

static void get_then(struct read_job *j)
{
    struct get_ctx *c = j->ctx;
    struct eai_req *r = pend_take(&c->pend);
    struct eai_exec_state *st = state_of(c->app);
    if (!r) {
        /* answered by eai_exec_stop */
    } else if (j->rc < 0) {
        reply_storage_error(r, "exec_get", j->err);
    } else if (!j->out) {
        audit_deny(c->app, r, "sandbox.read", j->id, "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
    } else if (c->wait_s == 0 || eai_exec_status_terminal(jstr(j->out, "status")) || !st) {
        eai_reply_json(r, 200, eai_exec_view(j->out));
    } else if (!waiter_add(st, r, W_POLL, j->out, c->wait_s)) {
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
    struct eai_exec_state *st = state_of(app);
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
    pend_add(st, &c->pend, r);
    if (read_submit(st, eai_req_tenant(r), id, get_then, c) < 0) {
        pend_take(&c->pend);
        free(c);
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
    }
}

/* ------------------------------------------------------------ events (SSE) */

static void events_then(struct read_job *j)
{
    struct get_ctx *c = j->ctx;
    struct eai_req *r = pend_take(&c->pend);
    struct eai_exec_state *st = state_of(c->app);
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
        sse_replay_end(r, j->out, 1);
        return;
    }
    sse_event(r, "status", status_data(j->out));
    struct eai_waiter *w = waiter_add(st, r, W_SSE, j->out, 0);
    if (!w) {
        eai_stream_end(r);
        return;
    }
    const struct eai_run *run = eai_sched_find(st, w->id);
    if (run) {
        /* output so far, then live chunks */
        w->attached = 1;
        for (int k = 0; k < 2; k++) {
            enum eai_iso_stream s = k ? EAI_STREAM_STDERR : EAI_STREAM_STDOUT;
            const char *d;
            size_t n;
            eai_sched_run_output(run, s, &d, &n);
            if (n)
                sse_chunk(r, s, d, n);
        }
    }
}

void eai_exec_route_events(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec_state *st = state_of(app);
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
    pend_add(st, &c->pend, r);
    if (read_submit(st, eai_req_tenant(r), id, events_then, c) < 0) {
        pend_take(&c->pend);
        free(c);
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
    }
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
    struct eai_pend pend;
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

static void list_done(void *arg)
{
    struct list_job *j = arg;
    struct eai_req *r = pend_take(&j->pend);
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
    json_decref(j->filter);
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static const char *const all_statuses[] = {"queued", "running", "succeeded", "failed", "timeout",
                                           "oom_killed", "cancelled", "error", NULL};

void eai_exec_route_list(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec_state *st = state_of(app);
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
    pend_add(st, &j->pend, r);
    if (eai_exec_submit(st, list_work, list_done, j) < 0) {
        pend_take(&j->pend);
        json_decref(filter);
        free(j);
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
    }
}

/* ------------------------------------------------------------ cancel */

struct cancel_job {
    struct eai_app *app;
    struct eai_pend pend;
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

static void cancel_done(void *arg)
{
    struct cancel_job *j = arg;
    struct eai_req *r = pend_take(&j->pend);
    struct eai_exec_state *st = state_of(j->app);
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
        if (st && !eai_sched_cancel_local(st, j->id)) {
            json_object_set_new(st->cancel_pending, j->id, json_integer(eai_now_ms()));
            poll_arm(st);
        }
        reply_accepted(r, 202, j->id, "running");
    } else if (status && strcmp(status, "cancelled") == 0 && j->rc == EAI_STORE_UPDATED) {
        /* queued -> cancelled by this very call (storage says so; a
         * replayed X-Request-Id must not count twice: issue 16, item 5) */
        if (st) {
            queued_add(st, j->tenant, -1);
            eai_exec_notify_status(st, j->id, j->tenant, "cancelled");
        }
        reply_accepted(r, 202, j->id, "cancelled");
    } else {
        audit_deny(j->app, r, "sandbox.cancel", j->id, "already_finished");
        eai_reply_error(r, EAI_E_ALREADY_FINISHED, NULL);
    }
    json_decref(j->patch);
    json_decref(j->audit);
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

void eai_exec_route_cancel(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec_state *st = state_of(app);
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
    pend_add(st, &j->pend, r);
    if (!j->patch || eai_exec_submit(st, cancel_work, cancel_done, j) < 0) {
        pend_take(&j->pend);
        json_decref(j->patch);
        json_decref(j->audit);
        free(j);
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
    }
}

/* ------------------------------------------------------------ files */

struct file_job {
    struct eai_app *app;
    struct eai_pend pend;
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

static void file_done(void *arg)
{
    struct file_job *j = arg;
    struct eai_req *r = pend_take(&j->pend);
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
    free(j->data);
    free(j->path);
    eai_error_free(j->err);
    free(j);
}

void eai_exec_route_file(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec_state *st = state_of(app);
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
    pend_add(st, &j->pend, r);
    if (eai_exec_submit(st, file_work, file_done, j) < 0) {
        pend_take(&j->pend);
        free(path);
        free(j);
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
    }
}

/* ------------------------------------------------------------ lifecycle */

int eai_exec_start(struct eai_app *app, struct eai_error **err)
{
    if (!app || !app->store || !app->base || !app->host) {
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "executions: storage, loop and host are needed");
        return -1;
    }
    struct eai_exec_state *st = calloc(1, sizeof *st);
    if (!st || !(st->queued = json_object()) || !(st->cancel_pending = json_object())) {
        if (st)
            json_decref(st->queued);
        free(st);
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "out of memory");
        return -1;
    }
    st->app = app;
    st->refs = 1;
    st->poll_ev = evtimer_new(app->base, poll_cb, st);
    if (!st->poll_ev) {
        eai_exec_state_unref(st);
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "cannot create the poll timer");
        return -1;
    }
    app->exec = st;
    if (eai_sched_start(app, st, err) < 0) {
        app->exec = NULL;
        eai_exec_state_unref(st);
        return -1;
    }
    return 0;
}

void eai_exec_stop(struct eai_app *app)
{
    struct eai_exec_state *st = app ? app->exec : NULL;
    if (!st || st->stopping)
        return;
    st->stopping = 1;
    event_del(st->poll_ev);
    eai_sched_stop(st);
    /* every parked request gets its one reply now */
    while (st->pending) {
        struct eai_req *r = pend_take(st->pending);
        if (r)
            eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
    }
    while (st->waiters) {
        struct eai_waiter *w = st->waiters;
        if (w->r) {
            if (w->kind == W_SSE)
                eai_stream_end(w->r);
            else
                eai_reply_error(w->r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        }
        waiter_answered(w);
    }
    app->exec = NULL;
    eai_exec_state_unref(st);
}

int eai_exec_running(const struct eai_app *app)
{
    return app ? eai_sched_running(app->exec) : 0;
}
