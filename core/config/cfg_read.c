/*
 * The typed readers every configuration section uses (cfg_read.h) and
 * the quantity parsers shared with the app (config_check.h).
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_read.h"
#include "config/config_check.h"
#include "base/errors.h"
#include "base/util.h"

int eai_cfg_set_str(char **dst, const char *v)
{
    char *c = v ? strdup(v) : NULL;
    if (v && !c)
        return -1;
    free(*dst);
    *dst = c;
    return 0;
}

int eai_cfg_fail(struct eai_error **err, const char *file, const char *path, const char *key,
                    const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return eai_error_set(err, EAI_E_VALIDATION_FAILED, "config %s: %s: key '%s': %s",
                         file ? file : "(defaults)", path && *path ? path : "/", key ? key : "", msg);
}

void eai_cfg_child_path(char *out, size_t len, const char *parent, const char *key)
{
    snprintf(out, len, "%s/%s", parent, key);
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
int eai_cfg_check_keys(const char *file, const char *path, const json_t *obj,
                      const char *const *known, struct eai_error **err)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        int ok = 0;
        for (int i = 0; known[i]; i++)
            if (strcmp(known[i], k) == 0)
                ok = 1;
        if (!ok) {
            return eai_cfg_fail(err, file, path, k, "unknown key");
        }
    }
    return 0;
}

int eai_cfg_need_object(const char *file, const char *path, const char *key, const json_t *v,
                       struct eai_error **err)
{
    if (!json_is_object(v)) {
        return eai_cfg_fail(err, file, path, key, "expected a mapping");
    }
    return 0;
}

int eai_cfg_get_string(const char *file, const char *path, const json_t *obj, const char *key,
                      char **dst, struct eai_error **err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (json_is_null(v)) {
        free(*dst);
        *dst = NULL;
        return 0;
    }
    if (!json_is_string(v)) {
        return eai_cfg_fail(err, file, path, key, "expected a string");
    }
    if (eai_cfg_set_str(dst, json_string_value(v)) < 0) {
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    }
    return 0;
}

int eai_cfg_get_int(const char *file, const char *path, const json_t *obj, const char *key,
                   int64_t min, int64_t max, int64_t *dst, struct eai_error **err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_integer(v)) {
        return eai_cfg_fail(err, file, path, key, "expected an integer");
    }
    int64_t x = json_integer_value(v);
    if (x < min || x > max) {
        return eai_cfg_fail(err, file, path, key, "out of range [%lld, %lld]",
                        (long long)min, (long long)max);
    }
    *dst = x;
    return 0;
}

int eai_cfg_get_int32(const char *file, const char *path, const json_t *obj, const char *key,
                     int min, int max, int *dst, struct eai_error **err)
{
    int64_t v = *dst;
    if (eai_cfg_get_int(file, path, obj, key, min, max, &v, err) < 0)
        return -1;
    *dst = (int)v;
    return 0;
}

int eai_cfg_get_size(const char *file, const char *path, const json_t *obj, const char *key,
                    int64_t min, int64_t max, int64_t *dst, struct eai_error **err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    int64_t x;
    if (eai_cfg_quantity_bytes(v, &x) < 0) {
        return eai_cfg_fail(err, file, path, key, "expected a size (bytes or a quantity like 10Mi)");
    }
    if (x < min || x > max) {
        return eai_cfg_fail(err, file, path, key, "out of range [%lld, %lld]",
                        (long long)min, (long long)max);
    }
    *dst = x;
    return 0;
}

