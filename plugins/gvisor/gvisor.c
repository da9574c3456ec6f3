/*
 * eai-isolation-gvisor.so: runs each execution in its own gVisor sandbox
 * with an attached `runsc run` (docs/gvisor.md).
 *
 * Fail closed: create() starts a background probe (`runsc --version`, then
 * one trivial sandbox); until it succeeds nothing runs, and when it fails
 * start() refuses with EAI_E_SANDBOX_UNAVAILABLE.  Jobs started while the
 * probe (or the start-up sweep) is still running wait for it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "gvisor.h"

static const struct eai_config_key gv_keys[] = {
    {"runsc", EAI_CFG_STRING, 0, "runsc", "runsc binary: absolute path, or a name looked up in PATH"},
    {"state_dir", EAI_CFG_STRING, 0, NULL, "runsc --root (default <data_dir>/gvisor/state)"},
    {"work_dir", EAI_CFG_STRING, 0, NULL, "per-execution bundles (default <data_dir>/gvisor/work)"},
    {"platform", EAI_CFG_STRING, 0, "auto",
     "runsc --platform: auto (the probe tries systrap, then ptrace), or systrap, ptrace, kvm"},
    {"uid", EAI_CFG_INT, 0, "65534", "unprivileged uid/gid the program runs as inside the sandbox"},
    {"probe", EAI_CFG_BOOL, 0, "true", "run runsc --version and a trivial sandbox before accepting work"},
    {"pool", EAI_CFG_INT, 0, "2", "pre-booted single-use sandboxes kept per recent shape (0 = off)"},
    {"launcher", EAI_CFG_BOOL, 0, "true",
     "pooled sandboxes start their program with the embedded launcher, not runsc exec, and sessions run theirs "
     "under its supervisor (docs/gvisor.md)"},
    {"egress_pool", EAI_CFG_BOOL, 0, "true",
     "executions with granted egress also take pooled sandboxes, booted in namespaces core makes (docs/egress.md)"},
    {"warmup", EAI_CFG_LIST, 0, "[\"python3\", \"-c\", \"pass\"]",
     "command the launcher runs once in a pooled sandbox before it is ready ([] = none)"},
    {NULL, 0, 0, NULL, NULL},
};

/* ------------------------------------------------------------ helpers */

int gv_ready_gate(const struct gv *g)
{
    return g->probe_state == 1 && !g->sweeping;
}

static void gv_free(struct gv *g)
{
    if (g->reprobe_ev)
        event_free(g->reprobe_ev);
    if (g->refill_ev)
        event_free(g->refill_ev);
    eai_pc_runner_free(g->runner);
    free(g);
}

void gv_release(void *self)
{
    struct gv *g = self;
    g->inflight--;
    if (g->destroying && g->inflight <= 0)
        gv_free(g);
}

/* ------------------------------------------------------------ launcher */

struct launcher_ctx {
    struct gv *g;
    int rc;
    char path[PATH_MAX];
    char msg[PATH_MAX + 64];
};

static void launcher_work(void *arg)
{
    struct launcher_ctx *c = arg;
    c->rc = gv_launcher_install(c->g->work_dir, c->path, sizeof(c->path), c->msg, sizeof(c->msg));
}

static void launcher_done(void *arg)
{
    struct launcher_ctx *c = arg;
    struct gv *g = c->g;
    if (c->rc == 0) {
        snprintf(g->launcher_path, sizeof(g->launcher_path), "%s", c->path);
        g->launcher_state = 1;
    } else {
        g->launcher_state = -1;
        if (!g->destroying)
            g->host->log(g->host, GV_COMPONENT, EAI_LOG_WARN,
                         "launcher not installed (%s): warm sandboxes and sessions start programs with runsc exec",
                         c->msg);
    }
    free(c);
    if (!g->destroying)
        gv_sessions_unpark(g); /* sessions wait for it (their supervisor) */
    gv_release(g);
}

/* The warm-up command (config `warmup`, default python3 -c pass): 0, or
 * -1 when it is not a short list of short strings. */
static int parse_warmup(struct gv *g, const json_t *v)
{
    static const char *const dflt[] = {"python3", "-c", "pass", NULL};
    size_t n = v ? json_array_size(v) : 3;
    if (v && (!json_is_array(v) || n > GV_WARMUP_ARGS))
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *a = v ? json_string_value(json_array_get(v, i)) : dflt[i];
        if (!a || !*a || strlen(a) > GV_WARMUP_ARG_BYTES)
            return -1;
        snprintf(g->warmup[i], sizeof(g->warmup[i]), "%s", a);
    }
    g->nwarmup = (int)n;
    return 0;
}

