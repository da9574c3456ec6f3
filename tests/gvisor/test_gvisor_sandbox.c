/*
 * test_runtime_gvisor_sandbox: the gVisor backend (eai-isolation-gvisor.so)
 * loaded by the real loader into a real host on a real event loop, running
 * real jobs with Debian's runsc in a real image built with `eaid images
 * build` (once, into EAI_IMAGE_DIR or <build>/images).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>
#include <jansson.h>

#include <eai/isolation.h>

#include "base/errors.h"
#include "plugin/host.h"
#include "images/images.h"
#include "plugin/loader.h"
#include "base/worker.h"

#define IMAGE "python:3.11-slim"
#define IMAGE_PACKAGES "python3-minimal,libpython3.11-stdlib"

static struct event_base *g_base;
static struct eai_host *g_host;
static const struct eai_plugin_descriptor *g_desc;
static const struct eai_isolation_ops *g_ops;
static void *g_iso;
static char g_data[PATH_MAX], g_images[PATH_MAX], g_work[PATH_MAX], g_state[PATH_MAX];
static char g_runsc[PATH_MAX] = "/usr/bin/runsc";
static int g_pool;   /* warm pool size of the current suite's instance */
static int g_ready_once;

/* ------------------------------------------------------------ helpers */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct run {
    struct eai_iso_job job;
    const char *argv[16];
    const char *env[8];
    int started, done;
    double t_started, t_done;
    enum eai_iso_outcome outcome;
    int exit_code, sig;
    enum eai_code error_code;
    char out[1 << 17], err[1 << 14];
    size_t outlen, errlen;
    size_t out_total;
    double cpu, mbs, dur;
    int nfiles, files_truncated;
    char fpath[8][256];
    char fdata[8][256];
    size_t flen[8];
};

static void on_output(void *arg, enum eai_iso_stream s, const char *d, size_t n)
{
    struct run *r = arg;
    char *buf = s == EAI_STREAM_STDOUT ? r->out : r->err;
    size_t *len = s == EAI_STREAM_STDOUT ? &r->outlen : &r->errlen;
    size_t cap = s == EAI_STREAM_STDOUT ? sizeof(r->out) - 1 : sizeof(r->err) - 1;
    if (s == EAI_STREAM_STDOUT)
        r->out_total += n;
    size_t k = n < cap - *len ? n : cap - *len;
    memcpy(buf + *len, d, k);
    *len += k;
    buf[*len] = '\0';
}

static void on_started(void *arg)
{
    struct run *r = arg;
    r->started = 1;
    r->t_started = now_s();
}

static void on_exit_cb(void *arg, const struct eai_iso_result *res)
{
    struct run *r = arg;
    r->done = 1;
    r->t_done = now_s();
    r->outcome = res->outcome;
    r->exit_code = res->exit_code;
    r->sig = res->signal;
    r->error_code = res->error_code;
    r->cpu = res->cpu_seconds;
    r->mbs = res->memory_mb_seconds;
    r->dur = res->duration_s;
    r->files_truncated = res->files_truncated;
    r->nfiles = (int)res->nfiles;
    for (size_t i = 0; i < res->nfiles && i < 8; i++) {
        snprintf(r->fpath[i], sizeof(r->fpath[i]), "%s", res->files[i].path);
        size_t n = res->files[i].len < 255 ? res->files[i].len : 255;
        memcpy(r->fdata[i], res->files[i].data, n);
        r->fdata[i][n] = '\0';
        r->flen[i] = res->files[i].len;
    }
}

static const struct eai_iso_callbacks g_cb = {
    .size = sizeof(struct eai_iso_callbacks),
    .on_output = on_output,
    .on_started = on_started,
    .on_exit = on_exit_cb,
};

static struct run *run_new(const char *const *argv)
{
    struct run *r = calloc(1, sizeof(*r));
    size_t i = 0;
    for (; argv[i] && i < 15; i++)
        r->argv[i] = argv[i];
    r->argv[i] = NULL;
    r->job.size = sizeof(r->job);
    r->job.id = "sbx_test";
    r->job.tenant_id = "t";
    r->job.profile = "gvisor";
    r->job.image = IMAGE;
    r->job.argv = r->argv;
    r->job.env = r->env;
    r->job.cpu_millis = 1000;
    r->job.memory_bytes = 256LL << 20;
    r->job.timeout_ms = 30000;
    r->job.pids = 128;
    r->job.output_bytes = 1 << 20;
    r->job.disk_bytes = 32LL << 20;
    return r;
}

