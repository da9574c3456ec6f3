/*
 * Unit tests of the execution lifecycle pieces that do not need a server:
 *  - request validation (core/exec/exec_validate.c) on top of the real contract
 *    schema contracts/v1/sandbox-execution.schema.json and a profile set
 *    shaped like the built-in defaults;
 *  - output buffers, encodings and status mapping (core/exec/exec_result.c);
 *  - the state machine on the built-in SQLite storage: queued -> running ->
 *    one terminal status that never changes, idempotency, env scrubbing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <jansson.h>

#include "base/errors.h"
#include "exec/exec_result.h"
#include "exec/exec_validate.h"
#include "exec/outlog.h"
#include "exec/sse.h"
#include "plugin/host.h"
#include "schema/jsonschema.h"
#include "store/store_sqlite.h"
#include "base/util.h"

static struct eai_schema *schema;
static char *egress_small[] = {"example.org:443", "*.pypi.org:443", NULL};
static char *egress_none[] = {NULL};

#define MI (1LL << 20)
#define GI (1LL << 30)

static struct eai_profile profiles[] = {
    {.name = "gvisor", .backend = "gvisor", .runtime_class = "gvisor",
     .def_cpu_millis = 1000, .max_cpu_millis = 2000, .def_memory = 512 * MI, .max_memory = 2 * GI,
     .def_timeout_s = 30, .max_timeout_s = 300, .def_pids = 128, .max_pids = 512,
     .def_output_bytes = 1 * MI, .max_output_bytes = 8 * MI, .def_disk = 64 * MI, .max_disk = 1 * GI,
     .egress_allow = egress_none},
    {.name = "gvisor-small", .backend = "gvisor", .runtime_class = "gvisor",
     .def_cpu_millis = 500, .max_cpu_millis = 1000, .def_memory = 256 * MI, .max_memory = 512 * MI,
     .def_timeout_s = 30, .max_timeout_s = 60, .def_pids = 128, .max_pids = 256,
     .def_output_bytes = 1 * MI, .max_output_bytes = 1 * MI, .def_disk = 64 * MI, .max_disk = 256 * MI,
     .egress_allow = egress_small},
};
#define NPROFILES 2

/* ------------------------------------------------------------ helpers */

struct outcome {
    int rc;
    enum eai_code code;
    json_t *rec;
    json_t *details;
    const struct eai_profile *prof;
};

static int known_images(void *arg, const struct eai_profile *p, const char *image)
{
    (void)arg;
    (void)p;
    return strcmp(image, "python:3.11-slim") == 0 || strcmp(image, "busybox") == 0;
}

/* The image's own command, as exec_create.c asks the image store: python
 * has one, busybox none (only when g_image_cmd). */
static int g_image_cmd;
static int image_command(void *arg, const struct eai_profile *p, const char *image, json_t **argv, char *why,
                         size_t whylen)
{
    (void)arg;
    (void)p;
    *argv = strcmp(image, "python:3.11-slim") == 0 ? json_pack("[s]", "python3") : NULL;
    if (!*argv)
        snprintf(why, whylen, "image '%s' has no command of its own (no Entrypoint or Cmd)", image);
    return 0;
}

/* set: the profile's backend has no stdin_write op (ABI 1.4) */
static int g_no_stdin_op;

static void no_stdin_limits(void *arg, const struct eai_profile *p, struct eai_exec_blimits *out)
{
    (void)arg;
    (void)p;
    out->stdin_stream_unsupported = 1;
}

/* Schema, then semantics, as the POST handler does. */
static struct outcome run_full(const char *body_text, const char *tool_text, int64_t files_cap)
{
    struct outcome o = {0};
    json_error_t je;
    json_t *body = json_loads(body_text, JSON_ALLOW_NUL, &je);
    if (!body) {
        fprintf(stderr, "bad test JSON: %s: %s\n", body_text, je.text);
        o.rc = -2;
        return o;
    }
    json_t *errors = NULL;
    eai_schema_validate(schema, body, &errors);
    eai_exec_schema_filter(body, errors);
    if (json_array_size(errors) > 0) {
        o.rc = -1;
        o.code = EAI_E_VALIDATION_FAILED;
        o.details = errors;
        json_decref(body);
        return o;
    }
    json_decref(errors);
    json_t *tool = tool_text ? json_loads(tool_text, 0, NULL) : NULL;
    struct eai_exec_vopts opts = {.files_max_total_bytes = files_cap, .image_known = known_images,
                                  .image_command = g_image_cmd ? image_command : NULL,
                                  .backend_limits = g_no_stdin_op ? no_stdin_limits : NULL};
    struct eai_error *err = NULL;
    o.rc = eai_exec_validate(body, tool, profiles, NPROFILES, &opts, &o.rec, &o.prof, &err);
    if (o.rc < 0 && err) {
        o.code = err->code;
        o.details = err->details ? json_incref(err->details) : NULL;
        eai_error_free(err);
    }
    json_decref(tool);
    json_decref(body);
    return o;
}

static struct outcome run(const char *body_text)
{
    return run_full(body_text, NULL, 8 * MI);
}

static void outcome_free(struct outcome *o)
{
    json_decref(o->rec);
    json_decref(o->details);
}

/* 1 when some detail has exactly this path. */
static int has_path(const struct outcome *o, const char *path)
{
    size_t i;
    const json_t *d;
    json_array_foreach(o->details, i, d) {
        const char *p = json_string_value(json_object_get(d, "path"));
        if (p && strcmp(p, path) == 0)
            return 1;
    }
    return 0;
}

static void dump_details(const struct outcome *o)
{
    char *s = o->details ? json_dumps(o->details, JSON_COMPACT) : NULL;
    if (s)
        fprintf(stderr, "  details: %s\n", s);
    free(s);
}

static const char *lim(const struct outcome *o, const char *k)
{
    return json_string_value(json_object_get(json_object_get(o->rec, "limits"), k));
}

