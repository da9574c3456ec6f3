/*
 * test_local_runner: the local runner of plugins/common (pc_runner.c) on a
 * real event loop with core's real worker pool, driven by a MOCK DRIVER.
 *
 * TEST DOUBLE: `mock_driver` below stands in for the gVisor and Kata
 * drivers (collectd's src/daemon/plugin_mock.c is the idea).  Its "sandbox"
 * is a plain /bin/sh child running job->argv[0] as a script; its stop steps
 * are `sh -c 'kill -TERM <pid>'` as a helper, then SIGKILL of the process
 * group; it counts every op the runner calls.  Everything else is real:
 * posix_spawn, pidfds, pipes, timers, worker threads.  What this proves is
 * the runner's lifecycle (parked, prepare, spawn, caps, timeout with grace
 * then hard kill, settle, cancel, on_exit exactly once, fail closed); what
 * it does not prove is anything about runsc or ctr (tests/sandbox does).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <ftw.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>

#include <eai/isolation.h>

#include "base/errors.h"
#include "base/worker.h"
#include "eai_pc.h"
#include "plugin/host.h"
#include "iso_run.h"
#include "unit_main.h"

/* ------------------------------------------------------------ the mock driver (TEST DOUBLE) */

struct mock {
    int gate;                    /* what ops->gate answers: 0 run, 1 park, -1 refuse */
    int hold;                    /* what ops->hold answers: 0 run, 1 wait (a session's slot) */
    int fail_prepare, fail_spawn;
    int64_t grace_ms;            /* TERM helper -> SIGKILL */
    int need_settle;             /* settled only once `settled` is set */
    int settled;
    int64_t settle_ms;
    int destroying;
    int inflight;
    char work[PATH_MAX];
    char pidbuf[64];
    /* calls seen */
    int prepares, spawns, stop_steps, helpers, end_works, teardowns, classifies, retires, shutdowns;
};

static struct mock M;

static int mock_gate(void *drv, char *why, size_t whylen)
{
    struct mock *m = drv;
    if (m->gate < 0)
        snprintf(why, whylen, "mock not ready: test says no");
    return m->gate;
}

static int mock_hold(void *drv, struct eai_pc_run *run, char *why, size_t whylen)
{
    (void)run;
    (void)why;
    (void)whylen;
    return ((struct mock *)drv)->hold;
}

static int mock_prepare(void *drv, struct eai_pc_run *run, char *msg, size_t msglen)
{
    struct mock *m = drv;
    m->prepares++;
    if (m->fail_prepare) {
        snprintf(msg, msglen, "mock prepare failed");
        return -1;
    }
    if (mkdir(run->b.dir, 0700) < 0)
        return -1;
    run->b.mounted = 1; /* no tmpfs: collect reads <dir>/tmp as it is */
    return 0;
}

static int mock_spawn_argv(void *drv, struct eai_pc_run *run, char **argv, size_t max)
{
    struct mock *m = drv;
    m->spawns++;
    argv[0] = m->fail_spawn ? "/nonexistent/mock-runtime" : "/bin/sh";
    argv[1] = "-c";
    argv[2] = (char *)run->job->argv[0];
    argv[3] = "mock";           /* $0 */
    argv[4] = run->b.dir;       /* $1: the bundle, whose tmp/ is collected */
    argv[5] = NULL;
    return 0;
}

static int mock_stop_step(void *drv, struct eai_pc_run *run, int step, struct eai_pc_stop *st)
{
    struct mock *m = drv;
    m->stop_steps++;
    if (step == 0) {
        snprintf(m->pidbuf, sizeof(m->pidbuf), "kill -TERM %d", (int)eai_pc_run_pid(run));
        st->argv[0] = "/bin/sh";
        st->argv[1] = "-c";
        st->argv[2] = m->pidbuf;
        st->argv[3] = NULL;
        st->what = "mock kill";
        st->helper_timeout_ms = 5000;
        st->next_ms = m->grace_ms;
        m->helpers++;
        return 0;
    }
    if (step == 1) {
        snprintf(st->warn, sizeof(st->warn), "%s ignored TERM: SIGKILL", run->b.cid);
        st->kill_child = 2;
        return 0;
    }
    return -1;
}

static int mock_settled(void *drv, const struct eai_pc_run *run)
{
    struct mock *m = drv;
    return !m->need_settle || m->settled;
}

static int64_t mock_settle_ms(void *drv, const struct eai_pc_run *run)
{
    return ((struct mock *)drv)->settle_ms;
}

