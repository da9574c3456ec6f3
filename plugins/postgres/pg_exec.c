/*
 * Executions and their collected files.
 *
 * Row layout (migrations/postgres/0001_init.sql): the queryable fields are columns;
 * everything else of the record lives in the `doc` json column.  Reading a
 * row overlays the columns on the document (id gets its "sbx_" prefix back).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"
#include "exec_record.h"

#define EAI_PG_EXEC_COLS_WITH(doc)                                                              \
    "e.id::text, e.tenant_id::text, e.seq, e.status, e.lease_owner, e.lease_until, "            \
    "e.cancel_requested, floor(extract(epoch FROM e.started_at) * 1000)::bigint, "              \
    "floor(extract(epoch FROM e.updated_at) * 1000)::bigint, " doc ", "                         \
    "floor(extract(epoch FROM e.finished_at) * 1000)::bigint, "                                 \
    "floor(extract(epoch FROM e.created_at) * 1000)::bigint, e.idempotency_key, e.request_hash"
#define EAI_PG_EXEC_COLS EAI_PG_EXEC_COLS_WITH("e.doc")
/* list items carry no output and no inputs (storage.h): the keys the
 * record module names (EAI_EXEC_RECORD_LIST_OMITS) taken out of doc */
#define EAI_PG_EXEC_LIST_COLS                                                                   \
    EAI_PG_EXEC_COLS_WITH("(e.doc::jsonb" EAI_EXEC_RECORD_LIST_OMITS(EAI_PG_LIST_OMIT) ")::json")
#define EAI_PG_LIST_OMIT(k) " - '" #k "'"

enum {
    COL_ID, COL_TENANT, COL_SEQ, COL_STATUS, COL_LEASE_OWNER, COL_LEASE_UNTIL, COL_CANCEL,
    COL_STARTED, COL_UPDATED, COL_DOC, COL_FINISHED, COL_CREATED, COL_IDEM, COL_HASH
};

/* Keys kept in columns, never in the document. */
static const char *const eai_pg_column_keys[] = {
    "id", "tenant_id", "seq", "status", "lease_owner", "lease_until", "cancel_requested",
    "started_at", "updated_at", "idempotency_key", "request_hash", NULL
};

static int eai_pg_set(json_t *o, const char *k, json_t *v)
{
    return v ? json_object_set_new(o, k, v) : -1;
}

/* Row i of a result selected with EAI_PG_EXEC_COLS -> new record. */
static json_t *eai_pg_exec_row(const PGresult *r, int i)
{
    json_t *doc = eai_pg_cell_json(r, i, COL_DOC);
    if (!json_is_object(doc)) {
        json_decref(doc);
        doc = json_object();
        if (!doc)
            return NULL;
    }
    char id[64];
    snprintf(id, sizeof(id), "sbx_%s", PQgetvalue(r, i, COL_ID));
    int bad = 0;
    bad |= eai_pg_set(doc, "id", json_string(id));
    bad |= eai_pg_set(doc, "tenant_id", eai_pg_cell_str(r, i, COL_TENANT));
    bad |= eai_pg_set(doc, "seq", eai_pg_cell_int(r, i, COL_SEQ));
    bad |= eai_pg_set(doc, "status", eai_pg_cell_str(r, i, COL_STATUS));
    bad |= eai_pg_set(doc, "lease_owner", eai_pg_cell_str(r, i, COL_LEASE_OWNER));
    bad |= eai_pg_set(doc, "lease_until", eai_pg_cell_int(r, i, COL_LEASE_UNTIL));
    bad |= eai_pg_set(doc, "cancel_requested", eai_pg_cell_bool(r, i, COL_CANCEL));
    bad |= eai_pg_set(doc, "idempotency_key", eai_pg_cell_str(r, i, COL_IDEM));
    bad |= eai_pg_set(doc, "request_hash", eai_pg_cell_str(r, i, COL_HASH));
    bad |= eai_pg_set(doc, "updated_at", eai_pg_cell_time(r, i, COL_UPDATED));
    if (!PQgetisnull(r, i, COL_STARTED))
        bad |= eai_pg_set(doc, "started_at", eai_pg_cell_time(r, i, COL_STARTED));
    else if (!json_object_get(doc, "started_at"))
        bad |= json_object_set_new(doc, "started_at", json_null());
    if (!json_is_string(json_object_get(doc, "created_at")))
        bad |= eai_pg_set(doc, "created_at", eai_pg_cell_time(r, i, COL_CREATED));
    if (!json_is_string(json_object_get(doc, "finished_at")))
        bad |= eai_pg_set(doc, "finished_at", eai_pg_cell_time(r, i, COL_FINISHED));
    if (bad) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

static json_t *eai_pg_exec_rows(struct eai_pg *pg, const PGresult *r, struct eai_error **err)
{
    json_t *arr = json_array();
    if (!arr)
        goto oom;
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *row = eai_pg_exec_row(r, i);
        if (!row || json_array_append_new(arr, row) < 0)
            goto oom;
    }
    return arr;
oom:
    json_decref(arr);
    eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory building rows");
    return NULL;
}

