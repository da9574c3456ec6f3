/*
 * test_k8s_plugin (label k8s): eai-isolation-k8s.so, loaded by core's
 * loader into a real host (event loop, workers, the shared libcurl client),
 * against the Kubernetes API stand-in (tests/k8s/standin, Node.js) over
 * loopback HTTP.  The stand-in validates every object against the official
 * Kubernetes schemas (strict field validation, Pod Security "restricted",
 * RuntimeClass admission) and simulates the pods; this test reads back what
 * the plugin sent and checks it field by field.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <curl/curl.h>
#include <event2/event.h>
#include <jansson.h>

#include <eai/isolation.h>

#include "base/errors.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "base/util.h"
#include "base/worker.h"

extern char **environ;

static struct event_base *g_base;
static struct eai_host *g_host;
static const struct eai_plugin_descriptor *g_desc;
static const struct eai_isolation_ops *g_ops;
static void *g_iso;
static char g_dir[PATH_MAX], g_token[PATH_MAX + 16], g_url[256];
static pid_t g_node = -1;
static int g_node_stdin = -1;
static json_t *g_calls; /* plugins/k8s/api-calls.json */
static void *g_policy_iso;  /* an instance with image and egress policies */

#define TENANT "0b7f8a2e-1c3d-4e5f-8a9b-0c1d2e3f4a5b"
#define PREFIX "eai-t-"
#define NS PREFIX TENANT
#define SA "eai-system/eai-sandbox"
#define TENANT_ROLE "eai-sandbox-tenant"

/* ------------------------------------------------------------ helpers */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void loop_until(int (*cond)(void *), void *arg, double max_s)
{
    double end = now_s() + max_s;
    while (!cond(arg) && now_s() < end) {
        struct timeval tv = {0, 20000};
        event_base_loopexit(g_base, &tv);
        event_base_loop(g_base, EVLOOP_ONCE);
    }
}

static int never(void *arg) { return 0; }
static void spin(double s) { loop_until(never, NULL, s); }

struct buf {
    char *d;
    size_t n;
};

static size_t buf_write(char *p, size_t s, size_t n, void *u)
{
    struct buf *b = u;
    char *nd = realloc(b->d, b->n + s * n + 1);
    if (!nd)
        return 0;
    b->d = nd;
    memcpy(b->d + b->n, p, s * n);
    b->n += s * n;
    b->d[b->n] = '\0';
    return s * n;
}

/* Blocking HTTP to the stand-in's control routes (test code, not the loop). */
static json_t *standin(const char *method, const char *path, const char *body)
{
    CURL *c = curl_easy_init();
    struct buf b = {0};
    char url[512];
    snprintf(url, sizeof url, "%s%s", g_url, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    struct curl_slist *h = NULL;
    char auth[512];
    FILE *tf = fopen(g_token, "re");
    char tok[256] = "";
    if (tf) {
        if (fgets(tok, sizeof tok, tf))
            tok[strcspn(tok, "\n")] = '\0';
        fclose(tf);
    }
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", tok);
    h = curl_slist_append(h, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_perform(c);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    json_t *j = b.d ? json_loads(b.d, 0, NULL) : NULL;
    free(b.d);
    return j;
}

static void fault(const char *json) { json_decref(standin("POST", "/_standin/faults", json)); }

static void write_token(const char *t)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp", g_token);
    FILE *f = fopen(tmp, "we");
    fprintf(f, "%s\n", t);
    fclose(f);
    rename(tmp, g_token);
}

/* The requests the plugin sent for one execution id (by path or body). */
static json_t *requests_matching(const char *method, const char *path_part)
{
    json_t *all = standin("GET", "/_standin/requests", NULL), *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(all, i, r)
    {
        const char *m = json_string_value(json_object_get(r, "method"));
        const char *p = json_string_value(json_object_get(r, "path"));
        if ((!method || strcmp(m, method) == 0) && (!path_part || strstr(p, path_part)))
            json_array_append(out, r);
    }
    json_decref(all);
    return out;
}

static json_t *post_body(const char *path_suffix, const char *name)
{
    json_t *l = requests_matching("POST", path_suffix), *found = NULL;
    size_t i;
    json_t *r;
    json_array_foreach(l, i, r)
    {
        json_t *b = json_object_get(r, "body");
        const char *n = json_string_value(json_object_get(json_object_get(b, "metadata"), "name"));
        if (json_integer_value(json_object_get(r, "status")) == 201 && n && (!name || strcmp(n, name) == 0))
            found = b;
    }
    json_incref(found);
    json_decref(l);
    return found;
}

static int deleted(const char *kind, const char *name, const char *by)
{
    json_t *d = standin("GET", "/_standin/deleted", NULL);
    size_t i;
    json_t *e;
    int found = 0;
    json_array_foreach(d, i, e)
        if (!strcmp(json_string_value(json_object_get(e, "kind")), kind) &&
            !strcmp(json_string_value(json_object_get(e, "name")), name) &&
            (!by || !strcmp(json_string_value(json_object_get(e, "by")), by)))
            found = 1;
    json_decref(d);
    return found;
}

static const char *jpath(const json_t *o, const char *path)
{
    /* "spec.containers.0.name" */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const json_t *cur = o;
    /* '~' stands for '.' inside a key (label names) */
    for (char *save = NULL, *t = strtok_r(buf, ".", &save); t && cur; t = strtok_r(NULL, ".", &save)) {
        for (char *c = t; *c; c++)
            if (*c == '~')
                *c = '.';
        cur = json_is_array(cur) ? json_array_get(cur, strtoul(t, NULL, 10)) : json_object_get(cur, t);
    }
    static char out[512];
    if (json_is_string(cur))
        return json_string_value(cur);
    if (json_is_true(cur))
        return "true";
    if (json_is_false(cur))
        return "false";
    if (json_is_integer(cur)) {
        snprintf(out, sizeof out, "%lld", (long long)json_integer_value(cur));
        return out;
    }
    return cur ? "<object>" : NULL;
}

#define CHECK_FIELD(obj, path, want)                                                        \
    do {                                                                                    \
        const char *got_ = jpath(obj, path);                                                \
        CU_ASSERT_PTR_NOT_NULL(got_);                                                       \
        if (!got_ || strcmp(got_, want) != 0) {                                             \
            fprintf(stderr, "  %s = %s, want %s\n", path, got_ ? got_ : "(absent)", want); \
            CU_FAIL(path);                                                                  \
        }                                                                                   \
    } while (0)

/* ------------------------------------------------------------ jobs */

struct run {
    struct eai_iso_job job;
    char id[64];
    const char *argv[24];
    const char *env[8];
    const char *egress[8];
    struct eai_iso_file files[4];
    void *handle;
    int started, done;
    enum eai_iso_outcome outcome;
    int exit_code;
    enum eai_code error_code;
    char errmsg[512];
    char out[8192];
    size_t outlen;
    double dur, cpu;
};

static void on_output(void *arg, enum eai_iso_stream s, const char *d, size_t n)
{
    struct run *r = arg;
    size_t k = n < sizeof r->out - 1 - r->outlen ? n : sizeof r->out - 1 - r->outlen;
    memcpy(r->out + r->outlen, d, k);
    r->outlen += k;
    r->out[r->outlen] = '\0';
}

static void on_started(void *arg) { ((struct run *)arg)->started = 1; }

static void on_exit_cb(void *arg, const struct eai_iso_result *res)
{
    struct run *r = arg;
    CU_ASSERT_EQUAL(r->done, 0); /* exactly once */
    r->done = 1;
    r->outcome = res->outcome;
    r->exit_code = res->exit_code;
    r->error_code = res->error_code;
    r->dur = res->duration_s;
    r->cpu = res->cpu_seconds;
    snprintf(r->errmsg, sizeof r->errmsg, "%s", res->error_message ? res->error_message : "");
}

static const struct eai_iso_callbacks g_cb = {
    .size = sizeof(struct eai_iso_callbacks), .on_output = on_output, .on_started = on_started, .on_exit = on_exit_cb};

static struct run *run_new(const char *const *argv)
{
    struct run *r = calloc(1, sizeof *r);
    char u[37];
    eai_uuid_v4(u);
    snprintf(r->id, sizeof r->id, "sbx_%s", u);
    for (size_t i = 0; argv[i] && i < 23; i++)
        r->argv[i] = argv[i];
    r->job.size = sizeof r->job;
    r->job.id = r->id;
    r->job.tenant_id = TENANT;
    r->job.profile = "gvisor";
    r->job.runtime_class = "gvisor";
    r->job.image = "python:3.12-slim";
    r->job.argv = r->argv;
    r->job.env = r->env;
    r->job.cpu_millis = 500;
    r->job.memory_bytes = 64LL << 20;
    r->job.timeout_ms = 10000;
    r->job.output_bytes = 1 << 20;
    r->job.disk_bytes = 16LL << 20;
    return r;
}

static int done_cond(void *arg) { return ((struct run *)arg)->done; }
static int started_cond(void *arg) { return ((struct run *)arg)->started; }

static int run_start(struct run *r)
{
    struct eai_error *err = NULL;
    int rc = g_ops->start(g_iso, &r->job, &g_cb, r, &r->handle, &err);
    if (rc < 0) {
        fprintf(stderr, "  start: %s\n", err && err->message ? err->message : "?");
        eai_error_free(err);
    }
    return rc;
}

static int run_job(struct run *r, double max_s)
{
    if (run_start(r) < 0)
        return -1;
    loop_until(done_cond, r, max_s);
    CU_ASSERT_EQUAL(r->done, 1);
    return 0;
}

static void pod_name(const struct run *r, char *out, size_t n)
{
    snprintf(out, n, "sbx-%s", r->id + 4);
}

/* ------------------------------------------------------------ set-up */

/* Start a stand-in (extra: more arguments, NULL-terminated); its URL into url. */
static int spawn_standin(const char *const *extra, pid_t *pid, int *stdin_fd, char *url, size_t urllen)
{
    int out[2], in[2];
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(in, O_CLOEXEC) < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char script[PATH_MAX];
    snprintf(script, sizeof script, "%s/standin/server.js", EAI_STANDIN_DIR);
    char *argv[24] = {(char *)EAI_NODE_BIN, script, "--port", "0", "--token-file", g_token,
                      "--start-delay-ms", "20", "--namespaced-rbac", SA ":" TENANT_ROLE};
    int n = 10;
    for (const char *const *e = extra; e && *e && n < 23; e++)
        argv[n++] = (char *)*e;
    argv[n] = NULL;
    int rc = posix_spawn(pid, EAI_NODE_BIN, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        close(in[1]);
        close(out[0]);
        return -1;
    }
    *stdin_fd = in[1];
    FILE *f = fdopen(out[0], "r");
    char line[512];
    int ok = -1;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "STANDIN_URL=", 12)) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(url, urllen, "%s", line + 12);
            ok = 0;
            break;
        }
    }
    fclose(f);
    return ok;
}

