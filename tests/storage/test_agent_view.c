/*
 * The agent view on a storage backend (ops run_get, run_list, agent_list,
 * agent_get of ABI 1.3): what they return, tenant isolation, bounds, and
 * the query plans.  EAI_TEST_STORAGE as for test_storage_contract: unset
 * or "sqlite" (the built-in backend on a temp file), or a postgres:// URL
 * (tests/postgres registers it with the test cluster as
 * storage_agent_view_postgres).
 *
 * Plans: on SQLite, EXPLAIN QUERY PLAN of every query of
 * core/store/store_sqlite_agent_sql.h must SEARCH an index and never SCAN
 * sandbox_executions.  On PostgreSQL (EAI_TEST_PG_OWNER_URL), 20000 rows of
 * one tenant are inserted and analysed, then EXPLAIN of every query of
 * plugins/postgres/pg_agent_sql.h must use an index scan and no Seq Scan.
 * Both print the plans (docs/storage.md "The agent view" shows them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <jansson.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <eai/storage.h>

#include "base/errors.h"
#include "base/util.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "store/store_sqlite.h"
#include "store/store_sqlite_agent_sql.h"
#include "pg_agent_sql.h"

static const struct eai_plugin_descriptor *g_desc;
static const struct eai_storage_ops *g_ops;
static void *g_st;
static struct eai_host *g_host;
static char g_dir[64];
static int g_is_sqlite = 1;
static char g_a[37], g_b[37];   /* two tenants */

#define OK(call)                                                                            \
    do {                                                                                    \
        struct eai_error *err_ = NULL;                                                      \
        struct eai_error **err = &err_;                                                     \
        int rc_ = (call);                                                                   \
        if (rc_ < 0)                                                                        \
            fprintf(stderr, "  %s: %s\n", #call, err_ && err_->message ? err_->message : "?"); \
        eai_error_free(err_);                                                               \
        CU_ASSERT_FATAL(rc_ >= 0);                                                          \
    } while (0)

static json_int_t ji(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static void new_tenant(char out[37])
{
    json_t *t = NULL;
    char name[64];
    eai_random_hex(name, 6);
    OK(g_ops->tenant_create(g_st, name, &t, err));
    snprintf(out, 37, "%s", eai_jstr(t, "id"));
    json_decref(t);
}

/* One execution of tenant in run/agent/project with profile, finished
 * with cpu seconds (status) unless status is NULL (stays queued). */
static void exec_in(const char *tenant, const char *run, const char *agent, const char *project,
                    const char *profile, const char *status, double cpu, char id_out[41])
{
    char u[37], id[41], now[32];
    eai_uuid_v4(u);
    snprintf(id, sizeof id, "sbx_%s", u);
    eai_time_rfc3339(eai_now_ms(), now);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s], s:{s:s, s:s, s:i}, s:{}, s:n, s:b, s:[], s:[], s:[],"
                          " s:n, s:s, s:s}",
                          "id", id, "status", "queued", "profile", profile, "backend", "gvisor", "image", "img",
                          "command", "true", "limits", "cpu", "1", "memory", "64Mi", "timeout_s", 5, "env",
                          "stdin", "stdin_b64", 0, "files_in", "collect", "egress", "tool",
                          "trace_id", "0af7651916cd43dd8448eb211c80319c", "created_at", now);
    if (run)
        json_object_set_new(e, "run_id", json_string(run));
    if (agent)
        json_object_set_new(e, "agent_id", json_string(agent));
    if (project)
        json_object_set_new(e, "project_id", json_string(project));
    json_t *existing = NULL;
    OK(g_ops->exec_create(g_st, tenant, e, NULL, &existing, err));
    json_decref(e);
    if (status) {
        json_t *patch = json_pack("{s:s, s:i, s:{s:f, s:f, s:f}, s:s}", "status", status, "exit_code", 0, "usage",
                                  "cpu_seconds", cpu, "memory_mb_seconds", 2 * cpu, "duration_s", 3 * cpu,
                                  "finished_at", now);
        OK(g_ops->exec_finish(g_st, tenant, id, patch, NULL, NULL, NULL, err));
        json_decref(patch);
    }
    if (id_out)
        snprintf(id_out, 41, "%s", id);
}

