/*
 * Completion callbacks: delivery of the callback rows of the usage outbox
 * (callback_send.h).  One pipeline per row:
 *   loop   due? (in-memory per-row backoff; attempts are durable in the row)
 *   worker resolve the host, check every address against the policy
 *   loop   POST the signed body (host->http_request)
 *   worker outbox_ack (delivered: row removed; else attempts + 1) and the
 *          row's state in kv "callback:<execution id>"
 *   loop   next attempt after eai_cb_backoff_ms(attempts)
 * The receiver deduplicates on Eai-Event-Id: a crash between the POST and
 * the ack, or two replicas, may deliver an event twice (at least once).
 */
#include <netdb.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "obs/callback.h"
#include "obs/callback_send.h"
#include "base/log.h"
#include "base/util.h"
#include "base/worker.h"
#include "config/config.h"
#include "obs/metrics.h"
#include "plugin/host.h"
#include "http_client.h"

#define CB_INFLIGHT_MAX 32
#define CB_LOG "callback"

struct eai_cb_sender {
    struct eai_app *app;
    struct eai_cb_policy pol;
    int stopping, refs;
    size_t inflight;
    json_t *next;            /* event id -> next attempt (ms); -1 while in flight */
    int64_t timeout_ms, backoff_cap_ms;
    int max_attempts;
    int warned;              /* the outbox batch was all callbacks (logged once) */
    char *proxy;             /* callbacks.proxy ("http://host:port") or NULL */
    char proxy_host[EAI_CALLBACK_HOST_MAX];
    uint16_t proxy_port;
};

struct cb_job {
    struct eai_cb_sender *s;
    json_t *row;             /* the outbox row (id, tenant_id, event, attempts) */
    int ok;                  /* delivered */
    int gave_up;             /* last attempt allowed by callbacks.max_attempts */
    char status[200];        /* last_status: "HTTP 503", "refused: ...", "error: ..." */
    long http_status;
    int64_t attempts;        /* after this one */
    char *body;
    char pin[600];           /* "host:port:addr,..." the checked addresses (a name), else "" */
    char idem[128], sig[EAI_CALLBACK_SIG_MAX + 32], sighdr[EAI_CALLBACK_SIG_MAX + 32];
};


static void sender_unref(struct eai_cb_sender *s)
{
    if (--s->refs == 0 && s->stopping) {
        eai_cb_policy_free(&s->pol);
        free(s->proxy);
        json_decref(s->next);
        free(s);
    }
}

