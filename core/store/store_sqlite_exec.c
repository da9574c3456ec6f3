/* Built-in SQLite backend: executions and their collected files. */
#include "store/store_sqlite_int.h"
#include "base/util.h"
#include "record/exec_record.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ executions */

/* a key an exec_list item leaves out, as a json_remove() path */
#define SQ_LIST_OMIT(k) ", '$." #k "'"

#define SQ_EXEC_COLS \
    "seq, status, lease_owner, lease_until, cancel_requested, updated_at, doc"

/* Build the record of one row selected with SQ_EXEC_COLS at column 0. */
static json_t *eai_sq_row_exec(sqlite3_stmt *st)
{
    json_t *doc = eai_sq_col_json(st, 6);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return NULL;
    }
    json_object_set_new(doc, "seq", json_integer(sqlite3_column_int64(st, 0)));
    json_object_set_new(doc, "status", eai_sq_col_str_or_null(st, 1));
    json_object_set_new(doc, "lease_owner", eai_sq_col_str_or_null(st, 2));
    json_object_set_new(doc, "lease_until", sqlite3_column_type(st, 3) == SQLITE_NULL
                                                ? json_null()
                                                : json_integer(sqlite3_column_int64(st, 3)));
    json_object_set_new(doc, "cancel_requested", json_boolean(sqlite3_column_int(st, 4)));
    json_object_set_new(doc, "updated_at", eai_sq_col_str_or_null(st, 5));
    return doc;
}

/* Load one execution of `tenant` (NULL tenant: by seq, SYSTEM) into *out;
 * *out NULL when absent. */
static int eai_sq_load_exec(struct eai_sq *s, sqlite3 *db, const char *tenant, const char *id,
                            int64_t seq, json_t **out, struct eai_error **err)
{
    sqlite3_stmt *st = eai_sq_prep(s, db, tenant
        ? "SELECT " SQ_EXEC_COLS " FROM sandbox_executions WHERE tenant_id = ?1 AND id = ?2"
        : "SELECT " SQ_EXEC_COLS " FROM sandbox_executions WHERE seq = ?3", err);
    if (!st)
        return -1;
    if (tenant) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 2, id);
    } else {
        sqlite3_bind_int64(st, 3, seq);
    }
    int ret = 0;
    json_t *e = NULL;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        e = eai_sq_row_exec(st);
        if (!e)
            ret = eai_sq_fail(s, err, EAI_E_INTERNAL, 0, "execution row with a bad document");
    } else if (rc != SQLITE_DONE) {
        ret = eai_sq_db_fail(s, err, db, "execution select");
    }
    sqlite3_finalize(st);
    if (ret == 0)
        *out = e;
    return ret;
}

/* Write back every mutable column of an execution from its document. */
static int eai_sq_store_exec(struct eai_sq *s, sqlite3 *db, const json_t *e, struct eai_error **err)
{
    char *doc = eai_sq_dump(e);
    if (!doc)
        return eai_sq_oom(s, err);
    sqlite3_stmt *st = eai_sq_prep(s, db,
        "UPDATE sandbox_executions SET status = ?2, lease_owner = ?3, lease_until = ?4,"
        " cancel_requested = ?5, updated_at = ?6, doc = ?7 WHERE seq = ?1", err);
    if (!st) {
        free(doc);
        return -1;
    }
    const json_t *lu = json_object_get(e, "lease_until");
    sqlite3_bind_int64(st, 1, json_integer_value(json_object_get(e, "seq")));
    eai_sq_bind_str(st, 2, eai_jstr(e, "status"));
    eai_sq_bind_str(st, 3, eai_jstr(e, "lease_owner"));
    if (json_is_integer(lu))
        sqlite3_bind_int64(st, 4, json_integer_value(lu));
    else
        sqlite3_bind_null(st, 4);
    sqlite3_bind_int(st, 5, json_is_true(json_object_get(e, "cancel_requested")));
    eai_sq_bind_str(st, 6, eai_jstr(e, "updated_at"));
    sqlite3_bind_text(st, 7, doc, -1, SQLITE_STATIC);
    int rc = eai_sq_step_done(s, db, st, "execution update", err);
    sqlite3_finalize(st);
    free(doc);
    return rc;
}

