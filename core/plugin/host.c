#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "obs/audit.h"
#include "base/errors.h"
#include "plugin/host.h"
#include "http_client.h"
#include "images/images.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "base/util.h"
#include "base/worker.h"
#include "net/egress_host.h"

struct eai_host_private {
    struct eai_host pub;
    char data_dir[PATH_MAX];
    char image_dir[PATH_MAX];
    char node_id[37];
    struct eai_http_client *http;
    struct eai_egress_host *egress; /* netns_take: set once egress is up (eai_host_set_egress) */
};

/* One per plugin instance: pub is a copy of the shared table with
 * plugin_name set; pub.core still points at the shared private part. */
struct eai_host_instance {
    struct eai_host pub;
    enum eai_plugin_kind kind;
    int slot;                  /* error_new trampoline, -1 when none */
    char name[65];
    char label[96];            /* plugin="<name>" */
    struct eai_metric *metrics; /* the families it described (metric_describe), freed with it */
};

/* A plugin's handle on a family it described (ABI 1.4). */
struct eai_metric {
    struct eai_metric *next;
    enum eai_metric_type type;
    int nlabels;
    char name[EAI_METRIC_NAME_MAX + 1];
    char labels[EAI_METRIC_LABELS_MAX][EAI_METRIC_NAME_MAX + 1];
};

static struct eai_host_private *priv(const struct eai_host *h) { return (struct eai_host_private *)h->core; }

/* The instance behind a handle, NULL for the shared host. */
static const struct eai_host_instance *instance_of(const struct eai_host *h)
{
    if (!h || h == &priv(h)->pub || h->size < EAI_HOST_SIZE_1_1 || !h->plugin_name)
        return NULL;
    return (const struct eai_host_instance *)h;
}

static void host_log(const struct eai_host *h, const char *component, enum eai_log_level lvl, const char *fmt, ...)
{
    const struct eai_host_instance *in = instance_of(h);
    char comp[160];
    if (in && (!component || strcmp(component, in->name) == 0))
        snprintf(comp, sizeof(comp), "%s", in->name);
    else if (in)
        snprintf(comp, sizeof(comp), "%s/%s", in->name, component);
    else
        snprintf(comp, sizeof(comp), "%s", component ? component : "plugin");
    va_list ap;
    va_start(ap, fmt);
    eai_logv(comp, lvl, NULL, fmt, ap);
    va_end(ap);
}

/* "plugin <name>: <message>", without repeating a leading "<name>: ". */
static void attribute(struct eai_error *e, const char *name)
{
    if (!e || !name)
        return;
    size_t n = strlen(name);
    const char *m = e->message ? e->message : "";
    if (strncmp(m, "plugin ", 7) == 0 && strncmp(m + 7, name, n) == 0 && m[7 + n] == ':')
        return; /* already attributed */
    if (strncmp(m, name, n) == 0 && m[n] == ':') {
        char *msg = NULL;
        if (asprintf(&msg, "plugin %s", m) >= 0) {
            free(e->message);
            e->message = msg;
        }
        return;
    }
    eai_error_prefix(e, "plugin %s", name);
}

static struct eai_error *host_error_new_h(const struct eai_host *h, enum eai_code code, int errno_cause,
                                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct eai_error *e = eai_error_newv(code, errno_cause, fmt, ap);
    va_end(ap);
    const struct eai_host_instance *in = instance_of(h);
    if (in)
        attribute(e, in->name);
    return e;
}

/* The 1.0 error_new() takes no host, so it cannot tell which plugin calls
 * it.  Each instance handle gets its own error_new from a fixed set of
 * trampolines, one per slot, each knowing its slot's plugin name; past
 * EAI_HOST_SLOTS live instances, errors go unattributed (error_new_h and
 * eai_host_error_set still attribute them). */
#define EAI_HOST_SLOTS 32
static char slot_names[EAI_HOST_SLOTS][65];
static int slot_used[EAI_HOST_SLOTS];
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;

static struct eai_error *slot_error_newv(int slot, enum eai_code code, int errno_cause, const char *fmt, va_list ap)
{
    struct eai_error *e = eai_error_newv(code, errno_cause, fmt, ap);
    pthread_mutex_lock(&slot_lock);
    if (slot_used[slot])
        attribute(e, slot_names[slot]);
    pthread_mutex_unlock(&slot_lock);
    return e;
}

#define EAI_SLOT_FN(n)                                                                           \
    static struct eai_error *slot_error_new_##n(enum eai_code code, int errno_cause, const char *fmt, ...) \
    {                                                                                            \
        va_list ap;                                                                              \
        va_start(ap, fmt);                                                                       \
        struct eai_error *e = slot_error_newv(n, code, errno_cause, fmt, ap);                    \
        va_end(ap);                                                                              \
        return e;                                                                                \
    }
