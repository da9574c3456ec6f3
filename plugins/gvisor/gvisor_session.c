/*
 * Sessions on gVisor (docs/sessions.md): one sandbox kept alive across
 * executions, owned by one session of one tenant, never shared.
 *
 * The sandbox is booted exactly like a warm pool sandbox (gvisor_pool.c):
 * a bundle with the session's limits (memory cgroup leaf, cpu, pids, a
 * size-capped host tmpfs at /tmp) under an attached `runsc run`, named
 * eai-ses-<uuid> (the start-up sweep removes it after a crash).  Its init
 * is the launcher's session supervisor (`/.eai/launcher --session
 * eai-session`, launcher/eai_launcher_session.c) when the launcher is
 * installed and the image has its mount point, else
 * `sh -c 'echo ready; exec sleep infinity'`.  Each execution of the session
 * is a `runsc exec --process` into it (gvisor_exec.c): with the supervisor,
 * of `/.eai/launcher --run eai-session <argv>`, a client that has the
 * supervisor start the program as its own child with pipes of the
 * sandbox's own, relays them to and from runsc exec's, and exits with the
 * program's code: the session's programs and what they leave in
 * the background are children of the sandbox's init, which gVisor keeps
 * across checkpoint and restore (it kills at restore every process
 * `runsc exec` started, since 2024).  Its cancel or timeout kills only its
 * program (`runsc kill --pid` of the client, the pid from
 * --internal-pid-file; the supervisor then kills the program), never the
 * sandbox.  The limits hold for everything the session runs together, as
 * they belong to the sandbox.  At most max_concurrent executions run in it
 * at once; the others wait (the runner's hold).  The sandbox dying (OOM,
 * crash) ends the session: on_end with oom/crashed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "gvisor.h"

#define GV_SES_BOOT_TIMEOUT_MS 30000
#define GV_SES_LIST_MAX 1000

enum gv_ses_state { GVS_BOOTING = 0, GVS_READY, GVS_PAUSING, GVS_PAUSED, GVS_RESUMING, GVS_DYING,
                    GVS_SNAPSHOT /* session_snapshot: paused a moment, then running again */ };

#define GV_SES_CKPT_TIMEOUT_MS 120000
/* In a paused session's bundle: kept for the next process of this node
 * (session_keep); the start-up sweep leaves such a bundle, its /tmp and
 * its cgroup leaf alone; session_adopt takes it back, session_drop_kept
 * removes the ones not adopted.  Removed once the session runs again. */
#define GV_KEPT_MARK "eai-kept"
#define GV_SES_RESTORE_POLL_MS 50
#define GV_SES_RESTORE_POLLS 600       /* 30 s */

struct gv_session {
    struct gv *g;
    struct gv_session *next;
    char id[64];
    struct gv_sbx sbx;                /* the bundle, `runsc run` and its end (gvisor_sandbox.c) */
    struct eai_iso_session spec;      /* strings not kept */
    /* its volumes (ABI 1.5), copied: bound at boot */
    struct eai_iso_volume vols[GV_MAX_VOLUMES];
    char vhost[GV_MAX_VOLUMES][PATH_MAX];
    char vpath[GV_MAX_VOLUMES][256];
    size_t nvols;
    struct eai_iso_session_callbacks cb;
    void *cb_arg;
    enum gv_ses_state state;
    int ready_reported;               /* on_ready(NULL) was called: on_end owed */
    int destroyed;                    /* session_destroy asked for it */
    int prep_failed;
    int parked;                       /* waiting for the probe and the start-up sweep */
    char msg[256];
    int rd_fd;
    struct event *rd_ev;
    char rd[16];
    size_t rdlen;
    int ckpt;                         /* its container may exist stopped (pause): delete it at the end */
    int ckpt_ok;                      /* the checkpoint succeeded */
    int polls;                        /* restore: runsc state polls so far */
    struct event *ev_poll;
    int running;                      /* executions in it now */
    int waiting;                      /* executions held until one ends */
    struct eai_pc_stats end_stats;    /* read before the cgroup goes */
    int kept;                         /* its bundle holds GV_KEPT_MARK: kept across a restart of eaid */
    char netns[256];                  /* granted egress: core's namespace ("": no network) */
    char dns[64];                     /* and its DNS server */
    /* a fork (eai_iso_session.restore_from, ABI 1.5): restored from that
     * snapshot directory instead of booted */
    char restore[PATH_MAX];
    int restoring;                    /* booting by runsc restore: ready once `runsc state` says running */
    /* session_snapshot in flight */
    void (*snap_done)(void *arg, const struct eai_error *err, int64_t size_bytes);
    void *snap_arg;
    int snap_paused;                  /* that snapshot copies a paused session's saved state */
};

/* In a snapshot directory (session_snapshot): the checkpoint image, a copy
 * of /tmp and this file, "launcher=0|1" (how its init runs programs). */
#define GV_SNAP_META "eai-snapshot"


/* "eai-ses-<uuid>" from "ses_<uuid>"; -1 when id is not one of ours. */
static int ses_cid(const char *id, char *out, size_t len)
{
    if (!id || strncmp(id, "ses_", 4) != 0 || strlen(id) != 40)
        return -1;
    for (const char *p = id + 4; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == '-'))
            return -1;
    snprintf(out, len, GV_CID_PREFIX "ses-%s", id + 4);
    return 0;
}

static struct gv_session *ses_find(struct gv *g, const char *id)
{
    for (struct gv_session *s = g->sessions; s; s = s->next)
        if (id && !strcmp(s->id, id))
            return s;
    return NULL;
}

/* ------------------------------------------------------------ teardown */

static void ses_unlink(struct gv_session *s)
{
    for (struct gv_session **pp = &s->g->sessions; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            return;
        }
    }
}

/* Worker, before gv_sbx removes the bundle and the cgroup: what the session
 * used, for its end. */
static void ses_clean_work(struct gv_sbx *x)
{
    struct gv_session *s = GV_SBX_OWNER(x, struct gv_session, sbx);
    if (s->sbx.b.cg_made)
        gv_cgroup_stats(&s->sbx.b, &s->end_stats);
}

/* The last step of its end (gv_sbx clean_done), on the loop. */
static void ses_clean_done(struct gv_sbx *x)
{
    struct gv_session *s = GV_SBX_OWNER(x, struct gv_session, sbx);
    struct gv *g = s->g;
    ses_unlink(s);
    if (s->ready_reported && !g->destroying && s->cb.on_end) {
        struct eai_iso_session_end end;
        memset(&end, 0, sizeof(end));
        end.size = sizeof(end);
        end.oom = s->end_stats.oom > 0;
        end.crashed = !s->destroyed;
        end.cpu_seconds = s->end_stats.cpu_seconds;
        end.peak_memory_mb = s->end_stats.peak_mb;
        end.message = s->msg[0] ? s->msg : NULL;
        s->cb.on_end(s->cb_arg, &end);
    } else if (!s->ready_reported && !g->destroying && s->cb.on_ready) {
        struct eai_error *e = g->host->error_new(EAI_E_SANDBOX_FAILED, 0, "%s",
                                                 s->msg[0] ? s->msg : "the session's sandbox did not boot");
        s->cb.on_ready(s->cb_arg, e);
        g->host->error_free(e);
    }
    if (s->rd_ev)
        event_free(s->rd_ev);
    if (s->rd_fd >= 0)
        close(s->rd_fd);
    if (s->sbx.ev_timer)
        event_free(s->sbx.ev_timer);
    if (s->ev_poll)
        event_free(s->ev_poll);
    free(s);
    /* executions waiting for it end now (their hold answers -1) */
    if (!g->destroying)
        eai_pc_runner_retry_held(g->runner);
    gv_release(g);
}

