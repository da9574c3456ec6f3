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

#include "http/auth.h"
#include "config/config.h"
#include "config/config_check.h"
#include "base/errors.h"
#include "http/http_util.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "http/routes.h"
#include "http/server.h"
#include "http/server_ext.h"
#include "base/util.h"
#include "base/worker.h"
#include "schema/yamljson.h"

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

struct eai_req {
    struct eai_app *app;
    struct eai_server *srv;
    struct evhttp_request *evreq;
    struct eai_conn *conn;
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
    char key_id[EAI_KEY_ID_LEN + 1];
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

static struct eai_server *g_srv;

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
        r->gone = 1;
        r->conn = NULL;
        /* a request still on the connection is freed with it; a detached
         * one (client went away while we worked) survives until we reply */
        if (r->evreq && evhttp_request_get_connection(r->evreq) != NULL)
            r->evreq = NULL;
        if (r->on_gone) {
            void (*fn)(void *) = r->on_gone;
            r->on_gone = NULL;
            fn(r->on_gone_arg);
        }
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
    r->gone = 1;
    if (r->on_gone) {
        void (*fn)(void *) = r->on_gone;
        r->on_gone = NULL;
        fn(r->on_gone_arg);
    }
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

/* ------------------------------------------------------------ requests */

static void req_free(struct eai_req *r)
{
    if (!r)
        return;
    eai_route_params_clear(&r->params);
    if (r->query_ok)
        evhttp_clear_headers(&r->query);
    free(r->path);
    free(r->body);
    if (r->srv)
        r->srv->reqs_live--;
    free(r);
}

static void req_finish_metrics(struct eai_req *r)
{
    char labels[160];
    const char *route = r->route ? r->route->name : "unmatched";
    snprintf(labels, sizeof(labels), "route=\"%s\",code=\"%d\"", route, r->status);
    eai_metrics_add("eai_http_requests_total", labels, 1);
    char l2[96];
    snprintf(l2, sizeof(l2), "route=\"%s\"", route);
    double secs = (double)(eai_monotonic_ns() - r->start_ns) / 1e9;
    eai_metrics_observe("eai_http_request_duration_seconds", l2, secs);
    if (r->span) {
        eai_span_set_int(r->span, "http.status_code", r->status);
        eai_span_end(r->span, r->status >= 500);
        r->span = NULL;
    }
    eai_log_req(SRV_COMPONENT, EAI_LOG_DEBUG, r->request_id, "%s %s -> %d (%.1f ms)%s", r->method,
                r->path ? r->path : "?", r->status, secs * 1000, r->gone ? " (client gone)" : "");
}

static void add_common_headers(struct eai_req *r, struct evkeyvalq *h)
{
    evhttp_add_header(h, "X-Request-Id", r->request_id);
    evhttp_add_header(h, "Content-Language", r->lang ? r->lang : "en");
    evhttp_add_header(h, "Vary", "Accept-Language");
    if (r->span) {
        char tp[56];
        eai_traceparent_format(eai_span_trace_id(r->span), eai_span_id(r->span), r->trace.flags, tp);
        evhttp_add_header(h, "traceparent", tp);
    }
}

static void req_send(struct eai_req *r, int status, const char *ctype, const void *data, size_t len,
                     const char *const *headers)
{
    if (r->replied) {
        eai_log_req(SRV_COMPONENT, EAI_LOG_ERROR, r->request_id, "second reply to one request ignored");
        return;
    }
    r->replied = 1;
    r->status = status;
    conn_replied(r->conn, r);
    if (!r->evreq) { /* freed with its connection */
        req_finish_metrics(r);
        req_free(r);
        return;
    }
    struct evbuffer *buf = evbuffer_new();
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->evreq);
    if (h) {
        if (ctype)
            evhttp_add_header(h, "Content-Type", ctype);
        add_common_headers(r, h);
        for (int i = 0; headers && headers[i]; i++) {
            const char *colon = strchr(headers[i], ':');
            if (!colon)
                continue;
            char name[128];
            size_t nl = (size_t)(colon - headers[i]);
            if (nl >= sizeof(name))
                continue;
            memcpy(name, headers[i], nl);
            name[nl] = '\0';
            const char *v = colon + 1;
            while (*v == ' ')
                v++;
            evhttp_add_header(h, name, v);
        }
        if (status == 413 || (r->srv && r->srv->stopping))
            evhttp_add_header(h, "Connection", "close");
    }
    if (buf && data && len)
        evbuffer_add(buf, data, len);
    req_finish_metrics(r);
    evhttp_send_reply(r->evreq, status, eai_http_reason(status), buf);
    if (buf)
        evbuffer_free(buf);
    req_free(r);
}

