/*
 * eai-sandbox plugin ABI: the descriptor every plugin exports, and the host
 * API table handed to create().  A plugin includes only headers from
 * include/eai/ and links against nothing of core (-Wl,--no-undefined).
 *
 * Rules (see docs/plugins.md):
 *  - one exported function per .so: eai_plugin_descriptor();
 *  - the host accepts abi_major == EAI_ABI_MAJOR and abi_minor <= EAI_ABI_MINOR;
 *  - descriptor fields never change order; ops tables start with their own
 *    size and only grow at their end;
 *  - struct_size is sizeof(struct eai_plugin_descriptor) as the plugin saw it.
 *  - every versioned struct has a frozen size per minor (EAI_*_SIZE_1_0,
 *    EAI_*_SIZE_1_1, EAI_*_SIZE_1_2, ...): the loader accepts a plugin's
 *    size from the 1.0 size up to today's, refuses below, and copies the
 *    plugin's ops table into a host-side table of today's size, NULL-filling
 *    what the plugin's minor lacks (call sites test optional ops for NULL).
 *    Whoever reads a field of a struct the other side made tests
 *    `size >= EAI_<STRUCT>_SIZE_1_<minor that added it>` first.
 *  - since 1.1 the descriptor carries a build fingerprint (jansson and
 *    libevent versions, type sizes) compared at load: use
 *    EAI_PLUGIN_DESCRIPTOR_HEADER in the descriptor's initialiser.
 *  - include/eai/abi.lock records every struct's layout per released minor
 *    and the build checks these headers against it (tools/abi_lock.py):
 *    nothing grows without a new minor.  The headers of every released
 *    minor stay, frozen, in include/eai-abi-1.<N>/eai/.
 *
 * What each minor added (docs/plugins.md has the same table):
 *  1.0  the first release.
 *  1.1  eai_plugin_descriptor.build (fingerprint); eai_host.plugin_name,
 *       error_new_h, error_wrap (the per-instance host handle);
 *       eai_storage_ops.audit_heads, exec_claim_excluding, tenant_list,
 *       key_list, key_create_expiring; eai_telemetry_ops.export_metrics;
 *       eai_iso_probe.pending, max_path_bytes, max_name_bytes,
 *       max_input_bytes, max_files, max_env_name_bytes, limit_flags
 *       (EAI_ISO_LIMIT_ENV_NAMES_PORTABLE); eai_iso_result.files_movable.
 *  1.2  eai_host.netns_take, netns_release; eai_isolation_ops.session_create,
 *       session_destroy, session_busy, session_file, session_pause,
 *       session_resume, egress_claim; eai_iso_job.netns_path, dns_server,
 *       session_id; eai_iso_result.stderr_runtime_bytes; the structs
 *       eai_iso_session, eai_iso_session_end, eai_iso_session_callbacks
 *       (with on_paused, on_resumed) and enum eai_iso_file_op;
 *       eai_storage_ops.manifest_list, outbox_append, tenant_usage,
 *       exec_prune; the caps EAI_ISO_CAP_EGRESS_NETNS, EAI_ISO_CAP_EGRESS_POOL.
 *       (All of these were appended after 1.1 was released, some of them
 *       labelled 1.1 or "appended"; 1.2 is where they belong.)
 *  1.3  eai_storage_ops.run_get, run_list, agent_list, agent_get (the
 *       agent view: GET /v1/runs, /v1/agents; docs/api.md).
 *  1.4  eai_host.metric_describe, metric_update (a plugin's own metric
 *       families, struct eai_metric_desc, enum eai_metric_kind);
 *       eai_plugin_descriptor.messages (a plugin's translated messages,
 *       struct eai_message);
 *       eai_storage_ops.session_put, session_get, session_list,
 *       session_owned (stored sessions; docs/sessions.md);
 *       eai_isolation_ops.session_keep, session_adopt, session_drop_kept
 *       (sessions kept across a restart); eai_iso_session.netns_path,
 *       dns_server (egress in sessions); eai_iso_job.stdin_stream and
 *       eai_isolation_ops.stdin_write (streamed stdin), error codes
 *       insufficient_storage, stdin_not_streamed, stdin_closed, stdin_busy.
 *  1.5  (snapshots) eai_isolation_ops.session_snapshot, eai_iso_session.restore_from
 *       (snapshots and forks of a session; docs/sessions.md);
 *       eai_storage_ops.snapshot_put, snapshot_get, snapshot_list,
 *       snapshot_delete, snapshot_owned (their records).
 */
