/*
 * The gVisor driver of the local runner (plugins/common/pc_runner.c,
 * docs/plugin-common.md): only what is runsc's.
 *
 *   gate      probe and start-up sweep done (park until then), probe failed
 *             (refuse)
 *   admit     a warm sandbox of the same shape from the pool, if any
 *   prepare   bundle, tmpfs, input files, config.json, cgroup leaves; or,
 *             warm, the input files and the program as a process file
 *   spawn     attached `runsc run --bundle`; warm, one line to the sandbox's
 *             launcher (adopt: its launch file was written by prepare), or
 *             `runsc exec --process` when the sandbox has no launcher
 *   stop      `runsc kill <cid> KILL`; GV_KILL_GRACE_MS later SIGKILL to
 *             runsc and `runsc delete --force <cid>`
 *   end       cgroup OOM / cpu / peak; the sandbox killed before its files
 *             are collected; runsc's exit status and its own log
 *             (--log=<bundle>/runsc-*.log: runsc's failures are read there,
 *             never from the program's stderr, and their copy at the end of
 *             stderr is dropped from the result)
 *   teardown  bundle and cgroup leaves (a warm sandbox goes back to the pool,
 *             which tears it down)
 *
 * An execution inside a session (job->session_id, gvisor_session.c) is run
 * like a warm one in the session's sandbox, except: it may wait for a slot
 * (hold), its program is started by the session's supervisor when the
 * session has one (the process file runs `/.eai/launcher --run`, its
 * client), its stop kills only its program (`runsc kill --pid` of what runsc
 * exec started, the pid from --internal-pid-file: the client, whose end
 * makes the supervisor kill the program), its OOM is the cgroup's OOM count
 * growing during it, and nothing is torn down at its end.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "gvisor.h"
#include "gvisor_log.h"

/* Per-run driver state (run->priv). */
struct gv_run {
    struct gv_pooled *pooled;   /* warm sandbox in use (runsc exec), or NULL */
    const char *session;        /* the session it runs in (session_id below), or NULL */
    char session_id[64];        /* a copy of job->session_id: retire runs after on_exit, when
                                   core has freed the job (an orphaned run at a stop) */
    int ses_waiting, ses_running;
    int oom0;                   /* the session cgroup's OOM count before our program */
    char own_cid[96];           /* the run's own name (its files in the session bundle) */
    char pidf[PATH_MAX + 32];   /* --internal-pid-file */
    double cpu0;                /* its cpu usage before our program */
    char root[PATH_MAX + 16];
    char plat[64];
    char procf[PATH_MAX + 32];
    char logf[PATH_MAX + 32];   /* runsc --log of this run */
    char logarg[PATH_MAX + 40];
    char log[GV_RUNTIME_LOG_MAX]; /* its last bytes, read by end_work */
    size_t log_len;
    char dlog[PATH_MAX + 48];   /* --debug-log=<bundle>/runsc-%COMMAND%.log */
    const char *died;           /* end_work: the sandbox's runtime processes died under it */
    /* end_work: the errors in runsc's log (gvisor_log.c), for classify */
    int nerr;                   /*   how many (0: runsc reported no failure) */
    int err_start;              /*   one says it failed creating or starting the container */
    int err_notfound;           /*   one says the program's executable was not found */
    char errs[1600];            /*   the last ones, "; "-joined, for eaid's log */
    int launch;                 /* warm, started by the sandbox's launcher: */
    char line[PATH_MAX];        /*   what it is sent: "/tmp/<launch file>\n" */
    int how;                    /*   gv_launch_ended(): 'x', 'f', 'r' (0: not yet) */
    int code;                   /*   'x': the exit code */
    char ltext[200];            /*   'f': the launcher's words */
};

static struct gv_run *priv(struct eai_pc_run *run)
{
    return run->priv;
}

static int gv_gate(void *drv, char *why, size_t whylen)
{
    struct gv *g = drv;
    if (g->probe_state < 0) {
        snprintf(why, whylen, "gvisor not ready: %s", g->reason);
        return -1;
    }
    return gv_ready_gate(g) ? 0 : 1;
}

static const char *job_session(const struct eai_iso_job *job)
{
    return job->size >= EAI_ISO_JOB_SIZE_1_2 && job->session_id && job->session_id[0] ? job->session_id : NULL;
}