static void test_ops_present(void)
{
    CU_ASSERT(g_ops->size >= EAI_STORAGE_OPS_SIZE_1_3);
    CU_ASSERT_PTR_NOT_NULL(g_ops->run_get);
    CU_ASSERT_PTR_NOT_NULL(g_ops->run_list);
    CU_ASSERT_PTR_NOT_NULL(g_ops->agent_list);
    CU_ASSERT_PTR_NOT_NULL(g_ops->agent_get);
}

static char g_first[41], g_third[41], g_queued[41];

static void fill(void)
{
    new_tenant(g_a);
    new_tenant(g_b);
    exec_in(g_a, "run-1", "agent-x", "proj-1", "gvisor", "succeeded", 1.0, g_first);
    exec_in(g_a, "run-1", "agent-x", "proj-1", "gvisor", "failed", 2.0, NULL);
    exec_in(g_a, "run-1", "agent-x", "proj-1", "gvisor-small", "succeeded", 4.0, g_third);
    exec_in(g_a, "run-1", "agent-x", "proj-1", "gvisor", NULL, 0, g_queued);       /* queued */
    exec_in(g_a, "run-2", "agent-x", "proj-2", "gvisor", "succeeded", 1.0, NULL);
    exec_in(g_a, "run-3", "agent-y", "proj-1", "gvisor", "succeeded", 1.0, NULL);
    exec_in(g_a, NULL, "agent-z", NULL, "gvisor", "succeeded", 1.0, NULL);        /* no run */
    exec_in(g_b, "run-1", "agent-x", "proj-1", "gvisor", "succeeded", 8.0, NULL); /* other tenant */
}

static void test_run_get(void)
{
    fill();
    json_t *run = NULL;
    OK(g_ops->run_get(g_st, g_a, "run-1", 100, &run, err));
    CU_ASSERT_FATAL(json_is_object(run));
    CU_ASSERT_EQUAL(ji(run, "total"), 4);
    CU_ASSERT(json_is_false(json_object_get(run, "truncated")));
    json_t *items = json_object_get(run, "executions");
    CU_ASSERT_EQUAL(json_array_size(items), 4);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(items, 0), "id"), g_first);   /* oldest first */
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(items, 2), "profile"), "gvisor-small");
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(items, 0), "trace_id"), "0af7651916cd43dd8448eb211c80319c");
    json_t *counts = json_object_get(run, "counts");
    CU_ASSERT_EQUAL(ji(counts, "succeeded"), 2);
    CU_ASSERT_EQUAL(ji(counts, "failed"), 1);
    CU_ASSERT_EQUAL(ji(counts, "queued"), 1);
    json_t *u = json_object_get(run, "usage");
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(u, "cpu_seconds")), 7.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(u, "memory_mb_seconds")), 14.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(u, "duration_s")), 21.0, 1e-9);
    CU_ASSERT_STRING_EQUAL(eai_jstr(run, "agent_id"), "agent-x");
    CU_ASSERT_STRING_EQUAL(eai_jstr(run, "project_id"), "proj-1");
    CU_ASSERT_PTR_NOT_NULL(eai_jstr(run, "first_at"));
    CU_ASSERT_PTR_NOT_NULL(eai_jstr(run, "last_at"));
    CU_ASSERT(strcmp(eai_jstr(run, "first_at"), eai_jstr(run, "last_at")) <= 0);
    json_decref(run);
    /* capped: two listed, truncated, the sums still over the whole run */
    OK(g_ops->run_get(g_st, g_a, "run-1", 2, &run, err));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(run, "executions")), 2);
    CU_ASSERT(json_is_true(json_object_get(run, "truncated")));
    CU_ASSERT_EQUAL(ji(run, "total"), 4);
    json_decref(run);
    /* the other tenant's run-1 is its own; an unknown run is NULL */
    OK(g_ops->run_get(g_st, g_b, "run-1", 100, &run, err));
    CU_ASSERT_EQUAL(ji(run, "total"), 1);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(json_object_get(run, "usage"), "cpu_seconds")), 8.0,
                           1e-9);
    json_decref(run);
    json_t *sentinel = json_object();   /* the op sets *out to NULL (it never frees it) */
    run = sentinel;
    OK(g_ops->run_get(g_st, g_a, "no-such-run", 100, &run, err));
    CU_ASSERT_PTR_NULL(run);
    json_decref(sentinel);
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(g_ops->run_get(g_st, g_a, "run-1", 0, &run, &e), -1);
    eai_error_free(e);
    /* leave nothing queued: the database may be shared with the contract
     * suite, whose claims take every tenant's queued executions */
    json_t *patch = json_pack("{s:s, s:n}", "status", "cancelled", "exit_code");
    OK(g_ops->exec_finish(g_st, g_a, g_queued, patch, NULL, NULL, NULL, err));
    json_decref(patch);
}

