/* Feeding the event streams (SSE) of the watch hub (watch_int.h): a
 * stream gets the current status, then the output events it does not have
 * (by event id, sse.h), written straight from the run's shared output
 * buffers and paced while its connection's unsent bytes exceed
 * limits.sse_buffer_bytes, then the terminal status once it has caught up.
 * The subscribers themselves (adding, answering, freeing) are watch.c's. */
#include <string.h>

#include <event2/event.h>

#include "exec/watch_int.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/sse.h"

#define SSE_PACE_MS 50              /* a paused stream looks at its buffer again */

/* ------------------------------------------------------------ back-pressure */

/* Each attached event stream is fed from the live output buffers (kept
 * once per run), never from copies: while the connection's unsent bytes
 * exceed limits.sse_buffer_bytes nothing more is written to it, and every
 * SSE_PACE_MS it is looked at again; what a slow reader has not taken yet
 * waits in the shared buffer, not in a per-subscriber copy (issue 16.3). */
static void sse_pace_cb(evutil_socket_t fd, short what, void *arg);

static size_t sse_cap(const struct eai_watch *w)
{
    return w->app->cfg && w->app->cfg->sse_buffer_bytes > 0 ? (size_t)w->app->cfg->sse_buffer_bytes : 256 << 10;
}

/* (watch_int.h; sse_pace_cb resumes a paused one) */
int watch_sse_feed(struct eai_sub *s)
{
    struct eai_live *l = s->l;
    size_t cap = sse_cap(l->w);
    /* while the run is alive the end of stderr is held back: a runtime's
     * failure line there is dropped when the run ends, never streamed */
    size_t err_upto = l->err.len;
    if (l->local && !l->ended && !l->no_err_hold)
        err_upto = l->err.len > EAI_WATCH_ERR_HOLD ? l->err.len - EAI_WATCH_ERR_HOLD : 0;
    for (size_t i = 0; i < l->log.nsent && s->r; i++) {
        int64_t id = EAI_SSE_ID_FIRST_OUTPUT + (int64_t)i;
        if (id <= s->last_id)
            continue;
        const struct eai_outlog_ev *e = &l->log.evs[i];
        if (e->stream && e->off + e->len > err_upto)
            return 1; /* held, and what follows it (order kept) until the run ends */
        if (eai_stream_pending(s->r) > cap) {
            if (!s->pace)
                s->pace = evtimer_new(l->w->app->base, sse_pace_cb, s);
            struct timeval tv = {0, SSE_PACE_MS * 1000};
            if (s->pace)
                evtimer_add(s->pace, &tv);
            return 0;
        }
        const struct eai_outbuf *b = e->stream ? &l->err : &l->out;
        size_t len = e->off >= b->len ? 0 : e->off + e->len <= b->len ? e->len : b->len - e->off;
        if (len) /* (bytes cut at the end, runsc's own lines, send nothing) */
            eai_sse_chunk(s->r, e->stream ? EAI_STREAM_STDERR : EAI_STREAM_STDOUT, id, b->data + e->off, len);
        s->last_id = id;
    }
    return 1;
}

static int sse_paused(const struct eai_sub *s)
{
    return s->pace && evtimer_pending(s->pace, NULL);
}

/* The terminal status of a stream that has caught up, and its end. */
static void sse_finish(struct eai_sub *s)
{
    struct eai_req *r = s->r;
    json_t *rec = s->end_rec;
    s->end_rec = NULL;
    s->r = NULL;
    eai_sse_replay_end(r, rec, s->last_id);
    json_decref(rec);
    watch_sub_done(s);
}

static void sse_pace_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sub *s = arg;
    if (!s->r)
        return;
    if (watch_sse_feed(s) && s->end_rec)
        sse_finish(s);
}

/* (watch_int.h) */
void watch_sse_feed_all(struct eai_live *l, int attach)
{
    for (struct eai_sub *s = l->subs; s; s = s->next)
        if (s->kind == SUB_SSE && s->r && !s->end_rec && (attach || s->attached)) {
            s->attached = 1;
            if (!sse_paused(s))
                watch_sse_feed(s);
        }
}

/* ------------------------------------------------------------ status, start */

void watch_sub_status(struct eai_sub *s, const char *status)
{
    int64_t id = strcmp(status, "queued") == 0 ? EAI_SSE_ID_QUEUED : EAI_SSE_ID_RUNNING;
    if (!s->r || id <= s->last_id)
        return;
    eai_sse_event(s->r, "status", id, json_pack("{s:s}", "status", status));
    s->last_id = id;
}

int eai_watch_stream(struct eai_watch *w, struct eai_req *r, const json_t *rec, int64_t last_id)
{
    struct eai_sub *s = w ? watch_sub_add(w, r, SUB_SSE, rec, 0) : NULL;
    if (!s)
        return -1;
    s->last_id = last_id;
    struct eai_live *l = s->l;
    watch_sub_status(s, l->local ? "running" : eai_jstr(rec, "status") ? eai_jstr(rec, "status") : "queued");
    if (l->local) {
        /* output so far (paced), then live events */
        s->attached = 1;
        watch_sse_feed(s);
    }
    return 0;
}
