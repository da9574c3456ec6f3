/*
 * Configuration: built-in defaults, then the YAML file, then the
 * environment (docs/configuration.md).  The YAML tree is checked key by
 * key: an unknown key, a wrong type or a missing required key stops the
 * load with a message naming the file, the JSON-pointer path and the key.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/config_check.h"
#include "base/errors.h"
#include "plugin/loader.h"
#include "base/log.h"
#include "base/util.h"
#include "schema/yamljson.h"

#define EAI_CFG_MAX_FILE (1024 * 1024)

/* ------------------------------------------------------------ defaults */

/* The two default profiles (DESIGN.md section 6). */
static const char *const eai_default_profiles_json =
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

static int set_str(char **dst, const char *v)
{
    char *c = v ? strdup(v) : NULL;
    if (v && !c)
        return -1;
    free(*dst);
    *dst = c;
    return 0;
}

static struct eai_config *eai_config_defaults(void)
{
    struct eai_config *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->max_body_bytes = 10u * 1024 * 1024;
    c->max_header_bytes = 16u * 1024;
    c->max_connections = 1024;
    c->request_timeout_s = 75;
    c->workers = 8;
    c->max_concurrent = 8;
    c->max_per_tenant = 4;
    c->max_queued_per_tenant = 1000;
    c->lease_ms = 30000;
    c->collect_max_files = 64;
    c->collect_max_file_bytes = 10LL * 1024 * 1024;
    c->collect_max_total_bytes = 32LL * 1024 * 1024;
    c->files_max_total_bytes = 8LL * 1024 * 1024;
    json_error_t je;
    c->profiles = json_loads(eai_default_profiles_json, 0, &je);
    c->isolation = json_pack("{s:{}}", "gvisor");
    if (set_str(&c->listen, "127.0.0.1:8080") < 0 || set_str(&c->data_dir, "./var") < 0 ||
        set_str(&c->log_level, "info") < 0 || set_str(&c->storage_backend, "sqlite") < 0 ||
        set_str(&c->namespace_prefix, "eai-") < 0 || set_str(&c->source, "(defaults)") < 0 ||
        !c->profiles || !c->isolation) {
        eai_config_free(c);
        return NULL;
    }
    return c;
}

void eai_config_free(struct eai_config *c)
{
    if (!c)
        return;
    free(c->listen);
    free(c->data_dir);
    free(c->image_dir);
    free(c->plugin_dir);
    free(c->log_level);
    free(c->storage_backend);
    free(c->database_url);
    free(c->pepper_file);
    free(c->finops_url);
    free(c->audit_url);
    free(c->otlp_endpoint);
    free(c->audit_backend);
    free(c->finops_backend);
    free(c->telemetry_backend);
    json_decref(c->audit_conf);
    json_decref(c->finops_conf);
    json_decref(c->telemetry_conf);
    json_decref(c->isolation);
    free(c->namespace_prefix);
    free(c->runsc);
    json_decref(c->profiles);
    free(c->source);
    free(c);
}

/* ------------------------------------------------------------ checking */

/* validation_failed "config FILE: PATH: key 'KEY': MSG" into *err; returns -1. */
static int cfg_fail(struct eai_error **err, const char *file, const char *path, const char *key,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int cfg_fail(struct eai_error **err, const char *file, const char *path, const char *key,
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

static void child_path(char *out, size_t len, const char *parent, const char *key)
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
static int check_keys(const char *file, const char *path, const json_t *obj,
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
            return cfg_fail(err, file, path, k, "unknown key");
        }
    }
    return 0;
}

static int need_object(const char *file, const char *path, const char *key, const json_t *v,
                       struct eai_error **err)
{
    if (!json_is_object(v)) {
        return cfg_fail(err, file, path, key, "expected a mapping");
    }
    return 0;
}

static int get_string(const char *file, const char *path, const json_t *obj, const char *key,
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
        return cfg_fail(err, file, path, key, "expected a string");
    }
    if (set_str(dst, json_string_value(v)) < 0) {
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    }
    return 0;
}

static int get_int(const char *file, const char *path, const json_t *obj, const char *key,
                   int64_t min, int64_t max, int64_t *dst, struct eai_error **err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_integer(v)) {
        return cfg_fail(err, file, path, key, "expected an integer");
    }
    int64_t x = json_integer_value(v);
    if (x < min || x > max) {
        return cfg_fail(err, file, path, key, "out of range [%lld, %lld]",
                        (long long)min, (long long)max);
    }
    *dst = x;
    return 0;
}

