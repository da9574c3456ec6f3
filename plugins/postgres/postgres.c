/*
 * eai-storage-postgres.so: the storage backend on PostgreSQL (libpq).
 *
 * Selected by core when EAI_DATABASE_URL (or storage.url) is a postgres://
 * or postgresql:// URL.  Config keys: url (required), pool_size (default 4),
 * statement_timeout_ms (default 30000), connect_timeout_s (default 5).
 *
 * Ops are synchronous and called from core's bounded worker pool, never on
 * the loop thread (that is the "bounded worker pool" option for libpq).
 * Tenant scoping is enforced by row-level security: every tenant-scoped
 * transaction starts with set_config('app.tenant_id', <tenant>, true); the
 * queries also filter on tenant_id, but the database refuses other tenants'
 * rows on its own.  SYSTEM ops go through SECURITY DEFINER functions of
 * migrations/postgres/0001_init.sql.  See docs/postgres.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---------------------------------------------------------------- migrate, ping */

/* Run a multi-statement script (simple query protocol) inside tx. */
static int eai_pg_script(struct eai_pg_tx *tx, const char *sql, struct eai_error **err)
{
    PGresult *r = PQexec(tx->conn, sql);
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK || s == PGRES_EMPTY_QUERY) {
        PQclear(r);
        return 0;
    }
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = r ? PQresultErrorMessage(r) : PQerrorMessage(tx->conn);
    if (PQstatus(tx->conn) != CONNECTION_OK)
        tx->conn_lost = 1;
    eai_pg_fail(tx->pg, err, tx->conn_lost ? EAI_E_STORAGE_UNAVAILABLE : EAI_E_INTERNAL, "[%s] %s",
                st ? st : "?", msg ? msg : "");
    PQclear(r);
    return -1;
}

struct eai_pg_migrate_ctx {
    const char *app_role;
    int applied;
};

static int eai_pg_migrate_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_migrate_ctx *c = arg;
    c->applied = 0;
    /* One migrator at a time; no statement timeout for DDL. */
    if (eai_pg_script(tx, "SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0;"
                          " SELECT pg_advisory_xact_lock(hashtext('eai.migrate'));"
                          " SET LOCAL client_min_messages = warning;"
                          " CREATE SCHEMA IF NOT EXISTS eai;"
                          " CREATE TABLE IF NOT EXISTS eai.schema_migrations ("
                          "  version integer PRIMARY KEY,"
                          "  id uuid NOT NULL DEFAULT gen_random_uuid(),"
                          "  name text NOT NULL, checksum text NOT NULL,"
                          "  created_at timestamptz NOT NULL DEFAULT now(),"
                          "  updated_at timestamptz NOT NULL DEFAULT now())", err) < 0)
        return -1;
    for (int i = 0; i < eai_pg_migrations_count; i++) {
        const struct eai_pg_migration *m = &eai_pg_migrations[i];
        char ver[24];
        eai_pg_i64(m->version, ver);
        const char *p[2] = {ver, m->sql};
        PGresult *r = eai_pg_q(tx, "SELECT s.checksum, encode(sha256(convert_to($2, 'UTF8')), 'hex')"
                                   " FROM (SELECT 1) x LEFT JOIN eai.schema_migrations s"
                                   " ON s.version = $1::int", 2, p, err);
        if (!r)
            return -1;
        int done = !PQgetisnull(r, 0, 0);
        char sum[80];
        snprintf(sum, sizeof(sum), "%s", PQgetvalue(r, 0, 1));
        if (done && strcmp(PQgetvalue(r, 0, 0), sum) != 0) {
            PQclear(r);
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL,
                               "migration %s was changed after it was applied (forward only: add a new file)",
                               m->name);
        }
        PQclear(r);
        if (done)
            continue;
        if (eai_pg_script(tx, m->sql, err) < 0) {
            char msg[512];
            snprintf(msg, sizeof(msg), "%s", (*err)->message);
            tx->pg->host->error_free(*err);
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "applying %s: %s", m->name, msg);
        }
        const char *ip[3] = {ver, m->name, sum};
        if (eai_pg_cmd(tx, "INSERT INTO eai.schema_migrations (version, name, checksum)"
                           " VALUES ($1::int, $2, $3)", 3, ip, err) < 0)
            return -1;
        c->applied++;
    }
    if (c->app_role) {
        const char *p[1] = {c->app_role};
        PGresult *r = eai_pg_q(tx, "SELECT 1 FROM pg_roles WHERE rolname = $1", 1, p, err);
        if (!r)
            return -1;
        int exists = PQntuples(r) == 1;
        PQclear(r);
        if (!exists) {
            return eai_pg_fail(tx->pg, err, EAI_E_NOT_FOUND, "application role '%s' does not exist",
                               c->app_role);
        }
        if (eai_pg_cmd(tx, "SELECT eai.grant_app_role($1)", 1, p, err) < 0)
            return -1;
    }
    return c->applied;
}

