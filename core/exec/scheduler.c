/* The node-local scheduler: claiming, leases, recovery, start and stop
 * (scheduler.h, docs/executions.md).  One run: sched_run.c; its end:
 * sched_finish.c. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "exec/scheduler_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/exec_result.h"
#include "obs/metrics.h"
#include "base/worker.h"

void *sched_store_self(const struct eai_app *app) { return app->storage.self; }

static void sched_free(struct eai_sched *s);
static struct eai_run *sched_find(struct eai_sched *s, const char *id);

void sched_unref(struct eai_sched *s)
{
    if (--s->refs == 0)
        sched_free(s);
}

struct submitted {
    struct eai_sched *s;
    void (*fn)(void *);
    void (*done)(void *);
    void *arg;
};

static void submitted_work(void *arg)
{
    struct submitted *x = arg;
    x->fn(x->arg);
}

static void submitted_done(void *arg)
{
    struct submitted *x = arg;
    struct eai_sched *s = x->s;
    if (x->done)
        x->done(x->arg);
    free(x);
    sched_unref(s);
}

/* Storage (or encoding) work on a worker, holding a reference on s;
 * 0 or -1 (queue full or pool stopped). */
int sched_submit(struct eai_sched *s, void (*fn)(void *), void (*done)(void *), void *arg)
{
    struct submitted *x = malloc(sizeof *x);
    if (!x)
        return -1;
    x->s = s;
    x->fn = fn;
    x->done = done;
    x->arg = arg;
    s->refs++;
    if (eai_work_submit(submitted_work, submitted_done, x) < 0) {
        free(x);
        s->refs--;
        return -1;
    }
    return 0;
}

void sched_timer_in(struct event *ev, int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    event_add(ev, &tv);
}

void sched_gauges(struct eai_sched *s)
{
    eai_metrics_set("eai_sandbox_running", NULL, s->nlive);
}

/* ------------------------------------------------------------ claiming */

struct claim_job {
    struct eai_sched *s;
    int max, per_tenant;
    json_t *exclude;               /* tenants at their bound (exec_claim_excluding) */
    json_t *out;
    int rc;
    int ran;                       /* eai_sched_claim_work ran it */
    struct eai_error *err;
};

static void claim_work(void *arg)
{
    struct claim_job *j = arg;
    struct eai_app *app = j->s->app;
    if (j->exclude)
        j->rc = app->store->exec_claim_excluding(sched_store_self(app), app->host->node_id, j->s->lease_ms,
                                                 j->max, j->per_tenant, j->exclude, &j->out, &j->err);
    else
        j->rc = app->store->exec_claim(sched_store_self(app), app->host->node_id, j->s->lease_ms, j->max,
                                       j->per_tenant, &j->out, &j->err);
    /* the queue gauge is sched_gauge.c's (every second), not the claim's:
     * no count on the path of a run */
}

static void claim_done(void *arg)
{
    struct claim_job *j = arg;
    struct eai_sched *s = j->s;
    s->claim_inflight = 0;
    size_t n = j->rc == 0 && json_is_array(j->out) ? json_array_size(j->out) : 0;
    if (s->stopping) {
        /* claimed while stopping: the next start recovers them */
        json_decref(j->out);
        json_decref(j->exclude);
        eai_error_free(j->err);
        free(j);
        return;
    }
    if (j->rc < 0) {
        int64_t now = eai_now_ms();
        if (now - s->last_claim_error_ms > 30000) {
            eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "claim failed: %s",
                    j->err && j->err->message ? j->err->message : "?");
            s->last_claim_error_ms = now;
        }
        sched_timer_in(s->claim_ev, SCHED_RETRY_MS);
    } else {
        for (size_t i = 0; i < n; i++) /* started, or waiting for the node budget */
            sched_budget_admit(s, json_incref(json_array_get(j->out, i)));
        if (s->claim_again || (n > 0 && ((int)n == j->max || j->exclude)))
            eai_sched_kick(s);
        else
            sched_timer_in(s->claim_ev, SCHED_IDLE_POLL_MS);
    }
    s->claim_again = 0;
    json_decref(j->out);
    json_decref(j->exclude);
    eai_error_free(j->err);
    free(j);
}

