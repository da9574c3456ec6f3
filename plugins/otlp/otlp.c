/*
 * eai-telemetry-otlp.so: the OpenTelemetry exporter (docs/observability.md).
 * Spans: POST <endpoint>/v1/traces; metrics: POST <endpoint>/v1/metrics,
 * both OTLP/HTTP with the JSON encoding (otlp_json.c, otlp_metrics.c), through
 * host->http_request.  Loaded by name ("otlp") when telemetry.otlp_endpoint
 * (OTEL_EXPORTER_OTLP_ENDPOINT) is set; without it spans go to eaid's debug log
 * and metrics stay on /metrics (the in-process fallback).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <eai/sinks.h>

#include "eaibase.h" /* eai_now_ns */
#include "otlp_json.h"

#define EAI_OTLP_DEFAULT_TIMEOUT_MS 10000

struct eai_otlp {
    const struct eai_host *host;
    char *url;                 /* <endpoint>/v1/traces */
    char *metrics_url;         /* <endpoint>/v1/metrics */
    char *service_name;
    long timeout_ms;
    int metrics;               /* export metrics (config "metrics", default true) */
    uint64_t start_ns;         /* start of the cumulative series */
    char **headers;            /* "Content-Type: ...", then OTEL_EXPORTER_OTLP_HEADERS; NULL-terminated */
};

/* ------------------------------------------------------------ the plugin */

struct eai_otlp_req {
    eai_deliver_done_fn done;
    void *arg;
    char *body;
};

static void otlp_http_done(void *arg, const struct eai_http_response *resp)
{
    struct eai_otlp_req *r = arg;
    char msg[160];
    int ok = resp->status >= 200 && resp->status < 300;
    if (!ok) {
        if (resp->status == 0)
            snprintf(msg, sizeof(msg), "OTLP export: %s", resp->error ? resp->error : "transport error");
        else
            snprintf(msg, sizeof(msg), "OTLP export: HTTP %ld", resp->status);
    }
    r->done(r->arg, ok, ok ? NULL : msg);
    free(r->body);
    free(r);
}

/* POST the request document (stolen) to url; done() once answered. */
static int otlp_post(struct eai_otlp *o, const char *url, json_t *req, eai_deliver_done_fn done, void *arg)
{
    char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    struct eai_otlp_req *r = body ? calloc(1, sizeof(*r)) : NULL;
    if (!r) {
        free(body);
        return -1;
    }
    r->done = done;
    r->arg = arg;
    r->body = body;
    struct eai_http_request hr = {
        .method = "POST", .url = url, .headers = (const char *const *)o->headers, .body = body,
        .body_len = strlen(body), .timeout_ms = o->timeout_ms,
    };
    if (o->host->http_request(o->host, &hr, otlp_http_done, r) != 0) {
        free(body);
        free(r);
        return -1;
    }
    return 0;
}

static int otlp_export(void *self, const json_t *spans, eai_deliver_done_fn done, void *arg)
{
    struct eai_otlp *o = self;
    return otlp_post(o, o->url, eai_otlp_encode_spans(spans, o->service_name), done, arg);
}

/* eaid's /metrics exposition, every OTEL_METRIC_EXPORT_INTERVAL (core/obs/telemetry.c) */
static int otlp_export_metrics(void *self, const char *text, size_t len, eai_deliver_done_fn done, void *arg)
{
    struct eai_otlp *o = self;
    if (!o->metrics) {
        done(arg, 1, NULL);
        return 0;
    }
    char why[200] = "";
    json_t *req = eai_otlp_encode_metrics(text, len, o->service_name, o->start_ns, (uint64_t)eai_now_ns(), why,
                                          sizeof(why));
    if (!req) {
        o->host->log(o->host, "otlp", EAI_LOG_WARN, "metrics not exported: %s", why[0] ? why : "out of memory");
        return -1;
    }
    return otlp_post(o, o->metrics_url, req, done, arg);
}

static void otlp_destroy(void *self)
{
    struct eai_otlp *o = self;
    if (!o)
        return;
    free(o->url);
    free(o->metrics_url);
    free(o->service_name);
    for (int i = 1; o->headers && o->headers[i]; i++)
        free(o->headers[i]);
    free(o->headers);
    free(o);
}