static void ses_kill(struct gv_session *s, const char *why)
{
    if (s->state == GVS_DYING)
        return;
    s->state = GVS_DYING;
    if (why && !s->msg[0])
        snprintf(s->msg, sizeof(s->msg), "%s", why);
    if (s->rd_ev) {
        event_free(s->rd_ev);
        s->rd_ev = NULL;
    }
    if (s->rd_fd >= 0) {
        close(s->rd_fd);
        s->rd_fd = -1;
    }
    if (s->ev_poll)
        event_del(s->ev_poll);
    if ((!s->sbx.run_spawned || s->sbx.run_exited) && s->ckpt)
        gv_sbx_helper(&s->sbx, 1); /* a paused sandbox's stopped container */
    gv_sbx_stop(&s->sbx, 0);
}

/* ------------------------------------------------------------ boot */

static void pause_finish(struct gv_session *s);
static void resumed(struct gv_session *s, const char *err);

static void run_done(void *arg, int status, const char *out, size_t outlen)
{
    struct gv_session *s = arg;
    s->sbx.run = NULL;
    s->sbx.run_exited = 1;
    if (s->state == GVS_PAUSING) { /* the checkpoint stops the sandbox */
        if (s->ckpt_ok)
            pause_finish(s);
        return;
    }
    if (s->state == GVS_RESUMING) {
        resumed(s, GV_MSG(GVS_M_RESTORE_ENDED));
        return;
    }
    if (s->state != GVS_DYING) {
        s->g->host->log(s->g->host, GV_COMPONENT, EAI_LOG_WARN, "session %s: its sandbox ended (%s)", s->id,
                        s->state == GVS_BOOTING ? "while booting" : "on its own");
        ses_kill(s, s->state == GVS_BOOTING ? GV_MSG(GVS_M_ENDED_BOOTING)
                                            : GV_MSG(GVS_M_ENDED_OWN));
    } else {
        gv_sbx_maybe_cleanup(&s->sbx);
    }
}

static void on_ready(evutil_socket_t fd, short what, void *arg)
{
    struct gv_session *s = arg;
    ssize_t r = read(s->rd_fd, s->rd + s->rdlen, sizeof(s->rd) - 1 - s->rdlen);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (r <= 0) {
        ses_kill(s, "the session's init closed its output before ready");
        return;
    }
    s->rdlen += (size_t)r;
    s->rd[s->rdlen] = '\0';
    if (!strstr(s->rd, "ready")) {
        if (s->rdlen >= sizeof(s->rd) - 1)
            ses_kill(s, "unexpected output of the session's init");
        return;
    }
    event_free(s->rd_ev);
    s->rd_ev = NULL;
    close(s->rd_fd);
    s->rd_fd = -1;
    if (s->sbx.ev_timer)
        event_del(s->sbx.ev_timer);
    if (s->state != GVS_BOOTING)
        return;
    s->state = GVS_READY;
    s->ready_reported = 1;
    if (s->cb.on_ready)
        s->cb.on_ready(s->cb_arg, NULL);
}

static void on_boot_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct gv_session *s = arg;
    if (s->state == GVS_BOOTING)
        ses_kill(s, GV_MSG(GVS_M_BOOT_TIMEOUT));
}

static const char *const gv_ses_init_argv[] = {"sh", "-c", "echo ready; exec sleep infinity", NULL};
static const char *const gv_ses_supervisor_argv[] = {GV_LAUNCHER_PATH, "--session", GV_SES_SOCKET, NULL};

