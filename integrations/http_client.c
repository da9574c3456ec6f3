/*
 * One libcurl multi handle on the libevent loop (curl's hiperfifo.c
 * pattern): CURLMOPT_SOCKETFUNCTION maps curl's sockets to events,
 * CURLMOPT_TIMERFUNCTION to one timer; completions are read with
 * curl_multi_info_read and each request's callback runs exactly once.
 *
 * libcurl is opened when the first client is made, not linked
 * (base/dynlib.h): a server that never calls out never maps it nor GnuTLS,
 * Kerberos and LDAP behind it, nor runs their initialisation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <event2/event.h>

#include "base/dynlib.h"
#include "base/log.h"
#include "http_client.h"

#define CURL_FNS(X)                                                                                                \
    X(curl_easy_cleanup) X(curl_easy_getinfo) X(curl_easy_init) X(curl_easy_setopt) X(curl_easy_strerror)          \
    X(curl_global_init) X(curl_multi_add_handle) X(curl_multi_assign) X(curl_multi_cleanup)                        \
    X(curl_multi_info_read) X(curl_multi_init) X(curl_multi_remove_handle) X(curl_multi_setopt)                    \
    X(curl_multi_socket_action) X(curl_slist_append) X(curl_slist_free_all)
EAI_DYNLIB_TABLE(lc, "libcurl.so.4", CURL_FNS);
/* curl.h wraps these in macros of the same name (type checks) */
#undef curl_easy_getinfo
#undef curl_easy_setopt
#undef curl_multi_setopt
#define curl_easy_cleanup (lc.curl_easy_cleanup)
#define curl_easy_getinfo (lc.curl_easy_getinfo)
#define curl_easy_init (lc.curl_easy_init)
#define curl_easy_setopt (lc.curl_easy_setopt)
#define curl_easy_strerror (lc.curl_easy_strerror)
#define curl_global_init (lc.curl_global_init)
#define curl_multi_add_handle (lc.curl_multi_add_handle)
#define curl_multi_assign (lc.curl_multi_assign)
#define curl_multi_cleanup (lc.curl_multi_cleanup)
#define curl_multi_info_read (lc.curl_multi_info_read)
#define curl_multi_init (lc.curl_multi_init)
#define curl_multi_remove_handle (lc.curl_multi_remove_handle)
#define curl_multi_setopt (lc.curl_multi_setopt)
#define curl_multi_socket_action (lc.curl_multi_socket_action)
#define curl_slist_append (lc.curl_slist_append)
#define curl_slist_free_all (lc.curl_slist_free_all)

static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

#define EAI_HTTP_MAX_BODY (64u << 20)
#define EAI_HTTP_MAX_INFLIGHT 1024

struct eai_http_xfer {
    struct eai_http_client *c;
    CURL *easy;
    struct curl_slist *headers;
    struct curl_slist *resolve;    /* CURLOPT_RESOLVE pin, or NULL */
    char *req_body;
    char *resp;
    size_t resp_len, resp_cap;
    int too_big;
    char errbuf[CURL_ERROR_SIZE];
    eai_http_done_fn done;
    void *arg;
    struct eai_http_xfer *prev, *next;
};

struct eai_http_sock {
    struct event *ev;
};

struct eai_http_client {
    struct event_base *base;
    CURLM *multi;
    struct event *timer;
    int running;
    int inflight;
    int closing;               /* in eai_http_client_free: refuse new requests */
    struct eai_http_xfer *xfers;
};

static void eai_http_check_done(struct eai_http_client *c);

static void xfer_finish(struct eai_http_xfer *x, CURLcode rc)
{
    struct eai_http_client *c = x->c;
    struct eai_http_response r = {0};
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK || x->too_big) {
        r.status = 0;
        r.error = x->too_big ? "response body too large"
                             : (x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    } else {
        r.status = status;
    }
    r.body = x->resp ? x->resp : "";
    r.body_len = x->resp_len;
    curl_multi_remove_handle(c->multi, x->easy);
    if (x->prev)
        x->prev->next = x->next;
    else
        c->xfers = x->next;
    if (x->next)
        x->next->prev = x->prev;
    c->inflight--;
    if (x->done)
        x->done(x->arg, &r);
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    curl_slist_free_all(x->resolve);
    free(x->req_body);
    free(x->resp);
    free(x);
}

static void eai_http_check_done(struct eai_http_client *c)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct eai_http_xfer *x = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        CURLcode rc = m->data.result;
        if (x)
            xfer_finish(x, rc);
    }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct eai_http_client *c = arg;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &c->running);
    eai_http_check_done(c);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *arg)
{
    struct eai_http_client *c = arg;
    if (timeout_ms < 0) {
        evtimer_del(c->timer);
    } else {
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        evtimer_add(c->timer, &tv);
    }
    return 0;
}

