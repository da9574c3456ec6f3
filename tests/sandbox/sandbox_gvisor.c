/*
 * The gVisor backend in the sandbox suite (`test_sandbox gvisor`, ctest
 * test_runtime_gvisor_sandbox, label gvisor): eai-isolation-gvisor.so with
 * Debian's runsc, in a real image built with `eaid images build` (once,
 * into EAI_IMAGE_DIR or <build>/images).  The shared cases run twice: cold
 * (pool 0) and with the warm pool; the cases below are gVisor's own.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/errors.h"
#include "images/images.h"
#include "sandbox.h"

#define IMAGE "python:3.11-slim"
#define IMAGE_PACKAGES "python3-minimal,libpython3.11-stdlib"

static char g_data[PATH_MAX], g_images[PATH_MAX], g_work[PATH_MAX], g_state[PATH_MAX];
static char g_runsc[PATH_MAX] = "/usr/bin/runsc";
static int g_pool; /* warm pool size of the current suite's instance */
static int g_launcher = 1; /* and whether its pooled sandboxes have the launcher */
static int g_ready_once;

/* ------------------------------------------------------------ leftovers */

/* runsc containers of ours: all, or those that are not warm-pool sandboxes. */
static int runsc_ids(int include_pool)
{
    char out[8192] = "";
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof(cmd), "%s --root=%s list -quiet 2>/dev/null", g_runsc, g_state);
    sb_sh_out(cmd, out, sizeof(out));
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
        n += sb_count_prefix(p, prefix);
    }
    return n;
}

static int pool_settled(void *arg)
{
    /* used warm sandboxes are torn down in the background after on_exit */
    return sb_count_prefix(g_work, "eai-pool-") <= g_pool * 4 && runsc_ids(1) - runsc_ids(0) <= g_pool * 4;
}

static int leaves_gone(void *arg)
{
    return cgroup_leaves("eai-") - cgroup_leaves("eai-pool-") == 0;
}

static int bundles_gone(void *arg)
{
    return sb_count_prefix(g_work, "eai-") - sb_count_prefix(g_work, "eai-pool-") == 0;
}

/* After each execution: no bundle, mount, cgroup leaf or runsc container
 * of it is left (warm-pool sandboxes waiting for work aside). */
static void gv_assert_clean(void)
{
    /* (under load a run's bundle was seen for a moment after its end, twice
     * in many runs, gone by the suite's end: wait as for the leaves) */
    sb_loop_until(bundles_gone, NULL, 6);
    int bundles = sb_count_prefix(g_work, "eai-") - sb_count_prefix(g_work, "eai-pool-");
    if (bundles) { /* which, for the log */
        char cmd[PATH_MAX + 64], out[2048] = "";
        snprintf(cmd, sizeof(cmd), "ls -la '%s' | grep -v ' eai-pool-'", g_work);
        sb_sh_out(cmd, out, sizeof(out));
        fprintf(stderr, "  bundles left in %s:\n%s\n", g_work, out);
    }
    CU_ASSERT_EQUAL(bundles, 0);
    CU_ASSERT_EQUAL(runsc_ids(0), 0);
    /* a leaf whose last process is still leaving is removed within seconds */
    sb_loop_until(leaves_gone, NULL, 6);
    CU_ASSERT_EQUAL(cgroup_leaves("eai-") - cgroup_leaves("eai-pool-"), 0);
    if (g_pool == 0) {
        CU_ASSERT_FALSE(sb_file_contains("/proc/self/mountinfo", g_work));
        CU_ASSERT_EQUAL(sb_count_prefix(g_work, "eai-"), 0);
    } else {
        sb_loop_until(pool_settled, NULL, 15);
        CU_ASSERT(pool_settled(NULL));
    }
}

/* After destroy(): nothing at all. */
static void assert_nothing_left(void)
{
    CU_ASSERT_EQUAL(sb_count_prefix(g_work, "eai-"), 0);
    CU_ASSERT_FALSE(sb_file_contains("/proc/self/mountinfo", g_work));
    /* nor the empty netns newer runsc bind-mounts into its root */
    char nullns[PATH_MAX + 16];
    snprintf(nullns, sizeof(nullns), "%s/null-netns ", g_state);
    CU_ASSERT_FALSE(sb_file_contains("/proc/self/mountinfo", nullns));
    CU_ASSERT_EQUAL(runsc_ids(1), 0);
    CU_ASSERT_EQUAL(cgroup_leaves("eai-"), 0);
}

