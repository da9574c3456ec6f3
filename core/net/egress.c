/* Egress engine: DNS responder and gateway on the loop (egress.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "base/errors.h"
#include "base/util.h"
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

/* ---------------------------------------------------------------- log */

static json_t *log_entry(struct eai_egress_grant *g, const char *kind, const char *name, unsigned port,
                         const char *decision, const char *reason)
{
    char when[32];
    eai_time_rfc3339(eai_now_ms(), when);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s}", "time", when, "kind", kind, "decision", decision,
                          "name", name ? name : "");
    if (!e)
        return NULL;
    if (port)
        json_object_set_new(e, "port", json_integer(port));
    if (reason)
        json_object_set_new(e, "reason", json_string(reason));
    return e;
}

/* Keep e in the grant's bounded log and tell the hook.  e stays the
 * caller's reference. */
static void log_commit(struct eai_egress_grant *g, json_t *e)
{
    if (!e)
        return;
    if (json_array_size(g->log) < g->eg->cfg.log_max)
        json_array_append(g->log, e);
    else
        g->dropped++;
    if (g->eg->on_decision)
        g->eg->on_decision(g->eg->arg, g->exec_id, e);
}

static struct eai_egress_grant *grant_by_ip(struct eai_egress *eg, uint32_t ip)
{
    for (struct eai_egress_grant *g = eg->grants; g; g = g->next)
        if (g->ip == ip)
            return g;
    return NULL;
}

/* ---------------------------------------------------------------- DNS */

static uint32_t synth_addr(const struct eai_egress *eg, size_t idx)
{
    return htonl(eg->synth_net + 1 + (uint32_t)idx);
}

static size_t synth_cap(const struct eai_egress *eg)
{
    uint64_t size = 1ull << (32 - eg->synth_prefix);
    return size > SYNTH_MAX + 2 ? SYNTH_MAX : (size_t)(size - 2);
}

/* The synthetic address of name in g (added when new); 0 when full. */
static uint32_t synth_for(struct eai_egress_grant *g, const char *name)
{
    for (size_t i = 0; i < g->nsynth; i++)
        if (strcmp(g->synth[i].name, name) == 0)
            return synth_addr(g->eg, i);
    if (g->nsynth >= synth_cap(g->eg))
        return 0;
    struct synth *s = realloc(g->synth, (g->nsynth + 1) * sizeof(*s));
    if (!s)
        return 0;
    g->synth = s;
    snprintf(s[g->nsynth].name, sizeof(s[g->nsynth].name), "%s", name);
    return synth_addr(g->eg, g->nsynth++);
}

static const char *qtype_name(int t)
{
    switch (t) {
    case EVDNS_TYPE_A: return "A";
    case EVDNS_TYPE_AAAA: return "AAAA";
    case EVDNS_TYPE_CNAME: return "CNAME";
    case EVDNS_TYPE_MX: return "MX";
    case EVDNS_TYPE_TXT: return "TXT";
    case EVDNS_TYPE_PTR: return "PTR";
    case EVDNS_TYPE_NS: return "NS";
    default: return "other";
    }
}

static void dns_cb(struct evdns_server_request *req, void *arg)
{
    struct eai_egress *eg = arg;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (evdns_server_request_get_requesting_addr(req, (struct sockaddr *)&ss, sizeof(ss)) < 0 ||
        ss.ss_family != AF_INET) {
        evdns_server_request_respond(req, DNS_ERR_REFUSED);
        return;
    }
    struct eai_egress_grant *g = grant_by_ip(eg, ((struct sockaddr_in *)&ss)->sin_addr.s_addr);
    if (!g) {
        evdns_server_request_respond(req, DNS_ERR_REFUSED); /* not a sandbox of ours */
        return;
    }
    if (req->nquestions != 1 || req->questions[0]->dns_question_class != EVDNS_CLASS_INET) {
        json_t *e = log_entry(g, "dns", "", 0, "refused", "bad_query");
        log_commit(g, e);
        json_decref(e);
        evdns_server_request_respond(req, DNS_ERR_REFUSED);
        return;
    }
    const struct evdns_server_question *q = req->questions[0];
    char name[EAI_EGRESS_NAME_MAX + 1];
    const char *reason = NULL;
    if (eai_egress_name_normalize(q->name, strlen(q->name), name, sizeof(name)) < 0) {
        name[0] = '\0';
        reason = "bad_name";
    } else if (eai_egress_name_match(g->rules, g->nrules, name, 0) < 0) {
        reason = "not_allowed";
    }
    json_t *e = log_entry(g, "dns", name, 0, reason ? "refused" : "allowed", reason);
    if (e)
        json_object_set_new(e, "qtype", json_string(qtype_name(q->type)));
    int rcode = DNS_ERR_NONE;
    if (reason) {
        rcode = DNS_ERR_NOTEXIST; /* NXDOMAIN, never asked upstream */
    } else if (q->type == EVDNS_TYPE_A) {
        uint32_t a = synth_for(g, name);
        if (!a) {
            rcode = DNS_ERR_SERVERFAILED;
            json_object_set_new(e, "decision", json_string("refused"));
            json_object_set_new(e, "reason", json_string("name_cap"));
        } else {
            char txt[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &a, txt, sizeof(txt));
            json_object_set_new(e, "address", json_string(txt));
            evdns_server_request_add_a_reply(req, q->name, 1, &a, 5);
        }
    }
    /* AAAA and the rest of an allowed name: NOERROR without records, so a
     * client falls back to the A answer. */
    log_commit(g, e);
    json_decref(e);
    evdns_server_request_respond(req, rcode);
}

