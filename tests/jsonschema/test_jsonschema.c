/*
 * JSON Schema validator, contract schemas and YAML->JSON.
 *
 *  - conformance: every case of the official draft-7 test suite (Debian's
 *    json-schema-test-suite) except those in draft7-skip.txt, each with a reason;
 *  - contracts: contracts/v1/NAME.schema.json against good and bad documents,
 *    checking the instance paths of the errors;
 *  - yaml: eai_yaml_to_json resolution, errors with line/column, alias bomb;
 *  - load: unknown keywords and other schema mistakes refused at load.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <CUnit/Basic.h>

#include "base/errors.h"
#include "schema/jsonschema.h"
#include "schema/yamljson.h"

static const char *source_dir;
static const char *suite_dir;
static struct eai_schema *exec_schema;
static struct eai_schema *tool_schema;

static void check(int cond, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void check(int cond, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!cond)
        fprintf(stderr, "\n  FAIL (line %d): %s\n", line, msg);
    CU_assertImplementation(cond ? CU_TRUE : CU_FALSE, (unsigned)line, msg, __FILE__, "", CU_FALSE);
}
#define CHECK(cond, ...) check((cond) ? 1 : 0, __LINE__, __VA_ARGS__)

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (!j)
        fprintf(stderr, "\nbad JSON in test: %s: %s\n", je.text, text);
    return j;
}

/* ------------------------------------------------------------ skip list */

struct skip {
    char *file;
    char *key;                 /* group description, or "group / test" */
    int used;
};
static struct skip *skips;
static size_t nskips;

static int load_skips(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        fprintf(stderr, "cannot open skip list %s\n", path);
        return -1;
    }
    char line[2048];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        char *colon = strstr(line, ": ");
        char *hash = strstr(line, " # ");
        if (!colon || !hash || hash < colon || hash[3] == '\0') {
            fprintf(stderr, "%s:%d: expected 'file: description  # reason'\n", path, lineno);
            rc = -1;
            continue;
        }
        char *end = hash;
        while (end > colon + 2 && end[-1] == ' ')
            end--;
        *end = '\0';
        *colon = '\0';
        struct skip *n = realloc(skips, (nskips + 1) * sizeof *n);
        if (!n)
            break;
        skips = n;
        skips[nskips].file = strdup(line);
        skips[nskips].key = strdup(colon + 2);
        skips[nskips].used = 0;
        nskips++;
    }
    fclose(f);
    return rc;
}

static int skipped(const char *file, const char *group, const char *test)
{
    char key[1024];
    if (test)
        snprintf(key, sizeof key, "%s / %s", group, test);
    else
        snprintf(key, sizeof key, "%s", group);
    for (size_t i = 0; i < nskips; i++)
        if (strcmp(skips[i].file, file) == 0 &&
            (strcmp(skips[i].key, key) == 0 || (!test && strcmp(skips[i].key, "*") == 0))) {
            skips[i].used = 1;
            return 1;
        }
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ------------------------------------------------------------ conformance */

static void test_draft7_suite(void)
{
    char dir[4096], path[4600], skip_path[4096];
    snprintf(dir, sizeof dir, "%s/tests/draft7", suite_dir);
    snprintf(skip_path, sizeof skip_path, "%s/tests/jsonschema/draft7-skip.txt", source_dir);
    CHECK(load_skips(skip_path) == 0, "skip list %s is well formed", skip_path);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "suite directory %s exists (apt-get install json-schema-test-suite)", dir);
    if (!d)
        return;
    char **names = NULL;
    size_t nnames = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l > 5 && strcmp(de->d_name + l - 5, ".json") == 0) {
            char **nn = realloc(names, (nnames + 1) * sizeof *nn);
            CU_ASSERT_PTR_NOT_NULL_FATAL(nn);
            names = nn;
            names[nnames++] = strdup(de->d_name);
        }
    }
    closedir(d);
    qsort(names, nnames, sizeof *names, name_cmp);
    size_t passed = 0, failed = 0, skipped_cases = 0;
    for (size_t fi = 0; fi < nnames; fi++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[fi]);
        json_error_t je;
        json_t *groups = json_load_file(path, 0, &je);
        CHECK(json_is_array(groups), "%s parses: %s", path, je.text);
        size_t gi;
        json_t *g;
        json_array_foreach(groups, gi, g) {
            const char *gdesc = json_string_value(json_object_get(g, "description"));
            json_t *tests = json_object_get(g, "tests");
            if (skipped(names[fi], gdesc, NULL)) {
                skipped_cases += json_array_size(tests);
                continue;
            }
            struct eai_error *err = NULL;
            struct eai_schema *s = eai_schema_load(json_object_get(g, "schema"), &err);
            CHECK(s != NULL, "%s: %s: schema loads (%s)", names[fi], gdesc,
                  err && err->message ? err->message : "");
            eai_error_free(err);
            size_t ti;
            json_t *t;
            json_array_foreach(tests, ti, t) {
                const char *tdesc = json_string_value(json_object_get(t, "description"));
                if (skipped(names[fi], gdesc, tdesc)) {
                    skipped_cases++;
                    continue;
                }
                if (!s) {
                    failed++;
                    continue;
                }
                int want = json_is_true(json_object_get(t, "valid"));
                json_t *data = json_object_get(t, "data");
                json_t *errors = NULL;
                int got = eai_schema_validate(s, data, &errors);
                int quick = eai_schema_validate(s, data, NULL);
                int consistent = got == quick && (got ? json_array_size(errors) == 0
                                                       : json_array_size(errors) > 0);
                if (got == want && consistent) {
                    passed++;
                } else {
                    failed++;
                    char *e = json_dumps(errors, JSON_COMPACT);
                    CHECK(0, "%s: %s / %s: expected %s, got %s (quick %d) errors %s", names[fi],
                          gdesc, tdesc, want ? "valid" : "invalid", got ? "valid" : "invalid",
                          quick, e ? e : "");
                    free(e);
                }
                json_decref(errors);
            }
            eai_schema_free(s);
        }
        json_decref(groups);
        free(names[fi]);
    }
    free(names);
    for (size_t i = 0; i < nskips; i++)
        CHECK(skips[i].used, "skip entry '%s: %s' matches a suite case", skips[i].file,
              skips[i].key);
    printf("\n  draft7 conformance: %zu files, %zu cases passed, %zu failed, %zu skipped "
           "(%zu skip-list entries)\n", nnames, passed, failed, skipped_cases, nskips);
    CHECK(passed > 300, "a meaningful part of the suite ran (%zu cases)", passed);
    CHECK(failed == 0, "no failing case (%zu)", failed);
}

/* ------------------------------------------------------------ helpers */

/* Validate text against s; expect validity, and when invalid that some error
 * has `path` (and message containing `needle` when not NULL). */
static void expect_doc(struct eai_schema *s, const char *text, int want_valid, const char *path,
                       const char *needle, int line)
{
    json_t *doc = parse(text);
    check(doc != NULL, line, "test document parses");
    if (!doc)
        return;
    json_t *errors = NULL;
    int got = eai_schema_validate(s, doc, &errors);
    char *es = json_dumps(errors, JSON_COMPACT);
    check(got == want_valid, line, "%s: expected %s, got %s: %s", text,
          want_valid ? "valid" : "invalid", got ? "valid" : "invalid", es ? es : "");
    check(eai_schema_validate(s, doc, NULL) == got, line, "quick mode agrees");
    if (!want_valid && path) {
        int found = 0;
        size_t i;
        json_t *e;
        json_array_foreach(errors, i, e) {
            const char *p = json_string_value(json_object_get(e, "path"));
            const char *m = json_string_value(json_object_get(e, "message"));
            if (p && strcmp(p, path) == 0 && (!needle || (m && strstr(m, needle))))
                found = 1;
        }
        check(found, line, "%s: an error at '%s'%s%s: %s", text, path,
              needle ? " saying " : "", needle ? needle : "", es ? es : "");
    }
    free(es);
    json_decref(errors);
    json_decref(doc);
}
#define VALID(s, text) expect_doc((s), (text), 1, NULL, NULL, __LINE__)
#define INVALID(s, text, path, needle) expect_doc((s), (text), 0, (path), (needle), __LINE__)

