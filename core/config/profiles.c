/*
 * Profiles (DESIGN.md section 6, docs/configuration.md): the built-in
 * pair, the checks of a configured profile, completion with the generic
 * defaults, and the rule that a default never exceeds its maximum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_read.h"
#include "config/config.h"
#include "config/config_check.h"
#include "base/errors.h"

/* The two default profiles (DESIGN.md section 6). */
const char *const eai_cfg_default_profiles_json =
    "{"
    "\"gvisor\": {\"backend\": \"gvisor\", \"runtime_class\": \"gvisor\","
    "  \"defaults\": {\"cpu\": \"1\", \"memory\": \"512Mi\", \"timeout_s\": 30, \"pids\": 128,"
    "                \"output_bytes\": \"1Mi\", \"disk\": \"64Mi\"},"
    "  \"max\": {\"cpu\": \"2\", \"memory\": \"2Gi\", \"timeout_s\": 300, \"pids\": 512,"
    "           \"output_bytes\": \"8Mi\", \"disk\": \"1Gi\"},"
    "  \"egress_allow\": []},"
    "\"gvisor-small\": {\"backend\": \"gvisor\", \"runtime_class\": \"gvisor\","
    "  \"defaults\": {\"cpu\": \"500m\", \"memory\": \"256Mi\", \"timeout_s\": 30, \"pids\": 128,"
    "                \"output_bytes\": \"1Mi\", \"disk\": \"64Mi\"},"
    "  \"max\": {\"cpu\": \"1\", \"memory\": \"512Mi\", \"timeout_s\": 60, \"pids\": 256,"
    "           \"output_bytes\": \"1Mi\", \"disk\": \"256Mi\"},"
    "  \"egress_allow\": []}"
    "}";

/* Values of one limits block (defaults or max): every key optional. */
static int check_limits(const char *file, const char *path, const json_t *obj, struct eai_error **err)
{
    static const char *const known[] = {"cpu", "memory", "timeout_s", "pids", "output_bytes", "disk", NULL};
    if (eai_cfg_check_keys(file, path, obj, known, err) < 0)
        return -1;
    int64_t x;
    json_t *v;
    if ((v = json_object_get(obj, "cpu")) && (eai_cfg_quantity_cpu(v, &x) < 0 || x <= 0)) {
        return eai_cfg_fail(err, file, path, "cpu", "expected a CPU quantity like 500m, 1 or 1.5");
    }
    const char *sizes[] = {"memory", "output_bytes", "disk"};
    for (size_t i = 0; i < 3; i++)
        if ((v = json_object_get(obj, sizes[i])) && (eai_cfg_quantity_bytes(v, &x) < 0 || x <= 0)) {
            return eai_cfg_fail(err, file, path, sizes[i], "expected a size like 256Mi or bytes");
        }
    const char *ints[] = {"timeout_s", "pids"};
    for (size_t i = 0; i < 2; i++)
        if ((v = json_object_get(obj, ints[i])) && (!json_is_integer(v) || json_integer_value(v) <= 0)) {
            return eai_cfg_fail(err, file, path, ints[i], "expected a positive integer");
        }
    return 0;
}

static int check_profile(const char *file, const char *path, const json_t *p, struct eai_error **err)
{
    static const char *const known[] = {"backend", "runtime_class", "defaults", "max", "egress_allow", NULL};
    if (eai_cfg_check_keys(file, path, p, known, err) < 0)
        return -1;
    json_t *v = json_object_get(p, "backend");
    if (!v) {
        return eai_cfg_fail(err, file, path, "backend", "missing required key");
    }
    if (!json_is_string(v) || !*json_string_value(v)) {
        return eai_cfg_fail(err, file, path, "backend", "expected a plugin name");
    }
    if ((v = json_object_get(p, "runtime_class")) && !json_is_string(v)) {
        return eai_cfg_fail(err, file, path, "runtime_class", "expected a string");
    }
    char sub[512];
    const char *blocks[] = {"defaults", "max"};
    for (size_t i = 0; i < 2; i++) {
        if (!(v = json_object_get(p, blocks[i])))
            continue;
        if (eai_cfg_need_object(file, path, blocks[i], v, err) < 0)
            return -1;
        eai_cfg_child_path(sub, sizeof(sub), path, blocks[i]);
        if (check_limits(file, sub, v, err) < 0)
            return -1;
    }
    if ((v = json_object_get(p, "egress_allow"))) {
        if (!json_is_array(v)) {
            return eai_cfg_fail(err, file, path, "egress_allow", "expected a list of \"host:port\"");
        }
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            const char *s = json_string_value(e);
            const char *colon = s ? strrchr(s, ':') : NULL;
            if (!s || !colon || colon == s || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1)) {
                return eai_cfg_fail(err, file, path, "egress_allow",
                                "entry %zu: expected \"host:port\"", i);
            }
        }
    }
    return 0;
}

