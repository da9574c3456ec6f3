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
/* Added in 1.2: carries egress when core gives the job a network namespace
 * (job->netns_path, core's DNS and gateway enforce the allow list: see
 * docs/egress.md); without it or EAI_ISO_CAP_EGRESS a job with granted
 * egress is refused at admission (egress_unsupported). */
#define EAI_ISO_CAP_EGRESS_NETNS  (1u << 5)
/* Added in 1.2: egress executions can be served by pooled sandboxes booted
 * in namespaces from host->netns_take (op egress_claim below). */
#define EAI_ISO_CAP_EGRESS_POOL   (1u << 6)
/* Added in 1.5: mounts the tenant volumes a job or a session names
 * (eai_iso_job.volumes, eai_iso_session.volumes; docs/volumes.md); without
 * it core refuses a request with volumes (422 volumes_unsupported). */
#define EAI_ISO_CAP_VOLUMES       (1u << 7)

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
#define EAI_ISO_PROBE_SIZE_1_2 EAI_ISO_PROBE_SIZE_1_1
#define EAI_ISO_PROBE_SIZE_1_3 EAI_ISO_PROBE_SIZE_1_2
#define EAI_ISO_PROBE_SIZE_1_4 EAI_ISO_PROBE_SIZE_1_3
#define EAI_ISO_PROBE_SIZE_1_5 EAI_ISO_PROBE_SIZE_1_4

/* Added in 1.5: one volume to mount (docs/volumes.md).  host_path is a
 * directory on this host (the volume's filesystem, mounted by core); path
 * the absolute, normalised mount point inside the sandbox, under /mnt. */
struct eai_iso_volume {
    const char *host_path;
    const char *path;
    int read_only;
};

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
    /* ---- Added in 1.2 (read only when size >= EAI_ISO_JOB_SIZE_1_2): set
     * when the job has granted egress and the backend announced
     * EAI_ISO_CAP_EGRESS_NETNS.  The sandbox runs with its own network
     * stack inside this network namespace (path of a bind mount, e.g.
     * /var/run/netns/eaix-1a2b3c4d); its resolver is dns_server (IPv4). */
    const char *netns_path;
    const char *dns_server;
    /* ---- Added in 1.2 (sessions): when set, the job runs inside that live
     * session's sandbox (session_create below) instead of a sandbox of its
     * own; its limits are the session's, timeout_ms and output_bytes stay
     * per job.  Core sets it only for a backend with session_create. */
    const char *session_id;
    /* ---- Added in 1.4 (read only when size >= EAI_ISO_JOB_SIZE_1_4):
     * 1 when the program's stdin is streamed (docs/executions.md, "Input
     * to a running program"): stdin_data is empty, the program's stdin
     * stays open after the start and core feeds it through the op
     * stdin_write until its eof.  Core sets it only for a backend with
     * stdin_write. */
    int stdin_stream;
    /* ---- Added in 1.5 (read only when size >= EAI_ISO_JOB_SIZE_1_5): the
     * volumes to bind into the sandbox (core sets them only for a backend
     * announcing EAI_ISO_CAP_VOLUMES, never with session_id). */
    const struct eai_iso_volume *volumes;
    size_t nvolumes;
};
#define EAI_ISO_JOB_SIZE_1_0 (offsetof(struct eai_iso_job, collect_max_total_bytes) + sizeof(int64_t))
/* 1.1 added nothing to the job.  (netns_path and dns_server were appended
 * after 1.1's release and this constant then moved to cover them: they
 * are 1.2, and a test of job->size against _1_1 does not cover them.) */
#define EAI_ISO_JOB_SIZE_1_1 EAI_ISO_JOB_SIZE_1_0
#define EAI_ISO_JOB_SIZE_1_2 (offsetof(struct eai_iso_job, session_id) + sizeof(const char *))
#define EAI_ISO_JOB_SIZE_1_3 EAI_ISO_JOB_SIZE_1_2
#define EAI_ISO_JOB_SIZE_1_4 (offsetof(struct eai_iso_job, stdin_stream) + sizeof(int))
#define EAI_ISO_JOB_SIZE_1_5 (offsetof(struct eai_iso_job, nvolumes) + sizeof(size_t))
/* Deprecated: 1 when the job carries session_id, i.e. size >=
 * EAI_ISO_JOB_SIZE_1_2 (the same test; docs/plugins.md named this macro
 * before 1.2 existed).  Kept for sources written against it, gone in 2.0. */