static struct eai_schema *load_contract(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/contracts/v1/%s.schema.json", source_dir, name);
    struct eai_error *err = NULL;
    struct eai_schema *s = eai_schema_load_file(path, &err);
    CHECK(s != NULL, "%s loads: %s", path, err && err->message ? err->message : "");
    eai_error_free(err);
    return s;
}

static int contracts_init(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/contracts/v1/sandbox-execution.schema.json", source_dir);
    exec_schema = eai_schema_load_file(path, NULL);
    snprintf(path, sizeof path, "%s/contracts/v1/tool-manifest.schema.json", source_dir);
    tool_schema = eai_schema_load_file(path, NULL);
    return 0;
}

static int contracts_clean(void)
{
    eai_schema_free(exec_schema);
    eai_schema_free(tool_schema);
    return 0;
}

/* ------------------------------------------------------------ sessions */

/* contracts/v1/session-create, session-network, session (issue 31). */
static void test_session_contracts(void)
{
    struct eai_schema *c = load_contract("session-create");
    struct eai_schema *n = load_contract("session-network");
    struct eai_schema *v = load_contract("session");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    VALID(c, "{\"image\": \"python:3.11-slim\"}");
    VALID(c, "{\"profile\": \"gvisor-small\", \"image\": \"python:3.11-slim\","
             " \"limits\": {\"cpu\": \"500m\", \"memory\": \"256Mi\", \"pids\": 128, \"disk\": \"64Mi\"},"
             " \"env\": {\"MODE\": \"dev\"}, \"idle_timeout_s\": 300, \"ttl_s\": 3600, \"paused_ttl_s\": 86400,"
             " \"max_concurrent_executions\": 1, \"auto_resume\": false, \"auto_pause\": true,"
             " \"network\": {\"egress\": [\"pypi.org:443\"]}, \"run_id\": \"r1\"}");
    INVALID(c, "{\"profile\": \"gvisor-small\"}", "/image", "required");
    INVALID(c, "{\"image\": \"python:3.11-slim\", \"limits\": {\"timeout_s\": 3}}", "/limits/timeout_s", NULL);
    INVALID(c, "{\"image\": \"python:3.11-slim\", \"auto_pause\": \"yes\"}", "/auto_pause", NULL);
    INVALID(c, "{\"image\": \"python:3.11-slim\", \"paused_ttl_s\": 0}", "/paused_ttl_s", NULL);
    VALID(n, "{\"egress\": []}");
    VALID(n, "{\"egress\": [\"pypi.org:443\", \"files.pythonhosted.org:443\"]}");
    INVALID(n, "{}", "/egress", "required");
    INVALID(n, "{\"egress\": [\"pypi.org\"]}", "/egress/0", NULL);
    INVALID(n, "{\"egress\": [], \"x\": 1}", "/x", NULL);
    VALID(v, "{\"id\": \"ses_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\", \"status\": \"paused\", \"profile\": \"p\","
             " \"image\": \"python:3.11-slim\", \"limits\": {}, \"idle_timeout_s\": 300, \"ttl_s\": 3600,"
             " \"paused_ttl_s\": 86400, \"max_concurrent_executions\": 1, \"created_at\": \"t\","
             " \"expires_at\": \"t\", \"last_used_at\": \"t\", \"ended_at\": null, \"end_reason\": null,"
             " \"executions\": 2, \"auto_resume\": false, \"auto_pause\": true, \"paused_at\": \"t\","
             " \"paused_by\": \"drain\", \"network\": {\"egress\": []}, \"usage\": null}");
    INVALID(v, "{\"id\": \"ses_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\", \"status\": \"asleep\", \"profile\": \"p\","
               " \"image\": \"i\", \"limits\": {}, \"idle_timeout_s\": 300, \"ttl_s\": 3600,"
               " \"paused_ttl_s\": 86400, \"max_concurrent_executions\": 1, \"created_at\": \"t\","
               " \"expires_at\": \"t\", \"ended_at\": null, \"end_reason\": null,"
               " \"executions\": 2, \"auto_resume\": false, \"auto_pause\": true, \"paused_at\": null,"
               " \"paused_by\": null, \"network\": {\"egress\": []}, \"usage\": null}", "/status", NULL);
    eai_schema_free(c);
    eai_schema_free(n);
    eai_schema_free(v);
}

/* contracts/v1/session-fork, snapshot (issue 34 item 1). */
static void test_snapshot_contracts(void)
{
    struct eai_schema *f = load_contract("session-fork");
    struct eai_schema *p = load_contract("snapshot");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    VALID(f, "{\"from_snapshot\": \"snp_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\"}");
    VALID(f, "{\"from_snapshot\": \"snp_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\", \"count\": 10,"
             " \"network\": {\"egress\": [\"pypi.org:443\"]}, \"idle_timeout_s\": 60, \"ttl_s\": 600,"
             " \"run_id\": \"r1\"}");
    INVALID(f, "{\"count\": 2}", "/from_snapshot", "required");
    INVALID(f, "{\"from_snapshot\": \"ses_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\"}", "/from_snapshot", NULL);
    INVALID(f, "{\"from_snapshot\": \"snp_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\", \"count\": 0}", "/count", NULL);
    INVALID(f, "{\"from_snapshot\": \"snp_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\", \"image\": \"i\"}", "/image",
            NULL);
    VALID(p, "{\"id\": \"snp_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\","
             " \"session_id\": \"ses_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\", \"status\": \"ready\","
             " \"size_bytes\": 8300000, \"created_at\": \"t\", \"expires_at\": \"t\", \"profile\": \"p\","
             " \"image\": \"python:3.11-slim\", \"forks\": 10}");
    INVALID(p, "{\"id\": \"snp_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\","
               " \"session_id\": \"ses_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10\", \"status\": \"sleeping\","
               " \"size_bytes\": 1, \"created_at\": \"t\", \"expires_at\": \"t\", \"forks\": 0}", "/status", NULL);
    eai_schema_free(f);
    eai_schema_free(p);
}

/* ------------------------------------------------------------ execution */

#define MIN_EXEC "\"image\": \"python:3.12-slim\", \"command\": [\"python\", \"-c\", \"print(2+2)\"]"

