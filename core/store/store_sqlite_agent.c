/*
 * Built-in SQLite backend: the agent view (storage ops run_get, run_list,
 * agent_list, agent_get of ABI 1.3; include/eai/storage.h, docs/storage.md
 * "The agent view").  Read only; every query goes through an index of
 * migrations/sqlite/0001_init.sql or 0003_agent_view.sql (the SQL is in
 * store_sqlite_agent_sql.h, which tests/storage/test_agent_view.c
 * EXPLAINs).  Runs are ordered by run_id (a stable keyset cursor), agents
 * by agent_id.
 */
#include <string.h>

#include "store/store_sqlite_int.h"
#include "store/store_sqlite_agent_sql.h"

#define AGENT_LIMIT_MAX 1000

static json_t *col_usage(sqlite3_stmt *st, int i)
{
    json_t *u = sqlite3_column_type(st, i) == SQLITE_NULL ? NULL : eai_sq_col_json(st, i);
    return json_is_object(u) ? u : (json_decref(u), json_null());
}

static json_t *run_item(sqlite3_stmt *st)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
                     "id", eai_sq_col_str_or_null(st, 0), "status", eai_sq_col_str_or_null(st, 1),
                     "profile", eai_sq_col_str_or_null(st, 2), "session_id", eai_sq_col_str_or_null(st, 3),
                     "trace_id", eai_sq_col_str_or_null(st, 4), "created_at", eai_sq_col_str_or_null(st, 5),
                     "started_at", eai_sq_col_str_or_null(st, 6), "finished_at", eai_sq_col_str_or_null(st, 7),
                     "usage", col_usage(st, 8));
}

/* Keep the smaller (min) or larger (max) RFC 3339 string of v and o[k]. */
static void keep_time(json_t *o, const char *k, sqlite3_stmt *st, int i, int max)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return;
    const char *v = eai_sq_col_text(st, i), *cur = json_string_value(json_object_get(o, k));
    if (!cur || (max ? strcmp(v, cur) > 0 : strcmp(v, cur) < 0))
        json_object_set_new(o, k, json_string(v));
}

static void add_real(json_t *o, const char *k, double v)
{
    json_object_set_new(o, k, json_real(json_real_value(json_object_get(o, k)) + v));
}

/* The summary rows (one per status) folded into out. */
static int run_summary(struct eai_sq *s, sqlite3 *db, const char *tenant, const char *run_id, json_t *out,
                       struct eai_error **err)
{
    sqlite3_stmt *st = eai_sq_prep(s, db, EAI_SQ_RUN_SUMMARY, err);
    if (!st)
        return -1;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, run_id, -1, SQLITE_STATIC);
    json_t *counts = json_object(), *usage = json_pack("{s:f, s:f, s:f}", "cpu_seconds", 0.0,
                                                        "memory_mb_seconds", 0.0, "duration_s", 0.0);
    json_int_t total = 0;
    int rc;
    while (counts && usage && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_int_t n = sqlite3_column_int64(st, 1);
        json_object_set_new(counts, eai_sq_col_text(st, 0), json_integer(n));
        total += n;
        add_real(usage, "cpu_seconds", sqlite3_column_double(st, 2));
        add_real(usage, "memory_mb_seconds", sqlite3_column_double(st, 3));
        add_real(usage, "duration_s", sqlite3_column_double(st, 4));
        keep_time(out, "first_at", st, 5, 0);
        keep_time(out, "last_at", st, 6, 1);
        if (sqlite3_column_type(st, 7) != SQLITE_NULL)
            json_object_set_new(out, "agent_id", json_string(eai_sq_col_text(st, 7)));
        if (sqlite3_column_type(st, 8) != SQLITE_NULL)
            json_object_set_new(out, "project_id", json_string(eai_sq_col_text(st, 8)));
    }
    int ret = 0;
    if (!counts || !usage)
        ret = eai_sq_oom(s, err);
    else if (rc != SQLITE_DONE)
        ret = eai_sq_db_fail(s, err, db, "run summary");
    sqlite3_finalize(st);
    json_object_set_new(out, "counts", counts ? counts : json_null());
    json_object_set_new(out, "usage", usage ? usage : json_null());
    json_object_set_new(out, "total", json_integer(total));
    return ret;
}

int eai_sq_run_get(void *self, const char *tenant, const char *run_id, int limit, json_t **out,
                   struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    if (!tenant || !run_id)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "run_get without tenant or run_id");
    if (limit < 1 || limit > AGENT_LIMIT_MAX)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "run_get: limit %d outside 1..1000", limit);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    json_t *run = json_pack("{s:s, s:n, s:n, s:n, s:n}", "run_id", run_id, "agent_id", "project_id",
                            "first_at", "last_at"), *items = NULL;
    if (!run) {
        eai_sq_oom(s, err);
        goto out;
    }
    /* one read transaction: the list and the sums see the same rows */
    if (eai_sq_exec_sql(s, c->db, "BEGIN", err) < 0)
        goto out;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, EAI_SQ_RUN_ITEMS, err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, run_id, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, limit + 1);   /* one more: tells truncation */
        int rc2 = eai_sq_collect(s, c->db, st, run_item, "run executions", &items, err);
        sqlite3_finalize(st);
        if (rc2 == 0 && run_summary(s, c->db, tenant, run_id, run, err) == 0) {
            int truncated = json_array_size(items) > (size_t)limit;
            if (truncated)
                json_array_remove(items, (size_t)limit);
            if (json_array_size(items) > 0) {
                json_object_set_new(run, "truncated", json_boolean(truncated));
                json_object_set_new(run, "executions", items);
                items = NULL;
                *out = run;
                run = NULL;
            }
            ret = 0;
        }
    }
    eai_sq_exec_sql(s, c->db, "COMMIT", NULL);