static int gv_hold(void *drv, struct eai_pc_run *run, char *why, size_t whylen)
{
    struct gv_run *p = priv(run);
    const char *sid = job_session(run->job);
    p->session = NULL;
    if (!sid)
        return 0;
    if (strlen(sid) >= sizeof(p->session_id)) {
        snprintf(why, whylen, "session id too long");
        return -1;
    }
    snprintf(p->session_id, sizeof(p->session_id), "%s", sid);
    p->session = p->session_id;
    int h = gv_session_hold(drv, p->session, &p->ses_waiting, why, whylen);
    p->ses_running = h == 0;
    return h;
}

static void gv_admit(void *drv, struct eai_pc_run *run)
{
    struct gv *g = drv;
    if (priv(run)->session) {
        const struct eai_pc_bundle *sb = gv_session_bundle(g, priv(run)->session);
        snprintf(priv(run)->own_cid, sizeof(priv(run)->own_cid), "%s", run->b.cid);
        if (sb) /* always, right after a hold of 0 */
            run->b = *sb;
        return;
    }
    if (gv_job_netns(run->job)) {
        /* granted egress: the pooled sandbox core claimed for it (booted in
         * this very namespace, gv_egress_claim), else a cold one in it */
        priv(run)->pooled = gv_pool_claimed(g, gv_job_netns(run->job));
        if (priv(run)->pooled)
            run->b = *gv_pooled_bundle(priv(run)->pooled);
        return;
    }
    const struct eai_iso_volume *vols;
    if (gv_job_volumes(run->job, &vols) > 0)
        return; /* a warm sandbox has no mounts of the job's volumes: a cold boot binds them */
    struct gv_shape sh;
    memset(&sh, 0, sizeof(sh));
    snprintf(sh.rootfs, sizeof(sh.rootfs), "%s", run->b.rootfs);
    sh.memory = run->job->memory_bytes;
    sh.cpu = run->job->cpu_millis;
    sh.disk = run->job->disk_bytes;
    sh.pids = run->job->pids;
    priv(run)->pooled = gv_pool_take(g, &sh);
    if (priv(run)->pooled)
        run->b = *gv_pooled_bundle(priv(run)->pooled);
}

static int gv_prepare(void *drv, struct eai_pc_run *run, char *msg, size_t msglen)
{
    struct gv_run *p = priv(run);
    snprintf(p->procf, sizeof(p->procf), "%s/process.json", run->b.dir);
    /* runsc's own log (--log, its errors); its debug log (--debug-log) is runsc-<command>.log */
    if (p->session) /* one per execution: the session's directory outlives it */
        snprintf(p->logf, sizeof(p->logf), "%s/%s.runsc.main.log", run->b.dir, p->own_cid);
    else
        snprintf(p->logf, sizeof(p->logf), "%s/runsc-%s.main.log", run->b.dir, p->pooled ? "exec" : "run");
    snprintf(p->logarg, sizeof(p->logarg), "--log=%s", p->logf);
    if (p->session) {
        /* beside the session's config.json: one process file per run */
        snprintf(p->procf, sizeof(p->procf), "%s/%s.process.json", run->b.dir, p->own_cid);
        snprintf(p->pidf, sizeof(p->pidf), "%s/%s.pid", run->b.dir, p->own_cid);
        if (eai_pc_write_inputs(run->b.dir, run->b.uid, run->job, msg, msglen) < 0 ||
            gv_write_process(&run->b, run->job, p->procf, run->b.launcher, msg, msglen) < 0)
            return -1;
        struct eai_pc_stats st;
        gv_cgroup_stats(&run->b, &st);
        p->cpu0 = st.cpu_seconds;
        p->oom0 = st.oom;
        return 0;
    }
    if (!p->pooled)
        return gv_bundle_prepare(&run->b, run->job, 0, msg, msglen);
    /* Warm sandbox: files into its tmpfs, the program as a launch file (or
     * a process file for runsc exec). */
    p->launch = gv_pooled_launcher(p->pooled);
    if (p->launch)
        snprintf(p->logf, sizeof(p->logf), "%s/runsc-run.main.log", run->b.dir); /* the pool's runsc run */
    if (eai_pc_write_inputs(run->b.dir, run->b.uid, run->job, msg, msglen) < 0 ||
        (p->launch ? gv_launch_write(&run->b, run->job, p->line, sizeof(p->line), msg, msglen)
                   : gv_write_process(&run->b, run->job, p->procf, 0, msg, msglen)) < 0)
        return -1;
    gv_cgroup_reset_peak(&run->b);
    gv_cgroup_weight(&run->b, 0);
    struct eai_pc_stats st;
    gv_cgroup_stats(&run->b, &st);
    p->cpu0 = st.cpu_seconds;
    return 0;
}

