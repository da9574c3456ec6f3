-- 0006_agent_view: the agent view (GET /v1/runs, /v1/agents; storage ops
-- run_get, run_list, agent_list, agent_get of ABI 1.3, docs/storage.md
-- "The agent view").  Its queries read columns only, never the json
-- document, for two reasons:
--  - under row-level security a condition on doc->>'agent_id' cannot be an
--    index condition (json_object_field_text is not leakproof: the planner
--    applies the tenant policy first and only filters with it);
--  - a document holding a NUL (\u0000 in an output) cannot be read by the
--    json operators at all (documents are json, not jsonb, to keep it), so
--    an expression or generated column over doc would fail its writes.
-- So agent_id, trace_id and session_id are written by exec_create and the
-- usage by the terminal update (plugins/postgres/pg_exec.c), and filled
-- below for the rows already there (a row whose document json cannot read
-- keeps NULL usage; its ids are taken from the raw text).  A run is read
-- through sandbox_executions_tenant_run (0001).  Row-level security is the
-- table's own (0001, FORCE'd).  tests/storage/test_agent_view.c checks
-- that EXPLAIN of every query uses an index scan over 20000 rows.

ALTER TABLE eai.sandbox_executions
    ADD COLUMN agent_id text,
    ADD COLUMN trace_id text,
    ADD COLUMN session_id text,
    ADD COLUMN cpu_seconds double precision,
    ADD COLUMN memory_mb_seconds double precision,
    ADD COLUMN duration_s double precision;

-- One row at a time, each in its own subtransaction: a document json cannot
-- read fails alone.  Run by the owner under eai.definer (0001's policy).
CREATE FUNCTION eai.agent_view_backfill() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    FOR r IN SELECT e.id, e.doc FROM eai.sandbox_executions e WHERE e.agent_id IS NULL LOOP
        BEGIN
            UPDATE eai.sandbox_executions SET agent_id = r.doc->>'agent_id', trace_id = r.doc->>'trace_id',
                   session_id = r.doc->>'session_id',
                   cpu_seconds = (r.doc->'usage'->>'cpu_seconds')::float8,
                   memory_mb_seconds = (r.doc->'usage'->>'memory_mb_seconds')::float8,
                   duration_s = (r.doc->'usage'->>'duration_s')::float8
             WHERE id = r.id;
        EXCEPTION WHEN others THEN
            UPDATE eai.sandbox_executions
               SET agent_id = substring(r.doc::text FROM '"agent_id"\s*:\s*"([^"\\]*)"'),
                   trace_id = substring(r.doc::text FROM '"trace_id"\s*:\s*"([^"\\]*)"'),
                   session_id = substring(r.doc::text FROM '"session_id"\s*:\s*"([^"\\]*)"')
             WHERE id = r.id;
        END;
    END LOOP;
    PERFORM set_config('eai.definer', '', true);
END
$$;
SELECT eai.agent_view_backfill();
DROP FUNCTION eai.agent_view_backfill();

CREATE INDEX sandbox_executions_tenant_agent_run
    ON eai.sandbox_executions (tenant_id, agent_id, run_id)
    WHERE agent_id IS NOT NULL;

CREATE INDEX sandbox_executions_tenant_agent_seq
    ON eai.sandbox_executions (tenant_id, agent_id, seq DESC)
    WHERE agent_id IS NOT NULL;

CREATE INDEX sandbox_executions_tenant_project_run
    ON eai.sandbox_executions (tenant_id, project_id, run_id)
    WHERE project_id IS NOT NULL AND run_id IS NOT NULL;
