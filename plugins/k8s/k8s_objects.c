/*
 * The Kubernetes objects the backend sends, field by field (see
 * docs/kubernetes.md, "Objects"): the tenant Namespace (Pod Security
 * "restricted" enforced), its default-deny NetworkPolicy, the execution's
 * Pod, its input Secret and its egress NetworkPolicy (both owned by the
 * Pod, so the garbage collector removes them with it).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <openssl/evp.h>

#include "k8s.h"

/* ------------------------------------------------------------ helpers */

char *k8s_b64(const unsigned char *d, size_t n)
{
    if (n > (size_t)1 << 30)
        return NULL;
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    while (n > 0) {
        int chunk = n > 3 * 4096 ? 3 * 4096 : (int)n;
        o += (size_t)EVP_EncodeBlock((unsigned char *)out + o, d, chunk);
        d += chunk;
        n -= (size_t)chunk;
    }
    out[o] = '\0';
    return out;
}

unsigned char *k8s_b64_decode(const char *s, size_t *outlen)
{
    size_t n = strlen(s);
    /* kubeconfig data may carry newlines */
    char *clean = malloc(n + 1);
    if (!clean)
        return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i]))
            clean[m++] = s[i];
    clean[m] = '\0';
    if (m % 4) {
        free(clean);
        return NULL;
    }
    unsigned char *out = malloc(m / 4 * 3 + 1);
    if (!out) {
        free(clean);
        return NULL;
    }
    int r = m ? EVP_DecodeBlock(out, (unsigned char *)clean, (int)m) : 0;
    if (r < 0) {
        free(clean);
        free(out);
        return NULL;
    }
    size_t len = (size_t)r;
    if (m >= 1 && clean[m - 1] == '=')
        len--;
    if (m >= 2 && clean[m - 2] == '=')
        len--;
    free(clean);
    out[len] = '\0';
    *outlen = len;
    return out;
}

int64_t k8s_parse_time_ms(const char *s)
{
    if (!s)
        return -1;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return -1;
    int64_t ms = 0;
    if (*p == '.') {
        int scale = 100;
        for (p++; isdigit((unsigned char)*p); p++) {
            ms += (*p - '0') * scale;
            scale /= 10;
        }
    }
    if (*p != 'Z')
        return -1; /* the API server always answers in UTC */
    return (int64_t)timegm(&tm) * 1000 + ms;
}

static int dns_label_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return 0;
    return 1;
}

int k8s_pod_name(const char *exec_id, char *out, size_t outlen)
{
    if (!exec_id || strlen(exec_id) >= outlen)
        return -1;
    size_t i = 0;
    for (; exec_id[i]; i++) {
        char ch = (char)tolower((unsigned char)exec_id[i]);
        out[i] = ch == '_' ? '-' : ch;
    }
    out[i] = '\0';
    return dns_label_ok(out) ? 0 : -1;
}

int k8s_namespace_name(const char *prefix, const char *tenant, char *out, size_t outlen)
{
    if (!tenant || (size_t)snprintf(out, outlen, "%s%s", prefix ? prefix : "", tenant) >= outlen)
        return -1;
    for (char *p = out; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return dns_label_ok(out) ? 0 : -1;
}

/* A label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends. */
static int label_value_ok(const char *s)
{
    size_t n = strlen(s);
    if (n > 63)
        return 0;
    if (n == 0)
        return 1;
    if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return 0;
    return 1;
}

static json_t *owner_refs(const char *pod, const char *uid)
{
    /* Owned by the pod: deleting it deletes these (garbage collector). */
    return json_pack("[{s:s, s:s, s:s, s:s}]", "apiVersion", "v1", "kind", "Pod", "name", pod, "uid", uid);
}

/* ------------------------------------------------------------ namespace */

json_t *k8s_namespace_obj(const char *ns, const char *tenant)
{
    json_t *labels = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}",
                               K8S_LABEL_MANAGED, K8S_MANAGED_BY,
                               /* the API server refuses any pod below the restricted standard */
                               "pod-security.kubernetes.io/enforce", "restricted",
                               "pod-security.kubernetes.io/enforce-version", "latest",
                               "pod-security.kubernetes.io/warn", "restricted",
                               "pod-security.kubernetes.io/audit", "restricted",
                               K8S_LABEL_TENANT, "");
    if (!labels)
        return NULL;
    if (label_value_ok(tenant))
        json_object_set_new(labels, K8S_LABEL_TENANT, json_string(tenant));
    else
        json_object_del(labels, K8S_LABEL_TENANT);
    return json_pack("{s:s, s:s, s:{s:s, s:o}}", "apiVersion", "v1", "kind", "Namespace",
                     "metadata", "name", ns, "labels", labels);
}

