-- 0006_agent_view: the agent view (GET /v1/runs, /v1/agents; storage ops
-- run_get, run_list, agent_list, agent_get of ABI 1.3, docs/storage.md
-- "The agent view").  agent_id lived only in the json document; it becomes
-- a stored generated column (doc->>'agent_id'), for a reason: under
-- row-level security a condition on doc->>'agent_id' cannot be an index
-- condition (json_object_field_text is not leakproof, so the planner must
-- apply the tenant policy first and only filters with it), while
-- agent_id = $2 on a plain text column can.  Nothing writes the column:
-- PostgreSQL computes it from doc on every insert and update.  A run is
-- read through sandbox_executions_tenant_run (0001: tenant_id, run_id,
-- seq DESC).  Row-level security is the table's own (0001, FORCE'd).
-- tests/storage/test_agent_view.c checks that EXPLAIN of every query uses
-- an index scan over 20000 rows.

ALTER TABLE eai.sandbox_executions
    ADD COLUMN agent_id text GENERATED ALWAYS AS (doc->>'agent_id') STORED;

CREATE INDEX sandbox_executions_tenant_agent_run
    ON eai.sandbox_executions (tenant_id, agent_id, run_id)
    WHERE agent_id IS NOT NULL;

CREATE INDEX sandbox_executions_tenant_agent_seq
    ON eai.sandbox_executions (tenant_id, agent_id, seq DESC)
    WHERE agent_id IS NOT NULL;

CREATE INDEX sandbox_executions_tenant_project_run
    ON eai.sandbox_executions (tenant_id, project_id, run_id)
    WHERE project_id IS NOT NULL AND run_id IS NOT NULL;
