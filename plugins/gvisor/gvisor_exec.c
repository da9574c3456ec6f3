/*
 * One execution in the gVisor backend (docs/gvisor.md):
 *
 *   PARKED    waiting for the start-up probe / sweep
 *   PREPARING worker: bundle, tmpfs, input files, config.json, cgroup leaves
 *   RUNNING   loop: attached `runsc run` child, pidfd, pipes, timeout timer
 *   FINISHING worker: cgroup stats, collect, unmount, remove bundle and leaves
 *   then on_exit exactly once, and the execution is freed.
 *
 * Timeout and cancel: flag, `runsc kill <cid> KILL` as an async child; when
 * the run has not ended GV_KILL_GRACE_MS later, SIGKILL it and
 * `runsc delete --force <cid>`.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "gvisor.h"

enum gv_state { GV_PARKED = 0, GV_PREPARING, GV_RUNNING, GV_FINISHING };

struct gv_exec {
    struct gv *g;
    struct gv_exec *next;
    const struct eai_iso_job *job;
    struct eai_iso_callbacks cb;
    void *cb_arg;
    enum gv_state state;
    struct gv_bundle b;

    /* outcome inputs */
    int early_code;             /* != 0: ended before running: EAI_E_* */
    char msg[256];
    int cancelled, timed_out, stopping, hard_killed;

    struct eai_pc_child *run;
    int run_spawned, run_exited, wait_status;
    int helpers;                /* kill/delete children still running */

    struct eai_pc_stream out, err;
    int in_fd;
    struct event *ev_in;
    size_t in_off;
    char err_tail[EAI_PC_ERR_TAIL + 1];
    size_t err_tail_len;

    struct event *ev_timeout, *ev_grace, *ev_soon;
    int64_t t_start_ns, t_end_ns;

    struct gv_stats stats;
    struct eai_pc_collect_result col;

    struct gv_pooled *pooled;   /* warm sandbox in use (runsc exec), or NULL */
    double cpu0;                /* its cpu usage before our program */
};

static void exec_unlink(struct gv_exec *e)
{
    for (struct gv_exec **pp = &e->g->execs; *pp; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            return;
        }
    }
}

static void exec_free(struct gv_exec *e)
{
    eai_pc_stream_close(&e->out);
    eai_pc_stream_close(&e->err);
    if (e->ev_in)
        event_free(e->ev_in);
    if (e->in_fd >= 0)
        close(e->in_fd);
    if (e->ev_timeout)
        event_free(e->ev_timeout);
    if (e->ev_grace)
        event_free(e->ev_grace);
    if (e->ev_soon)
        event_free(e->ev_soon);
    eai_pc_collect_free(&e->col);
    free(e);
}

/* ------------------------------------------------------------ finishing */

static void deliver(struct gv_exec *e)
{
    struct eai_iso_result r;
    eai_pc_result_init(&r, e->t_start_ns, e->t_end_ns, e->stats.cpu_seconds, e->stats.peak_mb, &e->col);
    if (e->cancelled) {
        r.outcome = EAI_OUT_CANCELLED;
    } else if (e->early_code) {
        r.outcome = EAI_OUT_ERROR;
        r.error_code = (enum eai_code)e->early_code;
        r.error_message = e->msg;
    } else if (e->timed_out) {
        r.outcome = EAI_OUT_TIMEOUT;
    } else if (e->stats.oom) {
        r.outcome = EAI_OUT_OOM;
    } else if (WIFSIGNALED(e->wait_status)) {
        /* runsc itself died of a signal we did not send. */
        r.outcome = EAI_OUT_ERROR;
        r.error_code = EAI_E_SANDBOX_FAILED;
        snprintf(e->msg, sizeof(e->msg), "runsc killed by signal %d", WTERMSIG(e->wait_status));
        r.error_message = e->msg;
    } else {
        int code = WEXITSTATUS(e->wait_status);
        e->err_tail[e->err_tail_len] = '\0';
        if (code == 128 && strstr(e->err_tail, "error finding executable")) {
            r.outcome = EAI_OUT_EXITED; /* like a shell: command not found */
            r.exit_code = 127;
        } else if (code == 128 && (strstr(e->err_tail, "running container:") ||
                                   strstr(e->err_tail, "creating container:") ||
                                   strstr(e->err_tail, "executing processes for container:"))) {
            r.outcome = EAI_OUT_ERROR;
            r.error_code = EAI_E_SANDBOX_FAILED;
            snprintf(e->msg, sizeof(e->msg), "the sandbox runtime failed to start the program");
            r.error_message = e->msg;
        } else {
            eai_pc_result_exited(&r, code);
        }
    }
    struct gv *g = e->g;
    exec_unlink(e);
    if (!g->destroying && e->cb.on_exit)
        e->cb.on_exit(e->cb_arg, &r);
    exec_free(e);
}

