/* Helpers shared by the isolation backends that run sandboxes on this host
 * (plugins/gvisor, plugins/kata): a static library linked into each .so
 * (hidden visibility, nothing exported).  It includes only <eai/...> headers
 * and links nothing of core (STYLE.md section 2). */
#ifndef EAI_PC_H
#define EAI_PC_H

#include "eaibase.h" /* eai_write_all, eai_mkdir_p, eai_monotonic_ns, eai_jstr ... */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <eai/isolation.h>

struct event_base;
struct event;
struct eai_host;
struct eai_error;

/* --------------------------------------------------------------- defaults */

#define EAI_PC_DEFAULT_DISK (64LL << 20)      /* tmpfs size when job->disk_bytes is 0 */
#define EAI_PC_COLLECT_FILES 100
#define EAI_PC_COLLECT_FILE_BYTES (10LL << 20)
#define EAI_PC_COLLECT_TOTAL_BYTES (50LL << 20)
#define EAI_PC_COLLECT_DEPTH 16

/* --------------------------------------------------------------- children (pc_child.c) */

/* status: the wait status, or -1 when the child could not be spawned.
 * out/outlen: captured stdout+stderr (first 8 KiB), NUL-terminated. */
typedef void (*eai_pc_child_done_fn)(void *arg, int status, const char *out, size_t outlen);
struct eai_pc_child;

/* Spawn argv[0] (absolute path) on base, watched with a pidfd, in its own
 * process group, with fresh descriptors only and default signal
 * dispositions.  fds: stdin/stdout/stderr for the child (-1 = /dev/null);
 * capture: collect stdout and stderr instead.  timeout_ms > 0: SIGKILL the
 * child's process group when it passes.  owner: any pointer that
 * eai_pc_child_reap_all() may later be given.  cb runs once on the loop,
 * then the child object is freed.  NULL when spawning failed (cb not
 * called, errno set).  Loop thread only. */
struct eai_pc_child *eai_pc_child_spawn(struct event_base *base, const void *owner, char *const argv[], int fd_in,
                                        int fd_out, int fd_err, int capture, int64_t timeout_ms,
                                        eai_pc_child_done_fn cb, void *arg);
pid_t eai_pc_child_pid(const struct eai_pc_child *c);
/* Forget cb (the child is still reaped and freed). */
void eai_pc_child_detach(struct eai_pc_child *c);
/* Shutdown: SIGKILL and reap (blocking) every child of owner now, running
 * each callback, children spawned by those callbacks included. */
void eai_pc_child_reap_all(const void *owner);

/* Blocking variant for worker threads only: wait status or -1.  out/outlen
 * (may be NULL/0): captured stdout+stderr, NUL-terminated. */
int eai_pc_run_sync(char *const argv[], int64_t timeout_ms, char *out, size_t outlen);

/* --------------------------------------------------------------- watchdog (pc_watchdog.c) */

/* What a watchdog kills when eaid dies: an OCI runtime CLI (runsc, runc:
 * `<runtime> <root_arg> kill <cid> KILL`, `... delete --force <cid>`), the
 * cgroup leaf cgpath (below /sys/fs/cgroup, v2 or every v1 controller) and
 * the bundle dir.  The strings are copied into the watchdog's argv. */
struct eai_pc_wd {
    const char *runtime;
    const char *root_arg;        /* "--root=<state dir>" */
    const char *cid;
    const char *cgpath;
    const char *dir;
};
/* Loop: start the watchdog of one sandbox (a /bin/sh in its own process
 * group, reaped on the loop): the returned fd (close-on-exec) is eaid's end;
 * while eaid lives nothing happens; when eaid dies (the kernel closes the
 * fd) the watchdog kills and removes the sandbox at once.  -1 with errno. */
int eai_pc_watchdog_arm(struct event_base *base, const struct eai_pc_wd *wd);
/* Loop: the sandbox is gone (or handed on): tell the watchdog to exit,
 * close *fd, set it to -1.  No-op on -1. */
void eai_pc_watchdog_disarm(int *fd);
/* Shutdown: SIGKILL and reap the watchdogs still running (after every
 * sandbox was stopped and disarmed), before the plugin is unloaded. */
void eai_pc_watchdog_reap_all(void);

/* --------------------------------------------------------------- files (pc_fs.c) */