EAI_SLOT_FN(0) EAI_SLOT_FN(1) EAI_SLOT_FN(2) EAI_SLOT_FN(3) EAI_SLOT_FN(4) EAI_SLOT_FN(5) EAI_SLOT_FN(6)
EAI_SLOT_FN(7) EAI_SLOT_FN(8) EAI_SLOT_FN(9) EAI_SLOT_FN(10) EAI_SLOT_FN(11) EAI_SLOT_FN(12) EAI_SLOT_FN(13)
EAI_SLOT_FN(14) EAI_SLOT_FN(15) EAI_SLOT_FN(16) EAI_SLOT_FN(17) EAI_SLOT_FN(18) EAI_SLOT_FN(19) EAI_SLOT_FN(20)
EAI_SLOT_FN(21) EAI_SLOT_FN(22) EAI_SLOT_FN(23) EAI_SLOT_FN(24) EAI_SLOT_FN(25) EAI_SLOT_FN(26) EAI_SLOT_FN(27)
EAI_SLOT_FN(28) EAI_SLOT_FN(29) EAI_SLOT_FN(30) EAI_SLOT_FN(31)
typedef struct eai_error *(*slot_fn)(enum eai_code, int, const char *, ...);
static const slot_fn slot_fns[EAI_HOST_SLOTS] = {
    slot_error_new_0, slot_error_new_1, slot_error_new_2, slot_error_new_3, slot_error_new_4,
    slot_error_new_5, slot_error_new_6, slot_error_new_7, slot_error_new_8, slot_error_new_9,
    slot_error_new_10, slot_error_new_11, slot_error_new_12, slot_error_new_13, slot_error_new_14,
    slot_error_new_15, slot_error_new_16, slot_error_new_17, slot_error_new_18, slot_error_new_19,
    slot_error_new_20, slot_error_new_21, slot_error_new_22, slot_error_new_23, slot_error_new_24,
    slot_error_new_25, slot_error_new_26, slot_error_new_27, slot_error_new_28, slot_error_new_29,
    slot_error_new_30, slot_error_new_31,
};

static int slot_take(const char *name)
{
    int slot = -1;
    pthread_mutex_lock(&slot_lock);
    for (int i = 0; i < EAI_HOST_SLOTS && slot < 0; i++)
        if (!slot_used[i]) {
            slot_used[i] = 1;
            snprintf(slot_names[i], sizeof(slot_names[i]), "%s", name);
            slot = i;
        }
    pthread_mutex_unlock(&slot_lock);
    return slot;
}

static void slot_release(int slot)
{
    if (slot < 0 || slot >= EAI_HOST_SLOTS)
        return;
    pthread_mutex_lock(&slot_lock);
    slot_used[slot] = 0;
    pthread_mutex_unlock(&slot_lock);
}

static struct eai_error *host_error_wrap(const struct eai_host *h, struct eai_error *e, const char *fmt, ...)
{
    if (!e || !fmt)
        return e;
    char ctx[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof(ctx), fmt, ap);
    va_end(ap);
    /* keep the attribution in front: "plugin <name>: <context>: <cause>" */
    const struct eai_host_instance *in = instance_of(h);
    size_t n = in ? strlen(in->name) : 0;
    const char *m = e->message ? e->message : "";
    if (in && strncmp(m, "plugin ", 7) == 0 && strncmp(m + 7, in->name, n) == 0 && m[7 + n] == ':' &&
        m[8 + n] == ' ') {
        char *msg = NULL;
        if (asprintf(&msg, "plugin %s: %s: %s", in->name, ctx, m + 9 + n) >= 0) {
            free(e->message);
            e->message = msg;
        }
        return e;
    }
    eai_error_prefix(e, "%s", ctx);
    return e;
}

static struct eai_error *host_error_new(enum eai_code code, int errno_cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct eai_error *e = eai_error_newv(code, errno_cause, fmt, ap);
    va_end(ap);
    return e;
}

static int host_work_submit(const struct eai_host *h, eai_work_fn fn, eai_work_done_fn done, void *arg)
{
    return eai_work_submit(fn, done, arg) < 0 ? -1 : 0;
}

static int host_http_request(const struct eai_host *h, const struct eai_http_request *req,
                             eai_http_done_fn done, void *arg)
{
    struct eai_http_client *c = eai_host_http_client(h);
    return c ? eai_http_client_request(c, req, done, arg) : -1;
}

