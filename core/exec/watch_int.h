/*
 * Inside the watch hub (exec/watch.h), shared by its two files:
 *   watch.c         the live records, subscribers (long-polls and streams),
 *                   storage re-reads, what the scheduler publishes;
 *   watch_stream.c  feeding the event streams (SSE): the output events a
 *                   stream does not have yet, paced for slow readers, its
 *                   status events, and its end once it has caught up.
 * Loop thread only.
 */
#ifndef EAI_CORE_WATCH_INT_H
#define EAI_CORE_WATCH_INT_H

#include <stdint.h>
#include <jansson.h>

#include "app.h"
#include "exec/exec_result.h"
#include "exec/outlog.h"
#include "exec/watch.h"
#include "http/request.h"

struct event;

#define WATCH_BUCKETS 256

enum sub_kind { SUB_POLL = 1, SUB_SSE = 2 };

struct eai_sub {
    struct eai_sub *next;
    struct eai_live *l;
    struct eai_req *r;
    enum sub_kind kind;
    int64_t deadline_ms;            /* SUB_POLL */
    struct event *timer;            /* SUB_POLL */
    int attached;                   /* SUB_SSE: receives the local run's output live */
    int64_t last_id;                /* SUB_SSE: id of the last event the client has (-1 none) */
    int64_t ping_ms;                /* SUB_SSE: next heartbeat */
    struct event *pace;             /* SUB_SSE: waiting for a slow reader to take its bytes */
    json_t *end_rec;                /* SUB_SSE: terminal, its remaining output still to send */
    char tenant[64];                /* the subscriber's, counted against its limits */
};

struct eai_live {
    struct eai_live *next;          /* bucket chain */
    struct eai_watch *w;
    char id[64], tenant[64];
    char status[16];                /* last status known here ("" unknown) */
    int local;                      /* a run of this node produces it */
    int pins;                       /* the scheduler's */
    int queued_here;                /* counts against its tenant's queue bound */
    int reading;                    /* a storage re-read is in flight */
    int64_t cancel_ms;              /* pending cancel (0: none) */
    int ended;                      /* the local run exited (eai_watch_output_end) */
    int no_err_hold;                /* stdin streamed: stderr not held back (eai_watch_no_err_hold) */
    struct eai_outbuf out, err;
    struct eai_outlog log;          /* output events in the order written (sse.h) */
    struct event *flush_ev;         /* sends the gathering ones (EAI_SSE_COALESCE_MS) */
    struct eai_sub *subs;
};

struct eai_watch {
    struct eai_app *app;
    struct eai_live *buckets[WATCH_BUCKETS];
    json_t *queued;                 /* tenant -> records with queued_here */
    json_t *nsubs[2];               /* tenant -> its long-polls [0], event streams [1] */
    struct event *poll_ev;
    int closed;
    int refs;                       /* the owner's + one per record */
};

/* ---- watch.c */
/* A subscriber of kind for r on the record rec (long-polls: wait_s); NULL
 * when it cannot (r is still the caller's). */
struct eai_sub *watch_sub_add(struct eai_watch *w, struct eai_req *r, enum sub_kind kind, const json_t *rec,
                              int wait_s);
/* Unlink s (answered: s->r already replied or NULL) and free it. */
void watch_sub_done(struct eai_sub *s);

/* ---- watch_stream.c */
/* Send s the output events it does not have (ids above s->last_id) while
 * its connection's buffer stays under the cap.  1 when caught up (or held),
 * 0 when paused (it resumes by itself). */
int watch_sse_feed(struct eai_sub *s);
/* Feed every event stream of l not paused nor ending; attach: the ones not
 * attached yet too (they receive the local run's output live from now on). */
void watch_sse_feed_all(struct eai_live *l, int attach);
/* A status event (non-terminal) to s when it does not have it. */
void watch_sub_status(struct eai_sub *s, const char *status);

#endif
