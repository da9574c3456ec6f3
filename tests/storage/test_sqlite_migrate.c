/*
 * The built-in SQLite backend's schema from migrations/sqlite/ (core/store/
 * store_sqlite_migrate.c, docs/storage.md "Migrations"):
 * - from an empty database: every file applied once, recorded with its
 *   checksum; migrating again does nothing;
 * - from the previous release: a database built from the C-string schema of
 *   that release (tests/fixtures/sqlite/previous-release.sql, with rows) is
 *   adopted, ends with the very schema an empty database gets, and is used:
 *   its old records read back (and match execution-record.schema.json), a
 *   new execution runs through create, claim and finish;
 * - a file changed after it was applied is refused.
 */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <sqlite3.h>

#include <eai/storage.h>

#include "base/errors.h"
#include "base/util.h"
#include "plugin/host.h"
#include "schema/jsonschema.h"
#include "store/store_sqlite.h"

static const struct eai_plugin_descriptor *g_desc;
static const struct eai_storage_ops *g_ops;
static struct eai_host *g_host;
static char g_dir[64];

#define T_OLD "11111111-1111-4111-8111-111111111111"
#define ID_QUEUED "sbx_22222222-2222-4222-8222-222222222222"
#define ID_DONE "sbx_33333333-3333-4333-8333-333333333333"

/* ------------------------------------------------------------ helpers */

static void report(const char *what, struct eai_error *e)
{
    if (e) {
        fprintf(stderr, "  %s: %s\n", what, e->message ? e->message : "?");
        eai_error_free(e);
    }
}

#define OK(call)                                   \
    do {                                           \
        struct eai_error *e_ = NULL;               \
        struct eai_error **err = &e_;              \
        int rc_ = (call);                          \
        if (rc_ < 0)                               \
            report(#call, e_);                     \
        CU_ASSERT_FATAL(rc_ >= 0);                 \
    } while (0)

static char *read_text(const char *path)
{
    size_t len = 0;
    char *s = NULL;
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (s = malloc((size_t)n + 1)) != NULL) {
            len = fread(s, 1, (size_t)n, f);
            s[len] = '\0';
        }
    }
    fclose(f);
    return s;
}

static void db_path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", g_dir, name);
}

static void db_remove(const char *path)
{
    const char *sfx[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
}

static void *open_backend(const char *path, struct eai_error **err)
{
    json_t *cfg = json_pack("{s:s}", "path", path);
    void *st = g_desc->create(g_host, cfg, err);
    json_decref(cfg);
    return st;
}

/* Every object of the schema, whitespace taken out of its SQL, in order:
 * two databases with the same text have the same tables, columns,
 * constraints and indexes. */
static char *schema_text(const char *path)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_stmt *st = NULL;
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    if (m && sqlite3_prepare_v2(db, "SELECT type, name, sql FROM sqlite_master"
                                    " WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name", -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            fprintf(m, "%s %s ", sqlite3_column_text(st, 0), sqlite3_column_text(st, 1));
            for (const unsigned char *p = sqlite3_column_text(st, 2); p && *p; p++)
                if (*p != ' ' && *p != '\n' && *p != '\t')
                    fputc(*p, m);
            fputc('\n', m);
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (m)
        fclose(m);
    return out;
}

/* Number of migrations/sqlite/ files; checks each recorded row against its file. */
static size_t check_recorded(const char *path)
{
    char pat[512];
    const char *src = getenv("EAI_SOURCE_DIR");
    snprintf(pat, sizeof pat, "%s/migrations/sqlite/*.sql", src ? src : EAI_SOURCE_DIR);
    glob_t g;
    CU_ASSERT_FATAL(glob(pat, 0, NULL, &g) == 0);
    sqlite3 *db = NULL;
    CU_ASSERT_FATAL(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char *sql = read_text(g.gl_pathv[i]);
        CU_ASSERT_FATAL(sql != NULL);
        char sum[65];
        eai_sha256_hex(sql, strlen(sql), sum);
        free(sql);
        const char *name = strrchr(g.gl_pathv[i], '/') + 1;
        sqlite3_stmt *st = NULL;
        CU_ASSERT_FATAL(sqlite3_prepare_v2(db, "SELECT version, checksum FROM schema_migrations WHERE name = ?1",
                                           -1, &st, NULL) == SQLITE_OK);
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        CU_ASSERT_EQUAL(sqlite3_step(st), SQLITE_ROW);
        CU_ASSERT_EQUAL(sqlite3_column_int(st, 0), atoi(name));
        const char *got = (const char *)sqlite3_column_text(st, 1);
        CU_ASSERT(got && strcmp(got, sum) == 0);
        sqlite3_finalize(st);
    }
    sqlite3_stmt *st = NULL;
    long rows = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM schema_migrations", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        rows = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    CU_ASSERT_EQUAL(rows, (long)g.gl_pathc);
    size_t n = g.gl_pathc;
    globfree(&g);
    return n;
}

/* ------------------------------------------------------------ tests */

static char *g_empty_schema;  /* schema_text of a database migrated from empty */

static void test_from_empty(void)
{
    char path[256];
    db_path(path, sizeof path, "empty.db");
    struct eai_error *e = NULL;
    void *st = open_backend(path, &e);
    report("create on an empty file", e);
    CU_ASSERT_FATAL(st != NULL);
    OK(g_ops->migrate(st, NULL, err));   /* again: nothing to do */
    g_desc->destroy(st);
    CU_ASSERT(check_recorded(path) >= 2);
    g_empty_schema = schema_text(path);
    CU_ASSERT_FATAL(g_empty_schema != NULL);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_empty_schema, "table api_keys"));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_empty_schema, "expires_msINTEGER"));
}

