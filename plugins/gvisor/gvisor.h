/* gVisor isolation backend: internal declarations (docs/gvisor.md). */
#ifndef EAI_GVISOR_H
#define EAI_GVISOR_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <eai/isolation.h>

#include "eai_pc.h"

struct event;

#define GV_COMPONENT "gvisor"
#define GV_CID_PREFIX "eai-"
#define GV_RUNSC_TIMEOUT_MS 10000     /* version, kill */
#define GV_DELETE_TIMEOUT_MS 20000    /* delete --force is slow on a live sandbox */
#define GV_PROBE_TIMEOUT_MS 30000     /* one trivial sandbox */
#define GV_KILL_GRACE_MS 2000         /* runsc kill -> SIGKILL + delete --force */
#define GV_REPROBE_MS 30000           /* retry a failed probe */
#define GV_RUNTIME_LOG_MAX 8192       /* the tail of a run's runsc --log read at its end */

/* The launcher (gvisor_launcher.c, launcher/eai_launcher.c): installed as
 * <work_dir>/GV_LAUNCHER_FILE, bound read-only at GV_LAUNCHER_PATH in
 * pooled sandboxes, whose init it is. */
#define GV_LAUNCHER_FILE "launcher.bin"
#define GV_LAUNCHER_PATH "/.eai/launcher" /* its mount point is in the image (EAI_IMAGE_LAUNCHER_PATH) */
#define GV_LAUNCH_MAX (4 << 20)       /* launch file bytes (MAX_LAUNCH of the launcher) */
#define GV_LAUNCH_LINE_LEN 34         /* "/tmp/.eai-launch-<16 hex>\n" (LINE_LEN of the launcher) */
/* A session's supervisor (the launcher's --session mode): the abstract
 * socket inside the sandbox its executions (--run) connect to. */
#define GV_SES_SOCKET "eai-session"
#define GV_WARMUP_ARGS 16             /* config `warmup`: at most 16 arguments */
#define GV_WARMUP_ARG_BYTES 256
#define GV_WARMUP_MIN_MEMORY (128LL << 20) /* no warm-up in sandboxes with less memory */

/* --------------------------------------------------------------- children */

/* runsc children: eai_pc_child_spawn(g->host->base, g, ...) (plugins/common);
 * at shutdown eai_pc_child_reap_all(g) kills and reaps them (with
 * g->destroying set) and runs their callbacks. */

/* --------------------------------------------------------------- instance */

struct gv_pooled;

#define GV_POOL_SHAPES 4              /* distinct shapes kept warm (LRU) */
#define GV_POOL_REFILL_DELAY_MS 40    /* a run's end refills the pool this much later */

/* What a pooled sandbox must match to serve an execution. */
struct gv_shape {
    char rootfs[PATH_MAX];
    int64_t memory, cpu, disk, pids;
    int net;                     /* booted in a namespace of host->netns_take (egress) */
};

/* The plugin's metric families, described at create (gvisor.c,
 * gv_metric_descs: each name written there once). */
enum gv_metric { GV_M_TAKES = 0, GV_M_EGRESS_TAKES, GV_M_READY, GV_M_SIZE, GV_M_COUNT };

struct gv {
    const struct eai_host *host;
    char runsc[PATH_MAX];
    char state_dir[PATH_MAX];
    char work_dir[PATH_MAX];
    char platform[32];           /* the one runs use: the probe's choice under auto */
    char platform_cfg[32];       /* config `platform`: auto, or one runsc --platform */
    int plat_idx;                /* the candidate the probe is trying (gv_platform_candidate) */
    char plat_failed[200];       /* why the candidates before it failed */
    unsigned uid;
    int probe_enabled;
    char cg_parent[64];          /* "eai/<16 hex>": our cgroup subtree */
    int cg_v2;                   /* pure cgroup v2 host */

    int probe_state;             /* 0 pending, 1 ready, -1 failed */
    /* runsc --network=sandbox (granted egress, docs/gvisor.md): 0 not
     * probed, 1 works as is, 2 works with the /proc/sys/net workaround
     * (runsc takes any netns for the root one), -1 unavailable */
    int net_state;
    char net_reason[160];
    int sweeping;
    char version[128];
    char reason[256];
    struct event *reprobe_ev;
    char probe_cid[96];

    /* the launcher: 0 being installed, 1 installed at launcher_path, -1 off
     * or not installed (pooled sandboxes idle in sh + sleep, programs start
     * with runsc exec) */
    int launcher_state;
    char launcher_path[PATH_MAX];
    char warmup[GV_WARMUP_ARGS][GV_WARMUP_ARG_BYTES + 1]; /* the launcher's warm-up argv */
    int nwarmup;

