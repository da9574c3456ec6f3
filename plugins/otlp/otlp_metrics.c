/*
 * eaid's metrics, from the Prometheus text exposition (format 0.0.4, what
 * /metrics serves and core hands to export_metrics) to an OTLP/JSON
 * ExportMetricsServiceRequest, the same series under the same names:
 *
 *   # TYPE x counter     -> Sum, monotonic, cumulative (2), asDouble
 *   # TYPE x gauge       -> Gauge, asDouble (untyped samples too)
 *   # TYPE x histogram   -> Histogram, cumulative: x_bucket{le} (cumulative
 *                           counts) become explicitBounds + per-bucket
 *                           bucketCounts, x_sum and x_count sum and count
 *   # TYPE x summary     -> Summary: quantileValues, sum, count
 *   # HELP x text        -> description
 *
 * Labels become string attributes.  Doubles that JSON cannot hold are the
 * strings "NaN", "Infinity", "-Infinity" (the protobuf JSON mapping).  The
 * input is eaid's own, but the parser trusts nothing: a malformed line fails
 * the whole export (said in why), never a partial one.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_json.h"

enum fam_type { F_UNTYPED = 0, F_COUNTER, F_GAUGE, F_HISTOGRAM, F_SUMMARY };

struct parser {
    const char *p, *end;
    int line;
    char *why;
    size_t whylen;
    size_t series;
    json_t *fams;      /* name -> {type, help, order, points: {labelkey -> point}} */
    json_t *order;     /* family names in order of first appearance */
};

static int fail(struct parser *ps, const char *what)
{
    snprintf(ps->why, ps->whylen, "line %d: %s", ps->line, what);
    return -1;
}

static int name_char(int c, int first)
{
    return isalpha(c) || c == '_' || c == ':' || (!first && isdigit(c));
}

/* A metric or label name at *p (advanced past it) into out. */
static int read_name(const char **p, const char *end, char *out, size_t outlen)
{
    const char *s = *p;
    size_t n = 0;
    while (s + n < end && name_char((unsigned char)s[n], n == 0))
        n++;
    if (n == 0 || n >= outlen)
        return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    *p = s + n;
    return 0;
}

/* A quoted label value with \\, \" and \n escapes into a new JSON string. */
static json_t *read_label_value(const char **p, const char *end)
{
    const char *s = *p;
    if (s >= end || *s != '"')
        return NULL;
    s++;
    char *buf = malloc((size_t)(end - s) + 1);
    size_t n = 0;
    if (!buf)
        return NULL;
    while (s < end && *s != '"') {
        if (*s == '\\' && s + 1 < end) {
            s++;
            buf[n++] = *s == 'n' ? '\n' : *s;
        } else if (*s == '\n') {
            break;
        } else {
            buf[n++] = *s;
        }
        s++;
    }
    if (s >= end || *s != '"') {
        free(buf);
        return NULL;
    }
    *p = s + 1;
    json_t *v = json_stringn(buf, n);
    free(buf);
    return v;
}

static int parse_double(const char *s, size_t n, double *out)
{
    char tmp[64];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (!strcmp(tmp, "+Inf") || !strcmp(tmp, "Inf")) {
        *out = INFINITY;
        return 0;
    }
    if (!strcmp(tmp, "-Inf")) {
        *out = -INFINITY;
        return 0;
    }
    if (!strcmp(tmp, "NaN")) {
        *out = NAN;
        return 0;
    }
    char *e = NULL;
    *out = strtod(tmp, &e);
    return e && *e == '\0' ? 0 : -1;
}

