/*
 * Connection settings, from the plugin's config subtree, in this order:
 *  1. api_url (+ token_file, ca_file, client_cert, client_key) given outright;
 *  2. kubeconfig: a kubeconfig file (current-context, or `context`);
 *  3. in_cluster: the pod's service account (KUBERNETES_SERVICE_HOST/PORT,
 *     /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}).
 * Runs at create(), before the loop serves: reading files here is allowed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "k8s.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

static const char *cstr(const json_t *o, const char *k)
{
    json_t *v = o ? json_object_get(o, k) : NULL;
    return json_is_string(v) && *json_string_value(v) ? json_string_value(v) : NULL;
}

static long clong(const json_t *o, const char *k, long def)
{
    json_t *v = o ? json_object_get(o, k) : NULL;
    if (json_is_integer(v))
        return (long)json_integer_value(v);
    if (json_is_string(v)) {
        char *end;
        long x = strtol(json_string_value(v), &end, 10);
        if (*json_string_value(v) && !*end)
            return x;
    }
    return def;
}

static int cbool(const json_t *o, const char *k, int def)
{
    json_t *v = o ? json_object_get(o, k) : NULL;
    if (json_is_boolean(v))
        return json_is_true(v);
    if (json_is_string(v))
        return strcmp(json_string_value(v), "true") == 0 || strcmp(json_string_value(v), "1") == 0;
    if (json_is_integer(v))
        return json_integer_value(v) != 0;
    return def;
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* ------------------------------------------------------------ YAML -> JSON */

static json_t *yaml_node_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
    if (!n || depth > 64)
        return NULL;
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        const char *v = (const char *)n->data.scalar.value;
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
            if (!strcmp(v, "true"))
                return json_true();
            if (!strcmp(v, "false"))
                return json_false();
            if (!strcmp(v, "null") || !strcmp(v, "~") || !*v)
                return json_null();
        }
        return json_stringn(v, n->data.scalar.length);
    }
    case YAML_SEQUENCE_NODE: {
        json_t *a = json_array();
        for (yaml_node_item_t *i = n->data.sequence.items.start; a && i < n->data.sequence.items.top; i++)
            json_array_append_new(a, yaml_node_json(doc, yaml_document_get_node(doc, *i), depth + 1));
        return a;
    }
    case YAML_MAPPING_NODE: {
        json_t *o = json_object();
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; o && p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(doc, p->key);
            if (!k || k->type != YAML_SCALAR_NODE)
                continue;
            json_t *v = yaml_node_json(doc, yaml_document_get_node(doc, p->value), depth + 1);
            json_object_set_new(o, (const char *)k->data.scalar.value, v ? v : json_null());
        }
        return o;
    }
    default:
        return NULL;
    }
}