static void test_exec_basic(void)
{
    struct eai_schema *s = load_contract("sandbox-execution");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    eai_schema_free(s);
    s = exec_schema;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    VALID(s, "{" MIN_EXEC "}");
    /* The example of API.md. */
    VALID(s, "{\"profile\": \"gvisor-small\", \"image\": \"python:3.12-slim\","
             " \"command\": [\"python\", \"-c\", \"print(2+2)\"],"
             " \"limits\": {\"cpu\": \"500m\", \"memory\": \"256Mi\", \"timeout_s\": 30},"
             " \"env\": {\"K\": \"V\"}, \"stdin\": \"text\","
             " \"files\": [{\"path\": \"/tmp/in/data.csv\", \"content\": \"a,b\\n1,2\\n\"},"
             "            {\"path\": \"/tmp/in/blob.bin\", \"content_b64\": \"AAEC\"}],"
             " \"collect\": [\"/tmp/outputs\"], \"network\": {\"egress\": [\"example.org:443\"]},"
             " \"tool\": \"my-tool\", \"project_id\": \"p1\", \"agent_id\": \"a1\", \"run_id\": \"r1\"}");
    INVALID(s, "{" MIN_EXEC ", \"foo\": 1}", "/foo", "not allowed");
    INVALID(s, "{" MIN_EXEC ", \"profile\": 42}", "/profile", "type string");
    INVALID(s, "{" MIN_EXEC ", \"profile\": \"Bad Profile\"}", "/profile", "lower-case letters");
    VALID(s, "{\"image\": \"x\"}"); /* no command: the image's own (exec_validate asks the image store) */
    INVALID(s, "{\"command\": [\"true\"]}", "/image", "is required");
    INVALID(s, "{\"image\": \"x\", \"command\": []}", "/command", "at least 1");
    INVALID(s, "{\"image\": \"x\", \"command\": [\"a\", 2]}", "/command/1", "type string");
    INVALID(s, "{\"image\": \"x\", \"command\": \"ls -l\"}", "/command", "type array");
    INVALID(s, "[]", "", "type object");
    INVALID(s, "{\"image\": \"\", \"command\": [\"true\"]}", "/image", NULL);
    INVALID(s, "{" MIN_EXEC ", \"stdin\": 5}", "/stdin", NULL);
    VALID(s, "{" MIN_EXEC ", \"run_id\": \"" "0123456789012345678901234567890123456789"
             "0123456789012345678901234567890123456789012345678901234567890123456789"
             "012345678901234567\"}");
    INVALID(s, "{" MIN_EXEC ", \"run_id\": \"" "0123456789012345678901234567890123456789"
               "0123456789012345678901234567890123456789012345678901234567890123456789"
               "0123456789012345678\"}", "/run_id", "at most 128");
    INVALID(s, "{" MIN_EXEC ", \"agent_id\": \"\"}", "/agent_id", NULL);
}

static void test_exec_command_bounds(void)
{
    struct eai_schema *s = exec_schema;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    /* 256 arguments pass, 257 do not; one argument of 65537 characters fails. */
    size_t cap = 257 * 6 + 200;
    char *doc = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    for (int n = 256; n <= 257; n++) {
        size_t len = (size_t)snprintf(doc, cap, "{\"image\": \"x\", \"command\": [");
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(doc + len, cap - len, "%s\"a\"", i ? "," : "");
        snprintf(doc + len, cap - len, "]}");
        if (n == 256)
            VALID(s, doc);
        else
            INVALID(s, doc, "/command", "at most 256");
    }
    free(doc);
    json_t *big = json_pack("{s:s,s:[s]}", "image", "x", "command", "x");
    char *arg = malloc(65538);
    CU_ASSERT_PTR_NOT_NULL_FATAL(arg);
    memset(arg, 'a', 65537);
    arg[65537] = '\0';
    json_array_append_new(json_object_get(big, "command"), json_string(arg));
    json_t *errors = NULL;
    CU_ASSERT_EQUAL(eai_schema_validate(s, big, &errors), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(errors, 0), "path")),
                           "/command/1");
    json_decref(errors);
    arg[65536] = '\0';
    json_array_set_new(json_object_get(big, "command"), 1, json_string(arg));
    CU_ASSERT_EQUAL(eai_schema_validate(s, big, NULL), 1);
    free(arg);
    json_decref(big);
}

static void test_exec_limits(void)
{
    struct eai_schema *s = exec_schema;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const char *good[] = {
        "{\"cpu\": \"500m\"}", "{\"cpu\": \"1\"}", "{\"cpu\": \"0.5\"}", "{\"cpu\": \"2.125\"}",
        "{\"cpu\": 2}", "{\"cpu\": 0.25}", "{\"memory\": \"256Mi\"}", "{\"memory\": \"1Gi\"}",
        "{\"memory\": \"1.5Gi\"}", "{\"memory\": \"500M\"}", "{\"memory\": \"128974848\"}",
        "{\"memory\": 268435456}", "{\"memory\": 268435456.0}", "{\"disk\": \"1Gi\"}",
        "{\"timeout_s\": 30}", "{\"timeout_s\": 30.0}", "{\"pids\": 128}",
        "{\"output_bytes\": 1048576}", "{}",
    };
    char doc[512];
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        snprintf(doc, sizeof doc, "{" MIN_EXEC ", \"limits\": %s}", good[i]);
        VALID(s, doc);
    }
    struct { const char *limits, *path, *needle; } bad[] = {
        {"{\"cpu\": \"500mm\"}", "/limits/cpu", "CPU quantity"},
        {"{\"cpu\": \"1.2345\"}", "/limits/cpu", "CPU quantity"},
        {"{\"cpu\": \"abc\"}", "/limits/cpu", "CPU quantity"},
        {"{\"cpu\": \"-1\"}", "/limits/cpu", "CPU quantity"},
        {"{\"cpu\": -1}", "/limits/cpu", "> 0"},
        {"{\"cpu\": 0}", "/limits/cpu", "> 0"},
        {"{\"cpu\": true}", "/limits/cpu", "must be of type number or string, not boolean"},
        {"{\"memory\": \"256MB\"}", "/limits/memory", "byte quantity"},
        {"{\"memory\": \"1 Gi\"}", "/limits/memory", "byte quantity"},
        {"{\"memory\": \"-1\"}", "/limits/memory", "byte quantity"},
        {"{\"memory\": 1.5}", "/limits/memory", "type string or integer"},
        {"{\"memory\": 0}", "/limits/memory", ">= 1"},
        {"{\"memory\": null}", "/limits/memory", NULL},
        {"{\"disk\": \"lots\"}", "/limits/disk", "byte quantity"},
        {"{\"timeout_s\": 0}", "/limits/timeout_s", ">= 1"},
        {"{\"timeout_s\": 1.5}", "/limits/timeout_s", "type integer"},
        {"{\"timeout_s\": \"30\"}", "/limits/timeout_s", "type integer"},
        {"{\"pids\": 0}", "/limits/pids", ">= 1"},
        {"{\"output_bytes\": -5}", "/limits/output_bytes", ">= 1"},
        {"{\"gpu\": 1}", "/limits/gpu", "not allowed"},
        {"[]", "/limits", "type object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(doc, sizeof doc, "{" MIN_EXEC ", \"limits\": %s}", bad[i].limits);
        INVALID(s, doc, bad[i].path, bad[i].needle);
    }
}

