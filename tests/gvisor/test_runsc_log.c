/*
 * test_gvisor_runsc_log: runsc's --log read as a stream of JSON values and
 * runsc's copies stripped from the end of stderr (plugins/gvisor/gvisor_log.c,
 * compiled in; docs/gvisor.md "runsc's own words").  Issue 37: with a gofer
 * killed during create, runsc's log held two error objects on one line, the
 * line-by-line reader found none, and the run was reported as the program
 * exiting 128 with runsc's text in its stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../unit/unit_main.h"
#include "gvisor_log.h"

/* What runsc 0.0~20221219 wrote when runsc-gofer was SIGKILLed as soon as
 * it appeared (reproduced on this machine, byte for byte but the times). */
#define GOFER_MSG "Error reading mounts file: error unmarshaling mounts: unexpected end of JSON input\nJSON bytes:\n"
#define RUN_MSG "running container: creating container: cannot create sandbox: cannot read client sync file: " \
                "waiting for sandbox to start: EOF"
static const char ISSUE_LOG[] =
    "{\"msg\":\"Error reading mounts file: error unmarshaling mounts: unexpected end of JSON input\\nJSON "
    "bytes:\\n\",\"level\":\"error\",\"time\":\"2026-12-05T23:53:14.238058869Z\"}"
    "{\"msg\":\"running container: creating container: cannot create sandbox: cannot read client sync file: "
    "waiting for sandbox to start: EOF\",\"level\":\"error\",\"time\":\"2026-12-05T23:53:14.249649545Z\"}";

static json_t *errs_of(const char *text)
{
    json_t *e = gv_log_errors(text, strlen(text));
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    return e;
}

/* errs is exactly the n strings of want, in order. */
static int errs_are(const json_t *errs, const char *const *want, size_t n)
{
    if (json_array_size(errs) != n) {
        fprintf(stderr, "  %zu errors, want %zu\n", json_array_size(errs), n);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const char *got = json_string_value(json_array_get(errs, i));
        if (!got || strcmp(got, want[i]) != 0) {
            fprintf(stderr, "  error %zu: '%s', want '%s'\n", i, got ? got : "(null)", want[i]);
            return 0;
        }
    }
    return 1;
}

#define ERRS_ARE(text, ...)                                                        \
    do {                                                                           \
        static const char *const w_[] = {__VA_ARGS__};                             \
        json_t *e_ = errs_of(text);                                                \
        CU_ASSERT(errs_are(e_, w_, sizeof(w_) / sizeof(w_[0])));                   \
        json_decref(e_);                                                           \
    } while (0)

#define NO_ERRS(text)                                                              \
    do {                                                                           \
        json_t *e_ = errs_of(text);                                                \
        CU_ASSERT_EQUAL(json_array_size(e_), 0);                                   \
        json_decref(e_);                                                           \
    } while (0)

/* ------------------------------------------------------------ the reader */

static void test_issue_log(void)
{
    ERRS_ARE(ISSUE_LOG, GOFER_MSG, RUN_MSG);
}

static void test_separators(void)
{
    const char *a = "{\"msg\":\"a\",\"level\":\"error\"}", *b = "{\"level\":\"error\",\"msg\":\"b\"}";
    const char *seps[] = {"", "\n", "\r\n", " ", "\n\n\t ", "}", "]", "garbage line\n", "{", "{\"x\":"};
    for (size_t i = 0; i < sizeof(seps) / sizeof(seps[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text), "%s%s%s\n", a, seps[i], b);
        ERRS_ARE(text, "a", "b");
    }
}

static void test_one_object_across_lines(void)
{
    ERRS_ARE("{\n  \"msg\": \"split\",\n  \"level\":\n \"error\",\n  \"time\": \"t\"\n}\n", "split");
    ERRS_ARE("{\"msg\":\"x\",\n\"level\":\"error\"}{\n\"msg\":\"y\",\"level\"\n:\"error\"}", "x", "y");
}