/* Whether this node can start anything now: some isolation backend is
 * ready, or still probing (its start() then holds the job until it knows).
 * A replica whose every backend is down (a runtime gone, the Kubernetes API
 * unreachable while its pod restarts) claims nothing: the executions stay
 * queued for a replica that can run them, instead of being taken here and
 * failed closed as sandbox_unavailable.  With no backend at all it claims,
 * and each claimed execution fails closed, as before (docs/executions.md
 * "Claims"). */
static int node_can_start(struct eai_sched *s)
{
    const struct eai_app *app = s->app;
    if (app->nisolation <= 0)
        return 1;
    for (int i = 0; i < app->nisolation; i++) {
        const struct eai_isolation_ops *ops = app->isolation[i].desc->ops;
        struct eai_iso_probe p;
        memset(&p, 0, sizeof p);
        p.size = sizeof p;
        ops->probe(app->isolation[i].self, &p);
        if (p.ready || eai_iso_probe_pending(&p))
            return 1;
    }
    return 0;
}

/* The next claim, or NULL when none is due now (stopping, draining, a
 * claim in flight: it claims again when it returns; no free slot or no
 * backend ready: the idle poll).  Sets claim_inflight. */
static struct claim_job *claim_prepare(struct eai_sched *s)
{
    if (!s || s->stopping || s->draining)
        return NULL;
    if (s->claim_inflight) {
        s->claim_again = 1;
        return NULL;
    }
    const struct eai_config *cfg = s->app->cfg;
    int maxc = cfg && cfg->max_concurrent > 0 ? cfg->max_concurrent : 8;
    int per = cfg && cfg->max_per_tenant > 0 ? cfg->max_per_tenant : maxc;
    int free_slots = maxc - s->nlive;
    /* executions waiting for the node budget hold no slot (one in a
     * session must still get through) but bound the claims: at most
     * max_concurrent of them */
    if (s->nwaiting >= maxc)
        free_slots = 0;
    else if (free_slots > maxc - s->nwaiting)
        free_slots = maxc - s->nwaiting;
    if (free_slots <= 0) {
        s->claim_again = 0;
        sched_timer_in(s->claim_ev, SCHED_IDLE_POLL_MS);
        return NULL;
    }
    if (!node_can_start(s)) {
        int64_t now = eai_now_ms();
        if (now - s->last_unready_log_ms > 30000) {
            eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "no isolation backend is ready: claiming nothing until one is");
            s->last_unready_log_ms = now;
        }
        s->claim_again = 0;
        sched_timer_in(s->claim_ev, SCHED_IDLE_POLL_MS);
        return NULL;
    }
    struct claim_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->s = s;
    j->max = free_slots;
    j->per_tenant = per < free_slots ? per : free_slots;
    const struct eai_storage_ops *so = s->app->store;
    if (so->exec_claim_excluding) { /* ABI 1.1; NULL for a 1.0 backend (normalised at load) */
        /* strict per-tenant bound: tenants at it are skipped, the others
         * get at most their remaining room in this claim */
        json_t *count = json_object();
        j->exclude = json_array();
        if (!count || !j->exclude) {
            json_decref(count);
            json_decref(j->exclude);
            free(j);
            return NULL;
        }
        for (struct eai_run *r = s->runs; r; r = r->next)
            if (r->live)
                json_object_set_new(count, r->tenant,
                                    json_integer(json_integer_value(json_object_get(count, r->tenant)) + 1));
        /* and those of the tenant waiting for the budget */
        for (struct sched_wait *w = s->waiting; w; w = w->next)
            json_object_set_new(count, w->tenant,
                                json_integer(json_integer_value(json_object_get(count, w->tenant)) + 1));
        const char *t;
        json_t *c;
        json_object_foreach(count, t, c) {
            int room = per - (int)json_integer_value(c);
            if (room <= 0)
                json_array_append_new(j->exclude, json_string(t));
            else if (room < j->per_tenant)
                j->per_tenant = room;
        }
        json_decref(count);
    }
    s->claim_inflight = 1;
    s->claim_again = 0;
    return j;
}

void eai_sched_kick(struct eai_sched *s)
{
    struct claim_job *j = claim_prepare(s);
    if (!j)
        return;
    if (sched_submit(s, claim_work, claim_done, j) < 0) {
        s->claim_inflight = 0;
        json_decref(j->exclude);
        free(j);
        sched_timer_in(s->claim_ev, SCHED_RETRY_MS);
    }
}

