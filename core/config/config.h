/*
 * Configuration: built-in defaults (DESIGN.md section 6), then the YAML
 * file (--config), then environment variables.  Parsed once, immutable
 * after start.  docs/configuration.md lists every key.
 */
#ifndef EAI_CORE_CONFIG_H
#define EAI_CORE_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <eai/plugin.h>

/* The in-process fallback of each delivery/telemetry kind, by name. */
#define EAI_CFG_AUDIT_FALLBACK "storage"
#define EAI_CFG_FINOPS_FALLBACK "ledger"
#define EAI_CFG_TELEMETRY_FALLBACK "log"

/* auth.jwt (config/jwt_cfg.c; docs/auth.md "Gateway tokens") */
#define EAI_JWT_MAX_AUDIENCES 8
#define EAI_JWT_RS256 1u          /* the algs a token may use (http/jwt.h) */
#define EAI_JWT_ES256 2u
#define EAI_JWT_EDDSA 4u
struct eai_jwt_cfg {
    char *jwks_file;           /* exactly one of jwks_file and jwks_url */
    char *jwks_url;
    int refresh_s;             /* 300: the key set read again (file) or fetched again (URL) */
    char *issuer;              /* required */
    char *audiences[EAI_JWT_MAX_AUDIENCES];
    int n_audiences;           /* >= 1 */
    unsigned algs;             /* EAI_JWT_* (http/jwt.h); default all three */
    int skew_s;                /* 60 */
    int64_t max_bytes;         /* 8192 */
    char *tenant_claim;        /* "tenant_id" */
    char *project_claim;       /* "project_id" */
    char *agent_claim;         /* "agent_id" */
    int create_tenants;        /* 0: an unknown tenant is refused */
};
void eai_cfg_jwt_free(struct eai_jwt_cfg *j);

#define EAI_NODE_TENANT_SHARES_MAX 10000 /* node.tenant_shares entries */

struct eai_config {
    char *listen;              /* "127.0.0.1:8080"          (server.listen, EAI_LISTEN) */
    char *data_dir;            /* "./var" made absolute      (data_dir, EAI_DATA_DIR) */
    char *image_dir;           /* <data_dir>/images          (images.dir, EAI_IMAGE_DIR) */
    char *plugin_dir;          /* next to the executable     (plugins.dir, EAI_PLUGIN_DIR) */
    char *log_level;           /* "info"                     (log.level, EAI_LOG_LEVEL) */

    /* server */
    size_t max_body_bytes;     /* 10 MiB                      (server.max_body_bytes) */
    size_t max_header_bytes;   /* 16 KiB                      (server.max_header_bytes) */
    int max_connections;       /* 1024                        (server.max_connections) */
    int max_unauth_connections;/* -1: max_connections / 2; 0: none (server.max_unauthenticated_connections) */
    int request_timeout_s;     /* 75 (> 60 s long-poll)       (server.request_timeout_s) */
    int read_timeout_s;        /* 60: a whole request in      (server.read_timeout_s) */
    int drain_s;               /* 30: SIGTERM lets running executions end (server.drain_s) */
    char *tls_cert;            /* NULL: plain HTTP            (server.tls.cert) */
    char *tls_key;             /*                             (server.tls.key) */
    char *tls_client_ca;       /* NULL: no client certificate (server.tls.client_ca) */

    /* operator endpoints (/metrics, /readyz details): http/ops_access.h */
    int ops_access;            /* EAI_OPS_LOOPBACK            (ops.access) */
    char *ops_token_file;      /* NULL                        (ops.token_file, EAI_OPS_TOKEN_FILE) */

    /* storage */
    char *storage_backend;     /* "sqlite" | "postgres"      (derived from storage.url) */
    char *database_url;        /* NULL: <data_dir>/eai.db    (storage.url, EAI_DATABASE_URL) */
    int workers;               /* 8                           (storage.workers) */
    json_t *storage_conf;      /* other storage.* keys, for the plugin (NULL: none) */

    /* scheduler */
    int max_concurrent;        /* 8                           (scheduler.max_concurrent) */
    int max_per_tenant;        /* 4                           (scheduler.max_per_tenant) */
    int max_queued_per_tenant; /* 1000                        (scheduler.max_queued_per_tenant) */
    int64_t lease_ms;          /* 30000                       (scheduler.lease_ms) */

