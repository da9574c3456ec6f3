/*
 * The local runner: one lifecycle for a sandbox run on this host, shared by
 * the gVisor and Kata backends (docs/plugin-common.md).  The backend is a
 * driver (struct eai_pc_driver_ops, after crun's struct custom_handler_s):
 * it lays out the bundle, names the child's argv, the stop steps, when the
 * end is settled and what the end means; the runner owns the rest:
 *
 *   PARKED    waiting for ops->gate (the probe, the start-up sweep)
 *   PREPARING worker: ops->prepare
 *   RUNNING   loop: the child (pidfd), its stdin/stdout/stderr pipes, the
 *             timeout; timeout and cancel walk ops->stop_step.  Or, when
 *             ops->adopt takes it, a program started in a sandbox already
 *             running, whose end the driver reports (eai_pc_run_exited)
 *   SETTLING  the child ended: wait for the stop helpers and, at most
 *             ops->settle_ms, for ops->settled
 *   FINISHING worker: ops->end_work, collect, ops->teardown_work
 *   then on_exit exactly once, and the run is freed.
 *
 * This file is the lifecycle; pc_runner_api.c is what drivers call (start,
 * cancel, unpark, shutdown).  Loop thread only, never blocking.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include <eai/plugin.h>

#include "pc_runner_int.h"

/* ------------------------------------------------------------ runs */

void eai_pc_run_unlink(struct eai_pc_run *e)
{
    for (struct eai_pc_run **pp = &e->runner->runs; *pp; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            return;
        }
    }
}

static void ev_free(struct event **ev)
{
    if (*ev) {
        event_free(*ev);
        *ev = NULL;
    }
}

void eai_pc_run_free(struct eai_pc_run *e)
{
    eai_pc_watchdog_disarm(&e->wd_fd); /* bundle and cgroup are gone by now */
    eai_pc_stream_close(&e->out);
    eai_pc_stream_close(&e->err);
    ev_free(&e->ev_in);
    if (e->in_fd >= 0)
        close(e->in_fd);
    free(e->sin_buf);
    ev_free(&e->ev_timeout);
    ev_free(&e->ev_stop);
    ev_free(&e->ev_settle);
    ev_free(&e->ev_soon);
    ev_free(&e->ev_hold);
    eai_pc_collect_free(&e->col);
    free(e);
}

/* ------------------------------------------------------------ finishing */

static void deliver(struct eai_pc_run *e)
{
    struct eai_pc_runner *R = e->runner;
    struct eai_iso_result res;
    eai_pc_result_init(&res, e->t_start_ns, e->t_end_ns, e->stats.cpu_seconds, e->stats.peak_mb, &e->col);
    e->err_tail[e->err_tail_len] = '\0';
    if (e->cancelled) {
        res.outcome = EAI_OUT_CANCELLED;
    } else if (e->early_code) {
        res.outcome = EAI_OUT_ERROR;
        res.error_code = (enum eai_code)e->early_code;
        res.error_message = e->msg;
    } else if (e->timed_out) {
        res.outcome = EAI_OUT_TIMEOUT;
    } else {
        R->ops->classify(R->drv, e, &res, e->msg, sizeof(e->msg));
    }
    if (res.outcome == EAI_OUT_ERROR && !destroying(R)) {
        /* a warm sandbox's name is not the execution's: then both */
        const char *id = e->job->id && !strstr(e->b.cid, e->job->id) ? e->job->id : NULL;
        R->host->log(R->host, R->ops->component, EAI_LOG_ERROR, "%s%s%s%s: %s%s%.300s", e->b.cid,
                     id ? " (execution " : "", id ? id : "", id ? ")" : "",
                     res.error_message ? res.error_message : "", e->err_tail_len ? ": " : "", e->err_tail);
    }
    res.stderr_runtime_bytes = eai_pc_runtime_delivered(&e->err, e->err_runtime_len);
    eai_pc_run_unlink(e);
    if (!destroying(R) && e->cb.on_exit)
        e->cb.on_exit(e->cb_arg, &res);
    if (R->ops->retire)
        R->ops->retire(R->drv, e);
}