static json_int_t limi(const struct outcome *o, const char *k)
{
    return json_integer_value(json_object_get(json_object_get(o->rec, "limits"), k));
}

#define BASE "\"image\": \"python:3.11-slim\", \"command\": [\"python3\", \"-c\", \"print(2+2)\"]"

#define EXPECT_REFUSED(o, c, path) do {                                           \
        CU_ASSERT_EQUAL((o).rc, -1);                                              \
        CU_ASSERT_EQUAL((o).code, (c));                                           \
        CU_ASSERT_TRUE(has_path(&(o), (path)));                                   \
        if ((o).rc != -1 || (o).code != (c) || !has_path(&(o), (path))) {         \
            fprintf(stderr, "\n  expected %s at %s, got rc %d code %s\n",          \
                    eai_code_name(c), (path), (o).rc, eai_code_name((o).code));    \
            dump_details(&(o));                                                   \
        }                                                                         \
    } while (0)

/* ------------------------------------------------------------ validation */

static void test_defaults(void)
{
    struct outcome o = run("{\"profile\": \"gvisor-small\", " BASE "}");
    CU_ASSERT_EQUAL_FATAL(o.rc, 0);
    CU_ASSERT_PTR_EQUAL(o.prof, &profiles[1]);
    CU_ASSERT_STRING_EQUAL(lim(&o, "cpu"), "500m");
    CU_ASSERT_STRING_EQUAL(lim(&o, "memory"), "256Mi");
    CU_ASSERT_STRING_EQUAL(lim(&o, "disk"), "64Mi");
    CU_ASSERT_EQUAL(limi(&o, "timeout_s"), 30);
    CU_ASSERT_EQUAL(limi(&o, "pids"), 128);
    CU_ASSERT_EQUAL(limi(&o, "output_bytes"), 1048576);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o.rec, "backend")), "gvisor");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(o.rec, "collect")), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(o.rec, "collect"), 0)), "/tmp/outputs");
    CU_ASSERT_EQUAL(json_object_size(json_object_get(o.rec, "env")), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(o.rec, "egress")), 0);
    CU_ASSERT_TRUE(json_is_null(json_object_get(o.rec, "stdin")));
    CU_ASSERT_TRUE(json_is_null(json_object_get(o.rec, "tool")));
    struct eai_exec_limits l;
    CU_ASSERT_EQUAL(eai_exec_limits_parse(json_object_get(o.rec, "limits"), &l), 0);
    CU_ASSERT_EQUAL(l.cpu_millis, 500);
    CU_ASSERT_EQUAL(l.memory_bytes, 256 * MI);
    CU_ASSERT_EQUAL(l.disk_bytes, 64 * MI);
    outcome_free(&o);
}

static void test_quantities(void)
{
    static const struct { const char *limits; const char *key; const char *want; } ok[] = {
        {"{\"cpu\": \"0.5\"}", "cpu", "500m"},
        {"{\"cpu\": \"1\"}", "cpu", "1"},
        {"{\"cpu\": \"1.5\"}", "cpu", "1500m"},
        {"{\"cpu\": \"250m\"}", "cpu", "250m"},
        {"{\"cpu\": 0.25}", "cpu", "250m"},
        {"{\"cpu\": 2}", "cpu", "2"},
        {"{\"memory\": \"1Gi\"}", "memory", "1Gi"},
        {"{\"memory\": \"1.5Gi\"}", "memory", "1536Mi"},
        {"{\"memory\": 268435456}", "memory", "256Mi"},
        {"{\"memory\": \"500M\"}", "memory", "500000000"},
        {"{\"memory\": \"2Gi\"}", "memory", "2Gi"},
        {"{\"disk\": \"128Mi\"}", "disk", "128Mi"},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"profile\": \"gvisor\", " BASE ", \"limits\": %s}", ok[i].limits);
        struct outcome o = run(body);
        CU_ASSERT_EQUAL(o.rc, 0);
        if (o.rc == 0) {
            CU_ASSERT_STRING_EQUAL(lim(&o, ok[i].key), ok[i].want);
            if (strcmp(lim(&o, ok[i].key), ok[i].want) != 0)
                fprintf(stderr, "\n  %s: got %s want %s\n", ok[i].limits, lim(&o, ok[i].key), ok[i].want);
        } else {
            fprintf(stderr, "\n  %s refused\n", ok[i].limits);
            dump_details(&o);
        }
        outcome_free(&o);
    }
    static const struct { const char *limits; const char *path; } bad[] = {
        {"{\"cpu\": \"1.5m\"}", "/limits/cpu"},
        {"{\"cpu\": \"abc\"}", "/limits/cpu"},
        {"{\"cpu\": \"0.0001\"}", "/limits/cpu"},
        {"{\"cpu\": 0.0005}", "/limits/cpu"},
        {"{\"cpu\": \"0\"}", "/limits/cpu"},
        {"{\"cpu\": \"-1\"}", "/limits/cpu"},
        {"{\"memory\": \"12.3\"}", "/limits/memory"},
        {"{\"memory\": \"1Zi\"}", "/limits/memory"},
        {"{\"memory\": \"256 Mi\"}", "/limits/memory"},
        {"{\"memory\": 1.5}", "/limits/memory"},
        {"{\"memory\": true}", "/limits/memory"},
        {"{\"timeout_s\": 0}", "/limits/timeout_s"},
        {"{\"timeout_s\": \"30\"}", "/limits/timeout_s"},
        {"{\"pids\": 1.5}", "/limits/pids"},
        {"{\"bogus\": 1}", "/limits/bogus"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"profile\": \"gvisor\", " BASE ", \"limits\": %s}", bad[i].limits);
        struct outcome o = run(body);
        EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, bad[i].path);
        outcome_free(&o);
    }
}

