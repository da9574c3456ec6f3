/*
 * A plugin's own config subtree checked against the key table it
 * declares (struct eai_config_key in include/eai/plugin.h).
 */
#include <string.h>

#include "config/cfg_read.h"
#include "config/config_check.h"

static const char *cfg_type_name(enum eai_config_type t)
{
    switch (t) {
    case EAI_CFG_STRING: return "a string";
    case EAI_CFG_INT: return "an integer";
    case EAI_CFG_BOOL: return "a boolean";
    case EAI_CFG_LIST: return "a list";
    case EAI_CFG_MAP: return "a mapping";
    default: return "?";
    }
}

int eai_cfg_check_plugin(const struct eai_config_key *keys, const json_t *conf, const char *file,
                         const char *path, struct eai_error **err)
{
    if (!json_is_object(conf)) {
        return eai_cfg_fail(err, file, path, "", "expected a mapping");
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)conf, k, v) {
        const struct eai_config_key *ck = NULL;
        for (const struct eai_config_key *p = keys; p && p->name; p++)
            if (strcmp(p->name, k) == 0)
                ck = p;
        if (!ck) {
            return eai_cfg_fail(err, file, path, k, "unknown key");
        }
        int ok;
        switch (ck->type) {
        case EAI_CFG_STRING: ok = json_is_string(v); break;
        case EAI_CFG_INT: ok = json_is_integer(v); break;
        case EAI_CFG_BOOL: ok = json_is_boolean(v); break;
        case EAI_CFG_LIST: ok = json_is_array(v); break;
        case EAI_CFG_MAP: ok = json_is_object(v); break;
        default: ok = 0;
        }
        if (!ok) {
            return eai_cfg_fail(err, file, path, k, "expected %s", cfg_type_name(ck->type));
        }
    }
    for (const struct eai_config_key *p = keys; p && p->name; p++)
        if (p->required && !json_object_get(conf, p->name)) {
            return eai_cfg_fail(err, file, path, p->name, "missing required key");
        }
    return 0;
}

int eai_cfg_plugin_has_key(const struct eai_config_key *keys, const char *name)
{
    for (const struct eai_config_key *p = keys; p && p->name; p++)
        if (strcmp(p->name, name) == 0)
            return 1;
    return 0;
}
