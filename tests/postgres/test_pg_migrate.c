/*
 * `eaid migrate --app-role ROLE` semantics, through the plugin's migrate op,
 * as the owner (EAI_TEST_PG_OWNER_URL): applies every migrations/postgres/NNNN_name.sql file once,
 * is idempotent, grants the application role only what it needs, and leaves
 * row-level security enabled and forced on every eai table with tenant_id.
 * From every earlier schema (files 1..k applied as the runner of that
 * release did) today's plugin migrates and the database serves.
 * This test is the ctest fixture that prepares the schema for the other
 * PostgreSQL tests.
 */
#include <glob.h>

#include "pg_test_common.h"

static const char *app_role(void)
{
    const char *r = getenv("EAI_TEST_PG_APP_ROLE");
    return r && *r ? r : "eai_app";
}

static size_t migration_files(void)
{
    const char *src = getenv("EAI_SOURCE_DIR");
    char pat[512];
    snprintf(pat, sizeof pat, "%s/migrations/postgres/*.sql", src ? src : ".");
    glob_t g;
    size_t n = 0;
    if (glob(pat, 0, NULL, &g) == 0)
        n = g.gl_pathc;
    globfree(&g);
    return n;
}

static void test_migrate_twice(void)
{
    void *st = pgt_open(pgt_owner_url, 2);
    CU_ASSERT_FATAL(st != NULL);
    for (int i = 0; i < 2; i++) {
        struct eai_error *e = NULL;
        int rc = pgt_ops->migrate(st, app_role(), &e);
        pgt_report("migrate", e);
        CU_ASSERT_EQUAL(rc, 0);
    }
    pgt_desc->destroy(st);

    PGconn *c = pgt_connect(pgt_owner_url);
    CU_ASSERT_FATAL(c != NULL);
    size_t files = migration_files();
    CU_ASSERT(files >= 1);
    CU_ASSERT_EQUAL(pgt_long(c, "SELECT count(*) FROM eai.schema_migrations"), (long)files);
    CU_ASSERT_EQUAL(pgt_long(c, "SELECT count(DISTINCT version) FROM eai.schema_migrations"), (long)files);
    /* Every table of DESIGN.md section 5 exists. */
    CU_ASSERT_EQUAL(pgt_long(c, "SELECT count(*) FROM pg_tables WHERE schemaname = 'eai' AND tablename IN"
                                " ('tenants','api_keys','sandbox_executions','execution_files','manifests',"
                                "  'audit_events','usage_outbox','usage_ledger','schema_migrations','kv')"),
                    10);
    /* Common columns on every table. */
    CU_ASSERT_EQUAL(pgt_long(c, "SELECT count(*) FROM pg_tables t WHERE t.schemaname = 'eai' AND"
                                " (SELECT count(*) FROM information_schema.columns k"
                                "   WHERE k.table_schema = 'eai' AND k.table_name = t.tablename"
                                "   AND k.column_name IN ('id', 'created_at', 'updated_at')) <> 3"),
                    0);
    /* tenant_id uuid NOT NULL wherever it exists, RLS enabled and forced there. */
    CU_ASSERT(pgt_long(c, "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'eai'"
                          " AND column_name = 'tenant_id'") >= 9);
    CU_ASSERT_EQUAL(pgt_long(c, "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'eai'"
                                " AND column_name = 'tenant_id' AND (data_type <> 'uuid' OR is_nullable <> 'NO')"),
                    0);
    CU_ASSERT_EQUAL(pgt_long(c, "SELECT count(*) FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace"
                                " JOIN pg_attribute a ON a.attrelid = k.oid AND a.attname = 'tenant_id'"
                                " WHERE n.nspname = 'eai' AND k.relkind = 'r'"
                                " AND NOT (k.relrowsecurity AND k.relforcerowsecurity)"),
                    0);
    /* The tenant policy is the NULLIF one, USING and WITH CHECK. */
    CU_ASSERT_EQUAL(pgt_long(c, "SELECT count(*) FROM pg_policies WHERE schemaname = 'eai'"
                                " AND policyname = 'tenant_isolation'"
                                " AND qual LIKE '%NULLIF(current_setting(''app.tenant_id''::text, true), ''''::text)%'"
                                " AND with_check = qual"),
                    11); /* 9 of 0001, eai.sandbox_sessions of 0008, eai.sandbox_snapshots of 0009 */
    PQfinish(c);
}