static void test_truncated_last(void)
{
    /* every prefix of the issue's log: the complete objects, nothing else */
    size_t len = strlen(ISSUE_LOG), first_end = strchr(ISSUE_LOG, '}') - ISSUE_LOG + 1;
    for (size_t k = 0; k <= len; k++) {
        json_t *e = gv_log_errors(ISSUE_LOG, k);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        size_t want = k == len ? 2 : k >= first_end ? 1 : 0;
        if (json_array_size(e) != want) {
            fprintf(stderr, "  prefix %zu: %zu errors, want %zu\n", k, json_array_size(e), want);
            CU_FAIL("prefix");
        } else if (want) {
            CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(e, 0)), GOFER_MSG);
        }
        json_decref(e);
    }
}

static void test_tail_begins_inside(void)
{
    /* the last N bytes: every suffix of the issue's log holds the second
     * error once it holds its '{', and never a made-up one */
    size_t len = strlen(ISSUE_LOG);
    size_t second = strstr(ISSUE_LOG, "}{") - ISSUE_LOG + 1;
    for (size_t k = 0; k <= len; k++) {
        json_t *e = gv_log_errors(ISSUE_LOG + k, len - k);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        size_t want = k == 0 ? 2 : k <= second ? 1 : 0;
        if (json_array_size(e) != want ||
            (want && strcmp(json_string_value(json_array_get(e, want - 1)), RUN_MSG) != 0)) {
            fprintf(stderr, "  suffix from %zu: %zu errors, want %zu\n", k, json_array_size(e), want);
            CU_FAIL("suffix");
        }
        json_decref(e);
    }
}

static void test_json_inside_a_message(void)
{
    /* a message that quotes JSON (escaped in the log): wherever the tail
     * begins, the quoted object is never taken for one of runsc's */
    const char *log = "{\"msg\":\"bad arg {\\\"msg\\\":\\\"fake\\\",\\\"level\\\":\\\"error\\\"} {}\","
                      "\"level\":\"error\"}{\"msg\":\"real\",\"level\":\"error\"}";
    size_t len = strlen(log), real = strstr(log, "}{\"msg\":\"real") - log + 1;
    for (size_t k = 0; k <= real; k++) {
        json_t *e = gv_log_errors(log + k, len - k);
        CU_ASSERT_PTR_NOT_NULL_FATAL(e);
        for (size_t i = 0; i < json_array_size(e); i++)
            CU_ASSERT(strcmp(json_string_value(json_array_get(e, i)), "fake") != 0);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(e, json_array_size(e) - 1)), "real");
        json_decref(e);
    }
}

static void test_not_errors(void)
{
    NO_ERRS("");
    NO_ERRS("no json at all\n");
    NO_ERRS("{\"msg\":\"w\",\"level\":\"warning\"}{\"msg\":\"i\",\"level\":\"info\"}");
    NO_ERRS("{\"level\":\"error\"}{\"msg\":3,\"level\":\"error\"}{\"msg\":\"x\",\"level\":\"ERROR\"}");
    /* runsc writes no arrays: an object is read wherever it begins */
    ERRS_ARE("[{\"msg\":\"in an array\",\"level\":\"error\"}", "in an array");
    ERRS_ARE("{\"msg\":\"w\",\"level\":\"warning\"}{\"msg\":\"e\",\"level\":\"error\"}", "e");
    ERRS_ARE("{\"a\":{\"msg\":\"nested\",\"level\":\"error\"}}{\"msg\":\"top\",\"level\":\"error\"}", "top");
}

static void test_nul_and_invalid_utf8(void)
{
    const char text[] = "{\"msg\":\"a\",\"level\":\"error\"}\0garbage\xff{\"msg\":\"\xc3\",\"level\":\"error\"}"
                        "{\"msg\":\"b\",\"level\":\"error\"}";
    json_t *e = gv_log_errors(text, sizeof(text) - 1);
    static const char *const want[] = {"a", "b"};
    CU_ASSERT(errs_are(e, want, 2));
    json_decref(e);
}

static void test_many_errors_keep_the_last(void)
{
    char *text = malloc(200 * 48);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    size_t len = 0;
    for (int i = 0; i < 200; i++)
        len += (size_t)sprintf(text + len, "{\"msg\":\"e%d\",\"level\":\"error\"}", i);
    json_t *e = gv_log_errors(text, len);
    CU_ASSERT_EQUAL(json_array_size(e), GV_LOG_ERRORS_MAX);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(e, 0)), "e136");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(e, GV_LOG_ERRORS_MAX - 1)), "e199");
    json_decref(e);
    free(text);
}

