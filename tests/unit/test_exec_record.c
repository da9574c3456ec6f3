/* core/record/exec_record.h: the execution record's one set of rules. */
#include <string.h>

#include <CUnit/CUnit.h>
#include <jansson.h>

#include "record/exec_record.h"
#include "unit_main.h"
#include "eaibase.h"

#define NOW "2026-12-06T04:00:00.000Z"

static void test_init(void)
{
    json_t *rec = json_pack("{s:s, s:[s]}", "image", "python:3.11-slim", "command", "true");
    const struct eai_exec_record_ids ids = {
        .id = "sbx_00000000-0000-4000-8000-000000000001", .tenant_id = "t", .created_at = NOW,
        .request_hash = "h", .trace_id = "", .session_id = NULL,
    };
    CU_ASSERT_EQUAL(eai_exec_record_init(rec, &ids), 0);
    CU_ASSERT_STRING_EQUAL(eai_jstr(rec, "status"), "queued");
    CU_ASSERT_STRING_EQUAL(eai_jstr(rec, "request_id"), "");
    CU_ASSERT(json_is_null(json_object_get(rec, "trace_id")));
    CU_ASSERT(json_is_null(json_object_get(rec, "idempotency_key")));
    CU_ASSERT(json_is_null(json_object_get(rec, "finished_at")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(rec, "files")), 0);
    CU_ASSERT(json_is_false(json_object_get(rec, "cancel_requested")));
    CU_ASSERT_PTR_NULL(json_object_get(rec, "session_id"));
    CU_ASSERT_EQUAL(eai_exec_record_init(rec, &(struct eai_exec_record_ids){.id = "x"}), -1);
    json_decref(rec);
}

static void test_stored(void)
{
    json_t *in = json_pack("{s:s, s:i, s:s, s:s}", "id", "sbx_x", "seq", 9, "status", "running",
                           "lease_owner", "me");
    json_t *e = eai_exec_record_stored(in, "t", NOW);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_PTR_NULL(json_object_get(e, "seq"));
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "status"), "queued");
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "tenant_id"), "t");
    CU_ASSERT(json_is_null(json_object_get(e, "lease_owner")));
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "created_at"), NOW);
    CU_ASSERT_STRING_EQUAL(eai_jstr(in, "status"), "running");   /* input untouched */
    json_decref(e);
    json_decref(in);
    CU_ASSERT_PTR_NULL(eai_exec_record_stored(NULL, "t", NOW));
}

static void test_terminal(void)
{
    json_t *rec = json_pack("{s:s, s:s, s:i, s:s, s:{s:s}, s:s, s:[{s:s}], s:s, s:s}", "id", "sbx_x",
                            "status", "running", "seq", 3, "lease_owner", "me", "env", "K", "v", "stdin",
                            "secret", "files_in", "path", "/tmp/a", "profile", "p", "created_at", NOW);
    json_t *patch = json_pack("{s:s, s:i, s:s, s:i, s:s, s:s}", "status", "succeeded", "exit_code", 0,
                              "id", "sbx_other", "seq", 99, "lease_owner", "thief", "stdout", "4\n");
    json_t *files = json_pack("[{s:s, s:i, s:s, s:s, s:s}]", "path", "/tmp/o/r", "size", 5, "sha256",
                              "ab", "content_b64", "aGVsbG8=", "name_encoding", "percent");
    const char *why = NULL;
    CU_ASSERT_EQUAL(eai_exec_record_terminal(rec, patch, files, NULL, NOW, &why), 0);
    CU_ASSERT_STRING_EQUAL(eai_jstr(rec, "status"), "succeeded");
    CU_ASSERT_STRING_EQUAL(eai_jstr(rec, "id"), "sbx_x");             /* storage keys kept */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "seq")), 3);
    CU_ASSERT_STRING_EQUAL(eai_jstr(rec, "lease_owner"), "me");
    CU_ASSERT_STRING_EQUAL(eai_jstr(rec, "stdout"), "4\n");
    CU_ASSERT_STRING_EQUAL(eai_jstr(rec, "finished_at"), NOW);
    CU_ASSERT_STRING_EQUAL(eai_jstr(rec, "updated_at"), NOW);
    CU_ASSERT_EQUAL(json_object_size(json_object_get(rec, "env")), 0);   /* scrubbed */
    CU_ASSERT(json_is_null(json_object_get(rec, "stdin")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(rec, "files_in")), 0);
    const json_t *f = json_array_get(json_object_get(rec, "files"), 0);
    CU_ASSERT_STRING_EQUAL(eai_jstr(f, "path"), "/tmp/o/r");
    CU_ASSERT_STRING_EQUAL(eai_jstr(f, "name_encoding"), "percent");
    CU_ASSERT_PTR_NULL(json_object_get(f, "content_b64"));
    json_decref(patch);
    json_decref(files);
    json_decref(rec);
}

static void test_terminal_status(void)
{
    json_t *rec = json_pack("{s:s}", "status", "queued");
    const char *why = NULL;
    /* a cancel of a queued row: no patch, the default status */
    CU_ASSERT_EQUAL(eai_exec_record_terminal(rec, NULL, NULL, "cancelled", NOW, &why), 0);
    CU_ASSERT_STRING_EQUAL(eai_jstr(rec, "status"), "cancelled");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(rec, "files")), 0);
    json_t *bad = json_pack("{s:s}", "status", "running");
    CU_ASSERT_EQUAL(eai_exec_record_terminal(rec, bad, NULL, NULL, NOW, &why), -1);
    CU_ASSERT_STRING_EQUAL(why, "terminal patch without a terminal status");
    json_t *arr = json_array();
    CU_ASSERT_EQUAL(eai_exec_record_terminal(rec, arr, NULL, NULL, NOW, &why), -1);
    CU_ASSERT(eai_exec_record_is_terminal("oom_killed") && !eai_exec_record_is_terminal("queued") &&
              !eai_exec_record_is_terminal("bogus") && !eai_exec_record_is_terminal(NULL));
    CU_ASSERT(eai_exec_record_storage_key("lease_until") && !eai_exec_record_storage_key("started_at"));
    json_decref(arr);
    json_decref(bad);
    json_decref(rec);
}

static int register_suites(void)
{
    CU_pSuite s = CU_add_suite("exec_record", NULL, NULL);
    if (!s)
        return -1;
    CU_add_test(s, "build from the validated request", test_init);
    CU_add_test(s, "storage-owned keys of a new row", test_stored);
    CU_add_test(s, "terminal merge: storage keys kept, files, scrub", test_terminal);
    CU_add_test(s, "terminal status: default, refusals", test_terminal_status);
    return 0;
}

EAI_UNIT_MAIN(register_suites)
