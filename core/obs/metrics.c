#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obs/metrics.h"

#define EAI_METRIC_MAX_BUCKETS 16
#define EAI_METRIC_MAX_SERIES 4096

struct eai_series {
    char *labels;
    double value;               /* counter/gauge; histogram: sum */
    double count;               /* histogram */
    double buckets[EAI_METRIC_MAX_BUCKETS];
    struct eai_series *next;
};

struct eai_family {
    char *name, *help;
    char *owner;                /* the plugin that described it (eai_metrics_claim); NULL: core */
    enum eai_metric_type type;
    double bounds[EAI_METRIC_MAX_BUCKETS];
    int nbounds;
    struct eai_series *series, *series_tail;
    struct eai_family *next;
};

static pthread_mutex_t eai_metrics_mu = PTHREAD_MUTEX_INITIALIZER;
static struct eai_family *eai_families, *eai_families_tail;
static int eai_series_count;
static unsigned eai_metrics_gen = 1; /* bumped by eai_metrics_reset: refs go stale */

static struct eai_family *family_get(const char *name, enum eai_metric_type type, int create)
{
    for (struct eai_family *f = eai_families; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            return f;
    if (!create)
        return NULL;
    struct eai_family *f = calloc(1, sizeof(*f));
    if (!f || !(f->name = strdup(name))) {
        free(f);
        return NULL;
    }
    f->type = type;
    if (eai_families_tail)
        eai_families_tail->next = f;
    else
        eai_families = f;
    eai_families_tail = f;
    return f;
}

static struct eai_series *series_get(struct eai_family *f, const char *labels)
{
    const char *l = labels ? labels : "";
    for (struct eai_series *s = f->series; s; s = s->next)
        if (strcmp(s->labels, l) == 0)
            return s;
    if (eai_series_count >= EAI_METRIC_MAX_SERIES)
        return NULL;  /* bounded: a runaway label set cannot eat memory */
    struct eai_series *s = calloc(1, sizeof(*s));
    if (!s || !(s->labels = strdup(l))) {
        free(s);
        return NULL;
    }
    if (f->series_tail)
        f->series_tail->next = s;
    else
        f->series = s;
    f->series_tail = s;
    eai_series_count++;
    return s;
}

void eai_metrics_describe(const char *name, enum eai_metric_type type, const char *help)
{
    pthread_mutex_lock(&eai_metrics_mu);
    struct eai_family *f = family_get(name, type, 1);
    if (f) {
        f->type = type;
        if (!f->help && help)
            f->help = strdup(help);
    }
    pthread_mutex_unlock(&eai_metrics_mu);
}

void eai_metrics_describe_histogram(const char *name, const char *help, const double *bounds, int nbounds)
{
    pthread_mutex_lock(&eai_metrics_mu);
    struct eai_family *f = family_get(name, EAI_METRIC_HISTOGRAM, 1);
    if (f) {
        f->type = EAI_METRIC_HISTOGRAM;
        if (!f->help && help)
            f->help = strdup(help);
        f->nbounds = nbounds > EAI_METRIC_MAX_BUCKETS ? EAI_METRIC_MAX_BUCKETS : nbounds;
        memcpy(f->bounds, bounds, sizeof(double) * (size_t)f->nbounds);
    }
    pthread_mutex_unlock(&eai_metrics_mu);
}

static int name_char(char c, int first, int colon)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
           (!first && c >= '0' && c <= '9');
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

int eai_metrics_name_check(const char *name, enum eai_metric_type type, const char *const *labels, char *why,
                           size_t whylen)
{
    static const char *const reserved[] = {"_total", "_count", "_sum", "_bucket", NULL};
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > EAI_METRIC_NAME_MAX) {
        snprintf(why, whylen, "metric name must be 1 to %d characters", EAI_METRIC_NAME_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!name_char(name[i], i == 0, 1)) {
            snprintf(why, whylen, "metric name '%s' does not match [a-zA-Z_:][a-zA-Z0-9_:]*", name);
            return -1;
        }
    if (type == EAI_METRIC_COUNTER && !ends_with(name, "_total")) {
        snprintf(why, whylen, "counter '%s' must end in _total", name);
        return -1;
    }
    for (int i = type == EAI_METRIC_COUNTER ? 1 : 0; reserved[i]; i++)
        if (ends_with(name, reserved[i])) {
            snprintf(why, whylen, "%s '%s' must not end in %s (a suffix Prometheus reserves for %s)",
                     type == EAI_METRIC_GAUGE ? "gauge" : "histogram", name, reserved[i],
                     i == 0 ? "counters" : "histograms and summaries");
            return -1;
        }
    int k = 0;
    for (; labels && labels[k]; k++) {
        const char *l = labels[k];
        size_t m = strlen(l);
        if (k >= EAI_METRIC_LABELS_MAX) {
            snprintf(why, whylen, "metric '%s' declares more than %d label names", name, EAI_METRIC_LABELS_MAX);
            return -1;
        }
        int ok = m > 0 && m <= EAI_METRIC_NAME_MAX && strncmp(l, "__", 2) != 0;
        for (size_t i = 0; ok && i < m; i++)
            ok = name_char(l[i], i == 0, 0);
        if (!ok) {
            snprintf(why, whylen, "metric '%s': label name '%s' does not match [a-zA-Z_][a-zA-Z0-9_]* or starts "
                     "with __", name, l);
            return -1;
        }
        if (strcmp(l, "plugin") == 0 || (type == EAI_METRIC_HISTOGRAM && strcmp(l, "le") == 0)) {
            snprintf(why, whylen, "metric '%s': label name '%s' is the host's (%s)", name, l,
                     l[0] == 'p' ? "every plugin series carries plugin=" : "histogram buckets");
            return -1;
        }
        for (int j = 0; j < k; j++)
            if (strcmp(labels[j], l) == 0) {
                snprintf(why, whylen, "metric '%s': label name '%s' is declared twice", name, l);
                return -1;
            }
    }
    return 0;
}

int eai_metrics_claim(const char *name, enum eai_metric_type type, const char *help, const double *bounds,
                      int nbounds, const char *owner, char *why, size_t whylen)
{
    if (!owner || !*owner || !help || !*help || strlen(help) > 512 || strchr(help, '\n')) {
        snprintf(why, whylen, "metric '%s': help must be one line of 1 to 512 characters", name ? name : "?");
        return -1;
    }
    if (type == EAI_METRIC_HISTOGRAM) {
        int ok = bounds && nbounds >= 1 && nbounds <= EAI_METRIC_MAX_BUCKETS;
        for (int i = 0; ok && i < nbounds; i++)
            ok = isfinite(bounds[i]) && (i == 0 || bounds[i] > bounds[i - 1]);
        if (!ok) {
            snprintf(why, whylen, "histogram '%s': 1 to %d finite, increasing bucket bounds", name,
                     EAI_METRIC_MAX_BUCKETS);
            return -1;
        }
    }
    int rc = 0;
    pthread_mutex_lock(&eai_metrics_mu);
    struct eai_family *f = family_get(name, type, 0);
    if (f && (!f->owner || strcmp(f->owner, owner) != 0 || f->type != type)) {
        snprintf(why, whylen, "metric '%s' is already described by %s%s", name, f->owner ? "plugin " : "",
                 f->owner ? f->owner : "eaid");
        rc = -1;
    } else if (!f && !(f = family_get(name, type, 1))) {
        snprintf(why, whylen, "metric '%s': out of memory", name);
        rc = -1;
    } else if (!f->owner) {
        f->owner = strdup(owner);
        f->help = strdup(help);
        if (type == EAI_METRIC_HISTOGRAM) {
            f->nbounds = nbounds;
            memcpy(f->bounds, bounds, sizeof(double) * (size_t)nbounds);
        }
    }
    pthread_mutex_unlock(&eai_metrics_mu);
    return rc;
}

static void series_update(struct eai_family *f, struct eai_series *s, double v, int mode)
{
    if (s) {
        if (mode == 0)
            s->value += v;
        else if (mode == 1)
            s->value = v;
        else {
            s->value += v;
            s->count += 1;
            for (int i = 0; i < f->nbounds; i++)
                if (v <= f->bounds[i])
                    s->buckets[i] += 1;
        }
    }
}

static void metrics_update(const char *name, const char *labels, double v, int mode)
{
    pthread_mutex_lock(&eai_metrics_mu);
    struct eai_family *f = family_get(name, mode == 1 ? EAI_METRIC_GAUGE : EAI_METRIC_COUNTER, 1);
    series_update(f, f ? series_get(f, labels) : NULL, v, mode);
    pthread_mutex_unlock(&eai_metrics_mu);
}

int eai_metrics_ref(struct eai_metric_ref *ref, const char *name, const char *labels, int mode)
{
    pthread_mutex_lock(&eai_metrics_mu);
    struct eai_family *f = family_get(name, mode == 1 ? EAI_METRIC_GAUGE : EAI_METRIC_COUNTER, 1);
    struct eai_series *s = f ? series_get(f, labels) : NULL;
    ref->family = f;
    ref->series = s;
    ref->gen = eai_metrics_gen;
    pthread_mutex_unlock(&eai_metrics_mu);
    return s ? 0 : -1;
}

static int ref_update(struct eai_metric_ref *ref, double v, int mode)
{
    pthread_mutex_lock(&eai_metrics_mu);
    int ok = ref->series && ref->gen == eai_metrics_gen;
    if (ok)
        series_update(ref->family, ref->series, v, mode);
    pthread_mutex_unlock(&eai_metrics_mu);
    return ok ? 0 : -1;
}

int eai_metrics_ref_add(struct eai_metric_ref *ref, double v) { return ref_update(ref, v, 0); }
int eai_metrics_ref_observe(struct eai_metric_ref *ref, double v) { return ref_update(ref, v, 2); }

void eai_metrics_add(const char *name, const char *labels, double v) { metrics_update(name, labels, v, 0); }
void eai_metrics_set(const char *name, const char *labels, double v) { metrics_update(name, labels, v, 1); }
void eai_metrics_observe(const char *name, const char *labels, double v) { metrics_update(name, labels, v, 2); }

double eai_metrics_get(const char *name, const char *labels)
{
    double v = 0;
    pthread_mutex_lock(&eai_metrics_mu);
    struct eai_family *f = family_get(name, EAI_METRIC_COUNTER, 0);
    const char *l = labels ? labels : "";
    for (struct eai_series *s = f ? f->series : NULL; s; s = s->next)
        if (strcmp(s->labels, l) == 0)
            v = s->value;
    pthread_mutex_unlock(&eai_metrics_mu);
    return v;
}

struct eai_mbuf {
    char *p;
    size_t len, cap;
};

static void mb_printf(struct eai_mbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mb_printf(struct eai_mbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np)
            return;
        b->p = np;
        b->cap = cap;
    }
}