static void *otlp_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    const char *ep = json_string_value(json_object_get(config, "endpoint"));
    if (!ep || !*ep || (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0)) {
        eai_host_error_set(host, err, EAI_E_VALIDATION_FAILED,
                           "telemetry.otlp: endpoint must be an http(s) URL");
        return NULL;
    }
    struct eai_otlp *o = calloc(1, sizeof(*o));
    if (!o) {
        eai_host_error_set(host, err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    o->host = host;
    size_t n = strlen(ep);
    while (n > 0 && ep[n - 1] == '/')
        n--;
    const char *svc = json_string_value(json_object_get(config, "service_name"));
    json_t *t = json_object_get(config, "timeout_ms");
    o->timeout_ms = json_is_integer(t) && json_integer_value(t) > 0 ? (long)json_integer_value(t)
                                                                     : EAI_OTLP_DEFAULT_TIMEOUT_MS;
    if (asprintf(&o->url, "%.*s/v1/traces", (int)n, ep) < 0)
        o->url = NULL;
    if (asprintf(&o->metrics_url, "%.*s/v1/metrics", (int)n, ep) < 0)
        o->metrics_url = NULL;
    json_t *m = json_object_get(config, "metrics");
    o->metrics = !json_is_false(m);
    o->start_ns = (uint64_t)eai_now_ns();
    o->service_name = strdup(svc && *svc ? svc : "eaid");
    o->headers = calloc(EAI_OTLP_MAX_HEADERS + 2, sizeof(char *));
    if (!o->url || !o->metrics_url || !o->service_name || !o->headers) {
        otlp_destroy(o);
        eai_host_error_set(host, err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    o->headers[0] = (char *)"Content-Type: application/json";
    /* auth of hosted collectors: telemetry.headers, else the OpenTelemetry
     * variables (the traces one first) */
    const char *hl = json_string_value(json_object_get(config, "headers"));
    if (!hl || !*hl)
        hl = getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS");
    if (!hl || !*hl)
        hl = getenv("OTEL_EXPORTER_OTLP_HEADERS");
    if (hl && *hl && eai_otlp_parse_headers(hl, o->headers + 1, EAI_OTLP_MAX_HEADERS) < 0) {
        otlp_destroy(o);
        eai_host_error_set(host, err, EAI_E_VALIDATION_FAILED,
                           "telemetry: OTEL_EXPORTER_OTLP_HEADERS (or telemetry.headers) must be "
                           "key=value pairs separated by ',' (values percent-encoded, no control characters)");
        return NULL;
    }
    return o;
}

static const struct eai_telemetry_ops otlp_ops = {
    .size = sizeof(struct eai_telemetry_ops),
    .export_spans = otlp_export,
    .export_metrics = otlp_export_metrics,
};

static const struct eai_config_key otlp_keys[] = {
    {"endpoint", EAI_CFG_STRING, 1, NULL, "OTLP/HTTP base URL; /v1/traces and /v1/metrics are appended"},
    {"metrics", EAI_CFG_BOOL, 0, "true", "export eaid's metrics too (every OTEL_METRIC_EXPORT_INTERVAL ms)"},
    {"timeout_ms", EAI_CFG_INT, 0, "10000", "timeout of one export request"},
    {"service_name", EAI_CFG_STRING, 0, "eaid", "resource attribute service.name"},
    {"headers", EAI_CFG_STRING, 0, NULL,
     "extra request headers k1=v1,k2=v2 (default OTEL_EXPORTER_OTLP_TRACES_HEADERS, OTEL_EXPORTER_OTLP_HEADERS)"},
    {NULL, 0, 0, NULL, NULL},
};

static const struct eai_plugin_descriptor otlp_descriptor = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "otlp",
    .kind = EAI_KIND_TELEMETRY,
    .version = EAI_VERSION, /* the build's (CMake project version) */
    .create = otlp_create,
    .destroy = otlp_destroy,
    .ops = &otlp_ops,
    .config_keys = otlp_keys,
};

EAI_PLUGIN_DECLARE(otlp_descriptor)
