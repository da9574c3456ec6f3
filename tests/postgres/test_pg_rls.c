/*
 * Row-level security, proven with raw libpq as the application role: the
 * database itself, not the application's WHERE clause, keeps tenants apart.
 *   - tenant A set: an unfiltered SELECT sees only A's rows, on every table;
 *   - an INSERT of B's row fails; B's rows cannot be updated or deleted;
 *     A's rows cannot be moved to B;
 *   - no tenant set (fresh session, or after a transaction-local setting
 *     ended on a pooled connection): 0 rows everywhere, no error;
 *   - the owner is subject to the same policies (FORCE).
 * Then the plugin's failure behaviour (suite "resilience"): a stale pooled
 * connection is replaced transparently, an unreachable database answers
 * storage_unavailable at once, and service resumes without a restart with
 * every acknowledged write present.  That part uses its own database
 * (eai_outage, needs EAI_TEST_PG_SUPER_URL) so it never disturbs others.
 * Suite "roles" (issue 16, item 10): the plugin refuses to serve as a
 * superuser, a BYPASSRLS role or (a member of) the table owner, while
 * `migrate` as the owner still works; `eaid serve` on such a URL exits.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <time.h>

#include "pg_test_common.h"

static const char *const tenant_tables[] = {
    "tenants", "api_keys", "sandbox_executions", "execution_files", "manifests",
    "audit_events", "usage_outbox", "usage_ledger", "kv", NULL
};

static char ta[37], tb[37];
static char ea[37], eb[37];

static int set_tenant(PGconn *c, const char *t)
{
    const char *p[1] = {t};
    PGresult *r = PQexecParams(c, "SELECT set_config('app.tenant_id', $1, true)", 1, NULL, p, NULL, NULL, 0);
    int ok = PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    return ok ? 0 : -1;
}

/* Seed two tenants with one row in every tenant table, as the app role
 * (each under its own tenant: that is how the plugin writes too). */
static int seed_tenant(PGconn *c, const char *t, const char *exec_uuid)
{
    char sql[2048];
    if (pgt_exec(c, "BEGIN", NULL) != PGRES_COMMAND_OK || set_tenant(c, t) < 0)
        return -1;
    snprintf(sql, sizeof sql,
             "INSERT INTO eai.tenants (id, tenant_id, name) VALUES ('%1$s', '%1$s', 'rls-%1$s');"
             "INSERT INTO eai.api_keys (tenant_id, key_id, secret_hash) VALUES ('%1$s', 'k%2$s', 'h');"
             /* terminal status: invisible to the shared queue */
             "INSERT INTO eai.sandbox_executions (id, tenant_id, status, doc) VALUES ('%2$s', '%1$s', 'succeeded', '{}');"
             "INSERT INTO eai.execution_files (tenant_id, execution_id, path, size, content)"
             "  VALUES ('%1$s', '%2$s', '/tmp/outputs/x', 1, '\\x41');"
             "INSERT INTO eai.manifests (tenant_id, kind, name, doc) VALUES ('%1$s', 'tool-manifest', 'rls', '{}');"
             "INSERT INTO eai.audit_events (id, tenant_id, seq, prev_hash, hash, event)"
             "  VALUES (gen_random_uuid(), '%1$s', 1, 'p', 'h',"
             "          '{\"tenant_id\": \"%1$s\", \"seq\": 1, \"action\": \"rls.seed\"}');"
             "INSERT INTO eai.usage_outbox (tenant_id, event) VALUES ('%1$s', '{\"rls\": true}');"
             "INSERT INTO eai.usage_ledger (tenant_id, event_id, occurred_at, event) VALUES ('%1$s', 'e', now(), '{}');"
             "INSERT INTO eai.kv (tenant_id, key, value) VALUES ('%1$s', 'k', 'v');",
             t, exec_uuid);
    if (pgt_exec(c, sql, NULL) != PGRES_COMMAND_OK) {
        pgt_exec(c, "ROLLBACK", NULL);
        return -1;
    }
    return pgt_exec(c, "COMMIT", NULL) == PGRES_COMMAND_OK ? 0 : -1;
}

static int init_rls(void)
{
    eai_uuid_v4(ta);
    eai_uuid_v4(tb);
    eai_uuid_v4(ea);
    eai_uuid_v4(eb);
    PGconn *c = pgt_connect(pgt_app_url);
    if (!c)
        return -1;
    int rc = seed_tenant(c, ta, ea) == 0 && seed_tenant(c, tb, eb) == 0 ? 0 : -1;
    if (rc < 0)
        fprintf(stderr, "  seeding as the app role failed: %s", PQerrorMessage(c));
    PQfinish(c);
    return rc;
}

/* Remove the seeded rows (as the owner, under each tenant: FORCE RLS
 * holds the owner to the policy too), so the shared database keeps only
 * well-formed data for the other suites. */
