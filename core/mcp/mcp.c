/* The Model Context Protocol at /v1/mcp (mcp/mcp.h, docs/mcp.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "mcp/mcp.h"
#include "mcp/mcp_tools.h"
#include "http/park.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/exec.h"

#define MCP_COMPONENT "mcp"
#define MCP_SESSIONS_PER_TENANT 16
#define MCP_SESSIONS_MAX 1024
#define MCP_IDLE_MS (30 * 60 * 1000)     /* a session unused this long is forgotten */
#define MCP_MAX_MESSAGE (4u << 20)       /* one JSON-RPC message */
#define MCP_CALLS_PER_SESSION 16         /* tool calls in flight in one session */
#define MCP_POLL_WAIT_S 1                /* the long-poll of a running execution, between progress reports */

static const char *const VERSIONS[] = {"2025-11-25", "2025-06-18", "2025-03-26", NULL};

struct mcp_session {
    char id[37];
    char tenant[64];
    char version[16];
    int64_t last_ms;
    int calls;
    struct mcp_call *inflight;
    struct mcp_session *next;
};

static struct {
    struct mcp_session *sessions;
    int n;
    struct event *sweep;
    struct eai_park_set *parks;       /* the requests of tool calls in flight */
} g;

struct eai_park_set *eai_mcp_parks(void)
{
    if (!g.parks)
        g.parks = eai_park_set_new();
    return g.parks;
}

int eai_mcp_sessions(void) { return g.n; }

/* ------------------------------------------------------------ JSON-RPC replies */

static json_t *rpc_result(const json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result", result);
}

static json_t *rpc_error(const json_t *id, int code, const char *message)
{
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code", code,
                     "message", message);
}

static void reply_rpc(struct eai_req *r, int status, json_t *msg, const char *session_id)
{
    char h[80];
    snprintf(h, sizeof h, "Mcp-Session-Id: %s", session_id ? session_id : "");
    const char *headers[] = {session_id ? h : NULL, NULL};
    eai_reply_json_headers(r, status, msg, session_id ? headers : NULL);
}

/* ------------------------------------------------------------ sessions */

static struct mcp_session *session_find(const char *id)
{
    for (struct mcp_session *s = g.sessions; s; s = s->next)
        if (!strcmp(s->id, id))
            return s;
    return NULL;
}

static void session_unlink(struct mcp_session *s)
{
    for (struct mcp_session **pp = &g.sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            g.n--;
            break;
        }
    for (struct mcp_call *c = s->inflight; c; c = eai_mcp_call_next(c))
        eai_mcp_call_orphan(c); /* the call ends on its own, its session gone */
    free(s);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    int64_t now = eai_now_ms();
    struct mcp_session *s = g.sessions;
    while (s) {
        struct mcp_session *next = s->next;
        if (!s->inflight && now - s->last_ms > MCP_IDLE_MS)
            session_unlink(s);
        s = next;
    }
}

static struct mcp_session *session_new(struct eai_app *app, const char *tenant, const char *version)
{
    int mine = 0;
    for (struct mcp_session *s = g.sessions; s; s = s->next)
        mine += !strcmp(s->tenant, tenant);
    if (mine >= MCP_SESSIONS_PER_TENANT || g.n >= MCP_SESSIONS_MAX) {
        on_sweep(-1, 0, NULL); /* idle ones first */
        mine = 0;
        for (struct mcp_session *s = g.sessions; s; s = s->next)
            mine += !strcmp(s->tenant, tenant);
        if (mine >= MCP_SESSIONS_PER_TENANT || g.n >= MCP_SESSIONS_MAX)
            return NULL;
    }
    struct mcp_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    eai_uuid_v4(s->id);
    snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
    snprintf(s->version, sizeof s->version, "%s", version);
    s->last_ms = eai_now_ms();
    s->next = g.sessions;
    g.sessions = s;
    g.n++;
    if (!g.sweep) {
        g.sweep = event_new(app->base, -1, EV_PERSIST, on_sweep, NULL);
        struct timeval minute = {60, 0};
        if (g.sweep)
            event_add(g.sweep, &minute);
    }
    return s;
}

void eai_mcp_session_call_add(struct mcp_session *s, struct mcp_call *c, struct mcp_call **head_of_next)
{
    *head_of_next = s->inflight;
    s->inflight = c;
    s->calls++;
}

void eai_mcp_session_call_drop(struct mcp_session *s, struct mcp_call *c)
{
    for (struct mcp_call **pp = &s->inflight; *pp; pp = eai_mcp_call_nextp(*pp))
        if (*pp == c) {
            *pp = eai_mcp_call_next(c);
            s->calls--;
            break;
        }
    s->last_ms = eai_now_ms();
}

const char *eai_mcp_session_version(const struct mcp_session *s) { return s->version; }
struct mcp_call *eai_mcp_session_calls(struct mcp_session *s) { return s->inflight; }

void eai_mcp_stop(void)
{
    eai_park_set_close(g.parks); /* calls in flight answered 503 while the server can send */
    g.parks = NULL;
    while (g.sessions)
        session_unlink(g.sessions);
    if (g.sweep)
        event_free(g.sweep);
    g.sweep = NULL;
}

/* ------------------------------------------------------------ the protocol */

