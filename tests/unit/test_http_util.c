/* HTTP helpers: Accept-Language, request ids, route patterns. */
#include <string.h>

#include <stdio.h>

#include "http/http_head.h"
#include "http/http_util.h"
#include "http/routes.h"
#include "unit_main.h"

static void test_lang(void)
{
    struct { const char *h; const char *want; } cases[] = {
        {NULL, "en"}, {"", "en"}, {"fr", "fr"}, {"fr-CA", "fr"}, {"FR-ca", "fr"}, {"en-US", "en"},
        {"fr-CA;q=0.9, en;q=0.8", "fr"}, {"en;q=0.8, fr-CA;q=0.9", "fr"}, {"fr;q=0, en;q=0.1", "en"},
        {"fr;q=0", "en"}, {"de, fr;q=0.5", "fr"}, {"de", "en"}, {"*", "en"}, {"fr, en", "fr"},
        {"en, fr", "en"}, {"fr;q=0.5, en;q=0.5", "fr"}, {"es;q=1, fr;q=0.001", "fr"},
        {"fr;q=1.0", "fr"}, {"fr;q=abc, en;q=0.2", "en"}, {"fr ; q=0.7 , en ; q=0.6", "fr"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = eai_http_negotiate_lang(cases[i].h);
        if (strcmp(got, cases[i].want) != 0)
            fprintf(stderr, "Accept-Language '%s': got %s, want %s\n", cases[i].h ? cases[i].h : "(null)", got,
                    cases[i].want);
        CU_ASSERT_STRING_EQUAL(got, cases[i].want);
    }
}

static void test_request_id(void)
{
    CU_ASSERT(eai_http_request_id_ok("abc-123_X.y:z"));
    CU_ASSERT(!eai_http_request_id_ok(""));
    CU_ASSERT(!eai_http_request_id_ok(NULL));
    CU_ASSERT(!eai_http_request_id_ok("a b"));
    CU_ASSERT(!eai_http_request_id_ok("a\r\nX-Evil: 1"));
    char longid[200];
    memset(longid, 'a', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    CU_ASSERT(!eai_http_request_id_ok(longid));
    longid[128] = '\0';
    CU_ASSERT(eai_http_request_id_ok(longid));
}

static void test_routes(void)
{
    struct eai_route_params p;
    CU_ASSERT_EQUAL(eai_route_match("/healthz", "/healthz", &p), 1);
    eai_route_params_clear(&p);
    CU_ASSERT_EQUAL(eai_route_match("/healthz", "/healthz/", &p), 0);
    CU_ASSERT_EQUAL(eai_route_match("/v1/sandbox/executions/{id}", "/v1/sandbox/executions/sbx_1", &p), 1);
    CU_ASSERT_STRING_EQUAL(p.value[0], "sbx_1");
    CU_ASSERT_STRING_EQUAL(p.name[0], "id");
    eai_route_params_clear(&p);
    CU_ASSERT_EQUAL(eai_route_match("/v1/sandbox/executions/{id}", "/v1/sandbox/executions/", &p), 0);
    CU_ASSERT_EQUAL(eai_route_match("/v1/sandbox/executions/{id}", "/v1/sandbox/executions/a/b", &p), 0);
    CU_ASSERT_EQUAL(eai_route_match("/v1/sandbox/executions/{id}/files/{*path}",
                                    "/v1/sandbox/executions/sbx_2/files/tmp/outputs/r%20s.json", &p), 1);
    CU_ASSERT_EQUAL(p.n, 2);
    CU_ASSERT_STRING_EQUAL(p.value[0], "sbx_2");
    CU_ASSERT_STRING_EQUAL(p.value[1], "tmp/outputs/r s.json");
    eai_route_params_clear(&p);
    CU_ASSERT_EQUAL(eai_route_match("/v1/x/{*path}", "/v1/x/", &p), 0);
    /* an encoded slash stays inside its segment */
    CU_ASSERT_EQUAL(eai_route_match("/v1/m/{kind}/{name}", "/v1/m/tool/a%2Fb", &p), 1);
    CU_ASSERT_STRING_EQUAL(p.value[1], "a/b");
    eai_route_params_clear(&p);
    CU_ASSERT_EQUAL(eai_route_match("/v1/m/{kind}/{name}", "/v1/m/tool/a%zz", &p), -1);
    CU_ASSERT_EQUAL(eai_route_match("/v1/m/{kind}/{name}", "/v1/m/tool/a%00", &p), -1);
    CU_ASSERT_EQUAL(eai_route_match("/v1/m/{kind}/{name}", "/v1/m/tool/a%4", &p), -1);
    CU_ASSERT_EQUAL(eai_route_match("/v1/m/{kind}/{name}", "/v1/m/tool/a%", &p), -1);
    CU_ASSERT_EQUAL(eai_route_match("/v1/m/{kind}/{name}", "/v1/m/tool/a%41%", &p), -1);
    /* escapes first, last, one after another, either case, between runs */
    CU_ASSERT_EQUAL(eai_route_match("/v1/m/{kind}/{name}", "/v1/m/%41b%63%64/%2fx%2Fyy%7e", &p), 1);
    CU_ASSERT_STRING_EQUAL(p.value[0], "Abcd");
    CU_ASSERT_STRING_EQUAL(p.value[1], "/x/yy~");
    eai_route_params_clear(&p);
}

static void test_table(void)
{
    /* every route of API.md is in the table, each method+pattern once */
    const char *want[][2] = {
        {"POST", "/v1/sandbox/executions"}, {"GET", "/v1/sandbox/executions/{id}"},
        {"GET", "/v1/sandbox/executions/{id}/files/{*path}"}, {"POST", "/v1/sandbox/executions/{id}/cancel"},
        {"GET", "/v1/sandbox/executions"}, {"GET", "/v1/sandbox/executions/{id}/events"},
        {"GET", "/v1/sandbox/profiles"}, {"POST", "/v1/contracts/{name}/validate"},
        {"POST", "/v1/manifests/apply"}, {"GET", "/v1/manifests/{kind}/{name}"},
        {"DELETE", "/v1/manifests/{kind}/{name}"}, {"GET", "/v1/finops/usage"}, {"POST", "/v1/finops/usage"},
        {"GET", "/metrics"}, {"GET", "/healthz"}, {"GET", "/readyz"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        int found = 0;
        for (size_t k = 0; k < eai_nroutes; k++)
            if (strcmp(eai_routes[k].method, want[i][0]) == 0 && strcmp(eai_routes[k].pattern, want[i][1]) == 0) {
                found++;
                CU_ASSERT_PTR_NOT_NULL(eai_routes[k].fn);
                CU_ASSERT_EQUAL(eai_routes[k].auth, strncmp(want[i][1], "/v1/", 4) == 0 ? EAI_AUTH_TENANT : EAI_AUTH_NONE);
            }
        CU_ASSERT_EQUAL(found, 1);
    }
}

static void test_kind_slug(void)
{
    char *s = eai_manifest_kind_slug("Tool");
    CU_ASSERT_STRING_EQUAL(s, "tool");
    free(s);
    s = eai_manifest_kind_slug("tool");
    CU_ASSERT_STRING_EQUAL(s, "tool");
    free(s);
    s = eai_manifest_kind_slug("ToolManifest");
    CU_ASSERT_STRING_EQUAL(s, "tool-manifest");
    free(s);
    CU_ASSERT_PTR_NULL(eai_manifest_kind_slug("../x"));
    CU_ASSERT_PTR_NULL(eai_manifest_kind_slug(""));
}

/* The head check (http/http_head.c) tests sixteen (or eight) bytes at a
 * time: a bad byte at any offset of a value or a request target of any
 * length, at every alignment, is still found, and a second one after a
 * tab; tab and bytes >= 0x80 in a value pass. */
static enum eai_code head_with(const char *target, const char *value)
{
    char h[512];
    int n = snprintf(h, sizeof h, "GET %s HTTP/1.1\r\nHost: x\r\nX-A: %s\r\n\r\n", target, value);
    return eai_http_head_check(h, (size_t)n, 1, 8192);
}

static void test_head_check(void)
{
    char v[80], t[80];
    CU_ASSERT_EQUAL(head_with("/a", "b"), EAI_OK);
    for (size_t len = 1; len < 72; len++) {
        memset(v, 'a', len);
        v[len] = '\0';
        CU_ASSERT_EQUAL(head_with("/", v), EAI_OK);
        t[0] = '/';
        memset(t + 1, 'p', len);
        t[len + 1] = '\0';
        CU_ASSERT_EQUAL(head_with(t, "x"), EAI_OK);
        for (size_t at = 0; at < len; at++) {
            static const unsigned char bad_v[] = {0x01, 0x1f, 0x7f, 0x0b, 0x0d};
            for (size_t b = 0; b < sizeof bad_v; b++) {
                v[at] = (char)bad_v[b];
                if (head_with("/", v) != EAI_E_BAD_REQUEST)
                    fprintf(stderr, "value byte 0x%02x at %zu of %zu passed\n", bad_v[b], at, len);
                CU_ASSERT_EQUAL(head_with("/", v), EAI_E_BAD_REQUEST);
            }
            v[at] = '\t';
            CU_ASSERT_EQUAL(head_with("/", v), EAI_OK);
            for (size_t after = at + 1; after < len; after += 5) {
                v[after] = 0x1f;
                CU_ASSERT_EQUAL(head_with("/", v), EAI_E_BAD_REQUEST);
                v[after] = '\t';
                CU_ASSERT_EQUAL(head_with("/", v), EAI_OK);
                v[after] = 'a';
            }
            v[at] = (char)0x80;
            CU_ASSERT_EQUAL(head_with("/", v), EAI_OK);
            v[at] = (char)0xff;
            CU_ASSERT_EQUAL(head_with("/", v), EAI_OK);
            v[at] = 'a';
            static const unsigned char bad_t[] = {0x01, 0x1f, 0x7f, 0x09, 0x0d};
            for (size_t b = 0; b < sizeof bad_t; b++) {
                t[1 + at] = (char)bad_t[b];
                if (head_with(t, "x") != EAI_E_BAD_REQUEST)
                    fprintf(stderr, "target byte 0x%02x at %zu of %zu passed\n", bad_t[b], at, len);
                CU_ASSERT_EQUAL(head_with(t, "x"), EAI_E_BAD_REQUEST);
            }
            t[1 + at] = ' '; /* a space ends the target: the rest is not "HTTP/1.1" */
            CU_ASSERT_EQUAL(head_with(t, "x"), EAI_E_BAD_REQUEST);
            t[1 + at] = (char)0x80;
            CU_ASSERT_EQUAL(head_with(t, "x"), EAI_OK);
            t[1 + at] = 'p';
        }
    }
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("http_util", NULL, NULL);
    if (!s || !CU_add_test(s, "Accept-Language", test_lang) || !CU_add_test(s, "request ids", test_request_id) ||
        !CU_add_test(s, "route patterns", test_routes) || !CU_add_test(s, "route table", test_table) ||
        !CU_add_test(s, "manifest kinds", test_kind_slug) || !CU_add_test(s, "head check", test_head_check))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