static int clean_rls(void)
{
    PGconn *c = pgt_connect(pgt_owner_url);
    if (!c)
        return 0;
    const char *ts[2] = {ta, tb};
    for (int i = 0; i < 2; i++) {
        if (pgt_exec(c, "BEGIN", NULL) != PGRES_COMMAND_OK || set_tenant(c, ts[i]) < 0)
            break;
        pgt_exec(c, "DELETE FROM eai.execution_files; DELETE FROM eai.sandbox_executions;"
                    " DELETE FROM eai.manifests; DELETE FROM eai.audit_events; DELETE FROM eai.usage_outbox;"
                    " DELETE FROM eai.usage_ledger; DELETE FROM eai.kv; DELETE FROM eai.api_keys;"
                    " DELETE FROM eai.tenants", NULL);
        pgt_exec(c, "COMMIT", NULL);
    }
    PQfinish(c);
    return 0;
}

static long count_in(PGconn *c, const char *table, const char *where)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM eai.%s%s%s", table, where ? " WHERE " : "",
             where ? where : "");
    return pgt_long(c, sql);
}

/* The app role may not SELECT some tables at all (usage_outbox is read
 * only through a SECURITY DEFINER function): check those as the owner,
 * who is held to the same policy (FORCE). */
static int app_can_select(const char *table)
{
    return strcmp(table, "usage_outbox") != 0;
}

static void test_tenant_sees_only_own_rows(void)
{
    PGconn *app = pgt_connect(pgt_app_url);
    PGconn *own = pgt_connect(pgt_owner_url);
    CU_ASSERT_FATAL(app != NULL && own != NULL);
    PGconn *both[2] = {app, own};
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_FATAL(pgt_exec(both[k], "BEGIN", NULL) == PGRES_COMMAND_OK);
        CU_ASSERT_FATAL(set_tenant(both[k], ta) == 0);
    }
    char not_a[128], is_b[128];
    snprintf(not_a, sizeof not_a, "tenant_id <> '%s'", ta);
    snprintf(is_b, sizeof is_b, "tenant_id = '%s'", tb);
    for (int i = 0; tenant_tables[i]; i++) {
        PGconn *c = app_can_select(tenant_tables[i]) ? app : own;
        /* Unfiltered: exactly A's one seeded row. */
        long all = count_in(c, tenant_tables[i], NULL);
        if (all != 1)
            fprintf(stderr, "  %s: unfiltered count %ld as tenant A\n", tenant_tables[i], all);
        CU_ASSERT_EQUAL(all, 1);
        CU_ASSERT_EQUAL(count_in(c, tenant_tables[i], not_a), 0);
        CU_ASSERT_EQUAL(count_in(c, tenant_tables[i], is_b), 0);
    }
    /* Asking for B's execution by id finds nothing. */
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM eai.sandbox_executions WHERE id = '%s'", eb);
    CU_ASSERT_EQUAL(pgt_long(app, sql), 0);
    pgt_exec(app, "COMMIT", NULL);
    pgt_exec(own, "COMMIT", NULL);
    PQfinish(app);
    PQfinish(own);
}