static void loop_until(int (*cond)(void *), void *arg, double max_s)
{
    double end = now_s() + max_s;
    while (!cond(arg) && now_s() < end) {
        struct timeval tv = {0, 20000};
        event_base_loopexit(g_base, &tv);
        event_base_loop(g_base, EVLOOP_ONCE);
    }
}

static int run_done_cond(void *arg)
{
    return ((struct run *)arg)->done;
}

/* Start and wait; returns 0 when start() accepted it. */
static int run_job(struct run *r, double max_s)
{
    void *h = NULL;
    struct eai_error *err = NULL;
    if (g_ops->start(g_iso, &r->job, &g_cb, r, &h, &err) < 0) {
        eai_error_free(err);
        return -1;
    }
    loop_until(run_done_cond, r, max_s);
    return 0;
}

static int count_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix)))
            n++;
    closedir(d);
    return n;
}

static int file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}


/* runsc containers of ours: all, or those that are not warm-pool sandboxes. */
static int runsc_ids(int include_pool)
{
    char out[8192] = "";
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof(cmd), "%s --root=%s list -quiet 2>/dev/null", g_runsc, g_state);
    FILE *p = popen(cmd, "re");
    if (p) {
        size_t n = fread(out, 1, sizeof(out) - 1, p);
        out[n] = '\0';
        pclose(p);
    }
    int n = 0;
    char *save = NULL;
    for (char *id = strtok_r(out, "\n", &save); id; id = strtok_r(NULL, "\n", &save))
        if (!strncmp(id, "eai-", 4) && (include_pool || strncmp(id, "eai-pool-", 9)))
            n++;
    return n;
}

/* Our instance's cgroup subtree: eai/<FNV-1a 64 of the state dir>. */
static void our_subtree(char *out, size_t len)
{
    unsigned long long h = 1469598103934665603ULL;
    for (const char *c = g_state; *c; c++) {
        h ^= (unsigned char)*c;
        h *= 1099511628211ULL;
    }
    snprintf(out, len, "eai/%016llx", h);
}

/* Leaves of ours in the main v1 controllers (other servers may run beside
 * us in their own subtrees). */
static int cgroup_leaves(const char *prefix)
{
    int n = 0;
    static const char *const ctrls[] = {"memory", "cpuacct", "cpu", "pids"};
    char sub[64];
    our_subtree(sub, sizeof(sub));
    for (size_t i = 0; i < sizeof(ctrls) / sizeof(ctrls[0]); i++) {
        char p[PATH_MAX + 300];
        snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/%s", ctrls[i], sub);
        n += count_prefix(p, prefix);
    }
    return n;
}

static int pool_settled(void *arg)
{
    /* used warm sandboxes are torn down in the background after on_exit */
    return count_prefix(g_work, "eai-pool-") <= g_pool * 4 && runsc_ids(1) - runsc_ids(0) <= g_pool * 4;
}

static void loop_until(int (*cond)(void *), void *arg, double max_s);

static int leaves_gone(void *arg)
{
    return cgroup_leaves("eai-") - cgroup_leaves("eai-pool-") == 0;
}

/* After each execution: no bundle, mount, cgroup leaf or runsc container
 * of it is left (warm-pool sandboxes waiting for work aside). */
static void assert_clean(void)
{
    int bundles = count_prefix(g_work, "eai-") - count_prefix(g_work, "eai-pool-");
    CU_ASSERT_EQUAL(bundles, 0);
    CU_ASSERT_EQUAL(runsc_ids(0), 0);
    /* a leaf whose last process is still leaving is removed within seconds */
    loop_until(leaves_gone, NULL, 6);
    CU_ASSERT_EQUAL(cgroup_leaves("eai-") - cgroup_leaves("eai-pool-"), 0);
    if (g_pool == 0) {
        CU_ASSERT_FALSE(file_contains("/proc/self/mountinfo", g_work));
        CU_ASSERT_EQUAL(count_prefix(g_work, "eai-"), 0);
    } else {
        loop_until(pool_settled, NULL, 15);
        CU_ASSERT(pool_settled(NULL));
    }
}

/* After destroy(): nothing at all. */
static void assert_nothing_left(void)
{
    CU_ASSERT_EQUAL(count_prefix(g_work, "eai-"), 0);
    CU_ASSERT_FALSE(file_contains("/proc/self/mountinfo", g_work));
    CU_ASSERT_EQUAL(runsc_ids(1), 0);
    CU_ASSERT_EQUAL(cgroup_leaves("eai-"), 0);
}

