/* Egress gateway (egress_int.h): every connection a sandbox opens is
 * accepted here, checked against its grant and the budgets, inspected
 * (egress_inspect.h), connected upstream by eaid itself and copied both ways
 * (bufferevents, or splice(2) through pipes), with its timers. */
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

#include "base/errors.h"
#include "base/util.h"
#include "net/egress_int.h"

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

void eg_conn_free(struct gw_conn *c, const char *end, int rst)
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
    json_t *e = eg_log_entry(c->g, "connect", c->name, c->port, "refused", reason);
    if (e && c->address[0])
        json_object_set_new(e, "address", json_string(c->address));
    eg_log_commit(c->g, e);
    json_decref(e);
    eg_conn_free(c, reason, RST_CLIENT);
}

/* The inspector refused what one side sent (before or after the upstream
 * connection): logged with the name the unit carried, then RST both ways;
 * an allowed connection's entry ends with the reason. */
static void conn_refuse_insp(struct gw_conn *c)
{
    const char *reason = c->insp.reason ? c->insp.reason : "http_malformed";
    json_t *e = eg_log_entry(c->g, "connect", c->name, c->port, "refused", reason);
    if (e && c->address[0])
        json_object_set_new(e, "address", json_string(c->address));
    if (e && c->insp.seen[0])
        json_object_set_new(e, strncmp(reason, "sni", 3) == 0 ? "sni" : "host", json_string(c->insp.seen));
    if (e && c->state == C_SPLICE)
        json_object_set_new(e, "checked", json_integer(c->insp.units)); /* heads or hellos passed before */
    eg_log_commit(c->g, e);
    json_decref(e);
    eg_conn_free(c, reason, RST_BOTH);
}

static int cap_exceeded(struct gw_conn *c)
{
    struct eai_egress_grant *g = c->g;
    return g->eg->cfg.max_bytes > 0 && g->bytes_out + g->bytes_in > g->eg->cfg.max_bytes;
}

static void count_bytes(struct gw_conn *c, int out, size_t n)
{
    c->last_ms = eai_monotonic_ms();
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
    int64_t wait = due - eai_monotonic_ms();
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
        d->pend_ms = eai_monotonic_ms();
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
    eg_conn_free(c, end, 0);
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
        c->last_ms = eai_monotonic_ms();
        c->entry = eg_log_entry(c->g, "connect", c->name, c->port, "allowed", NULL);
        if (c->entry) {
            json_object_set_new(c->entry, "address", json_string(c->address));
            json_object_set_new(c->entry, "bytes_out", json_integer(0));
            json_object_set_new(c->entry, "bytes_in", json_integer(0));
        }
        eg_log_commit(c->g, c->entry);
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
        json_t *e = eg_log_entry(c->g, "connect", c->name, c->port, "refused", "private_address");
        if (e) {
            json_object_set_new(e, "address", json_string(c->address));
            json_object_set_new(e, "address_class", json_string(eai_addr_class_name(why)));
        }
        eg_log_commit(c->g, e);
        json_decref(e);
        eg_conn_free(c, "private_address", RST_CLIENT);
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
        eg_conn_free(c, "client_gone", 0);
}

static void conn_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct gw_conn *c = arg;
    const struct eai_egress *eg = c->g->eg;
    int64_t now = eai_monotonic_ms();
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

void eg_accept_resume(evutil_socket_t fd, short what, void *arg)
{
    struct eai_egress *eg = arg;
    evconnlistener_enable(eg->listener);
}

/* accept(2) failed (out of descriptors, most likely): the pending
 * connection stays in the backlog, so the listener would fail again at
 * once; it pauses 100 ms instead of spinning, and the failure is counted. */
void eg_gw_accept_error(struct evconnlistener *l, void *arg)
{
    struct eai_egress *eg = arg;
    eg->accept_errors++;
    struct timeval tv = {0, 100 * 1000};
    if (eg->accept_pause && evconnlistener_disable(l) == 0)
        evtimer_add(eg->accept_pause, &tv);
}

void eg_gw_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *peer, int plen, void *arg)
{
    (void)l;
    (void)plen;
    struct eai_egress *eg = arg;
    if (peer->sa_family != AF_INET) {
        rst_fd(fd);
        return;
    }
    struct eai_egress_grant *g = eg_grant_by_ip(eg, ((struct sockaddr_in *)peer)->sin_addr.s_addr);
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
        eg_conn_free(c, "internal", RST_CLIENT);
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
    c->accept_ms = eai_monotonic_ms();
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