/* Merge a profile object with the generic defaults (the `gvisor` profile
 * of the built-in table) so every limit is present. */
static json_t *profile_complete(const json_t *p)
{
    json_error_t je;
    json_t *base = json_loads(eai_cfg_default_profiles_json, 0, &je);
    json_t *gv = json_object_get(base, "gvisor");
    json_t *out = json_deep_copy(p);
    if (!base || !gv || !out) {
        json_decref(base);
        json_decref(out);
        return NULL;
    }
    const char *blocks[] = {"defaults", "max"};
    for (size_t i = 0; i < 2; i++) {
        json_t *have = json_object_get(out, blocks[i]);
        json_t *merged = json_deep_copy(json_object_get(gv, blocks[i]));
        if (!merged)
            goto fail;
        if (have)
            json_object_update(merged, have);
        json_object_set_new(out, blocks[i], merged);
    }
    /* a default the profile does not set never exceeds its maximum */
    json_t *given = json_object_get(p, "defaults");
    json_t *defs = json_object_get(out, "defaults"), *maxs = json_object_get(out, "max");
    const char *keys[] = {"cpu", "memory", "timeout_s", "pids", "output_bytes", "disk"};
    for (size_t i = 0; i < 6; i++) {
        if (json_object_get(given, keys[i]))
            continue;
        int64_t d, m;
        json_t *dv = json_object_get(defs, keys[i]), *mv = json_object_get(maxs, keys[i]);
        int ok = i == 0 ? (eai_cfg_quantity_cpu(dv, &d) == 0 && eai_cfg_quantity_cpu(mv, &m) == 0)
                        : (eai_cfg_quantity_bytes(dv, &d) == 0 && eai_cfg_quantity_bytes(mv, &m) == 0);
        if (ok && d > m)
            json_object_set(defs, keys[i], mv);
    }
    if (!json_object_get(out, "egress_allow"))
        json_object_set_new(out, "egress_allow", json_array());
    if (!json_object_get(out, "runtime_class"))
        json_object_set(out, "runtime_class", json_object_get(out, "backend"));
    json_decref(base);
    return out;
fail:
    json_decref(base);
    json_decref(out);
    return NULL;
}

int eai_cfg_apply_profiles(const char *file, struct eai_config *c, const json_t *profiles,
                          struct eai_error **err)
{
    if (eai_cfg_need_object(file, "", "profiles", profiles, err) < 0)
        return -1;
    if (json_object_size(profiles) == 0) {
        return eai_cfg_fail(err, file, "/profiles", "", "at least one profile is needed");
    }
    json_t *out = json_object();
    if (!out)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    const char *name;
    json_t *p;
    json_object_foreach((json_t *)profiles, name, p) {
        char path[512];
        eai_cfg_child_path(path, sizeof(path), "/profiles", name);
        if (strlen(name) == 0 || strlen(name) > 63 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != strlen(name)) {
            json_decref(out);
            return eai_cfg_fail(err, file, "/profiles", name, "profile names use [a-z0-9._-], 1..63 characters");
        }
        if (eai_cfg_need_object(file, "/profiles", name, p, err) < 0 || check_profile(file, path, p, err) < 0) {
            json_decref(out);
            return -1;
        }
        json_t *full = profile_complete(p);
        if (!full) {
            json_decref(out);
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        }
        json_object_set_new(out, name, full);
    }
    json_decref(c->profiles);
    c->profiles = out;
    return 0;
}

/* Every profile: defaults <= maxima. */
int eai_cfg_check_profile_bounds(const struct eai_config *c, struct eai_error **err)
{
    const char *name;
    json_t *p;
    json_object_foreach(c->profiles, name, p) {
        struct eai_profile_limits d, m;
        if (eai_cfg_profile_limits(p, &d, &m) < 0) {
            char path[512];
            eai_cfg_child_path(path, sizeof(path), "/profiles", name);
            return eai_cfg_fail(err, c->source, path, "defaults", "malformed limits");
        }
        const char *bad = NULL;
        if (d.cpu_millis > m.cpu_millis)
            bad = "cpu";
        else if (d.memory > m.memory)
            bad = "memory";
        else if (d.timeout_s > m.timeout_s)
            bad = "timeout_s";
        else if (d.pids > m.pids)
            bad = "pids";
        else if (d.output_bytes > m.output_bytes)
            bad = "output_bytes";
        else if (d.disk > m.disk)
            bad = "disk";
        if (bad) {
            char path[512];
            snprintf(path, sizeof(path), "/profiles/%s/defaults", name);
            return eai_cfg_fail(err, c->source, path, bad, "default is above the profile's maximum");
        }
    }
    return 0;
}

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

