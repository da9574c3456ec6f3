/*
 * PostgreSQL backend: the agent view (storage ops run_get, run_list,
 * agent_list, agent_get of ABI 1.3; include/eai/storage.h, docs/storage.md
 * "The agent view").  Read only, one transaction per op under the
 * tenant's row-level security; every query goes through an index of
 * migrations/postgres/0001_init.sql or 0006_agent_view.sql (the SQL is in
 * pg_agent_sql.h, EXPLAINed by tests/storage/test_agent_view.c).
 */
#include <stdlib.h>
#include <string.h>

#include "pg.h"
#include "pg_agent_sql.h"

#define AGENT_LIMIT_MAX 1000

static json_t *cell_str_or_null(const PGresult *r, int i, int col)
{
    return PQgetisnull(r, i, col) ? json_null() : eai_pg_cell_str(r, i, col);
}

static double cell_real(const PGresult *r, int i, int col)
{
    return PQgetisnull(r, i, col) ? 0 : strtod(PQgetvalue(r, i, col), NULL);
}

static json_int_t cell_i64(const PGresult *r, int i, int col)
{
    return PQgetisnull(r, i, col) ? 0 : (json_int_t)strtoll(PQgetvalue(r, i, col), NULL, 10);
}

/* ------------------------------------------------------------ run_get */

struct run_ctx {
    const char *tenant, *run_id;
    int limit;
    json_t *out;
};

static json_t *run_item(const PGresult *r, int i)
{
    char id[64];
    snprintf(id, sizeof id, "sbx_%s", PQgetvalue(r, i, 0));
    /* the usage columns (NULL until the execution is terminal) */
    json_t *u = PQgetisnull(r, i, 8) ? json_null()
                                     : json_pack("{s:f, s:f, s:f}", "cpu_seconds", cell_real(r, i, 8),
                                                 "memory_mb_seconds", cell_real(r, i, 9), "duration_s",
                                                 cell_real(r, i, 10));
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id", id, "status", cell_str_or_null(r, i, 1),
                     "profile", cell_str_or_null(r, i, 2), "session_id", cell_str_or_null(r, i, 3),
                     "trace_id", cell_str_or_null(r, i, 4), "created_at", eai_pg_cell_time(r, i, 5),
                     "started_at", eai_pg_cell_time(r, i, 6), "finished_at", eai_pg_cell_time(r, i, 7), "usage", u);
}

static int run_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct run_ctx *c = arg;
    json_decref(c->out);
    c->out = NULL;
    char lim[24];
    eai_pg_i64(c->limit + 1, lim);   /* one more: tells truncation */
    const char *p[3] = {c->tenant, c->run_id, lim};
    PGresult *r = eai_pg_q(tx, EAI_PG_RUN_ITEMS, 3, p, err);
    if (!r)
        return -1;
    int n = PQntuples(r);
    if (n == 0) {
        PQclear(r);
        return 0;
    }
    json_t *items = json_array();
    for (int i = 0; items && i < n && i < c->limit; i++)
        if (json_array_append_new(items, run_item(r, i)) < 0) {
            json_decref(items);
            items = NULL;
        }
    PQclear(r);
    r = eai_pg_q(tx, EAI_PG_RUN_SUMMARY, 2, p, err);
    if (!r) {
        json_decref(items);
        return -1;
    }
    json_t *counts = json_object();
    double cpu = 0, mem = 0, dur = 0;
    json_int_t total = 0, first = -1, last = -1;
    json_t *agent = json_null(), *project = json_null();
    for (int i = 0; counts && i < PQntuples(r); i++) {
        json_int_t k = cell_i64(r, i, 1);
        json_object_set_new(counts, PQgetvalue(r, i, 0), json_integer(k));
        total += k;
        cpu += cell_real(r, i, 2);
        mem += cell_real(r, i, 3);
        dur += cell_real(r, i, 4);
        if (!PQgetisnull(r, i, 5) && (first < 0 || cell_i64(r, i, 5) < first))
            first = cell_i64(r, i, 5);
        if (!PQgetisnull(r, i, 6) && cell_i64(r, i, 6) > last)
            last = cell_i64(r, i, 6);
        if (!PQgetisnull(r, i, 7)) {
            json_decref(agent);
            agent = eai_pg_cell_str(r, i, 7);
        }
        if (!PQgetisnull(r, i, 8)) {
            json_decref(project);
            project = eai_pg_cell_str(r, i, 8);
        }
    }
    PQclear(r);
    char f[32], l[32];
    eai_time_rfc3339(first, f);
    eai_time_rfc3339(last, l);
    c->out = items && counts ? json_pack("{s:s, s:o, s:b, s:I, s:O, s:{s:f, s:f, s:f}, s:s, s:s, s:O, s:O}",
                                         "run_id", c->run_id, "executions", items, "truncated", n > c->limit,
                                         "total", total, "counts", counts, "usage", "cpu_seconds", cpu,
                                         "memory_mb_seconds", mem, "duration_s", dur, "first_at", f, "last_at", l,
                                         "agent_id", agent, "project_id", project)
                             : NULL;
    if (!c->out && !counts)
        json_decref(items);   /* not packed (json_pack's "o" steals, even on failure) */
    json_decref(counts);
    json_decref(agent);
    json_decref(project);
    if (!c->out)
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    return 0;
}

