/*
 * Inside the scheduler (exec/scheduler.h), shared by its three files:
 *   scheduler.c     claiming, leases, recovery, start and stop;
 *   sched_run.c     one run: the job from the record, start, backend callbacks;
 *   sched_finish.c  the end of a run: encoding on a worker, the terminal write.
 */
#ifndef EAI_CORE_SCHEDULER_INT_H
#define EAI_CORE_SCHEDULER_INT_H

#include <stdint.h>
#include <jansson.h>
#include <eai/isolation.h>

#include "app.h"
#include "exec/scheduler.h"
#include "exec/watch.h"

#define SCHED_COMPONENT "scheduler"
#define SCHED_IDLE_POLL_MS 1000    /* claim poll when nothing is known to be pending */
#define SCHED_RETRY_MS 1000        /* after a storage error */
#define SCHED_FINISH_RETRY_MS 2000 /* exec_finish failed: keep the lease and retry */

struct event;
struct eai_egress_lease;
struct eai_budget;

struct eai_run {
    struct eai_run *next;
    struct eai_sched *s;           /* NULL once orphaned by eai_sched_stop */
    json_t *rec;                   /* the claimed record (owned) */
    const char *id, *tenant;       /* inside rec */
    const struct eai_profile *prof;
    struct eai_plugin_inst *iso;
    void *handle;
    int live;                      /* on_exit pending */
    int finishing;                 /* terminal write pending */
    int cancel_sent;
    int recovered;
    struct eai_live *live_state;   /* status and output, owned by the watch hub */
    size_t output_limit;
    int64_t start_ms;
    int64_t program_ms;            /* when the backend said the program started (0: never) */
    char started_at[32];
    struct eai_span *span;
    /* the job and what it points to */
    struct eai_iso_job job;
    const char **argv, **envp, **collect, **egress;
    char **env_strs;
    size_t nenv;
    unsigned char *stdin_data;
    struct eai_iso_file *files;
    size_t nfiles;
    char traceparent[56];
    /* granted egress through core (net/egress_host.h) */
    struct eai_egress_lease *egress_lease;
    int leasing;                   /* its namespace is being made: not yet started */
    struct eai_vol_att *vol_att;   /* its volumes while it holds them (vol/volume.h) */
    /* its part of the node budget (sched_budget.c), held from its start
     * to its end; budget NULL: none (in a session, on a remote backend) */
    struct eai_budget *budget;
    int64_t bud_memory, bud_cpu;
    int64_t waited_ms;             /* claimed, waited for the budget this long (counts against its timeout) */
};

/* A claimed execution waiting for the node budget (sched_budget.c). */
struct sched_wait {
    struct sched_wait *next;
    json_t *rec;                   /* owned */
    const char *id, *tenant;       /* inside rec */
    int64_t since_ms;              /* claimed */
    int64_t deadline_ms;           /* since + its timeout: then it ends as timeout, never run */
    int64_t memory, cpu;
};

struct eai_sched {
    struct eai_watch *hub;
    struct eai_app *app;
    int refs;                      /* eai_sched_start's + one per worker job or retry timer */
    struct eai_run *runs;          /* live and finishing runs */
    int nlive;                     /* slots in use */
    int claim_inflight, claim_again;
    int renew_inflight, stale_inflight;
    struct event *claim_ev, *renew_ev, *stale_ev;
    int64_t lease_ms;
    int stopping;
    int draining;                  /* eai_sched_drain: no new claims */
    int64_t last_claim_error_ms;
    int64_t last_unready_log_ms;   /* node_can_start's warning, at most every 30 s */
    struct event *gauge_ev;        /* sched_gauge.c: queue gauges every second */
    int gauge_inflight;
    /* claimed executions waiting for the node budget, oldest first */
    struct sched_wait *waiting;
    int nwaiting;
    struct event *wait_ev;         /* retry them (budget given back) and end the late ones */
};

/* A collected file taken out of a backend's result for the worker. */
struct raw_file {
    char *path;
    unsigned char *data;
    size_t len;
};

/* scheduler.c */
void *sched_store_self(const struct eai_app *app);
void sched_timer_in(struct event *ev, int64_t ms);
void sched_unref(struct eai_sched *s);
/* Work on a worker holding a reference on s; 0 or -1. */
int sched_submit(struct eai_sched *s, void (*fn)(void *), void (*done)(void *), void *arg);
void sched_gauges(struct eai_sched *s);

/* sched_gauge.c: eai_sandbox_queued from storage every second */
int sched_gauge_start(struct eai_sched *s);
void sched_gauge_stop(struct eai_sched *s);
void sched_gauge_free(struct eai_sched *s);

/* sched_budget.c: the node budget (exec/budget.h, docs/admission.md) */
int sched_budget_init(struct eai_sched *s);
/* A claimed execution: started when it fits the node budget and its
 * tenant's share (or reserves none: in a session, on a remote backend),
 * else kept waiting (its wait counts against its timeout), or ended
 * (budget_exceeds_share) when it can never fit. */
void sched_budget_admit(struct eai_sched *s, json_t *rec /* stolen */);
/* What an execution reserves: 1 with *memory and *cpu, 0 none. */
int sched_budget_need(const struct eai_sched *s, const json_t *rec, int64_t *memory, int64_t *cpu);
/* Give back what r holds (idempotent). */
void sched_run_budget_give(struct eai_run *r);
/* Waiting executions of tenant (NULL: all). */
int sched_budget_waiting(const struct eai_sched *s, const char *tenant);
/* id waits here: ended as cancelled (1), else 0. */
int sched_budget_cancel(struct eai_sched *s, const char *id);
/* 1 when id waits here. */
int sched_budget_has(const struct eai_sched *s, const char *id);
/* eai_sched_stop: the waiting ones are recorded interrupted. */
void sched_budget_stop(struct eai_sched *s);
void sched_budget_free(struct eai_sched *s);

/* sched_run.c */
const struct eai_isolation_ops *sched_iso_ops(const struct eai_plugin_inst *iso);
/* Start one claimed execution (or reattach one when recover is set);
 * waited_ms: how long it waited for the budget after its claim (taken off
 * its timeout). */
void sched_run_start(struct eai_sched *s, json_t *rec /* stolen */, int recover, int64_t waited_ms);
void sched_run_unlink(struct eai_sched *s, struct eai_run *r);
void sched_run_free(struct eai_run *r);

/* sched_finish.c */
/* Record the end of rec with patch (stolen) and raw files (stolen, may be
 * NULL); run may be NULL (rec is then copied).  encode_output: the worker
 * encodes run's output into the patch first. */
void sched_finish_record(struct eai_sched *s, struct eai_run *run, const json_t *rec, json_t *patch,
                         struct raw_file *raw, size_t nraw, int files_truncated, int encode_output);

#endif
