/*
 * Built-in SQLite backend: stored sessions (storage ops session_put,
 * session_get, session_list, session_owned of ABI 1.4; include/eai/
 * storage.h, docs/sessions.md "Stored sessions").  Table sandbox_sessions
 * of migrations/sqlite/0004_sessions.sql: id, tenant, owner, status and
 * creation time in columns (what the queries filter on), the record as the
 * document.  Every tenant op filters on tenant_id (the isolation PostgreSQL
 * gets from row-level security).
 */
#include <stdlib.h>
#include <string.h>

#include "store/store_sqlite_int.h"
#include "base/util.h"

#define SES_LIST_MAX 1000

int eai_sq_session_put(void *self, const char *tenant, const json_t *doc, const char *expect_owner,
                       struct eai_error **err)
{
    struct eai_sq *s = self;
    const char *id = eai_jstr(doc, "id"), *owner = eai_jstr(doc, "owner"),
               *status = eai_jstr(doc, "status"), *created = eai_jstr(doc, "created_at");
    int64_t created_ms = 0;
    if (!tenant || !id || !owner || !status || !created || eai_sq_parse_time(created, &created_ms) < 0)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0,
                           "session_put: the record needs tenant, id, owner, status and created_at");
    json_int_t rev = json_integer_value(json_object_get(doc, "rev"));
    char now[32];
    eai_time_rfc3339(eai_now_ms(), now);
    char *text = eai_sq_dump(doc);
    if (!text)
        return eai_sq_oom(s, err);
    int ret = -1;
    sqlite3_stmt *st = NULL;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c) {
        free(text);
        return -1;
    }
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    /* the row of another tenant with that id is never touched: the id is
     * the key, so the update's condition carries the tenant */
    st = eai_sq_prep(s, c->db,
        "INSERT INTO sandbox_sessions (id, tenant_id, owner, status, created_ms, rev, doc, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?9, ?6, ?7, ?7) ON CONFLICT (id) DO UPDATE SET owner = excluded.owner,"
        " status = excluded.status, rev = excluded.rev, doc = excluded.doc, updated_at = excluded.updated_at"
        " WHERE sandbox_sessions.tenant_id = excluded.tenant_id"
        " AND (?8 IS NULL OR sandbox_sessions.owner = ?8) AND excluded.rev >= sandbox_sessions.rev", err);
    if (!st)
        goto rollback;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, status, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, created_ms);
    sqlite3_bind_text(st, 6, text, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, now, -1, SQLITE_STATIC);
    eai_sq_bind_str(st, 8, expect_owner);
    sqlite3_bind_int64(st, 9, rev);
    if (eai_sq_step_done(s, c->db, st, "session put", err) < 0)
        goto rollback;
    sqlite3_finalize(st);
    st = NULL;
    if (sqlite3_changes(c->db) != 1) {
        /* not written: another tenant's id or another owner (a conflict),
         * or an older rev than the stored one (a late write: ignored) */
        st = eai_sq_prep(s, c->db, "SELECT tenant_id, owner FROM sandbox_sessions WHERE id = ?1", err);
        if (!st)
            goto rollback;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
            eai_sq_db_fail(s, err, c->db, "session put");
            goto rollback;
        }
        if (strcmp(eai_sq_col_text(st, 0), tenant) != 0 ||
            (expect_owner && strcmp(eai_sq_col_text(st, 1), expect_owner) != 0)) {
            eai_sq_fail(s, err, EAI_E_CONFLICT, 0, "session %s is owned by another node", id);
            goto rollback;
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    ret = eai_sq_commit(s, c->db, err);
    goto out;
rollback:
    eai_sq_rollback(c->db);
out:
    if (st)
        sqlite3_finalize(st);
    free(text);
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_session_get(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    if (!tenant || !id)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "session_get without tenant or id");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, "SELECT doc FROM sandbox_sessions WHERE tenant_id = ?1 AND id = ?2",
                                   err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = eai_sq_col_json(st, 0);
            ret = *out ? 0 : eai_sq_fail(s, err, EAI_E_INTERNAL, 0, "session with a bad document");
        } else if (rc == SQLITE_DONE) {
            ret = 0;
        } else {
            eai_sq_db_fail(s, err, c->db, "session get");
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

int eai_sq_session_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    json_int_t limit = json_integer_value(json_object_get(filter, "limit"));
    const char *status = eai_jstr(filter, "status"), *before = eai_jstr(filter, "before");
    int live = json_is_true(json_object_get(filter, "live"));
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "session_list without tenant");
    if (limit < 1 || limit > SES_LIST_MAX)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "session_list: limit outside 1..%d", SES_LIST_MAX);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    /* the cursor: rows strictly older than the session `before` (by
     * created_ms, then id), read through sandbox_sessions_tenant_created */
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT doc FROM sandbox_sessions WHERE tenant_id = ?1"
        " AND (?2 IS NULL OR status = ?2)"
        " AND (?3 = 0 OR status NOT IN ('ended', 'failed', 'interrupted'))"
        " AND (?4 IS NULL OR (created_ms, id) < (SELECT b.created_ms, b.id FROM sandbox_sessions b"
        "                                          WHERE b.tenant_id = ?1 AND b.id = ?4))"
        " ORDER BY created_ms DESC, id DESC LIMIT ?5", err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 2, status);
        sqlite3_bind_int(st, 3, live);
        eai_sq_bind_str(st, 4, before);
        sqlite3_bind_int64(st, 5, limit);
        ret = eai_sq_collect(s, c->db, st, doc_row, "session list", out, err);
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

int eai_sq_session_owned(void *self, const char *owner, int limit, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    if (!owner || limit < 1 || limit > SES_LIST_MAX)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "session_owned: owner and a limit in 1..%d",
                           SES_LIST_MAX);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT tenant_id, doc FROM sandbox_sessions WHERE owner = ?1"
        " AND status NOT IN ('ended', 'failed', 'interrupted') ORDER BY created_ms, id LIMIT ?2", err);
    if (st) {
        sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, limit);
        ret = eai_sq_collect(s, c->db, st, owned_row, "session owned", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}