/* ------------------------------------------------------------ set-up */

static void *make_instance(const char *runsc, const char *state, const char *work)
{
    return sb_make_instance(json_pack("{s:s, s:s, s:s, s:i, s:b}", "runsc", runsc, "state_dir", state, "work_dir",
                                      work, "pool", g_pool, "launcher", g_launcher),
                            1);
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
    if (sb_host_init(g_data, g_images) < 0)
        return -1;
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
    g_launcher = 1;
    return suite_init_with(2, "pool");
}

static int suite_init_pool_exec(void)
{
    g_launcher = 0;
    return suite_init_with(2, "pool-exec");
}

static int suite_clean(void)
{
    if (g_iso)
        sb_destroy(g_iso);
    g_iso = NULL;
    return 0;
}

static void gv_global_clean(void)
{
    if (!g_ready_once)
        return;
    sb_host_clean();
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_data);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", g_data);
}

static void gv_net_argv(int port, char *buf, size_t len, const char *argv[4])
{
    /* 192.0.2.1 is TEST-NET-1: never routed; only a refused connect is checked. */
    snprintf(buf, len,
             "import socket\n"
             "for h,p in (('127.0.0.1',%d),('192.0.2.1',80)):\n"
             "  s=socket.socket(); s.settimeout(2)\n"
             "  try:\n    s.connect((h,p)); print('connected', h)\n"
             "  except OSError as e: print('refused', h)\n",
             port);
    argv[0] = "python3";
    argv[1] = "-c";
    argv[2] = buf;
    argv[3] = NULL;
}

/* ------------------------------------------------------------ gVisor's own cases */

static void test_python(void)
{
    const char *argv[] = {"python3", "-c", "print(2+2)", NULL};
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "4\n");
    free(r);
    /* `python` is the same python3, and coreutils work (statx shim). */
    const char *argv2[] = {"sh", "-c", "python -c 'import sys;print(sys.version_info[:2])'; ls / | grep -c usr", NULL};
    r = sb_run_new(argv2);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "(3, 11)\n1\n");
    free(r);
    /* gVisor's pid 1 dies of its own SIGTERM. */
    const char *a3[] = {"sh", "-c", "kill -TERM $$", NULL};
    r = sb_run_new(a3);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->sig, 15);
    free(r);
    gv_assert_clean();
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
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "tmp-ok"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "host-denied"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "root-ro"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "Read-only file system"));
    struct stat st;
    CU_ASSERT_NOT_EQUAL(lstat(host_marker, &st), 0);
    CU_ASSERT_NOT_EQUAL(lstat(tmp_marker, &st), 0);
    char img_probe[PATH_MAX + 32];
    snprintf(img_probe, sizeof(img_probe), "%s/var/tmp/ro-probe", g_rootfs);
    CU_ASSERT_NOT_EQUAL(lstat(img_probe, &st), 0);
    free(r);
    gv_assert_clean();
}

static void test_oom_warm(void)
{
    /* Twice: the second one runs in a pre-booted sandbox. */
    for (int i = 0; i < 2; i++) {
        struct iso_run *r = sb_run_new(sb_gvisor.oom_argv);
        r->job.memory_bytes = sb_gvisor.oom_memory;
        CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
        CU_ASSERT_EQUAL(r->outcome, EAI_OUT_OOM);
        CU_ASSERT_PTR_NULL(strstr(r->out, "survived"));
        free(r);
        gv_assert_clean();
        sb_loop(2.5);
    }
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
    struct iso_run *r = sb_run_new(argv);
    r->job.pids = 32;
    r->job.timeout_ms = 8000;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 40), 0);
    CU_ASSERT_NOT_EQUAL(r->outcome, EAI_OUT_ERROR);
    int n = -1;
    const char *f = strstr(r->out, "forked ");
    if (f)
        n = atoi(f + 7);
    CU_ASSERT(n >= 0 && n < 32); /* RLIMIT_NPROC held */
    free(r);
    gv_assert_clean();
    const char *a2[] = {"python3", "-c", "print('next ok')", NULL};
    r = sb_run_new(a2);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "next ok\n");
    free(r);
    gv_assert_clean();
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
    struct iso_run *r = sb_run_new(argv);
    enum eai_code code = EAI_OK;
    CU_ASSERT_EQUAL(sb_run_job_on(bad, r, 1, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_SANDBOX_UNAVAILABLE);
    struct stat st;
    CU_ASSERT_NOT_EQUAL(lstat(marker, &st), 0);
    free(r);
    sb_destroy(bad);

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
    r = sb_run_new(argv);
    CU_ASSERT_EQUAL(sb_run_job_on(bad, r, 1, NULL), -1);
    CU_ASSERT_NOT_EQUAL(lstat(marker, &st), 0);
    free(r);
    sb_destroy(bad);
}

