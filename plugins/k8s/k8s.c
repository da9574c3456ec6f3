/*
 * eai-isolation-k8s.so: executions as Kubernetes Pods.  This file is the
 * plugin: its create/destroy, the readiness probe and the sweep of pods
 * left by a previous eaid; one execution's Pod is k8s_job.c's, the API
 * client k8s_api.c, the namespace watches k8s_watch.c, the objects
 * k8s_objects.c and k8s_policy.c, the configuration k8s_config.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "k8s.h"

void k8s_ref(struct k8s *k) { k->refs++; }

void k8s_unref(struct k8s *k)
{
    if (--k->refs > 0)
        return;
    k8s_api_stop(k);
    if (k->probe_timer)
        event_free(k->probe_timer);
    free(k->token);
    json_decref(k->tenants_ready);
    k8s_cfg_clear(&k->cfg);
    free(k);
}

/* ------------------------------------------------------------ sweep */

struct sweep_call {
    struct k8s *k;
};

static void sweep_deleted(void *arg, const struct k8s_result *r)
{
    struct sweep_call *s = arg;
    if (r->status != 200 && r->status != 404 && !s->k->closing)
        s->k->host->log(s->k->host, K8S_COMPONENT, EAI_LOG_WARN, "sweep: %s", r->message ? r->message : "?");
    k8s_unref(s->k);
    free(s);
}