    struct eai_metric *metrics[GV_M_COUNT]; /* handles of gv_metric_descs (host ABI >= 1.4) */
    int pool_size;               /* warm sandboxes per shape; 0 = off */
    int egress_pool;             /* config egress_pool: egress shapes too (docs/egress.md) */
    struct gv_pooled *pool;
    struct {
        struct gv_shape shape;
        int64_t last;
        int used, unpoolable;
    } shapes[GV_POOL_SHAPES];
    int64_t pool_backoff_until;  /* monotonic ms: no boots before */
    struct event *refill_ev;     /* gv_pool_refill_soon: the deferred refill */

    struct eai_pc_runner *runner; /* every live execution (plugins/common) */
    struct gv_session *sessions;  /* live sessions (gvisor_session.c) */
    unsigned long seq;
    int inflight;                /* work items and children referencing us */
    int destroying;
};

int gv_ready_gate(const struct gv *g); /* 1 when jobs may start now */
void gv_release(void *self);           /* drop one inflight; frees when destroying */

/* The network namespace core made for a job with granted egress (ABI 1.2
 * fields, read only when the job's size covers them), or NULL. */
static inline const char *gv_job_netns(const struct eai_iso_job *job)
{
    if (job->size < EAI_ISO_JOB_SIZE_1_2 || !job->netns_path || !job->netns_path[0])
        return NULL;
    return job->netns_path;
}
/* The volumes to bind into the job's sandbox (ABI 1.5, docs/volumes.md). */
#define GV_MAX_VOLUMES 8
static inline size_t gv_job_volumes(const struct eai_iso_job *job, const struct eai_iso_volume **v)
{
    *v = job->size >= EAI_ISO_JOB_SIZE_1_5 && job->volumes ? job->volumes : NULL;
    return *v ? job->nvolumes : 0;
}
static inline const char *gv_job_dns(const struct eai_iso_job *job)
{
    return gv_job_netns(job) ? job->dns_server : NULL;
}

/* The shell run by `unshare -m --propagation private` before runsc when
 * net_state is 2: /proc/sys/net hidden under an empty read-only tmpfs in
 * the private mount namespace of `runsc run` only. */
#define GV_UNSHARE "/usr/bin/unshare" /* util-linux */
#define GV_NET_WORKAROUND_SH "mount -t tmpfs -o ro,size=4k,mode=0555 eai-nonet /proc/sys/net && exec \"$@\""

/* gvisor_exec.c: the runner driven by runsc. */
struct eai_pc_runner *gv_runner_new(struct gv *g);

/* gvisor_pool.c */
/* A ready sandbox of shape s (now TAKEN by the caller) or NULL; (re)fills
 * the pool for s in the background either way. */
struct gv_pooled *gv_pool_take(struct gv *g, const struct gv_shape *s);
const struct eai_pc_bundle *gv_pooled_bundle(const struct gv_pooled *p);
/* The warm pool for egress (isolation op egress_claim): a ready pooled
 * sandbox of job's shape booted in a namespace of core's, now claimed; its
 * namespace token, which is core's from now on; or NULL. */
void *gv_egress_claim(void *self, const struct eai_iso_job *job);
/* The claimed sandbox booted in netns (start() of the job core bound to
 * it), now TAKEN; or NULL (it died meanwhile: the job boots cold there). */
struct gv_pooled *gv_pool_claimed(struct gv *g, const char *netns);
/* The execution is done with it: tear the sandbox down in the background. */
void gv_pool_release(struct gv_pooled *p);
/* A run ended (a CPU may be free): refill the recently used shapes. */
void gv_pool_refill_all(struct gv *g);
/* The same GV_POOL_REFILL_DELAY_MS from now (once), after the ended run's
 * result is stored and answered: a boot started at once competes with that
 * for the CPUs, and its spawn holds the loop while runsc execs. */
void gv_pool_refill_soon(struct gv *g);
/* 1 when p's init is the launcher. */
int gv_pooled_launcher(const struct gv_pooled *p);
/* Loop: start run's program in the taken sandbox p: line (the launch
 * file's path and "\n") on its control socket.  Hands over *pid (runsc
 * run, to kill), *out_fd and *err_fd (the program's output, now the run's)
 * and, when the job has input, *in_fd (for stdin, shut for writing at its
 * end; else -1).  The end comes through gv_launch_ended().  0 or -1. */
int gv_pool_launch(struct gv_pooled *p, struct eai_pc_run *run, const char *line, pid_t *pid, int *in_fd,
                   int *out_fd, int *err_fd);
/* gvisor_exec.c: how the launched program ended: how 'x' (the launcher
 * reported exit code `status`), 'f' (the launcher failed: text), 'r' (runsc
 * run ended first, wait status `status`). */
void gv_launch_ended(struct eai_pc_run *run, int how, int status, const char *text);

/* gvisor_launcher.c, worker: install the embedded launcher at
 * <work_dir>/GV_LAUNCHER_FILE (path: where).  0 or -1 with msg. */