/* Make a loaded row terminal: the record module merges and scrubs. */
static int eai_sq_apply_terminal(struct eai_sq *s, json_t *e, const json_t *patch, const json_t *files,
                                 const char *default_status, const char *now_s, struct eai_error **err)
{
    const char *why = NULL;
    int rc = eai_exec_record_terminal(e, patch, files, default_status, now_s, &why);
    if (rc == -2)
        return eai_sq_oom(s, err);
    if (rc < 0)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "%s", why);
    return 0;
}

int eai_sq_exec_create(void *self, const char *tenant, const json_t *exec,
                       const json_t *audit, json_t **existing, struct eai_error **err)
{
    struct eai_sq *s = self;
    const char *id = eai_jstr(exec, "id");
    if (!tenant || !json_is_object(exec) || !id)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_create: record without id");
    int64_t now = eai_now_ms();
    char now_s[32];
    eai_time_rfc3339(now, now_s);
    json_t *e = eai_exec_record_stored(exec, tenant, now_s);
    if (!e)
        return eai_sq_oom(s, err);
    int64_t created_ms;
    if (eai_sq_parse_time(eai_jstr(e, "created_at"), &created_ms) < 0)
        created_ms = now;
    const char *key = eai_jstr(e, "idempotency_key");
    const char *hash = eai_jstr(e, "request_hash");
    char *doc = eai_sq_dump(e);
    if (!doc) {
        json_decref(e);
        return eai_sq_oom(s, err);
    }

    int ret = -1;
    sqlite3_stmt *st = NULL;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c)
        goto out;
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    if (key) {
        st = eai_sq_prep(s, c->db,
            "SELECT " SQ_EXEC_COLS ", request_hash FROM sandbox_executions"
            " WHERE tenant_id = ?1 AND idempotency_key = ?2 AND created_ms > ?3"
            " ORDER BY seq DESC LIMIT 1", err);
        if (!st)
            goto out;
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, now - EAI_SQ_IDEMPOTENCY_MS);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *old = eai_sq_col_text(st, 7);
            int same = (!old && !hash) || (old && hash && strcmp(old, hash) == 0);
            if (same) {
                json_t *row = eai_sq_row_exec(st);
                if (!row) {
                    eai_sq_fail(s, err, EAI_E_INTERNAL, 0, "execution row with a bad document");
                    goto out;
                }
                if (existing)
                    *existing = row;
                else
                    json_decref(row);
                ret = EAI_STORE_EXISTS;
            } else {
                ret = EAI_STORE_CONFLICT;
            }
            goto out;
        } else if (rc != SQLITE_DONE) {
            eai_sq_db_fail(s, err, c->db, "idempotency lookup");
            goto out;
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    st = eai_sq_prep(s, c->db,
        "INSERT INTO sandbox_executions (id, tenant_id, status, run_id, project_id,"
        " idempotency_key, request_hash, lease_owner, lease_until, cancel_requested,"
        " created_at, created_ms, updated_at, doc)"
        " VALUES (?1, ?2, 'queued', ?3, ?4, ?5, ?6, NULL, NULL, 0, ?7, ?8, ?9, ?10)", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
    eai_sq_bind_str(st, 3, eai_jstr(e, "run_id"));
    eai_sq_bind_str(st, 4, eai_jstr(e, "project_id"));
    eai_sq_bind_str(st, 5, key);
    eai_sq_bind_str(st, 6, hash);
    eai_sq_bind_str(st, 7, eai_jstr(e, "created_at"));
    sqlite3_bind_int64(st, 8, created_ms);
    sqlite3_bind_text(st, 9, now_s, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 10, doc, -1, SQLITE_STATIC);
    if (eai_sq_step_done(s, c->db, st, "execution insert", err) < 0)
        goto out;
    if (audit && eai_sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (eai_sq_commit(s, c->db, err) < 0)
        goto out;
    ret = EAI_STORE_CREATED;
out:
    sqlite3_finalize(st);
    if (c) {
        eai_sq_rollback(c->db);
        eai_sq_release(s, c);
    }
    free(doc);
    json_decref(e);
    return ret;
}

int eai_sq_exec_get(void *self, const char *tenant, const char *id, json_t **out,
                    struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_get without tenant");
    SQ_WITH_CONN(s, err, c);
    int rc = eai_sq_load_exec(s, c->db, tenant, id, 0, out, err);
    eai_sq_release(s, c);
    return rc;
}

/* Collect every row of a SQ_EXEC_COLS statement into an array. */
static int eai_sq_collect_execs(struct eai_sq *s, sqlite3 *db, sqlite3_stmt *st, json_t **out,
                                struct eai_error **err)
{
    return eai_sq_collect(s, db, st, eai_sq_row_exec, "execution list", out, err);
}

int eai_sq_exec_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                     struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_list without tenant");
    json_int_t limit = json_integer_value(json_object_get(filter, "limit"));
    if (limit < 1)
        limit = 20;
    if (limit > 100)
        limit = 100;
    const json_t *after = json_object_get(filter, "after");
    int has_after = 0;
    int64_t after_seq = 0;
    if (json_is_integer(after)) {
        has_after = 1;
        after_seq = json_integer_value(after);
    } else if (json_is_string(after) && *json_string_value(after)) {
        char *end = NULL;
        after_seq = strtoll(json_string_value(after), &end, 10);
        if (!end || *end)
            return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "bad cursor");
        has_after = 1;
    }
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        /* list items carry no output and no inputs (storage.h): the same
         * columns as SQ_EXEC_COLS with the keys the record module names
         * (EAI_EXEC_RECORD_LIST_OMITS) taken out of the document */
        "SELECT seq, status, lease_owner, lease_until, cancel_requested, updated_at,"
        " json_remove(doc" EAI_EXEC_RECORD_LIST_OMITS(SQ_LIST_OMIT) ")"
        " FROM sandbox_executions WHERE tenant_id = ?1"
        " AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR run_id = ?3)"
        " AND (?4 IS NULL OR seq < ?4) AND (?6 IS NULL OR id = ?6) ORDER BY seq DESC LIMIT ?5", err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 2, eai_jstr(filter, "status"));
        eai_sq_bind_str(st, 3, eai_jstr(filter, "run_id"));
        if (has_after)
            sqlite3_bind_int64(st, 4, after_seq);
        sqlite3_bind_int64(st, 5, limit);
        eai_sq_bind_str(st, 6, eai_jstr(filter, "id"));
        ret = eai_sq_collect_execs(s, c->db, st, out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

/* exclude: NULL, or a JSON array of tenant ids whose rows are not taken
 * (exec_claim_excluding: tenants at their per-tenant bound on this node). */
static int sq_exec_claim(void *self, const char *owner, int64_t lease_ms, int max,
                         int per_tenant_max, const json_t *exclude, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!owner)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_claim without owner");
    json_t *arr = json_array();
    if (!arr)
        return eai_sq_oom(s, err);
    if (max <= 0) {
        *out = arr;
        return 0;
    }
    if (per_tenant_max <= 0)
        per_tenant_max = max;
    int64_t now = eai_now_ms();
    char now_s[32];
    eai_time_rfc3339(now, now_s);

    int ret = -1;
    int64_t *seqs = NULL;
    size_t nseq = 0;
    sqlite3_stmt *st = NULL;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c)
        goto out;
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    /* Round-robin: rank each tenant's queued rows by age; take rank 1 of
     * every tenant (oldest tenant first), then rank 2, ... */
    st = eai_sq_prep(s, c->db,
        "SELECT seq FROM (SELECT seq, ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY seq) AS rn"
        " FROM sandbox_executions WHERE status = 'queued'"
        " AND (?3 IS NULL OR tenant_id NOT IN (SELECT value FROM json_each(?3))))"
        " WHERE rn <= ?1 ORDER BY rn, seq LIMIT ?2", err);
    if (!st)
        goto out;
    sqlite3_bind_int(st, 1, per_tenant_max);
    sqlite3_bind_int(st, 2, max);
    if (exclude && json_array_size(exclude) > 0) {
        char *ex = json_dumps(exclude, JSON_COMPACT);
        if (!ex) {
            eai_sq_oom(s, err);
            goto out;
        }
        sqlite3_bind_text(st, 3, ex, -1, free);
    }
    seqs = calloc((size_t)max, sizeof *seqs);
    if (!seqs) {
        eai_sq_oom(s, err);
        goto out;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && nseq < (size_t)max)
        seqs[nseq++] = sqlite3_column_int64(st, 0);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        eai_sq_db_fail(s, err, c->db, "claim select");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;
    for (size_t i = 0; i < nseq; i++) {
        json_t *e = NULL;
        if (eai_sq_load_exec(s, c->db, NULL, NULL, seqs[i], &e, err) < 0)
            goto out;
        if (!e)
            continue;
        json_object_set_new(e, "status", json_string("running"));
        json_object_set_new(e, "lease_owner", json_string(owner));
        json_object_set_new(e, "lease_until", json_integer(now + lease_ms));
        json_object_set_new(e, "started_at", json_string(now_s));
        json_object_set_new(e, "updated_at", json_string(now_s));
        if (eai_sq_store_exec(s, c->db, e, err) < 0 || json_array_append_new(arr, e) < 0)
            goto out;
    }
    if (eai_sq_commit(s, c->db, err) < 0)
        goto out;
    *out = arr;
    arr = NULL;
    ret = 0;