/* ------------------------------------------------------------ set-up */

static int probe_done_cond(void *arg)
{
    struct eai_iso_probe p;
    const struct eai_isolation_ops *ops = g_ops;
    ops->probe(arg, &p);
    return p.ready || !p.pending;
}

static void *make_instance(const char *runsc, const char *state, const char *work)
{
    json_t *cfg = json_pack("{s:s, s:s, s:s, s:i}", "runsc", runsc, "state_dir", state, "work_dir", work, "pool",
                            g_pool);
    struct eai_error *err = NULL;
    void *self = g_desc->create(g_host, cfg, &err);
    json_decref(cfg);
    if (!self) {
        fprintf(stderr, "create: %s\n", err ? err->message : "?");
        eai_error_free(err);
        return NULL;
    }
    if (g_ops->sweep)
        g_ops->sweep(self);
    loop_until(probe_done_cond, self, 60);
    return self;
}

static int global_init(void)
{
    if (g_ready_once)
        return 0;
    const char *bd = getenv("EAI_BUILD_DIR");
    if (!bd)
        bd = ".";
    snprintf(g_data, sizeof(g_data), "%s/gvisor-test-XXXXXX", bd);
    if (!mkdtemp(g_data))
        return -1;
    const char *img = getenv("EAI_IMAGE_DIR");
    if (img && *img)
        snprintf(g_images, sizeof(g_images), "%s", img);
    else
        snprintf(g_images, sizeof(g_images), "%s/images", bd);
    const char *rs = getenv("EAI_SANDBOX_RUNSC");
    if (rs && *rs)
        snprintf(g_runsc, sizeof(g_runsc), "%s", rs);
    char rootfs[PATH_MAX];
    if (eai_images_resolve(g_images, IMAGE, rootfs, sizeof(rootfs)) < 0) {
        fprintf(stderr, "building image %s into %s (once)\n", IMAGE, g_images);
        char *argv[] = {"build", IMAGE, "--packages", IMAGE_PACKAGES, NULL};
        if (eai_images_cli(g_images, 4, argv) != 0)
            return -1;
    }
    g_base = event_base_new();
    if (!g_base || eai_workers_start(g_base, 2) < 0)
        return -1;
    g_host = eai_host_new(g_base, g_data);
    if (!g_host)
        return -1;
    eai_host_set_image_dir(g_host, g_images);
    struct eai_error *err = NULL;
    g_desc = eai_plugin_load(eai_plugin_dir(), EAI_KIND_ISOLATION, "gvisor", &err);
    if (!g_desc) {
        fprintf(stderr, "load: %s\n", err ? err->message : "?");
        return -1;
    }
    g_ops = g_desc->ops;
    g_ready_once = 1;
    return 0;
}

static int suite_init_with(int pool, const char *tag)
{
    if (global_init() < 0)
        return -1;
    g_pool = pool;
    snprintf(g_state, sizeof(g_state), "%s/%s-state", g_data, tag);
    snprintf(g_work, sizeof(g_work), "%s/%s-work", g_data, tag);
    g_iso = make_instance(g_runsc, g_state, g_work);
    return g_iso ? 0 : -1;
}

static int suite_init_cold(void)
{
    return suite_init_with(0, "cold");
}

static int suite_init_pool(void)
{
    return suite_init_with(2, "pool");
}

static int suite_clean(void)
{
    if (g_iso)
        g_desc->destroy(g_iso);
    g_iso = NULL;
    return 0;
}

static void global_clean(void)
{
    if (!g_ready_once)
        return;
    eai_workers_stop();
    eai_host_free(g_host);
    event_base_free(g_base);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_data);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", g_data);
}

static void test_destroy_leaves_nothing(void)
{
    g_desc->destroy(g_iso);
    g_iso = NULL;
    /* destroy() is synchronous for what is running or waiting */
    assert_nothing_left();
}

/* Warm pool: a second job of one shape runs in a pre-booted sandbox (its
 * pid 1 is the pool's idle init), yet sees a fresh, empty /tmp. */
static int pool_hit_cond(void *arg)
{
    (void)arg;
    return count_prefix(g_work, "eai-pool-") >= 1;
}

/* ------------------------------------------------------------ tests */

