/* Reading executions: GET (long-poll), events (SSE), list, files
 * (exec_int.h). */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "exec/exec_int.h"
#include "exec/cursor.h"
#include "net/egress_host.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/scheduler.h"
#include "exec/watch.h"
#include "exec/sse.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "obs/callback.h"

/* ------------------------------------------------------------ reads */

struct read_job {
    struct eai_app *app;
    char tenant[64], id[160];
    json_t *out;
    int rc;
    struct eai_error *err;
    void (*then)(struct read_job *j);
    void *ctx;                      /* the route's context (then() frees it) */
    struct eai_req *r;              /* the parked request; NULL once answered */
};

/* The delivery state of a record's completion callback (kv written by
 * core/obs/callback_send.c) as rec.callback_state, for eai_exec_view.
 * Worker thread. */
static void attach_callback_state(struct eai_app *app, json_t *rec)
{
    const char *id = eai_jstr(rec, "id");
    if (!id || !json_object_get(rec, "callback") || !app->store->kv_get)
        return;
    char key[200], *val = NULL;
    struct eai_error *e = NULL;
    snprintf(key, sizeof key, "%s%s", EAI_CALLBACK_KV_PREFIX, id);
    if (app->store->kv_get(app->storage.self, key, &val, &e) < 0) {
        eai_error_free(e);
        return;
    }
    if (val)
        json_object_set_new(rec, "callback_state", json_string(val));
    free(val);
}

static void read_work(void *arg)
{
    struct read_job *j = arg;
    j->rc = eai_watch_read(j->app, j->tenant, j->id, &j->out, &j->err);
    if (j->rc >= 0 && j->out)
        attach_callback_state(j->app, j->out);
}

/* The answers every read shares, a storage error and an id the tenant does
 * not have (audited), are given here; then(j) answers the rest with j->out
 * set.  then() is always called, with j->r NULL when the request has been
 * answered already (here, or by eai_exec_stop), to free its context. */
