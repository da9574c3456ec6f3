/*
 * The local runner's API (docs/plugin-common.md): a driver's instance
 * creates one runner; the isolation ops start and cancel go through it; the
 * driver's gate opening unparks runs, its destroy() shuts them down.  The
 * lifecycle itself is pc_runner.c.  Loop thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <event2/event.h>

#include <eai/plugin.h>

#include "pc_runner_int.h"

/* "<prefix><cleaned job id>-<8 random hex>-<seq>".  strict: containerd's
 * rule [A-Za-z0-9]+([._-][A-Za-z0-9]+)* (other bytes become one '-');
 * else [A-Za-z0-9_-] are kept and the rest dropped. */
static void make_cid(struct eai_pc_runner *R, const char *id, char *out, size_t len)
{
    char clean[48];
    size_t n = 0;
    for (const char *p = id ? id : ""; *p && n + 1 < sizeof(clean); p++) {
        char c = *p;
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (alnum || (!R->ops->cid_strict && (c == '-' || c == '_')))
            clean[n++] = c;
        else if (R->ops->cid_strict && n > 0 && clean[n - 1] != '-')
            clean[n++] = '-';
    }
    while (R->ops->cid_strict && n > 0 && clean[n - 1] == '-')
        n--;
    clean[n] = '\0';
    unsigned char rnd[4] = {0};
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        memset(rnd, 0, sizeof(rnd));
    snprintf(out, len, "%s%s%s%02x%02x%02x%02x-%lu", R->ops->cid_prefix, clean, n ? "-" : "", rnd[0], rnd[1],
             rnd[2], rnd[3], ++R->seq);
}

struct eai_pc_runner *eai_pc_runner_new(const struct eai_host *host, const struct eai_pc_driver_ops *ops, void *drv,
                                        const char *work_dir, const char *cg_parent, unsigned uid, int cg_v2,
                                        int *inflight, const int *destroying)
{
    struct eai_pc_runner *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    *r = (struct eai_pc_runner){.host = host, .ops = ops, .drv = drv, .work_dir = work_dir, .cg_parent = cg_parent,
                                .uid = uid, .cg_v2 = cg_v2, .inflight = inflight, .destroying = destroying};
    return r;
}

void eai_pc_runner_free(struct eai_pc_runner *r)
{
    free(r);
}

static void go_or_hold(struct eai_pc_runner *R, struct eai_pc_run *e);

int eai_pc_runner_start(struct eai_pc_runner *R, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb,
                        void *cb_arg, void **handle, struct eai_error **err)
{
    const struct eai_host *h = R->host;
    const char *name = R->ops->name;
    char why[PATH_MAX + 384];
    why[0] = '\0';
    int gate = R->ops->gate(R->drv, why, sizeof(why));
    if (gate < 0) {
        return eai_host_error_set(h, err, EAI_E_SANDBOX_UNAVAILABLE, "%s", why[0] ? why : "not ready");
    }
    if (!job || !job->argv || !job->argv[0] || !cb || !cb->on_exit) {
        return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "%s: job without a command or callbacks", name);
    }
    for (size_t i = 0; i < job->nfiles; i++) {
        if (!eai_pc_tmp_path_valid(job->files[i].path)) {
            return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "%s: file path %s is not under /tmp", name,
                                    job->files[i].path ? job->files[i].path : "(null)");
        }
    }
    struct eai_pc_run *e = calloc(1, sizeof(*e) + R->ops->priv_size);
    if (!e) {
        if (err)
            *err = h->error_new(EAI_E_INTERNAL, ENOMEM, "%s: out of memory", name);
        return -1;
    }
    e->runner = R;
    e->priv = e + 1;
    e->job = job;
    memcpy(&e->cb, cb, cb->size < sizeof(e->cb) ? cb->size : sizeof(e->cb));
    e->cb_arg = cb_arg;
    e->out = (struct eai_pc_stream){.fd = -1, .which = EAI_STREAM_STDOUT};
    e->err = (struct eai_pc_stream){.fd = -1, .which = EAI_STREAM_STDERR};
    e->in_fd = -1;
    e->wd_fd = -1;
    e->b.uid = R->uid;
    e->b.cg_v2 = R->cg_v2;
    make_cid(R, job->id, e->b.cid, sizeof(e->b.cid));
    e->next = R->runs;
    R->runs = e;
    *handle = e;
    if (!job->image || h->image_rootfs(h, job->image, e->b.rootfs, sizeof(e->b.rootfs)) < 0) {
        char m[256];
        snprintf(m, sizeof(m), "image %s is not in the local image store", job->image ? job->image : "(none)");
        eai_pc_run_end_soon(e, EAI_E_IMAGE_MISSING, m);
        return 0;
    }
    snprintf(e->b.dir, sizeof(e->b.dir), "%s/%s", R->work_dir, e->b.cid);
    snprintf(e->b.cgpath, sizeof(e->b.cgpath), "%s/%s", R->cg_parent, e->b.cid);
    if (gate == 0) {
        go_or_hold(R, e);
    } else {
        e->state = PC_PARKED;
    }
    return 0;
}

/* A held run's timeout came before its slot: it ends as timeout, never run. */
static void on_hold_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_pc_run *e = arg;
    if (e->state != PC_PARKED || !e->held || e->ev_soon || e->cancelled)
        return;
    e->timed_out = 1;
    eai_pc_run_end_soon(e, 0, NULL);
}

