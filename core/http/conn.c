/*
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
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "http/conn.h"
#include "http/http_head.h"
#include "http/tls.h"
#include "http/request_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "base/util.h"

#define SRV_COMPONENT "http"

enum conn_state { CONN_HEAD = 0, CONN_BODY, CONN_PASS, CONN_REJECTED };

struct eai_conn {
    struct eai_conn_guard *g;
    struct bufferevent *bev;          /* we hold one reference */
    struct evhttp_connection *evcon;  /* NULL before the first bytes and after evhttp freed it */
    struct eai_req *cur;              /* request being handled */
    int inflight;
    enum conn_state state;
    char *acc;                        /* header block bytes so far */
    size_t acclen;
    size_t accsize;                   /* allocated: grows by doubling up to the guard's acc_cap */
    int64_t body_seen;                /* raw body bytes after the header block (chunked) */
    int chunked;
    int released;                     /* release scheduled */
    int closing;                      /* our takeover is freeing it */
    struct event *linger;
    struct event *release_ev;
    struct event *watch;              /* EOF watch while a request is handled */
    struct event *read_deadline;      /* 408 when a request is not all in by then */
    int deadline_armed;               /* read_deadline added (and not deleted since) */
    struct eai_conn *prev, *next;
    struct eai_conn *bnext;           /* in the guard's bucket of this bev */
    char tenant[64];                  /* attributed to (eai_conn_attribute), "" none */
};

/* Connections per tenant: a small open table (tenants holding connections). */
struct eai_tenant_conns {
    char tenant[64];
    int n;
    struct eai_tenant_conns *next;
};

static struct eai_tenant_conns **tenant_slot(struct eai_conn_guard *g, const char *tenant)
{
    struct eai_tenant_conns **pp = &g->by_tenant;
    while (*pp && strcmp((*pp)->tenant, tenant) != 0)
        pp = &(*pp)->next;
    return pp;
}

static void tenant_drop(struct eai_conn *c)
{
    if (!c->tenant[0])
        return;
    struct eai_tenant_conns **pp = tenant_slot(c->g, c->tenant);
    if (*pp && --(*pp)->n <= 0) {
        struct eai_tenant_conns *t = *pp;
        *pp = t->next;
        free(t);
    }
    c->tenant[0] = '\0';
    c->g->nattributed--;
}

int eai_conn_attribute(struct eai_conn *c, const char *tenant)
{
    if (!c || !tenant || !*tenant || strcmp(c->tenant, tenant) == 0)
        return 0;
    struct eai_conn_guard *g = c->g;
    struct eai_tenant_conns **pp = tenant_slot(g, tenant);
    if (g->max_per_tenant > 0 && *pp && (*pp)->n >= g->max_per_tenant)
        return -1;
    if (!*pp) {
        *pp = calloc(1, sizeof **pp);
        if (!*pp)
            return 0; /* not counted rather than refused */
        snprintf((*pp)->tenant, sizeof (*pp)->tenant, "%s", tenant);
    }
    (*pp)->n++;
    tenant_drop(c);
    snprintf(c->tenant, sizeof c->tenant, "%s", tenant);
    g->nattributed++;
    return 0;
}


static void conn_schedule_release(struct eai_conn *c);

/* The read deadline: a common timeout of the base (every connection's has
 * the same length, so libevent keeps them in one list, O(1) to add and
 * delete, instead of its heap), added at a request's first byte unless the
 * request is all in already, deleted once it is dispatched. */
static void deadline_arm(struct eai_conn *c)
{
    if (!c->read_deadline || c->deadline_armed || c->g->read_timeout_s <= 0)
        return;
    struct timeval t = {c->g->read_timeout_s, 0};
    if (event_add(c->read_deadline, c->g->read_tv_set ? &c->g->read_tv : &t) == 0)
        c->deadline_armed = 1;
}

static void deadline_disarm(struct eai_conn *c)
{
    if (c->read_deadline && c->deadline_armed)
        event_del(c->read_deadline);
    c->deadline_armed = 0;
}

/* Connections by bufferevent: a request finds its connection in O(1) (a
 * scan of the list cost 4% of a GET at 256 connections). */