static void test_maxima(void)
{
    static const struct { const char *limits; const char *path; } over[] = {
        {"{\"memory\": \"1Gi\"}", "/limits/memory"},
        {"{\"memory\": 536870913}", "/limits/memory"},
        {"{\"cpu\": \"2\"}", "/limits/cpu"},
        {"{\"cpu\": \"1001m\"}", "/limits/cpu"},
        {"{\"timeout_s\": 61}", "/limits/timeout_s"},
        {"{\"pids\": 257}", "/limits/pids"},
        {"{\"output_bytes\": 1048577}", "/limits/output_bytes"},
        {"{\"disk\": \"1Gi\"}", "/limits/disk"},
    };
    for (size_t i = 0; i < sizeof over / sizeof over[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"profile\": \"gvisor-small\", " BASE ", \"limits\": %s}", over[i].limits);
        struct outcome o = run(body);
        EXPECT_REFUSED(o, EAI_E_LIMIT_EXCEEDED, over[i].path);
        CU_ASSERT_EQUAL(json_array_size(o.details), 1);
        outcome_free(&o);
    }
    /* exactly at the maxima: accepted, never clamped */
    struct outcome o = run("{\"profile\": \"gvisor-small\", " BASE ", \"limits\": {\"memory\": \"512Mi\","
                           " \"cpu\": \"1\", \"timeout_s\": 60, \"pids\": 256, \"output_bytes\": 1048576,"
                           " \"disk\": \"256Mi\"}}");
    CU_ASSERT_EQUAL(o.rc, 0);
    if (o.rc == 0) {
        CU_ASSERT_STRING_EQUAL(lim(&o, "memory"), "512Mi");
        CU_ASSERT_EQUAL(limi(&o, "timeout_s"), 60);
    }
    outcome_free(&o);
    /* two limits over: both named */
    o = run("{\"profile\": \"gvisor-small\", " BASE ", \"limits\": {\"memory\": \"4Gi\", \"timeout_s\": 3600}}");
    EXPECT_REFUSED(o, EAI_E_LIMIT_EXCEEDED, "/limits/memory");
    CU_ASSERT_TRUE(has_path(&o, "/limits/timeout_s"));
    outcome_free(&o);
    /* a malformed value wins over one above the maximum */
    o = run("{\"profile\": \"gvisor-small\", " BASE ", \"limits\": {\"memory\": \"4Gi\", \"cpu\": \"x\"}}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/limits/cpu");
    outcome_free(&o);
}

static void test_profile_image(void)
{
    struct outcome o = run("{\"profile\": \"nope\", " BASE "}");
    EXPECT_REFUSED(o, EAI_E_UNKNOWN_PROFILE, "/profile");
    outcome_free(&o);
    o = run("{" BASE "}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/profile");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", \"image\": \"nothere:1\", \"command\": [\"true\"]}");
    EXPECT_REFUSED(o, EAI_E_UNKNOWN_IMAGE, "/image");
    outcome_free(&o);
    /* structure (schema) */
    o = run("{\"profile\": \"gvisor\", " BASE ", \"foo\": 1}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/foo");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", \"image\": \"busybox\", \"command\": []}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/command");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", \"image\": \"busybox\", \"command\": [\"echo\", 3]}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/command/1");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", \"image\": \"busybox\", \"command\": [\"ec\\u0000ho\"]}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/command/0");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", \"image\": \"busybox\"}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/command");
    outcome_free(&o);
    /* no command: the image's own, when the image store has one */
    g_image_cmd = 1;
    o = run("{\"profile\": \"gvisor\", \"image\": \"python:3.11-slim\"}");
    CU_ASSERT_EQUAL(o.rc, 0);
    json_t *want = json_pack("[s]", "python3");
    CU_ASSERT_TRUE(json_equal(json_object_get(o.rec, "command"), want) == 1);
    json_decref(want);
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", \"image\": \"busybox\"}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/command");
    {
        const char *m = json_string_value(json_object_get(json_array_get(o.details, 0), "message"));
        CU_ASSERT_PTR_NOT_NULL(m);
        CU_ASSERT_PTR_NOT_NULL(m ? strstr(m, "is required: image 'busybox' has no command of its own") : NULL);
    }
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", \"image\": \"nothere:1\"}"); /* the image's check comes first */
    EXPECT_REFUSED(o, EAI_E_UNKNOWN_IMAGE, "/image");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", \"image\": \"python:3.11-slim\", \"command\": [\"true\"]}");
    CU_ASSERT_EQUAL(o.rc, 0); /* a given command wins */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(o.rec, "command"), 0)), "true");
    outcome_free(&o);
    g_image_cmd = 0;
    /* stdin with a NUL byte is kept, base64 */
    o = run("{\"profile\": \"gvisor\", " BASE ", \"stdin\": \"a\\u0000b\"}");
    CU_ASSERT_EQUAL_FATAL(o.rc, 0);
    CU_ASSERT_TRUE(json_is_true(json_object_get(o.rec, "stdin_b64")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o.rec, "stdin")), "YQBi");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", " BASE ", \"stdin\": \"hello\", \"env\": {\"K\": \"V\"},"
            " \"project_id\": \"p1\", \"agent_id\": \"a1\", \"run_id\": \"r1\"}");
    CU_ASSERT_EQUAL_FATAL(o.rc, 0);
    CU_ASSERT_FALSE(json_is_true(json_object_get(o.rec, "stdin_b64")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o.rec, "stdin")), "hello");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(o.rec, "env"), "K")), "V");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o.rec, "run_id")), "r1");
    outcome_free(&o);
}

static void test_egress(void)
{
    struct outcome o = run("{\"profile\": \"gvisor-small\", " BASE ", \"network\": {\"egress\":"
                           " [\"example.org:443\", \"files.pypi.org:443\", \"EXAMPLE.org:443\"]}}");
    CU_ASSERT_EQUAL(o.rc, 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(o.rec, "egress")), 3);
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor-small\", " BASE ", \"network\": {\"egress\": [\"example.org:80\"]}}");
    EXPECT_REFUSED(o, EAI_E_EGRESS_NOT_ALLOWED, "/network/egress/0");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor-small\", " BASE ", \"network\": {\"egress\": [\"example.org:443\","
            " \"pypi.org:443\"]}}");
    EXPECT_REFUSED(o, EAI_E_EGRESS_NOT_ALLOWED, "/network/egress/1");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", " BASE ", \"network\": {\"egress\": [\"example.org:443\"]}}");
    EXPECT_REFUSED(o, EAI_E_EGRESS_NOT_ALLOWED, "/network/egress/0");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", " BASE ", \"network\": {}}");
    CU_ASSERT_EQUAL(o.rc, 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(o.rec, "egress")), 0);
    outcome_free(&o);
}