/* Install the launcher in the background; the pool boots sandboxes with it
 * once it is there (launcher_state 1), with sh + sleep if it cannot be. */
static void launcher_start(struct gv *g, int enabled)
{
    struct launcher_ctx *c = enabled ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
        g->launcher_state = -1;
        return;
    }
    c->g = g;
    g->inflight++;
    if (g->host->work_submit(g->host, launcher_work, launcher_done, c) < 0) {
        launcher_work(c);
        launcher_done(c);
    }
}

/* ------------------------------------------------------------ probe */

static void probe_start(struct gv *g);

/* The platforms the probe tries, in order (docs/gvisor.md "Platform"):
 * under `auto` systrap (runsc's own default since 2023, several times
 * faster than ptrace for syscall-heavy programs), then ptrace (every runsc,
 * Debian 12's included, which has no systrap); kvm only when asked for.
 * NULL past the last. */
static const char *gv_platform_candidate(const struct gv *g, int i)
{
    static const char *const autos[] = {"systrap", "ptrace"};
    if (strcmp(g->platform_cfg, "auto") != 0)
        return i == 0 ? g->platform_cfg : NULL;
    return i >= 0 && i < (int)(sizeof(autos) / sizeof(autos[0])) ? autos[i] : NULL;
}

static void probe_finish(struct gv *g, int ok, const char *reason)
{
    if (g->destroying)
        return;
    if (ok) {
        g->probe_state = 1;
        g->reason[0] = '\0';
        g->host->log(g->host, GV_COMPONENT, EAI_LOG_INFO, "ready: %s (platform %s%s%s%s, state %s)", g->version,
                     g->platform, strcmp(g->platform_cfg, "auto") ? "" : ", chosen by auto",
                     g->plat_failed[0] ? "; " : "", g->plat_failed, g->state_dir);
    } else {
        g->probe_state = -1;
        snprintf(g->reason, sizeof(g->reason), "%s", reason);
        g->host->log(g->host, GV_COMPONENT, EAI_LOG_ERROR, "not ready: %s", g->reason);
        struct timeval tv = {GV_REPROBE_MS / 1000, 0};
        if (g->reprobe_ev)
            evtimer_add(g->reprobe_ev, &tv);
    }
    if (gv_ready_gate(g) || g->probe_state < 0) {
        eai_pc_runner_unpark_all(g->runner);
        gv_sessions_unpark(g);
    }
}

struct probe_ctx {
    struct gv *g;
    char dir[PATH_MAX];
    char cgpath[192]; /* "/<cg_parent>/<probe_cid>": under our subtree, where the sweep looks */
    char msg[256];
    int rc;
};

static void probe_cleanup_work(void *arg)
{
    struct probe_ctx *p = arg;
    eai_rm_tree(p->dir);
}

static void probe_cleanup_done(void *arg)
{
    struct probe_ctx *p = arg;
    struct gv *g = p->g;
    free(p);
    gv_release(g);
}

/* The quirk of Debian's runsc (docs/gvisor.md): it refuses
 * --network=sandbox in any namespace where /proc/sys/net/core/rmem_default
 * exists, i.e. in every one on current kernels. */
#define GV_NET_QUIRK "cannot run with network enabled in root network namespace"

static void probe_net_done(void *arg, int status, const char *out, size_t outlen)
{
    struct probe_ctx *p = arg;
    struct gv *g = p->g;
    char line[160];
    eai_pc_one_line(line, sizeof(line), out);
    if (status == 0) {
        g->net_state = 1;
    } else if (out && strstr(out, GV_NET_QUIRK) && access(GV_UNSHARE, X_OK) == 0) {
        g->net_state = 2; /* runs with /proc/sys/net hidden (GV_NET_WORKAROUND_SH) */
    } else if (out && strstr(out, GV_NET_QUIRK)) {
        g->net_state = -1;
        snprintf(g->net_reason, sizeof(g->net_reason), "runsc needs the /proc/sys/net workaround and %s is missing",
                 GV_UNSHARE);
    } else {
        g->net_state = -1;
        snprintf(g->net_reason, sizeof(g->net_reason), "runsc --network=sandbox failed: %s", line);
    }
    if (!g->destroying)
        g->host->log(g->host, GV_COMPONENT, g->net_state > 0 ? EAI_LOG_INFO : EAI_LOG_WARN,
                     "sandbox network (granted egress): %s",
                     g->net_state == 1 ? "works" : g->net_state == 2 ? "works with the /proc/sys/net workaround"
                                                                     : g->net_reason);
    probe_finish(g, 1, NULL);
    if (g->destroying || g->host->work_submit(g->host, probe_cleanup_work, probe_cleanup_done, p) < 0) {
        probe_cleanup_work(p);
    }
}