static void test_probe_ready(void)
{
    struct eai_iso_probe p;
    g_ops->probe(g_iso, &p);
    CU_ASSERT_EQUAL(p.ready, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.version, "runsc"));
    CU_ASSERT(p.caps & EAI_ISO_CAP_LOCAL_IMAGES);
    CU_ASSERT(p.caps & EAI_ISO_CAP_MEMORY_LIMIT);
    CU_ASSERT(p.caps & EAI_ISO_CAP_FILES);
}

static void test_print(void)
{
    const char *argv[] = {"python3", "-c", "print(2+2)", NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->started, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "4\n");
    CU_ASSERT(r->cpu > 0);
    CU_ASSERT(r->dur > 0);
    CU_ASSERT(r->mbs > 0);
    free(r);
    /* `python` is the same python3, and coreutils work (statx shim). */
    const char *argv2[] = {"sh", "-c", "python -c 'import sys;print(sys.version_info[:2])'; ls / | grep -c usr; id -u; pwd",
                           NULL};
    r = run_new(argv2);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "(3, 11)\n1\n65534\n/tmp\n");
    free(r);
    assert_clean();
}

static void test_exit_codes(void)
{
    const char *a1[] = {"sh", "-c", "echo oops >&2; exit 3", NULL};
    struct run *r = run_new(a1);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 3);
    CU_ASSERT_EQUAL(r->sig, 0);
    CU_ASSERT_STRING_EQUAL(r->err, "oops\n");
    free(r);
    const char *a2[] = {"sh", "-c", "kill -TERM $$", NULL};
    r = run_new(a2);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->sig, 15);
    free(r);
    const char *a3[] = {"no-such-command-here", NULL};
    r = run_new(a3);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 127);
    free(r);
    assert_clean();
}

static void test_env_and_stdin(void)
{
    setenv("EAI_TEST_HOST_SECRET", "leak", 1);
    const char *argv[] = {"sh", "-c", "env | sort; cat", NULL};
    struct run *r = run_new(argv);
    r->env[0] = "FOO=bar";
    r->env[1] = NULL;
    r->job.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    r->job.stdin_data = (const unsigned char *)"from-stdin\n";
    r->job.stdin_len = 11;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "FOO=bar\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "HOME=/tmp\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "LANG=C.UTF-8\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "PATH="));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"));
    CU_ASSERT_PTR_NULL(strstr(r->out, "EAI_TEST_HOST_SECRET"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "from-stdin\n"));
    unsetenv("EAI_TEST_HOST_SECRET");
    free(r);
    assert_clean();
}

static void test_host_write_invisible(void)
{
    char host_marker[PATH_MAX + 32], tmp_marker[64], script[PATH_MAX * 2];
    snprintf(host_marker, sizeof(host_marker), "%s/host-marker", g_data);
    snprintf(tmp_marker, sizeof(tmp_marker), "/tmp/eai-gv-marker-%d", (int)getpid());
    snprintf(script, sizeof(script),
             "echo x > %s && echo tmp-ok; echo y > %s || echo host-denied; echo z > /var/tmp/ro-probe 2>&1 || "
             "echo root-ro; cat /proc/mounts | grep -c ' / .*ro' ",
             tmp_marker, host_marker);
    const char *argv[] = {"sh", "-c", script, NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "tmp-ok"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "host-denied"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "root-ro"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "Read-only file system"));
    struct stat st;
    CU_ASSERT_NOT_EQUAL(lstat(host_marker, &st), 0);
    CU_ASSERT_NOT_EQUAL(lstat(tmp_marker, &st), 0);
    char img_probe[PATH_MAX + 32];
    CU_ASSERT_EQUAL_FATAL(eai_images_resolve(g_images, IMAGE, img_probe, sizeof(img_probe)), 0);
    strncat(img_probe, "/var/tmp/ro-probe", sizeof(img_probe) - strlen(img_probe) - 1);
    CU_ASSERT_NOT_EQUAL(lstat(img_probe, &st), 0);
    free(r);
    assert_clean();
}