static void prepare_work(void *arg)
{
    struct gv_session *s = arg;
    char path[PATH_MAX + 32], dir[PATH_MAX + 16];
    struct stat st, dst;
    /* The supervisor needs the launcher's mount point in the image (as the
     * warm pool's launcher, gvisor_pool.c); without it the session idles in
     * sh + sleep and its programs are runsc exec'd */
    int want_launcher = -1;
    if (s->restore[0]) {
        /* a fork: its init is the snapshot's (the supervisor or sh + sleep) */
        char meta[PATH_MAX + 32], line[64] = {0};
        snprintf(meta, sizeof(meta), "%s/" GV_SNAP_META, s->restore);
        int fd = open(meta, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        ssize_t n = fd >= 0 ? read(fd, line, sizeof(line) - 1) : -1;
        if (fd >= 0)
            close(fd);
        snprintf(path, sizeof(path), "%s/ckpt", s->restore);
        if (n <= 0 || lstat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
            s->prep_failed = 1;
            snprintf(s->msg, sizeof(s->msg), GV_MSG(GVS_M_SNAPSHOT_BAD), "no image or no metadata");
            return;
        }
        want_launcher = strstr(line, "launcher=1") != NULL;
        s->sbx.b.launcher = want_launcher;
        /* a snapshot of a sandbox with gVisor's network stack is restored
         * with it, in the fork's own namespace (core leases one); one
         * without, without */
        if ((strstr(line, "network=1") != NULL) != (s->netns[0] != 0)) {
            s->prep_failed = 1;
            snprintf(s->msg, sizeof(s->msg), GV_MSG(GVS_M_SNAPSHOT_BAD),
                     s->netns[0] ? "it was taken without network" : "it was taken with network: its fork needs a"
                                                                    " namespace");
            return;
        }
    }
    snprintf(path, sizeof(path), "%s" GV_LAUNCHER_PATH, s->sbx.b.rootfs);
    snprintf(dir, sizeof(dir), "%s/.eai", s->sbx.b.rootfs);
    if (s->sbx.b.launcher && (lstat(dir, &dst) < 0 || !S_ISDIR(dst.st_mode) || (dst.st_mode & 0005) != 0005 ||
                          lstat(path, &st) < 0 || !S_ISREG(st.st_mode)))
        s->sbx.b.launcher = 0;
    if (want_launcher == 1 && !s->sbx.b.launcher) {
        s->prep_failed = 1;
        snprintf(s->msg, sizeof(s->msg), GV_MSG(GVS_M_SNAPSHOT_BAD), "the launcher is not installed");
        return;
    }
    int ok = 1, ok2 = 1;
    if (!s->sbx.b.launcher) {
        snprintf(path, sizeof(path), "%s/bin/sh", s->sbx.b.rootfs);
        ok = stat(path, &st) == 0;
        snprintf(path, sizeof(path), "%s/usr/bin/sleep", s->sbx.b.rootfs);
        ok2 = stat(path, &st) == 0;
        snprintf(path, sizeof(path), "%s/bin/sleep", s->sbx.b.rootfs);
        ok2 = ok2 || stat(path, &st) == 0;
    }
    if (!ok || !ok2) {
        s->prep_failed = 1;
        snprintf(s->msg, sizeof(s->msg), "the image has no sh and sleep: a session cannot idle in it");
        return;
    }
    struct eai_iso_job job;
    memset(&job, 0, sizeof(job));
    job.size = sizeof(job);
    job.argv = s->sbx.b.launcher ? gv_ses_supervisor_argv : gv_ses_init_argv;
    job.memory_bytes = s->spec.memory_bytes;
    job.cpu_millis = s->spec.cpu_millis;
    job.disk_bytes = s->spec.disk_bytes;
    job.pids = s->spec.pids;
    job.netns_path = s->netns[0] ? s->netns : NULL;
    job.dns_server = s->netns[0] ? s->dns : NULL;
    job.volumes = s->nvols ? s->vols : NULL;
    job.nvolumes = s->nvols;
    char msg[200];
    if (gv_bundle_prepare(&s->sbx.b, &job, 0, msg, sizeof(msg)) < 0) {
        s->prep_failed = 1;
        snprintf(s->msg, sizeof(s->msg), "preparing the session's sandbox: %s", msg);
        return;
    }
    if (s->restore[0]) {
        /* the fork's own copy of the snapshot's /tmp, into its own tmpfs
         * (never shared: each fork writes only its copy) */
        char src[PATH_MAX + 16], tdst[PATH_MAX + 16], out[256] = "";
        snprintf(src, sizeof(src), "%s/tmp/.", s->restore);
        snprintf(tdst, sizeof(tdst), "%s/tmp/", s->sbx.b.dir);
        char *argv[] = {"/bin/cp", "-a", "--", src, tdst, NULL};
        int st2 = eai_pc_run_sync(argv, GV_SES_CKPT_TIMEOUT_MS, out, sizeof(out));
        if (st2 < 0 || !WIFEXITED(st2) || WEXITSTATUS(st2) != 0) {
            char line[200];
            s->prep_failed = 1;
            eai_pc_one_line(line, sizeof(line), out);
            snprintf(s->msg, sizeof(s->msg), GV_MSG(GVS_M_SNAPSHOT_BAD), line[0] ? line : "copying its /tmp failed");
        }
    }
}

static void poll_arm(struct gv_session *s);

static void prepare_done(void *arg)
{
    struct gv_session *s = arg;
    struct gv *g = s->g;
    if (s->prep_failed || g->destroying || s->state != GVS_BOOTING) {
        ses_kill(s, NULL);
        gv_release(g);
        return;
    }
    if (s->restore[0]) {
        /* a fork: `runsc restore` of the snapshot's image into this bundle
         * and container id (attached, as a resume), ready once running */
        char root[PATH_MAX + 16], plat[64], img[PATH_MAX + 32];
        snprintf(root, sizeof(root), "--root=%s", g->state_dir);
        snprintf(plat, sizeof(plat), "--platform=%s", g->platform);
        snprintf(img, sizeof(img), "--image-path=%s/ckpt", s->restore);
        char *rargv[] = {g->runsc, root, "--network=none", plat, "restore", img, "--bundle", s->sbx.b.dir,
                         s->sbx.b.cid, NULL};
        /* with network: gVisor's stack restored in the fork's own namespace
         * (config.json names it); the stack takes that namespace's
         * interface, address and routes at restore */
        char *nrargv[] = {GV_UNSHARE, "-m", "--propagation", "private", "/bin/sh", "-c", GV_NET_WORKAROUND_SH, "sh",
                          g->runsc, root, "--network=sandbox", plat, "restore", img, "--bundle", s->sbx.b.dir,
                          s->sbx.b.cid, NULL};
        char **ruse = rargv;
        if (s->netns[0])
            ruse = g->net_state == 2 ? nrargv : nrargv + 8;
        s->sbx.run = eai_pc_child_spawn(g->host->base, g, ruse, -1, -1, -1, 0, 0, run_done, s);
        if (!s->sbx.run) {
            ses_kill(s, "cannot spawn runsc restore");
            gv_release(g);
            return;
        }
        s->sbx.run_spawned = 1;
        s->restoring = 1;
        s->polls = 0;
        poll_arm(s);
        gv_release(g);
        return;
    }
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0) {
        ses_kill(s, "pipe");
        gv_release(g);
        return;
    }
    fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
    char root[PATH_MAX + 16], plat[64];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    snprintf(plat, sizeof(plat), "--platform=%s", g->platform);
    char *argv[] = {g->runsc, root, "--network=none", plat, "run", "--bundle", s->sbx.b.dir, s->sbx.b.cid, NULL};
    /* granted egress: gVisor's netstack in core's namespace (config.json),
     * as an execution's (gvisor_exec.c) */
    char *net_argv[] = {GV_UNSHARE, "-m", "--propagation", "private", "/bin/sh", "-c", GV_NET_WORKAROUND_SH, "sh",
                        g->runsc, root, "--network=sandbox", plat, "run", "--bundle", s->sbx.b.dir, s->sbx.b.cid, NULL};
    char **use = argv;
    if (s->netns[0])
        use = g->net_state == 2 ? net_argv : net_argv + 8;
    s->sbx.run = eai_pc_child_spawn(g->host->base, g, use, -1, out[1], -1, 0, 0, run_done, s);
    close(out[1]);
    s->rd_fd = out[0];
    if (!s->sbx.run) {
        ses_kill(s, "cannot spawn runsc");
        gv_release(g);
        return;
    }
    s->sbx.run_spawned = 1;
    s->rd_ev = event_new(g->host->base, s->rd_fd, EV_READ | EV_PERSIST, on_ready, s);
    s->sbx.ev_timer = evtimer_new(g->host->base, on_boot_timeout, s);
    struct timeval tv = {GV_SES_BOOT_TIMEOUT_MS / 1000, 0};
    if (!s->rd_ev || !s->sbx.ev_timer || event_add(s->rd_ev, NULL) < 0 || evtimer_add(s->sbx.ev_timer, &tv) < 0)
        ses_kill(s, "out of memory");
    gv_release(g);
}

static void ses_prepare(struct gv_session *s)
{
    const struct eai_host *h = s->g->host;
    s->g->inflight++; /* held by the prepare step */
    s->sbx.b.launcher = s->g->launcher_state == 1; /* the supervisor, if the image can bind it */
    if (h->work_submit(h, prepare_work, prepare_done, s) < 0) {
        s->prep_failed = 1;
        snprintf(s->msg, sizeof(s->msg), "worker queue full");
        prepare_done(s);
    }
}

