/* The scheduler and the node budget (exec/budget.h, docs/admission.md).
 *
 * A claimed execution reserves its memory and CPU limits from its start on
 * a backend to its end.  One that does not fit now (the node's budget or
 * its tenant's share is held by other executions and sessions) waits here,
 * claimed by this node (its lease renewed like a running one's), and starts
 * as soon as a reservation is given back; its wait counts against its
 * timeout: past it, it ends as timeout without having run.  One larger than
 * a tenant's whole share can never fit and ends at once
 * (budget_exceeds_share).  Executions inside a session reserve nothing
 * (their session holds its limits), nor do those of a backend whose
 * sandboxes run elsewhere (k8s).  Loop thread only. */
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
#include "exec/budget.h"
#include "exec/exec_result.h"
#include "exec/exec_validate.h"
#include "obs/metrics.h"

#define SCHED_WAIT_POLL_MS 1000 /* the late ones are ended within this */

int sched_budget_need(const struct eai_sched *s, const json_t *rec, int64_t *memory, int64_t *cpu)
{
    *memory = *cpu = 0;
    if (!s->app->budget)
        return 0;
    const char *ses = eai_jstr(rec, "session_id");
    if (ses && *ses)
        return 0; /* its session holds the limits */
    const struct eai_profile *prof = eai_app_profile(s->app, eai_jstr(rec, "profile"));
    if (!prof || !eai_budget_counts_backend(prof->backend))
        return 0;
    struct eai_exec_limits lim;
    if (eai_exec_limits_parse(json_object_get(rec, "limits"), &lim) < 0)
        return 0; /* the start fails it (cannot build the job) */
    *memory = lim.memory_bytes;
    *cpu = lim.cpu_millis;
    return 1;
}

void sched_run_budget_give(struct eai_run *r)
{
    if (!r->budget)
        return;
    struct eai_budget *b = r->budget;
    r->budget = NULL;
    eai_budget_give(b, r->tenant, r->bud_memory, r->bud_cpu);
}

static void wait_gauge(struct eai_sched *s)
{
    eai_metrics_set("eai_sandbox_budget_waiting", NULL, s->nwaiting);
}

static void wait_free(struct sched_wait *w)
{
    if (!w)
        return;
    json_decref(w->rec);
    free(w);
}

/* Unlink w (in the list) from s. */
static void wait_unlink(struct eai_sched *s, struct sched_wait *w)
{
    for (struct sched_wait **pp = &s->waiting; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            w->next = NULL;
            s->nwaiting--;
            break;
        }
    wait_gauge(s);
}

/* End a waiting execution with patch (stolen), never run. */
static void wait_end(struct eai_sched *s, struct sched_wait *w, json_t *patch)
{
    if (patch)
        sched_finish_record(s, NULL, w->rec, patch, NULL, 0, 0, 0);
    wait_free(w);
}

static json_t *plain_patch(const char *status)
{
    return json_pack("{s:s, s:n, s:n, s:n}", "status", status, "exit_code", "signal", "error");
}

/* Start what fits, oldest first; end the waits past their timeout. */
static void wait_pass(struct eai_sched *s)
{
    if (s->stopping)
        return;
    int64_t now = eai_now_ms();
    json_t *blocked = json_object(); /* tenants whose oldest wait does not fit: the later ones stay behind */
    struct sched_wait *w = s->waiting, *next;
    for (; w; w = next) {
        next = w->next;
        if (now >= w->deadline_ms) {
            eai_log(SCHED_COMPONENT, EAI_LOG_INFO, "execution %s: timed out waiting for the node budget", w->id);
            wait_unlink(s, w);
            eai_watch_status(s->hub, w->id, w->tenant, "running", NULL);
            wait_end(s, w, plain_patch("timeout"));
            continue;
        }
        if (json_object_get(blocked, w->tenant) ||
            eai_budget_check(s->app->budget, w->tenant, w->memory, w->cpu) != EAI_BUDGET_FITS) {
            json_object_set_new(blocked, w->tenant, json_true());
            continue;
        }
        wait_unlink(s, w);
        json_t *rec = w->rec;
        w->rec = NULL;
        int64_t waited = now - w->since_ms;
        wait_free(w);
        eai_watch_status(s->hub, eai_jstr(rec, "id"), eai_jstr(rec, "tenant_id"), "running", NULL);
        sched_run_start(s, rec, 0, waited); /* touches the runs, never this list */
    }
    json_decref(blocked);
    if (s->waiting)
        sched_timer_in(s->wait_ev, SCHED_WAIT_POLL_MS);
    else
        eai_sched_kick(s); /* room for claims again */
}

static void wait_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    wait_pass(arg);
}

/* The budget's listener: something was given back.  Not inline: the give
 * comes from inside a run's end or a session's callback. */
static void on_given(void *arg)
{
    struct eai_sched *s = arg;
    if (!s->stopping && s->waiting)
        sched_timer_in(s->wait_ev, 0);
}

