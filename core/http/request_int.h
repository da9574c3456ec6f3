/*
 * The inside of a request, shared by the request API (http/request.c), the
 * server that makes requests (http/server.c) and bearer auth
 * (http/auth.c).  Handlers use http/request.h only.
 */
#ifndef EAI_CORE_REQUEST_INT_H
#define EAI_CORE_REQUEST_INT_H

#include <stdint.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "http/auth.h"
#include "http/http_util.h"
#include "http/request.h"

/* What the server that made a request learns of its life. */
struct eai_req_owner {
    /* The answer is going out (or the stream ended): the connection guard
     * stops watching this request. */
    void (*replied)(void *owner_arg, struct eai_req *r);
    /* r is freed right after. */
    void (*freed)(void *owner_arg, struct eai_req *r);
    /* 1: answer with "Connection: close" (the server is stopping). */
    int (*closing)(void *owner_arg);
    /* r was authenticated for r->tenant: 0, or -1 when that tenant holds
     * all the connections it may (r is then answered 429).  May be NULL. */
    int (*admit)(void *owner_arg, struct eai_req *r);
};

struct eai_req {
    struct eai_app *app;
    const struct eai_req_owner *owner;  /* the server that made it */
    void *owner_arg;
    struct evhttp_request *evreq;       /* NULL once freed with its connection */
    void *conn;                         /* the owner's connection (opaque here) */
    const struct eai_route *route;
    struct eai_route_params params;
    char method[12];
    char *path;                       /* decoded path without the query */
    struct evkeyvalq query;
    int query_ok;
    char *body;                       /* linear copy, NUL-terminated */
    size_t body_len;
    char request_id[130];
    const char *lang;
    char tenant[64];
    char key_id[EAI_KEY_ID_LEN + 1];  /* or "jwt:<12 hex>" for a gateway token (http/jwt_auth.c) */
    char jwt_project[129];             /* a gateway token's project and agent claims, "" none */
    char jwt_agent[129];
    struct eai_trace_ctx trace;
    struct eai_span *span;
    int gone;
    void (*on_gone)(void *);
    void *on_gone_arg;
    int replied;
    int streaming;
    int status;
    int64_t start_ns;
};

/* The client went away before the reply: gone is set, evreq dropped when
 * evreq_dead, and the handler's on_gone callback runs (once). */
void eai_req_mark_gone(struct eai_req *r, int evreq_dead);

#endif
