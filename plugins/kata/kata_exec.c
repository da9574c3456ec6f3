/*
 * One execution in the Kata backend (docs/kata.md):
 *
 *   PREPARING worker: dir, tmpfs /tmp, input files, config.json, cgroup
 *   RUNNING   loop: attached `ctr run --rm --config ... --runtime R <cid>`
 *             child (pidfd), its stdin/stdout/stderr pipes, timeout timer;
 *             the events stream reports /tasks/start, /tasks/oom, /tasks/exit
 *   SETTLING  ctr has ended: wait (at most KT_EVENT_WAIT_MS) for the task's
 *             /tasks/exit or /containers/delete event to arrive
 *   FINISHING worker: cgroup usage, collect, leftovers deleted, unmount
 *   then on_exit exactly once, and the execution is freed.
 *
 * The exit code is the one /tasks/exit reports (ctr's own status only when
 * no event came); OOM is /tasks/oom.  Timeout and cancel: `ctr task kill
 * --signal SIGTERM`, kill_grace_ms later `--signal SIGKILL` (an init process
 * ignores SIGTERM it has no handler for), KT_HARD_KILL_MS later SIGKILL to
 * ctr itself and a forced delete of whatever is left.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "kata.h"

enum kt_state { KT_PREPARING = 0, KT_RUNNING, KT_SETTLING, KT_FINISHING };

struct kt_exec {
    struct kt *k;
    struct kt_exec *next;
    const struct eai_iso_job *job;
    struct eai_iso_callbacks cb;
    void *cb_arg;
    enum kt_state state;
    struct kt_bundle b;
    char spec[PATH_MAX + 16];
    char fifo[PATH_MAX + 16];

    /* outcome inputs */
    int early_code;             /* != 0: ended before running: EAI_E_* */
    char msg[256];
    int cancelled, timed_out, stopping, hard_killed;
    struct kt_seen seen;        /* from the events stream */
    int started_reported;

    struct eai_pc_child *run;
    int run_spawned, run_exited, wait_status;
    int helpers;                /* kill children still running */

    struct eai_pc_stream out, err;
    int in_fd;
    struct event *ev_in;
    size_t in_off;
    char err_tail[EAI_PC_ERR_TAIL + 1];
    size_t err_tail_len;

    struct event *ev_timeout, *ev_grace, *ev_hard, *ev_settle, *ev_soon;
    int64_t t_start_ns, t_end_ns;

    struct kt_stats stats;
    struct eai_pc_collect_result col;
};