static void read_answer(struct eai_req *r, void *arg)
{
    struct read_job *j = arg;
    if (r && j->rc < 0) {
        exec_reply_storage_error(r, "exec_get", j->err);
        r = NULL;
    } else if (r && !j->out) {
        exec_audit_deny(j->app, r, "sandbox.read", j->id, "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        r = NULL;
    }
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
static int exec_read_submit(struct eai_exec *st, struct eai_req *r, const char *tenant, const char *id,
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


/* ------------------------------------------------------------ GET */

/* 200 with the view of a terminal record, serialised once and kept
 * (exec/doc_cache.h: a terminal record is never written again). */
/* 1 when a terminal record's GET body can change no more: no completion
 * callback, or one whose delivery ended (delivered or given up); its
 * attempts are part of the view and written after the end (kv). */
static int view_final(const json_t *rec)
{
    if (!json_object_get(rec, "callback"))
        return 1;
    const char *s = eai_jstr(rec, "callback_state");
    json_t *cs = s ? json_loads(s, 0, NULL) : NULL;
    int fin = cs && (json_is_string(json_object_get(cs, "delivered_at")) || json_is_true(json_object_get(cs, "gave_up")));
    json_decref(cs);
    return fin;
}

static void reply_terminal(struct eai_exec *st, struct eai_req *r, const char *tenant, const json_t *rec)
{
    json_t *v = eai_exec_view(rec);
    char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!text) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (withnl) {
        text = withnl;
        text[n++] = '\n';
        text[n] = '\0';
    }
    if (st && view_final(rec))
        eai_doc_cache_put(st->docs, tenant, eai_jstr(rec, "id"), text, n);
    eai_reply_raw(r, 200, "application/json", text, n);
    free(text);
}

struct get_ctx {
    struct eai_app *app;
    int wait_s;
};

/* 429 rate_limited (envelope, Retry-After): the tenant holds as many
 * long-polls or event streams here as its limit allows (issue 16.3). */
static void exec_reply_too_many_watches(struct eai_req *r, const char *what, const char *key)
{
    char msg[160];
    snprintf(msg, sizeof msg, "too many open %s for this tenant (%s)", what, key);
    eai_reply_error(r, EAI_E_RATE_LIMITED, exec_detail1("", msg));
}

static void get_then(struct read_job *j)
{
    struct get_ctx *c = j->ctx;
    struct eai_req *r = j->r;
    struct eai_exec *st = exec_state_of(c->app);
    if (!r) {
        /* answered already (read_answer, eai_exec_stop) */
    } else if (eai_exec_status_terminal(eai_jstr(j->out, "status"))) {
        reply_terminal(st, r, j->tenant, j->out);
    } else if (c->wait_s > 0 && st && !eai_watch_room(st->hub, eai_req_tenant(r), 0)) {
        exec_reply_too_many_watches(r, "long-polls", "limits.max_polls_per_tenant");
    } else if (c->wait_s == 0 || !st || eai_watch_poll(st->hub, r, j->out, c->wait_s) < 0) {
        /* running here: with its output so far */
        eai_reply_json(r, 200, eai_watch_view(st ? st->hub : NULL, j->out));
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
    struct eai_exec *st = exec_route_state(app, r);
    if (!st)
        return;
    int wait_s = parse_wait(eai_req_query(r, "wait_s"));
    if (wait_s < 0) {
        eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                        exec_detail1("/query/wait_s", "must be an integer from 0 to 60"));
        return;
    }
    const char *id = exec_route_id(app, r, "sandbox.read");
    if (!id)
        return;
    size_t len;
    void *hold = NULL;
    const char *doc = eai_doc_cache_hold(st->docs, eai_req_tenant(r), id, &len, &hold);
    if (doc) { /* finished: answered on the loop, the cached bytes referenced (no copy) */
        eai_reply_ref(r, 200, "application/json", doc, len, eai_doc_cache_release, hold);
        return;
    }
    struct get_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    c->app = app;
    c->wait_s = wait_s;
    if (exec_read_submit(st, r, eai_req_tenant(r), id, get_then, c) < 0)
        free(c);
}

/* ------------------------------------------------------------ network log */

static void network_then(struct read_job *j)
{
    struct eai_req *r = j->r;
    if (!r)
        return;
    /* the grant's log is stored with the record when the execution ends
     * (docs/egress.md "The network log"); while it runs on this node, the
     * live one; null without egress */
    json_t *live = json_object_get(j->out, "network") ? NULL : eai_egress_live_log(j->app->egress, j->id);
    const json_t *log = live ? live : json_object_get(j->out, "network");
    const json_t *eg = json_object_get(j->out, "egress");
    json_t *body = json_pack("{s:s, s:s?, s:O, s:O, s:o}", "execution_id", j->id,
                             "status", eai_jstr(j->out, "status"),
                             "egress", eg ? (json_t *)eg : json_array(),
                             "log", log ? (json_t *)log : json_null(),
                             "summary", log ? eai_egress_log_summary(log) : json_null());
    json_decref(live);
    if (!body) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_reply_json(r, 200, body);
}

void eai_exec_route_network(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = exec_route_state(app, r);
    if (!st)
        return;
    const char *id = exec_route_id(app, r, "sandbox.read");
    if (!id)
        return;
    exec_read_submit(st, r, eai_req_tenant(r), id, network_then, NULL);
}

/* ------------------------------------------------------------ events (SSE) */

static void events_then(struct read_job *j)
{
    struct get_ctx *c = j->ctx;
    struct eai_req *r = j->r;
    struct eai_exec *st = exec_state_of(c->app);
    free(c);
    if (!r)
        return;
    int64_t last = eai_sse_last_id(r);
    if (st && !eai_exec_status_terminal(eai_jstr(j->out, "status")) &&
        !eai_watch_room(st->hub, eai_req_tenant(r), 1)) {
        exec_reply_too_many_watches(r, "event streams", "limits.max_streams_per_tenant");
        return;
    }
    if (eai_exec_status_terminal(eai_jstr(j->out, "status")) || !st) {
        if (last >= eai_sse_status_id(j->out)) {
            /* the client has every event: 204 tells an EventSource to stop reconnecting */
            eai_reply_raw(r, 204, "text/event-stream", "", 0);
            return;
        }
        eai_stream_start(r, "text/event-stream");
        eai_sse_replay_end(r, j->out, last);
        return;
    }
    eai_stream_start(r, "text/event-stream");
    if (eai_watch_stream(st->hub, r, j->out, last) < 0) {
        eai_sse_event(r, "status", eai_sse_status_id(j->out), eai_sse_status_data(j->out));
        eai_stream_end(r);
    }
}

void eai_exec_route_events(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = exec_route_state(app, r);
    if (!st)
        return;
    const char *id = exec_route_id(app, r, "sandbox.read");
    if (!id)
        return;
    struct get_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    c->app = app;
    if (exec_read_submit(st, r, eai_req_tenant(r), id, events_then, c) < 0)
        free(c);
}

/* ------------------------------------------------------------ list */

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
    size_t i;
    json_t *e;
    json_array_foreach(j->rc >= 0 ? j->out : NULL, i, e)
        attach_callback_state(j->app, e);
}

static void list_answer(struct eai_req *r, void *arg)
{
    struct list_job *j = arg;
    if (!r) {
        /* answered by eai_exec_stop */
    } else if (j->rc < 0) {
        exec_reply_storage_error(r, "exec_list", j->err);
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
            char cur[EAI_CURSOR_LEN + 1];
            if (eai_cursor_encode(j->app->pepper, j->tenant, last, cur) == 0)
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
    struct eai_exec *st = exec_route_state(app, r);
    if (!st)
        return;
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
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/query/status",
                                                     "message", "is not a status value"));
    }
    const char *run_id = eai_req_query(r, "run_id");
    if (run_id && *run_id) {
        if (strlen(run_id) > 128)
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/query/run_id",
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
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/query/limit",
                                                     "message", "must be an integer from 1 to 100"));
    }
    json_object_set_new(filter, "limit", json_integer(limit));
    const char *after = eai_req_query(r, "after");
    if (after && *after) {
        int64_t seq;
        if (eai_cursor_decode(app->pepper, eai_req_tenant(r), after, &seq) < 0)
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/query/after",
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
        exec_reply_storage_error(r, "file_get", j->err);
    } else if (!j->data) {
        exec_audit_deny(j->app, r, "sandbox.file", j->id, "not_found");
        eai_reply_not_found(r, EAI_MISSING_FILE);
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
    struct eai_exec *st = exec_route_state(app, r);
    if (!st)
        return;
    const char *id = eai_req_param(r, "id");
    const char *p = eai_req_param(r, "path");
    if (!exec_id_ok(id) || !p || !*p || strlen(p) > 4096) {
        exec_audit_deny(app, r, "sandbox.file", id ? id : "", "not_found");
        eai_reply_not_found(r, EAI_MISSING_FILE);
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

