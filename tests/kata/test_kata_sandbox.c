/*
 * test_runtime_kata_sandbox: the Kata backend (eai-isolation-kata.so)
 * loaded by the real loader into a real host on a real event loop, driving
 * a real, private containerd (own root, state, socket, config with CRI and
 * the unused snapshotters disabled) started by this test.
 *
 * The runtime is io.containerd.kata.v2 as in production, but the shim
 * containerd finds under that name is tests/kata/containerd-shim-kata-v2,
 * a STAND-IN that delegates to runc's shim: no Kata VM runs here (none can
 * on this machine).  Everything else is exercised for real; see that file
 * and docs/kata.md for what this proves and what it does not.
 *
 * The image is a tiny one made here: Debian's static busybox in a rootfs
 * under a private image store (package busybox-static).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>
#include <jansson.h>

#include <eai/isolation.h>

#include "base/errors.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "base/worker.h"

#define IMAGE "busybox:test"
#define NS "eai-test"
#define RUNTIME "io.containerd.kata.v2"

extern char **environ;

static struct event_base *g_base;
static struct eai_host *g_host;
static const struct eai_plugin_descriptor *g_desc;
static const struct eai_isolation_ops *g_ops;
static void *g_iso;
static char g_tmp[PATH_MAX];     /* everything of this test */
static char g_sock[PATH_MAX + 16], g_work[PATH_MAX + 16], g_bin[PATH_MAX + 16], g_log[PATH_MAX + 32];
static char g_shim[PATH_MAX + 64];
static char g_path_with[8192], g_path_without[8192];
static pid_t g_containerd = -1;
static char g_ctr[PATH_MAX] = "/usr/bin/ctr";

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
    const char *collect[4];
    struct eai_iso_file files[4];
    int started, done;
    double t_started, t_done;
    enum eai_iso_outcome outcome;
    int exit_code, sig;
    enum eai_code error_code;
    char out[1 << 16], err[1 << 14];
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
    r->done++;
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
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    size_t i = 0;
    for (; argv[i] && i < 15; i++)
        r->argv[i] = argv[i];
    r->argv[i] = NULL;
    r->job.size = sizeof(r->job);
    r->job.id = "sbx_0b5a7c4e-1f2d-4c3b-9a8e-7d6c5b4a3f2e";
    r->job.tenant_id = "t";
    r->job.profile = "kata";
    r->job.runtime_class = "kata";
    r->job.image = IMAGE;
    r->job.argv = r->argv;
    r->job.env = r->env;
    r->job.cpu_millis = 1000;
    r->job.memory_bytes = 128LL << 20;
    r->job.timeout_ms = 30000;
    r->job.pids = 64;
    r->job.output_bytes = 1 << 20;
    r->job.disk_bytes = 16LL << 20;
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

static int run_started_cond(void *arg)
{
    return ((struct run *)arg)->started || ((struct run *)arg)->done;
}

/* Let the loop run for s seconds (late callbacks would show up). */
static int never(void *arg)
{
    return 0;
}

/* Start and wait; 0 when start() accepted it, else -1 and *code. */
static int run_job_on(void *iso, struct run *r, double max_s, enum eai_code *code)
{
    void *h = NULL;
    struct eai_error *err = NULL;
    if (g_ops->start(iso, &r->job, &g_cb, r, &h, &err) < 0) {
        if (code)
            *code = err ? err->code : EAI_OK;
        eai_error_free(err);
        return -1;
    }
    double t0 = now_s();
    loop_until(run_done_cond, r, max_s);
    if (getenv("EAI_TEST_VERBOSE"))
        fprintf(stderr, "\n[%s] %.2fs outcome=%d exit=%d sig=%d\n--out--\n%s--err--\n%s\n", r->argv[0],
                now_s() - t0, r->outcome, r->exit_code, r->sig, r->out, r->err);
    return 0;
}

static int run_job(struct run *r, double max_s)
{
    return run_job_on(g_iso, r, max_s, NULL);
}

/* Run a shell command (test set-up only), capture stdout. */
static int sh_out(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "re");
    if (!p)
        return -1;
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void ctr_list(const char *ns, char *out, size_t len)
{
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof(cmd), "%s --address %s --connect-timeout 5s --timeout 30s --namespace %s containers ls -q 2>&1", g_ctr, g_sock, ns);
    if (sh_out(cmd, out, len) != 0)
        snprintf(out, len, "ctr failed");
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
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
            n += count_prefix(p, "eai-");
        }
        closedir(top);
    }
    return n;
}

static int g_cg_before;