static int eai_pg_migrate(void *self, const char *app_role, struct eai_error **err)
{
    struct eai_pg *pg = self;
    struct eai_pg_migrate_ctx c = {.app_role = app_role};
    /* as the owner: the serving-role check does not apply */
    int rc = eai_pg_run_owner(pg, NULL, eai_pg_migrate_body, &c, err);
    if (rc < 0)
        return -1;
    pg->host->log(pg->host, EAI_PG_COMPONENT, EAI_LOG_INFO,
                  "migrations: %d applied, %d known%s%s", rc, eai_pg_migrations_count,
                  app_role ? ", privileges granted to " : "", app_role ? app_role : "");
    return 0;
}

static int eai_pg_ping_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    return eai_pg_cmd(tx, "SELECT 1", 0, NULL, err);
}

static int eai_pg_ping(void *self, struct eai_error **err)
{
    if (eai_pg_run(self, NULL, eai_pg_ping_body, NULL, err) == 0)
        return 0;
    /* an unsafe role is a configuration error, not an outage: start refuses */
    if (*err && eai_pg_role_refused(self))
        (*err)->code = EAI_E_FORBIDDEN;
    return -1;
}

/* ---------------------------------------------------------------- lifecycle */

static int eai_pg_cfg_int(const json_t *config, const char *key, int def, int min, int max)
{
    const json_t *v = json_object_get(config, key);
    long long n = def;
    if (json_is_integer(v))
        n = json_integer_value(v);
    else if (json_is_string(v))
        n = strtoll(json_string_value(v), NULL, 10);
    if (n < min)
        n = min;
    if (n > max)
        n = max;
    return (int)n;
}

static void *eai_pg_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    const char *url = json_string_value(json_object_get(config, "url"));
    if (!url || (strncmp(url, "postgres://", 11) != 0 && strncmp(url, "postgresql://", 13) != 0)) {
        eai_host_error_set(host, err, EAI_E_INTERNAL,
                           "postgres: config key 'url' must be a postgres:// or postgresql:// URL");
        return NULL;
    }
    struct eai_pg *pg = calloc(1, sizeof(*pg));
    if (!pg) {
        eai_host_error_set(host, err, EAI_E_INTERNAL, "postgres: out of memory");
        return NULL;
    }
    pg->host = host;
    pg->url = strdup(url);
    pg->pool_size = eai_pg_cfg_int(config, "pool_size", 4, 1, 64);
    pg->statement_timeout_ms = eai_pg_cfg_int(config, "statement_timeout_ms", 30000, 100, 3600000);
    pg->connect_timeout_s = eai_pg_cfg_int(config, "connect_timeout_s", 5, 2, 300);
    if (!pg->url) {
        free(pg);
        eai_host_error_set(host, err, EAI_E_INTERNAL, "postgres: out of memory");
        return NULL;
    }
    if (eai_pg_pool_init(pg, err) < 0) {
        free(pg->url);
        free(pg);
        return NULL;
    }
    /* Connections open lazily: a database that is down at start only
     * makes ops answer storage_unavailable until it comes back. */
    host->log(host, EAI_PG_COMPONENT, EAI_LOG_INFO, "storage on PostgreSQL, pool of %d connections",
              pg->pool_size);
    return pg;
}

