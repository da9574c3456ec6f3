/*
 * eai-isolation-example: a small but real isolation backend on Debian's
 * bubblewrap (bwrap), written against the installed headers alone
 * (`pkg-config --cflags --libs eai-plugin`, docs/plugins.md walks through
 * building and loading it).
 *
 * Each execution runs as
 *   bwrap --unshare-all --unshare-user --uid 65534 --gid 65534 --disable-userns
 *         --die-with-parent --new-session --cap-drop ALL --hostname sandbox
 *         --ro-bind <image rootfs> / --proc /proc --dev /dev
 *         --size <disk> --tmpfs /tmp --clearenv --setenv ... --chdir /tmp -- argv
 * with rlimits set before exec (address space = memory, CPU seconds, file
 * size = disk, open files, no core dumps, processes), stdin from a memfd,
 * stdout/stderr through non-blocking pipes watched on host->base, the
 * child through a pidfd, and the timeout through a timer on the loop.
 *
 * What it gives: new user, pid, net, ipc, uts and cgroup namespaces (no
 * network at all: only a loopback that is down), a read-only root from the
 * local image store (host->image_rootfs), a private size-capped /tmp, no
 * capabilities, no new user namespaces, an unprivileged uid.
 * What it does NOT give (be honest with your users): it is WEAKER THAN
 * gVISOR.  The sandbox shares the host kernel and its whole system-call
 * surface (gVisor interposes its own kernel, Kata a VM); the memory limit
 * is RLIMIT_AS (address space, not a cgroup: no OOM verdict, allocations
 * just fail); the process limit (RLIMIT_NPROC) is not enforced when eaid
 * runs as root; there is no egress allow list (every request naming egress
 * is refused), no input files (refused) and no collected files (none
 * come back).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <event2/event.h>

#include <eai/isolation.h>

#define EX_COMPONENT "bwrap"

struct example {
    const struct eai_host *host;
    char bwrap[PATH_MAX];      /* resolved path, "" when not found */
    char reason[256];
    int uid;
};

struct example_run {
    struct example *ex;
    const struct eai_iso_callbacks *cb;
    void *cb_arg;
    pid_t pid;
    int pidfd, fd_out, fd_err;
    struct event *ev_pid, *ev_out, *ev_err, *ev_timeout, *ev_drain;
    int64_t cap;               /* bytes forwarded per stream: output cap + 1 */
    int64_t sent_out, sent_err;
    int exited, timed_out, cancelled, status, finished;
    struct rusage ru;
    struct timespec t0;
};

/* bwrap from the config, else from PATH. */
static int find_bwrap(const char *want, char *out, size_t len)
{
    if (strchr(want, '/')) {
        if (access(want, X_OK) < 0)
            return -1;
        snprintf(out, len, "%s", want);
        return 0;
    }
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    for (char *save = NULL, *dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        snprintf(out, len, "%s/%s", dir, want);
        if (access(out, X_OK) == 0)
            return 0;
    }
    out[0] = '\0';
    return -1;
}

