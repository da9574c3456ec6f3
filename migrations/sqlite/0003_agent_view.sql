-- 0003_agent_view: the agent view (GET /v1/runs, /v1/agents; storage ops
-- run_get, run_list, agent_list, agent_get of ABI 1.3, docs/storage.md
-- "The agent view").  agent_id and profile live only in the document, so the
-- agent indexes are on the very expression the queries use
-- (json_extract(doc, '$.agent_id')): SQLite uses an expression index only
-- when the query spells the expression the same way (core/store/
-- store_sqlite_agent.c does).  A run is read through sandbox_executions_run
-- (0001: tenant_id, run_id, seq); runs of a project through the index below.
-- tests/storage/test_agent_view.c asserts EXPLAIN QUERY PLAN of every query
-- searches one of these and never scans the table.

CREATE INDEX IF NOT EXISTS sandbox_executions_agent_run
    ON sandbox_executions(tenant_id, json_extract(doc, '$.agent_id'), run_id);

CREATE INDEX IF NOT EXISTS sandbox_executions_agent_seq
    ON sandbox_executions(tenant_id, json_extract(doc, '$.agent_id'), seq);

CREATE INDEX IF NOT EXISTS sandbox_executions_project_run
    ON sandbox_executions(tenant_id, project_id, run_id);