static json_t *runs(const char *tenant, const char *agent, const char *project, const char *after, int limit)
{
    json_t *f = json_pack("{s:i, s:s?, s:s?, s:s?}", "limit", limit, "agent_id", agent, "project_id", project,
                          "after", after), *out = NULL;
    OK(g_ops->run_list(g_st, tenant, f, &out, err));
    json_decref(f);
    CU_ASSERT_FATAL(json_is_array(out));
    return out;
}

/* An output holding a NUL (PostgreSQL keeps documents as json for it):
 * the run and its agent still read, with the run's usage. */
static void test_nul_output(void)
{
    char c[37], id[41], now[32];
    new_tenant(c);
    exec_in(c, "run-nul", "agent-nul", NULL, "gvisor", NULL, 0, id);
    eai_time_rfc3339(eai_now_ms(), now);
    json_t *patch = json_pack("{s:s, s:i, s:s%, s:{s:f, s:f, s:f}, s:s}", "status", "failed", "exit_code", 1,
                              "stdout", "a\0b", (size_t)3, "usage", "cpu_seconds", 0.25, "memory_mb_seconds", 0.5,
                              "duration_s", 0.75, "finished_at", now);
    OK(g_ops->exec_finish(g_st, c, id, patch, NULL, NULL, NULL, err));
    json_decref(patch);
    json_t *run = NULL;
    OK(g_ops->run_get(g_st, c, "run-nul", 10, &run, err));
    CU_ASSERT_FATAL(json_is_object(run));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(run, "counts"), "failed")), 1);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(json_object_get(run, "usage"), "duration_s")), 0.75, 1e-9);
    json_decref(run);
    json_t *a = NULL;
    OK(g_ops->agent_get(g_st, c, "agent-nul", &a, err));
    CU_ASSERT_EQUAL(ji(a, "executions"), 1);
    json_decref(a);
}

static void test_run_list(void)
{
    json_t *l = runs(g_a, "agent-x", NULL, NULL, 10);
    CU_ASSERT_EQUAL(json_array_size(l), 2);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 0), "run_id"), "run-1");
    CU_ASSERT_EQUAL(ji(json_array_get(l, 0), "executions"), 4);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 1), "run_id"), "run-2");
    json_decref(l);
    l = runs(g_a, "agent-x", "proj-2", NULL, 10);
    CU_ASSERT_EQUAL(json_array_size(l), 1);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 0), "run_id"), "run-2");
    json_decref(l);
    l = runs(g_a, NULL, "proj-1", NULL, 10);
    CU_ASSERT_EQUAL(json_array_size(l), 2);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 1), "run_id"), "run-3");
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 1), "agent_id"), "agent-y");
    json_decref(l);
    /* all runs, paged by one (the execution without a run is in none) */
    const char *want[] = {"run-1", "run-2", "run-3"};
    char after[64] = "";
    for (int i = 0; i < 3; i++) {
        l = runs(g_a, NULL, NULL, after[0] ? after : NULL, 1);
        CU_ASSERT_EQUAL_FATAL(json_array_size(l), 1);
        CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 0), "run_id"), want[i]);
        snprintf(after, sizeof after, "%s", eai_jstr(json_array_get(l, 0), "run_id"));
        json_decref(l);
    }
    l = runs(g_a, NULL, NULL, after, 1);
    CU_ASSERT_EQUAL(json_array_size(l), 0);
    json_decref(l);
    l = runs(g_b, NULL, NULL, NULL, 10);
    CU_ASSERT_EQUAL(json_array_size(l), 1);
    json_decref(l);
}

