/*
 * The HTTP server on evhttp (libevent 2.1): listening, dispatch (routing,
 * request ids, language, trace context, the body's own checks) and the
 * owner hooks of its requests.  The connection guard (connection limit,
 * body cap with our 413 envelope) is http/conn.c, the request API
 * http/request.c, bearer auth http/bearer.c.  Loop thread only.
 */
#include <errno.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <netinet/in.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "http/auth_refusals.h"
#include "http/bearer.h"
#include "config/config.h"
#include "config/config_check.h"
#include "base/errors.h"
#include "http/http_util.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "http/conn.h"
#include "http/jwt_auth.h"
#include "http/http_head.h"
#include "http/tls.h"
#include "http/request_int.h"
#include "http/routes.h"
#include "http/server.h"
#include "base/util.h"

#define SRV_COMPONENT "http"

struct eai_server {
    struct eai_app *app;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    struct eai_conn_guard g;          /* http/conn.c */
    struct event *sweep;
    int64_t reqs_live;                /* eai_req objects alive */
    int conn_peak;                    /* connections at most since the last heap trim */
    int stopping;
};

static struct eai_server *g_srv;

/* ------------------------------------------------------------ requests' owner */

static void owner_replied(void *arg, struct eai_req *r)
{
    struct eai_server *s = arg;
    struct eai_conn *c = r->conn;
    /* the EOF watch marked r gone (r->conn = NULL) while its connection
     * lives on: the connection must still forget r, or it keeps a
     * dangling pointer that its close callback reads (a crash under wrk) */
    if (!c && r->gone && r->evreq)
        c = eai_conn_of(&s->g, r->evreq);
    eai_conn_replied(c, r);
}

static void owner_freed(void *arg, struct eai_req *r)
{
    (void)r;
    struct eai_server *s = arg;
    s->reqs_live--;
}

static int owner_closing(void *arg)
{
    struct eai_server *s = arg;
    return s->stopping;
}

static int owner_admit(void *arg, struct eai_req *r)
{
    (void)arg;
    return r->conn ? eai_conn_attribute(r->conn, r->tenant) : 0;
}

static const struct eai_req_owner srv_owner = {
    .replied = owner_replied, .freed = owner_freed, .closing = owner_closing, .admit = owner_admit,
};

/* ------------------------------------------------------------ dispatch */

static const char *method_name(enum evhttp_cmd_type t)
{
    switch (t) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    case EVHTTP_REQ_TRACE: return "TRACE";
    case EVHTTP_REQ_CONNECT: return "CONNECT";
    case EVHTTP_REQ_PATCH: return "PATCH";
    default: return "OTHER";
    }
}

/* Per route, the bytes of its pattern before its first capture ("/{"),
 * or all of it: a path that does not start with them cannot match, and a
 * pattern without a capture matches only the same path.  The scan of the
 * table then calls eai_route_match only for routes that can match (the
 * full match of every route before the hot one was 4% of a GET). */
static size_t *g_route_lit;

static void routes_prepare(void)
{
    free(g_route_lit);
    g_route_lit = malloc(eai_nroutes * sizeof *g_route_lit);
    for (size_t i = 0; g_route_lit && i < eai_nroutes; i++) {
        const char *cap = strstr(eai_routes[i].pattern, "/{");
        g_route_lit[i] = cap ? (size_t)(cap - eai_routes[i].pattern) + 1 : strlen(eai_routes[i].pattern);
    }
}

/* 0: route i cannot match path (eai_route_match would say 0). */
static int route_may_match(size_t i, const char *path)
{
    if (!g_route_lit)
        return 1;
    const char *pat = eai_routes[i].pattern;
    size_t lit = g_route_lit[i];
    if (strncmp(pat, path, lit) != 0)
        return 0;
    return pat[lit] != '\0' || path[lit] == '\0';
}

/* The request headers the server reads, in one pass over evhttp's list
 * (each evhttp_find_header is a scan with a case-insensitive compare of
 * every name); the first of each name, as evhttp_find_header. */
struct req_heads {
    const char *request_id, *accept_language, *traceparent, *authorization;
};

/* name equals lower (lowercase ASCII), ignoring ASCII case (as
 * evutil_ascii_strcasecmp: no locale) */
static int name_is(const char *name, const char *lower)
{
    for (; *lower; name++, lower++) {
        unsigned char c = (unsigned char)*name;
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c + 32);
        if (c != (unsigned char)*lower)
            return 0;
    }
    return *name == '\0';
}