/* ---------------------------------------------------------------- gateway */

static int64_t mono_ms(void)
{
    return eai_monotonic_ns() / 1000000;
}

static int64_t first_flight_ms(const struct eai_egress *eg)
{
    return eg->cfg.first_flight_ms > 0 ? eg->cfg.first_flight_ms : 10000;
}

static int64_t idle_ms(const struct eai_egress *eg)
{
    return (int64_t)(eg->cfg.idle_timeout_s > 0 ? eg->cfg.idle_timeout_s : 60) * 1000;
}

static void rst_fd(evutil_socket_t fd)
{
    struct linger l = {1, 0}; /* close with RST: a refusal never looks open */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    close(fd);
}

static void zc_dir_free(struct gw_dir *d)
{
    if (d->own)
        evbuffer_free(d->own);
    d->own = NULL;
    if (d->rd)
        event_free(d->rd);
    if (d->wr)
        event_free(d->wr);
    if (d->p[0] >= 0)
        close(d->p[0]);
    if (d->p[1] >= 0)
        close(d->p[1]);
    d->rd = d->wr = NULL;
    d->p[0] = d->p[1] = -1;
}

#define RST_CLIENT 1 /* conn_free: close the client's side with a reset */
#define RST_BOTH 3   /* ... and the server's */

static void conn_free(struct gw_conn *c, const char *end, int rst)
{
    struct eai_egress_grant *g = c->g;
    if (c->gai) {
        struct evdns_getaddrinfo_request *r = c->gai;
        c->gai = NULL;
        evdns_getaddrinfo_cancel(r); /* its callback sees EVUTIL_EAI_CANCEL */
    }
    if (c->timer)
        event_free(c->timer);
    if (c->zc) {
        zc_dir_free(&c->up);
        zc_dir_free(&c->down);
    }
    struct linger l = {1, 0};
    if (c->cli) {
        if (rst & RST_CLIENT)
            setsockopt(bufferevent_getfd(c->cli), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        bufferevent_free(c->cli);
    }
    if (c->srv) {
        if (rst == RST_BOTH && c->state == C_SPLICE)
            setsockopt(bufferevent_getfd(c->srv), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        bufferevent_free(c->srv);
    }
    if (c->entry) {
        if (c->state == C_SPLICE)
            json_object_set_new(c->entry, "end", json_string(end));
        json_decref(c->entry);
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        g->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    g->open--;
    g->eg->open--;
    free(c);
}

/* A refusal: logged, then RST. */
static void conn_refuse(struct gw_conn *c, const char *reason)
{
    json_t *e = log_entry(c->g, "connect", c->name, c->port, "refused", reason);
    if (e && c->address[0])
        json_object_set_new(e, "address", json_string(c->address));
    log_commit(c->g, e);
    json_decref(e);
    conn_free(c, reason, RST_CLIENT);
}

/* The inspector refused what one side sent (before or after the upstream
 * connection): logged with the name the unit carried, then RST both ways;
 * an allowed connection's entry ends with the reason. */
static void conn_refuse_insp(struct gw_conn *c)
{
    const char *reason = c->insp.reason ? c->insp.reason : "http_malformed";
    json_t *e = log_entry(c->g, "connect", c->name, c->port, "refused", reason);
    if (e && c->address[0])
        json_object_set_new(e, "address", json_string(c->address));
    if (e && c->insp.seen[0])
        json_object_set_new(e, strncmp(reason, "sni", 3) == 0 ? "sni" : "host", json_string(c->insp.seen));
    if (e && c->state == C_SPLICE)
        json_object_set_new(e, "checked", json_integer(c->insp.units)); /* heads or hellos passed before */
    log_commit(c->g, e);
    json_decref(e);
    conn_free(c, reason, RST_BOTH);
}

static int cap_exceeded(struct gw_conn *c)
{
    struct eai_egress_grant *g = c->g;
    return g->eg->cfg.max_bytes > 0 && g->bytes_out + g->bytes_in > g->eg->cfg.max_bytes;
}

static void count_bytes(struct gw_conn *c, int out, size_t n)
{
    c->last_ms = mono_ms();
    if (out)
        c->g->bytes_out += (int64_t)n;
    else
        c->g->bytes_in += (int64_t)n;
    const char *key = out ? "bytes_out" : "bytes_in";
    json_t *k = json_object_get(c->entry, key);
    json_object_set_new(c->entry, key, json_integer((k ? json_integer_value(k) : 0) + (json_int_t)n));
}

/* The next deadline of c: its first flight (and, on other ports, the
 * silence after which the server may speak first), an unfinished unit, or
 * idleness. */
static void conn_arm(struct gw_conn *c)
{
    const struct eai_egress *eg = c->g->eg;
    int64_t due;
    if (c->state == C_SNIFF) {
        due = c->accept_ms + first_flight_ms(eg);
        int64_t quiet = c->accept_ms + (eg->cfg.sniff_ms > 0 ? eg->cfg.sniff_ms : 300);
        if (c->insp.proto == EAI_INSPECT_FIRST && evbuffer_get_length(c->up.buf) == 0 && quiet < due)
            due = quiet;
    } else if (c->state == C_SPLICE) {
        due = c->last_ms + idle_ms(eg);
        const struct gw_dir *ds[2] = {&c->up, &c->down};
        for (int i = 0; i < 2; i++)
            if (ds[i]->pend_ms && ds[i]->pend_ms + first_flight_ms(eg) < due)
                due = ds[i]->pend_ms + first_flight_ms(eg);
    } else {
        return; /* resolving and connecting have their own timeouts */
    }
    int64_t wait = due - mono_ms();
    if (wait < 0)
        wait = 0;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)(wait % 1000) * 1000};
    evtimer_add(c->timer, &tv);
}

/* Judge the front of d's buffer when nothing there is judged yet: sets
 * d->ok (0: an unfinished unit waits, its wait bounded by the timer).
 * -1: refused, c is gone. */
static int judge(struct gw_conn *c, struct gw_dir *d)
{
    enum eai_inspect_side side = d->out ? EAI_INSPECT_CLIENT : EAI_INSPECT_SERVER;
    size_t n = evbuffer_get_length(d->buf);
    if (d->ok > 0 || n == 0)
        return 0;
    uint64_t pass = eai_inspect_passable(&c->insp, side);
    long r;
    if (pass > 0) {
        r = (long)(pass < n ? pass : n); /* passes unread */
        eai_inspect_skip(&c->insp, side, (uint64_t)r);
    } else {
        size_t look = n < EAI_INSPECT_MAX ? n : EAI_INSPECT_MAX;
        const unsigned char *p = evbuffer_pullup(d->buf, (ev_ssize_t)look);
        if (!p) {
            conn_refuse(c, "internal");
            return -1;
        }
        r = eai_inspect_step(&c->insp, side, p, look);
    }
    if (r < 0) {
        conn_refuse_insp(c);
        return -1;
    }
    if (r > 0) {
        d->ok = (size_t)r;
        d->pend_ms = 0;
    } else if (!d->pend_ms) {
        d->pend_ms = mono_ms();
        conn_arm(c);
    }
    return 0;
}

/* ---------------------------------------------------------------- bufferevents */

/* Move what the inspector lets pass from one side's input to the other's
 * output; pause the reader when the writer has SPLICE_HIGH bytes queued (its
 * write callback resumes it).  -1: c is gone. */
static int copy_side(struct gw_conn *c, int is_cli)
{
    struct gw_dir *d = is_cli ? &c->up : &c->down;
    struct bufferevent *from = is_cli ? c->cli : c->srv, *to = is_cli ? c->srv : c->cli;
    struct evbuffer *out = bufferevent_get_output(to);
    for (;;) {
        if (judge(c, d) < 0)
            return -1;
        if (d->ok == 0)
            break;
        size_t k = d->ok;
        evbuffer_remove_buffer(d->buf, out, k);
        d->ok = 0;
        count_bytes(c, is_cli, k);
    }
    if (evbuffer_get_length(out) >= SPLICE_HIGH)
        bufferevent_disable(from, EV_READ);
    return 0;
}

static void conn_end(struct gw_conn *c, const char *end)
{
    conn_free(c, end, 0);
}

static void cli_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    struct gw_conn *c = arg;
    if (copy_side(c, 1) == 0 && cap_exceeded(c))
        conn_end(c, "byte_cap");
}

