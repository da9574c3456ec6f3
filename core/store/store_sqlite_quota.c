/*
 * Built-in SQLite backend: quotas and retention (storage ops tenant_usage,
 * exec_prune; docs/configuration.md, "Quotas and retention").
 *
 * tenant_usage sums the bytes a tenant keeps (execution documents,
 * collected files, manifests) and counts its executions since an instant
 * (index sandbox_executions(tenant_id, created_ms)).  exec_prune deletes old
 * terminal executions with their files and appends, per tenant, one audit
 * event recording the deletion in the same transaction; the audit chain
 * itself, the usage ledger and the outbox are never pruned.
 */
#include "store/store_sqlite_int.h"
#include "base/util.h"

#include <stdlib.h>
#include <string.h>

static int one_int64(struct eai_sq *s, sqlite3 *db, const char *sql, const char *tenant, int64_t arg,
                     int64_t *out, struct eai_error **err)
{
    sqlite3_stmt *st = eai_sq_prep(s, db, sql, err);
    if (!st)
        return -1;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_TRANSIENT);
    if (sqlite3_bind_parameter_count(st) >= 2)
        sqlite3_bind_int64(st, 2, arg);
    int rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : eai_sq_db_fail(s, err, db, "tenant usage");
}

int eai_sq_tenant_usage(void *self, const char *tenant, int64_t since_ms, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c)
        return -1;
    int64_t since = 0, docs = 0, files = 0, man = 0, man_bytes = 0;
    int rc = -1;
    if (one_int64(s, c->db, "SELECT count(*) FROM sandbox_executions WHERE tenant_id = ?1 AND created_ms >= ?2",
                  tenant, since_ms, &since, err) == 0 &&
        one_int64(s, c->db, "SELECT coalesce(sum(length(CAST(doc AS BLOB))), 0) FROM sandbox_executions"
                            " WHERE tenant_id = ?1", tenant, 0, &docs, err) == 0 &&
        one_int64(s, c->db, "SELECT coalesce(sum(size), 0) FROM execution_files WHERE tenant_id = ?1", tenant, 0,
                  &files, err) == 0 &&
        one_int64(s, c->db, "SELECT count(*) FROM manifests WHERE tenant_id = ?1", tenant, 0, &man, err) == 0 &&
        one_int64(s, c->db, "SELECT coalesce(sum(length(CAST(doc AS BLOB))), 0) FROM manifests WHERE tenant_id = ?1",
                  tenant, 0, &man_bytes, err) == 0) {
        *out = json_pack("{s:I, s:I, s:I}", "executions_since", (json_int_t)since, "stored_bytes",
                         (json_int_t)(docs + files + man_bytes), "manifests", (json_int_t)man);
        rc = *out ? 0 : eai_sq_oom(s, err);
    }
    eai_sq_release(s, c);
    return rc;
}

/* One tenant's part of a prune: its audit anchor. */
static int prune_audit(struct eai_sq *s, sqlite3 *db, const char *tenant, int64_t n, const char *first,
                       const char *last, int64_t before_ms, struct eai_error **err)
{
    char id[37], now[32], before[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    eai_time_rfc3339(before_ms, before);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:s, s:s, s:s}}", "id", id, "time", now,
                           "actor", "system:retention", "action", "retention.pruned", "target", "executions",
                           "decision", "allow", "details", "executions", (json_int_t)n, "first_id", first,
                           "last_id", last, "created_before", before);
    if (!ev)
        return eai_sq_oom(s, err);
    int rc = eai_sq_audit_insert(s, db, tenant, ev, err);
    json_decref(ev);
    return rc;
}

