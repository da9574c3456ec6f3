/*
 * The Kata driver of the local runner (plugins/common/pc_runner.c,
 * docs/plugin-common.md): only what is containerd's and ctr's.
 *
 *   gate      probe done, no sweep running, events stream up, and the shim
 *             still on PATH; else refuse (never parks)
 *   prepare   dir, tmpfs /tmp, input files, config.json, cgroup
 *   spawn     attached `ctr run --rm --config ... --runtime R <cid>`; the
 *             run has started when /tasks/start arrives (stdin's EOF waits
 *             for it: ctr loses an EOF read before the task exists)
 *   stop      `ctr task kill --signal SIGTERM`, kill_grace_ms later
 *             `--signal SIGKILL` (an init process ignores SIGTERM it has no
 *             handler for), KT_HARD_KILL_MS later SIGKILL to ctr itself and
 *             a forced delete of whatever is left
 *   settle    once ctr has ended, wait at most KT_EVENT_WAIT_MS for the
 *             task's /tasks/exit or /containers/delete event
 *   end       the exit code /tasks/exit reports (ctr's own status only when
 *             no event came); OOM is /tasks/oom
 *   teardown  leftovers deleted, cgroup, unmount, dir
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "kata.h"

/* Per-run driver state (run->priv). */
struct kt_run {
    struct kt_seen seen;        /* from the events stream */
    char spec[PATH_MAX + 16];
    char fifo[PATH_MAX + 16];
};

static struct kt_run *priv(const struct eai_pc_run *run)
{
    return run->priv;
}

static int kt_gate(void *drv, char *why, size_t whylen)
{
    struct kt *k = drv;
    char shim[PATH_MAX + 128];
    if (!kt_ready(k)) {
        snprintf(why, whylen, "kata not ready: %s",
                 k->probe_state == 1 ? "sweeping or event stream down" : k->reason);
        return -1;
    }
    /* The runtime may have been removed since the probe: fail closed. */
    if (kt_shim_check(k, shim, sizeof(shim)) < 0) {
        snprintf(why, whylen, "kata not ready: %s", shim);
        return -1;
    }
    return 0;
}

static int kt_prepare(void *drv, struct eai_pc_run *run, char *msg, size_t msglen)
{
    return kt_bundle_prepare(&run->b, run->job, msg, msglen);
}

/* argv = the ctr prefix, then verb (NULL-terminated), at most max. */
static void ctr_argv(struct kt *k, char **argv, size_t max, char *const verb[])
{
    kt_ctr_argv(k, argv);
    size_t n = KT_CTR_ARGC;
    for (size_t i = 0; verb[i] && n + 1 < max; i++)
        argv[n++] = verb[i];
    argv[n] = NULL;
}

static int kt_spawn_argv(void *drv, struct eai_pc_run *run, char **argv, size_t max)
{
    struct kt *k = drv;
    struct kt_run *p = priv(run);
    snprintf(p->spec, sizeof(p->spec), "%s/config.json", run->b.dir);
    snprintf(p->fifo, sizeof(p->fifo), "%s/fifo", k->work_dir);
    char *verb[] = {"run", "--rm", "--config", p->spec, "--runtime", k->runtime, "--fifo-dir", p->fifo,
                    run->b.cid, NULL};
    ctr_argv(k, argv, max, verb);
    return 0;
}

static int kt_stop_step(void *drv, struct eai_pc_run *run, int step, struct eai_pc_stop *st)
{
    struct kt *k = drv;
    char *term[] = {"task", "kill", "--signal", "SIGTERM", run->b.cid, NULL};
    char *kill9[] = {"task", "kill", "--signal", "SIGKILL", run->b.cid, NULL};
    st->helper_timeout_ms = KT_CTR_TIMEOUT_MS;
    if (step == 0) {
        if (k->kill_grace_ms > 0)
            ctr_argv(k, st->argv, sizeof(st->argv) / sizeof(st->argv[0]), term);
        st->what = "ctr task kill SIGTERM";
        st->next_ms = k->kill_grace_ms;
    } else if (step == 1) {
        ctr_argv(k, st->argv, sizeof(st->argv) / sizeof(st->argv[0]), kill9);
        st->what = "ctr task kill SIGKILL";
        st->next_ms = KT_HARD_KILL_MS;
    } else if (step == 2) {
        snprintf(st->warn, sizeof(st->warn),
                 "%s did not stop after SIGKILL: killing ctr, the container is deleted by force", run->b.cid);
        st->kill_child = 2;
    } else {
        return -1;
    }
    return 0;
}

static int kt_settled(void *drv, const struct eai_pc_run *run)
{
    return priv(run)->seen.exited || priv(run)->seen.deleted;
}

static int64_t kt_settle_ms(void *drv, const struct eai_pc_run *run)
{
    return kt_events_running(drv) ? KT_EVENT_WAIT_MS : 0;
}

