/*
 * The connection guard of the HTTP server (libevent 2.1 has no connection
 * limit, no hook before a request's body is read, and its own 413 page has
 * no envelope): connection tracking, the listener paused at the limit, the
 * body cap with our own 413 envelope and lingering close, and the EOF
 * watch that tells a parked request its client went away.  Loop thread
 * only; docs/architecture.md "HTTP server details".
 */
#ifndef EAI_CORE_CONN_H
#define EAI_CORE_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <event2/event.h>
#include <event2/http.h>

struct eai_req;
struct evconnlistener;
struct bufferevent;
struct eai_conn;
struct eai_tls;
struct eai_tenant_conns;

/* What the guard keeps; embedded in the server. */
struct eai_conn_guard {
    struct event_base *base;
    struct evconnlistener *listener;  /* NULL once the server stopped accepting */
    int listener_paused;
    int max_connections;
    int nconn;
    struct eai_conn *conns;
    struct eai_conn **byb;            /* the same, hashed by bufferevent (eai_conn_of) */
    unsigned byb_mask;                /* buckets - 1 (a power of two) */
    int byb_off;                      /* the table could not be made: scan the list */
    size_t cap;                       /* max body bytes */
    size_t acc_cap;                   /* header block bytes we look at */
    int64_t chunk_slack_cap;          /* raw chunked bytes before takeover */
    size_t max_header_bytes;          /* 431 past it (http/http_head.c) */
    int read_timeout_s;               /* 408 when a request is not all in by then */
    struct timeval read_tv;           /* the same as a common timeout of base (conn.c deadline_arm) */
    int read_tv_set;
    struct eai_tls *tls;              /* NULL: plain HTTP (http/tls.c) */
    int stopping;
    int max_per_tenant;               /* connections one tenant may hold (0: no bound) */
    int nattributed;                  /* connections attributed to a tenant (the others: unauthenticated) */
    int max_unauth;                   /* unauthenticated connections before the oldest idle one is closed (0: no bound) */
    struct eai_tenant_conns *by_tenant; /* tenant -> connections attributed to it */
};

/* evhttp_set_bevcb callback (arg: the guard): every accepted connection. */
struct bufferevent *eai_conn_bev_cb(struct event_base *base, void *arg);
/* 1 s sweep (arg: the guard): connections evhttp freed before we saw them. */
void eai_conn_sweep_cb(evutil_socket_t fd, short what, void *arg);
/* Pause or resume the listener around the connection limit. */
void eai_conn_listener_update(struct eai_conn_guard *g);
/* The tracked connection of evreq, or NULL. */
struct eai_conn *eai_conn_of(struct eai_conn_guard *g, struct evhttp_request *evreq);
/* r is handled on c (its bytes after the header block start the next). */
void eai_conn_dispatched(struct eai_conn *c, struct eai_req *r);
/* r's answer goes out (c may be NULL). */
void eai_conn_replied(struct eai_conn *c, struct eai_req *r);
/* Watch c for EOF while its request is parked (when one still is). */
void eai_conn_watch_arm(struct eai_conn *c);
/* Drop our reference now (server stop). */
void eai_conn_release_cb(evutil_socket_t fd, short what, void *arg);
/* 1 while c has an answer in its output buffer. */
int eai_conn_flushing(const struct eai_conn *c);
/* c carries a request authenticated for tenant: c counts against that
 * tenant's connections (limits.max_connections_per_tenant) until it
 * closes or carries another tenant's request.  0, or -1 when the tenant
 * holds as many connections as it may (c unchanged; answer 429). */
int eai_conn_attribute(struct eai_conn *c, const char *tenant);
/* The next tracked connection (g->conns is the first). */
struct eai_conn *eai_conn_next(const struct eai_conn *c);

#endif