json_t *k8s_default_deny_obj(const char *ns)
{
    /* Selects every pod of the namespace, allows nothing either way. */
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:{}, s:[s, s]}}",
                     "apiVersion", "networking.k8s.io/v1", "kind", "NetworkPolicy",
                     "metadata", "name", K8S_DEFAULT_DENY, "namespace", ns,
                     "labels", K8S_LABEL_MANAGED, K8S_MANAGED_BY,
                     "spec", "podSelector", "policyTypes", "Ingress", "Egress");
}

/* Namespaced RBAC: eaid holds pod/secret/policy rights only in the
 * namespaces it made, through this RoleBinding (docs/kubernetes.md). */
json_t *k8s_rolebinding_obj(const char *ns, const char *role, const char *sa_ns, const char *sa_name)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:s, s:s}, s:[{s:s, s:s, s:s}]}",
                     "apiVersion", "rbac.authorization.k8s.io/v1", "kind", "RoleBinding",
                     "metadata", "name", "eai-sandbox", "namespace", ns,
                     "labels", K8S_LABEL_MANAGED, K8S_MANAGED_BY,
                     "roleRef", "apiGroup", "rbac.authorization.k8s.io", "kind", "ClusterRole", "name", role,
                     "subjects", "kind", "ServiceAccount", "name", sa_name, "namespace", sa_ns);
}

/* ------------------------------------------------------------ egress */

static int add_block(json_t *peers, const char *cidr)
{
    return json_array_append_new(peers, json_pack("{s:{s:s}}", "ipBlock", "cidr", cidr));
}