#ifndef EAI_PLUGIN_H
#define EAI_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <jansson.h>
/* libevent's struct event_base crosses the ABI (eai_host.base): record the
 * version of the headers a plugin saw, when it has them. */
#if defined(__has_include)
#if __has_include(<event2/event-config.h>)
#include <event2/event-config.h>
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define EAI_ABI_MAJOR 1
#define EAI_ABI_MINOR 5

#define EAI_PLUGIN_EXPORT __attribute__((visibility("default")))
#define EAI_PLUGIN_DESCRIPTOR_SYMBOL "eai_plugin_descriptor"

enum eai_plugin_kind {
    EAI_KIND_ISOLATION = 0,
    EAI_KIND_STORAGE,
    EAI_KIND_AUDIT,
    EAI_KIND_FINOPS,
    EAI_KIND_TELEMETRY,
    EAI_KIND_MAX
};

/* ---------------------------------------------------------------- errors */

/* Stable error codes of the public API: enum eai_code, generated from the
 * one list include/eai/errcodes.txt (with HTTP status and English/French
 * text; docs/errors.md).  Append only, never reuse or renumber. */
#include "errcodes.h"

/* One error object.  Functions that can fail take `struct eai_error **err`
 * last, return 0 / negative (or pointer / NULL) and touch *err only on
 * failure.  Allocate with host->error_new() or eai_host_error_set() (below); free
 * with host->error_free(). */
struct eai_error {
    enum eai_code code;
    int errno_cause;           /* 0 when none */
    char *message;             /* internal detail, for logs; never sent to clients */
    json_t *details;           /* optional array of {path, message}; may be NULL */
};

/* ---------------------------------------------------------------- host API */

enum eai_log_level { EAI_LOG_DEBUG = 0, EAI_LOG_INFO, EAI_LOG_WARN, EAI_LOG_ERROR, EAI_LOG_MAX };

struct event_base;
struct eai_host;

/* Work run on a worker thread; done() then runs on the loop thread. */
typedef void (*eai_work_fn)(void *arg);
typedef void (*eai_work_done_fn)(void *arg);

/* Asynchronous HTTP (integrations/http_client: one libcurl multi handle on
 * the loop).  Callback runs on the loop thread; status 0 means transport
 * error (errbuf says why). */
struct eai_http_response {
    long status;
    const char *body;
    size_t body_len;
    const char *error;         /* NULL on transport success */
};
typedef void (*eai_http_done_fn)(void *arg, const struct eai_http_response *resp);

struct eai_http_request {
    const char *method;        /* "GET", "POST", "DELETE", ... */
    const char *url;
    const char *const *headers;/* NULL-terminated "Name: value" list, may be NULL */
    const char *body;
    size_t body_len;
    long timeout_ms;           /* 0 = 30000 */
    const char *ca_file;       /* optional CA bundle */
    const char *client_cert;   /* optional PEM client certificate */
    const char *client_key;    /* optional PEM client key */
    int insecure;              /* skip TLS verification (tests only) */
};

/* netns_take() below: the namespace is ready (token set: its bind mount
 * path and the IPv4 address of core's DNS for it) or could not be made
 * (token NULL, why). */
typedef void (*eai_netns_fn)(void *arg, void *token, const char *netns_path, const char *dns_server,
                             const char *why);

/* A plugin's metric family (1.4, eai_host.metric_describe). */
enum eai_metric_kind { EAI_METRIC_KIND_COUNTER = 0, EAI_METRIC_KIND_GAUGE, EAI_METRIC_KIND_HISTOGRAM };

#define EAI_METRIC_MAX_LABELS 8   /* label names a family may declare */
#define EAI_METRIC_MAX_BOUNDS 16  /* histogram bucket bounds */

struct eai_metric_desc {
    const char *name;                /* "eai_pool_takes_total" */
    const char *help;                /* one line, 1..512 bytes */
    enum eai_metric_kind kind;
    const char *const *labels;       /* NULL-terminated label names, or NULL */
    const double *bounds;            /* histograms: increasing bucket bounds */
    int nbounds;                     /* 1..EAI_METRIC_MAX_BOUNDS for histograms, else 0 */
};

struct eai_metric;                   /* the host's handle on a described family */

struct eai_host {
    size_t size;               /* sizeof(struct eai_host) in the host */
    unsigned abi_major, abi_minor;
    struct event_base *base;   /* the one loop; only its thread touches it */

