-- 0003_claim_excluding: the SYSTEM op exec_claim_excluding (storage ABI
-- addition): exec_claim that takes no row of the listed tenants (those at
-- their per-tenant bound on the claiming node).  Also: the grant helper now
-- grants EXECUTE on every SECURITY DEFINER function of schema eai, so later
-- SYSTEM functions need no new copy of it.

CREATE FUNCTION eai.exec_claim_excluding(p_owner text, p_now_ms bigint, p_lease_until bigint,
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
               AND NOT (e.tenant_id = ANY (COALESCE(p_exclude, ARRAY[]::uuid[])))) s
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
REVOKE ALL ON FUNCTION eai.exec_claim_excluding(text, bigint, bigint, integer, integer, uuid[]) FROM PUBLIC;

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
