/*
 * Built-in SQLite backend: snapshot records (storage ops snapshot_put,
 * snapshot_get, snapshot_list, snapshot_delete, snapshot_owned of ABI 1.5;
 * include/eai/storage.h, docs/sessions.md "Snapshots and forks").  Table
 * sandbox_snapshots of migrations/sqlite/0005_snapshots.sql: id, tenant,
 * owner, session and creation time in columns, the record as the
 * document.  Every tenant op filters on tenant_id (the isolation
 * PostgreSQL gets from row-level security).
 */
#include <stdlib.h>
#include <string.h>

#include "store/store_sqlite_int.h"
#include "base/util.h"

#define SNP_LIST_MAX 1000

int eai_sq_snapshot_put(void *self, const char *tenant, const json_t *doc, struct eai_error **err)
{
    struct eai_sq *s = self;
    const char *id = eai_jstr(doc, "id"), *owner = eai_jstr(doc, "owner"), *sid = eai_jstr(doc, "session_id"),
               *created = eai_jstr(doc, "created_at");
    int64_t created_ms = 0;
    if (!tenant || !id || !owner || !sid || !created || eai_sq_parse_time(created, &created_ms) < 0)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0,
                           "snapshot_put: the record needs tenant, id, owner, session_id and created_at");
    char now[32];
    eai_time_rfc3339(eai_now_ms(), now);
    char *text = eai_sq_dump(doc);
    if (!text)
        return eai_sq_oom(s, err);
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c) {
        free(text);
        return -1;
    }
    int ret = -1;
    /* another tenant's row with that id is never touched: the update's
     * condition carries the tenant */
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "INSERT INTO sandbox_snapshots (id, tenant_id, owner, session_id, created_ms, doc, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (id) DO UPDATE SET owner = excluded.owner,"
        " doc = excluded.doc, updated_at = excluded.updated_at"
        " WHERE sandbox_snapshots.tenant_id = excluded.tenant_id", err);
    if (st) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, owner, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, sid, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, created_ms);
        sqlite3_bind_text(st, 6, text, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 7, now, -1, SQLITE_STATIC);
        if (eai_sq_step_done(s, c->db, st, "snapshot put", err) == 0)
            ret = sqlite3_changes(c->db) == 1
                      ? 0
                      : eai_sq_fail(s, err, EAI_E_CONFLICT, 0, "snapshot %s belongs to another tenant", id);
        sqlite3_finalize(st);
    }
    free(text);
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_snapshot_get(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    if (!tenant || !id)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "snapshot_get without tenant or id");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, "SELECT doc FROM sandbox_snapshots WHERE tenant_id = ?1 AND id = ?2",
                                   err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = eai_sq_col_json(st, 0);
            ret = *out ? 0 : eai_sq_fail(s, err, EAI_E_INTERNAL, 0, "snapshot with a bad document");
        } else if (rc == SQLITE_DONE) {
            ret = 0;
        } else {
            eai_sq_db_fail(s, err, c->db, "snapshot get");
        }
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

static json_t *doc_row(sqlite3_stmt *st)
{
    return eai_sq_col_json(st, 0);
}

int eai_sq_snapshot_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                         struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    json_int_t limit = json_integer_value(json_object_get(filter, "limit"));
    const char *sid = eai_jstr(filter, "session_id");
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "snapshot_list without tenant");
    if (limit < 1 || limit > SNP_LIST_MAX)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "snapshot_list: limit outside 1..%d", SNP_LIST_MAX);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT doc FROM sandbox_snapshots WHERE tenant_id = ?1 AND (?2 IS NULL OR session_id = ?2)"
        " ORDER BY created_ms DESC, id DESC LIMIT ?3", err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 2, sid);
        sqlite3_bind_int64(st, 3, limit);
        ret = eai_sq_collect(s, c->db, st, doc_row, "snapshot list", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_snapshot_delete(void *self, const char *tenant, const char *id, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !id)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "snapshot_delete without tenant or id");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, "DELETE FROM sandbox_snapshots WHERE tenant_id = ?1 AND id = ?2", err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
        ret = eai_sq_step_done(s, c->db, st, "snapshot delete", err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

static json_t *owned_row(sqlite3_stmt *st)
{
    json_t *d = eai_sq_col_json(st, 1);
    return d ? json_pack("{s:s, s:o}", "tenant_id", eai_sq_col_text(st, 0), "doc", d) : NULL;
}

int eai_sq_snapshot_owned(void *self, const char *owner, int limit, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    if (!owner || limit < 1 || limit > SNP_LIST_MAX)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "snapshot_owned: owner and a limit in 1..%d",
                           SNP_LIST_MAX);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT tenant_id, doc FROM sandbox_snapshots WHERE owner = ?1 ORDER BY created_ms, id LIMIT ?2", err);
    if (st) {
        sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, limit);
        ret = eai_sq_collect(s, c->db, st, owned_row, "snapshot owned", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}