static void on_socket(evutil_socket_t fd, short what, void *arg)
{
    struct eai_http_client *c = arg;
    int action = ((what & EV_READ) ? CURL_CSELECT_IN : 0) | ((what & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    curl_multi_socket_action(c->multi, fd, action, &c->running);
    eai_http_check_done(c);
    /* a done callback may have queued a new transfer, arming the timer */
    if (c->running <= 0 && c->inflight == 0)
        evtimer_del(c->timer);
}

static int socket_cb(CURL *e, curl_socket_t s, int what, void *cbp, void *sockp)
{
    struct eai_http_client *c = cbp;
    struct eai_http_sock *hs = sockp;
    if (what == CURL_POLL_REMOVE) {
        if (hs) {
            event_free(hs->ev);
            free(hs);
            curl_multi_assign(c->multi, s, NULL);
        }
        return 0;
    }
    short kind = (short)(((what & CURL_POLL_IN) ? EV_READ : 0) | ((what & CURL_POLL_OUT) ? EV_WRITE : 0) | EV_PERSIST);
    if (!hs) {
        hs = calloc(1, sizeof(*hs));
        if (!hs)
            return -1;
        curl_multi_assign(c->multi, s, hs);
    } else {
        event_free(hs->ev);
    }
    hs->ev = event_new(c->base, s, kind, on_socket, c);
    if (!hs->ev)
        return -1;
    event_add(hs->ev, NULL);
    return 0;
}

static size_t write_cb(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct eai_http_xfer *x = userdata;
    size_t n = size * nmemb;
    if (x->resp_len + n > EAI_HTTP_MAX_BODY) {
        x->too_big = 1;
        return 0; /* aborts the transfer */
    }
    if (x->resp_len + n + 1 > x->resp_cap) {
        size_t cap = x->resp_cap ? x->resp_cap : 4096;
        while (cap < x->resp_len + n + 1)
            cap *= 2;
        char *np = realloc(x->resp, cap);
        if (!np)
            return 0;
        x->resp = np;
        x->resp_cap = cap;
    }
    memcpy(x->resp + x->resp_len, ptr, n);
    x->resp_len += n;
    x->resp[x->resp_len] = '\0';
    return n;
}

struct eai_http_client *eai_http_client_new(struct event_base *base)
{
    static pthread_once_t inited = PTHREAD_ONCE_INIT;
    if (eai_dynlib_open(&lc_lib) < 0) {
        eai_log("http", EAI_LOG_ERROR, "outbound HTTP unavailable, libcurl is needed (Debian: libcurl4): %s",
                lc_lib.err);
        return NULL;
    }
    pthread_once(&inited, global_init);
    struct eai_http_client *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->base = base;
    c->multi = curl_multi_init();
    c->timer = evtimer_new(base, on_timer, c);
    if (!c->multi || !c->timer) {
        eai_http_client_free(c);
        return NULL;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 8L);
    return c;
}

int eai_http_client_request(struct eai_http_client *c, const struct eai_http_request *req,
                            eai_http_done_fn done, void *arg)
{
    return eai_http_client_request_pinned(c, req, NULL, done, arg);
}

int eai_http_client_request_pinned(struct eai_http_client *c, const struct eai_http_request *req,
                                   const char *resolve, eai_http_done_fn done, void *arg)
{
    return eai_http_client_request_via(c, req, resolve, NULL, done, arg);
}

int eai_http_client_request_via(struct eai_http_client *c, const struct eai_http_request *req,
                                const char *resolve, const char *proxy, eai_http_done_fn done, void *arg)
{
    if (!c || !req || !req->url || c->closing || c->inflight >= EAI_HTTP_MAX_INFLIGHT)
        return -1;
    struct eai_http_xfer *x = calloc(1, sizeof(*x));
    if (!x)
        return -1;
    x->c = c;
    x->done = done;
    x->arg = arg;
    x->easy = curl_easy_init();
    if (!x->easy) {
        free(x);
        return -1;
    }
    CURL *e = x->easy;
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, req->timeout_ms > 0 ? req->timeout_ms : 30000L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    /* A proxy only when eaid's own configuration names one (the caller's
     * proxy): http_proxy, https_proxy, ALL_PROXY and NO_PROXY of eaid's
     * environment are ignored, since a proxy would resolve names again,
     * behind every address check (docs/configuration.md "Outbound HTTP"). */
    curl_easy_setopt(e, CURLOPT_PROXY, proxy ? proxy : "");
    curl_easy_setopt(e, CURLOPT_NOPROXY, "");
    const char *method = req->method ? req->method : "GET";
    if (strcmp(method, "GET") != 0)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (req->body) {
        x->req_body = malloc(req->body_len + 1);
        if (!x->req_body) {
            curl_easy_cleanup(e);
            free(x);
            return -1;
        }
        memcpy(x->req_body, req->body, req->body_len);
        x->req_body[req->body_len] = '\0';
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->req_body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    }
    for (const char *const *h = req->headers; h && *h; h++)
        x->headers = curl_slist_append(x->headers, *h);
    x->headers = curl_slist_append(x->headers, "Expect:");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    if (req->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, req->ca_file);
    if (req->client_cert)
        curl_easy_setopt(e, CURLOPT_SSLCERT, req->client_cert);
    if (req->client_key)
        curl_easy_setopt(e, CURLOPT_SSLKEY, req->client_key);
    if (req->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (resolve && (x->resolve = curl_slist_append(NULL, resolve)))
        curl_easy_setopt(e, CURLOPT_RESOLVE, x->resolve);  /* only the addresses the caller checked */
    x->next = c->xfers;
    if (c->xfers)
        c->xfers->prev = x;
    c->xfers = x;
    c->inflight++;
    if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
        c->xfers = x->next;
        if (c->xfers)
            c->xfers->prev = NULL;
        c->inflight--;
        curl_easy_cleanup(e);
        curl_slist_free_all(x->headers);
        curl_slist_free_all(x->resolve);
        free(x->req_body);
        free(x);
        return -1;
    }
    return 0;
}

int eai_http_client_inflight(const struct eai_http_client *c) { return c ? c->inflight : 0; }

void eai_http_client_free(struct eai_http_client *c)
{
    if (!c)
        return;
    c->closing = 1;  /* a done callback must not queue more work on a dying client */
    while (c->xfers) {
        snprintf(c->xfers->errbuf, sizeof(c->xfers->errbuf), "client shut down");
        xfer_finish(c->xfers, CURLE_ABORTED_BY_CALLBACK);
    }
    if (c->multi)
        curl_multi_cleanup(c->multi);
    if (c->timer)
        event_free(c->timer);
    free(c);
}