static void mock_end_work(void *drv, struct eai_pc_run *run)
{
    struct mock *m = drv;
    __atomic_add_fetch(&m->end_works, 1, __ATOMIC_SEQ_CST);
    run->stats.cpu_seconds = 0.25;
    run->stats.peak_mb = 8;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void mock_teardown_work(void *drv, struct eai_pc_run *run)
{
    struct mock *m = drv;
    __atomic_add_fetch(&m->teardowns, 1, __ATOMIC_SEQ_CST);
    if (run->b.dir[0])
        nftw(run->b.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mock_classify(void *drv, struct eai_pc_run *run, struct eai_iso_result *r, char *msg, size_t msglen)
{
    struct mock *m = drv;
    m->classifies++;
    if (WIFSIGNALED(run->wait_status))
        eai_pc_result_exited(r, 128 + WTERMSIG(run->wait_status));
    else
        eai_pc_result_exited(r, WEXITSTATUS(run->wait_status));
}

static void mock_retire(void *drv, struct eai_pc_run *run)
{
    ((struct mock *)drv)->retires++;
}

static void mock_shutdown(void *drv, struct eai_pc_run *run, int pass)
{
    struct mock *m = drv;
    m->shutdowns++;
    if (pass == 0)
        kill(-eai_pc_run_pid(run), SIGKILL);
}

static void mock_release(void *drv)
{
    ((struct mock *)drv)->inflight--;
}

static const struct eai_pc_driver_ops mock_driver = {
    .name = "mock", .component = "mock", .runtime = "mock", .cid_prefix = "eai-", .cid_strict = 1, .priv_size = 16,
    .started_on_spawn = 1, .gate = mock_gate, .hold = mock_hold, .prepare = mock_prepare, .spawn_argv = mock_spawn_argv,
    .stop_step = mock_stop_step, .settled = mock_settled, .settle_ms = mock_settle_ms,
    .end_work = mock_end_work, .teardown_work = mock_teardown_work, .classify = mock_classify,
    .retire = mock_retire, .shutdown = mock_shutdown, .release = mock_release,
};

/* ------------------------------------------------------------ harness */

static struct event_base *g_base;
static struct eai_host *g_core_host;
static struct eai_host g_host;   /* core's host with a mock image store and a captured log */
static struct eai_pc_runner *g_runner;
static char g_data[PATH_MAX];
static char g_log[8192];

static int mock_image_rootfs(const struct eai_host *h, const char *image, char *buf, size_t len)
{
    if (strcmp(image, "mock:1") != 0)
        return -1;
    snprintf(buf, len, "/");
    return 0;
}

static void mock_log(const struct eai_host *h, const char *component, enum eai_log_level lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = strlen(g_log);
    if (n + 2 < sizeof(g_log)) {
        vsnprintf(g_log + n, sizeof(g_log) - n - 1, fmt, ap);
        strcat(g_log, "\n");
    }
    va_end(ap);
}

/* The job runs `/bin/sh -c script` (the mock's spawn_argv). */
static struct iso_run *run_new(const char *script)
{
    const char *argv[] = {script, NULL};
    struct iso_run *r = iso_run_new(argv, "mock:1", "mock");
    r->job.timeout_ms = 10000;
    return r;
}

/* Run the loop s seconds, or until r has ended. */
static void loop_for(double s, struct iso_run *until_done)
{
    iso_loop_until(g_base, until_done ? iso_run_done : NULL, until_done, s);
}

/* Start r; 0, or -1 with *code. */
static int start(struct iso_run *r, void **h, enum eai_code *code)
{
    struct eai_error *err = NULL;
    r->t_start = iso_now_s();
    if (eai_pc_runner_start(g_runner, &r->job, &iso_run_cb, r, h, &err) < 0) {
        if (code)
            *code = err ? err->code : EAI_OK;
        eai_error_free(err);
        return -1;
    }
    return 0;
}

/* Start, wait for the end, then some more: on_exit must stay at one. */
static void run_to_end(struct iso_run *r, double max_s)
{
    void *h = NULL;
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    loop_for(max_s, r);
    loop_for(0.2, NULL);
    CU_ASSERT_EQUAL(r->done, 1);
}

static void reset_mock(void)
{
    char work[PATH_MAX];
    snprintf(work, sizeof(work), "%s", M.work);
    memset(&M, 0, sizeof(M));
    snprintf(M.work, sizeof(M.work), "%s", work);
    M.grace_ms = 300;
    g_log[0] = '\0';
}

static int suite_init(void)
{
    snprintf(g_data, sizeof(g_data), "/tmp/eai-runner-test-XXXXXX");
    if (!mkdtemp(g_data))
        return -1;
    snprintf(M.work, sizeof(M.work), "%s/work", g_data);
    if (mkdir(M.work, 0700) < 0)
        return -1;
    g_base = event_base_new();
    if (!g_base || eai_workers_start(g_base, 2) < 0)
        return -1;
    g_core_host = eai_host_new(g_base, g_data);
    if (!g_core_host)
        return -1;
    g_host = *g_core_host;
    g_host.image_rootfs = mock_image_rootfs;
    g_host.log = mock_log;
    reset_mock();
    g_runner = eai_pc_runner_new(&g_host, &mock_driver, &M, M.work, "eai-mock/0", 65534, 0, &M.inflight,
                                 &M.destroying);
    return g_runner ? 0 : -1;
}

static int suite_clean(void)
{
    eai_pc_runner_free(g_runner);
    eai_workers_stop();
    eai_host_free(g_core_host);
    event_base_free(g_base);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_data);
    return system(cmd) == 0 ? 0 : -1;
}

/* Nothing of the run is left: no live run, no reference, no bundle. */
static void assert_idle(void)
{
    CU_ASSERT_EQUAL(eai_pc_runner_count(g_runner), 0);
    CU_ASSERT_EQUAL(M.inflight, 0);
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "[ -z \"$(ls -A '%s')\" ]", M.work);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* ------------------------------------------------------------ tests */

/* The CFS quota every sandbox's cpu limit comes from (the OCI spec's and
 * the leaves eaid writes itself): cpu_millis * 100 us per 100 ms, at least
 * 1 ms, none for no limit. */
static void test_cpu_quota(void)
{
    CU_ASSERT_EQUAL(eai_pc_cpu_quota(1000), 100000);
    CU_ASSERT_EQUAL(eai_pc_cpu_quota(2500), 250000);
    CU_ASSERT_EQUAL(eai_pc_cpu_quota(5), 1000);
    CU_ASSERT_EQUAL(eai_pc_cpu_quota(0), 0);
    CU_ASSERT_EQUAL(eai_pc_cpu_quota(-1), 0);
    json_t *c = eai_pc_oci_cpu(250);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(c, "quota")), 25000);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(c, "period")), EAI_PC_CPU_PERIOD_US);
    json_decref(c);
}