int gv_launcher_install(const char *work_dir, char *path, size_t pathlen, char *msg, size_t msglen);
/* Worker: the launch file of job in the tmpfs of b; line: what the
 * launcher is sent ("/tmp/<name>\n").  0 or -1 with msg. */
int gv_launch_write(const struct eai_pc_bundle *b, const struct eai_iso_job *job, char *line, size_t linelen,
                    char *msg, size_t msglen);
void gv_pool_destroy_all(struct gv *g, int kill_only);

/* gvisor_session.c: the isolation ops of sessions, and what the driver
 * asks of them for an execution inside one (job->session_id). */
struct gv_session;
int gv_session_create(void *self, const struct eai_iso_session *spec, const struct eai_iso_session_callbacks *cb,
                      void *cb_arg, struct eai_error **err);
void gv_session_destroy(void *self, const char *id);
int gv_session_pause(void *self, const char *id, struct eai_error **err);
int gv_session_resume(void *self, const char *id, struct eai_error **err);
int gv_session_snapshot(void *self, const char *id, const char *dir,
                        void (*done)(void *arg, const struct eai_error *err, int64_t size_bytes), void *arg,
                        struct eai_error **err);
int gv_session_busy(void *self, const char *id);
int gv_session_file(void *self, const char *id, enum eai_iso_file_op op, const char *path,
                    const unsigned char *data, size_t len, int64_t max, unsigned char **out, size_t *outlen,
                    json_t **list, struct eai_error **err);
/* 0: the execution may run now (counted as running), 1: it waits (counted
 * as waiting, *waiting set), -1: the session is gone (why). */
int gv_session_hold(struct gv *g, const char *id, int *waiting, char *why, size_t whylen);
void gv_session_unwait(struct gv *g, const char *id, int *waiting);
/* The session's bundle while it is ready, else NULL. */
const struct eai_pc_bundle *gv_session_bundle(struct gv *g, const char *id);
/* An execution that ran in it ended: the next waiting one may go. */
void gv_session_exec_done(struct gv *g, const char *id);
void gv_session_destroy_all(struct gv *g, int kill_only);
/* The probe or the sweep ended: boot (or fail) the sessions waiting for them. */
void gv_sessions_unpark(struct gv *g);
/* Sessions kept across a restart of eaid (ABI 1.4; gvisor_session.c). */
int gv_session_keep(void *self, const char *id, struct eai_error **err);
int gv_session_adopt(void *self, const struct eai_iso_session *spec, const struct eai_iso_session_callbacks *cb,
                     void *cb_arg, struct eai_error **err);
void gv_session_drop_kept(void *self);
/* 1 when the bundle dir holds the kept mark (the sweep leaves it alone). */
int gv_session_kept_dir(const char *bundle_dir);

/* --------------------------------------------------------------- files */

/* Bundles: struct eai_pc_bundle (plugins/common/eai_pc.h). */

/* Worker: mkdir bundle, mount the size-capped tmpfs, write input files,
 * config.json, create the cgroup leaves; idle: a warm sandbox, booted at
 * the least CPU weight (gv_cgroup_weight gives it the default when an
 * execution takes it).  0 or -1 with msg. */
int gv_bundle_prepare(struct eai_pc_bundle *b, const struct eai_iso_job *job, int idle, char *msg, size_t msglen);
/* Worker: the job's OCI process object as a file (runsc exec --process);
 * supervised: its program started by the session's supervisor (its args
 * behind `/.eai/launcher --run GV_SES_SOCKET`). */
int gv_write_process(const struct eai_pc_bundle *b, const struct eai_iso_job *job, const char *path, int supervised,
                     char *msg, size_t msglen);
/* Worker: restart the leaf's peak memory counter (pooled sandboxes). */
void gv_cgroup_reset_peak(const struct eai_pc_bundle *b);
/* Worker: the leaf's CPU weight, the least (idle) or the default.  So a
 * warm sandbox booting or ending beside an execution yields the CPUs to it
 * (docs/gvisor.md "Warm pool"). */
void gv_cgroup_weight(const struct eai_pc_bundle *b, int idle);

void gv_cgroup_stats(const struct eai_pc_bundle *b, struct eai_pc_stats *st);
/* Worker: SIGKILL every process of the bundle's cgroup leaf (the sandbox
 * and whatever the program left running) and wait up to wait_ms
 * (GV_CGROUP_KILL_WAIT_MS) for them to go, so nothing writes into the
 * sandbox's /tmp while it is collected; 0: signal them and return. */
#define GV_CGROUP_KILL_WAIT_MS 1000
void gv_cgroup_kill(const struct eai_pc_bundle *b, int wait_ms);
/* Kill what is left in the leaves, remove them.  0 or -1. */
int gv_cgroup_remove(const char *cgpath, int cg_v2);