static json_t *load_yaml_file(const char *path, char *msg, size_t msglen)
{
    FILE *f = fopen(path, "rbe");
    if (!f) {
        snprintf(msg, msglen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    yaml_parser_t p;
    yaml_document_t doc;
    json_t *out = NULL;
    if (!yaml_parser_initialize(&p)) {
        fclose(f);
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_file(&p, f);
    if (!yaml_parser_load(&p, &doc)) {
        snprintf(msg, msglen, "%s: YAML error at line %zu: %s", path, p.problem_mark.line + 1,
                 p.problem ? p.problem : "?");
    } else {
        out = yaml_node_json(&doc, yaml_document_get_root_node(&doc), 0);
        yaml_document_delete(&doc);
        if (!json_is_object(out)) {
            json_decref(out);
            out = NULL;
            snprintf(msg, msglen, "%s: not a kubeconfig", path);
        }
    }
    yaml_parser_delete(&p);
    fclose(f);
    return out;
}

/* ------------------------------------------------------------ kubeconfig */

static const json_t *named(const json_t *list, const char *name, const char *field)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
        if (cstr(e, "name") && strcmp(cstr(e, "name"), name) == 0)
            return json_object_get(e, field);
    return NULL;
}

/* Write inline (-data) PEM to <data_dir>/k8s/<name>, mode 0600. */
static char *write_data_file(const struct eai_host *h, const char *name, const char *b64, char *msg, size_t msglen)
{
    size_t n = 0;
    unsigned char *d = k8s_b64_decode(b64, &n);
    if (!d) {
        snprintf(msg, msglen, "kubeconfig: %s is not valid base64", name);
        return NULL;
    }
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/k8s", h->data_dir);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(msg, msglen, "cannot create %s: %s", dir, strerror(errno));
        free(d);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || write(fd, d, n) != (ssize_t)n) {
        snprintf(msg, msglen, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        free(d);
        return NULL;
    }
    close(fd);
    free(d);
    return strdup(path);
}

/* Relative paths in a kubeconfig are relative to the file's directory. */
static char *rel_path(const char *kubeconfig, const char *p)
{
    if (!p)
        return NULL;
    if (p[0] == '/')
        return strdup(p);
    char buf[PATH_MAX];
    const char *slash = strrchr(kubeconfig, '/');
    int dl = slash ? (int)(slash - kubeconfig) : 1;
    snprintf(buf, sizeof buf, "%.*s/%s", dl, slash ? kubeconfig : ".", p);
    return strdup(buf);
}

static int load_kubeconfig(struct k8s_cfg *c, const struct eai_host *h, const char *file, const char *context,
                           char *msg, size_t msglen)
{
    json_t *kc = load_yaml_file(file, msg, msglen);
    if (!kc)
        return -1;
    int rc = -1;
    const char *ctxname = context ? context : cstr(kc, "current-context");
    const json_t *ctx = ctxname ? named(json_object_get(kc, "contexts"), ctxname, "context") : NULL;
    if (!ctx) {
        snprintf(msg, msglen, "kubeconfig %s: context '%s' not found", file, ctxname ? ctxname : "(none)");
        goto out;
    }
    const json_t *cl = cstr(ctx, "cluster") ? named(json_object_get(kc, "clusters"), cstr(ctx, "cluster"), "cluster") : NULL;
    const json_t *us = cstr(ctx, "user") ? named(json_object_get(kc, "users"), cstr(ctx, "user"), "user") : NULL;
    if (!cl || !cstr(cl, "server")) {
        snprintf(msg, msglen, "kubeconfig %s: cluster of context '%s' has no server", file, ctxname);
        goto out;
    }
    c->api_url = strdup(cstr(cl, "server"));
    c->insecure = c->insecure || cbool(cl, "insecure-skip-tls-verify", 0);
    if (cstr(cl, "certificate-authority-data"))
        c->ca_file = write_data_file(h, "ca.crt", cstr(cl, "certificate-authority-data"), msg, msglen);
    else
        c->ca_file = rel_path(file, cstr(cl, "certificate-authority"));
    if (cstr(cl, "certificate-authority-data") && !c->ca_file)
        goto out;
    if (us) {
        if (json_object_get(us, "exec") || json_object_get(us, "auth-provider")) {
            snprintf(msg, msglen, "kubeconfig %s: exec and auth-provider credentials are not supported; use a token",
                     file);
            goto out;
        }
        c->token = dup_or_null(cstr(us, "token"));
        c->token_file = rel_path(file, cstr(us, "tokenFile"));
        if (cstr(us, "client-certificate-data")) {
            if (!(c->client_cert = write_data_file(h, "client.crt", cstr(us, "client-certificate-data"), msg, msglen)))
                goto out;
        } else {
            c->client_cert = rel_path(file, cstr(us, "client-certificate"));
        }
        if (cstr(us, "client-key-data")) {
            if (!(c->client_key = write_data_file(h, "client.key", cstr(us, "client-key-data"), msg, msglen)))
                goto out;
        } else {
            c->client_key = rel_path(file, cstr(us, "client-key"));
        }
    }
    rc = 0;
out:
    json_decref(kc);
    return rc;
}

/* ------------------------------------------------------------ load */

int k8s_cfg_load(struct k8s_cfg *c, const struct eai_host *h, const json_t *cfg, struct eai_error **err)
{
    char msg[512] = "";
    memset(c, 0, sizeof *c);
    c->insecure = cbool(cfg, "insecure_skip_tls_verify", 0);
    if (cstr(cfg, "api_url")) {
        c->api_url = strdup(cstr(cfg, "api_url"));
        c->token_file = dup_or_null(cstr(cfg, "token_file"));
        c->ca_file = dup_or_null(cstr(cfg, "ca_file"));
        c->client_cert = dup_or_null(cstr(cfg, "client_cert"));
        c->client_key = dup_or_null(cstr(cfg, "client_key"));
    } else if (cstr(cfg, "kubeconfig")) {
        if (load_kubeconfig(c, h, cstr(cfg, "kubeconfig"), cstr(cfg, "context"), msg, sizeof msg) < 0)
            goto fail;
    } else if (cbool(cfg, "in_cluster", 0)) {
        /* The in-cluster contract is these two variables set by the kubelet;
         * reading them here (not in core) keeps that contract in one place. */
        const char *host = secure_getenv("KUBERNETES_SERVICE_HOST");
        const char *port = secure_getenv("KUBERNETES_SERVICE_PORT");
        if (!host || !*host) {
            snprintf(msg, sizeof msg, "in_cluster: KUBERNETES_SERVICE_HOST is not set (not running in a pod?)");
            goto fail;
        }
        char url[300];
        snprintf(url, sizeof url, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
                 port && *port ? port : "443");
        c->api_url = strdup(url);
        c->token_file = strdup(cstr(cfg, "token_file") ? cstr(cfg, "token_file") : SA_DIR "/token");
        c->ca_file = strdup(cstr(cfg, "ca_file") ? cstr(cfg, "ca_file") : SA_DIR "/ca.crt");
    } else {
        snprintf(msg, sizeof msg, "set api_url, kubeconfig or in_cluster: true");
        goto fail;
    }
    if (!c->api_url) {
        snprintf(msg, sizeof msg, "out of memory");
        goto fail;
    }
    size_t ul = strlen(c->api_url);
    while (ul && c->api_url[ul - 1] == '/')
        c->api_url[--ul] = '\0';
    if (strncmp(c->api_url, "https://", 8) != 0 && strncmp(c->api_url, "http://", 7) != 0) {
        snprintf(msg, sizeof msg, "api_url must be http(s)://...");
        goto fail;
    }
    c->ns_prefix = strdup(cstr(cfg, "namespace_prefix") ? cstr(cfg, "namespace_prefix") : "eai-");
    c->runtime_class = dup_or_null(cstr(cfg, "runtime_class"));
    c->poll_ms = clong(cfg, "poll_ms", 500);
    c->api_timeout_ms = clong(cfg, "api_timeout_ms", 10000);
    c->api_retries = (int)clong(cfg, "api_retries", 3);
    c->deadline_grace_ms = clong(cfg, "deadline_grace_ms", 30000);
    c->image_pull_grace_ms = clong(cfg, "image_pull_grace_ms", 60000);
    c->api_outage_grace_ms = clong(cfg, "api_outage_grace_ms", 60000);
    c->token_reload_s = clong(cfg, "token_reload_s", 60);
    c->sweep_min_age_s = clong(cfg, "sweep_min_age_s", 600);
    c->probe_interval_s = clong(cfg, "probe_interval_s", 30);
    c->uid = clong(cfg, "uid", 65534);
    c->watch = cfg && json_is_false(json_object_get(cfg, "watch")) ? 0 : 1;
    c->watch_timeout_s = clong(cfg, "watch_timeout_s", 1);
    c->kubelet_stats = cfg && json_is_true(json_object_get(cfg, "kubelet_stats"));
    c->kubelet_port = clong(cfg, "kubelet_port", 10250);
    c->usage_interval_ms = clong(cfg, "usage_interval_ms", 1000);
    c->kubelet_ca_file = dup_or_null(cstr(cfg, "kubelet_ca_file"));
    c->collector_image = dup_or_null(cstr(cfg, "collector_image"));
    if (c->kubelet_port < 1 || c->kubelet_port > 65535 || c->usage_interval_ms < 100) {
        snprintf(msg, sizeof msg, "kubelet_port must be 1 to 65535 and usage_interval_ms >= 100");
        goto fail;
    }
    if (c->watch_timeout_s < 1 || c->watch_timeout_s > 300) {
        snprintf(msg, sizeof msg, "watch_timeout_s must be 1 to 300");
        goto fail;
    }
    if (c->poll_ms < 10 || c->api_timeout_ms < 100 || c->uid <= 0 || c->api_retries < 0 ||
        c->api_outage_grace_ms < 0) {
        snprintf(msg, sizeof msg,
                 "poll_ms >= 10, api_timeout_ms >= 100, uid > 0, api_retries >= 0 and api_outage_grace_ms >= 0 "
                 "are required");
        goto fail;
    }
    json_t *ns = cfg ? json_object_get(cfg, "node_selector") : NULL;
    if (json_is_object(ns))
        c->node_selector = json_deep_copy(ns);
    json_t *tol = cfg ? json_object_get(cfg, "tolerations") : NULL;
    if (json_is_array(tol))
        c->tolerations = json_deep_copy(tol);
    if (k8s_policy_load(c, cfg, msg, sizeof msg) < 0)
        goto fail;
    /* namespaced RBAC: a RoleBinding per tenant namespace to this role */
    const char *tr = cstr(cfg, "tenant_role"), *sa = cstr(cfg, "service_account");
    if (tr && *tr) {
        const char *sl = sa ? strchr(sa, '/') : NULL;
        if (!sl || sl == sa || !sl[1] || strchr(sl + 1, '/')) {
            snprintf(msg, sizeof msg, "tenant_role needs service_account: \"<namespace>/<name>\" (eaid's own)");
            goto fail;
        }
        c->tenant_role = strdup(tr);
        c->sa_namespace = strndup(sa, (size_t)(sl - sa));
        c->sa_name = strdup(sl + 1);
        if (!c->tenant_role || !c->sa_namespace || !c->sa_name) {
            snprintf(msg, sizeof msg, "out of memory");
            goto fail;
        }
    }
    if (!c->ns_prefix) {
        snprintf(msg, sizeof msg, "out of memory");
        goto fail;
    }
    return 0;
fail:
    eai_host_error_set(h, err, EAI_E_SANDBOX_UNAVAILABLE, "k8s: %s", msg);
    k8s_cfg_clear(c);
    return -1;
}

void k8s_cfg_clear(struct k8s_cfg *c)
{
    free(c->api_url);
    free(c->token_file);
    free(c->token);
    free(c->ca_file);
    free(c->client_cert);
    free(c->client_key);
    free(c->ns_prefix);
    free(c->runtime_class);
    free(c->kubelet_ca_file);
    free(c->collector_image);
    json_decref(c->node_selector);
    json_decref(c->tolerations);
    free(c->tenant_role);
    free(c->sa_namespace);
    free(c->sa_name);
    json_decref(c->images);
    json_decref(c->profiles);
    memset(c, 0, sizeof *c);
}