#define EAI_ISO_JOB_HAS_SESSION(j) ((j)->size >= EAI_ISO_JOB_SIZE_1_2)

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
    /* ---- Added in 1.1 (the host reads it only from a backend of ABI 1.1
     * or later whose size covers it: in a 1.0 struct these bytes are tail
     * padding).  When set, on_exit may take the bytes of files[i]: it
     * stores NULL in files[i].data (the only field it writes) and frees
     * them later with free(); the backend frees what is left as usual.
     * Lets the host hash and encode large collected files on a worker
     * without copying them on the loop first. */
    int files_movable;
    /* ---- Added in 1.2 (size-checked by the host): how many bytes at the
     * very end of the stderr the backend delivered through on_output were
     * written by the runtime itself (runsc's own failure line shares the
     * program's stderr descriptor), not by the program.  The host drops
     * them from the stored stderr: the program's streams hold only what it
     * wrote. */
    size_t stderr_runtime_bytes;
};
#define EAI_ISO_RESULT_SIZE_1_0 (offsetof(struct eai_iso_result, files_truncated) + sizeof(int))
/* 1.1's result as released holds files_movable (this constant said _1_0
 * until 1.2; sizeof(struct eai_iso_result) in the 1.1 headers covers it). */
#define EAI_ISO_RESULT_SIZE_1_1 (offsetof(struct eai_iso_result, files_movable) + sizeof(int))
#define EAI_ISO_RESULT_SIZE_1_2 (offsetof(struct eai_iso_result, stderr_runtime_bytes) + sizeof(size_t))
#define EAI_ISO_RESULT_SIZE_1_3 EAI_ISO_RESULT_SIZE_1_2
#define EAI_ISO_RESULT_SIZE_1_4 EAI_ISO_RESULT_SIZE_1_3
#define EAI_ISO_RESULT_SIZE_1_5 EAI_ISO_RESULT_SIZE_1_4

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
#define EAI_ISO_CALLBACKS_SIZE_1_2 EAI_ISO_CALLBACKS_SIZE_1_0
#define EAI_ISO_CALLBACKS_SIZE_1_3 EAI_ISO_CALLBACKS_SIZE_1_2
#define EAI_ISO_CALLBACKS_SIZE_1_4 EAI_ISO_CALLBACKS_SIZE_1_3
#define EAI_ISO_CALLBACKS_SIZE_1_5 EAI_ISO_CALLBACKS_SIZE_1_4

/* ---- Added in 1.2, sessions: one sandbox kept alive across executions
 * (docs/sessions.md).  The three structs below and enum eai_iso_file_op
 * are new in 1.2; core makes eai_iso_session and the callbacks, the
 * backend eai_iso_session_end. */
struct eai_iso_session {
    size_t size;
    const char *id;            /* "ses_<uuid>" */
    const char *tenant_id;
    const char *profile;
    const char *runtime_class;
    const char *image;         /* NAME[:TAG] */
    /* limits of the whole session: every execution in it shares them */
    int64_t cpu_millis;
    int64_t memory_bytes;
    int64_t pids;
    int64_t disk_bytes;        /* size of /tmp */
    int max_concurrent;        /* executions at once inside it (>= 1); later ones wait */
    /* ---- Added in 1.4 (check size >= EAI_ISO_SESSION_SIZE_1_4): granted
     * egress (docs/sessions.md "Egress"), as eai_iso_job's: the network
     * namespace core made for the session (NULL: no network) and the DNS
     * server its resolv.conf names.  Valid for the call only. */
    const char *netns_path;
    const char *dns_server;
    /* ---- Added in 1.5 (check size >= EAI_ISO_SESSION_SIZE_1_5): a fork
     * (docs/sessions.md "Snapshots and forks").  When set, the session is
     * not booted but restored from this snapshot directory, one that
     * session_snapshot filled (its processes, memory and /tmp, copied: the
     * new session shares nothing writable with it or its other forks).
     * Valid for the call only. */
    const char *restore_from;
    /* ---- Added in 1.5 (check size >= EAI_ISO_SESSION_SIZE_1_5): volumes
     * bound into the session's sandbox for its whole life, as
     * eai_iso_job's (valid for the call only: the backend copies them). */
    const struct eai_iso_volume *volumes;
    size_t nvolumes;
};
#define EAI_ISO_SESSION_SIZE_1_2 (offsetof(struct eai_iso_session, max_concurrent) + sizeof(int))
#define EAI_ISO_SESSION_SIZE_1_3 EAI_ISO_SESSION_SIZE_1_2
#define EAI_ISO_SESSION_SIZE_1_4 (offsetof(struct eai_iso_session, dns_server) + sizeof(const char *))
#define EAI_ISO_SESSION_SIZE_1_5 (offsetof(struct eai_iso_session, nvolumes) + sizeof(size_t))