static void test_app_role_privileges(void)
{
    PGconn *c = pgt_connect(pgt_owner_url);
    CU_ASSERT_FATAL(c != NULL);
    char sql[512];
    const char *role = app_role();
    /* Not the owner, not a superuser, no BYPASSRLS. */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_roles WHERE rolname = '%s'"
                              " AND NOT rolsuper AND NOT rolbypassrls", role);
    CU_ASSERT_EQUAL(pgt_long(c, sql), 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_tables WHERE schemaname = 'eai'"
                              " AND tableowner = '%s'", role);
    CU_ASSERT_EQUAL(pgt_long(c, sql), 0);
    /* Granted what it needs ... */
    static const char *const yes[][2] = {
        {"eai.sandbox_executions", "SELECT"}, {"eai.sandbox_executions", "INSERT"},
        {"eai.sandbox_executions", "UPDATE"}, {"eai.audit_events", "INSERT"},
        {"eai.manifests", "DELETE"}, {"eai.usage_outbox", "INSERT"}, {"eai.tenants", "INSERT"},
        {"eai.sandbox_sessions", "SELECT"}, {"eai.sandbox_sessions", "INSERT"}, {"eai.sandbox_sessions", "UPDATE"},
        {"eai.sandbox_snapshots", "SELECT"}, {"eai.sandbox_snapshots", "INSERT"},
        {"eai.sandbox_snapshots", "DELETE"},
    };
    /* ... and nothing more: audit is append-only, no deletes of history. */
    static const char *const no[][2] = {
        {"eai.audit_events", "UPDATE"}, {"eai.audit_events", "DELETE"},
        {"eai.sandbox_executions", "DELETE"}, {"eai.tenants", "DELETE"}, {"eai.tenants", "UPDATE"},
        {"eai.api_keys", "UPDATE"}, {"eai.usage_outbox", "SELECT"}, {"eai.usage_outbox", "DELETE"},
        {"eai.schema_migrations", "INSERT"}, {"eai.sandbox_executions", "TRUNCATE"},
        {"eai.sandbox_sessions", "DELETE"}, {"eai.sandbox_snapshots", "TRUNCATE"},
    };
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        snprintf(sql, sizeof sql, "SELECT has_table_privilege('%s', '%s', '%s')::int", role, yes[i][0],
                 yes[i][1]);
        CU_ASSERT_EQUAL(pgt_long(c, sql), 1);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        snprintf(sql, sizeof sql, "SELECT has_table_privilege('%s', '%s', '%s')::int", role, no[i][0],
                 no[i][1]);
        CU_ASSERT_EQUAL(pgt_long(c, sql), 0);
    }
    snprintf(sql, sizeof sql, "SELECT has_function_privilege('%s', 'eai.exec_claim(text,bigint,bigint,integer,integer)',"
                              " 'EXECUTE')::int", role);
    CU_ASSERT_EQUAL(pgt_long(c, sql), 1);
    snprintf(sql, sizeof sql, "SELECT has_function_privilege('%s', 'eai.grant_app_role(text)', 'EXECUTE')::int",
             role);
    CU_ASSERT_EQUAL(pgt_long(c, sql), 0);
    /* SYSTEM functions: SECURITY DEFINER with a fixed search_path. */
    CU_ASSERT_EQUAL(pgt_long(c, "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                                " WHERE n.nspname = 'eai' AND p.prosecdef"
                                " AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) x WHERE x LIKE 'search_path=%')"),
                    0);
    CU_ASSERT(pgt_long(c, "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                          " WHERE n.nspname = 'eai' AND p.prosecdef") >= 10);
    PQfinish(c);

    /* The app role runs the server: ping, and tenant administration works
     * through it as well (RLS-compliant insert under the new tenant). */
    void *st = pgt_open(pgt_app_url, 1);
    CU_ASSERT_FATAL(st != NULL);
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->ping(st, &e), 0);
    pgt_report("ping", e);
    json_t *t = NULL;
    e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->tenant_create(st, "migrate-test", &t, &e), 0);
    pgt_report("tenant_create", e);
    CU_ASSERT(json_is_object(t));
    json_decref(t);
    /* migrate as the app role: refused (it owns nothing). */
    e = NULL;
    int rc = pgt_ops->migrate(st, NULL, &e);
    if (rc == 0) {
        /* Acceptable only when nothing was left to apply; the app role
         * still may not grant anything. */
        e = NULL;
        CU_ASSERT_NOT_EQUAL(pgt_ops->migrate(st, role, &e), 0);
    }
    if (e)
        eai_error_free(e);
    pgt_desc->destroy(st);
}

