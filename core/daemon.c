/*
 * Application start and stop (docs/architecture.md, "Start and stop").
 *
 * start: config -> data dir + pepper -> loop, workers, host -> storage
 *        (built-in sqlite, or the postgres plugin) -> contracts -> isolation
 *        backends (each failure logged; the backend is then missing and
 *        its profiles answer 503: fail closed) -> profiles -> executions
 *        -> delivery, telemetry -> HTTP server.
 * stop:  stop accepting -> executions (answers parked long-polls) ->
 *        drain requests (bounded) -> delivery, telemetry -> server ->
 *        isolation -> workers -> storage -> host.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon.h"
#include "http/ops_access.h"
#include "net/egress_host.h"
#include "base/dirlock.h"
#include "http/auth.h"
#include "config/config.h"
#include "config/config_check.h"
#include "obs/delivery.h"
#include "base/errors.h"
#include "exec/exec.h"
#include "exec/budget.h"
#include "mcp/mcp.h"
#include "session/session.h"
#include "vol/volume.h"
#include "exec/quota.h"
#include "exec/retention.h"
#include "plugin/host.h"
#include "schema/jsonschema.h"
#include "plugin/loader.h"
#include "plugin/open.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "obs/obs_app.h"
#include "obs/telemetry.h"
#include "http/server.h"
#include "store/store_sqlite.h"
#include "base/util.h"
#include "base/worker.h"

#define APP_COMPONENT "app"
#define APP_DRAIN_MS 5000

/* An isolation backend named in the config could not be loaded: say why
 * once and keep the reason for /readyz (app->iso_failures). */
static void iso_fail(struct eai_app *app, const char *name, const char *reason)
{
    eai_log(APP_COMPONENT, EAI_LOG_ERROR, "isolation backend '%s' unavailable (fail closed): %s", name, reason);
    if (app->iso_failures)
        json_object_set_new(app->iso_failures, name, json_string(reason));
}

/* ------------------------------------------------------------ paths */

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *eai_app_contracts_dir(void)
{
    static char dir[PATH_MAX];
    const char *env = secure_getenv("EAI_CONTRACTS_DIR");
    if (env && *env)
        return env;
    if (dir[0])
        return dir;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        const char *rel[] = {"../contracts/v1", "contracts/v1", "../share/eai/contracts/v1", "../../contracts/v1"};
        for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
            snprintf(dir, sizeof(dir), "%s/%s", exe, rel[i]);
            if (is_dir(dir))
                return dir;
        }
    }
#ifdef EAI_SOURCE_DIR
    snprintf(dir, sizeof(dir), "%s/contracts/v1", EAI_SOURCE_DIR);
#else
    snprintf(dir, sizeof(dir), "contracts/v1");
#endif
    return dir;
}

/* The data dir holds every tenant's outputs, files, env and stdin: refuse
 * one that group or others may read, write or enter.  The pepper may be
 * group-readable only by eaid's own group (a Kubernetes secret mounted with
 * fsGroup gets g+rx), never group-writable nor open to others. */
int eai_app_check_private(const char *what, const char *path, int is_dir, struct eai_error **err)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        int e = errno;
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, e, "%s %s: %s", what, path, strerror(e)));
        return -1;
    }
    /* a file: group read/execute is tolerated for eaid's own group only
     * (kubelet gives a secret mounted with fsGroup g+rx) */
    mode_t open_bits = st.st_mode & (is_dir ? 077 : 027);
    if (!is_dir && st.st_gid != getegid())
        open_bits |= st.st_mode & 050;
    if (is_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, 0, "%s %s is not a %s", what, path,
                                               is_dir ? "directory" : "regular file"));
        return -1;
    }
    if (open_bits) {
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, 0,
            "%s %s has mode %04o: group or others may access it (refusing to start; "
            "fix with: chmod %s '%s')", what, path, (unsigned)(st.st_mode & 07777),
            is_dir ? "700" : "600", path));
        return -1;
    }
    return 0;
}