int sched_budget_init(struct eai_sched *s)
{
    s->wait_ev = evtimer_new(s->app->base, wait_cb, s);
    if (!s->wait_ev)
        return -1;
    eai_budget_set_listener(s->app->budget, on_given, s);
    wait_gauge(s);
    return 0;
}

void sched_budget_admit(struct eai_sched *s, json_t *rec)
{
    int64_t mem, cpu;
    const char *id = eai_jstr(rec, "id"), *tenant = eai_jstr(rec, "tenant_id");
    if (!id || !tenant || !sched_budget_need(s, rec, &mem, &cpu)) {
        if (id && tenant)
            eai_watch_status(s->hub, id, tenant, "running", NULL);
        sched_run_start(s, rec, 0, 0);
        return;
    }
    enum eai_budget_fit fit = eai_budget_check(s->app->budget, tenant, mem, cpu);
    /* first come, first served within a tenant: one that waits keeps the
     * later ones of its tenant behind it (other tenants go on) */
    if (fit == EAI_BUDGET_FITS && sched_budget_waiting(s, tenant) == 0) {
        eai_watch_status(s->hub, id, tenant, "running", NULL);
        sched_run_start(s, rec, 0, 0);
        return;
    }
    if (fit == EAI_BUDGET_TOO_LARGE) {
        struct eai_error *e = eai_budget_refusal(s->app->budget, fit, tenant, mem, cpu);
        eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "execution %s not run: %s", id, e && e->message ? e->message : "?");
        json_t *patch = eai_exec_error_patch(EAI_E_BUDGET_EXCEEDS_SHARE, e ? e->message : NULL);
        eai_error_free(e);
        eai_watch_status(s->hub, id, tenant, "running", NULL);
        if (patch)
            sched_finish_record(s, NULL, rec, patch, NULL, 0, 0, 0);
        json_decref(rec);
        return;
    }
    struct sched_wait *w = calloc(1, sizeof *w);
    if (!w) {
        /* cannot keep it: its lease lapses and the stale scan of a node
         * (this one included) ends it interrupted */
        eai_log(SCHED_COMPONENT, EAI_LOG_ERROR, "execution %s: out of memory keeping it waiting", id);
        json_decref(rec);
        return;
    }
    struct eai_exec_limits lim;
    int64_t timeout_ms = eai_exec_limits_parse(json_object_get(rec, "limits"), &lim) == 0 && lim.timeout_s > 0
                             ? lim.timeout_s * 1000
                             : 30000;
    w->rec = rec;
    w->id = id;
    w->tenant = tenant;
    w->since_ms = eai_now_ms();
    w->deadline_ms = w->since_ms + timeout_ms;
    w->memory = mem;
    w->cpu = cpu;
    struct sched_wait **pp = &s->waiting;
    while (*pp)
        pp = &(*pp)->next;
    *pp = w;
    s->nwaiting++;
    wait_gauge(s);
    eai_log(SCHED_COMPONENT, EAI_LOG_DEBUG, "execution %s waits for the node budget (%s)", id,
            fit == EAI_BUDGET_TENANT_FULL ? "tenant share" : "node");
    sched_timer_in(s->wait_ev, SCHED_WAIT_POLL_MS);
}

int sched_budget_waiting(const struct eai_sched *s, const char *tenant)
{
    if (!tenant)
        return s->nwaiting;
    int n = 0;
    for (const struct sched_wait *w = s->waiting; w; w = w->next)
        n += strcmp(w->tenant, tenant) == 0;
    return n;
}

int sched_budget_has(const struct eai_sched *s, const char *id)
{
    for (const struct sched_wait *w = s->waiting; w && id; w = w->next)
        if (strcmp(w->id, id) == 0)
            return 1;
    return 0;
}

int sched_budget_cancel(struct eai_sched *s, const char *id)
{
    for (struct sched_wait *w = s->waiting; w && id; w = w->next) {
        if (strcmp(w->id, id) != 0)
            continue;
        wait_unlink(s, w);
        eai_watch_status(s->hub, w->id, w->tenant, "running", NULL);
        wait_end(s, w, plain_patch("cancelled"));
        if (!s->waiting)
            eai_sched_kick(s);
        return 1;
    }
    return 0;
}

void sched_budget_stop(struct eai_sched *s)
{
    if (s->wait_ev)
        event_del(s->wait_ev);
    eai_budget_set_listener(s->app->budget, NULL, NULL);
    struct sched_wait *w = s->waiting, *next;
    s->waiting = NULL;
    s->nwaiting = 0;
    for (; w; w = next) {
        next = w->next;
        wait_end(s, w, eai_exec_error_patch(EAI_E_INTERRUPTED, NULL));
    }
    wait_gauge(s);
}

void sched_budget_free(struct eai_sched *s)
{
    struct sched_wait *w = s->waiting, *next;
    for (; w; w = next) {
        next = w->next;
        wait_free(w);
    }
    s->waiting = NULL;
    if (s->wait_ev)
        event_free(s->wait_ev);
    s->wait_ev = NULL;
}