static void test_cross_tenant_writes_fail(void)
{
    PGconn *c = pgt_connect(pgt_app_url);
    CU_ASSERT_FATAL(c != NULL);
    char sql[512];
    PGresult *r = NULL;

    /* INSERT of B's row while A is set: refused by the policy. */
    CU_ASSERT_FATAL(pgt_exec(c, "BEGIN", NULL) == PGRES_COMMAND_OK);
    CU_ASSERT_FATAL(set_tenant(c, ta) == 0);
    snprintf(sql, sizeof sql, "INSERT INTO eai.sandbox_executions (id, tenant_id, status, doc)"
                              " VALUES (gen_random_uuid(), '%s', 'succeeded', '{}')", tb);
    CU_ASSERT_EQUAL(pgt_exec(c, sql, &r), PGRES_FATAL_ERROR);
    const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    CU_ASSERT(st && strcmp(st, "42501") == 0);   /* new row violates row-level security policy */
    PQclear(r);
    pgt_exec(c, "ROLLBACK", NULL);

    static const char *const others[] = {"manifests", "audit_events", "usage_ledger", "kv", NULL};
    static const char *const inserts[] = {
        "INSERT INTO eai.manifests (tenant_id, kind, name, doc) VALUES ('%s', 'k', 'x', '{}')",
        "INSERT INTO eai.audit_events (id, tenant_id, seq, prev_hash, hash, event)"
        " VALUES (gen_random_uuid(), '%s', 99, 'p', 'h', '{}')",
        "INSERT INTO eai.usage_ledger (tenant_id, event_id, occurred_at, event) VALUES ('%s', 'x', now(), '{}')",
        "INSERT INTO eai.kv (tenant_id, key, value) VALUES ('%s', 'x', 'v')",
    };
    for (int i = 0; others[i]; i++) {
        CU_ASSERT_FATAL(pgt_exec(c, "BEGIN", NULL) == PGRES_COMMAND_OK);
        CU_ASSERT_FATAL(set_tenant(c, ta) == 0);
        snprintf(sql, sizeof sql, inserts[i], tb);
        CU_ASSERT_EQUAL(pgt_exec(c, sql, NULL), PGRES_FATAL_ERROR);
        pgt_exec(c, "ROLLBACK", NULL);
    }

    /* B's rows cannot be updated or deleted; A's cannot be moved to B. */
    CU_ASSERT_FATAL(pgt_exec(c, "BEGIN", NULL) == PGRES_COMMAND_OK);
    CU_ASSERT_FATAL(set_tenant(c, ta) == 0);
    snprintf(sql, sizeof sql, "UPDATE eai.sandbox_executions SET status = 'failed' WHERE id = '%s'", eb);
    CU_ASSERT_EQUAL(pgt_exec(c, sql, &r), PGRES_COMMAND_OK);
    CU_ASSERT_STRING_EQUAL(PQcmdTuples(r), "0");
    PQclear(r);
    snprintf(sql, sizeof sql, "DELETE FROM eai.manifests WHERE tenant_id = '%s'", tb);
    CU_ASSERT_EQUAL(pgt_exec(c, sql, &r), PGRES_COMMAND_OK);
    CU_ASSERT_STRING_EQUAL(PQcmdTuples(r), "0");
    PQclear(r);
    snprintf(sql, sizeof sql, "UPDATE eai.sandbox_executions SET tenant_id = '%s' WHERE id = '%s'", tb, ea);
    CU_ASSERT_EQUAL(pgt_exec(c, sql, NULL), PGRES_FATAL_ERROR);
    pgt_exec(c, "ROLLBACK", NULL);
    PQfinish(c);

    /* B's rows are intact, seen from B. */
    c = pgt_connect(pgt_app_url);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_FATAL(pgt_exec(c, "BEGIN", NULL) == PGRES_COMMAND_OK);
    CU_ASSERT_FATAL(set_tenant(c, tb) == 0);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM eai.sandbox_executions WHERE id = '%s' AND status = 'succeeded'", eb);
    CU_ASSERT_EQUAL(pgt_long(c, sql), 1);
    CU_ASSERT_EQUAL(count_in(c, "manifests", NULL), 1);
    pgt_exec(c, "COMMIT", NULL);
    PQfinish(c);
}

static void test_no_tenant_sees_nothing(void)
{
    /* A fresh session: app.tenant_id was never set. */
    PGconn *c = pgt_connect(pgt_app_url);
    CU_ASSERT_FATAL(c != NULL);
    for (int i = 0; tenant_tables[i]; i++)
        if (app_can_select(tenant_tables[i]))
            CU_ASSERT_EQUAL(count_in(c, tenant_tables[i], NULL), 0);
    /* A pooled session after a transaction-local setting ended: the
     * setting now reads '' (not NULL); NULLIF keeps this at 0 rows and no
     * cast error. */
    CU_ASSERT_FATAL(pgt_exec(c, "BEGIN", NULL) == PGRES_COMMAND_OK);
    CU_ASSERT_FATAL(set_tenant(c, ta) == 0);
    CU_ASSERT_EQUAL(count_in(c, "sandbox_executions", NULL), 1);
    pgt_exec(c, "COMMIT", NULL);
    PGresult *r = NULL;
    CU_ASSERT_EQUAL(pgt_exec(c, "SELECT current_setting('app.tenant_id', true)", &r), PGRES_TUPLES_OK);
    CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 0), "");
    PQclear(r);
    for (int i = 0; tenant_tables[i]; i++)
        if (app_can_select(tenant_tables[i]))
            CU_ASSERT_EQUAL(count_in(c, tenant_tables[i], NULL), 0);
    /* Without a tenant, nothing can be written either. */
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO eai.manifests (tenant_id, kind, name, doc) VALUES ('%s', 'k', 'y', '{}')", ta);
    CU_ASSERT_EQUAL(pgt_exec(c, sql, NULL), PGRES_FATAL_ERROR);
    PQfinish(c);

    /* FORCE: the owner is held to the same policies outside the SECURITY
     * DEFINER functions. */
    c = pgt_connect(pgt_owner_url);
    CU_ASSERT_FATAL(c != NULL);
    for (int i = 0; tenant_tables[i]; i++)
        CU_ASSERT_EQUAL(count_in(c, tenant_tables[i], NULL), 0);
    /* ... and the definer switch is not something the app role can flip. */
    PQfinish(c);
    c = pgt_connect(pgt_app_url);
    CU_ASSERT_FATAL(c != NULL);
    CU_ASSERT_EQUAL(pgt_exec(c, "SET eai.definer = 'on'", NULL), PGRES_COMMAND_OK);
    for (int i = 0; tenant_tables[i]; i++)
        if (app_can_select(tenant_tables[i]))
            CU_ASSERT_EQUAL(count_in(c, tenant_tables[i], NULL), 0);
    PQfinish(c);
}

