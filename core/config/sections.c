/*
 * The sections of the configuration file (docs/configuration.md), each
 * mapped onto struct eai_config by its own function.  Profiles live in
 * profiles.c; a feature with a section of its own keeps its function
 * next to the feature's other configuration code and adds a line to
 * eai_cfg_sections below.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfg_read.h"
#include "config/config_check.h"
#include "config/config.h"
#include "obs/callback.h"
#include "base/errors.h"
#include "base/log.h"
#include "http/ops_access.h"
#include "net/egress_policy.h"

static int sect_data_dir(struct eai_config *c, const char *file, const char *path, const json_t *v,
                         struct eai_error **err)
{
    (void)path;
    json_t *root = json_pack("{s:O}", "data_dir", v);
    int rc = root ? eai_cfg_get_string(file, "", root, "data_dir", &c->data_dir, err)
                  : eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    json_decref(root);
    return rc;
}

static int sect_server(struct eai_config *c, const char *file, const char *path, const json_t *v,
                       struct eai_error **err)
{
    static const char *const k[] = {"listen", "max_body_bytes", "max_header_bytes", "max_connections",
                                    "max_unauthenticated_connections", "request_timeout_s", "read_timeout_s", "drain_s", "tls", NULL};
    int64_t body = (int64_t)c->max_body_bytes, hdr = (int64_t)c->max_header_bytes;
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_string(file, path, v, "listen", &c->listen, err) < 0 ||
        eai_cfg_get_size(file, path, v, "max_body_bytes", 1024, 1LL << 31, &body, err) < 0 ||
        eai_cfg_get_size(file, path, v, "max_header_bytes", 1024, 1LL << 24, &hdr, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_connections", 1, 1000000, &c->max_connections, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_unauthenticated_connections", 0, 1000000,
                          &c->max_unauth_connections, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "request_timeout_s", 1, 3600, &c->request_timeout_s, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "read_timeout_s", 1, 3600, &c->read_timeout_s, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "drain_s", 0, 3600, &c->drain_s, err) < 0 ||
        eai_cfg_server_tls(c, file, path, json_object_get(v, "tls"), err) < 0)
        return -1;
    if (c->listen && eai_cfg_check_listen(file, path, "listen", c->listen, err) < 0)
        return -1;
    c->max_body_bytes = (size_t)body;
    c->max_header_bytes = (size_t)hdr;
    return 0;
}

/* ops: who may read /metrics and the details of /readyz (http/ops_access.h) */
static int sect_ops(struct eai_config *c, const char *file, const char *path, const json_t *v,
                    struct eai_error **err)
{
    static const char *const k[] = {"access", "token_file", NULL};
    char *access = NULL;
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_string(file, path, v, "access", &access, err) < 0 ||
        eai_cfg_get_string(file, path, v, "token_file", &c->ops_token_file, err) < 0) {
        free(access);
        return -1;
    }
    int mode = eai_ops_access_parse(access);
    free(access);
    if (mode < 0)
        return eai_cfg_fail(err, file, path, "access", "expected loopback, token or open");
    c->ops_access = mode;
    return 0;
}

/* limits: per-tenant bounds on open reads, the event-stream buffer */
static int sect_limits(struct eai_config *c, const char *file, const char *path, const json_t *v,
                       struct eai_error **err)
{
    static const char *const k[] = {"max_polls_per_tenant", "max_streams_per_tenant", "max_connections_per_tenant",
                                    "sse_buffer_bytes", NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_polls_per_tenant", 0, 1000000, &c->max_polls_per_tenant, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_streams_per_tenant", 0, 1000000, &c->max_streams_per_tenant,
                          err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_connections_per_tenant", 0, 1000000,
                          &c->max_connections_per_tenant, err) < 0 ||
        eai_cfg_get_size(file, path, v, "sse_buffer_bytes", 16 << 10, 1LL << 30, &c->sse_buffer_bytes, err) < 0)
        return -1;
    return 0;
}

/* A section holding one string key. */
static int one_string(const char *file, const char *path, const json_t *v, const char *key, char **dst,
                      struct eai_error **err)
{
    const char *k[] = {key, NULL};
    return eai_cfg_check_keys(file, path, v, k, err) < 0 ? -1 : eai_cfg_get_string(file, path, v, key, dst, err);
}

