/*
 * W3C Trace Context (https://www.w3.org/TR/trace-context/#traceparent-header)
 * and spans with a bounded export queue (core/obs/telemetry.h says how it drains).
 *
 * Threading: spans may start and end on any thread; the queue is guarded
 * by a mutex.  The export timer and the exporter calls run on the loop.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "base/log.h"
#include "obs/metrics.h"
#include "obs/telemetry.h"
#include "obs/trace.h"
#include "base/util.h"

#define EAI_TRACE_TICK_MS 200
#define EAI_TRACE_MAX_INFLIGHT 2
#define EAI_SPAN_MAX_ATTRS 64

struct eai_span {
    char trace_id[33];
    char span_id[17];
    char parent_span_id[17];
    char *name;
    enum eai_span_kind kind;
    int64_t start_ns;
    json_t *attrs;
};

static struct {
    pthread_mutex_t mu;
    json_t *queue;                       /* array of finished spans */
    const struct eai_telemetry_ops *ops; /* NULL: spans go to the debug log */
    void *self;
    struct event_base *base;
    struct event *timer;
    int64_t last_flush_ms;
    int inflight;
} eai_tr = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ------------------------------------------------------------ traceparent */

static int hex_lower(const char *s, size_t n) { return eai_hex_lower_ok(s, n); }

/* eight characters a word (every request checks its trace id) */
#define ONES8 0x0101010101010101ull
static int all_zero(const char *s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w != ONES8 * '0')
            return 0;
    }
    for (; i < n; i++)
        if (s[i] != '0')
            return 0;
    return 1;
}

static unsigned hexbyte(const char *s)
{
    unsigned v = 0;
    for (int i = 0; i < 2; i++)
        v = v * 16 + (unsigned)(s[i] <= '9' ? s[i] - '0' : s[i] - 'a' + 10);
    return v;
}

/*
 * version "-" trace-id "-" parent-id "-" trace-flags, 2/32/16/2 lowercase
 * hex.  Version ff is invalid.  Version 00 must be exactly 55 characters.
 * A higher version is parsed as 00 when it is at least 55 characters and,
 * if longer, continues with "-" (the spec's forward-compatibility rule).
 */
int eai_traceparent_parse(const char *h, struct eai_trace_ctx *out)
{
    if (!h || !out)
        return -1;
    size_t n = strlen(h);
    if (n < 55 || !hex_lower(h, 2) || h[2] != '-' || h[35] != '-' || h[52] != '-')
        return -1;
    unsigned version = hexbyte(h);
    if (version == 0xff)
        return -1;
    if (version == 0 && n != 55)
        return -1;
    if (version > 0 && n > 55 && h[55] != '-')
        return -1;
    if (!hex_lower(h + 3, 32) || !hex_lower(h + 36, 16) || !hex_lower(h + 53, 2))
        return -1;
    if (all_zero(h + 3, 32) || all_zero(h + 36, 16))
        return -1;
    struct eai_trace_ctx c = {0};
    memcpy(c.trace_id, h + 3, 32);
    memcpy(c.span_id, h + 36, 16);
    c.flags = hexbyte(h + 53);
    if (version > 0)
        c.flags &= 0x01;  /* only the sampled bit is known to us */
    c.valid = 1;
    *out = c;
    return 0;
}

static void random_id(char *out, size_t nbytes)
{
    do {
        if (eai_random_hex(out, nbytes) < 0) {
            /* getrandom failing is near impossible; still never emit zeros */
            unsigned long long t = (unsigned long long)eai_monotonic_ns();
            for (size_t i = 0; i < 2 * nbytes; i++)
                out[i] = "0123456789abcdef"[(t >> ((i % 16) * 4)) & 15];
            out[2 * nbytes] = '\0';
            out[0] = '1';
        }
    } while (all_zero(out, 2 * nbytes));
}

