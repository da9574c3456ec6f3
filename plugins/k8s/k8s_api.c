/*
 * Kubernetes REST calls on the host's shared, non-blocking HTTP client.
 * Adds the bearer token (re-read from its file every token_reload_s and
 * once more when the API answers 401), retries transport failures, 429
 * and 5xx with exponential backoff when asked, and turns Status objects
 * into one-line messages.  Every request has a timeout (api_timeout_ms).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "k8s.h"

struct k8s_call {
    struct k8s *k;
    char *method;
    char *path;
    char *body;
    size_t body_len;
    unsigned flags;
    long timeout_ms;
    int attempt;
    int auth_retried;
    k8s_call_fn fn;
    void *arg;
    struct event *timer;
    struct k8s_call *next;     /* in k->token_waiters */
    /* a failure to deliver from a timer (status 0) */
    char errbuf[160];
    int deliver_error;
};

static void call_send(struct k8s_call *c);

static void call_free(struct k8s_call *c)
{
    if (!c)
        return;
    if (c->timer)
        event_free(c->timer);
    struct k8s *k = c->k;
    free(c->method);
    free(c->path);
    free(c->body);
    free(c);
    k8s_unref(k);
}

int k8s_qescape(const char *in, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                    *p == '-' || *p == '_' || *p == '.' || *p == '~';
        if (o + (plain ? 1 : 3) >= outlen)
            return -1;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
    return 0;
}

/* "POST /api/v1/namespaces/x/pods?fieldValidation=Strict" -> without the query */
static void path_only(const char *path, char *out, size_t n)
{
    size_t l = strcspn(path, "?");
    if (l >= n)
        l = n - 1;
    memcpy(out, path, l);
    out[l] = '\0';
}

static void deliver(struct k8s_call *c, long status, const char *body, size_t len, const char *terr)
{
    struct k8s_result r;
    memset(&r, 0, sizeof r);
    r.status = status;
    r.body = body ? body : "";
    r.body_len = body ? len : 0;
    if (body && len && body[0] == '{')
        r.json = json_loadb(body, len, 0, NULL);
    char p[256], msg[768];
    path_only(c->path, p, sizeof p);
    if (status == 0) {
        snprintf(msg, sizeof msg, "%s %s: Kubernetes API unreachable: %s", c->method, p,
                 terr && *terr ? terr : "transport error");
        r.message = msg;
    } else if (status >= 400) {
        const char *reason = r.json ? json_string_value(json_object_get(r.json, "reason")) : NULL;
        const char *m = r.json ? json_string_value(json_object_get(r.json, "message")) : NULL;
        if (m)
            snprintf(msg, sizeof msg, "%s %s: %ld %s: %.400s", c->method, p, status, reason ? reason : "", m);
        else
            snprintf(msg, sizeof msg, "%s %s: HTTP %ld: %.200s", c->method, p, status, r.body);
        r.message = msg;
    }
    c->fn(c->arg, &r);
    json_decref(r.json);
    call_free(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct k8s_call *c = arg;
    if (c->deliver_error) {
        deliver(c, 0, NULL, 0, c->errbuf);
        return;
    }
    call_send(c);
}

static void call_later(struct k8s_call *c, long ms)
{
    if (!c->timer)
        c->timer = evtimer_new(c->k->host->base, on_timer, c);
    if (!c->timer) {
        /* no timer: nothing else to do than to answer now */
        deliver(c, 0, NULL, 0, "out of memory");
        return;
    }
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(c->timer, &tv);
}

/* ------------------------------------------------------------ tokens */

struct token_read {
    struct k8s *k;
    char *path;
    char *token;
};

char *k8s_read_token(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ELOOP)
        fd = open(path, O_RDONLY | O_CLOEXEC); /* kubelet's projected files are symlinks */
    if (fd < 0)
        return NULL;
    char buf[16384];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n >= sizeof buf - 1)
            break;
    }
    close(fd);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        n--;
    buf[n] = '\0';
    if (!n)
        return NULL;
    return strdup(buf);
}

static void token_work(void *arg)
{
    struct token_read *t = arg;
    t->token = k8s_read_token(t->path);
}

static void token_done(void *arg)
{
    struct token_read *t = arg;
    struct k8s *k = t->k;
    k->token_reloading = 0;
    if (t->token) {
        free(k->token);
        k->token = t->token;
    } else if (!k->closing) {
        k->host->log(k->host, K8S_COMPONENT, EAI_LOG_WARN, "cannot read the token file %s; keeping the previous token",
                     t->path);
    }
    free(t->path);
    free(t);
    struct k8s_call *w = k->token_waiters;
    k->token_waiters = NULL;
    while (w) {
        struct k8s_call *n = w->next;
        w->next = NULL;
        call_send(w);
        w = n;
    }
    k8s_unref(k);
}

