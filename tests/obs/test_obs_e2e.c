/*
 * End to end against `eaid serve` on a free loopback port, with real runsc
 * executions (image python:3.11-slim in EAI_IMAGE_DIR or <build>/images,
 * built once when absent):
 *  - a traceparent on POST shows up as the execution's trace_id, and the
 *    spans reach a real OTLP/HTTP receiver (tests/obs/receiver.py) with the
 *    GenAI and eai.* attributes;
 *  - /metrics passes `promtool check metrics` and carries the seed's series;
 *  - an execution with project_id is in GET /v1/finops/usage (ledger);
 *  - `eaid audit verify` passes on the untouched data dir and fails after
 *    one audit row is altered in the SQLite file (column or document);
 *  - the FinOps endpoint is down during 50 executions, comes back, and all
 *    50 usage events are delivered exactly once.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <curl/curl.h>
#include <sqlite3.h>

#include "images/images.h"
#include "obs_common.h"
#include "eaibase.h"

#define IMAGE "python:3.11-slim"
#define IMAGE_PACKAGES "python3-minimal,libpython3.11-stdlib"
#define TRACE_ID "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT_ID "00f067aa0ba902b7"

static char g_dir[256], g_images[512], g_eaid[512], g_base_url[64], g_key[256], g_tenant[64];
static char g_otlp_out[600], g_fin_out[600];
static pid_t g_srv, g_otlp;
static int g_port, g_otlp_port;

/* ------------------------------------------------------------ HTTP (blocking: a test) */

struct buf {
    char *p;
    size_t n;
};

static size_t on_data(char *d, size_t s, size_t n, void *arg)
{
    struct buf *b = arg;
    char *np = realloc(b->p, b->n + s * n + 1);
    if (!np)
        return 0;
    b->p = np;
    memcpy(b->p + b->n, d, s * n);
    b->n += s * n;
    b->p[b->n] = '\0';
    return s * n;
}

/* Returns the status; *body (malloc'd text) when asked. */
static long http(const char *method, const char *path, const char *body, const char *extra_header, char **out)
{
    CURL *c = curl_easy_init();
    struct buf b = {0};
    char url[512], auth[300];
    snprintf(url, sizeof(url), "%s%s", g_base_url, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", g_key);
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, auth);
    h = curl_slist_append(h, "Content-Type: application/json");
    if (extra_header)
        h = curl_slist_append(h, extra_header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 90L);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (out)
        *out = b.p ? b.p : strdup("");
    else
        free(b.p);
    return status;
}

static json_t *http_json(const char *method, const char *path, const char *body, const char *hdr, long *status)
{
    char *text = NULL;
    *status = http(method, path, body, hdr, &text);
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    return j;
}

/* ------------------------------------------------------------ processes */

/* Run `eaid ARGS...` with the test env; stdout into *out; exit status. */
static int eaid_run(char **out, const char *a1, const char *a2, const char *a3, const char *a4)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "EAI_DATA_DIR='%s' EAI_IMAGE_DIR='%s' '%s' %s %s %s %s 2>>'%s/cli.err'",
             g_dir, g_images, g_eaid, a1, a2 ? a2 : "", a3 ? a3 : "", a4 ? a4 : "", g_dir);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    struct buf b = {0};
    char chunk[1024];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
        on_data(chunk, 1, n, &b);
    int st = pclose(p);
    if (out)
        *out = b.p ? b.p : strdup("");
    else
        free(b.p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int healthy(void *unused)
{
    return http("GET", "/healthz", NULL, NULL, NULL) == 200;
}

static pid_t server_start(const char *finops_url)
{
    g_port = obs_free_port();
    snprintf(g_base_url, sizeof(g_base_url), "http://127.0.0.1:%d", g_port);
    char listen[64], otlp[64], log[600];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", g_port);
    snprintf(log, sizeof(log), "%s/eaid.log", g_dir);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("EAI_LISTEN", listen, 1);
        setenv("EAI_DATA_DIR", g_dir, 1);
        setenv("EAI_IMAGE_DIR", g_images, 1);
        setenv("EAI_LOG_LEVEL", "info", 1);
        if (g_otlp_port > 0) {
            snprintf(otlp, sizeof(otlp), "http://127.0.0.1:%d", g_otlp_port);
            setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp, 1);
            /* auth of a hosted collector (17.8): percent-encoded values */
            setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20otlp-token, X-Team=obs", 1);
        }
        if (finops_url)
            setenv("EAI_FINOPS_URL", finops_url, 1);
        else
            unsetenv("EAI_FINOPS_URL");
        unsetenv("EAI_AUDIT_URL");
        execl(g_eaid, g_eaid, "serve", (char *)NULL);
        _exit(127);
    }
    int64_t end = eai_now_ms() + 30000;
    while (eai_now_ms() < end && !healthy(NULL)) {
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            fprintf(stderr, "eaid serve exited; see %s\n", log);
            return -1;
        }
        usleep(50000);
    }
    return healthy(NULL) ? pid : -1;
}