static void finish_work(void *arg)
{
    struct eai_pc_run *e = arg;
    struct eai_pc_runner *R = e->runner;
    if (e->run_spawned) {
        if (R->ops->end_work)
            R->ops->end_work(R->drv, e);
        eai_pc_collect(e->b.dir, e->b.mounted, e->job, &e->col);
    }
    if (R->ops->teardown_work)
        R->ops->teardown_work(R->drv, e);
}

static void finish_done(void *arg)
{
    struct eai_pc_run *e = arg;
    struct eai_pc_runner *R = e->runner;
    deliver(e);
    eai_pc_run_free(e);
    R->ops->release(R->drv); /* may free the driver and R: last */
}

void eai_pc_run_finish(struct eai_pc_run *e)
{
    struct eai_pc_runner *R = e->runner;
    if (e->state == PC_FINISHING)
        return;
    e->state = PC_FINISHING;
    if (e->t_start_ns && !e->t_end_ns)
        e->t_end_ns = eai_monotonic_ns();
    if (e->ev_timeout)
        event_del(e->ev_timeout);
    if (e->ev_stop)
        event_del(e->ev_stop);
    if (e->ev_settle)
        event_del(e->ev_settle);
    hold(R);
    if (destroying(R) || R->host->work_submit(R->host, finish_work, finish_done, e) < 0) {
        /* No worker (shutting down or queue full): clean up here. */
        finish_work(e);
        finish_done(e);
    }
}

static int settled(const struct eai_pc_run *e)
{
    const struct eai_pc_runner *R = e->runner;
    return !R->ops->settled || R->ops->settled(R->drv, e);
}

static void maybe_finish(struct eai_pc_run *e)
{
    if (e->state == PC_SETTLING && e->helpers == 0 && (settled(e) || !e->settle_armed))
        eai_pc_run_finish(e);
}

void eai_pc_run_poke(struct eai_pc_run *run)
{
    maybe_finish(run);
}

static void on_settle(evutil_socket_t fd, short what, void *arg)
{
    struct eai_pc_run *e = arg;
    /* What the driver waited for never came: decide without it. */
    e->settle_armed = 0;
    maybe_finish(e);
}

/* ------------------------------------------------------------ output */

static void stream_read(struct eai_pc_run *e, struct eai_pc_stream *s, int ended)
{
    const struct eai_pc_runner *R = e->runner;
    int64_t cap = e->job->output_bytes > 0 ? e->job->output_bytes : EAI_PC_DEFAULT_OUTPUT;
    /* ended: read what is buffered, as far as the driver wants (a sandbox
     * process still alive after a hard kill must not pin the loop). */
    eai_pc_stream_read(s, ended ? R->ops->drain_reads : 8, cap, e->err_tail, &e->err_tail_len, &e->cb, e->cb_arg,
                       R->destroying);
}

static void on_out(evutil_socket_t fd, short what, void *arg)
{
    struct eai_pc_run *e = arg;
    stream_read(e, &e->out, 0);
}

static void on_err(evutil_socket_t fd, short what, void *arg)
{
    struct eai_pc_run *e = arg;
    stream_read(e, &e->err, 0);
}

static void stdin_close(struct eai_pc_run *e)
{
    e->sin_closed = 1;
    ev_free(&e->ev_in);
    if (e->in_fd >= 0) {
        /* an adopted run's stdin may be a socket whose other copy stays
         * open (ops->adopt): the end of input is its shutdown (a pipe: ENOTSOCK) */
        shutdown(e->in_fd, SHUT_WR);
        close(e->in_fd);
        e->in_fd = -1;
    }
}

/* All input written.  Some runtimes (ctr) lose an EOF read before the
 * program exists, so the pipe stays open until the run has started. */