static void exec_unlink(struct kt_exec *e)
{
    for (struct kt_exec **pp = &e->k->execs; *pp; pp = &(*pp)->next) {
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

static void exec_free(struct kt_exec *e)
{
    eai_pc_stream_close(&e->out);
    eai_pc_stream_close(&e->err);
    ev_free(&e->ev_in);
    if (e->in_fd >= 0)
        close(e->in_fd);
    ev_free(&e->ev_timeout);
    ev_free(&e->ev_grace);
    ev_free(&e->ev_hard);
    ev_free(&e->ev_settle);
    ev_free(&e->ev_soon);
    eai_pc_collect_free(&e->col);
    free(e);
}

/* ------------------------------------------------------------ finishing */

static int not_found_message(const char *s)
{
    return strstr(s, "executable file not found") || strstr(s, "no such file or directory");
}

static void deliver(struct kt_exec *e)
{
    struct eai_iso_result r;
    eai_pc_result_init(&r, e->t_start_ns, e->t_end_ns, e->stats.cpu_seconds, e->stats.peak_mb, &e->col);
    e->err_tail[e->err_tail_len] = '\0';
    if (e->cancelled) {
        r.outcome = EAI_OUT_CANCELLED;
    } else if (e->early_code) {
        r.outcome = EAI_OUT_ERROR;
        r.error_code = (enum eai_code)e->early_code;
        r.error_message = e->msg;
    } else if (e->timed_out) {
        r.outcome = EAI_OUT_TIMEOUT;
    } else if (e->seen.oom) {
        r.outcome = EAI_OUT_OOM;
    } else if (e->seen.exited) {
        eai_pc_result_exited(&r, e->seen.exit_status);
    } else if (e->wait_status < 0 || WIFSIGNALED(e->wait_status)) {
        r.outcome = EAI_OUT_ERROR;
        r.error_code = EAI_E_SANDBOX_FAILED;
        snprintf(e->msg, sizeof(e->msg), "ctr ended abnormally");
        r.error_message = e->msg;
    } else if (!e->seen.started && WEXITSTATUS(e->wait_status) != 0) {
        /* The task never started: ctr's own error is on its stderr. */
        if (not_found_message(e->err_tail)) {
            r.outcome = EAI_OUT_EXITED; /* like a shell: command not found */
            r.exit_code = 127;
        } else {
            r.outcome = EAI_OUT_ERROR;
            r.error_code = EAI_E_SANDBOX_FAILED;
            snprintf(e->msg, sizeof(e->msg), "the sandbox runtime failed to start the program");
            r.error_message = e->msg;
        }
    } else {
        /* Started, but its exit event never reached us: ctr's status is
         * the task's exit code. */
        eai_pc_result_exited(&r, WEXITSTATUS(e->wait_status));
    }
    struct kt *k = e->k;
    if (r.outcome == EAI_OUT_ERROR)
        k->host->log(k->host, KT_COMPONENT, EAI_LOG_ERROR, "%s: %s%s%.300s", e->b.cid, r.error_message,
                     e->err_tail_len ? ": " : "", e->err_tail);
    exec_unlink(e);
    if (!k->destroying && e->cb.on_exit)
        e->cb.on_exit(e->cb_arg, &r);
    exec_free(e);
}

static void ctr_sync(struct kt *k, char *const verb[], int64_t timeout_ms)
{
    char *argv[KT_CTR_ARGC + 8];
    kt_ctr_argv(k, argv);
    size_t n = 0;
    while (verb[n] && n < 7) {
        argv[KT_CTR_ARGC + n] = verb[n];
        n++;
    }
    argv[KT_CTR_ARGC + n] = NULL;
    eai_pc_run_sync(argv, timeout_ms, NULL, 0);
}

/* Worker: remove what ctr run --rm did not (it was killed, or containerd
 * never told us the container went away). */
static void ctr_leftovers(struct kt *k, char *cid)
{
    char *kill_v[] = {"task", "kill", "--signal", "SIGKILL", cid, NULL};
    char *tdel_v[] = {"task", "delete", "--force", cid, NULL};
    char *cdel_v[] = {"containers", "delete", cid, NULL};
    ctr_sync(k, kill_v, KT_CTR_TIMEOUT_MS);
    ctr_sync(k, tdel_v, KT_CTR_TIMEOUT_MS);
    ctr_sync(k, cdel_v, KT_CTR_TIMEOUT_MS);
}

static void finish_work(void *arg)
{
    struct kt_exec *e = arg;
    if (e->run_spawned) {
        if (e->hard_killed || !e->seen.deleted)
            ctr_leftovers(e->k, e->b.cid);
        kt_cgroup_stats(&e->b, &e->stats);
        eai_pc_collect(e->b.dir, e->b.mounted, e->job, &e->col);
    }
    if (e->b.mounted || e->b.dir[0])
        eai_pc_bundle_remove(e->b.dir);
    if (e->b.cg_made)
        kt_cgroup_remove(e->b.cgpath, e->b.cg_v2);
}

static void finish_done(void *arg)
{
    struct kt_exec *e = arg;
    struct kt *k = e->k;
    deliver(e);
    kt_release(k);
}

static void begin_finish(struct kt_exec *e)
{
    if (e->state == KT_FINISHING)
        return;
    e->state = KT_FINISHING;
    if (e->t_start_ns && !e->t_end_ns)
        e->t_end_ns = eai_pc_mono_ns();
    if (e->ev_timeout)
        event_del(e->ev_timeout);
    if (e->ev_grace)
        event_del(e->ev_grace);
    if (e->ev_hard)
        event_del(e->ev_hard);
    if (e->ev_settle)
        event_del(e->ev_settle);
    e->k->inflight++;
    if (e->k->destroying || e->k->host->work_submit(e->k->host, finish_work, finish_done, e) < 0) {
        /* No worker (shutting down or queue full): clean up here. */
        finish_work(e);
        finish_done(e);
    }
}

static int settled(const struct kt_exec *e)
{
    return e->seen.exited || e->seen.deleted;
}

static void maybe_finish(struct kt_exec *e)
{
    if (e->state == KT_SETTLING && e->helpers == 0 && (settled(e) || !e->ev_settle))
        begin_finish(e);
}

static void on_settle(evutil_socket_t fd, short what, void *arg)
{
    struct kt_exec *e = arg;
    /* The events never came: decide from ctr's status. */
    ev_free(&e->ev_settle);
    maybe_finish(e);
}

/* ------------------------------------------------------------ output */

static void stream_read(struct kt_exec *e, struct eai_pc_stream *s, int drain_all)
{
    int64_t cap = e->job->output_bytes > 0 ? e->job->output_bytes : EAI_PC_DEFAULT_OUTPUT;
    /* drain_all: after ctr ended, read until EOF (or EAGAIN). */
    eai_pc_stream_read(s, drain_all ? 0 : 8, cap, e->err_tail, &e->err_tail_len, &e->cb, e->cb_arg,
                       &e->k->destroying);
}

static void on_out(evutil_socket_t fd, short what, void *arg)
{
    struct kt_exec *e = arg;
    stream_read(e, &e->out, 0);
}

static void on_err(evutil_socket_t fd, short what, void *arg)
{
    struct kt_exec *e = arg;
    stream_read(e, &e->err, 0);
}

static void stdin_close(struct kt_exec *e)
{
    ev_free(&e->ev_in);
    if (e->in_fd >= 0) {
        close(e->in_fd);
        e->in_fd = -1;
    }
}

/* ctr closes the task's stdin when it reads EOF, but only once the task
 * exists: an EOF read earlier (while ctr is still creating the task) is
 * lost and the program would wait for input forever.  So our end of the
 * pipe stays open until /tasks/start has been seen. */
static void stdin_done(struct kt_exec *e)
{
    ev_free(&e->ev_in);
    if (e->seen.started)
        stdin_close(e);
}

static void on_in(evutil_socket_t fd, short what, void *arg)
{
    struct kt_exec *e = arg;
    if (eai_pc_stdin_pump(e->in_fd, e->job->stdin_data, e->job->stdin_len, &e->in_off))
        stdin_done(e);
}

/* ------------------------------------------------------------ stopping */

static void helper_done(void *arg, int status, const char *out, size_t outlen)
{
    struct kt_exec *e = arg;
    e->helpers--;
    maybe_finish(e);
}

static void spawn_kill(struct kt_exec *e, const char *sig)
{
    struct kt *k = e->k;
    char *argv[KT_CTR_ARGC + 6];
    kt_ctr_argv(k, argv);
    argv[KT_CTR_ARGC] = "task";
    argv[KT_CTR_ARGC + 1] = "kill";
    argv[KT_CTR_ARGC + 2] = "--signal";
    argv[KT_CTR_ARGC + 3] = (char *)sig;
    argv[KT_CTR_ARGC + 4] = e->b.cid;
    argv[KT_CTR_ARGC + 5] = NULL;
    if (eai_pc_child_spawn(k->host->base, k, argv, -1, -1, -1, 1, KT_CTR_TIMEOUT_MS, helper_done, e))
        e->helpers++;
    else
        k->host->log(k->host, KT_COMPONENT, EAI_LOG_WARN, "cannot run ctr task kill %s for %s: %s", sig, e->b.cid,
                     strerror(errno));
}

static void on_hard(evutil_socket_t fd, short what, void *arg)
{
    struct kt_exec *e = arg;
    if (e->run_exited || !e->run)
        return;
    e->hard_killed = 1;
    e->k->host->log(e->k->host, KT_COMPONENT, EAI_LOG_WARN,
                    "%s did not stop after SIGKILL: killing ctr, the container is deleted by force", e->b.cid);
    pid_t pid = eai_pc_child_pid(e->run);
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
}

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
    struct kt_exec *e = arg;
    if (e->run_exited || !e->run)
        return;
    spawn_kill(e, "SIGKILL");
    e->ev_hard = evtimer_new(e->k->host->base, on_hard, e);
    struct timeval tv = {KT_HARD_KILL_MS / 1000, (KT_HARD_KILL_MS % 1000) * 1000};
    if (!e->ev_hard || evtimer_add(e->ev_hard, &tv) < 0)
        on_hard(-1, 0, e);
}

static void exec_stop(struct kt_exec *e)
{
    if (e->stopping || e->state != KT_RUNNING || e->run_exited)
        return;
    e->stopping = 1;
    int64_t g = e->k->kill_grace_ms;
    if (g > 0)
        spawn_kill(e, "SIGTERM");
    e->ev_grace = evtimer_new(e->k->host->base, on_grace, e);
    struct timeval tv = {g / 1000, (g % 1000) * 1000};
    if (!e->ev_grace || evtimer_add(e->ev_grace, &tv) < 0)
        on_grace(-1, 0, e);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct kt_exec *e = arg;
    if (e->run_exited)
        return;
    e->timed_out = 1;
    exec_stop(e);
}

/* ------------------------------------------------------------ running */

static void report_started(struct kt_exec *e)
{
    if (e->started_reported)
        return;
    e->started_reported = 1;
    if (e->cb.on_started && !e->k->destroying)
        e->cb.on_started(e->cb_arg);
}

static void run_done(void *arg, int status, const char *out, size_t outlen)
{
    struct kt_exec *e = arg;
    e->run = NULL;
    e->run_exited = 1;
    e->wait_status = status;
    e->t_end_ns = eai_pc_mono_ns();
    /* Whatever the task wrote before it ended is in the pipes now; do not
     * wait for EOF (a stray holder of the write end must not stall us). */
    stream_read(e, &e->out, 1);
    stream_read(e, &e->err, 1);
    eai_pc_stream_close(&e->out);
    eai_pc_stream_close(&e->err);
    stdin_close(e);
    if (e->ev_timeout)
        event_del(e->ev_timeout);
    if (e->ev_grace)
        event_del(e->ev_grace);
    if (e->ev_hard)
        event_del(e->ev_hard);
    e->state = KT_SETTLING;
    if (!settled(e) && kt_events_running(e->k)) {
        e->ev_settle = evtimer_new(e->k->host->base, on_settle, e);
        struct timeval tv = {KT_EVENT_WAIT_MS / 1000, (KT_EVENT_WAIT_MS % 1000) * 1000};
        if (e->ev_settle && evtimer_add(e->ev_settle, &tv) < 0)
            ev_free(&e->ev_settle);
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

static int run_spawn(struct kt_exec *e)
{
    struct kt *k = e->k;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    if (make_pipe(in, 1) < 0 || make_pipe(out, 0) < 0 || make_pipe(err, 0) < 0)
        goto fail;
    snprintf(e->spec, sizeof(e->spec), "%s/config.json", e->b.dir);
    snprintf(e->fifo, sizeof(e->fifo), "%s/fifo", k->work_dir);
    char *argv[KT_CTR_ARGC + 12];
    kt_ctr_argv(k, argv);
    int n = KT_CTR_ARGC;
    argv[n++] = "run";
    argv[n++] = "--rm";
    argv[n++] = "--config";
    argv[n++] = e->spec;
    argv[n++] = "--runtime";
    argv[n++] = k->runtime;
    argv[n++] = "--fifo-dir";
    argv[n++] = e->fifo;
    argv[n++] = e->b.cid;
    argv[n] = NULL;
    e->run_spawned = 1;
    e->run = eai_pc_child_spawn(k->host->base, k, argv, in[0], out[1], err[1], 0, 0, run_done, e);
    if (!e->run) {
        snprintf(e->msg, sizeof(e->msg), "cannot start ctr: %s", strerror(errno));
        goto fail;
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    e->in_fd = in[1];
    e->out.fd = out[0];
    e->err.fd = err[0];
    e->out.ev = event_new(k->host->base, e->out.fd, EV_READ | EV_PERSIST, on_out, e);
    e->err.ev = event_new(k->host->base, e->err.fd, EV_READ | EV_PERSIST, on_err, e);
    if (e->out.ev)
        event_add(e->out.ev, NULL);
    if (e->err.ev)
        event_add(e->err.ev, NULL);
    if (e->job->stdin_len > 0) {
        e->ev_in = event_new(k->host->base, e->in_fd, EV_WRITE | EV_PERSIST, on_in, e);
        if (e->ev_in)
            event_add(e->ev_in, NULL);
        else
            e->in_off = e->job->stdin_len; /* no input rather than none ever ending */
    }
    if (!e->out.ev || !e->err.ev) {
        /* Cannot read it: stop it rather than let it block on a full pipe. */
        snprintf(e->msg, sizeof(e->msg), "out of memory watching the sandbox");
        e->early_code = EAI_E_SANDBOX_FAILED;
        exec_stop(e);
    }
    if (e->job->timeout_ms > 0) {
        e->ev_timeout = evtimer_new(k->host->base, on_timeout, e);
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
    struct kt_exec *e = arg;
    char msg[256];
    if (kt_bundle_prepare(&e->b, e->job, msg, sizeof(msg)) < 0) {
        e->early_code = EAI_E_SANDBOX_FAILED;
        snprintf(e->msg, sizeof(e->msg), "preparing the sandbox: %s", msg);
    }
}

static void prepare_done(void *arg)
{
    struct kt_exec *e = arg;
    struct kt *k = e->k;
    e->state = KT_RUNNING;
    if (e->early_code || e->cancelled || k->destroying) {
        begin_finish(e);
        kt_release(k);
        return;
    }
    e->t_start_ns = eai_pc_mono_ns();
    if (run_spawn(e) < 0) {
        e->early_code = EAI_E_SANDBOX_FAILED;
        begin_finish(e);
        kt_release(k);
        return;
    }
    kt_release(k);
}

static void launch(struct kt_exec *e)
{
    struct kt *k = e->k;
    e->state = KT_PREPARING;
    k->inflight++;
    if (k->host->work_submit(k->host, prepare_work, prepare_done, e) < 0) {
        e->early_code = EAI_E_SANDBOX_FAILED;
        snprintf(e->msg, sizeof(e->msg), "worker queue full");
        prepare_done(e);
    }
}

static void on_soon(evutil_socket_t fd, short what, void *arg)
{
    struct kt_exec *e = arg;
    e->state = KT_RUNNING;
    begin_finish(e);
}

/* End an execution that never ran, from the loop, after start() returned. */
static void end_soon(struct kt_exec *e, int code, const char *msg)
{
    if (code)
        e->early_code = code;
    if (msg)
        snprintf(e->msg, sizeof(e->msg), "%s", msg);
    if (!e->ev_soon)
        e->ev_soon = evtimer_new(e->k->host->base, on_soon, e);
    struct timeval zero = {0, 0};
    if (!e->ev_soon || evtimer_add(e->ev_soon, &zero) < 0) {
        e->state = KT_RUNNING;
        begin_finish(e);
    }
}

/* ------------------------------------------------------------ API */

/* containerd ids: [A-Za-z0-9]+([._-][A-Za-z0-9]+)*, at most 76 bytes. */
static void make_cid(struct kt *k, const char *id, char *out, size_t len)
{
    char clean[48];
    size_t n = 0;
    for (const char *p = id ? id : ""; *p && n + 1 < sizeof(clean); p++) {
        char c = *p;
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (alnum)
            clean[n++] = c;
        else if (n > 0 && clean[n - 1] != '-')
            clean[n++] = '-';
    }
    while (n > 0 && clean[n - 1] == '-')
        n--;
    clean[n] = '\0';
    unsigned char rnd[4] = {0};
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        memset(rnd, 0, sizeof(rnd));
    snprintf(out, len, KT_CID_PREFIX "%s%s%02x%02x%02x%02x-%lu", clean, n ? "-" : "", rnd[0], rnd[1], rnd[2],
             rnd[3], ++k->seq);
}

int kt_exec_start(struct kt *k, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb, void *cb_arg,
                  void **handle, struct eai_error **err)
{
    char why[PATH_MAX + 128];
    if (!kt_ready(k)) {
        if (err)
            *err = k->host->error_new(EAI_E_SANDBOX_UNAVAILABLE, 0, "kata not ready: %s",
                                      k->probe_state == 1 ? "sweeping or event stream down" : k->reason);
        return -1;
    }
    /* The runtime may have been removed since the probe: fail closed. */
    if (kt_shim_check(k, why, sizeof(why)) < 0) {
        if (err)
            *err = k->host->error_new(EAI_E_SANDBOX_UNAVAILABLE, 0, "kata not ready: %s", why);
        return -1;
    }
    if (!job || !job->argv || !job->argv[0] || !cb || !cb->on_exit) {
        if (err)
            *err = k->host->error_new(EAI_E_VALIDATION_FAILED, 0, "kata: job without a command or callbacks");
        return -1;
    }
    for (size_t i = 0; i < job->nfiles; i++) {
        if (!eai_pc_tmp_path_valid(job->files[i].path)) {
            if (err)
                *err = k->host->error_new(EAI_E_VALIDATION_FAILED, 0, "kata: file path %s is not under /tmp",
                                          job->files[i].path ? job->files[i].path : "(null)");
            return -1;
        }
    }
    struct kt_exec *e = calloc(1, sizeof(*e));
    if (!e) {
        if (err)
            *err = k->host->error_new(EAI_E_INTERNAL, ENOMEM, "kata: out of memory");
        return -1;
    }
    e->k = k;
    e->job = job;
    memcpy(&e->cb, cb, cb->size < sizeof(e->cb) ? cb->size : sizeof(e->cb));
    e->cb_arg = cb_arg;
    e->out = (struct eai_pc_stream){.fd = -1, .which = EAI_STREAM_STDOUT};
    e->err = (struct eai_pc_stream){.fd = -1, .which = EAI_STREAM_STDERR};
    e->in_fd = -1;
    e->b.uid = k->uid;
    e->b.cg_v2 = k->cg_v2;
    make_cid(k, job->id, e->b.cid, sizeof(e->b.cid));
    e->next = k->execs;
    k->execs = e;
    *handle = e;
    if (!job->image || k->host->image_rootfs(k->host, job->image, e->b.rootfs, sizeof(e->b.rootfs)) < 0) {
        char m[256];
        snprintf(m, sizeof(m), "image %s is not in the local image store", job->image ? job->image : "(none)");
        end_soon(e, EAI_E_IMAGE_MISSING, m);
        return 0;
    }
    snprintf(e->b.dir, sizeof(e->b.dir), "%s/%s", k->work_dir, e->b.cid);
    snprintf(e->b.cgpath, sizeof(e->b.cgpath), "%s/%s", k->cg_parent, e->b.cid);
    launch(e);
    return 0;
}

static struct kt_exec *find_live(struct kt *k, const void *handle)
{
    for (struct kt_exec *x = k->execs; x; x = x->next)
        if (x == handle)
            return x;
    return NULL;
}

void kt_exec_cancel(struct kt *k, void *handle)
{
    struct kt_exec *e = find_live(k, handle);
    if (!e || e->cancelled || e->state == KT_FINISHING || e->state == KT_SETTLING)
        return; /* SETTLING: the program has already ended on its own */
    e->cancelled = 1;
    if (e->state == KT_RUNNING && e->run_spawned && !e->run_exited)
        exec_stop(e);
    /* PREPARING: prepare_done sees the flag; SETTLING: it ends anyway. */
}

void kt_exec_event(struct kt *k, const char *topic, const char *cid, int exit_status)
{
    struct kt_exec *e = k->execs;
    while (e && strcmp(e->b.cid, cid) != 0)
        e = e->next;
    if (!e || e->state == KT_FINISHING)
        return;
    if (!strcmp(topic, "/containers/create")) {
        e->seen.created = 1;
    } else if (!strcmp(topic, "/tasks/start")) {
        e->seen.started = 1;
        if (e->in_fd >= 0 && !e->ev_in)
            stdin_close(e); /* all written (or none to write): EOF now */
        report_started(e);
    } else if (!strcmp(topic, "/tasks/oom")) {
        e->seen.oom = 1;
    } else if (!strcmp(topic, "/tasks/exit")) {
        e->seen.exited = 1;
        e->seen.exit_status = exit_status;
    } else if (!strcmp(topic, "/containers/delete")) {
        e->seen.deleted = 1;
    }
    maybe_finish(e);
}

/* Shutdown: no callbacks any more; kill and clean what we can now. */
void kt_exec_destroy_all(struct kt *k)
{
    struct kt_exec *e = k->execs;
    while (e) {
        struct kt_exec *next = e->next;
        if (e->state == KT_RUNNING && e->run && !e->run_exited) {
            pid_t pid = eai_pc_child_pid(e->run);
            eai_pc_child_detach(e->run);
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            e->run = NULL;
            e->run_exited = 1;
            e->hard_killed = 1;
            finish_work(e);
            if (e->helpers == 0) { /* else a helper's callback still points here */
                exec_unlink(e);
                exec_free(e);
            }
        } else if (e->state == KT_SETTLING && e->helpers == 0) {
            begin_finish(e); /* destroying: runs inline, no callback */
        }
        /* PREPARING / FINISHING: their done callback cleans up (inflight). */
        e = next;
    }
}