static void *example_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    if (host->size < EAI_HOST_SIZE_1_1) { /* an older host lacks what we use */
        if (err && !*err && host->error_new)
            *err = host->error_new(EAI_E_INTERNAL, 0, "example: host ABI too old");
        return NULL;
    }
    struct example *ex = calloc(1, sizeof(*ex));
    if (!ex) {
        eai_host_error_set(host, err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    ex->host = host;
    const char *want = json_string_value(json_object_get(config, "bwrap"));
    json_t *uid = json_object_get(config, "uid");
    ex->uid = json_is_integer(uid) ? (int)json_integer_value(uid) : 65534;
    if (ex->uid < 1 || ex->uid > 65534) {
        free(ex);
        eai_host_error_set(host, err, EAI_E_VALIDATION_FAILED, "uid must be within 1..65534");
        return NULL;
    }
    /* a cheap check at create(): probe() must never block */
    if (find_bwrap(want && *want ? want : "bwrap", ex->bwrap, sizeof(ex->bwrap)) < 0)
        snprintf(ex->reason, sizeof(ex->reason), "bubblewrap not found (%.150s): apt-get install bubblewrap",
                 want && *want ? want : "bwrap in PATH");
    host->log(host, EX_COMPONENT, EAI_LOG_INFO, "bubblewrap backend created (%s)",
              ex->bwrap[0] ? ex->bwrap : ex->reason);
    return ex;
}

static void example_destroy(void *self) { free(self); }

static void example_probe(void *self, struct eai_iso_probe *out)
{
    struct example *ex = self;
    out->ready = ex->bwrap[0] != '\0';
    /* images from the local store; the memory limit is an rlimit */
    out->caps = EAI_ISO_CAP_LOCAL_IMAGES | EAI_ISO_CAP_MEMORY_LIMIT;
    snprintf(out->version, sizeof(out->version), "bubblewrap (%.100s)", ex->bwrap[0] ? ex->bwrap : "missing");
    if (!out->ready)
        snprintf(out->reason, sizeof(out->reason), "%s", ex->reason);
}

/* ------------------------------------------------------------ a run */

static void run_free(struct example_run *r)
{
    struct event *evs[] = {r->ev_pid, r->ev_out, r->ev_err, r->ev_timeout, r->ev_drain};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
        if (evs[i])
            event_free(evs[i]);
    int fds[] = {r->pidfd, r->fd_out, r->fd_err};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(r);
}

static void run_finish(struct example_run *r)
{
    if (r->finished)
        return;
    r->finished = 1;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    struct eai_iso_result res;
    memset(&res, 0, sizeof(res));
    res.size = sizeof(res);
    res.exit_code = -1;
    res.duration_s = (double)(t1.tv_sec - r->t0.tv_sec) + (double)(t1.tv_nsec - r->t0.tv_nsec) / 1e9;
    res.cpu_seconds = (double)r->ru.ru_utime.tv_sec + (double)r->ru.ru_utime.tv_usec / 1e6 +
                      (double)r->ru.ru_stime.tv_sec + (double)r->ru.ru_stime.tv_usec / 1e6;
    res.peak_memory_mb = (double)r->ru.ru_maxrss / 1024.0;
    res.memory_mb_seconds = res.peak_memory_mb * res.duration_s;
    if (r->cancelled) {
        res.outcome = EAI_OUT_CANCELLED;
    } else if (r->timed_out) {
        res.outcome = EAI_OUT_TIMEOUT;
    } else {
        res.outcome = EAI_OUT_EXITED;
        if (WIFEXITED(r->status))
            res.exit_code = WEXITSTATUS(r->status);
        else if (WIFSIGNALED(r->status))
            res.signal = WTERMSIG(r->status);
    }
    r->cb->on_exit(r->cb_arg, &res);
    run_free(r);
}

static void run_maybe_finish(struct example_run *r)
{
    if (r->exited && r->fd_out < 0 && r->fd_err < 0)
        run_finish(r);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct example_run *r = arg;
    int is_out = fd == r->fd_out;
    char buf[16384];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
            int64_t *sent = is_out ? &r->sent_out : &r->sent_err;
            /* forward up to the cap + 1 (core truncates and flags it), drain the rest */
            int64_t room = r->cap - *sent;
            if (room > 0) {
                size_t give = (size_t)(n < room ? n : room);
                r->cb->on_output(r->cb_arg, is_out ? EAI_STREAM_STDOUT : EAI_STREAM_STDERR, buf, give);
                *sent += (int64_t)give;
            }
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        /* EOF or error: this stream is done */
        struct event **ev = is_out ? &r->ev_out : &r->ev_err;
        event_free(*ev);
        *ev = NULL;
        close(fd);
        if (is_out)
            r->fd_out = -1;
        else
            r->fd_err = -1;
        run_maybe_finish(r);
        return;
    }
}