/* runsc's own log of each of its commands goes to <bundle>/runsc-<command>.log
 * (run, exec, boot, gofer): "--debug-log=..." into out. */
void gv_debug_log_arg(char *out, size_t len, const char *bundle_dir);
/* Worker, after the run: what runsc's logs say killed the sandbox from
 * outside (the sandbox or gofer process died: runsc then reports the program
 * as killed by SIGKILL), or NULL.  cmd: "run" or "exec". */
const char *gv_runtime_died(const char *bundle_dir, const char *cmd);

/* eai_pc_bundle_remove(dir), only when dir is one of our bundles. */
int gv_bundle_remove(const char *dir);

/* One long-lived runsc sandbox, the part its two owners share
 * (gvisor_sandbox.c): a warm-pool sandbox (struct gv_pooled, gvisor_pool.c)
 * and a session's (struct gv_session, gvisor_session.c) each embed one, as
 * every run is an eai_pc_run.  Its end, whoever ends it: `runsc kill`, the
 * grace timer's SIGKILL of `runsc run` and `runsc delete --force`, then,
 * once `runsc run` exited and no helper runs, clean_work and the removal of
 * the bundle and the cgroup leaves on a worker, and clean_done, the owner's
 * last step (unlink, callbacks, free), on the loop.  Loop thread. */
struct gv_sbx {
    struct gv *g;
    struct eai_pc_bundle b;
    struct eai_pc_child *run;          /* `runsc run`, while the sandbox lives */
    int run_spawned, run_exited;
    int helpers;                       /* runsc kill / delete, rm: children still running */
    int dying;                         /* the owner is ending it (gv_sbx_stop) */
    int cleaning;                      /* the worker's removal is under way */
    struct event *ev_timer;            /* the owner's boot timeout, then the kill grace */
    void (*clean_work)(struct gv_sbx *x); /* worker, before the bundle goes (may be NULL) */
    void (*clean_done)(struct gv_sbx *x); /* loop, last */
};
/* The owner ends it: `runsc kill` (unless no_kill: the sandbox ends by
 * itself), the grace timer, then gv_sbx_maybe_cleanup.  Once. */
void gv_sbx_stop(struct gv_sbx *x, int no_kill);
/* A runsc helper: `kill <cid> KILL` (del 0) or `delete --force <cid>` (del 1). */
void gv_sbx_helper(struct gv_sbx *x, int del);
/* The done callback of a helper child whose arg is x (counted in helpers). */
void gv_sbx_helper_done(void *arg, int status, const char *out, size_t outlen);
/* Removal and clean_done when it is dying and nothing of it runs any more. */
void gv_sbx_maybe_cleanup(struct gv_sbx *x);
/* The owner's struct from its embedded gv_sbx. */
#define GV_SBX_OWNER(x, type, member) ((type *)(void *)((char *)(x) - offsetof(type, member)))

/* Describe the families of enum gv_metric (create): 0, or -1 + *err when
 * the host refuses one.  A host older than ABI 1.4 has no metric_describe:
 * updates then go by name through metric_add / metric_set. */
int gv_metrics_describe(struct gv *g, struct eai_error **err);
/* Update family m: a counter adds v, a gauge is set to v; value is the
 * value of its one label (result), NULL for the gauges. */
void gv_metric(struct gv *g, enum gv_metric m, const char *value, double v);

/* The plugin's translated messages (descriptor.messages, gvisor_session.c):
 * GV_MSG(GVS_M_...) is the English printf format of one. */
enum gvs_message {
    GVS_M_NO_SESSION = 0,
    GVS_M_NOT_RUNNING,
    GVS_M_BUSY,
    GVS_M_NOT_PAUSED,
    GVS_M_PATH_TMP,
    GVS_M_FILE_TOO_LARGE,
    GVS_M_DIR_NOT_EMPTY,
    GVS_M_NO_FILE,
    GVS_M_TMP_FULL,
    GVS_M_NO_IMAGE,
    GVS_M_BOOT_TIMEOUT,
    GVS_M_ENDED_BOOTING,
    GVS_M_ENDED_OWN,
    GVS_M_LOST_PAUSING,
    GVS_M_RESTORE_TIMEOUT,
    GVS_M_RESTORE_ENDED,
    GVS_M_PAUSE_FAILED,
    GVS_M_CHECKPOINT_FAILED,
    GVS_M_EGRESS_NO_PAUSE,
    GVS_M_SNAPSHOT_FAILED,
    GVS_M_LOST_SNAPSHOT,
    GVS_M_SNAPSHOT_BAD,
    GVS_M_ENDED_SNAPSHOT,
    GVS_M_SNAPSHOT_OLD_RUNSC,
    GVS_M_COUNT
};
extern const struct eai_message gv_messages[];
#define GV_MSG(m) (gv_messages[(m)].en)

#endif
