/*
 * Warm pool of pre-booted, single-use gVisor sandboxes (docs/gvisor.md).
 *
 * A pooled sandbox is a bundle exactly like an execution's (same image,
 * limits, host tmpfs /tmp, cgroup leaf) under an attached `runsc run`,
 * whose init is the launcher (gvisor_launcher.c): it says "ready" on stdout
 * and waits on a control socket (runsc's stdin) for the one program to
 * start, with the pipes given to runsc as its stdout and stderr.  An
 * execution of the same shape takes one, has its files and a launch file
 * written into the tmpfs, and its program started by one line on that
 * socket; the launcher answers with the exit code on the same socket.
 * Without the launcher (config `launcher: false`, or its installation
 * failed), the init is `sh -c 'echo ready; exec sleep infinity'` and the
 * program starts with `runsc exec --process`.  When the program ends the
 * whole sandbox is torn down: a sandbox never serves two executions.  The
 * pool saves the sandbox boot (and, with the launcher, the `runsc exec`)
 * from the critical path.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "gvisor.h"

#define GV_POOL_BOOT_TIMEOUT_MS 30000
#define GV_POOL_BACKOFF_MS 30000

/* CLAIMED: an egress sandbox handed to core (gv_egress_claim), whose job's
 * start() comes at once and makes it TAKEN (gv_pool_claimed). */
enum gv_pool_state { GVP_BOOTING = 0, GVP_READY, GVP_TAKEN, GVP_DYING, GVP_CLAIMED };

#define GV_POOL_CLAIM_MS 10000         /* a claim not started by then lapses */

struct gv_pooled {
    struct gv *g;
    struct gv_pooled *next;
    struct gv_shape shape;
    struct gv_sbx sbx;          /* the bundle, `runsc run` and its end (gvisor_sandbox.c) */
    enum gv_pool_state state;
    int prep_failed;
    int rd_fd;                  /* runsc's stdout: "ready", then (launcher) the program's */
    int wd_fd;                  /* its watchdog: dies with eaid (pc_watchdog.c) */
    struct event *rd_ev;
    char rd[16];
    size_t rdlen;
    int launcher;               /* its init is the launcher: */
    int ctl_fd;                 /*   the control socket (runsc's stdin) */
    int err_fd;                 /*   runsc's stderr, the program's */
    struct event *ctl_ev;       /*   the launcher's answer, once launched */
    char ctl[256];
    size_t ctl_len;
    struct eai_pc_run *user;    /*   the run told of the end (gv_launch_ended) */
    int answered;               /*   it answered "exit": the sandbox ends by itself */
    /* egress shapes (shape.net): the namespace core made for it */
    void *ns_token;             /* host->netns_take's; core's once claimed (NULL here then) */
    int ns_wait;                /* its callback still to come (holds the prepare step's inflight) */
    char netns[PATH_MAX];
    char dns[64];
};

static int shape_eq(const struct gv_shape *a, const struct gv_shape *b)
{
    return a->memory == b->memory && a->cpu == b->cpu && a->disk == b->disk && a->pids == b->pids &&
           a->net == b->net && !strcmp(a->rootfs, b->rootfs);
}

const struct eai_pc_bundle *gv_pooled_bundle(const struct gv_pooled *p)
{
    return &p->sbx.b;
}

/* ------------------------------------------------------------ teardown */

static void pooled_unlink(struct gv_pooled *p)
{
    for (struct gv_pooled **pp = &p->g->pool; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            return;
        }
    }
}

/* GV_M_READY: warm sandboxes ready to serve now; GV_M_SIZE: the
 * configured warm count per shape. */