/* Limits of the local backends' file handling (published by their probe
 * as max_path_bytes / max_name_bytes, so core refuses at admission). */
#define EAI_PC_MAX_PATH_BYTES 4095   /* PATH_MAX - 1 */
#define EAI_PC_MAX_NAME_BYTES 255    /* NAME_MAX */

/* 1 when p is an absolute path strictly under /tmp with no "." / ".."
 * components, no empty components, at most EAI_PC_MAX_PATH_BYTES bytes
 * and segments of at most EAI_PC_MAX_NAME_BYTES. */
int eai_pc_tmp_path_valid(const char *p);

/* Worker: mkdir <dir> (0700) and <dir>/tmp, mount a tmpfs of disk_bytes
 * (EAI_PC_DEFAULT_DISK when <= 0) there; *mounted = 1 once mounted.
 * 0 or -1 with msg. */
int eai_pc_bundle_tmpfs(const char *dir, int64_t disk_bytes, int *mounted, char *msg, size_t msglen);
/* Worker: write job->files into <dir>/tmp, owned by uid (O_NOFOLLOW walk).
 * 0 or -1 with msg. */
int eai_pc_write_inputs(const char *dir, unsigned uid, const struct eai_iso_job *job, char *msg, size_t msglen);
/* Worker: a probe bundle in dir: a tiny static ELF calling exit(0) as the
 * whole root fs (<dir>/rootfs/true), and its OCI config.json, whose
 * linux.cgroupsPath is cgroups_path (NULL: none; runsc then puts its leaves
 * at the top of each hierarchy, where no sweep of ours looks, and a probe
 * killed mid-run leaves them there).  0 or -1. */
int eai_pc_probe_bundle(const char *dir, unsigned uid, const char *cgroups_path, char *msg, size_t msglen);

/* Unmount <dir>/tmp (lazily) and remove dir. */
int eai_pc_bundle_remove(const char *dir);

/* --------------------------------------------------------------- live /tmp (pc_files.c) */

/* Worker: file operations on the host tmpfs <dir>/tmp of a live sandbox
 * (sessions), never following a symlink.  path: absolute under /tmp.
 * 0, or -1 with errno (ENOENT, EINVAL: bad path, EFBIG: over max, ...). */
int eai_pc_tmp_put(const char *dir, unsigned uid, const char *path, const unsigned char *data, size_t len,
                   char *msg, size_t msglen);
int eai_pc_tmp_get(const char *dir, const char *path, int64_t max, unsigned char **out, size_t *outlen);
/* A file, a symlink or an empty directory. */
int eai_pc_tmp_delete(const char *dir, const char *path);
/* *out: [{path, size, type}] below path ("/tmp" itself allowed), depth-first, at most max entries. */
int eai_pc_tmp_list(const char *dir, const char *path, size_t max, json_t **out);

/* --------------------------------------------------------------- collect (pc_collect.c) */

struct eai_pc_collect_result {
    struct eai_iso_collected *files;
    size_t nfiles;
    int truncated;
};
/* Worker: read job->collect paths from the tmpfs at <dir>/tmp (nothing when
 * !mounted), never following a symlink, within the job's limits. */
void eai_pc_collect(const char *dir, int mounted, const struct eai_iso_job *job, struct eai_pc_collect_result *out);
void eai_pc_collect_free(struct eai_pc_collect_result *r);

/* --------------------------------------------------------------- cgroups (pc_cgroup.c) */

/* Write val to <dir>/<file>.  0 or -1. */
int eai_pc_cg_write(const char *dir, const char *file, const char *val);
/* Read <dir>/<file> (NUL-terminated, at most len - 1 bytes).  0 or -1. */
int eai_pc_cg_read(const char *dir, const char *file, char *buf, size_t len);
/* The number after "<key> " on a line of text (cpu.stat...), or -1. */
long long eai_pc_cg_key(const char *text, const char *key);
/* SIGKILL every process of a cgroup (v2: cgroup.kill when the kernel has
 * it) until cgroup.procs is empty, at most wait_ms.  0 when empty (or the
 * cgroup is absent), -1 when something is still there. */
int eai_pc_cg_kill(const char *dir, int wait_ms);
/* SIGKILL whatever is still in a cgroup, then rmdir it (a few tries).
 * 0 (removed or absent) or -1. */