static json_t *otlp_double(double v)
{
    if (isnan(v))
        return json_string("NaN");
    if (isinf(v))
        return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

static json_t *family(struct parser *ps, const char *name)
{
    json_t *f = json_object_get(ps->fams, name);
    if (f)
        return f;
    f = json_pack("{s:i, s:s, s:{}}", "type", F_UNTYPED, "help", "", "points");
    if (!f || json_object_set_new(ps->fams, name, f) < 0 || json_array_append_new(ps->order, json_string(name)) < 0)
        return NULL;
    return f;
}

static int type_of(const char *t)
{
    return !strcmp(t, "counter")     ? F_COUNTER
           : !strcmp(t, "gauge")     ? F_GAUGE
           : !strcmp(t, "histogram") ? F_HISTOGRAM
           : !strcmp(t, "summary")   ? F_SUMMARY
           : !strcmp(t, "untyped")   ? F_UNTYPED
                                     : -1;
}

/* "# HELP name text" / "# TYPE name type"; other comments are skipped. */
static int comment(struct parser *ps, const char *s, const char *eol)
{
    s++;
    while (s < eol && *s == ' ')
        s++;
    int help = eol - s >= 4 && !strncmp(s, "HELP", 4), type = eol - s >= 4 && !strncmp(s, "TYPE", 4);
    if (!help && !type)
        return 0;
    s += 4;
    if (s >= eol || *s != ' ')
        return 0;
    while (s < eol && *s == ' ')
        s++;
    char name[256];
    if (read_name(&s, eol, name, sizeof name) < 0)
        return fail(ps, "malformed metric name in a HELP or TYPE line");
    while (s < eol && *s == ' ')
        s++;
    json_t *f = family(ps, name);
    if (!f)
        return fail(ps, "out of memory");
    if (type) {
        char t[16];
        size_t n = (size_t)(eol - s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\r'))
            n--;
        if (n >= sizeof t)
            return fail(ps, "unknown metric type");
        memcpy(t, s, n);
        t[n] = '\0';
        int ty = type_of(t);
        if (ty < 0)
            return fail(ps, "unknown metric type");
        json_object_set_new(f, "type", json_integer(ty));
        return 0;
    }
    /* HELP text: \\ and \n escaped */
    char *buf = malloc((size_t)(eol - s) + 1);
    size_t n = 0;
    if (!buf)
        return fail(ps, "out of memory");
    for (; s < eol; s++) {
        if (*s == '\\' && s + 1 < eol) {
            s++;
            buf[n++] = *s == 'n' ? '\n' : *s;
        } else {
            buf[n++] = *s;
        }
    }
    json_object_set_new(f, "help", json_stringn(buf, n));
    free(buf);
    return 0;
}

/* The family a sample belongs to, and which part of it (histogram and summary
 * samples carry _bucket, _sum, _count suffixes). */
static json_t *family_of_sample(struct parser *ps, const char *name, const char **part)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    *part = "";
    size_t n = strlen(name);
    for (size_t i = 0; i < 3; i++) {
        size_t k = strlen(sfx[i]);
        if (n <= k || strcmp(name + n - k, sfx[i]) != 0)
            continue;
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(n - k), name);
        json_t *f = json_object_get(ps->fams, base);
        json_int_t t = json_integer_value(json_object_get(f, "type"));
        if (f && (t == F_HISTOGRAM || (t == F_SUMMARY && i > 0))) {
            *part = sfx[i];
            return f;
        }
    }
    return family(ps, name);
}

static int sample(struct parser *ps, const char *s, const char *eol)
{
    char name[256], lname[256];
    if (read_name(&s, eol, name, sizeof name) < 0)
        return fail(ps, "malformed metric name");
    json_t *labels = json_object(), *le = NULL, *quantile = NULL;
    if (!labels)
        return fail(ps, "out of memory");
    if (s < eol && *s == '{') {
        s++;
        for (;;) {
            while (s < eol && *s == ' ')
                s++;
            if (s < eol && *s == '}') {
                s++;
                break;
            }
            if (read_name(&s, eol, lname, sizeof lname) < 0 || s >= eol || *s != '=') {
                json_decref(labels);
                return fail(ps, "malformed label");
            }
            s++;
            json_t *v = read_label_value(&s, eol);
            if (!v) {
                json_decref(labels);
                return fail(ps, "malformed label value");
            }
            json_object_set_new(labels, lname, v);
            while (s < eol && *s == ' ')
                s++;
            if (s < eol && *s == ',')
                s++;
            else if (s < eol && *s != '}') {
                json_decref(labels);
                return fail(ps, "malformed label list");
            }
        }
    }
    while (s < eol && *s == ' ')
        s++;
    const char *v0 = s;
    while (s < eol && *s != ' ' && *s != '\r')
        s++;
    double v;
    if (parse_double(v0, (size_t)(s - v0), &v) < 0) {
        json_decref(labels);
        return fail(ps, "malformed sample value");
    }
    /* an optional timestamp (ms) after the value, ignored: OTLP gets the export's time */
    while (s < eol && *s == ' ')
        s++;
    if (s < eol && *s == '-')
        s++;
    while (s < eol && isdigit((unsigned char)*s))
        s++;
    while (s < eol && (*s == ' ' || *s == '\r'))
        s++;
    if (s != eol) {
        json_decref(labels);
        return fail(ps, "unexpected text after the sample value");
    }
    const char *part;
    json_t *f = family_of_sample(ps, name, &part);
    if (!f) {
        json_decref(labels);
        return fail(ps, "out of memory");
    }
    json_int_t type = json_integer_value(json_object_get(f, "type"));
    if (type == F_HISTOGRAM && !strcmp(part, "_bucket")) {
        le = json_incref(json_object_get(labels, "le"));
        json_object_del(labels, "le");
        if (!le) {
            json_decref(labels);
            return fail(ps, "histogram bucket without le");
        }
    } else if (type == F_SUMMARY && !*part) {
        quantile = json_incref(json_object_get(labels, "quantile"));
        json_object_del(labels, "quantile");
    }
    char *key = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *points = json_object_get(f, "points"), *pt = key ? json_object_get(points, key) : NULL;
    if (key && !pt) {
        if (++ps->series > EAI_OTLP_METRICS_MAX) {
            free(key);
            json_decref(labels);
            json_decref(le);
            json_decref(quantile);
            return fail(ps, "too many series");
        }
        pt = json_pack("{s:O, s:[], s:[]}", "labels", labels, "buckets", "quantiles");
        if (pt)
            json_object_set_new(points, key, pt);
    }
    free(key);
    json_decref(labels);
    if (!pt) {
        json_decref(le);
        json_decref(quantile);
        return fail(ps, "out of memory");
    }
    double lev;
    if (le) {
        int bad = parse_double(json_string_value(le), json_string_length(le), &lev) < 0;
        json_decref(le);
        if (bad)
            return fail(ps, "malformed le");
        json_array_append_new(json_object_get(pt, "buckets"), json_pack("[f,f]", isinf(lev) ? 1e308 : lev, v));
    } else if (quantile) {
        double q;
        int bad = parse_double(json_string_value(quantile), json_string_length(quantile), &q) < 0;
        json_decref(quantile);
        if (bad)
            return fail(ps, "malformed quantile");
        json_array_append_new(json_object_get(pt, "quantiles"),
                              json_pack("{s:f, s:o}", "quantile", q, "value", otlp_double(v)));
    } else if (!strcmp(part, "_sum")) {
        json_object_set_new(pt, "sum", json_real(isfinite(v) ? v : 0));
    } else if (!strcmp(part, "_count")) {
        json_object_set_new(pt, "count", json_real(v));
    } else {
        json_object_set_new(pt, "value", otlp_double(v));
    }
    return 0;
}