static void pool_gauges(struct gv *g)
{
    if (!g || !g->host)
        return;
    int ready = 0;
    for (struct gv_pooled *q = g->pool; q; q = q->next)
        ready += q->state == GVP_READY;
    gv_metric(g, GV_M_READY, NULL, ready);
    gv_metric(g, GV_M_SIZE, NULL, g->pool_size > 0 ? g->pool_size : 0);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void pooled_free(struct gv_pooled *p)
{
    eai_pc_watchdog_disarm(&p->wd_fd); /* its bundle is removed by gv_sbx's cleanup */
    if (p->rd_ev)
        event_free(p->rd_ev);
    if (p->ctl_ev)
        event_free(p->ctl_ev);
    close_fd(&p->rd_fd);
    close_fd(&p->ctl_fd);
    close_fd(&p->err_fd);
    if (p->sbx.ev_timer)
        event_free(p->sbx.ev_timer);
    free(p);
}

/* The last step of its end (gv_sbx clean_done), on the loop. */
static void pooled_clean_done(struct gv_sbx *x)
{
    struct gv_pooled *p = GV_SBX_OWNER(x, struct gv_pooled, sbx);
    struct gv *g = p->g;
    pooled_unlink(p);
    pooled_free(p);
    pool_gauges(g);
    gv_release(g);
}

/* Stop the sandbox (if it runs) and remove everything of it. */
static void pooled_kill(struct gv_pooled *p)
{
    if (p->state == GVP_DYING)
        return;
    p->state = GVP_DYING;
    p->user = NULL;
    if (p->ns_token) {
        /* never claimed: the namespace is still ours to end */
        p->g->host->netns_release(p->g->host, p->ns_token);
        p->ns_token = NULL;
    }
    if (p->ns_wait) {
        p->ns_wait = 0;
        gv_release(p->g); /* the prepare step never comes */
    }
    if (p->rd_ev) {
        event_free(p->rd_ev);
        p->rd_ev = NULL;
    }
    if (p->ctl_ev) {
        event_free(p->ctl_ev);
        p->ctl_ev = NULL;
    }
    close_fd(&p->rd_fd);
    close_fd(&p->ctl_fd);
    close_fd(&p->err_fd);
    /* A launcher that answered exits next, which ends the sandbox (and the
     * run's end signalled its cgroup): no `runsc kill` (a Go process, ~20 ms
     * of CPU beside the next run); the grace timer still kills and deletes
     * one that does not end. */
    gv_sbx_stop(&p->sbx, p->answered);
}

void gv_pool_release(struct gv_pooled *p)
{
    pooled_kill(p);
}

/* ------------------------------------------------------------ boot */

static void boot_failed(struct gv_pooled *p, const char *why)
{
    struct gv *g = p->g;
    if (!g->destroying) {
        g->pool_backoff_until = eai_monotonic_ms() + GV_POOL_BACKOFF_MS;
        g->host->log(g->host, GV_COMPONENT, EAI_LOG_WARN, "warm pool: %s: %s (pool paused %d s)", p->sbx.b.cid, why,
                     GV_POOL_BACKOFF_MS / 1000);
    }
    pooled_kill(p);
}

static void run_done(void *arg, int status, const char *out, size_t outlen)
{
    struct gv_pooled *p = arg;
    p->sbx.run = NULL;
    p->sbx.run_exited = 1;
    if (p->state == GVP_BOOTING || p->state == GVP_READY) {
        boot_failed(p, "sandbox ended while idle");
        return;
    }
    if (p->state == GVP_CLAIMED) {
        /* its job, started later, finds no sandbox and boots cold in the namespace */
        pooled_kill(p);
        return;
    }
    /* TAKEN: a launched program whose launcher did not answer ends with
     * runsc; otherwise the execution notices through its exec */
    struct eai_pc_run *user = p->user;
    p->user = NULL;
    if (user)
        gv_launch_ended(user, 'r', status, NULL);
    gv_sbx_maybe_cleanup(&p->sbx);
}

static void on_ready(evutil_socket_t fd, short what, void *arg)
{
    struct gv_pooled *p = arg;
    ssize_t r = read(p->rd_fd, p->rd + p->rdlen, sizeof(p->rd) - 1 - p->rdlen);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0) {
        boot_failed(p, "init closed its output before ready");
        return;
    }
    p->rdlen += (size_t)r;
    p->rd[p->rdlen] = '\0';
    if (!strstr(p->rd, "ready")) {
        if (p->rdlen >= sizeof(p->rd) - 1)
            boot_failed(p, "unexpected init output");
        return;
    }
    if (p->launcher && strcmp(p->rd, "ready\n") != 0) {
        boot_failed(p, "unexpected launcher output");
        return;
    }
    event_free(p->rd_ev);
    p->rd_ev = NULL;
    if (!p->launcher) /* the launcher's stdout is the program's */
        close_fd(&p->rd_fd);
    if (p->sbx.ev_timer)
        event_del(p->sbx.ev_timer);
    if (p->state == GVP_BOOTING)
        p->state = GVP_READY;
    pool_gauges(p->g);
}