static void stdin_done(struct eai_pc_run *e)
{
    ev_free(&e->ev_in);
    if (e->started)
        stdin_close(e);
}

int eai_pc_job_stdin_stream(const struct eai_iso_job *job)
{
    return job && job->size >= EAI_ISO_JOB_SIZE_1_4 && job->stdin_stream;
}

/* Streamed stdin: write what is buffered; when it is all taken, wait for
 * more (the event off) or, after eof, close the program's stdin. */
static void stream_pump(struct eai_pc_run *e)
{
    if (e->in_fd < 0 || !e->ev_in)
        return;
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old); /* a closed reader must not raise SIGPIPE */
    int gone = 0;
    while (e->sin_off < e->sin_len) {
        ssize_t w = write(e->in_fd, e->sin_buf + e->sin_off, e->sin_len - e->sin_off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        if (w <= 0) {
            gone = 1;
            if (errno == EPIPE) {
                struct timespec zero = {0, 0};
                sigtimedwait(&pipe_set, NULL, &zero);
            }
            break;
        }
        e->sin_off += (size_t)w;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (gone) {
        /* the program closed its stdin: what is left is dropped, later
         * writes are refused (stdin_closed) */
        e->sin_off = e->sin_len = 0;
        stdin_close(e);
        return;
    }
    if (e->sin_off < e->sin_len) {
        event_add(e->ev_in, NULL); /* the pipe is full: on when it drains */
        return;
    }
    e->sin_off = e->sin_len = 0;
    if (e->sin_eof)
        stdin_done(e);
    else
        event_del(e->ev_in);
}

static void on_in(evutil_socket_t fd, short what, void *arg)
{
    struct eai_pc_run *e = arg;
    if (eai_pc_job_stdin_stream(e->job)) {
        stream_pump(e);
        return;
    }
    if (eai_pc_stdin_pump(e->in_fd, e->job->stdin_data, e->job->stdin_len, &e->in_off))
        stdin_done(e);
}

void eai_pc_run_started(struct eai_pc_run *e)
{
    e->started = 1;
    if (e->in_fd >= 0 && !e->ev_in && !(eai_pc_job_stdin_stream(e->job) && !e->sin_eof))
        stdin_close(e); /* all written (or none to write): EOF now */
    if (e->started_reported)
        return;
    e->started_reported = 1;
    if (e->cb.on_started && !destroying(e->runner))
        e->cb.on_started(e->cb_arg);
}

pid_t eai_pc_run_pid(const struct eai_pc_run *e)
{
    if (e->child)
        return eai_pc_child_pid(e->child);
    return e->adopted_pid > 0 && !e->run_exited ? e->adopted_pid : -1;
}

/* ------------------------------------------------------------ stopping */

static void helper_done(void *arg, int status, const char *out, size_t outlen)
{
    struct eai_pc_run *e = arg;
    e->helpers--;
    maybe_finish(e);
}

static void stop_next(struct eai_pc_run *e);

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    stop_next(arg);
}

/* The driver's next stop step: warn, kill the child, run a helper, arm
 * the step after it. */
static void stop_next(struct eai_pc_run *e)
{
    struct eai_pc_runner *R = e->runner;
    if (e->run_exited || eai_pc_run_pid(e) < 0)
        return;
    struct eai_pc_stop st;
    memset(&st, 0, sizeof(st));
    st.next_ms = -1;
    if (R->ops->stop_step(R->drv, e, e->stop_next, &st) < 0)
        return;
    e->stop_next++;
    if (st.warn[0])
        R->host->log(R->host, R->ops->component, EAI_LOG_WARN, "%s", st.warn);
    if (st.kill_child) {
        e->hard_killed = 1;
        pid_t pid = eai_pc_run_pid(e);
        if (st.kill_child > 1)
            kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
    }
    if (st.argv[0]) {
        if (eai_pc_child_spawn(R->host->base, R->drv, st.argv, -1, -1, -1, 1, st.helper_timeout_ms, helper_done,
                               e))
            e->helpers++;
        else
            R->host->log(R->host, R->ops->component, EAI_LOG_WARN, "cannot run %s for %s: %s",
                         st.what ? st.what : st.argv[0], e->b.cid, strerror(errno));
    }
    if (st.next_ms < 0)
        return;
    if (!e->ev_stop)
        e->ev_stop = evtimer_new(R->host->base, on_stop, e);
    struct timeval tv = {st.next_ms / 1000, (st.next_ms % 1000) * 1000};
    if (!e->ev_stop || evtimer_add(e->ev_stop, &tv) < 0)
        stop_next(e);
}