static void test_network_refused(void)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    CU_ASSERT_FATAL(ls >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CU_ASSERT_FATAL(bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0);
    CU_ASSERT_FATAL(listen(ls, 4) == 0);
    socklen_t al = sizeof(a);
    getsockname(ls, (struct sockaddr *)&a, &al);
    char script[512];
    /* 192.0.2.1 is TEST-NET-1: never routed; only a refused connect is checked. */
    snprintf(script, sizeof(script),
             "import socket\n"
             "for h,p in (('127.0.0.1',%d),('192.0.2.1',80)):\n"
             "  s=socket.socket(); s.settimeout(2)\n"
             "  try:\n    s.connect((h,p)); print('connected', h)\n"
             "  except OSError as e: print('refused', h)\n",
             ntohs(a.sin_port));
    const char *argv[] = {"python3", "-c", script, NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "refused 127.0.0.1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "refused 192.0.2.1"));
    CU_ASSERT_PTR_NULL(strstr(r->out, "connected"));
    int c = accept(ls, NULL, NULL);
    CU_ASSERT_EQUAL(c, -1); /* nothing reached the host listener */
    if (c >= 0)
        close(c);
    close(ls);
    free(r);
    assert_clean();
}

static void test_timeout(void)
{
    const char *argv[] = {"sh", "-c", "echo begun; sleep 30; echo never", NULL};
    struct run *r = run_new(argv);
    r->job.timeout_ms = 1500;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 30), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "begun"));
    CU_ASSERT_PTR_NULL(strstr(r->out, "never"));
    double took = r->t_done - r->t_started;
    CU_ASSERT(took >= 1.4);
    CU_ASSERT(took <= 1.5 + 2.0);
    free(r);
    assert_clean();
}

static void test_oom(void)
{
    const char *argv[] = {"python3", "-c",
                          "print('alloc', flush=True)\nx=bytearray(400*1024*1024)\n"
                          "for i in range(0,len(x),4096): x[i]=1\nprint('survived')",
                          NULL};
    /* Twice: with a warm pool the second one runs in a pre-booted sandbox. */
    for (int i = 0; i < (g_pool ? 2 : 1); i++) {
        struct run *r = run_new(argv);
        r->job.memory_bytes = 96LL << 20;
        CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
        CU_ASSERT_EQUAL(r->outcome, EAI_OUT_OOM);
        CU_ASSERT_PTR_NULL(strstr(r->out, "survived"));
        free(r);
        assert_clean();
        double end = now_s() + (g_pool ? 2.5 : 0);
        while (now_s() < end) {
            struct timeval tv = {0, 20000};
            event_base_loopexit(g_base, &tv);
            event_base_loop(g_base, EVLOOP_ONCE);
        }
    }
    struct run *r;
    /* A plain exit 137 is not an OOM. */
    const char *a2[] = {"sh", "-c", "exit 137", NULL};
    r = run_new(a2);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 137);
    free(r);
    assert_clean();
}

static void test_fork_bomb(void)
{
    const char *argv[] = {"python3", "-c",
                          "import os, time\nn=0\nt=time.time()\n"
                          "while time.time()-t < 2:\n"
                          "  try:\n    if os.fork()==0:\n      time.sleep(30); os._exit(0)\n    n+=1\n"
                          "  except OSError: pass\n"
                          "print('forked', n, flush=True)",
                          NULL};
    struct run *r = run_new(argv);
    r->job.pids = 32;
    r->job.timeout_ms = 8000;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 40), 0);
    CU_ASSERT_NOT_EQUAL(r->outcome, EAI_OUT_ERROR);
    int n = -1;
    const char *f = strstr(r->out, "forked ");
    if (f)
        n = atoi(f + 7);
    CU_ASSERT(n >= 0 && n < 32); /* RLIMIT_NPROC held */
    free(r);
    assert_clean();
    const char *a2[] = {"python3", "-c", "print('next ok')", NULL};
    r = run_new(a2);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "next ok\n");
    free(r);
    assert_clean();
}

static void test_output_flood(void)
{
    const char *argv[] = {"sh", "-c", "yes flood | head -c 20000000; echo done >&2", NULL};
    struct run *r = run_new(argv);
    r->job.output_bytes = 65536;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_EQUAL(r->out_total, 65536);
    CU_ASSERT_STRING_EQUAL(r->err, "done\n");
    free(r);
    assert_clean();
}

