/*
 * eai-isolation-example: the skeleton of a vendor isolation backend,
 * written against include/eai alone (see docs/plugins.md).
 *
 * It is deliberately a backend WITHOUT a runtime: probe() says "not ready"
 * and start() refuses, so eaid fails closed with 503 sandbox_unavailable if
 * a profile points at it.  Replace the marked parts with calls to your
 * runtime; keep every op non-blocking (children via pidfd on host->base,
 * files via host->work_submit, HTTP via host->http_request).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <eai/isolation.h>

struct example {
    const struct eai_host *host;
    char *endpoint;            /* from the plugin's config subtree */
};

struct example_job {
    struct example *ex;
    const struct eai_iso_callbacks *cb;
    void *cb_arg;
};

static void *example_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    if (host->size < sizeof(struct eai_host)) {  /* an older host lacks fields we use */
        *err = NULL;
        return NULL;
    }
    struct example *ex = calloc(1, sizeof(*ex));
    if (!ex) {
        eai_host_error_set(host, err, EAI_E_INTERNAL, "example: out of memory");
        return NULL;
    }
    ex->host = host;
    const char *ep = json_string_value(json_object_get(config, "endpoint"));
    ex->endpoint = strdup(ep ? ep : "");
    host->log(host, "example", EAI_LOG_INFO, "example backend created (endpoint '%s')", ex->endpoint);
    return ex;
}

static void example_destroy(void *self)
{
    struct example *ex = self;
    if (!ex)
        return;
    free(ex->endpoint);
    free(ex);
}

static void example_probe(void *self, struct eai_iso_probe *out)
{
    /* A real backend reports the result of a check made at create() time or
     * by a background probe; never block here. */
    out->ready = 0;
    out->caps = 0;
    snprintf(out->version, sizeof(out->version), "example 0.1");
    snprintf(out->reason, sizeof(out->reason), "example backend has no runtime");
}

static int example_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb,
                         void *cb_arg, void **handle, struct eai_error **err)
{
    struct example *ex = self;
    /* A real backend: create the sandbox for job->argv with job's limits,
     * return a handle, then call cb->on_started, cb->on_output for each
     * chunk and cb->on_exit exactly once, all on the loop thread. */
    return eai_host_error_set(ex->host, err, EAI_E_SANDBOX_UNAVAILABLE, "example backend cannot run %s", job->id);
}

static void example_cancel(void *self, void *handle)
{
    /* Stop the sandbox behind handle; on_exit(EAI_OUT_CANCELLED) follows. */
}

static const struct eai_isolation_ops example_ops = {
    .size = sizeof(struct eai_isolation_ops),
    .probe = example_probe,
    .start = example_start,
    .cancel = example_cancel,
    .recover = NULL,           /* optional: reattach after an eaid restart */
    .sweep = NULL,             /* optional: remove leftovers at start-up */
};

static const struct eai_config_key example_keys[] = {
    {"endpoint", EAI_CFG_STRING, 0, "", "where the runtime listens"},
    {NULL, 0, 0, NULL, NULL},
};

static const struct eai_plugin_descriptor example_descriptor = {
    .abi_major = EAI_ABI_MAJOR,
    .abi_minor = EAI_ABI_MINOR,
    .struct_size = sizeof(struct eai_plugin_descriptor),
    .build = EAI_BUILD_FINGERPRINT, /* ABI 1.1: checked at load */
    .name = "example",
    .kind = EAI_KIND_ISOLATION,
    .version = "0.1.0",
    .create = example_create,
    .destroy = example_destroy,
    .ops = &example_ops,
    .config_keys = example_keys,
};

EAI_PLUGIN_EXPORT const struct eai_plugin_descriptor *eai_plugin_descriptor(void);
EAI_PLUGIN_EXPORT const struct eai_plugin_descriptor *eai_plugin_descriptor(void)
{
    return &example_descriptor;
}