/* No container, dir, mount or cgroup of ours left. */
static void assert_clean(void)
{
    char out[4096];
    ctr_list(NS, out, sizeof(out));
    CU_ASSERT_STRING_EQUAL(out, "");
    CU_ASSERT_EQUAL(count_prefix(g_work, "eai-"), 0);
    CU_ASSERT_FALSE(file_contains("/proc/self/mountinfo", g_work));
    CU_ASSERT_EQUAL(cgroup_leftovers(), g_cg_before);
}

/* ------------------------------------------------------------ containerd */

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
            if (sh_out(cmd, out, sizeof(out)) == 0 && !strncmp(out, "ok", 2))
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

/* ------------------------------------------------------------ set-up */

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
    if (sh_out("/bin/busybox --list", list, sizeof(list)) != 0)
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

static int probe_settled(void *arg)
{
    struct eai_iso_probe p;
    g_ops->probe(arg, &p);
    return p.ready || !p.pending;
}

static void *make_instance_cfg(json_t *cfg /* stolen */, int sweep)
{
    struct eai_error *err = NULL;
    void *self = g_desc->create(g_host, cfg, &err);
    json_decref(cfg);
    if (!self) {
        fprintf(stderr, "create: %s\n", err ? err->message : "?");
        eai_error_free(err);
        return NULL;
    }
    if (sweep && g_ops->sweep)
        g_ops->sweep(self);
    loop_until(probe_settled, self, 60);
    return self;
}

static void *make_instance(const char *ns, const char *address, const char *runtime, const char *work)
{
    json_t *cfg = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i}", "address", address, "namespace", ns, "ctr", g_ctr,
                            "runtime", runtime, "work_dir", work, "kill_grace_ms", 500);
    return make_instance_cfg(cfg, 1);
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
    g_base = event_base_new();
    if (!g_base || eai_workers_start(g_base, 2) < 0)
        return -1;
    g_host = eai_host_new(g_base, g_tmp);
    if (!g_host)
        return -1;
    char images[PATH_MAX + 16];
    snprintf(images, sizeof(images), "%s/images", g_tmp);
    eai_host_set_image_dir(g_host, images);
    struct eai_error *err = NULL;
    g_desc = eai_plugin_load(eai_plugin_dir(), EAI_KIND_ISOLATION, "kata", &err);
    if (!g_desc) {
        fprintf(stderr, "load: %s\n", err ? err->message : "?");
        eai_error_free(err);
        return -1;
    }
    g_ops = g_desc->ops;
    g_cg_before = cgroup_leftovers();
    g_iso = make_instance(NS, g_sock, RUNTIME, g_work);
    return g_iso ? 0 : -1;
}

static int suite_clean(void)
{
    if (g_iso)
        g_desc->destroy(g_iso);
    if (g_base)
        loop_until(never, NULL, 0.2); /* reap the children destroy() killed */
    eai_workers_stop();
    if (g_host)
        eai_host_free(g_host);
    if (g_base)
        event_base_free(g_base);
    stop_containerd();
    umount_below(g_tmp);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ tests */

static void test_probe_ready(void)
{
    struct eai_iso_probe p;
    g_ops->probe(g_iso, &p);
    CU_ASSERT_EQUAL(p.ready, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.version, "containerd "));
    CU_ASSERT_PTR_NOT_NULL(strstr(p.version, RUNTIME));
    CU_ASSERT(p.caps & EAI_ISO_CAP_LOCAL_IMAGES);
    CU_ASSERT(p.caps & EAI_ISO_CAP_MEMORY_LIMIT);
    CU_ASSERT(p.caps & EAI_ISO_CAP_FILES);
    /* The probe's trivial container went through the kata runtime name. */
    CU_ASSERT(count_lines(g_log) > 0);
}

static void test_success(void)
{
    int before = count_lines(g_log);
    const char *argv[] = {"sh", "-c", "echo hello; echo to-err >&2; id -u; pwd", NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->started, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "hello\n65534\n/tmp\n");
    CU_ASSERT_STRING_EQUAL(r->err, "to-err\n");
    CU_ASSERT(r->dur > 0);
    CU_ASSERT(r->cpu > 0);
    CU_ASSERT(r->mbs > 0);
    /* containerd resolved io.containerd.kata.v2 to the (stand-in) shim. */
    CU_ASSERT(count_lines(g_log) > before);
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
    /* pid 1 ignores signals it has no handler for, even its own: the
     * signal kills a child, whose status the shell passes on. */
    const char *a2[] = {"sh", "-c", "sh -c 'kill -TERM $$; sleep 5'; exit $?", NULL};
    r = run_new(a2);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 143);
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
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "TRACEPARENT=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"));
    CU_ASSERT_PTR_NULL(strstr(r->out, "EAI_TEST_HOST_SECRET"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "from-stdin\n"));
    unsetenv("EAI_TEST_HOST_SECRET");
    free(r);
    /* No stdin at all: the program reads EOF, it does not wait. */
    const char *a2[] = {"sh", "-c", "cat; echo eof", NULL};
    r = run_new(a2);
    r->job.timeout_ms = 10000;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 30), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_STRING_EQUAL(r->out, "eof\n");
    free(r);
    assert_clean();
}