/* The instance's plugin="<name>" label in front of the plugin's own. */
static const char *metric_labels(const struct eai_host *h, const char *labels, char *buf, size_t len)
{
    const struct eai_host_instance *in = instance_of(h);
    if (!in)
        return labels;
    if (labels && strstr(labels, "plugin=\""))
        return labels; /* the plugin names it already */
    if (!labels || !*labels)
        return in->label;
    if (snprintf(buf, len, "%s,%s", in->label, labels) >= (int)len)
        return labels;
    return buf;
}

static void host_metric_add(const struct eai_host *h, const char *name, const char *labels, double v)
{
    char buf[512];
    eai_metrics_add(name, metric_labels(h, labels, buf, sizeof(buf)), v);
}

static void host_metric_set(const struct eai_host *h, const char *name, const char *labels, double v)
{
    char buf[512];
    eai_metrics_set(name, metric_labels(h, labels, buf, sizeof(buf)), v);
}

static struct eai_metric *host_metric_describe(const struct eai_host *h, const struct eai_metric_desc *d,
                                               struct eai_error **err)
{
    struct eai_host_instance *in = (struct eai_host_instance *)instance_of(h);
    char why[384];
    if (!in) {
        eai_error_set(err, EAI_E_INTERNAL, "metric_describe: call it with the plugin's own host handle");
        return NULL;
    }
    if (!d || (unsigned)d->kind > EAI_METRIC_KIND_HISTOGRAM) {
        eai_error_set(err, EAI_E_INTERNAL, "plugin %s: metric_describe: no description, or an unknown kind",
                      in->name);
        return NULL;
    }
    enum eai_metric_type type = d->kind == EAI_METRIC_KIND_COUNTER ? EAI_METRIC_COUNTER
                                : d->kind == EAI_METRIC_KIND_GAUGE ? EAI_METRIC_GAUGE
                                                                   : EAI_METRIC_HISTOGRAM;
    if (eai_metrics_name_check(d->name, type, d->labels, why, sizeof why) < 0 ||
        eai_metrics_claim(d->name, type, d->help, d->bounds, d->nbounds, in->name, why, sizeof why) < 0) {
        eai_error_set(err, EAI_E_INTERNAL, "plugin %s: %s (docs/plugins.md, \"Metrics\")", in->name, why);
        return NULL;
    }
    struct eai_metric *m = calloc(1, sizeof(*m));
    if (!m) {
        eai_error_set(err, EAI_E_INTERNAL, "plugin %s: out of memory", in->name);
        return NULL;
    }
    m->type = type;
    snprintf(m->name, sizeof m->name, "%s", d->name);
    for (; d->labels && d->labels[m->nlabels]; m->nlabels++)
        snprintf(m->labels[m->nlabels], sizeof m->labels[0], "%s", d->labels[m->nlabels]);
    m->next = in->metrics;
    in->metrics = m;
    return m;
}

/* name="value",... of a family's labels; -1 when it does not fit (the
 * update is dropped: bounded). */
static int metric_values(const struct eai_metric *m, const char *const *values, char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i < m->nlabels; i++) {
        if (!values || !values[i])
            return -1;
        char *esc = eai_metrics_label_escape(values[i]);
        int n = esc ? snprintf(out + o, len - o, "%s%s=\"%s\"", i ? "," : "", m->labels[i], esc) : -1;
        free(esc);
        if (n < 0 || (size_t)n >= len - o)
            return -1;
        o += (size_t)n;
    }
    return 0;
}

static void host_metric_update(const struct eai_host *h, struct eai_metric *m, const char *const *values, double v)
{
    char own[512], buf[640];
    if (!m || metric_values(m, values, own, sizeof own) < 0)
        return;
    const char *labels = metric_labels(h, own, buf, sizeof buf);
    if (m->type == EAI_METRIC_COUNTER) {
        if (v >= 0)
            eai_metrics_add(m->name, labels, v);
    } else if (m->type == EAI_METRIC_GAUGE) {
        eai_metrics_set(m->name, labels, v);
    } else {
        eai_metrics_observe(m->name, labels, v);
    }
}

static int host_image_rootfs(const struct eai_host *h, const char *image, char *buf, size_t buflen)
{
    return eai_images_resolve(priv(h)->image_dir, image, buf, buflen);
}

static void *host_netns_take(const struct eai_host *h, eai_netns_fn cb, void *arg)
{
    return eai_egress_ns_take(priv(h)->egress, cb, arg);
}

static void host_netns_release(const struct eai_host *h, void *token)
{
    eai_egress_ns_release(priv(h)->egress, token);
}

