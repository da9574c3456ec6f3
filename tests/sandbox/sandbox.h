/*
 * The sandbox suite, one source for the isolation backends that run
 * sandboxes on this host (gVisor, Kata): the shared cases (sandbox_cases.c)
 * run against the backend named on the command line,
 *
 *   test_sandbox gvisor | kata
 *
 * each backend file (sandbox_gvisor.c, sandbox_kata.c) supplying its set-up,
 * the few facts the shared cases need (image, limits, scripts its image can
 * run) and its own cases (fail closed, sweep, warm pool, ...).
 */
#ifndef EAI_TESTS_SANDBOX_H
#define EAI_TESTS_SANDBOX_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include <CUnit/Basic.h>
#include <jansson.h>

#include <eai/isolation.h>

#include "iso_run.h"

struct sb_backend {
    const char *name;            /* argv[1], the plugin name */
    const char *profile;
    const char *image;
    int64_t memory, pids, disk;  /* the job defaults */
    const char *version_has;     /* in probe().version */
    const char *env_has[4];      /* in `env` besides FOO, HOME, TRACEPARENT */
    /* OOM: this program under oom_memory */
    const char *oom_argv[4];
    int64_t oom_memory;
    double stop_max_s;           /* timeout/cancel to on_exit, at most */
    int parallel;                /* jobs at once in "parallel" */
    /* argv trying to connect to 127.0.0.1:port; it prints "refused" or
     * "connected" per attempt, and exits 0.  Strings in buf. */
    void (*net_argv)(int port, char *buf, size_t len, const char *argv[4]);
    /* Register the suites: each calls sb_add_shared() and adds its own. */
    int (*register_suites)(void);
    /* After each execution: nothing of it is left. */
    void (*assert_clean)(void);
    /* After every suite ran (may be NULL). */
    void (*global_clean)(void);
};

extern const struct sb_backend sb_gvisor, sb_kata;

/* The backend under test and its live instance. */
extern const struct sb_backend *g_be;
extern struct event_base *g_base;
extern struct eai_host *g_host;
extern const struct eai_plugin_descriptor *g_desc;
extern const struct eai_isolation_ops *g_ops;
extern void *g_iso;
extern char g_rootfs[PATH_MAX];  /* the image's rootfs in the local store */

/* A run of g_be's image, profile and limits. */
struct iso_run *sb_run_new(const char *const *argv);
/* Start on iso (NULL: g_iso) and wait at most max_s; 0 when start()
 * accepted it, else -1 and *code. */
int sb_run_job_on(void *iso, struct iso_run *r, double max_s, enum eai_code *code);
int sb_run_job(struct iso_run *r, double max_s);
void sb_loop(double s);          /* run the loop s seconds */
void sb_loop_until(int (*cond)(void *), void *arg, double max_s);

/* The shared cases (and three of them alone, for smaller suites). */
void sb_add_shared(CU_pSuite s);
void sb_test_exit_codes(void);
void sb_test_env_and_stdin(void);
void sb_test_timeout(void);

/* Helpers for the backend files. */
int sb_count_prefix(const char *dir, const char *prefix);
int sb_file_contains(const char *path, const char *needle);
int sb_count_lines(const char *path);
int sb_sh_out(const char *cmd, char *out, size_t len);
/* create() with cfg (stolen), the sweep op, then wait for the probe. */
void *sb_make_instance(json_t *cfg, int sweep);
/* destroy() an instance sb_make_instance made, and free its host handle
 * (a plugin's own handle since ABI 1.4: its metrics are described on it). */
void sb_destroy(void *iso);
/* Load the plugin into a fresh host on a fresh loop (images from
 * image_dir, data under data_dir). */
int sb_host_init(const char *data_dir, const char *image_dir);
void sb_host_clean(void);

#endif
