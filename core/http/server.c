/*
 * The HTTP server on evhttp (libevent 2.1): routing, request ids, the body
 * cap with our own 413 envelope, a connection limit, language negotiation,
 * bearer-key authentication on the worker pool, the error envelope, parked
 * replies and Server-Sent Events.  Loop thread only.  docs/architecture.md
 * ("HTTP server") explains the connection tracking below.
 *
 * Connection tracking.  libevent 2.1 has neither evhttp_set_max_connections
 * nor a per-request hook before the body is read, and its own 413 page has
 * no envelope.  So every connection gets a bufferevent we create
 * (evhttp_set_bevcb) with one extra reference we hold, and an evbuffer
 * callback on its input that sees the bytes before evhttp parses them:
 *   - it finds the end of each request's header block and reads
 *     Content-Length: above the cap, we take the connection over from
 *     evhttp, answer our 413 envelope, discard the body (lingering close)
 *     and then free the connection through evhttp;
 *   - chunked bodies are counted as they arrive, with the same takeover
 *     past the cap (plus framing slack); a body that still slips through
 *     is measured in the request callback (413 envelope too);
 *   - the count of live connections pauses the listener at the limit.
 * We learn that evhttp freed a connection from its close callback (or a
 * 1 s sweep noticing the bufferevent lost its callbacks) and only then
 * drop our reference, which closes the socket.
 */
#include <errno.h>
#include <stdio.h>
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

#include "http/bearer.h"
#include "config/config.h"
#include "config/config_check.h"
#include "base/errors.h"
#include "http/http_util.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "http/request_int.h"
#include "http/routes.h"
#include "http/server.h"
#include "base/util.h"

#define SRV_COMPONENT "http"

enum conn_state { CONN_HEAD = 0, CONN_BODY, CONN_PASS, CONN_REJECTED };

struct eai_conn {
    struct eai_server *srv;
    struct bufferevent *bev;          /* we hold one reference */
    struct evhttp_connection *evcon;  /* NULL before the first bytes and after evhttp freed it */
    struct eai_req *cur;              /* request being handled */
    int inflight;
    enum conn_state state;
    char *acc;                        /* header block bytes so far */
    size_t acclen;
    int64_t body_seen;                /* raw body bytes after the header block (chunked) */
    int chunked;
    int released;                     /* release scheduled */
    int closing;                      /* our takeover is freeing it */
    struct event *linger;
    struct event *release_ev;
    struct event *watch;              /* EOF watch while a request is handled */
    struct eai_conn *prev, *next;
};

struct eai_server {
    struct eai_app *app;
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    struct evconnlistener *listener;
    int listener_paused;
    int nconn;
    struct eai_conn *conns;
    struct event *sweep;
    size_t cap;                       /* max body bytes */
    size_t acc_cap;                   /* header block bytes we look at */
    int64_t chunk_slack_cap;          /* raw chunked bytes before takeover */
    int64_t reqs_live;                /* eai_req objects alive */
    int stopping;
};

static struct eai_server *g_srv;

/* ------------------------------------------------------------ requests' owner */

static void conn_replied(struct eai_conn *c, struct eai_req *r);

