-- 0005_snapshots: snapshot records (storage ops snapshot_put, snapshot_get,
-- snapshot_list, snapshot_delete, snapshot_owned of ABI 1.5; docs/sessions.md
-- "Snapshots and forks").  One row per snapshot: the columns the queries
-- filter on (the tenant, the node that holds its image, its session, its
-- creation time for the newest-first listing) and the record as a JSON
-- document.  A deleted or expired snapshot's row is deleted with its image.
CREATE TABLE IF NOT EXISTS sandbox_snapshots (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    session_id TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    doc TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS sandbox_snapshots_tenant_created
    ON sandbox_snapshots(tenant_id, created_ms, id);

CREATE INDEX IF NOT EXISTS sandbox_snapshots_owner
    ON sandbox_snapshots(owner, created_ms);