static void server_stop(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 300; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* ------------------------------------------------------------ fixtures */

static int suite_init(void)
{
    const char *bd = getenv("EAI_BUILD_DIR");
    if (!bd)
        bd = ".";
    snprintf(g_eaid, sizeof(g_eaid), "%s/eaid", bd);
    snprintf(g_dir, sizeof(g_dir), "/tmp/eai-obs-e2e-XXXXXX");
    if (!mkdtemp(g_dir))
        return -1;
    const char *img = getenv("EAI_IMAGE_DIR");
    if (img && *img)
        snprintf(g_images, sizeof(g_images), "%s", img);
    else
        snprintf(g_images, sizeof(g_images), "%s/images", bd);
    char rootfs[4096];
    if (eai_images_resolve(g_images, IMAGE, rootfs, sizeof(rootfs)) < 0) {
        fprintf(stderr, "building image %s into %s (once)\n", IMAGE, g_images);
        char *argv[] = {"build", IMAGE, "--packages", IMAGE_PACKAGES, NULL};
        if (eai_images_cli(g_images, 4, argv) != 0)
            return -1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(g_otlp_out, sizeof(g_otlp_out), "%s/otlp.jsonl", g_dir);
    snprintf(g_fin_out, sizeof(g_fin_out), "%s/finops.jsonl", g_dir);
    g_otlp = obs_receiver_start("otlp", 0, g_otlp_out, g_dir, &g_otlp_port);

    /* tenant and key through the admin CLI, on the same data dir */
    char *out = NULL;
    if (eaid_run(&out, "migrate", NULL, NULL, NULL) != 0)
        fprintf(stderr, "eaid migrate failed (continuing: serve migrates too)\n");
    free(out);
    if (eaid_run(&out, "tenants", "create", "obs-e2e", NULL) != 0) {
        free(out);
        return -1;
    }
    json_t *t = json_loads(out, 0, NULL);
    free(out);
    if (!eai_jstr(t, "id"))
        return -1;
    snprintf(g_tenant, sizeof(g_tenant), "%s", eai_jstr(t, "id"));
    json_decref(t);
    char arg[128];
    snprintf(arg, sizeof(arg), "--tenant %s", g_tenant);
    if (eaid_run(&out, "keys", "create", arg, NULL) != 0) {
        free(out);
        return -1;
    }
    /* the key is the eai_... token on the output */
    char *k = strstr(out, "eai_");
    if (!k) {
        free(out);
        return -1;
    }
    size_t n = strcspn(k, " \t\r\n\"");
    snprintf(g_key, sizeof(g_key), "%.*s", (int)n, k);
    free(out);
    return 0;
}

static int suite_clean(void)
{
    server_stop(g_srv);
    obs_receiver_stop(g_otlp);
    if (!getenv("EAI_KEEP_TEST_DIR"))
        obs_rmrf(g_dir);
    return 0;
}

/* POST one execution; returns its id (malloc'd) or NULL. */
static char *post_exec(const char *cmd_json, const char *project, const char *traceparent)
{
    char body[1024], hdr[128];
    snprintf(body, sizeof(body),
             "{\"profile\":\"gvisor-small\",\"image\":\"" IMAGE "\",\"command\":%s,"
             "\"project_id\":\"%s\",\"agent_id\":\"agent-obs\",\"run_id\":\"run-obs\"}", cmd_json, project);
    if (traceparent)
        snprintf(hdr, sizeof(hdr), "traceparent: %s", traceparent);
    long st;
    json_t *r = http_json("POST", "/v1/sandbox/executions", body, traceparent ? hdr : NULL, &st);
    if (st != 202) {
        char *d = r ? json_dumps(r, 0) : NULL;
        fprintf(stderr, "POST -> %ld %s\n", st, d ? d : "");
        free(d);
    }
    CU_ASSERT_EQUAL(st, 202);
    char *id = eai_jstr(r, "id") ? strdup(eai_jstr(r, "id")) : NULL;
    json_decref(r);
    return id;
}

static json_t *wait_exec(const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), "/v1/sandbox/executions/%s?wait_s=60", id);
    for (int i = 0; i < 3; i++) {
        long st;
        json_t *r = http_json("GET", path, NULL, NULL, &st);
        const char *s = eai_jstr(r, "status");
        if (st == 200 && s && strcmp(s, "queued") != 0 && strcmp(s, "running") != 0)
            return r;
        json_decref(r);
    }
    return NULL;
}