/* Through the plugin: the same isolation, and the SYSTEM functions see
 * across tenants only what they are for. */
static void test_plugin_scoping(void)
{
    void *st = pgt_open(pgt_app_url, 2);
    CU_ASSERT_FATAL(st != NULL);
    json_t *m = NULL;
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->manifest_get(st, ta, "tool-manifest", "rls", &m, &e), 0);
    CU_ASSERT_PTR_NOT_NULL(m);
    json_decref(m);
    m = NULL;
    char id[48];
    snprintf(id, sizeof id, "sbx_%s", eb);
    CU_ASSERT_EQUAL(pgt_ops->exec_get(st, ta, id, &m, &e), 0);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(pgt_ops->exec_get(st, tb, id, &m, &e), 0);
    CU_ASSERT_PTR_NOT_NULL(m);
    json_decref(m);
    /* tenant_get and key_get are SYSTEM (auth needs them before a tenant is known). */
    CU_ASSERT_EQUAL(pgt_ops->tenant_get(st, tb, &m, &e), 0);
    CU_ASSERT(m && strcmp(json_string_value(json_object_get(m, "id")), tb) == 0);
    json_decref(m);
    char kid[48];
    snprintf(kid, sizeof kid, "k%s", ea);
    CU_ASSERT_EQUAL(pgt_ops->key_get(st, kid, &m, &e), 0);
    CU_ASSERT(m && strcmp(json_string_value(json_object_get(m, "tenant_id")), ta) == 0);
    json_decref(m);

    /* audit_heads (SYSTEM): the newest event of every tenant. */
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s}", "action", "rls.check", "actor", "k",
                           "target", "x", "decision", "allow");
    e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->audit_append(st, ta, ev, &e), 0);
    pgt_report("audit_append", e);
    json_decref(ev);
    json_t *last = NULL;
    CU_ASSERT_EQUAL(pgt_ops->audit_list(st, ta, 0, 100, &last, &e), 0);
    CU_ASSERT_FATAL(json_array_size(last) == 2);
    const json_t *newest = json_array_get(last, 1);
    CU_ASSERT(pgt_ops->size >= offsetof(struct eai_storage_ops, audit_heads) + sizeof(void *));
    json_t *heads = NULL;
    CU_ASSERT_EQUAL(pgt_ops->audit_heads(st, &heads, &e), 0);
    size_t i;
    json_t *h;
    int seen = 0, ordered = 1;
    const char *prev = "";
    json_array_foreach(heads, i, h) {
        const char *tid = json_string_value(json_object_get(h, "tenant_id"));
        if (strcmp(tid, prev) <= 0)
            ordered = 0;
        prev = tid;
        if (strcmp(tid, ta) == 0) {
            seen++;
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(h, "seq")), 2);
            CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(h, "hash")),
                                   json_string_value(json_object_get(newest, "hash")));
        }
    }
    CU_ASSERT_EQUAL(seen, 1);
    CU_ASSERT(ordered);
    json_decref(heads);
    json_decref(last);
    pgt_desc->destroy(st);
}

/* Output with a NUL character survives (documents are json, not jsonb). */
static void test_nul_round_trip(void)
{
    void *st = pgt_open(pgt_app_url, 1);
    CU_ASSERT_FATAL(st != NULL);
    char u[37], id[48];
    eai_uuid_v4(u);
    snprintf(id, sizeof id, "sbx_%s", u);
    json_t *x = json_pack("{s:s, s:s, s:[s]}", "id", id, "image", "i", "command", "true");
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->exec_create(st, ta, x, NULL, NULL, &e), EAI_STORE_CREATED);
    pgt_report("exec_create", e);
    json_decref(x);
    json_t *patch = json_pack("{s:s, s:i, s:s%}", "status", "failed", "exit_code", 1, "stdout", "a\0b", (size_t)3);
    e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->exec_finish(st, ta, id, patch, NULL, NULL, NULL, &e), EAI_STORE_UPDATED);
    pgt_report("exec_finish", e);
    json_decref(patch);
    json_t *out = NULL;
    CU_ASSERT_EQUAL(pgt_ops->exec_get(st, ta, id, &out, &e), 0);
    const json_t *so = json_object_get(out, "stdout");
    CU_ASSERT(json_is_string(so) && json_string_length(so) == 3 && memcmp(json_string_value(so), "a\0b", 3) == 0);
    json_decref(out);
    pgt_desc->destroy(st);
}

/* ------------------------------------------------------------ resilience */

static char outage_owner[512], outage_app[512];