static void heads_read(struct evkeyvalq *in, struct req_heads *h)
{
    memset(h, 0, sizeof *h);
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, in, next) {
        const char *k = kv->key, **slot = NULL;
        switch (k[0] | 0x20) {
        case 'x': if (!h->request_id && name_is(k, "x-request-id")) slot = &h->request_id; break;
        case 'a':
            if (!h->authorization && name_is(k, "authorization"))
                slot = &h->authorization;
            else if (!h->accept_language && name_is(k, "accept-language"))
                slot = &h->accept_language;
            break;
        case 't': if (!h->traceparent && name_is(k, "traceparent")) slot = &h->traceparent; break;
        default: break;
        }
        if (slot)
            *slot = kv->value;
    }
}

static void gen_cb(struct evhttp_request *evreq, void *arg)
{
    struct eai_server *s = arg;
    struct eai_app *app = s->app;
    struct eai_req *r = eai_zalloc(sizeof(*r));
    if (!r) {
        evhttp_send_error(evreq, 500, NULL);
        return;
    }
    s->reqs_live++;
    r->app = app;
    r->owner = &srv_owner;
    r->owner_arg = s;
    r->evreq = evreq;
    r->start_ns = eai_monotonic_ns();
    const char *mn = method_name(evhttp_request_get_command(evreq));
    memcpy(r->method, mn, strlen(mn) + 1); /* at most "CONNECT" */
    struct req_heads hd;
    heads_read(evhttp_request_get_input_headers(evreq), &hd);
    const char *rid = hd.request_id;
    if (eai_http_request_id_ok(rid))
        snprintf(r->request_id, sizeof(r->request_id), "%s", rid);
    else
        eai_uuid_v4(r->request_id);
    r->lang = eai_http_negotiate_lang(hd.accept_language);
    const char *tp = hd.traceparent;
    if (!tp || eai_traceparent_parse(tp, &r->trace) < 0)
        eai_trace_ctx_generate(&r->trace);
    r->conn = eai_conn_of(&s->g, evreq);
    if (r->conn)
        eai_conn_dispatched(r->conn, r);

    /* path and query */
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(evreq);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    r->path = strdup(path && *path ? path : "/");
    const char *q = uri ? evhttp_uri_get_query(uri) : NULL;
    TAILQ_INIT(&r->query);
    if (q && *q) {
        if (evhttp_parse_query_str(q, &r->query) == 0)
            r->query_ok = 1;
        else
            evhttp_clear_headers(&r->query);
    } else {
        r->query_ok = 1;
    }

    /* route */
    int method_mismatch = 0, bad_escape = 0;
    char allow[64] = "";
    const char *m = strcmp(r->method, "HEAD") == 0 ? "GET" : r->method;
    for (size_t i = 0; r->path && i < eai_nroutes; i++) {
        if (!route_may_match(i, r->path))
            continue;
        struct eai_route_params p;
        int rc = eai_route_match(eai_routes[i].pattern, r->path, &p);
        if (rc < 0)
            bad_escape = 1;
        if (rc != 1)
            continue;
        if (strcmp(eai_routes[i].method, m) != 0) {
            method_mismatch = 1;
            if (!strstr(allow, eai_routes[i].method) && strlen(allow) + strlen(eai_routes[i].method) + 3 < sizeof(allow)) {
                if (allow[0])
                    strcat(allow, ", ");
                strcat(allow, eai_routes[i].method);
            }
            eai_route_params_clear(&p);
            continue;
        }
        r->route = &eai_routes[i];
        r->params = p;
        break;
    }
    /* probes are not traced: a kubelet polling /healthz and /readyz would
     * fill the collector with spans nobody reads */
    int probe = r->route && (strcmp(r->route->pattern, "/healthz") == 0 || strcmp(r->route->pattern, "/readyz") == 0);
    char sname[96] = "";
    if (!probe && eai_trace_recording()) /* else the span keeps its ids only */
        snprintf(sname, sizeof(sname), "%s %s", r->method, r->route ? r->route->pattern : "unmatched");
    r->span = probe ? NULL
                    : eai_span_start(sname, EAI_SPAN_SERVER, r->trace.trace_id,
                                     r->trace.valid ? r->trace.span_id : NULL);
    if (r->span) {
        eai_span_set_str(r->span, "http.method", r->method);
        eai_span_set_str(r->span, "http.route", r->route ? r->route->pattern : "");
        eai_span_set_str(r->span, "eai.request_id", r->request_id);
    }

    /* body */
    struct evbuffer *body = evhttp_request_get_input_buffer(evreq);
    size_t blen = body ? evbuffer_get_length(body) : 0;
    if (blen > s->g.cap) {
        eai_reply_error(r, EAI_E_PAYLOAD_TOO_LARGE, NULL);
        return;
    }
    if (!r->path) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (!r->route) {
        if (method_mismatch) {
            char ah[80];
            snprintf(ah, sizeof(ah), "Allow: %s", allow);
            const char *hs[] = {ah, NULL};
            json_t *env = eai_http_error_envelope(EAI_E_METHOD_NOT_ALLOWED, r->lang, r->request_id, NULL);
            eai_reply_json_headers(r, 405, env, hs);
        } else if (bad_escape) {
            eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                            json_pack("[{s:s, s:s}]", "path", "", "message", "malformed percent-escape in the path"));
        } else {
            eai_reply_not_found(r, EAI_MISSING_ROUTE);
        }
        return;
    }
    if (!r->query_ok) {
        eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                        json_pack("[{s:s, s:s}]", "path", "", "message", "malformed query string"));
        return;
    }
    if (blen) {
        r->body = malloc(blen + 1);
        if (!r->body) {
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
            return;
        }
        evbuffer_copyout(body, r->body, blen);
        r->body[blen] = '\0';
        r->body_len = blen;
    }
    if (s->stopping && r->route->auth == EAI_AUTH_TENANT) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    struct eai_conn *conn = r->conn; /* still valid after r is answered */
    if (r->route->auth == EAI_AUTH_TENANT)
        eai_auth_start(r, hd.authorization); /* evreq's header list: valid in this callback */
    else
        r->route->fn(app, r);
    /* r may be freed now; the connection is still valid in this callback */
    if (conn)
        eai_conn_watch_arm(conn);
}