/* The gate is open: ops->hold decides whether the run starts, waits or ends. */
static void go_or_hold(struct eai_pc_runner *R, struct eai_pc_run *e)
{
    char why[256] = "";
    int h = R->ops->hold ? R->ops->hold(R->drv, e, why, sizeof(why)) : 0;
    e->held = h > 0;
    if (h > 0 && !e->hold_since_ns) {
        e->hold_since_ns = eai_monotonic_ns();
        if (e->job->timeout_ms > 0) {
            e->ev_hold = evtimer_new(R->host->base, on_hold_timeout, e);
            struct timeval tv = {e->job->timeout_ms / 1000, (e->job->timeout_ms % 1000) * 1000};
            if (!e->ev_hold || evtimer_add(e->ev_hold, &tv) < 0) {
                eai_pc_run_end_soon(e, EAI_E_SANDBOX_FAILED, "cannot time the wait for a slot");
                return;
            }
        }
    } else if (h <= 0 && e->hold_since_ns) {
        if (e->ev_hold)
            event_del(e->ev_hold);
        e->held_ms = (eai_monotonic_ns() - e->hold_since_ns) / 1000000;
    }
    if (h > 0) {
        e->state = PC_PARKED;
    } else if (h < 0) {
        eai_pc_run_end_soon(e, EAI_E_SANDBOX_FAILED, why[0] ? why : "the run cannot start");
    } else {
        if (R->ops->admit)
            R->ops->admit(R->drv, e);
        eai_pc_run_launch(e);
    }
}

void eai_pc_runner_retry_held(struct eai_pc_runner *R)
{
    size_t n = 0;
    for (struct eai_pc_run *e = R->runs; e; e = e->next)
        n += e->state == PC_PARKED && e->held && !e->ev_soon;
    if (!n)
        return;
    struct eai_pc_run **v = calloc(n, sizeof(*v));
    if (!v)
        return;
    size_t i = 0;
    for (struct eai_pc_run *e = R->runs; e && i < n; e = e->next)
        if (e->state == PC_PARKED && e->held && !e->ev_soon)
            v[i++] = e;
    /* runs are prepended: the oldest is last */
    while (i-- > 0)
        go_or_hold(R, v[i]);
    free(v);
}

void eai_pc_runner_cancel(struct eai_pc_runner *R, void *handle)
{
    struct eai_pc_run *e = R->runs;
    while (e && e != handle)
        e = e->next;
    /* SETTLING: the program has already ended on its own. */
    if (!e || e->cancelled || e->state == PC_FINISHING || e->state == PC_SETTLING)
        return;
    e->cancelled = 1;
    if (e->state == PC_PARKED)
        eai_pc_run_end_soon(e, 0, NULL);
    else if (e->state == PC_RUNNING && e->run_spawned && !e->run_exited)
        eai_pc_run_stop(e);
    /* PREPARING: prepare_done sees the flag. */
}

void eai_pc_runner_unpark_all(struct eai_pc_runner *R)
{
    for (struct eai_pc_run *e = R->runs; e; e = e->next) {
        if (e->state != PC_PARKED || e->ev_soon || e->held)
            continue;
        char why[PATH_MAX + 384];
        why[0] = '\0';
        int gate = R->ops->gate(R->drv, why, sizeof(why));
        if (gate < 0)
            eai_pc_run_end_soon(e, EAI_E_SANDBOX_UNAVAILABLE, why);
        else if (gate == 0)
            go_or_hold(R, e);
    }
}

int eai_pc_runner_busy(const struct eai_pc_runner *R)
{
    int n = 0;
    for (const struct eai_pc_run *e = R->runs; e; e = e->next)
        n += e->state != PC_PARKED;
    return n;
}

int eai_pc_runner_count(const struct eai_pc_runner *R)
{
    int n = 0;
    for (const struct eai_pc_run *e = R->runs; e; e = e->next)
        n++;
    return n;
}

struct eai_pc_run *eai_pc_runner_find(struct eai_pc_runner *R, const char *cid)
{
    for (struct eai_pc_run *e = R->runs; e; e = e->next)
        if (!strcmp(e->b.cid, cid))
            return e->state == PC_FINISHING ? NULL : e;
    return NULL;
}

void eai_pc_runner_shutdown(struct eai_pc_runner *R, int pass)
{
    struct eai_pc_run *e = R->runs;
    while (e) {
        struct eai_pc_run *next = e->next;
        if (e->state == PC_RUNNING && eai_pc_run_pid(e) > 0 && !e->run_exited) {
            e->hard_killed = 1;
            if (R->ops->shutdown)
                R->ops->shutdown(R->drv, e, pass);
        } else if (pass == 0) {
            /* the rest is for the second pass */
        } else if (e->ev_soon) {
            /* ending soon without having run: do it now */
            event_del(e->ev_soon);
            e->state = PC_RUNNING;
            eai_pc_run_finish(e);
        } else if (e->state == PC_PARKED || (e->state == PC_RUNNING && !e->run_spawned)) {
            eai_pc_run_unlink(e);
            eai_pc_run_free(e);
        } else if (e->state == PC_SETTLING && e->helpers == 0) {
            eai_pc_run_finish(e); /* destroying: runs inline, no callback */
        }
        /* PREPARING / FINISHING: their worker step's done callback cleans
         * up; a live child or helper: the driver's reap ends it. */
        e = next;
    }
}
