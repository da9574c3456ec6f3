-- 0006_agent_view: the agent view (GET /v1/runs, /v1/agents; storage ops
-- run_get, run_list, agent_list, agent_get of ABI 1.3, docs/storage.md
-- "The agent view").  agent_id lives only in the json document: the agent
-- indexes are on the expression the queries use (doc->>'agent_id'),
-- partial like the run index of 0001.  A run is read through
-- sandbox_executions_tenant_run (0001: tenant_id, run_id, seq DESC).  Row
-- level security is the table's own (0001, FORCE'd): these are indexes
-- only, every query still runs as the application role under the tenant's
-- app.tenant_id.  tests/storage/test_agent_view.c checks EXPLAIN of every
-- query uses them (Index Scan / Index Only Scan / Bitmap Index Scan).

CREATE INDEX IF NOT EXISTS sandbox_executions_tenant_agent_run
    ON eai.sandbox_executions (tenant_id, (doc->>'agent_id'), run_id)
    WHERE doc->>'agent_id' IS NOT NULL;

CREATE INDEX IF NOT EXISTS sandbox_executions_tenant_agent_seq
    ON eai.sandbox_executions (tenant_id, (doc->>'agent_id'), seq DESC)
    WHERE doc->>'agent_id' IS NOT NULL;

CREATE INDEX IF NOT EXISTS sandbox_executions_tenant_project_run
    ON eai.sandbox_executions (tenant_id, project_id, run_id)
    WHERE project_id IS NOT NULL AND run_id IS NOT NULL;
