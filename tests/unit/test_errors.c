/* The one error table: every code has a name, a status and both languages;
 * every code API.md lists exists with the right status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "http/http_util.h"
#include "unit_main.h"
#include "base/util.h"
#include "plugin/host.h"

static void test_every_code_complete(void)
{
    for (int i = 1; i < EAI_CODE_MAX; i++) {
        const struct eai_code_info *ci = eai_code_info((enum eai_code)i);
        CU_ASSERT_EQUAL(ci->code, (enum eai_code)i);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ci->name);
        CU_ASSERT(strlen(ci->name) > 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ci->en);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ci->fr);
        CU_ASSERT(strlen(ci->en) > 0);
        CU_ASSERT(strlen(ci->fr) > 0);
        CU_ASSERT(eai_utf8_valid(ci->fr, strlen(ci->fr)));
        CU_ASSERT(strcmp(ci->en, ci->fr) != 0); /* a real translation, not a copy */
        CU_ASSERT(ci->http_status >= 400 && ci->http_status <= 599);
        /* names are unique and map back */
        CU_ASSERT_EQUAL(eai_code_from_name(ci->name), (enum eai_code)i);
    }
    CU_ASSERT_EQUAL(eai_code_from_name("no_such_code"), EAI_CODE_MAX);
}

static void test_api_codes(void)
{
    struct { const char *name; int status; } api[] = {
        {"invalid_json", 400}, {"validation_failed", 422}, {"limit_exceeded", 422},
        {"egress_not_allowed", 422}, {"unknown_profile", 422}, {"unknown_image", 422},
        {"unauthenticated", 401}, {"forbidden", 403}, {"not_found", 404}, {"already_finished", 409},
        {"idempotency_conflict", 409}, {"payload_too_large", 413}, {"unsupported_media_type", 415},
        {"rate_limited", 429}, {"sandbox_unavailable", 503}, {"storage_unavailable", 503}, {"internal", 500},
    };
    for (size_t i = 0; i < sizeof(api) / sizeof(api[0]); i++) {
        enum eai_code c = eai_code_from_name(api[i].name);
        CU_ASSERT_NOT_EQUAL_FATAL(c, EAI_CODE_MAX);
        CU_ASSERT_EQUAL(eai_code_http_status(c), api[i].status);
    }
    CU_ASSERT_STRING_EQUAL(eai_code_message(EAI_E_NOT_FOUND, "fr"), "Exécution introuvable");
    CU_ASSERT_STRING_EQUAL(eai_code_message(EAI_E_NOT_FOUND, "en"), "Execution not found");
    CU_ASSERT_STRING_EQUAL(eai_code_message(EAI_E_NOT_FOUND, "de"), "Execution not found");
}

static void test_envelope(void)
{
    json_t *d = json_pack("[{s:s, s:s}]", "path", "/limits/memory", "message", "bad");
    json_t *e = eai_http_error_envelope(EAI_E_NOT_FOUND, "fr", "rid-1", d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    json_t *err = json_object_get(e, "error");
    CU_ASSERT_EQUAL(json_object_size(e), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(err, "code")), "not_found");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(err, "message")), "Exécution introuvable");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(err, "message_i18n"), "en")),
                           "Execution not found");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(err, "request_id")), "rid-1");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(err, "details")), 1);
    json_decref(e);
    e = eai_http_error_envelope(EAI_E_INTERNAL, "en", "x", NULL);
    CU_ASSERT(json_is_array(json_object_get(json_object_get(e, "error"), "details")));
    json_decref(e);
}

/* `eaid errors --markdown` prints the page generated with the table, and that
 * page is the committed docs/errors.md (the errcodes_drift ctest checks the
 * list against the committed files; this checks the built table). */
static void test_markdown_is_committed_page(void)
{
    size_t len = 0;
    char *doc = eai_read_file(EAI_SOURCE_DIR "/docs/errors.md", 1 << 20, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    CU_ASSERT_EQUAL(len, strlen(eai_errors_markdown));
    CU_ASSERT_STRING_EQUAL(doc, eai_errors_markdown);
    free(doc);
    /* every code of the table has its row */
    for (int i = 1; i < EAI_CODE_MAX; i++) {
        char row[256];
        snprintf(row, sizeof row, "| `%s` | %d |", eai_code_name((enum eai_code)i), eai_code_http_status((enum eai_code)i));
        CU_ASSERT_PTR_NOT_NULL(strstr(eai_errors_markdown, row));
    }
}

/* eai_error_set: one statement fills *err and returns -1; the first error wins. */
static int fails_with(struct eai_error **err, const char *what)
{
    return eai_error_set(err, EAI_E_NOT_FOUND, "no such thing: %s", what);
}

static void test_error_set(void)
{
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(fails_with(&e, "x1"), -1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->code, EAI_E_NOT_FOUND);
    CU_ASSERT_EQUAL(e->errno_cause, 0);
    CU_ASSERT_STRING_EQUAL(e->message, "no such thing: x1");
    CU_ASSERT_PTR_NULL(e->details);
    struct eai_error *first = e;
    CU_ASSERT_EQUAL(eai_error_set(&e, EAI_E_INTERNAL, "second"), -1);
    CU_ASSERT_PTR_EQUAL(e, first); /* the root cause is kept, the second is not leaked (ASan) */
    CU_ASSERT_STRING_EQUAL(e->message, "no such thing: x1");
    eai_error_free(e);
    CU_ASSERT_EQUAL(fails_with(NULL, "x2"), -1); /* caller not interested */
}

/* The plugins' header-only helper goes through host->error_new, also for a
 * message longer than its stack buffer. */
static void test_host_error_set(void)
{
    struct eai_host *h = eai_host_new(NULL, "/tmp");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(eai_host_error_set(h, &e, EAI_E_SANDBOX_FAILED, "k8s: %s %d", "pod", 7), -1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->code, EAI_E_SANDBOX_FAILED);
    CU_ASSERT_STRING_EQUAL(e->message, "k8s: pod 7");
    CU_ASSERT_EQUAL(eai_host_error_set(h, &e, EAI_E_INTERNAL, "later"), -1);
    CU_ASSERT_STRING_EQUAL(e->message, "k8s: pod 7");
    h->error_free(e);
    e = NULL;
    char big[5000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CU_ASSERT_EQUAL(eai_host_error_set(h, &e, EAI_E_INTERNAL, "<%s>", big), -1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(strlen(e->message), sizeof big + 1);
    CU_ASSERT_EQUAL(e->message[0], '<');
    CU_ASSERT_EQUAL(e->message[sizeof big], '>');
    h->error_free(e);
    CU_ASSERT_EQUAL(eai_host_error_set(h, NULL, EAI_E_INTERNAL, "x"), -1);
    eai_host_free(h);
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("errors", NULL, NULL);
    if (!s || !CU_add_test(s, "every code has both languages", test_every_code_complete) ||
        !CU_add_test(s, "API.md codes and statuses", test_api_codes) ||
        !CU_add_test(s, "envelope", test_envelope) ||
        !CU_add_test(s, "eaid errors --markdown is docs/errors.md", test_markdown_is_committed_page) ||
        !CU_add_test(s, "eai_error_set", test_error_set) ||
        !CU_add_test(s, "eai_host_error_set (plugins)", test_host_error_set))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
