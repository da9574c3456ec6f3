-- 0004_key_expiry: API keys may expire (`eaid keys create --expires`), and
-- the admin listings (`eaid tenants list`, `eaid keys list`): storage ABI
-- additions tenant_list, key_list, key_create_expiring.
--
-- eai.key_get keeps its result shape, so a server of the previous version
-- still authenticates during a rolling upgrade; the new server reads keys
-- through eai.key_lookup, which adds expires_ms.  grant_app_role (0003)
-- already grants every SECURITY DEFINER function of schema eai.

ALTER TABLE eai.api_keys ADD COLUMN expires_at timestamptz;

CREATE FUNCTION eai.key_lookup(p_key_id text)
RETURNS TABLE (key_id text, tenant_id uuid, secret_hash text, revoked boolean, name text,
               expires_ms bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT k.key_id, k.tenant_id, k.secret_hash, k.revoked, k.name,
           floor(extract(epoch FROM k.expires_at) * 1000)::bigint
      FROM eai.api_keys k WHERE k.key_id = p_key_id;
    PERFORM set_config('eai.definer', '', true);
END
$$;
REVOKE ALL ON FUNCTION eai.key_lookup(text) FROM PUBLIC;

-- SYSTEM: one page of tenants ordered by id (p_after NULL: from the start).
CREATE FUNCTION eai.tenant_list(p_after uuid, p_limit integer)
RETURNS TABLE (id uuid, name text, created_ms bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT t.id, t.name, floor(extract(epoch FROM t.created_at) * 1000)::bigint
      FROM eai.tenants t
     WHERE p_after IS NULL OR t.id > p_after
     ORDER BY t.id
     LIMIT greatest(least(p_limit, 1000), 0);
    PERFORM set_config('eai.definer', '', true);
END
$$;
REVOKE ALL ON FUNCTION eai.tenant_list(uuid, integer) FROM PUBLIC;