static void token_reload(struct k8s *k)
{
    if (k->token_reloading || !k->cfg.token_file)
        return;
    struct token_read *t = calloc(1, sizeof *t);
    if (!t || !(t->path = strdup(k->cfg.token_file))) {
        free(t);
        return;
    }
    t->k = k;
    k8s_ref(k);
    k->token_reloading = 1;
    if (k->host->work_submit(k->host, token_work, token_done, t) < 0) {
        k->token_reloading = 0;
        free(t->path);
        free(t);
        k8s_unref(k);
        /* waiters are sent as they are */
        struct k8s_call *w = k->token_waiters;
        k->token_waiters = NULL;
        while (w) {
            struct k8s_call *n = w->next;
            call_send(w);
            w = n;
        }
    }
}

static void on_token_timer(evutil_socket_t fd, short what, void *arg)
{
    struct k8s *k = arg;
    if (!k->closing)
        token_reload(k);
}

int k8s_token_start(struct k8s *k)
{
    if (!k->cfg.token_file || k->cfg.token_reload_s <= 0)
        return 0;
    k->token_timer = event_new(k->host->base, -1, EV_PERSIST, on_token_timer, k);
    if (!k->token_timer)
        return -1;
    struct timeval tv = {k->cfg.token_reload_s, 0};
    return event_add(k->token_timer, &tv);
}

void k8s_api_stop(struct k8s *k)
{
    if (k->token_timer) {
        event_free(k->token_timer);
        k->token_timer = NULL;
    }
}

/* ------------------------------------------------------------ calls */

static void on_http(void *arg, const struct eai_http_response *resp)
{
    struct k8s_call *c = arg;
    struct k8s *k = c->k;
    long st = resp->status;
    if (st == 401 && !c->auth_retried && k->cfg.token_file && !k->closing) {
        c->auth_retried = 1;
        c->next = k->token_waiters;
        k->token_waiters = c;
        token_reload(k);
        return;
    }
    if ((c->flags & K8S_CALL_RETRY) && c->attempt < k->cfg.api_retries && !k->closing &&
        (st == 0 || st == 429 || st >= 500 || (st == 403 && (c->flags & K8S_CALL_RETRY_403)))) {
        long ms = 200L << c->attempt;
        if (ms > 5000)
            ms = 5000;
        c->attempt++;
        call_later(c, ms);
        return;
    }
    deliver(c, st, resp->body, resp->body_len, resp->error);
}

static void call_send(struct k8s_call *c)
{
    struct k8s *k = c->k;
    char url[2048];
    int abs = (c->flags & K8S_CALL_ABS) != 0;
    if ((size_t)snprintf(url, sizeof url, "%s%s", abs ? "" : k->cfg.api_url, c->path) >= sizeof url) {
        deliver(c, 0, NULL, 0, "URL too long");
        return;
    }
    char auth[16400];
    const char *headers[6];
    int nh = 0;
    if (k->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", k->token);
        headers[nh++] = auth;
    }
    headers[nh++] = "Accept: application/json";
    if (c->body)
        headers[nh++] = "Content-Type: application/json";
    headers[nh++] = "User-Agent: eai-sandbox-k8s/" EAI_VERSION;
    headers[nh] = NULL;
    struct eai_http_request req;
    memset(&req, 0, sizeof req);
    req.method = c->method;
    req.url = url;
    req.headers = headers;
    req.body = c->body;
    req.body_len = c->body_len;
    req.timeout_ms = c->timeout_ms > 0 ? c->timeout_ms : k->cfg.api_timeout_ms;
    req.ca_file = abs && k->cfg.kubelet_ca_file ? k->cfg.kubelet_ca_file : k->cfg.ca_file;
    req.client_cert = k->cfg.client_cert;
    req.client_key = k->cfg.client_key;
    req.insecure = k->cfg.insecure;
    if (k->host->http_request(k->host, &req, on_http, c) < 0) {
        /* answer from a timer so that fn never runs inside k8s_call() */
        snprintf(c->errbuf, sizeof c->errbuf, "cannot queue the request");
        c->deliver_error = 1;
        call_later(c, 0);
    }
}

int k8s_call(struct k8s *k, const char *method, const char *path, const json_t *body,
             unsigned flags, k8s_call_fn fn, void *arg)
{
    return k8s_call_timeout(k, method, path, body, flags, 0, fn, arg);
}

int k8s_call_timeout(struct k8s *k, const char *method, const char *path, const json_t *body,
                     unsigned flags, long timeout_ms, k8s_call_fn fn, void *arg)
{
    struct k8s_call *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->k = k;
    c->timeout_ms = timeout_ms;
    c->flags = flags;
    c->fn = fn;
    c->arg = arg;
    c->method = strdup(method);
    c->path = strdup(path);
    if (body) {
        c->body = json_dumps(body, JSON_COMPACT);
        if (c->body)
            c->body_len = strlen(c->body);
    }
    if (!c->method || !c->path || (body && !c->body)) {
        free(c->method);
        free(c->path);
        free(c->body);
        free(c);
        return -1;
    }
    k8s_ref(k);
    call_send(c);
    return 0;
}