static void on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
    /* the child is gone but something still holds a pipe: stop waiting */
    struct example_run *r = arg;
    if (r->fd_out >= 0) {
        event_free(r->ev_out);
        r->ev_out = NULL;
        close(r->fd_out);
        r->fd_out = -1;
    }
    if (r->fd_err >= 0) {
        event_free(r->ev_err);
        r->ev_err = NULL;
        close(r->fd_err);
        r->fd_err = -1;
    }
    run_maybe_finish(r);
}

static void on_child(evutil_socket_t fd, short what, void *arg)
{
    struct example_run *r = arg;
    pid_t p = wait4(r->pid, &r->status, WNOHANG, &r->ru);
    if (p == 0)
        return;
    r->exited = 1;
    event_del(r->ev_pid);
    if (r->ev_timeout)
        event_del(r->ev_timeout);
    if (r->fd_out >= 0 || r->fd_err >= 0) {
        struct timeval tv = {1, 0};
        r->ev_drain = evtimer_new(r->ex->host->base, on_drain_timeout, r);
        if (r->ev_drain)
            evtimer_add(r->ev_drain, &tv);
        else
            on_drain_timeout(-1, 0, r);
        return;
    }
    run_maybe_finish(r);
}

static void run_kill(struct example_run *r)
{
    if (r->exited)
        return;
    kill(-r->pid, SIGKILL); /* its process group (setpgid in the child) */
    kill(r->pid, SIGKILL);  /* --die-with-parent takes the sandbox along */
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct example_run *r = arg;
    r->timed_out = 1;
    r->ex->host->log(r->ex->host, EX_COMPONENT, EAI_LOG_INFO, "timeout: killing pid %d", (int)r->pid);
    run_kill(r);
}

/* ------------------------------------------------------------ start */

#define EX_ARGV_MAX 4096

struct argv_buf {
    char *v[EX_ARGV_MAX];
    char *owned[64];
    int n, nowned;
};

static int av_add(struct argv_buf *a, const char *s)
{
    if (a->n >= EX_ARGV_MAX - 1)
        return -1;
    a->v[a->n++] = (char *)s;
    a->v[a->n] = NULL;
    return 0;
}

static const char *av_fmt(struct argv_buf *a, const char *fmt, long long v)
{
    if (a->nowned >= 64)
        return NULL;
    char *s = NULL;
    if (asprintf(&s, fmt, v) < 0)
        return NULL;
    a->owned[a->nowned++] = s;
    return s;
}

static void av_free(struct argv_buf *a)
{
    for (int i = 0; i < a->nowned; i++)
        free(a->owned[i]);
}