static int get_int32(const char *file, const char *path, const json_t *obj, const char *key,
                     int min, int max, int *dst, struct eai_error **err)
{
    int64_t v = *dst;
    if (get_int(file, path, obj, key, min, max, &v, err) < 0)
        return -1;
    *dst = (int)v;
    return 0;
}

static int get_size(const char *file, const char *path, const json_t *obj, const char *key,
                    int64_t min, int64_t max, int64_t *dst, struct eai_error **err)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    int64_t x;
    if (eai_cfg_quantity_bytes(v, &x) < 0) {
        return cfg_fail(err, file, path, key, "expected a size (bytes or a quantity like 10Mi)");
    }
    if (x < min || x > max) {
        return cfg_fail(err, file, path, key, "out of range [%lld, %lld]",
                        (long long)min, (long long)max);
    }
    *dst = x;
    return 0;
}

/* Values of one limits block (defaults or max): every key optional. */
static int check_limits(const char *file, const char *path, const json_t *obj, struct eai_error **err)
{
    static const char *const known[] = {"cpu", "memory", "timeout_s", "pids", "output_bytes", "disk", NULL};
    if (check_keys(file, path, obj, known, err) < 0)
        return -1;
    int64_t x;
    json_t *v;
    if ((v = json_object_get(obj, "cpu")) && (eai_cfg_quantity_cpu(v, &x) < 0 || x <= 0)) {
        return cfg_fail(err, file, path, "cpu", "expected a CPU quantity like 500m, 1 or 1.5");
    }
    const char *sizes[] = {"memory", "output_bytes", "disk"};
    for (size_t i = 0; i < 3; i++)
        if ((v = json_object_get(obj, sizes[i])) && (eai_cfg_quantity_bytes(v, &x) < 0 || x <= 0)) {
            return cfg_fail(err, file, path, sizes[i], "expected a size like 256Mi or bytes");
        }
    const char *ints[] = {"timeout_s", "pids"};
    for (size_t i = 0; i < 2; i++)
        if ((v = json_object_get(obj, ints[i])) && (!json_is_integer(v) || json_integer_value(v) <= 0)) {
            return cfg_fail(err, file, path, ints[i], "expected a positive integer");
        }
    return 0;
}