/* ------------------------------------------------------------ start / stop */

/* Every second: the connection guard's sweep; and once a load has gone
 * (connections down to a quarter of a peak of 64 or more), the heap pages
 * its connections left free go back to the system (malloc_trim: RSS after
 * a load stays near idle instead of keeping the peak). */
static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    struct eai_server *s = arg;
    eai_conn_sweep_cb(fd, what, &s->g);
    if (s->g.nconn > s->conn_peak)
        s->conn_peak = s->g.nconn;
    if (s->conn_peak >= 64 && s->g.nconn <= s->conn_peak / 4) {
        malloc_trim(0);
        s->conn_peak = s->g.nconn;
    }
}

int eai_server_start(struct eai_app *app, struct eai_error **err)
{
    struct eai_config *cfg = app->cfg;
    char host[256];
    int port;
    if (eai_cfg_parse_listen(cfg->listen, host, sizeof(host), &port) < 0) {
        return eai_error_set(err, EAI_E_INTERNAL, "listen address '%s' malformed", cfg->listen);
    }
    struct eai_server *s = calloc(1, sizeof(*s));
    if (!s) {
        return eai_error_set_sys(err, EAI_E_INTERNAL, ENOMEM, "out of memory");
    }
    s->app = app;
    if (eai_jwt_auth_init(app, err) < 0) { /* auth.jwt: a key set that cannot be read refuses the start */
        free(s);
        return -1;
    }
    if (eai_tls_server_new(cfg, &s->g.tls, err) < 0) {
        eai_jwt_auth_shutdown();
        free(s);
        return -1;
    }
    s->g.base = app->base;
    s->g.max_connections = cfg->max_connections;
    s->g.max_per_tenant = cfg->max_connections_per_tenant;
    s->g.max_unauth = cfg->max_unauth_connections >= 0 ? cfg->max_unauth_connections
                                                       : (cfg->max_connections + 1) / 2;
    s->g.cap = cfg->max_body_bytes;
    s->g.acc_cap = cfg->max_header_bytes + EAI_HTTP_MAX_REQUEST_LINE + 1024;
    s->g.max_header_bytes = cfg->max_header_bytes;
    s->g.read_timeout_s = cfg->read_timeout_s;
    /* every connection's read deadline has one length: a common timeout
     * (a list, O(1) to add and delete, instead of libevent's heap) */
    struct timeval rt = {cfg->read_timeout_s, 0};
    const struct timeval *crt = cfg->read_timeout_s > 0 ? event_base_init_common_timeout(app->base, &rt) : NULL;
    if (crt) {
        s->g.read_tv = *crt;
        s->g.read_tv_set = 1;
    }
    s->g.chunk_slack_cap = (int64_t)s->g.cap + (int64_t)s->g.cap / 4 + 65536;
    eai_metrics_describe("eai_http_connections", EAI_METRIC_GAUGE, "Open HTTP connections.");
    eai_metrics_set("eai_http_connections", NULL, 0);
    eai_metrics_describe("eai_http_connections_evicted_total", EAI_METRIC_COUNTER,
                         "Idle unauthenticated HTTP connections closed to make room (server.max_unauthenticated_connections).");
    eai_metrics_add("eai_http_connections_evicted_total", NULL, 0);
    s->http = evhttp_new(app->base);
    if (!s->http) {
        eai_tls_free(s->g.tls);
        free(s);
        eai_jwt_auth_shutdown();
        return eai_error_set(err, EAI_E_INTERNAL, "evhttp_new failed");
    }
    evhttp_set_bevcb(s->http, eai_conn_bev_cb, &s->g);
    evhttp_set_gencb(s->http, gen_cb, s);
    /* evhttp's own limit only backs ours up (it answers without an envelope) */
    evhttp_set_max_body_size(s->http, (ev_ssize_t)(2 * s->g.cap + (1 << 20)));
    evhttp_set_max_headers_size(s->http, (ev_ssize_t)cfg->max_header_bytes);
    /* evhttp's read and write timeouts, re-added on each request of each
     * connection: one length, so a common timeout too (evhttp copies the
     * timeval to each connection's bufferevent, which adds it as given) */
    struct timeval qt = {cfg->request_timeout_s, 0};
    const struct timeval *cqt = cfg->request_timeout_s > 0 ? event_base_init_common_timeout(app->base, &qt) : NULL;
    if (cqt)
        evhttp_set_timeout_tv(s->http, cqt);
    else
        evhttp_set_timeout(s->http, cfg->request_timeout_s);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                        EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    /* none: every reply of ours names its own (http/request.c req_send), in
     * an entry evhttp does not look up by that name; evhttp's own error
     * pages name text/html */
    evhttp_set_default_content_type(s->http, NULL);
    s->sock = evhttp_bind_socket_with_handle(s->http, host, (ev_uint16_t)port);
    if (!s->sock) {
        int e = errno;
        evhttp_free(s->http);
        eai_tls_free(s->g.tls);
        free(s);
        eai_jwt_auth_shutdown();
        return eai_error_set_sys(err, EAI_E_INTERNAL, e, "cannot listen on %s: %s", cfg->listen, e ? strerror(e) : "bind failed");
    }
    s->g.listener = evhttp_bound_socket_get_listener(s->sock);
    s->sweep = event_new(app->base, -1, EV_PERSIST, sweep_cb, s);
    if (s->sweep) {
        struct timeval one = {1, 0};
        event_add(s->sweep, &one);
    }
    app->http = s->http;
    g_srv = s;
    routes_prepare();
    eai_bearer_init(app);
    /* report the real port (listen "...:0" picks a free one) */
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    evutil_socket_t fd = evhttp_bound_socket_get_fd(s->sock);
    int real_port = port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            real_port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            real_port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    app->port = real_port;
    eai_log(SRV_COMPONENT, EAI_LOG_INFO, "listening on %s://%s%s%s:%d (body cap %zu bytes, %d connections)",
            s->g.tls ? "https" : "http", strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", real_port, s->g.cap,
            cfg->max_connections);
    return 0;
}