int eai_app_prepare_data_dir(const struct eai_config *cfg, char pepper[65], struct eai_error **err)
{
    if (eai_mkdir_p(cfg->data_dir, 0700) < 0) {
        int e = errno;
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, e, "data dir %s: %s", cfg->data_dir, strerror(e)));
        return -1;
    }
    if (eai_app_check_private("data dir", cfg->data_dir, 1, err) < 0)
        return -1;
    /* the pepper is created only at its default place; a named file
     * (EAI_AUTH_PEPPER_FILE) must exist */
    char def[PATH_MAX];
    snprintf(def, sizeof(def), "%s/pepper", cfg->data_dir);
    int create = strcmp(cfg->pepper_file, def) == 0;
    if (eai_auth_pepper_load(cfg->pepper_file, create, pepper, err) < 0)
        return -1;
    if (eai_app_check_private("pepper file", cfg->pepper_file, 0, err) < 0) {
        explicit_bzero(pepper, 65);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ storage */

/* The storage plugin's config: what core derives (url or path, pool
 * size), then the operator's own storage.* keys. */
static json_t *storage_conf(const struct eai_config *cfg, const char *name,
                            const struct eai_plugin_descriptor *d, struct eai_error **err)
{
    json_t *conf;
    if (strcmp(name, "postgres") == 0) {
        conf = json_pack("{s:s, s:i}", "url", cfg->database_url, "pool_size", cfg->workers);
    } else {
        char path[PATH_MAX];
        if (cfg->database_url && strncmp(cfg->database_url, "sqlite:", 7) == 0)
            snprintf(path, sizeof(path), "%s", cfg->database_url + 7);
        else
            snprintf(path, sizeof(path), "%s/eai.db", cfg->data_dir);
        conf = json_pack("{s:s, s:i}", "path", path, "pool_size", cfg->workers + 1);
    }
    if (!conf) {
        eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    /* keep only keys the backend declares (pool_size is optional) */
    if (d->config_keys && !eai_cfg_plugin_has_key(d->config_keys, "pool_size"))
        json_object_del(conf, "pool_size");
    /* the operator's own storage.* keys win over the derived ones; an
     * unknown one stops start-up below, naming it */
    if (cfg->storage_conf && json_object_update(conf, cfg->storage_conf) < 0) {
        json_decref(conf);
        eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        return NULL;
    }
    return conf;
}

/* The storage plugin cfg names (the built-in SQLite by default) and its
 * config; NULL + *err when it cannot be loaded. */
static const struct eai_plugin_descriptor *storage_load(const struct eai_config *cfg, const char **name,
                                                         json_t **conf, struct eai_error **err)
{
    eai_plugin_register_builtin(eai_builtin_storage_sqlite);
    *name = cfg->storage_backend ? cfg->storage_backend : "sqlite";
    struct eai_error *e = NULL;
    const struct eai_plugin_descriptor *d = eai_plugin_load(cfg->plugin_dir, EAI_KIND_STORAGE, *name, &e);
    if (!d) {
        eai_error_prefix(e, "storage backend '%s'", *name);
        eai_error_propagate(err, e);
        return NULL;
    }
    *conf = storage_conf(cfg, *name, d, err);
    return *conf ? d : NULL;
}

int eai_app_storage_open(const struct eai_config *cfg, const struct eai_host *host,
                         struct eai_plugin_inst *out, struct eai_error **err)
{
    const char *name;
    json_t *conf;
    struct eai_error *e = NULL;
    const struct eai_plugin_descriptor *d = storage_load(cfg, &name, &conf, err);
    if (!d)
        return -1;
    if (eai_cfg_check_plugin(d->config_keys, conf, cfg->source, "/storage", err) < 0) {
        json_decref(conf);
        return -1;
    }
    void *self = NULL;
    struct eai_host *handle = NULL; /* the instance's own host handle */
    int rc = eai_plugin_create(d, host, conf, &self, &handle, &e);
    json_decref(conf);
    if (rc < 0) {
        eai_error_prefix(e, "storage backend '%s'", name);
        eai_error_propagate(err, e);
        return -1;
    }
    out->desc = d;
    out->self = self;
    out->host = handle;
    return 0;
}

void eai_app_storage_close(struct eai_plugin_inst *inst)
{
    eai_plugin_close(inst);
}

/* ------------------------------------------------------------ isolation */

/* An isolation plugin's config: its subtree plus the environment
 * overrides documented in docs/configuration.md.  NULL: out of memory. */
static json_t *isolation_conf(const struct eai_config *cfg, const struct eai_plugin_descriptor *d,
                              const json_t *sub)
{
    json_t *conf = json_deep_copy(sub);
    if (!conf)
        return NULL;
    if (cfg->runsc && eai_cfg_plugin_has_key(d->config_keys, "runsc")) /* EAI_SANDBOX_RUNSC */
        json_object_set_new(conf, "runsc", json_string(cfg->runsc));
    if (cfg->namespace_prefix && eai_cfg_plugin_has_key(d->config_keys, "namespace_prefix") &&
        (secure_getenv("EAI_SANDBOX_NAMESPACE_PREFIX") || !json_object_get(conf, "namespace_prefix")))
        json_object_set_new(conf, "namespace_prefix", json_string(cfg->namespace_prefix));
    return conf;
}

/* An unknown name (no built-in, no eai-isolation-<name>.so) stops start-up
 * naming file, path and key; a backend that exists but cannot be loaded or
 * created fails closed (its profiles answer 503) and eaid starts. */
static int isolation_load(struct eai_app *app, struct eai_error **err)
{
    const struct eai_config *cfg = app->cfg;
    const char *name;
    json_t *sub;
    json_decref(app->iso_failures);
    app->iso_failures = json_object();
    /* one slot per configured backend, allocated once: profiles point into it */
    size_t n = json_object_size(cfg->isolation);
    app->isolation = calloc(n ? n : 1, sizeof *app->isolation);
    if (!app->isolation) {
        json_object_foreach(cfg->isolation, name, sub)
            iso_fail(app, name, "out of memory");
        return 0;
    }
    json_object_foreach(cfg->isolation, name, sub) {
        struct eai_error *e = NULL;
        if (!eai_plugin_exists(cfg->plugin_dir, EAI_KIND_ISOLATION, name))
            return eai_error_set(err, EAI_E_VALIDATION_FAILED,
                                 "config %s: /isolation: key '%s': unknown isolation backend (no built-in of that "
                                 "name and no %s/eai-isolation-%s.so)", cfg->source ? cfg->source : "(defaults)",
                                 name, cfg->plugin_dir, name);
        const struct eai_plugin_descriptor *d = eai_plugin_load(cfg->plugin_dir, EAI_KIND_ISOLATION, name, &e);
        if (!d) {
            iso_fail(app, name, e && e->message ? e->message : "cannot load");
            eai_error_free(e);
            continue;
        }
        json_t *conf = isolation_conf(cfg, d, sub);
        if (!conf) {
            iso_fail(app, name, "out of memory");
            continue;
        }
        char path[128];
        snprintf(path, sizeof(path), "/isolation/%s", name);
        if (eai_cfg_check_plugin(d->config_keys, conf, cfg->source, path, &e) < 0) {
            /* a config mistake is the operator's: refuse to start (a backend
             * that cannot be loaded or created fails closed instead) */
            json_decref(conf);
            eai_error_propagate(err, e);
            return -1;
        }
        void *self = NULL;
        struct eai_host *handle = NULL;
        int rc = eai_plugin_create(d, app->host, conf, &self, &handle, &e);
        json_decref(conf);
        if (rc < 0) {
            iso_fail(app, name, e && e->message ? e->message : "create failed");
            eai_error_free(e);
            continue;
        }
        const struct eai_isolation_ops *ops = d->ops;
        if (ops->sweep)
            ops->sweep(self);
        struct eai_iso_probe p;
        memset(&p, 0, sizeof(p));
        p.size = sizeof(p);
        ops->probe(self, &p);
        p.version[sizeof(p.version) - 1] = '\0';
        p.reason[sizeof(p.reason) - 1] = '\0';
        if (p.ready)
            eai_log(APP_COMPONENT, EAI_LOG_INFO, "isolation backend '%s' ready (%s)", name, p.version);
        else
            eai_log(APP_COMPONENT, EAI_LOG_WARN, "isolation backend '%s' loaded but not ready: %s", name,
                    p.reason[0] ? p.reason : "?");
        app->isolation[app->nisolation].desc = d;
        app->isolation[app->nisolation].self = self;
        app->isolation[app->nisolation].host = handle;
        app->nisolation++;
    }
    return 0;
}

/* Profiles from cfg->profiles (checked and completed by config.c). */
static int profiles_build(struct eai_app *app, struct eai_error **err)
{
    json_t *profiles = app->cfg->profiles;
    size_t n = json_object_size(profiles);
    app->profiles = calloc(n ? n : 1, sizeof(struct eai_profile));
    if (!app->profiles) {
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, ENOMEM, "out of memory"));
        return -1;
    }
    const char *name;
    json_t *p;
    json_object_foreach(profiles, name, p) {
        struct eai_profile *pr = &app->profiles[app->nprofiles];
        struct eai_profile_limits d, m;
        if (eai_cfg_profile_limits(p, &d, &m) < 0) {
            eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, 0, "profile %s: malformed limits", name));
            return -1;
        }
        pr->name = strdup(name);
        pr->backend = strdup(json_string_value(json_object_get(p, "backend")));
        const char *rc = json_string_value(json_object_get(p, "runtime_class"));
        pr->runtime_class = strdup(rc ? rc : pr->backend ? pr->backend : "");
        json_t *eg = json_object_get(p, "egress_allow");
        pr->egress_allow = calloc(json_array_size(eg) + 1, sizeof(char *));
        app->nprofiles++;
        if (!pr->name || !pr->backend || !pr->runtime_class || !pr->egress_allow) {
            eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, ENOMEM, "out of memory"));
            return -1;
        }
        for (size_t i = 0; i < json_array_size(eg); i++)
            if (!(pr->egress_allow[i] = strdup(json_string_value(json_array_get(eg, i))))) {
                eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, ENOMEM, "out of memory"));
                return -1;
            }
        pr->def_cpu_millis = d.cpu_millis;
        pr->max_cpu_millis = m.cpu_millis;
        pr->def_memory = d.memory;
        pr->max_memory = m.memory;
        pr->def_timeout_s = d.timeout_s;
        pr->max_timeout_s = m.timeout_s;
        pr->def_pids = d.pids;
        pr->max_pids = m.pids;
        pr->def_output_bytes = d.output_bytes;
        pr->max_output_bytes = m.output_bytes;
        pr->def_disk = d.disk;
        pr->max_disk = m.disk;
        for (int i = 0; i < app->nisolation; i++)
            if (strcmp(app->isolation[i].desc->name, pr->backend) == 0)
                pr->iso = &app->isolation[i];
        if (!pr->iso)
            eai_log(APP_COMPONENT, EAI_LOG_WARN, "profile '%s': backend '%s' is not loaded: its executions "
                    "are refused with sandbox_unavailable", pr->name, pr->backend);
    }
    return 0;
}

