-- 0001_init: schema eai, every table, row-level security, the SECURITY
-- DEFINER functions of the SYSTEM storage ops, and the grant helper.
--
-- Applied by `eaid migrate` (plugins/postgres) as the owner role, inside one
-- transaction, recorded in eai.schema_migrations.  Forward only: never edit
-- this file once released; add 0002_*.sql instead.
--
-- Conventions
--  * every table: id uuid, created_at, updated_at; every tenant table:
--    tenant_id uuid NOT NULL, RLS enabled and forced, policy tenant_isolation
--    USING and WITH CHECK tenant_id = NULLIF(current_setting('app.tenant_id',
--    true), '')::uuid (a transaction-local setting reads '' afterwards on a
--    pooled connection, hence NULLIF).
--  * execution ids are "sbx_<uuid>" in the API; the table keeps the uuid,
--    the plugin adds and strips the prefix.
--  * JSON documents are stored as `json` (kept verbatim, accepts \u0000),
--    not jsonb: the audit chain hashes the exact event.
--  * SYSTEM ops (queue claim, lease renewal, outbox, key lookup, cross-tenant
--    audit listing) run in SECURITY DEFINER functions owned by the migrating
--    role, with a fixed search_path.  The policy eai_definer lets the owner
--    role see every row only while such a function runs (each sets
--    eai.definer = on on entry and clears it before returning); the
--    application role is never covered by it.

CREATE SCHEMA IF NOT EXISTS eai;
REVOKE ALL ON SCHEMA eai FROM PUBLIC;

CREATE TABLE IF NOT EXISTS eai.schema_migrations (
    version     integer PRIMARY KEY,
    id          uuid NOT NULL DEFAULT gen_random_uuid(),
    name        text NOT NULL,
    checksum    text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE eai.tenants (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL CHECK (tenant_id = id),
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE eai.api_keys (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL REFERENCES eai.tenants (id),
    key_id      text NOT NULL UNIQUE,
    secret_hash text NOT NULL,
    name        text,
    revoked     boolean NOT NULL DEFAULT false,
    revoked_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_keys_tenant ON eai.api_keys (tenant_id);

CREATE TABLE eai.sandbox_executions (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL,
    seq              bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    status           text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed',
                                                     'timeout', 'oom_killed', 'cancelled', 'error')),
    profile          text,
    run_id           text,
    project_id       text,
    idempotency_key  text,
    request_hash     text,
    lease_owner      text,
    lease_until      bigint,            -- epoch ms
    cancel_requested boolean NOT NULL DEFAULT false,
    started_at       timestamptz,
    finished_at      timestamptz,
    doc              json NOT NULL,     -- every other field of the record
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sandbox_executions_tenant_seq ON eai.sandbox_executions (tenant_id, seq DESC);
CREATE INDEX sandbox_executions_tenant_status ON eai.sandbox_executions (tenant_id, status, seq DESC);
CREATE INDEX sandbox_executions_tenant_run ON eai.sandbox_executions (tenant_id, run_id, seq DESC)
    WHERE run_id IS NOT NULL;
CREATE INDEX sandbox_executions_tenant_project ON eai.sandbox_executions (tenant_id, project_id)
    WHERE project_id IS NOT NULL;
CREATE INDEX sandbox_executions_idem ON eai.sandbox_executions (tenant_id, idempotency_key, created_at)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX sandbox_executions_queued ON eai.sandbox_executions (seq) WHERE status = 'queued';
CREATE INDEX sandbox_executions_running ON eai.sandbox_executions (lease_owner, lease_until)
    WHERE status = 'running';
CREATE INDEX sandbox_executions_created ON eai.sandbox_executions (tenant_id, created_at);

CREATE TABLE eai.execution_files (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    uuid NOT NULL,
    execution_id uuid NOT NULL REFERENCES eai.sandbox_executions (id) ON DELETE CASCADE,
    path         text NOT NULL,
    size         bigint NOT NULL,
    sha256       text,
    content      bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (execution_id, path)
);
CREATE INDEX execution_files_tenant ON eai.execution_files (tenant_id, execution_id);

CREATE TABLE eai.manifests (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL,
    kind        text NOT NULL,
    name        text NOT NULL,
    doc         json NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, kind, name)
);

CREATE TABLE eai.audit_events (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL,
    seq         bigint NOT NULL,
    action      text,
    prev_hash   text NOT NULL,
    hash        text NOT NULL,
    event       json NOT NULL,          -- the sealed event, verbatim
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, seq)
);

