/* The watch hub: live state of executions and their subscribers (watch.h);
 * the event streams are fed by watch_stream.c (watch_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "exec/watch_int.h"
#include "app.h"
#include "base/errors.h"
#include "config/config.h"
#include "base/util.h"
#include "exec/exec_result.h"
#include "exec/outlog.h"
#include "exec/sse.h"
#include "http/park.h"

#define WATCH_POLL_MS 1000          /* subscribers of executions not running here */
#define WATCH_CANCEL_KEEP_MS 60000  /* a pending cancel is forgotten after this */

static unsigned bucket_of(const char *id)
{
    unsigned h = 5381;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = h * 33 + *p;
    return h % WATCH_BUCKETS;
}

static void hub_unref(struct eai_watch *w)
{
    if (--w->refs > 0)
        return;
    if (w->poll_ev)
        event_free(w->poll_ev);
    json_decref(w->queued);
    json_decref(w->nsubs[0]);
    json_decref(w->nsubs[1]);
    free(w);
}

static struct eai_live *find(const struct eai_watch *w, const char *id)
{
    if (!id)
        return NULL;
    for (struct eai_live *l = w->buckets[bucket_of(id)]; l; l = l->next)
        if (strcmp(l->id, id) == 0)
            return l;
    return NULL;
}

static struct eai_live *find_or_add(struct eai_watch *w, const char *id, const char *tenant)
{
    struct eai_live *l = find(w, id);
    if (l || !id || strlen(id) >= sizeof l->id)
        return l;
    l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->w = w;
    snprintf(l->id, sizeof l->id, "%s", id);
    snprintf(l->tenant, sizeof l->tenant, "%s", tenant ? tenant : "");
    unsigned b = bucket_of(id);
    l->next = w->buckets[b];
    w->buckets[b] = l;
    w->refs++;
    return l;
}

static void queued_drop(struct eai_live *l)
{
    if (!l->queued_here)
        return;
    l->queued_here = 0;
    json_t *q = l->w->queued;
    json_int_t v = json_integer_value(json_object_get(q, l->tenant)) - 1;
    if (v <= 0)
        json_object_del(q, l->tenant);
    else
        json_object_set_new(q, l->tenant, json_integer(v));
}

