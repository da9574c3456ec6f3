/*
 * Configuration: built-in defaults, then the YAML file, then the
 * environment (docs/configuration.md).  The YAML tree is checked key by
 * key: an unknown key, a wrong type or a missing required key stops the
 * load with a message naming the file, the JSON-pointer path and the key.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/config_check.h"
#include "config/cfg_read.h"
#include "base/errors.h"
#include "plugin/loader.h"
#include "base/log.h"
#include "base/util.h"
#include "schema/yamljson.h"

#define EAI_CFG_MAX_FILE (1024 * 1024)

/* ------------------------------------------------------------ defaults */

static struct eai_config *eai_config_defaults(void)
{
    struct eai_config *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->max_body_bytes = 10u * 1024 * 1024;
    c->max_header_bytes = 16u * 1024;
    c->max_connections = 1024;
    c->max_unauth_connections = -1;
    c->max_polls_per_tenant = 64;
    c->max_streams_per_tenant = 16;
    c->max_connections_per_tenant = 256;
    c->sse_buffer_bytes = 256 << 10;
    c->request_timeout_s = 75;
    c->read_timeout_s = 60;
    c->drain_s = 30;
    c->auth_cache_ttl_ms = 2000;
    c->api_keys = 1;
    c->workers = 8;
    c->max_concurrent = 8;
    c->max_per_tenant = 4;
    c->max_queued_per_tenant = 1000;
    c->lease_ms = 30000;
    c->callbacks_timeout_ms = 10000;
    c->callbacks_backoff_cap_ms = 300000;
    c->callbacks_max_attempts = 30;
    c->quota_window_s = 3600;
    c->retention_interval_s = 3600;
    c->collect_max_files = 64;
    c->collect_max_file_bytes = 10LL * 1024 * 1024;
    c->collect_max_total_bytes = 32LL * 1024 * 1024;
    c->files_max_total_bytes = 8LL * 1024 * 1024;
    c->volumes_max_bytes = 10LL << 30;
    c->volumes_max_per_tenant = 16;
    c->volumes_max_total_bytes = 64LL << 30;
    c->volumes_usage_period_s = 3600;
    c->node_tenant_share = 500;
    c->sessions_max_per_tenant = 10;
    c->sessions_max_concurrent = 4;
    c->sessions_idle_timeout_s = 300;
    c->sessions_max_idle_timeout_s = 3600;
    c->sessions_ttl_s = 3600;
    c->sessions_max_ttl_s = 86400;
    c->sessions_paused_ttl_s = 86400;
    c->sessions_max_paused_ttl_s = 7 * 86400;
    c->sessions_checkpoint_quota = 8LL << 30;
    c->sessions_min_free_bytes = 1LL << 30;
    c->sessions_pause_per_minute = 30;
    c->sessions_tenant_pause_per_minute = 120;
    c->sessions_snapshots_max_per_tenant = 20;
    c->sessions_snapshot_quota = 8LL << 30;
    c->sessions_snapshot_ttl_s = 7 * 86400;
    c->sessions_max_snapshot_ttl_s = 30 * 86400;
    c->sessions_fork_max_count = 10;
    c->net_max_connections = 32;
    c->net_max_connections_tenant = 256;
    c->net_max_bytes = 1LL << 30;
    c->net_idle_timeout_s = 60;
    c->net_spare = 2;
    json_error_t je;
    c->profiles = json_loads(eai_cfg_default_profiles_json, 0, &je);
    c->isolation = json_pack("{s:{}}", "gvisor");
    if (eai_cfg_set_str(&c->listen, "127.0.0.1:8080") < 0 || eai_cfg_set_str(&c->data_dir, "./var") < 0 ||
        eai_cfg_set_str(&c->log_level, "info") < 0 || eai_cfg_set_str(&c->storage_backend, "sqlite") < 0 ||
        eai_cfg_set_str(&c->namespace_prefix, "eai-") < 0 || eai_cfg_set_str(&c->source, "(defaults)") < 0 ||
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
    free(c->net_resolver);
    free(c->net_pool);
    free(c->net_synthetic);
    free(c->net_prefix);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->tls_client_ca);
    free(c->ops_token_file);
    free(c->data_dir);
    free(c->image_dir);
    free(c->plugin_dir);
    free(c->log_level);
    free(c->storage_backend);
    free(c->database_url);
    free(c->pepper_file);
    eai_cfg_jwt_free(c->jwt);
    free(c->finops_url);
    free(c->audit_url);
    free(c->otlp_endpoint);
    free(c->audit_backend);
    free(c->finops_backend);
    free(c->telemetry_backend);
    json_decref(c->audit_conf);
    json_decref(c->finops_conf);
    json_decref(c->storage_conf);
    json_decref(c->telemetry_conf);
    json_decref(c->isolation);
    free(c->namespace_prefix);
    free(c->runsc);
    free(c->sessions_advertise_url);
    free(c->sessions_handoff_dir);
    json_decref(c->profiles);
    json_decref(c->callbacks_allow);
    json_decref(c->node_tenant_shares);
    free(c->callbacks_proxy);
    free(c->source);
    free(c);
}

