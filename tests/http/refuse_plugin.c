/*
 * eai-isolation-refuse.so: a test double for tests/http.  It reports
 * itself ready (so executions are accepted and recorded) and refuses every
 * start, so nothing ever runs; the scheduler then ends the execution in
 * `error`.  It lets the HTTP test check idempotency and tenant scoping on
 * machines without a sandbox runtime.  Never install it.
 */
#include <string.h>
#include <eai/isolation.h>

static int refuse_instances;

static void *refuse_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    refuse_instances++;
    return (void *)host;
}

static void refuse_destroy(void *self) { refuse_instances--; }

static void refuse_probe(void *self, struct eai_iso_probe *out)
{
    out->ready = 1;
    out->caps = 0;
    strcpy(out->version, "refuse 1 (test double: runs nothing)");
    out->reason[0] = '\0';
}

static int refuse_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb,
                        void *cb_arg, void **handle, struct eai_error **err)
{
    const struct eai_host *host = self;
    return eai_host_error_set(host, err, EAI_E_SANDBOX_FAILED, "test double: refuses to run anything");
}

static void refuse_cancel(void *self, void *handle) {}

static const struct eai_isolation_ops refuse_ops = {
    .size = sizeof(struct eai_isolation_ops),
    .probe = refuse_probe,
    .start = refuse_start,
    .cancel = refuse_cancel,
};

static const struct eai_config_key refuse_keys[] = {{NULL, 0, 0, NULL, NULL}};

static const struct eai_plugin_descriptor refuse_desc = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "refuse",
    .kind = EAI_KIND_ISOLATION,
    .version = "1",
    .create = refuse_create,
    .destroy = refuse_destroy,
    .ops = &refuse_ops,
    .config_keys = refuse_keys,
};

EAI_PLUGIN_DECLARE(refuse_desc)
