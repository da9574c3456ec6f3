-- 0008_sessions: stored sessions (storage ops session_put, session_get,
-- session_list, session_owned of ABI 1.4; docs/sessions.md "Stored
-- sessions").  One row per session: the columns the queries filter on (the
-- tenant, the node that owns it, its status, its creation time for the
-- newest-first listing) and the record as a json document (json, not
-- jsonb, as executions').  Row-level security as every tenant table (0001):
-- the app role sees only app.tenant_id's rows; the start-up sweep of a node
-- reads its own sessions of every tenant through the SECURITY DEFINER
-- function eai.session_owned (eai.definer = on inside it only).
CREATE TABLE eai.sandbox_sessions (
    id          text PRIMARY KEY CHECK (id ~ '^ses_[0-9a-f-]{36}$'),
    tenant_id   uuid NOT NULL,
    owner       text NOT NULL,
    status      text NOT NULL CHECK (status IN ('starting', 'running', 'pausing', 'paused', 'resuming',
                                                'ending', 'ended', 'failed', 'interrupted')),
    created_ms  bigint NOT NULL,
    rev         bigint NOT NULL DEFAULT 0,   -- doc.rev: writes land in order
    doc         json NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_sessions_tenant_created ON eai.sandbox_sessions (tenant_id, created_ms DESC, id DESC);
CREATE INDEX sandbox_sessions_owner_live ON eai.sandbox_sessions (owner, created_ms)
    WHERE status NOT IN ('ended', 'failed', 'interrupted');

ALTER TABLE eai.sandbox_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE eai.sandbox_sessions FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON eai.sandbox_sessions
    USING (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::uuid)
    WITH CHECK (tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::uuid);
DO $$
BEGIN
    EXECUTE format('CREATE POLICY eai_definer ON eai.sandbox_sessions TO %I'
                   ' USING (current_setting(''eai.definer'', true) = ''on'')'
                   ' WITH CHECK (current_setting(''eai.definer'', true) = ''on'')', current_user);
END
$$;

CREATE FUNCTION eai.session_owned(p_owner text, p_limit integer)
RETURNS TABLE (tenant_id uuid, doc json)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT s.tenant_id, s.doc FROM eai.sandbox_sessions s
     WHERE s.owner = p_owner AND s.status NOT IN ('ended', 'failed', 'interrupted')
     ORDER BY s.created_ms, s.id LIMIT p_limit;
    PERFORM set_config('eai.definer', '', true);
END
$$;
REVOKE ALL ON FUNCTION eai.session_owned(text, integer) FROM PUBLIC;

-- grant_app_role (0003) plus the sessions table: the app role reads and
-- writes its tenant's sessions (never deletes them).
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
