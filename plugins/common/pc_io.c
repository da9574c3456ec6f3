/*
 * A run's stdin/stdout/stderr pipes and the common part of its result, for
 * the gVisor and Kata backends.  Loop thread only, never blocking.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "eai_pc.h"

void eai_pc_stream_close(struct eai_pc_stream *s)
{
    if (s->ev) {
        event_free(s->ev);
        s->ev = NULL;
    }
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

void eai_pc_stream_read(struct eai_pc_stream *s, int max_reads, int64_t cap, char *tail, size_t *tail_len,
                        const struct eai_iso_callbacks *cb, void *cb_arg, const int *muted)
{
    char buf[65536];
    for (int i = 0; s->fd >= 0 && (max_reads <= 0 || i < max_reads); i++) {
        ssize_t r = read(s->fd, buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return;
        if (r <= 0) {
            eai_pc_stream_close(s);
            return;
        }
        s->total += r;
        if (s->which == EAI_STREAM_STDERR) {
            /* Keep the tail for the runtime's own start-up errors. */
            size_t n = (size_t)r > EAI_PC_ERR_TAIL ? EAI_PC_ERR_TAIL : (size_t)r;
            const char *src = buf + r - n;
            if (*tail_len + n > EAI_PC_ERR_TAIL) {
                size_t drop = *tail_len + n - EAI_PC_ERR_TAIL;
                memmove(tail, tail + drop, *tail_len - drop);
                *tail_len -= drop;
            }
            memcpy(tail + *tail_len, src, n);
            *tail_len += n;
        }
        /* Past the cap we keep draining so the sandbox never blocks. */
        if (s->delivered < cap) {
            size_t n = (size_t)r;
            if ((int64_t)n > cap - s->delivered)
                n = (size_t)(cap - s->delivered);
            s->delivered += (int64_t)n;
            if (cb->on_output && !*muted)
                cb->on_output(cb_arg, s->which, buf, n);
            if ((size_t)r > n)
                s->delivered = cap + 1;
        }
    }
}

int eai_pc_stdin_pump(int fd, const unsigned char *data, size_t len, size_t *off)
{
    /* A closed reader must not raise SIGPIPE in the server. */
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    while (*off < len) {
        ssize_t w = write(fd, data + *off, len - *off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        if (w <= 0) {
            *off = len;
            if (errno == EPIPE) {
                struct timespec zero = {0, 0};
                sigtimedwait(&pipe_set, NULL, &zero);
            }
            break;
        }
        *off += (size_t)w;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return *off >= len;
}

void eai_pc_result_init(struct eai_iso_result *r, int64_t t_start_ns, int64_t t_end_ns, double cpu_seconds,
                        double peak_mb, const struct eai_pc_collect_result *col)
{
    memset(r, 0, sizeof(*r));
    r->size = sizeof(*r);
    r->exit_code = -1;
    double dur = t_start_ns && t_end_ns > t_start_ns ? (double)(t_end_ns - t_start_ns) / 1e9 : 0;
    r->duration_s = dur;
    r->cpu_seconds = cpu_seconds;
    r->peak_memory_mb = peak_mb;
    r->memory_mb_seconds = peak_mb * dur;
    r->files = col->files;
    r->nfiles = col->nfiles;
    r->files_truncated = col->truncated;
    /* the host may take the bytes (isolation.h): the runner frees with
     * free() what is left after on_exit, and free(NULL) is a no-op */
    r->files_movable = 1;
}

size_t eai_pc_runtime_delivered(const struct eai_pc_stream *err, size_t rt_len)
{
    int64_t delivered = err->delivered;
    if (delivered > err->total)
        delivered = err->total; /* delivered = cap + 1 marks "more than the cap" */
    int64_t program = err->total - (int64_t)rt_len;
    if (program < 0 || delivered <= program)
        return 0;
    return (size_t)(delivered - program);
}

void eai_pc_result_exited(struct eai_iso_result *r, int code)
{
    r->outcome = EAI_OUT_EXITED;
    r->exit_code = code;
    if (code > 128 && code < 128 + 65)
        r->signal = code - 128;
}

int eai_pc_fail(char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    return -1;
}

void eai_pc_result_failed(struct eai_iso_result *r, char *msg, size_t msglen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msglen, fmt, ap);
    va_end(ap);
    r->outcome = EAI_OUT_ERROR;
    r->error_code = EAI_E_SANDBOX_FAILED;
    r->error_message = msg;
}
