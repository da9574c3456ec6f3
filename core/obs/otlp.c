/*
 * The built-in OTLP/HTTP JSON span exporter (telemetry plugin "otlp") and
 * the app wiring of the trace exporter.  Encoding per
 * https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding:
 * trace and span ids as lowercase hex, 64-bit integers as decimal strings,
 * enums as integers.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "app.h"
#include "config/config.h"
#include "base/errors.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "obs/otlp.h"
#include "plugin/loader.h"
#include "plugin/open.h"

#define EAI_OTLP_DEFAULT_TIMEOUT_MS 10000

struct eai_otlp {
    const struct eai_host *host;
    char *url;                 /* <endpoint>/v1/traces */
    char *service_name;
    long timeout_ms;
    char **headers;            /* "Content-Type: ...", then OTEL_EXPORTER_OTLP_HEADERS; NULL-terminated */
};

#define EAI_OTLP_MAX_HEADERS 32

static int hexval(int c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* OTEL_EXPORTER_OTLP_HEADERS: "k1=v1,k2=v2", values percent-encoded (the
 * OpenTelemetry exporter specification).  Adds "k1: v1" ... after out[0];
 * -1 on a malformed list (a key that is not an HTTP token, a value with a
 * control character). */
int eai_otlp_parse_headers(const char *list, char **out, int max)
{
    int n = 0;
    const char *p = list;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq) {
            if (strspn(p, " \t") < len)
                goto fail;  /* not key=value */
            p = end ? end + 1 : NULL;  /* an empty item */
            continue;
        }
        const char *ks = p, *ke = eq;
        while (ks < ke && (*ks == ' ' || *ks == '\t'))
            ks++;
        while (ke > ks && (ke[-1] == ' ' || ke[-1] == '\t'))
            ke--;
        if (ke == ks || n >= max)
            goto fail;
        for (const char *c = ks; c < ke; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                  strchr("!#$%&'*+-.^_`|~", *c)))
                goto fail;
        const char *vs = eq + 1, *ve = p + len;
        while (vs < ve && (*vs == ' ' || *vs == '\t'))
            vs++;
        while (ve > vs && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        char *h = malloc((size_t)(ke - ks) + (size_t)(ve - vs) + 3);
        if (!h)
            goto fail;
        size_t o = (size_t)snprintf(h, (size_t)(ke - ks) + 3, "%.*s: ", (int)(ke - ks), ks);
        for (const char *c = vs; c < ve; c++) {
            int ch = (unsigned char)*c;
            if (ch == '%' && c + 2 < ve && hexval(c[1]) >= 0 && hexval(c[2]) >= 0) {
                ch = hexval(c[1]) * 16 + hexval(c[2]);
                c += 2;
            }
            if (ch < 0x20 || ch == 0x7f) {
                free(h);
                goto fail;
            }
            h[o++] = (char)ch;
        }
        h[o] = 0;
        out[n++] = h;
        p = end ? end + 1 : NULL;
    }
    return n;
fail: /* nothing of a malformed list is kept */
    while (n > 0) {
        n--;
        free(out[n]);
        out[n] = NULL;
    }
    return -1;
}

/* ------------------------------------------------------------ encoding */

static json_t *otlp_value(const json_t *v)
{
    char num[32];
    switch (json_typeof(v)) {
    case JSON_STRING:
        return json_pack("{s:O}", "stringValue", v);
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return json_pack("{s:s}", "intValue", num);
    case JSON_REAL:
        return json_pack("{s:f}", "doubleValue", json_real_value(v));
    case JSON_TRUE:
    case JSON_FALSE:
        return json_pack("{s:b}", "boolValue", json_is_true(v));
    default:
        return NULL;
    }
}

