/* Config values shared with the daemon, the CLI and the tests: quantities,
 * profile limits, listen addresses, plugin config subtrees checked against
 * their key tables (config_check.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_check.h"
#include "base/errors.h"
#include "base/util.h"
#include "base/log.h"
#include <stdarg.h>

struct eai_error *eai_cfg_err(const char *file, const char *path, const char *key, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return eai_error_new(EAI_E_VALIDATION_FAILED, 0, "config %s: %s: key '%s': %s",
                         file ? file : "(defaults)", path && *path ? path : "/", key ? key : "", msg);
}

int eai_cfg_quantity_bytes(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return -1;
        *out = json_integer_value(v);
        return 0;
    }
    if (json_is_string(v))
        return eai_parse_bytes(json_string_value(v), out) == 0 && *out >= 0 ? 0 : -1;
    return -1;
}

int eai_cfg_quantity_cpu(const json_t *v, int64_t *out)
{
    char buf[64];
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0 || json_integer_value(v) > INT64_MAX / 1000)
            return -1;
        *out = json_integer_value(v) * 1000;
        return 0;
    }
    if (json_is_real(v)) {
        snprintf(buf, sizeof(buf), "%.3f", json_real_value(v));
        /* drop trailing zeros of the fraction so "0.500" parses */
        return eai_parse_cpu_millis(buf, out);
    }
    if (json_is_string(v))
        return eai_parse_cpu_millis(json_string_value(v), out);
    return -1;
}

/* Unknown keys of obj against a NULL-terminated list. */
int eai_cfg_profile_limits(const json_t *p, struct eai_profile_limits *def, struct eai_profile_limits *max)
{
    struct eai_profile_limits *outs[2] = {def, max};
    const char *blocks[2] = {"defaults", "max"};
    for (int i = 0; i < 2; i++) {
        json_t *b = json_object_get(p, blocks[i]);
        struct eai_profile_limits *o = outs[i];
        if (!json_is_object(b) ||
            eai_cfg_quantity_cpu(json_object_get(b, "cpu"), &o->cpu_millis) < 0 ||
            eai_cfg_quantity_bytes(json_object_get(b, "memory"), &o->memory) < 0 ||
            eai_cfg_quantity_bytes(json_object_get(b, "output_bytes"), &o->output_bytes) < 0 ||
            eai_cfg_quantity_bytes(json_object_get(b, "disk"), &o->disk) < 0 ||
            !json_is_integer(json_object_get(b, "timeout_s")) ||
            !json_is_integer(json_object_get(b, "pids")))
            return -1;
        o->timeout_s = json_integer_value(json_object_get(b, "timeout_s"));
        o->pids = json_integer_value(json_object_get(b, "pids"));
    }
    return 0;
}

int eai_cfg_parse_listen(const char *v, char *host, size_t hostlen, int *port)
{
    if (!v || !*v)
        return -1;
    const char *colon;
    const char *h = v;
    size_t hl;
    if (v[0] == '[') {
        const char *close = strchr(v, ']');
        if (!close || close[1] != ':')
            return -1;
        h = v + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(v, ':');
        if (!colon)
            return -1;
        hl = (size_t)(colon - v);
    }
    if (hl == 0 || hl >= hostlen)
        return -1;
    const char *ps = colon + 1;
    if (!*ps || strlen(ps) > 5 || strspn(ps, "0123456789") != strlen(ps))
        return -1;
    long p = strtol(ps, NULL, 10);
    if (p < 0 || p > 65535)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return 0;
}

/* Map the YAML/JSON tree onto c. */
int eai_cfg_is_postgres_url(const char *url)
{
    return url && (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0);
}

/* Derived values: absolute paths, the storage backend, plugin dir. */
/* ------------------------------------------------------------ plugin subtrees */

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
        eai_error_propagate(err, eai_cfg_err(file, path, "", "expected a mapping"));
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)conf, k, v) {
        const struct eai_config_key *ck = NULL;
        for (const struct eai_config_key *p = keys; p && p->name; p++)
            if (strcmp(p->name, k) == 0)
                ck = p;
        if (!ck) {
            eai_error_propagate(err, eai_cfg_err(file, path, k, "unknown key"));
            return -1;
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
            eai_error_propagate(err, eai_cfg_err(file, path, k, "expected %s", cfg_type_name(ck->type)));
            return -1;
        }
    }
    for (const struct eai_config_key *p = keys; p && p->name; p++)
        if (p->required && !json_object_get(conf, p->name)) {
            eai_error_propagate(err, eai_cfg_err(file, path, p->name, "missing required key"));
            return -1;
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