static json_t *base_config(void)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}",
                     "api_url", g_url, "token_file", g_token, "namespace_prefix", PREFIX,
                     "tenant_role", TENANT_ROLE, "service_account", SA,
                     "runtime_class", "gvisor", "poll_ms", 50, "api_timeout_ms", 1500,
                     "api_retries", 2, "deadline_grace_ms", 1500, "image_pull_grace_ms", 300,
                     "token_reload_s", 3600, "probe_interval_s", 1, "sweep_min_age_s", 0,
                     "api_outage_grace_ms", 1000);
}

static int ready_cond(void *arg)
{
    struct eai_iso_probe p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    g_ops->probe(arg, &p);
    return p.ready;
}

static void *make_instance(json_t *cfg)
{
    struct eai_error *err = NULL;
    void *iso = g_desc->create(g_host, cfg, &err);
    json_decref(cfg);
    if (!iso) {
        fprintf(stderr, "create: %s\n", err && err->message ? err->message : "?");
        eai_error_free(err);
        return NULL;
    }
    loop_until(ready_cond, iso, 10);
    return iso;
}

static int suite_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(g_dir, sizeof g_dir, "/tmp/eai-k8s-test-XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    snprintf(g_token, sizeof g_token, "%s/token", g_dir);
    write_token("token-1");
    if (spawn_standin(NULL, &g_node, &g_node_stdin, g_url, sizeof g_url) < 0) {
        fprintf(stderr, "cannot start the stand-in (did `npm ci` run in tests/k8s?)\n");
        return -1;
    }
    char calls[PATH_MAX];
    snprintf(calls, sizeof calls, "%s/plugins/k8s/api-calls.json", EAI_SOURCE_DIR);
    g_calls = json_load_file(calls, 0, NULL);
    g_base = event_base_new();
    eai_workers_start(g_base, 2);
    g_host = eai_host_new(g_base, g_dir);
    struct eai_error *err = NULL;
    g_desc = eai_plugin_load(eai_plugin_dir(), EAI_KIND_ISOLATION, "k8s", &err);
    if (!g_desc) {
        fprintf(stderr, "load: %s\n", err && err->message ? err->message : "?");
        eai_error_free(err);
        return -1;
    }
    g_ops = g_desc->ops;
    g_iso = make_instance(base_config());
    json_t *pc = base_config();
    json_t *pol = json_loads(
        "{\"images\": {\"registries\": [\"docker.io/library\"]},"
        " \"profiles\": {"
        "  \"pinned\": {\"images\": {\"registries\": [\"registry.test/acme\"], \"require_digest\": true}},"
        "  \"open\": {\"images\": {}},"
        "  \"private\": {\"egress_private_cidrs\": [\"127.0.0.0/8\", \"::1/128\"]}}}", 0, NULL);
    json_object_update(pc, pol);
    json_decref(pol);
    /* no periodic probe: its 401 after a token rotation would blur test_token_rotation */
    json_object_set_new(pc, "probe_interval_s", json_integer(3600));
    g_policy_iso = make_instance(pc);
    return g_iso && g_policy_iso && g_calls ? 0 : -1;
}