static json_t *otlp_attributes(const json_t *attrs)
{
    json_t *arr = json_array();
    const char *k;
    json_t *v;
    if (!arr)
        return NULL;
    json_object_foreach((json_t *)attrs, k, v) {
        json_t *ov = otlp_value(v);
        if (!ov)
            continue;
        json_t *kv = json_pack("{s:s, s:o}", "key", k, "value", ov);
        if (!kv || json_array_append_new(arr, kv) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int otlp_kind(const char *k)
{
    if (!k)
        return 1;
    if (strcmp(k, "server") == 0)
        return 2;
    if (strcmp(k, "client") == 0)
        return 3;
    return 1; /* SPAN_KIND_INTERNAL */
}

static json_t *otlp_span(const json_t *s)
{
    const char *trace = json_string_value(json_object_get(s, "trace_id"));
    const char *span = json_string_value(json_object_get(s, "span_id"));
    const char *parent = json_string_value(json_object_get(s, "parent_span_id"));
    const char *name = json_string_value(json_object_get(s, "name"));
    const char *status = json_string_value(json_object_get(s, "status"));
    json_int_t start = json_integer_value(json_object_get(s, "start_ns"));
    json_int_t end = json_integer_value(json_object_get(s, "end_ns"));
    if (!trace || !span || !name)
        return NULL;
    char st[32], en[32];
    snprintf(st, sizeof(st), "%" JSON_INTEGER_FORMAT, start);
    snprintf(en, sizeof(en), "%" JSON_INTEGER_FORMAT, end);
    json_t *attrs = otlp_attributes(json_object_get(s, "attributes"));
    if (!attrs)
        return NULL;
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:o}", "traceId", trace, "spanId", span,
                          "name", name, "kind", otlp_kind(json_string_value(json_object_get(s, "kind"))),
                          "startTimeUnixNano", st, "endTimeUnixNano", en, "attributes", attrs);
    if (!o)
        return NULL;
    if (parent && *parent)
        json_object_set_new(o, "parentSpanId", json_string(parent));
    /* STATUS_CODE_UNSET (0) for success, as instrumentation should; ERROR = 2 */
    if (status && strcmp(status, "error") == 0)
        json_object_set_new(o, "status", json_pack("{s:i, s:s}", "code", 2, "message", "error"));
    else
        json_object_set_new(o, "status", json_pack("{s:i}", "code", 0));
    return o;
}

json_t *eai_otlp_encode(const json_t *spans, const char *service_name)
{
    if (!json_is_array(spans))
        return NULL;
    json_t *out_spans = json_array();
    if (!out_spans)
        return NULL;
    size_t i;
    json_t *s;
    json_array_foreach(spans, i, s) {
        json_t *o = otlp_span(s);
        if (o)
            json_array_append_new(out_spans, o);
    }
    return json_pack("{s:[{s:{s:[{s:s, s:{s:s}}, {s:s, s:{s:s}}]}, s:[{s:{s:s, s:s}, s:o}]}]}",
                     "resourceSpans",
                     "resource", "attributes",
                     "key", "service.name", "value", "stringValue", service_name ? service_name : "eaid",
                     "key", "service.version", "value", "stringValue", EAI_VERSION,
                     "scopeSpans",
                     "scope", "name", "eai-sandbox", "version", EAI_VERSION,
                     "spans", out_spans);
}

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

static int otlp_export(void *self, const json_t *spans, eai_deliver_done_fn done, void *arg)
{
    struct eai_otlp *o = self;
    json_t *req = eai_otlp_encode(spans, o->service_name);
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
        .method = "POST", .url = o->url, .headers = (const char *const *)o->headers, .body = body,
        .body_len = strlen(body), .timeout_ms = o->timeout_ms,
    };
    if (o->host->http_request(o->host, &hr, otlp_http_done, r) != 0) {
        free(body);
        free(r);
        return -1;
    }
    return 0;
}

