/*
 * HTTP integration test: the real build/eaid over loopback (docs/api.md).
 * Suite "no runtime": default config, EAI_SANDBOX_RUNSC=/nonexistent.
 * Suite "recording": a profile on the refusing test double (see
 * CMakeLists.txt) so executions are recorded.  Suite "burst": 400
 * submissions from 32 threads on that double, none lost.
 */
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../unit/unit_main.h"
#include "http_client.h"

static char eaid[512];
static char base_url[128];
static char tmpdir[256];
static char logfile[400];
static pid_t server_pid;
static char key_a[128], key_b[128], tenant_a[64], tenant_b[64];
static char auth_a[200], auth_b[200];

/* ------------------------------------------------------------ helpers */

static void check(int cond, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void check(int cond, int line, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!cond)
        fprintf(stderr, "\n  FAIL (line %d): %s\n", line, msg);
    CU_assertImplementation(cond ? CU_TRUE : CU_FALSE, (unsigned)line, msg, __FILE__, "", CU_FALSE);
}
#define CHECK(cond, ...) check((cond) ? 1 : 0, __LINE__, __VA_ARGS__)

static void url(char *out, size_t n, const char *path) { snprintf(out, n, "%s%s", base_url, path); }

static long req(const char *method, const char *path, const char *const *headers, const char *body,
                struct th_resp *r)
{
    char u[1024];
    url(u, sizeof(u), path);
    if (th_request(method, u, headers, body, body ? strlen(body) : 0, 0, r) < 0)
        return -1;
    return r->status;
}

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

static int make_tenant_key(const char *name, char tenant[64], char key[128])
{
    char *out = NULL;
    const char *a1[] = {"tenants", "create", name, NULL};
    if (th_eaid(eaid, &out, a1) != 0)
        return -1;
    json_error_t je;
    json_t *t = json_loads(out, 0, &je);
    free(out);
    const char *id = json_string_value(json_object_get(t, "id"));
    if (!id || strcmp(json_string_value(json_object_get(t, "name")), name) != 0) {
        json_decref(t);
        return -1;
    }
    snprintf(tenant, 64, "%s", id);
    json_decref(t);
    const char *a2[] = {"keys", "create", "--tenant", tenant, "--name", "test", NULL};
    if (th_eaid(eaid, &out, a2) != 0)
        return -1;
    chomp(out);
    /* printed once, on its own line */
    int ok = strchr(out, '\n') == NULL && strncmp(out, "eai_", 4) == 0;
    snprintf(key, 128, "%s", out);
    free(out);
    return ok ? 0 : -1;
}

static int start_server(const char *config)
{
    snprintf(logfile, sizeof(logfile), "%s/eaid.log", tmpdir);
    char dd[400], listen[64];
    snprintf(dd, sizeof(dd), "%s/var", tmpdir);
    int port = th_free_port();
    if (port <= 0)
        return -1;
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", port);
    setenv("EAI_DATA_DIR", dd, 1);
    setenv("EAI_LISTEN", listen, 1);
    setenv("EAI_LOG_LEVEL", "info", 1);
    if (make_tenant_key("tenant-a", tenant_a, key_a) < 0 || make_tenant_key("tenant-b", tenant_b, key_b) < 0) {
        fprintf(stderr, "cannot create tenants and keys with %s\n", eaid);
        return -1;
    }
    snprintf(auth_a, sizeof(auth_a), "Authorization: Bearer %s", key_a);
    snprintf(auth_b, sizeof(auth_b), "Authorization: Bearer %s", key_b);
    server_pid = th_serve(eaid, config, logfile);
    char u[256];
    url(u, sizeof(u), "/healthz");
    if (server_pid <= 0 || th_wait_up(u, 15000) < 0) {
        fprintf(stderr, "eaid did not come up; log %s\n", logfile);
        return -1;
    }
    return 0;
}

static int common_setup(void)
{
    const char *bd = getenv("EAI_BUILD_DIR");
    snprintf(eaid, sizeof(eaid), "%s/eaid", bd ? bd : ".");
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/eai-test-http-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    unsetenv("EAI_DATABASE_URL");
    unsetenv("EAI_FINOPS_URL");
    unsetenv("EAI_AUDIT_URL");
    unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    unsetenv("EAI_AUTH_PEPPER_FILE");
    return 0;
}

static int common_teardown(void)
{
    int rc = th_stop(server_pid, 10000);
    server_pid = 0;
    if (rc != 0) {
        fprintf(stderr, "eaid exit status %d after SIGTERM; log:\n", rc);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "tail -n 30 '%s' >&2", logfile);
        if (system(cmd) != 0)
            fprintf(stderr, "(no log)\n");
    }
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        return -1;
    return rc == 0 ? 0 : -1;
}

static int setup_noruntime(void)
{
    if (common_setup() < 0)
        return -1;
    setenv("EAI_SANDBOX_RUNSC", "/nonexistent", 1);
    unsetenv("EAI_PLUGIN_DIR_OVERRIDE");
    return start_server(NULL);
}

/* eaid on a test double of EAI_HTTP_PLUGIN_DIR (refuse, hold) with this
 * config file text. */
static int start_on_double(const char *yaml)
{
    if (common_setup() < 0)
        return -1;
    const char *pd = getenv("EAI_HTTP_PLUGIN_DIR");
    if (!pd)
        return -1;
    setenv("EAI_PLUGIN_DIR", pd, 1);
    unsetenv("EAI_SANDBOX_RUNSC");
    char cfg[400];
    snprintf(cfg, sizeof(cfg), "%s/eaid.yaml", tmpdir);
    FILE *f = fopen(cfg, "w");
    if (!f)
        return -1;
    fputs(yaml, f);
    fclose(f);
    return start_server(cfg);
}

static int setup_recording(void)
{
    return start_on_double("# test config: one profile on the refusing test double\n"
                           "isolation:\n  refuse: {}\n"
                           "server:\n  max_body_bytes: 1Mi\n  max_connections: 4\n  max_unauthenticated_connections: 0\n"
                           "profiles:\n"
                           "  fake:\n    backend: refuse\n    runtime_class: none\n"
                           "    defaults: {cpu: 250m, memory: 64Mi, timeout_s: 5}\n"
                           "    max: {cpu: 500m, memory: 128Mi, timeout_s: 10}\n"
                           "    egress_allow: [\"pypi.org:443\"]\n");
}

/* A profile on the holding test double: one execution runs (held until
 * cancelled), the others queue; at most 2 queued per tenant. */
static int setup_queue(void)
{
    return start_on_double("isolation:\n  hold: {}\n"
                           "scheduler: {max_concurrent: 1, max_per_tenant: 1, max_queued_per_tenant: 2}\n"
                           "profiles:\n"
                           "  held:\n    backend: hold\n    runtime_class: none\n"
                           "    defaults: {cpu: 250m, memory: 64Mi, timeout_s: 60}\n"
                           "    max: {cpu: 500m, memory: 128Mi, timeout_s: 60}\n");
}

/* A burst on the refusing double: every execution ends in error as soon as
 * it is claimed; all 8 slots to one tenant and a short queue, so the burst
 * meets admission back-pressure (429) as well as the scheduler. */
static int setup_burst(void)
{
    return start_on_double("isolation:\n  refuse: {}\n"
                           "scheduler: {max_concurrent: 8, max_per_tenant: 8, max_queued_per_tenant: 50}\n"
                           "profiles:\n"
                           "  fake:\n    backend: refuse\n    runtime_class: none\n"
                           "    defaults: {cpu: 250m, memory: 64Mi, timeout_s: 5}\n"
                           "    max: {cpu: 500m, memory: 128Mi, timeout_s: 10}\n");
}

/* ------------------------------------------------------------ suite: no runtime */