static void test_read_only_root(void)
{
    const char *argv[] = {"sh", "-c",
                          "touch /bin/x; echo rc=$?; echo w > /tmp/w && cat /tmp/w; "
                          "awk '$5==\"/\" {print $6}' /proc/self/mountinfo | cut -d, -f1; "
                          "awk '$5==\"/tmp\" {print $6}' /proc/self/mountinfo | cut -d, -f1",
                          NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_STRING_EQUAL(r->out, "rc=1\nw\nro\nrw\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "Read-only file system"));
    free(r);
    /* Nothing was written into the image store. */
    char p[PATH_MAX + 64];
    struct stat st;
    snprintf(p, sizeof(p), "%s/images/busybox/test/rootfs/bin/x", g_tmp);
    CU_ASSERT_NOT_EQUAL(lstat(p, &st), 0);
    assert_clean();
}

static void test_files(void)
{
    const char *argv[] = {"sh", "-c",
                          "mkdir -p /tmp/out && tr a-z A-Z < /tmp/in/data.txt > /tmp/out/up.txt && "
                          "echo b > /tmp/out/b.txt && ln -s /etc/passwd /tmp/out/link",
                          NULL};
    struct run *r = run_new(argv);
    r->files[0] = (struct eai_iso_file){"/tmp/in/data.txt", (const unsigned char *)"hello-file", 10};
    r->job.files = r->files;
    r->job.nfiles = 1;
    r->collect[0] = "/tmp/out";
    r->collect[1] = NULL;
    r->job.collect = r->collect;
    r->job.collect_max_files = 10;
    r->job.collect_max_file_bytes = 1 << 20;
    r->job.collect_max_total_bytes = 1 << 20;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_EQUAL_FATAL(r->nfiles, 2); /* the symlink is not followed */
    CU_ASSERT_STRING_EQUAL(r->fpath[0], "/tmp/out/b.txt");
    CU_ASSERT_STRING_EQUAL(r->fdata[0], "b\n");
    CU_ASSERT_STRING_EQUAL(r->fpath[1], "/tmp/out/up.txt");
    CU_ASSERT_STRING_EQUAL(r->fdata[1], "HELLO-FILE");
    CU_ASSERT_EQUAL(r->files_truncated, 0);
    free(r);
    assert_clean();
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
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "lo\nnc=1\n0\n");
    int c = accept(ls, NULL, NULL);
    CU_ASSERT_EQUAL(c, -1);
    if (c >= 0)
        close(c);
    close(ls);
    free(r);
    assert_clean();
}

static void test_oom(void)
{
    const char *argv[] = {"sh", "-c", "x=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; while true; do x=$x$x; done", NULL};
    struct run *r = run_new(argv);
    r->job.memory_bytes = 32LL << 20;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_OOM);
    CU_ASSERT(r->dur < 20);
    free(r);
    assert_clean();
}

static void test_timeout_kill(void)
{
    /* pid 1 without a handler ignores SIGTERM: only the SIGKILL ends it. */
    const char *argv[] = {"sleep", "30", NULL};
    struct run *r = run_new(argv);
    r->job.timeout_ms = 1000;
    double t0 = now_s();
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT(r->t_done - t0 >= 1.4); /* timeout + the 500 ms grace */
    CU_ASSERT(r->t_done - t0 < 10);
    free(r);
    assert_clean();
}

static void test_timeout_term_first(void)
{
    /* A program with a handler gets SIGTERM before any SIGKILL. */
    const char *argv[] = {"sh", "-c", "trap 'echo got-term; exit 0' TERM; echo up; while :; do :; done", NULL};
    struct run *r = run_new(argv);
    r->job.timeout_ms = 800;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT_STRING_EQUAL(r->out, "up\ngot-term\n");
    free(r);
    assert_clean();
}