static void check_against_schema(const json_t *rec)
{
    struct eai_error *e = NULL;
    struct eai_schema *s = eai_schema_load_file(EAI_SOURCE_DIR "/contracts/v1/execution-record.schema.json", &e);
    report("execution-record.schema.json", e);
    CU_ASSERT_FATAL(s != NULL);
    json_t *errors = NULL;
    int ok = eai_schema_validate(s, rec, &errors);
    if (!ok) {
        char *d = json_dumps(errors, JSON_COMPACT);
        fprintf(stderr, "  old record off the schema: %s\n", d ? d : "?");
        free(d);
    }
    CU_ASSERT(ok == 1);
    json_decref(errors);
    eai_schema_free(s);
}

static void use_old_database(void *st)
{
    /* the records of the previous release read back */
    json_t *q = NULL, *d = NULL;
    OK(g_ops->exec_get(st, T_OLD, ID_QUEUED, &q, err));
    OK(g_ops->exec_get(st, T_OLD, ID_DONE, &d, err));
    CU_ASSERT_FATAL(q && d);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(q, "status")), "queued");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d, "stdout")), "4\n");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(d, "seq")), 2);
    check_against_schema(q);
    check_against_schema(d);
    json_decref(q);
    json_decref(d);
    unsigned char *data = NULL;
    size_t len = 0;
    OK(g_ops->file_get(st, T_OLD, ID_DONE, "/tmp/outputs/r.txt", &data, &len, err));
    CU_ASSERT(data && len == 5 && memcmp(data, "hello", 5) == 0);
    free(data);
    json_t *k = NULL;
    OK(g_ops->key_get(st, "0123456789abcdef", &k, err));
    CU_ASSERT(k && json_is_null(json_object_get(k, "expires_at")));
    json_decref(k);

    /* the old queued one runs now: claim, finish (merged, scrubbed) */
    json_t *cl = NULL;
    OK(g_ops->exec_claim(st, "node-new", 30000, 10, 10, &cl, err));
    CU_ASSERT_EQUAL(json_array_size(cl), 1);
    json_decref(cl);
    json_t *patch = json_pack("{s:s, s:i, s:s}", "status", "succeeded", "exit_code", 0, "stdout", "ok\n");
    int rc = 0;
    OK(rc = g_ops->exec_finish(st, T_OLD, ID_QUEUED, patch, NULL, NULL, NULL, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_UPDATED);
    json_decref(patch);
    OK(g_ops->exec_get(st, T_OLD, ID_QUEUED, &q, err));
    CU_ASSERT_FATAL(q != NULL);
    CU_ASSERT_EQUAL(json_object_size(json_object_get(q, "env")), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(q, "project_id")), "proj-old");
    check_against_schema(q);
    json_decref(q);

    /* and a new one, next in seq */
    char id[41] = "sbx_", uuid[37];
    eai_uuid_v4(uuid);
    strcat(id, uuid);
    json_t *rec = json_pack("{s:s, s:s, s:s, s:[s]}", "id", id, "profile", "gvisor", "image", "python:3.11-slim",
                            "command", "true");
    OK(rc = g_ops->exec_create(st, T_OLD, rec, NULL, NULL, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    json_decref(rec);
    json_t *l = NULL, *f = json_pack("{s:i}", "limit", 10);
    OK(g_ops->exec_list(st, T_OLD, f, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(l, 0), "seq")), 3);
    json_decref(l);
    json_decref(f);
}

