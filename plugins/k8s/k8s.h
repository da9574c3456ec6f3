/*
 * Kubernetes isolation backend (eai-isolation-k8s.so): internal interfaces.
 *
 *   k8s.c          descriptor, config, probe, start/cancel/recover/sweep
 *   k8s_api.c      REST calls on the host's shared HTTP client: auth,
 *                  token reload, retries with backoff, Status -> message
 *   k8s_objects.c  the Namespace, NetworkPolicy, Pod and Secret we send
 *   k8s_config.c   in-cluster and kubeconfig connection settings
 *   k8s_watch.c    one watch of sandbox pods per tenant namespace (long-poll
 *                  rounds from a resourceVersion, relist on 410 Gone)
 *   k8s_collect.c  collected files: the sidecar's caps and output parser
 *   k8s_collector.c  eai-k8s-collector, the static program of that sidecar
 *
 * Every call runs on the loop thread; file reads happen at create() or on a
 * worker (host->work_submit).  docs/kubernetes.md describes the objects.
 */
#ifndef EAI_K8S_H
#define EAI_K8S_H

#include "eaibase.h" /* eai_now_ms */
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include <eai/isolation.h>

#define K8S_COMPONENT "k8s"
#define K8S_MANAGED_BY "eai-sandbox"
#define K8S_LABEL_MANAGED "app.kubernetes.io/managed-by"
#define K8S_LABEL_EXEC "eai-sandbox.dev/execution-id"
#define K8S_LABEL_TENANT "eai-sandbox.dev/tenant"
#define K8S_LABEL_PROFILE "eai-sandbox.dev/profile"
#define K8S_CONTAINER "sandbox"
#define K8S_COLLECTOR "eai-collect"     /* the collect sidecar (k8s_collector.c) */
#define K8S_COLLECTOR_BIN "/eai-k8s-collector"
#define K8S_INPUT_DIR "/var/run/eai/input"
#define K8S_DEFAULT_DENY "eai-default-deny"
#define K8S_SECRET_MAX (1024 * 1024) /* API server limit on a Secret's data */

struct event;

/* Connection and behaviour settings (the plugin's config subtree). */
struct k8s_cfg {
    char *api_url;             /* "https://10.0.0.1:443" (no trailing slash) */
    char *token_file;          /* re-read every token_reload_s and on 401 */
    char *token;               /* static token (kubeconfig) when no file */
    char *ca_file;
    char *client_cert, *client_key;
    int insecure;              /* insecure_skip_tls_verify (tests only) */
    char *ns_prefix;           /* namespace = prefix + tenant id */
    char *runtime_class;       /* default when the profile names none */
    long poll_ms;              /* longest pause between pod polls */
    long api_timeout_ms;       /* per API request */
    int api_retries;           /* retries of 0/429/5xx answers */
    long deadline_grace_ms;    /* our own watchdog past timeout_ms */
    long image_pull_grace_ms;  /* ErrImagePull tolerated this long */
    long api_outage_grace_ms;  /* reading a pod may fail (0/429/5xx) this long */
    long token_reload_s;
    long sweep_min_age_s;
    long probe_interval_s;
    int watch;                 /* watch the pods of each tenant namespace (k8s_watch.c) */
    long watch_timeout_s;      /* one watch round's timeoutSeconds (no streaming: below) */
    int kubelet_stats;         /* sample usage from the node's kubelet (/stats/summary) */
    long kubelet_port;
    char *kubelet_ca_file;     /* the kubelets' serving CA; default ca_file */
    long usage_interval_ms;
    char *collector_image;     /* image with /eai-k8s-collector: collect (k8s_collector.c) */
    long uid;                  /* runAsUser / runAsGroup / fsGroup */
    json_t *node_selector;     /* object or NULL */
    json_t *tolerations;       /* array or NULL */
    char *tenant_role;         /* ClusterRole bound in each tenant namespace, or NULL */
    char *sa_namespace, *sa_name; /* eaid's service account: the RoleBinding's subject */
    json_t *images;            /* default image policy {registries, require_digest} or NULL */
    json_t *profiles;          /* name -> {images, egress_private_cidrs} or NULL */
};

int k8s_cfg_load(struct k8s_cfg *c, const struct eai_host *h, const json_t *config, struct eai_error **err);
void k8s_cfg_clear(struct k8s_cfg *c);
/* The token file's content, trimmed; NULL when unreadable.  Blocking: call
 * at create() or on a worker only. */