out:
    sqlite3_finalize(st);
    free(seqs);
    if (c) {
        eai_sq_rollback(c->db);
        eai_sq_release(s, c);
    }
    json_decref(arr);
    return ret;
}

int eai_sq_exec_claim(void *self, const char *owner, int64_t lease_ms, int max,
                      int per_tenant_max, json_t **out, struct eai_error **err)
{
    return sq_exec_claim(self, owner, lease_ms, max, per_tenant_max, NULL, out, err);
}

int eai_sq_exec_claim_excluding(void *self, const char *owner, int64_t lease_ms, int max,
                                int per_tenant_max, const json_t *exclude, json_t **out,
                                struct eai_error **err)
{
    return sq_exec_claim(self, owner, lease_ms, max, per_tenant_max, exclude, out, err);
}

int eai_sq_exec_renew(void *self, const char *owner, int64_t lease_ms, json_t **cancel_ids,
                      struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!owner)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_renew without owner");
    json_t *ids = json_array();
    if (!ids)
        return eai_sq_oom(s, err);
    int ret = -1;
    sqlite3_stmt *st = NULL;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c)
        goto out;
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    st = eai_sq_prep(s, c->db,
        "UPDATE sandbox_executions SET lease_until = ?2"
        " WHERE lease_owner = ?1 AND status = 'running'", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, eai_now_ms() + lease_ms);
    if (eai_sq_step_done(s, c->db, st, "renew", err) < 0)
        goto out;
    sqlite3_finalize(st);
    st = eai_sq_prep(s, c->db,
        "SELECT id, tenant_id FROM sandbox_executions"
        " WHERE lease_owner = ?1 AND status = 'running' AND cancel_requested = 1 ORDER BY seq", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *o = json_pack("{s:s, s:s}", "id", eai_sq_col_text(st, 0),
                              "tenant_id", eai_sq_col_text(st, 1));
        if (!o || json_array_append_new(ids, o) < 0) {
            eai_sq_oom(s, err);
            goto out;
        }
    }
    if (rc != SQLITE_DONE) {
        eai_sq_db_fail(s, err, c->db, "renew select");
        goto out;
    }
    if (eai_sq_commit(s, c->db, err) < 0)
        goto out;
    if (cancel_ids) {
        *cancel_ids = ids;
        ids = NULL;
    }
    ret = 0;
