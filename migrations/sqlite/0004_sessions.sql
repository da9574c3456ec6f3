-- 0004_sessions: stored sessions (storage ops session_put, session_get,
-- session_list, session_owned of ABI 1.4; docs/sessions.md "Stored
-- sessions").  One row per session: the columns the queries filter on (the
-- tenant, the node that owns it, its status, its creation time for the
-- newest-first listing) and the record as a JSON document.  Ended sessions
-- stay (GET answers with their stored state after a restart); the
-- retention of executions does not touch them.
CREATE TABLE IF NOT EXISTS sandbox_sessions (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    status TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    rev INTEGER NOT NULL DEFAULT 0,          -- doc.rev: writes land in order
    doc TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS sandbox_sessions_tenant_created
    ON sandbox_sessions(tenant_id, created_ms, id);

CREATE INDEX IF NOT EXISTS sandbox_sessions_owner_live
    ON sandbox_sessions(owner, created_ms) WHERE status NOT IN ('ended', 'failed', 'interrupted');