static int gv_spawn_argv(void *drv, struct eai_pc_run *run, char **argv, size_t max)
{
    struct gv *g = drv;
    struct gv_run *p = priv(run);
    snprintf(p->root, sizeof(p->root), "--root=%s", g->state_dir);
    snprintf(p->plat, sizeof(p->plat), "--platform=%s", g->platform);
    gv_debug_log_arg(p->dlog, sizeof(p->dlog), run->b.dir);
    char *run_argv[] = {g->runsc, p->root, p->logarg, p->dlog, "--network=none", p->plat, "run", "--bundle",
                        run->b.dir, run->b.cid, NULL};
    char *exec_argv[] = {g->runsc, p->root, p->logarg, p->dlog, "exec", "--process", p->procf, run->b.cid, NULL};
    char *ses_argv[] = {g->runsc, p->root, p->logarg, "exec", "--internal-pid-file", p->pidf, "--process", p->procf,
                        run->b.cid, NULL};
    /* granted egress: gVisor's netstack in core's namespace (set in
     * config.json); with the quirk, runsc run in a private mount namespace
     * that hides /proc/sys/net (docs/gvisor.md) */
    char *net_argv[] = {GV_UNSHARE, "-m", "--propagation", "private", "/bin/sh", "-c",
                        GV_NET_WORKAROUND_SH, "sh", g->runsc, p->root, p->logarg, p->dlog, "--network=sandbox",
                        p->plat, "run", "--bundle", run->b.dir, run->b.cid, NULL};
    char **src = p->session ? ses_argv : p->pooled ? exec_argv : run_argv;
    if (!p->session && !p->pooled && gv_job_netns(run->job)) {
        if (g->net_state <= 0)
            return -1;
        src = g->net_state == 2 ? net_argv : net_argv + 8; /* from g->runsc on */
    }
    for (size_t i = 0; i < max && (argv[i] = src[i]); i++) {
    }
    return 0;
}

/* A warm sandbox with the launcher: the program starts with one line on
 * its control socket (gvisor_pool.c), no runsc process. */
static int gv_adopt(void *drv, struct eai_pc_run *run, pid_t *pid, int *in_fd, int *out_fd, int *err_fd)
{
    struct gv_run *p = priv(run);
    if (!p->launch)
        return 0;
    if (gv_pool_launch(p->pooled, run, p->line, pid, in_fd, out_fd, err_fd) < 0) {
        snprintf(run->msg, sizeof(run->msg), "the warm sandbox's launcher is gone");
        return -1;
    }
    return 1;
}

void gv_launch_ended(struct eai_pc_run *run, int how, int status, const char *text)
{
    struct gv_run *p = priv(run);
    if (p->how)
        return;
    p->how = how;
    if (how == 'f')
        snprintf(p->ltext, sizeof(p->ltext), "%s", text ? text : "");
    if (how == 'x')
        p->code = status;
    /* the launcher's answer as a wait status; 'f' as runsc's own failure */
    eai_pc_run_exited(run, how == 'r' ? status : how == 'x' ? W_EXITCODE(status, 0) : W_EXITCODE(128, 0));
}

/* A cold sandbox dies with eaid (plugins/common/pc_watchdog.c); a warm one
 * has the pool's watchdog. */
static int gv_watchdog(void *drv, struct eai_pc_run *run, struct eai_pc_wd *wd)
{
    struct gv *g = drv;
    struct gv_run *p = priv(run);
    if (p->pooled)
        return -1;
    snprintf(p->root, sizeof(p->root), "--root=%s", g->state_dir);
    *wd = (struct eai_pc_wd){.runtime = g->runsc, .root_arg = p->root, .cid = run->b.cid, .cgpath = run->b.cgpath,
                             .dir = run->b.dir};
    return 0;
}