static void profiles_free(struct eai_app *app)
{
    for (int i = 0; i < app->nprofiles; i++) {
        struct eai_profile *p = &app->profiles[i];
        free(p->name);
        free(p->backend);
        free(p->runtime_class);
        for (int k = 0; p->egress_allow && p->egress_allow[k]; k++)
            free(p->egress_allow[k]);
        free(p->egress_allow);
    }
    free(app->profiles);
    app->profiles = NULL;
    app->nprofiles = 0;
}

static int schemas_load(struct eai_app *app, struct eai_error **err)
{
    const char *dir = eai_app_contracts_dir();
    char path[PATH_MAX];
    struct eai_error *e = NULL;
    snprintf(path, sizeof(path), "%s/sandbox-execution.schema.json", dir);
    app->schema_execution = eai_schema_load_file(path, &e);
    if (!app->schema_execution)
        goto fail;
    snprintf(path, sizeof(path), "%s/tool-manifest.schema.json", dir);
    app->schema_tool_manifest = eai_schema_load_file(path, &e);
    if (!app->schema_tool_manifest)
        goto fail;
    return 0;
fail:
    if (!e)
        e = eai_error_new(EAI_E_INTERNAL, 0, "cannot load");
    eai_error_prefix(e, "contract %s (set EAI_CONTRACTS_DIR)", path);
    eai_error_propagate(err, e);
    return -1;
}