/* stdin_mode (docs/executions.md "Input to a running program") */
static void test_stdin_mode(void)
{
    struct outcome o = run("{\"profile\": \"gvisor\", " BASE ", \"stdin_mode\": \"stream\"}");
    CU_ASSERT_EQUAL(o.rc, 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o.rec, "stdin_mode")) ?
                               json_string_value(json_object_get(o.rec, "stdin_mode")) : "", "stream");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", " BASE ", \"stdin_mode\": \"data\", \"stdin\": \"stream\"}");
    CU_ASSERT_EQUAL(o.rc, 0);
    CU_ASSERT_PTR_NULL(json_object_get(o.rec, "stdin_mode")); /* "data": as without it */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o.rec, "stdin")), "stream");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", " BASE ", \"stdin_mode\": \"stream\", \"stdin\": \"x\"}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/stdin");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", " BASE ", \"stdin_mode\": \"pipe\"}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/stdin_mode");
    outcome_free(&o);
    g_no_stdin_op = 1;
    o = run("{\"profile\": \"gvisor\", " BASE ", \"stdin_mode\": \"stream\"}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/stdin_mode");
    outcome_free(&o);
    o = run("{\"profile\": \"gvisor\", " BASE ", \"stdin\": \"x\"}"); /* data stdin is not its business */
    CU_ASSERT_EQUAL(o.rc, 0);
    outcome_free(&o);
    g_no_stdin_op = 0;
}

static void test_files(void)
{
    struct outcome o = run("{\"profile\": \"gvisor\", " BASE ", \"files\": ["
                           "{\"path\": \"/tmp/in/data.csv\", \"content\": \"a,b\\n1,2\\n\"},"
                           "{\"path\": \"/tmp/in/blob.bin\", \"content_b64\": \"AAEC\"}],"
                           " \"collect\": [\"/tmp/outputs\", \"/tmp\"]}");
    CU_ASSERT_EQUAL_FATAL(o.rc, 0);
    json_t *fi = json_object_get(o.rec, "files_in");
    CU_ASSERT_EQUAL(json_array_size(fi), 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(fi, 0), "content_b64")),
                           "YSxiCjEsMgo=");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(fi, 1), "content_b64")), "AAEC");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(o.rec, "collect")), 2);
    outcome_free(&o);

    static const struct { const char *file; const char *path; } bad[] = {
        {"{\"path\": \"/etc/passwd\", \"content\": \"x\"}", "/files/0/path"},
        {"{\"path\": \"/tmp/../etc/passwd\", \"content\": \"x\"}", "/files/0/path"},
        {"{\"path\": \"/tmp/a/../../etc\", \"content\": \"x\"}", "/files/0/path"},
        {"{\"path\": \"/tmp/a/./b\", \"content\": \"x\"}", "/files/0/path"},
        {"{\"path\": \"/tmp//b\", \"content\": \"x\"}", "/files/0/path"},
        {"{\"path\": \"/tmp/dir/\", \"content\": \"x\"}", "/files/0/path"},
        {"{\"path\": \"/tmp\", \"content\": \"x\"}", "/files/0/path"},
        {"{\"path\": \"/tmpfoo/x\", \"content\": \"x\"}", "/files/0/path"},
        {"{\"path\": \"/tmp/x\", \"content\": \"x\", \"content_b64\": \"eA==\"}", "/files/0"},
        {"{\"path\": \"/tmp/x\"}", "/files/0"},
        {"{\"path\": \"/tmp/x\", \"content_b64\": \"QQ\"}", "/files/0/content_b64"},
        {"{\"path\": \"/tmp/x\", \"content_b64\": \"@@@@\"}", "/files/0/content_b64"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"profile\": \"gvisor\", " BASE ", \"files\": [%s]}", bad[i].file);
        struct outcome x = run(body);
        EXPECT_REFUSED(x, EAI_E_VALIDATION_FAILED, bad[i].path);
        outcome_free(&x);
    }
    o = run("{\"profile\": \"gvisor\", " BASE ", \"files\": [{\"path\": \"/tmp/x\", \"content\": \"1\"},"
            " {\"path\": \"/tmp/x\", \"content\": \"2\"}]}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/files/1/path");
    outcome_free(&o);
    static const char *const bad_collect[] = {"/var/x", "/tmp/../etc", "/tmp/a/..", "tmp/x", "/tmp/./x"};
    for (size_t i = 0; i < sizeof bad_collect / sizeof bad_collect[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"profile\": \"gvisor\", " BASE ", \"collect\": [\"%s\"]}", bad_collect[i]);
        struct outcome x = run(body);
        EXPECT_REFUSED(x, EAI_E_VALIDATION_FAILED, "/collect/0");
        outcome_free(&x);
    }
    /* total size cap (decoded bytes) */
    o = run_full("{\"profile\": \"gvisor\", " BASE ", \"files\": [{\"path\": \"/tmp/a\", \"content\": \"12345\"},"
                 " {\"path\": \"/tmp/b\", \"content_b64\": \"MTIzNDU2\"}]}", NULL, 10);
    EXPECT_REFUSED(o, EAI_E_LIMIT_EXCEEDED, "/files");
    outcome_free(&o);
    o = run_full("{\"profile\": \"gvisor\", " BASE ", \"files\": [{\"path\": \"/tmp/a\", \"content\": \"12345\"},"
                 " {\"path\": \"/tmp/b\", \"content_b64\": \"MTIzNDU=\"}]}", NULL, 10);
    CU_ASSERT_EQUAL(o.rc, 0);
    outcome_free(&o);
}