static void test_cancel(void)
{
    const char *argv[] = {"sleep", "30", NULL};
    struct run *r = run_new(argv);
    void *h = NULL;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL_FATAL(g_ops->start(g_iso, &r->job, &g_cb, r, &h, &err), 0);
    loop_until(run_started_cond, r, 30);
    CU_ASSERT_EQUAL(r->started, 1);
    double t0 = now_s();
    g_ops->cancel(g_iso, h);
    loop_until(run_done_cond, r, 30);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_CANCELLED);
    CU_ASSERT(r->t_done - t0 < 10);
    loop_until(never, NULL, 0.3);
    CU_ASSERT_EQUAL(r->done, 1); /* exactly once */
    free(r);
    assert_clean();
}

static void test_output_cap(void)
{
    /* 8 MiB written, 256 KiB delivered, and the program is not blocked. */
    const char *argv[] = {"sh", "-c", "yes 0123456789abcdef | head -c 8388608; echo done >&2", NULL};
    struct run *r = run_new(argv);
    r->job.output_bytes = 256 << 10;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_EQUAL(r->out_total, (size_t)(256 << 10));
    CU_ASSERT_STRING_EQUAL(r->err, "done\n");
    free(r);
    assert_clean();
}

static void test_pids_limit(void)
{
    /* 40 background processes: fine under 64 pids, refused under 16 (the
     * shell cannot fork and gives up). */
    const char *argv[] = {"sh", "-c", "for i in $(seq 40); do sleep 2 & done; echo all-forked", NULL};
    struct run *r = run_new(argv);
    r->job.pids = 64;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "all-forked\n");
    free(r);
    r = run_new(argv);
    r->job.pids = 16;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_NOT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "");
    CU_ASSERT_PTR_NOT_NULL(strstr(r->err, "can't fork"));
    free(r);
    assert_clean();
}

static int all_done(void *arg)
{
    struct run **rs = arg;
    for (int i = 0; rs[i]; i++)
        if (!rs[i]->done)
            return 0;
    return 1;
}

static void test_parallel(void)
{
    /* Events of several containers at once reach the right execution. */
    enum { N = 6 };
    struct run *rs[N + 1] = {NULL};
    char scripts[N][128];
    for (int i = 0; i < N; i++) {
        snprintf(scripts[i], sizeof(scripts[i]), "echo job-%d; exit %d", i, 10 + i);
        const char *argv[] = {"sh", "-c", scripts[i], NULL};
        rs[i] = run_new(argv);
        if (i == N - 1) {
            rs[i]->argv[2] = "x=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; while true; do x=$x$x; done";
            rs[i]->job.memory_bytes = 32LL << 20;
        }
        void *h = NULL;
        struct eai_error *err = NULL;
        CU_ASSERT_EQUAL_FATAL(g_ops->start(g_iso, &rs[i]->job, &g_cb, rs[i], &h, &err), 0);
    }
    loop_until(all_done, rs, 120);
    for (int i = 0; i < N - 1; i++) {
        char want[32];
        snprintf(want, sizeof(want), "job-%d\n", i);
        CU_ASSERT_EQUAL(rs[i]->done, 1);
        CU_ASSERT_EQUAL(rs[i]->outcome, EAI_OUT_EXITED);
        CU_ASSERT_EQUAL(rs[i]->exit_code, 10 + i);
        CU_ASSERT_STRING_EQUAL(rs[i]->out, want);
    }
    CU_ASSERT_EQUAL(rs[N - 1]->outcome, EAI_OUT_OOM);
    for (int i = 0; i < N; i++)
        free(rs[i]);
    assert_clean();
}