int gv_session_create(void *self, const struct eai_iso_session *spec, const struct eai_iso_session_callbacks *cb,
                      void *cb_arg, struct eai_error **err)
{
    struct gv *g = self;
    const struct eai_host *h = g->host;
    char cid[96];
    if (!spec || !cb || ses_cid(spec->id, cid, sizeof(cid)) < 0)
        return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "gvisor: bad session id");
    if (g->probe_state < 0)
        return eai_host_error_set(h, err, EAI_E_SANDBOX_UNAVAILABLE, "gvisor not ready: %s", g->reason);
    if (g->destroying || ses_find(g, spec->id))
        return eai_host_error_set(h, err, EAI_E_CONFLICT, "gvisor: session %s exists", spec->id);
    struct gv_session *s = calloc(1, sizeof(*s));
    if (!s)
        return eai_host_error_set(h, err, EAI_E_INTERNAL, "gvisor: out of memory");
    if (!spec->image || h->image_rootfs(h, spec->image, s->sbx.b.rootfs, sizeof(s->sbx.b.rootfs)) < 0) {
        free(s);
        return eai_host_error_set(h, err, EAI_E_IMAGE_MISSING, GV_MSG(GVS_M_NO_IMAGE),
                                  spec->image ? spec->image : "(none)");
    }
    s->g = g;
    s->sbx.g = g;
    s->sbx.clean_work = ses_clean_work;
    s->sbx.clean_done = ses_clean_done;
    snprintf(s->id, sizeof(s->id), "%s", spec->id);
    s->spec = *spec;
    s->spec.id = s->spec.tenant_id = s->spec.profile = s->spec.runtime_class = s->spec.image = NULL;
    s->spec.netns_path = s->spec.dns_server = NULL;
    s->spec.volumes = NULL;
    s->spec.nvolumes = 0;
    if (spec->size >= EAI_ISO_SESSION_SIZE_1_5 && spec->volumes) {
        for (size_t i = 0; i < spec->nvolumes; i++) {
            if (i >= GV_MAX_VOLUMES || !spec->volumes[i].host_path || !spec->volumes[i].path ||
                snprintf(s->vhost[i], sizeof(s->vhost[i]), "%s", spec->volumes[i].host_path) >=
                    (int)sizeof(s->vhost[i]) ||
                snprintf(s->vpath[i], sizeof(s->vpath[i]), "%s", spec->volumes[i].path) >= (int)sizeof(s->vpath[i])) {
                free(s);
                return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "gvisor: too many or too long volumes");
            }
            s->vols[i].host_path = s->vhost[i];
            s->vols[i].path = s->vpath[i];
            s->vols[i].read_only = spec->volumes[i].read_only;
        }
        s->nvols = spec->nvolumes;
    }
    if (s->spec.max_concurrent < 1)
        s->spec.max_concurrent = 1;
    if (spec->size >= EAI_ISO_SESSION_SIZE_1_4 && spec->netns_path) {
        /* granted egress: booted in core's namespace, as an execution */
        if (g->net_state <= 0 || !spec->dns_server ||
            snprintf(s->netns, sizeof(s->netns), "%s", spec->netns_path) >= (int)sizeof(s->netns) ||
            snprintf(s->dns, sizeof(s->dns), "%s", spec->dns_server) >= (int)sizeof(s->dns)) {
            free(s);
            return eai_host_error_set(h, err, EAI_E_EGRESS_UNSUPPORTED,
                                      "gvisor: this host cannot run a sandbox in a network namespace");
        }
    }
    if (spec->size >= EAI_ISO_SESSION_SIZE_1_5 && spec->restore_from) {
        if (spec->restore_from[0] != '/' ||
            snprintf(s->restore, sizeof(s->restore), "%s", spec->restore_from) >= (int)sizeof(s->restore)) {
            free(s);
            return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "gvisor: bad snapshot directory");
        }
    }
    s->spec.restore_from = NULL;
    memcpy(&s->cb, cb, cb->size < sizeof(s->cb) ? cb->size : sizeof(s->cb));
    s->cb_arg = cb_arg;
    s->rd_fd = -1;
    s->state = GVS_BOOTING;
    snprintf(s->sbx.b.cid, sizeof(s->sbx.b.cid), "%s", cid);
    snprintf(s->sbx.b.dir, sizeof(s->sbx.b.dir), "%s/%s", g->work_dir, s->sbx.b.cid);
    snprintf(s->sbx.b.cgpath, sizeof(s->sbx.b.cgpath), "%s/%s", g->cg_parent, s->sbx.b.cid);
    s->sbx.b.uid = g->uid;
    s->sbx.b.cg_v2 = g->cg_v2;
    s->next = g->sessions;
    g->sessions = s;
    g->inflight++; /* held by the session until ses_clean_done */
    /* never during the first probe or the start-up sweep (it would take
     * the sandbox for a leftover): booted by gv_sessions_unpark then */
    s->parked = !gv_ready_gate(g) || g->launcher_state == 0; /* and the launcher installed */
    if (!s->parked)
        ses_prepare(s);
    return 0;
}

void gv_sessions_unpark(struct gv *g)
{
    for (struct gv_session *s = g->sessions, *n; s; s = n) {
        n = s->next;
        if (!s->parked || s->state != GVS_BOOTING)
            continue;
        if (g->probe_state < 0) {
            s->parked = 0;
            ses_kill(s, g->reason);
        } else if (gv_ready_gate(g) && g->launcher_state != 0) {
            s->parked = 0;
            ses_prepare(s);
        }
    }
}

void gv_session_destroy(void *self, const char *id)
{
    struct gv *g = self;
    struct gv_session *s = ses_find(g, id);
    if (!s)
        return;
    s->destroyed = 1;
    ses_kill(s, NULL);
}

int gv_session_busy(void *self, const char *id)
{
    struct gv *g = self;
    struct gv_session *s = ses_find(g, id);
    return s ? s->running + s->waiting : 0;
}

/* ------------------------------------------------------------ executions in it */

int gv_session_hold(struct gv *g, const char *id, int *waiting, char *why, size_t whylen)
{
    struct gv_session *s = ses_find(g, id);
    if (s && (s->state == GVS_PAUSING || s->state == GVS_PAUSED || s->state == GVS_RESUMING ||
              s->state == GVS_SNAPSHOT)) {
        /* waits for the resume (core asked for it, or refused the call) */
        if (!*waiting)
            s->waiting++;
        *waiting = 1;
        return 1;
    }
    if (!s || s->state != GVS_READY) {
        if (s && *waiting)
            s->waiting--;
        *waiting = 0;
        snprintf(why, whylen, "the session %s has ended", id);
        return -1;
    }
    if (s->running >= s->spec.max_concurrent) {
        if (!*waiting)
            s->waiting++;
        *waiting = 1;
        return 1;
    }
    if (*waiting)
        s->waiting--;
    *waiting = 0;
    s->running++;
    return 0;
}

void gv_session_unwait(struct gv *g, const char *id, int *waiting)
{
    struct gv_session *s = ses_find(g, id);
    if (s && *waiting)
        s->waiting--;
    *waiting = 0;
}

const struct eai_pc_bundle *gv_session_bundle(struct gv *g, const char *id)
{
    struct gv_session *s = ses_find(g, id);
    return s && s->state == GVS_READY ? &s->sbx.b : NULL;
}

void gv_session_exec_done(struct gv *g, const char *id)
{
    struct gv_session *s = ses_find(g, id);
    if (s && s->running > 0)
        s->running--;
    if (!g->destroying)
        eai_pc_runner_retry_held(g->runner);
}

/* Shutdown: stop every session's sandbox now (blocking), in the two
 * passes of gv_pool_destroy_all. */
void gv_session_destroy_all(struct gv *g, int kill_only)
{
    for (struct gv_session *s = g->sessions; s; s = s->next) {
        if (!s->sbx.run || s->sbx.run_exited)
            continue;
        char root[PATH_MAX + 16];
        snprintf(root, sizeof(root), "--root=%s", g->state_dir);
        if (kill_only) {
            char *kill_argv[] = {g->runsc, root, "kill", s->sbx.b.cid, "KILL", NULL};
            eai_pc_run_sync(kill_argv, GV_RUNSC_TIMEOUT_MS, NULL, 0);
            kill(eai_pc_child_pid(s->sbx.run), SIGKILL);
        } else {
            char *del_argv[] = {g->runsc, root, "delete", "--force", s->sbx.b.cid, NULL};
            eai_pc_run_sync(del_argv, GV_DELETE_TIMEOUT_MS, NULL, 0);
        }
        s->state = GVS_DYING;
        s->sbx.dying = 1;
    }
}

/* ------------------------------------------------------------ pause and resume */

/* A runsc helper of the session with its own callback (counted in helpers). */
static int spawn_cb(struct gv_session *s, char **argv, int64_t timeout_ms, eai_pc_child_done_fn cb)
{
    if (!eai_pc_child_spawn(s->g->host->base, s->g, argv, -1, -1, -1, 1, timeout_ms, cb, s))
        return -1;
    s->sbx.helpers++;
    return 0;
}

static void paused(struct gv_session *s, const char *err)
{
    const struct eai_host *h = s->g->host;
    if (s->g->destroying || !s->cb.on_paused)
        return;
    struct eai_error *e = err ? h->error_new(EAI_E_SANDBOX_FAILED, 0, "%s", err) : NULL;
    s->cb.on_paused(s->cb_arg, e);
    if (e)
        h->error_free(e);
}