void eai_host_set_egress(struct eai_host *h, struct eai_egress_host *egress)
{
    if (h)
        priv(h)->egress = egress;
}

struct eai_host *eai_host_new(struct event_base *base, const char *data_dir)
{
    struct eai_host_private *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    if (!realpath(data_dir, p->data_dir))
        snprintf(p->data_dir, sizeof(p->data_dir), "%s", data_dir);
    const char *img = getenv("EAI_IMAGE_DIR");
    if (img && *img)
        snprintf(p->image_dir, sizeof(p->image_dir), "%s", img);
    else
        snprintf(p->image_dir, sizeof(p->image_dir), "%s/images", p->data_dir);
    eai_uuid_v4(p->node_id);
    struct eai_host *h = &p->pub;
    h->size = sizeof(*h);
    h->abi_major = EAI_ABI_MAJOR;
    h->abi_minor = EAI_ABI_MINOR;
    h->base = base;
    h->log = host_log;
    h->error_new = host_error_new;
    h->error_free = eai_error_free;
    h->work_submit = host_work_submit;
    h->http_request = host_http_request;
    h->metric_add = host_metric_add;
    h->metric_set = host_metric_set;
    h->audit_seal = eai_audit_seal;
    h->image_rootfs = host_image_rootfs;
    h->data_dir = p->data_dir;
    h->node_id = p->node_id;
    h->core = p;
    h->plugin_name = NULL;
    h->error_new_h = host_error_new_h;
    h->error_wrap = host_error_wrap;
    h->netns_take = host_netns_take;
    h->netns_release = host_netns_release;
    h->metric_describe = host_metric_describe;
    h->metric_update = host_metric_update;
    return h;
}

struct eai_host *eai_host_instance_new(const struct eai_host *shared, enum eai_plugin_kind kind, const char *name)
{
    if (!shared || !name)
        return NULL;
    struct eai_host_instance *in = calloc(1, sizeof(*in));
    if (!in)
        return NULL;
    in->pub = priv(shared)->pub;
    in->kind = kind;
    snprintf(in->name, sizeof(in->name), "%s", name);
    snprintf(in->label, sizeof(in->label), "plugin=\"%s\"", in->name);
    in->pub.plugin_name = in->name;
    in->slot = slot_take(in->name);
    if (in->slot >= 0)
        in->pub.error_new = slot_fns[in->slot];
    return &in->pub;
}

void eai_host_instance_free(struct eai_host *h)
{
    if (h && instance_of(h)) {
        struct eai_host_instance *in = (struct eai_host_instance *)h;
        while (in->metrics) {
            struct eai_metric *m = in->metrics;
            in->metrics = m->next;
            free(m);
        }
        slot_release(in->slot);
        free(in);
    }
}

int eai_plugin_create(const struct eai_plugin_descriptor *d, const struct eai_host *shared,
                      const json_t *config, void **self, struct eai_host **handle, struct eai_error **err)
{
    *self = NULL;
    *handle = NULL;
    struct eai_host *h = eai_host_instance_new(shared, d->kind, d->name);
    if (!h)
        return eai_error_set(err, EAI_E_INTERNAL, "plugin %s: out of memory", d->name ? d->name : "?");
    struct eai_error *e = NULL;
    void *s = d->create(h, config, &e);
    if (s && !e) {
        *self = s;
        *handle = h;
        return 0;
    }
    /* the host cleans up what a failed create() left */
    if (s)
        d->destroy(s); /* an instance along with an error: fail closed */
    eai_host_instance_free(h);
    if (!e)
        e = eai_error_new(EAI_E_INTERNAL, 0, "create() failed without saying why");
    attribute(e, d->name);
    eai_error_propagate(err, e);
    return -1;
}

void eai_plugin_destroy(const struct eai_plugin_descriptor *d, void *self, struct eai_host *handle)
{
    if (d && self)
        d->destroy(self);
    eai_host_instance_free(handle);
}

void eai_host_set_image_dir(struct eai_host *h, const char *image_dir)
{
    if (h && image_dir)
        snprintf(priv(h)->image_dir, sizeof(priv(h)->image_dir), "%s", image_dir);
}

const char *eai_host_image_dir(const struct eai_host *h) { return priv(h)->image_dir; }

struct eai_http_client *eai_host_http_client(const struct eai_host *h)
{
    struct eai_host_private *p = priv(h);
    if (!p->http && h->base)
        p->http = eai_http_client_new(h->base);
    return p->http;
}

void eai_host_free(struct eai_host *h)
{
    if (!h)
        return;
    struct eai_host_private *p = priv(h);
    if (p->http)
        eai_http_client_free(p->http);
    free(p);
}
