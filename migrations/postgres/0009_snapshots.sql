-- 0009_snapshots: snapshot records (storage ops snapshot_put, snapshot_get,
-- snapshot_list, snapshot_delete, snapshot_owned of ABI 1.5; docs/sessions.md
-- "Snapshots and forks").  One row per snapshot: the columns the queries
-- filter on (the tenant, the node that holds its image, its session, its
-- creation time for the newest-first listing) and the record as a json
-- document.  Row-level security as every tenant table (0001): the app role
-- sees only app.tenant_id's rows; a node's start reads its own snapshots of
-- every tenant through the SECURITY DEFINER function eai.snapshot_owned
-- (eai.definer = on inside it only).  A deleted or expired snapshot's row
-- is deleted with its image (by the app role, in its tenant).
CREATE TABLE eai.sandbox_snapshots (
    id          text PRIMARY KEY CHECK (id ~ '^snp_[0-9a-f-]{36}$'),
    tenant_id   uuid NOT NULL,
    owner       text NOT NULL,
    session_id  text NOT NULL,
    created_ms  bigint NOT NULL,
    doc         json NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_snapshots_tenant_created ON eai.sandbox_snapshots (tenant_id, created_ms DESC, id DESC);
CREATE INDEX sandbox_snapshots_owner ON eai.sandbox_snapshots (owner, created_ms);

ALTER TABLE eai.sandbox_snapshots ENABLE ROW LEVEL SECURITY;
ALTER TABLE eai.sandbox_snapshots FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON eai.sandbox_snapshots
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::uuid);
DO $$
BEGIN
    EXECUTE format('CREATE POLICY eai_definer ON eai.sandbox_snapshots TO %I'
                   ' USING (current_setting(''eai.definer'', true) = ''on'')'
                   ' WITH CHECK (current_setting(''eai.definer'', true) = ''on'')', current_user);
END
$$;

CREATE FUNCTION eai.snapshot_owned(p_owner text, p_limit integer)
RETURNS TABLE (tenant_id uuid, doc json)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT s.tenant_id, s.doc FROM eai.sandbox_snapshots s
     WHERE s.owner = p_owner
     ORDER BY s.created_ms, s.id LIMIT p_limit;
    PERFORM set_config('eai.definer', '', true);
END
$$;
REVOKE ALL ON FUNCTION eai.snapshot_owned(text, integer) FROM PUBLIC;

-- grant_app_role (0008) plus the snapshots table: the app role reads,
-- writes and deletes its tenant's snapshot records.
CREATE OR REPLACE FUNCTION eai.grant_app_role(p_role text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f regprocedure;
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA eai TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT ON eai.tenants TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT ON eai.api_keys TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON eai.sandbox_executions TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT ON eai.execution_files TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON eai.manifests TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT ON eai.audit_events TO %I', p_role);
    EXECUTE format('GRANT INSERT ON eai.usage_outbox TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT ON eai.usage_ledger TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON eai.kv TO %I', p_role);
    EXECUTE format('GRANT SELECT ON eai.schema_migrations TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON eai.sandbox_sessions TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON eai.sandbox_snapshots TO %I', p_role);
    -- The SYSTEM functions: every SECURITY DEFINER function of schema eai.
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'eai'::regnamespace AND p.prosecdef
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION eai.grant_app_role(text) FROM PUBLIC;