static void test_from_previous_release(void)
{
    char path[256], fixture[512];
    db_path(path, sizeof path, "previous.db");
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/sqlite/previous-release.sql", EAI_SOURCE_DIR);
    char *sql = read_text(fixture);
    CU_ASSERT_FATAL(sql != NULL);
    sqlite3 *db = NULL;
    CU_ASSERT_FATAL(sqlite3_open(path, &db) == SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fprintf(stderr, "  fixture: %s\n", msg ? msg : "?");
    sqlite3_free(msg);
    sqlite3_close(db);
    free(sql);
    CU_ASSERT_FATAL(rc == SQLITE_OK);

    struct eai_error *e = NULL;
    void *st = open_backend(path, &e);
    report("create on the previous release's database", e);
    CU_ASSERT_FATAL(st != NULL);
    use_old_database(st);
    OK(g_ops->migrate(st, NULL, err));
    g_desc->destroy(st);

    check_recorded(path);
    char *schema = schema_text(path);
    CU_ASSERT_FATAL(schema != NULL && g_empty_schema != NULL);
    if (strcmp(schema, g_empty_schema) != 0)
        fprintf(stderr, "  upgraded:\n%s\n  from empty:\n%s\n", schema, g_empty_schema);
    CU_ASSERT_STRING_EQUAL(schema, g_empty_schema);
    free(schema);
}

static void test_changed_file_refused(void)
{
    char path[256];
    db_path(path, sizeof path, "empty.db");
    sqlite3 *db = NULL;
    CU_ASSERT_FATAL(sqlite3_open(path, &db) == SQLITE_OK);
    CU_ASSERT_FATAL(sqlite3_exec(db, "UPDATE schema_migrations SET checksum = 'x' WHERE version = 1",
                                 NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    struct eai_error *e = NULL;
    void *st = open_backend(path, &e);
    CU_ASSERT_PTR_NULL(st);
    CU_ASSERT(e && e->message && strstr(e->message, "0001_init.sql was changed after it was applied"));
    eai_error_free(e);
    if (st)
        g_desc->destroy(st);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/eai-sqmig-XXXXXX");
    if (!mkdtemp(g_dir))
        return 1;
    g_host = eai_host_new(NULL, g_dir);
    g_desc = eai_builtin_storage_sqlite();
    g_ops = g_desc ? g_desc->ops : NULL;
    if (!g_host || !g_ops || CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("sqlite_migrate", NULL, NULL);
    CU_add_test(s, "from an empty database", test_from_empty);
    CU_add_test(s, "from the previous release's schema, then used", test_from_previous_release);
    CU_add_test(s, "a file changed after it was applied is refused", test_changed_file_refused);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    char p[256];
    db_path(p, sizeof p, "empty.db");
    db_remove(p);
    db_path(p, sizeof p, "previous.db");
    db_remove(p);
    rmdir(g_dir);
    eai_host_free(g_host);
    free(g_empty_schema);
    return (failures == 0 && run > 0) ? 0 : 1;
}