    /* per-tenant bounds on what reads hold open (issue 16.3); 0: none */
    int max_polls_per_tenant;   /* 64                         (limits.max_polls_per_tenant) */
    int max_streams_per_tenant; /* 16                         (limits.max_streams_per_tenant) */
    int max_connections_per_tenant; /* 256                    (limits.max_connections_per_tenant) */
    int64_t sse_buffer_bytes;   /* 256Ki                      (limits.sse_buffer_bytes) */

    /* auth */
    char *pepper_file;         /* <data_dir>/pepper           (auth.pepper_file, EAI_AUTH_PEPPER_FILE) */
    int auth_cache_ttl_ms;     /* 2000, 0 = off               (auth.cache_ttl_ms) */
    int api_keys;              /* 1                           (auth.api_keys: false = gateway tokens only) */
    struct eai_jwt_cfg *jwt;   /* NULL: off                   (auth.jwt, config/jwt_cfg.c) */

    /* integrations: NULL or "" selects the in-process fallback */
    char *finops_url;          /* (finops.url, EAI_FINOPS_URL) */
    char *audit_url;           /* (audit.url, EAI_AUDIT_URL) */
    char *otlp_endpoint;       /* (telemetry.otlp_endpoint, OTEL_EXPORTER_OTLP_ENDPOINT) */
    /* backends by name (audit.backend, finops.backend, telemetry.backend;
     * EAI_AUDIT_BACKEND, EAI_FINOPS_BACKEND, EAI_TELEMETRY_BACKEND), never
     * NULL after load: the default is "http" ("otlp" for telemetry) when
     * the URL is set, else the in-process fallback "storage" (audit chain
     * kept in storage only), "ledger" (FinOps) or "log" (spans to the debug
     * log).  Unknown names stop start-up (docs/configuration.md). */
    char *audit_backend, *finops_backend, *telemetry_backend;
    /* the rest of each section (without backend and the URL key): handed
     * to the plugin, checked against its config keys at start */
    json_t *audit_conf, *finops_conf, *telemetry_conf;

    /* isolation backends: plugin name -> config subtree (JSON object) */
    json_t *isolation;         /* isolation.<name>: {...}; default {"gvisor": {}} */
    char *namespace_prefix;    /* "eai-" (EAI_SANDBOX_NAMESPACE_PREFIX), handed to k8s */
    char *runsc;               /* EAI_SANDBOX_RUNSC, handed to gvisor as "runsc" */

    /* profiles: name -> object (backend, runtime_class, defaults{}, max{}, egress_allow[]) */
    json_t *profiles;

    /* limits on collected files (per execution) */
    int64_t collect_max_files;       /* 64 */
    int64_t collect_max_file_bytes;  /* 10 MiB */
    int64_t collect_max_total_bytes; /* 32 MiB */
    int64_t files_max_total_bytes;   /* 8 MiB of input files */