static void test_health_headers(void)
{
    struct th_resp r;
    CU_ASSERT_EQUAL(req("GET", "/healthz", NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(th_header(&r, "X-Request-Id"));
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Content-Language") ? th_header(&r, "Content-Language") : "", "en");
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Vary") ? th_header(&r, "Vary") : "", "Accept-Language");
    th_resp_free(&r);
    /* a sane client request id is echoed, in the header and the envelope */
    const char *h1[] = {"X-Request-Id: test-req-42", NULL};
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/profiles", h1, NULL, &r), 401);
    CU_ASSERT_STRING_EQUAL(th_header(&r, "X-Request-Id") ? th_header(&r, "X-Request-Id") : "", "test-req-42");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(r.json, "error"), "request_id")),
                           "test-req-42");
    /* the lines written as one block (http/request.c add_common_headers)
     * arrive as separate headers, Date (formatted once a second) too */
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Content-Language") ? th_header(&r, "Content-Language") : "", "en");
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Vary") ? th_header(&r, "Vary") : "", "Accept-Language");
    const char *tp = th_header(&r, "traceparent");
    CU_ASSERT(tp && strlen(tp) == 55 && strncmp(tp, "00-", 3) == 0 && strcmp(tp + 52, "-01") == 0);
    const char *date = th_header(&r, "Date");
    CU_ASSERT(date && strlen(date) == 29 && strcmp(date + 25, " GMT") == 0);
    th_resp_free(&r);
    /* an insane one is replaced */
    const char *h2[] = {"X-Request-Id: has space", NULL};
    CU_ASSERT_EQUAL(req("GET", "/healthz", h2, NULL, &r), 200);
    CU_ASSERT(th_header(&r, "X-Request-Id") && strcmp(th_header(&r, "X-Request-Id"), "has space") != 0);
    /* Content-Type goes out in the same entry (its own line on the wire) */
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Content-Type") ? th_header(&r, "Content-Type") : "", "application/json");
    th_resp_free(&r);
    /* the request headers are read in one pass (http/server.c heads_read):
     * names in any case, the first of two of one name, as evhttp_find_header */
    const char *h3[] = {"x-request-id: lower-7", "X-REQUEST-ID: second-8", "accept-LANGUAGE: fr",
                        "TRACEPARENT: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", NULL};
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/profiles", h3, NULL, &r), 401);
    CU_ASSERT_STRING_EQUAL(th_header(&r, "X-Request-Id") ? th_header(&r, "X-Request-Id") : "", "lower-7");
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Content-Language") ? th_header(&r, "Content-Language") : "", "fr");
    tp = th_header(&r, "traceparent");
    CU_ASSERT(tp && strncmp(tp, "00-0af7651916cd43dd8448eb211c80319c-", 36) == 0);
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Content-Type") ? th_header(&r, "Content-Type") : "", "application/json");
    th_resp_free(&r);
    /* an Authorization in another case is read too */
    char lower_auth[200];
    snprintf(lower_auth, sizeof lower_auth, "authorization:%s", strchr(auth_a, ':') + 1);
    const char *h4[] = {lower_auth, NULL};
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/profiles", h4, NULL, &r), 200);
    th_resp_free(&r);
}

/* The route scan skips the routes whose literal start differs from the
 * path (http/server.c route_may_match): the answers are those of a full
 * scan (first match wins; 405 with every method of the path; 422 for a
 * bad escape in a capture; 404 otherwise). */
static void test_routing(void)
{
    struct th_resp r;
    const char *h[] = {auth_a, NULL};
    CU_ASSERT_EQUAL(req("PUT", "/v1/sandbox/executions", h, NULL, &r), 405);
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Allow") ? th_header(&r, "Allow") : "", "POST, GET");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("PUT", "/v1/manifests/tool/x", h, NULL, &r), 405);
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Allow") ? th_header(&r, "Allow") : "", "GET, DELETE");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions/sbx_a%zz", h, NULL, &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "validation_failed");
    th_resp_free(&r);
    const char *missing[] = {"/healthzx", "/healthz/", "/v1/sandbox/executions/", "/v1/sandbox/executionsx",
                             "/v1/sandbox/executions/x/files", "/v1/manifests/tool", "/", NULL};
    for (int i = 0; missing[i]; i++) {
        CU_ASSERT_EQUAL(req("GET", missing[i], h, NULL, &r), 404);
        CU_ASSERT_STRING_EQUAL(th_code(&r), "not_found");
        th_resp_free(&r);
    }
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions/sbx_none", h, NULL, &r), 404);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions?limit=1", h, NULL, &r), 200);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests", h, NULL, &r), 200);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/metrics", NULL, NULL, &r), 200);
    th_resp_free(&r);
}

/* libcurl and libarchive are opened at their first use (core/base/dynlib.h):
 * a serving eaid that made no outbound call and imported nothing maps
 * neither, nor GnuTLS or ICU behind them (docs/performance.md "Memory"). */
static void test_serve_maps(void)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)server_pid);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int libs = 0, curl = 0, archive = 0;
    while (fgets(line, sizeof line, f)) {
        libs += strstr(line, "libc.so") != NULL;
        curl += strstr(line, "libcurl") != NULL || strstr(line, "libgnutls") != NULL;
        archive += strstr(line, "libarchive") != NULL || strstr(line, "libicu") != NULL;
    }
    fclose(f);
    CU_ASSERT(libs > 0); /* the maps were read */
    CU_ASSERT_EQUAL(curl, 0);
    CU_ASSERT_EQUAL(archive, 0);
}

static void check_401(const char *const *headers)
{
    struct th_resp r;
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions", headers, NULL, &r), 401);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "unauthenticated");
    /* RFC 6750: every 401 names the scheme it wants */
    CU_ASSERT_STRING_EQUAL(th_header(&r, "WWW-Authenticate") ? th_header(&r, "WWW-Authenticate") : "", "Bearer");
    json_t *e = json_object_get(r.json, "error");
    CU_ASSERT(json_is_string(json_object_get(json_object_get(e, "message_i18n"), "fr")));
    CU_ASSERT(json_is_array(json_object_get(e, "details")));
    th_resp_free(&r);
}

static void test_401(void)
{
    check_401(NULL);
    const char *h1[] = {"Authorization: Bearer nonsense", NULL};
    check_401(h1);
    const char *h2[] = {"Authorization: Basic dXNlcjpwdw==", NULL};
    check_401(h2);
    /* well-formed but unknown */
    const char *h3[] = {"Authorization: Bearer eai_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", NULL};
    check_401(h3);
    /* right id, wrong secret */
    char wrong[200];
    snprintf(wrong, sizeof(wrong), "%s", auth_a);
    size_t n = strlen(wrong);
    wrong[n - 1] = wrong[n - 1] == '0' ? '1' : '0';
    const char *h4[] = {wrong, NULL};
    check_401(h4);
    /* the real key works */
    struct th_resp r;
    const char *ok[] = {auth_a, NULL};
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions", ok, NULL, &r), 200);
    th_resp_free(&r);
    /* now the key is cached (http/auth_cache.c): the same id with another
     * secret (last or first byte changed) is still refused, and does not
     * evict the good one */
    check_401(h4);
    char first[200];
    snprintf(first, sizeof(first), "%s", auth_a);
    char *sec = first + strlen("Authorization: Bearer eai_0123456789abcdef_");
    *sec = *sec == 'a' ? 'b' : 'a';
    const char *h5[] = {first, NULL};
    check_401(h5);
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions", ok, NULL, &r), 200);
    th_resp_free(&r);
}

static void test_revoke_while_running(void)
{
    char tenant[64], key[128], auth[200];
    CU_ASSERT_EQUAL_FATAL(make_tenant_key("tenant-revoke", tenant, key), 0);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
    const char *h[] = {auth, NULL};
    struct th_resp r;
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/profiles", h, NULL, &r), 200);
    th_resp_free(&r);
    /* the second is answered from the cache of verified keys (http/auth_cache.c):
     * the revocation below must still be seen by the very next request */
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/profiles", h, NULL, &r), 200);
    th_resp_free(&r);
    char key_id[17];
    memcpy(key_id, key + 4, 16);
    key_id[16] = '\0';
    const char *args[] = {"keys", "revoke", key_id, NULL};
    CU_ASSERT_EQUAL(th_eaid(eaid, NULL, args), 0);
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/profiles", h, NULL, &r), 401);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "unauthenticated");
    th_resp_free(&r);
    const char *bad[] = {"keys", "revoke", "ffffffffffffffff", NULL};
    CU_ASSERT_NOT_EQUAL(th_eaid(eaid, NULL, bad), 0);
}