static void probe_run_done(void *arg, int status, const char *out, size_t outlen);

/* The trivial sandbox on g->platform, offline: 1 when spawned. */
static int probe_spawn_run(struct probe_ctx *p)
{
    struct gv *g = p->g;
    char root[PATH_MAX + 16], plat[64];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    snprintf(plat, sizeof(plat), "--platform=%s", g->platform);
    char *argv[] = {g->runsc, root, "--network=none", plat, "run", "--bundle", p->dir, g->probe_cid, NULL};
    return eai_pc_child_spawn(g->host->base, g, argv, -1, -1, -1, 1, GV_PROBE_TIMEOUT_MS, probe_run_done, p) != NULL;
}

/* After the failed platform's sandbox is deleted (it may have left its
 * state, or none: either way), the next platform's. */
static void probe_deleted(void *arg, int status, const char *out, size_t outlen)
{
    struct probe_ctx *p = arg;
    struct gv *g = p->g;
    if (!g->destroying && probe_spawn_run(p))
        return;
    char reason[PATH_MAX + 64];
    snprintf(reason, sizeof(reason), "cannot run %s: %s", g->runsc, g->destroying ? "shutting down" : strerror(errno));
    probe_finish(g, 0, reason);
    if (g->destroying || g->host->work_submit(g->host, probe_cleanup_work, probe_cleanup_done, p) < 0) {
        probe_cleanup_work(p);
        probe_cleanup_done(p);
    }
}

/* Delete what the failed run left, then try g->platform: 1 when under way. */
static int probe_retry(struct probe_ctx *p)
{
    struct gv *g = p->g;
    char root[PATH_MAX + 16];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    char *argv[] = {g->runsc, root, "delete", "--force", g->probe_cid, NULL};
    return eai_pc_child_spawn(g->host->base, g, argv, -1, -1, -1, 1, GV_RUNSC_TIMEOUT_MS, probe_deleted, p) != NULL;
}

static void probe_run_done(void *arg, int status, const char *out, size_t outlen)
{
    struct probe_ctx *p = arg;
    struct gv *g = p->g;
    char reason[256], line[160];
    eai_pc_one_line(line, sizeof(line), out);
    if (status == 0 && !g->destroying) {
        /* the same trivial sandbox with gVisor's network stack, in the new
         * namespace runsc makes for it (only loopback) */
        char root[PATH_MAX + 16], plat[64];
        snprintf(root, sizeof(root), "--root=%s", g->state_dir);
        snprintf(plat, sizeof(plat), "--platform=%s", g->platform);
        char *argv[] = {g->runsc, root, "--network=sandbox", plat, "run", "--bundle", p->dir, g->probe_cid, NULL};
        if (eai_pc_child_spawn(g->host->base, g, argv, -1, -1, -1, 1, GV_PROBE_TIMEOUT_MS, probe_net_done, p))
            return;
        g->net_state = -1;
        snprintf(g->net_reason, sizeof(g->net_reason), "cannot run %s: %s", g->runsc, strerror(errno));
    }
    if (status == 0) {
        probe_finish(g, 1, NULL);
    } else {
        snprintf(reason, sizeof(reason), "trivial sandbox failed on platform %s (%s %d)%s%s", g->platform,
                 WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                 line[0] ? ": " : "", line);
        const char *next = g->destroying ? NULL : gv_platform_candidate(g, g->plat_idx + 1);
        if (next) {
            /* the next platform, in a sandbox of the same bundle once the
             * failed one's state is gone */
            g->host->log(g->host, GV_COMPONENT, EAI_LOG_INFO, "%s: trying platform %s", reason, next);
            size_t n = strlen(g->plat_failed);
            snprintf(g->plat_failed + n, sizeof(g->plat_failed) - n, "%s%s failed", n ? ", " : "", g->platform);
            g->plat_idx++;
            snprintf(g->platform, sizeof(g->platform), "%s", next);
            if (probe_retry(p))
                return;
        }
        probe_finish(g, 0, reason);
    }
    if (g->destroying || g->host->work_submit(g->host, probe_cleanup_work, probe_cleanup_done, p) < 0) {
        probe_cleanup_work(p);
        probe_cleanup_done(p);
    }
}

static void probe_bundle_work(void *arg)
{
    struct probe_ctx *p = arg;
    eai_rm_tree(p->dir);
    p->rc = eai_pc_probe_bundle(p->dir, p->g->uid, p->cgpath, p->msg, sizeof(p->msg));
}

