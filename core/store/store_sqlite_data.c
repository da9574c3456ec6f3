/* Built-in SQLite backend: tenants, keys, manifests, audit, usage outbox and ledger, kv. */
#include "store/store_sqlite_int.h"
#include "base/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ tenants and keys */

int eai_sq_tenant_create(void *self, const char *name, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!name || !*name)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "tenant name is empty");
    char id[37], now_s[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now_s);
    json_t *t = json_pack("{s:s, s:s, s:s}", "id", id, "name", name, "created_at", now_s);
    if (!t)
        return eai_sq_oom(s, err);
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c) {
        json_decref(t);
        return -1;
    }
    int rc = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "INSERT INTO tenants (id, tenant_id, name, created_at, updated_at)"
        " VALUES (?1, ?1, ?2, ?3, ?3)", err);
    if (st) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, now_s, -1, SQLITE_STATIC);
        rc = eai_sq_step_done(s, c->db, st, "tenant insert", err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    if (rc < 0) {
        json_decref(t);
        return -1;
    }
    if (out)
        *out = t;
    else
        json_decref(t);
    return 0;
}

int eai_sq_tenant_get(void *self, const char *id, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    json_t *t = NULL;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT id, name, created_at FROM tenants WHERE id = ?1", err);
    if (!st)
        goto out;
    eai_sq_bind_str(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        t = json_pack("{s:s, s:s, s:s}", "id", eai_sq_col_text(st, 0), "name", eai_sq_col_text(st, 1),
                      "created_at", eai_sq_col_text(st, 2));
        if (!t) {
            eai_sq_oom(s, err);
            goto out;
        }
    } else if (rc != SQLITE_DONE) {
        eai_sq_db_fail(s, err, c->db, "tenant get");
        goto out;
    }
    *out = t;
    ret = 0;
out:
    sqlite3_finalize(st);
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_key_create(void *self, const char *tenant, const char *key_id,
                      const char *secret_hash_hex, const char *name, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !key_id || !secret_hash_hex)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "key_create: missing argument");
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "INSERT INTO api_keys (id, tenant_id, hash, name, revoked, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5)", err);
    if (st) {
        sqlite3_bind_text(st, 1, key_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, secret_hash_hex, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 4, name);
        sqlite3_bind_text(st, 5, now_s, -1, SQLITE_STATIC);
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

int eai_sq_key_get(void *self, const char *key_id, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    json_t *k = NULL;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT id, tenant_id, hash, revoked, name, expires_ms FROM api_keys WHERE id = ?1", err);
    if (!st)
        goto out;
    eai_sq_bind_str(st, 1, key_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        k = json_pack("{s:s, s:s, s:s, s:b, s:o, s:o}", "key_id", eai_sq_col_text(st, 0),
                      "tenant_id", eai_sq_col_text(st, 1), "hash", eai_sq_col_text(st, 2),
                      "revoked", sqlite3_column_int(st, 3) != 0,
                      "name", eai_sq_col_str_or_null(st, 4), "expires_at", eai_sq_col_expiry(st, 5));
        if (!k) {
            eai_sq_oom(s, err);
            goto out;
        }
    } else if (rc != SQLITE_DONE) {
        eai_sq_db_fail(s, err, c->db, "key get");
        goto out;
    }
    *out = k;
    ret = 0;
out:
    sqlite3_finalize(st);
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_key_revoke(void *self, const char *key_id, struct eai_error **err)
{
    struct eai_sq *s = self;
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "UPDATE api_keys SET revoked = 1, updated_at = ?2 WHERE id = ?1", err);
    if (st) {
        eai_sq_bind_str(st, 1, key_id);
        sqlite3_bind_text(st, 2, now_s, -1, SQLITE_STATIC);
        if (eai_sq_step_done(s, c->db, st, "key revoke", err) == 0) {
            if (sqlite3_changes(c->db) == 0)
                eai_sq_fail(s, err, EAI_E_NOT_FOUND, 0, "unknown key %s", key_id ? key_id : "");
            else
                ret = 0;
        }
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ manifests */

int eai_sq_manifest_put(void *self, const char *tenant, const char *kind, const char *name,
                        const json_t *doc, const json_t *audit, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !kind || !name || !doc)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "manifest_put: missing argument");
    char now_s[32], id[37];
    eai_time_rfc3339(eai_now_ms(), now_s);
    eai_uuid_v4(id);
    char *text = eai_sq_dump(doc);
    if (!text)
        return eai_sq_oom(s, err);
    int ret = -1, existed = 0;
    sqlite3_stmt *st = NULL;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c) {
        free(text);
        return -1;
    }
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    st = eai_sq_prep(s, c->db,
        "SELECT 1 FROM manifests WHERE tenant_id = ?1 AND kind = ?2 AND name = ?3", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        eai_sq_db_fail(s, err, c->db, "manifest lookup");
        goto out;
    }
    existed = (rc == SQLITE_ROW);
    sqlite3_finalize(st);
    st = eai_sq_prep(s, c->db,
        "INSERT INTO manifests (id, tenant_id, kind, name, doc, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6) ON CONFLICT (tenant_id, kind, name)"
        " DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, text, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, now_s, -1, SQLITE_STATIC);
    if (eai_sq_step_done(s, c->db, st, "manifest upsert", err) < 0)
        goto out;
    if (audit && eai_sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (eai_sq_commit(s, c->db, err) < 0)
        goto out;
    ret = existed ? EAI_STORE_UPDATED : EAI_STORE_CREATED;
out:
    sqlite3_finalize(st);
    eai_sq_rollback(c->db);
    eai_sq_release(s, c);
    free(text);
    return ret;
}

int eai_sq_manifest_get(void *self, const char *tenant, const char *kind, const char *name,
                        json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "manifest_get without tenant");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT doc FROM manifests WHERE tenant_id = ?1 AND kind = ?2 AND name = ?3", err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 2, kind);
        eai_sq_bind_str(st, 3, name);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            json_t *d = eai_sq_col_json(st, 0);
            if (d) {
                *out = d;
                ret = 0;
            } else {
                eai_sq_fail(s, err, EAI_E_INTERNAL, 0, "manifest with a bad document");
            }
        } else if (rc == SQLITE_DONE) {
            *out = NULL;
            ret = 0;
        } else {
            eai_sq_db_fail(s, err, c->db, "manifest get");
        }
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_manifest_list(void *self, const char *tenant, const char *kind, const char *after, int limit,
                         json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    *out = NULL;
    if (!tenant || !kind)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "manifest_list without tenant or kind");
    if (limit < 1 || limit > 1000)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "manifest_list: limit %d outside 1..1000", limit);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    json_t *arr = json_array();
    sqlite3_stmt *st = arr ? eai_sq_prep(s, c->db,
        "SELECT doc FROM manifests WHERE tenant_id = ?1 AND kind = ?2 AND name > ?3 ORDER BY name LIMIT ?4", err)
                           : NULL;
    if (!arr)
        eai_sq_oom(s, err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 2, kind);
        sqlite3_bind_text(st, 3, after ? after : "", -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 4, limit);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            json_t *d = eai_sq_col_json(st, 0);
            if (d)
                json_array_append_new(arr, d);
        }
        if (rc == SQLITE_DONE) {
            *out = arr;
            arr = NULL;
            ret = 0;
        } else {
            eai_sq_db_fail(s, err, c->db, "manifest list");
        }
        sqlite3_finalize(st);
    }
    json_decref(arr);
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_manifest_delete(void *self, const char *tenant, const char *kind, const char *name,
                           const json_t *audit, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "manifest_delete without tenant");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = NULL;
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    st = eai_sq_prep(s, c->db,
        "DELETE FROM manifests WHERE tenant_id = ?1 AND kind = ?2 AND name = ?3", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    eai_sq_bind_str(st, 2, kind);
    eai_sq_bind_str(st, 3, name);
    if (eai_sq_step_done(s, c->db, st, "manifest delete", err) < 0)
        goto out;
    if (sqlite3_changes(c->db) == 0) {
        eai_sq_fail(s, err, EAI_E_NOT_FOUND, 0, "manifest %s/%s not found", kind ? kind : "",
                    name ? name : "");
        goto out;
    }
    if (audit && eai_sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (eai_sq_commit(s, c->db, err) < 0)
        goto out;
    ret = 0;
out:
    sqlite3_finalize(st);
    eai_sq_rollback(c->db);
    eai_sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ audit ops */

int eai_sq_audit_append(void *self, const char *tenant, const json_t *event,
                        struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    if (eai_sq_begin(s, c->db, err) == 0 && eai_sq_audit_insert(s, c->db, tenant, event, err) == 0 &&
        eai_sq_commit(s, c->db, err) == 0)
        ret = 0;
    eai_sq_rollback(c->db);
    eai_sq_release(s, c);
    return ret;
}

/* The indexed columns kept beside the JSON document of an audit event. */
#define SQ_AUDIT_COLS "id, tenant_id, seq, time, actor, action, target, decision, prev_hash, hash"

/* A column edited without its document (or the reverse) must not pass
 * `eaid audit verify`: list the members whose column disagrees with the
 * document as "storage_mismatch" (columns 1.. of st follow SQ_AUDIT_COLS). */
static void sq_audit_mark_mismatch(sqlite3_stmt *st, json_t *ev)
{
    static const char *const cols[] = {"id", "tenant_id", "seq", "time", "actor", "action",
                                       "target", "decision", "prev_hash", "hash"};
    json_t *bad = NULL;
    for (int i = 0; i < (int)(sizeof cols / sizeof cols[0]); i++) {
        json_t *m = json_object_get(ev, cols[i]);
        int same;
        if (sqlite3_column_type(st, i + 1) == SQLITE_NULL)
            same = !m || json_is_null(m);
        else if (strcmp(cols[i], "seq") == 0)
            same = json_is_integer(m) && sqlite3_column_type(st, i + 1) == SQLITE_INTEGER &&
                   json_integer_value(m) == sqlite3_column_int64(st, i + 1);
        else
            same = json_is_string(m) && eai_sq_col_text(st, i + 1) &&
                   strcmp(json_string_value(m), eai_sq_col_text(st, i + 1)) == 0;
        if (!same) {
            if (!bad)
                bad = json_array();
            json_array_append_new(bad, json_string(cols[i]));
        }
    }
    if (bad)
        json_object_set_new(ev, "storage_mismatch", bad);
}

/* SYSTEM: the newest event of every tenant (SQLite takes the bare columns
 * from the row holding MAX(seq)). */
static json_t *sq_row_audit_head(sqlite3_stmt *st)
{
    return json_pack("{s:s, s:I, s:s}", "tenant_id", eai_sq_col_text(st, 0) ? eai_sq_col_text(st, 0) : "",
                     "seq", (json_int_t)sqlite3_column_int64(st, 1),
                     "hash", eai_sq_col_text(st, 2) ? eai_sq_col_text(st, 2) : "");
}

int eai_sq_audit_heads(void *self, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT tenant_id, MAX(seq), hash FROM audit_events GROUP BY tenant_id ORDER BY tenant_id", err);
    if (st) {
        ret = eai_sq_collect(s, c->db, st, sq_row_audit_head, "audit heads", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

static json_t *sq_row_audit_event(sqlite3_stmt *st)
{
    json_t *ev = eai_sq_col_json(st, 0);
    if (ev)
        sq_audit_mark_mismatch(st, ev);
    return ev;
}

int eai_sq_audit_list(void *self, const char *tenant, int64_t after_seq, int limit,
                      json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, tenant
        ? "SELECT doc, " SQ_AUDIT_COLS " FROM audit_events WHERE tenant_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
        : "SELECT doc, " SQ_AUDIT_COLS " FROM audit_events WHERE seq > ?2 ORDER BY tenant_id, seq LIMIT ?3", err);
    if (st) {
        if (tenant)
            sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, after_seq);
        sqlite3_bind_int(st, 3, limit > 0 ? limit : -1);
        ret = eai_sq_collect(s, c->db, st, sq_row_audit_event, "audit list", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ outbox and ledger */

static json_t *sq_row_outbox(sqlite3_stmt *st)
{
    json_t *ev = eai_sq_col_json(st, 2);
    if (!ev || !eai_sq_col_text(st, 0) || !eai_sq_col_text(st, 1)) {
        json_decref(ev);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:o, s:I}", "id", eai_sq_col_text(st, 0), "tenant_id", eai_sq_col_text(st, 1),
                     "event", ev, "attempts", (json_int_t)sqlite3_column_int64(st, 3));
}

int eai_sq_outbox_fetch(void *self, int limit, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    /* oldest first, but at most EAI_OUTBOX_FAIR_SHARE(limit) rows of one
     * tenant's usage events and as many of its callbacks: one tenant's
     * backlog (callbacks retrying for hours) never holds back another's
     * deliveries (storage.h, outbox_fetch) */
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT id, tenant_id, event, attempts FROM ("
        " SELECT id, tenant_id, event, attempts, ord, row_number() OVER ("
        "  PARTITION BY tenant_id, coalesce(json_extract(event, '$.target') = 'callback', 0) ORDER BY ord) AS rn"
        " FROM usage_outbox) WHERE rn <= ?2 ORDER BY ord LIMIT ?1", err);
    if (st) {
        int lim = limit > 0 ? limit : 100;
        sqlite3_bind_int(st, 1, lim);
        sqlite3_bind_int(st, 2, EAI_OUTBOX_FAIR_SHARE(lim));
        ret = eai_sq_collect(s, c->db, st, sq_row_outbox, "outbox fetch", out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

/* Idempotent: acking an id that is gone (another replica delivered it) is 0. */
int eai_sq_outbox_ack(void *self, const char *id, int delivered, struct eai_error **err)
{
    struct eai_sq *s = self;
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, delivered
        ? "DELETE FROM usage_outbox WHERE id = ?1"
        : "UPDATE usage_outbox SET attempts = attempts + 1, last_attempt_at = ?2,"
          " updated_at = ?2 WHERE id = ?1", err);
    if (st) {
        eai_sq_bind_str(st, 1, id);
        if (!delivered)
            sqlite3_bind_text(st, 2, now_s, -1, SQLITE_STATIC);
        ret = eai_sq_step_done(s, c->db, st, "outbox ack", err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

/* The time a usage event is filed under: finished, else time, else created. */
static int64_t eai_sq_event_time(const json_t *ev, int64_t def)
{
    static const char *const keys[] = {"finished_at", "time", "timestamp", "created_at"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int64_t t;
        if (eai_sq_parse_time(eai_jstr(ev, keys[i]), &t) == 0)
            return t;
    }
    return def;
}

int eai_sq_ledger_insert(void *self, const char *tenant, const json_t *event,
                         struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !json_is_object(event))
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "ledger_insert: bad event");
    int64_t now = eai_now_ms();
    char now_s[32], id[37];
    eai_time_rfc3339(now, now_s);
    json_t *ev = json_deep_copy(event);
    if (!ev)
        return eai_sq_oom(s, err);
    if (!eai_jstr(ev, "id")) {
        eai_uuid_v4(id);
        json_object_set_new(ev, "id", json_string(id));
    }
    json_object_set_new(ev, "tenant_id", json_string(tenant));
    char *doc = eai_sq_dump(ev);
    if (!doc) {
        json_decref(ev);
        return eai_sq_oom(s, err);
    }
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    int ret = -1;
    if (c) {
        sqlite3_stmt *st = eai_sq_prep(s, c->db,
            "INSERT INTO usage_ledger (id, tenant_id, project_id, run_id, agent_id, execution_id,"
            " occurred_ms, event, created_at, updated_at)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) ON CONFLICT (tenant_id, id) DO NOTHING",
            err);
        if (st) {
            eai_sq_bind_str(st, 1, eai_jstr(ev, "id"));
            sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
            eai_sq_bind_str(st, 3, eai_jstr(ev, "project_id"));
            eai_sq_bind_str(st, 4, eai_jstr(ev, "run_id"));
            eai_sq_bind_str(st, 5, eai_jstr(ev, "agent_id"));
            eai_sq_bind_str(st, 6, eai_jstr(ev, "execution_id"));
            sqlite3_bind_int64(st, 7, eai_sq_event_time(ev, now));
            sqlite3_bind_text(st, 8, doc, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 9, now_s, -1, SQLITE_STATIC);
            if (eai_sq_step_done(s, c->db, st, "ledger insert", err) == 0)
                ret = sqlite3_changes(c->db) > 0 ? EAI_STORE_CREATED : EAI_STORE_EXISTS;
            sqlite3_finalize(st);
        }
        eai_sq_release(s, c);
    }
    free(doc);
    json_decref(ev);
    return ret;
}

static int eai_sq_filter_time(struct eai_sq *s, const json_t *filter, const char *key,
                              sqlite3_stmt *st, int idx, struct eai_error **err)
{
    const char *v = eai_jstr(filter, key);
    int64_t t;
    if (!v || !*v) {
        sqlite3_bind_null(st, idx);
        return 0;
    }
    if (eai_sq_parse_time(v, &t) < 0)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "%s: not an RFC 3339 time", key);
    sqlite3_bind_int64(st, idx, t);
    return 0;
}

static json_t *sq_row_json0(sqlite3_stmt *st)
{
    return eai_sq_col_json(st, 0);
}

int eai_sq_ledger_query(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "ledger_query without tenant");
    json_int_t limit = json_integer_value(json_object_get(filter, "limit"));
    if (limit < 1)
        limit = 100;
    if (limit > 1000)
        limit = 1000;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT event FROM usage_ledger WHERE tenant_id = ?1"
        " AND (?2 IS NULL OR project_id = ?2) AND (?3 IS NULL OR run_id = ?3)"
        " AND (?4 IS NULL OR occurred_ms >= ?4) AND (?5 IS NULL OR occurred_ms < ?5)"
        " AND (?7 IS NULL OR agent_id = ?7)"
        " AND (?8 IS NULL OR occurred_ms > ?8 OR (occurred_ms = ?8 AND id > ?9))"
        " ORDER BY occurred_ms, id LIMIT ?6", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    eai_sq_bind_str(st, 2, eai_jstr(filter, "project_id"));
    eai_sq_bind_str(st, 3, eai_jstr(filter, "run_id"));
    if (eai_sq_filter_time(s, filter, "from", st, 4, err) < 0 ||
        eai_sq_filter_time(s, filter, "to", st, 5, err) < 0)
        goto out;
    sqlite3_bind_int64(st, 6, limit);
    eai_sq_bind_str(st, 7, eai_jstr(filter, "agent_id"));
    const json_t *after_ms = json_object_get(filter, "after_ms");
    if (json_is_integer(after_ms)) {
        sqlite3_bind_int64(st, 8, (sqlite3_int64)json_integer_value(after_ms));
        sqlite3_bind_text(st, 9, eai_jstr(filter, "after_id") ? eai_jstr(filter, "after_id") : "", -1,
                          SQLITE_STATIC);
    }
    ret = eai_sq_collect(s, c->db, st, sq_row_json0, "ledger query", out, err);
out:
    sqlite3_finalize(st);
    eai_sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ kv */

int eai_sq_kv_get(void *self, const char *key, char **value, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db, "SELECT value FROM kv WHERE id = ?1", err);
    if (st) {
        eai_sq_bind_str(st, 1, key);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            char *v = strdup(eai_sq_col_text(st, 0) ? eai_sq_col_text(st, 0) : "");
            if (v) {
                *value = v;
                ret = 0;
            } else {
                eai_sq_oom(s, err);
            }
        } else if (rc == SQLITE_DONE) {
            *value = NULL;
            ret = 0;
        } else {
            eai_sq_db_fail(s, err, c->db, "kv get");
        }
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_kv_set(void *self, const char *key, const char *value, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!key || !value)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "kv_set: missing key or value");
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "INSERT INTO kv (id, tenant_id, value, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)"
        " ON CONFLICT (id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        err);
    if (st) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, EAI_SYSTEM_TENANT, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, value, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, now_s, -1, SQLITE_STATIC);
        ret = eai_sq_step_done(s, c->db, st, "kv set", err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}
