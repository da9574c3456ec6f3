/*
 * The Kata backend in the sandbox suite (`test_sandbox kata`, ctest
 * test_runtime_kata_sandbox, label kata): eai-isolation-kata.so driving a
 * real, private containerd (own root, state, socket, config with CRI and
 * the unused snapshotters disabled) started by this test.
 *
 * The runtime is io.containerd.kata.v2 as in production, but the shim
 * containerd finds under that name is tests/kata/containerd-shim-kata-v2,
 * a STAND-IN that delegates to runc's shim: no Kata VM runs here (none can
 * on this machine).  Everything else is exercised for real; see that file
 * and docs/kata.md for what this proves and what it does not.
 *
 * The image is a tiny one made here: Debian's static busybox in a rootfs
 * under a private image store (package busybox-static).  The shared cases
 * (sandbox_cases.c) run first; the cases below are Kata's own.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/errors.h"
#include "sandbox.h"

#define IMAGE "busybox:test"
#define NS "eai-test"
#define RUNTIME "io.containerd.kata.v2"

static char g_tmp[PATH_MAX];     /* everything of this test */
static char g_sock[PATH_MAX + 16], g_work[PATH_MAX + 16], g_bin[PATH_MAX + 16], g_log[PATH_MAX + 32];
static char g_shim[PATH_MAX + 64];
static char g_path_with[8192], g_path_without[8192];
static pid_t g_containerd = -1;
static char g_ctr[PATH_MAX] = "/usr/bin/ctr";
static int g_cg_before;

static void kt_assert_clean(void);
static void *make_instance(const char *ns, const char *address, const char *runtime, const char *work);

static int run_started_cond(void *arg)
{
    return ((struct iso_run *)arg)->started || ((struct iso_run *)arg)->done;
}

static void ctr_list(const char *ns, char *out, size_t len)
{
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof(cmd), "%s --address %s --connect-timeout 5s --timeout 30s --namespace %s containers ls -q 2>&1", g_ctr, g_sock, ns);
    if (sb_sh_out(cmd, out, len) != 0)
        snprintf(out, len, "ctr failed");
}

/* Per-execution cgroups under every eai-kata/<hash>/ of the memory
 * hierarchy (v1) or of the unified one (v2). */
static int cgroup_leftovers(void)
{
    int n = 0;
    const char *roots[] = {"/sys/fs/cgroup/memory/eai-kata", "/sys/fs/cgroup/eai-kata"};
    for (size_t i = 0; i < 2; i++) {
        DIR *top = opendir(roots[i]);
        if (!top)
            continue;
        struct dirent *e;
        while ((e = readdir(top))) {
            if (e->d_name[0] == '.' || e->d_type != DT_DIR)
                continue;
            char p[PATH_MAX + 300];
            snprintf(p, sizeof(p), "%s/%s", roots[i], e->d_name);
            n += sb_count_prefix(p, "eai-");
        }
        closedir(top);
    }
    return n;
}

static int write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -1;
    close(fd);
    return rc;
}

static int copy_file(const char *from, const char *to, mode_t mode)
{
    char cmd[PATH_MAX * 2 + 32];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod %o '%s'", from, to, (unsigned)mode, to);
    return system(cmd) == 0 ? 0 : -1;
}