static void srv_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    struct gw_conn *c = arg;
    if (copy_side(c, 0) == 0 && cap_exceeded(c))
        conn_end(c, "byte_cap");
}

/* Pass a half close on once the side has written everything the other sent,
 * and end when both sides closed and both outputs are empty.  1: ended. */
static int try_finish(struct gw_conn *c)
{
    size_t cli_left = evbuffer_get_length(bufferevent_get_output(c->cli));
    size_t srv_left = evbuffer_get_length(bufferevent_get_output(c->srv));
    if (c->cli_eof && !c->srv_shut && srv_left == 0) {
        shutdown(bufferevent_getfd(c->srv), SHUT_WR);
        c->srv_shut = 1;
    }
    if (c->srv_eof && !c->cli_shut && cli_left == 0) {
        shutdown(bufferevent_getfd(c->cli), SHUT_WR);
        c->cli_shut = 1;
    }
    if (c->cli_eof && c->srv_eof && cli_left == 0 && srv_left == 0) {
        conn_end(c, "closed");
        return 1;
    }
    return 0;
}

/* A side's output drained: resume the other side's reading, or finish. */
static void side_write(struct gw_conn *c, struct bufferevent *other, int other_eof)
{
    if (try_finish(c))
        return;
    if (!other_eof)
        bufferevent_enable(other, EV_READ);
}

static void cli_write(struct bufferevent *bev, void *arg)
{
    (void)bev;
    struct gw_conn *c = arg;
    side_write(c, c->srv, c->srv_eof);
}

static void srv_write(struct bufferevent *bev, void *arg)
{
    (void)bev;
    struct gw_conn *c = arg;
    side_write(c, c->cli, c->cli_eof);
}

static void side_event(struct gw_conn *c, int is_cli, short what)
{
    if (what & BEV_EVENT_ERROR) {
        conn_end(c, "reset");
        return;
    }
    if (what & BEV_EVENT_EOF) {
        if (copy_side(c, is_cli) < 0)
            return;
        struct gw_dir *d = is_cli ? &c->up : &c->down;
        evbuffer_drain(d->buf, evbuffer_get_length(d->buf)); /* an unfinished unit never passes */
        if (is_cli)
            c->cli_eof = 1;
        else
            c->srv_eof = 1;
        try_finish(c);
    }
}

static void cli_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    side_event(arg, 1, what);
}

/* ---------------------------------------------------------------- splice(2) */