static int sect_images(struct eai_config *c, const char *file, const char *path, const json_t *v,
                       struct eai_error **err)
{
    return one_string(file, path, v, "dir", &c->image_dir, err);
}

static int sect_plugins(struct eai_config *c, const char *file, const char *path, const json_t *v,
                        struct eai_error **err)
{
    return one_string(file, path, v, "dir", &c->plugin_dir, err);
}

static int sect_log(struct eai_config *c, const char *file, const char *path, const json_t *v,
                    struct eai_error **err)
{
    if (one_string(file, path, v, "level", &c->log_level, err) < 0)
        return -1;
    if (c->log_level && eai_log_level_parse(c->log_level) < 0)
        return eai_cfg_fail(err, file, path, "level", "expected debug, info, warn or error");
    return 0;
}

static int sect_auth(struct eai_config *c, const char *file, const char *path, const json_t *v,
                     struct eai_error **err)
{
    const char *k[] = {"pepper_file", "cache_ttl_ms", "api_keys", "jwt", NULL};
    const json_t *keys = json_object_get(v, "api_keys");
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_string(file, path, v, "pepper_file", &c->pepper_file, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "cache_ttl_ms", 0, 60000, &c->auth_cache_ttl_ms, err) < 0 ||
        eai_cfg_auth_jwt(c, file, path, json_object_get(v, "jwt"), err) < 0)
        return -1;
    if (keys && !json_is_boolean(keys))
        return eai_cfg_fail(err, file, path, "api_keys", "true or false");
    if (keys)
        c->api_keys = json_is_true(keys);
    if (!c->api_keys && !c->jwt)
        return eai_cfg_fail(err, file, path, "api_keys", "false needs auth.jwt: no request could authenticate");
    return 0;
}

/* Delivery and telemetry: backend by name, the URL, and whatever else the
 * chosen plugin declares (checked against it at start). */
static int backend_section(const char *file, const char *path, const json_t *v, const char *url_key,
                           char **url, char **backend, json_t **conf, struct eai_error **err)
{
    if (eai_cfg_get_string(file, path, v, url_key, url, err) < 0 ||
        eai_cfg_get_string(file, path, v, "backend", backend, err) < 0)
        return -1;
    json_t *rest = json_deep_copy(v);
    if (!rest)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    json_object_del(rest, url_key);
    json_object_del(rest, "backend");
    json_decref(*conf);
    *conf = rest;
    return 0;
}

static int sect_finops(struct eai_config *c, const char *file, const char *path, const json_t *v,
                       struct eai_error **err)
{
    return backend_section(file, path, v, "url", &c->finops_url, &c->finops_backend, &c->finops_conf, err);
}

static int sect_audit(struct eai_config *c, const char *file, const char *path, const json_t *v,
                      struct eai_error **err)
{
    return backend_section(file, path, v, "url", &c->audit_url, &c->audit_backend, &c->audit_conf, err);
}

static int sect_telemetry(struct eai_config *c, const char *file, const char *path, const json_t *v,
                          struct eai_error **err)
{
    return backend_section(file, path, v, "otlp_endpoint", &c->otlp_endpoint, &c->telemetry_backend,
                           &c->telemetry_conf, err);
}

static int sect_storage(struct eai_config *c, const char *file, const char *path, const json_t *v,
                        struct eai_error **err)
{
    /* url and workers are core's; every other key goes to the storage
     * plugin (postgres: pool_size, statement_timeout_ms, connect_timeout_s)
     * and is checked against the key table it declares when it is opened */
    if (eai_cfg_get_string(file, path, v, "url", &c->database_url, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "workers", 1, 256, &c->workers, err) < 0)
        return -1;
    json_t *rest = json_deep_copy(v);
    if (!rest)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    json_object_del(rest, "url");
    json_object_del(rest, "workers");
    json_decref(c->storage_conf);
    c->storage_conf = rest;
    return 0;
}