/* ---------------------------------------------------------------- create */

struct eai_pg_create_ctx {
    const char *tenant;
    const json_t *exec;
    const json_t *audit;
    char uuid[37];
    const char *doc_text;
    const char *created;
    char now[24], since[24];
    json_t *existing;
};

static int eai_pg_exec_create_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_create_ctx *c = arg;
    json_decref(c->existing);
    c->existing = NULL;
    const char *idem = eai_jstr(c->exec, "idempotency_key");
    const char *hash = eai_jstr(c->exec, "request_hash");
    if (idem) {
        const char *lp[2] = {c->tenant, idem};
        if (eai_pg_cmd(tx, "SELECT pg_advisory_xact_lock(hashtext('eai.idempotency'), "
                           "hashtext($1 || '/' || $2))", 2, lp, err) < 0)
            return -1;
        const char *p[3] = {c->tenant, idem, c->since};
        PGresult *r = eai_pg_q(tx, "SELECT " EAI_PG_EXEC_COLS " FROM eai.sandbox_executions e"
                                   " WHERE e.tenant_id = $1 AND e.idempotency_key = $2"
                                   " AND e.created_at > to_timestamp($3::bigint / 1000.0)"
                                   " ORDER BY e.seq DESC LIMIT 1", 3, p, err);
        if (!r)
            return -1;
        if (PQntuples(r) == 1) {
            const char *old = PQgetisnull(r, 0, COL_HASH) ? NULL : PQgetvalue(r, 0, COL_HASH);
            int same = (!old && !hash) || (old && hash && strcmp(old, hash) == 0);
            if (same) {
                c->existing = eai_pg_exec_row(r, 0);
                PQclear(r);
                if (!c->existing) {
                    return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
                }
                return EAI_STORE_EXISTS;
            }
            PQclear(r);
            return EAI_STORE_CONFLICT;
        }
        PQclear(r);
    }
    /* agent_id, trace_id, session_id: columns of the agent view too
     * (0006_agent_view.sql), so its queries never parse a document */
    const char *p[13] = {c->uuid, c->tenant, eai_jstr(c->exec, "profile"),
                         eai_jstr(c->exec, "run_id"), eai_jstr(c->exec, "project_id"),
                         idem, hash, c->doc_text, c->created, c->now, eai_jstr(c->exec, "agent_id"),
                         eai_jstr(c->exec, "trace_id"), eai_jstr(c->exec, "session_id")};
    if (eai_pg_cmd(tx, "INSERT INTO eai.sandbox_executions (id, tenant_id, status, profile, run_id,"
                       " project_id, idempotency_key, request_hash, doc, created_at, updated_at,"
                       " agent_id, trace_id, session_id)"
                       " VALUES ($1, $2, 'queued', $3, $4, $5, $6, $7, $8::json, $9::timestamptz,"
                       " to_timestamp($10::bigint / 1000.0), $11, $12, $13)", 13, p, err) < 0)
        return -1;
    if (c->audit && eai_pg_audit_append_tx(tx, c->tenant, c->audit, err) < 0)
        return -1;
    return EAI_STORE_CREATED;
}

