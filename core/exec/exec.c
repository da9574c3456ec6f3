/* Execution routes: state, shared replies, cancel, start and stop
 * (exec.h, exec_int.h, docs/executions.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "exec/exec_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/scheduler.h"
#include "exec/watch.h"
#include "http/http_util.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "obs/metrics.h"

struct eai_exec *exec_state_of(struct eai_app *app)
{
    struct eai_exec *st = app ? app->exec : NULL;
    return st && !st->stopping ? st : NULL;
}

/* ------------------------------------------------------------ state, work */

void exec_ref(struct eai_exec *st)
{
    st->refs++;
}

void exec_unref(struct eai_exec *st)
{
    if (--st->refs > 0)
        return;
    eai_park_set_close(st->parks);
    eai_doc_cache_free(st->docs);
    free(st);
}

/* ------------------------------------------------------------ replies */

void exec_reply_storage_error(struct eai_req *r, const char *what, const struct eai_error *e)
{
    eai_park_reply_storage(r, what, e);
}

json_t *exec_detail1(const char *path, const char *msg)
{
    return json_pack("[{s:s, s:s}]", "path", path, "message", msg);
}

/* The error envelope with extra headers (429 Retry-After). */
void exec_reply_error_headers(struct eai_req *r, enum eai_code code, json_t *details,
                                const char *const *headers)
{
    /* the envelope of every error (details localised) */
    json_t *env = eai_http_error_envelope(code, eai_req_lang(r), eai_req_id(r), details);
    if (!env) {
        eai_reply_error(r, code, NULL);
        return;
    }
    eai_reply_json_headers(r, eai_code_http_status(code), env, headers);
}

void exec_audit_deny(struct eai_app *app, struct eai_req *r, const char *action,
                       const char *target, const char *reason)
{
    if (reason && strcmp(action, "sandbox.execute") == 0 && strlen(reason) < 64) {
        /* refusals of POST /v1/sandbox/executions by error code (dashboards) */
        char l[96];
        snprintf(l, sizeof l, "code=\"%s\"", reason);
        eai_metrics_add("eai_sandbox_refusals_total", l, 1);
    }
    const char *tenant = eai_req_tenant(r);
    if (!tenant)
        return;
    json_t *ev = eai_req_audit_event(r, action, target ? target : "", "deny", reason);
    if (ev)
        eai_req_audit_async(app, tenant, ev);
}

void exec_reply_accepted(struct eai_req *r, int status, const char *id, const char *exec_status)
{
    char loc[160];
    snprintf(loc, sizeof loc, "Location: /v1/sandbox/executions/%s", id);
    const char *headers[] = {loc, NULL};
    eai_reply_json_headers(r, status, json_pack("{s:s, s:s}", "id", id, "status", exec_status), headers);
}

/* An execution id as we issue them: "sbx_" + uuid. */
int exec_id_ok(const char *id)
{
    /* hex digits (either case, as isxdigit) and '-' */
    static const unsigned char ok[256] = {
        ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1,
        ['9'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['A'] = 1, ['B'] = 1,
        ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['-'] = 1,
    };
    if (!id || strncmp(id, "sbx_", 4) != 0 || strlen(id) != 40)
        return 0;
    for (const char *p = id + 4; *p; p++)
        if (!ok[(unsigned char)*p])
            return 0;
    return 1;
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
    struct eai_exec *st = exec_state_of(j->app);
    const char *status = eai_jstr(j->out, "status");
    if (!r) {
        /* answered by eai_exec_stop */
    } else if (j->rc < 0) {
        exec_reply_storage_error(r, "exec_cancel", j->err);
    } else if (!j->out) {
        exec_audit_deny(j->app, r, "sandbox.cancel", j->id, "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
    } else if (status && strcmp(status, "running") == 0) {
        /* the local run stops now; a claim still in flight here stops it
         * right after its start; another replica sees cancel_requested at
         * its next lease renewal */
        if (st && !eai_sched_cancel_local(st->sched, j->id))
            eai_watch_cancel_pending(st->hub, j->id);
        exec_reply_accepted(r, 202, j->id, "running");
    } else if (status && strcmp(status, "cancelled") == 0 && j->rc == EAI_STORE_UPDATED) {
        /* queued -> cancelled by this very call (storage says so; a
         * replayed X-Request-Id must not count twice: issue 16, item 5) */
        if (st)
            eai_watch_status(st->hub, j->id, j->tenant, "cancelled", j->out);
        exec_reply_accepted(r, 202, j->id, "cancelled");
    } else {
        exec_audit_deny(j->app, r, "sandbox.cancel", j->id, "already_finished");
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
    struct eai_exec *st = exec_route_state(app, r);
    if (!st)
        return;
    const char *id = exec_route_id(app, r, "sandbox.cancel");
    if (!id)
        return;
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

/* ------------------------------------------------------------ lifecycle */

int eai_exec_start(struct eai_app *app, struct eai_error **err)
{
    if (!app || !app->store || !app->base || !app->host) {
        return eai_error_set(err, EAI_E_INTERNAL, "executions: storage, loop and host are needed");
    }
    struct eai_exec *st = calloc(1, sizeof *st);
    if (!st) {
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    }
    st->app = app;
    st->refs = 1;
    st->parks = eai_park_set_new();
    st->hub = eai_watch_new(app);
    st->docs = eai_doc_cache_new(EXEC_DOC_CACHE_BYTES);
    if (!st->parks || !st->hub || !st->docs) {
        eai_watch_close(st->hub);
        exec_unref(st);
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
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

void eai_exec_drain(struct eai_app *app)
{
    if (app && app->exec)
        eai_sched_drain(app->exec->sched);
}

int eai_exec_busy(const struct eai_app *app)
{
    return app && app->exec ? eai_sched_busy(app->exec->sched) : 0;
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

void eai_exec_forget_documents(struct eai_app *app)
{
    struct eai_exec *st = app ? app->exec : NULL;
    if (st)
        eai_doc_cache_clear(st->docs);
}

struct eai_exec *exec_route_state(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = exec_state_of(app);
    if (!st)
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
    return st;
}

const char *exec_route_id(struct eai_app *app, struct eai_req *r, const char *action)
{
    const char *id = eai_req_param(r, "id");
    if (exec_id_ok(id))
        return id;
    exec_audit_deny(app, r, action, id ? id : "", "not_found");
    eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
    return NULL;
}