int eai_sq_exec_prune(void *self, int64_t before_ms, int limit, int64_t *deleted, struct eai_error **err)
{
    struct eai_sq *s = self;
    *deleted = 0;
    if (limit < 1)
        limit = 1;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c)
        return -1;
    int rc = -1;
    sqlite3_stmt *sel = NULL, *delf = NULL, *dele = NULL;
    json_t *rows = NULL;
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    /* Oldest first, grouped by tenant: one audit anchor per tenant. */
    sel = eai_sq_prep(s, c->db,
                      "SELECT tenant_id, id FROM sandbox_executions WHERE created_ms < ?1 AND status IN"
                      " ('succeeded','failed','timeout','oom_killed','cancelled','error')"
                      " ORDER BY tenant_id, seq LIMIT ?2", err);
    delf = eai_sq_prep(s, c->db, "DELETE FROM execution_files WHERE tenant_id = ?1 AND execution_id = ?2", err);
    dele = eai_sq_prep(s, c->db, "DELETE FROM sandbox_executions WHERE tenant_id = ?1 AND id = ?2", err);
    if (!sel || !delf || !dele)
        goto rollback;
    sqlite3_bind_int64(sel, 1, before_ms);
    sqlite3_bind_int(sel, 2, limit);
    /* Read the batch first, then delete (never under a live SELECT). */
    rows = json_array();
    int r;
    while (rows && (r = sqlite3_step(sel)) == SQLITE_ROW) {
        const char *t = eai_sq_col_text(sel, 0), *id = eai_sq_col_text(sel, 1);
        if (t && id)
            json_array_append_new(rows, json_pack("[s,s]", t, id));
    }
    if (!rows || r != SQLITE_DONE) {
        rows ? eai_sq_db_fail(s, err, c->db, "prune select") : eai_sq_oom(s, err);
        goto rollback;
    }
    char tenant[128] = "", first[128] = "", last[128] = "";
    int64_t n = 0;
    for (size_t i = 0; i <= json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        const char *t = row ? json_string_value(json_array_get(row, 0)) : NULL;
        const char *id = row ? json_string_value(json_array_get(row, 1)) : NULL;
        if (n > 0 && (!t || strcmp(t, tenant) != 0)) {
            if (prune_audit(s, c->db, tenant, n, first, last, before_ms, err) < 0)
                goto rollback;
            n = 0;
        }
        if (!t || !id)
            continue;
        if (n == 0) {
            snprintf(tenant, sizeof(tenant), "%s", t);
            snprintf(first, sizeof(first), "%s", id);
        }
        snprintf(last, sizeof(last), "%s", id);
        for (sqlite3_stmt *d = delf; d; d = d == delf ? dele : NULL) {
            sqlite3_reset(d);
            sqlite3_bind_text(d, 1, t, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(d, 2, id, -1, SQLITE_TRANSIENT);
            if (sqlite3_step(d) != SQLITE_DONE) {
                eai_sq_db_fail(s, err, c->db, "prune delete");
                goto rollback;
            }
        }
        n++;
        (*deleted)++;
    }
    {
        /* and the records of old ended sessions (0004_sessions.sql) */
        sqlite3_stmt *ds = eai_sq_prep(s, c->db,
            "DELETE FROM sandbox_sessions WHERE id IN (SELECT id FROM sandbox_sessions WHERE created_ms < ?1"
            " AND status IN ('ended', 'failed', 'interrupted') ORDER BY created_ms LIMIT ?2)", err);
        if (!ds)
            goto rollback;
        sqlite3_bind_int64(ds, 1, before_ms);
        sqlite3_bind_int(ds, 2, limit);
        int drc = sqlite3_step(ds);
        sqlite3_finalize(ds);
        if (drc != SQLITE_DONE) {
            eai_sq_db_fail(s, err, c->db, "prune sessions");
            goto rollback;
        }
    }
    if (eai_sq_commit(s, c->db, err) < 0)
        goto out;
    rc = 0;
    goto out;
rollback:
    *deleted = 0;
    eai_sq_rollback(c->db);
out:
    json_decref(rows);
    sqlite3_finalize(sel);
    sqlite3_finalize(delf);
    sqlite3_finalize(dele);
    eai_sq_release(s, c);
    return rc;
}