static json_t *attrs_of(const json_t *pt)
{
    return eai_otlp_attributes(json_object_get(pt, "labels"));
}

static int cmp_bucket(const void *a, const void *b)
{
    double x = json_real_value(json_array_get(*(json_t *const *)a, 0));
    double y = json_real_value(json_array_get(*(json_t *const *)b, 0));
    return x < y ? -1 : x > y;
}

/* Cumulative le buckets to explicitBounds + per-bucket counts. */
static json_t *histogram_point(const json_t *pt, const char *st, const char *now)
{
    const json_t *bk = json_object_get(pt, "buckets");
    size_t n = json_array_size(bk);
    json_t **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(bk, i);
    qsort(v, n, sizeof *v, cmp_bucket);
    json_t *bounds = json_array(), *counts = json_array();
    double prev = 0, total = json_real_value(json_object_get(pt, "count"));
    char num[32];
    for (size_t i = 0; i < n && bounds && counts; i++) {
        double le = json_real_value(json_array_get(v[i], 0)), cum = json_real_value(json_array_get(v[i], 1));
        if (le >= 1e308) { /* +Inf: the rest */
            if (!json_object_get(pt, "count"))
                total = cum;
            break;
        }
        json_array_append_new(bounds, json_real(le));
        snprintf(num, sizeof num, "%.0f", cum > prev ? cum - prev : 0);
        json_array_append_new(counts, json_string(num));
        prev = cum > prev ? cum : prev;
    }
    free(v);
    snprintf(num, sizeof num, "%.0f", total > prev ? total - prev : 0);
    json_array_append_new(counts, json_string(num));
    char cnt[32];
    snprintf(cnt, sizeof cnt, "%.0f", total > 0 ? total : 0);
    json_t *attrs = attrs_of(pt);
    return json_pack("{s:o, s:s, s:s, s:s, s:f, s:o, s:o}", "attributes", attrs ? attrs : json_array(),
                     "startTimeUnixNano", st, "timeUnixNano", now, "count", cnt,
                     "sum", json_real_value(json_object_get(pt, "sum")), "bucketCounts", counts,
                     "explicitBounds", bounds);
}

