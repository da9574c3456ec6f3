/*
 * HTTP integration test (test_http.c registers the suites): suite "no runtime": health, routing, auth, errors in both
 * languages, body limits, keep-alive, the private data dir.
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

#include "http_server.h"

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

int http_reg_noruntime(CU_pSuite s)
{
    if (!s ||
        !CU_add_test(s, "health and common headers", test_health_headers) ||
        !CU_add_test(s, "serve maps neither libcurl nor libarchive", test_serve_maps) ||
        !CU_add_test(s, "401 unauthenticated", test_401) ||
        !CU_add_test(s, "revoked key while running", test_revoke_while_running) ||
        !CU_add_test(s, "404 in French, 405", test_404_french) ||
        !CU_add_test(s, "routing", test_routing) ||
        !CU_add_test(s, "422 with paths, 400, 415", test_422_400) ||
        !CU_add_test(s, "413 payload too large (70 MB)", test_413) ||
        !CU_add_test(s, "profiles list gvisor-small", test_profiles) ||
        !CU_add_test(s, "503 sandbox_unavailable and /readyz", test_sandbox_unavailable) ||
        !CU_add_test(s, "keep-alive", test_keepalive) ||
        !CU_add_test(s, "HEAD then GET on one connection", test_head_keepalive) ||
        !CU_add_test(s, "private data dir and pepper", test_private_data_dir))
        return -1;
    return 0;
}