/* isolation.gvisor.platform (docs/gvisor.md "Platform"): `auto` takes the
 * first platform whose trivial sandbox runs (systrap, then ptrace) and says
 * so in the probe's version; a platform named in the config is the only one
 * tried, and when it fails nothing runs.  A wrapper of the real runsc that
 * refuses systrap stands for a host where systrap does not work. */
static void test_platform_auto(void)
{
    char state[PATH_MAX + 16], work[PATH_MAX + 16], wrap[PATH_MAX + 16], marker[PATH_MAX + 16];
    snprintf(state, sizeof(state), "%s/plat-state", g_data);
    snprintf(work, sizeof(work), "%s/plat-work", g_data);
    snprintf(wrap, sizeof(wrap), "%s/runsc-no-systrap", g_data);
    snprintf(marker, sizeof(marker), "%s/plat-ran-on-host", g_data);
    FILE *f = fopen(wrap, "we");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "#!/bin/sh\nfor a; do [ \"$a\" = --platform=systrap ] && { echo 'systrap: not here (test)' >&2; "
               "exit 1; }; done\nexec '%s' \"$@\"\n", g_runsc);
    fclose(f);
    chmod(wrap, 0755);
    struct eai_iso_probe p;
    const char *argv[] = {"sh", "-c", "echo plat-ok", NULL};

    /* the real runsc under auto: systrap where runsc has it (every runsc
     * but Debian 12's 0.0~20221219, which has only ptrace and kvm) */
    void *iso = sb_make_instance(json_pack("{s:s, s:s, s:s, s:i}", "runsc", g_runsc, "state_dir", state,
                                           "work_dir", work, "pool", 0), 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    memset(&p, 0, sizeof(p));
    p.size = sizeof(p);
    g_ops->probe(iso, &p);
    CU_ASSERT_EQUAL(p.ready, 1);
    int old_runsc = strstr(p.version, "0.0~2022") != NULL;
    CU_ASSERT_PTR_NOT_NULL(strstr(p.version, old_runsc ? ", platform ptrace" : ", platform systrap"));
    fprintf(stderr, "  auto on %s: %s\n", g_runsc, p.version);
    sb_destroy(iso);

    /* systrap broken: auto runs on ptrace */
    iso = sb_make_instance(json_pack("{s:s, s:s, s:s, s:i}", "runsc", wrap, "state_dir", state, "work_dir", work,
                                     "pool", 0), 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    g_ops->probe(iso, &p);
    CU_ASSERT_EQUAL(p.ready, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.version, ", platform ptrace"));
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL(sb_run_job_on(iso, r, 60, NULL), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_STRING_EQUAL(r->out, "plat-ok\n");
    free(r);
    sb_destroy(iso);

    /* systrap asked for and broken: not ready, nothing runs */
    iso = sb_make_instance(json_pack("{s:s, s:s, s:s, s:i, s:s}", "runsc", wrap, "state_dir", state, "work_dir",
                                     work, "pool", 0, "platform", "systrap"), 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    g_ops->probe(iso, &p);
    CU_ASSERT_EQUAL(p.ready, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.reason, "platform systrap"));
    char script[PATH_MAX + 32];
    snprintf(script, sizeof(script), "touch %s", marker);
    const char *touch[] = {"sh", "-c", script, NULL};
    r = sb_run_new(touch);
    enum eai_code code = EAI_OK;
    CU_ASSERT_EQUAL(sb_run_job_on(iso, r, 1, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_SANDBOX_UNAVAILABLE);
    struct stat st;
    CU_ASSERT_NOT_EQUAL(lstat(marker, &st), 0);
    free(r);
    sb_destroy(iso);
}

/* Leftovers of a crashed server: a live container, a bundle with its tmpfs,
 * a cgroup leaf.  A new instance's sweep removes them all. */
static void test_sweep_restart(void)
{
    char bundle[PATH_MAX + 32], p[PATH_MAX * 2];
    snprintf(bundle, sizeof(bundle), "%s/eai-stale-1", g_work);
    CU_ASSERT_EQUAL_FATAL(mkdir(bundle, 0700), 0);
    snprintf(p, sizeof(p), "%s/tmp", bundle);
    CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(mount("tmpfs", p, "tmpfs", 0, "size=1m"), 0);
    snprintf(p, sizeof(p), "%s/config.json", bundle);
    json_t *spec = json_pack("{s:s, s:{s:b, s:{s:i, s:i}, s:[s,s], s:[s], s:s}, s:{s:s, s:b},"
                             " s:[{s:s,s:s,s:s}]}",
                             "ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", 65534, "gid", 65534,
                             "args", "sleep", "60", "env", "PATH=/usr/bin:/bin", "cwd", "/", "root", "path", g_rootfs,
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
    sb_destroy(g_iso);
    g_iso = make_instance(g_runsc, g_state, g_work); /* "restart": sweep at start-up */
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_iso);
    /* make_instance waited for the probe; the sweep ran before it finished
     * or right after: run one job, which waits for both. */
    const char *argv[] = {"true", NULL};
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    free(r);
    struct stat st;
    CU_ASSERT_NOT_EQUAL(lstat(bundle, &st), 0);
    CU_ASSERT_NOT_EQUAL(lstat(leaf, &st), 0);
    gv_assert_clean();
}

/* More leftovers than one round of the start-up sweep (256; issue 36): a
 * runsc of this test lists 300 more "eai-" containers, forgets each at its
 * delete; a new instance's sweep must delete them all. */
static void test_sweep_many(void)
{
    char fake[PATH_MAX + 32], wrap[PATH_MAX + 32], cmd[PATH_MAX * 4];
    snprintf(fake, sizeof(fake), "%s/fake-leftovers", g_data);
    snprintf(wrap, sizeof(wrap), "%s/runsc-many", g_data);
    FILE *f = fopen(fake, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 300; i++)
        fprintf(f, "eai-fake-%d\n", i);
    fclose(f);
    f = fopen(wrap, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f,
            "#!/bin/sh\n"
            "case \" $* \" in\n"
            "  *\" list \"*) \"%s\" \"$@\"; cat \"%s\"; exit 0;;\n"
            "  *\" kill eai-fake-\"*) exit 0;;\n"
            "  *\" delete --force eai-fake-\"*) for id; do :; done\n"
            "    grep -vx \"$id\" \"%s\" > \"%s.n\"; mv \"%s.n\" \"%s\"; exit 0;;\n"
            "esac\n"
            "exec \"%s\" \"$@\"\n",
            g_runsc, fake, fake, fake, fake, fake, g_runsc);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(chmod(wrap, 0755), 0);
    sb_destroy(g_iso);
    g_iso = make_instance(wrap, g_state, g_work); /* its sweep lists 300 + the real ones */
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_iso);
    const char *argv[] = {"true", NULL};
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL(sb_run_job(r, 60), 0); /* waits for the probe and the sweep */
    free(r);
    struct stat st;
    CU_ASSERT_EQUAL(stat(fake, &st), 0);
    CU_ASSERT_EQUAL(st.st_size, 0); /* every one of the 300 deleted, in two rounds */
    if (st.st_size != 0) {
        snprintf(cmd, sizeof(cmd), "wc -l < %s >&2", fake);
        (void)system(cmd);
    }
    sb_destroy(g_iso);
    g_iso = make_instance(g_runsc, g_state, g_work);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_iso);
}