out:
    json_decref(items);
    json_decref(run);
    eai_sq_release(s, c);
    return ret;
}

static json_t *run_row(sqlite3_stmt *st)
{
    return json_pack("{s:o, s:o, s:o, s:I, s:o, s:o}", "run_id", eai_sq_col_str_or_null(st, 0),
                     "agent_id", eai_sq_col_str_or_null(st, 1), "project_id", eai_sq_col_str_or_null(st, 2),
                     "executions", (json_int_t)sqlite3_column_int64(st, 3),
                     "first_at", eai_sq_col_str_or_null(st, 4), "last_at", eai_sq_col_str_or_null(st, 5));
}

int eai_sq_run_list(void *self, const char *tenant, const json_t *filter, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    int limit = (int)json_integer_value(json_object_get(filter, "limit"));
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "run_list without tenant");
    if (limit < 1 || limit > AGENT_LIMIT_MAX)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "run_list: limit %d outside 1..1000", limit);
    const char *agent = json_string_value(json_object_get(filter, "agent_id"));
    const char *project = json_string_value(json_object_get(filter, "project_id"));
    const char *after = json_string_value(json_object_get(filter, "after"));
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, agent ? EAI_SQ_RUNS_BY_AGENT : project ? EAI_SQ_RUNS_BY_PROJECT
                                                                                    : EAI_SQ_RUNS_ALL, err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 2, agent);
        sqlite3_bind_text(st, 3, after ? after : "", -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 4, project);
        sqlite3_bind_int(st, 5, limit);
        ret = eai_sq_collect(s, c->db, st, run_row, "run list", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

static json_t *agent_row(sqlite3_stmt *st)
{
    return json_pack("{s:o, s:I, s:I, s:o}", "agent_id", eai_sq_col_str_or_null(st, 0),
                     "executions", (json_int_t)sqlite3_column_int64(st, 1),
                     "runs", (json_int_t)sqlite3_column_int64(st, 2), "last_seen", eai_sq_col_str_or_null(st, 3));
}

int eai_sq_agent_list(void *self, const char *tenant, const char *after, int limit, json_t **out,
                      struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "agent_list without tenant");
    if (limit < 1 || limit > AGENT_LIMIT_MAX)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "agent_list: limit %d outside 1..1000", limit);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, EAI_SQ_AGENTS, err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, after ? after : "", -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, limit);
        ret = eai_sq_collect(s, c->db, st, agent_row, "agent list", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

static json_t *usage_row(sqlite3_stmt *st)
{
    return json_pack("{s:o, s:I, s:f, s:f, s:f, s:o}", "profile", eai_sq_col_str_or_null(st, 0),
                     "executions", (json_int_t)sqlite3_column_int64(st, 1),
                     "cpu_seconds", sqlite3_column_double(st, 2), "memory_mb_seconds", sqlite3_column_double(st, 3),
                     "duration_s", sqlite3_column_double(st, 4), "last_seen", eai_sq_col_str_or_null(st, 5));
}

/* One value of a one-row query on (tenant, agent): run count or newest run. */
static int agent_scalar(struct eai_sq *s, sqlite3 *db, const char *sql, const char *tenant, const char *agent,
                        json_t **v, struct eai_error **err)
{
    sqlite3_stmt *st = eai_sq_prep(s, db, sql, err);
    if (!st)
        return -1;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, agent, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st), ret = 0;
    if (rc == SQLITE_ROW)
        *v = sqlite3_column_type(st, 0) == SQLITE_INTEGER ? json_integer(sqlite3_column_int64(st, 0))
                                                          : eai_sq_col_str_or_null(st, 0);
    else if (rc == SQLITE_DONE)
        *v = json_null();
    else
        ret = eai_sq_db_fail(s, err, db, "agent");
    sqlite3_finalize(st);
    return ret;
}

int eai_sq_agent_get(void *self, const char *tenant, const char *agent_id, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    if (!tenant || !agent_id)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "agent_get without tenant or agent_id");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    json_t *usage = NULL, *runs = NULL, *newest = NULL;
    if (eai_sq_exec_sql(s, c->db, "BEGIN", err) < 0)
        goto out;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, EAI_SQ_AGENT_USAGE, err);
    if (!st)
        goto commit;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, agent_id, -1, SQLITE_STATIC);
    int rc = eai_sq_collect(s, c->db, st, usage_row, "agent usage", &usage, err);
    sqlite3_finalize(st);
    if (rc < 0 || agent_scalar(s, c->db, EAI_SQ_AGENT_RUNS, tenant, agent_id, &runs, err) < 0 ||
        agent_scalar(s, c->db, EAI_SQ_AGENT_NEWEST_RUN, tenant, agent_id, &newest, err) < 0)
        goto commit;
    ret = 0;
    if (json_array_size(usage) == 0)
        goto commit;   /* no execution of that agent in this tenant */
    json_int_t n = 0;
    const char *last = NULL;
    size_t i;
    json_t *u;
    json_array_foreach(usage, i, u) {
        n += json_integer_value(json_object_get(u, "executions"));
        const char *ls = json_string_value(json_object_get(u, "last_seen"));
        if (ls && (!last || strcmp(ls, last) > 0))
            last = ls;
    }
    *out = json_pack("{s:s, s:I, s:O, s:O, s:s?, s:O}", "agent_id", agent_id, "executions", n, "runs", runs,
                     "newest_run", newest, "last_seen", last, "usage", usage);
    if (!*out)
        ret = eai_sq_oom(s, err);
commit:
    eai_sq_exec_sql(s, c->db, "COMMIT", NULL);
out:
    json_decref(usage);
    json_decref(runs);
    json_decref(newest);
    eai_sq_release(s, c);
    return ret;
}