static int sect_scheduler(struct eai_config *c, const char *file, const char *path, const json_t *v,
                          struct eai_error **err)
{
    static const char *const k[] = {"max_concurrent", "max_per_tenant", "max_queued_per_tenant", "lease_ms",
                                    NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_concurrent", 1, 100000, &c->max_concurrent, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_per_tenant", 1, 100000, &c->max_per_tenant, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_queued_per_tenant", 1, 10000000, &c->max_queued_per_tenant,
                          err) < 0 ||
        eai_cfg_get_int(file, path, v, "lease_ms", 3000, 3600000, &c->lease_ms, err) < 0)
        return -1;
    return 0;
}

/* node: the budget executions and sessions share (docs/admission.md). */
static int sect_node(struct eai_config *c, const char *file, const char *path, const json_t *v,
                     struct eai_error **err)
{
    static const char *const k[] = {"memory_budget", "cpu_budget", "tenant_share", "tenant_shares", NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_size(file, path, v, "memory_budget", 0, 1LL << 50, &c->node_memory_budget, err) < 0)
        return -1;
    const json_t *cpu = json_object_get(v, "cpu_budget");
    if (cpu && !json_is_null(cpu)) {
        int64_t m = -1;
        if (eai_cfg_quantity_cpu(cpu, &m) < 0 || m < 0 || m > 100000000)
            return eai_cfg_fail(err, file, path, "cpu_budget",
                                "expected a CPU quantity like 4, 2.5 or 3500m (0: one core per CPU of the host)");
        c->node_cpu_budget = m;
    }
    const json_t *sh = json_object_get(v, "tenant_share");
    if (sh && !json_is_null(sh)) {
        double f = json_is_number(sh) ? json_number_value(sh) : -1;
        if (!(f > 0 && f <= 1))
            return eai_cfg_fail(err, file, path, "tenant_share",
                                "expected a number above 0 and at most 1 (the fraction one tenant may hold)");
        int pm = (int)(f * 1000 + 0.5);
        c->node_tenant_share = pm < 1 ? 1 : pm;
    }
    /* a tenant's own share instead of tenant_share: {tenant id: fraction} */
    const json_t *per = json_object_get(v, "tenant_shares");
    if (per && !json_is_null(per)) {
        if (!json_is_object(per) || json_object_size(per) > EAI_NODE_TENANT_SHARES_MAX)
            return eai_cfg_fail(err, file, path, "tenant_shares",
                                "expected a mapping of at most 10000 tenant ids to fractions");
        json_t *out = json_object();
        if (!out)
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        const char *t;
        const json_t *x;
        json_object_foreach((json_t *)per, t, x) {
            double f = json_is_number(x) ? json_number_value(x) : -1;
            if (!t[0] || strlen(t) > 63 || !(f > 0 && f <= 1)) {
                json_decref(out);
                return eai_cfg_fail(err, file, path, "tenant_shares",
                                    "expected tenant ids (1..63 characters) mapped to numbers above 0 and at most 1");
            }
            int pm = (int)(f * 1000 + 0.5);
            json_object_set_new(out, t, json_integer(pm < 1 ? 1 : pm));
        }
        json_decref(c->node_tenant_shares);
        c->node_tenant_shares = out;
    }
    return 0;
}

static int sect_sandbox(struct eai_config *c, const char *file, const char *path, const json_t *v,
                        struct eai_error **err)
{
    return one_string(file, path, v, "namespace_prefix", &c->namespace_prefix, err);
}

static int sect_collect(struct eai_config *c, const char *file, const char *path, const json_t *v,
                        struct eai_error **err)
{
    static const char *const k[] = {"max_files", "max_file_bytes", "max_total_bytes", NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_int(file, path, v, "max_files", 0, 100000, &c->collect_max_files, err) < 0 ||
        eai_cfg_get_size(file, path, v, "max_file_bytes", 0, 1LL << 34, &c->collect_max_file_bytes, err) < 0 ||
        eai_cfg_get_size(file, path, v, "max_total_bytes", 0, 1LL << 36, &c->collect_max_total_bytes, err) < 0)
        return -1;
    return 0;
}

static int sect_files(struct eai_config *c, const char *file, const char *path, const json_t *v,
                      struct eai_error **err)
{
    static const char *const k[] = {"max_total_bytes", NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_size(file, path, v, "max_total_bytes", 0, 1LL << 31, &c->files_max_total_bytes, err) < 0)
        return -1;
    return 0;
}