static int suite_clean(void)
{
    if (getenv("EAI_K8S_TEST_DUMP")) {
        /* debugging aid: every request the stand-in saw */
        json_t *all = standin("GET", "/_standin/requests", NULL);
        json_dump_file(all, getenv("EAI_K8S_TEST_DUMP"), JSON_INDENT(1));
        json_decref(all);
    }
    if (g_iso)
        g_desc->destroy(g_iso);
    if (g_policy_iso)
        g_desc->destroy(g_policy_iso);
    spin(0.2);
    eai_host_free(g_host);
    eai_workers_stop();
    event_base_free(g_base);
    if (g_node_stdin >= 0)
        close(g_node_stdin);
    if (g_node > 0) {
        kill(g_node, SIGTERM);
        waitpid(g_node, NULL, 0);
    }
    json_decref(g_calls);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd) != 0)
        return 0;
    return 0;
}

/* ------------------------------------------------------------ tests */

static void test_probe(void)
{
    struct eai_iso_probe p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    g_ops->probe(g_iso, &p);
    CU_ASSERT_EQUAL(p.ready, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.version, "v1.29.0-eai-standin"));
    CU_ASSERT(p.caps & EAI_ISO_CAP_RECOVER);
    CU_ASSERT(p.caps & EAI_ISO_CAP_EGRESS);
    /* a RuntimeClass the cluster does not have: not ready, and says why */
    json_t *cfg = base_config();
    json_object_set_new(cfg, "runtime_class", json_string("kata-missing"));
    struct eai_error *err = NULL;
    void *iso = g_desc->create(g_host, cfg, &err);
    json_decref(cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    spin(0.5);
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    g_ops->probe(iso, &p);
    CU_ASSERT_EQUAL(p.ready, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.reason, "kata-missing"));
    g_desc->destroy(iso);
}

static void test_succeeded_and_objects(void)
{
    const char *argv[] = {"eai-sim", "--cat-stdin", "--cat", "/tmp/in/data.csv", "--env", "K", "--env", "HOME",
                          "--write", "/tmp/out.txt", "x", "--stdout", "hello\n", "--stderr", "oops\n", NULL};
    struct run *r = run_new(argv);
    r->env[0] = "K=secret-value";
    r->files[0] = (struct eai_iso_file){"/tmp/in/data.csv", (const unsigned char *)"a,b\n1,2\n", 8};
    r->job.files = r->files;
    r->job.nfiles = 1;
    r->job.stdin_data = (const unsigned char *)"from-stdin\n";
    r->job.stdin_len = 11;
    r->job.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    CU_ASSERT_EQUAL_FATAL(run_job(r, 15), 0);
    CU_ASSERT_EQUAL(r->started, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r->out, "from-stdin\na,b\n1,2\nsecret-value\n/tmp\nhello\noops\n");
    CU_ASSERT(r->dur >= 0);

    char pod[96];
    pod_name(r, pod, sizeof pod);
    /* the namespace: Pod Security "restricted" enforced, tenant label */
    json_t *ns = post_body("/api/v1/namespaces", NS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ns);
    CHECK_FIELD(ns, "metadata.labels.pod-security~kubernetes~io/enforce", "restricted");
    json_decref(ns);
    json_t *nsl = requests_matching("POST", "/api/v1/namespaces");
    json_t *first = json_array_get(nsl, 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(first, "query"), "fieldValidation")),
                           "Strict");
    json_t *nsb = json_object_get(first, "body");
    json_t *labels = json_object_get(json_object_get(nsb, "metadata"), "labels");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, "pod-security.kubernetes.io/enforce")), "restricted");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, "eai-sandbox.dev/tenant")), TENANT);
    json_decref(nsl);

    /* default deny, both directions, every pod of the namespace */
    json_t *np = post_body("/networkpolicies", "eai-default-deny");
    CU_ASSERT_PTR_NOT_NULL_FATAL(np);
    json_t *spec = json_object_get(np, "spec");
    CU_ASSERT_EQUAL(json_object_size(json_object_get(spec, "podSelector")), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(spec, "policyTypes")), 2);
    CU_ASSERT_PTR_NULL(json_object_get(spec, "ingress"));
    CU_ASSERT_PTR_NULL(json_object_get(spec, "egress"));
    json_decref(np);

    /* the pod, field by field */
    json_t *p = post_body("/pods", pod);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CHECK_FIELD(p, "metadata.namespace", NS);
    CHECK_FIELD(p, "metadata.labels.eai-sandbox~dev/execution-id", r->id);
    CHECK_FIELD(p, "spec.runtimeClassName", "gvisor");
    CHECK_FIELD(p, "spec.automountServiceAccountToken", "false");
    CHECK_FIELD(p, "spec.enableServiceLinks", "false");
    CHECK_FIELD(p, "spec.restartPolicy", "Never");
    CHECK_FIELD(p, "spec.activeDeadlineSeconds", "10");
    CHECK_FIELD(p, "spec.hostNetwork", "false");
    CHECK_FIELD(p, "spec.securityContext.runAsNonRoot", "true");
    CHECK_FIELD(p, "spec.securityContext.seccompProfile.type", "RuntimeDefault");
    CHECK_FIELD(p, "spec.containers.0.securityContext.runAsNonRoot", "true");
    CHECK_FIELD(p, "spec.containers.0.securityContext.readOnlyRootFilesystem", "true");
    CHECK_FIELD(p, "spec.containers.0.securityContext.allowPrivilegeEscalation", "false");
    CHECK_FIELD(p, "spec.containers.0.securityContext.privileged", "false");
    CHECK_FIELD(p, "spec.containers.0.securityContext.capabilities.drop.0", "ALL");
    CHECK_FIELD(p, "spec.containers.0.securityContext.seccompProfile.type", "RuntimeDefault");
    CU_ASSERT_PTR_NULL(jpath(p, "spec.containers.0.securityContext.capabilities.add"));
    CHECK_FIELD(p, "spec.containers.0.resources.limits.cpu", "500m");
    CHECK_FIELD(p, "spec.containers.0.resources.limits.memory", "67108864");
    CHECK_FIELD(p, "spec.containers.0.resources.requests.cpu", "500m");
    CHECK_FIELD(p, "spec.containers.0.resources.requests.memory", "67108864");
    /* normalised as the kubelet reads it, pulled Always (issue 16, item 8) */
    CHECK_FIELD(p, "spec.containers.0.image", "docker.io/library/python:3.12-slim");
    CHECK_FIELD(p, "spec.containers.0.imagePullPolicy", "Always");
    CHECK_FIELD(p, "spec.containers.0.volumeMounts.0.mountPath", "/tmp");
    CHECK_FIELD(p, "spec.volumes.0.name", "tmp");
    CHECK_FIELD(p, "spec.volumes.0.emptyDir.sizeLimit", "16777216");
    CHECK_FIELD(p, "spec.volumes.1.secret.secretName", pod);
    /* the env value is not in the pod spec, only a reference to the Secret */
    char *dump = json_dumps(p, 0);
    CU_ASSERT_PTR_NULL(strstr(dump, "secret-value"));
    CU_ASSERT_PTR_NULL(strstr(dump, "a,b"));
    free(dump);
    CHECK_FIELD(p, "spec.containers.0.env.0.valueFrom.secretKeyRef.name", pod);
    /* no other volume types than emptyDir and the Secret */
    CU_ASSERT_EQUAL(json_array_size(json_object_get(json_object_get(p, "spec"), "volumes")), 2);
    json_decref(p);

    /* the Secret: owned by the pod, immutable */
    json_t *s = post_body("/secrets", pod);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CHECK_FIELD(s, "metadata.ownerReferences.0.kind", "Pod");
    CHECK_FIELD(s, "metadata.ownerReferences.0.name", pod);
    CU_ASSERT_PTR_NOT_NULL(jpath(s, "metadata.ownerReferences.0.uid"));
    CHECK_FIELD(s, "immutable", "true");
    json_decref(s);

    /* cleaned up: the pod by us, the Secret by the garbage collector */
    CU_ASSERT(deleted("Pod", pod, "api"));
    CU_ASSERT(deleted("Secret", pod, "gc"));
    free(r);
}