static void test_agents(void)
{
    json_t *l = NULL;
    OK(g_ops->agent_list(g_st, g_a, NULL, 10, &l, err));
    CU_ASSERT_EQUAL_FATAL(json_array_size(l), 3);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 0), "agent_id"), "agent-x");
    CU_ASSERT_EQUAL(ji(json_array_get(l, 0), "executions"), 5);
    CU_ASSERT_EQUAL(ji(json_array_get(l, 0), "runs"), 2);
    CU_ASSERT_PTR_NOT_NULL(eai_jstr(json_array_get(l, 0), "last_seen"));
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 2), "agent_id"), "agent-z");
    CU_ASSERT_EQUAL(ji(json_array_get(l, 2), "runs"), 0);
    json_decref(l);
    OK(g_ops->agent_list(g_st, g_a, "agent-x", 1, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 1);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 0), "agent_id"), "agent-y");
    json_decref(l);
    json_t *a = NULL;
    OK(g_ops->agent_get(g_st, g_a, "agent-x", &a, err));
    CU_ASSERT_FATAL(json_is_object(a));
    CU_ASSERT_EQUAL(ji(a, "executions"), 5);
    CU_ASSERT_EQUAL(ji(a, "runs"), 2);
    CU_ASSERT_STRING_EQUAL(eai_jstr(a, "newest_run"), "run-2");
    CU_ASSERT_PTR_NOT_NULL(eai_jstr(a, "last_seen"));
    json_t *u = json_object_get(a, "usage");
    CU_ASSERT_EQUAL_FATAL(json_array_size(u), 2);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(u, 0), "profile"), "gvisor");
    CU_ASSERT_EQUAL(ji(json_array_get(u, 0), "executions"), 4);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(json_array_get(u, 0), "cpu_seconds")), 4.0, 1e-9);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(u, 1), "profile"), "gvisor-small");
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(json_array_get(u, 1), "duration_s")), 12.0, 1e-9);
    json_decref(a);
    json_t *sentinel = json_object();
    a = sentinel;
    OK(g_ops->agent_get(g_st, g_b, "agent-y", &a, err));   /* tenant a's agent: none in b */
    CU_ASSERT_PTR_NULL(a);
    json_decref(sentinel);
    OK(g_ops->agent_get(g_st, g_b, "agent-x", &a, err));
    CU_ASSERT_EQUAL(ji(a, "executions"), 1);
    json_decref(a);
}

/* ------------------------------------------------------------ plans */

static const char *const sq_queries[][2] = {
    {"run executions", EAI_SQ_RUN_ITEMS}, {"run summary", EAI_SQ_RUN_SUMMARY},
    {"runs by agent", EAI_SQ_RUNS_BY_AGENT}, {"runs by project", EAI_SQ_RUNS_BY_PROJECT},
    {"runs", EAI_SQ_RUNS_ALL}, {"agents", EAI_SQ_AGENTS}, {"agent usage", EAI_SQ_AGENT_USAGE},
    {"agent runs", EAI_SQ_AGENT_RUNS}, {"agent newest run", EAI_SQ_AGENT_NEWEST_RUN},
};

static void test_sqlite_plans(void)
{
    if (!g_is_sqlite)
        return;
    char path[128];
    snprintf(path, sizeof path, "%s/eai.db", g_dir);
    sqlite3 *db = NULL;
    CU_ASSERT_FATAL(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    printf("\n");
    for (size_t q = 0; q < sizeof sq_queries / sizeof sq_queries[0]; q++) {
        char sql[4096];
        snprintf(sql, sizeof sql, "EXPLAIN QUERY PLAN %s", sq_queries[q][1]);
        sqlite3_stmt *st = NULL;
        CU_ASSERT_FATAL(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK);
        int searched = 0, scanned = 0;
        printf("-- %s\n", sq_queries[q][0]);
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *d = (const char *)sqlite3_column_text(st, 3);
            printf("   %s\n", d);
            searched |= strncmp(d, "SEARCH sandbox_executions USING", 31) == 0;
            scanned |= strncmp(d, "SCAN sandbox_executions", 23) == 0;
        }
        sqlite3_finalize(st);
        if (!searched || scanned)
            fprintf(stderr, "  plan of '%s' does not search an index only\n", sq_queries[q][0]);
        CU_ASSERT(searched);
        CU_ASSERT(!scanned);
    }
    sqlite3_close(db);
}

