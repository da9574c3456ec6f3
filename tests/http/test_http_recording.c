/*
 * HTTP integration test (test_http.c registers the suites): suite "recording": executions recorded on the refusing test
 * double: idempotency, cross-tenant reads, manifests, contracts, the agent
 * view, FinOps, connection limits, egress a backend cannot carry.
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

int http_reg_recording(CU_pSuite s)
{
    if (!s ||
        !CU_add_test(s, "ready, configured body cap", test_recording_ready) ||
        !CU_add_test(s, "idempotency and cross-tenant 404", test_idempotency_and_tenants) ||
        !CU_add_test(s, "manifests", test_manifests) ||
        !CU_add_test(s, "contracts", test_contracts) ||
        !CU_add_test(s, "agent view: runs and agents", test_agent_view) ||
        !CU_add_test(s, "YAML alias bomb refused over HTTP", test_yaml_alias_bomb_http) ||
        !CU_add_test(s, "finops ledger", test_finops) ||
        !CU_add_test(s, "connection limit", test_connection_limit) ||
        !CU_add_test(s, "granted egress its backend cannot carry: 422", test_egress_unsupported))
        return -1;
    return 0;
}