static void probe_bundle_done(void *arg)
{
    struct probe_ctx *p = arg;
    struct gv *g = p->g;
    if (g->destroying) {
        probe_cleanup_work(p);
        probe_cleanup_done(p);
        return;
    }
    if (p->rc < 0) {
        char reason[300];
        snprintf(reason, sizeof(reason), "probe bundle: %s", p->msg);
        probe_finish(g, 0, reason);
        probe_cleanup_work(p);
        probe_cleanup_done(p);
        return;
    }
    if (!probe_spawn_run(p)) {
        char reason[300];
        snprintf(reason, sizeof(reason), "cannot run %s: %s", g->runsc, strerror(errno));
        probe_finish(g, 0, reason);
        probe_cleanup_work(p);
        probe_cleanup_done(p);
    }
}

static void version_done(void *arg, int status, const char *out, size_t outlen)
{
    struct gv *g = arg;
    if (g->destroying) {
        gv_release(g);
        return;
    }
    if (status != 0) {
        char reason[256], line[160];
        eai_pc_one_line(line, sizeof(line), out);
        snprintf(reason, sizeof(reason), "%s --version failed (%s %d)%s%s", g->runsc,
                 WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                 line[0] ? ": " : "", line);
        probe_finish(g, 0, reason);
        gv_release(g);
        return;
    }
    eai_pc_one_line(g->version, sizeof(g->version), out);
    if (!strstr(g->version, "runsc")) {
        probe_finish(g, 0, "runsc --version printed no runsc version");
        gv_release(g);
        return;
    }
    struct probe_ctx *p = calloc(1, sizeof(*p));
    if (!p) {
        probe_finish(g, 0, "out of memory");
        gv_release(g);
        return;
    }
    p->g = g;
    snprintf(p->dir, sizeof(p->dir), "%s/%s", g->work_dir, g->probe_cid);
    snprintf(p->cgpath, sizeof(p->cgpath), "/%s/%s", g->cg_parent, g->probe_cid);
    /* inflight stays taken by p until probe_cleanup_done. */
    if (g->host->work_submit(g->host, probe_bundle_work, probe_bundle_done, p) < 0) {
        probe_bundle_work(p);
        probe_bundle_done(p);
    }
}

static void probe_start(struct gv *g)
{
    g->probe_state = 0;
    g->plat_idx = 0;
    g->plat_failed[0] = '\0';
    snprintf(g->platform, sizeof(g->platform), "%s", gv_platform_candidate(g, 0));
    snprintf(g->reason, sizeof(g->reason), "probe in progress");
    char name[PATH_MAX];
    snprintf(name, sizeof(name), "%s", g->runsc[0] ? g->runsc : "runsc");
    if (eai_pc_find_in_path(name, g->runsc, sizeof(g->runsc)) < 0) {
        char reason[PATH_MAX + 64];
        snprintf(reason, sizeof(reason), "runsc not found or not executable: %s", g->runsc);
        probe_finish(g, 0, reason);
        return;
    }
    if (!g->probe_enabled) {
        snprintf(g->version, sizeof(g->version), "runsc (probe disabled)");
        if (!strcmp(g->platform_cfg, "auto"))
            snprintf(g->platform, sizeof(g->platform), "ptrace"); /* nothing tried: the one every runsc has */
        /* no probe: assume the quirk where the kernel shows net sysctls */
        g->net_state = access("/proc/sys/net/core/rmem_default", F_OK) != 0 ? 1 : access(GV_UNSHARE, X_OK) == 0 ? 2 : -1;
        if (g->net_state < 0)
            snprintf(g->net_reason, sizeof(g->net_reason), "%s is missing", GV_UNSHARE);
        probe_finish(g, 1, NULL);
        return;
    }
    char *argv[] = {g->runsc, "--version", NULL};
    g->inflight++;
    if (!eai_pc_child_spawn(g->host->base, g, argv, -1, -1, -1, 1, GV_RUNSC_TIMEOUT_MS, version_done, g)) {
        char reason[PATH_MAX + 64];
        snprintf(reason, sizeof(reason), "cannot run %s: %s", g->runsc, strerror(errno));
        g->inflight--;
        probe_finish(g, 0, reason);
    }
}

static void on_reprobe(evutil_socket_t fd, short what, void *arg)
{
    struct gv *g = arg;
    if (g->probe_state < 0 && !g->destroying)
        probe_start(g);
}

/* ------------------------------------------------------------ sweep */

struct sweep_ctx {
    struct gv *g;
    int containers, bundles, cgroups;
};

static int has_prefix(const char *s)
{
    return !strncmp(s, GV_CID_PREFIX, strlen(GV_CID_PREFIX));
}