static void on_boot_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct gv_pooled *p = arg;
    if (p->state == GVP_BOOTING)
        boot_failed(p, "boot timed out");
    else if (p->state == GVP_CLAIMED)
        pooled_kill(p); /* its start() never came */
}

static const char *const gv_pool_init_argv[] = {"sh", "-c", "echo ready; exec sleep infinity", NULL};

static void prepare_work(void *arg)
{
    struct gv_pooled *p = arg;
    char msg[256], path[PATH_MAX + 32];
    struct stat st;
    /* The launcher needs only its mount point in the image, /.eai/launcher
     * (eaid images build and import add it): without it runsc's gofer would
     * make it in the image itself, with eaid's umask (0700: the sandbox's
     * user could not run what is bound there).  Such images idle in sh and
     * sleep, and only images with those can idle then; others always start
     * cold. */
    snprintf(path, sizeof(path), "%s" GV_LAUNCHER_PATH, p->shape.rootfs);
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/.eai", p->shape.rootfs);
    struct stat dst;
    if (p->launcher && (lstat(dir, &dst) < 0 || !S_ISDIR(dst.st_mode) || (dst.st_mode & 0005) != 0005 ||
                        lstat(path, &st) < 0 || !S_ISREG(st.st_mode)))
        p->launcher = 0;
    if (!p->launcher) {
        snprintf(path, sizeof(path), "%s/bin/sh", p->shape.rootfs);
        int ok = stat(path, &st) == 0;
        snprintf(path, sizeof(path), "%s/usr/bin/sleep", p->shape.rootfs);
        int ok2 = stat(path, &st) == 0;
        snprintf(path, sizeof(path), "%s/bin/sleep", p->shape.rootfs);
        ok2 = ok2 || stat(path, &st) == 0;
        if (!ok || !ok2) {
            p->prep_failed = 2;
            return;
        }
    }
    /* the launcher, with the warm-up command as its arguments (not under a
     * small memory limit: a warm-up that fills it would kill the sandbox and
     * pause the pool) */
    const char *largv[GV_WARMUP_ARGS + 2] = {GV_LAUNCHER_PATH};
    for (int i = 0; i < p->g->nwarmup && (p->shape.memory <= 0 || p->shape.memory >= GV_WARMUP_MIN_MEMORY); i++)
        largv[i + 1] = p->g->warmup[i];
    struct eai_iso_job job;
    memset(&job, 0, sizeof(job));
    job.size = sizeof(job);
    job.argv = p->launcher ? largv : gv_pool_init_argv;
    job.memory_bytes = p->shape.memory;
    job.cpu_millis = p->shape.cpu;
    job.disk_bytes = p->shape.disk;
    job.pids = p->shape.pids;
    if (p->shape.net) {
        /* core's namespace (config.json) and its DNS (resolv.conf) */
        job.netns_path = p->netns;
        job.dns_server = p->dns;
    }
    p->sbx.b.launcher = p->launcher;
    if (gv_bundle_prepare(&p->sbx.b, &job, 1, msg, sizeof(msg)) < 0)
        p->prep_failed = 1;
}