static void test_destroy_leaves_nothing(void)
{
    sb_destroy(g_iso);
    g_iso = NULL;
    /* destroy() is synchronous for what is running or waiting */
    assert_nothing_left();
}

/* Warm pool: a second job of one shape runs in a pre-booted sandbox (its
 * pid 1 is the launcher, or the pool's idle init without it), yet sees a
 * fresh, empty /tmp (the launch file gone before the program starts). */
static int pool_hit_cond(void *arg)
{
    return sb_count_prefix(g_work, "eai-pool-") >= 1;
}

static void test_pool_serves_once(void)
{
    const char *warm[] = {"true", NULL};
    struct iso_run *r = sb_run_new(warm);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    free(r);
    sb_loop_until(pool_hit_cond, NULL, 10);
    sb_loop(3); /* give the boot time to finish (ready line) */
    char seen[2][64];
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {"sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline; echo; ls -A /tmp | wc -l; touch /tmp/mark",
                              NULL};
        r = sb_run_new(argv);
        CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
        CU_ASSERT_EQUAL(r->exit_code, 0);
        snprintf(seen[i], sizeof(seen[i]), "%s", r->out);
        CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "\n0\n")); /* /tmp fresh each time */
        free(r);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(seen[0], g_launcher ? "/.eai/launcher" : "sleep infinity"));
    CU_ASSERT_PTR_NOT_NULL(strstr(seen[1], g_launcher ? "/.eai/launcher" : "sleep infinity"));
    gv_assert_clean();
}