static void test_failed_exit_code(void)
{
    const char *argv[] = {"eai-sim", "--stdout", "partial\n", "--exit", "3", NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 3);
    CU_ASSERT_STRING_EQUAL(r->out, "partial\n");
    free(r);
}

static void test_oom(void)
{
    const char *argv[] = {"eai-sim", "--alloc", "100Mi", NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_OOM);
    /* the same program under a larger limit is fine: the limit was applied */
    struct run *r2 = run_new(argv);
    r2->job.memory_bytes = 128LL << 20;
    CU_ASSERT_EQUAL_FATAL(run_job(r2, 10), 0);
    CU_ASSERT_EQUAL(r2->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r2->exit_code, 0);
    free(r);
    free(r2);
}

static void test_timeout(void)
{
    const char *argv[] = {"eai-sim", "--stdout", "before\n", "--sleep-ms", "10000", NULL};
    struct run *r = run_new(argv);
    r->job.timeout_ms = 1000;
    double t0 = now_s();
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_TIMEOUT);
    CU_ASSERT_STRING_EQUAL(r->out, "before\n"); /* output so far is kept */
    CU_ASSERT(now_s() - t0 < 4.0);
    char pod[96];
    pod_name(r, pod, sizeof pod);
    CU_ASSERT(deleted("Pod", pod, "api"));
    free(r);
}

static void test_cancel(void)
{
    const char *argv[] = {"eai-sim", "--sleep-ms", "20000", NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_start(r), 0);
    loop_until(started_cond, r, 10);
    CU_ASSERT_EQUAL_FATAL(r->started, 1);
    double t0 = now_s();
    g_ops->cancel(g_iso, r->handle);
    loop_until(done_cond, r, 10);
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_CANCELLED);
    CU_ASSERT(now_s() - t0 < 2.0);
    char pod[96];
    pod_name(r, pod, sizeof pod);
    CU_ASSERT(deleted("Pod", pod, "api"));
    CU_ASSERT(deleted("Secret", pod, "gc"));
    /* DELETE with gracePeriodSeconds 0 */
    char path[256];
    snprintf(path, sizeof path, "/pods/%s", pod);
    json_t *dl = requests_matching("DELETE", path);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(json_array_get(dl, 0), "body"),
                                                       "gracePeriodSeconds")), 0);
    json_decref(dl);
    free(r);
}

static void test_no_token_readonly_root(void)
{
    const char *argv1[] = {"eai-sim", "--cat", "/var/run/secrets/kubernetes.io/serviceaccount/token", NULL};
    struct run *r = run_new(argv1);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->out, "No such file"));
    const char *argv2[] = {"eai-sim", "--write", "/etc/passwd", "x", NULL};
    struct run *r2 = run_new(argv2);
    CU_ASSERT_EQUAL_FATAL(run_job(r2, 10), 0);
    CU_ASSERT_EQUAL(r2->exit_code, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(r2->out, "Read-only file system"));
    free(r);
    free(r2);
}

static void test_egress_policy(void)
{
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    r->egress[0] = "127.0.0.1:8443";
    r->egress[1] = "localhost:443";
    r->job.egress = r->egress;
    /* localhost resolves to loopback: allowed only on the profile that
     * lists 127.0.0.0/8 and ::1 (test_egress_refusals for the others) */
    r->job.profile = "private";
    void *saved = g_iso;
    g_iso = g_policy_iso;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    g_iso = saved;
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    char pod[96], npn[128];
    pod_name(r, pod, sizeof pod);
    snprintf(npn, sizeof npn, "%s-egress", pod);
    json_t *np = post_body("/networkpolicies", npn);
    CU_ASSERT_PTR_NOT_NULL_FATAL(np);
    CHECK_FIELD(np, "spec.podSelector.matchLabels.eai-sandbox~dev/execution-id", r->id);
    CHECK_FIELD(np, "spec.policyTypes.0", "Egress");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(json_object_get(np, "spec"), "policyTypes")), 1);
    CHECK_FIELD(np, "spec.egress.0.to.0.ipBlock.cidr", "127.0.0.1/32");
    CHECK_FIELD(np, "spec.egress.0.ports.0.port", "8443");
    CHECK_FIELD(np, "spec.egress.0.ports.0.protocol", "TCP");
    CHECK_FIELD(np, "spec.egress.1.ports.0.port", "443");
    CU_ASSERT_PTR_NOT_NULL(jpath(np, "spec.egress.1.to.0.ipBlock.cidr"));
    CHECK_FIELD(np, "spec.egress.2.ports.0.port", "53"); /* DNS, because of a host name */
    CHECK_FIELD(np, "metadata.ownerReferences.0.name", pod);
    json_decref(np);
    CU_ASSERT(deleted("NetworkPolicy", npn, "gc"));
    /* the policy was created before the Secret the pod waits for */
    json_t *all = requests_matching("POST", NULL);
    int i_np = -1, i_sec = -1;
    size_t i;
    json_t *q;
    json_array_foreach(all, i, q)
    {
        const char *n = jpath(json_object_get(q, "body"), "metadata.name");
        if (n && !strcmp(n, npn))
            i_np = (int)i;
        if (n && !strcmp(n, pod) && strstr(json_string_value(json_object_get(q, "path")), "/secrets"))
            i_sec = (int)i;
    }
    CU_ASSERT(i_np >= 0 && i_sec > i_np);
    json_decref(all);
    /* no egress asked: no egress policy */
    struct run *r2 = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r2, 10), 0);
    pod_name(r2, pod, sizeof pod);
    snprintf(npn, sizeof npn, "%s-egress", pod);
    np = post_body("/networkpolicies", npn);
    CU_ASSERT_PTR_NULL(np);
    json_decref(np);
    free(r);
    free(r2);
}