/* ------------------------------------------------------------ start / stop */

static int started_exec, started_delivery, started_telemetry, started_server, started_workers;
static int data_dir_lock = -1; /* flock on <data_dir>/eaid.lock (base/dirlock.c) */

int eai_app_start(struct eai_app *app, struct event_base *base, struct eai_config *cfg, struct eai_error **err)
{
    app->base = base;
    app->cfg = cfg;
    eai_log_set_level((enum eai_log_level)eai_log_level_parse(cfg->log_level));
    eai_obs_describe_metrics();
    if (eai_app_prepare_data_dir(cfg, app->pepper, err) < 0)
        goto fail;
    if (eai_dir_lock(cfg->data_dir, &data_dir_lock, err) < 0)
        goto fail;
    if (eai_ops_token_load(app, cfg, err) < 0)
        goto fail;
    if (eai_workers_start(base, cfg->workers) < 0) {
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, errno, "cannot start %d workers", cfg->workers));
        goto fail;
    }
    started_workers = 1;
    app->host = eai_host_new(base, cfg->data_dir);
    if (!app->host) {
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, ENOMEM, "out of memory"));
        goto fail;
    }
    eai_host_set_image_dir(app->host, cfg->image_dir);
    if (eai_app_storage_open(cfg, app->host, &app->storage, err) < 0)
        goto fail;
    app->store = app->storage.desc->ops;
    if (strcmp(cfg->storage_backend, "sqlite") == 0) {
        struct eai_error *e = NULL;
        if (app->store->migrate(app->storage.self, NULL, &e) < 0) {
            eai_error_prefix(e, "embedded schema");
            eai_error_propagate(err, e);
            goto fail;
        }
    }
    {
        struct eai_error *e = NULL;
        int prc = app->store->ping(app->storage.self, &e);
        if (prc < 0 && e && e->code == EAI_E_FORBIDDEN) {
            /* reachable but unsafe to serve from (e.g. a PostgreSQL role
             * that bypasses row-level security): refuse to start */
            eai_error_prefix(e, "storage");
            eai_error_propagate(err, e);
            goto fail;
        } else if (prc < 0) {
            /* not fatal: /readyz says so and requests answer 503 */
            eai_log(APP_COMPONENT, EAI_LOG_WARN, "storage not reachable at start: %s",
                    e && e->message ? e->message : "?");
            eai_error_free(e);
        }
    }
    if (schemas_load(app, err) < 0)
        goto fail;
    if (isolation_load(app, err) < 0)
        goto fail;
    if (profiles_build(app, err) < 0)
        goto fail;
    if (eai_vols_start(app, err) < 0) /* vol/volume.c: this node's volumes, mounted */
        goto fail;
    app->egress = eai_egress_host_start(app); /* NULL: granted egress is refused on local backends */
    eai_host_set_egress(app->host, app->egress); /* the warm pool for egress (host->netns_take) */
    eai_obs_app_metrics(app);
    /* the node budget executions and sessions share (docs/admission.md) */
    if (!app->budget && !(app->budget = eai_budget_from_config(cfg, err)))
        goto fail;
    if (eai_exec_start(app, err) < 0)
        goto fail;
    started_exec = 1;
    if (eai_sessions_start(app, err) < 0)
        goto fail;
    if (eai_delivery_start(app, err) < 0)
        goto fail;
    started_delivery = 1;
    eai_retention_start(app); /* retention.executions_days (exec/retention.c) */
    eai_quota_log_start(app);
    if (eai_telemetry_start(app, err) < 0)
        goto fail;
    started_telemetry = 1;
    if (eai_server_start(app, err) < 0)
        goto fail;
    started_server = 1;
    /* what tells replicas apart in their logs, and whether they share the
     * pepper (a fingerprint: the first 12 hex of sha256(pepper), never the
     * pepper itself) */
    char fp[65];
    eai_sha256_hex(app->pepper, strlen(app->pepper), fp);
    fp[12] = '\0';
    eai_log(APP_COMPONENT, EAI_LOG_INFO,
            "eaid %s started: node id %s, data dir %s, storage %s, pepper %s (fingerprint %s), config %s",
            EAI_VERSION, app->host->node_id, cfg->data_dir, cfg->storage_backend, cfg->pepper_file, fp,
            cfg->source);
    return 0;