static void resumed(struct gv_session *s, const char *err)
{
    const struct eai_host *h = s->g->host;
    if (err) {
        if (s->ev_poll)
            event_del(s->ev_poll);
        ses_kill(s, err);
    } else {
        s->state = GVS_READY;
        s->ckpt = 0;
        if (s->kept) { /* running again: a crash from now on is swept as any */
            char mark[PATH_MAX + 16];
            snprintf(mark, sizeof(mark), "%s/" GV_KEPT_MARK, s->sbx.b.dir);
            unlink(mark);
            s->kept = 0;
        }
        /* the checkpoint image is not kept once the sandbox runs again (issue
         * 36: a 302 MiB image stayed on the data disk for the session's life);
         * what the restored sandbox still maps stays readable until it lets go */
        char img[PATH_MAX + 16];
        snprintf(img, sizeof(img), "%s/ckpt", s->sbx.b.dir);
        char *argv[] = {"/bin/rm", "-rf", "--", img, NULL};
        if (eai_pc_child_spawn(h->base, s->g, argv, -1, -1, -1, 1, GV_RUNSC_TIMEOUT_MS, gv_sbx_helper_done, &s->sbx))
            s->sbx.helpers++;
        else
            h->log(h, GV_COMPONENT, EAI_LOG_WARN, "session %s: cannot remove its checkpoint image", s->id);
    }
    if (!s->g->destroying && s->cb.on_resumed) {
        struct eai_error *e = err ? h->error_new(EAI_E_SANDBOX_FAILED, 0, "%s", err) : NULL;
        s->cb.on_resumed(s->cb_arg, e);
        if (e)
            h->error_free(e);
    }
    if (!err && !s->g->destroying)
        eai_pc_runner_retry_held(s->g->runner);
}

static void del_done(void *arg, int status, const char *out, size_t outlen)
{
    struct gv_session *s = arg;
    s->sbx.helpers--;
    if (s->state != GVS_PAUSING) {
        gv_sbx_maybe_cleanup(&s->sbx);
        return;
    }
    s->state = GVS_PAUSED;
    paused(s, NULL);
}

/* Checkpointed and its run ended: delete the stopped container (restore
 * makes it anew under the same name). */
static void pause_finish(struct gv_session *s)
{
    char root[PATH_MAX + 16];
    snprintf(root, sizeof(root), "--root=%s", s->g->state_dir);
    char *argv[] = {s->g->runsc, root, "delete", "--force", s->sbx.b.cid, NULL};
    if (spawn_cb(s, argv, GV_DELETE_TIMEOUT_MS, del_done) < 0) {
        paused(s, "cannot spawn runsc delete");
        ses_kill(s, GV_MSG(GVS_M_PAUSE_FAILED));
    }
}

static void ckpt_done(void *arg, int status, const char *out, size_t outlen)
{
    struct gv_session *s = arg;
    s->sbx.helpers--;
    if (s->state != GVS_PAUSING) {
        gv_sbx_maybe_cleanup(&s->sbx);
        return;
    }
    if (status != 0) {
        char m[300];
        snprintf(m, sizeof(m), GV_MSG(GVS_M_CHECKPOINT_FAILED), out ? out : "");
        s->g->host->log(s->g->host, GV_COMPONENT, EAI_LOG_WARN, "session %s: %s", s->id, m);
        paused(s, m);
        if (s->sbx.run_exited) {
            ses_kill(s, GV_MSG(GVS_M_LOST_PAUSING));
        } else {
            s->state = GVS_READY;
            eai_pc_runner_retry_held(s->g->runner);
        }
        return;
    }
    s->ckpt_ok = 1;
    if (s->sbx.run_exited)
        pause_finish(s);
    /* else: run_done follows (the checkpoint stops the sandbox) */
}

int gv_session_pause(void *self, const char *id, struct eai_error **err)
{
    struct gv *g = self;
    struct gv_session *s = ses_find(g, id);
    if (!s)
        return eai_host_error_set(g->host, err, EAI_E_NOT_FOUND, "%s", GV_MSG(GVS_M_NO_SESSION));
    if (s->state != GVS_READY)
        return eai_host_error_set(g->host, err, EAI_E_CONFLICT, "%s", GV_MSG(GVS_M_NOT_RUNNING));
    if (s->running || s->waiting)
        return eai_host_error_set(g->host, err, EAI_E_CONFLICT, "%s", GV_MSG(GVS_M_BUSY));
    if (s->netns[0])
        return eai_host_error_set(g->host, err, EAI_E_CONFLICT, "%s", GV_MSG(GVS_M_EGRESS_NO_PAUSE));
    char root[PATH_MAX + 16], img[PATH_MAX + 32];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    snprintf(img, sizeof(img), "%s/ckpt", s->sbx.b.dir);
    /* the image of an earlier pause goes first (runsc will not overwrite it) */
    char *argv[] = {"/bin/sh", "-c", "rm -rf -- \"$2\" && exec \"$0\" \"$1\" checkpoint --image-path=\"$2\" \"$3\"",
                    g->runsc, root, img, s->sbx.b.cid, NULL};
    if (spawn_cb(s, argv, GV_SES_CKPT_TIMEOUT_MS, ckpt_done) < 0)
        return eai_host_error_set(g->host, err, EAI_E_SANDBOX_FAILED, "cannot spawn runsc checkpoint");
    s->state = GVS_PAUSING;
    s->ckpt = 1;
    s->ckpt_ok = 0;
    return 0;
}

static void state_done(void *arg, int status, const char *out, size_t outlen)
{
    struct gv_session *s = arg;
    s->sbx.helpers--;
    if (s->state == GVS_BOOTING && s->restoring) { /* a fork */
        if (status == 0 && out && strstr(out, "\"running\"")) {
            s->restoring = 0;
            s->state = GVS_READY;
            s->ready_reported = 1;
            if (s->cb.on_ready && !s->g->destroying)
                s->cb.on_ready(s->cb_arg, NULL);
            if (!s->g->destroying)
                eai_pc_runner_retry_held(s->g->runner);
        } else if (++s->polls >= GV_SES_RESTORE_POLLS) {
            ses_kill(s, GV_MSG(GVS_M_RESTORE_TIMEOUT));
        } else {
            poll_arm(s);
        }
        return;
    }
    if (s->state != GVS_RESUMING) {
        gv_sbx_maybe_cleanup(&s->sbx);
        return;
    }
    if (status == 0 && out && strstr(out, "\"running\"")) {
        resumed(s, NULL);
        return;
    }
    if (++s->polls >= GV_SES_RESTORE_POLLS) {
        resumed(s, GV_MSG(GVS_M_RESTORE_TIMEOUT));
        return;
    }
    poll_arm(s);
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    struct gv_session *s = arg;
    if (s->state != GVS_RESUMING && !(s->state == GVS_BOOTING && s->restoring))
        return;
    char root[PATH_MAX + 16];
    snprintf(root, sizeof(root), "--root=%s", s->g->state_dir);
    char *argv[] = {s->g->runsc, root, "state", s->sbx.b.cid, NULL};
    if (spawn_cb(s, argv, GV_RUNSC_TIMEOUT_MS, state_done) < 0)
        resumed(s, "cannot spawn runsc state");
}

static void poll_arm(struct gv_session *s)
{
    if (!s->ev_poll)
        s->ev_poll = evtimer_new(s->g->host->base, on_poll, s);
    struct timeval tv = {0, GV_SES_RESTORE_POLL_MS * 1000};
    if (!s->ev_poll || evtimer_add(s->ev_poll, &tv) < 0)
        resumed(s, "out of memory");
}

int gv_session_resume(void *self, const char *id, struct eai_error **err)
{
    struct gv *g = self;
    struct gv_session *s = ses_find(g, id);
    if (!s)
        return eai_host_error_set(g->host, err, EAI_E_NOT_FOUND, "%s", GV_MSG(GVS_M_NO_SESSION));
    if (s->state != GVS_PAUSED || s->snap_done) /* (its saved state being copied: snapshot_paused) */
        return eai_host_error_set(g->host, err, EAI_E_CONFLICT, "%s", GV_MSG(GVS_M_NOT_PAUSED));
    char root[PATH_MAX + 16], plat[64], img[PATH_MAX + 32];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    snprintf(plat, sizeof(plat), "--platform=%s", g->platform);
    snprintf(img, sizeof(img), "--image-path=%s/ckpt", s->sbx.b.dir);
    char *argv[] = {g->runsc, root, "--network=none", plat, "restore", img, "--bundle", s->sbx.b.dir, s->sbx.b.cid, NULL};
    s->sbx.run = eai_pc_child_spawn(g->host->base, g, argv, -1, -1, -1, 0, 0, run_done, s);
    if (!s->sbx.run)
        return eai_host_error_set(g->host, err, EAI_E_SANDBOX_FAILED, "cannot spawn runsc restore");
    s->sbx.run_exited = 0;
    s->state = GVS_RESUMING;
    s->polls = 0;
    poll_arm(s);
    return 0;
}