static void sweep_work(void *arg)
{
    struct sweep_ctx *s = arg;
    struct gv *g = s->g;
    char root[PATH_MAX + 16];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    static char out[16384]; /* one sweep at a time (start-up) */
    char *list_argv[] = {g->runsc, root, "list", "-quiet", NULL};
    /* In rounds of at most 256 (and what 16 KiB of `runsc list` holds), until
     * none of ours is left: a crash with more sandboxes than one round (it
     * used to stop at 256) leaves nothing either.  Bounded: 64 rounds. */
    int last = -1;
    for (int round = 0; round < 64 && access(g->runsc, X_OK) == 0 &&
                        eai_pc_run_sync(list_argv, GV_RUNSC_TIMEOUT_MS, out, sizeof(out)) == 0;
         round++) {
        /* Kill every leftover first, then delete them: a delete right after
         * its own kill waits for that sandbox to die, one after another
         * (seconds each after a crash with many running). */
        char *ids[256];
        int n = 0;
        char *save = NULL;
        for (char *id = strtok_r(out, "\n", &save); id && n < 256; id = strtok_r(NULL, "\n", &save)) {
            if (!has_prefix(id) || !strcmp(id, g->probe_cid))
                continue;
            char kd[PATH_MAX + 300];
            snprintf(kd, sizeof(kd), "%s/%s", g->work_dir, id);
            if (gv_session_kept_dir(kd))
                continue; /* a kept session adopted and resumed meanwhile */
            ids[n++] = id;
            char *kill_argv[] = {g->runsc, root, "kill", id, "KILL", NULL};
            eai_pc_run_sync(kill_argv, GV_RUNSC_TIMEOUT_MS, NULL, 0);
        }
        if (n == 0 || (last >= 0 && n >= last && n < 256))
            break; /* none left, or the same ones again: runsc cannot delete them */
        last = n;
        for (int i = 0; i < n; i++) {
            char *del_argv[] = {g->runsc, root, "delete", "--force", ids[i], NULL};
            eai_pc_run_sync(del_argv, GV_DELETE_TIMEOUT_MS, NULL, 0);
            s->containers++;
        }
    }
    DIR *d = opendir(g->work_dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!has_prefix(e->d_name) || !strcmp(e->d_name, g->probe_cid))
                continue;
            char p[PATH_MAX + 300];
            snprintf(p, sizeof(p), "%s/%s", g->work_dir, e->d_name);
            if (gv_session_kept_dir(p))
                continue; /* a paused session kept for this node's next process (session_keep) */
            if (gv_bundle_remove(p) == 0)
                s->bundles++;
        }
        closedir(d);
    }
    /* Cgroup leaves under our parent, in every v1 controller (or v2). */
    static const char *const ctrls[] = {"memory", "cpuacct", "cpu", "pids", "cpuset", "blkio", "devices",
                                        "freezer", "systemd"};
    size_t nctrl = g->cg_v2 ? 1 : sizeof(ctrls) / sizeof(ctrls[0]);
    for (size_t i = 0; i < nctrl; i++) {
        char dir[PATH_MAX];
        if (g->cg_v2)
            snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", g->cg_parent);
        else
            snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s/%s", ctrls[i], g->cg_parent);
        DIR *cd = opendir(dir);
        if (!cd)
            continue;
        struct dirent *e;
        while ((e = readdir(cd))) {
            if (!has_prefix(e->d_name) || !strcmp(e->d_name, g->probe_cid))
                continue; /* an earlier probe's leaf goes; this one's may be running */
            char kd[PATH_MAX + 300];
            snprintf(kd, sizeof(kd), "%s/%s", g->work_dir, e->d_name);
            if (gv_session_kept_dir(kd))
                continue;
            char leaf[PATH_MAX + 300];
            snprintf(leaf, sizeof(leaf), "%s/%s", g->cg_parent, e->d_name);
            if (gv_cgroup_remove(leaf, g->cg_v2) == 0)
                s->cgroups++;
        }
        closedir(cd);
    }
}

static void sweep_done(void *arg)
{
    struct sweep_ctx *s = arg;
    struct gv *g = s->g;
    if (!g->destroying) {
        if (s->containers || s->bundles || s->cgroups)
            g->host->log(g->host, GV_COMPONENT, EAI_LOG_INFO,
                         "sweep removed %d containers, %d bundles, %d cgroup leaves", s->containers, s->bundles,
                         s->cgroups);
        g->sweeping = 0;
        if (gv_ready_gate(g)) {
            eai_pc_runner_unpark_all(g->runner);
            gv_sessions_unpark(g);
        }
    }
    free(s);
    gv_release(g);
}

static void gv_sweep(void *self)
{
    struct gv *g = self;
    struct sweep_ctx *s = calloc(1, sizeof(*s));
    if (!s)
        return;
    s->g = g;
    g->sweeping = 1;
    g->inflight++;
    if (g->host->work_submit(g->host, sweep_work, sweep_done, s) < 0) {
        sweep_work(s);
        sweep_done(s);
    }
}