/* ------------------------------------------------------------ phase A */

static void test_trace_finops_metrics(void)
{
    g_srv = server_start(NULL);
    CU_ASSERT_FATAL(g_srv > 0);

    /* a traceparent becomes the execution's trace id */
    char *id = post_exec("[\"python3\",\"-c\",\"print(2+2)\"]", "p-obs",
                         "00-" TRACE_ID "-" PARENT_ID "-01");
    CU_ASSERT_PTR_NOT_NULL_FATAL(id);
    json_t *e = wait_exec(id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "status"), "succeeded");
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "stdout"), "4\n");
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "trace_id"), TRACE_ID);
    json_decref(e);

    /* without one, a fresh valid trace id */
    char *id2 = post_exec("[\"true\"]", "p-other", "00-" TRACE_ID "-" PARENT_ID);  /* malformed: ignored */
    CU_ASSERT_PTR_NOT_NULL_FATAL(id2);
    e = wait_exec(id2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    const char *t2 = eai_jstr(e, "trace_id");
    CU_ASSERT(t2 && strlen(t2) == 32 && strcmp(t2, TRACE_ID) != 0 && strspn(t2, "0123456789abcdef") == 32);
    json_decref(e);

    /* the usage event lands in the in-process ledger */
    json_t *u = NULL;
    int found = 0;
    for (int i = 0; i < 100 && !found; i++) {
        long st;
        json_decref(u);
        u = http_json("GET", "/v1/finops/usage?project_id=p-obs", NULL, NULL, &st);
        CU_ASSERT_EQUAL(st, 200);
        char *d = u ? json_dumps(u, 0) : NULL;
        found = d && strstr(d, id) != NULL;
        free(d);
        if (!found)
            usleep(100000);
    }
    CU_ASSERT(found);
    char *d = u ? json_dumps(u, 0) : NULL;
    CU_ASSERT(d && strstr(d, id2) == NULL);  /* other project filtered out */
    free(d);
    json_decref(u);

    /* a refused POST: counted by code, and its span names no execution */
    char *refused = NULL;
    CU_ASSERT_EQUAL(http("POST", "/v1/sandbox/executions",
                         "{\"profile\":\"gvisor-small\",\"image\":\"" IMAGE "\",\"command\":[\"true\"],"
                         "\"limits\":{\"cpu\":\"4\"}}",
                         "traceparent: 00-" TRACE_ID "-" PARENT_ID "-01", &refused), 422);
    free(refused);
    /* an execution that ends in error carries its code on /metrics */
    char *bad = post_exec("[\"/nonexistent-binary\"]", "p-err", NULL);
    json_t *be = bad ? wait_exec(bad) : NULL;
    const char *bst = be ? eai_jstr(be, "status") : NULL;
    const char *bcode = be ? eai_jstr(json_object_get(be, "error"), "code") : NULL;
    fprintf(stderr, "  (missing binary: %s %s)\n", bst ? bst : "?", bcode ? bcode : "-");
    char want_err[200] = "";
    if (bst && strcmp(bst, "error") == 0 && bcode)
        snprintf(want_err, sizeof want_err, "status=\"error\",code=\"%s\"} 1", bcode);
    json_decref(be);
    free(bad);

    /* /metrics: the seed's series, and promtool is happy */
    char *m = NULL;
    CU_ASSERT_EQUAL(http("GET", "/metrics", NULL, NULL, &m), 200);
    /* what a dashboard needs (17.8) */
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_sandbox_refusals_total{code=\"limit_exceeded\"} 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_sandbox_refusals_total{code=\"unknown_image\"} 0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_sandbox_executions_total{profile=\"gvisor\",status=\"timeout\"} 0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_sandbox_queue_wait_seconds_bucket{profile=\"gvisor-small\",le="));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_backend_ready{backend=\"gvisor\"} 1\n"));
    /* the runtime and the platform the probe chose (docs/gvisor.md "Platform") */
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_backend_info{backend=\"gvisor\",version=\"runsc version "));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, ", platform "));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_build_info{version=\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_pool_takes_total{plugin=\"gvisor\",result=\"hit\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_pool_takes_total{plugin=\"gvisor\",result=\"miss\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_pool_ready{plugin=\"gvisor\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_callback_attempts_total{result=\"failed\"} 0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "\nprocess_resident_memory_bytes "));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "\nprocess_open_fds "));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "\nprocess_cpu_seconds_total "));
    if (want_err[0])
        CU_ASSERT_PTR_NOT_NULL(strstr(m, want_err));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_sandbox_executions_total{profile=\"gvisor-small\",status=\"succeeded\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_sandbox_cpu_seconds_total{profile=\"gvisor-small\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_sandbox_duration_seconds_bucket{profile=\"gvisor-small\",le="));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_http_requests_total{"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_outbox_backlog"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_audit_sink_backlog"));
    char file[700], cmd[2048], tool[512] = "";
    snprintf(file, sizeof(file), "%s/metrics.txt", g_dir);
    FILE *f = fopen(file, "w");
    fputs(m ? m : "", f);
    fclose(f);
    free(m);
    snprintf(cmd, sizeof(cmd), "%s/tests/support/promtool.sh", obs_source_dir());
    FILE *p = popen(cmd, "r");
    if (p && !fgets(tool, sizeof(tool), p))
        tool[0] = '\0';
    if (p)
        pclose(p);
    tool[strcspn(tool, "\n")] = '\0';
    CU_ASSERT_FATAL(tool[0] != '\0');
    snprintf(cmd, sizeof(cmd), "'%s' check metrics < '%s'", tool, file);
    CU_ASSERT_EQUAL(system(cmd), 0);

    /* spans at the OTLP receiver: the server span under the caller's, sandbox.run with GenAI attributes */
    int64_t end = eai_now_ms() + 10000;
    json_t *server = NULL, *run = NULL, *sched = NULL;
    while (eai_now_ms() < end && (!server || !run || !sched)) {
        json_t *recs = obs_records(g_otlp_out);
        size_t i, a, b, c;
        json_t *r, *x, *y, *s;
        json_array_foreach(recs, i, r) {
            json_array_foreach(json_object_get(json_object_get(r, "body"), "resourceSpans"), a, x) {
                json_array_foreach(json_object_get(x, "scopeSpans"), b, y) {
                    json_array_foreach(json_object_get(y, "spans"), c, s) {
                        if (!eai_jstr(s, "traceId") || strcmp(eai_jstr(s, "traceId"), TRACE_ID) != 0)
                            continue;
                        if (json_integer_value(json_object_get(s, "kind")) == 2 && eai_jstr(s, "parentSpanId") &&
                            strcmp(eai_jstr(s, "parentSpanId"), PARENT_ID) == 0 && !server)
                            server = json_incref(s);
                        if (eai_jstr(s, "name") && strcmp(eai_jstr(s, "name"), "sandbox.run") == 0 && !run)
                            run = json_incref(s);
                        if (eai_jstr(s, "name") && strcmp(eai_jstr(s, "name"), "sandbox.schedule") == 0 && !sched)
                            sched = json_incref(s);
                    }
                }
            }
        }
        json_decref(recs);
        if (!server || !run || !sched)
            usleep(200000);
    }
    CU_ASSERT_PTR_NOT_NULL(server);
    CU_ASSERT_PTR_NOT_NULL(run);
    CU_ASSERT_PTR_NOT_NULL(sched);
    /* every export carried OTEL_EXPORTER_OTLP_HEADERS; no span for /healthz or
     * /readyz (start-up polled /healthz); the refused POST names no execution */
    {
        json_t *recs = obs_records(g_otlp_out);
        size_t i, a, b, c;
        json_t *r, *x, *y, *s;
        int n = 0, authed = 0, probes = 0, refused_spans = 0, refused_with_id = 0;
        json_array_foreach(recs, i, r) {
            n++;
            authed += eai_jstr(r, "authorization") && strcmp(eai_jstr(r, "authorization"), "Bearer otlp-token") == 0 &&
                      eai_jstr(r, "x_team") && strcmp(eai_jstr(r, "x_team"), "obs") == 0;
            json_array_foreach(json_object_get(json_object_get(r, "body"), "resourceSpans"), a, x) {
                json_array_foreach(json_object_get(x, "scopeSpans"), b, y) {
                    json_array_foreach(json_object_get(y, "spans"), c, s) {
                        const char *nm = eai_jstr(s, "name") ? eai_jstr(s, "name") : "";
                        probes += strstr(nm, "/healthz") != NULL || strstr(nm, "/readyz") != NULL;
                        char *attrs = json_dumps(json_object_get(s, "attributes"), JSON_COMPACT);
                        if (attrs && strstr(attrs, "\"http.status_code\",\"value\":{\"intValue\":\"422\"}")) {
                            refused_spans++;
                            refused_with_id += strstr(attrs, "eai.execution_id") != NULL;
                        }
                        free(attrs);
                    }
                }
            }
        }
        json_decref(recs);
        fprintf(stderr, "  (OTLP exports %d, with the headers %d, probe spans %d, refused spans %d)\n", n, authed,
                probes, refused_spans);
        CU_ASSERT(n > 0 && authed == n);
        CU_ASSERT_EQUAL(probes, 0);
        CU_ASSERT(refused_spans >= 1);
        CU_ASSERT_EQUAL(refused_with_id, 0);
    }
    /* scheduling and the run are both children of the server span */
    if (server && sched && run) {
        CU_ASSERT_STRING_EQUAL(eai_jstr(sched, "parentSpanId"), eai_jstr(server, "spanId"));
        CU_ASSERT_STRING_EQUAL(eai_jstr(run, "parentSpanId"), eai_jstr(server, "spanId"));
    }
    if (server)
        fprintf(stderr, "  (server span: %s)\n", eai_jstr(server, "name"));
    if (run) {
        char *rd = json_dumps(json_object_get(run, "attributes"), JSON_COMPACT);
        CU_ASSERT_PTR_NOT_NULL(strstr(rd, "{\"key\":\"gen_ai.operation.name\",\"value\":{\"stringValue\":\"execute_tool\"}}"));
        CU_ASSERT_PTR_NOT_NULL(strstr(rd, "{\"key\":\"gen_ai.agent.id\",\"value\":{\"stringValue\":\"agent-obs\"}}"));
        CU_ASSERT_PTR_NOT_NULL(strstr(rd, "{\"key\":\"eai.run_id\",\"value\":{\"stringValue\":\"run-obs\"}}"));
        char want[200];
        snprintf(want, sizeof(want), "{\"key\":\"eai.tenant_id\",\"value\":{\"stringValue\":\"%s\"}}", g_tenant);
        CU_ASSERT_PTR_NOT_NULL(strstr(rd, want));
        free(rd);
    }
    json_decref(server);
    json_decref(run);
    json_decref(sched);
    free(id);
    free(id2);
    server_stop(g_srv);
    g_srv = 0;
}

/* ------------------------------------------------------------ audit verify on the data dir */

static void db_exec(const char *sql)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/eai.db", g_dir);
    sqlite3 *db;
    CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fprintf(stderr, "sql: %s\n", msg ? msg : "?");
    CU_ASSERT_EQUAL(rc, SQLITE_OK);
    CU_ASSERT(sqlite3_changes(db) == 1);
    sqlite3_free(msg);
    sqlite3_close(db);
}

