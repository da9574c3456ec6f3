/*
 * Executions: the HTTP routes of /v1/sandbox/executions, the lifecycle
 * (validation, recording, scheduling, long-polls, event streams) and
 * restart recovery.  docs/executions.md is the full description.
 *
 * Order in the application:
 *   start: storage, isolation backends, workers, host ... then
 *          eai_exec_start (recovery scan, scheduler), then the HTTP server;
 *   stop:  eai_exec_stop FIRST (it answers every parked long-poll and ends
 *          every event stream while the server can still send them, and
 *          records running executions as interrupted), then the server,
 *          the isolation backends, the workers and storage.
 */
#ifndef EAI_CORE_EXEC_H
#define EAI_CORE_EXEC_H

#include "app.h"
#include "http/request.h"
#include "exec/exec_result.h"

void eai_exec_route_create(struct eai_app *app, struct eai_req *r);   /* POST /v1/sandbox/executions */
void eai_exec_route_get(struct eai_app *app, struct eai_req *r);      /* GET  /v1/sandbox/executions/{id}?wait_s= */
void eai_exec_route_list(struct eai_app *app, struct eai_req *r);     /* GET  /v1/sandbox/executions */
void eai_exec_route_cancel(struct eai_app *app, struct eai_req *r);   /* POST /v1/sandbox/executions/{id}/cancel */
void eai_exec_route_stdin(struct eai_app *app, struct eai_req *r);    /* POST /v1/sandbox/executions/{id}/stdin */
void eai_exec_route_file(struct eai_app *app, struct eai_req *r);     /* GET  /v1/sandbox/executions/{id}/files/{*path} */
void eai_exec_route_events(struct eai_app *app, struct eai_req *r);   /* GET  /v1/sandbox/executions/{id}/events (SSE) */
void eai_exec_route_network(struct eai_app *app, struct eai_req *r);  /* GET  /v1/sandbox/executions/{id}/network */

/* A tool manifest checked at apply as an execution naming it would be
 * (profile, limits against the profile's maxima and its backend's, image,
 * egress, callback; an execution may still bring image and command): new
 * takes the backends' probes on the loop, run (worker) answers 0, or -1
 * with *err carrying the execution's code and details at the manifest's
 * paths (/spec/...). */
struct eai_tool_check;
struct eai_tool_check *eai_exec_tool_check_new(struct eai_app *app);
int eai_exec_tool_check_run(struct eai_tool_check *c, const json_t *doc, struct eai_error **err);
void eai_exec_tool_check_free(struct eai_tool_check *c);
/* POST /v1/sandbox/sessions/{id}/executions (core/session): body (stolen)
 * is an execution body the session routes built (the session's profile,
 * image and limits); it is admitted, recorded and answered exactly as a
 * POST /v1/sandbox/executions, its record carrying session_id. */
void eai_exec_create_in_session(struct eai_app *app, struct eai_req *r, json_t *body, const char *session_id);

/* After storage and isolation are up: recovery of executions a dead
 * process left running, then the scheduler.  0 or -1 (+ *err). */
int eai_exec_start(struct eai_app *app, struct eai_error **err);
void eai_exec_stop(struct eai_app *app);
/* Executions were deleted (retention): drop the finished documents kept in
 * memory (exec/doc_cache.h), so none is answered after its deletion. */
void eai_exec_forget_documents(struct eai_app *app);

/* Executions running on this node (for /metrics and /readyz). */
int eai_exec_running(const struct eai_app *app);
/* Drain (SIGTERM, server.drain_s): no new claims; running executions go
 * on to their end.  eai_exec_busy: 1 until every local run is recorded. */
void eai_exec_drain(struct eai_app *app);
int eai_exec_busy(const struct eai_app *app);

/* Claim soon (tests, and after a change that may free a slot). */
void eai_exec_kick(struct eai_app *app);
/* Ask the local run of id to stop: 1 when there is one (tests). */
int eai_exec_cancel_local(struct eai_app *app, const char *id);
/* 1 and the output so far when a run of this node produces id (tests). */
int eai_exec_local_output(struct eai_app *app, const char *id, enum eai_iso_stream s,
                          const char **data, size_t *len);

#endif