static void eai_pg_destroy(void *self)
{
    struct eai_pg *pg = self;
    if (!pg)
        return;
    eai_pg_pool_close(pg);
    free(pg->url);
    free(pg);
}

static const struct eai_storage_ops eai_pg_ops = {
    .size = sizeof(struct eai_storage_ops),
    .migrate = eai_pg_migrate,
    .ping = eai_pg_ping,
    .tenant_create = eai_pg_tenant_create,
    .tenant_get = eai_pg_tenant_get,
    .key_create = eai_pg_key_create,
    .key_get = eai_pg_key_get,
    .key_revoke = eai_pg_key_revoke,
    .exec_create = eai_pg_exec_create,
    .exec_get = eai_pg_exec_get,
    .exec_list = eai_pg_exec_list,
    .exec_claim = eai_pg_exec_claim,
    .exec_renew = eai_pg_exec_renew,
    .exec_cancel = eai_pg_exec_cancel,
    .exec_finish = eai_pg_exec_finish,
    .exec_stale = eai_pg_exec_stale,
    .exec_counts = eai_pg_exec_counts,
    .file_get = eai_pg_file_get,
    .manifest_put = eai_pg_manifest_put,
    .manifest_get = eai_pg_manifest_get,
    .manifest_delete = eai_pg_manifest_delete,
    .audit_append = eai_pg_audit_append,
    .audit_list = eai_pg_audit_list,
    .outbox_fetch = eai_pg_outbox_fetch,
    .outbox_ack = eai_pg_outbox_ack,
    .ledger_insert = eai_pg_ledger_insert,
    .ledger_query = eai_pg_ledger_query,
    .kv_get = eai_pg_kv_get,
    .kv_set = eai_pg_kv_set,
    .audit_heads = eai_pg_audit_heads,
    .exec_claim_excluding = eai_pg_exec_claim_excluding,
    .tenant_list = eai_pg_tenant_list,
    .key_list = eai_pg_key_list,
    .key_create_expiring = eai_pg_key_create_expiring,
    .manifest_list = eai_pg_manifest_list,
    .outbox_append = eai_pg_outbox_append,
    .tenant_usage = eai_pg_tenant_usage, .exec_prune = eai_pg_exec_prune, /* 0005_retention.sql */
    .run_get = eai_pg_run_get, .run_list = eai_pg_run_list, /* 1.3: the agent view, 0006_agent_view.sql */
    .agent_list = eai_pg_agent_list, .agent_get = eai_pg_agent_get,
    .session_put = eai_pg_session_put, .session_get = eai_pg_session_get,   /* 1.4: stored sessions */
    .session_list = eai_pg_session_list, .session_owned = eai_pg_session_owned,
    .snapshot_put = eai_pg_snapshot_put, .snapshot_get = eai_pg_snapshot_get,  /* 1.5: snapshot records */
    .snapshot_list = eai_pg_snapshot_list, .snapshot_delete = eai_pg_snapshot_delete,
    .snapshot_owned = eai_pg_snapshot_owned,
};

static const struct eai_config_key eai_pg_config_keys[] = {
    {"url", EAI_CFG_STRING, 1, NULL, "postgres:// or postgresql:// URL (the server: a non-owner role)"},
    {"pool_size", EAI_CFG_INT, 0, "4", "connections kept open"},
    {"statement_timeout_ms", EAI_CFG_INT, 0, "30000", "statement_timeout and lock_timeout of every connection"},
    {"connect_timeout_s", EAI_CFG_INT, 0, "5", "libpq connect_timeout"},
    {NULL, 0, 0, NULL, NULL},
};

static const struct eai_plugin_descriptor eai_pg_descriptor = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "postgres",
    .kind = EAI_KIND_STORAGE,
    .version = EAI_VERSION, /* the build's (CMake project version) */
    .create = eai_pg_create,
    .destroy = eai_pg_destroy,
    .ops = &eai_pg_ops,
    .config_keys = eai_pg_config_keys,
};

EAI_PLUGIN_DECLARE(eai_pg_descriptor)