json_t *k8s_egress_rules(const char *const *egress, const json_t *private_cidrs, char *msg, size_t msglen)
{
    json_t *rules = json_array();
    int need_dns = 0;
    if (!rules)
        return NULL;
    for (const char *const *e = egress; e && *e; e++) {
        char host[256];
        const char *colon = strrchr(*e, ':');
        const char *h = *e;
        size_t hl = colon ? (size_t)(colon - h) : 0;
        if (hl && h[0] == '[' && h[hl - 1] == ']') {
            h++;
            hl -= 2;
        }
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        if (!colon || hl == 0 || hl >= sizeof host || !end || *end || port < 1 || port > 65535) {
            snprintf(msg, msglen, "egress entry '%s' is not host:port", *e);
            json_decref(rules);
            return NULL;
        }
        memcpy(host, h, hl);
        host[hl] = '\0';
        json_t *peers = json_array();
        unsigned char buf[16];
        char *slash = strchr(host, '/');
        if (slash) {
            /* a CIDR as given */
            *slash = '\0';
            int fam = strchr(host, ':') ? AF_INET6 : AF_INET;
            long pfx = strtol(slash + 1, &end, 10);
            if (inet_pton(fam, host, buf) != 1 || *end || pfx < 0 || pfx > (fam == AF_INET ? 32 : 128)) {
                snprintf(msg, msglen, "egress entry '%s' has a bad CIDR", *e);
                json_decref(peers);
                json_decref(rules);
                return NULL;
            }
            *slash = '/';
            add_block(peers, host);
        } else if (inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1) {
            char cidr[300];
            snprintf(cidr, sizeof cidr, "%s/%d", host, strchr(host, ':') ? 128 : 32);
            add_block(peers, cidr);
        } else {
            /* NetworkPolicy knows addresses only: resolve now (worker thread). */
            struct addrinfo hints, *res = NULL;
            memset(&hints, 0, sizeof hints);
            hints.ai_socktype = SOCK_STREAM;
            int rc = getaddrinfo(host, NULL, &hints, &res);
            if (rc != 0) {
                snprintf(msg, msglen, "egress host '%s' does not resolve: %s", host, gai_strerror(rc));
                json_decref(peers);
                json_decref(rules);
                return NULL;
            }
            for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                char a[INET6_ADDRSTRLEN], cidr[INET6_ADDRSTRLEN + 5];
                const unsigned char *raw;
                if (ai->ai_family == AF_INET)
                    raw = (const unsigned char *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr;
                else if (ai->ai_family == AF_INET6)
                    raw = (const unsigned char *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
                else
                    continue;
                inet_ntop(ai->ai_family, raw, a, sizeof a);
                /* a name (e.g. under an allowed *.domain) must not lead into
                 * the cluster, the node or the cloud metadata service */
                const char *bad = k8s_addr_refused(ai->ai_family, raw);
                if (bad && !k8s_cidrs_contain(private_cidrs, ai->ai_family, raw)) {
                    snprintf(msg, msglen,
                             "egress host '%s' resolves to %s, a %s address: refused (list the CIDR in the"
                             " profile's egress_private_cidrs to allow it)", host, a, bad);
                    freeaddrinfo(res);
                    json_decref(peers);
                    json_decref(rules);
                    return NULL;
                }
                snprintf(cidr, sizeof cidr, "%s/%d", a, ai->ai_family == AF_INET ? 32 : 128);
                int dup = 0;
                size_t i;
                json_t *p;
                json_array_foreach(peers, i, p)
                    if (strcmp(json_string_value(json_object_get(json_object_get(p, "ipBlock"), "cidr")), cidr) == 0)
                        dup = 1;
                if (!dup)
                    add_block(peers, cidr);
            }
            freeaddrinfo(res);
            need_dns = 1;
        }
        json_array_append_new(rules, json_pack("{s:o, s:[{s:s, s:I}]}", "to", peers, "ports",
                                               "protocol", "TCP", "port", (json_int_t)port));
    }
    if (need_dns) {
        /* the program resolves the name itself: cluster DNS only */
        json_array_append_new(rules, json_pack(
            "{s:[{s:{s:{s:s}}, s:{s:{s:s}}}], s:[{s:s, s:i}, {s:s, s:i}]}",
            "to", "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name", "kube-system",
            "podSelector", "matchLabels", "k8s-app", "kube-dns",
            "ports", "protocol", "UDP", "port", 53, "protocol", "TCP", "port", 53));
    }
    return rules;
}

json_t *k8s_egress_obj(const char *ns, const char *pod, const char *pod_uid,
                       const char *exec_id, json_t *rules)
{
    char name[128];
    snprintf(name, sizeof name, "%s-egress", pod);
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s}, s:o}, s:{s:{s:{s:s}}, s:[s], s:o}}",
                     "apiVersion", "networking.k8s.io/v1", "kind", "NetworkPolicy",
                     "metadata", "name", name, "namespace", ns,
                     "labels", K8S_LABEL_MANAGED, K8S_MANAGED_BY, K8S_LABEL_EXEC, exec_id,
                     "ownerReferences", owner_refs(pod, pod_uid),
                     "spec", "podSelector", "matchLabels", K8S_LABEL_EXEC, exec_id,
                     "policyTypes", "Egress", "egress", rules);
}

/* ------------------------------------------------------------ pod */

static int add_b64(json_t *data, const char *key, const unsigned char *d, size_t n)
{
    char *b = k8s_b64(d ? d : (const unsigned char *)"", n);
    if (!b)
        return -1;
    int rc = json_object_set_new(data, key, json_string(b));
    free(b);
    return rc;
}