/* Both directions closed and drained: the end.  1: c is gone. */
static int zc_finish(struct gw_conn *c)
{
    if (c->up.eof && c->down.eof && c->up.inpipe == 0 && c->down.inpipe == 0) {
        conn_end(c, "closed");
        return 1;
    }
    return 0;
}

/* Read at most want bytes of fd onto the end of b: recv(2)'s answer. */
static ssize_t buf_recv(struct evbuffer *b, int fd, size_t want)
{
    struct evbuffer_iovec v;
    if (evbuffer_reserve_space(b, (ev_ssize_t)want, &v, 1) != 1) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t n = recv(fd, v.iov_base, want < v.iov_len ? want : v.iov_len, 0);
    if (n > 0) {
        v.iov_len = (size_t)n;
        evbuffer_commit_space(b, &v, 1);
    }
    return n;
}

/* Move what d's source sent on to its destination: the pipe first, then
 * the bytes judged to pass, then judge what waits, then read more (spliced
 * straight into the pipe when it passes unread, else into d->buf to be
 * judged), until the kernel says wait (then arm the event that ends the
 * wait) or ZC_BURST bytes moved (then yield to the loop with the read event
 * armed).  A reset or error of either socket ends the connection; so do the
 * byte cap and a refusal. */
static void zc_pump(struct gw_conn *c, struct gw_dir *d)
{
    enum eai_inspect_side side = d->out ? EAI_INSPECT_CLIENT : EAI_INSPECT_SERVER;
    size_t moved = 0;
    for (;;) {
        while (d->inpipe > 0) {
            ssize_t n = splice(d->p[0], NULL, d->dst, NULL, d->inpipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->inpipe -= (size_t)n;
                continue;
            }
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && errno == EAGAIN) {
                event_add(d->wr, NULL); /* the destination's buffer is full */
                return;
            }
            conn_end(c, "reset");
            return;
        }
        if (d->ok > 0) {
            /* the pipe is empty: it takes them (at most its capacity) */
            size_t k = d->ok < d->cap ? d->ok : d->cap;
            int w = evbuffer_write_atmost(d->buf, d->p[1], (ev_ssize_t)k);
            if (w <= 0) {
                conn_end(c, "reset");
                return;
            }
            d->ok -= (size_t)w;
            d->inpipe += (size_t)w;
            continue;
        }
        if (evbuffer_get_length(d->buf) > 0) {
            if (judge(c, d) < 0)
                return;
            if (d->ok > 0)
                continue;
        }
        if (d->eof) {
            evbuffer_drain(d->buf, evbuffer_get_length(d->buf)); /* an unfinished unit never passes */
            if (!d->shut) {
                shutdown(d->dst, SHUT_WR); /* pass the half close on, once all is written */
                d->shut = 1;
            }
            zc_finish(c);
            return;
        }
        if (moved >= ZC_BURST) {
            event_add(d->rd, NULL); /* fair to the other connections */
            return;
        }
        size_t have = evbuffer_get_length(d->buf);
        uint64_t pass = have == 0 ? eai_inspect_passable(&c->insp, side) : 0;
        ssize_t n;
        if (pass > 0) {
            n = splice(d->src, NULL, d->p[1], NULL, pass < d->cap ? (size_t)pass : d->cap,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->inpipe += (size_t)n;
                eai_inspect_skip(&c->insp, side, (uint64_t)n);
            }
        } else if (have < EAI_INSPECT_MAX) {
            n = buf_recv(d->buf, d->src, EAI_INSPECT_MAX - have);
        } else {
            conn_end(c, "reset"); /* not reached: the inspector refuses a unit this long */
            return;
        }
        if (n > 0) {
            moved += (size_t)n;
            count_bytes(c, d->out, (size_t)n);
            if (cap_exceeded(c)) {
                conn_end(c, "byte_cap");
                return;
            }
            continue;
        }
        if (n == 0) {
            d->eof = 1;
            if (d->out)
                c->cli_eof = 1;
            else
                c->srv_eof = 1;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN) {
            event_add(d->rd, NULL);
            return;
        }
        conn_end(c, "reset");
        return;
    }
}

static void zc_up_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct gw_conn *c = arg;
    zc_pump(c, &c->up);
}

static void zc_down_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct gw_conn *c = arg;
    zc_pump(c, &c->down);
}

static int zc_dir_init(struct gw_conn *c, struct gw_dir *d, int src, int dst)
{
    struct event_base *base = c->g->eg->base;
    d->src = src;
    d->dst = dst;
    if (pipe2(d->p, O_NONBLOCK | O_CLOEXEC) < 0) {
        d->p[0] = d->p[1] = -1;
        return -1;
    }
    int sz = fcntl(d->p[1], F_SETPIPE_SZ, ZC_PIPE);
    if (sz < 0)
        sz = fcntl(d->p[1], F_GETPIPE_SZ); /* the default (64 KiB) still works */
    d->cap = sz > 0 ? (size_t)sz : 65536;
    event_callback_fn cb = d->out ? zc_up_cb : zc_down_cb;
    d->rd = event_new(base, src, EV_READ, cb, c);
    d->wr = event_new(base, dst, EV_WRITE, cb, c);
    return d->rd && d->wr ? 0 : -1;
}

/* Splice with splice(2) from now on; what the client sent while we decided
 * waits in its buffer (up.ok of it judged).  -1: not possible here (no
 * pipes), the caller splices with bufferevents. */