static void test_audit_verify_cli(void)
{
    char *out = NULL;
    CU_ASSERT_EQUAL(eaid_run(&out, "audit", "verify", NULL, NULL), 0);
    CU_ASSERT(out && strncmp(out, "ok: ", 4) == 0);
    fprintf(stderr, "  (%s)\n", out ? strtok(out, "\n") : "");
    free(out);
    char arg[128], sql[512];
    snprintf(arg, sizeof(arg), "--tenant %s", g_tenant);
    CU_ASSERT_EQUAL(eaid_run(NULL, "audit", "verify", arg, NULL), 0);

    /* one column of one row */
    snprintf(sql, sizeof(sql), "UPDATE audit_events SET decision = 'deny' WHERE tenant_id = '%s' AND seq = 1", g_tenant);
    db_exec(sql);
    CU_ASSERT_NOT_EQUAL(eaid_run(&out, "audit", "verify", NULL, NULL), 0);
    free(out);
    CU_ASSERT_NOT_EQUAL(eaid_run(NULL, "audit", "verify", arg, NULL), 0);
    snprintf(sql, sizeof(sql), "UPDATE audit_events SET decision = 'allow' WHERE tenant_id = '%s' AND seq = 1", g_tenant);
    db_exec(sql);
    CU_ASSERT_EQUAL(eaid_run(NULL, "audit", "verify", NULL, NULL), 0);

    /* the JSON document of one row */
    snprintf(sql, sizeof(sql), "UPDATE audit_events SET doc = json_set(doc, '$.target', 'sbx_forged')"
                               " WHERE tenant_id = '%s' AND seq = 2", g_tenant);
    db_exec(sql);
    CU_ASSERT_NOT_EQUAL(eaid_run(NULL, "audit", "verify", NULL, NULL), 0);
}

