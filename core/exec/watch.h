/*
 * The watch hub: the one owner of the live state of the executions this
 * node knows about, and of everyone waiting on them.
 *
 * One record (struct eai_live) per execution: the last status known here,
 * whether a run of this node produces it (and its output so far, capped),
 * whether it was created here and still counts against its tenant's queue
 * bound, a cancel that arrived while it was being claimed here, and the
 * parked long-polls and event streams (subscribers) waiting on it.
 *
 * The scheduler publishes (status, output, terminal record); the routes
 * subscribe (long-poll GET ?wait_s=, GET /events).  The hub answers the
 * subscribers itself: terminal records are handed to them directly, not
 * re-read; executions running on another replica are re-read from storage
 * every second.  It calls neither the routes nor the scheduler.
 * Loop thread only (docs/executions.md, "Inside").
 */
#ifndef EAI_CORE_WATCH_H
#define EAI_CORE_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <eai/isolation.h>

#include "app.h"
#include "http/request.h"

struct eai_watch;
struct eai_live;

struct eai_watch *eai_watch_new(struct eai_app *app);
/* Answer every subscriber (long-polls 503 storage_unavailable, streams
 * end) and drop the owner's reference; later publishes are ignored. */
void eai_watch_close(struct eai_watch *w);

/* --- admission (routes) */
/* id was recorded as queued here: it counts against its tenant's bound
 * until it runs or ends. */
void eai_watch_queued(struct eai_watch *w, const char *id, const char *tenant);
int64_t eai_watch_queued_count(const struct eai_watch *w, const char *tenant);
/* A cancel of id arrived while no local run had it (a claim may be in
 * flight): the scheduler takes it right after start.  Forgotten after 60 s. */
void eai_watch_cancel_pending(struct eai_watch *w, const char *id);

/* --- subscribers (routes); rec is the record just read from storage */
/* Park r until id is terminal or wait_s seconds passed, then answer the
 * public view.  -1 when it cannot (r is still the caller's). */
int eai_watch_poll(struct eai_watch *w, struct eai_req *r, const json_t *rec, int wait_s);
/* r streams (already started): the events with an id above last_id (-1:
 * all; sse.h) follow: the current status, the output so far and the live
 * output events of a local run, then the terminal status.  -1 when it
 * cannot (the caller ends the stream). */
int eai_watch_stream(struct eai_watch *w, struct eai_req *r, const json_t *rec, int64_t last_id);
/* The public view of rec; for an execution running here, with its output
 * so far (capped as the final record is). */
json_t *eai_watch_view(const struct eai_watch *w, const json_t *rec);
/* Worker: one execution as GET, its event stream and the long-polls' re-reads
 * need it: the light read (exec_list {id}: no output, no files_in, stdin or
 * env), and the whole record only once it is terminal (its inputs are
 * scrubbed by then; a non-terminal record has no stored output).  Reads
 * never load inputs (issue 16.3).  0 (*out NULL when absent) or -1. */
struct eai_app;
struct eai_error;
int eai_watch_read(struct eai_app *app, const char *tenant, const char *id, json_t **out, struct eai_error **err);
/* 1 when tenant may hold one more long-poll (stream 0) or event stream
 * (stream 1) here: limits.max_polls_per_tenant / max_streams_per_tenant
 * (issue 16.3).  Checked by the routes right before eai_watch_poll /
 * eai_watch_stream, in the same loop callback. */
int eai_watch_room(const struct eai_watch *w, const char *tenant, int stream);

/* --- publishers (scheduler) */
/* A run of this node starts (or is reattached): status running, output
 * kept up to output_limit bytes per stream.  The record stays pinned
 * until eai_watch_release.  NULL when out of memory. */
struct eai_live *eai_watch_run(struct eai_watch *w, const char *id, const char *tenant, size_t output_limit);
/* Output of the run (the kept prefix is streamed to subscribers). */
void eai_watch_output(struct eai_live *l, enum eai_iso_stream s, const char *data, size_t len);
/* The run ended; the backend says the last n bytes of its stderr were the
 * runtime's words, not the program's (eai_iso_result stderr_runtime_bytes):
 * they are dropped from what is kept (not from a truncated stream: they
 * were past the cap), and the stderr held back from live event streams
 * (the last EAI_WATCH_ERR_HOLD bytes while the run is alive, where such
 * words would be) goes out. */
#define EAI_WATCH_ERR_HOLD 4096
void eai_watch_output_end(struct eai_live *l, size_t stderr_runtime_bytes);
/* An execution fed through streamed stdin: its stderr is not held back
 * (an interactive program's prompts, and the stdout after them, come at
 * once; a runtime's failure line may then reach a live stream, never the
 * record).  NULL: no-op. */
void eai_watch_no_err_hold(struct eai_live *l);
/* Output kept so far: borrowed, unchanged once the run exited (a worker may
 * read it then). */
void eai_watch_output_get(const struct eai_live *l, enum eai_iso_stream s, const char **data,
                          size_t *len, int *truncated);
/* The order of the run's output events for the terminal record
 * ("output_events", sse.h).  Like eai_watch_output_get: once the run
 * exited, on any thread.  New array or NULL. */
json_t *eai_watch_output_events(const struct eai_live *l);
/* id changed status.  Terminal: rec is the terminal record as stored (it is
 * handed to the subscribers) or NULL (they re-read it). */
void eai_watch_status(struct eai_watch *w, const char *id, const char *tenant, const char *status,
                      const json_t *rec);
/* 1 (and forgets it) when a cancel for id is pending (see above). */
int eai_watch_take_cancel(struct eai_watch *w, const char *id);
/* 1 and the output so far when a run of this node produces id, else 0. */
int eai_watch_local_output(const struct eai_watch *w, const char *id, enum eai_iso_stream s,
                           const char **data, size_t *len);
/* The scheduler is done with l. */
void eai_watch_release(struct eai_live *l);

#endif
