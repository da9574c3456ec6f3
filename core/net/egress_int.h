/*
 * The egress engine's insides (core/net/egress.h is its interface), shared
 * by its three files:
 *   egress.c        the engine: grants, their network logs, sockets, start/stop
 *   egress_dns.c    the DNS responder: synthetic answers for allowed names
 *   egress_gw.c     the gateway: accept, budgets, inspection, upstream
 *                   connection, copying (bufferevents or splice(2)), timers
 * Everything here runs on the loop thread.
 */
#ifndef EAI_CORE_EGRESS_INT_H
#define EAI_CORE_EGRESS_INT_H

#include <stdint.h>

#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <jansson.h>

#include "net/egress.h"
#include "net/egress_inspect.h"

#define SYNTH_MAX 1024               /* names one grant can resolve */
#define SPLICE_HIGH (1024 * 1024)    /* pause the other side above this many queued bytes */
#define SPLICE_IO (256 * 1024)       /* bytes per read or write call while splicing */
#define ZC_PIPE (1024 * 1024)        /* pipe capacity asked per direction while splicing */
#define ZC_BURST (4 * 1024 * 1024)   /* bytes one direction moves per callback, then yields */

struct synth {
    char name[EAI_EGRESS_NAME_MAX + 1];
};

struct gw_conn;

struct eai_egress_grant {
    struct eai_egress *eg;
    struct eai_egress_grant *next, *prev;
    char exec_id[64];
    char tenant[128];                /* the connection budget it counts against */
    uint32_t ip;                     /* the sandbox's address, network order */
    struct eai_egress_rule *rules;
    size_t nrules;
    struct synth *synth;
    size_t nsynth;
    json_t *log;
    size_t dropped;
    int open, total;
    int64_t bytes_out, bytes_in;
    struct gw_conn *conns;
};

struct eai_egress {
    struct event_base *base;
    struct eai_egress_config cfg;
    evutil_socket_t dns_fd;
    struct evdns_server_port *dns;
    struct evconnlistener *listener;
    struct evdns_base *resolver;
    uint32_t synth_net;              /* host order */
    int synth_prefix;
    uint16_t dns_port, gw_port;
    struct eai_egress_grant *grants;
    eai_egress_decision_fn on_decision;
    void *arg;
    int open;                        /* connections open, every grant together */
    uint64_t accept_errors;          /* accept(2) failures (EMFILE, ENFILE, ENOBUFS, ...) */
    struct event *accept_pause;      /* re-enables the listener after a failed accept */
};

enum conn_state { C_SNIFF = 0, C_RESOLVE, C_CONNECT, C_SPLICE };

/* One direction of a connection.  What the source sends waits in buf (the
 * source bufferevent's input) until the inspector (egress_inspect.h) lets
 * it pass: ok bytes at its front may.  With splice(2) (zc), passed bytes go
 * through a pipe to the destination, and what passes unread (a body, a TLS
 * record's content, an opaque stream) goes socket -> pipe -> socket inside
 * the kernel, never through eaid's memory; the bufferevents stay (disabled)
 * as the fds' owners.  Without, through the bufferevents. */
struct gw_dir {
    int out;                         /* 1: client -> server */
    struct evbuffer *buf;            /* read, not passed yet (bounded: EAI_INSPECT_MAX + one read) */
    struct evbuffer *own;            /* spliced: buf is this one of ours (a bufferevent's input is
                                        frozen at its end between the bufferevent's own reads) */
    size_t ok;                       /* bytes at buf's front judged to pass */
    int64_t pend_ms;                 /* since when an unfinished unit waits (monotonic); 0: none */
    /* splice(2) */
    int p[2];                        /* the pipe, both ends non-blocking; -1 when none */
    size_t inpipe, cap;              /* bytes in the pipe; its capacity */
    int src, dst;                    /* the sockets */
    struct event *rd, *wr;           /* src readable, dst writable (not persistent) */
    int eof, shut;                   /* src sent FIN; we sent FIN to dst */
};

struct gw_conn {
    struct eai_egress_grant *g;
    struct gw_conn *next, *prev;
    enum conn_state state;
    struct bufferevent *cli, *srv;
    struct event *timer;             /* first flight, unfinished units, idle */
    struct evdns_getaddrinfo_request *gai;
    char name[EAI_EGRESS_NAME_MAX + 1]; /* "" for an address entry */
    uint32_t dst;                    /* original destination, network order */
    uint16_t port;
    char address[INET_ADDRSTRLEN];   /* what we connect to */
    json_t *entry;                   /* its log entry (own reference) */
    int64_t accept_ms, last_ms;      /* monotonic */
    int cli_eof, srv_eof;            /* that side sent FIN */
    int cli_shut, srv_shut;          /* we sent FIN to that side */
    int zc;                          /* spliced with splice(2): up, down's pipes are live */
    struct gw_dir up, down;          /* client -> server, server -> client */
    struct eai_inspect insp;         /* what is read of both directions */
};

#define RST_CLIENT 1 /* conn_free: close the client's side with a reset */
#define RST_BOTH 3   /* ... and the server's */

/* egress.c: a decision's log entry (new reference), kept in the grant's
 * bounded log and handed to the hook (e stays the caller's); the grant of a
 * sandbox address. */
json_t *eg_log_entry(struct eai_egress_grant *g, const char *kind, const char *name, unsigned port,
                     const char *decision, const char *reason);
void eg_log_commit(struct eai_egress_grant *g, json_t *e);
struct eai_egress_grant *eg_grant_by_ip(struct eai_egress *eg, uint32_t ip);

/* egress_dns.c: the DNS port's callback (arg: the engine). */
void eg_dns_cb(struct evdns_server_request *req, void *arg);

/* egress_gw.c: the listener's callbacks (arg: the engine), the timer that
 * resumes it after a failed accept, and the end of one connection. */
void eg_gw_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *peer, int plen, void *arg);
void eg_gw_accept_error(struct evconnlistener *l, void *arg);
void eg_accept_resume(evutil_socket_t fd, short what, void *arg);
void eg_conn_free(struct gw_conn *c, const char *end, int rst);

#endif