static void test_404_french(void)
{
    struct th_resp r;
    const char *h[] = {auth_a, "Accept-Language: fr-CA;q=0.9, en;q=0.8", NULL};
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions/sbx_00000000-0000-4000-8000-000000000000", h, NULL, &r), 404);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "not_found");
    json_t *e = json_object_get(r.json, "error");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(e, "message")), "Exécution introuvable");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(e, "message_i18n"), "en")),
                           "Execution not found");
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Content-Language") ? th_header(&r, "Content-Language") : "", "fr");
    th_resp_free(&r);
    /* fr excluded by q=0 */
    const char *h2[] = {auth_a, "Accept-Language: fr;q=0, en;q=0.5", NULL};
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions/sbx_nope", h2, NULL, &r), 404);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(r.json, "error"), "message")),
                           "Execution not found");
    th_resp_free(&r);
    /* unknown routes answer the envelope too, with their own message (17.7) */
    CU_ASSERT_EQUAL(req("GET", "/nowhere", NULL, NULL, &r), 404);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "not_found");
    CU_ASSERT(strstr(json_string_value(json_object_get(json_object_get(r.json, "error"), "message")), "route") != NULL);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests/tool/none", h, NULL, &r), 404);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(r.json, "error"), "message")),
                           "Manifeste introuvable");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions/sbx_00000000-0000-4000-8000-000000000000/files/tmp/x", h2,
                        NULL, &r), 404);
    CU_ASSERT(strstr(json_string_value(json_object_get(json_object_get(r.json, "error"), "message")), "File not found") != NULL);
    th_resp_free(&r);
    /* details[].message in the negotiated language, quantities explained in words */
    const char *hf[] = {auth_a, "Accept-Language: fr", "Content-Type: application/json", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", hf,
                        "{\"profile\":\"fake\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],"
                        "\"limits\":{\"memory\":\"256MB\"}}", &r), 422);
    json_t *d0 = json_array_get(json_object_get(json_object_get(r.json, "error"), "details"), 0);
    const char *m = json_string_value(json_object_get(d0, "message"));
    CU_ASSERT(m && strstr(m, "quantité d'octets") && !strstr(m, "^"));
    m = json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "en"));
    CU_ASSERT(m && strstr(m, "byte quantity") && !strstr(m, "pattern"));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("PUT", "/healthz", NULL, NULL, &r), 405);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "method_not_allowed");
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Allow") ? th_header(&r, "Allow") : "", "GET");
    th_resp_free(&r);
}

static int has_detail_path(const struct th_resp *r, const char *path)
{
    json_t *d = json_object_get(json_object_get(r->json, "error"), "details");
    size_t i;
    json_t *x;
    json_array_foreach(d, i, x)
        if (strcmp(json_string_value(json_object_get(x, "path")) ? json_string_value(json_object_get(x, "path")) : "", path) == 0)
            return 1;
    return 0;
}

static void test_422_400(void)
{
    struct th_resp r;
    const char *h[] = {auth_a, "Content-Type: application/json", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h,
                        "{\"profile\":\"gvisor-small\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],\"bogus\":1}", &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "validation_failed");
    CU_ASSERT(has_detail_path(&r, "/bogus"));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h,
                        "{\"profile\":\"gvisor-small\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],"
                        "\"limits\":{\"memory\":\"lots\"}}", &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "validation_failed");
    CU_ASSERT(has_detail_path(&r, "/limits/memory"));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h,
                        "{\"profile\":\"gvisor-small\",\"image\":\"python:3.11-slim\",\"command\":[]}", &r), 422);
    CU_ASSERT(has_detail_path(&r, "/command"));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h, "{\"image\": ", &r), 400);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "invalid_json");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h, "{\"a\":1,\"a\":2}", &r), 400);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "invalid_json");
    th_resp_free(&r);
    const char *xml[] = {auth_a, "Content-Type: application/xml", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", xml, "<a/>", &r), 415);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "unsupported_media_type");
    th_resp_free(&r);
}

static void test_413(void)
{
    char u[256];
    url(u, sizeof(u), "/v1/sandbox/executions");
    size_t big = 70u * 1000 * 1000;
    struct th_resp r;
    /* with Expect: 100-continue (curl's default for big bodies) */
    const char *h1[] = {auth_a, "Content-Type: application/json", "Accept-Language: fr", NULL};
    CU_ASSERT_EQUAL_FATAL(th_request("POST", u, h1, NULL, 0, big, &r), 0);
    CU_ASSERT_EQUAL(r.status, 413);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "payload_too_large");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(r.json, "error"), "message")),
                           "Le corps de la requête est trop volumineux");
    CU_ASSERT(r.seconds < 10);
    th_resp_free(&r);
    /* without Expect: the body is sent and discarded */
    const char *h2[] = {auth_a, "Content-Type: application/json", "Expect:", "X-Request-Id: big-2", NULL};
    CU_ASSERT_EQUAL_FATAL(th_request("POST", u, h2, NULL, 0, big, &r), 0);
    CU_ASSERT_EQUAL(r.status, 413);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "payload_too_large");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(r.json, "error"), "request_id")), "big-2");
    th_resp_free(&r);
    /* chunked, no length announced */
    const char *h3[] = {auth_a, "Content-Type: application/json", "Transfer-Encoding: chunked", NULL};
    CU_ASSERT_EQUAL_FATAL(th_request("POST", u, h3, NULL, 0, 12u * 1024 * 1024, &r), 0);
    CU_ASSERT_EQUAL(r.status, 413);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "payload_too_large");
    th_resp_free(&r);
    /* the server is still fine */
    CU_ASSERT_EQUAL(req("GET", "/healthz", NULL, NULL, &r), 200);
    th_resp_free(&r);
}

static void test_profiles(void)
{
    struct th_resp r;
    const char *h[] = {auth_a, NULL};
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/profiles", h, NULL, &r), 200);
    json_t *arr = json_object_get(r.json, "profiles");
    int found = 0;
    size_t i;
    json_t *p;
    json_array_foreach(arr, i, p) {
        if (strcmp(json_string_value(json_object_get(p, "name")), "gvisor-small") != 0)
            continue;
        found = 1;
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(p, "backend")), "gvisor");
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(p, "defaults"), "cpu")), "500m");
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(p, "max"), "memory")), "512Mi");
        CU_ASSERT(json_is_array(json_object_get(p, "egress_allow")));
        CU_ASSERT(json_is_false(json_object_get(p, "available")));
    }
    CU_ASSERT(found);
    th_resp_free(&r);
}

static void test_sandbox_unavailable(void)
{
    struct th_resp r;
    const char *h[] = {auth_a, "Content-Type: application/json", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h,
                        "{\"profile\":\"gvisor-small\",\"image\":\"python:3.11-slim\",\"command\":[\"python3\",\"-c\",\"print(1)\"]}",
                        &r), 503);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "sandbox_unavailable");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/readyz", NULL, NULL, &r), 503);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "sandbox_unavailable");
    CU_ASSERT(json_is_true(json_object_get(json_object_get(json_object_get(r.json, "checks"), "storage"), "ok")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.json, "status")), "not_ready");
    th_resp_free(&r);
    /* its details in both languages, as every error's (it builds its own envelope) */
    const char *fr[] = {"Accept-Language: fr", NULL};
    CU_ASSERT_EQUAL(req("GET", "/readyz", fr, NULL, &r), 503);
    json_t *d0 = json_array_get(json_object_get(json_object_get(r.json, "error"), "details"), 0);
    const char *dfr = json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "fr"));
    CU_ASSERT(dfr && strcmp(dfr, "aucun backend d'isolation n'est prêt") == 0);
    CU_ASSERT(json_is_object(json_object_get(r.json, "checks")));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/metrics", NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "eai_http_requests_total{route=\"readyz\",code=\"503\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "eai_http_requests_total{route=\"executions.create\",code=\"503\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(th_header(&r, "Content-Type") ? th_header(&r, "Content-Type") : "", "version=0.0.4"));
    th_resp_free(&r);
}

static void test_keepalive(void)
{
    /* many requests on one connection, then the connection gauge */
    CURL *c = curl_easy_init();
    char u[256];
    url(u, sizeof(u), "/healthz");
    FILE *devnull = fopen("/dev/null", "w");
    curl_easy_setopt(c, CURLOPT_URL, u);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, devnull);
    long connects = 0, total = 0, code = 0;
    for (int i = 0; i < 20; i++) {
        CU_ASSERT_EQUAL(curl_easy_perform(c), CURLE_OK);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        total += connects;
        CU_ASSERT_EQUAL(code, 200);
    }
    CU_ASSERT_EQUAL(total, 1);
    curl_easy_cleanup(c);
    fclose(devnull);
}

static int raw_connect(void);

/* HEAD then GET on one connection: the HEAD answer has the GET's headers
 * (its Content-Length included) and no body, so the next answer starts
 * right after its head (a body there was read as the next response). */