/* The start-up probe's bundle: its cgroups path when one is given (the
 * gvisor probe's, under the subtree its sweep walks), none otherwise. */
static void probe_cgroups_path(const char *cgp, const char *want)
{
    char dir[] = "/tmp/eai-probe-bundle-XXXXXX", msg[256] = "", cfg[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    CU_ASSERT_EQUAL(eai_pc_probe_bundle(dir, (unsigned)getuid(), cgp, msg, sizeof msg), 0);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    json_t *spec = json_load_file(cfg, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL(spec);
    json_t *v = json_object_get(json_object_get(spec, "linux"), "cgroupsPath");
    if (want) {
        CU_ASSERT(json_is_string(v) && strcmp(json_string_value(v), want) == 0);
    } else {
        CU_ASSERT_PTR_NULL(v);
    }
    CU_ASSERT(json_is_array(json_object_get(json_object_get(spec, "linux"), "namespaces")));
    json_decref(spec);
    eai_rm_tree(dir);
}

static void test_probe_bundle(void)
{
    probe_cgroups_path("/eai/0123456789abcdef/eai-probe-01020304", "/eai/0123456789abcdef/eai-probe-01020304");
    probe_cgroups_path(NULL, NULL);
}

static void test_success(void)
{
    reset_mock();
    struct iso_run *r = run_new("echo hello; echo oops >&2");
    run_to_end(r, 10);
    CU_ASSERT_EQUAL(r->started, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "hello\n");
    CU_ASSERT_STRING_EQUAL(r->err, "oops\n");
    CU_ASSERT(r->dur > 0);
    CU_ASSERT(r->cpu == 0.25); /* from ops->end_work */
    CU_ASSERT_EQUAL(M.prepares, 1);
    CU_ASSERT_EQUAL(M.spawns, 1);
    CU_ASSERT_EQUAL(M.end_works, 1);
    CU_ASSERT_EQUAL(M.teardowns, 1);
    CU_ASSERT_EQUAL(M.classifies, 1);
    CU_ASSERT_EQUAL(M.retires, 1);
    CU_ASSERT_EQUAL(M.stop_steps, 0);
    free(r);
    assert_idle();
}

/* What a runtime CLI starts with (plugins/common/pc_child.c): descriptors
 * 0-2 only, even when eaid holds one without CLOEXEC; no signal ignored or
 * blocked, though eaid ignores SIGPIPE and blocks SIGUSR1; a process group
 * of its own (what a timeout kills). */
static void test_child_start_state(void)
{
    reset_mock();
    int leak = open("/dev/null", O_RDONLY); /* no O_CLOEXEC */
    CU_ASSERT_FATAL(leak >= 3);
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
    sigaction(SIGPIPE, &ign, &old_pipe);
    sigset_t usr1, old_mask;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, &old_mask);
    /* Read while the shell holds nothing of its own: the masks by its
     * builtins (a grep of /proc/$$/status reads them while the shell forks
     * or waits, with every signal blocked: dash, ~60% of runs), its fds by
     * one ls with no pipe (`ls | tr` showed the pipe's two ends, 3 and 4,
     * when ls read before the shell had closed them: 2 runs in 300). */
    struct iso_run *r = run_new("while read -r l; do case $l in SigBlk:*|SigIgn:*) echo \"$l\";; esac; done "
                                "</proc/$$/status; echo fds; ls -1 /proc/$$/fd; echo end;"
                                " set -- $(cut -d' ' -f5 /proc/$$/stat); echo pgid=$1 pid=$$");
    run_to_end(r, 10);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    close(leak);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "SigBlk:\t0000000000000000\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "SigIgn:\t0000000000000000\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "\nfds\n0\n1\n2\nend\n")); /* the shell's own fds: 0-2 */
    int pgid = -1, pid = -2;
    const char *p = strstr(r->out, "pgid=");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(sscanf(p, "pgid=%d pid=%d", &pgid, &pid), 2);
    CU_ASSERT_EQUAL(pgid, pid);
    CU_ASSERT_NOT_EQUAL(pgid, getpgrp());
    if (!strstr(r->out, "\nfds\n0\n1\n2\nend\n") || !strstr(r->out, "SigBlk:\t0000000000000000\n") ||
        !strstr(r->out, "SigIgn:\t0000000000000000\n"))
        fprintf(stderr, "child said: %s\n", r->out);
    free(r);
    assert_idle();
}