void eai_trace_ctx_generate(struct eai_trace_ctx *out)
{
    struct eai_trace_ctx c = {0};
    /* both ids from one draw (every request without a traceparent) */
    char ids[49];
    int rc;
    while ((rc = eai_random_hex(ids, 24)) == 0 && (all_zero(ids, 32) || all_zero(ids + 32, 16)))
        ;
    if (rc == 0) {
        memcpy(c.trace_id, ids, 32);
        memcpy(c.span_id, ids + 32, 16);
    } else {
        random_id(c.trace_id, 16);
        random_id(c.span_id, 8);
    }
    c.flags = 0x01;
    c.valid = 0;
    *out = c;
}

void eai_traceparent_format(const char *trace_id, const char *span_id, unsigned flags, char out[56])
{
    /* on every answer: copies, not snprintf (same text: "%.32s" and "%.16s" stop at a NUL) */
    static const char hx[] = "0123456789abcdef";
    size_t tl = strnlen(trace_id, 32), sl = strnlen(span_id, 16), n = 0;
    out[n++] = '0';
    out[n++] = '0';
    out[n++] = '-';
    memcpy(out + n, trace_id, tl);
    n += tl;
    out[n++] = '-';
    memcpy(out + n, span_id, sl);
    n += sl;
    out[n++] = '-';
    out[n++] = hx[(flags >> 4) & 0xfu];
    out[n++] = hx[flags & 0xfu];
    out[n] = '\0';
}

/* ------------------------------------------------------------ spans */

static int id_ok(const char *s, size_t n)
{
    return s && strnlen(s, n + 1) == n && hex_lower(s, n) && !all_zero(s, n);
}

/* Whether an exporter is set: one atomic load, no lock (every request asks,
 * twice); the pointer is written under the lock with an atomic store. */
static int have_sink(void)
{
    return __atomic_load_n(&eai_tr.ops, __ATOMIC_ACQUIRE) != NULL;
}

int eai_trace_recording(void)
{
    return have_sink() || eai_log_enabled(EAI_LOG_DEBUG);
}

struct eai_span *eai_span_start(const char *name, enum eai_span_kind kind,
                                const char *trace_id, const char *parent_span_id)
{
    struct eai_span *s = eai_zalloc(sizeof(*s));
    if (!s)
        return NULL;
    /* a span nobody will read (no exporter, log level above debug) keeps
     * its ids (traceparent, children) and nothing else: no name, no
     * attributes, no document at its end */
    int rec = eai_trace_recording();
    s->name = rec ? strdup(name ? name : "span") : NULL;
    s->attrs = rec ? json_object() : NULL;
    if (rec && (!s->name || !s->attrs)) {
        free(s->name);
        json_decref(s->attrs);
        free(s);
        return NULL;
    }
    s->kind = (kind > 0 && kind < EAI_SPAN_KIND_MAX) ? kind : EAI_SPAN_INTERNAL;
    if (id_ok(trace_id, 32))
        memcpy(s->trace_id, trace_id, 33);
    else
        random_id(s->trace_id, 16);
    random_id(s->span_id, 8);
    if (id_ok(parent_span_id, 16))
        memcpy(s->parent_span_id, parent_span_id, 17);
    s->start_ns = eai_now_ns();
    return s;
}

void eai_span_set_start_ms(struct eai_span *s, int64_t epoch_ms)
{
    if (s && epoch_ms > 0 && epoch_ms * 1000000LL < s->start_ns)
        s->start_ns = epoch_ms * 1000000LL;
}

const char *eai_span_trace_id(const struct eai_span *s) { return s ? s->trace_id : NULL; }
const char *eai_span_id(const struct eai_span *s) { return s ? s->span_id : NULL; }

static void span_set(struct eai_span *s, const char *key, json_t *v)
{
    if (!s || !key || !v || !s->attrs) {
        json_decref(v);
        return;
    }
    if (json_object_size(s->attrs) >= EAI_SPAN_MAX_ATTRS && !json_object_get(s->attrs, key)) {
        json_decref(v);
        return;
    }
    json_object_set_new(s->attrs, key, v);
}

