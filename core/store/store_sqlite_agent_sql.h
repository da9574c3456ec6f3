/*
 * The SQL of the agent view on SQLite (storage ops run_get, run_list,
 * agent_list, agent_get; core/store/store_sqlite_agent.c), apart so that
 * tests/storage/test_agent_view.c can EXPLAIN QUERY PLAN the very text the
 * backend runs.  agent_id and profile are read from the document with
 * json_extract(doc, '$.x') spelt exactly as the expression indexes of
 * migrations/sqlite/0003_agent_view.sql: SQLite uses an index on an
 * expression only for the same expression.
 */
#ifndef EAI_STORE_SQLITE_AGENT_SQL_H
#define EAI_STORE_SQLITE_AGENT_SQL_H

#define EAI_SQ_AGENT "json_extract(doc, '$.agent_id')"
#define EAI_SQ_USAGE_SUMS                                                                   \
    "total(json_extract(doc, '$.usage.cpu_seconds')), "                                     \
    "total(json_extract(doc, '$.usage.memory_mb_seconds')), "                               \
    "total(json_extract(doc, '$.usage.duration_s'))"

/* ?1 tenant, ?2 run_id, ?3 limit: the run's executions, oldest first
 * (index sandbox_executions_run: tenant_id, run_id, seq). */
#define EAI_SQ_RUN_ITEMS                                                                    \
    "SELECT id, status, json_extract(doc, '$.profile'), json_extract(doc, '$.session_id'),"  \
    " json_extract(doc, '$.trace_id'), created_at, json_extract(doc, '$.started_at'),"       \
    " json_extract(doc, '$.finished_at'), json_extract(doc, '$.usage')"                     \
    " FROM sandbox_executions WHERE tenant_id = ?1 AND run_id = ?2 ORDER BY seq LIMIT ?3"

/* ?1 tenant, ?2 run_id: per status, count and usage sums, first/last time. */
#define EAI_SQ_RUN_SUMMARY                                                                  \
    "SELECT status, count(*), " EAI_SQ_USAGE_SUMS ", min(created_at), max(updated_at),"     \
    " max(" EAI_SQ_AGENT "), max(project_id)"                                               \
    " FROM sandbox_executions WHERE tenant_id = ?1 AND run_id = ?2 GROUP BY status"

/* Runs by run_id: ?1 tenant, ?2 agent_id, ?3 after (run_id, exclusive),
 * ?4 project_id (NULL: any), ?5 limit.  Columns: run_id, agent_id,
 * project_id, executions, first_at, last_at. */
#define EAI_SQ_RUNS_COLS                                                                    \
    "SELECT run_id, max(" EAI_SQ_AGENT "), max(project_id), count(*), min(created_at),"     \
    " max(updated_at) FROM sandbox_executions"
#define EAI_SQ_RUNS_BY_AGENT                                                                \
    EAI_SQ_RUNS_COLS " WHERE tenant_id = ?1 AND " EAI_SQ_AGENT " = ?2 AND run_id > ?3"      \
    " AND (?4 IS NULL OR project_id = ?4) GROUP BY run_id ORDER BY run_id LIMIT ?5"
#define EAI_SQ_RUNS_BY_PROJECT                                                              \
    EAI_SQ_RUNS_COLS " WHERE tenant_id = ?1 AND project_id = ?4 AND run_id > ?3"            \
    " AND ?2 IS NULL GROUP BY run_id ORDER BY run_id LIMIT ?5"
#define EAI_SQ_RUNS_ALL                                                                     \
    EAI_SQ_RUNS_COLS " WHERE tenant_id = ?1 AND run_id > ?3 AND ?2 IS NULL AND ?4 IS NULL"  \
    " GROUP BY run_id ORDER BY run_id LIMIT ?5"

/* ?1 tenant, ?2 after (agent_id, exclusive), ?3 limit: agent_id,
 * executions, runs, last_seen. */
#define EAI_SQ_AGENTS                                                                       \
    "SELECT " EAI_SQ_AGENT ", count(*), count(DISTINCT run_id), max(updated_at)"            \
    " FROM sandbox_executions WHERE tenant_id = ?1 AND " EAI_SQ_AGENT " > ?2"               \
    " GROUP BY " EAI_SQ_AGENT " ORDER BY " EAI_SQ_AGENT " LIMIT ?3"

/* ?1 tenant, ?2 agent_id: usage by profile (profile, executions, sums,
 * last_seen). */
#define EAI_SQ_AGENT_USAGE                                                                  \
    "SELECT json_extract(doc, '$.profile'), count(*), " EAI_SQ_USAGE_SUMS ", max(updated_at)" \
    " FROM sandbox_executions WHERE tenant_id = ?1 AND " EAI_SQ_AGENT " = ?2"               \
    " GROUP BY json_extract(doc, '$.profile') ORDER BY json_extract(doc, '$.profile')"
/* ?1 tenant, ?2 agent_id: how many runs. */
#define EAI_SQ_AGENT_RUNS                                                                   \
    "SELECT count(DISTINCT run_id) FROM sandbox_executions"                                 \
    " WHERE tenant_id = ?1 AND " EAI_SQ_AGENT " = ?2"
/* ?1 tenant, ?2 agent_id: the run of its newest execution carrying one. */
#define EAI_SQ_AGENT_NEWEST_RUN                                                             \
    "SELECT run_id FROM sandbox_executions WHERE tenant_id = ?1 AND " EAI_SQ_AGENT " = ?2"  \
    " AND run_id IS NOT NULL ORDER BY seq DESC LIMIT 1"

#endif