static int example_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb,
                         void *cb_arg, void **handle, struct eai_error **err)
{
    struct example *ex = self;
    const struct eai_host *h = ex->host;
    if (!ex->bwrap[0])
        return eai_host_error_set(h, err, EAI_E_SANDBOX_UNAVAILABLE, "%s", ex->reason);
    if (job->egress && job->egress[0]) /* no allow list here: no network at all */
        return eai_host_error_set(h, err, EAI_E_EGRESS_NOT_ALLOWED,
                                  "the bubblewrap backend has no network: egress cannot be allowed");
    if (job->nfiles > 0) /* collect paths are ignored: nothing is returned */
        return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "the bubblewrap backend takes no input files");
    if (!job->argv || !job->argv[0])
        return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "empty command");
    char rootfs[PATH_MAX];
    if (h->image_rootfs(h, job->image, rootfs, sizeof(rootfs)) < 0)
        return eai_host_error_set(h, err, EAI_E_UNKNOWN_IMAGE, "image %s is not in the local store", job->image);

    struct argv_buf *a = calloc(1, sizeof(*a));
    struct example_run *r = calloc(1, sizeof(*r));
    int out[2] = {-1, -1}, er[2] = {-1, -1}, in = -1;
    if (!a || !r)
        goto oom;
    r->pidfd = r->fd_out = r->fd_err = -1;
    const char *fixed[] = {ex->bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                           "--new-session", "--cap-drop", "ALL", "--hostname", "sandbox", "--ro-bind", rootfs, "/",
                           "--proc", "/proc", "--dev", "/dev", NULL};
    for (const char *const *p = fixed; *p; p++)
        av_add(a, *p);
    const char *uid = av_fmt(a, "%lld", ex->uid);
    if (!uid || av_add(a, "--uid") || av_add(a, uid) || av_add(a, "--gid") || av_add(a, uid))
        goto oom;
    if (job->disk_bytes > 0) {
        const char *sz = av_fmt(a, "%lld", (long long)job->disk_bytes);
        if (!sz || av_add(a, "--size") || av_add(a, sz))
            goto oom;
    }
    if (av_add(a, "--tmpfs") || av_add(a, "/tmp") || av_add(a, "--clearenv") || av_add(a, "--setenv") ||
        av_add(a, "PATH") || av_add(a, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") ||
        av_add(a, "--setenv") || av_add(a, "HOME") || av_add(a, "/tmp"))
        goto oom;
    /* the request's env: "K=V" split in place into owned copies */
    for (const char *const *e = job->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e || a->nowned >= 63)
            continue;
        char *k = strndup(*e, (size_t)(eq - *e));
        if (!k)
            goto oom;
        a->owned[a->nowned++] = k;
        if (av_add(a, "--setenv") || av_add(a, k) || av_add(a, eq + 1))
            goto oom;
    }
    if (av_add(a, "--chdir") || av_add(a, "/tmp") || av_add(a, "--"))
        goto oom;
    for (const char *const *p = job->argv; *p; p++)
        if (av_add(a, *p))
            return av_free(a), free(a), free(r),
                   eai_host_error_set(h, err, EAI_E_LIMIT_EXCEEDED, "command has too many arguments");

    /* stdin from a memfd: no writer to keep on the loop */
    in = memfd_create("eai-stdin", MFD_CLOEXEC);
    if (in < 0 || (job->stdin_len && write(in, job->stdin_data, job->stdin_len) != (ssize_t)job->stdin_len) ||
        lseek(in, 0, SEEK_SET) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(er, O_CLOEXEC) < 0)
        goto sys;
    struct rlimit lim[6];
    int res[6] = {RLIMIT_AS, RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_CORE, RLIMIT_NPROC};
    for (int i = 0; i < 6; i++)
        lim[i].rlim_cur = lim[i].rlim_max = RLIM_INFINITY;
    if (job->memory_bytes > 0)
        lim[0].rlim_cur = lim[0].rlim_max = (rlim_t)job->memory_bytes;
    if (job->timeout_ms > 0)
        lim[1].rlim_cur = lim[1].rlim_max = (rlim_t)(job->timeout_ms / 1000 + 2);
    if (job->disk_bytes > 0)
        lim[2].rlim_cur = lim[2].rlim_max = (rlim_t)job->disk_bytes;
    lim[3].rlim_cur = lim[3].rlim_max = 1024;
    lim[4].rlim_cur = lim[4].rlim_max = 0;
    if (job->pids > 0)
        lim[5].rlim_cur = lim[5].rlim_max = (rlim_t)job->pids;

    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    pid_t pid = fork();
    if (pid < 0)
        goto sys;
    if (pid == 0) {
        /* child: async-signal-safe calls only */
        setpgid(0, 0);
        if (dup2(in, 0) < 0 || dup2(out[1], 1) < 0 || dup2(er[1], 2) < 0)
            _exit(126);
        for (int i = 0; i < 6; i++)
            if (setrlimit(res[i], &lim[i]) < 0 && res[i] != RLIMIT_NPROC)
                _exit(126);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(ex->bwrap, a->v);
        _exit(127);
    }
    close(in);
    close(out[1]);
    close(er[1]);
    av_free(a);
    free(a);
    r->ex = ex;
    r->cb = cb;
    r->cb_arg = cb_arg;
    r->pid = pid;
    r->cap = job->output_bytes > 0 ? job->output_bytes + 1 : INT64_MAX;
    r->fd_out = out[0];
    r->fd_err = er[0];
    fcntl(r->fd_out, F_SETFL, O_NONBLOCK);
    fcntl(r->fd_err, F_SETFL, O_NONBLOCK);
    r->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct event_base *base = h->base;
    r->ev_out = event_new(base, r->fd_out, EV_READ | EV_PERSIST, on_readable, r);
    r->ev_err = event_new(base, r->fd_err, EV_READ | EV_PERSIST, on_readable, r);
    r->ev_pid = r->pidfd >= 0 ? event_new(base, r->pidfd, EV_READ | EV_PERSIST, on_child, r) : NULL;
    r->ev_timeout = job->timeout_ms > 0 ? evtimer_new(base, on_timeout, r) : NULL;
    struct timeval tv = {(time_t)(job->timeout_ms / 1000), (suseconds_t)(job->timeout_ms % 1000) * 1000};
    if (!r->ev_out || !r->ev_err || !r->ev_pid || (job->timeout_ms > 0 && !r->ev_timeout) ||
        event_add(r->ev_out, NULL) < 0 || event_add(r->ev_err, NULL) < 0 || event_add(r->ev_pid, NULL) < 0 ||
        (r->ev_timeout && evtimer_add(r->ev_timeout, &tv) < 0)) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        run_free(r);
        return eai_host_error_set(h, err, EAI_E_SANDBOX_FAILED, "cannot watch the sandbox on the loop");
    }
    h->log(h, EX_COMPONENT, EAI_LOG_DEBUG, "%s: bwrap pid %d", job->id, (int)pid);
    cb->on_started(cb_arg);
    *handle = r;
    return 0;