char *k8s_read_token(const char *path);

/* ---------------------------------------------------------------- plugin */

struct k8s_call;
struct k8s_job;

struct k8s {
    const struct eai_host *host;
    struct k8s_cfg cfg;
    int refs;                  /* 1 + live jobs + calls; freed at 0 */
    int closing;
    char *token;               /* current bearer token, may be NULL */
    int token_reloading;
    struct k8s_call *token_waiters; /* calls waiting for a reloaded token */
    struct event *token_timer;
    struct event *probe_timer;
    int probing;
    int ready;
    char version[128];
    char reason[256];
    json_t *tenants_ready;     /* tenant -> true once its namespace is set up */
    struct k8s_watch *watches; /* one per namespace with live jobs */
    struct k8s_job *jobs;      /* live executions (k8s_job.c) */
};

void k8s_ref(struct k8s *k);
void k8s_unref(struct k8s *k);

/* One execution's Pod (k8s_job.c): the isolation ops start, cancel and
 * recover; k8s_jobs_close ends them all at destroy(). */
int k8s_job_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb, void *cb_arg,
                  void **handle, struct eai_error **err);
void k8s_job_cancel(void *self, void *handle);
int k8s_job_recover(void *self, const json_t *execution, const struct eai_iso_callbacks *cb, void *cb_arg,
                    void **handle, struct eai_error **err);
void k8s_jobs_close(struct k8s *k);

/* ---------------------------------------------------------------- API */

/* Result of one call.  status: HTTP status, 0 on transport failure.
 * body is the response (NUL-terminated, may be empty); message explains a
 * failure in one line ("POST .../pods: 403 Forbidden: ...") or is NULL. */
struct k8s_result {
    long status;
    const char *body;
    size_t body_len;
    json_t *json;              /* parsed body when JSON, else NULL */
    const char *message;
};
typedef void (*k8s_call_fn)(void *arg, const struct k8s_result *res);

#define K8S_CALL_RETRY   1u    /* retry 0/429/5xx with backoff (idempotent, or create) */
#define K8S_CALL_ABS     4u    /* path is a whole https:// URL (a kubelet), not under api_url */
#define K8S_CALL_RETRY_403 2u  /* also retry 403 (a RoleBinding just created may take a
                                * moment to be honoured by the API server's authorizer) */

/* Send METHOD PATH (path includes the query) with an optional JSON body
 * (borrowed, serialised now).  fn runs exactly once on the loop thread.
 * 0, or -1 when nothing could be queued (fn does not run). */
int k8s_call(struct k8s *k, const char *method, const char *path, const json_t *body,
             unsigned flags, k8s_call_fn fn, void *arg);
/* Start the periodic token reload (when a token file is configured). */
int k8s_token_start(struct k8s *k);
void k8s_api_stop(struct k8s *k);
/* Percent-encode a query value into out; -1 when it does not fit. */
int k8s_qescape(const char *in, char *out, size_t outlen);

/* The same with its own timeout (a watch round outlives api_timeout_ms). */
int k8s_call_timeout(struct k8s *k, const char *method, const char *path, const json_t *body,
                     unsigned flags, long timeout_ms, k8s_call_fn fn, void *arg);

/* ---------------------------------------------------------------- watch (k8s_watch.c) */

/* A job in namespace ns starts/stops needing the namespace's pod watch.
 * The first join lists the namespace's sandbox pods and watches them from
 * the list's resourceVersion; the last leave stops it. */
void k8s_watch_join(struct k8s *k, const char *ns);
void k8s_watch_leave(struct k8s *k, const char *ns);
void k8s_watch_stop_all(struct k8s *k);
/* k8s.c: a pod of namespace ns as the watch (or its list) saw it. */
void k8s_pod_seen(struct k8s *k, const char *ns, const json_t *pod);

/* ---------------------------------------------------------------- objects */

/* "sbx_<uuid>" -> "sbx-<uuid>" (a DNS-1123 name); -1 when impossible. */
int k8s_pod_name(const char *exec_id, char *out, size_t outlen);
/* prefix + tenant, lowercased; -1 when not a valid DNS-1123 label. */
int k8s_namespace_name(const char *prefix, const char *tenant, char *out, size_t outlen);