static void test_head_keepalive(void)
{
    int fd = raw_connect();
    CU_ASSERT_FATAL(fd >= 0);
    const char *two = "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    CU_ASSERT_EQUAL(write(fd, two, strlen(two)), (ssize_t)strlen(two));
    char buf[4096];
    size_t got = 0;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    /* until the GET's body ({"status":"ok"}) is in */
    while (got < sizeof(buf) - 1) {
        ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
        const char *second = strstr(buf + 1, "HTTP/1.1 ");
        if (second && strstr(second, "\r\n\r\n{\"status\":\"ok\"}"))
            break;
    }
    buf[got] = '\0';
    close(fd);
    CU_ASSERT(strncmp(buf, "HTTP/1.1 200", 12) == 0);
    const char *end = strstr(buf, "\r\n\r\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(end);
    CU_ASSERT(strncmp(end + 4, "HTTP/1.1 200", 12) == 0); /* no body after the HEAD's head */
    char *head_cl = strcasestr(buf, "Content-Length: ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(head_cl);
    CU_ASSERT(head_cl < end);
    const char *get_cl = strcasestr(end, "Content-Length: ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(get_cl);
    CU_ASSERT_EQUAL(atoi(head_cl + 16), atoi(get_cl + 16)); /* the GET's length */
    CU_ASSERT(atoi(head_cl + 16) > 0);
}

/* ------------------------------------------------------------ suite: recording */

static const char *exec_body =
    "{\"profile\":\"fake\",\"image\":\"python:3.11-slim\",\"command\":[\"python3\",\"-c\",\"print(2+2)\"],"
    "\"project_id\":\"p1\",\"run_id\":\"r1\"}";

/* The agent view (routes_agent.c): a run's executions, counts and trace
 * ids; runs and agents listed and paged; another tenant's run and agent
 * answer 404 in both languages; bounds give 422. */
static void test_agent_view(void)
{
    struct th_resp r;
    const char *h[] = {auth_a, "Content-Type: application/json", "traceparent: "
                       "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", NULL};
    const char *body = "{\"profile\":\"fake\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],"
                       "\"project_id\":\"proj-h\",\"agent_id\":\"agent-h\",\"run_id\":\"run-h1\"}";
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h, body, &r), 202);
        th_resp_free(&r);
    }
    const char *ga[] = {auth_a, NULL};
    const char *gb[] = {auth_b, NULL};
    const char *gbfr[] = {auth_b, "Accept-Language: fr", NULL};
    CU_ASSERT_EQUAL_FATAL(req("GET", "/v1/runs/run-h1", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(r.json, "total")), 3);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "executions")), 3);
    CU_ASSERT(json_is_false(json_object_get(r.json, "truncated")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.json, "agent_id")), "agent-h");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(r.json, "trace_ids"), 0)),
                           "4bf92f3577b34da6a3ce929d0e0e4736");
    CU_ASSERT(json_is_array(json_object_get(r.json, "sessions")));
    CU_ASSERT(json_is_object(json_object_get(r.json, "usage")));
    CU_ASSERT(json_is_object(json_object_get(r.json, "counts")));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/runs/run-h1?limit=2", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "executions")), 2);
    CU_ASSERT(json_is_true(json_object_get(r.json, "truncated")));
    th_resp_free(&r);
    /* another tenant: 404 like a missing run, in French when asked */
    struct th_resp other, missing;
    CU_ASSERT_EQUAL(req("GET", "/v1/runs/run-h1", gb, NULL, &other), 404);
    CU_ASSERT_EQUAL(req("GET", "/v1/runs/no-such-run", gb, NULL, &missing), 404);
    json_object_del(json_object_get(other.json, "error"), "request_id");
    json_object_del(json_object_get(missing.json, "error"), "request_id");
    CU_ASSERT(json_equal(other.json, missing.json));
    th_resp_free(&other);
    th_resp_free(&missing);
    CU_ASSERT_EQUAL(req("GET", "/v1/runs/run-h1", gbfr, NULL, &r), 404);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "not_found");
    const char *fr = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
    CU_ASSERT(fr && strncmp(fr, "Run introuvable", 15) == 0);
    th_resp_free(&r);
    /* lists */
    CU_ASSERT_EQUAL_FATAL(req("GET", "/v1/runs?agent_id=agent-h", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "items")), 1);
    CU_ASSERT(json_is_null(json_object_get(r.json, "next")));
    th_resp_free(&r);
    CU_ASSERT_EQUAL_FATAL(req("GET", "/v1/runs?project_id=proj-h&limit=1", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "items")), 1);
    th_resp_free(&r);
    CU_ASSERT_EQUAL_FATAL(req("GET", "/v1/agents?limit=100", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "items")), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(json_object_get(r.json, "items"), 0),
                                                             "agent_id")), "agent-h");
    th_resp_free(&r);
    CU_ASSERT_EQUAL_FATAL(req("GET", "/v1/agents/agent-h", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(r.json, "runs")), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(r.json, "executions")), 3);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.json, "newest_run")), "run-h1");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "usage")), 1);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/agents/agent-h", gb, NULL, &r), 404);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/agents", gb, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "items")), 0);
    th_resp_free(&r);
    /* bounds */
    CU_ASSERT_EQUAL(req("GET", "/v1/runs?limit=101", ga, NULL, &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "validation_failed");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/agents?limit=0", ga, NULL, &r), 422);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/runs/run-h1?limit=5000", ga, NULL, &r), 422);
    th_resp_free(&r);
}

static void test_idempotency_and_tenants(void)
{
    struct th_resp r;
    const char *h[] = {auth_a, "Content-Type: application/json", "Idempotency-Key: idem-1", NULL};
    CU_ASSERT_EQUAL_FATAL(req("POST", "/v1/sandbox/executions", h, exec_body, &r), 202);
    const char *id0 = json_string_value(json_object_get(r.json, "id"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(id0);
    char id[128];
    snprintf(id, sizeof(id), "%s", id0);
    CU_ASSERT(strncmp(id, "sbx_", 4) == 0);
    char loc[200];
    snprintf(loc, sizeof(loc), "/v1/sandbox/executions/%s", id);
    CU_ASSERT_STRING_EQUAL(th_header(&r, "Location") ? th_header(&r, "Location") : "", loc);
    th_resp_free(&r);
    /* same key, same body: the first execution, 200 */
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h, exec_body, &r), 200);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.json, "id")) ? json_string_value(json_object_get(r.json, "id")) : "", id);
    th_resp_free(&r);
    /* same key, other body: 409 */
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h,
                        "{\"profile\":\"fake\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"]}", &r), 409);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "idempotency_conflict");
    th_resp_free(&r);
    /* the same key in another tenant is another execution */
    const char *hb[] = {auth_b, "Content-Type: application/json", "Idempotency-Key: idem-1", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", hb, exec_body, &r), 202);
    CU_ASSERT(strcmp(json_string_value(json_object_get(r.json, "id")) ? json_string_value(json_object_get(r.json, "id")) : id, id) != 0);
    th_resp_free(&r);
    /* cross-tenant read answers exactly like a missing one */
    const char *ga[] = {auth_a, NULL};
    const char *gb[] = {auth_b, NULL};
    CU_ASSERT_EQUAL(req("GET", loc, ga, NULL, &r), 200);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.json, "id")) ? json_string_value(json_object_get(r.json, "id")) : "", id);
    th_resp_free(&r);
    struct th_resp other, missing;
    CU_ASSERT_EQUAL(req("GET", loc, gb, NULL, &other), 404);
    CU_ASSERT_EQUAL(req("GET", "/v1/sandbox/executions/sbx_00000000-0000-4000-8000-000000000000", gb, NULL, &missing), 404);
    json_object_del(json_object_get(other.json, "error"), "request_id");
    json_object_del(json_object_get(missing.json, "error"), "request_id");
    CU_ASSERT(json_equal(other.json, missing.json));
    th_resp_free(&other);
    th_resp_free(&missing);
    char cancel[256];
    snprintf(cancel, sizeof(cancel), "%s/cancel", loc);
    CU_ASSERT_EQUAL(req("POST", cancel, gb, NULL, &r), 404);
    th_resp_free(&r);
    /* its events and network log too (exec_read.c read_answer) */
    static const char *const sub[] = {"/events", "/network"};
    for (size_t k = 0; k < sizeof sub / sizeof sub[0]; k++) {
        char p[300];
        snprintf(p, sizeof(p), "%s%s", loc, sub[k]);
        CU_ASSERT_EQUAL(req("GET", p, gb, NULL, &r), 404);
        CU_ASSERT_STRING_EQUAL(th_code(&r), "not_found");
        th_resp_free(&r);
    }
    /* the refusing backend ends it in error: recorded, never silently */
    int terminal = 0;
    for (int i = 0; i < 50 && !terminal; i++) {
        char w[300];
        snprintf(w, sizeof(w), "%s?wait_s=1", loc);
        CU_ASSERT_EQUAL(req("GET", w, ga, NULL, &r), 200);
        const char *st = json_string_value(json_object_get(r.json, "status"));
        if (st && strcmp(st, "error") == 0)
            terminal = 1;
        th_resp_free(&r);
    }
    CU_ASSERT(terminal);
    /* finished: the document is served from memory from now on
     * (exec/doc_cache.c): byte for byte what storage gave, and still
     * never to another tenant */
    struct th_resp a1, a2, b1;
    CU_ASSERT_EQUAL(req("GET", loc, ga, NULL, &a1), 200);
    CU_ASSERT_EQUAL(req("GET", loc, ga, NULL, &a2), 200);
    CU_ASSERT_EQUAL(req("GET", loc, gb, NULL, &b1), 404);
    CU_ASSERT_STRING_EQUAL(th_code(&b1), "not_found");
    CU_ASSERT(a1.body && a2.body && a1.len == a2.len && memcmp(a1.body, a2.body, a1.len) == 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a2.json, "status")) ?
                           json_string_value(json_object_get(a2.json, "status")) : "", "error");
    CU_ASSERT_STRING_EQUAL(th_header(&a2, "Content-Type") ? th_header(&a2, "Content-Type") : "", "application/json");
    th_resp_free(&a1);
    th_resp_free(&a2);
    th_resp_free(&b1);
}