struct eai_cb_sender *eai_cb_sender_new(struct eai_app *app, struct eai_error **err)
{
    struct eai_cb_sender *s = calloc(1, sizeof *s);
    if (!s || !(s->next = json_object())) {
        free(s);
        eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    s->app = app;
    s->refs = 1;
    const struct eai_config *c = app->cfg;
    s->timeout_ms = c && c->callbacks_timeout_ms > 0 ? c->callbacks_timeout_ms : 10000;
    s->backoff_cap_ms = c && c->callbacks_backoff_cap_ms > 0 ? c->callbacks_backoff_cap_ms : 300000;
    s->max_attempts = c && c->callbacks_max_attempts > 0 ? c->callbacks_max_attempts : 30;
    int https;
    if (c && c->callbacks_proxy &&
        (!(s->proxy = strdup(c->callbacks_proxy)) ||
         eai_cb_url_parse(s->proxy, s->proxy_host, sizeof s->proxy_host, &s->proxy_port, &https) < 0)) {
        eai_error_set(err, EAI_E_VALIDATION_FAILED, "callbacks.proxy is not an http://host:port URL");
        free(s->proxy);
        json_decref(s->next);
        free(s);
        return NULL;
    }
    size_t bad = 0;
    if (eai_cb_policy_init(&s->pol, c ? c->callbacks_allow : NULL, &bad) < 0) {
        free(s->proxy);
        eai_error_set(err, EAI_E_VALIDATION_FAILED, "callbacks.allow[%zu] is not an allow-list entry", bad);
        json_decref(s->next);
        free(s);
        return NULL;
    }
    return s;
}

const struct eai_cb_policy *eai_cb_sender_policy(const struct eai_cb_sender *s)
{
    return s ? &s->pol : NULL;
}

void eai_cb_sender_stop(struct eai_cb_sender *s)
{
    if (!s)
        return;
    s->stopping = 1;
    sender_unref(s);
}

/* ------------------------------------------------------------ state (worker) */

static void state_work(void *arg)
{
    struct cb_job *j = arg;
    struct eai_app *app = j->s->app;
    const json_t *ev = json_object_get(j->row, "event");
    const char *id = eai_jstr(j->row, "id"), *exec_id = eai_jstr(ev, "execution_id");
    struct eai_error *e = NULL;
    int remove = j->ok || j->gave_up;
    if (id && app->store->outbox_ack(app->storage.self, id, remove, &e) < 0) {
        eai_log(CB_LOG, EAI_LOG_WARN, "outbox ack of callback %s: %s", id, e && e->message ? e->message : "?");
        eai_error_free(e);
        e = NULL;
    }
    if (!exec_id)
        return;
    char key[128], now[32], *old = NULL;
    snprintf(key, sizeof key, "%s%s", EAI_CALLBACK_KV_PREFIX, exec_id);
    if (app->store->kv_get(app->storage.self, key, &old, &e) < 0) {
        eai_error_free(e);
        e = NULL;
    }
    json_t *st = old ? json_loads(old, 0, NULL) : NULL;
    free(old);
    if (!json_is_object(st)) {
        json_decref(st);
        st = json_object();
    }
    if (!st)
        return;
    json_object_set_new(st, "attempts", json_integer((json_int_t)j->attempts));
    json_object_set_new(st, "last_status",
                        j->http_status > 0 ? json_integer(j->http_status) : json_string(j->status));
    eai_time_rfc3339(eai_now_ms(), now);
    json_object_set_new(st, "last_attempt_at", json_string(now));
    if (j->ok)
        json_object_set_new(st, "delivered_at", json_string(now));
    else if (j->gave_up)
        json_object_set_new(st, "gave_up", json_true());
    char *val = json_dumps(st, JSON_COMPACT);
    json_decref(st);
    if (val && app->store->kv_set(app->storage.self, key, val, &e) < 0) {
        eai_log(CB_LOG, EAI_LOG_WARN, "callback state of %s: %s", exec_id, e && e->message ? e->message : "?");
        eai_error_free(e);
    }
    free(val);
}

static void job_free(struct cb_job *j)
{
    json_decref(j->row);
    free(j->body);
    free(j);
}

static void state_done(void *arg)
{
    struct cb_job *j = arg;
    struct eai_cb_sender *s = j->s;
    const char *id = eai_jstr(j->row, "id");
    s->inflight--;
    if (!s->stopping && id) {
        if (j->ok || j->gave_up)
            json_object_set_new(s->next, id, json_integer(eai_now_ms() + 60000)); /* the ack may lag */
        else
            json_object_set_new(s->next, id,
                                json_integer(eai_now_ms() + eai_cb_backoff_ms((int)j->attempts, s->backoff_cap_ms)));
        eai_metrics_add("eai_callback_attempts_total", j->ok ? "result=\"delivered\"" : "result=\"failed\"", 1);
        if (j->gave_up && !j->ok)
            eai_log(CB_LOG, EAI_LOG_WARN, "callback %s to %s: giving up after %lld attempts (%s)", id,
                    eai_jstr(json_object_get(j->row, "event"), "url"), (long long)j->attempts, j->status);
    }
    job_free(j);
    sender_unref(s);
}

static void attempt_end(struct cb_job *j)
{
    j->gave_up = !j->ok && j->attempts >= j->s->max_attempts;
    if (j->s->stopping || eai_work_submit(state_work, state_done, j) != 0)
        state_done(j);  /* no worker: the row stays, tried again after a restart */
}

/* ------------------------------------------------------------ POST (loop) */

static void http_done(void *arg, const struct eai_http_response *resp)
{
    struct cb_job *j = arg;
    j->http_status = resp->status;
    j->ok = resp->status >= 200 && resp->status < 300;
    if (resp->status == 0)
        snprintf(j->status, sizeof j->status, "error: %.180s", resp->error ? resp->error : "transport error");
    else
        snprintf(j->status, sizeof j->status, "HTTP %ld", resp->status);
    attempt_end(j);
}

static void post(struct cb_job *j)
{
    const json_t *ev = json_object_get(j->row, "event");
    const char *secret = eai_jstr(ev, "secret"), *url = eai_jstr(ev, "url"), *id = eai_jstr(ev, "id");
    const struct eai_host *h = j->s->app->host;
    j->body = json_dumps(json_object_get(ev, "body"), JSON_COMPACT | JSON_SORT_KEYS);
    if (!j->body || !secret || !url || !id || !h || !h->http_request) {
        snprintf(j->status, sizeof j->status, "error: malformed callback event");
        attempt_end(j);
        return;
    }
    char sig[EAI_CALLBACK_SIG_MAX];
    eai_cb_sign(secret, eai_now_ms() / 1000, j->body, strlen(j->body), sig);
    snprintf(j->sighdr, sizeof j->sighdr, "Eai-Signature: %s", sig);
    snprintf(j->idem, sizeof j->idem, "Eai-Event-Id: %.100s", id);
    const char *headers[] = {"Content-Type: application/json", "User-Agent: eaid-callback/1", j->idem,
                             j->sighdr, NULL};
    struct eai_http_request hr = {
        .method = "POST", .url = url, .headers = headers, .body = j->body,
        .body_len = strlen(j->body), .timeout_ms = j->s->timeout_ms,
    };
    struct eai_http_client *hc = eai_host_http_client(h);
    int rc = j->pin[0] || j->s->proxy ? (hc ? eai_http_client_request_via(hc, &hr, j->pin[0] ? j->pin : NULL,
                                                                          j->s->proxy, http_done, j)
                                            : -1)
                                      : h->http_request(h, &hr, http_done, j);
    if (rc != 0) {
        snprintf(j->status, sizeof j->status, "error: the HTTP client refused the request");
        attempt_end(j);
    }
}

/* ------------------------------------------------------------ address check (worker) */

/* Resolve host, check every address against the policy and pin them in
 * j->pin ("host:port:addr,..."); a refusal or failure goes to j->status. */
static void resolve_and_pin(struct cb_job *j, const char *host, uint16_t port, const char *what)
{
    const struct eai_cb_policy *p = &j->s->pol;
    int named = p->n > 0 && eai_egress_name_match(p->rules, p->n, host, port) >= 0;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(j->status, sizeof j->status, "error: cannot resolve %s'%.64s': %.100s", what, host, gai_strerror(rc));
        return;
    }
    size_t po = (size_t)snprintf(j->pin, sizeof j->pin, "%s:%u:", host, (unsigned)port);
    int naddr = 0;
    struct eai_ip ip;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        memset(&ip, 0, sizeof ip);
        if (a->ai_family == AF_INET) {
            ip.family = 4;
            memcpy(ip.b, &((struct sockaddr_in *)a->ai_addr)->sin_addr, 4);
        } else if (a->ai_family == AF_INET6) {
            const uint8_t *b = (const uint8_t *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
            if (memcmp(b, mapped, 12) == 0) {
                ip.family = 4;
                memcpy(ip.b, b + 12, 4);
            } else {
                ip.family = 6;
                memcpy(ip.b, b, 16);
            }
        } else {
            continue;
        }
        if (!eai_cb_addr_ok(p, &ip, port, named)) {
            snprintf(j->status, sizeof j->status,
                     "refused: %s'%.64s' resolves to a %s address not listed in callbacks.allow", what, host,
                     eai_addr_class_name(eai_addr_classify(&ip)));
            break;
        }
        /* pin what was checked: curl connects to these, never to a second DNS answer */
        char txt[INET6_ADDRSTRLEN];
        if (inet_ntop(ip.family == 4 ? AF_INET : AF_INET6, ip.b, txt, sizeof txt) && po + strlen(txt) + 4 < sizeof j->pin) {
            po += (size_t)snprintf(j->pin + po, sizeof j->pin - po, ip.family == 4 ? "%s%s" : "%s[%s]",
                                   naddr ? "," : "", txt);
            naddr++;
        }
    }
    freeaddrinfo(res);
    if (!naddr && !j->status[0])
        snprintf(j->status, sizeof j->status, "error: %s'%.64s' has no usable address", what, host);
    if (!naddr || j->status[0])
        j->pin[0] = 0;
}