/* Same server and user as url, other database, as a postgresql:// URL. */
static int url_with_db(const char *url, const char *db, char *out, size_t n)
{
    char *errmsg = NULL;
    PQconninfoOption *opts = PQconninfoParse(url, &errmsg);
    if (!opts) {
        PQfreemem(errmsg);
        return -1;
    }
    const char *host = NULL, *port = NULL, *user = NULL, *pw = NULL;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val)
            continue;
        if (!strcmp(o->keyword, "host"))
            host = o->val;
        else if (!strcmp(o->keyword, "port"))
            port = o->val;
        else if (!strcmp(o->keyword, "user"))
            user = o->val;
        else if (!strcmp(o->keyword, "password"))
            pw = o->val;
    }
    int w = snprintf(out, n, "postgresql://%s@/%s?host=%s&port=%s%s%s", user ? user : "", db,
                     host ? host : "127.0.0.1", port ? port : "5432", pw ? "&password=" : "", pw ? pw : "");
    PQconninfoFree(opts);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

static int super_sql(const char *sql)
{
    PGconn *c = pgt_connect(pgt_super_url);
    if (!c)
        return -1;
    ExecStatusType s = pgt_exec(c, sql, NULL);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
        fprintf(stderr, "  super: %s: %s", sql, PQerrorMessage(c));
    PQfinish(c);
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ? 0 : -1;
}

static int init_outage(void)
{
    if (!pgt_super_url || !*pgt_super_url)
        return 0;
    if (super_sql("DROP DATABASE IF EXISTS eai_outage WITH (FORCE)") < 0 ||
        super_sql("CREATE DATABASE eai_outage OWNER eai_owner") < 0 ||
        super_sql("GRANT CONNECT ON DATABASE eai_outage TO eai_app") < 0)
        return -1;
    if (url_with_db(pgt_owner_url, "eai_outage", outage_owner, sizeof outage_owner) < 0 ||
        url_with_db(pgt_app_url, "eai_outage", outage_app, sizeof outage_app) < 0)
        return -1;
    void *st = pgt_open(outage_owner, 1);
    if (!st)
        return -1;
    struct eai_error *e = NULL;
    int rc = pgt_ops->migrate(st, "eai_app", &e);
    pgt_report("migrate eai_outage", e);
    pgt_desc->destroy(st);
    return rc;
}