static int env_name_ok(const char *s, size_t n)
{
    if (n == 0 || isdigit((unsigned char)s[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
            return 0;
    return 1;
}

static void quantity(char *out, size_t n, int64_t v) { snprintf(out, n, "%lld", (long long)v); }

/* The collect sidecar: a native sidecar (init container, restartPolicy
 * Always) sharing /tmp read-only; the kubelet sends it SIGTERM once the
 * sandbox container exited, and it prints the collected files. */
static json_t *collector_obj(const struct k8s_cfg *c, const struct eai_iso_job *job, const json_t *csc)
{
    int64_t nf, fb, tb;
    k8s_collect_caps(job, &nf, &fb, &tb);
    char a[32], b[32], d[32], mem[32];
    snprintf(a, sizeof a, "%lld", (long long)nf);
    snprintf(b, sizeof b, "%lld", (long long)fb);
    snprintf(d, sizeof d, "%lld", (long long)tb);
    quantity(mem, sizeof mem, tb + (32LL << 20)); /* the files in memory, plus the program */
    json_t *cmd = json_pack("[s, s, s, s]", K8S_COLLECTOR_BIN, a, b, d);
    for (const char *const *p = job->collect; cmd && p && *p; p++)
        json_array_append_new(cmd, json_string(*p));
    json_t *lim = json_pack("{s:s, s:s}", "cpu", "100m", "memory", mem);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:{s:O, s:O}, s:O, s:[{s:s, s:s, s:b}]}",
                          "name", K8S_COLLECTOR, "image", c->collector_image, "imagePullPolicy", "Always",
                          "restartPolicy", "Always", "command", cmd, "resources", "limits", lim, "requests", lim,
                          "securityContext", csc, "volumeMounts", "name", "tmp", "mountPath", "/tmp", "readOnly", 1);
    json_decref(lim);
    return o;
}

json_t *k8s_pod_obj(const struct k8s_cfg *c, const struct eai_iso_job *job, const char *ns,
                    const char *pod, const char *node_id, json_t **secret_data,
                    const struct eai_host *h, struct eai_error **err)
{
    json_t *data = json_object(), *env = json_array(), *mounts = json_array(), *cmd = json_array();
    json_t *labels = NULL, *annotations = NULL, *limits = NULL, *podobj = NULL;
    size_t secret_bytes = 0;
    if (!data || !env || !mounts || !cmd)
        goto oom;

    /* the image: normalised as the kubelet reads it, under the profile's
     * registry allow list and digest rule; pulled Always, so the registry
     * checks this pod's right to it every time (no reuse of another
     * tenant's private image cached on the node) */
    char image[600], why[600];
    if (k8s_image_check(c, job->profile, job->image, image, sizeof image, why, sizeof why) < 0) {
        *err = h->error_new(EAI_E_FORBIDDEN, 0, "%s", why);
        goto fail;
    }

    /* command: stdin, when given, comes from the Secret through sh */
    if (job->stdin_data && job->stdin_len) {
        json_array_append_new(cmd, json_string("/bin/sh"));
        json_array_append_new(cmd, json_string("-c"));
        json_array_append_new(cmd, json_string("exec \"$@\" < " K8S_INPUT_DIR "/stdin"));
        json_array_append_new(cmd, json_string("eai-stdin"));
        if (add_b64(data, "stdin", job->stdin_data, job->stdin_len) < 0)
            goto oom;
        secret_bytes += job->stdin_len;
    }
    for (const char *const *a = job->argv; a && *a; a++)
        if (json_array_append_new(cmd, json_string(*a)) < 0)
            goto oom;
    if (!job->argv || !job->argv[0]) {
        eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "empty command");
        goto fail;
    }

    /* env: values live in the Secret, the pod spec only names them */
    int have_home = 0;
    size_t ei = 0;
    for (const char *const *e = job->env; e && *e; e++, ei++) {
        const char *eq = strchr(*e, '=');
        if (!eq || !env_name_ok(*e, (size_t)(eq - *e))) {
            eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "environment variable name not accepted by Kubernetes");
            goto fail;
        }
        char name[256], key[32];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        snprintf(key, sizeof key, "env-%zu", ei);
        if (strcmp(name, "HOME") == 0)
            have_home = 1;
        if (add_b64(data, key, (const unsigned char *)eq + 1, strlen(eq + 1)) < 0)
            goto oom;
        secret_bytes += strlen(eq + 1);
        json_array_append_new(env, json_pack("{s:s, s:{s:{s:s, s:s}}}", "name", name, "valueFrom",
                                             "secretKeyRef", "name", pod, "key", key));
    }
    if (!have_home)
        json_array_append_new(env, json_pack("{s:s, s:s}", "name", "HOME", "value", "/tmp"));
    if (job->traceparent && *job->traceparent)
        json_array_append_new(env, json_pack("{s:s, s:s}", "name", "TRACEPARENT", "value", job->traceparent));

    /* mounts: /tmp (the only writable place), the input Secret, the files */
    json_array_append_new(mounts, json_pack("{s:s, s:s}", "name", "tmp", "mountPath", "/tmp"));
    json_array_append_new(mounts, json_pack("{s:s, s:s, s:b}", "name", "input", "mountPath", K8S_INPUT_DIR,
                                            "readOnly", 1));
    for (size_t i = 0; i < job->nfiles; i++) {
        const struct eai_iso_file *f = &job->files[i];
        if (!f->path || strncmp(f->path, "/tmp/", 5) != 0 || strstr(f->path, "/../") || strstr(f->path, "/./") ||
            f->path[strlen(f->path) - 1] == '/') {
            eai_host_error_set(h, err, EAI_E_VALIDATION_FAILED, "input file path must be a file under /tmp");
            goto fail;
        }
        int dup = 0;
        for (size_t j = i + 1; j < job->nfiles; j++)
            if (job->files[j].path && strcmp(job->files[j].path, f->path) == 0)
                dup = 1; /* the last one wins, as with a write */
        if (dup)
            continue;
        char key[32];
        snprintf(key, sizeof key, "file-%zu", i);
        if (add_b64(data, key, f->data, f->len) < 0)
            goto oom;
        secret_bytes += f->len;
        json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:b}", "name", "input", "mountPath", f->path,
                                                "subPath", key, "readOnly", 1));
    }
    if (secret_bytes > K8S_SECRET_MAX - 4096) {
        eai_host_error_set(h, err, EAI_E_LIMIT_EXCEEDED,
                           "stdin, files and env total %zu bytes; a Kubernetes Secret holds at most 1 MiB",
                           secret_bytes);
        goto fail;
    }

    /* resources: requests = limits (Guaranteed QoS) */
    limits = json_object();
    char q[32];
    if (job->cpu_millis > 0) {
        snprintf(q, sizeof q, "%lldm", (long long)job->cpu_millis);
        json_object_set_new(limits, "cpu", json_string(q));
    }
    if (job->memory_bytes > 0) {
        quantity(q, sizeof q, job->memory_bytes);
        json_object_set_new(limits, "memory", json_string(q));
    }

    labels = json_pack("{s:s, s:s, s:s}", K8S_LABEL_MANAGED, K8S_MANAGED_BY,
                       "app.kubernetes.io/component", "sandbox", K8S_LABEL_EXEC, job->id);
    if (job->tenant_id && label_value_ok(job->tenant_id))
        json_object_set_new(labels, K8S_LABEL_TENANT, json_string(job->tenant_id));
    if (job->profile && label_value_ok(job->profile))
        json_object_set_new(labels, K8S_LABEL_PROFILE, json_string(job->profile));
    annotations = json_pack("{s:s, s:s}", "eai-sandbox.dev/execution-id", job->id,
                            "eai-sandbox.dev/node", node_id ? node_id : "");
    char tmo[32];
    snprintf(tmo, sizeof tmo, "%lld", (long long)job->timeout_ms);
    json_object_set_new(annotations, "eai-sandbox.dev/timeout-ms", json_string(tmo));

    json_t *csc = json_pack("{s:b, s:I, s:I, s:b, s:b, s:b, s:{s:[s]}, s:{s:s}}",
                            "runAsNonRoot", 1, "runAsUser", (json_int_t)c->uid, "runAsGroup", (json_int_t)c->uid,
                            "readOnlyRootFilesystem", 1, "allowPrivilegeEscalation", 0, "privileged", 0,
                            "capabilities", "drop", "ALL", "seccompProfile", "type", "RuntimeDefault");
    json_t *container = json_pack("{s:s, s:s, s:s, s:o, s:s, s:o, s:{s:O, s:O}, s:o, s:o, s:s}",
                                  "name", K8S_CONTAINER, "image", image, "imagePullPolicy", "Always",
                                  "command", cmd, "workingDir", "/tmp", "env", env,
                                  "resources", "limits", limits, "requests", limits,
                                  "securityContext", csc, "volumeMounts", mounts,
                                  "terminationMessagePolicy", "File");
    cmd = env = mounts = NULL;
    json_t *psc = json_pack("{s:b, s:I, s:I, s:I, s:{s:s}}", "runAsNonRoot", 1, "runAsUser", (json_int_t)c->uid,
                            "runAsGroup", (json_int_t)c->uid, "fsGroup", (json_int_t)c->uid,
                            "seccompProfile", "type", "RuntimeDefault");
    json_t *tmpvol = json_pack("{s:s, s:{}}", "name", "tmp", "emptyDir");
    if (tmpvol && job->disk_bytes > 0) {
        quantity(q, sizeof q, job->disk_bytes);
        json_object_set_new(json_object_get(tmpvol, "emptyDir"), "sizeLimit", json_string(q));
    }
    json_int_t deadline = (json_int_t)((job->timeout_ms + 999) / 1000);
    if (deadline < 1)
        deadline = 1;
    const char *rc = job->runtime_class && *job->runtime_class ? job->runtime_class : c->runtime_class;
    json_t *spec = json_pack("{s:s, s:b, s:b, s:b, s:b, s:b, s:b, s:I, s:I, s:o, s:[o], s:[o, {s:s, s:{s:s, s:i, s:b}}]}",
                             "restartPolicy", "Never",
                             "automountServiceAccountToken", 0, "enableServiceLinks", 0,
                             "hostNetwork", 0, "hostPID", 0, "hostIPC", 0, "shareProcessNamespace", 0,
                             "activeDeadlineSeconds", deadline,
                             "terminationGracePeriodSeconds", (json_int_t)1,
                             "securityContext", psc,
                             "containers", container,
                             "volumes", tmpvol, "name", "input", "secret", "secretName", pod,
                             "defaultMode", 0444, "optional", 0);
    if (!spec)
        goto oom;
    if (c->collector_image && job->collect && job->collect[0]) {
        json_t *col = collector_obj(c, job, csc);
        if (!col || json_object_set_new(spec, "initContainers", json_pack("[o]", col)) < 0)
            goto oom;
        /* time for the sidecar to print the files after its SIGTERM */
        json_object_set_new(spec, "terminationGracePeriodSeconds", json_integer(10));
    }
    if (rc && *rc)
        json_object_set_new(spec, "runtimeClassName", json_string(rc));
    if (json_is_object(c->node_selector) && json_object_size(c->node_selector))
        json_object_set(spec, "nodeSelector", c->node_selector);
    if (json_is_array(c->tolerations) && json_array_size(c->tolerations))
        json_object_set(spec, "tolerations", c->tolerations);
    podobj = json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:o}, s:o}", "apiVersion", "v1", "kind", "Pod",
                       "metadata", "name", pod, "namespace", ns, "labels", labels, "annotations", annotations,
                       "spec", spec);
    labels = annotations = NULL;
    json_decref(limits);
    if (!podobj)
        goto oom;
    *secret_data = data;
    return podobj;