struct child_end {
    int done, status;
    char out[256];
};

static void child_end_cb(void *arg, int status, const char *out, size_t outlen)
{
    struct child_end *e = arg;
    e->done = 1;
    e->status = status;
    snprintf(e->out, sizeof(e->out), "%.*s", (int)outlen, out);
}

static int child_ended(void *arg)
{
    return ((struct child_end *)arg)->done;
}

/* A binary that cannot be run: refused at once when it is not executable
 * (no child, errno); when execve refuses it after the fork (an executable
 * file of no known format), the child ends with 127 and says why. */
static void test_child_exec_failures(void)
{
    static int owner;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/not-a-program", M.work);
    FILE *f = fopen(path, "we");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("\x01\x02 no format\n", f);
    fclose(f);
    char *argv[] = {path, NULL};
    struct child_end e = {0};
    errno = 0;
    CU_ASSERT_PTR_NULL(eai_pc_child_spawn(g_base, &owner, argv, -1, -1, -1, 1, 5000, child_end_cb, &e));
    CU_ASSERT_EQUAL(errno, EACCES);
    CU_ASSERT_EQUAL(chmod(path, 0755), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(eai_pc_child_spawn(g_base, &owner, argv, -1, -1, -1, 1, 5000, child_end_cb, &e));
    iso_loop_until(g_base, child_ended, &e, 10);
    CU_ASSERT_EQUAL(e.done, 1);
    CU_ASSERT(WIFEXITED(e.status) && WEXITSTATUS(e.status) == 127);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.out, "eai: cannot execute "));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.out, ": errno 8\n")); /* ENOEXEC */
    unlink(path);
}

static void test_exit_code_and_stdin(void)
{
    reset_mock();
    struct iso_run *r = run_new("exit 3");
    run_to_end(r, 10);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 3);
    free(r);
    r = run_new("tr a-z A-Z");
    r->job.stdin_data = (const unsigned char *)"from stdin\n";
    r->job.stdin_len = 11;
    run_to_end(r, 10);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "FROM STDIN\n");
    free(r);
    /* No input: stdin is at EOF at once. */
    r = run_new("cat; echo eof");
    run_to_end(r, 10);
    CU_ASSERT_STRING_EQUAL(r->out, "eof\n");
    free(r);
    assert_idle();
}

