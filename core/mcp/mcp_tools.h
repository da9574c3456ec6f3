/* The tools of /v1/mcp and their calls (mcp/mcp_tools.c); the protocol and
 * the sessions are mcp/mcp.c.  Loop thread only. */
#ifndef EAI_CORE_MCP_TOOLS_H
#define EAI_CORE_MCP_TOOLS_H

#include <jansson.h>

#include "app.h"
#include "http/request.h"

struct mcp_session;
struct mcp_call;

/* tools/list's array: name, title, description, inputSchema, outputSchema. */
json_t *eai_mcp_tools_list(void);
/* tools/call: answers r (a JSON response, or an event stream when the
 * call carries a progress token) once the tool is done. */
void eai_mcp_tool_call(struct eai_app *app, struct eai_req *r, struct mcp_session *s, const json_t *id,
                       const json_t *params);
/* notifications/cancelled: the call of request_id in s stops (its execution cancelled). */
void eai_mcp_cancel(struct mcp_session *s, const json_t *request_id);
/* The session's list of calls in flight. */
struct mcp_call *eai_mcp_call_next(struct mcp_call *c);
struct mcp_call **eai_mcp_call_nextp(struct mcp_call *c);
/* Its session is gone: the call finishes without one. */
void eai_mcp_call_orphan(struct mcp_call *c);

/* mcp.c: a session's calls in flight. */
void eai_mcp_session_call_add(struct mcp_session *s, struct mcp_call *c, struct mcp_call **next);
void eai_mcp_session_call_drop(struct mcp_session *s, struct mcp_call *c);
const char *eai_mcp_session_version(const struct mcp_session *s);
struct mcp_call *eai_mcp_session_calls(struct mcp_session *s);
/* The park set of the tool calls' requests (closed by eai_mcp_stop). */
struct eai_park_set *eai_mcp_parks(void);

#endif