int eai_pg_exec_create(void *self, const char *tenant, const json_t *exec, const json_t *audit,
                       json_t **existing, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant) || !json_is_object(exec)) {
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "exec_create: bad tenant or record");
    }
    struct eai_pg_create_ctx c = {.tenant = tenant, .exec = exec, .audit = audit};
    const char *id = eai_jstr(exec, "id");
    if (id) {
        if (eai_pg_exec_uuid(id, c.uuid) < 0) {
            return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "exec_create: malformed id");
        }
    } else {
        eai_pg_uuid_v4(c.uuid);
    }
    int64_t now = eai_now_ms();
    eai_pg_i64(now, c.now);
    eai_pg_i64(now - 24LL * 3600 * 1000, c.since);
    char now_s[32];
    eai_time_rfc3339(now, now_s);
    json_t *doc = eai_exec_record_stored(exec, tenant, now_s);
    if (!doc) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    for (int i = 0; eai_pg_column_keys[i]; i++)
        json_object_del(doc, eai_pg_column_keys[i]);
    char created[32];
    snprintf(created, sizeof created, "%s", eai_jstr(doc, "created_at"));
    c.created = created;
    char *text = eai_pg_dump(doc);
    json_decref(doc);
    if (!text) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    c.doc_text = text;
    int rc = eai_pg_run(pg, tenant, eai_pg_exec_create_body, &c, err);
    free(text);
    if (rc < 0) {
        json_decref(c.existing);
        return -1;
    }
    if (rc == EAI_STORE_EXISTS && existing)
        *existing = c.existing;
    else
        json_decref(c.existing);
    return rc;
}

/* ---------------------------------------------------------------- get / list */

struct eai_pg_read_ctx {
    const char *sql;
    int n;
    const char *params[6];
    int single;
    json_t *out;
};

static int eai_pg_read_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_read_ctx *c = arg;
    json_decref(c->out);
    c->out = NULL;
    PGresult *r = eai_pg_q(tx, c->sql, c->n, c->params, err);
    if (!r)
        return -1;
    if (c->single) {
        if (PQntuples(r) > 0) {
            c->out = eai_pg_exec_row(r, 0);
            if (!c->out) {
                PQclear(r);
                return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
            }
        }
    } else {
        c->out = eai_pg_exec_rows(tx->pg, r, err);
        if (!c->out) {
            PQclear(r);
            return -1;
        }
    }
    PQclear(r);
    return 0;
}