static int start_containerd(void)
{
    char cfg[PATH_MAX + 32], text[8192], logp[PATH_MAX + 32];
    snprintf(cfg, sizeof(cfg), "%s/containerd.toml", g_tmp);
    snprintf(text, sizeof(text),
             "version = 2\n"
             "root = \"%s/root\"\n"
             "state = \"%s/state\"\n"
             "disabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.snapshotter.v1.btrfs\",\n"
             "  \"io.containerd.snapshotter.v1.zfs\", \"io.containerd.snapshotter.v1.devmapper\",\n"
             "  \"io.containerd.snapshotter.v1.aufs\", \"io.containerd.tracing.processor.v1.otlp\",\n"
             "  \"io.containerd.internal.v1.tracing\"]\n"
             "[grpc]\n  address = \"%s\"\n"
             "[ttrpc]\n  address = \"%s.ttrpc\"\n"
             "[debug]\n  address = \"%s/debug.sock\"\n",
             g_tmp, g_tmp, g_sock, g_sock, g_tmp);
    if (write_file(cfg, text, 0600) < 0)
        return -1;
    snprintf(logp, sizeof(logp), "%s/containerd.log", g_tmp);
    /* containerd (and so the shims it starts) sees the stand-in on PATH. */
    char envpath[8300], envlog[PATH_MAX + 64];
    snprintf(envpath, sizeof(envpath), "PATH=%s", g_path_with);
    snprintf(envlog, sizeof(envlog), "EAI_KATA_STANDIN_LOG=%s", g_log);
    char *envp[] = {envpath, envlog, "HOME=/root", NULL};
    char *argv[] = {"containerd", "--config", cfg, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID);
    char *old = getenv("PATH");
    setenv("PATH", g_path_with, 1);
    int rc = posix_spawnp(&g_containerd, "containerd", &fa, &at, argv, envp);
    setenv("PATH", old ? old : "/usr/sbin:/usr/bin:/sbin:/bin", 1);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0) {
        fprintf(stderr, "cannot start containerd: %s\n", strerror(rc));
        g_containerd = -1;
        return -1;
    }
    for (int i = 0; i < 300; i++) {
        struct stat st;
        if (stat(g_sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
            char out[256], cmd[PATH_MAX * 2];
            snprintf(cmd, sizeof(cmd), "%s --address %s --connect-timeout 2s --timeout 10s version >/dev/null 2>&1 && echo ok", g_ctr, g_sock);
            if (sb_sh_out(cmd, out, sizeof(out)) == 0 && !strncmp(out, "ok", 2))
                return 0;
        }
        if (waitpid(g_containerd, NULL, WNOHANG) == g_containerd) {
            fprintf(stderr, "containerd exited; see %s\n", logp);
            g_containerd = -1;
            return -1;
        }
        usleep(50000);
    }
    fprintf(stderr, "containerd did not come up; see %s\n", logp);
    return -1;
}

/* Processes whose command line mentions our temp dir: the shims our
 * containerd started (they outlive it by design). */
static void kill_our_shims(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 1 || pid == getpid())
            continue;
        char p[64], buf[4096];
        snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            continue;
        for (ssize_t i = 0; i < n; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[n] = '\0';
        if (strstr(buf, "containerd-shim") && strstr(buf, g_tmp))
            kill(pid, SIGKILL);
    }
    closedir(d);
}

static void stop_containerd(void)
{
    if (g_containerd <= 0)
        return;
    kill(g_containerd, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(g_containerd, NULL, WNOHANG) == g_containerd) {
            g_containerd = -1;
            break;
        }
        usleep(50000);
    }
    if (g_containerd > 0) {
        kill(g_containerd, SIGKILL);
        waitpid(g_containerd, NULL, 0);
        g_containerd = -1;
    }
    kill_our_shims();
}

/* Detach whatever is still mounted below our temp dir (deepest first). */
static void umount_below(const char *dir)
{
    for (int round = 0; round < 8; round++) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
            return;
        char line[8192], best[PATH_MAX] = "";
        while (fgets(line, sizeof(line), f)) {
            char mp[PATH_MAX];
            if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && !strncmp(mp, dir, strlen(dir)) &&
                strlen(mp) > strlen(best))
                snprintf(best, sizeof(best), "%s", mp);
        }
        fclose(f);
        if (!best[0] || umount2(best, MNT_DETACH) < 0)
            return;
    }
}

static int make_image(void)
{
    char root[PATH_MAX + 64], p[PATH_MAX + 128];
    snprintf(root, sizeof(root), "%s/images/busybox/test/rootfs", g_tmp);
    static const char *const dirs[] = {"", "/bin", "/etc", "/proc", "/dev", "/sys", "/tmp"};
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", root);
    if (system(cmd) != 0)
        return -1;
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", root, dirs[i]);
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return -1;
    }
    snprintf(p, sizeof(p), "%s/bin/busybox", root);
    if (copy_file("/bin/busybox", p, 0755) < 0) {
        fprintf(stderr, "no /bin/busybox: install Debian's busybox-static\n");
        return -1;
    }
    char list[16384];
    if (sb_sh_out("/bin/busybox --list", list, sizeof(list)) != 0)
        return -1;
    char *save = NULL;
    for (char *a = strtok_r(list, "\n", &save); a; a = strtok_r(NULL, "\n", &save)) {
        if (!strcmp(a, "busybox") || strchr(a, '/') || a[0] == '[')
            continue;
        snprintf(p, sizeof(p), "%s/bin/%s", root, a);
        if (symlink("busybox", p) < 0 && errno != EEXIST)
            return -1;
    }
    snprintf(p, sizeof(p), "%s/etc/passwd", root);
    return write_file(p, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/tmp:/bin/sh\n", 0644);
}