/* Free l when nothing holds it any more. */
static void maybe_free(struct eai_live *l)
{
    struct eai_watch *w = l->w;
    if (l->subs || l->pins || l->reading || (l->queued_here && !w->closed) ||
        (l->cancel_ms && !w->closed))
        return;
    for (struct eai_live **pp = &w->buckets[bucket_of(l->id)]; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    queued_drop(l);
    eai_outbuf_free(&l->out);
    eai_outbuf_free(&l->err);
    eai_outlog_free(&l->log);
    if (l->flush_ev)
        event_free(l->flush_ev);
    free(l);
    hub_unref(w);
}

/* ------------------------------------------------------------ subscribers */

static void nsubs_add(struct eai_watch *w, const char *tenant, int stream, int d)
{
    json_t *m = w->nsubs[stream];
    if (!m)
        return;
    json_int_t v = json_integer_value(json_object_get(m, tenant)) + d;
    if (v <= 0)
        json_object_del(m, tenant);
    else
        json_object_set_new(m, tenant, json_integer(v));
}

int eai_watch_room(const struct eai_watch *w, const char *tenant, int stream)
{
    if (!w || !tenant || !w->nsubs[stream])
        return 1;
    const struct eai_config *c = w->app->cfg;
    int cap = !c ? 0 : stream ? c->max_streams_per_tenant : c->max_polls_per_tenant;
    return cap <= 0 || json_integer_value(json_object_get(w->nsubs[stream], tenant)) < cap;
}

/* (watch_int.h) */
void watch_sub_done(struct eai_sub *s)
{
    struct eai_live *l = s->l;
    nsubs_add(l->w, s->tenant, s->kind == SUB_SSE, -1);
    if (s->pace)
        event_free(s->pace);
    json_decref(s->end_rec);
    for (struct eai_sub **pp = &l->subs; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    if (s->timer)
        event_free(s->timer);
    free(s);
    maybe_free(l);
}

/* Answer s with a record (terminal, or the deadline passed). */
static void sub_answer_rec(struct eai_sub *s, const json_t *rec)
{
    if (s->kind == SUB_SSE && s->attached && s->r && !watch_sse_feed(s)) {
        /* a slow reader: its terminal status follows the rest of the output */
        s->end_rec = json_incref((json_t *)rec);
        return;
    }
    struct eai_req *r = s->r;
    s->r = NULL;
    if (s->kind == SUB_POLL)
        eai_reply_json(r, 200, eai_watch_view(s->l->w, rec));
    else
        eai_sse_replay_end(r, rec, s->last_id);
    watch_sub_done(s);
}

static void sub_answer_error(struct eai_sub *s, enum eai_code code)
{
    struct eai_req *r = s->r;
    s->r = NULL;
    if (s->kind == SUB_SSE)
        eai_stream_end(r);
    else
        eai_reply_error(r, code, NULL);
    watch_sub_done(s);
}

static void reread(struct eai_live *l);

static void sub_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sub *s = arg;
    s->deadline_ms = 0;
    reread(s->l);
}

static void sub_gone_cb(void *arg)
{
    struct eai_sub *s = arg;
    if (s->r)
        sub_answer_error(s, EAI_E_NOT_FOUND); /* the reply only frees the request now */
}

static void poll_arm(struct eai_watch *w)
{
    if (w->poll_ev && !event_pending(w->poll_ev, EV_TIMEOUT, NULL)) {
        struct timeval tv = {WATCH_POLL_MS / 1000, (WATCH_POLL_MS % 1000) * 1000};
        event_add(w->poll_ev, &tv);
    }
}

/* (watch_int.h) */
struct eai_sub *watch_sub_add(struct eai_watch *w, struct eai_req *r, enum sub_kind kind, const json_t *rec,
                              int wait_s)
{
    if (w->closed)
        return NULL;
    const char *id = eai_jstr(rec, "id");
    const char *tenant = eai_jstr(rec, "tenant_id") ? eai_jstr(rec, "tenant_id") : eai_req_tenant(r);
    struct eai_live *l = find_or_add(w, id, tenant);
    struct eai_sub *s = l ? calloc(1, sizeof *s) : NULL;
    if (!s) {
        if (l)
            maybe_free(l);
        return NULL;
    }
    s->l = l;
    s->r = r;
    s->kind = kind;
    s->last_id = -1;
    s->ping_ms = eai_now_ms() + EAI_SSE_PING_MS;
    if (kind == SUB_POLL) {
        s->deadline_ms = eai_now_ms() + (int64_t)wait_s * 1000;
        s->timer = evtimer_new(w->app->base, sub_deadline_cb, s);
        if (!s->timer) {
            free(s);
            maybe_free(l);
            return NULL;
        }
        struct timeval tv = {wait_s, 0};
        event_add(s->timer, &tv);
    }
    if (!l->status[0] && eai_jstr(rec, "status"))
        snprintf(l->status, sizeof l->status, "%s", eai_jstr(rec, "status"));
    s->next = l->subs;
    l->subs = s;
    snprintf(s->tenant, sizeof s->tenant, "%s", eai_req_tenant(r) ? eai_req_tenant(r) : l->tenant);
    nsubs_add(w, s->tenant, kind == SUB_SSE, 1);
    eai_req_on_gone(r, sub_gone_cb, s);
    poll_arm(w);
    /* ours, running when read, no longer here: it ended meanwhile */
    const char *owner = eai_jstr(rec, "lease_owner");
    const char *node = w->app->host ? w->app->host->node_id : NULL;
    if (owner && node && strcmp(owner, node) == 0 && !l->local)
        reread(l);
    return s;
}

int eai_watch_poll(struct eai_watch *w, struct eai_req *r, const json_t *rec, int wait_s)
{
    return w && watch_sub_add(w, r, SUB_POLL, rec, wait_s) ? 0 : -1;
}

/* ------------------------------------------------------------ re-reads */

struct reread_job {
    struct eai_live *l;
    struct eai_app *app;
    char tenant[64], id[64];
    json_t *out;
    int rc;
    struct eai_error *err;
};

int eai_watch_read(struct eai_app *app, const char *tenant, const char *id, json_t **out, struct eai_error **err)
{
    const struct eai_storage_ops *st = app->store;
    json_t *filter = json_pack("{s:s, s:i}", "id", id, "limit", 1);
    json_t *list = NULL;
    *out = NULL;
    int rc = filter ? st->exec_list(app->storage.self, tenant, filter, &list, err) : -1;
    json_decref(filter);
    if (rc >= 0) {
        json_t *one = json_array_get(list, 0);
        if (one && !eai_exec_status_terminal(eai_jstr(one, "status")))
            *out = json_incref(one);
        else if (one) /* terminal: the record with its output (its inputs are scrubbed by then) */
            rc = st->exec_get(app->storage.self, tenant, id, out, err);
    }
    json_decref(list);
    return rc;
}

static void reread_work(void *arg)
{
    struct reread_job *j = arg;
    j->rc = eai_watch_read(j->app, j->tenant, j->id, &j->out, &j->err);
}

/* A record read from storage (or the error) reaches every subscriber. */
static void reread_answer(struct eai_req *unused, void *arg)
{
    (void)unused;
    struct reread_job *j = arg;
    struct eai_live *l = j->l; /* l->reading holds it until reread_free */
    const char *status = eai_jstr(j->out, "status");
    int terminal = eai_exec_status_terminal(status);
    int changed = status && strcmp(status, l->status) != 0;
    if (status)
        snprintf(l->status, sizeof l->status, "%s", status);
    int64_t now = eai_now_ms();
    for (struct eai_sub *s = l->subs, *next; s; s = next) {
        next = s->next;
        if (!s->r || s->end_rec)
            continue;
        if (s->kind == SUB_POLL) {
            if (j->rc < 0) {
                eai_park_reply_storage(s->r, "exec_get", j->err);
                s->r = NULL;
                watch_sub_done(s);
            } else if (!j->out) {
                sub_answer_error(s, EAI_E_NOT_FOUND);
            } else if (terminal || now >= s->deadline_ms || l->w->closed) {
                sub_answer_rec(s, j->out);
            }
        } else if (j->rc < 0 || !j->out) {
            sub_answer_error(s, EAI_E_NOT_FOUND);
        } else if (terminal) {
            sub_answer_rec(s, j->out);
        } else if (changed) {
            watch_sub_status(s, status);
        }
    }
    if (terminal)
        queued_drop(l);
}

static void reread_free(void *arg)
{
    struct reread_job *j = arg;
    struct eai_live *l = j->l;
    l->reading = 0;
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
    maybe_free(l);
}

static const struct eai_park_ops reread_ops = {
    .what = "exec_get", .work = reread_work, .answer = reread_answer, .free = reread_free,
};

static void reread(struct eai_live *l)
{
    struct eai_watch *w = l->w;
    if (l->reading || !l->subs || w->closed || !w->app->store)
        return;
    struct reread_job *j = calloc(1, sizeof *j);
    if (!j)
        return; /* retried by the poll timer */
    j->l = l;
    j->app = w->app;
    snprintf(j->tenant, sizeof j->tenant, "%s", l->tenant);
    snprintf(j->id, sizeof j->id, "%s", l->id);
    l->reading = 1;
    eai_park(NULL, NULL, &reread_ops, j); /* on failure reread_free clears reading */
}

/* Subscribers of executions not running here learn of changes by polling;
 * pending cancels expire. */
static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_watch *w = arg;
    if (w->closed)
        return;
    int64_t now = eai_now_ms();
    int again = 0;
    for (int b = 0; b < WATCH_BUCKETS; b++)
        for (struct eai_live *l = w->buckets[b], *next; l; l = next) {
            next = l->next;
            if (l->cancel_ms && now - l->cancel_ms > WATCH_CANCEL_KEEP_MS) {
                l->cancel_ms = 0;
                maybe_free(l);
                continue;
            }
            again |= l->cancel_ms != 0;
            if (!l->subs)
                continue;
            again = 1;
            int attached = 0;
            for (struct eai_sub *s = l->subs; s; s = s->next) {
                attached |= s->attached;
                if (s->kind == SUB_SSE && s->r && now >= s->ping_ms) {
                    eai_sse_ping(s->r); /* keeps a quiet stream (and its proxies) alive */
                    s->ping_ms = now + EAI_SSE_PING_MS;
                }
            }
            if (!l->local && !attached)
                reread(l);
        }
    if (again)
        poll_arm(w);
}