int eai_pc_cg_kill_rmdir(const char *dir);
/* v2: write each of ctrls ("+memory", ...) to cgroup.subtree_control of
 * every ancestor of <cgpath> below /sys/fs/cgroup (leaf_too: of <cgpath>
 * itself as well). */
void eai_pc_cg2_enable(const char *cgpath, const char *const *ctrls, int leaf_too);

/* --------------------------------------------------------------- create() and specs (pc_util.c) */

/* An executable regular file: name as is when it has a '/', else the first
 * in $PATH.  0 with out filled, or -1 (out: the name). */
int eai_pc_find_in_path(const char *name, char *out, size_t len);
/* FNV-1a 64 of s: stable per-instance names (cgroup subtrees). */
unsigned long long eai_pc_fnv1a(const char *s);
/* The first line of src (may be NULL) into dst. */
void eai_pc_one_line(char *dst, size_t len, const char *src);
/* A non-empty string member of the config subtree, or NULL. */
const char *eai_pc_cfg_str(const json_t *cfg, const char *key);
/* The OCI process args and env of job: env = its K=V entries, plus PATH,
 * HOME=/tmp, LANG=C.UTF-8 when absent, plus TRACEPARENT when given.  0
 * with both new arrays, or -1 (no argv, out of memory). */
int eai_pc_oci_args_env(const struct eai_iso_job *job, json_t **args, json_t **env);
/* The CFS quota in microseconds per EAI_PC_CPU_PERIOD_US period for
 * cpu_millis (at least 1 ms), or 0 for no quota (cpu_millis <= 0). */
#define EAI_PC_CPU_PERIOD_US 100000
int64_t eai_pc_cpu_quota(int64_t cpu_millis);
/* OCI linux.resources.cpu for cpu_millis > 0 (eai_pc_cpu_quota's). */
json_t *eai_pc_oci_cpu(int64_t cpu_millis);
/* Worker: write doc (stolen; NULL: "cannot build <what>") to path.  0 or -1 with msg. */
int eai_pc_write_json(const char *path, json_t *doc, const char *what, char *msg, size_t msglen);
/* Worker: the common part of laying out a bundle: the tmpfs at <dir>/tmp
 * (eai_pc_bundle_tmpfs), the job's input files in it, and <dir>/config.json
 * from spec(b, job) (the backend's OCI spec).  0 or -1 with msg. */
struct eai_pc_bundle;
typedef json_t *(*eai_pc_spec_fn)(const struct eai_pc_bundle *b, const struct eai_iso_job *job);
int eai_pc_bundle_prepare(struct eai_pc_bundle *b, const struct eai_iso_job *job, eai_pc_spec_fn spec, char *msg,
                          size_t msglen);

/* --------------------------------------------------------------- run I/O (pc_io.c) */

#define EAI_PC_DEFAULT_OUTPUT (1LL << 20)     /* per stream when job->output_bytes is 0 */
#define EAI_PC_ERR_TAIL 4096                  /* stderr tail kept for the runtime's own errors */


/* One output pipe of a run (our read end, non-blocking). */
struct eai_pc_stream {
    int fd;
    struct event *ev;
    int64_t delivered;
    int64_t total;               /* every byte read */
    enum eai_iso_stream which;
};
/* Free the event, close the fd (both may be unset). */
void eai_pc_stream_close(struct eai_pc_stream *s);
/* Loop: read what s has, at most max_reads reads of 64 KiB (0: until EAGAIN
 * or EOF; EOF closes s).  The first cap bytes go to cb->on_output unless
 * *muted; past the cap the pipe is still drained so the sandbox never
 * blocks.  Stderr also feeds tail (the last EAI_PC_ERR_TAIL bytes, not
 * terminated; tail must hold EAI_PC_ERR_TAIL + 1). */
void eai_pc_stream_read(struct eai_pc_stream *s, int max_reads, int64_t cap, char *tail, size_t *tail_len,
                        const struct eai_iso_callbacks *cb, void *cb_arg, const int *muted);
/* Loop: write what fits of data[*off, len) to the non-blocking fd, SIGPIPE
 * blocked (a reader gone ends the input).  1 when nothing is left to write. */
int eai_pc_stdin_pump(int fd, const unsigned char *data, size_t len, size_t *off);

/* The common part of a result: size, exit_code -1, duration from the
 * monotonic start/end, usage (memory MB-seconds = peak x wall time) and the
 * collected files (still owned by col). */