void eai_reply_raw(struct eai_req *r, int status, const char *content_type, const void *data, size_t len)
{
    req_send(r, status, content_type, data, len, NULL);
}

void eai_reply_json_headers(struct eai_req *r, int status, json_t *body, const char *const *headers)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text) {
        /* out of memory or no body: a minimal envelope by hand */
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"Internal error\","
                                  "\"message_i18n\":{\"en\":\"Internal error\",\"fr\":\"Erreur interne\"},"
                                  "\"request_id\":\"\",\"details\":[]}}";
        req_send(r, 500, "application/json", oom, sizeof(oom) - 1, NULL);
        return;
    }
    size_t n = strlen(text);
    text[n] = '\0';
    char *withnl = realloc(text, n + 2);
    if (withnl) {
        text = withnl;
        text[n++] = '\n';
        text[n] = '\0';
    }
    req_send(r, status, "application/json", text, n, headers);
    free(text);
}

void eai_reply_json(struct eai_req *r, int status, json_t *body)
{
    eai_reply_json_headers(r, status, body, NULL);
}

void eai_reply_error(struct eai_req *r, enum eai_code code, json_t *details)
{
    json_t *env = eai_http_error_envelope(code, r->lang, r->request_id, details);
    const char *retry[] = {"Retry-After: 1", NULL};
    const char *bearer[] = {"WWW-Authenticate: Bearer", NULL}; /* RFC 6750 section 3 */
    const struct eai_code_info *ci = eai_code_info(code);
    eai_reply_json_headers(r, ci->http_status, env,
                           code == EAI_E_UNAUTHENTICATED ? bearer :
                           (code == EAI_E_RATE_LIMITED || code == EAI_E_SANDBOX_UNAVAILABLE ||
                            code == EAI_E_STORAGE_UNAVAILABLE) ? retry : NULL);
}

/* --- SSE */

