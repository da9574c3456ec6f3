/* See iso_run.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "iso_run.h"

double iso_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_output(void *arg, enum eai_iso_stream s, const char *d, size_t n)
{
    struct iso_run *r = arg;
    char *buf = s == EAI_STREAM_STDOUT ? r->out : r->err;
    size_t *len = s == EAI_STREAM_STDOUT ? &r->outlen : &r->errlen;
    size_t cap = s == EAI_STREAM_STDOUT ? sizeof(r->out) - 1 : sizeof(r->err) - 1;
    if (s == EAI_STREAM_STDOUT)
        r->out_total += n;
    size_t k = n < cap - *len ? n : cap - *len;
    memcpy(buf + *len, d, k);
    *len += k;
    buf[*len] = '\0';
}

static void on_started(void *arg)
{
    struct iso_run *r = arg;
    r->started++;
    r->t_started = iso_now_s();
}

static void on_exit_cb(void *arg, const struct eai_iso_result *res)
{
    struct iso_run *r = arg;
    r->done++;
    r->t_done = iso_now_s();
    r->outcome = res->outcome;
    r->exit_code = res->exit_code;
    r->sig = res->signal;
    r->error_code = res->error_code;
    snprintf(r->msg, sizeof(r->msg), "%s", res->error_message ? res->error_message : "");
    r->cpu = res->cpu_seconds;
    r->mbs = res->memory_mb_seconds;
    r->dur = res->duration_s;
    r->files_truncated = res->files_truncated;
    r->nfiles = (int)res->nfiles;
    for (size_t i = 0; i < res->nfiles && i < 8; i++) {
        snprintf(r->fpath[i], sizeof(r->fpath[i]), "%s", res->files[i].path);
        size_t n = res->files[i].len < 255 ? res->files[i].len : 255;
        memcpy(r->fdata[i], res->files[i].data, n);
        r->fdata[i][n] = '\0';
        r->flen[i] = res->files[i].len;
    }
}

const struct eai_iso_callbacks iso_run_cb = {
    .size = sizeof(struct eai_iso_callbacks),
    .on_output = on_output,
    .on_started = on_started,
    .on_exit = on_exit_cb,
};

struct iso_run *iso_run_new(const char *const *argv, const char *image, const char *profile)
{
    struct iso_run *r = calloc(1, sizeof(*r));
    if (!r)
        abort();
    size_t i = 0;
    for (; argv && argv[i] && i < 15; i++)
        r->argv[i] = argv[i];
    r->argv[i] = NULL;
    r->job.size = sizeof(r->job);
    r->job.id = "sbx_0b5a7c4e-1f2d-4c3b-9a8e-7d6c5b4a3f2e";
    r->job.tenant_id = "t";
    r->job.profile = profile;
    r->job.image = image;
    r->job.argv = r->argv;
    r->job.env = r->env;
    r->job.timeout_ms = 30000;
    r->job.output_bytes = 1 << 20;
    return r;
}

void iso_loop_until(struct event_base *base, int (*cond)(void *), void *arg, double max_s)
{
    double end = iso_now_s() + max_s;
    while (!(cond && cond(arg)) && iso_now_s() < end) {
        struct timeval tv = {0, 20000};
        event_base_loopexit(base, &tv);
        event_base_loop(base, EVLOOP_ONCE);
    }
}

int iso_run_done(void *run)
{
    return ((struct iso_run *)run)->done;
}
