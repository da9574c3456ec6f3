/* The application context shared by the server, the routes, the
 * scheduler and the delivery loops.  One per eaid process, loop thread.
 * Types and two lookups only: no .c file, so every module may include it
 * without an include circle (core/daemon.c starts and stops it). */
#ifndef EAI_CORE_APP_H
#define EAI_CORE_APP_H

#include <stdint.h>
#include <string.h>
#include <jansson.h>

#include <eai/isolation.h>
#include <eai/plugin.h>
#include <eai/sinks.h>
#include <eai/storage.h>

struct event_base;
struct evhttp;
struct eai_config;
struct eai_schema;
struct eai_exec;
struct eai_dlv;
struct eai_sessions;
struct eai_egress_host;

/* A loaded plugin instance.  desc is the loader's normalised copy (ops
 * of today's size, NULL where the plugin lacks an op); host is the
 * instance's own handle (core/plugin/host.h), NULL when made without one. */
struct eai_plugin_inst {
    const struct eai_plugin_descriptor *desc;
    void *self;
    struct eai_host *host;
};

/* A profile (config: profiles.<name>), immutable after start. */
struct eai_profile {
    char *name;
    char *backend;             /* isolation plugin name: "gvisor", "kata", "k8s" */
    char *runtime_class;       /* "gvisor", "kata" */
    /* defaults and maxima */
    int64_t def_cpu_millis, max_cpu_millis;
    int64_t def_memory, max_memory;
    int64_t def_timeout_s, max_timeout_s;
    int64_t def_pids, max_pids;
    int64_t def_output_bytes, max_output_bytes;
    int64_t def_disk, max_disk;
    char **egress_allow;       /* NULL-terminated "host:port" */
    struct eai_plugin_inst *iso; /* the backend instance (shared between profiles) */
};

struct eai_app {
    struct event_base *base;
    struct eai_host *host;
    struct eai_config *cfg;
    struct evhttp *http;

    struct eai_plugin_inst storage;
    const struct eai_storage_ops *store;      /* storage.desc->ops */
    struct eai_plugin_inst *isolation;        /* loaded isolation backends (one slot per configured) */
    int nisolation;
    json_t *iso_failures;                     /* name -> why a configured backend is not loaded */
    struct eai_plugin_inst audit_sink;        /* desc NULL: chain in storage only */
    struct eai_plugin_inst finops;            /* desc NULL: in-process ledger */
    struct eai_plugin_inst telemetry;         /* desc NULL: spans to the debug log */

    struct eai_profile *profiles;
    int nprofiles;

    struct eai_schema *schema_execution;      /* contracts/v1/sandbox-execution.schema.json */
    struct eai_schema *schema_tool_manifest;  /* contracts/v1/tool-manifest.schema.json */

    struct eai_exec *exec;                    /* core/exec/exec.c: scheduler, watch hub, parked requests */
    struct eai_sessions *sessions;            /* core/session/session.c: live sessions of this node */
    struct eai_budget *budget;                /* core/exec/budget.c: the node budget they share */
    struct eai_dlv *delivery;                 /* core/obs/delivery.c: outbox, audit sink */
    struct eai_egress_host *egress;           /* core/net/egress_host.c: NULL when egress is off */
    char pepper[65];                          /* hex HMAC key for API keys */
    char ops_token[256];                      /* http/ops_access.c: "" when none */
    int port;                                 /* the HTTP server's real port once it listens (mcp calls itself there) */
    int shutting_down;
    int draining;                             /* SIGTERM: running executions end, no new ones (server.drain_s) */
};

/* The profile called name, or NULL. */
static inline const struct eai_profile *eai_app_profile(const struct eai_app *app, const char *name)
{
    for (int i = 0; app && name && i < app->nprofiles; i++)
        if (app->profiles[i].name && strcmp(app->profiles[i].name, name) == 0)
            return &app->profiles[i];
    return NULL;
}

/* Why an isolation backend named in the config is not loaded (NULL when
 * it is). */
static inline const char *eai_app_isolation_failure(const struct eai_app *app, const char *name)
{
    return app && name ? json_string_value(json_object_get(app->iso_failures, name)) : NULL;
}

#endif
