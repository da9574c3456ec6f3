/*
 * The request API of route handlers: accessors, replies (the error
 * envelope), parked replies and Server-Sent Events.  Loop thread only.
 *
 * A handler receives a struct eai_req and must eventually call exactly one
 * eai_reply_* (or eai_stream_end after eai_stream_start).  It may return
 * first and reply later from a callback on the loop thread ("parking").
 * If the client goes away, eai_req_gone(r) becomes 1; the reply must still
 * be called (it then only frees).
 */
#ifndef EAI_CORE_REQUEST_H
#define EAI_CORE_REQUEST_H

#include <stddef.h>
#include <jansson.h>
#include <eai/plugin.h>

#include "app.h"
#include "obs/trace.h"

struct eai_req;

typedef void (*eai_route_fn)(struct eai_app *app, struct eai_req *r);

enum eai_route_auth { EAI_AUTH_NONE = 0, EAI_AUTH_TENANT };

struct eai_route {
    const char *method;        /* "GET", "POST", "DELETE" */
    const char *pattern;       /* "/v1/sandbox/executions/{id}/files/{*path}" */
    enum eai_route_auth auth;
    eai_route_fn fn;
    const char *name;          /* label for metrics: "executions.create" */
};

/* --- request accessors (borrowed, valid until the reply) */
const char *eai_req_method(const struct eai_req *r);
const char *eai_req_path(const struct eai_req *r);
/* Path capture by name ("id", "path"), percent-decoded. */
const char *eai_req_param(const struct eai_req *r, const char *name);
/* Query parameter (decoded) or NULL. */
const char *eai_req_query(const struct eai_req *r, const char *name);
const char *eai_req_header(const struct eai_req *r, const char *name);
const char *eai_req_body(const struct eai_req *r, size_t *len);
const char *eai_req_id(const struct eai_req *r);
const char *eai_req_lang(const struct eai_req *r);          /* "en" or "fr" */
const char *eai_req_tenant(const struct eai_req *r);        /* after auth */
const char *eai_req_key_id(const struct eai_req *r);        /* after auth */
const struct eai_trace_ctx *eai_req_trace(const struct eai_req *r);
/* The server span of this request (children hang under it). */
struct eai_span *eai_req_span(const struct eai_req *r);
int eai_req_gone(const struct eai_req *r);
/* Called when the client disconnects before the reply (optional). */
void eai_req_on_gone(struct eai_req *r, void (*fn)(void *), void *arg);

/* Parse the body as JSON (or YAML when Content-Type is application/yaml
 * and yaml_ok): NULL after replying 400 invalid_json / 415 itself. */
json_t *eai_req_body_json(struct eai_req *r, int yaml_ok);
/* A gateway token's project and agent claims (http/jwt_auth.c) on a body
 * that creates an execution or a session: project_id / agent_id filled in
 * when the body has none.  0, or -1 when the body names another one: the
 * caller audits and answers eai_req_token_ids_refusal (403 forbidden).
 * API keys: always 0. */
int eai_req_apply_token_ids(struct eai_req *r, json_t *body, const char **field);
/* The 403 forbidden envelope for field (eai_req_apply_token_ids). */
void eai_req_token_ids_refusal(struct eai_req *r, const char *field);

/* --- replies (exactly one per request) */
void eai_reply_json(struct eai_req *r, int status, json_t *body /* stolen */);
void eai_reply_json_headers(struct eai_req *r, int status, json_t *body,
                            const char *const *headers /* "Name: value", NULL-terminated */);
/* The envelope of API.md from the code table; details stolen (may be NULL). */
void eai_reply_error(struct eai_req *r, enum eai_code code, json_t *details);
/* 404 not_found whose message names what is missing (the code stays
 * not_found; message and message_i18n say which). */
enum eai_missing { EAI_MISSING_EXECUTION = 0, EAI_MISSING_FILE, EAI_MISSING_MANIFEST, EAI_MISSING_ROUTE,
                   EAI_MISSING_CONTRACT, EAI_MISSING_LEDGER, EAI_MISSING_SESSION, EAI_MISSING_SESSION_FILE,
                   EAI_MISSING_RUN, EAI_MISSING_AGENT, EAI_MISSING_SNAPSHOT, EAI_MISSING_VOLUME,
                   EAI_MISSING_VOLUME_FILE };
void eai_reply_not_found(struct eai_req *r, enum eai_missing what);
void eai_reply_raw(struct eai_req *r, int status, const char *content_type,
                   const void *data, size_t len);
/* The same without a copy: data stays readable until release(data, len,
 * arg) runs (once; when written, or at once if it cannot be sent). */
void eai_reply_ref(struct eai_req *r, int status, const char *content_type, const void *data, size_t len,
                   void (*release)(const void *data, size_t len, void *arg), void *arg);

/* --- Server-Sent Events */
/* Streams end their connection (Connection: close); no read timeout while
 * they last, writes waiting more than this drop the client. */
#define EAI_STREAM_WRITE_TIMEOUT_S 60
void eai_stream_start(struct eai_req *r, const char *content_type);
void eai_stream_send(struct eai_req *r, const char *data, size_t len);
void eai_stream_end(struct eai_req *r);
/* Bytes written to r's connection and not yet taken by the client (its
 * output buffer): a slow reader shows here (back-pressure, issue 16.3). */
size_t eai_stream_pending(const struct eai_req *r);

#endif