void eai_pc_run_stop(struct eai_pc_run *e)
{
    if (e->stopping || e->state != PC_RUNNING || e->run_exited)
        return;
    e->stopping = 1;
    stop_next(e);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct eai_pc_run *e = arg;
    if (e->run_exited)
        return;
    e->timed_out = 1;
    eai_pc_run_stop(e);
}

/* ------------------------------------------------------------ running */

static void child_done(void *arg, int status, const char *out, size_t outlen)
{
    struct eai_pc_run *e = arg;
    struct eai_pc_runner *R = e->runner;
    e->child = NULL;
    e->run_exited = 1;
    e->wait_status = status;
    e->t_end_ns = eai_monotonic_ns();
    /* Whatever the sandbox wrote before it ended is in the pipes now; do
     * not wait for EOF (a stray holder of the write end must not stall us). */
    stream_read(e, &e->out, 1);
    stream_read(e, &e->err, 1);
    eai_pc_stream_close(&e->out);
    eai_pc_stream_close(&e->err);
    stdin_close(e);
    if (e->ev_timeout)
        event_del(e->ev_timeout);
    if (e->ev_stop)
        event_del(e->ev_stop);
    e->state = PC_SETTLING;
    int64_t ms = R->ops->settle_ms && !destroying(R) && !settled(e) ? R->ops->settle_ms(R->drv, e) : 0;
    if (ms > 0) {
        if (!e->ev_settle)
            e->ev_settle = evtimer_new(R->host->base, on_settle, e);
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        e->settle_armed = e->ev_settle && evtimer_add(e->ev_settle, &tv) == 0;
    }
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

static void watch_pipes(struct eai_pc_run *e)
{
    struct event_base *base = e->runner->host->base;
    e->out.ev = event_new(base, e->out.fd, EV_READ | EV_PERSIST, on_out, e);
    e->err.ev = event_new(base, e->err.fd, EV_READ | EV_PERSIST, on_err, e);
    if (e->out.ev)
        event_add(e->out.ev, NULL);
    if (e->err.ev)
        event_add(e->err.ev, NULL);
    if (eai_pc_job_stdin_stream(e->job) && e->in_fd >= 0) {
        e->ev_in = event_new(base, e->in_fd, EV_WRITE | EV_PERSIST, on_in, e);
        if (e->ev_in && (e->sin_len > e->sin_off || e->sin_eof))
            event_add(e->ev_in, NULL); /* written before the start, or eof */
        else if (!e->ev_in)
            e->sin_closed = 1; /* no input rather than input never ending */
    } else if (e->job->stdin_len > 0 && e->in_fd >= 0) {
        e->ev_in = event_new(base, e->in_fd, EV_WRITE | EV_PERSIST, on_in, e);
        if (e->ev_in)
            event_add(e->ev_in, NULL);
        else
            e->in_off = e->job->stdin_len; /* no input rather than input never ending */
    }
    if (!e->out.ev || !e->err.ev) {
        /* Cannot read it: stop it rather than let it block on a full pipe. */
        snprintf(e->msg, sizeof(e->msg), "out of memory watching the sandbox");
        e->early_code = EAI_E_SANDBOX_FAILED;
        eai_pc_run_stop(e);
    }
    if (e->job->timeout_ms > 0) {
        /* what is left of it after the wait for a slot in its session */
        int64_t ms = e->job->timeout_ms - e->held_ms;
        if (ms < 1)
            ms = 1;
        e->ev_timeout = evtimer_new(base, on_timeout, e);
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        if (e->ev_timeout)
            evtimer_add(e->ev_timeout, &tv);
    }
}

void eai_pc_run_exited(struct eai_pc_run *e, int status)
{
    if (e->adopted_pid > 0 && !e->run_exited)
        child_done(e, status, NULL, 0);
}

/* ops->adopt: the program starts in a sandbox already running. 1 adopted,
 * 0 not, -1 failed. */
static int run_adopt(struct eai_pc_run *e)
{
    struct eai_pc_runner *R = e->runner;
    pid_t pid = 0;
    int in_fd = -1, out_fd = -1, err_fd = -1;
    int rc = R->ops->adopt ? R->ops->adopt(R->drv, e, &pid, &in_fd, &out_fd, &err_fd) : 0;
    if (rc <= 0) {
        if (rc < 0 && !e->msg[0])
            snprintf(e->msg, sizeof(e->msg), "cannot start the program in the warm sandbox");
        return rc;
    }
    e->adopted_pid = pid;
    e->run_spawned = 1;
    e->in_fd = in_fd;
    e->out.fd = out_fd;
    e->err.fd = err_fd;
    watch_pipes(e);
    eai_pc_run_started(e);
    return 1;
}

static int run_spawn(struct eai_pc_run *e)
{
    struct eai_pc_runner *R = e->runner;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    char *argv[48];
    int adopted = run_adopt(e);
    if (adopted != 0)
        return adopted > 0 ? 0 : -1;
    if (make_pipe(in, 1) < 0 || make_pipe(out, 0) < 0 || make_pipe(err, 0) < 0)
        goto fail;
    memset(argv, 0, sizeof(argv));
    if (R->ops->spawn_argv(R->drv, e, argv, sizeof(argv) / sizeof(argv[0]) - 1) < 0 || !argv[0]) {
        snprintf(e->msg, sizeof(e->msg), "cannot start %s: no command line", R->ops->runtime);
        goto fail;
    }
    struct eai_pc_wd wd;
    memset(&wd, 0, sizeof(wd));
    /* Armed before the sandbox exists: eaid may die at any instant after. */
    if (R->ops->watchdog && R->ops->watchdog(R->drv, e, &wd) == 0 &&
        (e->wd_fd = eai_pc_watchdog_arm(R->host->base, &wd)) < 0)
        R->host->log(R->host, R->ops->component, EAI_LOG_WARN, "%s: no watchdog (%s): the sandbox would outlive a crash of eaid",
                     e->b.cid, strerror(errno));
    e->run_spawned = 1;
    e->child = eai_pc_child_spawn(R->host->base, R->drv, argv, in[0], out[1], err[1], 0, 0, child_done, e);
    if (!e->child) {
        snprintf(e->msg, sizeof(e->msg), "cannot start %s: %s", R->ops->runtime, strerror(errno));
        goto fail;
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    e->in_fd = in[1];
    e->out.fd = out[0];
    e->err.fd = err[0];
    watch_pipes(e);
    if (R->ops->started_on_spawn)
        eai_pc_run_started(e);
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
    struct eai_pc_run *e = arg;
    struct eai_pc_runner *R = e->runner;
    char msg[256] = "";
    if (R->ops->prepare(R->drv, e, msg, sizeof(msg)) < 0) {
        e->early_code = EAI_E_SANDBOX_FAILED;
        snprintf(e->msg, sizeof(e->msg), "preparing the sandbox: %s", msg);
    }
}

static void prepare_done(void *arg)
{
    struct eai_pc_run *e = arg;
    struct eai_pc_runner *R = e->runner;
    void *drv = R->drv;
    const struct eai_pc_driver_ops *ops = R->ops;
    e->state = PC_RUNNING;
    if (e->early_code || e->cancelled || destroying(R)) {
        eai_pc_run_finish(e);
    } else {
        e->t_start_ns = eai_monotonic_ns();
        if (run_spawn(e) < 0) {
            e->early_code = EAI_E_SANDBOX_FAILED;
            eai_pc_run_finish(e);
        }
    }
    ops->release(drv);
}

void eai_pc_run_launch(struct eai_pc_run *e)
{
    struct eai_pc_runner *R = e->runner;
    e->state = PC_PREPARING;
    hold(R);
    if (R->host->work_submit(R->host, prepare_work, prepare_done, e) < 0) {
        e->early_code = EAI_E_SANDBOX_FAILED;
        snprintf(e->msg, sizeof(e->msg), "worker queue full");
        prepare_done(e);
    }
}

static void on_soon(evutil_socket_t fd, short what, void *arg)
{
    struct eai_pc_run *e = arg;
    e->state = PC_RUNNING;
    eai_pc_run_finish(e);
}

void eai_pc_run_end_soon(struct eai_pc_run *e, int code, const char *msg)
{
    if (code)
        e->early_code = code;
    if (msg)
        snprintf(e->msg, sizeof(e->msg), "%s", msg);
    if (!e->ev_soon)
        e->ev_soon = evtimer_new(e->runner->host->base, on_soon, e);
    struct timeval zero = {0, 0};
    if (!e->ev_soon || evtimer_add(e->ev_soon, &zero) < 0) {
        e->state = PC_RUNNING;
        eai_pc_run_finish(e);
    }
}


/* ------------------------------------------------------------ streamed stdin */

int eai_pc_runner_stdin(struct eai_pc_runner *R, void *handle, const unsigned char *data, size_t len, int eof,
                        size_t *pending, struct eai_error **err)
{
    struct eai_pc_run *e = R->runs;
    while (e && e != handle)
        e = e->next;
    if (!e || e->state >= PC_SETTLING || e->run_exited || e->cancelled)
        return eai_host_error_set(R->host, err, EAI_E_STDIN_CLOSED, "%s: the program has ended", R->ops->name);
    if (!eai_pc_job_stdin_stream(e->job))
        return eai_host_error_set(R->host, err, EAI_E_STDIN_NOT_STREAMED, "%s: stdin is not streamed", R->ops->name);
    if (e->sin_eof || e->sin_closed)
        return eai_host_error_set(R->host, err, EAI_E_STDIN_CLOSED, "%s: %s", R->ops->name,
                                  e->sin_eof ? "eof was already sent" : "the program closed its stdin");
    size_t held = e->sin_len - e->sin_off;
    if (len > EAI_ISO_STDIN_BUFFER - held)
        return eai_host_error_set(R->host, err, EAI_E_STDIN_BUSY,
                                  "%s: %zu bytes wait for the program to read them (at most %d)", R->ops->name,
                                  held, EAI_ISO_STDIN_BUFFER);
    if (len > 0) {
        if (e->sin_off > 0) {
            memmove(e->sin_buf, e->sin_buf + e->sin_off, held);
            e->sin_len = held;
            e->sin_off = 0;
        }
        unsigned char *nb = realloc(e->sin_buf, held + len);
        if (!nb)
            return eai_host_error_set(R->host, err, EAI_E_STDIN_BUSY, "%s: out of memory", R->ops->name);
        memcpy(nb + held, data, len);
        e->sin_buf = nb;
        e->sin_len = held + len;
    }
    if (eof)
        e->sin_eof = 1;
    if (pending)
        *pending = e->sin_len - e->sin_off;
    if (e->state == PC_RUNNING && e->ev_in)
        stream_pump(e); /* non-blocking: what fits now, the rest on EV_WRITE */
    if (pending)
        *pending = e->sin_len - e->sin_off;
    return 0;
}