static void fmt_num(char *out, size_t len, double v)
{
    if (isinf(v))
        snprintf(out, len, v > 0 ? "+Inf" : "-Inf");
    else if (v == (double)(long long)v && fabs(v) < 1e15)
        snprintf(out, len, "%lld", (long long)v);
    else
        snprintf(out, len, "%.9g", v);
}

static const char *const eai_type_names[] = {"counter", "gauge", "histogram"};

char *eai_metrics_render(void)
{
    struct eai_mbuf b = {0};
    char num[64], le[64];
    mb_printf(&b, "%s", "");
    pthread_mutex_lock(&eai_metrics_mu);
    for (struct eai_family *f = eai_families; f; f = f->next) {
        if (f->help)
            mb_printf(&b, "# HELP %s %s\n", f->name, f->help);
        mb_printf(&b, "# TYPE %s %s\n", f->name, eai_type_names[f->type]);
        for (struct eai_series *s = f->series; s; s = s->next) {
            const char *sep = s->labels[0] ? "," : "";
            if (f->type == EAI_METRIC_HISTOGRAM) {
                for (int i = 0; i < f->nbounds; i++) {
                    fmt_num(le, sizeof(le), f->bounds[i]);
                    fmt_num(num, sizeof(num), s->buckets[i]);
                    mb_printf(&b, "%s_bucket{%s%sle=\"%s\"} %s\n", f->name, s->labels, sep, le, num);
                }
                fmt_num(num, sizeof(num), s->count);
                mb_printf(&b, "%s_bucket{%s%sle=\"+Inf\"} %s\n", f->name, s->labels, sep, num);
                fmt_num(num, sizeof(num), s->value);
                mb_printf(&b, s->labels[0] ? "%s_sum{%s} %s\n" : "%s_sum%s %s\n", f->name, s->labels, num);
                fmt_num(num, sizeof(num), s->count);
                mb_printf(&b, s->labels[0] ? "%s_count{%s} %s\n" : "%s_count%s %s\n", f->name, s->labels, num);
            } else {
                fmt_num(num, sizeof(num), s->value);
                mb_printf(&b, s->labels[0] ? "%s{%s} %s\n" : "%s%s %s\n", f->name, s->labels, num);
            }
        }
    }
    pthread_mutex_unlock(&eai_metrics_mu);
    return b.p;
}

char *eai_metrics_label_escape(const char *v)
{
    size_t n = strlen(v);
    char *out = malloc(2 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '\\' || v[i] == '"') {
            *o++ = '\\';
            *o++ = v[i];
        } else if (v[i] == '\n') {
            *o++ = '\\';
            *o++ = 'n';
        } else {
            *o++ = v[i];
        }
    }
    *o = '\0';
    return out;
}

void eai_metrics_reset(void)
{
    pthread_mutex_lock(&eai_metrics_mu);
    struct eai_family *f = eai_families;
    while (f) {
        struct eai_family *fn = f->next;
        struct eai_series *s = f->series;
        while (s) {
            struct eai_series *sn = s->next;
            free(s->labels);
            free(s);
            s = sn;
        }
        free(f->name);
        free(f->help);
        free(f->owner);
        free(f);
        f = fn;
    }
    eai_families = eai_families_tail = NULL;
    eai_series_count = 0;
    eai_metrics_gen++;
    pthread_mutex_unlock(&eai_metrics_mu);
}