static void check_work(void *arg)
{
    struct cb_job *j = arg;
    const struct eai_cb_policy *p = &j->s->pol;
    const char *url = eai_jstr(json_object_get(j->row, "event"), "url");
    char host[EAI_CALLBACK_HOST_MAX], why[200];
    uint16_t port;
    int https;
    if (eai_cb_url_check(p, url, why, sizeof why) < 0 || eai_cb_url_parse(url, host, sizeof host, &port, &https) < 0) {
        snprintf(j->status, sizeof j->status, "refused: %.180s", why);
        return;
    }
    /* Through callbacks.proxy the proxy resolves the URL's name: what is
     * checked and pinned is the proxy's address (docs/executions.md). */
    if (j->s->proxy) {
        struct eai_ip pip;
        if (eai_ip_parse(j->s->proxy_host, &pip) == 0) {
            if (!eai_cb_addr_ok(p, &pip, j->s->proxy_port, 0))
                snprintf(j->status, sizeof j->status,
                         "refused: the callbacks.proxy address is a %s address not listed in callbacks.allow",
                         eai_addr_class_name(eai_addr_classify(&pip)));
            return;
        }
        resolve_and_pin(j, j->s->proxy_host, j->s->proxy_port, "callbacks.proxy ");
        return;
    }
    struct eai_ip ip;
    if (eai_ip_parse(host, &ip) == 0)
        return;  /* a literal: checked by eai_cb_url_check */
    resolve_and_pin(j, host, port, "");
}