/* The cpu leaves (cgroup v1) of the live warm sandboxes of one shape, told
 * by its memory limit (the pool keeps sandboxes of each recent shape): how
 * many have the least weight (cpu.shares 2), the
 * default (1024), and the quota of the suite's jobs (sb_run_new: 1 CPU,
 * cpu.cfs_quota_us 100000); the boot number of the oldest
 * (eai-pool-<random>-<n>) and of the one at the default. */
struct pool_cpu {
    int64_t memory;
    int leaves, idle, run, quota_ok;
    unsigned long oldest, run_seq;
};

static void pool_cpu_read(struct pool_cpu *pc)
{
    char sub[64], dir[PATH_MAX];
    int64_t memory = pc->memory;
    memset(pc, 0, sizeof(*pc));
    pc->memory = memory;
    our_subtree(sub, sizeof(sub));
    snprintf(dir, sizeof(dir), "/sys/fs/cgroup/cpu/%s", sub);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "eai-pool-", 9))
            continue;
        char f[PATH_MAX + 300], v[64] = "";
        snprintf(f, sizeof(f), "%s/%s/cgroup.procs", dir, e->d_name);
        if (sb_count_lines(f) == 0)
            continue; /* a used one ending: its processes are gone */
        snprintf(f, sizeof(f), "/sys/fs/cgroup/memory/%s/%s/memory.limit_in_bytes", sub, e->d_name);
        FILE *fm = fopen(f, "re");
        int same = fm && fgets(v, sizeof(v), fm) && strtoll(v, NULL, 10) == memory;
        if (fm)
            fclose(fm);
        if (!same)
            continue; /* another shape's */
        unsigned long seq = strtoul(strrchr(e->d_name, '-') + 1, NULL, 10);
        if (!pc->leaves++ || seq < pc->oldest)
            pc->oldest = seq;
        snprintf(f, sizeof(f), "%s/%s/cpu.shares", dir, e->d_name);
        FILE *fp = fopen(f, "re");
        if (fp && fgets(v, sizeof(v), fp)) {
            pc->idle += atoi(v) == 2;
            pc->run += atoi(v) == 1024;
            if (atoi(v) == 1024)
                pc->run_seq = seq;
        }
        if (fp)
            fclose(fp);
        snprintf(f, sizeof(f), "%s/%s/cpu.cfs_quota_us", dir, e->d_name);
        fp = fopen(f, "re");
        if (fp && fgets(v, sizeof(v), fp))
            pc->quota_ok += atoi(v) == 100000;
        if (fp)
            fclose(fp);
    }
    closedir(d);
}

/* The shape's pool is full, and none of it is running at the default. */
static int pool_cpu_full(void *arg)
{
    struct pool_cpu *pc = arg;
    pool_cpu_read(pc);
    return pc->leaves == g_pool && pc->idle == pc->leaves;
}