int eai_pg_exec_get(void *self, const char *tenant, const char *id, json_t **out,
                    struct eai_error **err)
{
    struct eai_pg *pg = self;
    char uuid[37];
    if (!eai_pg_uuid_valid(tenant) || eai_pg_exec_uuid(id, uuid) < 0) {
        *out = NULL;
        return 0;
    }
    struct eai_pg_read_ctx c = {
        .sql = "SELECT " EAI_PG_EXEC_COLS " FROM eai.sandbox_executions e"
               " WHERE e.id = $1 AND e.tenant_id = $2",
        .n = 2, .params = {uuid, tenant}, .single = 1};
    if (eai_pg_run(pg, tenant, eai_pg_read_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}

int eai_pg_exec_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                     struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant)) {
        *out = json_array();
        return *out ? 0 : -1;
    }
    json_int_t limit = json_integer_value(json_object_get(filter, "limit"));
    if (limit < 1)
        limit = 20;
    if (limit > 100)
        limit = 100;
    char lim[24], after[24], uuid[37];
    eai_pg_i64(limit, lim);
    const char *id_p = NULL;
    if (eai_jstr(filter, "id")) {
        /* one execution (the light read of a long-poll): unknown ids match nothing */
        if (eai_pg_exec_uuid(eai_jstr(filter, "id"), uuid) < 0) {
            *out = json_array();
            return *out ? 0 : -1;
        }
        id_p = uuid;
    }
    const json_t *a = json_object_get(filter, "after");
    const char *after_p = NULL;
    if (json_is_integer(a)) {
        after_p = eai_pg_i64(json_integer_value(a), after);
    } else if (json_is_string(a)) {
        char *end = NULL;
        long long v = strtoll(json_string_value(a), &end, 10);
        if (end && *end == '\0' && end != json_string_value(a))
            after_p = eai_pg_i64(v, after);
    }
    struct eai_pg_read_ctx c = {
        .sql = "SELECT " EAI_PG_EXEC_LIST_COLS " FROM eai.sandbox_executions e"
               " WHERE e.tenant_id = $1"
               " AND ($2::text IS NULL OR e.status = $2)"
               " AND ($3::text IS NULL OR e.run_id = $3)"
               " AND ($4::bigint IS NULL OR e.seq < $4)"
               " AND ($6::uuid IS NULL OR e.id = $6::uuid)"
               " ORDER BY e.seq DESC LIMIT $5::int",
        .n = 6,
        .params = {tenant, eai_jstr(filter, "status"), eai_jstr(filter, "run_id"), after_p,
                   lim, id_p}};
    if (eai_pg_run(pg, tenant, eai_pg_read_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}

/* ---------------------------------------------------------------- queue (SYSTEM) */

int eai_pg_exec_claim(void *self, const char *owner, int64_t lease_ms, int max, int per_tenant_max,
                      json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    int64_t now = eai_now_ms();
    char nows[24], until[24], mx[24], pt[24];
    struct eai_pg_read_ctx c = {
        .sql = "SELECT " EAI_PG_EXEC_COLS " FROM eai.exec_claim($1, $2, $3, $4, $5) e ORDER BY e.seq",
        .n = 5,
        .params = {owner, eai_pg_i64(now, nows), eai_pg_i64(now + lease_ms, until),
                   eai_pg_i64(max, mx), eai_pg_i64(per_tenant_max > 0 ? per_tenant_max : max, pt)}};
    if (eai_pg_run(pg, NULL, eai_pg_read_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}

int eai_pg_exec_claim_excluding(void *self, const char *owner, int64_t lease_ms, int max,
                                int per_tenant_max, const json_t *exclude, json_t **out,
                                struct eai_error **err)
{
    struct eai_pg *pg = self;
    /* exclude -> a uuid[] literal; anything not a uuid is ignored (it
     * cannot match a row anyway). */
    size_t n = json_array_size(exclude);
    char *arr = malloc(n * 40 + 3);
    if (!arr) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    char *p = arr;
    *p++ = '{';
    size_t i;
    json_t *v;
    int first = 1;
    json_array_foreach(exclude, i, v) {
        const char *t = json_string_value(v);
        if (!eai_pg_uuid_valid(t))
            continue;
        if (!first)
            *p++ = ',';
        first = 0;
        memcpy(p, t, 36);
        p += 36;
    }
    *p++ = '}';
    *p = '\0';
    int64_t now = eai_now_ms();
    char nows[24], until[24], mx[24], pt[24];
    struct eai_pg_read_ctx c = {
        .sql = "SELECT " EAI_PG_EXEC_COLS " FROM eai.exec_claim_excluding($1, $2, $3, $4, $5, $6::uuid[]) e"
               " ORDER BY e.seq",
        .n = 6,
        .params = {owner, eai_pg_i64(now, nows), eai_pg_i64(now + lease_ms, until),
                   eai_pg_i64(max, mx), eai_pg_i64(per_tenant_max > 0 ? per_tenant_max : max, pt), arr}};
    int rc = eai_pg_run(pg, NULL, eai_pg_read_body, &c, err);
    free(arr);
    if (rc < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}

struct eai_pg_renew_ctx {
    const char *owner;
    char until[24];
    json_t *out;
};

static int eai_pg_renew_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_renew_ctx *c = arg;
    json_decref(c->out);
    c->out = NULL;
    const char *p[2] = {c->owner, c->until};
    PGresult *r = eai_pg_q(tx, "SELECT id::text, tenant_id::text FROM eai.exec_renew($1, $2)", 2, p, err);
    if (!r)
        return -1;
    json_t *arr = json_array();
    for (int i = 0; arr && i < PQntuples(r); i++) {
        char id[64];
        snprintf(id, sizeof(id), "sbx_%s", PQgetvalue(r, i, 0));
        json_t *o = json_pack("{s:s, s:s}", "id", id, "tenant_id", PQgetvalue(r, i, 1));
        if (!o || json_array_append_new(arr, o) < 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    PQclear(r);
    if (!arr) {
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    c->out = arr;
    return 0;
}

int eai_pg_exec_renew(void *self, const char *owner, int64_t lease_ms, json_t **cancel_ids,
                      struct eai_error **err)
{
    struct eai_pg *pg = self;
    struct eai_pg_renew_ctx c = {.owner = owner};
    eai_pg_i64(eai_now_ms() + lease_ms, c.until);
    if (eai_pg_run(pg, NULL, eai_pg_renew_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    if (cancel_ids)
        *cancel_ids = c.out;
    else
        json_decref(c.out);
    return 0;
}

int eai_pg_exec_stale(void *self, int64_t now_ms, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    char nows[24];
    struct eai_pg_read_ctx c = {
        .sql = "SELECT " EAI_PG_EXEC_COLS " FROM eai.exec_stale($1) e ORDER BY e.seq",
        .n = 1, .params = {eai_pg_i64(now_ms, nows)}};
    if (eai_pg_run(pg, NULL, eai_pg_read_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}

struct eai_pg_counts_ctx {
    int64_t queued, running;
};

static int eai_pg_counts_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_counts_ctx *c = arg;
    PGresult *r = eai_pg_q(tx, "SELECT queued, running FROM eai.exec_counts()", 0, NULL, err);
    if (!r)
        return -1;
    c->queued = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    c->running = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 1), NULL, 10) : 0;
    PQclear(r);
    return 0;
}

int eai_pg_exec_counts(void *self, int64_t *queued, int64_t *running, struct eai_error **err)
{
    struct eai_pg_counts_ctx c = {0};
    if (eai_pg_run(self, NULL, eai_pg_counts_body, &c, err) < 0)
        return -1;
    if (queued)
        *queued = c.queued;
    if (running)
        *running = c.running;
    return 0;
}

/* ---------------------------------------------------------------- terminal transitions */

/* Make the locked row (row 0 of r) terminal: the record module merges the
 * patch and scrubs; this writes the files, the document and its columns. */
static int eai_pg_apply_terminal(struct eai_pg_tx *tx, const char *tenant, const char *uuid,
                                 const PGresult *r, const json_t *patch, const json_t *files,
                                 const char *default_status, struct eai_error **err)
{
    struct eai_pg *pg = tx->pg;
    int64_t now = eai_now_ms();
    char now_s[32];
    eai_time_rfc3339(now, now_s);
    json_t *rec = eai_pg_exec_row(r, 0);
    if (!rec) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    const char *why = NULL;
    int rc = eai_exec_record_terminal(rec, patch, files, default_status, now_s, &why);
    if (rc < 0) {
        json_decref(rec);
        return rc == -2 ? eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory")
                        : eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "%s", why);
    }
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f) {
        const char *path = eai_jstr(f, "path");
        const char *b64 = eai_jstr(f, "content_b64");
        if (!path) {
            json_decref(rec);
            return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "collected file without a path");
        }
        size_t len = 0;
        unsigned char *data = eai_pg_b64_decode(b64 ? b64 : "", &len);
        if (!data) {
            json_decref(rec);
            return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "collected file %s: bad base64", path);
        }
        char size[24];
        const json_t *sz = json_object_get(f, "size");
        eai_pg_i64(json_is_integer(sz) ? json_integer_value(sz) : (json_int_t)len, size);
        const char *p[6] = {tenant, uuid, path, size, eai_jstr(f, "sha256"), (const char *)data};
        int lens[6] = {0, 0, 0, 0, 0, (int)len};
        int fmts[6] = {0, 0, 0, 0, 0, 1};
        PGresult *fr = eai_pg_qx(tx, "INSERT INTO eai.execution_files (tenant_id, execution_id, path,"
                                     " size, sha256, content) VALUES ($1, $2, $3, $4, $5, $6)"
                                     " ON CONFLICT (execution_id, path) DO NOTHING",
                                 6, p, lens, fmts, err);
        free(data);
        if (!fr) {
            json_decref(rec);
            return -1;
        }
        PQclear(fr);
    }
    /* the columns, then the document without them */
    char status[16], finished[40], started[40];
    snprintf(status, sizeof status, "%s", eai_jstr(rec, "status"));
    snprintf(finished, sizeof finished, "%s", eai_jstr(rec, "finished_at"));
    const char *st = eai_jstr(rec, "started_at");
    int has_started = st != NULL;
    if (has_started)
        snprintf(started, sizeof started, "%s", st);
    /* the usage, also in columns for the agent view's sums (0006_agent_view.sql) */
    char us[3][40];
    const char *uv[3] = {NULL, NULL, NULL};
    static const char *const uk[3] = {"cpu_seconds", "memory_mb_seconds", "duration_s"};
    for (int k = 0; k < 3; k++) {
        const json_t *v = json_object_get(json_object_get(rec, "usage"), uk[k]);
        if (json_is_number(v)) {
            snprintf(us[k], sizeof us[k], "%.17g", json_number_value(v));
            uv[k] = us[k];
        }
    }
    for (int k = 0; eai_pg_column_keys[k]; k++)
        json_object_del(rec, eai_pg_column_keys[k]);
    char *text = eai_pg_dump(rec);
    json_decref(rec);
    if (!text) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    char nows[24];
    const char *p[9] = {uuid, status, text, finished, has_started ? started : NULL, eai_pg_i64(now, nows),
                        uv[0], uv[1], uv[2]};
    rc = eai_pg_cmd(tx, "UPDATE eai.sandbox_executions SET status = $2, doc = $3::json,"
                        " finished_at = $4::timestamptz,"
                        " started_at = COALESCE($5::timestamptz, started_at),"
                        " updated_at = to_timestamp($6::bigint / 1000.0),"
                        " cpu_seconds = $7::float8, memory_mb_seconds = $8::float8, duration_s = $9::float8"
                        " WHERE id = $1", 9, p, err);
    free(text);
    return rc;
}

struct eai_pg_term_ctx {
    const char *tenant;
    char uuid[37];
    const json_t *patch, *files, *usage, *audit;
    json_t *out;         /* cancel: the row after the change */
};

static PGresult *eai_pg_lock_row(struct eai_pg_tx *tx, struct eai_pg_term_ctx *c,
                                 struct eai_error **err)
{
    const char *p[2] = {c->uuid, c->tenant};
    return eai_pg_q(tx, "SELECT " EAI_PG_EXEC_COLS " FROM eai.sandbox_executions e"
                        " WHERE e.id = $1 AND e.tenant_id = $2 FOR UPDATE", 2, p, err);
}

static int eai_pg_finish_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_term_ctx *c = arg;
    PGresult *r = eai_pg_lock_row(tx, c, err);
    if (!r)
        return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return eai_pg_fail(tx->pg, err, EAI_E_NOT_FOUND, "execution not found");
    }
    if (eai_exec_record_is_terminal(PQgetvalue(r, 0, COL_STATUS))) {
        PQclear(r);
        return EAI_STORE_NOOP;
    }
    int rc = eai_pg_apply_terminal(tx, c->tenant, c->uuid, r, c->patch, c->files, NULL, err);
    PQclear(r);
    if (rc < 0)
        return -1;
    if (c->usage && !json_is_null(c->usage) &&
        eai_pg_outbox_insert_tx(tx, c->tenant, c->uuid, c->usage, err) < 0)
        return -1;
    if (c->audit && eai_pg_audit_append_tx(tx, c->tenant, c->audit, err) < 0)
        return -1;
    return EAI_STORE_UPDATED;
}

int eai_pg_exec_finish(void *self, const char *tenant, const char *id, const json_t *patch,
                       const json_t *files, const json_t *usage_event, const json_t *audit,
                       struct eai_error **err)
{
    struct eai_pg *pg = self;
    struct eai_pg_term_ctx c = {.tenant = tenant, .patch = patch, .files = files,
                                .usage = usage_event, .audit = audit};
    if (!eai_pg_uuid_valid(tenant) || eai_pg_exec_uuid(id, c.uuid) < 0) {
        return eai_pg_fail(pg, err, EAI_E_NOT_FOUND, "execution not found");
    }
    if (!json_is_object(patch)) {
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "exec_finish: patch is not an object");
    }
    return eai_pg_run(pg, tenant, eai_pg_finish_body, &c, err);
}