static void test_image_missing(void)
{
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    r->job.image = "no-such-image:1";
    CU_ASSERT_EQUAL_FATAL(run_job(r, 30), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_IMAGE_MISSING);
    free(r);
    assert_clean();
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
    int before = count_lines(g_log);
    const char *argv[] = {"sh", "-c", "echo ran", NULL};
    struct run *r = run_new(argv);
    enum eai_code code = EAI_OK;
    CU_ASSERT_EQUAL(run_job_on(iso, r, 5, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_SANDBOX_UNAVAILABLE);
    loop_until(never, NULL, 0.3);
    CU_ASSERT_EQUAL(r->done, 0);
    CU_ASSERT_EQUAL(r->outlen, 0);
    CU_ASSERT_EQUAL(count_lines(g_log), before);
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
    g_desc->destroy(iso);
}

static void test_refuse_no_containerd(void)
{
    char sock[PATH_MAX + 32], work[PATH_MAX + 16];
    snprintf(sock, sizeof(sock), "%s/absent.sock", g_tmp);
    snprintf(work, sizeof(work), "%s/work-nocd", g_tmp);
    void *iso = make_instance("eai-nocd", sock, RUNTIME, work);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    assert_refused(iso, "eai-nocd", "no containerd socket");
    g_desc->destroy(iso);
}

static void test_refuse_shim_removed(void)
{
    /* Ready instance; then the runtime is uninstalled: start() re-checks. */
    char moved[PATH_MAX + 80];
    snprintf(moved, sizeof(moved), "%s.removed", g_shim);
    CU_ASSERT_EQUAL_FATAL(rename(g_shim, moved), 0);
    int before = count_lines(g_log);
    const char *argv[] = {"sh", "-c", "echo ran", NULL};
    struct run *r = run_new(argv);
    enum eai_code code = EAI_OK;
    CU_ASSERT_EQUAL(run_job_on(g_iso, r, 5, &code), -1);
    CU_ASSERT_EQUAL(code, EAI_E_SANDBOX_UNAVAILABLE);
    loop_until(never, NULL, 0.3);
    CU_ASSERT_EQUAL(r->done, 0);
    CU_ASSERT_EQUAL(count_lines(g_log), before);
    CU_ASSERT_EQUAL(rename(moved, g_shim), 0);
    free(r);
    assert_clean();
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
    g_desc->destroy(iso);
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
    CU_ASSERT_EQUAL(sh_out(cmd, out, sizeof(out)), 0);
    ctr_list(NS, out, sizeof(out));
    CU_ASSERT_STRING_EQUAL(out, "eai-leftover-1\n");
    char stale[PATH_MAX + 32];
    snprintf(stale, sizeof(stale), "%s/eai-stale-dir", g_work);
    CU_ASSERT_EQUAL(mkdir(stale, 0700), 0);
    /* "Restart": a new instance sweeps at start-up. */
    g_desc->destroy(g_iso);
    g_iso = make_instance(NS, g_sock, RUNTIME, g_work);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_iso);
    struct eai_iso_probe p;
    for (int i = 0; i < 300; i++) {
        g_ops->probe(g_iso, &p);
        if (p.ready)
            break;
        loop_until(never, NULL, 0.1);
    }
    CU_ASSERT_EQUAL(p.ready, 1);
    struct stat st;
    CU_ASSERT_NOT_EQUAL(lstat(stale, &st), 0);
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL(run_job(r, 60), 0);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    free(r);
    assert_clean();
}

static void test_destroy_while_running(void)
{
    /* Shutdown with an execution running: no callback, nothing left. */
    const char *argv[] = {"sleep", "60", NULL};
    struct run *r = run_new(argv);
    void *h = NULL;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL_FATAL(g_ops->start(g_iso, &r->job, &g_cb, r, &h, &err), 0);
    loop_until(run_started_cond, r, 30);
    CU_ASSERT_EQUAL(r->started, 1);
    g_desc->destroy(g_iso);
    g_iso = NULL;
    loop_until(never, NULL, 0.5);
    CU_ASSERT_EQUAL(r->done, 0);
    free(r);
    assert_clean();
    g_iso = make_instance(NS, g_sock, RUNTIME, g_work);
    CU_ASSERT_PTR_NOT_NULL(g_iso);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("kata", suite_init, suite_clean);
    CU_add_test(s, "probe ready through the runtime", test_probe_ready);
    CU_add_test(s, "success, stdout and stderr apart", test_success);
    CU_add_test(s, "exit codes", test_exit_codes);
    CU_add_test(s, "env and stdin", test_env_and_stdin);
    CU_add_test(s, "read-only root, writable /tmp", test_read_only_root);
    CU_add_test(s, "files in and out", test_files);
    CU_add_test(s, "no network", test_no_network);
    CU_add_test(s, "oom from /tasks/oom", test_oom);
    CU_add_test(s, "timeout: SIGTERM ignored, SIGKILL", test_timeout_kill);
    CU_add_test(s, "timeout: SIGTERM first", test_timeout_term_first);
    CU_add_test(s, "cancel", test_cancel);
    CU_add_test(s, "output capped per stream", test_output_cap);
    CU_add_test(s, "pids limit", test_pids_limit);
    CU_add_test(s, "6 parallel jobs, one OOM", test_parallel);
    CU_add_test(s, "image missing", test_image_missing);
    CU_add_test(s, "refused: no shim on PATH", test_refuse_no_shim);
    CU_add_test(s, "refused: no containerd", test_refuse_no_containerd);
    CU_add_test(s, "refused: shim removed after the probe", test_refuse_shim_removed);
    CU_add_test(s, "probe runs a real container", test_probe_runs_a_container);
    CU_add_test(s, "sweep after restart", test_sweep);
    CU_add_test(s, "destroy while running", test_destroy_while_running);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    unsigned suite_fails = CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return (fails || suite_fails) ? 1 : 0;
}