static void finish_work(void *arg)
{
    struct gv_exec *e = arg;
    if (e->run_spawned) {
        gv_cgroup_stats(&e->b, &e->stats);
        if (e->pooled) {
            e->stats.cpu_seconds -= e->cpu0;
            if (e->stats.cpu_seconds < 0)
                e->stats.cpu_seconds = 0;
        }
        eai_pc_collect(e->b.dir, e->b.mounted, e->job, &e->col);
    }
    if (e->pooled)
        return; /* the pool tears its sandbox down (gv_pool_release) */
    if (e->b.mounted || e->b.dir[0])
        gv_bundle_remove(e->b.dir);
    if (e->b.cg_made)
        gv_cgroup_remove(e->b.cgpath, e->b.cg_v2);
}

static void finish_done(void *arg)
{
    struct gv_exec *e = arg;
    struct gv *g = e->g;
    struct gv_pooled *pooled = e->pooled;
    deliver(e);
    if (pooled)
        gv_pool_release(pooled);
    gv_release(g);
}

static void begin_finish(struct gv_exec *e)
{
    if (e->state == GV_FINISHING)
        return;
    e->state = GV_FINISHING;
    if (e->t_start_ns && !e->t_end_ns)
        e->t_end_ns = eai_pc_mono_ns();
    if (e->ev_timeout)
        event_del(e->ev_timeout);
    if (e->ev_grace)
        event_del(e->ev_grace);
    e->g->inflight++;
    if (e->g->destroying || e->g->host->work_submit(e->g->host, finish_work, finish_done, e) < 0) {
        /* No worker (shutting down or queue full): clean up here. */
        finish_work(e);
        finish_done(e);
    }
}

static void maybe_finish(struct gv_exec *e)
{
    if (e->state == GV_RUNNING && e->run_exited && e->helpers == 0)
        begin_finish(e);
}

/* ------------------------------------------------------------ output */

static void stream_read(struct gv_exec *e, struct eai_pc_stream *s, int drain_all)
{
    int64_t cap = e->job->output_bytes > 0 ? e->job->output_bytes : EAI_PC_DEFAULT_OUTPUT;
    /* drain_all: after the run ended, read what is buffered, but bounded: a
     * sandbox process still alive (hard kill) must not pin the loop. */
    eai_pc_stream_read(s, drain_all ? 64 : 8, cap, e->err_tail, &e->err_tail_len, &e->cb, e->cb_arg,
                       &e->g->destroying);
}

static void on_out(evutil_socket_t fd, short what, void *arg)
{
    struct gv_exec *e = arg;
    stream_read(e, &e->out, 0);
}

static void on_err(evutil_socket_t fd, short what, void *arg)
{
    struct gv_exec *e = arg;
    stream_read(e, &e->err, 0);
}

static void stdin_close(struct gv_exec *e)
{
    if (e->ev_in) {
        event_free(e->ev_in);
        e->ev_in = NULL;
    }
    if (e->in_fd >= 0) {
        close(e->in_fd);
        e->in_fd = -1;
    }
}

static void on_in(evutil_socket_t fd, short what, void *arg)
{
    struct gv_exec *e = arg;
    if (eai_pc_stdin_pump(e->in_fd, e->job->stdin_data, e->job->stdin_len, &e->in_off))
        stdin_close(e);
}