static json_t *metric_of(const char *name, const json_t *f, const char *st, const char *now)
{
    json_int_t type = json_integer_value(json_object_get(f, "type"));
    json_t *dps = json_array();
    const char *key;
    json_t *pt;
    json_object_foreach((json_t *)json_object_get(f, "points"), key, pt) {
        json_t *dp;
        if (type == F_HISTOGRAM) {
            dp = histogram_point(pt, st, now);
        } else if (type == F_SUMMARY) {
            char cnt[32];
            snprintf(cnt, sizeof cnt, "%.0f", json_real_value(json_object_get(pt, "count")));
            json_t *attrs = attrs_of(pt);
            dp = json_pack("{s:o, s:s, s:s, s:s, s:f, s:O}", "attributes", attrs ? attrs : json_array(),
                           "startTimeUnixNano", st, "timeUnixNano", now, "count", cnt, "sum",
                           json_real_value(json_object_get(pt, "sum")), "quantileValues",
                           json_object_get(pt, "quantiles"));
        } else {
            json_t *val = json_object_get(pt, "value");
            if (!val)
                continue; /* a _sum or _count of an undeclared family lands under its own name */
            json_t *attrs = attrs_of(pt);
            dp = json_pack("{s:o, s:s, s:O}", "attributes", attrs ? attrs : json_array(), "timeUnixNano", now,
                           "asDouble", val);
            if (dp && type == F_COUNTER)
                json_object_set_new(dp, "startTimeUnixNano", json_string(st));
        }
        if (!dp || json_array_append_new(dps, dp) < 0) {
            json_decref(dps);
            return NULL;
        }
    }
    if (json_array_size(dps) == 0) {
        json_decref(dps);
        return json_null(); /* described, never observed: nothing to send */
    }
    const char *help = json_string_value(json_object_get(f, "help"));
    json_t *m = json_pack("{s:s, s:s}", "name", name, "description", help ? help : "");
    if (!m) {
        json_decref(dps);
        return NULL;
    }
    switch (type) {
    case F_COUNTER:
        json_object_set_new(m, "sum", json_pack("{s:i, s:b, s:o}", "aggregationTemporality", 2, "isMonotonic", 1,
                                                "dataPoints", dps));
        break;
    case F_HISTOGRAM:
        json_object_set_new(m, "histogram", json_pack("{s:i, s:o}", "aggregationTemporality", 2, "dataPoints", dps));
        break;
    case F_SUMMARY:
        json_object_set_new(m, "summary", json_pack("{s:o}", "dataPoints", dps));
        break;
    default:
        json_object_set_new(m, "gauge", json_pack("{s:o}", "dataPoints", dps));
    }
    return m;
}

json_t *eai_otlp_encode_metrics(const char *text, size_t len, const char *service_name, uint64_t start_ns,
                                uint64_t now_ns, char *why, size_t whylen)
{
    struct parser ps = {.p = text, .end = text + len, .why = why, .whylen = whylen};
    ps.fams = json_object();
    ps.order = json_array();
    json_t *metrics = json_array(), *out = NULL;
    if (!ps.fams || !ps.order || !metrics)
        goto done;
    while (ps.p < ps.end) {
        const char *eol = memchr(ps.p, '\n', (size_t)(ps.end - ps.p));
        if (!eol)
            eol = ps.end;
        ps.line++;
        const char *s = ps.p;
        while (s < eol && (*s == ' ' || *s == '\t'))
            s++;
        int rc = 0;
        if (s < eol && *s == '#')
            rc = comment(&ps, s, eol);
        else if (s < eol && *s != '\r')
            rc = sample(&ps, s, eol);
        if (rc < 0)
            goto done;
        ps.p = eol + 1;
    }
    char st[32], now[32];
    snprintf(st, sizeof st, "%llu", (unsigned long long)start_ns);
    snprintf(now, sizeof now, "%llu", (unsigned long long)now_ns);
    size_t i;
    json_t *n;
    json_array_foreach(ps.order, i, n) {
        json_t *m = metric_of(json_string_value(n), json_object_get(ps.fams, json_string_value(n)), st, now);
        if (!m) {
            snprintf(why, whylen, "out of memory");
            goto done;
        }
        if (json_is_null(m))
            continue;
        json_array_append_new(metrics, m);
    }
    out = json_pack("{s:[{s:{s:[{s:s, s:{s:s}}, {s:s, s:{s:s}}]}, s:[{s:{s:s, s:s}, s:O}]}]}",
                    "resourceMetrics", "resource", "attributes",
                    "key", "service.name", "value", "stringValue", service_name ? service_name : "eaid",
                    "key", "service.version", "value", "stringValue", EAI_VERSION,
                    "scopeMetrics", "scope", "name", "eai-sandbox", "version", EAI_VERSION,
                    "metrics", metrics);
    if (!out)
        snprintf(why, whylen, "out of memory");
done:
    json_decref(metrics);
    json_decref(ps.fams);
    json_decref(ps.order);
    return out;
}
