/* gVisor isolation backend: internal declarations (docs/gvisor.md). */
#ifndef EAI_GVISOR_H
#define EAI_GVISOR_H

#include <limits.h>
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

/* --------------------------------------------------------------- children */

/* runsc children: eai_pc_child_spawn(g->host->base, g, ...) (plugins/common);
 * at shutdown eai_pc_child_reap_all(g) kills and reaps them (with
 * g->destroying set) and runs their callbacks. */

/* --------------------------------------------------------------- instance */

struct gv_exec;
struct gv_pooled;

#define GV_POOL_SHAPES 4              /* distinct shapes kept warm (LRU) */

/* What a pooled sandbox must match to serve an execution. */
struct gv_shape {
    char rootfs[PATH_MAX];
    int64_t memory, cpu, disk, pids;
};

struct gv {
    const struct eai_host *host;
    char runsc[PATH_MAX];
    char state_dir[PATH_MAX];
    char work_dir[PATH_MAX];
    char platform[32];
    unsigned uid;
    int probe_enabled;
    char cg_parent[64];          /* "eai/<16 hex>": our cgroup subtree */
    int cg_v2;                   /* pure cgroup v2 host */

    int probe_state;             /* 0 pending, 1 ready, -1 failed */
    int sweeping;
    char version[128];
    char reason[256];
    struct event *reprobe_ev;
    char probe_cid[96];

    int pool_size;               /* warm sandboxes per shape; 0 = off */
    struct gv_pooled *pool;
    struct {
        struct gv_shape shape;
        int64_t last;
        int used, unpoolable;
    } shapes[GV_POOL_SHAPES];
    int64_t pool_backoff_until;  /* monotonic ms: no boots before */

    struct gv_exec *execs;       /* every live execution */
    unsigned long seq;
    int inflight;                /* work items and children referencing us */
    int destroying;
};

int gv_ready_gate(const struct gv *g); /* 1 when jobs may start now */
void gv_release(struct gv *g);         /* drop one inflight; frees when destroying */

/* gvisor_exec.c */
int gv_exec_start(struct gv *g, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb,
                  void *cb_arg, void **handle, struct eai_error **err);
void gv_exec_cancel(struct gv *g, void *handle);
void gv_exec_unpark_all(struct gv *g);
void gv_exec_destroy_all(struct gv *g, int kill_only);

/* gvisor_pool.c */
/* A ready sandbox of shape s (now TAKEN by the caller) or NULL; (re)fills
 * the pool for s in the background either way. */
int gv_exec_busy(const struct gv *g);
struct gv_pooled *gv_pool_take(struct gv *g, const struct gv_shape *s);
const struct gv_bundle *gv_pooled_bundle(const struct gv_pooled *p);
/* The execution is done with it: tear the sandbox down in the background. */
void gv_pool_release(struct gv_pooled *p);
void gv_pool_destroy_all(struct gv *g, int kill_only);

/* --------------------------------------------------------------- files */

/* Everything the worker needs to lay out one bundle. */
struct gv_bundle {
    char cid[96];
    char dir[PATH_MAX];          /* <work_dir>/<cid> */
    char rootfs[PATH_MAX];
    char cgpath[192];            /* "eai/<hash>/<cid>", no leading slash */
    unsigned uid;
    int cg_v2;
    int mounted;                 /* host tmpfs at <dir>/tmp */
    int cg_made;
};

/* Worker: mkdir bundle, mount the size-capped tmpfs, write input files,
 * config.json, create the cgroup leaves.  0 or -1 with msg. */
int gv_bundle_prepare(struct gv_bundle *b, const struct eai_iso_job *job, char *msg, size_t msglen);
/* Worker: the job's OCI process object as a file (runsc exec --process). */
int gv_write_process(const struct gv_bundle *b, const struct eai_iso_job *job, const char *path, char *msg,
                     size_t msglen);
/* Worker: restart the leaf's peak memory counter (pooled sandboxes). */
void gv_cgroup_reset_peak(const struct gv_bundle *b);

struct gv_stats {
    int oom;
    double cpu_seconds;
    double peak_mb;
};
void gv_cgroup_stats(const struct gv_bundle *b, struct gv_stats *st);
/* Kill what is left in the leaves, remove them.  0 or -1. */
int gv_cgroup_remove(const char *cgpath, int cg_v2);

/* eai_pc_bundle_remove(dir), only when dir is one of our bundles. */
int gv_bundle_remove(const char *dir);

#endif
