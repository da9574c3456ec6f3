/*
 * The SQL of the agent view on PostgreSQL (storage ops run_get, run_list,
 * agent_list, agent_get; plugins/postgres/pg_agent.c), apart so that
 * tests/storage/test_agent_view.c can EXPLAIN the very text the plugin
 * runs.  They read columns only (agent_id, trace_id, session_id, the
 * usage: migrations/postgres/0006_agent_view.sql says why), never the json
 * document.  Every query runs as
 * the application role under row-level security (app.tenant_id); the
 * explicit tenant_id = $1 lets the planner use the (tenant_id, ...)
 * indexes.  Times leave as epoch milliseconds (eai_pg_cell_time).
 */
#ifndef EAI_PG_AGENT_SQL_H
#define EAI_PG_AGENT_SQL_H

#define EAI_PG_AGENT "e.agent_id"
#define EAI_PG_MS(x) "floor(extract(epoch FROM " x ") * 1000)::bigint"
#define EAI_PG_USAGE_SUMS                                                                   \
    "coalesce(sum(e.cpu_seconds), 0), coalesce(sum(e.memory_mb_seconds), 0), "              \
    "coalesce(sum(e.duration_s), 0)"

/* $1 tenant, $2 run_id, $3 limit: the run's executions, oldest first
 * (index sandbox_executions_tenant_run). */
#define EAI_PG_RUN_ITEMS                                                                    \
    "SELECT e.id::text, e.status, e.profile, e.session_id, e.trace_id,"                     \
    " " EAI_PG_MS("e.created_at") ", " EAI_PG_MS("e.started_at") ", "                       \
    EAI_PG_MS("e.finished_at") ", e.cpu_seconds, e.memory_mb_seconds, e.duration_s"        \
    " FROM eai.sandbox_executions e WHERE e.tenant_id = $1 AND e.run_id = $2"               \
    " ORDER BY e.seq LIMIT $3::int"

/* $1 tenant, $2 run_id: per status, count, usage sums, first/last time,
 * agent and project. */
#define EAI_PG_RUN_SUMMARY                                                                  \
    "SELECT e.status, count(*), " EAI_PG_USAGE_SUMS ", " EAI_PG_MS("min(e.created_at)") ","  \
    " " EAI_PG_MS("max(e.updated_at)") ", max(" EAI_PG_AGENT "), max(e.project_id)"         \
    " FROM eai.sandbox_executions e WHERE e.tenant_id = $1 AND e.run_id = $2"               \
    " GROUP BY e.status"

/* Runs by run_id: $1 tenant, $2 agent_id, $3 after (exclusive), $4
 * project_id (NULL: any), $5 limit.  run_id, agent_id, project_id,
 * executions, first_at, last_at. */
#define EAI_PG_RUNS_COLS                                                                    \
    "SELECT e.run_id, max(" EAI_PG_AGENT "), max(e.project_id), count(*), "                 \
    EAI_PG_MS("min(e.created_at)") ", " EAI_PG_MS("max(e.updated_at)")                      \
    " FROM eai.sandbox_executions e"
#define EAI_PG_RUNS_BY_AGENT                                                                \
    EAI_PG_RUNS_COLS " WHERE e.tenant_id = $1 AND " EAI_PG_AGENT " = $2"                    \
    " AND e.run_id > $3 AND ($4::text IS NULL OR e.project_id = $4)"          \
    " GROUP BY e.run_id ORDER BY e.run_id LIMIT $5::int"
#define EAI_PG_RUNS_BY_PROJECT                                                              \
    EAI_PG_RUNS_COLS " WHERE e.tenant_id = $1 AND e.project_id = $4 AND $2::text IS NULL"   \
    " AND e.run_id IS NOT NULL AND e.run_id > $3"                             \
    " GROUP BY e.run_id ORDER BY e.run_id LIMIT $5::int"
#define EAI_PG_RUNS_ALL                                                                     \
    EAI_PG_RUNS_COLS " WHERE e.tenant_id = $1 AND $2::text IS NULL AND $4::text IS NULL"    \
    " AND e.run_id IS NOT NULL AND e.run_id > $3"                             \
    " GROUP BY e.run_id ORDER BY e.run_id LIMIT $5::int"

/* $1 tenant, $2 after (agent_id, exclusive), $3 limit: agent_id,
 * executions, runs, last_seen. */
#define EAI_PG_AGENTS                                                                       \
    "SELECT " EAI_PG_AGENT ", count(*), count(DISTINCT e.run_id), "                         \
    EAI_PG_MS("max(e.updated_at)")                                                          \
    " FROM eai.sandbox_executions e WHERE e.tenant_id = $1 AND " EAI_PG_AGENT " IS NOT NULL" \
    " AND " EAI_PG_AGENT " > $2"                                              \
    " GROUP BY " EAI_PG_AGENT " ORDER BY " EAI_PG_AGENT " LIMIT $3::int"

/* $1 tenant, $2 agent_id: usage by profile. */
#define EAI_PG_AGENT_USAGE                                                                  \
    "SELECT e.profile, count(*), " EAI_PG_USAGE_SUMS ", " EAI_PG_MS("max(e.updated_at)")    \
    " FROM eai.sandbox_executions e WHERE e.tenant_id = $1 AND " EAI_PG_AGENT " = $2"       \
    " GROUP BY e.profile ORDER BY e.profile"
/* $1 tenant, $2 agent_id: runs, and the run of the newest execution. */
#define EAI_PG_AGENT_RUNS                                                                   \
    "SELECT count(DISTINCT e.run_id) FROM eai.sandbox_executions e"                         \
    " WHERE e.tenant_id = $1 AND " EAI_PG_AGENT " = $2"
#define EAI_PG_AGENT_NEWEST_RUN                                                             \
    "SELECT e.run_id FROM eai.sandbox_executions e WHERE e.tenant_id = $1"                  \
    " AND " EAI_PG_AGENT " = $2 AND e.run_id IS NOT NULL ORDER BY e.seq DESC LIMIT 1"

#endif
