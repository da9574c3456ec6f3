/*
 * Inside the execution routes (exec.h), shared by their files:
 *   exec.c         state, shared replies, cancel, start and stop;
 *   exec_create.c  admission: POST (validation, probes, queue bound, record);
 *   exec_read.c    GET (long-poll), events (SSE), list, files.
 */
#ifndef EAI_CORE_EXEC_INT_H
#define EAI_CORE_EXEC_INT_H

#include <jansson.h>
#include <eai/plugin.h>

#include "app.h"
#include "exec/exec.h"
#include "exec/doc_cache.h"
#include "http/request.h"

#define EXEC_COMPONENT "exec"
#define EXEC_MAX_WAIT_S 60
#define EXEC_PROBE_WAIT_MS 35000   /* a POST waits this long for a backend's first probe */

/* app->exec: what the routes share (exec.h).  The live state of each
 * execution is the watch hub's; the runs are the scheduler's. */
struct eai_exec {
    struct eai_app *app;
    struct eai_sched *sched;          /* exec/scheduler.h */
    struct eai_watch *hub;            /* exec/watch.h */
    struct eai_park_set *parks;       /* requests parked on a worker job (http/park.h) */
    struct eai_doc_cache *docs;       /* finished executions' GET bodies (exec/doc_cache.h) */
    int stopping;
    int refs;                         /* eai_exec_start's + one per probe-wait timer */
};

/* Bytes of finished executions' GET documents kept in memory (docs/executions.md). */
#define EXEC_DOC_CACHE_BYTES (1024 * 1024)

/* app's state, NULL when stopping or stopped. */
struct eai_exec *exec_state_of(struct eai_app *app);
void exec_ref(struct eai_exec *st);
void exec_unref(struct eai_exec *st);

void exec_reply_storage_error(struct eai_req *r, const char *what, const struct eai_error *e);
/* [{path, message}] */
json_t *exec_detail1(const char *path, const char *msg);
/* The error envelope with extra headers (429 Retry-After). */
void exec_reply_error_headers(struct eai_req *r, enum eai_code code, json_t *details,
                              const char *const *headers);
/* A deny audit event of r (nothing without a tenant). */
void exec_audit_deny(struct eai_app *app, struct eai_req *r, const char *action,
                     const char *target, const char *reason);
/* {id, status} with Location. */
void exec_reply_accepted(struct eai_req *r, int status, const char *id, const char *exec_status);
/* An execution id as we issue them: "sbx_" + uuid. */
int exec_id_ok(const char *id);
/* The first steps of an execution route: the state (NULL: answered 503,
 * stopping) and the {id} parameter (NULL: answered 404 with a deny audit
 * event of action, "sandbox.read" or "sandbox.cancel"). */
struct eai_exec *exec_route_state(struct eai_app *app, struct eai_req *r);
const char *exec_route_id(struct eai_app *app, struct eai_req *r, const char *action);

#endif
