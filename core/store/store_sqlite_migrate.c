/*
 * Built-in SQLite backend: the schema, from migrations/sqlite/NNNN_name.sql
 * (embedded at build time by tools/embed_migrations.cmake, as the postgres
 * plugin embeds migrations/postgres/), applied the same way as PostgreSQL's:
 * in one transaction, each pending file once, in order, recorded in
 * schema_migrations (version, name, checksum); a file changed after it was
 * applied is refused (forward only: add a new file).  docs/storage.md,
 * "Migrations".
 *
 * Adopting a database of the C-string era (before migrations/sqlite/): its
 * schema_migrations has no checksum column and one row, version 1, which is
 * 0001_init.sql verbatim; that era also added api_keys.expires_ms on open,
 * so 0002_key_expiry.sql counts as applied, without running, when the
 * column is already there (sq_already[]).  A database older still (tables,
 * no version row) gets 0001 (every statement IF NOT EXISTS) and 0002.
 */
#include "store/store_sqlite_int.h"
#include "base/errors.h"
#include "base/util.h"

#include <stdio.h>

#include <string.h>

/* The version table: the runner's own, created before any file runs (as the
 * postgres plugin creates eai.schema_migrations). */
static const char sq_version_table[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, version INTEGER NOT NULL UNIQUE,"
    " name TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, checksum TEXT)";

/* Changes the C-string era made without numbering them: the version counts
 * as applied when its probe returns a row. */
static const struct {
    int version;
    const char *probe;
} sq_already[] = {
    {2, "SELECT 1 FROM pragma_table_info('api_keys') WHERE name = 'expires_ms'"},
};

/* 1 when sql returns a row, 0 when none, -1 on error. */
static int sq_probe(struct eai_sq *s, sqlite3 *db, const char *sql, struct eai_error **err)
{
    sqlite3_stmt *st = eai_sq_prep(s, db, sql, err);
    if (!st)
        return -1;
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return eai_sq_db_fail(s, err, db, "schema probe");
}

static int sq_already_done(struct eai_sq *s, sqlite3 *db, int version, struct eai_error **err)
{
    for (size_t i = 0; i < sizeof sq_already / sizeof sq_already[0]; i++)
        if (sq_already[i].version == version)
            return sq_probe(s, db, sq_already[i].probe, err);
    return 0;
}

/* The version table, with the checksum column the C-string era lacked. */
static int sq_version_table_ready(struct eai_sq *s, sqlite3 *db, struct eai_error **err)
{
    if (eai_sq_exec_sql(s, db, sq_version_table, err) < 0)
        return -1;
    int has = sq_probe(s, db, "SELECT 1 FROM pragma_table_info('schema_migrations') WHERE name = 'checksum'", err);
    if (has < 0)
        return -1;
    return has ? 0 : eai_sq_exec_sql(s, db, "ALTER TABLE schema_migrations ADD COLUMN checksum TEXT", err);
}

/* The recorded checksum of version v: *sum "" when recorded without one (the
 * C-string era); returns 1 recorded, 0 not, -1 error. */
static int sq_recorded(struct eai_sq *s, sqlite3 *db, int v, char sum[65], struct eai_error **err)
{
    sqlite3_stmt *st = eai_sq_prep(s, db, "SELECT checksum FROM schema_migrations WHERE version = ?1", err);
    if (!st)
        return -1;
    sqlite3_bind_int(st, 1, v);
    int rc = sqlite3_step(st);
    int ret = 0;
    sum[0] = '\0';
    if (rc == SQLITE_ROW) {
        const char *c = eai_sq_col_text(st, 0);
        snprintf(sum, 65, "%s", c ? c : "");
        ret = 1;
    } else if (rc != SQLITE_DONE) {
        ret = eai_sq_db_fail(s, err, db, "schema_migrations");
    }
    sqlite3_finalize(st);
    return ret;
}

/* Record m (insert, or set name and checksum of an adopted row). */
static int sq_record(struct eai_sq *s, sqlite3 *db, const struct eai_sq_migration *m, const char *sum,
                     struct eai_error **err)
{
    char now_s[32], id[37];
    eai_time_rfc3339(eai_now_ms(), now_s);
    eai_uuid_v4(id);
    sqlite3_stmt *st = eai_sq_prep(s, db,
        "INSERT INTO schema_migrations (id, tenant_id, version, name, checksum, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) ON CONFLICT (version) DO UPDATE SET"
        " name = excluded.name, checksum = excluded.checksum, updated_at = excluded.updated_at", err);
    if (!st)
        return -1;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, EAI_SYSTEM_TENANT, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, m->version);
    sqlite3_bind_text(st, 4, m->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, sum, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 6, now_s, -1, SQLITE_TRANSIENT);
    int rc = eai_sq_step_done(s, db, st, "schema_migrations", err);
    sqlite3_finalize(st);
    return rc;
}

/* One migration: skip (same checksum), adopt (no checksum yet, or already
 * made by the C-string era), refuse (changed), or apply.  1 applied, 0 not. */
static int sq_migrate_one(struct eai_sq *s, sqlite3 *db, const struct eai_sq_migration *m,
                          struct eai_error **err)
{
    char sum[65], had[65];
    eai_sha256_hex(m->sql, strlen(m->sql), sum);

    int rec = sq_recorded(s, db, m->version, had, err);
    if (rec < 0)
        return -1;
    if (rec && had[0] && strcmp(had, sum) != 0)
        return eai_sq_fail(s, err, EAI_E_INTERNAL, 0,
                           "migration %s was changed after it was applied (forward only: add a new file)",
                           m->name);
    if (rec)
        return had[0] ? 0 : sq_record(s, db, m, sum, err);

    int done = sq_already_done(s, db, m->version, err);
    if (done < 0)
        return -1;
    if (!done && eai_sq_exec_sql(s, db, m->sql, err) < 0) {
        if (err && *err)
            eai_error_prefix(*err, "applying %s", m->name);
        return -1;
    }
    if (sq_record(s, db, m, sum, err) < 0)
        return -1;
    return done ? 0 : 1;
}

int eai_sq_migrate_db(struct eai_sq *s, sqlite3 *db, struct eai_error **err)
{
    if (eai_sq_begin(s, db, err) < 0)
        return -1;
    if (sq_version_table_ready(s, db, err) < 0)
        goto fail;

    for (int i = 0; i < eai_sq_migrations_count; i++)
        if (sq_migrate_one(s, db, &eai_sq_migrations[i], err) < 0)
            goto fail;

    return eai_sq_commit(s, db, err);
fail:
    eai_sq_rollback(db);
    return -1;
}