static const char *manifest_yaml =
    "apiVersion: eai.dev/v1\n"
    "kind: Tool\n"
    "metadata:\n  name: my-tool\n"
    "spec:\n  sandbox_profile: fake\n  image: python:3.11-slim\n  command: [python3, -c, 'print(1)']\n";

static void test_manifests(void)
{
    struct th_resp r;
    const char *hy[] = {auth_a, "Content-Type: application/yaml", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/manifests/apply", hy, manifest_yaml, &r), 201);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.json, "kind")), "tool");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/manifests/apply", hy, manifest_yaml, &r), 200);
    th_resp_free(&r);
    const char *ga[] = {auth_a, NULL};
    const char *gb[] = {auth_b, NULL};
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests/tool/my-tool", ga, NULL, &r), 200);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(r.json, "spec"), "sandbox_profile")), "fake");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests/Tool/my-tool", ga, NULL, &r), 200);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests/tool/my-tool", gb, NULL, &r), 404);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "not_found");
    th_resp_free(&r);
    /* an execution may name the tool instead of a profile */
    const char *hj[] = {auth_a, "Content-Type: application/json", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", hj,
                        "{\"tool\":\"my-tool\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"]}", &r), 202);
    th_resp_free(&r);
    /* unknown profile */
    const char *bad_profile = "{\"apiVersion\":\"eai.dev/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":\"t2\"},"
                              "\"spec\":{\"sandbox_profile\":\"nope\"}}";
    CU_ASSERT_EQUAL(req("POST", "/v1/manifests/apply", hj, bad_profile, &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "unknown_profile");
    CU_ASSERT(has_detail_path(&r, "/spec/sandbox_profile"));
    th_resp_free(&r);
    /* schema errors with their paths */
    const char *invalid = "{\"apiVersion\":\"eai.dev/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":\"BAD NAME\"},"
                          "\"spec\":{\"sandbox_profile\":\"fake\",\"extra\":1}}";
    CU_ASSERT_EQUAL(req("POST", "/v1/manifests/apply", hj, invalid, &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "validation_failed");
    CU_ASSERT(has_detail_path(&r, "/metadata/name"));
    CU_ASSERT(has_detail_path(&r, "/spec/extra"));
    th_resp_free(&r);
    /* checked at apply as its execution would be: limits, egress, callback (17.6) */
    const char *too_big = "{\"apiVersion\":\"eai.dev/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":\"big\"},"
                          "\"spec\":{\"sandbox_profile\":\"fake\",\"limits\":{\"cpu\":\"2\"}}}";
    CU_ASSERT_EQUAL(req("POST", "/v1/manifests/apply", hj, too_big, &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "limit_exceeded");
    CU_ASSERT(has_detail_path(&r, "/spec/limits/cpu"));
    th_resp_free(&r);
    const char *far = "{\"apiVersion\":\"eai.dev/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":\"far\"},"
                      "\"spec\":{\"sandbox_profile\":\"fake\",\"egress\":[\"evil.example:443\"]}}";
    CU_ASSERT_EQUAL(req("POST", "/v1/manifests/apply", hj, far, &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "egress_not_allowed");
    CU_ASSERT(has_detail_path(&r, "/spec/egress/0"));
    th_resp_free(&r);
    const char *cb_private = "{\"apiVersion\":\"eai.dev/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":\"cbp\"},"
                             "\"spec\":{\"sandbox_profile\":\"fake\",\"callback\":{\"url\":\"http://10.0.0.1/x\","
                             "\"secret\":\"0123456789abcdef\"}}}";
    CU_ASSERT_EQUAL(req("POST", "/v1/manifests/apply", hj, cb_private, &r), 422);
    CU_ASSERT(has_detail_path(&r, "/spec/callback/url"));
    th_resp_free(&r);
    /* a callback secret is stored, never echoed */
    const char *cb_ok = "{\"apiVersion\":\"eai.dev/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":\"my-tool2\"},"
                        "\"spec\":{\"sandbox_profile\":\"fake\",\"callback\":{\"url\":\"https://hooks.example.com/x\","
                        "\"secret\":\"0123456789abcdef\"}}}";
    CU_ASSERT_EQUAL(req("POST", "/v1/manifests/apply", hj, cb_ok, &r), 201);
    CU_ASSERT(r.body && !strstr(r.body, "0123456789abcdef"));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests/tool/my-tool2", ga, NULL, &r), 200);
    CU_ASSERT(r.body && !strstr(r.body, "0123456789abcdef"));
    th_resp_free(&r);
    /* the list: pages by name, per tenant */
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests?kind=Tool&limit=1", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "items")), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.json, "next")), "my-tool");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests?kind=Tool&limit=1&after=my-tool", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "items")), 1);
    CU_ASSERT(json_is_null(json_object_get(r.json, "next")));
    CU_ASSERT(r.body && strstr(r.body, "my-tool2") && !strstr(r.body, "0123456789abcdef"));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests?kind=Tool", gb, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "items")), 0);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests?kind=Tool&limit=0", ga, NULL, &r), 422);
    CU_ASSERT(has_detail_path(&r, "/query/limit"));
    th_resp_free(&r);
    /* delete, then it is gone */
    CU_ASSERT_EQUAL(req("DELETE", "/v1/manifests/tool/my-tool", gb, NULL, &r), 404);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("DELETE", "/v1/manifests/tool/my-tool", ga, NULL, &r), 200);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/manifests/tool/my-tool", ga, NULL, &r), 404);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("DELETE", "/v1/manifests/tool/my-tool", ga, NULL, &r), 404);
    th_resp_free(&r);
}

static void test_contracts(void)
{
    struct th_resp r;
    const char *hy[] = {auth_a, "Content-Type: application/yaml", NULL};
    const char *hj[] = {auth_a, "Content-Type: application/json", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/contracts/tool-manifest/validate", hy, manifest_yaml, &r), 200);
    CU_ASSERT(json_is_true(json_object_get(r.json, "valid")));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/contracts/tool-manifest/validate", hj,
                        "{\"apiVersion\":\"eai.dev/v1\",\"kind\":\"Tool\",\"metadata\":{\"name\":\"x\"},"
                        "\"spec\":{\"sandbox_profile\":\"nope\"}}", &r), 200);
    CU_ASSERT(json_is_false(json_object_get(r.json, "valid")));
    json_t *e0 = json_array_get(json_object_get(r.json, "errors"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(e0, "path")) ? json_string_value(json_object_get(e0, "path")) : "",
                           "/spec/sandbox_profile");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/contracts/sandbox-execution/validate", hj,
                        "{\"image\":\"x\",\"command\":[\"true\"],\"limits\":{\"cpu\":\"lots\"}}", &r), 200);
    CU_ASSERT(json_is_false(json_object_get(r.json, "valid")));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/contracts/sandbox-execution/validate", hj,
                        "{\"image\":\"x\",\"command\":[\"true\"]}", &r), 200);
    CU_ASSERT(json_is_true(json_object_get(r.json, "valid")));
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/contracts/no-such-contract/validate", hj, "{}", &r), 404);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "not_found");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/contracts/tool-manifest/validate", hy, "a: [", &r), 400);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "invalid_json");
    th_resp_free(&r);
}

/* An alias bomb far under the body cap (~84 KB that would expand to ~80 MB)
 * is refused with the envelope, quickly; a normal anchored manifest works
 * (issue 16, item 2). */
