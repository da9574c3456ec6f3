#include <errno.h>
#include <string.h>

#include "app.h"
#include "base/errors.h"
#include "config/config_check.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "plugin/open.h"

const struct eai_plugin_descriptor *eai_plugin_check_conf(const char *plugin_dir, enum eai_plugin_kind kind,
                                                           const char *name, const json_t *conf,
                                                           const char *file, const char *path,
                                                           const char *key, struct eai_error **err)
{
    const char *f = file ? file : "(defaults)";
    struct eai_error *e = NULL;
    const struct eai_plugin_descriptor *d = eai_plugin_load(plugin_dir, kind, name, &e);
    if (!d) {
        eai_error_prefix(e, "config %s: %s: key '%s': %s backend '%s' cannot be loaded (no built-in of that name)",
                         f, path, key, eai_kind_name(kind), name ? name : "(null)");
        eai_error_propagate(err, e);
        return NULL;
    }
    json_t *empty = NULL;
    if (!conf && !(conf = empty = json_object())) {
        eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    int rc = eai_cfg_check_plugin(d->config_keys, conf, file, path, &e);
    json_decref(empty);
    if (rc < 0) {
        eai_error_prefix(e, "%s backend '%s'", eai_kind_name(kind), name);
        eai_error_propagate(err, e);
        return NULL;
    }
    return d;
}

int eai_plugin_open(const char *plugin_dir, const struct eai_host *host, enum eai_plugin_kind kind,
                    const char *name, const json_t *conf, const char *file, const char *path,
                    const char *key, struct eai_plugin_inst *out, struct eai_error **err)
{
    memset(out, 0, sizeof(*out));
    const char *f = file ? file : "(defaults)";
    struct eai_error *e = NULL;
    const struct eai_plugin_descriptor *d = eai_plugin_check_conf(plugin_dir, kind, name, conf, file, path, key, err);
    if (!d)
        return -1;
    json_t *empty = NULL;
    if (!conf && !(conf = empty = json_object()))
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    void *self = NULL;
    struct eai_host *handle = NULL;
    int rc = eai_plugin_create(d, host, conf, &self, &handle, &e);
    json_decref(empty);
    if (rc < 0) {
        eai_error_prefix(e, "config %s: %s: key '%s': %s backend '%s'", f, path, key, eai_kind_name(kind), name);
        eai_error_propagate(err, e);
        return -1;
    }
    out->desc = d;
    out->self = self;
    out->host = handle;
    return 0;
}

void eai_plugin_close(struct eai_plugin_inst *inst)
{
    if (!inst)
        return;
    eai_plugin_destroy(inst->desc, inst->self, inst->host);
    inst->desc = NULL;
    inst->self = NULL;
    inst->host = NULL;
}