static void test_files(void)
{
    static const char *collect[] = {"/tmp/outputs", "/tmp/single.txt", "/tmp/missing", NULL};
    struct eai_iso_file files[2] = {
        {.path = "/tmp/in/data.csv", .data = (const unsigned char *)"a,b\n1,2\n", .len = 8},
        {.path = "/tmp/in/deep/blob.bin", .data = (const unsigned char *)"\x00\x01\x02", .len = 3},
    };
    char script[1024];
    snprintf(script, sizeof(script),
             "set -e; mkdir -p /tmp/outputs/sub; wc -c < /tmp/in/deep/blob.bin; "
             "tr a-z A-Z < /tmp/in/data.csv > /tmp/outputs/result.csv; echo more >> /tmp/in/data.csv; "
             "echo nested > /tmp/outputs/sub/n.txt; echo one > /tmp/single.txt; "
             "ln -s /etc/passwd /tmp/outputs/link; ln -s / /tmp/outputs/rootdir; mkfifo /tmp/outputs/fifo; "
             "head -c 5000 /dev/zero > /tmp/outputs/zbig.bin");
    const char *argv[] = {"sh", "-c", script, NULL};
    struct run *r = run_new(argv);
    r->job.files = files;
    r->job.nfiles = 2;
    r->job.collect = collect;
    r->job.collect_max_file_bytes = 4096;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "3\n");
    CU_ASSERT_EQUAL(r->nfiles, 3);
    CU_ASSERT_STRING_EQUAL(r->fpath[0], "/tmp/outputs/result.csv");
    CU_ASSERT_STRING_EQUAL(r->fdata[0], "A,B\n1,2\n");
    CU_ASSERT_STRING_EQUAL(r->fpath[1], "/tmp/outputs/sub/n.txt");
    CU_ASSERT_STRING_EQUAL(r->fdata[1], "nested\n");
    CU_ASSERT_STRING_EQUAL(r->fpath[2], "/tmp/single.txt");
    CU_ASSERT_EQUAL(r->files_truncated, 1); /* zbig.bin over the per-file cap */
    for (int i = 0; i < r->nfiles; i++) {
        CU_ASSERT_PTR_NULL(strstr(r->fpath[i], "link"));
        CU_ASSERT_PTR_NULL(strstr(r->fdata[i], "root:"));
    }
    free(r);
    assert_clean();
    /* File count cap. */
    static const char *collect2[] = {"/tmp/o", NULL};
    const char *a2[] = {"sh", "-c", "mkdir /tmp/o; for i in 1 2 3 4 5; do echo $i > /tmp/o/f$i; done", NULL};
    r = run_new(a2);
    r->job.collect = collect2;
    r->job.collect_max_files = 2;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->nfiles, 2);
    CU_ASSERT_EQUAL(r->files_truncated, 1);
    free(r);
    /* A path outside /tmp is refused before anything runs. */
    struct eai_iso_file bad = {.path = "/etc/../tmp/x", .data = (const unsigned char *)"x", .len = 1};
    const char *a3[] = {"true", NULL};
    r = run_new(a3);
    r->job.files = &bad;
    r->job.nfiles = 1;
    void *h;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL(g_ops->start(g_iso, &r->job, &g_cb, r, &h, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(err);
    eai_error_free(err);
    free(r);
    assert_clean();
}

static void test_cancel(void)
{
    const char *argv[] = {"sh", "-c", "echo started; sleep 30", NULL};
    struct run *r = run_new(argv);
    void *h = NULL;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL_FATAL(g_ops->start(g_iso, &r->job, &g_cb, r, &h, &err), 0);
    double t0 = now_s();
    while (!strstr(r->out, "started") && !r->done && now_s() - t0 < 30) {
        struct timeval tv = {0, 20000};
        event_base_loopexit(g_base, &tv);
        event_base_loop(g_base, EVLOOP_ONCE);
    }
    double tc = now_s();
    g_ops->cancel(g_iso, h);
    loop_until(run_done_cond, r, 30);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_CANCELLED);
    CU_ASSERT(r->t_done - tc < 3.0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "started"));
    free(r);
    assert_clean();
}

static int all_done(void *arg)
{
    struct run **rs = arg;
    for (int i = 0; i < 12; i++)
        if (!rs[i]->done)
            return 0;
    return 1;
}