/* ------------------------------------------------------------ ops */

static void gv_probe(void *self, struct eai_iso_probe *out)
{
    struct gv *g = self;
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    out->ready = g->probe_state == 1;
    out->pending = g->probe_state == 0; /* ABI 1.1: first probe still running */
    out->caps = EAI_ISO_CAP_LOCAL_IMAGES | EAI_ISO_CAP_MEMORY_LIMIT | EAI_ISO_CAP_FILES | EAI_ISO_CAP_VOLUMES;
    if (g->net_state > 0)
        out->caps |= EAI_ISO_CAP_EGRESS_NETNS; /* granted egress in core's namespace */
    if (g->net_state > 0 && g->egress_pool && g->pool_size > 0 && g->host->size >= EAI_HOST_SIZE_1_2 &&
        g->host->netns_take && g->host->netns_release)
        out->caps |= EAI_ISO_CAP_EGRESS_POOL; /* egress_claim: pooled sandboxes in core's namespaces */
    out->max_path_bytes = EAI_PC_MAX_PATH_BYTES; /* ABI 1.1: checked at admission */
    out->max_name_bytes = EAI_PC_MAX_NAME_BYTES;
    /* the platform is part of what runs programs: readyz and
     * eai_backend_info say which one the probe chose */
    if (out->ready)
        snprintf(out->version, sizeof(out->version), "%s, platform %s", g->version, g->platform);
    else
        snprintf(out->version, sizeof(out->version), "%s", g->version);
    if (!out->ready)
        snprintf(out->reason, sizeof(out->reason), "%s", g->reason);
}

static int gv_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb, void *cb_arg,
                    void **handle, struct eai_error **err)
{
    struct gv *g = self;
    /* never offline instead: granted egress needs core's namespace and a
     * runsc whose sandbox network works here */
    if (job->egress && job->egress[0] && (!gv_job_netns(job) || (g->probe_state != 0 && g->net_state <= 0)))
        return eai_host_error_set(g->host, err, EAI_E_EGRESS_UNSUPPORTED, "gvisor: granted egress cannot be carried (%s)",
                                  !gv_job_netns(job) ? "no network namespace" : g->net_reason);
    return eai_pc_runner_start(g->runner, job, cb, cb_arg, handle, err);
}

static void gv_cancel(void *self, void *handle)
{
    struct gv *g = self;
    eai_pc_runner_cancel(g->runner, handle);
}

/* ABI 1.4: streamed stdin of an execution, single-use or in a session (the
 * pipe of its runsc exec): docs/executions.md. */
static int gv_stdin_write(void *self, void *handle, const unsigned char *data, size_t len, int eof, size_t *pending,
                          struct eai_error **err)
{
    struct gv *g = self;
    return eai_pc_runner_stdin(g->runner, handle, data, len, eof, pending, err);
}

/* ---------------------------------------------------------------- metrics */

static const char *const gv_result_label[] = {"result", NULL};

/* The plugin's metric families (docs/observability.md): each name here
 * once; the pool code updates them by enum gv_metric. */
static const struct eai_metric_desc gv_metric_descs[GV_M_COUNT] = {
    [GV_M_TAKES] = {"eai_pool_takes_total",
                    "Runs that asked the warm pool, by result (hit or miss); hit rate = hit / (hit + miss).",
                    EAI_METRIC_KIND_COUNTER, gv_result_label, NULL, 0},
    [GV_M_EGRESS_TAKES] = {"eai_pool_egress_takes_total",
                           "Runs with granted egress that asked the warm pool, by result (hit or miss).",
                           EAI_METRIC_KIND_COUNTER, gv_result_label, NULL, 0},
    [GV_M_READY] = {"eai_pool_ready", "Warm pooled sandboxes ready to serve.", EAI_METRIC_KIND_GAUGE, NULL, NULL, 0},
    [GV_M_SIZE] = {"eai_pool_size", "Configured warm sandboxes per shape.", EAI_METRIC_KIND_GAUGE, NULL, NULL, 0},
};

int gv_metrics_describe(struct gv *g, struct eai_error **err)
{
    const struct eai_host *h = g->host;
    if (!h || h->size < EAI_HOST_SIZE_1_4 || !h->metric_describe)
        return 0; /* an older host: by name (gv_metric) */
    for (int i = 0; i < GV_M_COUNT; i++)
        if (!(g->metrics[i] = h->metric_describe(h, &gv_metric_descs[i], err)))
            return -1;
    return 0;
}