/* ------------------------------------------------------------ stopping */

static void helper_done(void *arg, int status, const char *out, size_t outlen)
{
    struct gv_exec *e = arg;
    e->helpers--;
    maybe_finish(e);
}

static void spawn_helper(struct gv_exec *e, const char *verb, int64_t timeout_ms)
{
    struct gv *g = e->g;
    char root[PATH_MAX + 16];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    char *kill_argv[] = {g->runsc, root, "kill", e->b.cid, "KILL", NULL};
    char *del_argv[] = {g->runsc, root, "delete", "--force", e->b.cid, NULL};
    char **argv = !strcmp(verb, "kill") ? kill_argv : del_argv;
    if (eai_pc_child_spawn(g->host->base, g, argv, -1, -1, -1, 1, timeout_ms, helper_done, e))
        e->helpers++;
    else
        g->host->log(g->host, GV_COMPONENT, EAI_LOG_WARN, "cannot run runsc %s for %s: %s", verb, e->b.cid,
                     strerror(errno));
}

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
    struct gv_exec *e = arg;
    if (e->run_exited || !e->run)
        return;
    e->hard_killed = 1;
    e->g->host->log(e->g->host, GV_COMPONENT, EAI_LOG_WARN,
                    "%s did not stop after runsc kill: SIGKILL and delete --force", e->b.cid);
    kill(eai_pc_child_pid(e->run), SIGKILL);
    spawn_helper(e, "delete", GV_DELETE_TIMEOUT_MS);
}

static void exec_stop(struct gv_exec *e)
{
    if (e->stopping || e->state != GV_RUNNING || e->run_exited)
        return;
    e->stopping = 1;
    spawn_helper(e, "kill", GV_RUNSC_TIMEOUT_MS);
    e->ev_grace = evtimer_new(e->g->host->base, on_grace, e);
    struct timeval tv = {GV_KILL_GRACE_MS / 1000, (GV_KILL_GRACE_MS % 1000) * 1000};
    if (!e->ev_grace || evtimer_add(e->ev_grace, &tv) < 0)
        on_grace(-1, 0, e);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct gv_exec *e = arg;
    if (e->run_exited)
        return;
    e->timed_out = 1;
    exec_stop(e);
}

/* ------------------------------------------------------------ running */

static void run_done(void *arg, int status, const char *out, size_t outlen)
{
    struct gv_exec *e = arg;
    e->run = NULL;
    e->run_exited = 1;
    e->wait_status = status;
    e->t_end_ns = eai_pc_mono_ns();
    /* Whatever the sandbox wrote before it ended is in the pipes now; do
     * not wait for EOF (a stray holder of the write end must not stall us). */
    stream_read(e, &e->out, 1);
    stream_read(e, &e->err, 1);
    eai_pc_stream_close(&e->out);
    eai_pc_stream_close(&e->err);
    stdin_close(e);
    maybe_finish(e);
}