/* ------------------------------------------------------------ policy (issue 16, item 8) */

#define DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* start() on the policy instance: 0 (and the run done), or -1 with the
 * refusal in r->errmsg / r->error_code. */
static int policy_run(struct run *r, double max_s)
{
    struct eai_error *err = NULL;
    int rc = g_ops->start(g_policy_iso, &r->job, &g_cb, r, &r->handle, &err);
    if (rc < 0) {
        r->error_code = err ? err->code : EAI_E_INTERNAL;
        snprintf(r->errmsg, sizeof r->errmsg, "%s", err && err->message ? err->message : "");
        eai_error_free(err);
        return -1;
    }
    loop_until(done_cond, r, max_s);
    CU_ASSERT_EQUAL(r->done, 1);
    return 0;
}

static int pod_posted(const struct run *r)
{
    char pod[96];
    pod_name(r, pod, sizeof pod);
    json_t *p = post_body("/pods", pod);
    int found = p != NULL;
    json_decref(p);
    json_t *l = requests_matching("POST", "/pods");
    size_t i;
    json_t *q;
    json_array_foreach(l, i, q)
    {
        const char *n = jpath(json_object_get(q, "body"), "metadata.name");
        if (n && strcmp(n, pod) == 0)
            found = 1;
    }
    json_decref(l);
    return found;
}

static void expect_image_refused(const char *profile, const char *image, const char *needle)
{
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    r->job.profile = profile;
    r->job.image = image;
    CU_ASSERT_EQUAL(policy_run(r, 10), -1);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_FORBIDDEN);
    if (!strstr(r->errmsg, needle)) {
        fprintf(stderr, "  %s on %s: '%s' lacks '%s'\n", image, profile, r->errmsg, needle);
        CU_FAIL("refusal message");
    }
    CU_ASSERT(!pod_posted(r)); /* refused before any API call */
    free(r);
}

static void expect_image_runs(const char *profile, const char *image, const char *pod_image)
{
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    r->job.profile = profile;
    r->job.image = image;
    CU_ASSERT_EQUAL_FATAL(policy_run(r, 10), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    char pod[96];
    pod_name(r, pod, sizeof pod);
    json_t *p = post_body("/pods", pod);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CHECK_FIELD(p, "spec.containers.0.image", pod_image);
    CHECK_FIELD(p, "spec.containers.0.imagePullPolicy", "Always");
    json_decref(p);
    free(r);
}

static void test_image_policy(void)
{
    /* default policy: Docker Hub official images only */
    expect_image_runs("gvisor", "python:3.12-slim", "docker.io/library/python:3.12-slim");
    expect_image_runs("gvisor", "docker.io/library/python:3.12-slim", "docker.io/library/python:3.12-slim");
    expect_image_refused("gvisor", "evil.example/python:3.12-slim", "not from a registry allowed on profile 'gvisor'");
    expect_image_refused("gvisor", "acme/python:3.12", "not from a registry allowed");         /* docker.io/acme */
    expect_image_refused("gvisor", "docker.io/libraryx/python:1", "not from a registry allowed");
    expect_image_refused("gvisor", "docker.io.evil.example/library/python:1", "not from a registry allowed");
    expect_image_refused("gvisor", "Python:3", "not a valid image reference");
    expect_image_refused("gvisor", "python:3 --privileged", "not a valid image reference");
    /* profile "pinned": one registry path, digest required */
    expect_image_refused("pinned", "registry.test/acme/tool:1", "pinned by digest");
    expect_image_refused("pinned", "registry.test/acme/tool@sha256:abc", "pinned by digest");
    expect_image_refused("pinned", "registry.test/acme-evil/tool@" DIGEST, "not from a registry allowed");
    expect_image_refused("pinned", "python@" DIGEST, "not from a registry allowed");
    expect_image_runs("pinned", "registry.test/acme/tool@" DIGEST, "registry.test/acme/tool@" DIGEST);
    expect_image_runs("pinned", "REGISTRY.test/acme/tool:2@" DIGEST, "registry.test/acme/tool:2@" DIGEST);
    /* profile "open": its own policy (any registry) overrides the default */
    expect_image_runs("open", "evil.example/python:3.12-slim", "evil.example/python:3.12-slim");
}

static void expect_egress_refused(void *iso, const char *profile, const char *entry, const char *needle)
{
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    r->job.profile = profile;
    r->egress[0] = entry;
    r->job.egress = r->egress;
    void *saved = g_iso;
    g_iso = iso;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    g_iso = saved;
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_EGRESS_NOT_ALLOWED);
    if (!strstr(r->errmsg, needle)) {
        fprintf(stderr, "  %s: '%s' lacks '%s'\n", entry, r->errmsg, needle);
        CU_FAIL("egress refusal message");
    }
    CU_ASSERT(!pod_posted(r)); /* nothing ran */
    free(r);
}

static void test_egress_refusals(void)
{
    /* a host name (as allowed by a "*.domain" entry) that resolves into a
     * refused range: the execution fails before any pod exists */
    expect_egress_refused(g_iso, "gvisor", "localhost:443", "loopback");
    expect_egress_refused(g_policy_iso, "gvisor", "localhost:443", "loopback");
    expect_egress_refused(g_policy_iso, "open", "localhost:80", "egress_private_cidrs");
    /* "private" lists 127.0.0.0/8 and ::1/128: allowed (test_egress_policy) */
}

/* Namespaced RBAC (issue 16, item 8): eaid's rights on pods, secrets and
 * policies come from a RoleBinding it creates in each tenant namespace; the
 * stand-in (--namespaced-rbac) refuses everything else, as the chart's
 * roles and admission policy would. */
