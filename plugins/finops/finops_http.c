/*
 * eai-finops-http.so: delivers one usage event per call with
 *   POST <url>/v1/finops/usage
 *   Content-Type: application/json
 *   Idempotency-Key: <event id>
 * 2xx, or 409 (the service has that key already), means delivered.  Any
 * other answer or a transport error fails the call; core retries from the
 * durable outbox with capped exponential backoff (docs/observability.md).
 * Config: url (required), timeout_ms (default 10000).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <eai/sinks.h>

struct eai_finops_http {
    const struct eai_host *host;
    char *url;                 /* <url>/v1/finops/usage */
    long timeout_ms;
};

/* Everything one request needs: the instance may be destroyed meanwhile. */
struct eai_finops_req {
    eai_deliver_done_fn done;
    void *arg;
    char *body;
    char *idem;                /* "Idempotency-Key: ..." */
};

static void finops_req_free(struct eai_finops_req *r)
{
    free(r->body);
    free(r->idem);
    free(r);
}

static void finops_http_done(void *arg, const struct eai_http_response *resp)
{
    struct eai_finops_req *r = arg;
    char msg[200];
    int ok = (resp->status >= 200 && resp->status < 300) || resp->status == 409;
    if (!ok) {
        if (resp->status == 0)
            snprintf(msg, sizeof(msg), "FinOps: %s", resp->error ? resp->error : "transport error");
        else
            snprintf(msg, sizeof(msg), "FinOps: HTTP %ld", resp->status);
    }
    r->done(r->arg, ok, ok ? NULL : msg);
    finops_req_free(r);
}

static int id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 200)
        return 0;
    for (const char *p = id; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            return 0;  /* printable ASCII only: it goes in a header */
    return 1;
}

static int finops_deliver(void *self, const json_t *event, eai_deliver_done_fn done, void *arg)
{
    struct eai_finops_http *f = self;
    const char *id = json_string_value(json_object_get(event, "id"));
    if (!id || !id_ok(id))
        return -1;
    struct eai_finops_req *r = calloc(1, sizeof(*r));
    if (!r)
        return -1;
    r->done = done;
    r->arg = arg;
    r->body = json_dumps(event, JSON_COMPACT);
    if (!r->body || asprintf(&r->idem, "Idempotency-Key: %s", id) < 0) {
        r->idem = NULL;
        finops_req_free(r);
        return -1;
    }
    const char *headers[] = {"Content-Type: application/json", r->idem, NULL};
    struct eai_http_request hr = {
        .method = "POST", .url = f->url, .headers = headers, .body = r->body,
        .body_len = strlen(r->body), .timeout_ms = f->timeout_ms,
    };
    if (f->host->http_request(f->host, &hr, finops_http_done, r) != 0) {
        finops_req_free(r);
        return -1;
    }
    return 0;
}

static void finops_destroy(void *self)
{
    struct eai_finops_http *f = self;
    if (!f)
        return;
    free(f->url);
    free(f);
}

static void *finops_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    const char *url = json_string_value(json_object_get(config, "url"));
    if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
        eai_host_error_set(host, err, EAI_E_VALIDATION_FAILED, "finops.url must be an http(s) URL");
        return NULL;
    }
    struct eai_finops_http *f = calloc(1, sizeof(*f));
    if (!f) {
        eai_host_error_set(host, err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    f->host = host;
    json_t *t = json_object_get(config, "timeout_ms");
    f->timeout_ms = json_is_integer(t) && json_integer_value(t) > 0 ? (long)json_integer_value(t) : 10000;
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        n--;
    if (asprintf(&f->url, "%.*s/v1/finops/usage", (int)n, url) < 0) {
        free(f);
        eai_host_error_set(host, err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    return f;
}

static const struct eai_finops_ops finops_ops = {
    .size = sizeof(struct eai_finops_ops),
    .deliver = finops_deliver,
};

static const struct eai_config_key finops_keys[] = {
    {"url", EAI_CFG_STRING, 1, NULL, "FinOps service base URL (EAI_FINOPS_URL); /v1/finops/usage is appended"},
    {"timeout_ms", EAI_CFG_INT, 0, "10000", "timeout of one delivery request"},
    {NULL, 0, 0, NULL, NULL},
};

static const struct eai_plugin_descriptor finops_descriptor = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "http",
    .kind = EAI_KIND_FINOPS,
    .version = EAI_VERSION, /* the build's (CMake project version) */
    .create = finops_create,
    .destroy = finops_destroy,
    .ops = &finops_ops,
    .config_keys = finops_keys,
};

EAI_PLUGIN_DECLARE(finops_descriptor)
