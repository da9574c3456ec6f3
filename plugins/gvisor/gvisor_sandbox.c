/* One long-lived runsc sandbox: the end both owners share (gvisor.h,
 * struct gv_sbx): the warm pool's sandboxes and the sessions'. */
#include <signal.h>
#include <stdio.h>

#include <event2/event.h>

#include "gvisor.h"

static void cleanup_work(void *arg)
{
    struct gv_sbx *x = arg;
    if (x->clean_work)
        x->clean_work(x);
    gv_bundle_remove(x->b.dir);
    if (x->b.cg_made)
        gv_cgroup_remove(x->b.cgpath, x->b.cg_v2);
}

static void cleanup_done(void *arg)
{
    struct gv_sbx *x = arg;
    x->clean_done(x);
}

void gv_sbx_maybe_cleanup(struct gv_sbx *x)
{
    if (!x->dying || x->cleaning || x->helpers > 0 || (x->run_spawned && !x->run_exited))
        return;
    x->cleaning = 1;
    if (x->ev_timer)
        event_del(x->ev_timer);
    if (x->g->destroying || x->g->host->work_submit(x->g->host, cleanup_work, cleanup_done, x) < 0) {
        cleanup_work(x);
        cleanup_done(x);
    }
}

void gv_sbx_helper_done(void *arg, int status, const char *out, size_t outlen)
{
    (void)status;
    (void)out;
    (void)outlen;
    struct gv_sbx *x = arg;
    x->helpers--;
    gv_sbx_maybe_cleanup(x);
}

void gv_sbx_helper(struct gv_sbx *x, int del)
{
    struct gv *g = x->g;
    char root[PATH_MAX + 16];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    char *kill_argv[] = {g->runsc, root, "kill", x->b.cid, "KILL", NULL};
    char *del_argv[] = {g->runsc, root, "delete", "--force", x->b.cid, NULL};
    if (eai_pc_child_spawn(g->host->base, g, del ? del_argv : kill_argv, -1, -1, -1, 1,
                           del ? GV_DELETE_TIMEOUT_MS : GV_RUNSC_TIMEOUT_MS, gv_sbx_helper_done, x))
        x->helpers++;
}

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct gv_sbx *x = arg;
    if (x->run_exited || !x->run)
        return;
    kill(eai_pc_child_pid(x->run), SIGKILL);
    gv_sbx_helper(x, 1);
}

void gv_sbx_stop(struct gv_sbx *x, int no_kill)
{
    x->dying = 1;
    if (x->run_spawned && !x->run_exited) {
        if (!no_kill)
            gv_sbx_helper(x, 0);
        if (x->ev_timer) {
            event_del(x->ev_timer);
            event_free(x->ev_timer);
        }
        x->ev_timer = evtimer_new(x->g->host->base, on_grace, x);
        struct timeval tv = {GV_KILL_GRACE_MS / 1000, (GV_KILL_GRACE_MS % 1000) * 1000};
        if (!x->ev_timer || evtimer_add(x->ev_timer, &tv) < 0)
            on_grace(-1, 0, x);
    }
    gv_sbx_maybe_cleanup(x);
}