fail:
    eai_app_stop(app);
    return -1;
}

void eai_app_stop(struct eai_app *app)
{
    app->shutting_down = 1;
    if (started_server)
        eai_server_stop_accepting(app);
    eai_sessions_stop(app);
    eai_retention_stop(app);
    if (started_exec) {
        eai_exec_stop(app);
        started_exec = 0;
    }
    eai_mcp_stop(); /* its calls' requests answered before the server stops */
    if (started_delivery) {
        eai_delivery_stop(app);
        started_delivery = 0;
    }
    if (started_telemetry) {
        eai_telemetry_stop(app);
        started_telemetry = 0;
    }
    if (started_server) {
        eai_server_stop(app);
        started_server = 0;
    }
    for (int i = app->nisolation - 1; i >= 0; i--)
        eai_plugin_close(&app->isolation[i]);
    eai_sessions_free(app); /* no backend callback can come any more */
    eai_vols_stop(app);     /* the sandboxes are gone: the volumes are unmounted */
    app->nisolation = 0;
    /* after the backends: their sandboxes are gone, so are the namespaces */
    eai_host_set_egress(app->host, NULL);
    eai_egress_host_stop(app->egress);
    app->egress = NULL;
    free(app->isolation);
    app->isolation = NULL;
    json_decref(app->iso_failures);
    app->iso_failures = NULL;
    if (started_workers) {
        eai_workers_stop();
        started_workers = 0;
    }
    eai_app_storage_close(&app->storage);
    app->store = NULL;
    profiles_free(app);
    /* last: no run or session gives anything back any more */
    eai_budget_free(app->budget);
    app->budget = NULL;
    eai_schema_free(app->schema_execution);
    eai_schema_free(app->schema_tool_manifest);
    app->schema_execution = app->schema_tool_manifest = NULL;
    eai_host_free(app->host);
    app->host = NULL;
    explicit_bzero(app->pepper, sizeof(app->pepper));
    eai_dir_unlock(data_dir_lock);
    data_dir_lock = -1;
}