static void owner_replied(void *arg, struct eai_req *r)
{
    (void)arg;
    conn_replied(r->conn, r);
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

static const struct eai_req_owner srv_owner = {
    .replied = owner_replied, .freed = owner_freed, .closing = owner_closing,
};

/* ------------------------------------------------------------ connections */

static void conn_schedule_release(struct eai_conn *c);

static void listener_update(struct eai_server *s)
{
    eai_metrics_set("eai_http_connections", NULL, s->nconn);
    if (!s->listener || s->stopping)
        return;
    int max = s->app->cfg->max_connections;
    if (!s->listener_paused && s->nconn >= max) {
        evconnlistener_disable(s->listener);
        s->listener_paused = 1;
        eai_log(SRV_COMPONENT, EAI_LOG_WARN, "connection limit %d reached: not accepting", max);
    } else if (s->listener_paused && s->nconn < max) {
        evconnlistener_enable(s->listener);
        s->listener_paused = 0;
    }
}

static void conn_release_cb(evutil_socket_t fd, short what, void *arg)
{
    struct eai_conn *c = arg;
    struct eai_server *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconn--;
    if (c->linger)
        event_free(c->linger);
    if (c->release_ev)
        event_free(c->release_ev);
    if (c->watch)
        event_free(c->watch);
    bufferevent_decref(c->bev); /* the last reference: closes the socket */
    free(c->acc);
    free(c);
    listener_update(s);
}

static void conn_schedule_release(struct eai_conn *c)
{
    if (c->released)
        return;
    c->released = 1;
    c->evcon = NULL;
    if (c->linger)
        event_del(c->linger);
    if (c->watch)
        event_del(c->watch);
    struct timeval zero = {0, 0};
    if (evtimer_add(c->release_ev, &zero) < 0)
        eai_log(SRV_COMPONENT, EAI_LOG_ERROR, "cannot schedule a connection release (leak)");
}

/* evhttp is freeing the connection. */
static void conn_close_cb(struct evhttp_connection *evcon, void *arg)
{
    struct eai_conn *c = arg;
    struct eai_req *r = c->cur;
    c->cur = NULL;
    if (r) {
        r->conn = NULL;
        /* a request still on the connection is freed with it; a detached
         * one (client went away while we worked) survives until we reply */
        eai_req_mark_gone(r, r->evreq && evhttp_request_get_connection(r->evreq) != NULL);
    }
    conn_schedule_release(c);
}

static void sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    struct eai_server *s = arg;
    for (struct eai_conn *c = s->conns; c; c = c->next) {
        if (c->released)
            continue;
        bufferevent_data_cb rcb, wcb;
        bufferevent_event_cb ecb;
        void *cbarg;
        bufferevent_getcb(c->bev, &rcb, &wcb, &ecb, &cbarg);
        if (!rcb && !wcb && !ecb && !cbarg) /* evhttp freed it before we saw it */
            conn_schedule_release(c);
    }
}

static void conn_learn_evcon(struct eai_conn *c)
{
    if (c->evcon || c->released || c->closing)
        return;
    bufferevent_data_cb rcb, wcb;
    bufferevent_event_cb ecb;
    void *cbarg = NULL;
    bufferevent_getcb(c->bev, &rcb, &wcb, &ecb, &cbarg);
    if (!cbarg)
        return;
    c->evcon = cbarg;
    evhttp_connection_set_closecb(c->evcon, conn_close_cb, c);
}

/* --- takeover: answer our own envelope and close (lingering) */

static void conn_abort(struct eai_conn *c)
{
    if (c->evcon) {
        struct evhttp_connection *evcon = c->evcon;
        evhttp_connection_free(evcon); /* calls conn_close_cb */
    } else {
        conn_schedule_release(c);
    }
}

static void linger_timer_cb(evutil_socket_t fd, short what, void *arg) { conn_abort(arg); }

static void linger_read_cb(struct bufferevent *bev, void *arg)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    evbuffer_drain(in, evbuffer_get_length(in));
}

static void linger_write_cb(struct bufferevent *bev, void *arg)
{
    struct eai_conn *c = arg;
    /* reply flushed: half-close and keep discarding for a moment so the
     * client reads the answer instead of a reset */
    evutil_socket_t fd = bufferevent_getfd(bev);
    if (fd >= 0)
        shutdown(fd, SHUT_WR);
    struct timeval two = {2, 0};
    if (c->linger)
        event_add(c->linger, &two);
}

static void linger_event_cb(struct bufferevent *bev, short what, void *arg)
{
    conn_abort(arg);
}

static const char *hdr_find(const char *block, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    const char *p = memchr(block, '\n', len); /* skip the request line */
    while (p && (size_t)(p - block) < len) {
        p++;
        const char *eol = memchr(p, '\n', len - (size_t)(p - block));
        if (!eol)
            break;
        if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *e = eol;
            while (e > v && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
                e--;
            *vlen = (size_t)(e - v);
            return v;
        }
        p = eol;
    }
    return NULL;
}