/* ------------------------------------------------------------ snapshots (ABI 1.5) */

/* A snapshot script's last line: the directory's size in bytes. */
static int64_t script_size(const char *out, size_t outlen)
{
    const char *p = out ? out + outlen : NULL;
    while (p && p > out && (p[-1] == '\n' || p[-1] == ' '))
        p--;
    while (p && p > out && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return p ? strtoll(p, NULL, 10) : 0;
}

static void snap_done(void *arg, int status, const char *out, size_t outlen)
{
    struct gv_session *s = arg;
    struct gv *g = s->g;
    const struct eai_host *h = g->host;
    s->sbx.helpers--;
    void (*done)(void *, const struct eai_error *, int64_t) = s->snap_done;
    void *darg = s->snap_arg;
    s->snap_done = NULL;
    s->snap_arg = NULL;
    struct eai_error *e = NULL;
    int64_t size = 0;
    if (s->snap_paused) { /* a copy of a paused session's saved state: it stays paused */
        s->snap_paused = 0;
        if (s->state != GVS_PAUSED) {
            e = h->error_new(EAI_E_SANDBOX_FAILED, 0, "%s", GV_MSG(GVS_M_ENDED_SNAPSHOT));
        } else if (status == 0) {
            size = script_size(out, outlen);
        } else {
            char m[300], line[220];
            eai_pc_one_line(line, sizeof(line), out ? out : "");
            snprintf(m, sizeof(m), GV_MSG(GVS_M_SNAPSHOT_FAILED), line);
            e = h->error_new(EAI_E_SANDBOX_FAILED, 0, "%s", m);
        }
        if (done && !g->destroying)
            done(darg, e, size);
        if (e)
            h->error_free(e);
        if (s->state != GVS_PAUSED)
            gv_sbx_maybe_cleanup(&s->sbx);
        return;
    }
    if (s->state != GVS_SNAPSHOT) { /* ended meanwhile */
        e = h->error_new(EAI_E_SANDBOX_FAILED, 0, "%s", GV_MSG(GVS_M_ENDED_SNAPSHOT));
    } else if (status == 0) {
        size = script_size(out, outlen);
        s->state = GVS_READY;
    } else {
        char m[300], line[220];
        eai_pc_one_line(line, sizeof(line), out ? out : "");
        snprintf(m, sizeof(m), GV_MSG(GVS_M_SNAPSHOT_FAILED), line);
        h->log(h, GV_COMPONENT, EAI_LOG_WARN, "session %s: %s (status %d)", s->id, m, status);
        e = h->error_new(EAI_E_SANDBOX_FAILED, 0, "%s", m);
        /* 90: not paused (it runs on); 1: paused and resumed; else (91: the
         * resume failed, or killed by the timeout) it may be stuck paused */
        if (WIFEXITED(status) && (WEXITSTATUS(status) == 90 || WEXITSTATUS(status) == 1))
            s->state = GVS_READY;
        else
            ses_kill(s, GV_MSG(GVS_M_LOST_SNAPSHOT));
    }
    if (done && !g->destroying)
        done(darg, e, size);
    if (e)
        h->error_free(e);
    if (s->state == GVS_READY) {
        if (!g->destroying)
            eai_pc_runner_retry_held(g->runner);
    } else {
        gv_sbx_maybe_cleanup(&s->sbx);
    }
}

/* A snapshot of a paused session (what core parks in sessions.handoff_dir,
 * docs/sessions.md "Any replica"): its saved state copied as a snapshot
 * directory (the checkpoint image, /tmp, the metadata), nothing checkpointed
 * again; it stays paused.  One child process (sh), never the loop. */
static int snapshot_paused(struct gv_session *s, const char *dir,
                           void (*done)(void *arg, const struct eai_error *err, int64_t size_bytes), void *arg,
                           struct eai_error **err)
{
    struct gv *g = s->g;
    char img[PATH_MAX + 16], tmp[PATH_MAX + 16];
    snprintf(img, sizeof(img), "%s/ckpt", s->sbx.b.dir);
    snprintf(tmp, sizeof(tmp), "%s/tmp", s->sbx.b.dir);
    static const char script[] =
        "{ mkdir -m 0700 -- \"$0\" && cp -a -- \"$1\" \"$0/ckpt\" &&\n"
        "  mkdir -- \"$0/tmp\" && cp -a -- \"$2/.\" \"$0/tmp/\" &&\n"
        "  printf 'launcher=%s\\n' \"$3\" > \"$0/" GV_SNAP_META "\"; } || { rm -rf -- \"$0\"; exit 1; }\n"
        "du -sb -- \"$0\" | cut -f1\n";
    char *argv[] = {"/bin/sh", "-c", (char *)script, (char *)dir, img, tmp, s->sbx.b.launcher ? "1" : "0", NULL};
    if (spawn_cb(s, argv, GV_SES_CKPT_TIMEOUT_MS, snap_done) < 0)
        return eai_host_error_set(g->host, err, EAI_E_SANDBOX_FAILED, "cannot spawn the snapshot");
    s->snap_paused = 1;
    s->snap_done = done;
    s->snap_arg = arg;
    return 0;
}

/* The date in runsc's version ("runsc version 0.0~20221219.0", "release-
 * 20240101.0", "v0.0.0-20260905035102-<commit>"): YYYYMMDD, or 0. */
static long runsc_date(const char *v)
{
    for (const char *p = v ? strstr(v, "20") : NULL; p; p = strstr(p + 1, "20")) {
        int n = 0;
        while (n < 8 && p[n] >= '0' && p[n] <= '9')
            n++;
        if (n == 8 && (p == v || p[-1] < '0' || p[-1] > '9')) {
            char d[9];
            memcpy(d, p, 8);
            d[8] = '\0';
            return strtol(d, NULL, 10);
        }
    }
    return 0;
}

/* `runsc checkpoint --leave-running` keeps the sandbox (its `runsc run`)
 * running on the runsc of 2026; on Debian 12's (20221219) it destroys it
 * and restores a new one behind our back (the attached run ends: the
 * session was lost).  Snapshots need a runsc of 2024 or later (checked:
 * 20221219 no, 20260905 yes; between, not measured). */
#define GV_SNAPSHOT_MIN_DATE 20240101L

/* A snapshot of a running session (docs/sessions.md "Snapshots and forks"):
 * `runsc pause` (nothing in it moves), `runsc checkpoint --leave-running`
 * of the paused sandbox into dir/ckpt (it stays paused), a copy of its /tmp
 * into dir/tmp (consistent with the image: taken while paused), the
 * metadata, `runsc resume`; then the size of dir.  One child process
 * (sh), never the loop.  Executions posted meanwhile wait (the hold). */
int gv_session_snapshot(void *self, const char *id, const char *dir,
                        void (*done)(void *arg, const struct eai_error *err, int64_t size_bytes), void *arg,
                        struct eai_error **err)
{
    struct gv *g = self;
    struct gv_session *s = ses_find(g, id);
    if (!s)
        return eai_host_error_set(g->host, err, EAI_E_NOT_FOUND, "%s", GV_MSG(GVS_M_NO_SESSION));
    if (!dir || dir[0] != '/' || !done)
        return eai_host_error_set(g->host, err, EAI_E_VALIDATION_FAILED, "gvisor: bad snapshot directory");
    if (s->state == GVS_PAUSED && s->ckpt_ok && !s->snap_done)
        return snapshot_paused(s, dir, done, arg, err);
    if (s->state != GVS_READY)
        return eai_host_error_set(g->host, err, EAI_E_CONFLICT, "%s", GV_MSG(GVS_M_NOT_RUNNING));
    if (s->running || s->waiting)
        return eai_host_error_set(g->host, err, EAI_E_CONFLICT, "%s", GV_MSG(GVS_M_BUSY));
    if (runsc_date(g->version) < GV_SNAPSHOT_MIN_DATE)
        return eai_host_error_set(g->host, err, EAI_E_SNAPSHOTS_UNSUPPORTED, GV_MSG(GVS_M_SNAPSHOT_OLD_RUNSC),
                                  g->version);
    char root[PATH_MAX + 16], tmp[PATH_MAX + 16];
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    snprintf(tmp, sizeof(tmp), "%s/tmp", s->sbx.b.dir);
    static const char script[] =
        "\"$0\" \"$1\" pause \"$2\" || exit 90\n"
        "rc=0\n"
        "{ mkdir -m 0700 -- \"$3\" && \"$0\" \"$1\" checkpoint --leave-running --image-path=\"$3/ckpt\" \"$2\" &&\n"
        "  mkdir -- \"$3/tmp\" && cp -a -- \"$4/.\" \"$3/tmp/\" &&\n"
        "  printf 'launcher=%s\\nnetwork=%s\\n' \"$5\" \"$6\" > \"$3/" GV_SNAP_META "\"; } || rc=1\n"
        "\"$0\" \"$1\" resume \"$2\" || rc=91\n"
        "if [ $rc != 0 ]; then rm -rf -- \"$3\"; exit $rc; fi\n"
        "du -sb -- \"$3\" | cut -f1\n";
    char *argv[] = {"/bin/sh", "-c", (char *)script, g->runsc, root, s->sbx.b.cid, (char *)dir, tmp,
                    s->sbx.b.launcher ? "1" : "0", s->netns[0] ? "1" : "0", NULL};
    if (spawn_cb(s, argv, GV_SES_CKPT_TIMEOUT_MS, snap_done) < 0)
        return eai_host_error_set(g->host, err, EAI_E_SANDBOX_FAILED, "cannot spawn the snapshot");
    s->state = GVS_SNAPSHOT;
    s->snap_done = done;
    s->snap_arg = arg;
    return 0;
}

/* ------------------------------------------------------------ files (worker) */

/* A DELETE of the files API, done by the sandbox's own kernel (`runsc exec`
 * of `/.eai/launcher --unlink`, as the sandbox's user): the space of a file
 * the sandbox holds is given back at once, which an unlink on the host does
 * not do (gVisor keeps its descriptor).  0, -1 with errno (ENOENT,
 * ENOTEMPTY), -2 when the sandbox has no launcher (the host deletes). */
static int ses_unlink_inside(struct gv *g, const char *cid, const char *path)
{
    char root[PATH_MAX + 16], user[32], launcher[PATH_MAX + 32];
    struct stat st;
    snprintf(launcher, sizeof(launcher), "%s/" GV_LAUNCHER_FILE, g->work_dir);
    if (stat(launcher, &st) < 0)
        return -2;
    snprintf(root, sizeof(root), "--root=%s", g->state_dir);
    snprintf(user, sizeof(user), "%u:%u", g->uid, g->uid);
    char *argv[] = {g->runsc, root, "exec", "--user", user, (char *)cid, GV_LAUNCHER_PATH, "--unlink", (char *)path,
                    NULL};
    int status = eai_pc_run_sync(argv, GV_RUNSC_TIMEOUT_MS, NULL, 0);
    if (status < 0 || !WIFEXITED(status))
        return -2;
    switch (WEXITSTATUS(status)) {
    case 0:
        return 0;
    case 2:
        errno = ENOENT;
        return -1;
    case 3:
        errno = ENOTEMPTY;
        return -1;
    case 1:
        errno = EINVAL;
        return -1;
    default: /* 127: no launcher in the image, or runsc could not exec */
        return -2;
    }
}

int gv_session_file(void *self, const char *id, enum eai_iso_file_op op, const char *path,
                    const unsigned char *data, size_t len, int64_t max, unsigned char **out, size_t *outlen,
                    json_t **list, struct eai_error **err)
{
    struct gv *g = self;
    const struct eai_host *h = g->host;
    char cid[96], dir[PATH_MAX + 100], msg[256] = "";
    struct stat st;
    /* The bundle is named after the session: no shared state is read here
     * (a worker thread).  Core checks the session is live first; a session
     * ending meanwhile makes the walk fail (not found). */
    if (ses_cid(id, cid, sizeof(cid)) < 0)
        return eai_host_error_set(h, err, EAI_E_NOT_FOUND, "%s", GV_MSG(GVS_M_NO_SESSION));
    snprintf(dir, sizeof(dir), "%s/%s", g->work_dir, cid);
    if (stat(dir, &st) < 0)
        return eai_host_error_set(h, err, EAI_E_NOT_FOUND, "%s", GV_MSG(GVS_M_NO_SESSION));
    int rc = -1;
    switch (op) {
    case EAI_ISO_FILE_PUT:
        if (!eai_pc_tmp_path_valid(path))
            return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "%s", GV_MSG(GVS_M_PATH_TMP));
        rc = eai_pc_tmp_put(dir, g->uid, path, data, len, msg, sizeof(msg));
        if (rc < 0 && (errno == ENOSPC || errno == EDQUOT))
            return eai_host_error_set(h, err, EAI_E_PAYLOAD_TOO_LARGE, "%s", GV_MSG(GVS_M_TMP_FULL));
        if (rc < 0 && (errno == ENOTDIR || errno == ELOOP || errno == ENOENT))
            /* a parent that is a file, or a link the sandbox made (never followed) */
            return eai_host_error_set(h, err, EAI_E_NOT_FOUND, "no such directory");
        if (rc < 0)
            return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "%s", msg);
        return 0;
    case EAI_ISO_FILE_GET:
        rc = eai_pc_tmp_get(dir, path, max, out, outlen);
        break;
    case EAI_ISO_FILE_DELETE:
        rc = ses_unlink_inside(g, cid, path);
        if (rc == -2)
            rc = eai_pc_tmp_delete(dir, path); /* no launcher in this sandbox: on the host */
        break;
    case EAI_ISO_FILE_LIST:
        rc = eai_pc_tmp_list(dir, path, GV_SES_LIST_MAX, list);
        break;
    default:
        errno = EINVAL;
    }
    if (rc == 0)
        return 0;
    if (errno == EFBIG)
        return eai_host_error_set(h, err, EAI_E_PAYLOAD_TOO_LARGE, GV_MSG(GVS_M_FILE_TOO_LARGE),
                                  (long long)max);
    if (errno == EINVAL)
        return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "%s", GV_MSG(GVS_M_PATH_TMP));
    if (errno == ENOTEMPTY)
        return eai_host_error_set(h, err, EAI_E_CONFLICT, "%s", GV_MSG(GVS_M_DIR_NOT_EMPTY));
    return eai_host_error_set(h, err, EAI_E_NOT_FOUND, "%s", GV_MSG(GVS_M_NO_FILE));
}