static int zc_start(struct gw_conn *c)
{
    if (c->g->eg->cfg.no_splice)
        return -1;
    c->zc = 1;
    c->up.rd = c->up.wr = c->down.rd = c->down.wr = NULL;
    int cfd = (int)bufferevent_getfd(c->cli), sfd = (int)bufferevent_getfd(c->srv);
    if (zc_dir_init(c, &c->up, cfd, sfd) < 0 || zc_dir_init(c, &c->down, sfd, cfd) < 0 ||
        !(c->up.own = evbuffer_new()) || !(c->down.own = evbuffer_new())) {
        zc_dir_free(&c->up);
        zc_dir_free(&c->down);
        c->zc = 0;
        return -1;
    }
    evbuffer_add_buffer(c->up.own, c->up.buf); /* what came while we decided */
    c->up.buf = c->up.own;
    c->down.buf = c->down.own;
    bufferevent_disable(c->cli, EV_READ | EV_WRITE);
    bufferevent_disable(c->srv, EV_READ | EV_WRITE);
    bufferevent_setcb(c->cli, NULL, NULL, NULL, NULL);
    bufferevent_setcb(c->srv, NULL, NULL, NULL, NULL);
    count_bytes(c, 1, evbuffer_get_length(c->up.buf)); /* read while we decided */
    event_add(c->down.rd, NULL);
    zc_pump(c, &c->up); /* c may be gone after this (reset, byte cap, refusal) */
    return 0;
}

static void srv_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct gw_conn *c = arg;
    if (c->state == C_CONNECT) {
        if (!(what & BEV_EVENT_CONNECTED)) {
            conn_refuse(c, (what & BEV_EVENT_TIMEOUT) ? "connect_timeout" : "connect_failed");
            return;
        }
        c->state = C_SPLICE;
        c->last_ms = mono_ms();
        c->entry = log_entry(c->g, "connect", c->name, c->port, "allowed", NULL);
        if (c->entry) {
            json_object_set_new(c->entry, "address", json_string(c->address));
            json_object_set_new(c->entry, "bytes_out", json_integer(0));
            json_object_set_new(c->entry, "bytes_in", json_integer(0));
        }
        log_commit(c->g, c->entry);
        bufferevent_set_timeouts(c->srv, NULL, NULL);
        bufferevent_setwatermark(c->cli, EV_READ, 0, 0);
        c->down.buf = bufferevent_get_input(c->srv);
        conn_arm(c);
        if (zc_start(c) == 0)
            return; /* c may be gone already */
        bufferevent_setcb(c->cli, cli_read, cli_write, cli_event, c);
        bufferevent_setcb(c->srv, srv_read, srv_write, srv_event, c);
        bufferevent_setwatermark(c->cli, EV_WRITE, SPLICE_HIGH / 2, 0);
        bufferevent_setwatermark(c->srv, EV_WRITE, SPLICE_HIGH / 2, 0);
        /* libevent 2.1 reads and writes at most 16 KiB per call by
         * default: bigger calls for bulk transfers (bench/egress.py) */
        bufferevent_set_max_single_read(c->cli, SPLICE_IO);
        bufferevent_set_max_single_read(c->srv, SPLICE_IO);
        bufferevent_set_max_single_write(c->cli, SPLICE_IO);
        bufferevent_set_max_single_write(c->srv, SPLICE_IO);
        if (copy_side(c, 1) < 0) /* what the client sent while we decided */
            return;
        bufferevent_enable(c->cli, EV_READ);
        bufferevent_enable(c->srv, EV_READ);
        return;
    }
    side_event(c, 0, what);
}

/* ---------------------------------------------------------------- connecting */

static void conn_connect(struct gw_conn *c, uint32_t addr)
{
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = addr;
    sin.sin_port = htons(c->port);
    inet_ntop(AF_INET, &addr, c->address, sizeof(c->address));
    c->state = C_CONNECT;
    c->srv = bufferevent_socket_new(c->g->eg->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!c->srv) {
        conn_refuse(c, "internal");
        return;
    }
    bufferevent_setcb(c->srv, NULL, NULL, srv_event, c);
    struct timeval tv = {c->g->eg->cfg.connect_timeout_s > 0 ? c->g->eg->cfg.connect_timeout_s : 10, 0};
    bufferevent_set_timeouts(c->srv, NULL, &tv);
    if (bufferevent_socket_connect(c->srv, (struct sockaddr *)&sin, sizeof(sin)) < 0)
        conn_refuse(c, "connect_failed");
}