int eai_cfg_check_listen(const char *file, const char *path, const char *key, const char *v,
                        struct eai_error **err)
{
    char host[256];
    int port;
    if (eai_cfg_parse_listen(v, host, sizeof(host), &port) < 0) {
        return eai_cfg_fail(err, file, path, key, "expected HOST:PORT (e.g. 127.0.0.1:8080), got '%s'", v ? v : "");
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

/* Map the YAML/JSON tree onto c, section by section (sections.c). */
static int apply_tree(struct eai_config *c, const char *file, const json_t *root, struct eai_error **err)
{
    if (json_is_null(root))
        return 0; /* empty file: defaults */
    if (!json_is_object(root))
        return eai_cfg_fail(err, file, "", "", "the document must be a mapping");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)root, k, v) {
        if (!eai_cfg_section(k))
            return eai_cfg_fail(err, file, "", k, "unknown key");
    }
    for (const struct eai_cfg_section *s = eai_cfg_sections; s->name; s++) {
        if (!(v = json_object_get(root, s->name)))
            continue;
        if (s->mapping && eai_cfg_need_object(file, "", s->name, v, err) < 0)
            return -1;
        char path[64];
        snprintf(path, sizeof(path), "/%s", s->name);
        if (s->apply(c, file, path, v, err) < 0)
            return -1;
    }
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
        {"EAI_OPS_TOKEN_FILE", &c->ops_token_file},
        {"EAI_FINOPS_URL", &c->finops_url},
        {"EAI_AUDIT_URL", &c->audit_url},
        {"OTEL_EXPORTER_OTLP_ENDPOINT", &c->otlp_endpoint},
        {"EAI_AUDIT_BACKEND", &c->audit_backend},
        {"EAI_FINOPS_BACKEND", &c->finops_backend},
        {"EAI_TELEMETRY_BACKEND", &c->telemetry_backend},
        {"EAI_SANDBOX_NAMESPACE_PREFIX", &c->namespace_prefix},
        {"EAI_SANDBOX_RUNSC", &c->runsc},
        {"EAI_ADVERTISE_URL", &c->sessions_advertise_url},
        {"EAI_SESSIONS_HANDOFF_DIR", &c->sessions_handoff_dir},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        const char *v = env(map[i].name);
        if (v && eai_cfg_set_str(map[i].dst, v) < 0) {
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        }
    }
    const char *ds = env("EAI_DRAIN_S");
    if (ds) {
        char *end = NULL;
        long v = strtol(ds, &end, 10);
        if (!isdigit((unsigned char)ds[0]) || *end || v < 0 || v > 3600)
            return eai_cfg_fail(err, "(environment)", "EAI_DRAIN_S", "EAI_DRAIN_S",
                                "expected a whole number of seconds from 0 to 3600");
        c->drain_s = (int)v;
    }
    if (eai_cfg_check_listen("(environment)", "EAI_LISTEN", "EAI_LISTEN", c->listen, err) < 0)
        return -1;
    if (eai_log_level_parse(c->log_level) < 0) {
        return eai_cfg_fail(err, "(environment)", "EAI_LOG_LEVEL", "EAI_LOG_LEVEL",
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
    if (!c->plugin_dir && eai_cfg_set_str(&c->plugin_dir, eai_plugin_dir()) < 0)
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
            return eai_cfg_fail(err, c->source, "/storage", "url",
                            "expected postgres://..., postgresql://... or sqlite:PATH");
        }
    }
    if (eai_cfg_set_str(&c->storage_backend, backend) < 0)
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
        if (!*be[i].backend && eai_cfg_set_str(be[i].backend, be[i].url ? be[i].with_url : be[i].fallback) < 0)
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        if (!*be[i].conf && !(*be[i].conf = json_object()))
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        if (strcmp(*be[i].backend, be[i].fallback) == 0) {
            if (be[i].url)
                return eai_cfg_fail(err, c->source, path, be[i].url_key,
                                "set, but backend '%s' (in-process) takes no URL: choose a plugin with "
                                "%s.backend or remove the URL", be[i].fallback, be[i].sect);
            const char *k;
            json_t *unused;
            json_object_foreach(*be[i].conf, k, unused)
                return eai_cfg_fail(err, c->source, path, k, "unknown key (backend '%s' is in-process and takes no keys)",
                                be[i].fallback);
        }
    }
    return eai_cfg_check_profile_bounds(c, err);
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
        eai_cfg_set_str(&c->source, file);
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