    /* completion callbacks (docs/configuration.md, callbacks) */
    json_t *callbacks_allow;         /* NULL or [] : any public address */
    int64_t callbacks_timeout_ms;    /* 10000: one POST */
    int64_t callbacks_backoff_cap_ms;/* 300000: longest wait between attempts */
    int64_t callbacks_max_attempts;  /* 30: then the event is dropped (state gave_up) */
    char *callbacks_proxy;           /* NULL: none ("http://host:port": callbacks go through it) */
    /* the node budget (docs/admission.md): 0 = the host's (budget.c) */
    int64_t node_memory_budget;         /* 0     bytes executions and sessions may reserve (node.memory_budget) */
    int64_t node_cpu_budget;            /* 0     millicores they may reserve (node.cpu_budget) */
    int node_tenant_share;              /* 500   per mille of each one tenant may hold (node.tenant_share 0.5) */
    json_t *node_tenant_shares;         /* NULL  tenant id -> its own per mille (node.tenant_shares) */
    /* sessions (docs/sessions.md) */
    int sessions_max_per_tenant;        /* 10    live sessions of one tenant (sessions.max_per_tenant) */
    int sessions_max_concurrent;        /* 4     most executions at once a session may ask for */
    int64_t sessions_idle_timeout_s;    /* 300   default idle timeout (sessions.idle_timeout_s) */
    int64_t sessions_max_idle_timeout_s;/* 3600 */
    int64_t sessions_ttl_s;             /* 3600  default hard TTL (sessions.ttl_s) */
    int64_t sessions_max_ttl_s;         /* 86400 */
    int64_t sessions_paused_ttl_s;      /* 86400 a paused session's own TTL (sessions.paused_ttl_s) */
    int64_t sessions_max_paused_ttl_s;  /* 604800 */
    int64_t sessions_checkpoint_quota;  /* 8Gi   checkpoint bytes of one tenant's paused sessions */
    int64_t sessions_min_free_bytes;    /* 1Gi   free space kept on the data disk (pause refused below) */
    int sessions_pause_per_minute;      /* 30    pauses + resumes of one session per minute */
    char *sessions_advertise_url;       /* NULL  this node's URL for the other replicas
                                           (sessions.advertise_url, EAI_ADVERTISE_URL): calls on
                                           its sessions reaching another replica are forwarded */
    int sessions_tenant_pause_per_minute; /* 120 of one tenant's sessions together */
    char *sessions_handoff_dir;         /* NULL  a directory every replica mounts (sessions.handoff_dir,
                                           EAI_SESSIONS_HANDOFF_DIR): an idle-paused session is parked
                                           there and resumed by whichever replica a call reaches */
    /* snapshots and forks (docs/sessions.md "Snapshots and forks") */
    int sessions_snapshots_max_per_tenant; /* 20 snapshots one tenant keeps on this node */
    int64_t sessions_snapshot_quota;      /* 8Gi  their bytes together */
    int64_t sessions_snapshot_ttl_s;      /* 604800 default retention */
    int64_t sessions_max_snapshot_ttl_s;  /* 2592000 its bound */
    int sessions_fork_max_count;          /* 10 sessions one fork request may create */
    /* volumes (docs/volumes.md) */
    int64_t volumes_max_bytes;          /* 10Gi  largest volume (volumes.max_bytes) */
    int volumes_max_per_tenant;         /* 16    volumes of one tenant (volumes.max_per_tenant) */
    int64_t volumes_max_total_bytes;    /* 64Gi  their sizes together (volumes.max_total_bytes_per_tenant) */
    int64_t volumes_usage_period_s;     /* 3600  a usage event per volume this often (volumes.usage_period_s) */
    /* network: egress of local sandboxes (docs/egress.md) */
    char *net_resolver;        /* "ip[:port]" eaid resolves allowed names with; NULL = /etc/resolv.conf */
    char *net_pool;            /* per-execution /30 slots: "10.213.0.0/16" */
    char *net_synthetic;       /* synthetic DNS answers: "198.51.100.0/24" */
    char *net_prefix;          /* 4 letters naming namespaces, veths, nft table: "eaix" */
    int64_t net_max_connections;       /* per execution, open at once: 32 */
    int64_t net_max_connections_tenant;/* one tenant's executions together, open at once: 256 (0: none) */
    int64_t net_max_connections_node;  /* every execution together: 0 = from eaid's descriptor limit */
    int64_t net_max_bytes;             /* per execution, both directions: 1 GiB */
    int64_t net_idle_timeout_s;        /* 60 */
    int64_t net_spare;                 /* namespaces made ahead: 2 */
    /* per-tenant quotas (0 = off; docs/configuration.md, "Quotas and retention") */
    int64_t quota_executions;        /* executions created per window (quotas.executions_per_window) */
    int64_t quota_window_s;          /* 3600 (quotas.window_s) */
    int64_t quota_stored_bytes;      /* execution documents + files + manifests (quotas.stored_bytes) */
    int64_t quota_manifests;         /* manifests (quotas.manifests) */
    /* retention (0 = keep forever) */
    int64_t retention_executions_days; /* (retention.executions_days) */
    int64_t retention_interval_s;      /* 3600 (retention.interval_s): how often the prune runs */

    char *source;              /* file the config came from, or "(defaults)" */
};

/* Defaults, then file (may be NULL), then env.  NULL + *err naming file,
 * path and key on an unknown key, a wrong type or a missing key. */
struct eai_config *eai_config_load(const char *file, struct eai_error **err);
void eai_config_free(struct eai_config *c);

#endif