static int clean_outage(void)
{
    if (pgt_super_url && *pgt_super_url)
        super_sql("DROP DATABASE IF EXISTS eai_outage WITH (FORCE)");
    return 0;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_unreachable_is_503(void)
{
    /* Nothing listens on port 1: every op fails fast with storage_unavailable. */
    void *st = pgt_open("postgresql://eai_app@127.0.0.1:1/eai?connect_timeout=2", 2);
    CU_ASSERT_FATAL(st != NULL);   /* create never needs the database */
    for (int i = 0; i < 3; i++) {
        struct eai_error *e = NULL;
        int64_t t0 = mono_ms();
        CU_ASSERT_EQUAL(pgt_ops->ping(st, &e), -1);
        CU_ASSERT(e && e->code == EAI_E_STORAGE_UNAVAILABLE);
        CU_ASSERT(mono_ms() - t0 < 3000);
        if (e)
            eai_error_free(e);
        json_t *x = NULL;
        e = NULL;
        CU_ASSERT_EQUAL(pgt_ops->exec_get(st, ta, "sbx_00000000-0000-4000-8000-000000000000", &x, &e), -1);
        CU_ASSERT(e && e->code == EAI_E_STORAGE_UNAVAILABLE);
        if (e)
            eai_error_free(e);
    }
    pgt_desc->destroy(st);
}

static int create_one(void *st, const char *tenant, char id[48], struct eai_error **e)
{
    char u[37];
    eai_uuid_v4(u);
    snprintf(id, 48, "sbx_%s", u);
    json_t *x = json_pack("{s:s, s:s, s:s, s:[s]}", "id", id, "image", "python:3.11-slim",
                          "profile", "gvisor", "command", "true");
    int rc = pgt_ops->exec_create(st, tenant, x, NULL, NULL, e);
    json_decref(x);
    return rc;
}

struct burst_arg {
    void *st;
    const char *tenant;
    int ok;
};

static void *burst(void *p)
{
    struct burst_arg *b = p;
    for (int i = 0; i < 5; i++) {
        char id[48];
        struct eai_error *e = NULL;
        if (create_one(b->st, b->tenant, id, &e) == EAI_STORE_CREATED)
            b->ok++;
        pgt_report("burst create", e);
    }
    return NULL;
}

static void test_outage_and_recovery(void)
{
    if (!pgt_super_url || !*pgt_super_url) {
        printf("\n  SKIP: outage test needs EAI_TEST_PG_SUPER_URL\n");
        return;
    }
    void *st = pgt_open(outage_app, 2);
    CU_ASSERT_FATAL(st != NULL);
    json_t *t = NULL;
    struct eai_error *e = NULL;
    CU_ASSERT_FATAL(pgt_ops->tenant_create(st, "outage", &t, &e) == 0);
    char tenant[37];
    snprintf(tenant, sizeof tenant, "%s", json_string_value(json_object_get(t, "id")));
    json_decref(t);

    enum { N = 60 };
    static char acked[N][48];
    int nacked = 0, refused = 0;
    char id[48];
    for (int i = 0; i < 10; i++) {
        e = NULL;
        if (create_one(st, tenant, id, &e) == EAI_STORE_CREATED)
            memcpy(acked[nacked++], id, 48);
        pgt_report("create before outage", e);
    }
    CU_ASSERT_EQUAL(nacked, 10);
    /* Two threads at once: both pooled connections get opened. */
    struct burst_arg ba[2] = {{st, tenant, 0}, {st, tenant, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CU_ASSERT_FATAL(pthread_create(&th[i], NULL, burst, &ba[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CU_ASSERT_EQUAL(ba[0].ok + ba[1].ok, 10);

    /* Stale pooled connections (as after a database restart): the next op
     * reconnects transparently. */
    CU_ASSERT_FATAL(super_sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                              " WHERE datname = 'eai_outage' AND pid <> pg_backend_pid()") == 0);
    usleep(100 * 1000);
    e = NULL;
    CU_ASSERT_EQUAL(create_one(st, tenant, id, &e), EAI_STORE_CREATED);
    pgt_report("create after terminate", e);
    if (!e)
        memcpy(acked[nacked++], id, 48);

    /* Outage: the database refuses every connection. */
    CU_ASSERT_FATAL(super_sql("ALTER DATABASE eai_outage ALLOW_CONNECTIONS false") == 0);
    CU_ASSERT_FATAL(super_sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                              " WHERE datname = 'eai_outage' AND pid <> pg_backend_pid()") == 0);
    usleep(100 * 1000);
    int64_t t0 = mono_ms();
    for (int i = 0; i < 20; i++) {
        e = NULL;
        int rc = create_one(st, tenant, id, &e);
        if (rc == EAI_STORE_CREATED) {
            memcpy(acked[nacked++], id, 48);
        } else {
            CU_ASSERT(e && e->code == EAI_E_STORAGE_UNAVAILABLE);
            refused++;
        }
        if (e)
            eai_error_free(e);
    }
    CU_ASSERT_EQUAL(refused, 20);
    CU_ASSERT(mono_ms() - t0 < 10000);   /* answered at once, not hung */
    e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->ping(st, &e), -1);
    if (e)
        eai_error_free(e);

    /* Back: service resumes without recreating the plugin. */
    CU_ASSERT_FATAL(super_sql("ALTER DATABASE eai_outage ALLOW_CONNECTIONS true") == 0);
    int back = 0;
    for (int64_t until = mono_ms() + 15000; mono_ms() < until;) {
        e = NULL;
        if (pgt_ops->ping(st, &e) == 0) {
            back = 1;
            break;
        }
        eai_error_free(e);
        usleep(200 * 1000);
    }
    CU_ASSERT_FATAL(back);
    for (int i = 0; i < 10 && nacked < N; i++) {
        e = NULL;
        CU_ASSERT_EQUAL(create_one(st, tenant, id, &e), EAI_STORE_CREATED);
        pgt_report("create after recovery", e);
        if (!e)
            memcpy(acked[nacked++], id, 48);
    }
    /* Nothing acknowledged was lost. */
    int missing = 0;
    for (int i = 0; i < nacked; i++) {
        json_t *x = NULL;
        e = NULL;
        if (pgt_ops->exec_get(st, tenant, acked[i], &x, &e) < 0 || !x)
            missing++;
        pgt_report("exec_get", e);
        json_decref(x);
    }
    CU_ASSERT_EQUAL(missing, 0);
    CU_ASSERT_EQUAL(nacked, 21);
    pgt_desc->destroy(st);
}

/* exec_claim_excluding: never claims a row of an excluded tenant (own
 * database: the queue ops are SYSTEM-wide). */
static void test_claim_excluding(void)
{
    if (!pgt_super_url || !*pgt_super_url) {
        printf("\n  SKIP: needs EAI_TEST_PG_SUPER_URL (own database)\n");
        return;
    }
    void *st = pgt_open(outage_app, 2);
    CU_ASSERT_FATAL(st != NULL);
    CU_ASSERT_FATAL(pgt_ops->size >= offsetof(struct eai_storage_ops, exec_claim_excluding) + sizeof(void *));
    char tx[2][37];
    char ids[2][2][48];
    struct eai_error *e = NULL;
    for (int t = 0; t < 2; t++) {
        json_t *o = NULL;
        CU_ASSERT_FATAL(pgt_ops->tenant_create(st, "excl", &o, &e) == 0);
        snprintf(tx[t], 37, "%s", json_string_value(json_object_get(o, "id")));
        json_decref(o);
        for (int i = 0; i < 2; i++)
            CU_ASSERT_EQUAL(create_one(st, tx[t], ids[t][i], &e), EAI_STORE_CREATED);
    }
    json_t *excl = json_pack("[s, s]", tx[0], "not-a-uuid");
    json_t *cl = NULL;
    CU_ASSERT_EQUAL(pgt_ops->exec_claim_excluding(st, "node-x", 30000, 10, 10, excl, &cl, &e), 0);
    pgt_report("claim_excluding", e);
    size_t i;
    json_t *v;
    int of_x = 0, of_y = 0;
    json_array_foreach(cl, i, v) {
        const char *t = json_string_value(json_object_get(v, "tenant_id"));
        of_x += strcmp(t, tx[0]) == 0;
        of_y += strcmp(t, tx[1]) == 0;
    }
    CU_ASSERT_EQUAL(of_x, 0);
    CU_ASSERT_EQUAL(of_y, 2);
    json_decref(cl);
    /* Empty exclusion list: the rest. */
    json_t *none = json_array();
    CU_ASSERT_EQUAL(pgt_ops->exec_claim_excluding(st, "node-x", 30000, 10, 10, none, &cl, &e), 0);
    CU_ASSERT_EQUAL(json_array_size(cl), 2);
    json_decref(cl);
    json_decref(none);
    json_decref(excl);
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 2; k++) {
            json_t *p = json_pack("{s:s}", "status", "succeeded");
            CU_ASSERT_EQUAL(pgt_ops->exec_finish(st, tx[t], ids[t][k], p, NULL, NULL, NULL, &e), EAI_STORE_UPDATED);
            json_decref(p);
        }
    pgt_desc->destroy(st);
}

/* ------------------------------------------------------------ serving role */

/* app_url with another user name (the part before '@'). */
static int url_with_user(const char *user, char *out, size_t n)
{
    const char *at = strchr(pgt_app_url, '@');
    const char *scheme = strstr(pgt_app_url, "://");
    if (!at || !scheme)
        return -1;
    int w = snprintf(out, n, "%.*s%s%s", (int)(scheme + 3 - pgt_app_url), pgt_app_url, user, at);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

/* ping on url: its return code and error (code, message). */
static int ping_as(const char *url, enum eai_code *code, char *msg, size_t n)
{
    void *st = pgt_open(url, 1);
    if (!st)
        return -2;
    struct eai_error *e = NULL;
    int rc = pgt_ops->ping(st, &e);
    *code = e ? e->code : EAI_E_INTERNAL;
    snprintf(msg, n, "%s", e && e->message ? e->message : "");
    eai_error_free(e);
    pgt_desc->destroy(st);
    return rc;
}

static void test_role_app_serves(void)
{
    enum eai_code code;
    char msg[1024];
    CU_ASSERT_EQUAL(ping_as(pgt_app_url, &code, msg, sizeof msg), 0);
    if (msg[0])
        fprintf(stderr, "  app ping: %s\n", msg);
}

static void test_role_owner_refused(void)
{
    enum eai_code code;
    char msg[1024];
    CU_ASSERT_EQUAL(ping_as(pgt_owner_url, &code, msg, sizeof msg), -1);
    CU_ASSERT_EQUAL(code, EAI_E_FORBIDDEN);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "refusing to serve as role 'eai_owner'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "owns table eai."));
    /* every op refuses with 503's code; migrate as the owner still works */
    void *st = pgt_open(pgt_owner_url, 1);
    CU_ASSERT_FATAL(st != NULL);
    struct eai_error *e = NULL;
    json_t *o = NULL;
    CU_ASSERT_EQUAL(pgt_ops->tenant_create(st, "as-owner", &o, &e), -1);
    CU_ASSERT(e && e->code == EAI_E_STORAGE_UNAVAILABLE && e->message &&
              strstr(e->message, "refusing to serve"));
    eai_error_free(e);
    e = NULL;
    json_decref(o);
    CU_ASSERT_EQUAL(pgt_ops->migrate(st, NULL, &e), 0);
    pgt_report("migrate as owner", e);
    pgt_desc->destroy(st);
    /* a fresh owner instance: migrate first, then an op is still refused */
    st = pgt_open(pgt_owner_url, 1);
    CU_ASSERT_FATAL(st != NULL);
    e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->migrate(st, NULL, &e), 0);
    pgt_report("migrate as owner", e);
    e = NULL;
    CU_ASSERT_EQUAL(pgt_ops->ping(st, &e), -1);
    eai_error_free(e);
    pgt_desc->destroy(st);
}

static void test_role_super_bypass_member_refused(void)
{
    if (!pgt_super_url || !*pgt_super_url) {
        printf("\n  SKIP: needs EAI_TEST_PG_SUPER_URL\n");
        return;
    }
    enum eai_code code;
    char url[512], msg[1024];
    /* the superuser, on the eai database */
    CU_ASSERT_EQUAL_FATAL(url_with_db(pgt_super_url, "eai", url, sizeof url), 0);
    CU_ASSERT_EQUAL(ping_as(url, &code, msg, sizeof msg), -1);
    CU_ASSERT_EQUAL(code, EAI_E_FORBIDDEN);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "is a superuser"));
    /* a BYPASSRLS role, and a member of the owner role */
    CU_ASSERT_EQUAL_FATAL(super_sql("DROP ROLE IF EXISTS eai_t_bypass"), 0);
    CU_ASSERT_EQUAL_FATAL(super_sql("DROP ROLE IF EXISTS eai_t_member"), 0);
    CU_ASSERT_EQUAL_FATAL(super_sql("CREATE ROLE eai_t_bypass LOGIN NOSUPERUSER BYPASSRLS"), 0);
    CU_ASSERT_EQUAL_FATAL(super_sql("CREATE ROLE eai_t_member LOGIN NOSUPERUSER NOBYPASSRLS IN ROLE eai_owner"), 0);
    CU_ASSERT_EQUAL_FATAL(super_sql("GRANT CONNECT ON DATABASE eai TO eai_t_bypass, eai_t_member"), 0);
    CU_ASSERT_EQUAL_FATAL(url_with_user("eai_t_bypass", url, sizeof url), 0);
    CU_ASSERT_EQUAL(ping_as(url, &code, msg, sizeof msg), -1);
    CU_ASSERT_EQUAL(code, EAI_E_FORBIDDEN);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "has BYPASSRLS"));
    CU_ASSERT_EQUAL_FATAL(url_with_user("eai_t_member", url, sizeof url), 0);
    CU_ASSERT_EQUAL(ping_as(url, &code, msg, sizeof msg), -1);
    CU_ASSERT_EQUAL(code, EAI_E_FORBIDDEN);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "owns table eai."));
    super_sql("REVOKE CONNECT ON DATABASE eai FROM eai_t_bypass, eai_t_member");
    super_sql("DROP ROLE IF EXISTS eai_t_bypass");
    super_sql("DROP ROLE IF EXISTS eai_t_member");
}