CREATE TABLE eai.usage_outbox (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    uuid NOT NULL,
    execution_id uuid,
    event        json NOT NULL,
    attempts     integer NOT NULL DEFAULT 0,
    last_attempt timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usage_outbox_created ON eai.usage_outbox (created_at, id);

CREATE TABLE eai.usage_ledger (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL,
    event_id    text NOT NULL,          -- the usage event's own id (dedup key)
    project_id  text,
    run_id      text,
    occurred_at timestamptz NOT NULL,   -- finished_at (or time / created_at) of the event
    event       json NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, event_id)
);
CREATE INDEX usage_ledger_query ON eai.usage_ledger (tenant_id, occurred_at);

-- Small durable key/value (cursors of the audit sink and the like).  Its rows
-- belong to the system tenant 00000000-0000-0000-0000-000000000000: the
-- plugin sets app.tenant_id to it for kv ops, so RLS applies here as well.
CREATE TABLE eai.kv (
    id          uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    tenant_id   uuid NOT NULL,
    key         text NOT NULL,
    value       text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, key)
);

-- Row-level security on every table with tenant_id.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['tenants', 'api_keys', 'sandbox_executions', 'execution_files',
                             'manifests', 'audit_events', 'usage_outbox', 'usage_ledger', 'kv']
    LOOP
        EXECUTE format('ALTER TABLE eai.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE eai.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY tenant_isolation ON eai.%I'
                       ' USING (tenant_id = NULLIF(current_setting(''app.tenant_id'', true), '''')::uuid)'
                       ' WITH CHECK (tenant_id = NULLIF(current_setting(''app.tenant_id'', true), '''')::uuid)', t);
        -- Only the owner (the role running this migration), and only inside
        -- the SECURITY DEFINER functions below (eai.definer = on).
        EXECUTE format('CREATE POLICY eai_definer ON eai.%I TO %I'
                       ' USING (current_setting(''eai.definer'', true) = ''on'')'
                       ' WITH CHECK (current_setting(''eai.definer'', true) = ''on'')', t, current_user);
    END LOOP;
END
$$;

-- ---------------------------------------------------------------- SYSTEM functions