void eai_pc_result_init(struct eai_iso_result *r, int64_t t_start_ns, int64_t t_end_ns, double cpu_seconds,
                        double peak_mb, const struct eai_pc_collect_result *col);
/* How many of the stderr bytes delivered to core are the runtime's own
 * text at the end of the stream, when that text was rt_len bytes: the
 * part of the last rt_len bytes that lies below the delivery cap. */
size_t eai_pc_runtime_delivered(const struct eai_pc_stream *err, size_t rt_len);
/* outcome EXITED with code; signal = code - 128 for 129..192. */
void eai_pc_result_exited(struct eai_iso_result *r, int code);
/* A failure return in one statement for the helpers that report into a
 * caller's message buffer: formats into msg and returns -1.
 *     return eai_pc_fail(msg, msglen, "mkdir %s: %s", p, strerror(errno)); */
int eai_pc_fail(char *msg, size_t msglen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* outcome ERROR, EAI_E_SANDBOX_FAILED, error_message msg (formatted). */
void eai_pc_result_failed(struct eai_iso_result *r, char *msg, size_t msglen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* --------------------------------------------------------------- bundles */

/* Everything a worker needs to lay out one locally run sandbox. */
struct eai_pc_bundle {
    char cid[96];
    char dir[PATH_MAX];          /* <work_dir>/<cid> */
    char rootfs[PATH_MAX];
    char cgpath[192];            /* "<cg_parent>/<cid>", no leading slash */
    unsigned uid;
    int cg_v2;
    int mounted;                 /* host tmpfs at <dir>/tmp */
    int cg_made;
    int launcher;                /* gVisor: its init is the launcher (warm pool) */
};

/* What the cgroup told us when the run ended. */
struct eai_pc_stats {
    int oom;                     /* OOM kills counted by the cgroup (0: none) */
    double cpu_seconds;
    double peak_mb;
};

/* --------------------------------------------------------------- the local runner (pc_runner.c) */

/*
 * One lifecycle for a sandbox run on this host, shared by the gVisor and
 * Kata backends (docs/plugin-common.md); the backend is a DRIVER that
 * supplies only its runtime-specific steps through struct
 * eai_pc_driver_ops (crun's struct custom_handler_s is the model):
 *
 *   PARKED    waiting for the driver's gate (probe / sweep)
 *   PREPARING worker: ops->prepare (bundle, tmpfs, input files, spec)
 *   RUNNING   loop: the child of ops->spawn_argv, its pipes (stdin
 *             pumped, stdout/stderr capped), the timeout timer; timeout and
 *             cancel walk ops->stop_step (grace, then harder)
 *   SETTLING  the child has ended: wait for the helpers and, when the
 *             driver says the end is not known yet (ops->settled), for at
 *             most ops->settle_ms
 *   FINISHING worker: ops->end_work (leftovers, cgroup stats), collect,
 *             ops->teardown_work
 *   then on_exit exactly once (never while the driver is destroying), and
 *   the run is freed.
 */
struct eai_pc_run;
struct eai_pc_runner;

/* One step of stopping a run (timeout, cancel). */
struct eai_pc_stop {
    int kill_child;              /* 1: SIGKILL the child; 2: its process group and it */
    char *argv[24];              /* a helper child to run (argv[0] NULL: none) */
    int64_t helper_timeout_ms;
    const char *what;            /* the helper in logs: "runsc kill" */
    int64_t next_ms;             /* the next step after that long; < 0: this was the last */
    char warn[256];              /* logged as a warning when set */
};

struct eai_pc_driver_ops {
    const char *name;            /* "gvisor": prefixes start()'s refusals */
    const char *component;       /* log component */
    const char *runtime;         /* "runsc": "cannot start runsc: ..." */
    size_t priv_size;            /* per-run driver state (run->priv, zeroed) */
    const char *cid_prefix;      /* "eai-": what the sweeps look for */
    int cid_strict;              /* cids follow containerd's id rule */
    int drain_reads;             /* reads per pipe once the child ended (0: to EAGAIN/EOF) */
    int started_on_spawn;        /* 1: started once spawned; 0: the driver calls eai_pc_run_started() */

    /* Loop: 0 when runs may start now, 1 when they wait (parked), -1
     * refused (why: the whole message, "gvisor not ready: ..."). */
    int (*gate)(void *drv, char *why, size_t whylen);
    /* Loop, optional: start() is about to prepare the run now (the warm
     * pool may hand it a pre-booted sandbox). */
    void (*admit)(void *drv, struct eai_pc_run *run);
    /* Loop, optional, before admit: 0 the run may start now, 1 it waits
     * (held: the driver calls eai_pc_runner_retry_held() when it may go),
     * -1 it ends at once with why (sandbox_failed).  Sessions use it for
     * their bound on executions at once. */
    int (*hold)(void *drv, struct eai_pc_run *run, char *why, size_t whylen);
    /* Worker: lay out the run.  0 or -1 with msg. */
    int (*prepare)(void *drv, struct eai_pc_run *run, char *msg, size_t msglen);
    /* Loop: the run's child argv (strings kept in run->priv or the driver).
     * 0 or -1. */
    int (*spawn_argv)(void *drv, struct eai_pc_run *run, char **argv, size_t max);
    /* Loop, optional, before spawn_argv: start the program in a sandbox
     * already running (a warm sandbox's launcher) instead of spawning: 1
     * adopted (*pid: the process the stop steps kill; *in_fd (-1: none),
     * *out_fd, *err_fd: the run's ends, which the runner then owns; the
     * driver reports the end with eai_pc_run_exited()), 0 spawn as usual, -1
     * failed (run->msg). */
    int (*adopt)(void *drv, struct eai_pc_run *run, pid_t *pid, int *in_fd, int *out_fd, int *err_fd);
    /* Loop: stopping step `step` (0, 1, ...).  0, or -1 when there is none. */
    int (*stop_step)(void *drv, struct eai_pc_run *run, int step, struct eai_pc_stop *st);
    /* Loop, optional: 1 when the end is known (events); NULL: always. */
    int (*settled)(void *drv, const struct eai_pc_run *run);
    /* Loop, optional: how long to wait for it once the child ended (0: not at all). */
    int64_t (*settle_ms)(void *drv, const struct eai_pc_run *run);
    /* Worker, only when the child was spawned: leftovers, run->stats. */
    void (*end_work)(void *drv, struct eai_pc_run *run);
    /* Worker, after collect: remove the bundle, the cgroup. */
    void (*teardown_work)(void *drv, struct eai_pc_run *run);
    /* Loop: the outcome when neither cancelled, failed early nor timed out
     * (OOM, exit, signal, runtime failure).  msg: for r->error_message. */
    void (*classify)(void *drv, struct eai_pc_run *run, struct eai_iso_result *r, char *msg, size_t msglen);
    /* Loop, optional: after on_exit, before the run is freed. */
    void (*retire)(void *drv, struct eai_pc_run *run);
    /* Loop, optional: fill wd so the sandbox about to be spawned dies with
     * eaid (pc_watchdog.c).  0, or -1 for none (a warm sandbox has its own). */
    int (*watchdog)(void *drv, struct eai_pc_run *run, struct eai_pc_wd *wd);
    /* Shutdown (blocking allowed), for a run whose child is alive: pass 0
     * kills, pass 1 deletes (everything is killed by then). */
    void (*shutdown)(void *drv, struct eai_pc_run *run, int pass);
    /* Drop one reference (the runner took it with ++*inflight): a worker
     * step holds one.  May free the driver. */
    void (*release)(void *drv);
};

/* What a driver may read and write of a run (the rest is the runner's). */
struct eai_pc_run {
    struct eai_pc_runner *runner;
    struct eai_pc_run *next;
    const struct eai_iso_job *job;
    struct eai_pc_bundle b;
    void *priv;                  /* ops->priv_size bytes */
    struct eai_pc_stats stats;   /* ops->end_work fills it */
    int run_spawned, run_exited, wait_status, hard_killed;
    char err_tail[EAI_PC_ERR_TAIL + 1];
    size_t err_tail_len;
    /* set by ops->classify: the last n bytes of stderr were the runtime's
     * own words, not the program's (eai_pc_runtime_tail) */
    size_t err_runtime_len;
    char msg[256];

    /* the runner's */
    int state;
    struct eai_iso_callbacks cb;
    void *cb_arg;
    int early_code;              /* != 0: ended before running: EAI_E_* */
    int cancelled, timed_out, stopping, stop_next, started, started_reported;
    int held;                    /* parked by ops->hold, not by the gate */
    /* the first hold: its wait counts against the job's timeout (issue 36
     * item 8): past it the run ends as timeout without having run, and
     * once it starts its timer has what is left */
    int64_t hold_since_ns;
    int64_t held_ms;             /* how long it was held, once it starts */
    struct event *ev_hold;
    struct eai_pc_child *child;
    pid_t adopted_pid;           /* ops->adopt's process (no child of ours), or 0 */
    int helpers;                 /* stop helpers still running */
    struct eai_pc_stream out, err;
    int in_fd;
    int wd_fd;                   /* the watchdog's socket (pc_watchdog.c), or -1 */
    struct event *ev_in;
    size_t in_off;
    /* streamed stdin (job->stdin_stream, ABI 1.4): bytes of stdin_write
     * not yet taken by the pipe, [sin_off, sin_len) of sin_buf; sin_eof
     * once the client said so, sin_closed once the program's stdin is gone */
    unsigned char *sin_buf;
    size_t sin_len, sin_off;
    int sin_eof, sin_closed;
    struct event *ev_timeout, *ev_stop, *ev_settle, *ev_soon;
    int settle_armed;
    int64_t t_start_ns, t_end_ns;
    struct eai_pc_collect_result col;
};

/* Bundles go to <work_dir>/<cid>, cgroups to <cg_parent>/<cid>, the
 * program runs as uid; inflight: the driver's reference count; destroying:
 * set by the driver's destroy() (no callback reaches core any more).  The
 * strings and ints are the driver's and must outlive the runner.  NULL
 * when out of memory.  Loop thread only, like everything below. */
struct eai_pc_runner *eai_pc_runner_new(const struct eai_host *host, const struct eai_pc_driver_ops *ops, void *drv,
                                        const char *work_dir, const char *cg_parent, unsigned uid, int cg_v2,
                                        int *inflight, const int *destroying);
void eai_pc_runner_free(struct eai_pc_runner *r);
/* The isolation ops start / cancel. */
int eai_pc_runner_start(struct eai_pc_runner *r, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb,
                        void *cb_arg, void **handle, struct eai_error **err);
void eai_pc_runner_cancel(struct eai_pc_runner *r, void *handle);
/* The isolation op stdin_write (ABI 1.4) for a run of job->stdin_stream:
 * at most EAI_ISO_STDIN_BUFFER bytes held, all or nothing. */
int eai_pc_runner_stdin(struct eai_pc_runner *r, void *handle, const unsigned char *data, size_t len, int eof,
                        size_t *pending, struct eai_error **err);
/* 1 when job streams its stdin (ABI 1.4 field, size-checked). */
int eai_pc_job_stdin_stream(const struct eai_iso_job *job);
/* Ask ops->hold again for every held run, oldest first (a slot freed). */
void eai_pc_runner_retry_held(struct eai_pc_runner *r);
/* The gate opened or failed: launch (or refuse) the parked runs. */
void eai_pc_runner_unpark_all(struct eai_pc_runner *r);
/* Runs holding a sandbox or about to (not parked). */
int eai_pc_runner_busy(const struct eai_pc_runner *r);
/* Live runs. */
int eai_pc_runner_count(const struct eai_pc_runner *r);
/* The live, not yet finishing run of that cid, or NULL. */
struct eai_pc_run *eai_pc_runner_find(struct eai_pc_runner *r, const char *cid);
/* Shutdown (destroying set), two passes: 0 calls ops->shutdown(pass 0) for
 * every live child; 1 calls it with pass 1, frees parked runs and ends
 * those ending without a child; the driver then reaps its children
 * (eai_pc_child_reap_all), whose callbacks end the rest synchronously. */
void eai_pc_runner_shutdown(struct eai_pc_runner *r, int pass);

/* For drivers: the program started (once; its stdin EOF may go now). */
void eai_pc_run_started(struct eai_pc_run *run);
/* For drivers: something the settling waits for has arrived. */
void eai_pc_run_poke(struct eai_pc_run *run);
/* The child's pid (or the adopted process's while the run has not
 * ended), or -1. */
pid_t eai_pc_run_pid(const struct eai_pc_run *run);
/* For drivers that adopted: the program ended with wait status `status`
 * (once; later calls are ignored). */
void eai_pc_run_exited(struct eai_pc_run *run, int status);

#endif
