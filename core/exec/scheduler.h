/*
 * The node-local scheduler: claims queued executions from storage (shared
 * queue: several replicas may claim from one PostgreSQL), starts them on
 * their profile's isolation backend, keeps their leases alive, collects
 * their output and writes the terminal record.  Also restart recovery.
 *
 * It publishes status, output and terminal records to the watch hub
 * (exec/watch.h) and knows nothing of requests or routes.  Everything here
 * runs on the loop thread; storage calls, and the encoding of a finished
 * run's output and files, go to workers.  Internal to core/exec/
 * (docs/executions.md).
 */
#ifndef EAI_CORE_SCHEDULER_H
#define EAI_CORE_SCHEDULER_H

#include <eai/isolation.h>

#include "app.h"
#include "exec/watch.h"

struct eai_sched;

/* Recovery scan (synchronous: before the server listens), then claiming.
 * NULL and *err on failure. */
struct eai_sched *eai_sched_start(struct eai_app *app, struct eai_watch *hub, struct eai_error **err);
/* Stop claiming; running executions are cancelled and recorded as
 * interrupted; callbacks arriving later are ignored.  Drops the owner's
 * reference: s is freed when its last worker job returns. */
void eai_sched_stop(struct eai_sched *s);
/* Work may be pending: claim soon (coalesced). */
void eai_sched_kick(struct eai_sched *s);
/* A claim run by the worker job that queues an execution, right after its
 * commit: one loop-worker round trip less than eai_sched_kick after the
 * answer.  Take it on the loop before submitting the job (NULL: none due
 * now, kick after the commit instead); eai_sched_claim_work on the worker
 * (only once the row is committed; not calling it is allowed); then
 * eai_sched_claim_done on the loop, exactly once, whether it ran or not
 * (starts what it claimed; NULL is a no-op). */
struct eai_sched_claim;
struct eai_sched_claim *eai_sched_claim_take(struct eai_sched *s);
void eai_sched_claim_work(struct eai_sched_claim *c);
void eai_sched_claim_done(struct eai_sched_claim *c);
/* Ask the local run of id to stop: 1 when there is one, else 0. */
int eai_sched_cancel_local(struct eai_sched *s, const char *id);
/* Streamed stdin (POST .../stdin) for the local run of id in tenant: 1
 * when there is one (*err NULL: taken, *pending the bytes it holds; else
 * the refusal: stdin_not_streamed, stdin_closed, stdin_busy), 0 when this
 * node runs no such execution. */
int eai_sched_stdin(struct eai_sched *s, const char *tenant, const char *id, const unsigned char *data, size_t len,
                    int eof, size_t *pending, struct eai_error **err);
/* Runs of this node (slots in use). */
int eai_sched_running(const struct eai_sched *s);
/* Drain: claim nothing new; runs (and a claim in flight) go on, leases are
 * renewed. */
void eai_sched_drain(struct eai_sched *s);
/* 1 while a run is live or its end is being recorded, or a claim is in
 * flight. */
int eai_sched_busy(const struct eai_sched *s);

/* 1 when a not-ready probe result means "first probe still running". */
int eai_iso_probe_pending(const struct eai_iso_probe *pr);

#endif