static void test_parallel(void)
{
    struct run *rs[12];
    char envs[12][32];
    for (int i = 0; i < 12; i++) {
        const char *argv[] = {"sh", "-c", "echo $JOB > /tmp/me; sleep 0.3; cat /tmp/me; ls /tmp | wc -l", NULL};
        rs[i] = run_new(argv);
        snprintf(envs[i], sizeof(envs[i]), "JOB=job-%d", i);
        rs[i]->env[0] = envs[i];
        rs[i]->env[1] = NULL;
        void *h;
        struct eai_error *err = NULL;
        CU_ASSERT_EQUAL(g_ops->start(g_iso, &rs[i]->job, &g_cb, rs[i], &h, &err), 0);
    }
    loop_until(all_done, rs, 180);
    for (int i = 0; i < 12; i++) {
        char want[64];
        snprintf(want, sizeof(want), "job-%d\n1\n", i);
        CU_ASSERT_EQUAL(rs[i]->done, 1);
        CU_ASSERT_EQUAL(rs[i]->exit_code, 0);
        CU_ASSERT_STRING_EQUAL(rs[i]->out, want);
        free(rs[i]);
    }
    assert_clean();
}

static void test_image_missing(void)
{
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    r->job.image = "no-such-image:1";
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_IMAGE_MISSING);
    CU_ASSERT_EQUAL(r->started, 0);
    free(r);
    assert_clean();
}

static void test_bad_runsc_fail_closed(void)
{
    char state[PATH_MAX + 16], work[PATH_MAX + 16], marker[PATH_MAX + 16];
    snprintf(state, sizeof(state), "%s/bad-state", g_data);
    snprintf(work, sizeof(work), "%s/bad-work", g_data);
    snprintf(marker, sizeof(marker), "%s/ran-on-host", g_data);
    void *bad = make_instance("/nonexistent/runsc", state, work);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bad);
    struct eai_iso_probe p;
    g_ops->probe(bad, &p);
    CU_ASSERT_EQUAL(p.ready, 0);
    CU_ASSERT(strlen(p.reason) > 0);
    char script[PATH_MAX + 32];
    snprintf(script, sizeof(script), "touch %s", marker);
    const char *argv[] = {"sh", "-c", script, NULL};
    struct run *r = run_new(argv);
    void *h = NULL;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL(g_ops->start(bad, &r->job, &g_cb, r, &h, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(err);
    if (err)
        CU_ASSERT_EQUAL(err->code, EAI_E_SANDBOX_UNAVAILABLE);
    eai_error_free(err);
    struct stat st;
    CU_ASSERT_NOT_EQUAL(lstat(marker, &st), 0);
    free(r);
    g_desc->destroy(bad);

    /* A runsc that is there but broken: not ready either. */
    char fake[PATH_MAX + 16];
    snprintf(fake, sizeof(fake), "%s/fake-runsc", g_data);
    FILE *f = fopen(fake, "we");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "#!/bin/sh\necho 'runsc version broken'\n[ \"$1\" = --version ] && exit 0\nexit 1\n");
    fclose(f);
    chmod(fake, 0755);
    bad = make_instance(fake, state, work);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bad);
    g_ops->probe(bad, &p);
    CU_ASSERT_EQUAL(p.ready, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.reason, "trivial sandbox failed"));
    r = run_new(argv);
    err = NULL;
    CU_ASSERT_EQUAL(g_ops->start(bad, &r->job, &g_cb, r, &h, &err), -1);
    eai_error_free(err);
    CU_ASSERT_NOT_EQUAL(lstat(marker, &st), 0);
    free(r);
    g_desc->destroy(bad);
}

/* Leftovers of a crashed server: a live container, a bundle with its tmpfs,
 * a cgroup leaf.  A new instance's sweep removes them all. */
