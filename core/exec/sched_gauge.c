/*
 * The queue gauges kept fresh on every replica: `eai_sandbox_queued` is
 * the storage's count of queued executions (the whole queue, shared by the
 * replicas of one database), read on a worker every second, whether or not
 * this replica claims (a busy replica with every slot taken claims nothing
 * and used to show the count of its last claim).  `eai_sandbox_running`
 * (this node's slots in use) is set with it.
 */
#include <stdlib.h>

#include <event2/event.h>

#include "exec/scheduler_int.h"
#include "base/errors.h"
#include "obs/metrics.h"

#define SCHED_GAUGE_MS 1000

struct gauge_job {
    struct eai_sched *s;
    int64_t queued, running;
    int rc;
};

static void gauge_work(void *arg)
{
    struct gauge_job *j = arg;
    struct eai_app *app = j->s->app;
    struct eai_error *e = NULL;
    j->rc = app->store->exec_counts(sched_store_self(app), &j->queued, &j->running, &e);
    eai_error_free(e);
}

static void gauge_done(void *arg)
{
    struct gauge_job *j = arg;
    struct eai_sched *s = j->s;
    s->gauge_inflight = 0;
    if (!s->stopping) {
        if (j->rc == 0)
            eai_metrics_set("eai_sandbox_queued", NULL, (double)j->queued);
        sched_gauges(s);
        sched_timer_in(s->gauge_ev, SCHED_GAUGE_MS);
    }
    free(j);
}

static void gauge_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sched *s = arg;
    if (s->stopping || s->gauge_inflight)
        return;
    struct gauge_job *j = calloc(1, sizeof *j);
    if (!j) {
        sched_timer_in(s->gauge_ev, SCHED_GAUGE_MS);
        return;
    }
    j->s = s;
    s->gauge_inflight = 1;
    if (sched_submit(s, gauge_work, gauge_done, j) < 0) {
        /* queue full: try again later, the gauge keeps its last value */
        s->gauge_inflight = 0;
        free(j);
        sched_timer_in(s->gauge_ev, SCHED_GAUGE_MS);
    }
}

int sched_gauge_start(struct eai_sched *s)
{
    if (!s->app->store->exec_counts)
        return 0; /* a 1.0 storage plugin without counts: the gauge stays 0 */
    s->gauge_ev = evtimer_new(s->app->base, gauge_timer_cb, s);
    if (!s->gauge_ev)
        return -1;
    sched_timer_in(s->gauge_ev, 0);
    return 0;
}

void sched_gauge_stop(struct eai_sched *s)
{
    if (s->gauge_ev)
        event_del(s->gauge_ev);
}

void sched_gauge_free(struct eai_sched *s)
{
    if (s->gauge_ev)
        event_free(s->gauge_ev);
    s->gauge_ev = NULL;
}