static void conn_reject(struct eai_conn *c, enum eai_code code)
{
    struct eai_server *s = c->srv;
    c->state = CONN_REJECTED;
    c->closing = 1;
    char rid[130] = "", al[256] = "";
    size_t n;
    const char *v;
    if (c->acc && (v = hdr_find(c->acc, c->acclen, "X-Request-Id", &n)) && n < sizeof(rid)) {
        memcpy(rid, v, n);
        rid[n] = '\0';
    }
    if (!eai_http_request_id_ok(rid))
        eai_uuid_v4(rid);
    if (c->acc && (v = hdr_find(c->acc, c->acclen, "Accept-Language", &n)) && n < sizeof(al)) {
        memcpy(al, v, n);
        al[n] = '\0';
    }
    const char *lang = eai_http_negotiate_lang(al);
    json_t *env = eai_http_error_envelope(code, lang, rid, NULL);
    char *body = env ? json_dumps(env, JSON_COMPACT) : NULL;
    json_decref(env);
    int status = eai_code_http_status(code);
    char head[512];
    int hl = snprintf(head, sizeof(head),
                      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\nX-Request-Id: %s\r\nContent-Language: %s\r\n"
                      "Vary: Accept-Language\r\n\r\n",
                      status, eai_http_reason(status), body ? strlen(body) : 0, rid, lang);
    char labels[96];
    snprintf(labels, sizeof(labels), "route=\"body_cap\",code=\"%d\"", status);
    eai_metrics_add("eai_http_requests_total", labels, 1);
    eai_log_req(SRV_COMPONENT, EAI_LOG_INFO, rid, "request refused before its body: %s", eai_code_name(code));
    bufferevent_setcb(c->bev, linger_read_cb, linger_write_cb, linger_event_cb, c);
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    bufferevent_write(c->bev, head, (size_t)hl);
    if (body)
        bufferevent_write(c->bev, body, strlen(body));
    free(body);
    struct timeval t = {10, 0};
    bufferevent_set_timeouts(c->bev, &t, &t);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    c->linger = evtimer_new(s->app->base, linger_timer_cb, c);
    if (c->linger) {
        struct timeval cap = {10, 0};
        event_add(c->linger, &cap);
    }
}

/* Look at a complete header block in acc (ends at end). */
static void conn_header_done(struct eai_conn *c, size_t end)
{
    struct eai_server *s = c->srv;
    size_t n;
    const char *v = hdr_find(c->acc, end, "Content-Length", &n);
    c->state = CONN_BODY;
    c->chunked = 0;
    c->body_seen = (int64_t)(c->acclen - end);
    const char *te = hdr_find(c->acc, end, "Transfer-Encoding", &n);
    if (te && n >= 7) {
        for (size_t i = 0; i + 7 <= n; i++)
            if (strncasecmp(te + i, "chunked", 7) == 0)
                c->chunked = 1;
    }
    if (!c->chunked && v) {
        size_t vl;
        v = hdr_find(c->acc, end, "Content-Length", &vl);
        uint64_t cl = 0;
        int ok = vl > 0 && vl <= 19;
        for (size_t i = 0; ok && i < vl; i++) {
            if (v[i] < '0' || v[i] > '9')
                ok = 0;
            else
                cl = cl * 10 + (uint64_t)(v[i] - '0');
        }
        if (ok && cl > s->cap && c->inflight == 0) {
            conn_reject(c, EAI_E_PAYLOAD_TOO_LARGE);
            return;
        }
    }
    if (c->chunked && c->body_seen > s->chunk_slack_cap && c->inflight == 0)
        conn_reject(c, EAI_E_PAYLOAD_TOO_LARGE);
}