-- Every function below starts with set_config('eai.definer', 'on', true) and
-- resets it before returning, so the eai_definer policy covers exactly the
-- statements of these functions.  (A function-level `SET eai.definer` would
-- be neater, but PostgreSQL 15 lets only superusers put a placeholder
-- setting in a function's SET clause.)

CREATE FUNCTION eai.tenant_get(p_id uuid)
RETURNS TABLE (id uuid, name text, created_ms bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT t.id, t.name, floor(extract(epoch FROM t.created_at) * 1000)::bigint
      FROM eai.tenants t WHERE t.id = p_id;
    PERFORM set_config('eai.definer', '', true);
END
$$;

CREATE FUNCTION eai.key_get(p_key_id text)
RETURNS TABLE (key_id text, tenant_id uuid, secret_hash text, revoked boolean, name text)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT k.key_id, k.tenant_id, k.secret_hash, k.revoked, k.name
      FROM eai.api_keys k WHERE k.key_id = p_key_id;
    PERFORM set_config('eai.definer', '', true);
END
$$;

CREATE FUNCTION eai.key_revoke(p_key_id text)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found_it boolean;
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    UPDATE eai.api_keys
       SET revoked = true, revoked_at = COALESCE(revoked_at, now()), updated_at = now()
     WHERE key_id = p_key_id;
    found_it := FOUND;
    PERFORM set_config('eai.definer', '', true);
    RETURN found_it;
END
$$;

-- Claim up to p_max queued executions, round-robin across tenants (at most
-- p_per_tenant each), oldest first; rows another transaction holds are
-- skipped (FOR UPDATE SKIP LOCKED), so concurrent replicas never claim the
-- same row.
CREATE FUNCTION eai.exec_claim(p_owner text, p_now_ms bigint, p_lease_until bigint,
                               p_max integer, p_per_tenant integer)
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
              FROM eai.sandbox_executions e WHERE e.status = 'queued') s
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

-- Extend the leases of p_owner's running executions; return those whose
-- cancellation was requested.
CREATE FUNCTION eai.exec_renew(p_owner text, p_lease_until bigint)
RETURNS TABLE (id uuid, tenant_id uuid)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    WITH u AS (
        UPDATE eai.sandbox_executions e
           SET lease_until = GREATEST(COALESCE(e.lease_until, 0), p_lease_until)
         WHERE e.status = 'running' AND e.lease_owner = p_owner
        RETURNING e.id, e.tenant_id, e.cancel_requested, e.seq)
    SELECT u.id, u.tenant_id FROM u WHERE u.cancel_requested ORDER BY u.seq;
    PERFORM set_config('eai.definer', '', true);
END
$$;

CREATE FUNCTION eai.exec_stale(p_now_ms bigint)
RETURNS SETOF eai.sandbox_executions
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT * FROM eai.sandbox_executions e
     WHERE e.status = 'running' AND (e.lease_until IS NULL OR e.lease_until < p_now_ms)
     ORDER BY e.seq;
    PERFORM set_config('eai.definer', '', true);
END
$$;

CREATE FUNCTION eai.exec_counts(OUT queued bigint, OUT running bigint)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    SELECT count(*) FILTER (WHERE e.status = 'queued'), count(*) FILTER (WHERE e.status = 'running')
      INTO queued, running
      FROM eai.sandbox_executions e WHERE e.status IN ('queued', 'running');
    PERFORM set_config('eai.definer', '', true);
END
$$;

CREATE FUNCTION eai.outbox_fetch(p_limit integer)
RETURNS TABLE (id uuid, tenant_id uuid, event json, attempts integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT o.id, o.tenant_id, o.event, o.attempts FROM eai.usage_outbox o
     ORDER BY o.created_at, o.id LIMIT p_limit;
    PERFORM set_config('eai.definer', '', true);
END
$$;

CREATE FUNCTION eai.outbox_ack(p_id uuid, p_delivered boolean)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found_it boolean;
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    IF p_delivered THEN
        DELETE FROM eai.usage_outbox WHERE id = p_id;
    ELSE
        UPDATE eai.usage_outbox SET attempts = attempts + 1, last_attempt = now(), updated_at = now()
         WHERE id = p_id;
    END IF;
    found_it := FOUND;
    PERFORM set_config('eai.definer', '', true);
    RETURN found_it;
END
$$;

CREATE FUNCTION eai.audit_list_all(p_after_seq bigint, p_limit integer)
RETURNS TABLE (event json)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('eai.definer', 'on', true);
    RETURN QUERY
    SELECT a.event FROM eai.audit_events a WHERE a.seq > p_after_seq
     ORDER BY a.tenant_id, a.seq LIMIT p_limit;
    PERFORM set_config('eai.definer', '', true);
END
$$;

-- Grant the application role exactly what the server needs.  Called by
-- `eaid migrate --app-role ROLE` after the migrations (idempotent).
CREATE FUNCTION eai.grant_app_role(p_role text)
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
                             'eai.outbox_ack(uuid, boolean)', 'eai.audit_list_all(bigint, integer)']
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', f, p_role);
    END LOOP;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA eai FROM PUBLIC;
