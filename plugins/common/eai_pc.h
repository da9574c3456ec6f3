/* Helpers shared by the isolation backends that run sandboxes on this host
 * (plugins/gvisor, plugins/kata): a static library linked into each .so
 * (hidden visibility, nothing exported).  It includes only <eai/...> headers
 * and links nothing of core (STYLE.md section 2). */
#ifndef EAI_PC_H
#define EAI_PC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <eai/isolation.h>

struct event_base;

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

/* --------------------------------------------------------------- files (pc_fs.c) */

/* 1 when p is an absolute path strictly under /tmp with no "." / ".."
 * components, no empty components, at most 4095 bytes. */
int eai_pc_tmp_path_valid(const char *p);
/* write(2) all of d, retrying on EINTR.  0 or -1. */
int eai_pc_write_all(int fd, const void *d, size_t n);
/* mkdir -p (every component with mode).  0 or -1 with errno. */
int eai_pc_mkdir_p(const char *path, mode_t mode);

/* Worker: mkdir <dir> (0700) and <dir>/tmp, mount a tmpfs of disk_bytes
 * (EAI_PC_DEFAULT_DISK when <= 0) there; *mounted = 1 once mounted.
 * 0 or -1 with msg. */
int eai_pc_bundle_tmpfs(const char *dir, int64_t disk_bytes, int *mounted, char *msg, size_t msglen);
/* Worker: write job->files into <dir>/tmp, owned by uid (O_NOFOLLOW walk).
 * 0 or -1 with msg. */
int eai_pc_write_inputs(const char *dir, unsigned uid, const struct eai_iso_job *job, char *msg, size_t msglen);
/* Worker: a probe bundle in dir: a tiny static ELF calling exit(0) as the
 * whole root fs (<dir>/rootfs/true), and its OCI config.json.  0 or -1. */
int eai_pc_probe_bundle(const char *dir, unsigned uid, char *msg, size_t msglen);

/* Remove path (a tree) without following symlinks or crossing mounts. */
int eai_pc_rm_tree(const char *path);
/* Unmount <dir>/tmp (lazily) and remove dir. */
int eai_pc_bundle_remove(const char *dir);

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
/* SIGKILL whatever is still in a cgroup, then rmdir it (a few tries).
 * 0 (removed or absent) or -1. */
int eai_pc_cg_kill_rmdir(const char *dir);

/* --------------------------------------------------------------- run I/O (pc_io.c) */

#define EAI_PC_DEFAULT_OUTPUT (1LL << 20)     /* per stream when job->output_bytes is 0 */
#define EAI_PC_ERR_TAIL 1024                  /* stderr tail kept for the runtime's own errors */

int64_t eai_pc_mono_ns(void);

/* One output pipe of a run (our read end, non-blocking). */
struct eai_pc_stream {
    int fd;
    struct event *ev;
    int64_t delivered;
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
/* outcome EXITED with code; signal = code - 128 for 129..192. */
void eai_pc_result_exited(struct eai_iso_result *r, int code);

#endif
