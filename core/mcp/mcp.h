/*
 * The Model Context Protocol at /v1/mcp (issue 35; docs/mcp.md): Streamable
 * HTTP, JSON-RPC 2.0, sessions by Mcp-Session-Id, the handshake-era
 * revisions (2025-03-26, 2025-06-18, 2025-11-25).  Authenticated and
 * tenant-scoped like every /v1 route.
 *
 * Each tool is the REST API it names, called by eaid on itself over
 * loopback with the caller's own credential and language: the same
 * validation, quotas, audit, usage and errors as a REST client gets, and no
 * second path into the scheduler to keep in step.  Loop thread only.
 */
#ifndef EAI_CORE_MCP_H
#define EAI_CORE_MCP_H

#include "app.h"
#include "http/request.h"

void eai_mcp_route_post(struct eai_app *app, struct eai_req *r);    /* POST /v1/mcp */
void eai_mcp_route_delete(struct eai_app *app, struct eai_req *r);  /* DELETE /v1/mcp */
/* Live MCP sessions (tests, /metrics). */
int eai_mcp_sessions(void);
/* At stop: every session and call forgotten (their requests are answered by the server's stop). */
void eai_mcp_stop(void);

#endif