static void test_namespaced_rbac(void)
{
    json_t *rb = post_body("/rolebindings", "eai-sandbox");
    CU_ASSERT_PTR_NOT_NULL_FATAL(rb);
    CHECK_FIELD(rb, "metadata.namespace", NS);
    CHECK_FIELD(rb, "metadata.labels.app~kubernetes~io/managed-by", "eai-sandbox");
    CHECK_FIELD(rb, "roleRef.kind", "ClusterRole");
    CHECK_FIELD(rb, "roleRef.name", TENANT_ROLE);
    CHECK_FIELD(rb, "subjects.0.kind", "ServiceAccount");
    CHECK_FIELD(rb, "subjects.0.name", "eai-sandbox");
    CHECK_FIELD(rb, "subjects.0.namespace", "eai-system");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(rb, "subjects")), 1);
    json_decref(rb);
    /* the RoleBinding came right after the namespace, before any pod */
    json_t *all = requests_matching("POST", NULL);
    int i_ns = -1, i_rb = -1, i_pod = -1;
    size_t i;
    json_t *q;
    json_array_foreach(all, i, q)
    {
        const char *path = json_string_value(json_object_get(q, "path"));
        if (i_ns < 0 && !strcmp(path, "/api/v1/namespaces"))
            i_ns = (int)i;
        if (i_rb < 0 && strstr(path, "/rolebindings"))
            i_rb = (int)i;
        if (i_pod < 0 && strstr(path, "/pods"))
            i_pod = (int)i;
    }
    json_decref(all);
    CU_ASSERT(i_ns >= 0 && i_rb > i_ns && i_pod > i_rb);
    /* without the RoleBinding (no tenant_role), a new tenant's namespace
     * gives eaid nothing: the stand-in answers 403, the run fails clearly */
    json_t *cfg = base_config();
    json_object_del(cfg, "tenant_role");
    json_object_del(cfg, "service_account");
    void *bare = make_instance(cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bare);
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    r->job.tenant_id = "5d2c4f7e-0000-4000-8000-00000000abcd";
    void *saved = g_iso;
    g_iso = bare;
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    g_iso = saved;
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "403"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "forbidden"));
    free(r);
    g_desc->destroy(bare);
    spin(0.1);
}

static void test_image_missing(void)
{
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    r->job.image = "registry.test/missing:1";
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_IMAGE_MISSING);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "registry.test/missing:1"));
    char pod[96];
    pod_name(r, pod, sizeof pod);
    CU_ASSERT(deleted("Pod", pod, "api"));
    free(r);
}

static struct run *run_with_fault(const char *faultjson)
{
    fault(faultjson);
    const char *argv[] = {"true", NULL};
    struct run *r = run_new(argv);
    run_job(r, 20);
    json_decref(standin("DELETE", "/_standin/faults", NULL));
    return r;
}

static void test_api_errors(void)
{
    struct run *r = run_with_fault("{\"method\":\"POST\",\"path\":\"/pods$\",\"status\":403,\"reason\":\"Forbidden\","
                                   "\"message\":\"pods is forbidden: quota\"}");
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_SANDBOX_UNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "403"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "quota"));
    free(r);

    r = run_with_fault("{\"method\":\"POST\",\"path\":\"/pods$\",\"status\":422,\"reason\":\"Invalid\","
                       "\"message\":\"Pod is invalid\"}");
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_SANDBOX_FAILED);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "422"));
    free(r);

    /* 409 on a pod that is not ours (the fault created nothing) */
    r = run_with_fault("{\"method\":\"POST\",\"path\":\"/pods$\",\"status\":409,\"reason\":\"AlreadyExists\"}");
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "already exists"));
    free(r);

    /* 5xx: retried (api_retries=2), then a clear error */
    double t0 = now_s();
    r = run_with_fault("{\"method\":\"POST\",\"path\":\"/pods$\",\"status\":503,\"reason\":\"ServiceUnavailable\","
                       "\"message\":\"etcd is down\",\"times\":-1}");
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_SANDBOX_UNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "etcd is down"));
    CU_ASSERT(now_s() - t0 < 5.0);
    free(r);
    /* one 5xx then success: the retry makes it */
    r = run_with_fault("{\"method\":\"POST\",\"path\":\"/pods$\",\"status\":500,\"reason\":\"InternalError\"}");
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    free(r);

    /* an API server that never answers: a timeout, not a hang */
    t0 = now_s();
    r = run_with_fault("{\"method\":\"POST\",\"path\":\"/pods$\",\"hang\":true,\"times\":-1}");
    CU_ASSERT_EQUAL(r->done, 1);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "unreachable"));
    CU_ASSERT(now_s() - t0 < 15.0);
    free(r);

    /* a non-JSON 502 from a proxy, for good: reading the pod gives up after
     * api_outage_grace_ms (1 s here) with the proxy's words */
    t0 = now_s();
    r = run_with_fault("{\"method\":\"GET\",\"path\":\"/pods/sbx-\",\"status\":502,\"raw\":\"bad gateway\",\"times\":-1}");
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r->error_code, EAI_E_SANDBOX_UNAVAILABLE);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "bad gateway"));
    CU_ASSERT(now_s() - t0 >= 1.0 && now_s() - t0 < 8.0);
    free(r);
    /* an outage shorter than that (an API server restarting: 8 answers 503
     * at poll_ms 50) is waited out: the execution ends as the pod did */
    r = run_with_fault("{\"method\":\"GET\",\"path\":\"/pods/sbx-[^/]*$\",\"status\":503,\"reason\":\"ServiceUnavailable\","
                       "\"times\":8}");
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r->exit_code, 0);
    free(r);
    /* a refusal (403) is not an outage: five in a row end it */
    r = run_with_fault("{\"method\":\"GET\",\"path\":\"/pods/sbx-[^/]*$\",\"status\":403,\"reason\":\"Forbidden\","
                       "\"message\":\"pods is forbidden\",\"times\":-1}");
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "pods is forbidden"));
    free(r);

    /* a real admission refusal: unknown RuntimeClass */
    const char *argv[] = {"true", NULL};
    r = run_new(argv);
    r->job.runtime_class = "nope";
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(r->errmsg, "RuntimeClass \"nope\" not found"));
    free(r);
}

static void test_token_rotation(void)
{
    write_token("token-2"); /* the stand-in accepts only the new one now */
    const char *argv[] = {"echo", "rotated", NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_job(r, 10), 0);
    CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
    CU_ASSERT_STRING_EQUAL(r->out, "rotated\n");
    /* the old token refused, then the re-read one used: a 401 for the
     * request that found it stale (and at most one more, a request already
     * in flight with it: seen once in CI), never one for the new token */
    json_t *all = standin("GET", "/_standin/requests", NULL);
    size_t i;
    json_t *q;
    int n401 = 0, ok2 = 0, new401 = 0;
    json_array_foreach(all, i, q)
    {
        const char *a = json_string_value(json_object_get(json_object_get(q, "headers"), "authorization"));
        if (json_integer_value(json_object_get(q, "status")) == 401) {
            n401++;
            new401 += a && !strcmp(a, "Bearer token-2");
        }
        if (a && !strcmp(a, "Bearer token-2") && json_integer_value(json_object_get(q, "status")) < 300)
            ok2++;
    }
    CU_ASSERT(n401 >= 1 && n401 <= 2);
    CU_ASSERT_EQUAL(new401, 0);
    CU_ASSERT(ok2 > 0);
    json_decref(all);
    free(r);
}