static void test_timeout_grace(void)
{
    /* The program leaves on TERM: one stop step, no hard kill. */
    reset_mock();
    struct iso_run *r = run_new("echo up; exec sleep 30");
    r->job.timeout_ms = 300;
    run_to_end(r, 10);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT_STRING_EQUAL(r->out, "up\n");
    CU_ASSERT_EQUAL(M.stop_steps, 1);
    CU_ASSERT(r->t_done - r->t_start >= 0.25); /* libevent's cached time may be a little behind */
    CU_ASSERT(r->t_done - r->t_start < 3);
    CU_ASSERT_PTR_NULL(strstr(g_log, "ignored TERM"));
    free(r);
    assert_idle();
}

static void test_timeout_hard_kill(void)
{
    /* TERM ignored: after the grace, the process group is SIGKILLed. */
    reset_mock();
    M.grace_ms = 400;
    struct iso_run *r = run_new("trap '' TERM; echo up; exec sleep 30");
    r->job.timeout_ms = 300;
    run_to_end(r, 10);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT_EQUAL(M.stop_steps, 2);
    CU_ASSERT(r->t_done - r->t_start >= 0.65); /* timeout + grace */
    CU_ASSERT(r->t_done - r->t_start < 4);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_log, "ignored TERM: SIGKILL"));
    free(r);
    assert_idle();
}

static void test_cancel_running(void)
{
    reset_mock();
    struct iso_run *r = run_new("echo started; exec sleep 30");
    void *h = NULL;
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    double t0 = iso_now_s();
    while (!strstr(r->out, "started") && iso_now_s() - t0 < 10)
        loop_for(0.02, NULL);
    CU_ASSERT_EQUAL(r->started, 1);
    eai_pc_runner_cancel(g_runner, h);
    eai_pc_runner_cancel(g_runner, h); /* twice: harmless */
    loop_for(10, r);
    loop_for(0.2, NULL);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_CANCELLED);
    CU_ASSERT(r->t_done - t0 < 3);
    eai_pc_runner_cancel(g_runner, h); /* after the end: ignored */
    free(r);
    assert_idle();
}

static void test_parked_then_gate(void)
{
    /* Parked while the gate is shut: nothing prepared, until it opens. */
    reset_mock();
    M.gate = 1;
    struct iso_run *r = run_new("echo ran");
    void *h = NULL;
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    loop_for(0.2, NULL);
    CU_ASSERT_EQUAL(r->done, 0);
    CU_ASSERT_EQUAL(M.prepares, 0);
    CU_ASSERT_EQUAL(eai_pc_runner_busy(g_runner), 0);
    M.gate = 0;
    eai_pc_runner_unpark_all(g_runner);
    loop_for(10, r);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_STRING_EQUAL(r->out, "ran\n");
    free(r);
    /* Parked, then the gate fails: refused with the driver's reason. */
    M.gate = 1;
    r = run_new("echo ran");
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    M.gate = -1;
    eai_pc_runner_unpark_all(g_runner);
    loop_for(5, r);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_SANDBOX_UNAVAILABLE);
    CU_ASSERT_STRING_EQUAL(r->msg, "mock not ready: test says no");
    CU_ASSERT_EQUAL(r->started, 0);
    CU_ASSERT_EQUAL(r->outlen, 0);
    free(r);
    /* Parked, then cancelled. */
    M.gate = 1;
    r = run_new("echo ran");
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    eai_pc_runner_cancel(g_runner, h);
    loop_for(5, r);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_CANCELLED);
    CU_ASSERT_EQUAL(M.prepares, 1); /* only the first one's */
    free(r);
    assert_idle();
}

/* Issue 36 item 8: a run held for a slot (a session's bound, a paused
 * session) waits no longer than its timeout, and the wait counts against
 * it once it runs. */