    void (*log)(const struct eai_host *h, const char *component,
                enum eai_log_level lvl, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

    struct eai_error *(*error_new)(enum eai_code code, int errno_cause, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    void (*error_free)(struct eai_error *e);

    /* Run fn on a worker thread, then done on the loop thread. 0 or -1. */
    int (*work_submit)(const struct eai_host *h, eai_work_fn fn,
                       eai_work_done_fn done, void *arg);

    /* Asynchronous HTTP request; 0 when queued, -1 on immediate failure. */
    int (*http_request)(const struct eai_host *h, const struct eai_http_request *req,
                        eai_http_done_fn done, void *arg);

    /* Metrics: counters and gauges by name and a label string such as
     * `profile="x",status="y"` (may be NULL). */
    void (*metric_add)(const struct eai_host *h, const char *name,
                       const char *labels, double v);
    void (*metric_set)(const struct eai_host *h, const char *name,
                       const char *labels, double v);

    /* Audit chain: fill event's "prev_hash" with prev (or the zero hash
     * when NULL) and "hash" with SHA-256(prev_hash || canonical JSON).
     * Storage backends call it inside the transaction that appends. */
    int (*audit_seal)(json_t *event, const char *prev_hash);

    /* Local image store (data_dir/images): rootfs path of NAME[:TAG] into
     * buf, 0 when found, -1 when unknown. */
    int (*image_rootfs)(const struct eai_host *h, const char *image,
                        char *buf, size_t buflen);

    const char *data_dir;      /* absolute */
    const char *node_id;       /* unique per process run: lease owner */
    void *core;                /* private to core */

    /* ---- Added in 1.1 (read only when size >= EAI_HOST_SIZE_1_1).  Each
     * plugin instance gets its own handle: logs, metrics (label plugin=)
     * and errors made through it name the plugin by themselves. */
    const char *plugin_name;   /* the instance's plugin name; NULL on the shared host */
    /* error_new() attributed to this handle's plugin: the message becomes
     * "plugin <name>: <fmt...>" (a leading "<name>: " is not repeated). */
    struct eai_error *(*error_new_h)(const struct eai_host *h, enum eai_code code, int errno_cause,
                                     const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
    /* Add context in front of e's message ("<context>: <message>"); returns
     * e (NULL stays NULL).  For errors a plugin gets from a callee. */
    struct eai_error *(*error_wrap)(const struct eai_host *h, struct eai_error *e, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

    /* ---- Added in 1.2 (read only when size >= EAI_HOST_SIZE_1_2): the
     * warm pool for egress, docs/egress.md.  A network namespace core made
     * (veth, address of its pool, its nftables rules) with NO allow list
     * bound: its DNS questions are refused and its TCP connections reset
     * until core binds an execution's grant to it (isolation op
     * egress_claim).  Loop thread.  netns_take: the token, then cb once on
     * a later loop turn (token NULL and why on failure; paths valid until
     * the token ends), or NULL at once when core carries no egress.
     * netns_release: end a token the plugin still owns (pending or ready;
     * no cb follows); once egress_claim handed a token to core, core ends it. */
    void *(*netns_take)(const struct eai_host *h, eai_netns_fn cb, void *arg);
    void (*netns_release)(const struct eai_host *h, void *token);

    /* ---- Added in 1.4 (read only when size >= EAI_HOST_SIZE_1_4): a
     * plugin's own metric families (docs/plugins.md, "Metrics").  Describe
     * each family once, from create() (loop thread), and keep the handle:
     * the name is checked there, once (Prometheus naming: [a-zA-Z_:]
     * [a-zA-Z0-9_:]*, a counter ends in _total, no other kind ends in
     * _total, _count, _sum or _bucket; label names [a-zA-Z_]
     * [a-zA-Z0-9_]*, not __*, not plugin, not le; a name another plugin or
     * core described is refused), NULL + *err when it is refused.  The
     * series carry plugin="<name>" by themselves.  metric_update: any
     * thread; a counter adds v (>= 0), a gauge is set to v, a histogram
     * observes v; values holds one value per label name of the family, in
     * their order (NULL when it has none); escaped by the host.  Handles
     * live as long as the plugin's instance. */
    struct eai_metric *(*metric_describe)(const struct eai_host *h, const struct eai_metric_desc *desc,
                                          struct eai_error **err);
    void (*metric_update)(const struct eai_host *h, struct eai_metric *m, const char *const *values, double v);
};

/* Frozen sizes of struct eai_host per minor (never change; abi.lock). */
#define EAI_HOST_SIZE_1_0 offsetof(struct eai_host, plugin_name)
#define EAI_HOST_SIZE_1_1 (offsetof(struct eai_host, error_wrap) + sizeof(void (*)(void)))
#define EAI_HOST_SIZE_1_2 (offsetof(struct eai_host, netns_release) + sizeof(void (*)(void)))
#define EAI_HOST_SIZE_1_3 EAI_HOST_SIZE_1_2
#define EAI_HOST_SIZE_1_4 (offsetof(struct eai_host, metric_update) + sizeof(void (*)(void)))
#define EAI_HOST_SIZE_1_5 EAI_HOST_SIZE_1_4
/* Deprecated: the name netns_take / netns_release were tested with before
 * they became 1.2 (docs/plugins.md told vendors to use it).  The same value
 * as EAI_HOST_SIZE_1_2; kept for sources written against it, gone in 2.0. */
#define EAI_HOST_SIZE_NETNS EAI_HOST_SIZE_1_2

/* An error return in one statement, for plugins (core uses eai_error_set()):
 *     return eai_host_error_set(host, err, EAI_E_SANDBOX_FAILED, "k8s: %s", why);
 * fills *err through host->error_new() and returns -1.  Does nothing but
 * return -1 when err is NULL or *err is already set (the first error, the
 * root cause, is kept).  Header-only: a plugin links nothing of core. */
static inline int eai_host_error_set(const struct eai_host *h, struct eai_error **err,
                                     enum eai_code code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline int eai_host_error_set(const struct eai_host *h, struct eai_error **err,
                                     enum eai_code code, const char *fmt, ...)
{
    if (!err || *err || !h)
        return -1;
    int attributed = h->size >= EAI_HOST_SIZE_1_1 && h->error_new_h;
    if (!attributed && !h->error_new)
        return -1;
    char small[256], *msg = small;
    small[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (msg = (char *)malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (attributed)
        *err = h->error_new_h(h, code, 0, "%s", msg ? msg : small);
    else
        *err = h->error_new(code, 0, "%s", msg ? msg : small);
    if (msg && msg != small)
        free(msg);
    return -1;
}

/* ---------------------------------------------------------------- build fingerprint */

/* What a plugin was built against, for what crosses the ABI by layout:
 * json_t (jansson), struct event_base (libevent), and type sizes.  The
 * loader compares it with its own and refuses a mismatch naming both
 * (PostgreSQL's magic block).  Fill it with EAI_BUILD_FINGERPRINT, which
 * expands with the headers the plugin compiles against. */
struct eai_build_fingerprint {
    uint32_t size;             /* sizeof(struct eai_build_fingerprint); 0 = not filled: refused */
    uint32_t jansson_major;    /* JANSSON_MAJOR_VERSION (compared) */
    uint32_t jansson_minor;    /* JANSSON_MINOR_VERSION (informative) */
    uint32_t libevent_major;   /* from EVENT__NUMERIC_VERSION; 0 = built without libevent headers */
    uint32_t libevent_minor;   /* 2.0 and 2.1 differ in ABI: major.minor compared when both set */
    uint32_t pointer_size;     /* sizeof(void *) (compared) */
    uint32_t size_t_size;      /* sizeof(size_t) (compared) */
    uint32_t json_int_size;    /* sizeof(json_int_t) (compared) */
    uint32_t enum_size;        /* sizeof(enum eai_code) (compared) */
};

#ifdef EVENT__NUMERIC_VERSION
#define EAI__LIBEVENT_MAJOR ((uint32_t)(EVENT__NUMERIC_VERSION >> 24) & 0xffu)
#define EAI__LIBEVENT_MINOR ((uint32_t)(EVENT__NUMERIC_VERSION >> 16) & 0xffu)
#else
#define EAI__LIBEVENT_MAJOR 0u
#define EAI__LIBEVENT_MINOR 0u
#endif

#define EAI_BUILD_FINGERPRINT                                                                   \
    {                                                                                           \
        (uint32_t)sizeof(struct eai_build_fingerprint), JANSSON_MAJOR_VERSION,                 \
            JANSSON_MINOR_VERSION, EAI__LIBEVENT_MAJOR, EAI__LIBEVENT_MINOR,                    \
            (uint32_t)sizeof(void *), (uint32_t)sizeof(size_t), (uint32_t)sizeof(json_int_t),   \
            (uint32_t)sizeof(enum eai_code)                                                     \
    }

/* ---------------------------------------------------------------- messages */

/* A plugin's message, in English and French (1.4, descriptor.messages).
 * en is the printf format the plugin formats it with (its conversions,
 * %s %d %lld ..., are the holes); fr is the French, the English holes put
 * back as {1}, {2}... in any order.  Both are written once, here: the
 * plugin formats en, core turns what reaches a client (details[].message)
 * into French by this table (docs/errors.md).  id names it for vendors and
 * tests: "[a-z0-9_.]+", unique in the table. */
struct eai_message {
    const char *id;                  /* "gvisor.session.unknown"; NULL ends the table */
    const char *en;                  /* "the file is larger than %lld bytes" */
    const char *fr;                  /* "le fichier dépasse {1} octets" */
};

/* ---------------------------------------------------------------- descriptor */

struct eai_plugin_descriptor {
    unsigned abi_major;
    unsigned abi_minor;
    size_t struct_size;        /* sizeof(struct eai_plugin_descriptor) */
    const char *name;          /* "gvisor", "postgres", ... */
    enum eai_plugin_kind kind;
    const char *version;       /* the plugin's own version string */
    /* Create an instance with the plugin's config subtree (JSON object,
     * already validated against config_keys).  NULL + *err on failure. */
    void *(*create)(const struct eai_host *host, const json_t *config,
                    struct eai_error **err);
    void (*destroy)(void *self);
    const void *ops;           /* kind's ops table; starts with its size */
    /* NULL-terminated table of accepted config keys (for validation). */
    const struct eai_config_key *config_keys;
    /* ---- Added in 1.1: what the plugin was built against. */
    struct eai_build_fingerprint build;
    /* ---- Added in 1.4: the plugin's translated messages, ended by an
     * entry whose id is NULL (NULL: none).  Read when struct_size >=
     * EAI_PLUGIN_DESCRIPTOR_SIZE_1_4.  The loader refuses a plugin whose
     * table has a message without its French (docs/plugins.md). */
    const struct eai_message *messages;
};

/* Frozen sizes of struct eai_plugin_descriptor per minor (1.2 added
 * nothing).  _1_1 is today's sizeof: the minor that grows the descriptor
 * writes it as the offset of its first new field (abi.lock checks it). */
#define EAI_PLUGIN_DESCRIPTOR_SIZE_1_0 offsetof(struct eai_plugin_descriptor, build)
#define EAI_PLUGIN_DESCRIPTOR_SIZE_1_1 offsetof(struct eai_plugin_descriptor, messages)
#define EAI_PLUGIN_DESCRIPTOR_SIZE_1_2 EAI_PLUGIN_DESCRIPTOR_SIZE_1_1
#define EAI_PLUGIN_DESCRIPTOR_SIZE_1_3 EAI_PLUGIN_DESCRIPTOR_SIZE_1_2
#define EAI_PLUGIN_DESCRIPTOR_SIZE_1_4 sizeof(struct eai_plugin_descriptor)
#define EAI_PLUGIN_DESCRIPTOR_SIZE_1_5 EAI_PLUGIN_DESCRIPTOR_SIZE_1_4

/* Start every descriptor initialiser with this:
 *     static const struct eai_plugin_descriptor desc = {
 *         EAI_PLUGIN_DESCRIPTOR_HEADER,
 *         .name = "example", .kind = EAI_KIND_ISOLATION, ...
 *     };
 *     EAI_PLUGIN_DECLARE(desc)
 */
#define EAI_PLUGIN_DESCRIPTOR_HEADER                                                            \
    .abi_major = EAI_ABI_MAJOR, .abi_minor = EAI_ABI_MINOR,                                     \
    .struct_size = sizeof(struct eai_plugin_descriptor), .build = EAI_BUILD_FINGERPRINT

enum eai_config_type { EAI_CFG_STRING = 0, EAI_CFG_INT, EAI_CFG_BOOL, EAI_CFG_LIST, EAI_CFG_MAP, EAI_CFG_TYPE_MAX };

struct eai_config_key {
    const char *name;
    enum eai_config_type type;
    int required;
    const char *default_value; /* as a string; NULL when none */
    const char *help;
};

typedef const struct eai_plugin_descriptor *(*eai_plugin_descriptor_fn)(void);

/* The one exported symbol, for a descriptor variable DESC:
 *     EAI_PLUGIN_DECLARE(my_descriptor)
 * (an exported, non-static, C-linkage eai_plugin_descriptor()). */
#ifdef __cplusplus
#define EAI__C_LINKAGE extern "C"
#else
#define EAI__C_LINKAGE
#endif
#define EAI_PLUGIN_DECLARE(desc)                                                                \
    EAI__C_LINKAGE EAI_PLUGIN_EXPORT const struct eai_plugin_descriptor *eai_plugin_descriptor(void); \
    EAI__C_LINKAGE EAI_PLUGIN_EXPORT const struct eai_plugin_descriptor *eai_plugin_descriptor(void) \
    {                                                                                           \
        return &(desc);                                                                         \
    }

#ifdef __cplusplus
}
#endif
#endif