static void gai_cb(int result, struct evutil_addrinfo *res, void *arg)
{
    struct gw_conn *c = arg;
    if (result == EVUTIL_EAI_CANCEL) {
        if (res)
            evutil_freeaddrinfo(res);
        return; /* the connection is being freed */
    }
    c->gai = NULL;
    if (result != 0 || !res) {
        if (res)
            evutil_freeaddrinfo(res);
        conn_refuse(c, "resolve_failed");
        return;
    }
    uint32_t pick = 0, refused = 0;
    enum eai_addr_class why = EAI_ADDR_PUBLIC;
    for (struct evutil_addrinfo *a = res; a; a = a->ai_next) {
        if (a->ai_family != AF_INET)
            continue;
        struct eai_ip ip = {.family = 4};
        uint32_t v = ((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr;
        memcpy(ip.b, &v, 4);
        enum eai_addr_class cls = eai_addr_classify(&ip);
        if (cls == EAI_ADDR_PUBLIC || eai_egress_addr_match(c->g->rules, c->g->nrules, &ip, c->port) >= 0) {
            pick = v;
            break;
        }
        if (!refused) {
            refused = v;
            why = cls;
        }
    }
    evutil_freeaddrinfo(res);
    if (!pick) {
        if (refused)
            inet_ntop(AF_INET, &refused, c->address, sizeof(c->address));
        json_t *e = log_entry(c->g, "connect", c->name, c->port, "refused", "private_address");
        if (e) {
            json_object_set_new(e, "address", json_string(c->address));
            json_object_set_new(e, "address_class", json_string(eai_addr_class_name(why)));
        }
        log_commit(c->g, e);
        json_decref(e);
        conn_free(c, "private_address", RST_CLIENT);
        return;
    }
    conn_connect(c, pick);
}

/* The first flight was checked (or, on another port, the client kept
 * silent): resolve (a name) or connect (an address entry). */
static void conn_proceed(struct gw_conn *c)
{
    event_del(c->timer);
    bufferevent_disable(c->cli, EV_READ); /* keep what came; read again once spliced */
    if (!c->name[0]) {
        conn_connect(c, c->dst);
        return;
    }
    c->state = C_RESOLVE;
    struct evutil_addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    char port[8];
    snprintf(port, sizeof(port), "%u", c->port);
    struct evdns_getaddrinfo_request *r = evdns_getaddrinfo(c->g->eg->resolver, c->name, port, &hints, gai_cb, c);
    if (r)
        c->gai = r; /* NULL: the callback already ran, and c may be gone */
}

/* Before any upstream connection: the client's first unit (request head,
 * ClientHello, or the first bytes of another protocol) is judged as it
 * comes; once it passes, connect. */
static void sniff_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    struct gw_conn *c = arg;
    if (judge(c, &c->up) < 0)
        return;
    if (c->up.ok > 0)
        conn_proceed(c);
}

static void sniff_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct gw_conn *c = arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_free(c, "client_gone", 0);
}

static void conn_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct gw_conn *c = arg;
    const struct eai_egress *eg = c->g->eg;
    int64_t now = mono_ms();
    if (c->state == C_SNIFF) {
        if (now >= c->accept_ms + first_flight_ms(eg)) {
            conn_refuse(c, "sniff_timeout"); /* no upstream connection was made */
            return;
        }
        if (c->insp.proto == EAI_INSPECT_FIRST && evbuffer_get_length(c->up.buf) == 0 &&
            now >= c->accept_ms + (eg->cfg.sniff_ms > 0 ? eg->cfg.sniff_ms : 300)) {
            conn_proceed(c); /* another port, a silent client: the server may speak first (SSH, SMTP) */
            return;
        }
        conn_arm(c);
        return;
    }
    if (c->state != C_SPLICE)
        return;
    const struct gw_dir *ds[2] = {&c->up, &c->down};
    for (int i = 0; i < 2; i++) {
        if (ds[i]->pend_ms && now >= ds[i]->pend_ms + first_flight_ms(eg)) {
            c->insp.reason = "sniff_timeout"; /* a unit begun and never finished */
            c->insp.seen[0] = '\0';
            conn_refuse_insp(c);
            return;
        }
    }
    if (now - c->last_ms >= idle_ms(eg)) {
        conn_end(c, "idle");
        return;
    }
    conn_arm(c);
}

/* Connections open by the grants of tenant (a grant without one is alone). */
static int tenant_open(const struct eai_egress *eg, const char *tenant)
{
    int n = 0;
    for (const struct eai_egress_grant *x = eg->grants; x; x = x->next)
        if (tenant[0] && strcmp(x->tenant, tenant) == 0)
            n += x->open;
    return n;
}

static void accept_resume(evutil_socket_t fd, short what, void *arg)
{
    struct eai_egress *eg = arg;
    evconnlistener_enable(eg->listener);
}

/* accept(2) failed (out of descriptors, most likely): the pending
 * connection stays in the backlog, so the listener would fail again at
 * once; it pauses 100 ms instead of spinning, and the failure is counted. */
static void gw_accept_error(struct evconnlistener *l, void *arg)
{
    struct eai_egress *eg = arg;
    eg->accept_errors++;
    struct timeval tv = {0, 100 * 1000};
    if (eg->accept_pause && evconnlistener_disable(l) == 0)
        evtimer_add(eg->accept_pause, &tv);
}