static const char *tool_calc =
    "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": \"calc\"},"
    " \"spec\": {\"sandbox_profile\": \"gvisor\", \"image\": \"busybox\", \"command\": [\"sh\", \"-c\", \"echo 4\"],"
    " \"limits\": {\"memory\": \"1Gi\", \"timeout_s\": 100}, \"env\": {\"A\": \"tool\", \"B\": \"tool\"},"
    " \"egress\": []}}";

static void test_tool(void)
{
    /* the tool gives profile, image, command and limits */
    struct outcome o = run_full("{\"tool\": \"calc\"}", tool_calc, 8 * MI);
    CU_ASSERT_EQUAL_FATAL(o.rc, 0);
    CU_ASSERT_PTR_EQUAL(o.prof, &profiles[0]);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o.rec, "image")), "busybox");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(o.rec, "command"), 2)), "echo 4");
    CU_ASSERT_STRING_EQUAL(lim(&o, "memory"), "1Gi");
    CU_ASSERT_EQUAL(limi(&o, "timeout_s"), 100);
    CU_ASSERT_STRING_EQUAL(lim(&o, "cpu"), "1");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o.rec, "tool")), "calc");
    outcome_free(&o);
    /* request fields override, within the profile's maxima */
    o = run_full("{\"tool\": \"calc\", " BASE ", \"limits\": {\"memory\": \"2Gi\"}, \"env\": {\"B\": \"req\"}}",
                 tool_calc, 8 * MI);
    CU_ASSERT_EQUAL_FATAL(o.rc, 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o.rec, "image")), "python:3.11-slim");
    CU_ASSERT_STRING_EQUAL(lim(&o, "memory"), "2Gi");
    CU_ASSERT_EQUAL(limi(&o, "timeout_s"), 100);
    json_t *env = json_object_get(o.rec, "env");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(env, "A")), "tool");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(env, "B")), "req");
    outcome_free(&o);
    o = run_full("{\"tool\": \"calc\", \"limits\": {\"memory\": \"4Gi\"}}", tool_calc, 8 * MI);
    EXPECT_REFUSED(o, EAI_E_LIMIT_EXCEEDED, "/limits/memory");
    outcome_free(&o);
    o = run_full("{\"tool\": \"calc\", \"profile\": \"gvisor-small\"}", tool_calc, 8 * MI);
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/profile");
    outcome_free(&o);
    o = run_full("{\"tool\": \"calc\", \"profile\": \"gvisor\"}", tool_calc, 8 * MI);
    CU_ASSERT_EQUAL(o.rc, 0);
    outcome_free(&o);
    /* unknown tool: the manifest lookup found nothing */
    o = run_full("{\"tool\": \"nope\", " BASE "}", NULL, 8 * MI);
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/tool");
    outcome_free(&o);
    /* without a tool, image and command stay required by the schema */
    o = run("{\"profile\": \"gvisor\"}");
    EXPECT_REFUSED(o, EAI_E_VALIDATION_FAILED, "/image");
    outcome_free(&o);
}

static void test_request_hash_paths(void)
{
    json_t *a = json_loads("{\"b\": 1, \"a\": [1, 2]}", 0, NULL);
    json_t *b = json_loads("{\"a\": [1, 2], \"b\": 1}", 0, NULL);
    json_t *c = json_loads("{\"a\": [2, 1], \"b\": 1}", 0, NULL);
    char ha[65], hb[65], hc[65];
    CU_ASSERT_EQUAL(eai_exec_request_hash(a, ha), 0);
    CU_ASSERT_EQUAL(eai_exec_request_hash(b, hb), 0);
    CU_ASSERT_EQUAL(eai_exec_request_hash(c, hc), 0);
    CU_ASSERT_STRING_EQUAL(ha, hb);
    CU_ASSERT_STRING_NOT_EQUAL(ha, hc);
    CU_ASSERT_EQUAL(strlen(ha), 64);
    json_decref(a);
    json_decref(b);
    json_decref(c);
    CU_ASSERT_TRUE(eai_exec_tmp_path_ok("/tmp/a/b.txt", 12, 0));
    CU_ASSERT_TRUE(eai_exec_tmp_path_ok("/tmp", 4, 1));
    CU_ASSERT_FALSE(eai_exec_tmp_path_ok("/tmp", 4, 0));
    CU_ASSERT_FALSE(eai_exec_tmp_path_ok("/tmp/..", 7, 1));
    CU_ASSERT_FALSE(eai_exec_tmp_path_ok("/tmp/a\0b", 8, 1));
    CU_ASSERT_TRUE(eai_exec_tmp_path_ok("/tmp/..a", 8, 1));
}

/* ------------------------------------------------------------ results */

/* The order of output events (issue 17.3): a stream's bytes gather into one
 * event until sent, a change of stream starts a new one, past the event cap
 * the rest comes at the end; the stored form is n / -n. */
static void test_outlog(void)
{
    struct eai_outlog g;
    memset(&g, 0, sizeof g);
    eai_outlog_add(&g, 0, 3);
    eai_outlog_add(&g, 0, 2); /* gathering: same event */
    eai_outlog_add(&g, 1, 4);
    eai_outlog_add(&g, 0, 1);
    CU_ASSERT_EQUAL(g.n, 3);
    CU_ASSERT_EQUAL(g.evs[0].len, 5);
    CU_ASSERT_EQUAL(g.evs[2].off, 5);
    eai_outlog_sent(&g);
    eai_outlog_add(&g, 0, 7); /* sent: a new event even on the same stream */
    CU_ASSERT_EQUAL(g.n, 4);
    CU_ASSERT_EQUAL(g.evs[3].off, 6);
    json_t *j = eai_outlog_json(&g, 13, 4);
    char *s = json_dumps(j, JSON_COMPACT);
    CU_ASSERT_STRING_EQUAL(s, "[5,-4,1,7]");
    free(s);
    json_decref(j);
    /* at the cap: the later bytes of a stream are left to the end */
    eai_outlog_reset(&g);
    for (int i = 0; i < EAI_SSE_MAX_EVENTS; i++)
        eai_outlog_add(&g, i % 2, 1);
    CU_ASSERT_EQUAL(g.n, EAI_SSE_MAX_EVENTS);
    eai_outlog_add(&g, 0, 9); /* last is stderr: no room */
    eai_outlog_add(&g, 0, 1);
    CU_ASSERT_EQUAL(g.n, EAI_SSE_MAX_EVENTS);
    j = eai_outlog_json(&g, EAI_SSE_MAX_EVENTS / 2 + 10, EAI_SSE_MAX_EVENTS / 2);
    CU_ASSERT_EQUAL(json_array_size(j), EAI_SSE_MAX_EVENTS + 1);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(j, EAI_SSE_MAX_EVENTS)), 10);
    json_decref(j);
    eai_outlog_free(&g);
}

