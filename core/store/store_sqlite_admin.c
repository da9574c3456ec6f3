/*
 * Built-in SQLite backend: the admin listings and key expiry (storage ops
 * tenant_list, key_list, key_create_expiring; `eaid tenants list`,
 * `eaid keys list|create --expires`, docs/api.md).
 *
 * Schema: api_keys.expires_ms (epoch ms, NULL = never), added by
 * migrations/sqlite/0002_key_expiry.sql (store_sqlite_migrate.c).
 */
#include "store/store_sqlite_int.h"
#include "base/util.h"

#include <string.h>

/* expires_ms column -> RFC 3339 string or JSON null */
json_t *eai_sq_col_expiry(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return json_null();
    char t[32];
    eai_time_rfc3339(sqlite3_column_int64(st, i), t);
    return json_string(t);
}

static json_t *sq_row_tenant(sqlite3_stmt *st)
{
    if (!eai_sq_col_text(st, 0) || !eai_sq_col_text(st, 1) || !eai_sq_col_text(st, 2))
        return NULL;
    return json_pack("{s:s, s:s, s:s}", "id", eai_sq_col_text(st, 0), "name", eai_sq_col_text(st, 1),
                     "created_at", eai_sq_col_text(st, 2));
}

int eai_sq_tenant_list(void *self, const char *after, int limit, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (limit < 1 || limit > 1000)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "tenant_list: limit %d outside 1..1000", limit);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT id, name, created_at FROM tenants WHERE ?1 IS NULL OR id > ?1 ORDER BY id LIMIT ?2", err);
    if (st) {
        eai_sq_bind_str(st, 1, after);
        sqlite3_bind_int(st, 2, limit);
        ret = eai_sq_collect(s, c->db, st, sq_row_tenant, "tenant list", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

static json_t *sq_row_key(sqlite3_stmt *st)
{
    if (!eai_sq_col_text(st, 0) || !eai_sq_col_text(st, 3))
        return NULL;
    return json_pack("{s:s, s:o, s:b, s:s, s:o}", "key_id", eai_sq_col_text(st, 0),
                     "name", eai_sq_col_str_or_null(st, 1), "revoked", sqlite3_column_int(st, 2) != 0,
                     "created_at", eai_sq_col_text(st, 3), "expires_at", eai_sq_col_expiry(st, 4));
}

int eai_sq_key_list(void *self, const char *tenant, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT id, name, revoked, created_at, expires_ms FROM api_keys WHERE tenant_id = ?1"
        " ORDER BY created_at, id", err);
    if (st) {
        eai_sq_bind_str(st, 1, tenant);
        ret = eai_sq_collect(s, c->db, st, sq_row_key, "key list", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_key_create_expiring(void *self, const char *tenant, const char *key_id,
                               const char *secret_hash_hex, const char *name, int64_t expires_ms,
                               struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !key_id || !secret_hash_hex)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "key_create: missing argument");
    if (expires_ms < 0)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "key_create: negative expiry");
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "INSERT INTO api_keys (id, tenant_id, hash, name, revoked, created_at, updated_at, expires_ms)"
        " VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5, ?6)", err);
    if (st) {
        sqlite3_bind_text(st, 1, key_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, secret_hash_hex, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 4, name);
        sqlite3_bind_text(st, 5, now_s, -1, SQLITE_STATIC);
        if (expires_ms > 0)
            sqlite3_bind_int64(st, 6, expires_ms);
        else
            sqlite3_bind_null(st, 6);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            ret = 0;
        else if (sqlite3_extended_errcode(c->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
            eai_sq_fail(s, err, EAI_E_NOT_FOUND, 0, "key_create: unknown tenant %s", tenant);
        else
            eai_sq_db_fail(s, err, c->db, "key insert");
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}