/* ------------------------------------------------------------ serve */

struct serve_state {
    struct eai_app *app;
    struct event *drain;
    int64_t deadline_ms;
    int signals;
    struct event *exec_drain;       /* server.drain_s: waits for the running executions */
    int64_t exec_deadline_ms;
};

static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
    struct serve_state *st = arg;
    /* open requests, and the ends of the sessions the stop destroyed (their
     * usage is read from their sandboxes' cgroups as they go) */
    int sessions = eai_sessions_ending(st->app);
    if ((eai_server_inflight(st->app) == 0 && sessions == 0) || eai_now_ms() >= st->deadline_ms) {
        if (eai_server_inflight(st->app) > 0)
            eai_log(APP_COMPONENT, EAI_LOG_WARN, "%lld request(s) still open after %d ms: closing them",
                    (long long)eai_server_inflight(st->app), APP_DRAIN_MS);
        if (sessions > 0)
            eai_log(APP_COMPONENT, EAI_LOG_WARN, "%d session(s) not ended after %d ms: billed as partial",
                    sessions, APP_DRAIN_MS);
        eai_sessions_stop(st->app);
        event_base_loopbreak(st->app->base);
        return;
    }
    struct timeval t = {0, 50 * 1000};
    event_add(st->drain, &t);
}

/* Stop: no new connections, executions still running are ended and
 * recorded as interrupted, open requests get APP_DRAIN_MS. */
static void stop_serving(struct serve_state *st)
{
    st->app->shutting_down = 1;
    eai_server_stop_accepting(st->app);
    eai_sessions_begin_stop(st->app);
    if (started_exec) {
        eai_exec_stop(st->app);
        started_exec = 0;
    }
    st->deadline_ms = eai_now_ms() + APP_DRAIN_MS;
    drain_cb(-1, 0, st);
}

/* The drain of executions: every 100 ms, until none runs here or
 * server.drain_s passed. */