/* Non-blocking, close-on-exec: a pipe (our end `ours`) or, ctl, a socketpair (ours [0]). */
static int pool_pipe(int fds[2], int ours, int ctl)
{
    if ((ctl ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) : pipe2(fds, O_CLOEXEC)) < 0)
        return -1;
    fcntl(fds[ours], F_SETFL, fcntl(fds[ours], F_GETFL) | O_NONBLOCK);
    return 0;
}

static void prepare_done(void *arg)
{
    struct gv_pooled *p = arg;
    struct gv *g = p->g;
    if (p->prep_failed || g->destroying || p->state != GVP_BOOTING) {
        for (int i = 0; p->prep_failed == 2 && i < GV_POOL_SHAPES; i++)
            if (g->shapes[i].used && shape_eq(&g->shapes[i].shape, &p->shape))
                g->shapes[i].unpoolable = 1;
        if (p->prep_failed == 1)
            boot_failed(p, "cannot prepare the bundle");
        else
            pooled_kill(p);
        gv_release(g);
        return;
    }
    int out[2] = {-1, -1}, err[2] = {-1, -1}, ctl[2] = {-1, -1};
    if (pool_pipe(out, 0, 0) < 0 || (p->launcher && (pool_pipe(err, 0, 0) < 0 || pool_pipe(ctl, 0, 1) < 0))) {
        for (int i = 0; i < 2; i++) {
            close_fd(&out[i]);
            close_fd(&err[i]);
            close_fd(&ctl[i]);
        }
        boot_failed(p, "pipe");
        gv_release(g);
        return;
    }
    char root[PATH_MAX + 16], plat[64], dlog[PATH_MAX + 48], log[PATH_MAX + 40];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    snprintf(plat, sizeof(plat), "--platform=%s", g->platform);
    gv_debug_log_arg(dlog, sizeof(dlog), p->sbx.b.dir);
    /* runsc's own errors (gvisor_exec.c reads them when runsc ends a launched program) */
    snprintf(log, sizeof(log), "--log=%s/runsc-run.main.log", p->sbx.b.dir);
    char *argv[] = {g->runsc, root, log, dlog, "--network=none", plat, "run", "--bundle", p->sbx.b.dir, p->sbx.b.cid, NULL};
    /* egress: gVisor's netstack in core's namespace, as a cold egress run
     * (gvisor_exec.c gv_spawn_argv: with the /proc/sys/net workaround) */
    char *net_argv[] = {GV_UNSHARE, "-m", "--propagation", "private", "/bin/sh", "-c", GV_NET_WORKAROUND_SH, "sh",
                        g->runsc, root, log, dlog, "--network=sandbox", plat, "run", "--bundle", p->sbx.b.dir, p->sbx.b.cid,
                        NULL};
    char **av = !p->shape.net ? argv : g->net_state == 2 ? net_argv : net_argv + 8;
    /* An idle (or taken) warm sandbox must not outlive eaid either. */
    struct eai_pc_wd wd = {.runtime = g->runsc, .root_arg = root, .cid = p->sbx.b.cid, .cgpath = p->sbx.b.cgpath,
                           .dir = p->sbx.b.dir};
    p->wd_fd = eai_pc_watchdog_arm(g->host->base, &wd);
    if (p->wd_fd < 0)
        g->host->log(g->host, GV_COMPONENT, EAI_LOG_WARN, "warm pool: %s: no watchdog (%s)", p->sbx.b.cid,
                     strerror(errno));
    p->sbx.run = eai_pc_child_spawn(g->host->base, g, av, ctl[1], out[1], err[1], 0, 0, run_done, p);
    close(out[1]);
    close_fd(&err[1]);
    close_fd(&ctl[1]);
    p->rd_fd = out[0];
    p->err_fd = err[0];
    p->ctl_fd = ctl[0];
    if (!p->sbx.run) {
        boot_failed(p, "cannot spawn runsc");
        gv_release(g);
        return;
    }
    p->sbx.run_spawned = 1;
    p->rd_ev = event_new(g->host->base, p->rd_fd, EV_READ | EV_PERSIST, on_ready, p);
    p->sbx.ev_timer = evtimer_new(g->host->base, on_boot_timeout, p);
    struct timeval tv = {GV_POOL_BOOT_TIMEOUT_MS / 1000, 0};
    if (!p->rd_ev || !p->sbx.ev_timer || event_add(p->rd_ev, NULL) < 0 || evtimer_add(p->sbx.ev_timer, &tv) < 0)
        boot_failed(p, "out of memory");
    gv_release(g);
}