/* callbacks: the allow list of completion callback URLs (same grammar as a
 * profile's egress_allow) and the delivery pace (core/obs/callback.h). */
static int sect_callbacks(struct eai_config *c, const char *file, const char *path, const json_t *v,
                          struct eai_error **err)
{
    static const char *const k[] = {"allow", "timeout_ms", "backoff_cap_s", "max_attempts", "proxy", NULL};
    int64_t cap_s = c->callbacks_backoff_cap_ms / 1000;
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_string(file, path, v, "proxy", &c->callbacks_proxy, err) < 0 ||
        eai_cfg_get_int(file, path, v, "timeout_ms", 100, 600000, &c->callbacks_timeout_ms, err) < 0 ||
        eai_cfg_get_int(file, path, v, "backoff_cap_s", 1, 86400, &cap_s, err) < 0 ||
        eai_cfg_get_int(file, path, v, "max_attempts", 1, 1000000, &c->callbacks_max_attempts, err) < 0)
        return -1;
    c->callbacks_backoff_cap_ms = cap_s * 1000;
    if (c->callbacks_proxy) {
        char host[EAI_CALLBACK_HOST_MAX];
        uint16_t port;
        int https;
        const char *pp = c->callbacks_proxy;
        if (strncmp(pp, "http://", 7) != 0 || eai_cb_url_parse(pp, host, sizeof host, &port, &https) < 0 ||
            strchr(pp + 7, '/') || strchr(pp, '@'))
            return eai_cfg_fail(err, file, path, "proxy", "expected \"http://host:port\" (no path, no user info)");
    }
    const json_t *allow = json_object_get(v, "allow");
    if (!allow || json_is_null(allow))
        return 0;
    if (!json_is_array(allow))
        return eai_cfg_fail(err, file, path, "allow", "expected a list of \"host:port\", \"*.suffix:port\", "
                                                      "\"a.b.c.d:port\" or \"a.b.c.d/n:port\" entries");
    size_t i;
    const json_t *e;
    json_array_foreach(allow, i, e) {
        struct eai_egress_rule r;
        if (!json_is_string(e) || eai_egress_rule_parse(json_string_value(e), &r) < 0)
            return eai_cfg_fail(err, file, path, "allow",
                                "entry %zu: expected \"host:port\", \"*.suffix:port\", \"a.b.c.d:port\" or "
                                "\"a.b.c.d/n:port\" (port 1 to 65535)", i);
    }
    json_decref(c->callbacks_allow);
    c->callbacks_allow = json_deep_copy(allow);
    return c->callbacks_allow ? 0 : eai_error_set(err, EAI_E_INTERNAL, "out of memory");
}

/* network: egress of local sandboxes (docs/egress.md, docs/configuration.md) */
static int sect_network(struct eai_config *c, const char *file, const char *path, const json_t *v,
                        struct eai_error **err)
{
    static const char *const k[] = {"resolver", "pool", "synthetic", "prefix", "max_connections", "max_bytes",
                                    "idle_timeout_s", "spare", "max_connections_per_tenant",
                                    "max_connections_node", NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_string(file, path, v, "resolver", &c->net_resolver, err) < 0 ||
        eai_cfg_get_string(file, path, v, "pool", &c->net_pool, err) < 0 ||
        eai_cfg_get_string(file, path, v, "synthetic", &c->net_synthetic, err) < 0 ||
        eai_cfg_get_string(file, path, v, "prefix", &c->net_prefix, err) < 0 ||
        eai_cfg_get_int(file, path, v, "max_connections", 1, 100000, &c->net_max_connections, err) < 0 ||
        eai_cfg_get_int(file, path, v, "max_connections_per_tenant", 0, 1000000, &c->net_max_connections_tenant,
                        err) < 0 ||
        eai_cfg_get_int(file, path, v, "max_connections_node", 0, 1000000, &c->net_max_connections_node, err) < 0 ||
        eai_cfg_get_size(file, path, v, "max_bytes", 0, 1LL << 40, &c->net_max_bytes, err) < 0 ||
        eai_cfg_get_int(file, path, v, "idle_timeout_s", 1, 86400, &c->net_idle_timeout_s, err) < 0 ||
        eai_cfg_get_int(file, path, v, "spare", 0, 16, &c->net_spare, err) < 0)
        return -1;
    if (c->net_prefix && (strlen(c->net_prefix) != 4 || strspn(c->net_prefix, "abcdefghijklmnopqrstuvwxyz") != 4))
        return eai_cfg_fail(err, file, path, "prefix", "expected 4 lower-case letters");
    return 0;
}

