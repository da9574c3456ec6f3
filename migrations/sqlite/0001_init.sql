-- SQLite schema, version 1: what the built-in backend created from a C string
-- (core/store/store_sqlite.c) before migrations/sqlite/ existed, statement for
-- statement.  Forward only: never edit an applied file, add the next NNNN_name.sql
-- (docs/storage.md, "Migrations").  Applied by core/store/store_sqlite_migrate.c.

CREATE TABLE IF NOT EXISTS schema_migrations (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    version INTEGER NOT NULL UNIQUE,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS tenants (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL CHECK (tenant_id = id),
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    hash TEXT NOT NULL,
    name TEXT,
    revoked INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys(tenant_id);

CREATE TABLE IF NOT EXISTS sandbox_executions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    status TEXT NOT NULL,
    run_id TEXT,
    project_id TEXT,
    idempotency_key TEXT,
    request_hash TEXT,
    lease_owner TEXT,
    lease_until INTEGER,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    doc TEXT NOT NULL
);

CREATE INDEX IF NOT EXISTS sandbox_executions_tenant_seq ON sandbox_executions(tenant_id, seq);

CREATE INDEX IF NOT EXISTS sandbox_executions_status ON sandbox_executions(status, tenant_id, seq);

CREATE INDEX IF NOT EXISTS sandbox_executions_idem ON sandbox_executions(tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE INDEX IF NOT EXISTS sandbox_executions_run ON sandbox_executions(tenant_id, run_id, seq);

CREATE INDEX IF NOT EXISTS sandbox_executions_project ON sandbox_executions(tenant_id, project_id);

CREATE INDEX IF NOT EXISTS sandbox_executions_created ON sandbox_executions(tenant_id, created_at);

CREATE INDEX IF NOT EXISTS sandbox_executions_created_ms ON sandbox_executions(tenant_id, created_ms);

CREATE INDEX IF NOT EXISTS sandbox_executions_lease ON sandbox_executions(lease_owner, status);

CREATE TABLE IF NOT EXISTS execution_files (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    execution_id TEXT NOT NULL REFERENCES sandbox_executions(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    content BLOB NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (tenant_id, execution_id, path)
);

CREATE INDEX IF NOT EXISTS execution_files_exec ON execution_files(execution_id);

CREATE TABLE IF NOT EXISTS manifests (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    doc TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (tenant_id, kind, name)
);

CREATE TABLE IF NOT EXISTS audit_events (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time TEXT NOT NULL,
    actor TEXT,
    action TEXT,
    target TEXT,
    decision TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    doc TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (tenant_id, seq)
);

CREATE TABLE IF NOT EXISTS usage_outbox (
    ord INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    tenant_id TEXT NOT NULL,
    event TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_attempt_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS usage_ledger (
    ord INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    project_id TEXT,
    run_id TEXT,
    agent_id TEXT,
    execution_id TEXT,
    occurred_ms INTEGER NOT NULL,
    event TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (tenant_id, id)
);

CREATE INDEX IF NOT EXISTS usage_ledger_time ON usage_ledger(tenant_id, occurred_ms);

CREATE INDEX IF NOT EXISTS usage_ledger_project ON usage_ledger(tenant_id, project_id, occurred_ms);

CREATE TABLE IF NOT EXISTS kv (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