out:
    sqlite3_finalize(st);
    if (c) {
        eai_sq_rollback(c->db);
        eai_sq_release(s, c);
    }
    json_decref(ids);
    return ret;
}

int eai_sq_exec_cancel(void *self, const char *tenant, const char *id,
                       const json_t *cancelled_patch, const json_t *audit, json_t **out,
                          struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_cancel without tenant");
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    int ret = -1;
    json_t *e = NULL;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c)
        return -1;
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    if (eai_sq_load_exec(s, c->db, tenant, id, 0, &e, err) < 0)
        goto out;
    if (!e) {
        eai_sq_rollback(c->db);
        *out = NULL;
        ret = 0;
        goto out;
    }
    const char *status = eai_jstr(e, "status");
    if (status && strcmp(status, "queued") == 0) {
        if (eai_sq_apply_terminal(s, e, cancelled_patch, NULL, "cancelled", now_s, err) < 0)
            goto out;
    } else if (status && strcmp(status, "running") == 0 &&
               !json_is_true(json_object_get(e, "cancel_requested"))) {
        json_object_set_new(e, "cancel_requested", json_true());
        json_object_set_new(e, "updated_at", json_string(now_s));
    } else {
        /* Terminal, or cancel already requested: unchanged, nothing
         * written; this call changed nothing (core answers 409 to a
         * terminal one). */
        eai_sq_rollback(c->db);
        *out = e;
        e = NULL;
        ret = EAI_STORE_NOOP;
        goto out;
    }
    if (eai_sq_store_exec(s, c->db, e, err) < 0)
        goto out;
    if (audit && eai_sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (eai_sq_commit(s, c->db, err) < 0)
        goto out;
    *out = e;
    e = NULL;
    ret = EAI_STORE_UPDATED;
out:
    eai_sq_rollback(c->db);
    eai_sq_release(s, c);
    json_decref(e);
    return ret;
}