static void test_no_network(void)
{
    /* A listener on the host's loopback: the sandbox's own loopback is a
     * different one, so it must not reach it. */
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    CU_ASSERT_FATAL(ls >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t al = sizeof(a);
    CU_ASSERT_FATAL(bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(ls, 4) == 0 &&
                    getsockname(ls, (struct sockaddr *)&a, &al) == 0);
    char script[512];
    snprintf(script, sizeof(script),
             "sed -n '3,$p' /proc/net/dev | cut -d: -f1 | tr -d ' '; "
             "nc -w 2 127.0.0.1 %d </dev/null; echo nc=$?; ip route | wc -l",
             ntohs(a.sin_port));
    const char *argv[] = {"sh", "-c", script, NULL};
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "lo\nnc=1\n0\n");
    int c = accept(ls, NULL, NULL);
    CU_ASSERT_EQUAL(c, -1);
    if (c >= 0)
        close(c);
    close(ls);
    free(r);
    kt_assert_clean();
}

static void test_timeout_kill(void)
{
    /* pid 1 without a handler ignores SIGTERM: only the SIGKILL ends it. */
    const char *argv[] = {"sleep", "30", NULL};
    struct iso_run *r = sb_run_new(argv);
    r->job.timeout_ms = 1000;
    double t0 = iso_now_s();
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT(r->t_done - t0 >= 1.4); /* timeout + the 500 ms grace */
    CU_ASSERT(r->t_done - t0 < 10);
    free(r);
    kt_assert_clean();
}

static void test_timeout_term_first(void)
{
    /* A program with a handler gets SIGTERM before any SIGKILL. */
    const char *argv[] = {"sh", "-c", "trap 'echo got-term; exit 0' TERM; echo up; while :; do :; done", NULL};
    struct iso_run *r = sb_run_new(argv);
    r->job.timeout_ms = 800;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT_STRING_EQUAL(r->out, "up\ngot-term\n");
    free(r);
    kt_assert_clean();
}

static void test_pids_limit(void)
{
    /* 40 background processes: fine under 64 pids, refused under 16 (the
     * shell cannot fork and gives up). */
    const char *argv[] = {"sh", "-c", "for i in $(seq 40); do sleep 2 & done; echo all-forked", NULL};
    struct iso_run *r = sb_run_new(argv);
    r->job.pids = 64;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "all-forked\n");
    free(r);
    r = sb_run_new(argv);
    r->job.pids = 16;
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_NOT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "can't fork"));
    free(r);
    kt_assert_clean();
}

/* The refusals: nothing reaches containerd, the stand-in never runs. */
static void assert_refused(void *iso, const char *ns, const char *reason_part)
{
    struct eai_iso_probe p;
    g_ops->probe(iso, &p);
    CU_ASSERT_EQUAL(p.ready, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.reason, reason_part));
    if (!strstr(p.reason, reason_part))
        fprintf(stderr, "reason: %s\n", p.reason);
    int before = sb_count_lines(g_log);
    const char *argv[] = {"sh", "-c", "echo ran", NULL};
    struct iso_run *r = sb_run_new(argv);
    enum eai_code code = EAI_OK;
    CU_ASSERT_EQUAL(sb_run_job_on(iso, r, 5, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_SANDBOX_UNAVAILABLE);
    sb_loop(0.3);
    CU_ASSERT_EQUAL(r->done, 0);
    CU_ASSERT_EQUAL(r->outlen, 0);
    CU_ASSERT_EQUAL(sb_count_lines(g_log), before);
    char out[4096];
    ctr_list(ns, out, sizeof(out));
    CU_ASSERT_STRING_EQUAL(out, "");
    free(r);
}