static void otlp_destroy(void *self)
{
    struct eai_otlp *o = self;
    if (!o)
        return;
    free(o->url);
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
    o->service_name = strdup(svc && *svc ? svc : "eaid");
    o->headers = calloc(EAI_OTLP_MAX_HEADERS + 2, sizeof(char *));
    if (!o->url || !o->service_name || !o->headers) {
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
};

static const struct eai_config_key otlp_keys[] = {
    {"endpoint", EAI_CFG_STRING, 1, NULL, "OTLP/HTTP base URL; /v1/traces is appended"},
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

/* A built-in: the descriptor a vendor's .so would have, but its function is
 * not EAI_PLUGIN_DECLARE's exported eai_plugin_descriptor() (eaid holds
 * several built-ins): core registers it (eai_plugin_register_builtin) and
 * the loader checks it like a file's. */
const struct eai_plugin_descriptor *eai_builtin_telemetry_otlp(void) { return &otlp_descriptor; }

/* ------------------------------------------------------------ metrics export */

/* A telemetry plugin with export_metrics (ABI 1.1) gets the Prometheus
 * exposition periodically, one call at a time.  Rendering is in memory. */
#define EAI_METRICS_EXPORT_FIRST_MS 1000
#define EAI_METRICS_EXPORT_MS 15000
static struct {
    struct event *timer;
    const struct eai_telemetry_ops *ops;
    void *self;
    int inflight;
    unsigned gen;              /* a done() of an earlier start is ignored */
} g_mx;

static void metrics_export_done(void *arg, int ok, const char *error)
{
    if ((unsigned)(uintptr_t)arg != g_mx.gen)
        return;
    g_mx.inflight = 0;
    if (!ok)
        eai_log("telemetry", EAI_LOG_WARN, "metrics export failed: %s", error ? error : "?");
}

static void metrics_export_tick(evutil_socket_t fd, short what, void *arg)
{
    struct timeval tv = {EAI_METRICS_EXPORT_MS / 1000, 0};
    evtimer_add(g_mx.timer, &tv);
    if (g_mx.inflight || !g_mx.ops || !g_mx.ops->export_metrics)
        return;
    char *text = eai_metrics_render();
    if (!text)
        return;
    g_mx.inflight = 1;
    if (g_mx.ops->export_metrics(g_mx.self, text, strlen(text), metrics_export_done,
                                 (void *)(uintptr_t)g_mx.gen) != 0)
        g_mx.inflight = 0;
    free(text);
}

static int metrics_export_start(struct event_base *base, const struct eai_telemetry_ops *ops, void *self)
{
    if (!ops->export_metrics) /* a 1.0 plugin, or one that exports spans only */
        return 0;
    g_mx.gen++;
    g_mx.ops = ops;
    g_mx.self = self;
    g_mx.inflight = 0;
    g_mx.timer = evtimer_new(base, metrics_export_tick, NULL);
    struct timeval tv = {0, EAI_METRICS_EXPORT_FIRST_MS * 1000};
    if (!g_mx.timer || evtimer_add(g_mx.timer, &tv) < 0)
        return -1;
    return 0;
}

static void metrics_export_stop(void)
{
    if (g_mx.timer)
        event_free(g_mx.timer);
    g_mx.timer = NULL;
    g_mx.ops = NULL;
    g_mx.self = NULL;
    g_mx.gen++;
}

/* ------------------------------------------------------------ app wiring */

int eai_telemetry_conf(const struct eai_config *cfg, const char **name, json_t **conf, struct eai_error **err)
{
    const char *ep = cfg ? cfg->otlp_endpoint : NULL;
    if (ep && !*ep)
        ep = NULL;
    *name = cfg && cfg->telemetry_backend ? cfg->telemetry_backend : ep ? "otlp" : EAI_CFG_TELEMETRY_FALLBACK;
    *conf = NULL;
    if (strcmp(*name, EAI_CFG_TELEMETRY_FALLBACK) == 0)
        return 0;
    /* by name: the built-in "otlp" or eai-telemetry-<name>.so */
    eai_plugin_register_builtin(eai_builtin_telemetry_otlp);
    json_t *c = cfg && cfg->telemetry_conf ? json_deep_copy(cfg->telemetry_conf) : json_object();
    if (!c || (ep && json_object_set_new(c, "endpoint", json_string(ep)) < 0)) {
        json_decref(c);
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    }
    *conf = c;
    return 0;
}

int eai_telemetry_start(struct eai_app *app, struct eai_error **err)
{
    const struct eai_config *cfg = app->cfg;
    if (!app->telemetry.desc) {
        const char *name;
        json_t *conf;
        if (eai_telemetry_conf(cfg, &name, &conf, err) < 0)
            return -1;
        if (!conf) {
            eai_log("trace", EAI_LOG_INFO,
                    "telemetry backend 'log': finished spans go to the log at debug level");
            return 0;
        }
        struct eai_error *e = NULL;
        int rc = eai_plugin_open(cfg && cfg->plugin_dir ? cfg->plugin_dir : eai_plugin_dir(), app->host,
                                 EAI_KIND_TELEMETRY, name, conf, cfg ? cfg->source : NULL, "/telemetry", "backend",
                                 &app->telemetry, &e);
        json_decref(conf);
        if (rc < 0) {
            eai_error_prefix(e, "%s", EAI_TELEMETRY_WHAT);
            eai_error_propagate(err, e);
            return -1;
        }
    }
    const struct eai_telemetry_ops *ops = app->telemetry.desc->ops;
    if (eai_trace_exporter_start(app->base, ops, app->telemetry.self) < 0) {
        return eai_error_set(err, EAI_E_INTERNAL, "cannot start the span export timer");
    }
    if (metrics_export_start(app->base, ops, app->telemetry.self) < 0) {
        eai_trace_exporter_stop();
        return eai_error_set(err, EAI_E_INTERNAL, "cannot start the metrics export timer");
    }
    /* the endpoint itself is not logged: it may carry credentials */
    eai_log("trace", EAI_LOG_INFO, "exporting spans%s with telemetry plugin '%s'",
            ops->export_metrics ? " and metrics" : "", app->telemetry.desc->name);
    return 0;
}

void eai_telemetry_stop(struct eai_app *app)
{
    metrics_export_stop();
    eai_trace_exporter_stop();
    eai_plugin_close(&app->telemetry);
}
