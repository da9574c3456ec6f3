/* In-process metric registry and the Prometheus text exposition. */
#ifndef EAI_CORE_METRICS_H
#define EAI_CORE_METRICS_H

#include <stddef.h>

enum eai_metric_type { EAI_METRIC_COUNTER = 0, EAI_METRIC_GAUGE, EAI_METRIC_HISTOGRAM, EAI_METRIC_TYPE_MAX };

/* Declare a family once (name, type, help); histograms take bucket bounds. */
void eai_metrics_describe(const char *name, enum eai_metric_type type, const char *help);
void eai_metrics_describe_histogram(const char *name, const char *help,
                                    const double *bounds, int nbounds);
#define EAI_METRIC_NAME_MAX 128  /* a metric or label name's length */
#define EAI_METRIC_LABELS_MAX 8  /* label names a described family may declare */
/* Prometheus naming rules, checked once where a family is described:
 * name [a-zA-Z_:][a-zA-Z0-9_:]*, a counter ends in _total, no other type
 * ends in _total, _count, _sum or _bucket; label names (NULL-
 * terminated, may be NULL) [a-zA-Z_][a-zA-Z0-9_]*, not __*, unique, not
 * plugin (the host's), not le on a histogram.  0, or -1 with why. */
int eai_metrics_name_check(const char *name, enum eai_metric_type type, const char *const *labels, char *why,
                           size_t whylen);
/* Describe a family for a plugin (owner): 0, or -1 with why when core or
 * another plugin described that name, the type differs, help is not one
 * line of 1..512 characters or a histogram's bounds are not 1..16
 * increasing finite numbers.  The same owner again (another instance):
 * 0.  Call eai_metrics_name_check first. */
int eai_metrics_claim(const char *name, enum eai_metric_type type, const char *help, const double *bounds,
                      int nbounds, const char *owner, char *why, size_t whylen);
/* labels: `profile="x",status="y"` or NULL.  Thread-safe. */
void eai_metrics_add(const char *name, const char *labels, double v);
void eai_metrics_set(const char *name, const char *labels, double v);
void eai_metrics_observe(const char *name, const char *labels, double v);
/* A series resolved once, updated without formatting its labels or
 * looking it up again (hot paths).  Zero-initialise; eai_metrics_ref_*
 * return -1 while the ref is unresolved or stale (after
 * eai_metrics_reset): resolve it with eai_metrics_ref() and retry. */
struct eai_metric_ref {
    void *series;
    void *family;
    unsigned gen;
};
/* mode as eai_metrics_add (0) / eai_metrics_observe (2). 0 or -1 (series limit). */
int eai_metrics_ref(struct eai_metric_ref *ref, const char *name, const char *labels, int mode);
int eai_metrics_ref_add(struct eai_metric_ref *ref, double v);
int eai_metrics_ref_observe(struct eai_metric_ref *ref, double v);
/* Current value (counters, gauges), 0 when absent. */
double eai_metrics_get(const char *name, const char *labels);
/* Prometheus text format 0.0.4 (malloc'd). */
char *eai_metrics_render(void);
/* Escape a label value for use inside quotes (malloc'd). */
char *eai_metrics_label_escape(const char *v);
void eai_metrics_reset(void);

#endif
