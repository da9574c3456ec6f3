/* One execution driven through an isolation backend's callbacks, for the
 * tests (tests/sandbox, tests/runner/test_local_runner): what the callbacks
 * reported, and loop helpers.  Loop thread only. */
#ifndef EAI_TESTS_ISO_RUN_H
#define EAI_TESTS_ISO_RUN_H

#include <stddef.h>

#include <eai/isolation.h>

struct event_base;

struct iso_run {
    struct eai_iso_job job;
    const char *argv[16];
    const char *env[8];
    const char *collect[4];
    struct eai_iso_file files[4];
    int started, done;           /* callback counts: each must end at 1 */
    double t_start, t_started, t_done;
    enum eai_iso_outcome outcome;
    int exit_code, sig;
    enum eai_code error_code;
    char msg[256];               /* error_message */
    char out[1 << 17], err[1 << 14];
    size_t outlen, errlen, out_total;
    double cpu, mbs, dur;
    int nfiles, files_truncated;
    char fpath[8][256];
    char fdata[8][256];
    size_t flen[8];
};

/* on_output, on_started, on_exit filling the struct iso_run given as arg. */
extern const struct eai_iso_callbacks iso_run_cb;

/* calloc'd, argv copied (at most 15), job pointing at it: id, image,
 * profile as given, timeout 30 s, output 1 MiB; the caller sets the rest. */
struct iso_run *iso_run_new(const char *const *argv, const char *image, const char *profile);

double iso_now_s(void);
/* Run base in 20 ms slices until cond(arg) or max_s passed (cond NULL:
 * just run max_s). */
void iso_loop_until(struct event_base *base, int (*cond)(void *), void *arg, double max_s);
int iso_run_done(void *run);     /* cond: on_exit came */

#endif
