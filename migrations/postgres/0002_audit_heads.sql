-- 0002_audit_heads: the SYSTEM op audit_heads (storage ABI addition): the
-- newest audit event of every tenant, found with a skip scan over the
-- (tenant_id, seq) unique index instead of reading every event.

CREATE FUNCTION eai.audit_heads()
RETURNS TABLE (tenant_id uuid, seq bigint, hash text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    WITH RECURSIVE t(tid) AS (
        (SELECT a.tenant_id FROM eai.audit_events a ORDER BY a.tenant_id LIMIT 1)
        UNION ALL
        SELECT (SELECT a.tenant_id FROM eai.audit_events a WHERE a.tenant_id > t.tid
                 ORDER BY a.tenant_id LIMIT 1)
          FROM t WHERE t.tid IS NOT NULL)
    SELECT h.tenant_id, h.seq, h.hash
      FROM t CROSS JOIN LATERAL (
            SELECT a.tenant_id, a.seq, a.hash FROM eai.audit_events a
             WHERE a.tenant_id = t.tid ORDER BY a.seq DESC LIMIT 1) h
     WHERE t.tid IS NOT NULL
     ORDER BY h.tenant_id;
    PERFORM set_config('eai.definer', '', true);
END
$$;
REVOKE ALL ON FUNCTION eai.audit_heads() FROM PUBLIC;

-- The grant helper learns the new function (called after every migrate).
CREATE OR REPLACE FUNCTION eai.grant_app_role(p_role text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    f text;
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
    FOREACH f IN ARRAY ARRAY['eai.tenant_get(uuid)', 'eai.key_get(text)', 'eai.key_revoke(text)',
                             'eai.exec_claim(text, bigint, bigint, integer, integer)',
                             'eai.exec_renew(text, bigint)', 'eai.exec_stale(bigint)',
                             'eai.exec_counts()', 'eai.outbox_fetch(integer)',
                             'eai.outbox_ack(uuid, boolean)', 'eai.audit_list_all(bigint, integer)',
                             'eai.audit_heads()']
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION eai.grant_app_role(text) FROM PUBLIC;