static void exec_drain_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct serve_state *st = arg;
    int busy = eai_exec_busy(st->app);
    if (busy && eai_now_ms() < st->exec_deadline_ms) {
        struct timeval t = {0, 100 * 1000};
        event_add(st->exec_drain, &t);
        return;
    }
    if (busy)
        eai_log(APP_COMPONENT, EAI_LOG_WARN, "drain: %d execution(s) still running after %d s: ending them",
                eai_exec_running(st->app), st->app->cfg->drain_s);
    else
        eai_log(APP_COMPONENT, EAI_LOG_INFO, "drain: no execution running here any more");
    stop_serving(st);
}

static void signal_cb(evutil_socket_t sig, short what, void *arg)
{
    struct serve_state *st = arg;
    (void)what;
    if (++st->signals > 1) {
        eai_log(APP_COMPONENT, EAI_LOG_WARN, "second signal: stopping now");
        event_base_loopbreak(st->app->base);
        return;
    }
    int drain_s = st->app->cfg ? st->app->cfg->drain_s : 0;
    if (drain_s > 0 && started_exec && st->exec_drain) {
        /* stop taking work (POST 503 shutting_down, /readyz draining, no
         * claims); running executions end on their own for up to drain_s */
        eai_log(APP_COMPONENT, EAI_LOG_INFO,
                "signal %d: draining (%d execution(s) running here, up to %d s; a second signal stops now)",
                (int)sig, eai_exec_running(st->app), drain_s);
        st->app->draining = 1;
        eai_exec_drain(st->app);
        st->exec_deadline_ms = eai_now_ms() + (int64_t)drain_s * 1000;
        exec_drain_cb(-1, 0, st);
        return;
    }
    eai_log(APP_COMPONENT, EAI_LOG_INFO, "signal %d: stopping (no new connections, draining)", (int)sig);
    stop_serving(st);
}

/* Descriptors: the soft limit up to the hard one, what the host allows
 * (often 1024 of 524288): the HTTP server, the egress gateway (~6 a
 * connection) and the sandboxes' pipes budget below it (configuration.md). */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        eai_log(APP_COMPONENT, EAI_LOG_INFO, "descriptor limit raised from %llu to %llu", (unsigned long long)was,
                (unsigned long long)rl.rlim_cur);
}