static void test_sweep_restart(void)
{
    char rootfs[PATH_MAX], bundle[PATH_MAX + 32], p[PATH_MAX * 2];
    CU_ASSERT_EQUAL_FATAL(eai_images_resolve(g_images, IMAGE, rootfs, sizeof(rootfs)), 0);
    snprintf(bundle, sizeof(bundle), "%s/eai-stale-1", g_work);
    CU_ASSERT_EQUAL_FATAL(mkdir(bundle, 0700), 0);
    snprintf(p, sizeof(p), "%s/tmp", bundle);
    CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(mount("tmpfs", p, "tmpfs", 0, "size=1m"), 0);
    snprintf(p, sizeof(p), "%s/config.json", bundle);
    json_t *spec = json_pack("{s:s, s:{s:b, s:{s:i, s:i}, s:[s,s], s:[s], s:s}, s:{s:s, s:b},"
                             " s:[{s:s,s:s,s:s}]}",
                             "ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", 65534, "gid", 65534,
                             "args", "sleep", "60", "env", "PATH=/usr/bin:/bin", "cwd", "/", "root", "path", rootfs,
                             "readonly", 1, "mounts", "destination", "/proc", "type", "proc", "source", "proc");
    CU_ASSERT_EQUAL_FATAL(json_dump_file(spec, p, 0), 0);
    json_decref(spec);
    snprintf(p, sizeof(p),
             "%s --root=%s --network=none run --bundle %s eai-stale-1 >/dev/null 2>&1 & echo $! > %s/pid; "
             "for i in $(seq 50); do %s --root=%s list -quiet | grep -q eai-stale-1 && break; sleep 0.1; done; "
             "kill -9 $(cat %s/pid)",
             g_runsc, g_state, bundle, g_data, g_runsc, g_state, g_data);
    CU_ASSERT_EQUAL(system(p), 0);
    char sub[64], leaf[PATH_MAX];
    our_subtree(sub, sizeof(sub));
    snprintf(leaf, sizeof(leaf), "/sys/fs/cgroup/memory/eai");
    mkdir(leaf, 0755);
    snprintf(leaf, sizeof(leaf), "/sys/fs/cgroup/memory/%s", sub);
    mkdir(leaf, 0755);
    strcat(leaf, "/eai-stale-leaf");
    CU_ASSERT_EQUAL(mkdir(leaf, 0755), 0);
    g_desc->destroy(g_iso);
    g_iso = make_instance(g_runsc, g_state, g_work); /* "restart": sweep at start-up */
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_iso);
    /* make_instance waited for the probe; the sweep ran before it finished
     * or right after: run one job, which waits for both. */
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    free(r);
    struct stat st;
    CU_ASSERT_NOT_EQUAL(lstat(bundle, &st), 0);
    CU_ASSERT_NOT_EQUAL(lstat(leaf, &st), 0);
    assert_clean();
}

static void test_pool_serves_once(void)
{
    const char *warm[] = {"true", NULL};
    struct run *r = run_new(warm);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    free(r);
    loop_until(pool_hit_cond, NULL, 10);
    /* give the boot time to finish (ready line) */
    double end = now_s() + 3;
    while (now_s() < end) {
        struct timeval tv = {0, 20000};
        event_base_loopexit(g_base, &tv);
        event_base_loop(g_base, EVLOOP_ONCE);
    }
    char seen[2][64];
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {"sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline; echo; ls -A /tmp | wc -l; touch /tmp/mark",
                              NULL};
        r = run_new(argv);
        CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
        CU_ASSERT_EQUAL(r->exit_code, 0);
        snprintf(seen[i], sizeof(seen[i]), "%s", r->out);
        CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "\n0\n")); /* /tmp fresh each time */
        free(r);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(seen[0], "sleep infinity"));
    assert_clean();
}

static void add_common(CU_pSuite s)
{
    CU_add_test(s, "probe ready", test_probe_ready);
    CU_add_test(s, "print works", test_print);
    CU_add_test(s, "exit codes", test_exit_codes);
    CU_add_test(s, "env and stdin", test_env_and_stdin);
    CU_add_test(s, "host write invisible, root read-only", test_host_write_invisible);
    CU_add_test(s, "network refused", test_network_refused);
    CU_add_test(s, "timeout", test_timeout);
    CU_add_test(s, "oom", test_oom);
    CU_add_test(s, "fork bomb contained", test_fork_bomb);
    CU_add_test(s, "output flood truncated", test_output_flood);
    CU_add_test(s, "files in and out", test_files);
    CU_add_test(s, "cancel", test_cancel);
    CU_add_test(s, "12 parallel jobs", test_parallel);
    CU_add_test(s, "image missing", test_image_missing);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite cold = CU_add_suite("gvisor (cold start)", suite_init_cold, suite_clean);
    add_common(cold);
    CU_add_test(cold, "bad runsc: fail closed", test_bad_runsc_fail_closed);
    CU_add_test(cold, "sweep after restart", test_sweep_restart);
    CU_add_test(cold, "destroy leaves nothing", test_destroy_leaves_nothing);
    CU_pSuite pool = CU_add_suite("gvisor (warm pool)", suite_init_pool, suite_clean);
    CU_add_test(pool, "pool serves each sandbox once", test_pool_serves_once);
    add_common(pool);
    CU_add_test(pool, "sweep after restart", test_sweep_restart);
    CU_add_test(pool, "destroy leaves nothing", test_destroy_leaves_nothing);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    unsigned suite_fails = CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    global_clean();
    return (fails || suite_fails) ? 1 : 0;
}