static void check_done(void *arg)
{
    struct cb_job *j = arg;
    if (j->s->stopping) {
        j->s->inflight--;
        struct eai_cb_sender *s = j->s;
        job_free(j);
        sender_unref(s);
        return;
    }
    if (j->status[0])
        attempt_end(j);
    else
        post(j);
}

/* ------------------------------------------------------------ offer (loop) */

void eai_cb_sender_offer(struct eai_cb_sender *s, const json_t *rows)
{
    if (!s || s->stopping)
        return;
    int64_t now = eai_now_ms();
    /* forget ids no longer in the outbox (delivered, or taken by a replica) */
    json_t *seen = json_object();
    size_t ncb = 0, nrows = json_array_size(rows);
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row) {
        const json_t *ev = json_object_get(row, "event");
        const char *id = eai_jstr(row, "id");
        if (!id || !eai_cb_is_callback(ev))
            continue;
        ncb++;
        if (seen)
            json_object_set_new(seen, id, json_true());
        json_t *nx = json_object_get(s->next, id);
        if (nx && (json_integer_value(nx) < 0 || json_integer_value(nx) > now))
            continue;   /* in flight, or backing off */
        if (s->inflight >= CB_INFLIGHT_MAX)
            continue;
        struct cb_job *j = calloc(1, sizeof *j);
        if (!j)
            break;
        j->s = s;
        j->row = json_deep_copy(row);
        json_t *a = json_object_get(row, "attempts");
        j->attempts = (json_is_integer(a) ? json_integer_value(a) : 0) + 1;
        json_object_set_new(s->next, id, json_integer(-1));
        s->inflight++;
        s->refs++;
        if (!j->row || eai_work_submit(check_work, check_done, j) != 0) {
            json_object_set_new(s->next, id, json_integer(now + 1000));
            s->inflight--;
            job_free(j);
            sender_unref(s);
        }
    }
    const char *k;
    json_t *v, *tmp;
    json_object_foreach_safe(s->next, tmp, k, v) {
        if (seen && !json_object_get(seen, k) && json_integer_value(v) >= 0)
            json_object_del(s->next, k);
    }
    json_decref(seen);
    eai_metrics_set("eai_callback_backlog", NULL, (double)ncb);
    /* the outbox is read oldest first, one batch at a time: callbacks waiting
     * for a receiver that is down can hold up the usage events behind them */
    if (nrows >= 500 && ncb == nrows && !s->warned) {
        eai_log(CB_LOG, EAI_LOG_WARN, "the first %zu outbox rows are completion callbacks waiting for their "
                "receivers: usage events behind them wait too (callbacks.max_attempts bounds it)", ncb);
        s->warned = 1;
    } else if (ncb < nrows) {
        s->warned = 0;
    }
}