static void test_exec_env_files_collect_network(void)
{
    struct eai_schema *s = exec_schema;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    VALID(s, "{" MIN_EXEC ", \"env\": {\"K\": \"V\", \"_x1\": \"\", \"PATH\": \"/bin\"}}");
    INVALID(s, "{" MIN_EXEC ", \"env\": {\"1BAD\": \"x\"}}", "/env/1BAD", "start with a letter");
    INVALID(s, "{" MIN_EXEC ", \"env\": {\"A-B\": \"x\"}}", "/env/A-B", "start with a letter");
    INVALID(s, "{" MIN_EXEC ", \"env\": {\"K\": 1}}", "/env/K", "type string");
    INVALID(s, "{" MIN_EXEC ", \"env\": [\"K=V\"]}", "/env", "type object");
    /* 128 variables pass, 129 do not. */
    json_t *doc = json_pack("{s:s,s:[s]}", "image", "x", "command", "true");
    json_t *env = json_object();
    char name[16];
    for (int i = 0; i < 129; i++) {
        snprintf(name, sizeof name, "V%d", i);
        json_object_set_new(env, name, json_string("x"));
        if (i == 127) {
            json_object_set(doc, "env", env);
            CU_ASSERT_EQUAL(eai_schema_validate(s, doc, NULL), 1);
        }
    }
    json_object_set_new(doc, "env", env);
    json_t *errors = NULL;
    CU_ASSERT_EQUAL(eai_schema_validate(s, doc, &errors), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(errors, 0), "path")),
                           "/env");
    json_decref(errors);
    json_decref(doc);

    VALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/a\", \"content\": \"\"}]}");
    VALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/d/b.bin\", \"content_b64\": \"AAECAw==\"}]}");
    INVALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/a\", \"content\": \"x\", \"content_b64\": \"eA==\"}]}",
            "/files/0", "more than one");
    INVALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/a\"}]}", "/files/0", "oneOf");
    INVALID(s, "{" MIN_EXEC ", \"files\": [{\"content\": \"x\"}]}", "/files/0/path", "is required");
    INVALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/etc/passwd\", \"content\": \"x\"}]}",
            "/files/0/path", "file path under /tmp/");
    INVALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/../etc/passwd\", \"content\": \"x\"}]}",
            "/files/0/path", "file path under /tmp/");
    INVALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/a/..\", \"content\": \"x\"}]}",
            "/files/0/path", "file path under /tmp/");
    VALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/a..b/..c\", \"content\": \"x\"}]}");
    INVALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/\", \"content\": \"x\"}]}",
            "/files/0/path", "file path under /tmp/");
    INVALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/a\", \"content_b64\": \"!!\"}]}",
            "/files/0/content_b64", "base64");
    INVALID(s, "{" MIN_EXEC ", \"files\": [{\"path\": \"/tmp/a\", \"content\": \"x\", \"mode\": 420}]}",
            "/files/0/mode", "not allowed");

    VALID(s, "{" MIN_EXEC ", \"collect\": [\"/tmp/outputs\", \"/tmp\", \"/tmp/\"]}");
    INVALID(s, "{" MIN_EXEC ", \"collect\": [\"/tmpx\"]}", "/collect/0", "path under /tmp/");
    INVALID(s, "{" MIN_EXEC ", \"collect\": [\"/tmp/ok\", \"/var/log\"]}", "/collect/1", "path under /tmp/");
    INVALID(s, "{" MIN_EXEC ", \"collect\": [\"/tmp/../root\"]}", "/collect/0", "path under /tmp/");
    INVALID(s, "{" MIN_EXEC ", \"collect\": [\"/tmp/1\",\"/tmp/2\",\"/tmp/3\",\"/tmp/4\",\"/tmp/5\","
               "\"/tmp/6\",\"/tmp/7\",\"/tmp/8\",\"/tmp/9\",\"/tmp/10\",\"/tmp/11\",\"/tmp/12\","
               "\"/tmp/13\",\"/tmp/14\",\"/tmp/15\",\"/tmp/16\",\"/tmp/17\"]}", "/collect", "at most 16");

    VALID(s, "{" MIN_EXEC ", \"network\": {}}");
    VALID(s, "{" MIN_EXEC ", \"network\": {\"egress\": [\"example.org:443\", \"10.0.0.1:5432\","
             " \"[::1]:8080\", \"a-b.c.example:1\"]}}");
    INVALID(s, "{" MIN_EXEC ", \"network\": {\"egress\": [\"example.org\"]}}", "/network/egress/0", "host:port");
    INVALID(s, "{" MIN_EXEC ", \"network\": {\"egress\": [\"example.org:70000\"]}}", "/network/egress/0", "host:port");
    INVALID(s, "{" MIN_EXEC ", \"network\": {\"egress\": [\"example.org:0\"]}}", "/network/egress/0", "host:port");
    INVALID(s, "{" MIN_EXEC ", \"network\": {\"egress\": [\"http://example.org:80\"]}}", "/network/egress/0", "host:port");
    INVALID(s, "{" MIN_EXEC ", \"network\": {\"ingress\": []}}", "/network/ingress", "not allowed");
    INVALID(s, "{" MIN_EXEC ", \"network\": true}", "/network", "type object");
}

static void test_exec_many_errors(void)
{
    struct eai_schema *s = exec_schema;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    json_t *doc = parse("{\"command\": [], \"foo\": 1, \"limits\": {\"cpu\": \"x\", \"memory\": \"y\"}}");
    json_t *errors = NULL;
    CU_ASSERT_EQUAL(eai_schema_validate(s, doc, &errors), 0);
    const char *want[] = {"/image", "/command", "/foo", "/limits/cpu", "/limits/memory"};
    for (size_t w = 0; w < sizeof want / sizeof *want; w++) {
        int found = 0;
        size_t i;
        json_t *e;
        json_array_foreach(errors, i, e) {
            CU_ASSERT(json_is_string(json_object_get(e, "message")));
            if (strcmp(json_string_value(json_object_get(e, "path")), want[w]) == 0)
                found = 1;
        }
        CHECK(found, "an error at %s", want[w]);
    }
    json_decref(errors);
    json_decref(doc);
}

/* ------------------------------------------------------------ tool manifest */

#define TOOL_HEAD "\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": \"my-tool\"}"

static void test_tool_manifest(void)
{
    struct eai_schema *s = load_contract("tool-manifest");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    eai_schema_free(s);
    s = tool_schema;
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    VALID(s, "{" TOOL_HEAD ", \"spec\": {\"sandbox_profile\": \"gvisor-small\"}}");
    VALID(s, "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\","
             " \"metadata\": {\"name\": \"a\", \"labels\": {\"team\": \"ml\", \"eai.dev/tier\": \"gold\", \"x\": \"\"}},"
             " \"spec\": {\"sandbox_profile\": \"gvisor-small\", \"image\": \"python:3.12-slim\","
             " \"command\": [\"python\", \"/app/tool.py\"], \"limits\": {\"cpu\": \"1\", \"memory\": \"512Mi\","
             " \"timeout_s\": 60, \"pids\": 64, \"output_bytes\": 65536, \"disk\": \"1Gi\"},"
             " \"env\": {\"MODE\": \"fast\"}, \"egress\": [\"api.example.com:443\"],"
             " \"description\": \"Runs the tool.\"}}");
    INVALID(s, "{" TOOL_HEAD ", \"spec\": {\"sandbox_profile\": 42}}", "/spec/sandbox_profile", "type string");
    INVALID(s, "{" TOOL_HEAD ", \"spec\": {}}", "/spec/sandbox_profile", "is required");
    INVALID(s, "{" TOOL_HEAD ", \"spec\": {\"sandbox_profile\": \"p\", \"sandboxProfile\": \"p\"}}",
            "/spec/sandboxProfile", "not allowed");
    INVALID(s, "{" TOOL_HEAD ", \"spec\": {\"sandbox_profile\": \"Gvisor_Small\"}}", "/spec/sandbox_profile", "lower-case letters");
    INVALID(s, "{" TOOL_HEAD ", \"spec\": {\"sandbox_profile\": \"p\", \"command\": []}}", "/spec/command", "at least 1");
    INVALID(s, "{" TOOL_HEAD ", \"spec\": {\"sandbox_profile\": \"p\", \"limits\": {\"memory\": \"2GB\"}}}",
            "/spec/limits/memory", "byte quantity");
    INVALID(s, "{" TOOL_HEAD ", \"spec\": {\"sandbox_profile\": \"p\", \"egress\": [\"host\"]}}",
            "/spec/egress/0", "host:port");
    INVALID(s, "{" TOOL_HEAD "}", "/spec", "is required");
    INVALID(s, "{\"apiVersion\": \"v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": \"t\"}, \"spec\": {\"sandbox_profile\": \"p\"}}",
            "/apiVersion", "\"eai.dev/v1\"");
    INVALID(s, "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"t\"}, \"spec\": {\"sandbox_profile\": \"p\"}}",
            "/kind", "\"Tool\"");
    INVALID(s, "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": \"Bad_Name\"}, \"spec\": {\"sandbox_profile\": \"p\"}}",
            "/metadata/name", "lower-case letters");
    INVALID(s, "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": \"-a\"}, \"spec\": {\"sandbox_profile\": \"p\"}}",
            "/metadata/name", "lower-case letters");
    INVALID(s, "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": "
               "\"a234567890123456789012345678901234567890123456789012345678901234\"}, \"spec\": {\"sandbox_profile\": \"p\"}}",
            "/metadata/name", NULL);
    VALID(s, "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": "
             "\"a23456789012345678901234567890123456789012345678901234567890123\"}, \"spec\": {\"sandbox_profile\": \"p\"}}");
    INVALID(s, "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": \"t\", \"namespace\": \"x\"}, \"spec\": {\"sandbox_profile\": \"p\"}}",
            "/metadata/namespace", "not allowed");
    INVALID(s, "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": \"t\", \"labels\": {\"bad key!\": \"x\"}}, \"spec\": {\"sandbox_profile\": \"p\"}}",
            "/metadata/labels/bad key!", "label key");
    INVALID(s, "{\"apiVersion\": \"eai.dev/v1\", \"kind\": \"Tool\", \"metadata\": {\"name\": \"t\", \"labels\": {\"k\": 1}}, \"spec\": {\"sandbox_profile\": \"p\"}}",
            "/metadata/labels/k", "type string");
}