/* A warm sandbox boots and waits at the least CPU weight, so its boot
 * yields the CPUs to a running execution; the one an execution takes (the
 * oldest ready one) has the default weight while it runs, and the job's CPU
 * quota throughout (eaid, not runsc, configures the leaf it pre-creates). */
static void test_pool_cpu_weight(void)
{
    if (access("/sys/fs/cgroup/cpu/cpu.shares", F_OK) != 0) {
        fprintf(stderr, "  (no cgroup v1 cpu controller: skipped)\n");
        return;
    }
    /* A shape of this test's own (a memory limit no other test uses), so
     * that only the boots of its first run, a miss, are of it: sandboxes
     * left from other tests' runs of the suite's shape, whether ready or
     * still ending, would be older than those.  (CI once took the OOM
     * tests' older sandbox for one of the suite's shape.) */
    const int64_t memory = 272LL << 20;
    const char *warm[] = {"true", NULL};
    struct iso_run *r = sb_run_new(warm);
    r->job.memory_bytes = memory;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    free(r);
    struct pool_cpu before = {.memory = memory}, during = before, after = before;
    sb_loop_until(pool_cpu_full, &before, 20);
    sb_loop(4); /* both boots are done (either may end first) */
    pool_cpu_read(&before);
    CU_ASSERT_EQUAL(before.leaves, g_pool);
    CU_ASSERT_EQUAL(before.idle, before.leaves);
    CU_ASSERT_EQUAL(before.quota_ok, before.leaves);

    const char *argv[] = {"sleep", "2", NULL};
    r = sb_run_new(argv);
    r->job.memory_bytes = memory;
    void *h = NULL;
    struct eai_error *err = NULL;
    r->t_start = iso_now_s();
    CU_ASSERT_EQUAL_FATAL(g_ops->start(g_iso, &r->job, &iso_run_cb, r, &h, &err), 0);
    sb_loop(1.0);
    pool_cpu_read(&during);
    sb_loop_until(iso_run_done, r, 30);
    CU_ASSERT(iso_run_done(r));
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_EQUAL(during.run, 1); /* the taken one, the oldest */
    CU_ASSERT_EQUAL(during.run_seq, before.oldest);
    CU_ASSERT_EQUAL(during.idle, during.leaves - 1);
    CU_ASSERT_EQUAL(during.quota_ok, during.leaves);
    free(r);
    pool_cpu_read(&after); /* the used one ends at the least weight, or is gone */
    CU_ASSERT_EQUAL(after.run, 0);
    gv_assert_clean();
}

/* A warm run of argv (the pool refilled first); r->exit_code etc. */
static struct iso_run *warm_run(const char *const *argv, const unsigned char *in, size_t inlen)
{
    sb_loop_until(pool_hit_cond, NULL, 10);
    sb_loop(2);
    struct iso_run *r = sb_run_new(argv);
    r->job.stdin_data = in;
    r->job.stdin_len = inlen;
    r->job.timeout_ms = 20000;
    CU_ASSERT_EQUAL(sb_run_job(r, 60), 0);
    return r;
}

/* The launcher: the program's stdin is a pipe of its own, never the
 * control socket, nor can it write to the launcher's through /proc/1/fd,
 * so nothing it writes is taken for its end; 1 MiB of
 * input (16 pipe buffers) arrives whole; a background process holding
 * stdout does not hold the end back; the exit code is the program's. */