int eai_pg_run_get(void *self, const char *tenant, const char *run_id, int limit, json_t **out,
                   struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!run_id || limit < 1 || limit > AGENT_LIMIT_MAX)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "run_get: no run_id or limit outside 1..1000");
    if (!eai_pg_uuid_valid(tenant))
        return 0;
    struct run_ctx c = {.tenant = tenant, .run_id = run_id, .limit = limit};
    if (eai_pg_run(pg, tenant, run_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}

/* ------------------------------------------------------------ lists */

struct rows_ctx {
    const char *sql;
    int n;
    const char *params[5];
    json_t *(*row)(const PGresult *r, int i);
    json_t *out;
};

static int rows_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct rows_ctx *c = arg;
    json_decref(c->out);
    c->out = NULL;
    PGresult *r = eai_pg_q(tx, c->sql, c->n, c->params, err);
    if (!r)
        return -1;
    c->out = json_array();
    for (int i = 0; c->out && i < PQntuples(r); i++) {
        json_t *v = c->row(r, i);
        if (!v || json_array_append_new(c->out, v) < 0) {
            json_decref(c->out);
            c->out = NULL;
        }
    }
    PQclear(r);
    return c->out ? 0 : eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
}

static int rows_run(struct eai_pg *pg, const char *tenant, struct rows_ctx *c, json_t **out, struct eai_error **err)
{
    if (eai_pg_run(pg, tenant, rows_body, c, err) < 0) {
        json_decref(c->out);
        return -1;
    }
    *out = c->out;
    return 0;
}

static json_t *run_row(const PGresult *r, int i)
{
    return json_pack("{s:o, s:o, s:o, s:I, s:o, s:o}", "run_id", cell_str_or_null(r, i, 0),
                     "agent_id", cell_str_or_null(r, i, 1), "project_id", cell_str_or_null(r, i, 2),
                     "executions", cell_i64(r, i, 3), "first_at", eai_pg_cell_time(r, i, 4),
                     "last_at", eai_pg_cell_time(r, i, 5));
}

int eai_pg_run_list(void *self, const char *tenant, const json_t *filter, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    int limit = (int)json_integer_value(json_object_get(filter, "limit"));
    if (limit < 1 || limit > AGENT_LIMIT_MAX)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "run_list: limit outside 1..1000");
    if (!eai_pg_uuid_valid(tenant)) {
        *out = json_array();
        return *out ? 0 : eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    const char *agent = json_string_value(json_object_get(filter, "agent_id"));
    const char *project = json_string_value(json_object_get(filter, "project_id"));
    const char *after = json_string_value(json_object_get(filter, "after"));
    char lim[24];
    eai_pg_i64(limit, lim);
    struct rows_ctx c = {.sql = agent ? EAI_PG_RUNS_BY_AGENT : project ? EAI_PG_RUNS_BY_PROJECT : EAI_PG_RUNS_ALL,
                         .n = 5, .params = {tenant, agent, after ? after : "", project, lim}, .row = run_row};
    return rows_run(pg, tenant, &c, out, err);
}