static int gv_stop_step(void *drv, struct eai_pc_run *run, int step, struct eai_pc_stop *st)
{
    struct gv *g = drv;
    struct gv_run *p = priv(run);
    snprintf(p->root, sizeof(p->root), "--root=%s", g->state_dir);
    char *kill_argv[] = {g->runsc, p->root, "kill", run->b.cid, "KILL", NULL};
    char *del_argv[] = {g->runsc, p->root, "delete", "--force", run->b.cid, NULL};
    if (p->session) {
        /* Only the program: its pid inside the sandbox, then the runsc exec
         * attached to it.  What it left in the background stays (the
         * session's state), as do the sandbox and the other executions. */
        if (step == 0) {
            char *sh_argv[] = {"/bin/sh", "-c", "exec \"$0\" \"$1\" kill --pid=\"$(cat \"$2\")\" \"$3\" KILL",
                               g->runsc, p->root, p->pidf, run->b.cid, NULL};
            memcpy(st->argv, sh_argv, sizeof(sh_argv));
            st->what = "runsc kill --pid";
            st->helper_timeout_ms = GV_RUNSC_TIMEOUT_MS;
            st->next_ms = GV_KILL_GRACE_MS;
            return 0;
        }
        if (step > 1)
            return -1;
        snprintf(st->warn, sizeof(st->warn), "%s: the program in session %s did not stop: SIGKILL to runsc exec",
                 p->own_cid, p->session);
        st->kill_child = 1;
        st->next_ms = -1;
        return 0;
    }
    if (step == 0) {
        memcpy(st->argv, kill_argv, sizeof(kill_argv));
        st->what = "runsc kill";
        st->helper_timeout_ms = GV_RUNSC_TIMEOUT_MS;
        st->next_ms = GV_KILL_GRACE_MS;
        return 0;
    }
    if (step > 1)
        return -1;
    snprintf(st->warn, sizeof(st->warn), "%s did not stop after runsc kill: SIGKILL and delete --force",
             run->b.cid);
    st->kill_child = 1;
    memcpy(st->argv, del_argv, sizeof(del_argv));
    st->what = "runsc delete";
    st->helper_timeout_ms = GV_DELETE_TIMEOUT_MS;
    return 0;
}

/* Worker: the last GV_RUNTIME_LOG_MAX bytes of the run's runsc log (they
 * may begin inside an object: gv_log_errors skips to the first one). */