/* The namespace of an egress pooled sandbox is made (or not): prepare. */
static void ns_ready(void *arg, void *token, const char *netns_path, const char *dns_server, const char *why)
{
    struct gv_pooled *p = arg;
    struct gv *g = p->g;
    p->ns_wait = 0;
    if (!token || !netns_path || !dns_server || snprintf(p->netns, sizeof(p->netns), "%s", netns_path) >=
                                                    (int)sizeof(p->netns) ||
        snprintf(p->dns, sizeof(p->dns), "%s", dns_server) >= (int)sizeof(p->dns)) {
        if (!token)
            p->ns_token = NULL; /* core has already ended it */
        g->host->log(g->host, GV_COMPONENT, EAI_LOG_WARN, "warm pool: %s: no namespace (%s)", p->sbx.b.cid,
                     why ? why : "bad path");
        p->prep_failed = 1;
        prepare_done(p);
        return;
    }
    if (p->state != GVP_BOOTING || g->destroying || g->host->work_submit(g->host, prepare_work, prepare_done, p) < 0) {
        p->prep_failed = p->state == GVP_BOOTING;
        prepare_done(p);
    }
}

static void pool_boot(struct gv *g, const struct gv_shape *s)
{
    struct gv_pooled *p = calloc(1, sizeof(*p));
    if (!p)
        return;
    p->g = g;
    p->sbx.g = g;
    p->sbx.clean_done = pooled_clean_done;
    p->shape = *s;
    p->rd_fd = -1;
    p->wd_fd = -1;
    p->ctl_fd = -1;
    p->err_fd = -1;
    p->launcher = g->launcher_state == 1;
    p->state = GVP_BOOTING;
    unsigned char rnd[4] = {0};
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        memset(rnd, 0, sizeof(rnd));
    snprintf(p->sbx.b.cid, sizeof(p->sbx.b.cid), GV_CID_PREFIX "pool-%02x%02x%02x%02x-%lu", rnd[0], rnd[1], rnd[2], rnd[3],
             ++g->seq);
    snprintf(p->sbx.b.dir, sizeof(p->sbx.b.dir), "%s/%s", g->work_dir, p->sbx.b.cid);
    snprintf(p->sbx.b.cgpath, sizeof(p->sbx.b.cgpath), "%s/%s", g->cg_parent, p->sbx.b.cid);
    snprintf(p->sbx.b.rootfs, sizeof(p->sbx.b.rootfs), "%s", s->rootfs);
    p->sbx.b.uid = g->uid;
    p->sbx.b.cg_v2 = g->cg_v2;
    p->next = g->pool;
    g->pool = p;
    g->inflight++; /* held by the pooled sandbox until pooled_clean_done */
    g->inflight++; /* held by the prepare step */
    if (s->net) {
        /* its namespace first (core makes it), then the bundle */
        p->ns_wait = 1;
        p->ns_token = g->host->netns_take(g->host, ns_ready, p);
        if (!p->ns_token) {
            p->ns_wait = 0;
            p->prep_failed = 1;
            prepare_done(p);
        }
        return;
    }
    if (g->host->work_submit(g->host, prepare_work, prepare_done, p) < 0) {
        p->prep_failed = 1;
        prepare_done(p);
    }
}