void eai_stream_start(struct eai_req *r, const char *content_type)
{
    if (r->replied || r->streaming || !r->evreq)
        return;
    r->streaming = 1;
    r->status = 200;
    struct evkeyvalq *h = evhttp_request_get_output_headers(r->evreq);
    evhttp_add_header(h, "Content-Type", content_type ? content_type : "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    add_common_headers(r, h);
    evhttp_send_reply_start(r->evreq, 200, "OK");
}

void eai_stream_send(struct eai_req *r, const char *data, size_t len)
{
    if (!r->streaming || r->replied || r->gone || !r->evreq || !len)
        return;
    struct evbuffer *b = evbuffer_new();
    if (!b)
        return;
    evbuffer_add(b, data, len);
    evhttp_send_reply_chunk(r->evreq, b);
    evbuffer_free(b);
}

void eai_stream_end(struct eai_req *r)
{
    if (r->replied)
        return;
    if (!r->streaming) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    r->replied = 1;
    conn_replied(r->conn, r);
    req_finish_metrics(r);
    if (r->evreq)
        evhttp_send_reply_end(r->evreq);
    req_free(r);
}

/* --- accessors */

const char *eai_req_method(const struct eai_req *r) { return r->method; }
const char *eai_req_path(const struct eai_req *r) { return r->path; }
const char *eai_req_id(const struct eai_req *r) { return r->request_id; }
const char *eai_req_lang(const struct eai_req *r) { return r->lang; }
const char *eai_req_tenant(const struct eai_req *r) { return r->tenant[0] ? r->tenant : NULL; }
const char *eai_req_key_id(const struct eai_req *r) { return r->key_id[0] ? r->key_id : NULL; }
const struct eai_trace_ctx *eai_req_trace(const struct eai_req *r) { return &r->trace; }
struct eai_span *eai_req_span(const struct eai_req *r) { return r->span; }
int eai_req_gone(const struct eai_req *r) { return r->gone; }

void eai_req_on_gone(struct eai_req *r, void (*fn)(void *), void *arg)
{
    r->on_gone = fn;
    r->on_gone_arg = arg;
}

const char *eai_req_param(const struct eai_req *r, const char *name)
{
    for (int i = 0; i < r->params.n; i++)
        if (strcmp(r->params.name[i], name) == 0)
            return r->params.value[i];
    return NULL;
}

const char *eai_req_query(const struct eai_req *r, const char *name)
{
    if (!r->query_ok)
        return NULL;
    return evhttp_find_header((struct evkeyvalq *)&r->query, name);
}

const char *eai_req_header(const struct eai_req *r, const char *name)
{
    if (!r->evreq)
        return NULL;
    return evhttp_find_header(evhttp_request_get_input_headers(r->evreq), name);
}

const char *eai_req_body(const struct eai_req *r, size_t *len)
{
    if (len)
        *len = r->body_len;
    return r->body ? r->body : "";
}

/* --- body as JSON / YAML */

static int media_is(const char *ct, const char *type)
{
    size_t n = strlen(type);
    return strncasecmp(ct, type, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

json_t *eai_req_body_json(struct eai_req *r, int yaml_ok)
{
    const char *ct = eai_req_header(r, "Content-Type");
    int yaml = 0;
    if (ct && *ct) {
        while (*ct == ' ')
            ct++;
        const char *semi = strchr(ct, ';');
        size_t tl = semi ? (size_t)(semi - ct) : strlen(ct);
        int plus_json = tl > 5 && strncasecmp(ct + tl - 5, "+json", 5) == 0;
        if (media_is(ct, "application/yaml") || media_is(ct, "application/x-yaml") ||
            media_is(ct, "text/yaml") || media_is(ct, "text/x-yaml")) {
            if (!yaml_ok) {
                eai_reply_error(r, EAI_E_UNSUPPORTED_MEDIA_TYPE,
                                json_pack("[{s:s, s:s}]", "path", "", "message", "this route takes application/json"));
                return NULL;
            }
            yaml = 1;
        } else if (!(media_is(ct, "application/json") || plus_json || media_is(ct, "text/json") ||
                     media_is(ct, "text/plain") || media_is(ct, "application/x-www-form-urlencoded") ||
                     media_is(ct, "*/*"))) {
            eai_reply_error(r, EAI_E_UNSUPPORTED_MEDIA_TYPE,
                            json_pack("[{s:s, s:s}]", "path", "", "message",
                                      yaml_ok ? "send application/json or application/yaml"
                                              : "send application/json"));
            return NULL;
        }
    }
    if (yaml) {
        struct eai_error *e = NULL;
        json_t *v = eai_yaml_to_json(r->body ? r->body : "", r->body_len, &e);
        if (!v) {
            json_t *details = e && e->details ? json_incref(e->details) : NULL;
            eai_error_free(e);
            eai_reply_error(r, EAI_E_INVALID_JSON, details);
        }
        return v;
    }
    json_error_t je;
    json_t *v = r->body_len ? json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!v) {
        char msg[300];
        if (r->body_len)
            snprintf(msg, sizeof(msg), "line %d, column %d: %s", je.line, je.column, je.text);
        else
            snprintf(msg, sizeof(msg), "the body is empty");
        eai_reply_error(r, EAI_E_INVALID_JSON, json_pack("[{s:s, s:s}]", "path", "", "message", msg));
    }
    return v;
}

/* --- audit helpers */

json_t *eai_req_audit_event(const struct eai_req *r, const char *action, const char *target,
                            const char *decision, const char *reason)
{
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    const char *trace_id = r->span ? eai_span_trace_id(r->span) : r->trace.trace_id;
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s?, s:s, s:s}",
                           "id", id, "time", now,
                           "tenant_id", r->tenant[0] ? r->tenant : EAI_SYSTEM_TENANT,
                           "actor", r->key_id[0] ? r->key_id : "anonymous",
                           "action", action ? action : "",
                           "target", target ? target : "",
                           "decision", decision ? decision : "allow",
                           "reason", reason,
                           "request_id", r->request_id,
                           "trace_id", trace_id ? trace_id : "");
    if (ev && !reason)
        json_object_set_new(ev, "reason", json_string(""));
    return ev;
}

struct audit_job {
    struct eai_app *app;
    char tenant[64];
    json_t *event;
    struct eai_error *err;
    int rc;
};

static void audit_work(void *arg)
{
    struct audit_job *j = arg;
    j->rc = j->app->store->audit_append(j->app->storage.self, j->tenant, j->event, &j->err);
}

static void audit_done(void *arg)
{
    struct audit_job *j = arg;
    if (j->rc < 0)
        eai_log(SRV_COMPONENT, EAI_LOG_ERROR, "audit append (%s) failed: %s",
                json_string_value(json_object_get(j->event, "action")),
                j->err && j->err->message ? j->err->message : "?");
    eai_error_free(j->err);
    json_decref(j->event);
    free(j);
}