static int check_profile(const char *file, const char *path, const json_t *p, struct eai_error **err)
{
    static const char *const known[] = {"backend", "runtime_class", "defaults", "max", "egress_allow", NULL};
    if (check_keys(file, path, p, known, err) < 0)
        return -1;
    json_t *v = json_object_get(p, "backend");
    if (!v) {
        return cfg_fail(err, file, path, "backend", "missing required key");
    }
    if (!json_is_string(v) || !*json_string_value(v)) {
        return cfg_fail(err, file, path, "backend", "expected a plugin name");
    }
    if ((v = json_object_get(p, "runtime_class")) && !json_is_string(v)) {
        return cfg_fail(err, file, path, "runtime_class", "expected a string");
    }
    char sub[512];
    const char *blocks[] = {"defaults", "max"};
    for (size_t i = 0; i < 2; i++) {
        if (!(v = json_object_get(p, blocks[i])))
            continue;
        if (need_object(file, path, blocks[i], v, err) < 0)
            return -1;
        child_path(sub, sizeof(sub), path, blocks[i]);
        if (check_limits(file, sub, v, err) < 0)
            return -1;
    }
    if ((v = json_object_get(p, "egress_allow"))) {
        if (!json_is_array(v)) {
            return cfg_fail(err, file, path, "egress_allow", "expected a list of \"host:port\"");
        }
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            const char *s = json_string_value(e);
            const char *colon = s ? strrchr(s, ':') : NULL;
            if (!s || !colon || colon == s || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1)) {
                return cfg_fail(err, file, path, "egress_allow",
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
    json_t *base = json_loads(eai_default_profiles_json, 0, &je);
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

static int apply_profiles(const char *file, struct eai_config *c, const json_t *profiles,
                          struct eai_error **err)
{
    if (need_object(file, "", "profiles", profiles, err) < 0)
        return -1;
    if (json_object_size(profiles) == 0) {
        return cfg_fail(err, file, "/profiles", "", "at least one profile is needed");
    }
    json_t *out = json_object();
    if (!out)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    const char *name;
    json_t *p;
    json_object_foreach((json_t *)profiles, name, p) {
        char path[512];
        child_path(path, sizeof(path), "/profiles", name);
        if (strlen(name) == 0 || strlen(name) > 63 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != strlen(name)) {
            json_decref(out);
            return cfg_fail(err, file, "/profiles", name, "profile names use [a-z0-9._-], 1..63 characters");
        }
        if (need_object(file, "/profiles", name, p, err) < 0 || check_profile(file, path, p, err) < 0) {
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
static int check_profile_bounds(const struct eai_config *c, struct eai_error **err)
{
    const char *name;
    json_t *p;
    json_object_foreach(c->profiles, name, p) {
        struct eai_profile_limits d, m;
        if (eai_cfg_profile_limits(p, &d, &m) < 0) {
            char path[512];
            child_path(path, sizeof(path), "/profiles", name);
            return cfg_fail(err, c->source, path, "defaults", "malformed limits");
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
            return cfg_fail(err, c->source, path, bad, "default is above the profile's maximum");
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

static int check_listen(const char *file, const char *path, const char *key, const char *v,
                        struct eai_error **err)
{
    char host[256];
    int port;
    if (eai_cfg_parse_listen(v, host, sizeof(host), &port) < 0) {
        return cfg_fail(err, file, path, key, "expected HOST:PORT (e.g. 127.0.0.1:8080), got '%s'", v ? v : "");
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
static int apply_tree(struct eai_config *c, const char *file, const json_t *root, struct eai_error **err)
{
    static const char *const top[] = {"server", "data_dir", "images", "plugins", "log", "storage",
                                      "scheduler", "auth", "finops", "audit", "telemetry", "isolation",
                                      "sandbox", "profiles", "collect", "files", NULL};
    if (json_is_null(root))
        return 0; /* empty file: defaults */
    if (!json_is_object(root)) {
        return cfg_fail(err, file, "", "", "the document must be a mapping");
    }
    if (check_keys(file, "", root, top, err) < 0)
        return -1;
    json_t *v;
    if (get_string(file, "", root, "data_dir", &c->data_dir, err) < 0)
        return -1;

    if ((v = json_object_get(root, "server"))) {
        static const char *const k[] = {"listen", "max_body_bytes", "max_header_bytes", "max_connections",
                                        "request_timeout_s", NULL};
        int64_t body = (int64_t)c->max_body_bytes, hdr = (int64_t)c->max_header_bytes;
        if (need_object(file, "", "server", v, err) < 0 || check_keys(file, "/server", v, k, err) < 0 ||
            get_string(file, "/server", v, "listen", &c->listen, err) < 0 ||
            get_size(file, "/server", v, "max_body_bytes", 1024, 1LL << 31, &body, err) < 0 ||
            get_size(file, "/server", v, "max_header_bytes", 1024, 1LL << 24, &hdr, err) < 0 ||
            get_int32(file, "/server", v, "max_connections", 1, 1000000, &c->max_connections, err) < 0 ||
            get_int32(file, "/server", v, "request_timeout_s", 1, 3600, &c->request_timeout_s, err) < 0)
            return -1;
        if (c->listen && check_listen(file, "/server", "listen", c->listen, err) < 0)
            return -1;
        c->max_body_bytes = (size_t)body;
        c->max_header_bytes = (size_t)hdr;
    }
    struct { const char *sect; const char *key; char **dst; } strs[] = {
        {"images", "dir", &c->image_dir},
        {"plugins", "dir", &c->plugin_dir},
        {"log", "level", &c->log_level},
        {"auth", "pepper_file", &c->pepper_file},
    };
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        if (!(v = json_object_get(root, strs[i].sect)))
            continue;
        const char *k[] = {strs[i].key, NULL};
        char path[64];
        snprintf(path, sizeof(path), "/%s", strs[i].sect);
        if (need_object(file, "", strs[i].sect, v, err) < 0 || check_keys(file, path, v, k, err) < 0 ||
            get_string(file, path, v, strs[i].key, strs[i].dst, err) < 0)
            return -1;
    }
    if (c->log_level && eai_log_level_parse(c->log_level) < 0) {
        return cfg_fail(err, file, "/log", "level", "expected debug, info, warn or error");
    }
    /* delivery and telemetry: backend by name, the URL, and whatever else
     * the chosen plugin declares (checked against it at start) */
    struct { const char *sect; const char *url_key; char **url; char **backend; json_t **conf; } be[] = {
        {"finops", "url", &c->finops_url, &c->finops_backend, &c->finops_conf},
        {"audit", "url", &c->audit_url, &c->audit_backend, &c->audit_conf},
        {"telemetry", "otlp_endpoint", &c->otlp_endpoint, &c->telemetry_backend, &c->telemetry_conf},
    };
    for (size_t i = 0; i < sizeof(be) / sizeof(be[0]); i++) {
        if (!(v = json_object_get(root, be[i].sect)))
            continue;
        char path[64];
        snprintf(path, sizeof(path), "/%s", be[i].sect);
        if (need_object(file, "", be[i].sect, v, err) < 0 ||
            get_string(file, path, v, be[i].url_key, be[i].url, err) < 0 ||
            get_string(file, path, v, "backend", be[i].backend, err) < 0)
            return -1;
        json_t *rest = json_deep_copy(v);
        if (!rest)
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        json_object_del(rest, be[i].url_key);
        json_object_del(rest, "backend");
        json_decref(*be[i].conf);
        *be[i].conf = rest;
    }
    if ((v = json_object_get(root, "storage"))) {
        static const char *const k[] = {"url", "workers", NULL};
        if (need_object(file, "", "storage", v, err) < 0 || check_keys(file, "/storage", v, k, err) < 0 ||
            get_string(file, "/storage", v, "url", &c->database_url, err) < 0 ||
            get_int32(file, "/storage", v, "workers", 1, 256, &c->workers, err) < 0)
            return -1;
    }
    if ((v = json_object_get(root, "scheduler"))) {
        static const char *const k[] = {"max_concurrent", "max_per_tenant", "max_queued_per_tenant", "lease_ms", NULL};
        if (need_object(file, "", "scheduler", v, err) < 0 || check_keys(file, "/scheduler", v, k, err) < 0 ||
            get_int32(file, "/scheduler", v, "max_concurrent", 1, 100000, &c->max_concurrent, err) < 0 ||
            get_int32(file, "/scheduler", v, "max_per_tenant", 1, 100000, &c->max_per_tenant, err) < 0 ||
            get_int32(file, "/scheduler", v, "max_queued_per_tenant", 1, 10000000, &c->max_queued_per_tenant, err) < 0 ||
            get_int(file, "/scheduler", v, "lease_ms", 1000, 3600000, &c->lease_ms, err) < 0)
            return -1;
    }
    if ((v = json_object_get(root, "sandbox"))) {
        static const char *const k[] = {"namespace_prefix", NULL};
        if (need_object(file, "", "sandbox", v, err) < 0 || check_keys(file, "/sandbox", v, k, err) < 0 ||
            get_string(file, "/sandbox", v, "namespace_prefix", &c->namespace_prefix, err) < 0)
            return -1;
    }
    if ((v = json_object_get(root, "collect"))) {
        static const char *const k[] = {"max_files", "max_file_bytes", "max_total_bytes", NULL};
        if (need_object(file, "", "collect", v, err) < 0 || check_keys(file, "/collect", v, k, err) < 0 ||
            get_int(file, "/collect", v, "max_files", 0, 100000, &c->collect_max_files, err) < 0 ||
            get_size(file, "/collect", v, "max_file_bytes", 0, 1LL << 34, &c->collect_max_file_bytes, err) < 0 ||
            get_size(file, "/collect", v, "max_total_bytes", 0, 1LL << 36, &c->collect_max_total_bytes, err) < 0)
            return -1;
    }
    if ((v = json_object_get(root, "files"))) {
        static const char *const k[] = {"max_total_bytes", NULL};
        if (need_object(file, "", "files", v, err) < 0 || check_keys(file, "/files", v, k, err) < 0 ||
            get_size(file, "/files", v, "max_total_bytes", 0, 1LL << 31, &c->files_max_total_bytes, err) < 0)
            return -1;
    }
    if ((v = json_object_get(root, "isolation"))) {
        if (need_object(file, "", "isolation", v, err) < 0)
            return -1;
        const char *name;
        json_t *sub;
        json_object_foreach(v, name, sub) {
            if (json_is_null(sub))
                continue; /* "gvisor:" with nothing under it */
            if (need_object(file, "/isolation", name, sub, err) < 0)
                return -1;
        }
        json_t *copy = json_object();
        if (!copy)
            return -1;
        json_object_foreach(v, name, sub)
            json_object_set_new(copy, name, json_is_null(sub) ? json_object() : json_deep_copy(sub));
        json_decref(c->isolation);
        c->isolation = copy;
    }
    if ((v = json_object_get(root, "profiles")) && apply_profiles(file, c, v, err) < 0)
        return -1;
    return 0;
}

static const char *env(const char *name)
{
    const char *v = secure_getenv(name);
    return v && *v ? v : NULL;
}

static int apply_env(struct eai_config *c, struct eai_error **err)
{
    struct { const char *name; char **dst; } map[] = {
        {"EAI_LISTEN", &c->listen},
        {"EAI_DATA_DIR", &c->data_dir},
        {"EAI_IMAGE_DIR", &c->image_dir},
        {"EAI_PLUGIN_DIR", &c->plugin_dir},
        {"EAI_LOG_LEVEL", &c->log_level},
        {"EAI_DATABASE_URL", &c->database_url},
        {"EAI_AUTH_PEPPER_FILE", &c->pepper_file},
        {"EAI_FINOPS_URL", &c->finops_url},
        {"EAI_AUDIT_URL", &c->audit_url},
        {"OTEL_EXPORTER_OTLP_ENDPOINT", &c->otlp_endpoint},
        {"EAI_AUDIT_BACKEND", &c->audit_backend},
        {"EAI_FINOPS_BACKEND", &c->finops_backend},
        {"EAI_TELEMETRY_BACKEND", &c->telemetry_backend},
        {"EAI_SANDBOX_NAMESPACE_PREFIX", &c->namespace_prefix},
        {"EAI_SANDBOX_RUNSC", &c->runsc},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        const char *v = env(map[i].name);
        if (v && set_str(map[i].dst, v) < 0) {
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        }
    }
    if (check_listen("(environment)", "EAI_LISTEN", "EAI_LISTEN", c->listen, err) < 0)
        return -1;
    if (eai_log_level_parse(c->log_level) < 0) {
        return cfg_fail(err, "(environment)", "EAI_LOG_LEVEL", "EAI_LOG_LEVEL",
                        "expected debug, info, warn or error");
    }
    return 0;
}

/* An absolute, lexically tidied path ("./var" -> "<cwd>/var"). */
static char *absolute(const char *p)
{
    if (!p)
        return NULL;
    char *out = NULL;
    if (p[0] == '/') {
        out = strdup(p);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
            return NULL;
        while (p[0] == '.' && p[1] == '/')
            p += 2;
        if (strcmp(p, ".") == 0)
            p = "";
        if (asprintf(&out, "%s%s%s", cwd, *p ? "/" : "", p) < 0)
            out = NULL;
    }
    if (out) {
        size_t n = strlen(out);
        while (n > 1 && out[n - 1] == '/')
            out[--n] = '\0';
    }
    return out;
}

int eai_cfg_is_postgres_url(const char *url)
{
    return url && (strncmp(url, "postgres://", 11) == 0 || strncmp(url, "postgresql://", 13) == 0);
}

/* Derived values: absolute paths, the storage backend, plugin dir. */
static int finish(struct eai_config *c, struct eai_error **err)
{
    char *abs = absolute(c->data_dir);
    if (!abs) {
        return eai_error_set(err, EAI_E_INTERNAL, "data_dir: cannot make '%s' absolute", c->data_dir);
    }
    free(c->data_dir);
    c->data_dir = abs;
    if (!c->image_dir) {
        if (asprintf(&c->image_dir, "%s/images", c->data_dir) < 0) {
            c->image_dir = NULL;
            return -1;
        }
    } else {
        abs = absolute(c->image_dir);
        if (!abs)
            return -1;
        free(c->image_dir);
        c->image_dir = abs;
    }
    if (!c->plugin_dir && set_str(&c->plugin_dir, eai_plugin_dir()) < 0)
        return -1;
    if (!c->pepper_file && asprintf(&c->pepper_file, "%s/pepper", c->data_dir) < 0) {
        c->pepper_file = NULL;
        return -1;
    }
    if (c->database_url && !*c->database_url) {
        free(c->database_url);
        c->database_url = NULL;
    }
    const char *backend = "sqlite";
    if (c->database_url) {
        if (eai_cfg_is_postgres_url(c->database_url)) {
            backend = "postgres";
        } else if (strncmp(c->database_url, "sqlite:", 7) == 0) {
            /* sqlite:PATH selects a database file other than <data_dir>/eai.db */
            backend = "sqlite";
        } else {
            return cfg_fail(err, c->source, "/storage", "url",
                            "expected postgres://..., postgresql://... or sqlite:PATH");
        }
    }
    if (set_str(&c->storage_backend, backend) < 0)
        return -1;
    /* empty integration URLs select the in-process fallbacks */
    char **urls[] = {&c->finops_url, &c->audit_url, &c->otlp_endpoint};
    for (size_t i = 0; i < 3; i++)
        if (*urls[i] && !**urls[i]) {
            free(*urls[i]);
            *urls[i] = NULL;
        }
    /* backends by name: default by URL, in-process fallbacks take no keys */
    struct { const char *sect; const char *url_key; const char *url; char **backend; json_t **conf;
             const char *with_url; const char *fallback; } be[] = {
        {"finops", "url", c->finops_url, &c->finops_backend, &c->finops_conf, "http", EAI_CFG_FINOPS_FALLBACK},
        {"audit", "url", c->audit_url, &c->audit_backend, &c->audit_conf, "http", EAI_CFG_AUDIT_FALLBACK},
        {"telemetry", "otlp_endpoint", c->otlp_endpoint, &c->telemetry_backend, &c->telemetry_conf, "otlp",
         EAI_CFG_TELEMETRY_FALLBACK},
    };
    for (size_t i = 0; i < sizeof(be) / sizeof(be[0]); i++) {
        char path[64];
        snprintf(path, sizeof(path), "/%s", be[i].sect);
        if (*be[i].backend && !**be[i].backend) {
            free(*be[i].backend);
            *be[i].backend = NULL;
        }
        if (!*be[i].backend && set_str(be[i].backend, be[i].url ? be[i].with_url : be[i].fallback) < 0)
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        if (!*be[i].conf && !(*be[i].conf = json_object()))
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        if (strcmp(*be[i].backend, be[i].fallback) == 0) {
            if (be[i].url)
                return cfg_fail(err, c->source, path, be[i].url_key,
                                "set, but backend '%s' (in-process) takes no URL: choose a plugin with "
                                "%s.backend or remove the URL", be[i].fallback, be[i].sect);
            const char *k;
            json_t *unused;
            json_object_foreach(*be[i].conf, k, unused)
                return cfg_fail(err, c->source, path, k, "unknown key (backend '%s' is in-process and takes no keys)",
                                be[i].fallback);
        }
    }
    return check_profile_bounds(c, err);
}

struct eai_config *eai_config_load(const char *file, struct eai_error **err)
{
    struct eai_config *c = eai_config_defaults();
    if (!c) {
        eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    if (file) {
        size_t len = 0;
        char *buf = eai_read_file(file, EAI_CFG_MAX_FILE, &len);
        if (!buf) {
            eai_error_set(err, EAI_E_VALIDATION_FAILED, "config %s: cannot read: %s",
                          file, strerror(errno ? errno : EINVAL));
            eai_config_free(c);
            return NULL;
        }
        struct eai_error *ye = NULL;
        json_t *root = eai_yaml_to_json(buf, len, &ye);
        free(buf);
        if (!root) {
            eai_error_set(err, EAI_E_VALIDATION_FAILED, "config %s: YAML: %s", file,
                          ye && ye->message ? ye->message : "parse error");
            eai_error_free(ye);
            eai_config_free(c);
            return NULL;
        }
        set_str(&c->source, file);
        int rc = apply_tree(c, file, root, err);
        json_decref(root);
        if (rc < 0) {
            eai_config_free(c);
            return NULL;
        }
    }
    if (apply_env(c, err) < 0 || finish(c, err) < 0) {
        eai_config_free(c);
        return NULL;
    }
    return c;
}

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
        return cfg_fail(err, file, path, "", "expected a mapping");
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)conf, k, v) {
        const struct eai_config_key *ck = NULL;
        for (const struct eai_config_key *p = keys; p && p->name; p++)
            if (strcmp(p->name, k) == 0)
                ck = p;
        if (!ck) {
            return cfg_fail(err, file, path, k, "unknown key");
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
            return cfg_fail(err, file, path, k, "expected %s", cfg_type_name(ck->type));
        }
    }
    for (const struct eai_config_key *p = keys; p && p->name; p++)
        if (p->required && !json_object_get(conf, p->name)) {
            return cfg_fail(err, file, path, p->name, "missing required key");
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