/* The shared definitions are copies (only local $ref): keep them equal. */
static void test_contract_defs_in_sync(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/contracts/v1/sandbox-execution.schema.json", source_dir);
    json_t *a = json_load_file(path, 0, NULL);
    snprintf(path, sizeof path, "%s/contracts/v1/tool-manifest.schema.json", source_dir);
    json_t *b = json_load_file(path, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    json_t *da = json_object_get(a, "$defs"), *db = json_object_get(b, "$defs");
    const char *k;
    json_t *v;
    size_t shared = 0;
    json_object_foreach(db, k, v) {
        CHECK(json_equal(v, json_object_get(da, k)), "$defs/%s is the same in both contracts", k);
        shared++;
    }
    CU_ASSERT(shared >= 7);
    json_decref(a);
    json_decref(b);
}

/* ------------------------------------------------------------ YAML */

static json_t *yaml(const char *text, char **msg)
{
    struct eai_error *err = NULL;
    json_t *j = eai_yaml_to_json(text, strlen(text), &err);
    if (msg)
        *msg = err && err->message ? strdup(err->message) : NULL;
    if (err) {
        CU_ASSERT_EQUAL(err->code, EAI_E_INVALID_JSON);
        CU_ASSERT(json_is_array(err->details));
    }
    eai_error_free(err);
    return j;
}

static void expect_yaml(const char *text, const char *json_text, int line)
{
    char *msg = NULL;
    json_t *got = yaml(text, &msg);
    json_t *want = parse(json_text);
    char *gs = got ? json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS) : NULL;
    check(got && want && json_equal(got, want), line, "YAML %s -> %s, got %s (%s)", text,
          json_text, gs ? gs : "NULL", msg ? msg : "");
    free(gs);
    free(msg);
    json_decref(got);
    json_decref(want);
}
#define YAML_IS(text, json) expect_yaml((text), (json), __LINE__)

static void expect_yaml_error(const char *text, const char *needle, const char *where, int line)
{
    char *msg = NULL;
    json_t *got = yaml(text, &msg);
    check(got == NULL, line, "YAML '%s' refused", text);
    check(msg && strstr(msg, needle), line, "message '%s' mentions '%s'", msg ? msg : "", needle);
    if (where)
        check(msg && strstr(msg, where), line, "message '%s' has position '%s'", msg ? msg : "",
              where);
    free(msg);
    json_decref(got);
}
#define YAML_ERR(text, needle, where) expect_yaml_error((text), (needle), (where), __LINE__)

static void test_yaml_scalars(void)
{
    YAML_IS("a: ~\nb: null\nc:\nd: Null\n", "{\"a\":null,\"b\":null,\"c\":null,\"d\":null}");
    YAML_IS("[true, True, TRUE, false, False, FALSE]", "[true,true,true,false,false,false]");
    YAML_IS("[yes, no, on, off, y, n]", "[\"yes\",\"no\",\"on\",\"off\",\"y\",\"n\"]");
    YAML_IS("[0, 42, -7, +3, 042, 0x1F, 0o17]", "[0,42,-7,3,42,31,15]");
    YAML_IS("[1.5, -0.25, 1e3, .5, 2.e1, 6.02E+23]", "[1.5,-0.25,1000.0,0.5,20.0,6.02e23]");
    YAML_IS("['42', \"true\", \"null\", '', \"1.5\"]", "[\"42\",\"true\",\"null\",\"\",\"1.5\"]");
    YAML_IS("[0x, 0o8, 1_000, 1.2.3, 12:30, -, .]",
            "[\"0x\",\"0o8\",\"1_000\",\"1.2.3\",\"12:30\",\"-\",\".\"]");
    YAML_IS("image: python:3.12-slim\nversion: 3.12\n",
            "{\"image\":\"python:3.12-slim\",\"version\":3.12}");
    YAML_IS("[!!str 42, !!str true, !!int \"7\", !!float 1, !!bool \"false\", !!null '']",
            "[\"42\",\"true\",7,1.0,false,null]");
    YAML_IS("! 42", "\"42\"");
    YAML_IS("s: \"caf\\u00e9 \\t x\"\n", "{\"s\":\"caf\\u00e9 \\t x\"}");
    YAML_IS("lit: |\n  line1\n  line2\nfold: >\n  a\n  b\n",
            "{\"lit\":\"line1\\nline2\\n\",\"fold\":\"a b\\n\"}");
    YAML_IS("9223372036854775807", "9223372036854775807");
    YAML_IS("", "null");
    YAML_IS("# only a comment\n", "null");
    YAML_IS("---\nx: 1\n...\n", "{\"x\":1}");
    YAML_ERR("[.inf]", "cannot be represented", "line 1, column 2");
    YAML_ERR("x: .NaN", "cannot be represented", "line 1");
    YAML_ERR("x: 9223372036854775808", "out of range", "line 1, column 4");
    YAML_ERR("x: !!int abc", "not a valid value", NULL);
    YAML_ERR("x: !custom 1", "unsupported tag", NULL);
}