static void test_yaml_alias_bomb_http(void)
{
    enum { STR = 4096, USES = 20000 };
    size_t cap = STR + 256 + (size_t)USES * 4;
    char *doc = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    size_t n = (size_t)snprintf(doc, cap, "apiVersion: eai.dev/v1\nkind: Tool\nmetadata: {name: bomb}\n"
                                          "spec:\n  sandbox_profile: fake\n  description: &s \"");
    memset(doc + n, 'x', STR);
    n += STR;
    n += (size_t)snprintf(doc + n, cap - n, "\"\n  command: [");
    for (int i = 0; i < USES; i++)
        n += (size_t)snprintf(doc + n, cap - n, "%s*s", i ? "," : "");
    n += (size_t)snprintf(doc + n, cap - n, "]\n");
    const char *hy[] = {auth_a, "Content-Type: application/yaml", "Accept-Language: fr", NULL};
    const char *paths[] = {"/v1/manifests/apply", "/v1/contracts/tool-manifest/validate"};
    for (int i = 0; i < 2; i++) {
        char u[256];
        url(u, sizeof(u), paths[i]);
        struct th_resp r;
        CU_ASSERT_EQUAL_FATAL(th_request("POST", u, hy, doc, n, 0, &r), 0);
        CHECK(r.status == 400, "%s: bomb answered %ld", paths[i], r.status);
        CU_ASSERT_STRING_EQUAL(th_code(&r), "invalid_json");
        json_t *e = json_object_get(r.json, "error");
        CU_ASSERT(json_is_string(json_object_get(json_object_get(e, "message_i18n"), "fr")));
        json_t *d0 = json_array_get(json_object_get(e, "details"), 0);
        const char *m = json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "en"));
        const char *mfr = json_string_value(json_object_get(d0, "message"));
        CHECK(m && strstr(m, "bytes"), "detail names the byte budget: %s", m ? m : "(none)");
        CHECK(mfr && strstr(mfr, "octets"), "in French too: %s", mfr ? mfr : "(none)");
        CHECK(r.seconds < 2.0, "refused in %.3f s", r.seconds);
        CHECK(r.len < 4096, "the answer is small (%zu bytes)", r.len);
        th_resp_free(&r);
    }
    free(doc);
    struct th_resp r;
    CU_ASSERT_EQUAL(req("GET", "/healthz", NULL, NULL, &r), 200);
    th_resp_free(&r);
    const char *anchored = "apiVersion: eai.dev/v1\nkind: Tool\nmetadata: {name: anchored}\n"
                           "spec:\n  sandbox_profile: fake\n  image: &img python:3.11-slim\n"
                           "  command: &cmd [python3, -c, 'print(1)']\n";
    const char *hy2[] = {auth_a, "Content-Type: application/yaml", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/contracts/tool-manifest/validate", hy2, anchored, &r), 200);
    CU_ASSERT(json_is_true(json_object_get(r.json, "valid")));
    th_resp_free(&r);
}

static void test_finops(void)
{
    struct th_resp r;
    const char *hj[] = {auth_a, "Content-Type: application/json", NULL};
    const char *ev = "{\"id\":\"ev-1\",\"project_id\":\"proj-x\",\"run_id\":\"run-1\",\"profile\":\"fake\","
                     "\"backend\":\"refuse\",\"cpu_seconds\":1.5,\"memory_mb_seconds\":10,\"duration_s\":2,"
                     "\"execution_id\":\"sbx_1\",\"finished_at\":\"2026-01-02T03:04:05.000Z\"}";
    CU_ASSERT_EQUAL(req("POST", "/v1/finops/usage", hj, ev, &r), 201);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/finops/usage", hj, ev, &r), 200);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("POST", "/v1/finops/usage", hj, "{\"id\":\"ev-2\",\"cpu_seconds\":-1,\"colour\":1}", &r), 422);
    CU_ASSERT(has_detail_path(&r, "/cpu_seconds"));
    CU_ASSERT(has_detail_path(&r, "/colour"));
    CU_ASSERT(has_detail_path(&r, "/duration_s"));
    th_resp_free(&r);
    const char *ga[] = {auth_a, NULL};
    const char *gb[] = {auth_b, NULL};
    CU_ASSERT_EQUAL(req("GET", "/v1/finops/usage?project_id=proj-x", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "usage")), 1);
    json_t *t = json_object_get(r.json, "totals");
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(t, "cpu_seconds")), 1.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(json_object_get(json_object_get(t, "by_profile"), "fake"),
                                                             "duration_s")), 2.0, 1e-9);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/finops/usage?project_id=proj-x&from=2026-01-03T00:00:00Z", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "usage")), 0);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/finops/usage?project_id=proj-x", gb, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "usage")), 0);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/finops/usage?from=yesterday", ga, NULL, &r), 422);
    CU_ASSERT(has_detail_path(&r, "/query/from"));
    th_resp_free(&r);
    /* 17.8: totals over the whole period, not the page; a cursor walks every page once */
    for (int i = 0; i < 5; i++) {
        char e2[400];
        snprintf(e2, sizeof e2, "{\"id\":\"pg-%d\",\"project_id\":\"proj-p\",\"agent_id\":\"%s\",\"profile\":\"fake\","
                 "\"cpu_seconds\":1,\"memory_mb_seconds\":1,\"duration_s\":1,"
                 "\"finished_at\":\"2026-01-02T03:04:0%d.000Z\"}", i, i % 2 ? "odd" : "even", i < 3 ? 5 : i);
        CU_ASSERT_EQUAL(req("POST", "/v1/finops/usage", hj, e2, &r), 201);
        th_resp_free(&r);
    }
    char path[600] = "/v1/finops/usage?project_id=proj-p&limit=2";
    int seen = 0, pages = 0;
    char ids[600] = "";
    for (; pages < 10; pages++) {
        CU_ASSERT_EQUAL_FATAL(req("GET", path, ga, NULL, &r), 200);
        json_t *u = json_object_get(r.json, "usage");
        t = json_object_get(r.json, "totals");
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(t, "executions")), 5);
        CU_ASSERT(json_is_true(json_object_get(t, "complete")));
        size_t i;
        json_t *x;
        json_array_foreach(u, i, x) {
            seen++;
            strncat(ids, json_string_value(json_object_get(x, "id")), sizeof ids - strlen(ids) - 2);
            strcat(ids, ",");
        }
        const char *next = json_string_value(json_object_get(r.json, "next"));
        if (!next) {
            th_resp_free(&r);
            break;
        }
        snprintf(path, sizeof path, "/v1/finops/usage?project_id=proj-p&limit=2&after=%s", next);
        th_resp_free(&r);
    }
    CU_ASSERT_EQUAL(seen, 5);
    /* by time, then id: three events share a second across a page boundary */
    CU_ASSERT_STRING_EQUAL(ids, "pg-3,pg-4,pg-0,pg-1,pg-2,");
    CU_ASSERT_EQUAL(req("GET", "/v1/finops/usage?project_id=proj-p&agent_id=odd", ga, NULL, &r), 200);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(r.json, "usage")), 2);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(req("GET", "/v1/finops/usage?after=nope", ga, NULL, &r), 422);
    CU_ASSERT(has_detail_path(&r, "/query/after"));
    th_resp_free(&r);
}

static void test_recording_ready(void)
{
    struct th_resp r;
    CU_ASSERT_EQUAL(req("GET", "/readyz", NULL, NULL, &r), 200);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r.json, "status")), "ready");
    th_resp_free(&r);
    /* the configured body cap (1 MiB here) */
    char u[256];
    url(u, sizeof(u), "/v1/manifests/apply");
    const char *h[] = {auth_a, "Content-Type: application/json", NULL};
    CU_ASSERT_EQUAL_FATAL(th_request("POST", u, h, NULL, 0, (1u << 20) + 1, &r), 0);
    CU_ASSERT_EQUAL(r.status, 413);
    th_resp_free(&r);
    CU_ASSERT_EQUAL_FATAL(th_request("POST", u, h, NULL, 0, (1u << 20), &r), 0);
    CU_ASSERT_EQUAL(r.status, 400); /* spaces only: not JSON, but under the cap */
    th_resp_free(&r);
}

/* Issue 11 item 1: the refusing double announces no egress capability, so
 * a granted egress is refused before it runs (was 202, then run offline),
 * and the profile says so. */
static void test_egress_unsupported(void)
{
    struct th_resp r;
    const char *h[] = {auth_a, "Content-Type: application/json", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h,
                        "{\"profile\":\"fake\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],"
                        "\"network\":{\"egress\":[\"pypi.org:443\"]}}", &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "egress_unsupported");
    CU_ASSERT(has_detail_path(&r, "/network/egress"));
    th_resp_free(&r);
    /* in French too */
    const char *hf[] = {auth_a, "Content-Type: application/json", "Accept-Language: fr", NULL};
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", hf,
                        "{\"profile\":\"fake\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],"
                        "\"network\":{\"egress\":[\"pypi.org:443\"]}}", &r), 422);
    const char *msg = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
    CU_ASSERT(msg && strstr(msg, "backend du profil"));
    th_resp_free(&r);
    /* without egress: accepted as before */
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h,
                        "{\"profile\":\"fake\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],"
                        "\"network\":{\"egress\":[]}}", &r), 202);
    th_resp_free(&r);
    CU_ASSERT_EQUAL_FATAL(req("GET", "/v1/sandbox/profiles", h, NULL, &r), 200);
    const json_t *p0 = json_array_get(json_object_get(r.json, "profiles"), 0);
    CU_ASSERT(json_is_false(json_object_get(p0, "egress")));
    th_resp_free(&r);
}