/* Feed bytes to the header-block scanner. */
static void conn_scan(struct eai_conn *c, const char *data, size_t n)
{
    struct eai_server *s = c->srv;
    if (c->state == CONN_BODY) {
        if (c->chunked) {
            c->body_seen += (int64_t)n;
            if (c->body_seen > s->chunk_slack_cap && c->inflight == 0)
                conn_reject(c, EAI_E_PAYLOAD_TOO_LARGE);
        }
        return;
    }
    if (c->state != CONN_HEAD)
        return;
    size_t room = s->acc_cap - c->acclen;
    size_t take = n < room ? n : room;
    size_t old = c->acclen;
    memcpy(c->acc + c->acclen, data, take);
    c->acclen += take;
    /* search for the blank line from a little before the new bytes */
    size_t from = old > 3 ? old - 3 : 0;
    for (size_t i = from; i < c->acclen; i++) {
        if (c->acc[i] != '\n')
            continue;
        if (i + 1 < c->acclen && c->acc[i + 1] == '\n') {
            conn_header_done(c, i + 2);
            return;
        }
        if (i + 2 < c->acclen && c->acc[i + 1] == '\r' && c->acc[i + 2] == '\n') {
            conn_header_done(c, i + 3);
            return;
        }
    }
    if (c->acclen >= s->acc_cap)
        c->state = CONN_PASS; /* evhttp's header limit decides */
}

static void conn_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct eai_conn *c = arg;
    if (info->n_added == 0 || c->released)
        return;
    conn_learn_evcon(c);
    if (c->state == CONN_PASS || c->state == CONN_REJECTED)
        return;
    if (!c->acc && !(c->acc = malloc(c->srv->acc_cap)))
        return;
    size_t len = evbuffer_get_length(buf);
    size_t n = info->n_added < len ? info->n_added : len;
    if (c->state == CONN_BODY && !c->chunked)
        return;
    if (c->state == CONN_BODY) {
        conn_scan(c, NULL, n);
        return;
    }
    struct evbuffer_ptr pos;
    if (evbuffer_ptr_set(buf, &pos, len - n, EVBUFFER_PTR_SET) < 0)
        return;
    char tmp[4096];
    while (n > 0 && c->state == CONN_HEAD) {
        size_t k = n < sizeof(tmp) ? n : sizeof(tmp);
        ev_ssize_t got = evbuffer_copyout_from(buf, &pos, tmp, k);
        if (got <= 0)
            break;
        conn_scan(c, tmp, (size_t)got);
        n -= (size_t)got;
        if (c->state != CONN_HEAD) /* a reject drained the buffer: pos is stale */
            break;
        evbuffer_ptr_set(buf, &pos, (size_t)got, EVBUFFER_PTR_ADD);
    }
    if (n > 0 && c->state == CONN_BODY && c->chunked)
        conn_scan(c, NULL, n);
}

static struct bufferevent *bev_cb(struct event_base *base, void *arg)
{
    struct eai_server *s = arg;
    struct bufferevent *bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL;
    struct eai_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return bev; /* untracked, still served */
    c->srv = s;
    c->bev = bev;
    c->release_ev = evtimer_new(base, conn_release_cb, c);
    if (!c->release_ev) {
        free(c);
        return bev;
    }
    bufferevent_incref(bev);
    if (!evbuffer_add_cb(bufferevent_get_input(bev), conn_input_cb, c)) {
        bufferevent_decref(bev);
        event_free(c->release_ev);
        free(c);
        return bev;
    }
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconn++;
    listener_update(s);
    return bev;
}

static struct eai_conn *conn_of(struct eai_server *s, struct evhttp_request *evreq)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(evreq);
    if (!evcon)
        return NULL;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    for (struct eai_conn *c = s->conns; c; c = c->next)
        if (c->bev == bev && !c->released)
            return c;
    return NULL;
}

/* While a request is handled evhttp does not read the socket, so a client
 * that goes away is only noticed when we write.  A one-shot read watch
 * notices EOF (or a reset) early for long-polls and event streams; when
 * pipelined bytes make the socket readable instead, the watch just stops. */