static void test_refuse_no_shim(void)
{
    /* eaid's PATH has no containerd-shim-kata-v2 (containerd's still has). */
    setenv("PATH", g_path_without, 1);
    char work[PATH_MAX + 16];
    snprintf(work, sizeof(work), "%s/work-noshim", g_tmp);
    void *iso = make_instance("eai-noshim", g_sock, RUNTIME, work);
    setenv("PATH", g_path_with, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    assert_refused(iso, "eai-noshim", "containerd-shim-kata-v2 not found on PATH");
    sb_destroy(iso);
}

static void test_refuse_no_containerd(void)
{
    char sock[PATH_MAX + 32], work[PATH_MAX + 16];
    snprintf(sock, sizeof(sock), "%s/absent.sock", g_tmp);
    snprintf(work, sizeof(work), "%s/work-nocd", g_tmp);
    void *iso = make_instance("eai-nocd", sock, RUNTIME, work);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    assert_refused(iso, "eai-nocd", "no containerd socket");
    sb_destroy(iso);
}

static void test_refuse_shim_removed(void)
{
    /* Ready instance; then the runtime is uninstalled: start() re-checks. */
    char moved[PATH_MAX + 80];
    snprintf(moved, sizeof(moved), "%s.removed", g_shim);
    CU_ASSERT_EQUAL_FATAL(rename(g_shim, moved), 0);
    int before = sb_count_lines(g_log);
    const char *argv[] = {"sh", "-c", "echo ran", NULL};
    struct iso_run *r = sb_run_new(argv);
    enum eai_code code = EAI_OK;
    CU_ASSERT_EQUAL(sb_run_job_on(g_iso, r, 5, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_SANDBOX_UNAVAILABLE);
    sb_loop(0.3);
    CU_ASSERT_EQUAL(r->done, 0);
    CU_ASSERT_EQUAL(sb_count_lines(g_log), before);
    CU_ASSERT_EQUAL(rename(moved, g_shim), 0);
    free(r);
    kt_assert_clean();
}

static void test_probe_runs_a_container(void)
{
    /* eaid sees a shim for io.containerd.katax.v2, containerd does not:
     * only the probe's trivial container can notice, and it must. */
    char bin2[PATH_MAX + 16], shim2[PATH_MAX + 64], path2[8400], work[PATH_MAX + 16];
    snprintf(bin2, sizeof(bin2), "%s/bin2", g_tmp);
    snprintf(shim2, sizeof(shim2), "%s/containerd-shim-katax-v2", bin2);
    snprintf(work, sizeof(work), "%s/work-katax", g_tmp);
    CU_ASSERT_EQUAL_FATAL(mkdir(bin2, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(copy_file(g_shim, shim2, 0755), 0);
    snprintf(path2, sizeof(path2), "%s:%s", bin2, g_path_with);
    setenv("PATH", path2, 1);
    void *iso = make_instance("eai-katax", g_sock, "io.containerd.katax.v2", work);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    assert_refused(iso, "eai-katax", "trivial container");
    sb_destroy(iso);
    setenv("PATH", g_path_with, 1);
}

static void test_sweep(void)
{
    /* Leftovers of an earlier eaid: a running container of ours in the
     * namespace, and a stale dir in the work dir. */
    char spec[PATH_MAX + 32], text[2048], cmd[PATH_MAX * 3], out[4096];
    snprintf(spec, sizeof(spec), "%s/leftover.json", g_tmp);
    snprintf(text, sizeof(text),
             "{\"ociVersion\":\"1.0.2\",\"process\":{\"user\":{\"uid\":65534,\"gid\":65534},"
             "\"args\":[\"sleep\",\"300\"],\"env\":[\"PATH=/bin\"],\"cwd\":\"/\"},"
             "\"root\":{\"path\":\"%s/images/busybox/test/rootfs\",\"readonly\":true},"
             "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"}],"
             "\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"},{\"type\":\"mount\"}]}}",
             g_tmp);
    CU_ASSERT_EQUAL_FATAL(write_file(spec, text, 0644), 0);
    snprintf(cmd, sizeof(cmd),
             "%s --address %s --connect-timeout 5s --timeout 60s --namespace %s run -d --null-io --config %s "
             "--runtime %s eai-leftover-1 2>&1", g_ctr,
             g_sock, NS, spec, RUNTIME);
    CU_ASSERT_EQUAL(sb_sh_out(cmd, out, sizeof(out)), 0);
    ctr_list(NS, out, sizeof(out));
    CU_ASSERT_STRING_EQUAL(out, "eai-leftover-1\n");
    char stale[PATH_MAX + 32];
    snprintf(stale, sizeof(stale), "%s/eai-stale-dir", g_work);
    CU_ASSERT_EQUAL(mkdir(stale, 0700), 0);
    /* "Restart": a new instance sweeps at start-up. */
    sb_destroy(g_iso);
    g_iso = make_instance(NS, g_sock, RUNTIME, g_work);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_iso);
    struct eai_iso_probe p;
    for (int i = 0; i < 300; i++) {
        g_ops->probe(g_iso, &p);
        if (p.ready)
            break;
        sb_loop(0.1);
    }
    CU_ASSERT_EQUAL(p.ready, 1);
    struct stat st;
    CU_ASSERT_NOT_EQUAL(lstat(stale, &st), 0);
    const char *argv[] = {"true", NULL};
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    free(r);
    kt_assert_clean();
}

static void test_destroy_while_running(void)
{
    /* Shutdown with an execution running: no callback, nothing left. */
    const char *argv[] = {"sleep", "60", NULL};
    struct iso_run *r = sb_run_new(argv);
    void *h = NULL;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL_FATAL(g_ops->start(g_iso, &r->job, &iso_run_cb, r, &h, &err), 0);
    sb_loop_until(run_started_cond, r, 30);
    CU_ASSERT_EQUAL(r->started, 1);
    sb_destroy(g_iso);
    g_iso = NULL;
    sb_loop(0.5);
    CU_ASSERT_EQUAL(r->done, 0);
    free(r);
    kt_assert_clean();
    g_iso = make_instance(NS, g_sock, RUNTIME, g_work);
    CU_ASSERT_PTR_NOT_NULL(g_iso);
}

/* No container, dir, mount or cgroup of ours left. */
static void kt_assert_clean(void)
{
    char out[4096];
    ctr_list(NS, out, sizeof(out));
    CU_ASSERT_STRING_EQUAL(out, "");
    CU_ASSERT_EQUAL(sb_count_prefix(g_work, "eai-"), 0);
    CU_ASSERT_FALSE(sb_file_contains("/proc/self/mountinfo", g_work));
    CU_ASSERT_EQUAL(cgroup_leftovers(), g_cg_before);
}

static void *make_instance(const char *ns, const char *address, const char *runtime, const char *work)
{
    return sb_make_instance(json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "address", address, "namespace", ns, "ctr",
                                      g_ctr, "runtime", runtime, "work_dir", work, "kill_grace_ms", 500),
                            1);
}