void gv_metric(struct gv *g, enum gv_metric m, const char *value, double v)
{
    const struct eai_host *h = g ? g->host : NULL;
    if (!h || (unsigned)m >= GV_M_COUNT)
        return;
    const struct eai_metric_desc *d = &gv_metric_descs[m];
    if (g->metrics[m]) {
        const char *values[1] = {value};
        h->metric_update(h, g->metrics[m], d->labels ? values : NULL, v);
        return;
    }
    char labels[96];
    if (d->labels && value)
        snprintf(labels, sizeof labels, "%s=\"%s\"", d->labels[0], value);
    if (d->kind == EAI_METRIC_KIND_COUNTER && h->metric_add)
        h->metric_add(h, d->name, d->labels && value ? labels : NULL, v);
    else if (d->kind == EAI_METRIC_KIND_GAUGE && h->metric_set)
        h->metric_set(h, d->name, NULL, v);
}

static void *gv_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    if (config && !json_is_object(config)) {
        if (err)
            *err = host->error_new(EAI_E_VALIDATION_FAILED, 0, "gvisor: config must be an object");
        return NULL;
    }
    if (!host->base) {
        if (err)
            *err = host->error_new(EAI_E_INTERNAL, 0, "gvisor: needs an event loop");
        return NULL;
    }
    struct gv *g = calloc(1, sizeof(*g));
    if (!g) {
        if (err)
            *err = host->error_new(EAI_E_INTERNAL, ENOMEM, "gvisor: out of memory");
        return NULL;
    }
    g->host = host;
    const char *s;
    snprintf(g->runsc, sizeof(g->runsc), "%s", (s = eai_pc_cfg_str(config, "runsc")) ? s : "runsc");
    if ((s = eai_pc_cfg_str(config, "state_dir")))
        snprintf(g->state_dir, sizeof(g->state_dir), "%s", s);
    else
        snprintf(g->state_dir, sizeof(g->state_dir), "%s/gvisor/state", host->data_dir);
    if ((s = eai_pc_cfg_str(config, "work_dir")))
        snprintf(g->work_dir, sizeof(g->work_dir), "%s", s);
    else
        snprintf(g->work_dir, sizeof(g->work_dir), "%s/gvisor/work", host->data_dir);
    snprintf(g->platform_cfg, sizeof(g->platform_cfg), "%s", (s = eai_pc_cfg_str(config, "platform")) ? s : "auto");
    json_t *v = config ? json_object_get(config, "uid") : NULL;
    g->uid = json_is_integer(v) ? (unsigned)json_integer_value(v) : 65534;
    v = config ? json_object_get(config, "probe") : NULL;
    g->probe_enabled = json_is_boolean(v) ? json_is_true(v) : 1;
    v = config ? json_object_get(config, "pool") : NULL;
    g->pool_size = json_is_integer(v) ? (int)json_integer_value(v) : 2;
    if (g->pool_size < 0 || g->pool_size > 64) {
        if (err)
            *err = host->error_new(EAI_E_VALIDATION_FAILED, 0, "gvisor: pool must be 0..64");
        free(g);
        return NULL;
    }
    if (!g->platform_cfg[0] ||
        strspn(g->platform_cfg, "abcdefghijklmnopqrstuvwxyz0123456789") != strlen(g->platform_cfg)) {
        if (err)
            *err = host->error_new(EAI_E_VALIDATION_FAILED, 0, "gvisor: invalid platform '%s'", g->platform_cfg);
        free(g);
        return NULL;
    }
    if (g->state_dir[0] != '/' || g->work_dir[0] != '/' || eai_mkdir_p(g->state_dir, 0700) < 0 ||
        eai_mkdir_p(g->work_dir, 0700) < 0) {
        if (err)
            *err = host->error_new(EAI_E_INTERNAL, errno, "gvisor: cannot create %s or %s", g->state_dir,
                                   g->work_dir);
        free(g);
        return NULL;
    }
    struct stat st;
    g->cg_v2 = stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0;
    /* Our own cgroup subtree, distinct per state dir: two servers on one
     * host never sweep each other's leaves. */
    snprintf(g->cg_parent, sizeof(g->cg_parent), "eai/%016llx", eai_pc_fnv1a(g->state_dir));
    g->reprobe_ev = evtimer_new(host->base, on_reprobe, g);
    g->runner = gv_runner_new(g);
    if (!g->reprobe_ev || !g->runner) {
        if (err)
            *err = host->error_new(EAI_E_INTERNAL, ENOMEM, "gvisor: out of memory");
        gv_free(g);
        return NULL;
    }
    unsigned char rnd[4] = {0};
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        memset(rnd, 0, sizeof(rnd));
    /* Fixed before sweep() can run: the sweep leaves our own probe alone. */
    snprintf(g->probe_cid, sizeof(g->probe_cid), GV_CID_PREFIX "probe-%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
             rnd[3]);
    if (parse_warmup(g, config ? json_object_get(config, "warmup") : NULL) < 0) {
        if (err)
            *err = host->error_new(EAI_E_VALIDATION_FAILED, 0,
                                   "gvisor: warmup must be a list of at most %d strings of 1..%d bytes",
                                   GV_WARMUP_ARGS, GV_WARMUP_ARG_BYTES);
        gv_free(g);
        return NULL;
    }
    v = config ? json_object_get(config, "egress_pool") : NULL;
    g->egress_pool = json_is_boolean(v) ? json_is_true(v) : 1;
    v = config ? json_object_get(config, "launcher") : NULL;
    launcher_start(g, json_is_boolean(v) ? json_is_true(v) : 1);
    probe_start(g);
    if (gv_metrics_describe(g, err) < 0) {
        gv_free(g);
        return NULL;
    }
    /* every pool series present at zero from the start (dashboards) */
    gv_metric(g, GV_M_TAKES, "hit", 0);
    gv_metric(g, GV_M_TAKES, "miss", 0);
    if (g->egress_pool) {
        gv_metric(g, GV_M_EGRESS_TAKES, "hit", 0);
        gv_metric(g, GV_M_EGRESS_TAKES, "miss", 0);
    }
    gv_metric(g, GV_M_READY, NULL, 0);
    gv_metric(g, GV_M_SIZE, NULL, g->pool_size);
    return g;
}