static unsigned byb_slot(const struct eai_conn_guard *g, const struct bufferevent *bev)
{
    uint64_t h = (uint64_t)(uintptr_t)bev >> 4;
    h *= 0x9E3779B97F4A7C15ull;
    return (unsigned)(h >> 32) & g->byb_mask;
}

static void byb_add(struct eai_conn_guard *g, struct eai_conn *c)
{
    if (!g->byb) {
        if (g->byb_off)
            return;
        unsigned n = 64;
        while (n < 4096 && n < (unsigned)(g->max_connections > 0 ? g->max_connections : 0))
            n *= 2;
        g->byb = calloc(n, sizeof *g->byb);
        if (!g->byb) {
            g->byb_off = 1; /* eai_conn_of scans the list from now on */
            return;
        }
        g->byb_mask = n - 1;
    }
    struct eai_conn **b = &g->byb[byb_slot(g, c->bev)];
    c->bnext = *b;
    *b = c;
}

static void byb_del(struct eai_conn_guard *g, struct eai_conn *c)
{
    if (!g->byb)
        return;
    for (struct eai_conn **pp = &g->byb[byb_slot(g, c->bev)]; *pp; pp = &(*pp)->bnext)
        if (*pp == c) {
            *pp = c->bnext;
            return;
        }
}

void eai_conn_listener_update(struct eai_conn_guard *s)
{
    eai_metrics_set("eai_http_connections", NULL, s->nconn);
    if (!s->listener || s->stopping)
        return;
    int max = s->max_connections;
    if (!s->listener_paused && s->nconn >= max) {
        evconnlistener_disable(s->listener);
        s->listener_paused = 1;
        eai_log(SRV_COMPONENT, EAI_LOG_WARN, "connection limit %d reached: not accepting", max);
    } else if (s->listener_paused && s->nconn < max) {
        evconnlistener_enable(s->listener);
        s->listener_paused = 0;
    }
}