/* ------------------------------------------------------------ kept across a restart */

int gv_session_keep(void *self, const char *id, struct eai_error **err)
{
    struct gv *g = self;
    struct gv_session *s = ses_find(g, id);
    if (!s)
        return eai_host_error_set(g->host, err, EAI_E_NOT_FOUND, "%s", GV_MSG(GVS_M_NO_SESSION));
    if (s->state != GVS_PAUSED || !s->ckpt_ok)
        return eai_host_error_set(g->host, err, EAI_E_CONFLICT, "%s", GV_MSG(GVS_M_NOT_PAUSED));
    char mark[PATH_MAX + 16];
    snprintf(mark, sizeof(mark), "%s/" GV_KEPT_MARK, s->sbx.b.dir);
    /* a few bytes, at a stop: the loop serves nothing any more */
    int fd = open(mark, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    char line[64];
    int n = snprintf(line, sizeof(line), "launcher=%d\n", s->sbx.b.launcher ? 1 : 0);
    if (fd < 0 || write(fd, line, (size_t)n) != n || fsync(fd) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        unlink(mark);
        return eai_host_error_set(g->host, err, EAI_E_INTERNAL, "cannot write %s: %s", mark, strerror(e));
    }
    close(fd);
    s->kept = 1;
    return 0;
}

int gv_session_adopt(void *self, const struct eai_iso_session *spec, const struct eai_iso_session_callbacks *cb,
                     void *cb_arg, struct eai_error **err)
{
    struct gv *g = self;
    const struct eai_host *h = g->host;
    char cid[96];
    if (!spec || !cb || ses_cid(spec->id, cid, sizeof(cid)) < 0)
        return eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "gvisor: bad session id");
    if (g->destroying || ses_find(g, spec->id))
        return eai_host_error_set(h, err, EAI_E_CONFLICT, "gvisor: session %s exists", spec->id);
    char dir[PATH_MAX], mark[PATH_MAX + 16], img[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/%s", g->work_dir, cid);
    snprintf(mark, sizeof(mark), "%s/" GV_KEPT_MARK, dir);
    snprintf(img, sizeof(img), "%s/ckpt", dir);
    struct stat st;
    char line[64] = {0};
    int fd = open(mark, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n = fd >= 0 ? read(fd, line, sizeof(line) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0 || lstat(img, &st) < 0 || !S_ISDIR(st.st_mode))
        return eai_host_error_set(h, err, EAI_E_NOT_FOUND, "gvisor: no kept session %s", spec->id);
    struct gv_session *s = calloc(1, sizeof(*s));
    if (!s)
        return eai_host_error_set(h, err, EAI_E_INTERNAL, "gvisor: out of memory");
    if (!spec->image || h->image_rootfs(h, spec->image, s->sbx.b.rootfs, sizeof(s->sbx.b.rootfs)) < 0) {
        free(s);
        return eai_host_error_set(h, err, EAI_E_IMAGE_MISSING, GV_MSG(GVS_M_NO_IMAGE),
                                  spec->image ? spec->image : "(none)");
    }
    s->g = g;
    s->sbx.g = g;
    s->sbx.clean_work = ses_clean_work;
    s->sbx.clean_done = ses_clean_done;
    snprintf(s->id, sizeof(s->id), "%s", spec->id);
    s->spec = *spec;
    s->spec.id = s->spec.tenant_id = s->spec.profile = s->spec.runtime_class = s->spec.image = NULL;
    s->spec.volumes = NULL; /* core keeps no session with volumes across a restart */
    s->spec.nvolumes = 0;
    if (s->spec.max_concurrent < 1)
        s->spec.max_concurrent = 1;
    memcpy(&s->cb, cb, cb->size < sizeof(s->cb) ? cb->size : sizeof(s->cb));
    s->cb_arg = cb_arg;
    s->rd_fd = -1;
    s->state = GVS_PAUSED;
    s->ready_reported = 1; /* on_end is owed from now on */
    s->ckpt = s->ckpt_ok = 1;
    s->kept = 1;
    snprintf(s->sbx.b.cid, sizeof(s->sbx.b.cid), "%s", cid);
    snprintf(s->sbx.b.dir, sizeof(s->sbx.b.dir), "%s", dir);
    snprintf(s->sbx.b.cgpath, sizeof(s->sbx.b.cgpath), "%s/%s", g->cg_parent, cid);
    s->sbx.b.uid = g->uid;
    s->sbx.b.cg_v2 = g->cg_v2;
    s->sbx.b.mounted = 1;
    s->sbx.b.launcher = strstr(line, "launcher=1") != NULL;
    char cg[PATH_MAX];
    if (g->cg_v2)
        snprintf(cg, sizeof(cg), "/sys/fs/cgroup/%s", s->sbx.b.cgpath);
    else
        snprintf(cg, sizeof(cg), "/sys/fs/cgroup/memory/%s", s->sbx.b.cgpath);
    s->sbx.b.cg_made = access(cg, F_OK) == 0;
    s->next = g->sessions;
    g->sessions = s;
    g->inflight++; /* held by the session until ses_clean_done */
    h->log(h, GV_COMPONENT, EAI_LOG_INFO, "session %s adopted (paused, kept by an earlier process)", s->id);
    return 0;
}

struct drop_ctx {
    struct gv *g;
    char **keep;      /* cids adopted (not removed) */
    int nkeep, removed;
};

static void drop_work(void *arg)
{
    struct drop_ctx *c = arg;
    struct gv *g = c->g;
    DIR *d = opendir(g->work_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, GV_CID_PREFIX "ses-", strlen(GV_CID_PREFIX "ses-")) != 0)
            continue;
        int adopted = 0;
        for (int i = 0; i < c->nkeep && !adopted; i++)
            adopted = !strcmp(c->keep[i], e->d_name);
        char p[PATH_MAX + 300], mark[PATH_MAX + 320];
        snprintf(p, sizeof(p), "%s/%s", g->work_dir, e->d_name);
        snprintf(mark, sizeof(mark), "%s/" GV_KEPT_MARK, p);
        if (adopted || access(mark, F_OK) != 0)
            continue;
        gv_bundle_remove(p);
        char leaf[PATH_MAX + 300];
        snprintf(leaf, sizeof(leaf), "%s/%s", g->cg_parent, e->d_name);
        gv_cgroup_remove(leaf, g->cg_v2);
        c->removed++;
    }
    closedir(d);
}