/* isolation.<plugin>: a mapping each (null for "gvisor:" with nothing
 * under it), checked against the plugin's key table at start. */
static int sect_isolation(struct eai_config *c, const char *file, const char *path, const json_t *v,
                          struct eai_error **err)
{
    const char *name;
    json_t *sub;
    json_object_foreach((json_t *)v, name, sub) {
        if (!json_is_null(sub) && eai_cfg_need_object(file, path, name, sub, err) < 0)
            return -1;
    }
    json_t *copy = json_object();
    if (!copy)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    json_object_foreach((json_t *)v, name, sub)
        json_object_set_new(copy, name, json_is_null(sub) ? json_object() : json_deep_copy(sub));
    json_decref(c->isolation);
    c->isolation = copy;
    return 0;
}

static int sect_profiles(struct eai_config *c, const char *file, const char *path, const json_t *v,
                         struct eai_error **err)
{
    (void)path;
    return eai_cfg_apply_profiles(file, c, v, err);
}

static int sect_sessions(struct eai_config *c, const char *file, const char *path, const json_t *v,
                         struct eai_error **err)
{
    static const char *const k[] = {"max_per_tenant", "max_concurrent_executions", "idle_timeout_s",
                                    "max_idle_timeout_s", "ttl_s", "max_ttl_s", "paused_ttl_s",
                                    "max_paused_ttl_s", "checkpoint_quota_bytes", "min_free_bytes",
                                    "pause_per_minute", "tenant_pause_per_minute", "advertise_url",
                                    "snapshots_max_per_tenant", "snapshot_quota_bytes", "snapshot_ttl_s",
                                    "max_snapshot_ttl_s", "fork_max_count", "handoff_dir", NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_per_tenant", 0, 100000, &c->sessions_max_per_tenant, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_concurrent_executions", 1, 1000, &c->sessions_max_concurrent,
                          err) < 0 ||
        eai_cfg_get_int(file, path, v, "idle_timeout_s", 1, 7 * 86400, &c->sessions_idle_timeout_s, err) < 0 ||
        eai_cfg_get_int(file, path, v, "max_idle_timeout_s", 1, 7 * 86400, &c->sessions_max_idle_timeout_s, err) < 0 ||
        eai_cfg_get_int(file, path, v, "ttl_s", 1, 30 * 86400, &c->sessions_ttl_s, err) < 0 ||
        eai_cfg_get_int(file, path, v, "max_ttl_s", 1, 30 * 86400, &c->sessions_max_ttl_s, err) < 0 ||
        eai_cfg_get_int(file, path, v, "paused_ttl_s", 1, 30 * 86400, &c->sessions_paused_ttl_s, err) < 0 ||
        eai_cfg_get_int(file, path, v, "max_paused_ttl_s", 1, 30 * 86400, &c->sessions_max_paused_ttl_s, err) < 0 ||
        eai_cfg_get_size(file, path, v, "checkpoint_quota_bytes", 0, 1LL << 50, &c->sessions_checkpoint_quota,
                         err) < 0 ||
        eai_cfg_get_size(file, path, v, "min_free_bytes", 0, 1LL << 50, &c->sessions_min_free_bytes, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "pause_per_minute", 1, 100000, &c->sessions_pause_per_minute, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "tenant_pause_per_minute", 1, 1000000,
                          &c->sessions_tenant_pause_per_minute, err) < 0 ||
        eai_cfg_get_string(file, path, v, "advertise_url", &c->sessions_advertise_url, err) < 0 ||
        eai_cfg_get_string(file, path, v, "handoff_dir", &c->sessions_handoff_dir, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "snapshots_max_per_tenant", 0, 100000,
                          &c->sessions_snapshots_max_per_tenant, err) < 0 ||
        eai_cfg_get_size(file, path, v, "snapshot_quota_bytes", 0, 1LL << 50, &c->sessions_snapshot_quota, err) < 0 ||
        eai_cfg_get_int(file, path, v, "snapshot_ttl_s", 1, 365 * 86400, &c->sessions_snapshot_ttl_s, err) < 0 ||
        eai_cfg_get_int(file, path, v, "max_snapshot_ttl_s", 1, 365 * 86400, &c->sessions_max_snapshot_ttl_s,
                        err) < 0 ||
        eai_cfg_get_int32(file, path, v, "fork_max_count", 1, 100, &c->sessions_fork_max_count, err) < 0)
        return -1;
    return 0;
}