static void test_hold_bounded(void)
{
    /* held past its timeout: ends as timeout, never prepared */
    reset_mock();
    M.hold = 1;
    struct iso_run *r = run_new("echo ran");
    r->job.timeout_ms = 300;
    void *h = NULL;
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    loop_for(5, r);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT_EQUAL(r->started, 0);
    CU_ASSERT_EQUAL(M.prepares, 0);
    CU_ASSERT(r->t_done - r->t_start >= 0.25);
    CU_ASSERT(r->t_done - r->t_start < 3);
    free(r);
    /* held 0.4 s of a 1 s timeout, then let go: the program has the rest */
    reset_mock();
    M.hold = 1;
    r = run_new("echo up; exec sleep 30");
    r->job.timeout_ms = 1000;
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    loop_for(0.4, NULL);
    CU_ASSERT_EQUAL(r->done, 0);
    M.hold = 0;
    eai_pc_runner_retry_held(g_runner);
    loop_for(10, r);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT_STRING_EQUAL(r->out, "up\n");
    CU_ASSERT(r->t_done - r->t_start >= 0.9);
    CU_ASSERT(r->t_done - r->t_start < 1.35); /* not 1.4 s: the wait counted */
    free(r);
    /* held, then cancelled: cancelled, the hold's timer gone with it */
    reset_mock();
    M.hold = 1;
    r = run_new("echo ran");
    r->job.timeout_ms = 300;
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    eai_pc_runner_cancel(g_runner, h);
    loop_for(5, r);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_CANCELLED);
    loop_for(0.5, NULL); /* past the timeout: nothing fires on the freed run */
    free(r);
    assert_idle();
}

static void test_fail_closed(void)
{
    reset_mock();
    M.gate = -1;
    struct iso_run *r = run_new("echo ran");
    void *h = NULL;
    enum eai_code code = EAI_OK;
    CU_ASSERT_EQUAL(start(r, &h, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_SANDBOX_UNAVAILABLE);
    loop_for(0.2, NULL);
    CU_ASSERT_EQUAL(r->done, 0);
    CU_ASSERT_EQUAL(M.prepares, 0);
    CU_ASSERT_EQUAL(M.spawns, 0);
    free(r);
    /* Bad jobs are refused before anything is made. */
    M.gate = 0;
    r = run_new("echo ran");
    r->job.argv = NULL;
    CU_ASSERT_EQUAL(start(r, &h, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_VALIDATION_FAILED);
    free(r);
    r = run_new("echo ran");
    struct eai_iso_file bad = {.path = "/etc/passwd", .data = (const unsigned char *)"x", .len = 1};
    r->job.files = &bad;
    r->job.nfiles = 1;
    CU_ASSERT_EQUAL(start(r, &h, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_VALIDATION_FAILED);
    free(r);
    /* An unknown image ends asynchronously, never inside start(). */
    r = run_new("echo ran");
    r->job.image = "nope:1";
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    CU_ASSERT_EQUAL(r->done, 0);
    loop_for(5, r);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_IMAGE_MISSING);
    CU_ASSERT_EQUAL(M.prepares, 0);
    free(r);
    assert_idle();
}

static void test_prepare_failure(void)
{
    reset_mock();
    M.fail_prepare = 1;
    struct iso_run *r = run_new("echo ran");
    run_to_end(r, 10);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_SANDBOX_FAILED);
    CU_ASSERT_STRING_EQUAL(r->msg, "preparing the sandbox: mock prepare failed");
    CU_ASSERT_EQUAL(r->started, 0);
    CU_ASSERT_EQUAL(M.spawns, 0);
    CU_ASSERT_EQUAL(M.end_works, 0);  /* nothing ran */
    CU_ASSERT_EQUAL(M.teardowns, 1);  /* but whatever was made goes */
    CU_ASSERT_PTR_NOT_NULL(strstr(g_log, "preparing the sandbox: mock prepare failed"));
    free(r);
    assert_idle();
}

static void test_spawn_failure(void)
{
    reset_mock();
    M.fail_spawn = 1;
    struct iso_run *r = run_new("echo ran");
    run_to_end(r, 10);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_SANDBOX_FAILED);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->msg, "cannot start mock"));
    CU_ASSERT_EQUAL(r->started, 0);
    CU_ASSERT_EQUAL(M.end_works, 0);
    CU_ASSERT_EQUAL(M.teardowns, 1);
    free(r);
    assert_idle();
}

static void test_output_cap(void)
{
    /* 4 MB written, 1000 bytes delivered, the writer never blocked. */
    reset_mock();
    struct iso_run *r = run_new("head -c 4000000 /dev/zero | tr '\\0' x; echo done >&2");
    r->job.output_bytes = 1000;
    run_to_end(r, 20);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_EQUAL(r->out_total, 1000);
    CU_ASSERT_STRING_EQUAL(r->err, "done\n");
    free(r);
    assert_idle();
}