static void read_runtime_log(struct gv_run *p)
{
    p->log_len = 0;
    int fd = open(p->logf, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > GV_RUNTIME_LOG_MAX ? end - GV_RUNTIME_LOG_MAX : 0;
    ssize_t n = end > 0 ? pread(fd, p->log, GV_RUNTIME_LOG_MAX, from) : 0;
    p->log_len = n > 0 ? (size_t)n : 0;
    close(fd);
}

/* What runsc's errors say, for gv_classify: how many, whether one is a
 * failure to create or start the container (runsc's words for each step:
 * "creating container", "starting container", "executing processes" of a
 * runsc exec) or an executable not found (a shell's 127), and the last
 * ones for eaid's log. */
static void runtime_errors_note(struct gv_run *p, const json_t *errs)
{
    size_t n = json_array_size(errs);
    p->nerr = (int)n;
    p->err_start = p->err_notfound = 0;
    p->errs[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *m = json_string_value(json_array_get(errs, i));
        if (strstr(m, "creating container") || strstr(m, "starting container") || strstr(m, "executing processes"))
            p->err_start = 1;
        if (strstr(m, "error finding executable") ||
            (strstr(m, "failed to load") && strstr(m, "no such file or directory")))
            p->err_notfound = 1;
    }
    /* the last three, oldest first, within the buffer */
    size_t len = 0;
    for (size_t i = n > 3 ? n - 3 : 0; i < n && len < sizeof(p->errs) - 1; i++) {
        int w = snprintf(p->errs + len, sizeof(p->errs) - len, "%s%s", len ? "; " : "",
                         json_string_value(json_array_get(errs, i)));
        len = w < 0 ? len : len + (size_t)w;
    }
}

static void gv_end_work(void *drv, struct eai_pc_run *run)
{
    struct gv_run *p = priv(run);
    gv_cgroup_stats(&run->b, &run->stats);
    if (p->session) {
        /* the session's OOM count grew during this program */
        run->stats.oom = run->stats.oom > p->oom0;
        /* its files are left beside the session's config.json */
        unlink(p->procf);
        unlink(p->pidf);
    } else {
        p->died = gv_runtime_died(run->b.dir, p->pooled && !p->launch ? "exec" : "run");
    }
    if (p->launch && p->line[0]) {
        /* the launcher unlinks it; not if it never read it */
        char lf[2 * PATH_MAX];
        snprintf(lf, sizeof(lf), "%s%.*s", run->b.dir, (int)strcspn(p->line, "\n"), p->line);
        unlink(lf);
    }
    if (p->pooled || p->session) {
        run->stats.cpu_seconds -= p->cpu0;
        if (run->stats.cpu_seconds < 0)
            run->stats.cpu_seconds = 0;
    }
    /* nothing of the sandbox (a detached process of the program) writes
     * into its /tmp once the program has ended: killed before collect.  A
     * launcher that answered has killed and reaped every process of the
     * program already (eai_launcher.c end_the_rest): what is left is runsc
     * ending the sandbox, signalled here without waiting (the pool's
     * teardown waits for the cgroup to empty). */
    if (!p->session) { /* a session's sandbox and its other processes live on */
        gv_cgroup_kill(&run->b, p->launch && p->how == 'x' ? 0 : GV_CGROUP_KILL_WAIT_MS);
        gv_cgroup_weight(&run->b, 1); /* its end yields to the next execution */
    }
    /* runsc's own words: from its log, matched off the end of stderr (the
     * pipes are closed by now: err_tail no longer changes) */
    read_runtime_log(p);
    if (p->session)
        unlink(p->logf);
    json_t *errs = gv_log_errors(p->log, p->log_len);
    if (!errs) {
        /* out of memory: runsc failed if it says so by its status alone */
        p->nerr = 0;
        snprintf(p->errs, sizeof(p->errs), "(runsc's log not read: out of memory)");
        return;
    }
    runtime_errors_note(p, errs);
    run->err_runtime_len = gv_log_stderr_copies(run->err_tail, run->err_tail_len, errs);
    json_decref(errs);
}

static void gv_teardown_work(void *drv, struct eai_pc_run *run)
{
    if (priv(run)->session)
        return; /* the session's sandbox lives on */
    if (priv(run)->pooled)
        return; /* the pool tears its sandbox down (gv_pool_release) */
    if (run->b.mounted || run->b.dir[0])
        gv_bundle_remove(run->b.dir);
    if (run->b.cg_made)
        gv_cgroup_remove(run->b.cgpath, run->b.cg_v2);
}

/* The outcome from runsc's exit status and its own log, never from text
 * the program could have written: a program that prints runsc's words and
 * exits 128 has exited 128.  runsc fails with status 128 and its error in
 * the log (whichever of its processes wrote it: run, gofer or sandbox);
 * with 137 (the program "killed") when a gofer or sandbox died under it. */
static void gv_classify(void *drv, struct eai_pc_run *run, struct eai_iso_result *r, char *msg, size_t msglen)
{
    struct gv *g = drv;
    struct gv_run *p = priv(run);
    int ws = run->wait_status;
    int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
    if (p->errs[0])
        g->host->log(g->host, GV_COMPONENT, r->outcome == EAI_OUT_OOM || run->stats.oom ? EAI_LOG_INFO : EAI_LOG_WARN,
                     "%s%s%s%s: runsc: %.1500s", run->b.cid, p->pooled ? " (execution " : "",
                     p->pooled && run->job->id ? run->job->id : "", p->pooled ? ")" : "", p->errs);
    if (run->stats.oom) {
        r->outcome = EAI_OUT_OOM;
    } else if (p->how == 'x') {
        eai_pc_result_exited(r, p->code); /* the launcher's answer */
    } else if (p->how == 'f') {
        eai_pc_result_failed(r, msg, msglen, "the sandbox's launcher failed: %s", p->ltext);
    } else if (p->died && !run->hard_killed && code == 128 + SIGKILL) {
        /* runsc reports the program killed by SIGKILL, and its logs say the
         * sandbox or gofer process died first: the platform failed, not the
         * program (a wait RPC also fails, harmlessly, when the sandbox
         * ends normally under load: then the status is the program's) */
        eai_pc_result_failed(r, msg, msglen, "the sandbox runtime failed: %s", p->died);
    } else if (WIFSIGNALED(ws)) {
        /* runsc itself died of a signal we did not send. */
        eai_pc_result_failed(r, msg, msglen, "runsc killed by signal %d", WTERMSIG(ws));
    } else if (code == 128 && p->err_notfound) {
        r->outcome = EAI_OUT_EXITED; /* like a shell: command not found */
        r->exit_code = 127;
    } else if (p->nerr > 0 && (code == 128 || (code == 128 + SIGKILL && !run->hard_killed))) {
        /* a runsc process failed (its error is in the log): status 128 is
         * runsc's own, and 137 the program killed as its gofer or sandbox
         * died */
        eai_pc_result_failed(r, msg, msglen, "%s",
                             p->err_start ? "the sandbox runtime failed to start the program"
                                          : "the sandbox runtime failed while the program ran (details in the server log)");
    } else {
        eai_pc_result_exited(r, code);
    }
}

static void gv_retire(void *drv, struct eai_pc_run *run)
{
    struct gv_run *p = priv(run);
    if (p->session) {
        gv_session_unwait(drv, p->session, &p->ses_waiting);
        if (p->ses_running) {
            p->ses_running = 0;
            gv_session_exec_done(drv, p->session);
        }
        return;
    }
    if (priv(run)->pooled)
        gv_pool_release(priv(run)->pooled);
    /* after a burst the pool fills again as runs end, not at the next take */
    gv_pool_refill_soon(drv);
}

/* Shutdown, in two passes over the running sandboxes: pass 0 kills them
 * all (runsc kill, then SIGKILL to the run process); pass 1 deletes them,
 * by then already dead (a delete --force of a live sandbox takes seconds,
 * so one kill-then-delete after another made shutdown slow). */
static void gv_shutdown(void *drv, struct eai_pc_run *run, int pass)
{
    struct gv *g = drv;
    char root[PATH_MAX + 16];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    if (priv(run)->session) {
        /* the session's sandbox is stopped by gv_session_destroy_all */
        if (pass == 0)
            kill(eai_pc_run_pid(run), SIGKILL);
        return;
    }
    if (pass == 0) {
        char *kill_argv[] = {g->runsc, root, "kill", run->b.cid, "KILL", NULL};
        eai_pc_run_sync(kill_argv, GV_RUNSC_TIMEOUT_MS, NULL, 0);
        kill(eai_pc_run_pid(run), SIGKILL);
    } else {
        char *del_argv[] = {g->runsc, root, "delete", "--force", run->b.cid, NULL};
        eai_pc_run_sync(del_argv, GV_DELETE_TIMEOUT_MS, NULL, 0);
    }
}

/* Loop-side order of use: start, run, stop, end (docs/plugin-common.md). */
static const struct eai_pc_driver_ops gv_driver = {
    .name = "gvisor", .component = GV_COMPONENT, .runtime = "runsc", .cid_prefix = GV_CID_PREFIX,
    .priv_size = sizeof(struct gv_run),
    .gate = gv_gate, .hold = gv_hold, .admit = gv_admit, .prepare = gv_prepare, /* the warm pool hands over in admit */
    .started_on_spawn = 1, .spawn_argv = gv_spawn_argv, .adopt = gv_adopt,
    .stop_step = gv_stop_step, .watchdog = gv_watchdog,
    .drain_reads = 64, /* a sandbox process alive after a hard kill must not pin the loop */
    .end_work = gv_end_work, .classify = gv_classify, .teardown_work = gv_teardown_work, .retire = gv_retire,
    .shutdown = gv_shutdown, .release = gv_release,
};

struct eai_pc_runner *gv_runner_new(struct gv *g)
{
    return eai_pc_runner_new(g->host, &gv_driver, g, g->work_dir, g->cg_parent, g->uid, g->cg_v2, &g->inflight,
                             &g->destroying);
}