/* ------------------------------------------------------------ launch */

int gv_pooled_launcher(const struct gv_pooled *p)
{
    return p->launcher;
}

/* The launcher's one answer: "exit <code>" or "fail <text>". */
static void on_ctl(evutil_socket_t fd, short what, void *arg)
{
    struct gv_pooled *p = arg;
    ssize_t r = read(p->ctl_fd, p->ctl + p->ctl_len, sizeof(p->ctl) - 1 - p->ctl_len);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r > 0)
        p->ctl_len += (size_t)r;
    p->ctl[p->ctl_len] = '\0';
    char *nl = strchr(p->ctl, '\n');
    if (!nl && r > 0 && p->ctl_len < sizeof(p->ctl) - 1)
        return;
    /* a line, or EOF / an overlong line: no more from the launcher (an end
     * without a line is runsc's to tell, run_done) */
    event_free(p->ctl_ev);
    p->ctl_ev = NULL;
    struct eai_pc_run *user = p->user;
    if (!nl || !user)
        return;
    *nl = '\0';
    char *end = NULL;
    long code = !strncmp(p->ctl, "exit ", 5) ? strtol(p->ctl + 5, &end, 10) : -1;
    p->user = NULL;
    if (end && !*end && code >= 0 && code <= 255) {
        p->answered = 1;
        gv_launch_ended(user, 'x', (int)code, NULL);
    }
    else
        gv_launch_ended(user, 'f', 0, !strncmp(p->ctl, "fail ", 5) ? p->ctl + 5 : "unexpected answer");
}

