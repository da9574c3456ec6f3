/* Completion callbacks, the pure part (core/obs/callback.c): URL parsing,
 * the admission policy against callbacks.allow and the address classes, the
 * Stripe-style signature, the backoff, and the view that never shows the
 * secret. */
#include <stdlib.h>
#include <string.h>

#include "obs/callback.h"
#include "unit_main.h"

static void test_parse(void)
{
    char host[256];
    uint16_t port = 0;
    int https = -1;
    CU_ASSERT_EQUAL(eai_cb_url_parse("https://Hooks.Example.com/x?y#z", host, sizeof host, &port, &https), 0);
    CU_ASSERT_STRING_EQUAL(host, "hooks.example.com");
    CU_ASSERT_EQUAL(port, 443);
    CU_ASSERT_EQUAL(https, 1);
    CU_ASSERT_EQUAL(eai_cb_url_parse("http://127.0.0.1:9000", host, sizeof host, &port, &https), 0);
    CU_ASSERT_EQUAL(port, 9000);
    CU_ASSERT_EQUAL(eai_cb_url_parse("http://[::1]:8080/h", host, sizeof host, &port, &https), 0);
    CU_ASSERT_STRING_EQUAL(host, "::1");
    const char *bad[] = {"ftp://x/", "http://", "http://u:p@host/", "http://host:0/", "http://host:65536/",
                         "http://ho st/", "http://host:/", "http://[::1/", NULL};
    for (const char *const *b = bad; *b; b++)
        CU_ASSERT_EQUAL(eai_cb_url_parse(*b, host, sizeof host, &port, &https), -1);
}

static void test_policy(void)
{
    char why[256];
    /* no allow list: public names and addresses only */
    CU_ASSERT_EQUAL(eai_cb_url_check(NULL, "https://hooks.example.com/x", why, sizeof why), 0);
    CU_ASSERT_EQUAL(eai_cb_url_check(NULL, "http://198.51.100.7/x", why, sizeof why), 0);
    CU_ASSERT_EQUAL(eai_cb_url_check(NULL, "http://127.0.0.1:9000/x", why, sizeof why), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "loopback"));
    CU_ASSERT_EQUAL(eai_cb_url_check(NULL, "http://169.254.169.254/latest", why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_cb_url_check(NULL, "http://10.0.0.1/", why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_cb_url_check(NULL, "http://[::1]/", why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_cb_url_check(NULL, "http://[::ffff:127.0.0.1]/", why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_cb_url_check(NULL, "http://localhost:80/", why, sizeof why), -1);
    /* an allow list: names must match; a refused class needs an address entry */
    json_t *allow = json_pack("[s, s, s]", "127.0.0.1:9000", "*.example.com:443", "10.1.0.0/16:8080");
    struct eai_cb_policy p;
    CU_ASSERT_EQUAL_FATAL(eai_cb_policy_init(&p, allow, NULL), 0);
    CU_ASSERT_EQUAL(eai_cb_url_check(&p, "http://127.0.0.1:9000/h", why, sizeof why), 0);
    CU_ASSERT_EQUAL(eai_cb_url_check(&p, "http://127.0.0.1:9001/h", why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_cb_url_check(&p, "https://a.example.com/h", why, sizeof why), 0);
    CU_ASSERT_EQUAL(eai_cb_url_check(&p, "https://example.com/h", why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_cb_url_check(&p, "http://10.1.2.3:8080/", why, sizeof why), 0);
    CU_ASSERT_EQUAL(eai_cb_url_check(&p, "http://198.51.100.7/", why, sizeof why), -1);
    /* a name never opens a refused class at delivery; a listed address does */
    struct eai_ip ip;
    eai_ip_parse("127.0.0.1", &ip);
    CU_ASSERT_EQUAL(eai_cb_addr_ok(&p, &ip, 443, 1), 0);
    CU_ASSERT_EQUAL(eai_cb_addr_ok(&p, &ip, 9000, 0), 1);
    eai_ip_parse("93.184.216.34", &ip);
    CU_ASSERT_EQUAL(eai_cb_addr_ok(&p, &ip, 443, 1), 1);
    CU_ASSERT_EQUAL(eai_cb_addr_ok(&p, &ip, 443, 0), 0);
    eai_cb_policy_free(&p);
    json_decref(allow);
    size_t bad = 99;
    allow = json_pack("[s, s]", "ok.example:443", "nohost");
    CU_ASSERT_EQUAL(eai_cb_policy_init(&p, allow, &bad), -1);
    CU_ASSERT_EQUAL(bad, 1);
    json_decref(allow);
}

static void test_sign(void)
{
    char sig[EAI_CALLBACK_SIG_MAX];
    /* HMAC-SHA-256("whsec", "1700000000.{}"), computed independently:
     * python3 -c 'import hmac,hashlib;print(hmac.new(b"whsec",b"1700000000.{}",hashlib.sha256).hexdigest())' */
    eai_cb_sign("whsec", 1700000000, "{}", 2, sig);
    CU_ASSERT_STRING_EQUAL(sig, "t=1700000000,v1=7d44587dddbaf4c7f70fef20f48cd594834ffea1641e3ac227b84408298738af");
    CU_ASSERT_EQUAL(eai_cb_backoff_ms(1, 300000), 1000);
    CU_ASSERT_EQUAL(eai_cb_backoff_ms(3, 300000), 4000);
    CU_ASSERT_EQUAL(eai_cb_backoff_ms(30, 300000), 300000);
}

static void test_event_view(void)
{
    json_t *rec = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", "sbx_1", "tenant_id", "t1", "callback", "url",
                            "https://h.example/x", "secret", "0123456789abcdef");
    json_t *term = json_pack("{s:s, s:i, s:s}", "status", "succeeded", "exit_code", 0, "stdout", "big");
    json_t *ev = eai_cb_event(rec, term);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    CU_ASSERT(eai_cb_is_callback(ev));
    const json_t *x = json_object_get(json_object_get(ev, "body"), "execution");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(x, "status")), "succeeded");
    CU_ASSERT_PTR_NULL(json_object_get(x, "stdout"));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(ev, "id")),
                           json_string_value(json_object_get(json_object_get(ev, "body"), "id")));
    json_t *v = eai_cb_view(rec, "{\"attempts\":3,\"last_status\":200,\"delivered_at\":\"2026-12-02T00:00:00Z\"}");
    char *d = json_dumps(v, 0);
    CU_ASSERT(d && !strstr(d, "0123456789abcdef") && strstr(d, "\"attempts\": 3"));
    free(d);
    json_decref(v);
    json_decref(ev);
    json_decref(term);
    json_decref(rec);
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("callback", NULL, NULL);
    if (!s || !CU_add_test(s, "URL parsing", test_parse) || !CU_add_test(s, "policy", test_policy) ||
        !CU_add_test(s, "signature and backoff", test_sign) || !CU_add_test(s, "event and view", test_event_view))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