json_t *k8s_namespace_obj(const char *ns, const char *tenant);
json_t *k8s_default_deny_obj(const char *ns);
/* RoleBinding "eai-sandbox" in ns: ClusterRole role -> service account. */
json_t *k8s_rolebinding_obj(const char *ns, const char *role, const char *sa_ns, const char *sa_name);
/* The execution's egress policy; rules: array of NetworkPolicyEgressRule. */
json_t *k8s_egress_obj(const char *ns, const char *pod, const char *pod_uid,
                       const char *exec_id, json_t *rules /* stolen */);
/* Pod and its input Secret.  *secret_data gets the Secret's data object
 * (stdin, files, env values), base64.  NULL + *err on failure. */
json_t *k8s_pod_obj(const struct k8s_cfg *c, const struct eai_iso_job *job, const char *ns,
                    const char *pod, const char *node_id, json_t **secret_data,
                    const struct eai_host *h, struct eai_error **err);
json_t *k8s_secret_obj(const char *ns, const char *pod, const char *pod_uid,
                       const char *exec_id, const char *tenant, json_t *data /* stolen */);
json_t *k8s_delete_options(void);

/* Egress allow list -> NetworkPolicy egress rules.  Resolves host names
 * (blocking getaddrinfo: call on a worker); an address a name resolves to
 * in a refused range (k8s_addr_refused) fails the whole list unless
 * private_cidrs (array of CIDR strings, may be NULL) contains it.  Literal
 * addresses and CIDRs are used as given (the profile listed them exactly).
 * NULL + msg on failure. */
json_t *k8s_egress_rules(const char *const *egress, const json_t *private_cidrs, char *msg, size_t msglen);

/* ---------------------------------------------------------------- policy (k8s_policy.c) */

/* Read `images` and `profiles` of the plugin config into c; -1 + msg. */
int k8s_policy_load(struct k8s_cfg *c, const json_t *cfg, char *msg, size_t msglen);
/* The reference as the kubelet reads it: "python:3" ->
 * "docker.io/library/python:3", "acme/x" -> "docker.io/acme/x", registry
 * host lowercased; -1 when not a valid reference. */
int k8s_image_normalize(const char *in, char *out, size_t outlen);
/* Normalise image into norm and apply the profile's image policy (else the
 * default one): registry prefixes, digest.  0, or -1 + msg. */
int k8s_image_check(const struct k8s_cfg *c, const char *profile, const char *image, char *norm,
                    size_t normlen, char *msg, size_t msglen);
/* The refused range an address (network order, 4 or 16 bytes) is in, as
 * text, or NULL when it may be an egress destination. */
const char *k8s_addr_refused(int family, const unsigned char *addr);
int k8s_cidr_parse(const char *cidr, int *family, unsigned char net[16], int *bits);
int k8s_cidrs_contain(const json_t *cidrs, int family, const unsigned char *addr);
/* profiles.<profile>.egress_private_cidrs or NULL. */
const json_t *k8s_profile_private_cidrs(const struct k8s_cfg *c, const char *profile);

/* The effective collect caps of a job (core's, else the runner's defaults). */
void k8s_collect_caps(const struct eai_iso_job *job, int64_t *files, int64_t *file_bytes, int64_t *total_bytes);
/* Bytes the collector's log may take for these caps (limitBytes). */
int64_t k8s_collect_log_bytes(int64_t files, int64_t file_bytes, int64_t total_bytes);
/* k8s_collect.c: parse the collector's log ("EAI-COLLECT 1 N T", N lines
 * "<b64 path> <bytes> <b64 data>", "EAI-COLLECT-END").  *files gets what
 * parsed (free with k8s_collect_free) also on failure; -1 + msg when the
 * output is malformed or cut short. */
int k8s_collect_parse(const char *body, size_t len, struct eai_iso_collected **files, size_t *nfiles,
                      int *truncated, char *msg, size_t msglen);
void k8s_collect_free(struct eai_iso_collected *files, size_t n);

/* base64 (standard, padded); malloc'd; NULL on allocation failure. */
char *k8s_b64(const unsigned char *d, size_t n);
unsigned char *k8s_b64_decode(const char *s, size_t *outlen);

/* RFC 3339 "2024-01-02T03:04:05Z" (fraction allowed) -> ms; -1 on error. */
int64_t k8s_parse_time_ms(const char *s);

#endif