static void test_recover(void)
{
    const char *argv[] = {"eai-sim", "--stdout", "survived\n", "--sleep-ms", "1500", NULL};
    struct run *r = run_new(argv);
    CU_ASSERT_EQUAL_FATAL(run_start(r), 0);
    loop_until(started_cond, r, 10);
    CU_ASSERT_EQUAL_FATAL(r->started, 1);
    /* "restart": the instance goes away without ending the execution */
    g_desc->destroy(g_iso);
    spin(0.1);
    CU_ASSERT_EQUAL(r->done, 0);
    g_iso = make_instance(base_config());
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_iso);
    json_t *rec = json_pack("{s:s, s:s, s:s, s:{s:i}}", "id", r->id, "tenant_id", TENANT, "image",
                            "python:3.12-slim", "limits", "timeout_s", 10);
    struct run *r2 = calloc(1, sizeof *r2);
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL_FATAL(g_ops->recover(g_iso, rec, &g_cb, r2, &r2->handle, &err), 0);
    loop_until(done_cond, r2, 10);
    CU_ASSERT_EQUAL(r2->done, 1);
    CU_ASSERT_EQUAL(r2->started, 1);
    CU_ASSERT_EQUAL(r2->outcome, EAI_OUT_EXITED);
    CU_ASSERT_EQUAL(r2->exit_code, 0);
    CU_ASSERT_STRING_EQUAL(r2->out, "survived\n");
    char pod[96], sel[128];
    pod_name(r, pod, sizeof pod);
    CU_ASSERT(deleted("Pod", pod, "api"));
    snprintf(sel, sizeof sel, "labelSelector=");
    json_t *lists = requests_matching("GET", "/api/v1/namespaces/" NS "/pods");
    int by_label = 0;
    size_t i;
    json_t *q;
    json_array_foreach(lists, i, q)
    {
        const char *ls = json_string_value(json_object_get(json_object_get(q, "query"), "labelSelector"));
        if (ls && strstr(ls, r->id))
            by_label = 1;
    }
    CU_ASSERT(by_label);
    json_decref(lists);
    json_decref(rec);
    /* nothing to reattach to: interrupted, said so */
    struct run *r3 = calloc(1, sizeof *r3);
    rec = json_pack("{s:s, s:s}", "id", "sbx_00000000-0000-4000-8000-000000000000", "tenant_id", TENANT);
    CU_ASSERT_EQUAL_FATAL(g_ops->recover(g_iso, rec, &g_cb, r3, &r3->handle, &err), 0);
    loop_until(done_cond, r3, 10);
    CU_ASSERT_EQUAL(r3->outcome, EAI_OUT_ERROR);
    CU_ASSERT_EQUAL(r3->error_code, EAI_E_INTERRUPTED);
    json_decref(rec);
    free(r);
    free(r2);
    free(r3);
}

static void test_sweep(void)
{
    /* a finished pod left behind (as by a crash), and a running one */
    const char *tmpl = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"labels\":{"
                       "\"app.kubernetes.io/managed-by\":\"eai-sandbox\"}},\"spec\":{\"restartPolicy\":\"Never\","
                       "\"securityContext\":{\"runAsNonRoot\":true,\"runAsUser\":1000,\"seccompProfile\":{\"type\":"
                       "\"RuntimeDefault\"}},\"containers\":[{\"name\":\"sandbox\",\"image\":\"x:1\",\"command\":%s,"
                       "\"securityContext\":{\"allowPrivilegeEscalation\":false,\"capabilities\":{\"drop\":[\"ALL\"]}}}]}}";
    char body[2048];
    snprintf(body, sizeof body, tmpl, "leftover-done", "[\"true\"]");
    json_decref(standin("POST", "/api/v1/namespaces/" NS "/pods", body));
    snprintf(body, sizeof body, tmpl, "leftover-running", "[\"sleep\",\"30\"]");
    json_decref(standin("POST", "/api/v1/namespaces/" NS "/pods", body));
    spin(1.2); /* the stand-in's timestamps have a one-second resolution */
    g_ops->sweep(g_iso);
    spin(0.5);
    CU_ASSERT(deleted("Pod", "leftover-done", "api"));
    CU_ASSERT(!deleted("Pod", "leftover-running", NULL));
    /* through the namespaces we made, never a cluster-wide pod list */
    json_t *cw = requests_matching("GET", "/api/v1/pods");
    size_t ci;
    json_t *cq;
    json_array_foreach(cw, ci, cq)
        CU_ASSERT_STRING_NOT_EQUAL(json_string_value(json_object_get(cq, "path")), "/api/v1/pods");
    json_decref(cw);
    json_t *nl = requests_matching("GET", "/api/v1/namespaces");
    int listed = 0;
    json_array_foreach(nl, ci, cq)
        if (!strcmp(json_string_value(json_object_get(cq, "path")), "/api/v1/namespaces"))
            listed = 1;
    json_decref(nl);
    CU_ASSERT(listed);
    json_decref(standin("DELETE", "/api/v1/namespaces/" NS "/pods/leftover-running", NULL));
}

static void test_kubeconfig(void)
{
    char kc[PATH_MAX + 32];
    snprintf(kc, sizeof kc, "%s/kubeconfig", g_dir);
    FILE *f = fopen(kc, "we");
    fprintf(f,
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            "clusters:\n- name: standin\n  cluster:\n    server: %s\n"
            "contexts:\n- name: test\n  context:\n    cluster: standin\n    user: eai\n"
            "users:\n- name: eai\n  user:\n    tokenFile: token\n",
            g_url);
    fclose(f);
    json_t *cfg = json_pack("{s:s, s:s, s:s}", "kubeconfig", kc, "namespace_prefix", PREFIX, "runtime_class", "kata");
    void *iso = make_instance(cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    CU_ASSERT(ready_cond(iso));
    g_desc->destroy(iso);
    /* a kubeconfig this plugin cannot use is refused at create() */
    f = fopen(kc, "we");
    fprintf(f, "apiVersion: v1\nkind: Config\ncurrent-context: nope\ncontexts: []\n");
    fclose(f);
    struct eai_error *err = NULL;
    cfg = json_pack("{s:s}", "kubeconfig", kc);
    CU_ASSERT_PTR_NULL(g_desc->create(g_host, cfg, &err));
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err->message, "context"));
    eai_error_free(err);
    json_decref(cfg);
}