static void drop_done(void *arg)
{
    struct drop_ctx *c = arg;
    if (c->removed && !c->g->destroying)
        c->g->host->log(c->g->host, GV_COMPONENT, EAI_LOG_INFO, "%d kept session(s) not adopted: removed",
                        c->removed);
    for (int i = 0; i < c->nkeep; i++)
        free(c->keep[i]);
    free(c->keep);
    struct gv *g = c->g;
    free(c);
    gv_release(g);
}

void gv_session_drop_kept(void *self)
{
    struct gv *g = self;
    struct drop_ctx *c = calloc(1, sizeof(*c));
    if (!c || g->destroying) {
        free(c);
        return;
    }
    c->g = g;
    int n = 0;
    for (struct gv_session *s = g->sessions; s; s = s->next)
        n++;
    c->keep = calloc((size_t)n + 1, sizeof(char *));
    for (struct gv_session *s = g->sessions; c->keep && s; s = s->next)
        if ((c->keep[c->nkeep] = strdup(s->sbx.b.cid)))
            c->nkeep++;
    if (!c->keep) {
        free(c);
        return;
    }
    g->inflight++;
    if (g->host->work_submit(g->host, drop_work, drop_done, c) < 0) {
        drop_work(c);
        drop_done(c);
    }
}

int gv_session_kept_dir(const char *bundle_dir)
{
    char mark[PATH_MAX + 16];
    snprintf(mark, sizeof(mark), "%s/" GV_KEPT_MARK, bundle_dir);
    return access(mark, F_OK) == 0;
}