/* (scheduler.h) A claim carried by the caller's own worker job. */
struct eai_sched_claim *eai_sched_claim_take(struct eai_sched *s)
{
    struct claim_job *j = claim_prepare(s);
    if (j)
        s->refs++; /* dropped by eai_sched_claim_done */
    return (struct eai_sched_claim *)j;
}

void eai_sched_claim_work(struct eai_sched_claim *c)
{
    struct claim_job *j = (struct claim_job *)c;
    if (!j || j->ran)
        return;
    claim_work(j);
    j->ran = 1;
}

void eai_sched_claim_done(struct eai_sched_claim *c)
{
    struct claim_job *j = (struct claim_job *)c;
    if (!j)
        return;
    struct eai_sched *s = j->s;
    if (j->ran) {
        claim_done(j);
    } else {
        /* not run (the job was refused or never ran): what it held back */
        int again = s->claim_again;
        s->claim_inflight = 0;
        s->claim_again = 0;
        json_decref(j->exclude);
        free(j);
        if (again)
            eai_sched_kick(s);
    }
    sched_unref(s);
}

static void claim_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sched *s = arg;
    eai_sched_kick(s);
}

/* ------------------------------------------------------------ leases */

struct renew_job {
    struct eai_sched *s;
    json_t *cancel_ids;
    int rc;
    struct eai_error *err;
};

static void renew_work(void *arg)
{
    struct renew_job *j = arg;
    struct eai_app *app = j->s->app;
    j->rc = app->store->exec_renew(sched_store_self(app), app->host->node_id, j->s->lease_ms,
                                   &j->cancel_ids, &j->err);
}

static void renew_done(void *arg)
{
    struct renew_job *j = arg;
    struct eai_sched *s = j->s;
    s->renew_inflight = 0;
    if (!s->stopping) {
        if (j->rc < 0) {
            eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "lease renewal failed: %s",
                    j->err && j->err->message ? j->err->message : "?");
        } else {
            size_t i;
            const json_t *c;
            json_array_foreach(j->cancel_ids, i, c)
                eai_sched_cancel_local(s, eai_jstr(c, "id"));
        }
    }
    json_decref(j->cancel_ids);
    eai_error_free(j->err);
    free(j);
}

static void renew_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sched *s = arg;
    if (s->stopping)
        return;
    sched_timer_in(s->renew_ev, s->lease_ms / 3);
    if ((!s->runs && !s->waiting) || s->renew_inflight)
        return;
    struct renew_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->s = s;
    s->renew_inflight = 1;
    if (sched_submit(s, renew_work, renew_done, j) < 0) {
        s->renew_inflight = 0;
        free(j);
    }
}

/* ------------------------------------------------------------ recovery */

struct stale_job {
    struct eai_sched *s;
    int64_t before;
    json_t *out;
    int rc;
    struct eai_error *err;
};

static void stale_work(void *arg)
{
    struct stale_job *j = arg;
    struct eai_app *app = j->s->app;
    j->rc = app->store->exec_stale(sched_store_self(app), j->before, &j->out, &j->err);
}

static void stale_handle(struct eai_sched *s, json_t *list)
{
    size_t i;
    json_t *rec;
    json_array_foreach(list, i, rec) {
        const char *id = eai_jstr(rec, "id");
        if (!id || sched_find(s, id) || sched_budget_has(s, id))
            continue; /* ours and alive: the next renewal extends it */
        eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "execution %s was left running by %s: recovering",
                id, eai_jstr(rec, "lease_owner") ? eai_jstr(rec, "lease_owner") : "?");
        sched_run_start(s, json_incref(rec), 1, 0);
    }
}

static void stale_done(void *arg)
{
    struct stale_job *j = arg;
    struct eai_sched *s = j->s;
    s->stale_inflight = 0;
    if (!s->stopping) {
        if (j->rc < 0)
            eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "stale lease scan failed: %s",
                    j->err && j->err->message ? j->err->message : "?");
        else
            stale_handle(s, j->out);
    }
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static void stale_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sched *s = arg;
    if (s->stopping)
        return;
    sched_timer_in(s->stale_ev, s->lease_ms / 2);
    if (s->stale_inflight)
        return;
    struct stale_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->s = s;
    j->before = eai_now_ms();
    s->stale_inflight = 1;
    if (sched_submit(s, stale_work, stale_done, j) < 0) {
        s->stale_inflight = 0;
        free(j);
    }
}