int gv_pool_launch(struct gv_pooled *p, struct eai_pc_run *run, const char *line, pid_t *pid, int *in_fd,
                   int *out_fd, int *err_fd)
{
    if (!p->launcher || p->state != GVP_TAKEN || !p->sbx.run || p->sbx.run_exited || p->rd_fd < 0 || p->ctl_fd < 0)
        return -1;
    /* whatever runsc wrote on its stderr while booting is not the program's */
    char junk[4096];
    for (int i = 0; i < 16 && read(p->err_fd, junk, sizeof(junk)) > 0; i++) {
    }
    size_t n = strlen(line);
    /* one short line into an empty socket: all of it or nothing */
    if (send(p->ctl_fd, line, n, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)n)
        return -1;
    p->ctl_ev = event_new(p->g->host->base, p->ctl_fd, EV_READ | EV_PERSIST, on_ctl, p);
    if (!p->ctl_ev || event_add(p->ctl_ev, NULL) < 0)
        return -1; /* the run stops it: runsc run's end comes through run_done */
    /* the input after the line, on a copy of the socket (non-blocking like
     * it) that the runner shuts at its end */
    int input = run->job->stdin_len > 0 || eai_pc_job_stdin_stream(run->job);
    *in_fd = input ? fcntl(p->ctl_fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (input && *in_fd < 0)
        shutdown(p->ctl_fd, SHUT_WR); /* no input rather than input never ending */
    p->user = run;
    *pid = eai_pc_child_pid(p->sbx.run);
    *out_fd = p->rd_fd;
    *err_fd = p->err_fd;
    p->rd_fd = -1; /* the run's now */
    p->err_fd = -1;
    return 0;
}

/* ------------------------------------------------------------ take */

/* Boot sandboxes of shape s, `warm` of which are ready or booting, up to
 * pool_size.  Only with spare CPUs: a pooled job costs a boot plus a start,
 * more than one cold run, so when executions and boots already fill the
 * cores, misses run cold and the pool waits for a quieter moment (a run's
 * end, gv_pool_refill_all; throughput at saturation stays that of plain
 * runsc run). */
static void pool_refill(struct gv *g, const struct gv_shape *s, int warm, int64_t now)
{
    int busy = eai_pc_runner_busy(g->runner);
    for (struct gv_pooled *p = g->pool; p; p = p->next)
        busy += p->state == GVP_BOOTING;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    /* (and, while the launcher is being installed, wait for it) */
    if (now >= g->pool_backoff_until && gv_ready_gate(g) && g->launcher_state != 0) {
        for (; warm < g->pool_size && busy < ncpu; warm++, busy++)
            pool_boot(g, s);
    }
}

void gv_pool_refill_all(struct gv *g)
{
    if (g->pool_size <= 0 || g->destroying)
        return;
    int64_t now = eai_monotonic_ms();
    for (int i = 0; i < GV_POOL_SHAPES; i++) {
        if (!g->shapes[i].used || g->shapes[i].unpoolable)
            continue;
        int warm = 0;
        for (struct gv_pooled *p = g->pool; p; p = p->next)
            warm += shape_eq(&p->shape, &g->shapes[i].shape) && (p->state == GVP_READY || p->state == GVP_BOOTING);
        pool_refill(g, &g->shapes[i].shape, warm, now);
    }
}

static void on_refill(evutil_socket_t fd, short what, void *arg)
{
    gv_pool_refill_all(arg);
}

void gv_pool_refill_soon(struct gv *g)
{
    if (g->pool_size <= 0 || g->destroying)
        return;
    if (!g->refill_ev)
        g->refill_ev = evtimer_new(g->host->base, on_refill, g);
    if (!g->refill_ev) {
        gv_pool_refill_all(g);
        return;
    }
    if (evtimer_pending(g->refill_ev, NULL))
        return;
    struct timeval tv = {0, GV_POOL_REFILL_DELAY_MS * 1000};
    evtimer_add(g->refill_ev, &tv);
}

struct gv_pooled *gv_pool_take(struct gv *g, const struct gv_shape *s)
{
    if (g->pool_size <= 0 || g->destroying)
        return NULL;
    /* Remember the shape (LRU); forget the oldest one's idle sandboxes. */
    int64_t now = eai_monotonic_ms();
    int slot = -1;
    for (int i = 0; i < GV_POOL_SHAPES && slot < 0; i++)
        if (g->shapes[i].used && shape_eq(&g->shapes[i].shape, s))
            slot = i;
    if (slot < 0) {
        for (int i = 0; i < GV_POOL_SHAPES && slot < 0; i++)
            if (!g->shapes[i].used)
                slot = i;
        if (slot < 0) {
            slot = 0;
            for (int i = 1; i < GV_POOL_SHAPES; i++)
                if (g->shapes[i].last < g->shapes[slot].last)
                    slot = i;
            for (struct gv_pooled *p = g->pool, *n; p; p = n) {
                n = p->next;
                if ((p->state == GVP_READY || p->state == GVP_BOOTING) && shape_eq(&p->shape, &g->shapes[slot].shape))
                    pooled_kill(p);
            }
        }
        memset(&g->shapes[slot], 0, sizeof(g->shapes[slot]));
        g->shapes[slot].shape = *s;
        g->shapes[slot].used = 1;
    }
    g->shapes[slot].last = now;
    if (g->shapes[slot].unpoolable)
        return NULL;

    /* The oldest ready one (boots go to the head of the list): a program
     * in a sandbox that has just become ready runs ~10 ms slower, for a
     * reason not yet found (docs/gvisor.md "Warm pool"). */
    struct gv_pooled *got = NULL;
    int warm = 0;
    for (struct gv_pooled *p = g->pool; p; p = p->next) {
        if (!shape_eq(&p->shape, s) || (p->state != GVP_READY && p->state != GVP_BOOTING))
            continue;
        warm++;
        if (p->state == GVP_READY)
            got = p;
    }
    warm -= got != NULL;
    if (got)
        got->state = GVP_TAKEN;
    /* hit rate = hits / (hits + misses) (docs/observability.md) */
    gv_metric(g, s->net ? GV_M_EGRESS_TAKES : GV_M_TAKES, got ? "hit" : "miss", 1);
    pool_gauges(g);
    /* A take that leaves another sandbox of its shape ready or booting
     * boots nothing: its run's end refills (gv_pool_refill_soon), so the
     * boot does not share the CPUs with the run that took one.  A take that
     * empties the pool boots now: the next take would miss. */
    if (!got || warm == 0)
        pool_refill(g, s, warm, now);
    return got;
}

/* Shutdown: stop every pooled sandbox now (blocking), in the same two
 * passes as eai_pc_runner_shutdown(); eai_pc_child_reap_all() then runs their
 * callbacks, which clean up synchronously. */
void gv_pool_destroy_all(struct gv *g, int kill_only)
{
    /* still waiting for their namespace: nothing runs, end them now */
    for (struct gv_pooled *p = g->pool, *n; p && !kill_only; p = n) {
        n = p->next;
        if (p->ns_wait)
            pooled_kill(p);
    }
    for (struct gv_pooled *p = g->pool; p; p = p->next) {
        if (p->sbx.run && !p->sbx.run_exited) {
            char root[PATH_MAX + 16];
            snprintf(root, sizeof(root), "--root=%s", g->state_dir);
            if (kill_only) {
                char *kill_argv[] = {g->runsc, root, "kill", p->sbx.b.cid, "KILL", NULL};
                eai_pc_run_sync(kill_argv, GV_RUNSC_TIMEOUT_MS, NULL, 0);
                kill(eai_pc_child_pid(p->sbx.run), SIGKILL);
            } else {
                char *del_argv[] = {g->runsc, root, "delete", "--force", p->sbx.b.cid, NULL};
                eai_pc_run_sync(del_argv, GV_DELETE_TIMEOUT_MS, NULL, 0);
            }
        }
    }
}

/* ------------------------------------------------------------ egress */

void *gv_egress_claim(void *self, const struct eai_iso_job *job)
{
    struct gv *g = self;
    if (!g->egress_pool || g->net_state <= 0 || g->host->size < EAI_HOST_SIZE_1_2 || !g->host->netns_take ||
        !job->egress || !job->egress[0] || (job->size >= EAI_ISO_JOB_SIZE_1_2 && job->session_id))
        return NULL;
    const struct eai_iso_volume *vols;
    if (gv_job_volumes(job, &vols) > 0)
        return NULL; /* volumes are bound at boot: a cold sandbox */
    struct gv_shape sh;
    memset(&sh, 0, sizeof(sh));
    if (!job->image || g->host->image_rootfs(g->host, job->image, sh.rootfs, sizeof(sh.rootfs)) < 0)
        return NULL;
    sh.memory = job->memory_bytes;
    sh.cpu = job->cpu_millis;
    sh.disk = job->disk_bytes;
    sh.pids = job->pids;
    sh.net = 1;
    struct gv_pooled *p = gv_pool_take(g, &sh);
    if (!p)
        return NULL;
    if (!p->ns_token || !p->netns[0]) {
        pooled_kill(p);
        return NULL;
    }
    void *tok = p->ns_token;
    p->ns_token = NULL; /* core's now: it binds the job's grant to it and ends it */
    p->state = GVP_CLAIMED;
    struct timeval tv = {GV_POOL_CLAIM_MS / 1000, 0};
    if (p->sbx.ev_timer)
        evtimer_add(p->sbx.ev_timer, &tv);
    return tok;
}

struct gv_pooled *gv_pool_claimed(struct gv *g, const char *netns)
{
    for (struct gv_pooled *p = g->pool; p && netns; p = p->next)
        if (p->state == GVP_CLAIMED && !strcmp(p->netns, netns)) {
            p->state = GVP_TAKEN;
            if (p->sbx.ev_timer)
                event_del(p->sbx.ev_timer);
            return p;
        }
    return NULL;
}