static void test_launcher_channels(void)
{
    const char *forge[] = {"sh", "-c",
                           "printf 'exit 0\\n' >&0 2>/dev/null; echo wrote=$?; "
                           "printf 'exit 0\\n' >/proc/1/fd/0 2>/dev/null; echo proc=$?; exit 3",
                           NULL};
    struct iso_run *r = warm_run(forge, NULL, 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 3);
    CU_ASSERT_PTR_NULL(strstr(r->out, "wrote=0"));
    CU_ASSERT_PTR_NULL(strstr(r->out, "proc=0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "proc=")); /* the script ran that far */
    free(r);

    size_t n = 1 << 20;
    unsigned char *in = malloc(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(in);
    for (size_t i = 0; i < n; i++)
        in[i] = (unsigned char)('a' + i % 26);
    const char *count[] = {"sh", "-c", "head -c 5; echo; wc -c", NULL};
    r = warm_run(count, in, n);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "abcde\n1048571\n");
    free(r);
    free(in);

    const char *bg[] = {"sh", "-c", "sleep 30 & echo started; exit 5", NULL};
    r = warm_run(bg, NULL, 0);
    CU_ASSERT_EQUAL(r->exit_code, 5);
    CU_ASSERT_STRING_EQUAL(r->out, "started\n");
    CU_ASSERT(r->dur < 10.0);
    free(r);

    const char *sig[] = {"python3", "-c", "import os, signal; print('x', flush=True); os.kill(os.getpid(), signal.SIGKILL)",
                         NULL};
    r = warm_run(sig, NULL, 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 137);
    CU_ASSERT_EQUAL(r->sig, 9);
    CU_ASSERT_STRING_EQUAL(r->out, "x\n");
    free(r);
    gv_assert_clean();
}

static void add_own(CU_pSuite s)
{
    CU_add_test(s, "python, coreutils, pid 1's own signal", test_python);
    CU_add_test(s, "host write invisible, root read-only", test_host_write_invisible);
    CU_add_test(s, "fork bomb contained", test_fork_bomb);
}

static int gv_register(void)
{
    CU_pSuite cold = CU_add_suite("gvisor (cold start)", suite_init_cold, suite_clean);
    if (!cold)
        return -1;
    sb_add_shared(cold);
    add_own(cold);
    CU_add_test(cold, "bad runsc: fail closed", test_bad_runsc_fail_closed);
    CU_add_test(cold, "platform auto: systrap, else ptrace; a named one only", test_platform_auto);
    CU_add_test(cold, "sweep after restart", test_sweep_restart);
    CU_add_test(cold, "sweep of more leftovers than one round", test_sweep_many);
    CU_add_test(cold, "destroy leaves nothing", test_destroy_leaves_nothing);
    CU_pSuite pool = CU_add_suite("gvisor (warm pool)", suite_init_pool, suite_clean);
    if (!pool)
        return -1;
    CU_add_test(pool, "pool serves each sandbox once", test_pool_serves_once);
    sb_add_shared(pool);
    add_own(pool);
    CU_add_test(pool, "oom in a warm sandbox", test_oom_warm);
    CU_add_test(pool, "warm sandboxes wait at the least CPU weight", test_pool_cpu_weight);
    CU_add_test(pool, "launcher: stdin, background, signals, no forged end", test_launcher_channels);
    CU_add_test(pool, "sweep after restart", test_sweep_restart);
    CU_add_test(pool, "destroy leaves nothing", test_destroy_leaves_nothing);
    /* without the launcher (config launcher: false): runsc exec into the warm sandbox */
    CU_pSuite exec = CU_add_suite("gvisor (warm pool, runsc exec)", suite_init_pool_exec, suite_clean);
    if (!exec)
        return -1;
    CU_add_test(exec, "pool serves each sandbox once", test_pool_serves_once);
    CU_add_test(exec, "exit codes", sb_test_exit_codes);
    CU_add_test(exec, "env and stdin", sb_test_env_and_stdin);
    CU_add_test(exec, "timeout", sb_test_timeout);
    CU_add_test(exec, "oom in a warm sandbox", test_oom_warm);
    CU_add_test(exec, "destroy leaves nothing", test_destroy_leaves_nothing);
    return 0;
}

const struct sb_backend sb_gvisor = {
    .name = "gvisor",
    .profile = "gvisor",
    .image = IMAGE,
    .memory = 256LL << 20,
    .pids = 128,
    .disk = 32LL << 20,
    .version_has = "runsc",
    .env_has = {"LANG=C.UTF-8\n", "PATH=", NULL},
    .oom_argv = {"python3", "-c",
                 "print('alloc', flush=True)\nx=bytearray(400*1024*1024)\n"
                 "for i in range(0,len(x),4096): x[i]=1\nprint('survived')",
                 NULL},
    .oom_memory = 96LL << 20,
    .stop_max_s = 3.0,
    .parallel = 12,
    .net_argv = gv_net_argv,
    .register_suites = gv_register,
    .assert_clean = gv_assert_clean,
    .global_clean = gv_global_clean,
};
