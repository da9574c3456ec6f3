/*
 * Isolation backend ops (kind EAI_KIND_ISOLATION).  Every op runs on the
 * loop thread and must not block it: long work goes to host->work_submit,
 * children are watched with pidfds on host->base.
 */
#ifndef EAI_ISOLATION_H
#define EAI_ISOLATION_H

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Capabilities a backend reports from probe(). */
#define EAI_ISO_CAP_LOCAL_IMAGES  (1u << 0) /* reads images from the local store */
#define EAI_ISO_CAP_EGRESS        (1u << 1) /* can enforce an egress allow list */
#define EAI_ISO_CAP_MEMORY_LIMIT  (1u << 2)
#define EAI_ISO_CAP_FILES         (1u << 3) /* input files and collect */
#define EAI_ISO_CAP_RECOVER       (1u << 4) /* can reattach after a restart */

struct eai_iso_probe {
    size_t size;
    int ready;                 /* 1 when executions can run */
    unsigned caps;
    char version[128];         /* runtime version, e.g. "runsc 0.0~20221219.0" */
    char reason[256];          /* why not ready */
    /* ---- Added in 1.1: 1 while the backend's first probe still runs
     * (ready is 0 then): core waits for the verdict instead of refusing,
     * and start() may hold jobs until it.  Core hands a zeroed struct of
     * today's size, so a 1.0 backend leaves it 0. */
    int pending;
    /* ---- Added in 1.1 (appended): the limits this backend enforces on
     * what a request carries, so admission refuses with 422 what start()
     * would refuse later (the strictest of the profile's backend applies).
     * 0 = no limit of the backend's own (core's limits still apply). */
    int64_t max_path_bytes;    /* input file / collect path, e.g. 4095 */
    int64_t max_name_bytes;    /* one path segment, e.g. 255 (NAME_MAX) */
    int64_t max_input_bytes;   /* stdin + files + env values together */
    int64_t max_files;         /* number of input files */
    int64_t max_env_name_bytes;/* one environment variable name */
    int64_t limit_flags;       /* EAI_ISO_LIMIT_* below */
};
/* limit_flags: environment variable names must match
 * [-._a-zA-Z][-._a-zA-Z0-9]* (Kubernetes' rule). */
#define EAI_ISO_LIMIT_ENV_NAMES_PORTABLE (1 << 0)
#define EAI_ISO_PROBE_SIZE_1_0 offsetof(struct eai_iso_probe, pending)
#define EAI_ISO_PROBE_SIZE_1_1 (offsetof(struct eai_iso_probe, limit_flags) + sizeof(int64_t))

struct eai_iso_file {
    const char *path;          /* absolute, under /tmp */
    const unsigned char *data;
    size_t len;
};

/* One execution to run.  All pointers are valid until on_exit returns. */
struct eai_iso_job {
    size_t size;
    const char *id;            /* "sbx_<uuid>" */
    const char *tenant_id;
    const char *profile;
    const char *runtime_class; /* from the profile: "gvisor", "kata", ... */
    const char *image;         /* NAME[:TAG] as requested */
    const char *const *argv;   /* NULL-terminated */
    const char *const *env;    /* NULL-terminated "K=V" from the request */
    const unsigned char *stdin_data;
    size_t stdin_len;
    const struct eai_iso_file *files;
    size_t nfiles;
    const char *const *collect;/* NULL-terminated paths under /tmp */
    const char *const *egress; /* NULL-terminated "host:port" allow list, NULL = none */
    const char *traceparent;   /* W3C header value for the sandbox, may be NULL */
    /* limits */
    int64_t cpu_millis;        /* 500 = half a core */
    int64_t memory_bytes;
    int64_t timeout_ms;
    int64_t pids;
    int64_t output_bytes;      /* cap per stream */
    int64_t disk_bytes;        /* size of /tmp */
    int64_t collect_max_files;
    int64_t collect_max_file_bytes;
    int64_t collect_max_total_bytes;
};
#define EAI_ISO_JOB_SIZE_1_0 (offsetof(struct eai_iso_job, collect_max_total_bytes) + sizeof(int64_t))
#define EAI_ISO_JOB_SIZE_1_1 EAI_ISO_JOB_SIZE_1_0