static int raw_connect(void)
{
    int port = atoi(strrchr(base_url, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void test_connection_limit(void)
{
    /* max_connections is 4 in this suite, with no bound on unauthenticated
     * ones (test_auth_flood checks that bound): four idle connections fill it */
    int fds[4];
    for (int i = 0; i < 4; i++)
        fds[i] = raw_connect();
    for (int i = 0; i < 4; i++)
        CU_ASSERT(fds[i] >= 0);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    struct th_resp r;
    th_timeout_ms = 1000;
    setenv("TH_QUIET", "1", 1);
    long st = req("GET", "/healthz", NULL, NULL, &r);
    unsetenv("TH_QUIET");
    CU_ASSERT(st != 200); /* not served while the limit is reached */
    th_resp_free(&r);
    /* one closes (it never sent a byte): within the 1 s sweep, accepting resumes */
    close(fds[0]);
    th_timeout_ms = 5000;
    CU_ASSERT_EQUAL(req("GET", "/healthz", NULL, NULL, &r), 200);
    th_resp_free(&r);
    th_timeout_ms = 0;
    for (int i = 1; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    nanosleep(&ts, NULL);
    CU_ASSERT_EQUAL(req("GET", "/metrics", NULL, NULL, &r), 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(r.body, "eai_http_connections"));
    th_resp_free(&r);
}

/* ------------------------------------------------------------ private data dir (issue 16, item 7) */

static unsigned mode_of(const char *dir, const char *name)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0xffffu;
}

/* `eaid serve` on data dir dd: must exit non-zero within 10 s; its
 * output (stdout+stderr) into out. */
static int serve_refused(const char *dd, char *out, size_t outlen)
{
    char log[600], listen[64], old_dd[400];
    snprintf(log, sizeof(log), "%s.log", dd);
    snprintf(old_dd, sizeof(old_dd), "%s", getenv("EAI_DATA_DIR") ? getenv("EAI_DATA_DIR") : "");
    char old_listen[64];
    snprintf(old_listen, sizeof(old_listen), "%s", getenv("EAI_LISTEN") ? getenv("EAI_LISTEN") : "");
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", th_free_port());
    setenv("EAI_DATA_DIR", dd, 1);
    setenv("EAI_LISTEN", listen, 1);
    pid_t pid = th_serve(eaid, NULL, log);
    setenv("EAI_DATA_DIR", old_dd, 1);
    setenv("EAI_LISTEN", old_listen, 1);
    int st = 0, done = 0;
    for (int i = 0; i < 200 && !done; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            done = 1;
        else
            usleep(50 * 1000);
    }
    if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    out[0] = '\0';
    int fd = open(log, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, out, outlen - 1);
        out[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    return done && WIFEXITED(st) && WEXITSTATUS(st) != 0 ? 0 : -1;
}

static void test_private_data_dir(void)
{
    /* the running server's data dir (made by the CLI, as the README does) */
    char dd[400];
    snprintf(dd, sizeof(dd), "%s/var", tmpdir);
    CU_ASSERT_EQUAL(mode_of(dd, "."), 0700);
    CHECK(mode_of(dd, "eai.db") == 0600, "eai.db mode %04o", mode_of(dd, "eai.db"));
    CHECK(mode_of(dd, "eai.db-wal") == 0600, "eai.db-wal mode %04o", mode_of(dd, "eai.db-wal"));
    CHECK(mode_of(dd, "pepper") == 0600, "pepper mode %04o", mode_of(dd, "pepper"));
    /* an existing 0755 data dir (mkdir -p) is refused, with the fix */
    char open_dd[400], out[8192];
    snprintf(open_dd, sizeof(open_dd), "%s/open", tmpdir);
    CU_ASSERT_EQUAL_FATAL(mkdir(open_dd, 0700), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(open_dd, 0755), 0);
    CU_ASSERT_EQUAL(serve_refused(open_dd, out, sizeof(out)), 0);
    CHECK(strstr(out, "data dir") && strstr(out, "0755") && strstr(out, "chmod 700"),
          "refusal names the data dir, its mode and the fix: %s", out);
    CU_ASSERT_EQUAL(mode_of(open_dd, "eai.db"), 0xffffu); /* nothing written there */
    /* group-writable too */
    CU_ASSERT_EQUAL_FATAL(chmod(open_dd, 0730), 0);
    CU_ASSERT_EQUAL(serve_refused(open_dd, out, sizeof(out)), 0);
    CHECK(strstr(out, "chmod 700") != NULL, "0730 refused: %s", out);
    /* a private dir with a world-readable pepper is refused too */
    CU_ASSERT_EQUAL_FATAL(chmod(open_dd, 0700), 0);
    char pp[500];
    snprintf(pp, sizeof(pp), "%s/pepper", open_dd);
    FILE *f = fopen(pp, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(chmod(pp, 0644), 0);
    CU_ASSERT_EQUAL(serve_refused(open_dd, out, sizeof(out)), 0);
    CHECK(strstr(out, "pepper") && strstr(out, "chmod 600"), "pepper 0644 refused: %s", out);
    /* the CLI refuses as well */
    CU_ASSERT_EQUAL_FATAL(chmod(open_dd, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(chmod(pp, 0600), 0);
    setenv("EAI_DATA_DIR", open_dd, 1);
    const char *args[] = {"tenants", "create", "tenant-private", NULL};
    CU_ASSERT_NOT_EQUAL(th_eaid(eaid, NULL, args), 0);
    setenv("EAI_DATA_DIR", dd, 1);
    /* fixed as the message says: it starts */
    CU_ASSERT_EQUAL_FATAL(chmod(open_dd, 0700), 0);
    setenv("EAI_DATA_DIR", open_dd, 1);
    CU_ASSERT_EQUAL(th_eaid(eaid, NULL, args), 0);
    setenv("EAI_DATA_DIR", dd, 1);
    CHECK(mode_of(open_dd, "eai.db") == 0600, "new eai.db mode %04o", mode_of(open_dd, "eai.db"));
}

/* ------------------------------------------------------------ suite: queue (issue 16, item 5) */

static const char *held_body = "{\"profile\":\"held\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"]}";

static long post_held(char id[128])
{
    struct th_resp r;
    const char *h[] = {auth_a, "Content-Type: application/json", NULL};
    long st = req("POST", "/v1/sandbox/executions", h, held_body, &r);
    const char *v = json_string_value(json_object_get(r.json, "id"));
    snprintf(id, 128, "%s", v ? v : "");
    th_resp_free(&r);
    return st;
}

static const char *status_of(const char *id, char out[32])
{
    char p[200];
    snprintf(p, sizeof(p), "/v1/sandbox/executions/%s", id);
    struct th_resp r;
    const char *h[] = {auth_a, NULL};
    out[0] = '\0';
    if (req("GET", p, h, NULL, &r) == 200)
        snprintf(out, 32, "%s", json_string_value(json_object_get(r.json, "status")) ?
                                    json_string_value(json_object_get(r.json, "status")) : "");
    th_resp_free(&r);
    return out;
}

static long cancel_with(const char *id, const char *request_id)
{
    char p[200], rid[160];
    snprintf(p, sizeof(p), "/v1/sandbox/executions/%s/cancel", id);
    snprintf(rid, sizeof(rid), "X-Request-Id: %s", request_id);
    const char *h[] = {auth_a, rid, NULL};
    struct th_resp r;
    long st = req("POST", p, h, NULL, &r);
    th_resp_free(&r);
    return st;
}

/* A cancel replayed with the same client-chosen X-Request-Id changes
 * nothing the second time: 409, and the queued count is not decremented
 * again, so max_queued_per_tenant still holds. */
static void test_replayed_cancel_keeps_queue_bound(void)
{
    char run[128], q1[128], q2[128], extra[128], st[32];
    CU_ASSERT_EQUAL_FATAL(post_held(run), 202);
    for (int i = 0; i < 100 && strcmp(status_of(run, st), "running") != 0; i++)
        usleep(50 * 1000);
    CU_ASSERT_STRING_EQUAL_FATAL(st, "running");
    CU_ASSERT_EQUAL(post_held(q1), 202);
    CU_ASSERT_EQUAL(post_held(q2), 202);
    CU_ASSERT_EQUAL(post_held(extra), 429); /* two queued: the cap */
    {   /* that refusal: Retry-After, and its detail in both languages */
        struct th_resp r;
        const char *h[] = {auth_a, "Content-Type: application/json", "Accept-Language: fr", NULL};
        CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h, held_body, &r), 429);
        CU_ASSERT_STRING_EQUAL(th_code(&r), "rate_limited");
        CU_ASSERT_STRING_EQUAL(th_header(&r, "Retry-After") ? th_header(&r, "Retry-After") : "", "5");
        json_t *d0 = json_array_get(json_object_get(json_object_get(r.json, "error"), "details"), 0);
        const char *dfr = json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "fr"));
        CU_ASSERT(dfr && strcmp(dfr, "trop d'exécutions en attente pour ce locataire") == 0);
        th_resp_free(&r);
    }
    /* cancel q1 once, then replay it twice with the same request id */
    CU_ASSERT_EQUAL(cancel_with(q1, "replay-1"), 202);
    CU_ASSERT_STRING_EQUAL(status_of(q1, st), "cancelled");
    CU_ASSERT_EQUAL(cancel_with(q1, "replay-1"), 409);
    CU_ASSERT_EQUAL(cancel_with(q1, "replay-1"), 409);
    CU_ASSERT_EQUAL(cancel_with(q1, "other-id"), 409);
    /* one queued (q2): one more fits, the next is refused */
    CU_ASSERT_EQUAL(post_held(extra), 202);
    CU_ASSERT_EQUAL(post_held(extra), 429);
    /* a running execution: 202; its replay 202 while the stop is under
     * way, 409 once it ended (the double ends it at once) */
    CU_ASSERT_EQUAL(cancel_with(run, "replay-2"), 202);
    long again = cancel_with(run, "replay-2");
    CU_ASSERT(again == 202 || again == 409);
    for (int i = 0; i < 100 && strcmp(status_of(run, st), "cancelled") != 0; i++)
        usleep(50 * 1000);
    CU_ASSERT_STRING_EQUAL(st, "cancelled");
    /* leave nothing held: the slot went to a queued one, which the double
     * would hold through the drain's 30 s (the suite's stop waits 10 s) */
    int left = -1;
    for (int i = 0; i < 100 && left != 0; i++) {
        struct th_resp r;
        const char *h[] = {auth_a, NULL};
        left = 0;
        if (req("GET", "/v1/sandbox/executions?limit=100", h, NULL, &r) == 200) {
            size_t k;
            const json_t *e;
            json_array_foreach(json_object_get(r.json, "items"), k, e) {
                const char *eid = json_string_value(json_object_get(e, "id"));
                const char *est = json_string_value(json_object_get(e, "status"));
                if (eid && est && (strcmp(est, "queued") == 0 || strcmp(est, "running") == 0)) {
                    left++;
                    char rid[64];
                    snprintf(rid, sizeof rid, "cleanup-%d-%zu", i, k);
                    cancel_with(eid, rid);
                }
            }
        } else {
            left = -1;
        }
        th_resp_free(&r);
        if (left)
            usleep(50 * 1000);
    }
    CU_ASSERT_EQUAL(left, 0);
}

/* ------------------------------------------------------------ suite: burst */

/* BURST_N submissions from BURST_CLIENTS threads (issue 15 item 5 without a
 * runtime): a 429 is retried; every 202 has a distinct id and ends terminal;
 * nothing is lost between admission, the queue and the scheduler. */
#define BURST_N 400
#define BURST_CLIENTS 32
static char burst_ids[BURST_N][64];
static int burst_next, burst_accepted, burst_refused, burst_failed;
static pthread_mutex_t burst_mu = PTHREAD_MUTEX_INITIALIZER;

static void *burst_client(void *arg)
{
    (void)arg;
    static const char body[] = "{\"profile\":\"fake\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"]}";
    const char *h[] = {auth_a, "Content-Type: application/json", NULL};
    for (;;) {
        pthread_mutex_lock(&burst_mu);
        int i = burst_next < BURST_N ? burst_next++ : -1;
        pthread_mutex_unlock(&burst_mu);
        if (i < 0)
            return NULL;
        for (int tries = 0;; tries++) {
            struct th_resp r;
            long st = req("POST", "/v1/sandbox/executions", h, body, &r);
            const char *id = json_string_value(json_object_get(r.json, "id"));
            pthread_mutex_lock(&burst_mu);
            if (st == 429 && tries < 600)
                burst_refused++;
            else if (st == 202 && id && strlen(id) < sizeof burst_ids[0])
                snprintf(burst_ids[burst_accepted++], sizeof burst_ids[0], "%s", id);
            else
                burst_failed++;
            pthread_mutex_unlock(&burst_mu);
            th_resp_free(&r);
            if (st != 429 || tries >= 600)
                break;
            usleep(50 * 1000); /* back-pressure: the queue drains meanwhile */
        }
    }
}