sys: {
    int e = errno;
    if (in >= 0)
        close(in);
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0)
            close(out[i]);
        if (er[i] >= 0)
            close(er[i]);
    }
    av_free(a);
    free(a);
    free(r);
    return eai_host_error_set(h, err, EAI_E_SANDBOX_FAILED, "cannot start bwrap: %s", strerror(e));
}
oom:
    if (a)
        av_free(a);
    free(a);
    free(r);
    return eai_host_error_set(h, err, EAI_E_INTERNAL, "out of memory");
}

static void example_cancel(void *self, void *handle)
{
    struct example_run *r = handle;
    if (!r || r->exited)
        return;
    r->cancelled = 1;
    run_kill(r); /* on_exit(EAI_OUT_CANCELLED) follows from on_child */
}

static const struct eai_isolation_ops example_ops = {
    .size = sizeof(struct eai_isolation_ops),
    .probe = example_probe,
    .start = example_start,
    .cancel = example_cancel,
    .recover = NULL,           /* optional: reattach after an eaid restart (core ends those runs) */
    .sweep = NULL,             /* optional: nothing outlives eaid (--die-with-parent) */
};

static const struct eai_config_key example_keys[] = {
    {"bwrap", EAI_CFG_STRING, 0, "bwrap", "the bubblewrap binary (a path, or a name looked up in PATH)"},
    {"uid", EAI_CFG_INT, 0, "65534", "uid and gid inside the sandbox (1..65534)"},
    {NULL, 0, 0, NULL, NULL},
};

static const struct eai_plugin_descriptor example_descriptor = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "example",
    .kind = EAI_KIND_ISOLATION,
    .version = "0.2.0",
    .create = example_create,
    .destroy = example_destroy,
    .ops = &example_ops,
    .config_keys = example_keys,
};

EAI_PLUGIN_DECLARE(example_descriptor)
