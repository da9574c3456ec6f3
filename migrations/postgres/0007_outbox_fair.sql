-- outbox_fetch shares a fetch between tenants (issue 36 item 4): oldest
-- first, but at most greatest(limit / 8, 16) rows of one tenant's usage
-- events and as many of its callbacks (event->>'target' = 'callback'), so
-- one tenant's backlog (callbacks retrying for hours) never holds back
-- another tenant's deliveries.  EAI_OUTBOX_FAIR_SHARE in include/eai/storage.h
-- is the same number.  CREATE OR REPLACE keeps the grants.
CREATE OR REPLACE FUNCTION eai.outbox_fetch(p_limit integer)
RETURNS TABLE (id uuid, tenant_id uuid, event json, attempts integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT f.oid, f.otenant, f.oevent, f.oattempts FROM (
        SELECT o.id AS oid, o.tenant_id AS otenant, o.event AS oevent, o.attempts AS oattempts,
               o.created_at AS ocreated,
               row_number() OVER (PARTITION BY o.tenant_id, coalesce(o.event->>'target' = 'callback', false)
                                  ORDER BY o.created_at, o.id) AS rn
          FROM eai.usage_outbox o) f
     WHERE f.rn <= greatest(p_limit / 8, 16)
     ORDER BY f.ocreated, f.oid LIMIT p_limit;
    PERFORM set_config('eai.definer', '', true);
END
$$;
