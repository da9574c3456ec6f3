#include <limits.h>
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

struct eai_host_private {
    struct eai_host pub;
    char data_dir[PATH_MAX];
    char image_dir[PATH_MAX];
    char node_id[37];
    struct eai_http_client *http;
};

static struct eai_host_private *priv(const struct eai_host *h) { return (struct eai_host_private *)h->core; }

static void host_log(const struct eai_host *h, const char *component, enum eai_log_level lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    eai_logv(component, lvl, NULL, fmt, ap);
    va_end(ap);
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

static void host_metric_add(const struct eai_host *h, const char *name, const char *labels, double v)
{
    eai_metrics_add(name, labels, v);
}

static void host_metric_set(const struct eai_host *h, const char *name, const char *labels, double v)
{
    eai_metrics_set(name, labels, v);
}

static int host_image_rootfs(const struct eai_host *h, const char *image, char *buf, size_t buflen)
{
    return eai_images_resolve(priv(h)->image_dir, image, buf, buflen);
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
    return h;
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