oom:
    eai_host_error_set(h, err, EAI_E_INTERNAL, "out of memory building the pod");
fail:
    json_decref(data);
    json_decref(env);
    json_decref(mounts);
    json_decref(cmd);
    json_decref(labels);
    json_decref(annotations);
    json_decref(limits);
    return NULL;
}

json_t *k8s_secret_obj(const char *ns, const char *pod, const char *pod_uid,
                       const char *exec_id, const char *tenant, json_t *data)
{
    json_t *labels = json_pack("{s:s, s:s}", K8S_LABEL_MANAGED, K8S_MANAGED_BY, K8S_LABEL_EXEC, exec_id);
    if (labels && tenant && label_value_ok(tenant))
        json_object_set_new(labels, K8S_LABEL_TENANT, json_string(tenant));
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:o, s:o}, s:s, s:b, s:o}", "apiVersion", "v1", "kind", "Secret",
                     "metadata", "name", pod, "namespace", ns, "labels", labels,
                     "ownerReferences", owner_refs(pod, pod_uid),
                     "type", "Opaque", "immutable", 1, "data", data);
}

json_t *k8s_delete_options(void)
{
    return json_pack("{s:s, s:s, s:I, s:s}", "apiVersion", "v1", "kind", "DeleteOptions",
                     "gracePeriodSeconds", (json_int_t)0, "propagationPolicy", "Background");
}
