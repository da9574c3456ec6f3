/*
 * eai-audit-http.so: ships batches of sealed audit events (one tenant's
 * chain, in order) with
 *   POST <url>
 *   Content-Type: application/json
 *   Idempotency-Key: <hash of the last event in the batch>
 *   {"events": [ {...}, ... ]}
 * 2xx or 409 means delivered.  Transport errors, 408, 429 and 5xx are
 * retried here (max_retries, 200 ms doubling); core then keeps the durable
 * cursor where it was and tries the batch again later.
 * Config: url (required), timeout_ms (default 10000), max_retries (default 3).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include <eai/sinks.h>

struct eai_audit_http {
    const struct eai_host *host;
    char *url;
    long timeout_ms;
    int max_retries;
};

/* Self-contained: the instance may be destroyed while a request runs. */
struct eai_audit_req {
    const struct eai_host *host;
    char *url;
    long timeout_ms;
    int attempts_left;
    int attempt;
    eai_deliver_done_fn done;
    void *arg;
    char *body;
    char *idem;
};

static void audit_req_free(struct eai_audit_req *r)
{
    free(r->url);
    free(r->body);
    free(r->idem);
    free(r);
}

static int audit_send(struct eai_audit_req *r);

static void audit_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct eai_audit_req *r = arg;
    if (audit_send(r) != 0) {
        r->done(r->arg, 0, "audit sink: cannot queue the retry");
        audit_req_free(r);
    }
}

static void audit_http_done(void *arg, const struct eai_http_response *resp)
{
    struct eai_audit_req *r = arg;
    long st = resp->status;
    if ((st >= 200 && st < 300) || st == 409) {
        r->done(r->arg, 1, NULL);
        audit_req_free(r);
        return;
    }
    int retryable = st == 0 || st == 408 || st == 429 || st >= 500;
    if (retryable && r->attempts_left > 0 && r->host->base) {
        r->attempts_left--;
        long ms = 200L << (r->attempt < 6 ? r->attempt : 6);
        r->attempt++;
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        if (event_base_once(r->host->base, -1, EV_TIMEOUT, audit_retry_cb, r, &tv) == 0)
            return;
    }
    char msg[200];
    if (st == 0)
        snprintf(msg, sizeof(msg), "audit sink: %s", resp->error ? resp->error : "transport error");
    else
        snprintf(msg, sizeof(msg), "audit sink: HTTP %ld", st);
    r->done(r->arg, 0, msg);
    audit_req_free(r);
}

static int audit_send(struct eai_audit_req *r)
{
    const char *headers[] = {"Content-Type: application/json", r->idem, NULL};
    struct eai_http_request hr = {
        .method = "POST", .url = r->url, .headers = headers, .body = r->body,
        .body_len = strlen(r->body), .timeout_ms = r->timeout_ms,
    };
    return r->host->http_request(r->host, &hr, audit_http_done, r);
}

static int hex64(const char *s)
{
    if (!s || strlen(s) != 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return 0;
    return 1;
}

static int audit_deliver(void *self, const json_t *events, eai_deliver_done_fn done, void *arg)
{
    struct eai_audit_http *a = self;
    size_t n = json_array_size(events);
    if (n == 0)
        return -1;
    const char *last = json_string_value(json_object_get(json_array_get(events, n - 1), "hash"));
    struct eai_audit_req *r = calloc(1, sizeof(*r));
    if (!r)
        return -1;
    r->host = a->host;
    r->timeout_ms = a->timeout_ms;
    r->attempts_left = a->max_retries;
    r->done = done;
    r->arg = arg;
    r->url = strdup(a->url);
    json_t *doc = json_pack("{s:O}", "events", events);
    r->body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (asprintf(&r->idem, "Idempotency-Key: %s", hex64(last) ? last : "none") < 0)
        r->idem = NULL;
    if (!r->url || !r->body || !r->idem || audit_send(r) != 0) {
        audit_req_free(r);
        return -1;
    }
    return 0;
}

static void audit_destroy(void *self)
{
    struct eai_audit_http *a = self;
    if (!a)
        return;
    free(a->url);
    free(a);
}

static void *audit_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    const char *url = json_string_value(json_object_get(config, "url"));
    if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
        eai_host_error_set(host, err, EAI_E_VALIDATION_FAILED, "audit.url must be an http(s) URL");
        return NULL;
    }
    struct eai_audit_http *a = calloc(1, sizeof(*a));
    if (!a || !(a->url = strdup(url))) {
        free(a);
        eai_host_error_set(host, err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    a->host = host;
    json_t *t = json_object_get(config, "timeout_ms");
    a->timeout_ms = json_is_integer(t) && json_integer_value(t) > 0 ? (long)json_integer_value(t) : 10000;
    json_t *m = json_object_get(config, "max_retries");
    a->max_retries = json_is_integer(m) && json_integer_value(m) >= 0 && json_integer_value(m) <= 10
                         ? (int)json_integer_value(m) : 3;
    return a;
}

static const struct eai_audit_ops audit_ops = {
    .size = sizeof(struct eai_audit_ops),
    .deliver = audit_deliver,
};

static const struct eai_config_key audit_keys[] = {
    {"url", EAI_CFG_STRING, 1, NULL, "audit sink URL (EAI_AUDIT_URL): batches are POSTed to it as is"},
    {"timeout_ms", EAI_CFG_INT, 0, "10000", "timeout of one request"},
    {"max_retries", EAI_CFG_INT, 0, "3", "quick retries per batch before core backs off (0..10)"},
    {NULL, 0, 0, NULL, NULL},
};

static const struct eai_plugin_descriptor audit_descriptor = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "http",
    .kind = EAI_KIND_AUDIT,
    .version = EAI_VERSION, /* the build's (CMake project version) */
    .create = audit_create,
    .destroy = audit_destroy,
    .ops = &audit_ops,
    .config_keys = audit_keys,
};

EAI_PLUGIN_DECLARE(audit_descriptor)