static int eai_pg_cancel_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_term_ctx *c = arg;
    json_decref(c->out);
    c->out = NULL;
    PGresult *r = eai_pg_lock_row(tx, c, err);
    if (!r)
        return -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return 0;
    }
    char status[16];
    snprintf(status, sizeof(status), "%s", PQgetvalue(r, 0, COL_STATUS));
    int requested = strcmp(status, "running") == 0 && PQgetvalue(r, 0, COL_CANCEL)[0] == 't';
    if (eai_exec_record_is_terminal(status) || requested) {
        /* this call changes nothing: no write, no audit */
        c->out = eai_pg_exec_row(r, 0);
        PQclear(r);
        if (!c->out) {
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
        }
        return EAI_STORE_NOOP;
    }
    if (strcmp(status, "running") == 0) {
        PQclear(r);
        char nows[24];
        const char *p[2] = {c->uuid, eai_pg_i64(eai_now_ms(), nows)};
        if (eai_pg_cmd(tx, "UPDATE eai.sandbox_executions SET cancel_requested = true,"
                           " updated_at = to_timestamp($2::bigint / 1000.0) WHERE id = $1",
                       2, p, err) < 0)
            return -1;
    } else {
        int rc = eai_pg_apply_terminal(tx, c->tenant, c->uuid, r, c->patch, NULL, "cancelled", err);
        PQclear(r);
        if (rc < 0)
            return -1;
    }
    if (c->audit && eai_pg_audit_append_tx(tx, c->tenant, c->audit, err) < 0)
        return -1;
    r = eai_pg_lock_row(tx, c, err);
    if (!r)
        return -1;
    c->out = PQntuples(r) ? eai_pg_exec_row(r, 0) : NULL;
    PQclear(r);
    if (!c->out) {
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    return EAI_STORE_UPDATED;
}