static void gv_destroy(void *self)
{
    struct gv *g = self;
    if (!g)
        return;
    g->destroying = 1;
    g->inflight++; /* callbacks below must not free g under us */
    event_del(g->reprobe_ev);
    if (g->refill_ev)
        event_del(g->refill_ev);
    /* kill everything first, give the sandboxes a moment to die, then
     * delete them (fast once dead) */
    eai_pc_runner_shutdown(g->runner, 0);
    gv_pool_destroy_all(g, 1);
    gv_session_destroy_all(g, 1);
    struct timespec settle = {0, 150 * 1000000L};
    nanosleep(&settle, NULL); /* shutdown only: the loop no longer serves */
    eai_pc_runner_shutdown(g->runner, 1);
    gv_pool_destroy_all(g, 0);
    gv_session_destroy_all(g, 0);
    eai_pc_child_reap_all(g);
    eai_pc_watchdog_reap_all(); /* all disarmed by now: none outlives the .so */
    /* runsc of 2026 bind-mounts an empty network namespace for its gofers
     * at <root>/null-netns and leaves it there; stacked when two runsc made
     * it at once.  Ours to remove when the last sandbox is gone (a state
     * dir that cannot be removed otherwise: EBUSY). */
    char nullns[PATH_MAX + 16];
    snprintf(nullns, sizeof(nullns), "%s/null-netns", g->state_dir);
    for (int i = 0; i < 64 && umount2(nullns, MNT_DETACH) == 0; i++)
        ;
    /* Our cgroup subtree's parents, when empty. */
    static const char *const ctrls[] = {"memory", "cpuacct", "cpu", "pids", "cpuset", "blkio", "devices",
                                        "freezer", "systemd"};
    for (size_t i = 0; i < (g->cg_v2 ? 1 : sizeof(ctrls) / sizeof(ctrls[0])); i++) {
        char dir[PATH_MAX];
        if (g->cg_v2)
            snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", g->cg_parent);
        else
            snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s/%s", ctrls[i], g->cg_parent);
        rmdir(dir);
    }
    gv_release(g); /* frees g unless a worker step still holds it */
}

static const struct eai_isolation_ops gv_ops = {
    .size = sizeof(struct eai_isolation_ops),
    .probe = gv_probe,
    .start = gv_start,
    .cancel = gv_cancel,
    .recover = NULL,
    .sweep = gv_sweep,
    .session_create = gv_session_create,
    .session_keep = gv_session_keep,
    .session_adopt = gv_session_adopt,
    .session_drop_kept = gv_session_drop_kept,
    .session_destroy = gv_session_destroy,
    .session_busy = gv_session_busy,
    .session_file = gv_session_file,
    .session_pause = gv_session_pause,
    .session_resume = gv_session_resume,
    .session_snapshot = gv_session_snapshot,
    .egress_claim = gv_egress_claim,
    .stdin_write = gv_stdin_write,
};

static const struct eai_plugin_descriptor gv_descriptor = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "gvisor",
    .kind = EAI_KIND_ISOLATION,
    .version = EAI_VERSION, /* the build's (CMake project version) */
    .create = gv_create,
    .destroy = gv_destroy,
    .ops = &gv_ops,
    .config_keys = gv_keys,
    .messages = gv_messages, /* gvisor_session.c */
};

EAI_PLUGIN_DECLARE(gv_descriptor)
