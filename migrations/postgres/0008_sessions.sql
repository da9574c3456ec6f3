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
    claim_owner text,                        -- the owner's process (its exec_claim owner): only it
                                             -- claims the session's executions (below)
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

-- Retention (exec_prune, docs/configuration.md "Quotas and retention"):
-- at most p_limit ended (or failed, interrupted) sessions of every tenant
-- created before p_before_ms are deleted; their ids answer 404 from then
-- on.  Returns how many.
CREATE FUNCTION eai.session_prune(p_before_ms bigint, p_limit integer)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    WITH victims AS (
        SELECT s.id FROM eai.sandbox_sessions s
         WHERE s.created_ms < p_before_ms AND s.status IN ('ended', 'failed', 'interrupted')
         ORDER BY s.created_ms LIMIT greatest(least(p_limit, 10000), 0))
    DELETE FROM eai.sandbox_sessions d USING victims v WHERE d.id = v.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    PERFORM set_config('eai.definer', '', true);
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION eai.session_prune(bigint, integer) FROM PUBLIC;

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

-- A session's executions go through the shared queue like any other, but
-- only the process that runs the session can run them: exec_claim and
-- exec_claim_excluding (same signatures, grants kept) take an execution
-- with a session_id only when that session's claim_owner is the claiming
-- process, or when the session has ended (any node then claims it and
-- fails it, so none waits forever).  An execution without a session is
-- claimed as before.
CREATE OR REPLACE FUNCTION eai.exec_claim(p_owner text, p_now_ms bigint, p_lease_until bigint,
                                          p_max integer, p_per_tenant integer)
RETURNS SETOF eai.sandbox_executions
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT * FROM eai.exec_claim_excluding(p_owner, p_now_ms, p_lease_until, p_max, p_per_tenant,
                                                        ARRAY[]::uuid[]);
END
$$;

CREATE OR REPLACE FUNCTION eai.exec_claim_excluding(p_owner text, p_now_ms bigint, p_lease_until bigint,
                                                    p_max integer, p_per_tenant integer, p_exclude uuid[])
RETURNS SETOF eai.sandbox_executions
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
    r eai.sandbox_executions;
    n integer := 0;
BEGIN
    IF p_max <= 0 OR p_per_tenant <= 0 THEN
        RETURN;
    END IF;
    PERFORM set_config('eai.definer', 'on', true);
    FOR c IN
        SELECT s.id FROM (
            SELECT e.id, e.seq, row_number() OVER (PARTITION BY e.tenant_id ORDER BY e.seq) AS rn
              FROM eai.sandbox_executions e
             WHERE e.status = 'queued'
               AND NOT (e.tenant_id = ANY (COALESCE(p_exclude, ARRAY[]::uuid[])))
               AND (e.session_id IS NULL
                    OR NOT EXISTS (SELECT 1 FROM eai.sandbox_sessions ss WHERE ss.id = e.session_id)
                    OR EXISTS (SELECT 1 FROM eai.sandbox_sessions ss
                                WHERE ss.id = e.session_id
                                  AND (ss.claim_owner = p_owner
                                       OR ss.status IN ('ended', 'failed', 'interrupted'))))) s
         WHERE s.rn <= p_per_tenant
         ORDER BY s.rn, s.seq
         LIMIT p_max * 4
    LOOP
        EXIT WHEN n >= p_max;
        UPDATE eai.sandbox_executions e
           SET status = 'running', lease_owner = p_owner, lease_until = p_lease_until,
               started_at = to_timestamp(p_now_ms / 1000.0), updated_at = to_timestamp(p_now_ms / 1000.0)
         WHERE e.id = (SELECT x.id FROM eai.sandbox_executions x
                        WHERE x.id = c.id AND x.status = 'queued'
                        FOR UPDATE SKIP LOCKED)
        RETURNING e.* INTO r;
        IF FOUND THEN
            n := n + 1;
            RETURN NEXT r;
        END IF;
    END LOOP;
    PERFORM set_config('eai.definer', '', true);
END
$$;