static void sweep_listed(void *arg, const struct k8s_result *r)
{
    struct sweep_call *s = arg;
    struct k8s *k = s->k;
    if (r->status != 200 || !r->json) {
        if (!k->closing)
            k->host->log(k->host, K8S_COMPONENT, EAI_LOG_WARN, "sweep: cannot list pods: %s",
                         r->message ? r->message : "?");
        k8s_unref(k);
        free(s);
        return;
    }
    int64_t now = eai_now_ms(), min_age = (int64_t)k->cfg.sweep_min_age_s * 1000;
    size_t i, n = 0;
    json_t *pod;
    json_array_foreach(json_object_get(r->json, "items"), i, pod)
    {
        const json_t *md = json_object_get(pod, "metadata");
        const json_t *st = json_object_get(pod, "status");
        const char *phase = json_string_value(json_object_get(st, "phase"));
        int64_t created = k8s_parse_time_ms(json_string_value(json_object_get(md, "creationTimestamp")));
        json_int_t ads = json_integer_value(json_object_get(json_object_get(pod, "spec"), "activeDeadlineSeconds"));
        int old = 0;
        if (phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"))) {
            /* finished long enough ago that no live eaid still reads it */
            const json_t *t = json_object_get(json_object_get(json_object_get(json_array_get(
                json_object_get(st, "containerStatuses"), 0), "state"), "terminated"), "finishedAt");
            int64_t fin = k8s_parse_time_ms(json_string_value(t));
            old = (fin > 0 ? fin : created) > 0 && now - (fin > 0 ? fin : created) > min_age;
        } else if (created > 0 && !json_object_get(st, "startTime")) {
            /* never scheduled: past its deadline plus the margin */
            old = now - created > (int64_t)ads * 1000 + min_age;
        }
        const char *name = json_string_value(json_object_get(md, "name"));
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        if (!old || !name || !ns || json_object_get(md, "deletionTimestamp"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name);
        struct sweep_call *d = calloc(1, sizeof *d);
        json_t *opts = k8s_delete_options();
        if (d && opts) {
            d->k = k;
            k8s_ref(k);
            if (k8s_call(k, "DELETE", path, opts, K8S_CALL_RETRY, sweep_deleted, d) < 0) {
                k8s_unref(k);
                free(d);
            } else {
                n++;
            }
        } else {
            free(d);
        }
        json_decref(opts);
    }
    if (n && !k->closing)
        k->host->log(k->host, K8S_COMPONENT, EAI_LOG_INFO, "sweep: deleting %zu leftover pods", n);
    k8s_unref(k);
    free(s);
}

/* Namespaces we made (our label and prefix): list the managed pods of
 * each.  Never a cluster-wide pod list, so namespaced RBAC suffices. */
static void sweep_ns_listed(void *arg, const struct k8s_result *r)
{
    struct sweep_call *s = arg;
    struct k8s *k = s->k;
    if (r->status != 200 || !r->json) {
        if (!k->closing)
            k->host->log(k->host, K8S_COMPONENT, EAI_LOG_WARN, "sweep: cannot list namespaces: %s",
                         r->message ? r->message : "?");
        k8s_unref(k);
        free(s);
        return;
    }
    char sel[128], esc[256], path[512];
    snprintf(sel, sizeof sel, "%s=%s", K8S_LABEL_MANAGED, K8S_MANAGED_BY);
    k8s_qescape(sel, esc, sizeof esc);
    size_t i, plen = strlen(k->cfg.ns_prefix);
    json_t *ns;
    json_array_foreach(json_object_get(r->json, "items"), i, ns)
    {
        const char *name = json_string_value(json_object_get(json_object_get(ns, "metadata"), "name"));
        if (!name || strncmp(name, k->cfg.ns_prefix, plen) != 0 || k->closing)
            continue;
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=%s", name, esc);
        struct sweep_call *p = calloc(1, sizeof *p);
        if (!p)
            continue;
        p->k = k;
        k8s_ref(k);
        if (k8s_call(k, "GET", path, NULL, K8S_CALL_RETRY, sweep_listed, p) < 0) {
            k8s_unref(k);
            free(p);
        }
    }
    k8s_unref(k);
    free(s);
}

static void k8s_sweep(void *self)
{
    struct k8s *k = self;
    char sel[128], esc[256], path[384];
    snprintf(sel, sizeof sel, "%s=%s", K8S_LABEL_MANAGED, K8S_MANAGED_BY);
    k8s_qescape(sel, esc, sizeof esc);
    snprintf(path, sizeof path, "/api/v1/namespaces?labelSelector=%s", esc);
    struct sweep_call *s = calloc(1, sizeof *s);
    if (!s)
        return;
    s->k = k;
    k8s_ref(k);
    if (k8s_call(k, "GET", path, NULL, K8S_CALL_RETRY, sweep_ns_listed, s) < 0) {
        k8s_unref(k);
        free(s);
    }
}

/* ------------------------------------------------------------ probe */

static void probe_again(struct k8s *k, long s)
{
    if (k->closing || !k->probe_timer)
        return;
    struct timeval tv = {s, 0};
    evtimer_add(k->probe_timer, &tv);
}

static void probe_rc_done(void *arg, const struct k8s_result *r)
{
    struct k8s *k = arg;
    k->probing = 0;
    if (r->status == 200) {
        k->ready = 1;
        k->reason[0] = '\0';
    } else {
        k->ready = 0;
        if (r->status == 404)
            snprintf(k->reason, sizeof k->reason, "RuntimeClass '%s' does not exist in the cluster",
                     k->cfg.runtime_class);
        else
            snprintf(k->reason, sizeof k->reason, "%.250s", r->message ? r->message : "RuntimeClass check failed");
    }
    probe_again(k, k->ready ? k->cfg.probe_interval_s : 5);
    k8s_unref(k);
}

static void probe_version_done(void *arg, const struct k8s_result *r)
{
    struct k8s *k = arg;
    const char *gv = r->json ? json_string_value(json_object_get(r->json, "gitVersion")) : NULL;
    if (r->status != 200 || !gv) {
        k->probing = 0;
        k->ready = 0;
        snprintf(k->reason, sizeof k->reason, "%.250s",
                 r->message ? r->message : "the Kubernetes API answered /version without gitVersion");
        probe_again(k, 5);
        k8s_unref(k);
        return;
    }
    snprintf(k->version, sizeof k->version, "Kubernetes %.100s", gv);
    if (!k->cfg.runtime_class || k->closing) {
        k->probing = 0;
        k->ready = 1;
        k->reason[0] = '\0';
        probe_again(k, k->cfg.probe_interval_s);
        k8s_unref(k);
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "/apis/node.k8s.io/v1/runtimeclasses/%s", k->cfg.runtime_class);
    if (k8s_call(k, "GET", path, NULL, 0, probe_rc_done, k) < 0) {
        k->probing = 0;
        probe_again(k, 5);
        k8s_unref(k);
    }
}

static void on_probe_timer(evutil_socket_t fd, short what, void *arg)
{
    struct k8s *k = arg;
    if (k->probing || k->closing)
        return;
    k->probing = 1;
    k8s_ref(k);
    if (k8s_call(k, "GET", "/version", NULL, 0, probe_version_done, k) < 0) {
        k->probing = 0;
        k8s_unref(k);
        probe_again(k, 5);
    }
}

static void k8s_probe(void *self, struct eai_iso_probe *out)
{
    struct k8s *k = self;
    out->ready = k->ready;
    out->caps = EAI_ISO_CAP_EGRESS | EAI_ISO_CAP_MEMORY_LIMIT | EAI_ISO_CAP_FILES | EAI_ISO_CAP_RECOVER;
    /* ABI 1.1: what k8s_objects.c refuses, checked at admission */
    out->max_path_bytes = 4095; /* the container's PATH_MAX - 1 */
    out->max_name_bytes = 255;  /* NAME_MAX */
    out->max_input_bytes = K8S_SECRET_MAX - 4096; /* stdin, files and env in one Secret */
    out->max_env_name_bytes = 255; /* k8s_objects.c copies a name into 256 bytes */
    out->limit_flags = EAI_ISO_LIMIT_ENV_NAMES_PORTABLE; /* env_name_ok() */
    snprintf(out->version, sizeof out->version, "%s", k->version[0] ? k->version : "Kubernetes (not probed yet)");
    snprintf(out->reason, sizeof out->reason, "%s",
             k->ready ? "" : k->reason[0] ? k->reason : "probing the Kubernetes API");
}

/* ------------------------------------------------------------ create */

static const struct eai_config_key k8s_keys[] = {
    {"api_url", EAI_CFG_STRING, 0, NULL, "API server URL (https://host:port); else kubeconfig or in_cluster"},
    {"in_cluster", EAI_CFG_BOOL, 0, "false", "use the pod's service account (KUBERNETES_SERVICE_HOST)"},
    {"kubeconfig", EAI_CFG_STRING, 0, NULL, "kubeconfig file (token or client certificate users)"},
    {"context", EAI_CFG_STRING, 0, NULL, "kubeconfig context (default: current-context)"},
    {"token_file", EAI_CFG_STRING, 0, NULL, "bearer token file, re-read when it rotates"},
    {"ca_file", EAI_CFG_STRING, 0, NULL, "CA bundle of the API server"},
    {"client_cert", EAI_CFG_STRING, 0, NULL, "client certificate (PEM)"},
    {"client_key", EAI_CFG_STRING, 0, NULL, "client key (PEM)"},
    {"insecure_skip_tls_verify", EAI_CFG_BOOL, 0, "false", "do not verify the API server (tests only)"},
    {"namespace_prefix", EAI_CFG_STRING, 0, "eai-", "tenant namespaces are <prefix><tenant id>"},
    {"runtime_class", EAI_CFG_STRING, 0, NULL, "runtimeClassName when the profile names none"},
    {"poll_ms", EAI_CFG_INT, 0, "500", "longest pause between two reads of a pod"},
    {"api_timeout_ms", EAI_CFG_INT, 0, "10000", "timeout of one API request"},
    {"api_retries", EAI_CFG_INT, 0, "3", "retries of failed (0, 429, 5xx) API requests"},
    {"deadline_grace_ms", EAI_CFG_INT, 0, "30000", "our watchdog fires this long after timeout_s"},
    {"image_pull_grace_ms", EAI_CFG_INT, 0, "60000", "how long ErrImagePull is tolerated"},
    {"api_outage_grace_ms", EAI_CFG_INT, 0, "60000",
     "how long reading a running pod may fail (API unreachable, 429, 5xx) before the execution fails"},
    {"token_reload_s", EAI_CFG_INT, 0, "60", "token file re-read period"},
    {"sweep_min_age_s", EAI_CFG_INT, 0, "600", "sweep deletes finished pods older than this"},
    {"probe_interval_s", EAI_CFG_INT, 0, "30", "API and RuntimeClass check period"},
    {"watch", EAI_CFG_BOOL, 0, "true", "also watch the pods of each tenant namespace (resumed by resourceVersion, relisted on 410)"},
    {"watch_timeout_s", EAI_CFG_INT, 0, "1", "timeoutSeconds of one watch round (the HTTP client does not stream)"},
    {"kubelet_stats", EAI_CFG_BOOL, 0, "false", "measure usage from the node's kubelet /stats/summary (RBAC nodes/stats get)"},
    {"kubelet_port", EAI_CFG_INT, 0, "10250", "the kubelets' HTTPS port"},
    {"kubelet_ca_file", EAI_CFG_STRING, 0, NULL, "CA of the kubelets' serving certificates (default: ca_file)"},
    {"usage_interval_ms", EAI_CFG_INT, 0, "1000", "how often a running pod's usage is sampled from its kubelet"},
    {"collector_image", EAI_CFG_STRING, 0, NULL, "image holding /eai-k8s-collector: collect (a sidecar in each pod that collects)"},
    {"uid", EAI_CFG_INT, 0, "65534", "runAsUser/runAsGroup/fsGroup of sandbox pods"},
    {"node_selector", EAI_CFG_MAP, 0, NULL, "nodeSelector of sandbox pods"},
    {"tolerations", EAI_CFG_LIST, 0, NULL, "tolerations of sandbox pods"},
    {"tenant_role", EAI_CFG_STRING, 0, NULL, "ClusterRole bound (RoleBinding) in each tenant namespace: namespaced RBAC"},
    {"service_account", EAI_CFG_STRING, 0, NULL, "<namespace>/<name> of eaid's service account (with tenant_role)"},
    {"images", EAI_CFG_MAP, 0, NULL, "default image policy: {registries: [host/path prefixes], require_digest: bool}"},
    {"profiles", EAI_CFG_MAP, 0, NULL, "per profile: {images: {registries, require_digest}, egress_private_cidrs: [CIDR]}"},
    {NULL, 0, 0, NULL, NULL},
};

static void *k8s_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    if (!host->base || !host->http_request || !host->work_submit) {
        eai_host_error_set(host, err, EAI_E_SANDBOX_UNAVAILABLE, "k8s: needs an event loop, HTTP client and workers");
        return NULL;
    }
    struct k8s *k = calloc(1, sizeof *k);
    if (!k) {
        eai_host_error_set(host, err, EAI_E_INTERNAL, "k8s: out of memory");
        return NULL;
    }
    k->host = host;
    k->refs = 1;
    if (k8s_cfg_load(&k->cfg, host, config, err) < 0) {
        free(k);
        return NULL;
    }
    if (k->cfg.token_file) {
        k->token = k8s_read_token(k->cfg.token_file);
        if (!k->token) {
            eai_host_error_set(host, err, EAI_E_SANDBOX_UNAVAILABLE, "k8s: cannot read the token file %s",
                               k->cfg.token_file);
            k8s_cfg_clear(&k->cfg);
            free(k);
            return NULL;
        }
    } else if (k->cfg.token) {
        k->token = strdup(k->cfg.token);
    }
    k->tenants_ready = json_object();
    k->probe_timer = evtimer_new(host->base, on_probe_timer, k);
    if (!k->tenants_ready || !k->probe_timer || k8s_token_start(k) < 0) {
        eai_host_error_set(host, err, EAI_E_INTERNAL, "k8s: out of memory");
        k->closing = 1;
        k8s_unref(k);
        return NULL;
    }
    struct timeval now = {0, 0};
    evtimer_add(k->probe_timer, &now);
    host->log(host, K8S_COMPONENT, EAI_LOG_INFO, "Kubernetes API %s, namespaces %s<tenant>, runtime class %s",
              k->cfg.api_url, k->cfg.ns_prefix, k->cfg.runtime_class ? k->cfg.runtime_class : "(from profiles)");
    return k;
}

static void k8s_destroy(void *self)
{
    struct k8s *k = self;
    if (!k)
        return;
    k->closing = 1;
    k8s_api_stop(k);
    k8s_watch_stop_all(k);
    if (k->probe_timer)
        evtimer_del(k->probe_timer);
    k8s_jobs_close(k);
    k8s_unref(k);
}

static const struct eai_isolation_ops k8s_ops = {
    .size = sizeof(struct eai_isolation_ops),
    .probe = k8s_probe,
    .start = k8s_job_start,
    .cancel = k8s_job_cancel,
    .recover = k8s_job_recover,
    .sweep = k8s_sweep,
};

static const struct eai_plugin_descriptor k8s_descriptor = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "k8s",
    .kind = EAI_KIND_ISOLATION,
    .version = EAI_VERSION, /* the build's (CMake project version) */
    .create = k8s_create,
    .destroy = k8s_destroy,
    .ops = &k8s_ops,
    .config_keys = k8s_keys,
};

EAI_PLUGIN_DECLARE(k8s_descriptor)