/* HTTPS with a CA bundle: the API server's certificate is verified. */
static void test_https(void)
{
    char cmd[6 * PATH_MAX], cert[PATH_MAX + 16], key[PATH_MAX + 16], other[PATH_MAX + 16], okey[PATH_MAX + 16];
    snprintf(cert, sizeof cert, "%s/tls.crt", g_dir);
    snprintf(key, sizeof key, "%s/tls.key", g_dir);
    snprintf(other, sizeof other, "%s/other.crt", g_dir);
    snprintf(okey, sizeof okey, "%s/other.key", g_dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 "
             "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1 && "
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 "
             "-addext subjectAltName=IP:127.0.0.1 -keyout %s -out %s >/dev/null 2>&1",
             key, cert, okey, other);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    const char *extra[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    pid_t pid = -1;
    int in = -1;
    char url[256];
    CU_ASSERT_EQUAL_FATAL(spawn_standin(extra, &pid, &in, url, sizeof url), 0);
    CU_ASSERT_EQUAL(strncmp(url, "https://", 8), 0);
    /* the right CA: ready, and an execution runs */
    json_t *cfg = base_config();
    json_object_set_new(cfg, "api_url", json_string(url));
    json_object_set_new(cfg, "ca_file", json_string(cert));
    void *iso = make_instance(cfg);
    CU_ASSERT_PTR_NOT_NULL(iso);
    if (iso) {
        CU_ASSERT(ready_cond(iso));
        const char *argv[] = {"echo", "over-tls", NULL};
        struct run *r = run_new(argv);
        struct eai_error *err = NULL;
        CU_ASSERT_EQUAL(g_ops->start(iso, &r->job, &g_cb, r, &r->handle, &err), 0);
        loop_until(done_cond, r, 10);
        CU_ASSERT_EQUAL(r->outcome, EAI_OUT_EXITED);
        CU_ASSERT_STRING_EQUAL(r->out, "over-tls\n");
        free(r);
        g_desc->destroy(iso);
    }
    /* another CA: the server is not trusted, the backend is not ready */
    cfg = base_config();
    json_object_set_new(cfg, "api_url", json_string(url));
    json_object_set_new(cfg, "ca_file", json_string(other));
    json_object_set_new(cfg, "api_retries", json_integer(0));
    struct eai_error *err = NULL;
    iso = g_desc->create(g_host, cfg, &err);
    json_decref(cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(iso);
    spin(1.0);
    struct eai_iso_probe p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    g_ops->probe(iso, &p);
    CU_ASSERT_EQUAL(p.ready, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(p.reason, "unreachable"));
    g_desc->destroy(iso);
    spin(0.1);
    close(in);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

/* Every request the plugin sent is in plugins/k8s/api-calls.json (the
 * chart's RBAC is checked against the same file by the helm tests). */
static void test_calls_match_rbac(void)
{
    json_t *all = standin("GET", "/_standin/requests", NULL);
    size_t i;
    json_t *q;
    int checked = 0;
    json_array_foreach(all, i, q)
    {
        const char *m = json_string_value(json_object_get(q, "method"));
        const char *p = json_string_value(json_object_get(q, "path"));
        const char *ua = json_string_value(json_object_get(json_object_get(q, "headers"), "user-agent"));
        if (!ua || strncmp(ua, "eai-sandbox-k8s/", 16) != 0)
            continue; /* the test's own calls */
        checked++;
        if (!strcmp(p, "/version"))
            continue;
        char buf[512], *seg[12] = {0};
        int n = 0;
        snprintf(buf, sizeof buf, "%s", p);
        for (char *save = NULL, *t = strtok_r(buf, "/", &save); t && n < 12; t = strtok_r(NULL, "/", &save))
            seg[n++] = t;
        if (n < 3) {
            fprintf(stderr, "  unexpected path %s\n", p);
            CU_FAIL("unexpected path");
            continue;
        }
        const char *group = "";
        int k = 2; /* after api/v1 */
        if (!strcmp(seg[0], "apis")) {
            group = seg[1];
            k = 3;
        }
        const char *res, *name = NULL, *sub = NULL;
        if (n - k >= 3 && !strcmp(seg[k], "namespaces")) {
            res = seg[k + 2];
            name = n - k >= 4 ? seg[k + 3] : NULL;
            sub = n - k >= 5 ? seg[k + 4] : NULL;
        } else {
            res = seg[k];
            name = n - k >= 2 ? seg[k + 1] : NULL;
        }
        const char *verb = !strcmp(m, "POST") ? "create" : !strcmp(m, "DELETE") ? (name ? "delete" : "deletecollection")
                                                                               : (name ? "get" : "list");
        const char *wq = json_string_value(json_object_get(json_object_get(q, "query"), "watch"));
        if (!strcmp(verb, "list") && wq && (!strcmp(wq, "1") || !strcmp(wq, "true")))
            verb = "watch";
        char resource[128];
        snprintf(resource, sizeof resource, "%s%s%s", res, sub ? "/" : "", sub ? sub : "");
        int allowed = 0;
        size_t ri;
        json_t *rule;
        json_array_foreach(json_object_get(g_calls, "rules"), ri, rule)
        {
            if (strcmp(json_string_value(json_object_get(rule, "group")), group) ||
                strcmp(json_string_value(json_object_get(rule, "resource")), resource))
                continue;
            size_t vi;
            json_t *v;
            json_array_foreach(json_object_get(rule, "verbs"), vi, v)
                if (!strcmp(json_string_value(v), verb))
                    allowed = 1;
        }
        if (!allowed) {
            fprintf(stderr, "  %s %s -> %s %s/%s is not in api-calls.json\n", m, p, verb, group, resource);
            CU_FAIL("call outside api-calls.json");
        }
    }
    CU_ASSERT(checked > 20);
    json_decref(all);
}

int main(void)
{
    CU_initialize_registry();
    CU_pSuite s = CU_add_suite("k8s_plugin", suite_init, suite_clean);
    CU_add_test(s, "probe", test_probe);
    CU_add_test(s, "succeeded, objects field by field, cleanup", test_succeeded_and_objects);
    CU_add_test(s, "failed with an exit code", test_failed_exit_code);
    CU_add_test(s, "OOMKilled", test_oom);
    CU_add_test(s, "DeadlineExceeded is a timeout", test_timeout);
    CU_add_test(s, "cancel deletes the pod", test_cancel);
    CU_add_test(s, "no service token, read-only root", test_no_token_readonly_root);
    CU_add_test(s, "egress NetworkPolicy", test_egress_policy);
    CU_add_test(s, "image that cannot be pulled", test_image_missing);
    CU_add_test(s, "image registry allow list, digest pinning, pull Always", test_image_policy);
    CU_add_test(s, "egress names resolving to refused ranges", test_egress_refusals);
    CU_add_test(s, "namespaced RBAC: a RoleBinding per tenant namespace", test_namespaced_rbac);
    CU_add_test(s, "API errors become clear execution errors", test_api_errors);
    CU_add_test(s, "token rotation", test_token_rotation);
    CU_add_test(s, "recover by label after a restart", test_recover);
    CU_add_test(s, "sweep", test_sweep);
    CU_add_test(s, "kubeconfig", test_kubeconfig);
    CU_add_test(s, "every call is covered by the RBAC list", test_calls_match_rbac);
    CU_add_test(s, "https with a CA bundle", test_https);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