/* `eaid serve` with the owner's URL exits non-zero, saying why. */
static void test_role_serve_refuses(void)
{
    const char *bd = getenv("EAI_BUILD_DIR");
    char eaid[512], dir[] = "/tmp/eai-pgrole-XXXXXX", log[128], data[128], listen[64];
    snprintf(eaid, sizeof eaid, "%s/eaid", bd ? bd : ".");
    CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
    snprintf(log, sizeof log, "%s/eaid.log", dir);
    snprintf(data, sizeof data, "%s/data", dir);
    srand((unsigned)getpid());
    snprintf(listen, sizeof listen, "127.0.0.1:%d", 20000 + rand() % 30000);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("EAI_DATABASE_URL", pgt_owner_url, 1);
        setenv("EAI_DATA_DIR", data, 1);
        setenv("EAI_LISTEN", listen, 1);
        setenv("EAI_SANDBOX_RUNSC", "/nonexistent", 1);
        unsetenv("EAI_AUTH_PEPPER_FILE");
        execl(eaid, eaid, "serve", (char *)NULL);
        _exit(127);
    }
    int st = 0, done = 0;
    for (int i = 0; i < 300 && !done; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            done = 1;
        else
            usleep(50 * 1000);
    }
    if (!done) {
        kill(pid, SIGTERM);
        waitpid(pid, &st, 0);
    }
    CU_ASSERT(done && WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 127);
    char out[8192] = "";
    int fd = open(log, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, out, sizeof out - 1);
        out[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    if (!strstr(out, "refusing to serve as role 'eai_owner'"))
        fprintf(stderr, "  eaid output: %s\n", out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "refusing to serve as role 'eai_owner'"));
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