static void test_outbuf(void)
{
    struct eai_outbuf b;
    size_t kept = 99;
    eai_outbuf_init(&b, 10);
    CU_ASSERT_EQUAL(eai_outbuf_append(&b, "abcdef", 6, &kept), 0);
    CU_ASSERT_EQUAL(kept, 6);
    CU_ASSERT_FALSE(b.truncated);
    CU_ASSERT_EQUAL(eai_outbuf_append(&b, "ghijkl", 6, &kept), 0);
    CU_ASSERT_EQUAL(kept, 4);
    CU_ASSERT_TRUE(b.truncated);
    CU_ASSERT_EQUAL(eai_outbuf_append(&b, "zz", 2, &kept), 0);
    CU_ASSERT_EQUAL(kept, 0);
    CU_ASSERT_EQUAL(b.len, 10);
    CU_ASSERT_EQUAL(b.seen, 14);
    CU_ASSERT_EQUAL(memcmp(b.data, "abcdefghij", 10), 0);
    eai_outbuf_free(&b);
    /* a flood: memory stays at the cap */
    eai_outbuf_init(&b, 1 << 20);
    char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 200; i++)
        eai_outbuf_append(&b, chunk, sizeof chunk, NULL);
    CU_ASSERT_EQUAL(b.len, 1 << 20);
    CU_ASSERT_TRUE(b.cap <= (size_t)(1 << 20));
    CU_ASSERT_TRUE(b.truncated);
    eai_outbuf_free(&b);
}

static const char *enc_of(json_t *rec, const char *k)
{
    char key[32];
    snprintf(key, sizeof key, "%s_encoding", k);
    return json_string_value(json_object_get(rec, key));
}

static void test_encoding(void)
{
    json_t *rec = json_object();
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "h\xc3\xa9llo\n", 7, 0), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "stdout")), "h\xc3\xa9llo\n");
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stdout"), "utf-8");
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stderr", "\xff\xfe", 2, 0), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "stderr")), "//4=");
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stderr"), "base64");
    /* control bytes (6x as \u00XX): base64, 4/3 (issue 16.3); quotes and
     * newlines (2x) stay text */
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "\x01\x02\x03\x01\x02\x03", 6, 0), 0);
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stdout"), "base64");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "stdout")), "AQIDAQID");
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "{\"a\":\"b\\\"\"}\n\n\n", 14, 0), 0);
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stdout"), "utf-8");
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "ok\x1b[0m\n", 7, 0), 0); /* one escape in a line */
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stdout"), "utf-8");
    /* NUL bytes: base64 */
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "a\0b", 3, 0), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "stdout")), "YQBi");
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stdout"), "base64");
    /* a character split by the cap: dropped when truncated, else base64 */
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "ab\xc3", 3, 1), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "stdout")), "ab");
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stdout"), "utf-8");
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "ab\xe2\x82", 4, 1), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "stdout")), "ab");
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "ab\xc3", 3, 0), 0);
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stdout"), "base64");
    /* invalid bytes in the middle are never hidden */
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "a\xffz\xc3", 4, 1), 0);
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stdout"), "base64");
    CU_ASSERT_EQUAL(eai_output_encode(rec, "stdout", "", 0, 0), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "stdout")), "");
    CU_ASSERT_STRING_EQUAL(enc_of(rec, "stdout"), "utf-8");
    json_decref(rec);
}

static json_t *patch_of(enum eai_iso_outcome oc, int code, int sig, enum eai_code ec, const char *msg)
{
    struct eai_iso_result res = {.size = sizeof res, .outcome = oc, .exit_code = code, .signal = sig,
                                 .error_code = ec, .error_message = msg, .cpu_seconds = 0.5,
                                 .memory_mb_seconds = 3.25, .duration_s = 1.5};
    return eai_exec_result_patch(&res);
}

static const char *pstr(json_t *p, const char *k)
{
    const char *s = json_string_value(json_object_get(p, k));
    return s ? s : "(null)";
}