static int eai_sq_outbox_insert(struct eai_sq *s, sqlite3 *db, const char *tenant,
                                const json_t *event, const char *now_s, struct eai_error **err)
{
    if (json_is_array(event)) {  /* several rows (usage event, completion callback) */
        size_t i;
        const json_t *one;
        json_array_foreach(event, i, one)
            if (eai_sq_outbox_insert(s, db, tenant, one, now_s, err) < 0)
                return -1;
        return 0;
    }
    if (!json_is_object(event))
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "usage event is not an object");
    json_t *ev = json_deep_copy(event);
    if (!ev)
        return eai_sq_oom(s, err);
    if (!eai_jstr(ev, "id")) {
        char id[37];
        eai_uuid_v4(id);
        json_object_set_new(ev, "id", json_string(id));
    }
    char *doc = eai_sq_dump(ev);
    if (!doc) {
        json_decref(ev);
        return eai_sq_oom(s, err);
    }
    int rc = -1;
    sqlite3_stmt *st = eai_sq_prep(s, db,
        "INSERT INTO usage_outbox (id, tenant_id, event, attempts, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, 0, ?4, ?4)", err);
    if (st) {
        eai_sq_bind_str(st, 1, eai_jstr(ev, "id"));
        sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, doc, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, now_s, -1, SQLITE_STATIC);
        rc = eai_sq_step_done(s, db, st, "outbox insert", err);
        sqlite3_finalize(st);
    }
    free(doc);
    json_decref(ev);
    return rc;
}

/* Insert the rows of the collected files (content, size, sha256); the
 * record's public list is the record module's. */
static int eai_sq_files_insert(struct eai_sq *s, sqlite3 *db, const char *tenant,
                               const char *exec_id, const json_t *files, const char *now_s,
                               struct eai_error **err)
{
    sqlite3_stmt *st = eai_sq_prep(s, db,
        "INSERT INTO execution_files (id, tenant_id, execution_id, path, size, sha256, content,"
        " created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)"
        " ON CONFLICT (tenant_id, execution_id, path) DO UPDATE SET size = excluded.size,"
        " sha256 = excluded.sha256, content = excluded.content, updated_at = excluded.updated_at",
        err);
    if (!st)
        return -1;
    size_t i;
    const json_t *f;
    json_array_foreach(files, i, f) {
        const char *path = eai_jstr(f, "path");
        const char *b64 = eai_jstr(f, "content_b64");
        size_t len = 0;
        unsigned char *data = eai_b64_decode(b64 ? b64 : "", &len);
        char sha[65], id[37];
        if (!path || !data) {
            free(data);
            eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "file %zu: bad path or content_b64", i);
            goto fail;
        }
        const char *given = eai_jstr(f, "sha256");
        if (given && strlen(given) == 64)
            memcpy(sha, given, 65);
        else
            eai_sha256_hex(data, len, sha);
        eai_uuid_v4(id);
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, exec_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, path, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)len);
        sqlite3_bind_text(st, 6, sha, -1, SQLITE_TRANSIENT);
        sqlite3_bind_blob(st, 7, data, (int)len, free);
        sqlite3_bind_text(st, 8, now_s, -1, SQLITE_STATIC);
        if (eai_sq_step_done(s, db, st, "file insert", err) < 0)
            goto fail;
    }
    sqlite3_finalize(st);
    return 0;
fail:
    sqlite3_finalize(st);
    return -1;
}