static int make_pipe(int p[2], int parent_end)
{
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    int fl = fcntl(p[parent_end], F_GETFL);
    if (fl < 0 || fcntl(p[parent_end], F_SETFL, fl | O_NONBLOCK) < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    return 0;
}

static int run_spawn(struct gv_exec *e)
{
    struct gv *g = e->g;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    if (make_pipe(in, 1) < 0 || make_pipe(out, 0) < 0 || make_pipe(err, 0) < 0)
        goto fail;
    char root[PATH_MAX + 16], plat[64];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    snprintf(plat, sizeof(plat), "--platform=%s", g->platform);
    char procf[PATH_MAX + 32];
    snprintf(procf, sizeof(procf), "%s/process.json", e->b.dir);
    char *run_argv[] = {g->runsc, root, "--network=none", plat, "run", "--bundle", e->b.dir, e->b.cid, NULL};
    char *exec_argv[] = {g->runsc, root, "exec", "--process", procf, e->b.cid, NULL};
    char **argv = e->pooled ? exec_argv : run_argv;
    e->run_spawned = 1;
    e->run = eai_pc_child_spawn(g->host->base, g, argv, in[0], out[1], err[1], 0, 0, run_done, e);
    if (!e->run) {
        snprintf(e->msg, sizeof(e->msg), "cannot start runsc: %s", strerror(errno));
        goto fail;
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    e->in_fd = in[1];
    e->out.fd = out[0];
    e->err.fd = err[0];
    e->out.ev = event_new(g->host->base, e->out.fd, EV_READ | EV_PERSIST, on_out, e);
    e->err.ev = event_new(g->host->base, e->err.fd, EV_READ | EV_PERSIST, on_err, e);
    if (e->out.ev)
        event_add(e->out.ev, NULL);
    if (e->err.ev)
        event_add(e->err.ev, NULL);
    if (e->job->stdin_len > 0) {
        e->ev_in = event_new(g->host->base, e->in_fd, EV_WRITE | EV_PERSIST, on_in, e);
        if (e->ev_in)
            event_add(e->ev_in, NULL);
        else
            stdin_close(e);
    } else {
        stdin_close(e);
    }
    if (!e->out.ev || !e->err.ev) {
        /* Cannot read it: stop it rather than let it block on a full pipe. */
        snprintf(e->msg, sizeof(e->msg), "out of memory watching the sandbox");
        e->early_code = EAI_E_SANDBOX_FAILED;
        exec_stop(e);
    }
    if (e->job->timeout_ms > 0) {
        e->ev_timeout = evtimer_new(g->host->base, on_timeout, e);
        struct timeval tv = {e->job->timeout_ms / 1000, (e->job->timeout_ms % 1000) * 1000};
        if (e->ev_timeout)
            evtimer_add(e->ev_timeout, &tv);
    }
    return 0;
fail:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (out[i] >= 0)
            close(out[i]);
        if (err[i] >= 0)
            close(err[i]);
    }
    e->run_spawned = 0;
    if (!e->msg[0])
        snprintf(e->msg, sizeof(e->msg), "cannot create pipes: %s", strerror(errno));
    return -1;
}

/* ------------------------------------------------------------ preparing */

static void prepare_work(void *arg)
{
    struct gv_exec *e = arg;
    char msg[256];
    if (e->pooled) {
        /* Warm sandbox: files into its tmpfs, the program as a process file. */
        char procf[PATH_MAX + 32];
        snprintf(procf, sizeof(procf), "%s/process.json", e->b.dir);
        if (eai_pc_write_inputs(e->b.dir, e->b.uid, e->job, msg, sizeof(msg)) < 0 ||
            gv_write_process(&e->b, e->job, procf, msg, sizeof(msg)) < 0) {
            e->early_code = EAI_E_SANDBOX_FAILED;
            snprintf(e->msg, sizeof(e->msg), "preparing the sandbox: %s", msg);
            return;
        }
        gv_cgroup_reset_peak(&e->b);
        struct gv_stats st;
        gv_cgroup_stats(&e->b, &st);
        e->cpu0 = st.cpu_seconds;
        return;
    }
    if (gv_bundle_prepare(&e->b, e->job, msg, sizeof(msg)) < 0) {
        e->early_code = EAI_E_SANDBOX_FAILED;
        snprintf(e->msg, sizeof(e->msg), "preparing the sandbox: %s", msg);
    }
}

static void prepare_done(void *arg)
{
    struct gv_exec *e = arg;
    struct gv *g = e->g;
    e->state = GV_RUNNING;
    if (e->early_code || e->cancelled || g->destroying) {
        if (e->early_code)
            g->host->log(g->host, GV_COMPONENT, EAI_LOG_ERROR, "%s: %s", e->b.cid, e->msg);
        begin_finish(e);
        gv_release(g);
        return;
    }
    e->t_start_ns = eai_pc_mono_ns();
    if (run_spawn(e) < 0) {
        e->early_code = EAI_E_SANDBOX_FAILED;
        g->host->log(g->host, GV_COMPONENT, EAI_LOG_ERROR, "%s: %s", e->b.cid, e->msg);
        begin_finish(e);
        gv_release(g);
        return;
    }
    if (e->cb.on_started)
        e->cb.on_started(e->cb_arg);
    gv_release(g);
}

static void launch(struct gv_exec *e)
{
    struct gv *g = e->g;
    e->state = GV_PREPARING;
    g->inflight++;
    if (g->host->work_submit(g->host, prepare_work, prepare_done, e) < 0) {
        e->early_code = EAI_E_SANDBOX_FAILED;
        snprintf(e->msg, sizeof(e->msg), "worker queue full");
        prepare_done(e);
    }
}

static void on_soon(evutil_socket_t fd, short what, void *arg)
{
    struct gv_exec *e = arg;
    e->state = GV_RUNNING;
    begin_finish(e);
}

/* End an execution that never ran, from the loop, after start() returned. */
static void end_soon(struct gv_exec *e, int code, const char *msg)
{
    if (code)
        e->early_code = code;
    if (msg)
        snprintf(e->msg, sizeof(e->msg), "%s", msg);
    if (!e->ev_soon)
        e->ev_soon = evtimer_new(e->g->host->base, on_soon, e);
    struct timeval zero = {0, 0};
    if (!e->ev_soon || evtimer_add(e->ev_soon, &zero) < 0) {
        e->state = GV_RUNNING;
        begin_finish(e);
    }
}

/* ------------------------------------------------------------ API */

static void make_cid(struct gv *g, const char *id, char *out, size_t len)
{
    char clean[64];
    size_t n = 0;
    for (const char *p = id ? id : ""; *p && n < 48; p++) {
        char c = *p;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_')
            clean[n++] = c;
    }
    clean[n] = '\0';
    unsigned char rnd[4] = {0};
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        memset(rnd, 0, sizeof(rnd));
    snprintf(out, len, GV_CID_PREFIX "%s%s%02x%02x%02x%02x-%lu", clean, n ? "-" : "", rnd[0], rnd[1], rnd[2],
             rnd[3], ++g->seq);
}

int gv_exec_start(struct gv *g, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb, void *cb_arg,
                  void **handle, struct eai_error **err)
{
    if (g->probe_state < 0) {
        if (err)
            *err = g->host->error_new(EAI_E_SANDBOX_UNAVAILABLE, 0, "gvisor not ready: %s", g->reason);
        return -1;
    }
    if (!job || !job->argv || !job->argv[0] || !cb || !cb->on_exit) {
        if (err)
            *err = g->host->error_new(EAI_E_VALIDATION_FAILED, 0, "gvisor: job without a command or callbacks");
        return -1;
    }
    for (size_t i = 0; i < job->nfiles; i++) {
        if (!eai_pc_tmp_path_valid(job->files[i].path)) {
            if (err)
                *err = g->host->error_new(EAI_E_VALIDATION_FAILED, 0, "gvisor: file path %s is not under /tmp",
                                          job->files[i].path ? job->files[i].path : "(null)");
            return -1;
        }
    }
    struct gv_exec *e = calloc(1, sizeof(*e));
    if (!e) {
        if (err)
            *err = g->host->error_new(EAI_E_INTERNAL, ENOMEM, "gvisor: out of memory");
        return -1;
    }
    e->g = g;
    e->job = job;
    memcpy(&e->cb, cb, cb->size < sizeof(e->cb) ? cb->size : sizeof(e->cb));
    e->cb_arg = cb_arg;
    e->out = (struct eai_pc_stream){.fd = -1, .which = EAI_STREAM_STDOUT};
    e->err = (struct eai_pc_stream){.fd = -1, .which = EAI_STREAM_STDERR};
    e->in_fd = -1;
    e->b.uid = g->uid;
    e->b.cg_v2 = g->cg_v2;
    make_cid(g, job->id, e->b.cid, sizeof(e->b.cid));
    e->next = g->execs;
    g->execs = e;
    *handle = e;
    if (!job->image || g->host->image_rootfs(g->host, job->image, e->b.rootfs, sizeof(e->b.rootfs)) < 0) {
        char m[256];
        snprintf(m, sizeof(m), "image %s is not in the local image store", job->image ? job->image : "(none)");
        end_soon(e, EAI_E_IMAGE_MISSING, m);
        return 0;
    }
    snprintf(e->b.dir, sizeof(e->b.dir), "%s/%s", g->work_dir, e->b.cid);
    snprintf(e->b.cgpath, sizeof(e->b.cgpath), "%s/%s", g->cg_parent, e->b.cid);
    if (gv_ready_gate(g)) {
        struct gv_shape sh;
        memset(&sh, 0, sizeof(sh));
        snprintf(sh.rootfs, sizeof(sh.rootfs), "%s", e->b.rootfs);
        sh.memory = job->memory_bytes;
        sh.cpu = job->cpu_millis;
        sh.disk = job->disk_bytes;
        sh.pids = job->pids;
        e->pooled = gv_pool_take(g, &sh);
        if (e->pooled)
            e->b = *gv_pooled_bundle(e->pooled);
        launch(e);
    } else {
        e->state = GV_PARKED;
    }
    return 0;
}

void gv_exec_cancel(struct gv *g, void *handle)
{
    struct gv_exec *e = handle;
    int live = 0;
    for (struct gv_exec *x = g->execs; x; x = x->next)
        live |= (x == e);
    if (!live || e->cancelled || e->state == GV_FINISHING)
        return;
    e->cancelled = 1;
    if (e->state == GV_PARKED)
        end_soon(e, 0, NULL);
    else if (e->state == GV_RUNNING && e->run_spawned && !e->run_exited)
        exec_stop(e);
    /* PREPARING: prepare_done sees the flag. */
}

void gv_exec_unpark_all(struct gv *g)
{
    for (struct gv_exec *e = g->execs; e; e = e->next) {
        if (e->state != GV_PARKED || e->ev_soon)
            continue;
        if (g->probe_state < 0) {
            char m[300];
            snprintf(m, sizeof(m), "gvisor not ready: %s", g->reason);
            end_soon(e, EAI_E_SANDBOX_UNAVAILABLE, m);
        } else {
            launch(e);
        }
    }
}

/* Executions holding a sandbox or about to (preparing, running, finishing). */
int gv_exec_busy(const struct gv *g)
{
    int n = 0;
    for (const struct gv_exec *e = g->execs; e; e = e->next)
        n += e->state != GV_PARKED;
    return n;
}

/* Shutdown (g->destroying is set, so no callback reaches core), in two
 * passes over the running sandboxes: kill_only kills them all (runsc kill,
 * then SIGKILL to the run process); the second pass deletes them, by then
 * already dead (a delete --force of a live sandbox takes seconds, so one
 * kill-then-delete after another made shutdown slow).  eai_pc_child_reap_all()
 * then reaps their runsc children, whose callbacks finish and free the
 * executions synchronously. */
void gv_exec_destroy_all(struct gv *g, int kill_only)
{
    struct gv_exec *e = g->execs;
    while (e) {
        struct gv_exec *next = e->next;
        char root[PATH_MAX + 16];
        snprintf(root, sizeof(root), "--root=%s", g->state_dir);
        if (e->state == GV_RUNNING && e->run && !e->run_exited) {
            if (kill_only) {
                char *kill_argv[] = {g->runsc, root, "kill", e->b.cid, "KILL", NULL};
                eai_pc_run_sync(kill_argv, GV_RUNSC_TIMEOUT_MS, NULL, 0);
                kill(eai_pc_child_pid(e->run), SIGKILL);
            } else {
                char *del_argv[] = {g->runsc, root, "delete", "--force", e->b.cid, NULL};
                eai_pc_run_sync(del_argv, GV_DELETE_TIMEOUT_MS, NULL, 0);
            }
        } else if (kill_only) {
            /* the rest is for the second pass */
        } else if (e->state == GV_PARKED || (e->state == GV_RUNNING && !e->run_spawned && !e->ev_soon)) {
            exec_unlink(e);
            exec_free(e);
        } else if (e->ev_soon) {
            /* ending soon without having run: do it now */
            event_del(e->ev_soon);
            e->state = GV_RUNNING;
            begin_finish(e);
        }
        /* PREPARING / FINISHING: their worker step's done callback cleans up. */
        e = next;
    }
}