void eai_req_audit_async(struct eai_app *app, const char *tenant, json_t *event)
{
    if (!event)
        return;
    struct audit_job *j = calloc(1, sizeof(*j));
    if (!j || !app->store) {
        free(j);
        json_decref(event);
        return;
    }
    j->app = app;
    snprintf(j->tenant, sizeof(j->tenant), "%s", tenant ? tenant : EAI_SYSTEM_TENANT);
    json_object_set_new(event, "tenant_id", json_string(j->tenant));
    j->event = event;
    if (eai_work_submit(audit_work, audit_done, j) < 0) {
        eai_log(SRV_COMPONENT, EAI_LOG_ERROR, "audit append (%s): worker queue full, event lost",
                json_string_value(json_object_get(event, "action")));
        json_decref(event);
        free(j);
    }
}

/* ------------------------------------------------------------ auth */

struct auth_job {
    struct eai_req *r;
    char key_id[EAI_KEY_ID_LEN + 1];
    char secret[EAI_KEY_SECRET_LEN + 1];
    json_t *rec;
    struct eai_error *err;
    int rc;
    int ok;
};

static void auth_refuse(struct eai_req *r, const char *reason)
{
    json_t *ev = eai_req_audit_event(r, "auth.refused", r->path, "deny", reason);
    json_object_set_new(ev, "actor", json_string(r->key_id[0] ? r->key_id : "anonymous"));
    r->tenant[0] = '\0';
    eai_req_audit_async(r->app, EAI_SYSTEM_TENANT, ev);
    eai_reply_error(r, EAI_E_UNAUTHENTICATED, NULL);
}

static void auth_work(void *arg)
{
    struct auth_job *j = arg;
    struct eai_app *app = j->r->app;
    j->rc = app->store->key_get(app->storage.self, j->key_id, &j->rec, &j->err);
    if (j->rc == 0)
        j->ok = eai_auth_check(j->rec, app->pepper, j->secret);
    explicit_bzero(j->secret, sizeof(j->secret));
}

static void auth_done(void *arg)
{
    struct auth_job *j = arg;
    struct eai_req *r = j->r;
    if (j->rc < 0) {
        enum eai_code code = j->err && j->err->code == EAI_E_STORAGE_UNAVAILABLE ? EAI_E_STORAGE_UNAVAILABLE
                                                                                  : EAI_E_INTERNAL;
        eai_log_req(SRV_COMPONENT, EAI_LOG_ERROR, r->request_id, "key lookup failed: %s",
                    j->err && j->err->message ? j->err->message : "?");
        eai_reply_error(r, code, NULL);
    } else if (!j->ok) {
        const char *why = !j->rec ? "unknown key" :
                          json_is_true(json_object_get(j->rec, "revoked")) ? "revoked key" :
                          eai_auth_expired(j->rec, eai_now_ms()) ? "expired key" : "wrong secret";
        auth_refuse(r, why);
    } else {
        snprintf(r->tenant, sizeof(r->tenant), "%s", json_string_value(json_object_get(j->rec, "tenant_id")));
        if (r->span)
            eai_span_set_str(r->span, "eai.tenant_id", r->tenant);
        if (r->gone)
            eai_reply_error(r, EAI_E_INTERNAL, NULL); /* only frees */
        else
            r->route->fn(r->app, r);
    }
    json_decref(j->rec);
    eai_error_free(j->err);
    free(j);
}

static void auth_start(struct eai_req *r)
{
    const char *h = eai_req_header(r, "Authorization");
    struct auth_job *j = calloc(1, sizeof(*j));
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->r = r;
    if (!h || eai_auth_parse_bearer(h, j->key_id, j->secret) < 0) {
        free(j);
        auth_refuse(r, h ? "malformed key" : "missing key");
        return;
    }
    snprintf(r->key_id, sizeof(r->key_id), "%s", j->key_id);
    if (!r->app->store || eai_work_submit(auth_work, auth_done, j) < 0) {
        explicit_bzero(j->secret, sizeof(j->secret));
        free(j);
        eai_reply_error(r, r->app->store ? EAI_E_RATE_LIMITED : EAI_E_STORAGE_UNAVAILABLE, NULL);
    }
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
    r->srv = s;
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
    struct eai_conn *conn = r->conn;
    if (r->route->auth == EAI_AUTH_TENANT)
        auth_start(r);
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