static const struct {
    const char *what, *sql;
    int n;
} pg_queries[] = {
    {"run executions", EAI_PG_RUN_ITEMS, 3}, {"run summary", EAI_PG_RUN_SUMMARY, 2},
    {"runs by agent", EAI_PG_RUNS_BY_AGENT, 5}, {"runs by project", EAI_PG_RUNS_BY_PROJECT, 5},
    {"runs", EAI_PG_RUNS_ALL, 5}, {"agents", EAI_PG_AGENTS, 3}, {"agent usage", EAI_PG_AGENT_USAGE, 2},
    {"agent runs", EAI_PG_AGENT_RUNS, 2}, {"agent newest run", EAI_PG_AGENT_NEWEST_RUN, 2},
};

static PGresult *pgq(PGconn *c, const char *sql, int n, const char *const *p)
{
    PGresult *r = PQexecParams(c, sql, n, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "  %s\n  %s", sql, PQerrorMessage(c));
    return r;
}

static void test_pg_plans(void)
{
    const char *url = getenv("EAI_TEST_PG_OWNER_URL");
    if (g_is_sqlite || !url || !*url)
        return;
    PGconn *c = PQconnectdb(url);
    CU_ASSERT_FATAL(PQstatus(c) == CONNECTION_OK);
    char t[37];
    new_tenant(t);
    /* 20000 executions of one tenant: 200 agents, 2000 runs, 50 projects */
    const char *fill_sql =
        "INSERT INTO eai.sandbox_executions (id, tenant_id, status, profile, run_id, project_id, doc)"
        " SELECT gen_random_uuid(), $1::uuid, 'succeeded', 'gvisor', 'run-' || (g % 2000), 'proj-' || (g % 50),"
        " json_build_object('agent_id', 'agent-' || (g % 200), 'trace_id', md5(g::text),"
        "  'usage', json_build_object('cpu_seconds', 0.5, 'memory_mb_seconds', 1.0, 'duration_s', 0.7))"
        " FROM generate_series(1, 20000) g";
    const char *p1[1] = {t};
    PQclear(pgq(c, "BEGIN", 0, NULL));
    PQclear(pgq(c, "SELECT set_config('app.tenant_id', $1, true)", 1, p1));
    PGresult *r = pgq(c, fill_sql, 1, p1);
    CU_ASSERT_FATAL(PQresultStatus(r) == PGRES_COMMAND_OK);
    PQclear(r);
    PQclear(pgq(c, "COMMIT", 0, NULL));
    PQclear(pgq(c, "ANALYZE eai.sandbox_executions", 0, NULL));
    PQclear(pgq(c, "SELECT set_config('app.tenant_id', $1, false)", 1, p1));
    printf("\n");
    for (size_t q = 0; q < sizeof pg_queries / sizeof pg_queries[0]; q++) {
        const char *p[5] = {t, "agent-7", "", NULL, "21"};
        if (pg_queries[q].n == 2 || pg_queries[q].n == 3)
            p[1] = strstr(pg_queries[q].what, "run") && !strstr(pg_queries[q].what, "agent") ? "run-7" : "agent-7";
        if (pg_queries[q].n == 3)
            p[2] = strcmp(pg_queries[q].what, "agents") == 0 ? "21" : "101";
        if (strcmp(pg_queries[q].what, "agents") == 0)
            p[1] = "";
        if (strcmp(pg_queries[q].what, "runs by project") == 0) {
            p[1] = NULL;
            p[3] = "proj-3";
        } else if (strcmp(pg_queries[q].what, "runs") == 0) {
            p[1] = NULL;
        }
        char sql[4096];
        snprintf(sql, sizeof sql, "EXPLAIN %s", pg_queries[q].sql);
        r = pgq(c, sql, pg_queries[q].n, p);
        CU_ASSERT_FATAL(PQresultStatus(r) == PGRES_TUPLES_OK);
        int index = 0, seq = 0;
        printf("-- %s\n", pg_queries[q].what);
        for (int i = 0; i < PQntuples(r); i++) {
            const char *line = PQgetvalue(r, i, 0);
            printf("   %s\n", line);
            index |= strstr(line, "Index Scan") || strstr(line, "Index Only Scan") ||
                     strstr(line, "Bitmap Index Scan");
            seq |= strstr(line, "Seq Scan") != NULL;
        }
        PQclear(r);
        if (!index || seq)
            fprintf(stderr, "  plan of '%s' is not an index scan\n", pg_queries[q].what);
        CU_ASSERT(index);
        CU_ASSERT(!seq);
    }
    /* the 20000 rows go (as the owner, under the tenant's policy) */
    PQclear(pgq(c, "BEGIN", 0, NULL));
    PQclear(pgq(c, "SELECT set_config('app.tenant_id', $1, true)", 1, p1));
    PQclear(pgq(c, "DELETE FROM eai.sandbox_executions WHERE tenant_id = $1::uuid", 1, p1));
    PQclear(pgq(c, "COMMIT", 0, NULL));
    PQfinish(c);
}

