-- 0005_retention: retention by age (retention.executions_days; storage op
-- exec_prune, docs/configuration.md "Quotas and retention").  The
-- application role has no DELETE right on executions: these SECURITY
-- DEFINER functions are its only way to delete one.  The server calls
-- eai.exec_prune inside the tenant's own transaction and appends the
-- "retention.pruned" audit event there, so the chain records each deletion.
-- The audit chain, the usage ledger and the outbox are never pruned.
-- grant_app_role (0003) grants every SECURITY DEFINER function of schema eai.

-- SYSTEM: tenants having terminal executions created before p_before_ms.
CREATE FUNCTION eai.prune_tenants(p_before_ms bigint, p_limit integer)
RETURNS TABLE (tenant_id uuid)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT DISTINCT e.tenant_id FROM eai.sandbox_executions e
     WHERE e.created_at < to_timestamp(p_before_ms / 1000.0)
       AND e.status IN ('succeeded', 'failed', 'timeout', 'oom_killed', 'cancelled', 'error')
     LIMIT greatest(least(p_limit, 10000), 0);
    PERFORM set_config('eai.definer', '', true);
END
$$;
REVOKE ALL ON FUNCTION eai.prune_tenants(bigint, integer) FROM PUBLIC;

-- Delete at most p_limit terminal executions of p_tenant created before
-- p_before_ms (their files go with them: ON DELETE CASCADE); their ids,
-- oldest first.
CREATE FUNCTION eai.exec_prune(p_tenant uuid, p_before_ms bigint, p_limit integer)
RETURNS TABLE (id uuid)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    WITH victims AS (
        SELECT e.id AS vid, e.seq AS vseq FROM eai.sandbox_executions e
         WHERE e.tenant_id = p_tenant AND e.created_at < to_timestamp(p_before_ms / 1000.0)
           AND e.status IN ('succeeded', 'failed', 'timeout', 'oom_killed', 'cancelled', 'error')
         ORDER BY e.seq LIMIT greatest(least(p_limit, 10000), 0)),
    gone AS (
        DELETE FROM eai.sandbox_executions d USING victims v WHERE d.id = v.vid
        RETURNING d.id AS gid, v.vseq AS gseq)
    SELECT gone.gid FROM gone ORDER BY gone.gseq;
    PERFORM set_config('eai.definer', '', true);
END
$$;
REVOKE ALL ON FUNCTION eai.exec_prune(uuid, bigint, integer) FROM PUBLIC;