/* ------------------------------------------------------------ upgrade */

/* url with its database name replaced by db (the URLs of pg_cluster.sh:
 * postgresql://role@/eai?host=...). */
static char *url_for_db(const char *url, const char *db)
{
    const char *at = strstr(url, "/eai?");
    if (!at)
        return NULL;
    char *out = NULL;
    if (asprintf(&out, "%.*s/%s?%s", (int)(at - url), url, db, at + 5) < 0)
        return NULL;
    return out;
}

static char *file_text(const char *path)
{
    FILE *f = fopen(path, "re");
    char *s = NULL;
    size_t n = 0;
    if (!f)
        return NULL;
    FILE *m = open_memstream(&s, &n);
    int ch;
    while (m && (ch = fgetc(f)) != EOF)
        fputc(ch, m);
    if (m)
        fclose(m);
    fclose(f);
    return s;
}

/* A database at schema version k, as the runner of the release that had
 * migrations 1..k left it (plugins/postgres/postgres.c, every release so
 * far: eai.schema_migrations with version, name, checksum), then migrated
 * by today's plugin and used through the application role. */
static void upgrade_from(PGconn *super, const char *const *files, size_t k, size_t n)
{
    char db[32];
    snprintf(db, sizeof db, "eai_upgrade_%zu", k);
    char sql[256];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
    pgt_exec(super, sql, NULL);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s OWNER eai_owner", db);
    CU_ASSERT_FATAL(pgt_exec(super, sql, NULL) == PGRES_COMMAND_OK);
    char *owner_url = url_for_db(pgt_owner_url, db), *app_url = url_for_db(pgt_app_url, db);
    CU_ASSERT_FATAL(owner_url && app_url);

    PGconn *c = pgt_connect(owner_url);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(pgt_exec(c, "SET client_min_messages = warning; CREATE SCHEMA IF NOT EXISTS eai;"
                                " CREATE TABLE IF NOT EXISTS eai.schema_migrations ("
                                "  version integer PRIMARY KEY, id uuid NOT NULL DEFAULT gen_random_uuid(),"
                                "  name text NOT NULL, checksum text NOT NULL,"
                                "  created_at timestamptz NOT NULL DEFAULT now(),"
                                "  updated_at timestamptz NOT NULL DEFAULT now())", NULL) == PGRES_COMMAND_OK);
    for (size_t i = 0; i < k; i++) {
        char *text = file_text(files[i]);
        CU_ASSERT_FATAL(text != NULL);
        CU_ASSERT_FATAL(pgt_exec(c, text, NULL) == PGRES_COMMAND_OK);
        const char *name = strrchr(files[i], '/') + 1;
        char ver[16];
        snprintf(ver, sizeof ver, "%d", atoi(name));
        const char *p[3] = {ver, name, text};
        PGresult *r = PQexecParams(c, "INSERT INTO eai.schema_migrations (version, name, checksum)"
                                      " VALUES ($1::int, $2, encode(sha256(convert_to($3, 'UTF8')), 'hex'))",
                                   3, NULL, p, NULL, NULL, 0);
        CU_ASSERT_FATAL(PQresultStatus(r) == PGRES_COMMAND_OK);
        PQclear(r);
        free(text);
    }

    /* today's plugin applies the rest */
    void *st = pgt_open(owner_url, 1);
    CU_ASSERT_FATAL(st != NULL);
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->migrate(st, app_role(), &e), 0);
    pgt_report("migrate", e);
    pgt_desc->destroy(st);
    CU_ASSERT_EQUAL(pgt_long(c, "SELECT count(*) FROM eai.schema_migrations"), (long)n);
    PQfinish(c);

    /* and it serves: a tenant, an execution through create, claim, finish */
    st = pgt_open(app_url, 2);
    CU_ASSERT_FATAL(st != NULL);
    json_t *t = NULL;
    e = NULL;
    CU_ASSERT_FATAL(pgt_ops->tenant_create(st, "upgraded", &t, &e) == 0);
    const char *tenant = json_string_value(json_object_get(t, "id"));
    char id[41] = "sbx_", uuid[37];
    eai_uuid_v4(uuid);
    strcat(id, uuid);
    json_t *rec = json_pack("{s:s, s:s, s:s, s:[s]}", "id", id, "profile", "gvisor", "image", "python:3.11-slim",
                            "command", "true");
    CU_ASSERT_EQUAL(pgt_ops->exec_create(st, tenant, rec, NULL, NULL, &e), EAI_STORE_CREATED);
    json_t *cl = NULL;
    CU_ASSERT_FATAL(pgt_ops->exec_claim(st, "node-upgrade", 30000, 10, 10, &cl, &e) == 0);
    CU_ASSERT_EQUAL(json_array_size(cl), 1);
    json_t *patch = json_pack("{s:s, s:i}", "status", "succeeded", "exit_code", 0);
    CU_ASSERT_EQUAL(pgt_ops->exec_finish(st, tenant, id, patch, NULL, NULL, NULL, &e), EAI_STORE_UPDATED);
    json_t *got = NULL;
    CU_ASSERT_FATAL(pgt_ops->exec_get(st, tenant, id, &got, &e) == 0);
    CU_ASSERT(got && strcmp(json_string_value(json_object_get(got, "status")), "succeeded") == 0);
    pgt_report("using the upgraded database", e);
    json_decref(got);
    json_decref(patch);
    json_decref(cl);
    json_decref(rec);
    json_decref(t);
    pgt_desc->destroy(st);

    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", db);
    pgt_exec(super, sql, NULL);
    free(owner_url);
    free(app_url);
}