/* ------------------------------------------------------------ public */

int eai_iso_probe_pending(const struct eai_iso_probe *pr)
{
    /* core hands backends a zeroed probe of today's size: a 1.0 backend
     * leaves pending 0 */
    return pr->pending != 0;
}

struct eai_sched *eai_sched_start(struct eai_app *app, struct eai_watch *hub, struct eai_error **err)
{
    struct eai_sched *s = calloc(1, sizeof *s);
    if (!s) {
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "out of memory starting the scheduler");
        return NULL;
    }
    s->hub = hub;
    s->app = app;
    s->refs = 1;
    /* scheduler.lease_ms is at least 3000 (refused at start below it) */
    s->lease_ms = app->cfg && app->cfg->lease_ms > 0 ? app->cfg->lease_ms : 30000;
    s->claim_ev = evtimer_new(app->base, claim_timer_cb, s);
    s->renew_ev = evtimer_new(app->base, renew_timer_cb, s);
    s->stale_ev = evtimer_new(app->base, stale_timer_cb, s);
    if (!s->claim_ev || !s->renew_ev || !s->stale_ev || sched_budget_init(s) < 0) {
        sched_free(s);
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "cannot create scheduler timers");
        return NULL;
    }

    /* Recovery.  Executions left running by a dead process: with the
     * embedded SQLite store only this process uses the queue, so every
     * running row at start belongs to a dead process (whatever its lease
     * says).  With a shared store (PostgreSQL) only rows whose lease has
     * ended are stale; the periodic scan catches replicas that die later.
     * This first scan is synchronous: eai_exec_start runs before the loop
     * serves requests, and the queue must be sane before it does. */
    int single = app->storage.desc && app->storage.desc->name &&
                 strcmp(app->storage.desc->name, "sqlite") == 0;
    json_t *stale = NULL;
    struct eai_error *e = NULL;
    if (app->store->exec_stale(sched_store_self(app), single ? INT64_MAX : eai_now_ms(), &stale, &e) < 0) {
        eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "recovery scan failed: %s",
                e && e->message ? e->message : "?");
        eai_error_free(e);
    } else {
        if (json_array_size(stale) > 0)
            eai_log(SCHED_COMPONENT, EAI_LOG_INFO, "recovering %zu execution(s) left running",
                    json_array_size(stale));
        stale_handle(s, stale);
        json_decref(stale);
    }
    sched_timer_in(s->renew_ev, s->lease_ms / 3);
    sched_timer_in(s->stale_ev, s->lease_ms / 2);
    if (sched_gauge_start(s) < 0)
        eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "cannot create the queue gauge timer");
    eai_sched_kick(s);
    return s;
}

void eai_sched_stop(struct eai_sched *s)
{
    if (!s || s->stopping)
        return;
    s->stopping = 1;
    event_del(s->claim_ev);
    event_del(s->renew_ev);
    event_del(s->stale_ev);
    sched_gauge_stop(s);
    sched_budget_stop(s); /* the waiting ones are recorded interrupted */
    /* Live runs: ask the backend to stop them and record them as
     * interrupted now; their callbacks are ignored from here on. */
    struct eai_run *r = s->runs, *next;
    s->runs = NULL;
    for (; r; r = next) {
        next = r->next;
        r->next = NULL;
        if (r->finishing) {
            /* its finish job owns it and frees it */
            continue;
        }
        if (r->live) {
            const struct eai_isolation_ops *ops = sched_iso_ops(r->iso);
            json_t *patch = eai_exec_error_patch(EAI_E_INTERRUPTED, NULL);
            if (patch) {
                /* shutdown: the output so far is encoded here (the run is orphaned) */
                for (int k = 0; k < 2 && r->live_state; k++) {
                    enum eai_iso_stream which = k ? EAI_STREAM_STDERR : EAI_STREAM_STDOUT;
                    const char *d;
                    size_t n;
                    int trunc;
                    eai_watch_output_get(r->live_state, which, &d, &n, &trunc);
                    eai_output_encode(patch, k ? "stderr" : "stdout", d, n, trunc);
                    json_object_set_new(patch, k ? "stderr_truncated" : "stdout_truncated", json_boolean(trunc));
                }
                json_t *order = r->live_state ? eai_watch_output_events(r->live_state) : NULL;
                if (order)
                    json_object_set_new(patch, "output_events", order);
                sched_finish_record(s, NULL, r->rec, patch, NULL, 0, 0, 0);
            }
            r->s = NULL; /* orphan: cb_exit frees it */
            if (ops && ops->cancel && !r->cancel_sent) {
                r->cancel_sent = 1;
                ops->cancel(r->iso->self, r->handle);
            }
        } else {
            sched_run_free(r);
        }
    }
    s->nlive = 0;
    sched_unref(s);
}