static void test_yaml_structure(void)
{
    YAML_IS("a:\n  b: [1, {c: d}]\n  e:\n    - x\n    - - y\n", "{\"a\":{\"b\":[1,{\"c\":\"d\"}],\"e\":[\"x\",[\"y\"]]}}");
    YAML_IS("{1: a, true: b, null: c, 1.5: d}", "{\"1\":\"a\",\"true\":\"b\",\"null\":\"c\",\"1.5\":\"d\"}");
    YAML_IS("base: &b {x: 1}\nuse: *b\nk: &s key\n*s : v\n",
            "{\"base\":{\"x\":1},\"use\":{\"x\":1},\"k\":\"key\",\"key\":\"v\"}");
    YAML_IS("<<: 1\n", "{\"<<\":1}");
    YAML_ERR("a: 1\nb: 2\na: 3\n", "duplicate mapping key 'a'", "line 3, column 1");
    YAML_ERR("a: 1\n---\nb: 2\n", "only one YAML document", "line 2");
    YAML_ERR("a: [1, 2\nb: 3\n", "line", NULL);
    YAML_ERR("a: b: c\n", "mapping values are not allowed", "line 1, column 5");
    YAML_ERR("x: *nope\n", "unknown alias", "line 1, column 4");
    YAML_ERR("? [a]\n: b\n", "mapping keys must be scalars", "line 1");
    YAML_ERR("a: &x [1, *x]\n", "unknown alias", NULL);
    /* Nesting bound. */
    char deep[EAI_YAML_MAX_DEPTH * 2 + 8];
    size_t n = 0;
    for (int i = 0; i < EAI_YAML_MAX_DEPTH + 1; i++)
        deep[n++] = '[';
    for (int i = 0; i < EAI_YAML_MAX_DEPTH + 1; i++)
        deep[n++] = ']';
    deep[n] = '\0';
    YAML_ERR(deep, "nesting deeper", NULL);
    deep[EAI_YAML_MAX_DEPTH] = '\0';
    memset(deep + EAI_YAML_MAX_DEPTH - 1, ']', 1);
    n = 0;
    for (int i = 0; i < EAI_YAML_MAX_DEPTH; i++)
        deep[n++] = '[';
    for (int i = 0; i < EAI_YAML_MAX_DEPTH; i++)
        deep[n++] = ']';
    deep[n] = '\0';
    json_t *ok = yaml(deep, NULL);
    CU_ASSERT(json_is_array(ok));
    json_decref(ok);
}

static void test_yaml_alias_bomb(void)
{
    const char *bomb =
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
        "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
        "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
        "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
        "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
        "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n";
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    YAML_ERR(bomb, "expands to", "line 4");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECK(ms < 1000, "alias bomb refused quickly (%.1f ms)", ms);
}

/* Few nodes, many bytes: one long anchored string aliased many times stays
 * far under the node budget; the byte budget (4 x input + 64 KiB) refuses
 * it before the copies are made.  Issue 16, item 2. */
static void test_yaml_alias_byte_bomb(void)
{
    enum { STR = 4096, USES = 20000 };
    size_t cap = STR + 64 + (size_t)USES * 4;
    char *doc = malloc(cap);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    size_t n = (size_t)snprintf(doc, cap, "s: &s \"");
    memset(doc + n, 'x', STR);
    n += STR;
    n += (size_t)snprintf(doc + n, cap - n, "\"\nl: [");
    for (int i = 0; i < USES; i++)
        n += (size_t)snprintf(doc + n, cap - n, "%s*s", i ? "," : "");
    n += (size_t)snprintf(doc + n, cap - n, "]\n");
    /* ~84 KB of YAML that would expand to ~80 MB of JSON */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct eai_error *err = NULL;
    json_t *j = eai_yaml_to_json(doc, n, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECK(j == NULL, "a %zu-byte document expanding to ~%d MB is refused", n, STR * USES / 1000000);
    CHECK(err && err->code == EAI_E_INVALID_JSON && err->message && strstr(err->message, "bytes"),
          "refused for its expanded bytes: %s", err && err->message ? err->message : "(none)");
    CHECK(ms < 500, "refused quickly (%.1f ms)", ms);
    json_decref(j);
    eai_error_free(err);
    /* The same shape under the budget: 16 uses of a 4 KB string (~66 KB
     * expanded from ~4.2 KB, budget 4 x 4.2 KB + 64 KiB ~ 82 KB) pass. */
    n = (size_t)snprintf(doc, cap, "s: &s \"");
    memset(doc + n, 'x', STR);
    n += STR;
    n += (size_t)snprintf(doc + n, cap - n, "\"\nl: [");
    for (int i = 0; i < 16; i++)
        n += (size_t)snprintf(doc + n, cap - n, "%s*s", i ? "," : "");
    n += (size_t)snprintf(doc + n, cap - n, "]\n");
    err = NULL;
    j = eai_yaml_to_json(doc, n, &err);
    CHECK(j && json_array_size(json_object_get(j, "l")) == 16 &&
              json_string_length(json_array_get(json_object_get(j, "l"), 15)) == STR,
          "16 uses of a 4 KB anchor (~70 KB) are expanded: %s", err && err->message ? err->message : "");
    json_decref(j);
    eai_error_free(err);
    free(doc);
}

/* A manifest that shares its limits and env through anchors still parses. */
static void test_yaml_anchored_manifest(void)
{
    YAML_IS("defaults: &d {cpu: 500m, memory: 256Mi, timeout_s: 30}\n"
            "env: &e {LANG: C.UTF-8, TZ: UTC}\n"
            "tools:\n"
            "  - {name: a, limits: *d, env: *e}\n"
            "  - {name: b, limits: *d, env: *e}\n"
            "  - {name: c, limits: *d, env: *e}\n",
            "{\"defaults\":{\"cpu\":\"500m\",\"memory\":\"256Mi\",\"timeout_s\":30},"
            "\"env\":{\"LANG\":\"C.UTF-8\",\"TZ\":\"UTC\"},\"tools\":["
            "{\"name\":\"a\",\"limits\":{\"cpu\":\"500m\",\"memory\":\"256Mi\",\"timeout_s\":30},\"env\":{\"LANG\":\"C.UTF-8\",\"TZ\":\"UTC\"}},"
            "{\"name\":\"b\",\"limits\":{\"cpu\":\"500m\",\"memory\":\"256Mi\",\"timeout_s\":30},\"env\":{\"LANG\":\"C.UTF-8\",\"TZ\":\"UTC\"}},"
            "{\"name\":\"c\",\"limits\":{\"cpu\":\"500m\",\"memory\":\"256Mi\",\"timeout_s\":30},\"env\":{\"LANG\":\"C.UTF-8\",\"TZ\":\"UTC\"}}]}");
}

static void test_yaml_manifest(void)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(tool_schema);
    const char *good =
        "apiVersion: eai.dev/v1\n"
        "kind: Tool\n"
        "metadata:\n"
        "  name: csv-stats\n"
        "  labels: {team: data}\n"
        "spec:\n"
        "  sandbox_profile: gvisor-small\n"
        "  image: python:3.12-slim\n"
        "  command: [python, -c, 'print(1)']\n"
        "  limits:\n"
        "    cpu: 500m\n"
        "    memory: 256Mi\n"
        "    timeout_s: 30\n"
        "  env:\n"
        "    LANG: C.UTF-8\n"
        "  description: |\n"
        "    Summarises a CSV file.\n";
    json_t *doc = yaml(good, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    json_t *errors = NULL;
    int ok = eai_schema_validate(tool_schema, doc, &errors);
    char *es = json_dumps(errors, JSON_COMPACT);
    CHECK(ok == 1, "YAML manifest is valid: %s", es ? es : "");
    free(es);
    json_decref(errors);
    json_decref(doc);
    /* Plain scalars resolve: 42 is an integer, so the path names it. */
    doc = yaml("apiVersion: eai.dev/v1\nkind: Tool\nmetadata: {name: t}\nspec:\n  sandbox_profile: 42\n"
               "  limits: {cpu: 1, memory: 1.5}\n", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    CU_ASSERT_EQUAL(eai_schema_validate(tool_schema, doc, &errors), 0);
    CU_ASSERT_EQUAL(json_array_size(errors), 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(errors, 0), "path")),
                           "/spec/sandbox_profile");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(errors, 1), "path")),
                           "/spec/limits/memory");
    json_decref(errors);
    json_decref(doc);
}