static void ctr_sync(struct kt *k, char *const verb[])
{
    char *argv[KT_CTR_ARGC + 8];
    ctr_argv(k, argv, sizeof(argv) / sizeof(argv[0]), verb);
    eai_pc_run_sync(argv, KT_CTR_TIMEOUT_MS, NULL, 0);
}

/* Worker: remove what ctr run --rm did not (it was killed, or containerd
 * never told us the container went away); then the cgroup's usage. */
static void kt_end_work(void *drv, struct eai_pc_run *run)
{
    struct kt *k = drv;
    char *cid = run->b.cid;
    if (run->hard_killed || !priv(run)->seen.deleted) {
        char *kill_v[] = {"task", "kill", "--signal", "SIGKILL", cid, NULL};
        char *tdel_v[] = {"task", "delete", "--force", cid, NULL};
        char *cdel_v[] = {"containers", "delete", cid, NULL};
        ctr_sync(k, kill_v);
        ctr_sync(k, tdel_v);
        ctr_sync(k, cdel_v);
    }
    kt_cgroup_stats(&run->b, &run->stats);
}

static void kt_teardown_work(void *drv, struct eai_pc_run *run)
{
    if (run->b.mounted || run->b.dir[0])
        eai_pc_bundle_remove(run->b.dir);
    if (run->b.cg_made)
        kt_cgroup_remove(run->b.cgpath, run->b.cg_v2);
}

static int not_found_message(const char *s)
{
    return strstr(s, "executable file not found") || strstr(s, "no such file or directory");
}

static void kt_classify(void *drv, struct eai_pc_run *run, struct eai_iso_result *r, char *msg, size_t msglen)
{
    const struct kt_seen *seen = &priv(run)->seen;
    int ws = run->wait_status;
    if (seen->oom) {
        r->outcome = EAI_OUT_OOM;
    } else if (seen->exited) {
        eai_pc_result_exited(r, seen->exit_status);
    } else if (ws < 0 || WIFSIGNALED(ws)) {
        eai_pc_result_failed(r, msg, msglen, "ctr ended abnormally");
    } else if (!seen->started && WEXITSTATUS(ws) != 0) {
        /* The task never started: ctr's own error is on its stderr. */
        if (not_found_message(run->err_tail)) {
            r->outcome = EAI_OUT_EXITED; /* like a shell: command not found */
            r->exit_code = 127;
        } else {
            eai_pc_result_failed(r, msg, msglen, "the sandbox runtime failed to start the program");
        }
    } else {
        /* Started, but its exit event never reached us: ctr's status is
         * the task's exit code. */
        eai_pc_result_exited(r, WEXITSTATUS(ws));
    }
}

/* Shutdown: SIGKILL ctr now; kt_destroy reaps it, and the run ends
 * synchronously (leftovers deleted in end_work, as hard_killed). */
static void kt_shutdown(void *drv, struct eai_pc_run *run, int pass)
{
    pid_t pid = eai_pc_run_pid(run);
    if (pass == 0 && pid > 0) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
    }
}

/* Never parks (the gate refuses instead); the end waits for the events
 * stream (settled / settle_ms); cids follow containerd's id rule. */
static const struct eai_pc_driver_ops kt_driver = {
    .name = "kata", .runtime = "ctr", .component = KT_COMPONENT,
    .cid_prefix = KT_CID_PREFIX, .cid_strict = 1, .priv_size = sizeof(struct kt_run),
    .gate = kt_gate, .prepare = kt_prepare, .spawn_argv = kt_spawn_argv, /* started: /tasks/start */
    .stop_step = kt_stop_step, .settled = kt_settled, .settle_ms = kt_settle_ms,
    .end_work = kt_end_work, .teardown_work = kt_teardown_work, .classify = kt_classify,
    .shutdown = kt_shutdown, .release = kt_release, /* drain_reads 0: read to EAGAIN once ctr ended */
};

struct eai_pc_runner *kt_runner_new(struct kt *k)
{
    return eai_pc_runner_new(k->host, &kt_driver, k, k->work_dir, k->cg_parent, k->uid, k->cg_v2, &k->inflight,
                             &k->destroying);
}

void kt_exec_event(struct kt *k, const char *topic, const char *cid, int exit_status)
{
    struct eai_pc_run *run = eai_pc_runner_find(k->runner, cid);
    if (!run)
        return;
    struct kt_seen *seen = &priv(run)->seen;
    if (!strcmp(topic, "/containers/create")) {
        seen->created = 1;
    } else if (!strcmp(topic, "/tasks/start")) {
        seen->started = 1;
        eai_pc_run_started(run);
    } else if (!strcmp(topic, "/tasks/oom")) {
        seen->oom = 1;
    } else if (!strcmp(topic, "/tasks/exit")) {
        seen->exited = 1;
        seen->exit_status = exit_status;
    } else if (!strcmp(topic, "/containers/delete")) {
        seen->deleted = 1;
    }
    eai_pc_run_poke(run);
}