static int cmp_id(const void *a, const void *b) { return strcmp(a, b); }

static void test_burst_none_lost(void)
{
    struct th_resp r;
    CU_ASSERT_EQUAL_FATAL(req("GET", "/readyz", NULL, NULL, &r), 200);
    th_resp_free(&r);
    pthread_t th[BURST_CLIENTS];
    int started = 0;
    for (; started < BURST_CLIENTS; started++)
        if (pthread_create(&th[started], NULL, burst_client, NULL) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    CHECK(started == BURST_CLIENTS, "%d client threads", started);
    fprintf(stderr, "  burst: %d accepted, %d answers 429 (retried), %d failed\n", burst_accepted, burst_refused,
            burst_failed);
    CHECK(burst_failed == 0 && burst_accepted == BURST_N, "accepted %d of %d, %d failed", burst_accepted, BURST_N,
          burst_failed);
    CHECK(burst_refused > 0, "a queue of 50 and %d submissions: back-pressure expected", BURST_N);
    qsort(burst_ids, (size_t)burst_accepted, sizeof burst_ids[0], cmp_id);
    int dup = 0;
    for (int i = 1; i < burst_accepted; i++)
        dup += strcmp(burst_ids[i - 1], burst_ids[i]) == 0;
    CHECK(dup == 0, "%d duplicate ids", dup);
    /* every accepted one terminal (the double ends each as it starts) */
    int terminal = 0;
    char st[32] = "";
    for (int i = 0; i < burst_accepted; i++) {
        for (int k = 0; k < 200; k++) {
            status_of(burst_ids[i], st);
            if (*st && strcmp(st, "queued") != 0 && strcmp(st, "running") != 0)
                break;
            usleep(50 * 1000);
        }
        terminal += strcmp(st, "error") == 0;
    }
    CHECK(terminal == burst_accepted, "%d of %d terminal (error, from the double); last %s", terminal,
          burst_accepted, st);
}

static int reg(void)
{
    CU_pSuite a = CU_add_suite("no runtime", setup_noruntime, common_teardown);
    if (!a || !CU_add_test(a, "health and common headers", test_health_headers) ||
        !CU_add_test(a, "serve maps neither libcurl nor libarchive", test_serve_maps) ||
        !CU_add_test(a, "401 unauthenticated", test_401) ||
        !CU_add_test(a, "revoked key while running", test_revoke_while_running) ||
        !CU_add_test(a, "404 in French, 405", test_404_french) ||
        !CU_add_test(a, "routing", test_routing) ||
        !CU_add_test(a, "422 with paths, 400, 415", test_422_400) ||
        !CU_add_test(a, "413 payload too large (70 MB)", test_413) ||
        !CU_add_test(a, "profiles list gvisor-small", test_profiles) ||
        !CU_add_test(a, "503 sandbox_unavailable and /readyz", test_sandbox_unavailable) ||
        !CU_add_test(a, "keep-alive", test_keepalive) ||
        !CU_add_test(a, "HEAD then GET on one connection", test_head_keepalive) ||
        !CU_add_test(a, "private data dir and pepper", test_private_data_dir))
        return -1;
    CU_pSuite b = CU_add_suite("recording", setup_recording, common_teardown);
    if (!b || !CU_add_test(b, "ready, configured body cap", test_recording_ready) ||
        !CU_add_test(b, "idempotency and cross-tenant 404", test_idempotency_and_tenants) ||
        !CU_add_test(b, "manifests", test_manifests) || !CU_add_test(b, "contracts", test_contracts) ||
        !CU_add_test(b, "agent view: runs and agents", test_agent_view) ||
        !CU_add_test(b, "YAML alias bomb refused over HTTP", test_yaml_alias_bomb_http) ||
        !CU_add_test(b, "finops ledger", test_finops) ||
        !CU_add_test(b, "connection limit", test_connection_limit) ||
        !CU_add_test(b, "granted egress its backend cannot carry: 422", test_egress_unsupported))
        return -1;
    CU_pSuite c = CU_add_suite("queue", setup_queue, common_teardown);
    if (!c || !CU_add_test(c, "replayed cancel keeps the queue bound", test_replayed_cancel_keeps_queue_bound))
        return -1;
    CU_pSuite d = CU_add_suite("burst", setup_burst, common_teardown);
    if (!d || !CU_add_test(d, "400 submissions from 32 clients: none lost", test_burst_none_lost))
        return -1;
    return 0;
}

static int reg_all(void)
{
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return reg();
}

EAI_UNIT_MAIN(reg_all)
