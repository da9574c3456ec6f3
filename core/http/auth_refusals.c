/* Refused authentications, counted per (source, reason) and window, one
 * audit event each (auth_refusals.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/http.h>

#include <eai/storage.h>

#include "http/auth_refusals.h"
#include "app.h"
#include "base/log.h"
#include "base/util.h"
#include "http/req_audit.h"
#include "http/request_int.h"
#include "obs/metrics.h"

struct refusal {
    char source[64];            /* peer address, or "*" for the overflow */
    char reason[32];
    char actor[40];             /* the first key id, or "anonymous" */
    char target[EAI_REFUSAL_TARGET_MAX + 4];
    char request_id[130];       /* the first request of the window */
    uint64_t count;
};

static struct {
    struct refusal e[EAI_REFUSAL_SOURCES];
    int n;
    struct refusal other;       /* every source past the table: "*" */
    int64_t window_start_ms;
    struct event *timer;
    uint64_t total;
} g;

static void peer_of(struct eai_req *r, char *out, size_t len)
{
    char *addr = NULL;
    ev_uint16_t port = 0;
    struct evhttp_connection *c = r->evreq ? evhttp_request_get_connection(r->evreq) : NULL;
    if (c)
        evhttp_connection_get_peer(c, &addr, &port);
    snprintf(out, len, "%s", addr && *addr ? addr : "unknown");
}

/* The first bytes of s, cut at a UTF-8 character boundary, "..." when cut. */
static void truncate_target(char *dst, size_t max, const char *s)
{
    size_t n = strlen(s);
    if (n <= max) {
        memcpy(dst, s, n + 1);
        return;
    }
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    memcpy(dst, s, max);
    memcpy(dst + max, "...", 4);
}

static void emit(struct eai_app *app, const struct refusal *f, const char *start, const char *end)
{
    char id[37];
    eai_uuid_v4(id);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:s, s:s, s:s}}",
                           "id", id, "time", end, "tenant_id", EAI_SYSTEM_TENANT, "actor", f->actor,
                           "action", "auth.refused", "target", f->target, "decision", "deny",
                           "reason", f->reason, "request_id", f->request_id, "trace_id", "",
                           "details", "count", (json_int_t)f->count, "source", f->source,
                           "window_start", start, "window_end", end);
    eai_req_audit_async(app, EAI_SYSTEM_TENANT, ev);
    if (f->count > 1)
        eai_log("auth", EAI_LOG_WARN, "%llu refused authentications (%s) from %s between %s and %s",
                (unsigned long long)f->count, f->reason, f->source, start, end);
}

static void flush(struct eai_app *app)
{
    if (g.n == 0 && !g.other.count)
        return;
    char start[32], end[32];
    eai_time_rfc3339(g.window_start_ms, start);
    eai_time_rfc3339(eai_now_ms(), end);
    for (int i = 0; i < g.n; i++)
        emit(app, &g.e[i], start, end);
    if (g.other.count)
        emit(app, &g.other, start, end);
    g.n = 0;
    memset(&g.other, 0, sizeof g.other);
    g.window_start_ms = 0;
}

static void on_window(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    flush(arg);
}

static void entry_init(struct refusal *f, struct eai_req *r, const char *src, const char *reason)
{
    memset(f, 0, sizeof *f);
    snprintf(f->source, sizeof f->source, "%s", src);
    snprintf(f->reason, sizeof f->reason, "%s", reason);
    snprintf(f->actor, sizeof f->actor, "%s", r->key_id[0] ? r->key_id : "anonymous");
    truncate_target(f->target, EAI_REFUSAL_TARGET_MAX, r->path ? r->path : "");
    snprintf(f->request_id, sizeof f->request_id, "%s", r->request_id);
}

void eai_auth_refusal(struct eai_app *app, struct eai_req *r, const char *reason)
{
    char src[64];
    peer_of(r, src, sizeof src);
    eai_metrics_add("eai_auth_refused_total", NULL, 1);
    if (!g.window_start_ms)
        g.window_start_ms = eai_now_ms();
    struct refusal *f = NULL;
    for (int i = 0; i < g.n && !f; i++)
        if (!strcmp(g.e[i].source, src) && !strcmp(g.e[i].reason, reason))
            f = &g.e[i];
    if (!f && g.n < EAI_REFUSAL_SOURCES) {
        f = &g.e[g.n++];
        entry_init(f, r, src, reason);
    } else if (!f) {
        /* too many (source, reason) pairs this window: one row for all the
         * others, with the first reason and target seen among them */
        f = &g.other;
        if (!f->count)
            entry_init(f, r, "*", reason);
    }
    f->count++;
    if (!g.timer)
        g.timer = evtimer_new(app->base, on_window, app);
    if (g.timer && !evtimer_pending(g.timer, NULL)) {
        struct timeval tv = {EAI_REFUSAL_WINDOW_MS / 1000, (EAI_REFUSAL_WINDOW_MS % 1000) * 1000};
        evtimer_add(g.timer, &tv);
    }
}

void eai_auth_refusals_flush(struct eai_app *app, int stopping)
{
    flush(app);
    if (stopping && g.timer) {
        event_free(g.timer);
        g.timer = NULL;
    }
}