static void test_settle(void)
{
    /* The driver waits for an event after the child ended: the end comes
     * when it is poked, or after settle_ms without it. */
    reset_mock();
    M.need_settle = 1;
    M.settle_ms = 600;
    struct iso_run *r = run_new("exit 0");
    void *h = NULL;
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    loop_for(1.5, r);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT(r->t_done - r->t_start >= 0.55); /* libevent's coarse clock */
    free(r);
    r = run_new("exit 0");
    CU_ASSERT_EQUAL_FATAL(start(r, &h, NULL), 0);
    double t0 = iso_now_s();
    while (eai_pc_runner_count(g_runner) && ((struct eai_pc_run *)h)->run_exited == 0 && iso_now_s() - t0 < 5)
        loop_for(0.01, NULL);
    loop_for(0.05, NULL);
    CU_ASSERT_EQUAL(r->done, 0); /* waiting for the event */
    M.settled = 1;
    eai_pc_run_poke(h);
    loop_for(0.3, r);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT(r->t_done - t0 < 0.6);
    free(r);
    assert_idle();
}

static void test_shutdown(void)
{
    /* destroy(): a running, a parked and a settling run end without a
     * callback, synchronously; every reference is dropped. */
    reset_mock();
    struct iso_run *a = run_new("echo a; exec sleep 30");
    struct iso_run *b = run_new("echo b");
    void *h = NULL;
    CU_ASSERT_EQUAL_FATAL(start(a, &h, NULL), 0);
    double t0 = iso_now_s();
    while (!a->started && iso_now_s() - t0 < 5)
        loop_for(0.02, NULL);
    M.gate = 1;
    CU_ASSERT_EQUAL_FATAL(start(b, &h, NULL), 0);
    CU_ASSERT_EQUAL(eai_pc_runner_count(g_runner), 2);
    M.destroying = 1;
    M.inflight++; /* as a driver's destroy() does */
    eai_pc_runner_shutdown(g_runner, 0);
    eai_pc_runner_shutdown(g_runner, 1);
    eai_pc_child_reap_all(&M);
    M.inflight--;
    CU_ASSERT_EQUAL(M.shutdowns, 2);
    CU_ASSERT_EQUAL(eai_pc_runner_count(g_runner), 0);
    loop_for(0.3, NULL);
    CU_ASSERT_EQUAL(a->done, 0);
    CU_ASSERT_EQUAL(b->done, 0);
    free(a);
    free(b);
    M.destroying = 0;
    assert_idle();
}

static void test_parallel(void)
{
    reset_mock();
    struct iso_run *rs[8];
    char scripts[8][64];
    for (int i = 0; i < 8; i++) {
        snprintf(scripts[i], sizeof(scripts[i]), "sleep 0.1; echo job-%d; exit %d", i, i);
        rs[i] = run_new(scripts[i]);
        void *h;
        CU_ASSERT_EQUAL_FATAL(start(rs[i], &h, NULL), 0);
    }
    double t0 = iso_now_s();
    while (eai_pc_runner_count(g_runner) && iso_now_s() - t0 < 20)
        loop_for(0.02, NULL);
    loop_for(0.2, NULL);
    for (int i = 0; i < 8; i++) {
        char want[32];
        snprintf(want, sizeof(want), "job-%d\n", i);
        CU_ASSERT_EQUAL(rs[i]->done, 1);
        CU_ASSERT_EQUAL(rs[i]->exit_code, i);
        CU_ASSERT_STRING_EQUAL(rs[i]->out, want);
        free(rs[i]);
    }
    assert_idle();
}

/* on_exit that takes the collected bytes as core does (core/exec/sched_run.c
 * take_files): the runner must not touch or free them afterwards (ASan in
 * the sanitizer build turns a double free or a late read into a failure). */
struct taken {
    int done, movable, nfiles;
    unsigned char *data[4];
    size_t len[4];
    char path[4][64];
};

static void taken_exit(void *arg, const struct eai_iso_result *res)
{
    struct taken *t = arg;
    t->done++;
    t->movable = res->size >= offsetof(struct eai_iso_result, files_movable) + sizeof res->files_movable &&
                 res->files_movable;
    t->nfiles = (int)res->nfiles;
    for (size_t i = 0; i < res->nfiles && i < 4; i++) {
        snprintf(t->path[i], sizeof(t->path[i]), "%s", res->files[i].path);
        t->len[i] = res->files[i].len;
        if (t->movable) {
            t->data[i] = res->files[i].data;
            ((struct eai_iso_collected *)&res->files[i])->data = NULL;
        }
    }
}

static void taken_output(void *arg, enum eai_iso_stream s, const char *data, size_t len)
{
    (void)arg;
    (void)s;
    (void)data;
    (void)len;
}