static void test_status_mapping(void)
{
    json_t *p = patch_of(EAI_OUT_EXITED, 0, 0, EAI_OK, NULL);
    CU_ASSERT_STRING_EQUAL(pstr(p, "status"), "succeeded");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(p, "exit_code")), 0);
    CU_ASSERT_TRUE(json_is_null(json_object_get(p, "signal")));
    CU_ASSERT_TRUE(json_is_null(json_object_get(p, "error")));
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(json_object_get(p, "usage"), "cpu_seconds")), 0.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(json_object_get(p, "usage"), "duration_s")), 1.5, 1e-9);
    json_decref(p);
    p = patch_of(EAI_OUT_EXITED, 3, 0, EAI_OK, NULL);
    CU_ASSERT_STRING_EQUAL(pstr(p, "status"), "failed");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(p, "exit_code")), 3);
    json_decref(p);
    p = patch_of(EAI_OUT_EXITED, 137, 9, EAI_OK, NULL);
    CU_ASSERT_STRING_EQUAL(pstr(p, "status"), "failed");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(p, "signal")), 9);
    json_decref(p);
    p = patch_of(EAI_OUT_TIMEOUT, -1, 0, EAI_OK, NULL);
    CU_ASSERT_STRING_EQUAL(pstr(p, "status"), "timeout");
    CU_ASSERT_TRUE(json_is_null(json_object_get(p, "exit_code")));
    json_decref(p);
    p = patch_of(EAI_OUT_OOM, 137, 9, EAI_OK, NULL);
    CU_ASSERT_STRING_EQUAL(pstr(p, "status"), "oom_killed");
    json_decref(p);
    p = patch_of(EAI_OUT_CANCELLED, -1, 0, EAI_OK, NULL);
    CU_ASSERT_STRING_EQUAL(pstr(p, "status"), "cancelled");
    json_decref(p);
    p = patch_of(EAI_OUT_ERROR, -1, 0, EAI_E_IMAGE_MISSING, NULL);
    CU_ASSERT_STRING_EQUAL(pstr(p, "status"), "error");
    CU_ASSERT_STRING_EQUAL(pstr(json_object_get(p, "error"), "code"), "image_missing");
    CU_ASSERT_STRING_EQUAL(pstr(json_object_get(p, "error"), "message"),
                           eai_code_message(EAI_E_IMAGE_MISSING, "en"));
    json_decref(p);
    p = patch_of(EAI_OUT_ERROR, -1, 0, EAI_E_SANDBOX_FAILED, "runsc crashed");
    CU_ASSERT_STRING_EQUAL(pstr(json_object_get(p, "error"), "code"), "sandbox_failed");
    CU_ASSERT_STRING_EQUAL(pstr(json_object_get(p, "error"), "message"), "runsc crashed");
    json_decref(p);
    p = eai_exec_error_patch(EAI_E_INTERRUPTED, NULL);
    CU_ASSERT_STRING_EQUAL(pstr(p, "status"), "error");
    CU_ASSERT_STRING_EQUAL(pstr(json_object_get(p, "error"), "code"), "interrupted");
    json_decref(p);
    CU_ASSERT_TRUE(eai_exec_status_terminal("oom_killed"));
    CU_ASSERT_FALSE(eai_exec_status_terminal("running"));
    CU_ASSERT_FALSE(eai_exec_status_terminal("queued"));
    CU_ASSERT_FALSE(eai_exec_status_terminal(NULL));
}

/* ------------------------------------------------------------ state machine (SQLite) */

static char tmpdir[256];
static struct eai_host *host;
static void *store;
static const struct eai_storage_ops *ops;
static const struct eai_plugin_descriptor *sqd;
static char tenant[37];

static int storage_up(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/eai-test-exec-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    host = eai_host_new(NULL, tmpdir);
    if (!host)
        return -1;
    sqd = eai_builtin_storage_sqlite();
    char path[512];
    snprintf(path, sizeof path, "%s/eai.db", tmpdir);
    json_t *cfg = json_pack("{s:s}", "path", path);
    struct eai_error *err = NULL;
    store = sqd->create(host, cfg, &err);
    json_decref(cfg);
    if (!store) {
        fprintf(stderr, "sqlite: %s\n", err && err->message ? err->message : "?");
        return -1;
    }
    ops = sqd->ops;
    if (ops->migrate(store, NULL, &err) < 0)
        return -1;
    json_t *t = NULL;
    if (ops->tenant_create(store, "t1", &t, &err) < 0 || !t)
        return -1;
    snprintf(tenant, sizeof tenant, "%s", json_string_value(json_object_get(t, "id")));
    json_decref(t);
    return 0;
}

static void storage_down(void)
{
    if (store)
        sqd->destroy(store);
    if (host)
        eai_host_free(host);
    if (tmpdir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", tmpdir);
    }
}

/* A validated record with an id, as the POST handler stores it. */
static json_t *new_record(const char *body, const char *idem, char id[64])
{
    struct outcome o = run(body);
    if (o.rc != 0)
        return NULL;
    char uuid[37], hash[65];
    eai_uuid_v4(uuid);
    snprintf(id, 64, "sbx_%s", uuid);
    json_t *b = json_loads(body, 0, NULL);
    eai_exec_request_hash(b, hash);
    json_decref(b);
    json_object_set_new(o.rec, "id", json_string(id));
    json_object_set_new(o.rec, "status", json_string("queued"));
    json_object_set_new(o.rec, "idempotency_key", idem ? json_string(idem) : json_null());
    json_object_set_new(o.rec, "request_hash", json_string(hash));
    json_t *r = json_incref(o.rec);
    outcome_free(&o);
    return r;
}

static json_t *get(const char *id)
{
    json_t *out = NULL;
    struct eai_error *err = NULL;
    if (ops->exec_get(store, tenant, id, &out, &err) < 0)
        eai_error_free(err);
    return out;
}