static json_t *initialize_result(const char *version)
{
    return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version, "capabilities",
                     "tools", "listChanged", 0, "serverInfo", "name", "eai-sandbox", "title",
                     "Enterprise AI execution sandbox", "version", EAI_VERSION, "instructions",
                     "Runs untrusted code in gVisor or Kata sandboxes: `execute` for one run, `session_*` "
                     "for a sandbox kept across calls (files and processes persist). Limits come from the "
                     "profile; every call is audited and billed to your tenant.");
}

static const char *pick_version(const json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    for (int i = 0; want && VERSIONS[i]; i++)
        if (!strcmp(want, VERSIONS[i]))
            return VERSIONS[i];
    return VERSIONS[0]; /* the newest we speak: the client decides whether it can */
}

static int version_ok(const char *v)
{
    for (int i = 0; VERSIONS[i]; i++)
        if (!strcmp(v, VERSIONS[i]))
            return 1;
    return 0;
}

void eai_mcp_route_post(struct eai_app *app, struct eai_req *r)
{
    size_t blen = 0;
    eai_req_body(r, &blen);
    if (blen > MCP_MAX_MESSAGE) {
        reply_rpc(r, 413, rpc_error(NULL, -32600, "message larger than 4 MiB"), NULL);
        return;
    }
    json_t *msg = eai_req_body_json(r, 0);
    if (!msg)
        return; /* answered 400 / 415 with the envelope */
    if (json_is_array(msg)) {
        json_decref(msg);
        reply_rpc(r, 400, rpc_error(NULL, -32600, "batches are not accepted (MCP 2025-06-18 and later)"), NULL);
        return;
    }
    const json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    const json_t *params = json_object_get(msg, "params");
    const char *jv = json_string_value(json_object_get(msg, "jsonrpc"));
    if (!json_is_object(msg) || !jv || strcmp(jv, "2.0") != 0 ||
        (id && !json_is_string(id) && !json_is_integer(id)) || (params && !json_is_object(params))) {
        reply_rpc(r, 400, rpc_error(id, -32600, "not a JSON-RPC 2.0 message"), NULL);
        json_decref(msg);
        return;
    }
    const char *tenant = eai_req_tenant(r);
    if (method && !strcmp(method, "initialize")) {
        const char *v = pick_version(params);
        struct mcp_session *s = id ? session_new(app, tenant, v) : NULL;
        if (!s)
            reply_rpc(r, id ? 429 : 400,
                      rpc_error(id, -32000, id ? "too many MCP sessions for this tenant (16); close one (DELETE)"
                                               : "initialize is a request"),
                      NULL);
        else
            reply_rpc(r, 200, rpc_result(id, initialize_result(v)), s->id);
        json_decref(msg);
        return;
    }
    const char *sid = eai_req_header(r, "Mcp-Session-Id");
    struct mcp_session *s = sid ? session_find(sid) : NULL;
    if (!sid) {
        reply_rpc(r, 400, rpc_error(id, -32600, "Mcp-Session-Id is required after initialize"), NULL);
        json_decref(msg);
        return;
    }
    if (!s || strcmp(s->tenant, tenant) != 0) { /* another tenant's id reads as unknown */
        reply_rpc(r, 404, rpc_error(id, -32001, "unknown or expired MCP session: initialize again"), NULL);
        json_decref(msg);
        return;
    }
    const char *pv = eai_req_header(r, "MCP-Protocol-Version");
    if (pv && !version_ok(pv)) {
        reply_rpc(r, 400, rpc_error(id, -32600, "unsupported MCP-Protocol-Version"), NULL);
        json_decref(msg);
        return;
    }
    s->last_ms = eai_now_ms();
    if (!method) { /* a response of the client: we send no requests, nothing waits for it */
        eai_reply_raw(r, 202, "application/json", "", 0);
        json_decref(msg);
        return;
    }
    if (!id) { /* notifications */
        if (!strcmp(method, "notifications/cancelled"))
            eai_mcp_cancel(s, json_object_get(params, "requestId"));
        eai_reply_raw(r, 202, "application/json", "", 0);
        json_decref(msg);
        return;
    }
    if (!strcmp(method, "ping")) {
        reply_rpc(r, 200, rpc_result(id, json_object()), NULL);
    } else if (!strcmp(method, "tools/list")) {
        reply_rpc(r, 200, rpc_result(id, json_pack("{s:o}", "tools", eai_mcp_tools_list())), NULL);
    } else if (!strcmp(method, "tools/call")) {
        if (s->calls >= MCP_CALLS_PER_SESSION)
            reply_rpc(r, 429, rpc_error(id, -32000, "too many tool calls in flight in this session (16)"), NULL);
        else
            eai_mcp_tool_call(app, r, s, id, params);
    } else {
        reply_rpc(r, 200, rpc_error(id, -32601, "method not found"), NULL);
    }
    json_decref(msg);
}

void eai_mcp_route_delete(struct eai_app *app, struct eai_req *r)
{
    (void)app;
    const char *sid = eai_req_header(r, "Mcp-Session-Id");
    struct mcp_session *s = sid ? session_find(sid) : NULL;
    if (!s || strcmp(s->tenant, eai_req_tenant(r)) != 0) {
        reply_rpc(r, sid ? 404 : 400, rpc_error(NULL, sid ? -32001 : -32600,
                                                 sid ? "unknown or expired MCP session" : "Mcp-Session-Id is required"),
                  NULL);
        return;
    }
    session_unlink(s);
    eai_reply_raw(r, 204, "application/json", "", 0);
}