/* ------------------------------------------------------------ publishers */

struct eai_live *eai_watch_run(struct eai_watch *w, const char *id, const char *tenant, size_t output_limit)
{
    if (!w)
        return NULL;
    struct eai_live *l = find_or_add(w, id, tenant);
    if (!l)
        return NULL;
    l->pins++;
    l->local = 1;
    l->ended = 0;
    eai_outbuf_free(&l->out);
    eai_outbuf_free(&l->err);
    eai_outbuf_init(&l->out, output_limit);
    eai_outbuf_init(&l->err, output_limit);
    eai_outlog_reset(&l->log);
    eai_watch_status(w, id, tenant, "running", NULL);
    return l;
}

/* The gathered output events go to the attached streams. */
static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_live *l = arg;
    if (l->log.nsent == l->log.n)
        return;
    eai_outlog_sent(&l->log);
    if (!l->w->closed)
        watch_sse_feed_all(l, 1);
}

void eai_watch_output(struct eai_live *l, enum eai_iso_stream which, const char *data, size_t len)
{
    if (!l)
        return;
    struct eai_outbuf *b = which == EAI_STREAM_STDERR ? &l->err : &l->out;
    size_t kept = 0;
    eai_outbuf_append(b, data, len, &kept);
    if (!kept || l->w->closed)
        return;
    eai_outlog_add(&l->log, which == EAI_STREAM_STDERR, kept);
    if (!l->flush_ev)
        l->flush_ev = evtimer_new(l->w->app->base, flush_cb, l);
    if (l->flush_ev && !event_pending(l->flush_ev, EV_TIMEOUT, NULL)) {
        struct timeval tv = {0, EAI_SSE_COALESCE_MS * 1000};
        event_add(l->flush_ev, &tv);
    }
}