/* From every earlier schema (the previous release's included) to today's. */
static void test_upgrade(void)
{
    if (!pgt_super_url || !*pgt_super_url) {
        printf("(no EAI_TEST_PG_SUPER_URL: no database to create, skipped) ");
        return;
    }
    const char *src = getenv("EAI_SOURCE_DIR");
    char pat[512];
    snprintf(pat, sizeof pat, "%s/migrations/postgres/*.sql", src ? src : ".");
    glob_t g;
    CU_ASSERT_FATAL(glob(pat, 0, NULL, &g) == 0 && g.gl_pathc >= 2);
    PGconn *super = pgt_connect(pgt_super_url);
    CU_ASSERT_FATAL(super != NULL);
    pgt_exec(super, "SET client_min_messages = warning", NULL);
    for (size_t k = 1; k < g.gl_pathc; k++)
        upgrade_from(super, (const char *const *)g.gl_pathv, k, g.gl_pathc);
    PQfinish(super);
    globfree(&g);
}

int main(void)
{
    if (pgt_env() < 0)
        return EAI_PG_TEST_SKIP;
    if (pgt_load() < 0)
        return 1;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("postgres_migrate", NULL, NULL);
    CU_add_test(s, "migrate as owner, twice: idempotent, RLS forced", test_migrate_twice);
    CU_add_test(s, "app role: least privilege, SECURITY DEFINER functions", test_app_role_privileges);
    CU_add_test(s, "upgrade from every earlier schema, then used", test_upgrade);
    int rc = pgt_run_suite(s);
    pgt_unload();
    return rc;
}
