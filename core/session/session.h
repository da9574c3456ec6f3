/*
 * Sessions (docs/sessions.md): a sandbox that lives across several
 * executions, owned by one tenant.  The routes of /v1/sandbox/sessions, the
 * registry of this node's sessions and their lifetimes (idle timeout, hard
 * TTL, per-tenant cap), billing and audit at their end.  An execution in a
 * session is an ordinary execution (exec/exec.h) whose record carries
 * session_id; the backend runs it inside the session's sandbox.
 *
 * Order in the application: eai_sessions_start after eai_exec_start;
 * eai_sessions_stop before eai_exec_stop (live sessions are destroyed, no
 * file call is left inside a backend; the backends' destroy stops what is
 * left, the start-up sweep removes what a crash left); eai_sessions_free
 * after the isolation backends are closed.
 */
#ifndef EAI_CORE_SESSION_H
#define EAI_CORE_SESSION_H

#include "app.h"
#include "http/request.h"

void eai_session_route_create(struct eai_app *app, struct eai_req *r);  /* POST   /v1/sandbox/sessions */
void eai_session_route_list(struct eai_app *app, struct eai_req *r);    /* GET    /v1/sandbox/sessions */
void eai_session_route_get(struct eai_app *app, struct eai_req *r);     /* GET    /v1/sandbox/sessions/{id} */
void eai_session_route_delete(struct eai_app *app, struct eai_req *r);  /* DELETE /v1/sandbox/sessions/{id} */
void eai_session_route_exec(struct eai_app *app, struct eai_req *r);    /* POST   .../{id}/executions */
void eai_session_route_pause(struct eai_app *app, struct eai_req *r);   /* POST   .../{id}/pause */
void eai_session_route_resume(struct eai_app *app, struct eai_req *r);  /* POST   .../{id}/resume */
void eai_session_route_file_put(struct eai_app *app, struct eai_req *r);    /* PUT    .../{id}/files/{*path} */
void eai_session_route_file_get(struct eai_app *app, struct eai_req *r);    /* GET    .../{id}/files/{*path} */
void eai_session_route_file_delete(struct eai_app *app, struct eai_req *r); /* DELETE .../{id}/files/{*path} */
void eai_session_route_file_list(struct eai_app *app, struct eai_req *r);   /* GET    .../{id}/files */
void eai_session_route_network_get(struct eai_app *app, struct eai_req *r); /* GET    .../{id}/network */
void eai_session_route_network_put(struct eai_app *app, struct eai_req *r); /* PUT    .../{id}/network */
void eai_session_route_snapshot(struct eai_app *app, struct eai_req *r);    /* POST   .../{id}/snapshots */
void eai_snapshot_route_list(struct eai_app *app, struct eai_req *r);       /* GET    /v1/sandbox/snapshots */
void eai_snapshot_route_get(struct eai_app *app, struct eai_req *r);        /* GET    /v1/sandbox/snapshots/{id} */
void eai_snapshot_route_delete(struct eai_app *app, struct eai_req *r);     /* DELETE /v1/sandbox/snapshots/{id} */

int eai_sessions_start(struct eai_app *app, struct eai_error **err);
/* The shutdown, in two steps so that every end is billed with what its
 * sandbox used (issue 36): begin_stop destroys every live session's sandbox
 * (end reason "interrupted") and answers the requests they held; the loop
 * runs on while the backends report each end with its cgroup's numbers
 * (eai_sessions_ending counts those still awaited); eai_sessions_stop then
 * records the ends that did not come as partial, and stops the registry
 * (it begins the stop itself when begin_stop was not called). */
void eai_sessions_begin_stop(struct eai_app *app);
int eai_sessions_ending(const struct eai_app *app);
void eai_sessions_stop(struct eai_app *app);
/* After the isolation backends are closed (no callback can come): free. */
void eai_sessions_free(struct eai_app *app);

/* This node's sessions (live or ended, still in the registry) of tenant
 * carrying run_id, oldest first, at most max (*truncated set when there
 * are more): their views as GET /v1/sandbox/sessions/{id} gives them.
 * Loop thread only.  Sessions live in memory: another node's are not
 * seen (docs/sessions.md). */
json_t *eai_sessions_of_run(struct eai_app *app, const char *tenant, const char *run_id, size_t max,
                            int *truncated);

/* Live sessions on this node (metrics). */
int eai_sessions_live(const struct eai_app *app);

#endif