int eai_server_port(const struct eai_app *app)
{
    if (!g_srv || !g_srv->sock)
        return -1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(evhttp_bound_socket_get_fd(g_srv->sock), (struct sockaddr *)&ss, &sl) < 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

/* Stop accepting; requests in flight go on. */
void eai_server_stop_accepting(struct eai_app *app)
{
    struct eai_server *s = g_srv;
    if (!s || s->stopping)
        return;
    s->stopping = 1;
    s->g.stopping = 1;
    if (s->sock) {
        evhttp_del_accept_socket(s->http, s->sock);
        s->sock = NULL;
        s->g.listener = NULL;
    }
}

/* Requests parked or being answered. */
int64_t eai_server_inflight(const struct eai_app *app)
{
    struct eai_server *s = g_srv;
    if (!s)
        return 0;
    /* requests not answered yet, plus answers still in an output buffer */
    int64_t n = s->reqs_live;
    for (struct eai_conn *c = s->g.conns; c; c = eai_conn_next(c))
        n += eai_conn_flushing(c);
    return n;
}

void eai_server_stop(struct eai_app *app)
{
    struct eai_server *s = g_srv;
    if (!s)
        return;
    eai_server_stop_accepting(app);
    eai_auth_refusals_flush(app, 1); /* the last window's counts, while workers run */
    if (s->sweep)
        event_free(s->sweep);
    /* evhttp_free frees every connection (our close callback schedules the
     * releases; run them now since the loop may not turn again) */
    evhttp_free(s->http);
    app->http = NULL;
    while (s->g.conns)
        eai_conn_release_cb(-1, 0, s->g.conns);
    free(s->g.byb);
    eai_tls_free(s->g.tls);
    eai_bearer_shutdown();
    eai_jwt_auth_shutdown();
    free(g_route_lit);
    g_route_lit = NULL;
    g_srv = NULL;
    free(s);
}