static void gw_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *peer, int plen, void *arg)
{
    (void)l;
    (void)plen;
    struct eai_egress *eg = arg;
    if (peer->sa_family != AF_INET) {
        rst_fd(fd);
        return;
    }
    struct eai_egress_grant *g = grant_by_ip(eg, ((struct sockaddr_in *)peer)->sin_addr.s_addr);
    struct sockaddr_in dst;
    socklen_t dl = sizeof(dst);
    if (!g || getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &dst, &dl) < 0) {
        rst_fd(fd);
        return;
    }
    struct gw_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        rst_fd(fd);
        return;
    }
    c->g = g;
    c->dst = dst.sin_addr.s_addr;
    c->port = ntohs(dst.sin_port);
    c->next = g->conns;
    if (g->conns)
        g->conns->prev = c;
    g->conns = c;
    g->open++;
    eg->open++;
    c->cli = bufferevent_socket_new(eg->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->timer = evtimer_new(eg->base, conn_timer, c);
    if (!c->cli || !c->timer) {
        if (!c->cli)
            rst_fd(fd);
        conn_free(c, "internal", RST_CLIENT);
        return;
    }
    if ((eg->cfg.max_connections > 0 && g->open > eg->cfg.max_connections) ||
        (eg->cfg.max_connections_total > 0 && g->total >= eg->cfg.max_connections_total)) {
        conn_refuse(c, "connection_cap");
        return;
    }
    /* the node's and the tenant's budgets: one tenant's executions cannot take
     * every descriptor the gateway has */
    if ((eg->cfg.max_connections_node > 0 && eg->open > eg->cfg.max_connections_node) ||
        (eg->cfg.max_connections_tenant > 0 && tenant_open(eg, g->tenant) > eg->cfg.max_connections_tenant)) {
        conn_refuse(c, "connection_budget");
        return;
    }
    g->total++;
    uint32_t h = ntohl(c->dst);
    uint32_t mask = eg->synth_prefix ? 0xffffffffu << (32 - eg->synth_prefix) : 0;
    struct eai_ip ip = {.family = 4};
    memcpy(ip.b, &c->dst, 4);
    if ((h & mask) == eg->synth_net) {
        size_t idx = (size_t)(h - eg->synth_net) - 1;
        if (h == eg->synth_net || idx >= g->nsynth) {
            inet_ntop(AF_INET, &c->dst, c->address, sizeof(c->address));
            conn_refuse(c, "not_allowed");
            return;
        }
        snprintf(c->name, sizeof(c->name), "%s", g->synth[idx].name);
        if (eai_egress_name_match(g->rules, g->nrules, c->name, c->port) < 0) {
            conn_refuse(c, "port_not_allowed");
            return;
        }
    } else if (eai_egress_addr_match(g->rules, g->nrules, &ip, c->port) < 0) {
        inet_ntop(AF_INET, &c->dst, c->address, sizeof(c->address));
        int other_port = 0;
        for (size_t i = 0; i < g->nrules; i++)
            if ((g->rules[i].kind == EAI_EGRESS_ADDR || g->rules[i].kind == EAI_EGRESS_CIDR) &&
                eai_ip_in(&ip, &g->rules[i].ip, g->rules[i].prefix))
                other_port = 1;
        conn_refuse(c, other_port ? "port_not_allowed" : "not_allowed");
        return;
    }
    c->accept_ms = mono_ms();
    c->up.out = 1;
    c->up.buf = bufferevent_get_input(c->cli);
    c->up.p[0] = c->up.p[1] = c->down.p[0] = c->down.p[1] = -1;
    eai_inspect_init(&c->insp, eai_inspect_proto_for_port(c->port), c->name, c->port);
    if (c->insp.proto == EAI_INSPECT_OPAQUE) {
        conn_proceed(c); /* an address entry: the address was the check */
        return;
    }
    /* No upstream connection before the first flight is checked (on another
     * port: or the client stays silent for sniff_ms). */
    bufferevent_setcb(c->cli, sniff_read, NULL, sniff_event, c);
    bufferevent_setwatermark(c->cli, EV_READ, 0, EAI_INSPECT_MAX);
    bufferevent_enable(c->cli, EV_READ);
    conn_arm(c);
}

/* ---------------------------------------------------------------- grants */

struct eai_egress_grant *eai_egress_grant_add(struct eai_egress *eg, const char *exec_id, const char *tenant,
                                              const char *sandbox_ip, const char *const *entries, size_t n,
                                              struct eai_error **err)
{
    struct in_addr a;
    if (!sandbox_ip || inet_pton(AF_INET, sandbox_ip, &a) != 1) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: sandbox address '%s' is not IPv4", sandbox_ip ? sandbox_ip : "");
        return NULL;
    }
    if (grant_by_ip(eg, a.s_addr)) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: %s already has a grant", sandbox_ip);
        return NULL;
    }
    struct eai_egress_grant *g = calloc(1, sizeof(*g));
    if (!g || !(g->rules = calloc(n ? n : 1, sizeof(*g->rules))) || !(g->log = json_array())) {
        if (g) {
            free(g->rules);
            free(g);
        }
        eai_error_set(err, EAI_E_INTERNAL, "egress: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (eai_egress_rule_parse(entries[i], &g->rules[i]) < 0) {
            eai_error_set(err, EAI_E_VALIDATION_FAILED, "egress: entry %zu '%.80s' is not host:port", i, entries[i]);
            json_decref(g->log);
            free(g->rules);
            free(g);
            return NULL;
        }
    }
    g->nrules = n;
    g->eg = eg;
    g->ip = a.s_addr;
    snprintf(g->exec_id, sizeof(g->exec_id), "%s", exec_id ? exec_id : "");
    snprintf(g->tenant, sizeof(g->tenant), "%s", tenant ? tenant : "");
    g->next = eg->grants;
    if (eg->grants)
        eg->grants->prev = g;
    eg->grants = g;
    return g;
}

json_t *eai_egress_grant_log(const struct eai_egress_grant *g)
{
    return json_pack("{s:O, s:I, s:i, s:I, s:I}", "entries", g->log, "dropped", (json_int_t)g->dropped,
                     "connections", g->total, "bytes_out", (json_int_t)g->bytes_out, "bytes_in",
                     (json_int_t)g->bytes_in);
}

void eai_egress_grant_remove(struct eai_egress_grant *g)
{
    if (!g)
        return;
    while (g->conns)
        conn_free(g->conns, "ended", RST_CLIENT);
    struct eai_egress *eg = g->eg;
    if (g->prev)
        g->prev->next = g->next;
    else
        eg->grants = g->next;
    if (g->next)
        g->next->prev = g->prev;
    json_decref(g->log);
    free(g->synth);
    free(g->rules);
    free(g);
}

