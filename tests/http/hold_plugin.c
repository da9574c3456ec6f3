/*
 * eai-isolation-hold.so: a test double for tests/http.  Ready; start()
 * accepts the job and holds it "running" until it is cancelled (or eaid
 * stops), so with max_concurrent 1 every later execution stays queued.  It
 * lets the HTTP test drive the per-tenant queue bound without a sandbox
 * runtime.  Never install it.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <event2/event.h>
#include <eai/isolation.h>

struct held {
    const struct eai_iso_callbacks *cb;
    void *arg;
};

static void *hold_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    return (void *)host;
}

static void hold_destroy(void *self) {}

static void hold_probe(void *self, struct eai_iso_probe *out)
{
    out->ready = 1;
    out->caps = 0;
    strcpy(out->version, "hold 1 (test double: runs until cancelled)");
    out->reason[0] = '\0';
}

static void started(evutil_socket_t fd, short what, void *arg)
{
    struct held *h = arg;
    h->cb->on_started(h->arg);
}

static int hold_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb,
                      void *cb_arg, void **handle, struct eai_error **err)
{
    const struct eai_host *host = self;
    struct held *h = calloc(1, sizeof *h);
    if (!h) {
        *err = host->error_new(EAI_E_INTERNAL, 0, "out of memory");
        return -1;
    }
    h->cb = cb;
    h->arg = cb_arg;
    struct timeval now = {0, 0};
    event_base_once(host->base, -1, EV_TIMEOUT, started, h, &now);
    *handle = h;
    return 0;
}

static void ended(evutil_socket_t fd, short what, void *arg)
{
    struct held *h = arg;
    struct eai_iso_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    res.outcome = EAI_OUT_CANCELLED;
    res.exit_code = -1;
    h->cb->on_exit(h->arg, &res);
    free(h);
}

static void hold_cancel(void *self, void *handle)
{
    const struct eai_host *host = self;
    struct timeval now = {0, 0};
    event_base_once(host->base, -1, EV_TIMEOUT, ended, handle, &now);
}

static const struct eai_isolation_ops hold_ops = {
    .size = sizeof(struct eai_isolation_ops),
    .probe = hold_probe,
    .start = hold_start,
    .cancel = hold_cancel,
};

static const struct eai_config_key hold_keys[] = {{NULL, 0, 0, NULL, NULL}};

static const struct eai_plugin_descriptor hold_desc = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "hold",
    .kind = EAI_KIND_ISOLATION,
    .version = "1",
    .create = hold_create,
    .destroy = hold_destroy,
    .ops = &hold_ops,
    .config_keys = hold_keys,
};

EAI_PLUGIN_DECLARE(hold_desc)