int eai_app_serve(const char *config_file)
{
    struct eai_error *err = NULL;
    struct eai_config *cfg = eai_config_load(config_file, &err);
    if (!cfg) {
        fprintf(stderr, "eaid: %s\n", err && err->message ? err->message : "cannot load the configuration");
        eai_error_free(err);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    struct event_base *base = event_base_new();
    if (!base) {
        fprintf(stderr, "eaid: cannot create the event loop\n");
        eai_config_free(cfg);
        return 1;
    }
    struct eai_app app;
    memset(&app, 0, sizeof(app));
    if (eai_app_start(&app, base, cfg, &err) < 0) {
        eai_log(APP_COMPONENT, EAI_LOG_ERROR, "start failed: %s", err && err->message ? err->message : "?");
        fprintf(stderr, "eaid: %s\n", err && err->message ? err->message : "start failed");
        eai_error_free(err);
        event_base_free(base);
        eai_config_free(cfg);
        return 1;
    }
    struct serve_state st = {.app = &app};
    st.drain = evtimer_new(base, drain_cb, &st);
    st.exec_drain = evtimer_new(base, exec_drain_cb, &st);
    struct event *sterm = evsignal_new(base, SIGTERM, signal_cb, &st);
    struct event *sint = evsignal_new(base, SIGINT, signal_cb, &st);
    if (!st.drain || !sterm || !sint || event_add(sterm, NULL) < 0 || event_add(sint, NULL) < 0) {
        eai_log(APP_COMPONENT, EAI_LOG_ERROR, "cannot install signal handlers");
    } else {
        event_base_dispatch(base);
    }
    eai_app_stop(&app);
    if (st.drain)
        event_free(st.drain);
    if (st.exec_drain)
        event_free(st.exec_drain);
    if (sterm)
        event_free(sterm);
    if (sint)
        event_free(sint);
    event_base_free(base);
    eai_config_free(cfg);
    eai_log(APP_COMPONENT, EAI_LOG_INFO, "stopped");
    return 0;
}

/* ------------------------------------------------------------ config check */

/* One plugin-backed section: load the plugin named, check conf against its
 * keys, create nothing.  Prints one line per section to out. */
static int check_one(FILE *out, const struct eai_config *cfg, enum eai_plugin_kind kind, const char *name,
                     json_t *conf, const char *path, const char *what, struct eai_error **err)
{
    const char *dir = cfg->plugin_dir ? cfg->plugin_dir : eai_plugin_dir();
    const struct eai_plugin_descriptor *d =
        eai_plugin_check_conf(dir, kind, name, conf, cfg->source, path, "backend", err);
    json_decref(conf);
    if (!d) {
        if (what && err && *err) /* as start-up says it */
            eai_error_prefix(*err, "%s", what);
        return -1;
    }
    fprintf(out, "%s: %s backend '%s' (ABI %u.%u): keys ok\n", path, eai_kind_name(kind), name,
            (unsigned)d->abi_major, (unsigned)d->abi_minor);
    return 0;
}

int eai_app_check_config(const struct eai_config *cfg, FILE *out, struct eai_error **err)
{
    const char *sname;
    json_t *conf;
    struct eai_error *e = NULL;
    const struct eai_plugin_descriptor *d = storage_load(cfg, &sname, &conf, err);
    if (!d || check_one(out, cfg, EAI_KIND_STORAGE, sname, conf, "/storage", NULL, err) < 0)
        return -1;
    /* isolation: an unknown name or key is the operator's mistake */
    const char *name;
    json_t *sub;
    json_object_foreach(cfg->isolation, name, sub) {
        char path[128];
        snprintf(path, sizeof(path), "/isolation/%s", name);
        if (!eai_plugin_exists(cfg->plugin_dir, EAI_KIND_ISOLATION, name))
            return eai_error_set(err, EAI_E_VALIDATION_FAILED,
                                 "config %s: /isolation: key '%s': unknown isolation backend (no built-in of that "
                                 "name and no %s/eai-isolation-%s.so)", cfg->source ? cfg->source : "(defaults)",
                                 name, cfg->plugin_dir, name);
        d = eai_plugin_load(cfg->plugin_dir, EAI_KIND_ISOLATION, name, &e);
        if (!d) {
            /* at start this backend fails closed; say so, do not stop */
            fprintf(out, "%s: isolation backend '%s' cannot be loaded (its profiles would answer 503): %s\n",
                    path, name, e && e->message ? e->message : "?");
            eai_error_free(e);
            e = NULL;
            continue;
        }
        conf = isolation_conf(cfg, d, sub);
        if (!conf)
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        if (check_one(out, cfg, EAI_KIND_ISOLATION, name, conf, path, NULL, err) < 0)
            return -1;
    }
    /* audit, FinOps, telemetry: only a plugin-backed choice has keys to check */
    static const struct { enum eai_plugin_kind kind; const char *path, *what; } sinks[] = {
        {EAI_KIND_FINOPS, "/finops", EAI_DELIVERY_FINOPS_WHAT}, {EAI_KIND_AUDIT, "/audit", EAI_DELIVERY_AUDIT_WHAT}};
    for (size_t i = 0; i < sizeof(sinks) / sizeof(sinks[0]); i++) {
        if (eai_delivery_sink_conf(cfg, sinks[i].kind, &name, &conf, err) < 0)
            return -1;
        if (!conf)
            fprintf(out, "%s: in-process fallback\n", sinks[i].path);
        else if (check_one(out, cfg, sinks[i].kind, name, conf, sinks[i].path, sinks[i].what, err) < 0)
            return -1;
    }
    if (eai_telemetry_conf(cfg, &name, &conf, err) < 0)
        return -1;
    if (!conf)
        fprintf(out, "/telemetry: in-process fallback (spans to the debug log)\n");
    else if (check_one(out, cfg, EAI_KIND_TELEMETRY, name, conf, "/telemetry", EAI_TELEMETRY_WHAT, err) < 0)
        return -1;
    return 0;
}