json_t *eai_watch_output_events(const struct eai_live *l)
{
    return eai_outlog_json(&l->log, l->out.len, l->err.len);
}

json_t *eai_watch_view(const struct eai_watch *w, const json_t *rec)
{
    json_t *v = eai_exec_view(rec);
    const struct eai_live *l = w ? find(w, eai_jstr(rec, "id")) : NULL;
    if (!v || !l || !l->local || eai_exec_status_terminal(eai_jstr(rec, "status")))
        return v;
    /* running here: the output so far (the same cap as the final record) */
    for (int k = 0; k < 2; k++) {
        const struct eai_outbuf *b = k ? &l->err : &l->out;
        const char *key = k ? "stderr" : "stdout";
        eai_output_encode(v, key, b->data ? b->data : "", b->len, 1);
        json_object_set_new(v, k ? "stderr_truncated" : "stdout_truncated", json_boolean(b->truncated));
    }
    return v;
}

void eai_watch_output_end(struct eai_live *l, size_t n)
{
    if (!l)
        return;
    struct eai_outbuf *b = &l->err;
    if (n && !b->truncated && n <= b->len)
        b->len -= n;
    l->ended = 1;
    eai_outlog_sent(&l->log); /* the last gathering events go now */
    if (!l->w->closed)
        watch_sse_feed_all(l, 0);
}

void eai_watch_output_get(const struct eai_live *l, enum eai_iso_stream which, const char **data,
                          size_t *len, int *truncated)
{
    const struct eai_outbuf *b = which == EAI_STREAM_STDERR ? &l->err : &l->out;
    *data = b->data ? b->data : "";
    *len = b->len;
    if (truncated)
        *truncated = b->truncated;
}