void eai_span_set_str(struct eai_span *s, const char *key, const char *value)
{
    if (value && s && s->attrs)
        span_set(s, key, json_string(value));  /* NULL on invalid UTF-8: dropped */
}

void eai_span_set_int(struct eai_span *s, const char *key, int64_t value)
{
    if (s && s->attrs)
        span_set(s, key, json_integer((json_int_t)value));
}

void eai_span_set_double(struct eai_span *s, const char *key, double value)
{
    if (s && s->attrs)
        span_set(s, key, json_real(value));
}

static const char *kind_name(enum eai_span_kind k)
{
    switch (k) {
    case EAI_SPAN_SERVER: return "server";
    case EAI_SPAN_CLIENT: return "client";
    default: return "internal";
    }
}

static void span_free(struct eai_span *s)
{
    json_decref(s->attrs);
    free(s->name);
    free(s);
}

void eai_span_end(struct eai_span *s, int error)
{
    if (!s)
        return;
    int sink = have_sink();
    if (!s->attrs || (!sink && !eai_log_enabled(EAI_LOG_DEBUG))) { /* nobody reads it: no document */
        span_free(s);
        return;
    }
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:O}",
                          "trace_id", s->trace_id, "span_id", s->span_id,
                          "parent_span_id", s->parent_span_id, "name", s->name,
                          "kind", kind_name(s->kind), "start_ns", (json_int_t)s->start_ns,
                          "end_ns", (json_int_t)eai_now_ns(), "status", error ? "error" : "ok",
                          "attributes", s->attrs);
    span_free(s);
    if (!o) {
        eai_metrics_add("eai_trace_spans_dropped_total", NULL, 1);
        return;
    }
    pthread_mutex_lock(&eai_tr.mu);
    if (eai_tr.ops) {
        if (!eai_tr.queue)
            eai_tr.queue = json_array();
        if (eai_tr.queue && json_array_size(eai_tr.queue) < EAI_TRACE_QUEUE_MAX &&
            json_array_append(eai_tr.queue, o) == 0) {
            pthread_mutex_unlock(&eai_tr.mu);
            json_decref(o);
            return;
        }
        pthread_mutex_unlock(&eai_tr.mu);
        eai_metrics_add("eai_trace_spans_dropped_total", NULL, 1);
        json_decref(o);
        return;
    }
    pthread_mutex_unlock(&eai_tr.mu);
    if (eai_log_enabled(EAI_LOG_DEBUG)) {
        char *line = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        if (line)
            eai_log("trace", EAI_LOG_DEBUG, "span %s", line);
        free(line);
    }
    json_decref(o);
}

/* ------------------------------------------------------------ export */

struct eai_trace_batch {
    size_t n;
};

static void export_done(void *arg, int ok, const char *error)
{
    struct eai_trace_batch *b = arg;
    if (!ok) {
        eai_metrics_add("eai_trace_spans_dropped_total", NULL, (double)b->n);
        eai_log("trace", EAI_LOG_WARN, "span export failed, %zu spans dropped: %s", b->n,
                error ? error : "unknown error");
    }
    pthread_mutex_lock(&eai_tr.mu);
    eai_tr.inflight--;
    pthread_mutex_unlock(&eai_tr.mu);
    free(b);
}

