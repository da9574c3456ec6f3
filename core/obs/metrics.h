/* In-process metric registry and the Prometheus text exposition. */
#ifndef EAI_CORE_METRICS_H
#define EAI_CORE_METRICS_H

enum eai_metric_type { EAI_METRIC_COUNTER = 0, EAI_METRIC_GAUGE, EAI_METRIC_HISTOGRAM, EAI_METRIC_TYPE_MAX };

/* Declare a family once (name, type, help); histograms take bucket bounds. */
void eai_metrics_describe(const char *name, enum eai_metric_type type, const char *help);
void eai_metrics_describe_histogram(const char *name, const char *help,
                                    const double *bounds, int nbounds);
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
