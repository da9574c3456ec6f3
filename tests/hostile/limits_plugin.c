/*
 * eai-isolation-limits.so: a test double for tests/hostile/test_limits.py.
 * Ready, with input files, it publishes in its probe the limits given in
 * its configuration (every kind a backend can publish: path, segment,
 * input bytes, file count, env name length, portable env names) so the
 * test walks each through HTTP on both sides of its edge.  Its start()
 * refuses with the limit it would have enforced, so a request admitted
 * past an edge would show as `sandbox_failed` (what admission prevents).
 * Never install it.
 */
#include <stdlib.h>
#include <string.h>
#include <eai/isolation.h>

struct lim {
    const struct eai_host *host;
    int64_t path, name, input, files, env_name, flags;
};

static int64_t num(const json_t *c, const char *k)
{
    const json_t *v = json_object_get(c, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static void *lim_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    struct lim *l = calloc(1, sizeof *l);
    if (!l) {
        eai_host_error_set(host, err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    l->host = host;
    l->path = num(config, "max_path_bytes");
    l->name = num(config, "max_name_bytes");
    l->input = num(config, "max_input_bytes");
    l->files = num(config, "max_files");
    l->env_name = num(config, "max_env_name_bytes");
    l->flags = json_is_true(json_object_get(config, "env_names_portable")) ? EAI_ISO_LIMIT_ENV_NAMES_PORTABLE : 0;
    return l;
}

static void lim_destroy(void *self) { free(self); }

static void lim_probe(void *self, struct eai_iso_probe *out)
{
    struct lim *l = self;
    out->ready = 1;
    out->caps = EAI_ISO_CAP_FILES;
    strcpy(out->version, "limits 1 (test double: publishes limits, runs nothing)");
    out->max_path_bytes = l->path;
    out->max_name_bytes = l->name;
    out->max_input_bytes = l->input;
    out->max_files = l->files;
    out->max_env_name_bytes = l->env_name;
    out->limit_flags = l->flags;
}

static int lim_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb, void *cb_arg,
                     void **handle, struct eai_error **err)
{
    struct lim *l = self;
    if (l->files > 0 && (int64_t)job->nfiles > l->files)
        return eai_host_error_set(l->host, err, EAI_E_SANDBOX_FAILED, "limits double: too many files (late)");
    return eai_host_error_set(l->host, err, EAI_E_SANDBOX_FAILED, "limits double: runs nothing");
}

static void lim_cancel(void *self, void *handle) {}

static const struct eai_isolation_ops lim_ops = {
    .size = sizeof(struct eai_isolation_ops),
    .probe = lim_probe,
    .start = lim_start,
    .cancel = lim_cancel,
};

static const struct eai_config_key lim_keys[] = {
    {"max_path_bytes", EAI_CFG_INT, 0, "0", "published max_path_bytes"},
    {"max_name_bytes", EAI_CFG_INT, 0, "0", "published max_name_bytes"},
    {"max_input_bytes", EAI_CFG_INT, 0, "0", "published max_input_bytes"},
    {"max_files", EAI_CFG_INT, 0, "0", "published max_files"},
    {"max_env_name_bytes", EAI_CFG_INT, 0, "0", "published max_env_name_bytes"},
    {"env_names_portable", EAI_CFG_BOOL, 0, "false", "publish EAI_ISO_LIMIT_ENV_NAMES_PORTABLE"},
    {NULL, 0, 0, NULL, NULL},
};

static const struct eai_plugin_descriptor lim_desc = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "limits",
    .kind = EAI_KIND_ISOLATION,
    .version = "1",
    .create = lim_create,
    .destroy = lim_destroy,
    .ops = &lim_ops,
    .config_keys = lim_keys,
};

EAI_PLUGIN_DECLARE(lim_desc)