static int suite_init(void)
{
    snprintf(g_tmp, sizeof(g_tmp), "/tmp/eai-kata-XXXXXX"); /* short: unix socket paths */
    if (!mkdtemp(g_tmp))
        return -1;
    snprintf(g_sock, sizeof(g_sock), "%s/c.sock", g_tmp);
    snprintf(g_work, sizeof(g_work), "%s/work", g_tmp);
    snprintf(g_bin, sizeof(g_bin), "%s/bin", g_tmp);
    snprintf(g_log, sizeof(g_log), "%s/standin.log", g_tmp);
    snprintf(g_shim, sizeof(g_shim), "%s/containerd-shim-kata-v2", g_bin);
    const char *src = getenv("EAI_SOURCE_DIR");
    char from[PATH_MAX];
    snprintf(from, sizeof(from), "%s/tests/kata/containerd-shim-kata-v2", src ? src : EAI_SOURCE_DIR);
    if (mkdir(g_bin, 0755) < 0 || copy_file(from, g_shim, 0755) < 0 || make_image() < 0)
        return -1;
    const char *path = getenv("PATH");
    snprintf(g_path_without, sizeof(g_path_without), "%s", path && *path ? path : "/usr/sbin:/usr/bin:/sbin:/bin");
    snprintf(g_path_with, sizeof(g_path_with), "%s:%s", g_bin, g_path_without);
    if (access(g_ctr, X_OK) < 0) {
        fprintf(stderr, "no %s: install Debian's containerd\n", g_ctr);
        return -1;
    }
    if (start_containerd() < 0)
        return -1;
    setenv("PATH", g_path_with, 1);
    char images[PATH_MAX + 16];
    snprintf(images, sizeof(images), "%s/images", g_tmp);
    if (sb_host_init(g_tmp, images) < 0)
        return -1;
    g_cg_before = cgroup_leftovers();
    g_iso = make_instance(NS, g_sock, RUNTIME, g_work);
    return g_iso ? 0 : -1;
}