static void test_state_machine(void)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(store);
    struct eai_error *err = NULL;
    char id[64], id2[64];
    const char *body = "{\"profile\": \"gvisor\", " BASE ", \"env\": {\"SECRET\": \"s3cr3t\"}}";
    json_t *rec = new_record(body, "key-1", id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rec);
    CU_ASSERT_EQUAL(ops->exec_create(store, tenant, rec, NULL, NULL, &err), EAI_STORE_CREATED);
    json_decref(rec);
    /* idempotency: same key and body -> the first execution; other body -> conflict */
    json_t *again = new_record(body, "key-1", id2);
    json_t *existing = NULL;
    CU_ASSERT_EQUAL(ops->exec_create(store, tenant, again, NULL, &existing, &err), EAI_STORE_EXISTS);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(existing, "id")), id);
    json_decref(existing);
    json_decref(again);
    again = new_record("{\"profile\": \"gvisor\", " BASE ", \"stdin\": \"other\"}", "key-1", id2);
    CU_ASSERT_EQUAL(ops->exec_create(store, tenant, again, NULL, NULL, &err), EAI_STORE_CONFLICT);
    json_decref(again);

    json_t *e = get(id);
    CU_ASSERT_STRING_EQUAL(pstr(e, "status"), "queued");
    json_decref(e);

    /* queued -> running (claim) */
    json_t *claimed = NULL;
    CU_ASSERT_EQUAL(ops->exec_claim(store, "node-a", 30000, 8, 4, &claimed, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(claimed), 1);
    json_decref(claimed);
    e = get(id);
    CU_ASSERT_STRING_EQUAL(pstr(e, "status"), "running");
    json_decref(e);

    /* running -> succeeded, with a result patch from a real mapping */
    struct eai_iso_result res = {.size = sizeof res, .outcome = EAI_OUT_EXITED, .exit_code = 0,
                                 .cpu_seconds = 0.04, .memory_mb_seconds = 3.1, .duration_s = 0.41};
    json_t *patch = eai_exec_result_patch(&res);
    eai_output_encode(patch, "stdout", "4\n", 2, 0);
    eai_output_encode(patch, "stderr", "", 0, 0);
    json_t *files = json_pack("[{s:s, s:i, s:s}]", "path", "/tmp/outputs/r.json", "size", 2, "content_b64", "e30=");
    CU_ASSERT_EQUAL(ops->exec_finish(store, tenant, id, patch, files, NULL, NULL, &err), EAI_STORE_UPDATED);
    json_decref(patch);
    json_decref(files);
    e = get(id);
    CU_ASSERT_STRING_EQUAL(pstr(e, "status"), "succeeded");
    CU_ASSERT_STRING_EQUAL(pstr(e, "stdout"), "4\n");
    CU_ASSERT_EQUAL(json_object_size(json_object_get(e, "env")), 0); /* scrubbed */
    CU_ASSERT_EQUAL(json_array_size(json_object_get(e, "files")), 1);
    json_decref(e);

    /* a terminal status never changes */
    struct eai_iso_result late = {.size = sizeof late, .outcome = EAI_OUT_TIMEOUT, .exit_code = -1};
    patch = eai_exec_result_patch(&late);
    CU_ASSERT_EQUAL(ops->exec_finish(store, tenant, id, patch, NULL, NULL, NULL, &err), EAI_STORE_NOOP);
    json_decref(patch);
    json_t *after = NULL;
    json_t *cp = eai_exec_error_patch(EAI_E_INTERRUPTED, NULL);
    json_object_set_new(cp, "status", json_string("cancelled"));
    /* terminal: this call changes nothing */
    CU_ASSERT_EQUAL(ops->exec_cancel(store, tenant, id, cp, NULL, &after, &err), EAI_STORE_NOOP);
    CU_ASSERT_STRING_EQUAL(pstr(after, "status"), "succeeded");
    json_decref(after);
    json_decref(cp);
    e = get(id);
    CU_ASSERT_STRING_EQUAL(pstr(e, "status"), "succeeded");
    json_decref(e);

    /* a queued execution is cancelled at once */
    rec = new_record("{\"profile\": \"gvisor\", \"image\": \"busybox\", \"command\": [\"true\"]}", NULL, id2);
    CU_ASSERT_EQUAL(ops->exec_create(store, tenant, rec, NULL, NULL, &err), EAI_STORE_CREATED);
    json_decref(rec);
    cp = json_pack("{s:s, s:s}", "status", "cancelled", "cancel_request_id", "req-1");
    after = NULL;
    CU_ASSERT_EQUAL(ops->exec_cancel(store, tenant, id2, cp, NULL, &after, &err), EAI_STORE_UPDATED);
    CU_ASSERT_STRING_EQUAL(pstr(after, "status"), "cancelled");
    CU_ASSERT_STRING_EQUAL(pstr(after, "cancel_request_id"), "req-1");
    json_decref(after);
    json_decref(cp);
    /* cancelled is terminal too: a claim does not take it */
    claimed = NULL;
    CU_ASSERT_EQUAL(ops->exec_claim(store, "node-a", 30000, 8, 4, &claimed, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(claimed), 0);
    json_decref(claimed);
    /* another tenant sees nothing */
    json_t *other = NULL;
    CU_ASSERT_EQUAL(ops->exec_get(store, "11111111-1111-4111-8111-111111111111", id, &other, &err), 0);
    CU_ASSERT_PTR_NULL(other);
    eai_error_free(err);
}

/* ------------------------------------------------------------ main */

int main(void)
{
    const char *src = getenv("EAI_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/contracts/v1/sandbox-execution.schema.json", src ? src : EAI_SOURCE_DIR);
    struct eai_error *err = NULL;
    schema = eai_schema_load_file(path, &err);
    if (!schema) {
        fprintf(stderr, "cannot load %s: %s\n", path, err && err->message ? err->message : "?");
        return 1;
    }
    if (storage_up() < 0)
        fprintf(stderr, "storage setup failed: the state machine suite will fail\n");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite v = CU_add_suite("validation", NULL, NULL);
    CU_add_test(v, "defaults", test_defaults);
    CU_add_test(v, "quantities", test_quantities);
    CU_add_test(v, "maxima", test_maxima);
    CU_add_test(v, "profile, image, structure", test_profile_image);
    CU_add_test(v, "egress", test_egress);
    CU_add_test(v, "stdin_mode", test_stdin_mode);
    CU_add_test(v, "files and collect", test_files);
    CU_add_test(v, "tool manifests", test_tool);
    CU_add_test(v, "request hash, paths", test_request_hash_paths);
    CU_pSuite r = CU_add_suite("results", NULL, NULL);
    CU_add_test(r, "output cap", test_outbuf);
    CU_add_test(r, "output event order", test_outlog);
    CU_add_test(r, "output encoding", test_encoding);
    CU_add_test(r, "status mapping", test_status_mapping);
    CU_pSuite s = CU_add_suite("state machine", NULL, NULL);
    CU_add_test(s, "queued, running, terminal", test_state_machine);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures();
    CU_cleanup_registry();
    storage_down();
    eai_schema_free(schema);
    return failed ? 1 : 0;
}