/* ---------------------------------------------------------------- engine */

static int bind_port(int type, uint32_t addr, uint16_t port, uint16_t *bound, evutil_socket_t *out)
{
    evutil_socket_t fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = addr;
    sin.sin_port = htons(port);
    socklen_t sl = sizeof(sin);
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || getsockname(fd, (struct sockaddr *)&sin, &sl) < 0 ||
        (type == SOCK_STREAM && listen(fd, 128) < 0)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *bound = ntohs(sin.sin_port);
    *out = fd;
    return 0;
}

struct eai_egress *eai_egress_new(struct event_base *base, const struct eai_egress_config *cfg,
                                  eai_egress_decision_fn on_decision, void *arg, struct eai_error **err)
{
    struct eai_egress_rule synth;
    char cidr[64];
    snprintf(cidr, sizeof(cidr), "%s:1", cfg->synthetic_cidr ? cfg->synthetic_cidr : "");
    if (eai_egress_rule_parse(cidr, &synth) < 0 || synth.kind != EAI_EGRESS_CIDR || synth.ip.family != 4 ||
        synth.prefix > 30) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: synthetic range '%s' is not an IPv4 CIDR of /30 or wider",
                      cfg->synthetic_cidr ? cfg->synthetic_cidr : "");
        return NULL;
    }
    struct in_addr listen_a;
    if (inet_pton(AF_INET, cfg->listen_addr ? cfg->listen_addr : "0.0.0.0", &listen_a) != 1) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: listen address '%s' is not IPv4", cfg->listen_addr);
        return NULL;
    }
    struct eai_egress *eg = calloc(1, sizeof(*eg));
    if (!eg) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: out of memory");
        return NULL;
    }
    eg->base = base;
    eg->cfg = *cfg;
    if (!eg->cfg.log_max)
        eg->cfg.log_max = 256;
    eg->dns_fd = -1;
    eg->on_decision = on_decision;
    eg->arg = arg;
    uint32_t net;
    memcpy(&net, synth.ip.b, 4);
    eg->synth_net = ntohl(net);
    eg->synth_prefix = synth.prefix;
    evutil_socket_t gw_fd = -1;
    if (bind_port(SOCK_DGRAM, listen_a.s_addr, cfg->dns_port, &eg->dns_port, &eg->dns_fd) < 0 ||
        bind_port(SOCK_STREAM, listen_a.s_addr, cfg->gateway_port, &eg->gw_port, &gw_fd) < 0) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: bind %s: %s", cfg->listen_addr, strerror(errno));
        goto fail;
    }
    eg->dns = evdns_add_server_port_with_base(base, eg->dns_fd, 0, dns_cb, eg);
    if (eg->dns)
        eg->dns_fd = -1; /* the port owns it now (evdns_close_server_port closes it) */
    eg->listener = evconnlistener_new(base, gw_accept, eg, LEV_OPT_CLOSE_ON_FREE, -1, gw_fd);
    if (!eg->listener)
        close(gw_fd);
    else
        evconnlistener_set_error_cb(eg->listener, gw_accept_error);
    eg->accept_pause = evtimer_new(base, accept_resume, eg);
    int flags = EVDNS_BASE_DISABLE_WHEN_INACTIVE;
    int have_resolver = cfg->resolver && *cfg->resolver;
    if (!have_resolver)
        flags |= EVDNS_BASE_INITIALIZE_NAMESERVERS; /* reads /etc/resolv.conf once, at start */
    eg->resolver = evdns_base_new(base, flags);
    if (!eg->dns || !eg->listener || !eg->resolver || !eg->accept_pause) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: DNS port, gateway listener or resolver could not be set up");
        goto fail;
    }
    if (have_resolver && evdns_base_nameserver_ip_add(eg->resolver, cfg->resolver) != 0) {
        eai_error_set(err, EAI_E_INTERNAL, "egress: resolver '%s' is not ip[:port]", cfg->resolver);
        goto fail;
    }
    evdns_base_set_option(eg->resolver, "timeout:", "3");
    evdns_base_set_option(eg->resolver, "attempts:", "2");
    /* Names are asked as given: never with the host's search domains
     * (resolv.conf's search/domain), which would let "db" reach
     * db.corp.example of the host's network. */
    evdns_base_search_clear(eg->resolver);
    evdns_base_set_option(eg->resolver, "ndots:", "0");
    return eg;
fail:
    eai_egress_free(eg);
    return NULL;
}

void eai_egress_free(struct eai_egress *eg)
{
    if (!eg)
        return;
    while (eg->grants)
        eai_egress_grant_remove(eg->grants);
    if (eg->listener)
        evconnlistener_free(eg->listener);
    if (eg->accept_pause)
        event_free(eg->accept_pause);
    if (eg->dns)
        evdns_close_server_port(eg->dns);
    if (eg->dns_fd >= 0)
        close(eg->dns_fd);
    if (eg->resolver)
        evdns_base_free(eg->resolver, 1);
    free(eg);
}

uint16_t eai_egress_dns_port(const struct eai_egress *eg)
{
    return eg->dns_port;
}

uint16_t eai_egress_gateway_port(const struct eai_egress *eg)
{
    return eg->gw_port;
}

int eai_egress_open_connections(const struct eai_egress *eg)
{
    return eg ? eg->open : 0;
}

uint64_t eai_egress_accept_errors(const struct eai_egress *eg)
{
    return eg ? eg->accept_errors : 0;
}