void eai_conn_release_cb(evutil_socket_t fd, short what, void *arg)
{
    struct eai_conn *c = arg;
    struct eai_conn_guard *s = c->g;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    byb_del(s, c);
    s->nconn--;
    tenant_drop(c);
    if (c->linger)
        event_free(c->linger);
    if (c->release_ev)
        event_free(c->release_ev);
    if (c->watch)
        event_free(c->watch);
    if (c->read_deadline)
        event_free(c->read_deadline);
    bufferevent_decref(c->bev); /* the last reference: closes the socket */
    free(c->acc);
    free(c);
    eai_conn_listener_update(s);
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
    deadline_disarm(c);
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

void eai_conn_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    struct eai_conn_guard *s = arg;
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

/* The header line after the one ending at p (the request line's end
 * first) in block: its start, *eol its '\n'; NULL past the last line. */
static const char *hdr_next(const char *block, size_t len, const char *p, const char **eol)
{
    if (!p || (size_t)(p - block) >= len)
        return NULL;
    p++;
    *eol = memchr(p, '\n', len - (size_t)(p - block));
    return *eol ? p : NULL;
}

/* The value of the header line l..eol whose name has nl bytes, without the
 * blanks around it. */
static const char *hdr_value(const char *l, size_t nl, const char *eol, size_t *vlen)
{
    const char *v = l + nl + 1;
    while (v < eol && (*v == ' ' || *v == '\t'))
        v++;
    const char *e = eol;
    while (e > v && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *vlen = (size_t)(e - v);
    return v;
}

static const char *hdr_find(const char *block, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    const char *eol = NULL, *p = memchr(block, '\n', len); /* skip the request line */
    for (const char *l; (l = hdr_next(block, len, p, &eol)); p = eol)
        if ((size_t)(eol - l) > nl && strncasecmp(l, name, nl) == 0 && l[nl] == ':')
            return hdr_value(l, nl, eol, vlen);
    return NULL;
}

static void conn_reject(struct eai_conn *c, enum eai_code code)
{
    struct eai_conn_guard *s = c->g;
    c->state = CONN_REJECTED;
    c->closing = 1;
    deadline_disarm(c);
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
                      "Vary: Accept-Language\r\n%s\r\n",
                      status, eai_http_reason(status), body ? strlen(body) : 0, rid, lang,
                      code == EAI_E_METHOD_NOT_ALLOWED ? "Allow: " EAI_HTTP_ALLOWED_METHODS "\r\n" : "");
    char labels[96];
    snprintf(labels, sizeof(labels), "route=\"%s\",code=\"%d\"",
             code == EAI_E_PAYLOAD_TOO_LARGE ? "body_cap" : "head_check", status);
    eai_metrics_add("eai_http_requests_total", labels, 1);
    eai_log_req(SRV_COMPONENT, EAI_LOG_INFO, rid, "request refused before evhttp: %s", eai_code_name(code));
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
    c->linger = evtimer_new(s->base, linger_timer_cb, c);
    if (c->linger) {
        struct timeval cap = {10, 0};
        event_add(c->linger, &cap);
    }
}

static int acc_reserve(struct eai_conn *c, size_t need);

/* A head checked where it lay in the input buffer, copied into acc when it
 * is still needed: to answer a refusal now or later (408 for a body still
 * to come, 413 for a chunked one past the cap), with its X-Request-Id and
 * Accept-Language, as for a head that came in pieces. */
static void acc_keep(struct eai_conn *c, const char *head, size_t end)
{
    if (head == c->acc)
        return;
    size_t k = end < c->g->acc_cap ? end : c->g->acc_cap;
    if (acc_reserve(c, k) == 0) {
        memcpy(c->acc, head, k);
        c->acclen = k;
    } else {
        c->acclen = 0;
    }
}

/* Content-Length and Transfer-Encoding of a header block (len bytes, the
 * request line first) in one pass: the first line of each name, its value
 * without the blanks around it (as hdr_find). */
static void cl_te_find(const char *block, size_t len, const char **cl, size_t *cln, const char **te, size_t *ten)
{
    *cl = *te = NULL;
    const char *eol = NULL, *p = memchr(block, '\n', len); /* skip the request line */
    for (const char *l; (l = hdr_next(block, len, p, &eol)); p = eol) {
        size_t ll = (size_t)(eol - l);
        if ((l[0] | 0x20) == 'c' && !*cl && ll > 14 && l[14] == ':' && strncasecmp(l, "Content-Length", 14) == 0)
            *cl = hdr_value(l, 14, eol, cln);
        else if ((l[0] | 0x20) == 't' && !*te && ll > 17 && l[17] == ':' &&
                 strncasecmp(l, "Transfer-Encoding", 17) == 0)
            *te = hdr_value(l, 17, eol, ten);
        else
            continue;
        if (*cl && *te)
            return;
    }
}

/* A complete header block: head (end bytes, the blank line last), have
 * bytes received from its start (the body's first bytes follow it).
 * Answers ours when it is refused (acc then holds the head: conn_reject
 * reads it); else the state for its body.  1: the request is all in
 * (no body to wait for), 0 otherwise. */
static int conn_header_done(struct eai_conn *c, const char *head, size_t end, size_t have)
{
    struct eai_conn_guard *s = c->g;
    enum eai_code hc = eai_http_head_check(head, end, 1, s->max_header_bytes);
    const char *v = NULL, *te = NULL;
    size_t vl = 0, ten = 0;
    uint64_t cl = 0;
    int ok = 0;
    if (hc == EAI_OK) {
        cl_te_find(head, end, &v, &vl, &te, &ten);
        c->chunked = 0;
        if (te && ten >= 7) {
            for (size_t i = 0; i + 7 <= ten; i++)
                if (strncasecmp(te + i, "chunked", 7) == 0)
                    c->chunked = 1;
        }
        ok = v && vl > 0 && vl <= 19;
        for (size_t i = 0; ok && i < vl; i++) {
            if (v[i] < '0' || v[i] > '9')
                ok = 0;
            else
                cl = cl * 10 + (uint64_t)(v[i] - '0');
        }
        if (!c->chunked && ok && cl > s->cap && c->inflight == 0)
            hc = EAI_E_PAYLOAD_TOO_LARGE;
        else if (c->chunked && (int64_t)(have - end) > s->chunk_slack_cap && c->inflight == 0)
            hc = EAI_E_PAYLOAD_TOO_LARGE;
        else if (hc == EAI_OK) {
            c->state = CONN_BODY;
            c->body_seen = (int64_t)(have - end);
            /* all in: no Transfer-Encoding, and no body or all of it */
            return !te && (!v || (ok && cl <= have - end));
        }
    }
    if (c->inflight > 0) {
        c->state = CONN_PASS; /* pipelined behind a request in flight: evhttp answers */
        return 0;
    }
    acc_keep(c, head, end); /* conn_reject reads the head from acc */
    conn_reject(c, hc);
    return 0;
}

/* Room for need bytes of header block (need <= acc_cap): a connection
 * holds what its requests' heads take (~1 KiB), not acc_cap (25 KiB by
 * default: 6 MiB of heap at 256 connections).  0 or -1. */
static int acc_reserve(struct eai_conn *c, size_t need)
{
    if (need <= c->accsize && c->acc)
        return 0;
    size_t sz = c->accsize ? c->accsize : 1024;
    while (sz < need)
        sz *= 2;
    if (sz > c->g->acc_cap)
        sz = c->g->acc_cap;
    if (sz < need)
        return -1;
    char *p = realloc(c->acc, sz);
    if (!p)
        return -1;
    c->acc = p;
    c->accsize = sz;
    return 0;
}

/* The end of a header block in p[0..len) (just past its blank line),
 * searching line by line from from; 0 while it is not all there. */
static size_t head_end(const char *p, size_t from, size_t len)
{
    for (size_t i = from; i < len; i++) {
        const char *nl = memchr(p + i, '\n', len - i); /* line by line, not byte by byte */
        if (!nl)
            break;
        i = (size_t)(nl - p);
        if (i + 1 < len && p[i + 1] == '\n')
            return i + 2;
        if (i + 2 < len && p[i + 1] == '\r' && p[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* Feed bytes to the header-block scanner. */
static void conn_scan(struct eai_conn *c, const char *data, size_t n)
{
    struct eai_conn_guard *s = c->g;
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
    if (acc_reserve(c, c->acclen + take) < 0) {
        c->state = CONN_PASS; /* out of memory: evhttp's own limits decide */
        return;
    }
    memcpy(c->acc + c->acclen, data, take);
    c->acclen += take;
    /* search for the blank line from a little before the new bytes */
    size_t end = head_end(c->acc, old > 3 ? old - 3 : 0, c->acclen);
    if (end) {
        if (!conn_header_done(c, c->acc, end, c->acclen) && c->state != CONN_REJECTED)
            deadline_arm(c); /* the body is still to come: the whole request, from its first byte */
        return;
    }
    if (take > 0)
        deadline_arm(c); /* the head is still to come */
    /* the head so far: an oversized or malformed one is refused now */
    enum eai_code hc = eai_http_head_check(c->acc, c->acclen, 0, s->max_header_bytes);
    if (hc != EAI_OK) {
        if (c->inflight == 0)
            conn_reject(c, hc);
        else
            c->state = CONN_PASS;
        return;
    }
    if (c->acclen >= s->acc_cap)
        c->state = CONN_PASS; /* evhttp's header limit decides */
}

/* A request not all received by server.read_timeout_s after its first
 * byte: 408 with the envelope (a slow client holds no slot for long). */
static void read_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct eai_conn *c = arg;
    if (c->released || c->closing || c->state == CONN_REJECTED || c->inflight > 0)
        return;
    conn_reject(c, EAI_E_REQUEST_TIMEOUT);
}

static void conn_input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct eai_conn *c = arg;
    if (info->n_added == 0 || c->released)
        return;
    conn_learn_evcon(c);
    if (c->state == CONN_PASS || c->state == CONN_REJECTED)
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
    if (c->acclen == 0) {
        /* a request's first bytes, usually all of its head in one read: look
         * at them where they are (no copy into acc) when they are contiguous */
        struct evbuffer_iovec v;
        if (evbuffer_peek(buf, (ev_ssize_t)n, &pos, &v, 1) == 1 && v.iov_len >= n) {
            size_t end = head_end(v.iov_base, 0, n);
            if (end) {
                if (!conn_header_done(c, v.iov_base, end, n) && c->state != CONN_REJECTED) {
                    acc_keep(c, v.iov_base, end); /* not all in: a 408 or 413 may still come */
                    deadline_arm(c);
                }
                return;
            }
        }
    }
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

/* More unauthenticated connections than server.max_unauthenticated_connections:
 * the oldest of them with no request being handled (idle after a refusal, or
 * still sending its head) is closed, never the fresh one, never one that carries
 * a tenant's request.  So clients that connect and say nothing (or only fail
 * to authenticate) cannot hold every slot until the listener pauses: at least
 * max_connections - max_unauthenticated_connections stay for tenants. */
static void evict_unauthenticated(struct eai_conn_guard *s, struct eai_conn *fresh)
{
    struct eai_conn *oldest = NULL;
    for (struct eai_conn *c = s->conns; c; c = c->next) /* newest first */
        if (c != fresh && !c->tenant[0] && !c->cur && !c->inflight && !c->released && !c->closing)
            oldest = c;
    if (!oldest)
        return;
    conn_learn_evcon(oldest);
    eai_metrics_add("eai_http_connections_evicted_total", NULL, 1);
    static int64_t last_ms;
    int64_t now = eai_now_ms();
    if (!last_ms || now - last_ms >= 60000) { /* at most once a minute: a flood must not flood the log */
        last_ms = now;
        eai_log(SRV_COMPONENT, EAI_LOG_WARN,
                "%d unauthenticated connections (server.max_unauthenticated_connections %d): closing the oldest idle one",
                s->nconn - s->nattributed, s->max_unauth);
    }
    oldest->closing = 1;
    conn_abort(oldest);
}

struct bufferevent *eai_conn_bev_cb(struct event_base *base, void *arg)
{
    struct eai_conn_guard *s = arg;
    struct bufferevent *bev = s->tls ? eai_tls_bev_new(s->tls, base)
                                     : bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!bev)
        return NULL;
    struct eai_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return bev; /* untracked, still served */
    c->g = s;
    c->bev = bev;
    c->release_ev = evtimer_new(base, eai_conn_release_cb, c);
    c->read_deadline = evtimer_new(base, read_deadline_cb, c);
    if (!c->release_ev || !c->read_deadline) {
        if (c->read_deadline)
            event_free(c->read_deadline);
        if (c->release_ev)
            event_free(c->release_ev);
        free(c);
        return bev;
    }
    bufferevent_incref(bev);
    if (!evbuffer_add_cb(bufferevent_get_input(bev), conn_input_cb, c)) {
        bufferevent_decref(bev);
        event_free(c->release_ev);
        event_free(c->read_deadline);
        free(c);
        return bev;
    }
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    byb_add(s, c);
    s->nconn++;
    if (s->max_unauth > 0 && s->nconn - s->nattributed > s->max_unauth)
        evict_unauthenticated(s, c);
    eai_conn_listener_update(s);
    return bev;
}

struct eai_conn *eai_conn_of(struct eai_conn_guard *s, struct evhttp_request *evreq)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(evreq);
    if (!evcon)
        return NULL;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    if (s->byb) {
        for (struct eai_conn *c = s->byb[byb_slot(s, bev)]; c; c = c->bnext)
            if (c->bev == bev && !c->released)
                return c;
        return NULL;
    }
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

void eai_conn_watch_arm(struct eai_conn *c)
{
    if (!c->cur || c->released)
        return; /* answered already, or going */
    evutil_socket_t fd = bufferevent_getfd(c->bev);
    if (fd < 0 || c->released)
        return;
    if (!c->watch)
        c->watch = event_new(c->g->base, fd, EV_READ, conn_watch_cb, c);
    if (c->watch)
        event_add(c->watch, NULL);
}

/* A request was dispatched: evhttp consumed it; what is left in the input
 * is the start of the next (pipelined) request. */
void eai_conn_dispatched(struct eai_conn *c, struct eai_req *r)
{
    conn_learn_evcon(c);
    deadline_disarm(c); /* the request is all in */
    c->cur = r;
    c->inflight++;
    c->state = CONN_HEAD;
    c->acclen = 0;
    c->chunked = 0;
    c->body_seen = 0;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t len = evbuffer_get_length(in);
    if (len == 0)
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

void eai_conn_replied(struct eai_conn *c, struct eai_req *r)
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


int eai_conn_flushing(const struct eai_conn *c)
{
    return !c->released && !c->closing && evbuffer_get_length(bufferevent_get_output(c->bev)) > 0;
}

struct eai_conn *eai_conn_next(const struct eai_conn *c)
{
    return c->next;
}