/* Hand one batch to the exporter when due (or when forced).  Loop thread. */
static int export_one(int force)
{
    pthread_mutex_lock(&eai_tr.mu);
    size_t n = eai_tr.queue ? json_array_size(eai_tr.queue) : 0;
    int64_t now = eai_now_ms();
    int due = n > 0 && (force || n >= EAI_TRACE_BATCH_MAX || now - eai_tr.last_flush_ms >= EAI_TRACE_FLUSH_MS);
    if (!eai_tr.ops || !due || eai_tr.inflight >= EAI_TRACE_MAX_INFLIGHT) {
        if (n == 0)
            eai_tr.last_flush_ms = now;
        pthread_mutex_unlock(&eai_tr.mu);
        return 0;
    }
    size_t take = n < EAI_TRACE_BATCH_MAX ? n : EAI_TRACE_BATCH_MAX;
    json_t *batch = json_array();
    struct eai_trace_batch *b = calloc(1, sizeof(*b));
    if (!batch || !b) {
        pthread_mutex_unlock(&eai_tr.mu);
        json_decref(batch);
        free(b);
        return 0;
    }
    for (size_t i = 0; i < take; i++)
        json_array_append(batch, json_array_get(eai_tr.queue, i));
    for (size_t i = 0; i < take; i++)
        json_array_remove(eai_tr.queue, 0);
    b->n = take;
    eai_tr.inflight++;
    eai_tr.last_flush_ms = now;
    const struct eai_telemetry_ops *ops = eai_tr.ops;
    void *self = eai_tr.self;
    pthread_mutex_unlock(&eai_tr.mu);
    if (ops->export_spans(self, batch, export_done, b) != 0) {
        /* done was not called: account here */
        export_done(b, 0, "exporter refused the batch");
    }
    json_decref(batch);
    return 1;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    while (export_one(0))
        ;
}

int eai_trace_exporter_start(struct event_base *base, const struct eai_telemetry_ops *ops, void *self)
{
    if (!base || !ops || !ops->export_spans)
        return -1;
    struct event *t = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    if (!t)
        return -1;
    struct timeval tv = {0, EAI_TRACE_TICK_MS * 1000};
    if (event_add(t, &tv) < 0) {
        event_free(t);
        return -1;
    }
    pthread_mutex_lock(&eai_tr.mu);
    __atomic_store_n(&eai_tr.ops, ops, __ATOMIC_RELEASE);
    eai_tr.self = self;
    eai_tr.base = base;
    eai_tr.timer = t;
    eai_tr.last_flush_ms = eai_now_ms();
    pthread_mutex_unlock(&eai_tr.mu);
    return 0;
}

void eai_trace_flush(void)
{
    /* bounded: at most the whole queue in batches, in-flight limit aside */
    for (int i = 0; i < EAI_TRACE_QUEUE_MAX / EAI_TRACE_BATCH_MAX + 1; i++) {
        pthread_mutex_lock(&eai_tr.mu);
        int room = eai_tr.inflight < EAI_TRACE_MAX_INFLIGHT;
        pthread_mutex_unlock(&eai_tr.mu);
        if (!room || !export_one(1))
            break;
    }
}

void eai_trace_exporter_stop(void)
{
    eai_trace_flush();
    pthread_mutex_lock(&eai_tr.mu);
    struct event *t = eai_tr.timer;
    size_t left = eai_tr.queue ? json_array_size(eai_tr.queue) : 0;
    eai_tr.timer = NULL;
    __atomic_store_n(&eai_tr.ops, NULL, __ATOMIC_RELEASE);
    eai_tr.self = NULL;
    eai_tr.base = NULL;
    json_decref(eai_tr.queue);
    eai_tr.queue = NULL;
    pthread_mutex_unlock(&eai_tr.mu);
    if (left)
        eai_metrics_add("eai_trace_spans_dropped_total", NULL, (double)left);
    if (t)
        event_free(t);
}

int eai_trace_queued(void)
{
    pthread_mutex_lock(&eai_tr.mu);
    int n = eai_tr.queue ? (int)json_array_size(eai_tr.queue) : 0;
    pthread_mutex_unlock(&eai_tr.mu);
    return n;
}

int eai_trace_inflight(void)
{
    pthread_mutex_lock(&eai_tr.mu);
    int n = eai_tr.inflight;
    pthread_mutex_unlock(&eai_tr.mu);
    return n;
}