/* ------------------------------------------------------------ setup */

static int setup(void)
{
    const char *sel = getenv("EAI_TEST_STORAGE");
    snprintf(g_dir, sizeof g_dir, "/tmp/eai-agentview-XXXXXX");
    if (!mkdtemp(g_dir) || !(g_host = eai_host_new(NULL, g_dir)))
        return -1;
    json_t *cfg;
    struct eai_error *err = NULL;
    if (!sel || !*sel || strcmp(sel, "sqlite") == 0) {
        char path[128];
        snprintf(path, sizeof path, "%s/eai.db", g_dir);
        g_desc = eai_builtin_storage_sqlite();
        cfg = json_pack("{s:s}", "path", path);
    } else {
        g_is_sqlite = 0;
        g_desc = eai_plugin_load(eai_plugin_dir(), EAI_KIND_STORAGE, "postgres", &err);
        if (!g_desc) {
            fprintf(stderr, "loading the postgres plugin: %s\n", err && err->message ? err->message : "?");
            return -1;
        }
        cfg = json_pack("{s:s}", "url", sel);
        const char *owner_url = getenv("EAI_TEST_PG_OWNER_URL");
        if (owner_url && *owner_url) {
            json_t *ocfg = json_pack("{s:s}", "url", owner_url);
            void *owner = g_desc->create(g_host, ocfg, &err);
            json_decref(ocfg);
            const char *role = getenv("EAI_TEST_PG_APP_ROLE");
            int rc = owner ? ((const struct eai_storage_ops *)g_desc->ops)->migrate(
                                 owner, role && *role ? role : "eai_app", &err)
                           : -1;
            if (owner)
                g_desc->destroy(owner);
            if (rc < 0) {
                fprintf(stderr, "migrate as owner: %s\n", err && err->message ? err->message : "?");
                json_decref(cfg);
                return -1;
            }
        }
    }
    g_ops = g_desc->ops;
    g_st = g_desc->create(g_host, cfg, &err);
    json_decref(cfg);
    if (!g_st || (g_is_sqlite && g_ops->migrate(g_st, NULL, &err) < 0)) {
        fprintf(stderr, "create/migrate: %s\n", err && err->message ? err->message : "?");
        return -1;
    }
    fprintf(stderr, "agent view: backend %s\n", g_desc->name);
    return 0;
}

static void teardown(void)
{
    if (g_st)
        g_desc->destroy(g_st);
    const char *sfx[] = {"/eai.db", "/eai.db-wal", "/eai.db-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s%s", g_dir, sfx[i]);
        unlink(p);
    }
    rmdir(g_dir);
    eai_host_free(g_host);
}

int main(void)
{
    if (setup() < 0) {
        teardown();
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("agent_view", NULL, NULL);
    CU_add_test(s, "the 1.3 ops are there", test_ops_present);
    CU_add_test(s, "run_get: executions in order, counts, usage, cap, tenants", test_run_get);
    CU_add_test(s, "run_list: by agent, project, all, paged", test_run_list);
    CU_add_test(s, "an output with a NUL: run and agent still read", test_nul_output);
    CU_add_test(s, "agent_list and agent_get: usage per profile", test_agents);
    CU_add_test(s, "sqlite: every query searches an index", test_sqlite_plans);
    CU_add_test(s, "postgres: every query uses an index scan", test_pg_plans);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures();
    CU_cleanup_registry();
    teardown();
    return failures ? 1 : 0;
}