struct eai_iso_session_end {
    size_t size;
    int oom;                   /* the sandbox was killed for memory */
    int crashed;               /* it ended without session_destroy */
    double cpu_seconds;        /* the whole session, from its cgroup */
    double peak_memory_mb;
    const char *message;       /* English, may be NULL */
};
#define EAI_ISO_SESSION_END_SIZE_1_2 (offsetof(struct eai_iso_session_end, message) + sizeof(const char *))
#define EAI_ISO_SESSION_END_SIZE_1_3 EAI_ISO_SESSION_END_SIZE_1_2
#define EAI_ISO_SESSION_END_SIZE_1_4 EAI_ISO_SESSION_END_SIZE_1_3
#define EAI_ISO_SESSION_END_SIZE_1_5 EAI_ISO_SESSION_END_SIZE_1_4

/* Callbacks of one session, on the loop thread. */
struct eai_iso_session_callbacks {
    size_t size;
    /* The sandbox booted (err NULL) or could not (err set: nothing follows). */
    void (*on_ready)(void *arg, const struct eai_error *err);
    /* Exactly once after on_ready(arg, NULL): the sandbox is gone
     * (session_destroy, or it died: OOM, crash) and everything of it freed. */
    void (*on_end)(void *arg, const struct eai_iso_session_end *end);
    /* Pause / resume: the answer to session_pause or
     * session_resume, once each (err NULL: done).  A failed pause leaves
     * the session running, or ended (on_end follows) when the sandbox was
     * lost; a failed resume ends it (on_end follows). */
    void (*on_paused)(void *arg, const struct eai_error *err);
    void (*on_resumed)(void *arg, const struct eai_error *err);
};
#define EAI_ISO_SESSION_CALLBACKS_SIZE_1_2 \
    (offsetof(struct eai_iso_session_callbacks, on_resumed) + sizeof(void (*)(void)))
#define EAI_ISO_SESSION_CALLBACKS_SIZE_1_3 EAI_ISO_SESSION_CALLBACKS_SIZE_1_2
#define EAI_ISO_SESSION_CALLBACKS_SIZE_1_4 EAI_ISO_SESSION_CALLBACKS_SIZE_1_3
#define EAI_ISO_SESSION_CALLBACKS_SIZE_1_5 EAI_ISO_SESSION_CALLBACKS_SIZE_1_4