static void conn_watch_cb(evutil_socket_t fd, short what, void *arg)
{
    struct eai_conn *c = arg;
    struct eai_req *r = c->cur;
    if (!r || c->released || r->replied)
        return;
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        event_add(c->watch, NULL);
        return;
    }
    if (n > 0)
        return;
    eai_req_mark_gone(r, 0);
}

static void conn_watch_arm(struct eai_conn *c)
{
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (fd < 0 || c->released)
        return;
    if (!c->watch)
        c->watch = event_new(c->srv->app->base, fd, EV_READ, conn_watch_cb, c);
    if (c->watch)
        event_add(c->watch, NULL);
}

/* A request was dispatched: evhttp consumed it; what is left in the input
 * is the start of the next (pipelined) request. */
static void conn_dispatched(struct eai_conn *c, struct eai_req *r)
{
    conn_learn_evcon(c);
    c->cur = r;
    c->inflight++;
    c->state = CONN_HEAD;
    c->acclen = 0;
    c->chunked = 0;
    c->body_seen = 0;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t len = evbuffer_get_length(in);
    if (len == 0 || (!c->acc && !(c->acc = malloc(c->srv->acc_cap))))
        return;
    char tmp[4096];
    struct evbuffer_ptr pos;
    evbuffer_ptr_set(in, &pos, 0, EVBUFFER_PTR_SET);
    while (len > 0 && c->state == CONN_HEAD) {
        size_t k = len < sizeof(tmp) ? len : sizeof(tmp);
        ev_ssize_t got = evbuffer_copyout_from(in, &pos, tmp, k);
        if (got <= 0)
            break;
        conn_scan(c, tmp, (size_t)got);
        len -= (size_t)got;
        if (c->state != CONN_HEAD)
            break;
        evbuffer_ptr_set(in, &pos, (size_t)got, EVBUFFER_PTR_ADD);
    }
}

static void conn_replied(struct eai_conn *c, struct eai_req *r)
{
    if (!c)
        return;
    if (c->cur == r)
        c->cur = NULL;
    if (c->inflight > 0)
        c->inflight--;
    if (c->watch)
        event_del(c->watch);
}

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