int eai_sq_exec_finish(void *self, const char *tenant, const char *id, const json_t *patch,
                       const json_t *files, const json_t *usage_event, const json_t *audit,
                          struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !id)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_finish without tenant or id");
    if (files && !json_is_array(files))
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_finish: files is not an array");
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    int ret = -1;
    json_t *e = NULL;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c)
        return -1;
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    if (eai_sq_load_exec(s, c->db, tenant, id, 0, &e, err) < 0)
        goto out;
    if (!e) {
        eai_sq_fail(s, err, EAI_E_NOT_FOUND, 0, "execution %s not found", id);
        goto out;
    }
    const char *status = eai_jstr(e, "status");
    if (!status || (strcmp(status, "queued") != 0 && strcmp(status, "running") != 0)) {
        ret = EAI_STORE_NOOP;
        goto out;
    }
    if (eai_sq_apply_terminal(s, e, patch, files, NULL, now_s, err) < 0)
        goto out;
    if (json_array_size(files) > 0 && eai_sq_files_insert(s, c->db, tenant, id, files, now_s, err) < 0)
        goto out;
    if (eai_sq_store_exec(s, c->db, e, err) < 0)
        goto out;
    if (usage_event && eai_sq_outbox_insert(s, c->db, tenant, usage_event, now_s, err) < 0)
        goto out;
    if (audit && eai_sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (eai_sq_commit(s, c->db, err) < 0)
        goto out;
    ret = EAI_STORE_UPDATED;
out:
    eai_sq_rollback(c->db);
    eai_sq_release(s, c);
    json_decref(e);
    return ret;
}

int eai_sq_outbox_append(void *self, const char *tenant, const json_t *usage_event, const json_t *audit,
                         struct eai_error **err)
{
    struct eai_sq *s = self;
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    int ret = -1;
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c)
        return -1;
    if (eai_sq_begin(s, c->db, err) < 0)
        goto out;
    if (usage_event && eai_sq_outbox_insert(s, c->db, tenant, usage_event, now_s, err) < 0)
        goto out;
    if (audit && eai_sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (eai_sq_commit(s, c->db, err) < 0)
        goto out;
    ret = 0;
out:
    eai_sq_rollback(c->db);
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_exec_stale(void *self, int64_t now_ms, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT " SQ_EXEC_COLS " FROM sandbox_executions"
        " WHERE status = 'running' AND lease_until < ?1 ORDER BY seq", err);
    if (st) {
        sqlite3_bind_int64(st, 1, now_ms);
        ret = eai_sq_collect_execs(s, c->db, st, out, err);
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

int eai_sq_exec_counts(void *self, int64_t *queued, int64_t *running, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    int64_t q = 0, r = 0;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT status, count(*) FROM sandbox_executions"
        " WHERE status IN ('queued', 'running') GROUP BY status", err);
    if (st) {
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *k = eai_sq_col_text(st, 0);
            if (k && strcmp(k, "queued") == 0)
                q = sqlite3_column_int64(st, 1);
            else
                r = sqlite3_column_int64(st, 1);
        }
        if (rc == SQLITE_DONE) {
            if (queued)
                *queued = q;
            if (running)
                *running = r;
            ret = 0;
        } else {
            eai_sq_db_fail(s, err, c->db, "counts");
        }
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ files */

int eai_sq_file_get(void *self, const char *tenant, const char *exec_id, const char *path,
                    unsigned char **data, size_t *len, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "file_get without tenant");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = eai_sq_prep(s, c->db,
        "SELECT content FROM execution_files"
        " WHERE tenant_id = ?1 AND execution_id = ?2 AND path = ?3", err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        eai_sq_bind_str(st, 2, exec_id);
        eai_sq_bind_str(st, 3, path);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const void *b = sqlite3_column_blob(st, 0);
            size_t n = (size_t)sqlite3_column_bytes(st, 0);
            unsigned char *copy = malloc(n ? n : 1);
            if (!copy) {
                eai_sq_oom(s, err);
            } else {
                if (n)
                    memcpy(copy, b, n);
                *data = copy;
                *len = n;
                ret = 0;
            }
        } else if (rc == SQLITE_DONE) {
            *data = NULL;
            *len = 0;
            ret = 0;
        } else {
            eai_sq_db_fail(s, err, c->db, "file get");
        }
        sqlite3_finalize(st);
    }
    eai_sq_release(s, c);
    return ret;
}
