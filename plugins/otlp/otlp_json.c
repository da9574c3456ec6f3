/*
 * OTLP/HTTP JSON encoding (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding)
 * for eai-telemetry-otlp.so: spans (ExportTraceServiceRequest), metrics
 * (ExportMetricsServiceRequest, from eaid's Prometheus exposition: otlp_metrics.c)
 * and the OTEL_EXPORTER_OTLP_HEADERS list.  Trace and span ids as lowercase
 * hex, 64-bit integers as decimal strings, enums as integers.  Pure
 * functions: the unit tests compile this file in.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_json.h"

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

json_t *eai_otlp_attributes(const json_t *attrs)
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
    json_t *attrs = eai_otlp_attributes(json_object_get(s, "attributes"));
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

json_t *eai_otlp_encode_spans(const json_t *spans, const char *service_name)
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