static json_t *agent_row(const PGresult *r, int i)
{
    return json_pack("{s:o, s:I, s:I, s:o}", "agent_id", cell_str_or_null(r, i, 0), "executions",
                     cell_i64(r, i, 1), "runs", cell_i64(r, i, 2), "last_seen", eai_pg_cell_time(r, i, 3));
}

int eai_pg_agent_list(void *self, const char *tenant, const char *after, int limit, json_t **out,
                      struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (limit < 1 || limit > AGENT_LIMIT_MAX)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "agent_list: limit outside 1..1000");
    if (!eai_pg_uuid_valid(tenant)) {
        *out = json_array();
        return *out ? 0 : eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    char lim[24];
    eai_pg_i64(limit, lim);
    struct rows_ctx c = {.sql = EAI_PG_AGENTS, .n = 3, .params = {tenant, after ? after : "", lim},
                         .row = agent_row};
    return rows_run(pg, tenant, &c, out, err);
}

/* ------------------------------------------------------------ agent_get */

struct agent_ctx {
    const char *tenant, *agent;
    json_t *out;
};

static int agent_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct agent_ctx *c = arg;
    json_decref(c->out);
    c->out = NULL;
    const char *p[2] = {c->tenant, c->agent};
    PGresult *r = eai_pg_q(tx, EAI_PG_AGENT_USAGE, 2, p, err);
    if (!r)
        return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return 0;
    }
    json_t *usage = json_array();
    json_int_t n = 0, last = -1;
    for (int i = 0; usage && i < PQntuples(r); i++) {
        n += cell_i64(r, i, 1);
        if (!PQgetisnull(r, i, 5) && cell_i64(r, i, 5) > last)
            last = cell_i64(r, i, 5);
        json_array_append_new(usage, json_pack("{s:o, s:I, s:f, s:f, s:f, s:o}", "profile",
                                               cell_str_or_null(r, i, 0), "executions", cell_i64(r, i, 1),
                                               "cpu_seconds", cell_real(r, i, 2), "memory_mb_seconds",
                                               cell_real(r, i, 3), "duration_s", cell_real(r, i, 4),
                                               "last_seen", eai_pg_cell_time(r, i, 5)));
    }
    PQclear(r);
    json_int_t runs = 0;
    json_t *newest = json_null();
    if ((r = eai_pg_q(tx, EAI_PG_AGENT_RUNS, 2, p, err)) != NULL) {
        runs = cell_i64(r, 0, 0);
        PQclear(r);
        if ((r = eai_pg_q(tx, EAI_PG_AGENT_NEWEST_RUN, 2, p, err)) != NULL) {
            if (PQntuples(r) > 0) {
                json_decref(newest);
                newest = cell_str_or_null(r, 0, 0);
            }
            PQclear(r);
        }
    }
    if (!r) {
        json_decref(usage);
        json_decref(newest);
        return -1;
    }
    char l[32];
    eai_time_rfc3339(last, l);
    c->out = usage ? json_pack("{s:s, s:I, s:I, s:O, s:s, s:O}", "agent_id", c->agent, "executions", n, "runs", runs,
                               "newest_run", newest, "last_seen", l, "usage", usage)
                   : NULL;
    json_decref(usage);
    json_decref(newest);
    return c->out ? 0 : eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
}

int eai_pg_agent_get(void *self, const char *tenant, const char *agent_id, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!agent_id)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "agent_get without agent_id");
    if (!eai_pg_uuid_valid(tenant))
        return 0;
    struct agent_ctx c = {.tenant = tenant, .agent = agent_id};
    if (eai_pg_run(pg, tenant, agent_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}
