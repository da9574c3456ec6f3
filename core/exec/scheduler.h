/*
 * The node-local scheduler: claims queued executions from storage (shared
 * queue: several replicas may claim from one PostgreSQL), starts them on
 * their profile's isolation backend, keeps their leases alive, collects
 * their output and writes the terminal record.  Also restart recovery.
 * Everything here runs on the loop thread; storage calls go to workers.
 *
 * Internal to core/exec/ (docs/executions.md).
 */
#ifndef EAI_CORE_SCHEDULER_H
#define EAI_CORE_SCHEDULER_H

#include <stdint.h>
#include <jansson.h>
#include <eai/isolation.h>

#include "app.h"
#include "exec/exec_result.h"

struct event;
struct eai_sched;
struct eai_waiter;

/* app->exec: shared by exec.c (routes, waiters) and scheduler.c. */
struct eai_exec_state {
    struct eai_app *app;
    struct eai_sched *sched;          /* scheduler.c */
    /* exec.c */
    struct eai_waiter *waiters;       /* parked long-polls and SSE streams */
    struct event *poll_ev;            /* re-checks waiters of remote runs */
    json_t *queued;                   /* tenant -> queued executions created here */
    struct eai_pend *pending;         /* requests waiting for a worker job */
    json_t *cancel_pending;           /* id -> ms: cancelled while being claimed here */
    int stopping;
    int refs;                         /* eai_exec_start's + one per worker job */
};

void eai_exec_state_ref(struct eai_exec_state *st);
/* Frees the state (and the scheduler) at the last reference. */
void eai_exec_state_unref(struct eai_exec_state *st);
/* Submit storage work holding a reference; 0 or -1 (queue full/stopped). */
int eai_exec_submit(struct eai_exec_state *st, void (*fn)(void *), void (*done)(void *), void *arg);
void eai_sched_free(struct eai_sched *s);

/* A run of this node, as seen by the SSE streams. */
struct eai_run;

int eai_sched_start(struct eai_app *app, struct eai_exec_state *st, struct eai_error **err);
/* Stop claiming; running executions are cancelled and recorded as
 * interrupted; callbacks arriving later are ignored. */
void eai_sched_stop(struct eai_exec_state *st);
/* Work may be pending: claim soon (coalesced). */
void eai_sched_kick(struct eai_exec_state *st);
/* Ask the local run of id to stop: 1 when there is one, else 0. */
int eai_sched_cancel_local(struct eai_exec_state *st, const char *id);
int eai_sched_running(const struct eai_exec_state *st);
/* The local run of id (running or finishing), NULL when none. */
const struct eai_run *eai_sched_find(const struct eai_exec_state *st, const char *id);
/* Output so far of a local run (borrowed until the next loop turn). */
void eai_sched_run_output(const struct eai_run *r, enum eai_iso_stream s,
                          const char **data, size_t *len);

/* 1 (and forgets it) when a cancel arrived for id while it was being
 * claimed by this node: the scheduler cancels the run right after start. */
int eai_exec_take_cancel(struct eai_exec_state *st, const char *id);

/* 1 when a not-ready probe result means "first probe still running". */
int eai_iso_probe_pending(const struct eai_iso_probe *pr);

/* Callbacks from the scheduler into exec.c (waiters and streams). */
/* A run produced output that was kept (within the cap). */
void eai_exec_notify_output(struct eai_exec_state *st, const char *id,
                            enum eai_iso_stream s, const char *data, size_t len);
/* An execution changed status; terminal ones are already in storage. */
void eai_exec_notify_status(struct eai_exec_state *st, const char *id, const char *tenant,
                            const char *status);

#endif
