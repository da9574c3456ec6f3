/*
 * Retention (docs/configuration.md, "Quotas and retention"): every
 * retention.interval_s (and a few seconds after start) a worker asks the
 * storage to delete terminal executions created more than
 * retention.executions_days ago, in batches of RET_BATCH, at most
 * RET_BATCHES per run so one run never holds a worker for long.  The
 * storage appends one audit event per tenant and batch ("retention.pruned")
 * in the same transaction, so the chain records what went and keeps
 * verifying; the chain itself is never pruned.
 */
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include "exec/retention.h"
#include "exec/exec.h"
#include "app.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "base/worker.h"
#include "config/config.h"

#define RET_COMPONENT "retention"
#define RET_BATCH 500
#define RET_BATCHES 20
#define RET_FIRST_S 5

struct eai_ret {
    struct eai_app *app;
    struct event *timer;
    int busy, stopping;
    /* the worker's results */
    int64_t deleted;
    int failed;
    char msg[256];
};

static struct eai_ret *g_ret; /* loop thread */

static void ret_free(struct eai_ret *t)
{
    if (t->timer)
        event_free(t->timer);
    free(t);
}

static void ret_arm(struct eai_ret *t, int64_t seconds)
{
    struct timeval tv = {(time_t)seconds, 0};
    if (t->timer)
        evtimer_add(t->timer, &tv);
}

static void prune_work(void *arg)
{
    struct eai_ret *t = arg;
    struct eai_app *app = t->app;
    int64_t before = eai_now_ms() - app->cfg->retention_executions_days * 86400LL * 1000LL;
    t->deleted = 0;
    t->failed = 0;
    for (int i = 0; i < RET_BATCHES; i++) {
        int64_t n = 0;
        struct eai_error *e = NULL;
        if (app->store->exec_prune(app->storage.self, before, RET_BATCH, &n, &e) < 0) {
            t->failed = 1;
            snprintf(t->msg, sizeof t->msg, "%s", e && e->message ? e->message : "storage error");
            eai_error_free(e);
            return;
        }
        t->deleted += n;
        if (n < RET_BATCH)
            return;
    }
}

static void prune_done(void *arg)
{
    struct eai_ret *t = arg;
    t->busy = 0;
    if (t->stopping) {
        ret_free(t);
        return;
    }
    if (t->failed)
        eai_log(RET_COMPONENT, EAI_LOG_WARN, "prune failed (retried in %lld s): %s",
                (long long)t->app->cfg->retention_interval_s, t->msg);
    if (t->deleted > 0) /* a pruned execution must not be answered from memory */
        eai_exec_forget_documents(t->app);
    if (!t->failed && t->deleted > 0)
        eai_log(RET_COMPONENT, EAI_LOG_INFO, "pruned %lld execution(s) older than %lld day(s)",
                (long long)t->deleted, (long long)t->app->cfg->retention_executions_days);
    ret_arm(t, t->app->cfg->retention_interval_s);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct eai_ret *t = arg;
    if (t->busy || t->stopping)
        return;
    t->busy = 1;
    if (eai_work_submit(prune_work, prune_done, t) != 0) {
        t->busy = 0;
        ret_arm(t, t->app->cfg->retention_interval_s);
    }
}

void eai_retention_start(struct eai_app *app)
{
    if (!app->cfg || app->cfg->retention_executions_days <= 0 || g_ret)
        return;
    if (!app->store || !app->store->exec_prune) {
        eai_log(RET_COMPONENT, EAI_LOG_WARN,
                "retention.executions_days is set but the %s storage cannot prune: executions are kept",
                app->cfg->storage_backend ? app->cfg->storage_backend : "configured");
        return;
    }
    struct eai_ret *t = calloc(1, sizeof *t);
    if (!t)
        return;
    t->app = app;
    t->timer = evtimer_new(app->base, on_timer, t);
    if (!t->timer) {
        free(t);
        return;
    }
    g_ret = t;
    int64_t first = app->cfg->retention_interval_s < RET_FIRST_S ? app->cfg->retention_interval_s : RET_FIRST_S;
    ret_arm(t, first);
    eai_log(RET_COMPONENT, EAI_LOG_INFO, "executions older than %lld day(s) are pruned every %lld s",
            (long long)app->cfg->retention_executions_days, (long long)app->cfg->retention_interval_s);
}

void eai_retention_stop(struct eai_app *app)
{
    struct eai_ret *t = g_ret;
    (void)app;
    if (!t)
        return;
    g_ret = NULL;
    t->stopping = 1;
    if (t->timer)
        evtimer_del(t->timer);
    if (!t->busy)
        ret_free(t);
}
