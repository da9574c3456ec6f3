/*
 * The worker jobs of the routes besides executions (manifests, FinOps,
 * readiness): one struct, parked on http/park.c.  work runs on a worker,
 * done on the loop with j->r set (it replies exactly once).
 */
#ifndef EAI_CORE_ROUTES_JOB_H
#define EAI_CORE_ROUTES_JOB_H

#include <jansson.h>
#include <eai/plugin.h>

#include "app.h"
#include "http/request.h"

#define MISC_COMPONENT "http"

struct misc_job;
typedef void (*misc_work_fn)(struct misc_job *j);
typedef void (*misc_done_fn)(struct misc_job *j);

struct misc_job {
    struct eai_app *app;
    struct eai_req *r;
    misc_work_fn work;
    misc_done_fn done;
    char tenant[64];
    char kind[96];
    char name[160];    /* manifest name, run_id or agent_id (<= 128) */
    json_t *in;        /* owned */
    json_t *audit;     /* owned */
    json_t *out;       /* owned */
    struct eai_error *err;
    int rc;
    void *ctx;                 /* the route's own, freed with ctx_free */
    void (*ctx_free)(void *ctx);
};

/* A job for r (tenant copied), NULL when out of memory. */
struct misc_job *eai_misc_job_new(struct eai_app *app, struct eai_req *r, misc_work_fn w, misc_done_fn d);
/* Park j->r while j runs on a worker; frees j (after done). */
void eai_misc_job_submit(struct misc_job *j);
/* The storage error of j, answered (http/park.h's one mapping). */
void eai_misc_reply_storage_error(struct misc_job *j);

#endif