enum eai_iso_stream { EAI_STREAM_STDOUT = 1, EAI_STREAM_STDERR = 2 };

enum eai_iso_outcome {
    EAI_OUT_EXITED = 0,        /* exit_code / signal valid: succeeded or failed */
    EAI_OUT_TIMEOUT,
    EAI_OUT_OOM,
    EAI_OUT_CANCELLED,
    EAI_OUT_ERROR,             /* platform error: error_code / error_message */
    EAI_OUT_MAX
};

struct eai_iso_collected {
    char *path;                /* path inside the sandbox */
    unsigned char *data;       /* owned by the backend until on_exit returns */
    size_t len;
};

struct eai_iso_result {
    size_t size;
    enum eai_iso_outcome outcome;
    int exit_code;             /* -1 when none */
    int signal;                /* 0 when none */
    enum eai_code error_code;  /* with EAI_OUT_ERROR */
    const char *error_message; /* with EAI_OUT_ERROR, English, for clients */
    double cpu_seconds;
    double memory_mb_seconds;
    double duration_s;
    double peak_memory_mb;
    const struct eai_iso_collected *files;
    size_t nfiles;
    int files_truncated;       /* a collect cap was hit */
    /* Appended (size-checked by the host): when set, on_exit may take the
     * bytes of files[i]: it stores NULL in files[i].data (the only field it
     * writes) and frees them later with free(); the backend frees what is
     * left as usual.  Lets the host hash and encode large collected files
     * on a worker without copying them on the loop first. */
    int files_movable;
};
#define EAI_ISO_RESULT_SIZE_1_0 (offsetof(struct eai_iso_result, files_truncated) + sizeof(int))
#define EAI_ISO_RESULT_SIZE_1_1 EAI_ISO_RESULT_SIZE_1_0

/* Callbacks into core, on the loop thread. */
struct eai_iso_callbacks {
    size_t size;
    /* A chunk of output.  Core applies the per-stream cap and the
     * truncation flags; backends may also stop reading past the cap. */
    void (*on_output)(void *arg, enum eai_iso_stream s, const char *data, size_t len);
    /* The sandbox started (status becomes running). */
    void (*on_started)(void *arg);
    /* Exactly once per successful start(); the handle is dead afterwards. */
    void (*on_exit)(void *arg, const struct eai_iso_result *res);
};
#define EAI_ISO_CALLBACKS_SIZE_1_0 (offsetof(struct eai_iso_callbacks, on_exit) + sizeof(void (*)(void)))
#define EAI_ISO_CALLBACKS_SIZE_1_1 EAI_ISO_CALLBACKS_SIZE_1_0

struct eai_isolation_ops {
    size_t size;
    /* Readiness, filled synchronously from state computed at create()
     * time or by the last background probe.  Never blocks. */
    void (*probe)(void *self, struct eai_iso_probe *out);
    /* Start a job.  0 and *handle on success (on_exit will follow exactly
     * once), -1 and *err otherwise (no callback follows). */
    int (*start)(void *self, const struct eai_iso_job *job,
                 const struct eai_iso_callbacks *cb, void *cb_arg,
                 void **handle, struct eai_error **err);
    /* Ask a running job to stop; on_exit follows with EAI_OUT_CANCELLED. */
    void (*cancel)(void *self, void *handle);
    /* After a restart: try to reattach to an execution left running (its
     * stored JSON record).  0 and *handle when reattached (callbacks follow
     * as for start), -1 when it cannot (core then ends it as interrupted).
     * May be NULL. */
    int (*recover)(void *self, const json_t *execution,
                   const struct eai_iso_callbacks *cb, void *cb_arg,
                   void **handle, struct eai_error **err);
    /* Remove leftovers of earlier processes under our naming prefix.
     * May be NULL.  Called once at start-up, before any start(). */
    void (*sweep)(void *self);
};
/* Frozen sizes per minor: the loader accepts [SIZE_1_0, sizeof]. */
#define EAI_ISOLATION_OPS_SIZE_1_0 (offsetof(struct eai_isolation_ops, sweep) + sizeof(void (*)(void)))
#define EAI_ISOLATION_OPS_SIZE_1_1 EAI_ISOLATION_OPS_SIZE_1_0

#ifdef __cplusplus
}
#endif
#endif