void eai_watch_status(struct eai_watch *w, const char *id, const char *tenant, const char *status,
                      const json_t *rec)
{
    if (!w || w->closed || !id || !status)
        return;
    struct eai_live *l = find(w, id);
    if (!l)
        return; /* nobody here cares */
    (void)tenant;
    if (!eai_exec_status_terminal(status)) {
        if (strcmp(status, "running") == 0)
            queued_drop(l);
        if (strcmp(l->status, status) == 0)
            return;
        snprintf(l->status, sizeof l->status, "%s", status);
        for (struct eai_sub *s = l->subs; s; s = s->next)
            if (s->kind == SUB_SSE && s->r) {
                /* a local run starts: its output will come live */
                s->attached = 1;
                watch_sub_status(s, status);
            }
        return;
    }
    snprintf(l->status, sizeof l->status, "%s", status);
    queued_drop(l);
    l->local = 0;
    if (rec) {
        /* the terminal record in hand: answer without reading it back */
        l->pins++;
        for (struct eai_sub *s = l->subs, *next; s; s = next) {
            next = s->next;
            if (!s->end_rec)
                sub_answer_rec(s, rec); /* a slow stream stays, with rec, until it caught up */
        }
        l->pins--;
    } else {
        reread(l);
    }
    maybe_free(l);
}

void eai_watch_queued(struct eai_watch *w, const char *id, const char *tenant)
{
    if (!w || w->closed || !tenant)
        return;
    struct eai_live *l = find_or_add(w, id, tenant);
    if (!l || l->queued_here)
        return;
    l->queued_here = 1;
    if (!l->status[0])
        snprintf(l->status, sizeof l->status, "queued");
    json_object_set_new(w->queued, tenant, json_integer(json_integer_value(json_object_get(w->queued, tenant)) + 1));
}

int64_t eai_watch_queued_count(const struct eai_watch *w, const char *tenant)
{
    return w && tenant ? json_integer_value(json_object_get(w->queued, tenant)) : 0;
}

void eai_watch_cancel_pending(struct eai_watch *w, const char *id)
{
    if (!w || w->closed)
        return;
    struct eai_live *l = find_or_add(w, id, NULL);
    if (!l)
        return;
    l->cancel_ms = eai_now_ms();
    poll_arm(w);
}

int eai_watch_take_cancel(struct eai_watch *w, const char *id)
{
    struct eai_live *l = w ? find(w, id) : NULL;
    if (!l || !l->cancel_ms)
        return 0;
    l->cancel_ms = 0;
    return 1;
}

int eai_watch_local_output(const struct eai_watch *w, const char *id, enum eai_iso_stream which,
                           const char **data, size_t *len)
{
    const struct eai_live *l = w ? find(w, id) : NULL;
    *data = "";
    *len = 0;
    if (!l || !l->local)
        return 0;
    eai_watch_output_get(l, which, data, len, NULL);
    return 1;
}

void eai_watch_release(struct eai_live *l)
{
    if (!l)
        return;
    if (l->pins > 0)
        l->pins--;
    if (!l->pins)
        l->local = 0;
    maybe_free(l);
}

/* ------------------------------------------------------------ lifecycle */

struct eai_watch *eai_watch_new(struct eai_app *app)
{
    struct eai_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->app = app;
    w->refs = 1;
    w->queued = json_object();
    w->nsubs[0] = json_object();
    w->nsubs[1] = json_object();
    w->poll_ev = evtimer_new(app->base, poll_cb, w);
    if (!w->queued || !w->poll_ev) {
        hub_unref(w);
        return NULL;
    }
    return w;
}

void eai_watch_close(struct eai_watch *w)
{
    if (!w || w->closed)
        return;
    w->closed = 1;
    event_del(w->poll_ev);
    for (int b = 0; b < WATCH_BUCKETS; b++) {
        struct eai_live *l = w->buckets[b];
        while (l) {
            struct eai_live *next = l->next;
            /* keep l alive while its subscribers go */
            l->pins++;
            while (l->subs)
                sub_answer_error(l->subs, EAI_E_STORAGE_UNAVAILABLE);
            l->pins--;
            maybe_free(l);
            l = next;
        }
    }
    hub_unref(w);
}

void eai_watch_no_err_hold(struct eai_live *l)
{
    if (l)
        l->no_err_hold = 1;
}