/* ------------------------------------------------------------ load */

static void expect_load_error(const char *schema, const char *needle1, const char *needle2, int line)
{
    json_t *j = parse(schema);
    struct eai_error *err = NULL;
    struct eai_schema *s = eai_schema_load(j, &err);
    check(s == NULL, line, "schema %s refused", schema);
    const char *m = err && err->message ? err->message : "";
    check(strstr(m, needle1) != NULL, line, "message '%s' mentions '%s'", m, needle1);
    if (needle2)
        check(strstr(m, needle2) != NULL, line, "message '%s' mentions '%s'", m, needle2);
    check(err && err->code == EAI_E_VALIDATION_FAILED, line, "validation_failed code");
    eai_schema_free(s);
    eai_error_free(err);
    json_decref(j);
}
#define LOAD_ERR(schema, n1, n2) expect_load_error((schema), (n1), (n2), __LINE__)

static struct eai_schema *load_text(const char *text)
{
    json_t *j = parse(text);
    struct eai_error *err = NULL;
    struct eai_schema *s = eai_schema_load(j, &err);
    CHECK(s != NULL, "schema %s loads: %s", text, err && err->message ? err->message : "");
    eai_error_free(err);
    json_decref(j);
    return s;
}

static void test_load_refusals(void)
{
    LOAD_ERR("{\"properties\": {\"a\": {\"typo\": 1}}}", "unknown keyword 'typo'", "/properties/a/typo");
    LOAD_ERR("{\"type\": \"object\", \"additionalproperties\": false}", "'additionalproperties'", "/additionalproperties");
    LOAD_ERR("{\"$defs\": {\"x~y/z\": {\"minimun\": 1}}}", "'minimun'", "/$defs/x~0y~1z/minimun");
    LOAD_ERR("{\"unevaluatedProperties\": false}", "unknown keyword", NULL);
    LOAD_ERR("{\"$anchor\": \"a\"}", "unknown keyword", NULL);
    LOAD_ERR("{\"type\": \"strin\"}", "unknown type", "/");
    LOAD_ERR("{\"pattern\": \"(\"}", "invalid regular expression", NULL);
    LOAD_ERR("{\"patternProperties\": {\"[\": {}}}", "invalid regular expression", "/patternProperties/[");
    LOAD_ERR("{\"$ref\": \"other.json#/x\"}", "only local", NULL);
    LOAD_ERR("{\"$ref\": \"#/$defs/missing\"}", "not found", NULL);
    LOAD_ERR("{\"$ref\": \"#foo\"}", "JSON-pointer", NULL);
    LOAD_ERR("{\"$ref\": \"#/%zz\"}", "percent", NULL);
    LOAD_ERR("{\"minLength\": -1}", "non-negative integer", NULL);
    LOAD_ERR("{\"maxItems\": 1.5}", "non-negative integer", NULL);
    LOAD_ERR("{\"multipleOf\": 0}", "> 0", NULL);
    LOAD_ERR("{\"required\": [1]}", "array of strings", NULL);
    LOAD_ERR("{\"anyOf\": []}", "non-empty array", NULL);
    LOAD_ERR("{\"items\": 3}", "object or a boolean", "/items");
    LOAD_ERR("{\"exclusiveMinimum\": true}", "must be a number", NULL);
    LOAD_ERR("{\"prefixItems\": [{}], \"items\": [{}]}", "prefixItems", NULL);
    LOAD_ERR("3", "object or a boolean", NULL);
    /* Annotations are accepted and ignored. */
    struct eai_schema *s = load_text(
        "{\"$schema\": \"https://json-schema.org/draft/2020-12/schema\", \"$id\": \"urn:x\","
        " \"$comment\": \"c\", \"title\": \"t\", \"description\": \"d\", \"default\": 1,"
        " \"examples\": [1], \"format\": \"email\", \"deprecated\": true, \"readOnly\": false,"
        " \"writeOnly\": false, \"definitions\": {}, \"$defs\": {}}");
    json_t *str = json_string("not an email");
    CU_ASSERT_EQUAL(eai_schema_validate(s, str, NULL), 1);
    json_decref(str);
    eai_schema_free(s);
    /* A file that does not exist or is not JSON. */
    struct eai_error *err = NULL;
    CU_ASSERT_PTR_NULL(eai_schema_load_file("/nonexistent/x.json", &err));
    CU_ASSERT(err && err->code == EAI_E_INVALID_JSON);
    eai_error_free(err);
}