enum eai_iso_file_op {
    EAI_ISO_FILE_PUT = 1,      /* data/len: create or replace path (parents made) */
    EAI_ISO_FILE_GET,          /* *out (malloc'd, caller frees) and *outlen */
    EAI_ISO_FILE_DELETE,       /* a file or an empty directory */
    EAI_ISO_FILE_LIST,         /* *list: [{path, size, type: "file"|"dir"}] under path, recursive */
};

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

    /* ---- Added in 1.2 (sessions, docs/sessions.md).  Each may be NULL
     * (and is, for a backend of an older minor: its table is NULL-filled at
     * load): core then refuses sessions on the backend (422
     * sessions_unsupported). */
    /* Boot the session's sandbox.  0: cb->on_ready follows once (then
     * on_end once if it was ready); -1 and *err: nothing follows. */
    int (*session_create)(void *self, const struct eai_iso_session *s,
                          const struct eai_iso_session_callbacks *cb, void *cb_arg,
                          struct eai_error **err);
    /* Stop the session's sandbox (its running jobs end as their sandbox
     * died) and free everything of it; on_end follows.  Unknown: no-op. */
    void (*session_destroy)(void *self, const char *session_id);
    /* Jobs running or waiting inside the session now (idle detection). */
    int (*session_busy)(void *self, const char *session_id);
    /* WORKER THREAD (may block, must be thread-safe): a file operation in
     * the session's /tmp.  path: absolute, under /tmp (LIST: /tmp itself
     * too).  max: the largest file GET may return.  0, or -1 and *err
     * (not_found, validation_failed, payload_too_large, ...). */
    int (*session_file)(void *self, const char *session_id, enum eai_iso_file_op op, const char *path,
                        const unsigned char *data, size_t len, int64_t max, unsigned char **out,
                        size_t *outlen, json_t **list, struct eai_error **err);
    /* Optional (NULL: pause answers 422 sessions_unsupported).
     * Pause: save the session's sandbox (processes, memory) to disk and
     * stop it, so it costs disk, not memory; only with no job running or
     * waiting in it.  Its /tmp stays readable and writable (session_file).
     * Resume: restore it.  0: cb->on_paused / on_resumed follows once;
     * -1 and *err (conflict: jobs running, not running / not paused). */
    int (*session_pause)(void *self, const char *session_id, struct eai_error **err);
    int (*session_resume)(void *self, const char *session_id, struct eai_error **err);
    /* Optional (warm pool for egress, docs/egress.md; only
     * called when probe() announces EAI_ISO_CAP_EGRESS_POOL).  job has
     * granted egress, no netns_path yet.  A ready pooled sandbox of the
     * job's shape booted in a namespace of host->netns_take: the backend
     * marks it claimed and returns its token, which is core's from then on
     * (core binds the job's allow list to it and ends it with the job);
     * core then calls start() at once with job->netns_path set to that
     * namespace, and the backend runs the job in that sandbox.  NULL: none
     * (core leases a namespace and the job boots cold).  Never blocks. */
    void *(*egress_claim)(void *self, const struct eai_iso_job *job);

    /* ---- Added in 1.4: sessions kept across a restart of eaid
     * (docs/sessions.md "Surviving the server").  Each may be NULL (the
     * three together or none): core then ends every session at a stop
     * (interrupted), as before. */
    /* Keep a paused session's saved state (checkpoint, /tmp) when the
     * backend is closed, for session_adopt by the next process of this
     * node.  0, or -1 and *err (not paused: conflict; unknown: not_found). */
    int (*session_keep)(void *self, const char *session_id, struct eai_error **err);
    /* Take back a session kept by an earlier process of this node, as a
     * paused session (spec and callbacks as session_create; nothing is
     * reported until session_resume or session_destroy: then on_resumed or
     * on_end as for any paused session).  0, or -1 and *err (not_found:
     * nothing kept under that id; image_missing). */
    int (*session_adopt)(void *self, const struct eai_iso_session *s,
                         const struct eai_iso_session_callbacks *cb, void *cb_arg,
                         struct eai_error **err);
    /* Remove every kept session not adopted by now (core calls it once,
     * after adopting what its storage says is paused). */
    void (*session_drop_kept)(void *self);
    /* Added in 1.4, optional (NULL: core refuses stdin_mode "stream"
     * at admission, 422 validation_failed at /stdin_mode).  Loop, never
     * blocks: append len bytes (len may be 0) to the streamed stdin of a
     * started job (job->stdin_stream), then close it when eof is set.
     * All or nothing: the backend buffers at most EAI_ISO_STDIN_BUFFER
     * bytes not yet read by the program.  0: taken (*pending: bytes
     * buffered now, may be NULL); -1 and *err: EAI_E_STDIN_BUSY (no room
     * now, or the program not started yet: retry), EAI_E_STDIN_CLOSED
     * (eof was given, or the program ended or closed its stdin),
     * EAI_E_STDIN_NOT_STREAMED (a job without stdin_stream). */
    int (*stdin_write)(void *self, void *handle, const unsigned char *data, size_t len, int eof,
                       size_t *pending, struct eai_error **err);
    /* ---- Added in 1.5, optional (NULL: core answers 422
     * snapshots_unsupported): a snapshot of a live session that keeps
     * running (docs/sessions.md "Snapshots and forks").  Loop, never
     * blocks.  dir: a directory that does not exist yet, which the backend
     * creates and fills with everything session_create needs to restore a
     * new session from it (eai_iso_session.restore_from): its processes,
     * memory and a copy of its /tmp; core removes it (rm -rf) when the
     * snapshot is deleted.  0: done(arg, NULL, size_bytes of dir) or
     * done(arg, err, 0) follows once on the loop (the session is running
     * again either way, or ended when it was lost); -1 and *err (conflict:
     * not running, or jobs running or waiting in it; not_found).  A paused
     * session may be snapshotted too (its saved state copied into dir: it
     * stays paused; core parks sessions so, docs/sessions.md "Any replica"). */
    int (*session_snapshot)(void *self, const char *session_id, const char *dir,
                            void (*done)(void *arg, const struct eai_error *err, int64_t size_bytes), void *arg,
                            struct eai_error **err);
};
/* The bytes of streamed stdin a backend holds for a job (1.4). */
#define EAI_ISO_STDIN_BUFFER (1024 * 1024)
/* Frozen sizes per minor: the loader accepts [SIZE_1_0, sizeof]. */
#define EAI_ISOLATION_OPS_SIZE_1_0 (offsetof(struct eai_isolation_ops, sweep) + sizeof(void (*)(void)))
#define EAI_ISOLATION_OPS_SIZE_1_1 EAI_ISOLATION_OPS_SIZE_1_0
#define EAI_ISOLATION_OPS_SIZE_1_2 (offsetof(struct eai_isolation_ops, egress_claim) + sizeof(void (*)(void)))
#define EAI_ISOLATION_OPS_SIZE_1_3 EAI_ISOLATION_OPS_SIZE_1_2
#define EAI_ISOLATION_OPS_SIZE_1_4 (offsetof(struct eai_isolation_ops, stdin_write) + sizeof(void (*)(void)))
#define EAI_ISOLATION_OPS_SIZE_1_5 (offsetof(struct eai_isolation_ops, session_snapshot) + sizeof(void (*)(void)))

#ifdef __cplusplus
}
#endif
#endif