static int suite_clean(void)
{
    if (g_iso)
        sb_destroy(g_iso);
    g_iso = NULL;
    sb_host_clean();
    stop_containerd();
    umount_below(g_tmp);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static void kt_net_argv(int port, char *buf, size_t len, const char *argv[4])
{
    snprintf(buf, len, "nc -w 2 127.0.0.1 %d </dev/null && echo connected || echo refused", port);
    argv[0] = "sh";
    argv[1] = "-c";
    argv[2] = buf;
    argv[3] = NULL;
}

/* ------------------------------------------------------------ Kata's own cases */

static void test_through_the_runtime(void)
{
    /* The probe's trivial container, and each run, went through the kata
     * runtime name: containerd resolved it to the (stand-in) shim. */
    CU_ASSERT(sb_count_lines(g_log) > 0);
    int before = sb_count_lines(g_log);
    const char *argv[] = {"true", NULL};
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT(sb_count_lines(g_log) > before);
    struct eai_iso_probe p;
    g_ops->probe(g_iso, &p);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.version, RUNTIME));
    free(r);
    kt_assert_clean();
}

static void test_mounts(void)
{
    const char *argv[] = {"sh", "-c",
                          "awk '$5==\"/\" {print $6}' /proc/self/mountinfo | cut -d, -f1; "
                          "awk '$5==\"/tmp\" {print $6}' /proc/self/mountinfo | cut -d, -f1",
                          NULL};
    struct iso_run *r = sb_run_new(argv);
    CU_ASSERT_EQUAL_FATAL(sb_run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_STRING_EQUAL(r->out, "ro\nrw\n");
    free(r);
    kt_assert_clean();
}

static int kt_register(void)
{
    CU_pSuite s = CU_add_suite("kata", suite_init, suite_clean);
    if (!s)
        return -1;
    sb_add_shared(s);
    CU_add_test(s, "through the kata runtime name", test_through_the_runtime);
    CU_add_test(s, "root ro, /tmp rw mounts", test_mounts);
    CU_add_test(s, "only loopback, no route", test_no_network);
    CU_add_test(s, "timeout: SIGTERM ignored, SIGKILL", test_timeout_kill);
    CU_add_test(s, "timeout: SIGTERM first", test_timeout_term_first);
    CU_add_test(s, "pids limit", test_pids_limit);
    CU_add_test(s, "refused: no shim on PATH", test_refuse_no_shim);
    CU_add_test(s, "refused: no containerd", test_refuse_no_containerd);
    CU_add_test(s, "refused: shim removed after the probe", test_refuse_shim_removed);
    CU_add_test(s, "probe runs a real container", test_probe_runs_a_container);
    CU_add_test(s, "sweep after restart", test_sweep);
    CU_add_test(s, "destroy while running", test_destroy_while_running);
    return 0;
}

/* The busybox image, a 500 ms kill grace: stops take up to grace + 5 s. */
const struct sb_backend sb_kata = {
    .name = "kata", .profile = "kata", .image = IMAGE, .version_has = "containerd ",
    .memory = 128LL << 20, .pids = 64, .disk = 16LL << 20, .stop_max_s = 10.0, .parallel = 6,
    .oom_argv = {"sh", "-c", "x=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; while true; do x=$x$x; done", NULL},
    .oom_memory = 32LL << 20, .net_argv = kt_net_argv,
    .register_suites = kt_register, .assert_clean = kt_assert_clean, /* suite_clean stops containerd */
};