static void test_semantics(void)
{
    /* JSON equality: 1 == 1.0 in enum, const and uniqueItems; integers. */
    struct eai_schema *s = load_text("{\"uniqueItems\": true}");
    json_t *v = parse("[1, 1.0]");
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, NULL), 0);
    json_decref(v);
    v = parse("[{\"a\": 1, \"b\": [2]}, {\"b\": [2.0], \"a\": 1.0}]");
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, NULL), 0);
    json_decref(v);
    v = parse("[1, \"1\", true, null, [1], {\"1\": 1}, 0, false]");
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, NULL), 1);
    json_decref(v);
    eai_schema_free(s);

    s = load_text("{\"type\": \"integer\", \"enum\": [1, 2]}");
    v = parse("2.0");
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, NULL), 1);
    json_decref(v);
    v = parse("1.5");
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, NULL), 0);
    json_decref(v);
    eai_schema_free(s);

    /* Length counts code points, not bytes. */
    s = load_text("{\"minLength\": 3, \"maxLength\": 3}");
    v = json_string("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, NULL), 1);
    json_decref(v);
    v = json_string("ab");
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, NULL), 0);
    json_decref(v);
    eai_schema_free(s);

    /* Regex: UTF-8 aware, $ only at the very end (ECMA), \uXXXX escapes. */
    s = load_text("{\"pattern\": \"^.\\\\u00e9$\"}");
    v = json_string("x\xc3\xa9");
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, NULL), 1);
    json_decref(v);
    v = json_string("x\xc3\xa9\n");
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, NULL), 0);
    json_decref(v);
    eai_schema_free(s);

    /* Catastrophic backtracking stops at the match limit, quickly. */
    s = load_text("{\"pattern\": \"^(a+)+$\"}");
    v = json_string("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    json_t *errors = NULL;
    CU_ASSERT_EQUAL(eai_schema_validate(s, v, &errors), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECK(ms < 2000, "ReDoS pattern bounded (%.1f ms)", ms);
    json_decref(errors);
    json_decref(v);
    eai_schema_free(s);

    /* A long base64 payload matches the content_b64 pattern fast. */
    CU_ASSERT_PTR_NOT_NULL_FATAL(exec_schema);
    size_t big = 8u << 20;
    char *b64 = malloc(big + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b64);
    memset(b64, 'A', big);
    b64[big] = '\0';
    json_t *doc = json_pack("{s:s,s:[s],s:[{s:s,s:s}]}", "image", "x", "command", "true", "files",
                            "path", "/tmp/big", "content_b64", b64);
    free(b64);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU_ASSERT_EQUAL(eai_schema_validate(exec_schema, doc, NULL), 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECK(ms < 2000, "8 MiB base64 validated in %.1f ms", ms);
    json_decref(doc);
}

static void test_ref_cycles_and_caps(void)
{
    /* A $ref cycle that never consumes instance stops at the depth bound. */
    struct eai_schema *s = load_text("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"$ref\": \"#/$defs/a\"}},"
                                     " \"$ref\": \"#/$defs/a\"}");
    json_t *errors = NULL;
    json_t *one = json_integer(1);
    CU_ASSERT_EQUAL(eai_schema_validate(s, one, &errors), 0);
    const char *m = json_string_value(json_object_get(json_array_get(errors, 0), "message"));
    CHECK(m && strstr(m, "too deep"), "cycle reported: %s", m ? m : "");
    json_decref(errors);
    CU_ASSERT_EQUAL(eai_schema_validate(s, one, NULL), 0);
    eai_schema_free(s);
    s = load_text("{\"not\": {\"$ref\": \"#\"}}");
    CU_ASSERT_EQUAL(eai_schema_validate(s, one, NULL), 0);
    eai_schema_free(s);
    json_decref(one);

    /* JSON-pointer escapes (~0 ~1) and %-encoding in $ref. */
    s = load_text("{\"$defs\": {\"tilda~field\": {\"type\": \"integer\"}, \"slash/field\": {\"type\": \"integer\"},"
                  " \"percent%field\": {\"type\": \"integer\"}, \"sp ace\": {\"type\": \"integer\"}},"
                  " \"properties\": {\"t\": {\"$ref\": \"#/$defs/tilda~0field\"},"
                  " \"s\": {\"$ref\": \"#/$defs/slash~1field\"}, \"p\": {\"$ref\": \"#/$defs/percent%25field\"},"
                  " \"q\": {\"$ref\": \"#/$defs/sp%20ace\"}}}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    json_t *doc = parse("{\"t\": 1, \"s\": 2, \"p\": 3, \"q\": 4}");
    CU_ASSERT_EQUAL(eai_schema_validate(s, doc, NULL), 1);
    json_decref(doc);
    const char *bad[] = {"{\"t\": \"x\"}", "{\"s\": \"x\"}", "{\"p\": \"x\"}", "{\"q\": \"x\"}"};
    for (size_t i = 0; i < 4; i++) {
        doc = parse(bad[i]);
        CU_ASSERT_EQUAL(eai_schema_validate(s, doc, NULL), 0);
        json_decref(doc);
    }
    eai_schema_free(s);

    /* A recursive schema over a nested instance works. */
    s = load_text("{\"type\": \"object\", \"properties\": {\"child\": {\"$ref\": \"#\"},"
                  " \"v\": {\"type\": \"integer\"}}, \"additionalProperties\": false}");
    doc = parse("{\"v\": 1, \"child\": {\"v\": 2, \"child\": {\"v\": \"x\"}}}");
    CU_ASSERT_EQUAL(eai_schema_validate(s, doc, &errors), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(errors, 0), "path")),
                           "/child/child/v");
    json_decref(errors);
    json_decref(doc);
    eai_schema_free(s);

    /* Pointer escapes in instance paths. */
    s = load_text("{\"additionalProperties\": false}");
    doc = parse("{\"a/b~c\": 1}");
    CU_ASSERT_EQUAL(eai_schema_validate(s, doc, &errors), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(errors, 0), "path")),
                           "/a~1b~0c");
    json_decref(errors);
    json_decref(doc);
    eai_schema_free(s);

    /* At most EAI_SCHEMA_MAX_ERRORS errors. */
    s = load_text("{\"items\": {\"type\": \"string\"}}");
    doc = json_array();
    for (int i = 0; i < 500; i++)
        json_array_append_new(doc, json_integer(i));
    CU_ASSERT_EQUAL(eai_schema_validate(s, doc, &errors), 0);
    CU_ASSERT_EQUAL(json_array_size(errors), EAI_SCHEMA_MAX_ERRORS);
    json_decref(errors);
    json_decref(doc);
    eai_schema_free(s);
}

/* Validation of one schema from several threads at once. */
struct thread_arg {
    int failures;
};

static void *validate_loop(void *p)
{
    struct thread_arg *a = p;
    json_t *good = parse("{" MIN_EXEC ", \"limits\": {\"cpu\": \"500m\"}, \"env\": {\"K\": \"V\"}}");
    json_t *bad = parse("{\"command\": [], \"env\": {\"1x\": \"v\"}, \"limits\": {\"memory\": \"1GB\"}}");
    for (int i = 0; i < 2000; i++) {
        json_t *errors = NULL;
        if (eai_schema_validate(exec_schema, good, NULL) != 1)
            a->failures++;
        if (eai_schema_validate(exec_schema, bad, &errors) != 0 || json_array_size(errors) != 4)
            a->failures++;
        json_decref(errors);
    }
    json_decref(good);
    json_decref(bad);
    return NULL;
}

static void test_threads(void)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(exec_schema);
    pthread_t t[4];
    struct thread_arg a[4] = {{0}};
    for (int i = 0; i < 4; i++)
        CU_ASSERT_EQUAL(pthread_create(&t[i], NULL, validate_loop, &a[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        CU_ASSERT_EQUAL(a[i].failures, 0);
    }
}

int main(void)
{
    source_dir = getenv("EAI_SOURCE_DIR");
    if (!source_dir)
        source_dir = EAI_SOURCE_DIR;
    suite_dir = getenv("EAI_JSON_SCHEMA_TEST_SUITE");
    if (!suite_dir)
        suite_dir = "/usr/share/json-schema-test-suite";
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("conformance", NULL, NULL);
    CU_add_test(s, "draft-7 test suite", test_draft7_suite);
    s = CU_add_suite("contracts", contracts_init, contracts_clean);
    CU_add_test(s, "execution: basics and paths", test_exec_basic);
    CU_add_test(s, "execution: command bounds", test_exec_command_bounds);
    CU_add_test(s, "execution: limits and quantities", test_exec_limits);
    CU_add_test(s, "execution: env, files, collect, network", test_exec_env_files_collect_network);
    CU_add_test(s, "execution: all errors reported", test_exec_many_errors);
    CU_add_test(s, "tool manifest", test_tool_manifest);
    CU_add_test(s, "shared definitions in sync", test_contract_defs_in_sync);
    CU_add_test(s, "YAML manifest validated", test_yaml_manifest);
    CU_add_test(s, "validation from several threads", test_threads);
    CU_add_test(s, "keyword semantics", test_semantics);
    s = CU_add_suite("yaml", NULL, NULL);
    CU_add_test(s, "scalars resolve per YAML 1.2 core", test_yaml_scalars);
    CU_add_test(s, "structure, aliases, errors", test_yaml_structure);
    CU_add_test(s, "alias bomb refused", test_yaml_alias_bomb);
    CU_add_test(s, "alias byte bomb refused", test_yaml_alias_byte_bomb);
    CU_add_test(s, "anchored manifest", test_yaml_anchored_manifest);
    CU_add_test(s, "session contracts", test_session_contracts);
    CU_add_test(s, "snapshot contracts", test_snapshot_contracts);
    s = CU_add_suite("load", NULL, NULL);
    CU_add_test(s, "schema mistakes refused at load", test_load_refusals);
    CU_add_test(s, "$ref cycles, paths, error cap", test_ref_cycles_and_caps);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures();
    CU_cleanup_registry();
    for (size_t i = 0; i < nskips; i++) {
        free(skips[i].file);
        free(skips[i].key);
    }
    free(skips);
    return failures ? 1 : 0;
}