int eai_pg_exec_cancel(void *self, const char *tenant, const char *id, const json_t *cancelled_patch,
                       const json_t *audit, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    struct eai_pg_term_ctx c = {.tenant = tenant, .patch = cancelled_patch, .audit = audit};
    if (!eai_pg_uuid_valid(tenant) || eai_pg_exec_uuid(id, c.uuid) < 0) {
        *out = NULL;
        return 0;
    }
    int rc = eai_pg_run(pg, tenant, eai_pg_cancel_body, &c, err);
    if (rc < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return c.out ? rc : 0;
}

/* ---------------------------------------------------------------- files */

struct eai_pg_file_ctx {
    const char *params[3];
    unsigned char *data;
    size_t len;
};

static int eai_pg_file_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_file_ctx *c = arg;
    free(c->data);
    c->data = NULL;
    PGresult *r = eai_pg_q(tx, "SELECT content FROM eai.execution_files"
                               " WHERE execution_id = $1 AND tenant_id = $2 AND path = $3",
                           3, c->params, err);
    if (!r)
        return -1;
    if (PQntuples(r) == 1) {
        size_t n = 0;
        unsigned char *raw = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 0), &n);
        if (!raw) {
            PQclear(r);
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
        }
        c->data = malloc(n ? n : 1);
        if (c->data)
            memcpy(c->data, raw, n);
        PQfreemem(raw);
        if (!c->data) {
            PQclear(r);
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
        }
        c->len = n;
    }
    PQclear(r);
    return 0;
}

int eai_pg_file_get(void *self, const char *tenant, const char *exec_id, const char *path,
                    unsigned char **data, size_t *len, struct eai_error **err)
{
    struct eai_pg *pg = self;
    char uuid[37];
    *data = NULL;
    *len = 0;
    if (!eai_pg_uuid_valid(tenant) || eai_pg_exec_uuid(exec_id, uuid) < 0 || !path)
        return 0;
    struct eai_pg_file_ctx c = {.params = {uuid, tenant, path}};
    if (eai_pg_run(pg, tenant, eai_pg_file_body, &c, err) < 0) {
        free(c.data);
        return -1;
    }
    *data = c.data;
    *len = c.len;
    return 0;
}