static void sched_free(struct eai_sched *s)
{
    if (!s)
        return;
    if (s->claim_ev)
        event_free(s->claim_ev);
    if (s->renew_ev)
        event_free(s->renew_ev);
    if (s->stale_ev)
        event_free(s->stale_ev);
    sched_gauge_free(s);
    sched_budget_free(s);
    free(s);
}

static struct eai_run *sched_find(struct eai_sched *s, const char *id)
{
    for (struct eai_run *r = s->runs; r && id; r = r->next)
        if (r->id && strcmp(r->id, id) == 0)
            return r;
    return NULL;
}

int eai_sched_cancel_local(struct eai_sched *s, const char *id)
{
    if (!s || !id || s->stopping)
        return 0;
    if (sched_budget_cancel(s, id))
        return 1;
    for (struct eai_run *r = s->runs; r; r = r->next) {
        if (!r->live || strcmp(r->id, id) != 0)
            continue;
        if (!r->cancel_sent) {
            const struct eai_isolation_ops *ops = sched_iso_ops(r->iso);
            r->cancel_sent = 1;
            if (ops && ops->cancel)
                ops->cancel(r->iso->self, r->handle);
        }
        return 1;
    }
    return 0;
}

int eai_sched_stdin(struct eai_sched *s, const char *tenant, const char *id, const unsigned char *data, size_t len,
                    int eof, size_t *pending, struct eai_error **err)
{
    if (!s || !id || !tenant || s->stopping)
        return 0;
    for (struct sched_wait *w = s->waiting; w; w = w->next) {
        if (strcmp(w->id, id) != 0 || strcmp(w->tenant, tenant) != 0)
            continue;
        const char *mode = eai_jstr(w->rec, "stdin_mode");
        if (!mode || strcmp(mode, "stream") != 0)
            eai_error_set(err, EAI_E_STDIN_NOT_STREAMED, "the execution was not started with stdin_mode stream");
        else
            eai_error_set(err, EAI_E_STDIN_BUSY, "the execution waits for the node budget");
        return 1;
    }
    for (struct eai_run *r = s->runs; r; r = r->next) {
        if (!r->id || strcmp(r->id, id) != 0 || !r->tenant || strcmp(r->tenant, tenant) != 0)
            continue;
        const char *mode = eai_jstr(r->rec, "stdin_mode");
        if (!mode || strcmp(mode, "stream") != 0) {
            eai_error_set(err, EAI_E_STDIN_NOT_STREAMED, "the execution was not started with stdin_mode stream");
            return 1;
        }
        if (r->finishing || r->cancel_sent || (!r->live && r->handle)) {
            eai_error_set(err, EAI_E_STDIN_CLOSED, "the program has ended");
            return 1;
        }
        const struct eai_isolation_ops *ops = sched_iso_ops(r->iso);
        if (!r->live || !r->handle || !ops || !ops->stdin_write) {
            eai_error_set(err, EAI_E_STDIN_BUSY, "the execution is being started");
            return 1;
        }
        ops->stdin_write(r->iso->self, r->handle, data, len, eof, pending, err);
        return 1;
    }
    return 0;
}

int eai_sched_running(const struct eai_sched *s)
{
    return s && !s->stopping ? s->nlive : 0;
}

void eai_sched_drain(struct eai_sched *s)
{
    if (!s || s->stopping || s->draining)
        return;
    s->draining = 1;
    event_del(s->claim_ev); /* a claim in flight still starts what it took */
}

int eai_sched_busy(const struct eai_sched *s)
{
    return s && !s->stopping && (s->runs || s->claim_inflight || s->waiting);
}