static void test_files_handed_over(void)
{
    reset_mock();
    struct iso_run *r = run_new("mkdir -p \"$1/tmp/out\" && printf 'collected bytes' > \"$1/tmp/out/a.txt\"");
    r->collect[0] = "/tmp/out";
    r->job.collect = r->collect;
    struct taken t = {0};
    struct eai_iso_callbacks cb = {.size = sizeof(cb), .on_output = taken_output, .on_exit = taken_exit};
    struct eai_error *err = NULL;
    void *h = NULL;
    CU_ASSERT_EQUAL_FATAL(eai_pc_runner_start(g_runner, &r->job, &cb, &t, &h, &err), 0);
    double t0 = iso_now_s();
    while (!t.done && iso_now_s() - t0 < 10)
        loop_for(0.02, NULL);
    loop_for(0.2, NULL);
    CU_ASSERT_EQUAL(t.done, 1);
    CU_ASSERT_EQUAL(t.movable, 1);
    CU_ASSERT_EQUAL_FATAL(t.nfiles, 1);
    CU_ASSERT_STRING_EQUAL(t.path[0], "/tmp/out/a.txt");
    CU_ASSERT_EQUAL_FATAL(t.len[0], 15);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t.data[0]);
    /* still ours and intact after the runner freed its result */
    CU_ASSERT_EQUAL(memcmp(t.data[0], "collected bytes", 15), 0);
    free(t.data[0]);
    free(r);
    assert_idle();
}

/* Input files and session PUTs go only into the sandbox's tmpfs: a bundle
 * whose /tmp is a plain directory (its tmpfs unmounted by a session's end
 * racing the write) gets nothing written, ENOENT (issue 36). */
static void test_inputs_only_into_tmpfs(void)
{
    char dir[PATH_MAX], p[PATH_MAX + 32], msg[256] = "";
    const char *bd = getenv("EAI_BUILD_DIR"); /* on disk, not a tmpfs (/tmp may be one) */
    snprintf(dir, sizeof(dir), "%s/eai-pc-notmpfs-XXXXXX", bd ? bd : ".");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(p, sizeof(p), "%s/tmp", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
    errno = 0;
    CU_ASSERT_EQUAL(eai_pc_tmp_put(dir, 65534, "/tmp/x", (const unsigned char *)"x", 1, msg, sizeof(msg)), -1);
    CU_ASSERT_EQUAL(errno, ENOENT);
    struct stat st;
    snprintf(p, sizeof(p), "%s/tmp/x", dir);
    CU_ASSERT_NOT_EQUAL(lstat(p, &st), 0);
    snprintf(p, sizeof(p), "%s/tmp", dir);
    rmdir(p);
    rmdir(dir);
}

static int register_tests(void)
{
    CU_pSuite s = CU_add_suite("local runner with a mock driver", suite_init, suite_clean);
    if (!s)
        return -1;
    CU_add_test(s, "cpu quota of a cpu limit", test_cpu_quota);
    CU_add_test(s, "the probe bundle's cgroups path", test_probe_bundle);
    CU_add_test(s, "success: output, on_started and on_exit once, every op", test_success);
    CU_add_test(s, "a runtime CLI starts with fds 0-2, default signals, its own group", test_child_start_state);
    CU_add_test(s, "a binary that cannot be run: refused, or 127 and why", test_child_exec_failures);
    CU_add_test(s, "non-zero exit, stdin, EOF", test_exit_code_and_stdin);
    CU_add_test(s, "timeout: TERM honoured", test_timeout_grace);
    CU_add_test(s, "timeout: grace then hard kill", test_timeout_hard_kill);
    CU_add_test(s, "cancel while running", test_cancel_running);
    CU_add_test(s, "parked until the gate opens, fails, or cancel", test_parked_then_gate);
    CU_add_test(s, "held for a slot: bounded by the timeout, which the wait counts against", test_hold_bounded);
    CU_add_test(s, "fail closed: not ready, bad job, unknown image", test_fail_closed);
    CU_add_test(s, "prepare failure", test_prepare_failure);
    CU_add_test(s, "spawn failure", test_spawn_failure);
    CU_add_test(s, "output cap", test_output_cap);
    CU_add_test(s, "settle: poked or timed out", test_settle);
    CU_add_test(s, "8 parallel runs", test_parallel);
    CU_add_test(s, "collected files handed over to on_exit (files_movable)", test_files_handed_over);
    CU_add_test(s, "input files only into the sandbox's tmpfs", test_inputs_only_into_tmpfs);
    CU_add_test(s, "shutdown: no callback, nothing left", test_shutdown);
    return 0;
}

EAI_UNIT_MAIN(register_tests)