/* ------------------------------------------------------------ phase B: FinOps outage */

static void test_finops_outage(void)
{
    /* a fresh data dir would need a new tenant; reuse this one (verify is done) */
    int fport = obs_free_port();
    char furl[64];
    snprintf(furl, sizeof(furl), "http://127.0.0.1:%d", fport);
    g_srv = server_start(furl);
    CU_ASSERT_FATAL(g_srv > 0);
    /* an external FinOps service: the in-process ledger says it is not used (17.8) */
    {
        long st;
        json_t *l = http_json("GET", "/v1/finops/usage", NULL, NULL, &st);
        CU_ASSERT_EQUAL(st, 404);
        const char *msg = eai_jstr(json_object_get(l, "error"), "message");
        CU_ASSERT(msg && strstr(msg, "FinOps service"));
        json_decref(l);
    }
    char *ids[50];
    int n = 0;
    for (int i = 0; i < 50; i++)
        if ((ids[n] = post_exec("[\"true\"]", "p-outage", NULL)))
            n++;
    CU_ASSERT_EQUAL_FATAL(n, 50);
    for (int i = 0; i < n; i++) {
        json_t *e = wait_exec(ids[i]);
        CU_ASSERT_PTR_NOT_NULL(e);
        json_decref(e);
    }
    usleep(1500000);
    json_t *recs = obs_records(g_fin_out);
    CU_ASSERT_EQUAL(json_array_size(recs), 0);
    json_decref(recs);
    char *m = NULL;
    http("GET", "/metrics", NULL, NULL, &m);
    char *bl = m ? strstr(m, "\neai_outbox_backlog ") : NULL;
    CU_ASSERT(bl && atof(bl + strlen("\neai_outbox_backlog ")) >= 1);
    free(m);

    /* the FinOps service comes back on the same address */
    pid_t fin = obs_receiver_start("finops", fport, g_fin_out, g_dir, NULL);
    int64_t end = eai_now_ms() + 40000;
    size_t ok = 0;
    json_t *keys = json_object();
    while (eai_now_ms() < end) {
        recs = obs_records(g_fin_out);
        json_object_clear(keys);
        ok = 0;
        size_t i;
        json_t *r;
        json_array_foreach(recs, i, r) {
            if (json_integer_value(json_object_get(r, "status")) == 201) {
                ok++;
                json_object_set(keys, eai_jstr(r, "key"), json_object_get(r, "body"));
            }
        }
        json_decref(recs);
        if (ok >= 50)
            break;
        usleep(200000);
    }
    usleep(1500000);  /* a duplicate would arrive now */
    recs = obs_records(g_fin_out);
    size_t accepted = 0, i;
    json_t *r;
    json_array_foreach(recs, i, r) accepted += json_integer_value(json_object_get(r, "status")) == 201;
    fprintf(stderr, "  (%zu POSTs, %zu accepted, %zu distinct keys)\n", json_array_size(recs), accepted,
            json_object_size(keys));
    CU_ASSERT_EQUAL(accepted, 50);
    CU_ASSERT_EQUAL(json_object_size(keys), 50);
    /* one per execution */
    json_t *execs = json_object();
    const char *k;
    json_t *b;
    json_object_foreach(keys, k, b) {
        CU_ASSERT_STRING_EQUAL(eai_jstr(b, "id"), k);
        CU_ASSERT_STRING_EQUAL(eai_jstr(b, "project_id"), "p-outage");
        if (eai_jstr(b, "execution_id"))
            json_object_set_new(execs, eai_jstr(b, "execution_id"), json_true());
    }
    for (int j = 0; j < n; j++) {
        CU_ASSERT_PTR_NOT_NULL(json_object_get(execs, ids[j]));
        free(ids[j]);
    }
    json_decref(execs);
    json_decref(keys);
    json_decref(recs);
    obs_receiver_stop(fin);
    server_stop(g_srv);
    g_srv = 0;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("eaid serve", suite_init, suite_clean);
    CU_add_test(s, "traceparent, OTLP spans, FinOps ledger, /metrics + promtool", test_trace_finops_metrics);
    CU_add_test(s, "eaid audit verify on the data dir, then tampered", test_audit_verify_cli);
    CU_add_test(s, "FinOps down during 50 executions: delivered exactly once", test_finops_outage);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