static void gen_cb(struct evhttp_request *evreq, void *arg)
{
    struct eai_server *s = arg;
    struct eai_app *app = s->app;
    struct eai_req *r = calloc(1, sizeof(*r));
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
    snprintf(r->method, sizeof(r->method), "%s", method_name(evhttp_request_get_command(evreq)));
    struct evkeyvalq *in = evhttp_request_get_input_headers(evreq);
    const char *rid = evhttp_find_header(in, "X-Request-Id");
    if (eai_http_request_id_ok(rid))
        snprintf(r->request_id, sizeof(r->request_id), "%s", rid);
    else
        eai_uuid_v4(r->request_id);
    r->lang = eai_http_negotiate_lang(evhttp_find_header(in, "Accept-Language"));
    const char *tp = evhttp_find_header(in, "traceparent");
    if (!tp || eai_traceparent_parse(tp, &r->trace) < 0)
        eai_trace_ctx_generate(&r->trace);
    r->conn = conn_of(s, evreq);
    if (r->conn)
        conn_dispatched(r->conn, r);

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
    char sname[96];
    snprintf(sname, sizeof(sname), "%s %s", r->method, r->route ? r->route->pattern : "unmatched");
    r->span = eai_span_start(sname, EAI_SPAN_SERVER, r->trace.trace_id, r->trace.valid ? r->trace.span_id : NULL);
    if (r->span) {
        eai_span_set_str(r->span, "http.method", r->method);
        eai_span_set_str(r->span, "http.route", r->route ? r->route->pattern : "");
        eai_span_set_str(r->span, "eai.request_id", r->request_id);
    }

    /* body */
    struct evbuffer *body = evhttp_request_get_input_buffer(evreq);
    size_t blen = body ? evbuffer_get_length(body) : 0;
    if (blen > s->cap) {
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
        } else {
            eai_reply_error(r, bad_escape ? EAI_E_VALIDATION_FAILED : EAI_E_NOT_FOUND,
                            bad_escape ? json_pack("[{s:s, s:s}]", "path", "", "message", "malformed percent-escape in the path") : NULL);
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
        eai_auth_start(r);
    else
        r->route->fn(app, r);
    /* r may be freed now; the connection is still valid in this callback */
    if (conn && conn->cur && !conn->released)
        conn_watch_arm(conn);
}

/* ------------------------------------------------------------ start / stop */

int eai_server_start(struct eai_app *app, struct eai_error **err)
{
    struct eai_config *cfg = app->cfg;
    char host[256];
    int port;
    if (eai_cfg_parse_listen(cfg->listen, host, sizeof(host), &port) < 0) {
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, 0, "listen address '%s' malformed", cfg->listen));
        return -1;
    }
    struct eai_server *s = calloc(1, sizeof(*s));
    if (!s) {
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, ENOMEM, "out of memory"));
        return -1;
    }
    s->app = app;
    s->cap = cfg->max_body_bytes;
    s->acc_cap = cfg->max_header_bytes + 8192;
    s->chunk_slack_cap = (int64_t)s->cap + (int64_t)s->cap / 4 + 65536;
    eai_metrics_describe("eai_http_connections", EAI_METRIC_GAUGE, "Open HTTP connections.");
    eai_metrics_set("eai_http_connections", NULL, 0);
    s->http = evhttp_new(app->base);
    if (!s->http) {
        free(s);
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, 0, "evhttp_new failed"));
        return -1;
    }
    evhttp_set_bevcb(s->http, bev_cb, s);
    evhttp_set_gencb(s->http, gen_cb, s);
    /* evhttp's own limit only backs ours up (it answers without an envelope) */
    evhttp_set_max_body_size(s->http, (ev_ssize_t)(2 * s->cap + (1 << 20)));
    evhttp_set_max_headers_size(s->http, (ev_ssize_t)cfg->max_header_bytes);
    evhttp_set_timeout(s->http, cfg->request_timeout_s);
    evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
                                        EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
    evhttp_set_default_content_type(s->http, "application/json");
    s->sock = evhttp_bind_socket_with_handle(s->http, host, (ev_uint16_t)port);
    if (!s->sock) {
        int e = errno;
        evhttp_free(s->http);
        free(s);
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, e, "cannot listen on %s: %s", cfg->listen,
                                               e ? strerror(e) : "bind failed"));
        return -1;
    }
    s->listener = evhttp_bound_socket_get_listener(s->sock);
    s->sweep = event_new(app->base, -1, EV_PERSIST, sweep_cb, s);
    if (s->sweep) {
        struct timeval one = {1, 0};
        event_add(s->sweep, &one);
    }
    app->http = s->http;
    g_srv = s;
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
    eai_log(SRV_COMPONENT, EAI_LOG_INFO, "listening on %s%s%s:%d (body cap %zu bytes, %d connections)",
            strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", real_port, s->cap,
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
    if (s->sock) {
        evhttp_del_accept_socket(s->http, s->sock);
        s->sock = NULL;
        s->listener = NULL;
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
    for (struct eai_conn *c = s->conns; c; c = c->next)
        if (!c->released && !c->closing && evbuffer_get_length(bufferevent_get_output(c->bev)) > 0)
            n++;
    return n;
}

void eai_server_stop(struct eai_app *app)
{
    struct eai_server *s = g_srv;
    if (!s)
        return;
    eai_server_stop_accepting(app);
    if (s->sweep)
        event_free(s->sweep);
    /* evhttp_free frees every connection (our close callback schedules the
     * releases; run them now since the loop may not turn again) */
    evhttp_free(s->http);
    app->http = NULL;
    while (s->conns)
        conn_release_cb(-1, 0, s->conns);
    g_srv = NULL;
    free(s);
}