int main(void)
{
    if (pgt_env() < 0)
        return EAI_PG_TEST_SKIP;
    if (pgt_load() < 0)
        return 1;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("postgres_rls", init_rls, clean_rls);
    CU_add_test(s, "tenant A set: unfiltered SELECT sees only A's rows", test_tenant_sees_only_own_rows);
    CU_add_test(s, "tenant A set: writing B's rows fails", test_cross_tenant_writes_fail);
    CU_add_test(s, "no tenant set: 0 rows everywhere (app and owner)", test_no_tenant_sees_nothing);
    CU_add_test(s, "plugin: scoped ops and SYSTEM lookups", test_plugin_scoping);
    CU_add_test(s, "plugin: output with NUL round-trips", test_nul_round_trip);
    CU_pSuite r = CU_add_suite("postgres_resilience", init_outage, clean_outage);
    CU_add_test(r, "unreachable database: storage_unavailable at once", test_unreachable_is_503);
    CU_add_test(r, "claim excluding tenants (own database)", test_claim_excluding);
    CU_add_test(r, "outage and recovery: no restart, nothing acknowledged lost", test_outage_and_recovery);
    CU_pSuite o = CU_add_suite("postgres_roles", NULL, NULL);
    CU_add_test(o, "the app role serves", test_role_app_serves);
    CU_add_test(o, "the owner is refused, migrate as owner works", test_role_owner_refused);
    CU_add_test(o, "superuser, BYPASSRLS, owner member refused", test_role_super_bypass_member_refused);
    CU_add_test(o, "eaid serve as the owner exits with the reason", test_role_serve_refuses);
    int rc = pgt_run_suite(s);
    pgt_unload();
    return rc;
}