static int sect_volumes(struct eai_config *c, const char *file, const char *path, const json_t *v,
                        struct eai_error **err)
{
    static const char *const k[] = {"max_bytes", "max_per_tenant", "max_total_bytes_per_tenant", "usage_period_s",
                                    NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_size(file, path, v, "max_bytes", 16LL << 20, 1LL << 44, &c->volumes_max_bytes, err) < 0 ||
        eai_cfg_get_int32(file, path, v, "max_per_tenant", 0, 100000, &c->volumes_max_per_tenant, err) < 0 ||
        eai_cfg_get_size(file, path, v, "max_total_bytes_per_tenant", 0, 1LL << 50, &c->volumes_max_total_bytes,
                         err) < 0 ||
        eai_cfg_get_int(file, path, v, "usage_period_s", 1, 30 * 86400, &c->volumes_usage_period_s, err) < 0)
        return -1;
    return 0;
}

static int sect_quotas(struct eai_config *c, const char *file, const char *path, const json_t *v,
                       struct eai_error **err)
{
    static const char *const k[] = {"executions_per_window", "window_s", "stored_bytes", "manifests", NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_int(file, path, v, "executions_per_window", 0, 1000000000, &c->quota_executions, err) < 0 ||
        eai_cfg_get_int(file, path, v, "window_s", 1, 31 * 86400, &c->quota_window_s, err) < 0 ||
        eai_cfg_get_size(file, path, v, "stored_bytes", 0, 1LL << 50, &c->quota_stored_bytes, err) < 0 ||
        eai_cfg_get_int(file, path, v, "manifests", 0, 100000000, &c->quota_manifests, err) < 0)
        return -1;
    return 0;
}

static int sect_retention(struct eai_config *c, const char *file, const char *path, const json_t *v,
                          struct eai_error **err)
{
    static const char *const k[] = {"executions_days", "interval_s", NULL};
    if (eai_cfg_check_keys(file, path, v, k, err) < 0 ||
        eai_cfg_get_int(file, path, v, "executions_days", 0, 36500, &c->retention_executions_days, err) < 0 ||
        eai_cfg_get_int(file, path, v, "interval_s", 1, 86400, &c->retention_interval_s, err) < 0)
        return -1;
    return 0;
}

const struct eai_cfg_section eai_cfg_sections[] = {
    {"data_dir", 0, sect_data_dir},
    {"server", 1, sect_server},
    {"ops", 1, sect_ops},
    {"images", 1, sect_images},
    {"plugins", 1, sect_plugins},
    {"log", 1, sect_log},
    {"auth", 1, sect_auth},
    {"finops", 1, sect_finops},
    {"audit", 1, sect_audit},
    {"telemetry", 1, sect_telemetry},
    {"storage", 1, sect_storage},
    {"scheduler", 1, sect_scheduler},
    {"node", 1, sect_node},
    {"limits", 1, sect_limits},
    {"sandbox", 1, sect_sandbox},
    {"collect", 1, sect_collect},
    {"files", 1, sect_files},
    {"sessions", 1, sect_sessions},
    {"volumes", 1, sect_volumes},
    {"network", 1, sect_network},
    {"isolation", 1, sect_isolation},
    {"callbacks", 1, sect_callbacks},
    {"quotas", 1, sect_quotas},
    {"retention", 1, sect_retention},
    {"profiles", 0, sect_profiles}, /* its own "expected a mapping" */
    {NULL, 0, NULL},
};

const struct eai_cfg_section *eai_cfg_section(const char *name)
{
    for (const struct eai_cfg_section *s = eai_cfg_sections; s->name; s++)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}