static void test_bounded_on_hostile_text(void)
{
    /* 8 KiB of nested objects never closed: every '{' starts a parse that
     * reads to the end.  The scan budget bounds the work. */
    char text[8192 + 64];
    size_t len = 0;
    while (len + 5 < 8192)
        len += (size_t)sprintf(text + len, "{\"\":");
    len += (size_t)sprintf(text + len, "{\"msg\":\"x\",\"level\":\"error\"}");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    json_t *e = gv_log_errors(text, len);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CU_ASSERT_PTR_NOT_NULL(e);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    fprintf(stderr, "  8 KiB of open objects: %.1f ms, %zu errors\n", ms, json_array_size(e));
    CU_ASSERT(ms < 2000);
    json_decref(e);
}

/* ------------------------------------------------------------ stderr copies */

static size_t copies(const char *err, const char *log)
{
    json_t *e = errs_of(log);
    size_t n = gv_log_stderr_copies(err, strlen(err), e);
    json_decref(e);
    return n;
}

static void test_copies_issue(void)
{
    /* the run's copy is on stderr, the gofer's is not */
    const char *err = "program said this\n" RUN_MSG "\n";
    CU_ASSERT_EQUAL(copies(err, ISSUE_LOG), strlen(RUN_MSG) + 1);
    CU_ASSERT_EQUAL(copies(RUN_MSG "\n", ISSUE_LOG), strlen(RUN_MSG) + 1);
    /* both, with the newline inside the gofer's message */
    CU_ASSERT_EQUAL(copies("x" GOFER_MSG "\n" RUN_MSG "\n", ISSUE_LOG), strlen(GOFER_MSG RUN_MSG) + 2);
    /* in the other order (two processes writing) */
    CU_ASSERT_EQUAL(copies("x" RUN_MSG "\n" GOFER_MSG "\n", ISSUE_LOG), strlen(GOFER_MSG RUN_MSG) + 2);
}

static void test_copies_only_exact(void)
{
    const char *log = "{\"msg\":\"boom\",\"level\":\"error\"}";
    CU_ASSERT_EQUAL(copies("boom\n", log), 5);
    CU_ASSERT_EQUAL(copies("xboom\n", log), 5);
    CU_ASSERT_EQUAL(copies("boom", log), 0);        /* not a line runsc wrote */
    CU_ASSERT_EQUAL(copies("boom\nafter\n", log), 0); /* not at the end */
    CU_ASSERT_EQUAL(copies("boom\nboom\n", log), 5); /* one copy per logged error */
    CU_ASSERT_EQUAL(copies("", log), 0);
    CU_ASSERT_EQUAL(copies("boom\n", ""), 0);         /* the program's words: runsc logged nothing */
    CU_ASSERT_EQUAL(copies("boom\nboom\n", "{\"msg\":\"boom\",\"level\":\"error\"}{\"msg\":\"boom\",\"level\":\"error\"}"),
                    10);
}

static int reg(void)
{
    CU_pSuite r = CU_add_suite("runsc log as a stream of JSON values", NULL, NULL);
    CU_add_test(r, "the issue's log: two objects on one line", test_issue_log);
    CU_add_test(r, "any separator or none", test_separators);
    CU_add_test(r, "one object across lines", test_one_object_across_lines);
    CU_add_test(r, "truncated last object, at every length", test_truncated_last);
    CU_add_test(r, "tail beginning inside an object, at every offset", test_tail_begins_inside);
    CU_add_test(r, "JSON quoted inside a message", test_json_inside_a_message);
    CU_add_test(r, "objects that are not errors", test_not_errors);
    CU_add_test(r, "NUL bytes and invalid UTF-8", test_nul_and_invalid_utf8);
    CU_add_test(r, "many errors: the last ones", test_many_errors_keep_the_last);
    CU_add_test(r, "bounded on hostile text", test_bounded_on_hostile_text);
    CU_pSuite c = CU_add_suite("runsc's copies at the end of stderr", NULL, NULL);
    CU_add_test(c, "the issue's copies", test_copies_issue);
    CU_add_test(c, "exact copies only", test_copies_only_exact);
    return 0;
}

EAI_UNIT_MAIN(reg)
