/*
 * PostgreSQL backend: snapshot records (storage ops snapshot_put,
 * snapshot_get, snapshot_list, snapshot_delete, snapshot_owned of ABI 1.5;
 * include/eai/storage.h, docs/sessions.md "Snapshots and forks").  Table
 * eai.sandbox_snapshots of migrations/postgres/0009_snapshots.sql, under
 * the tenant's row-level security; snapshot_owned (a node's own snapshots
 * of every tenant, read at its start) through the SECURITY DEFINER
 * function eai.snapshot_owned.
 */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

#define SNP_LIST_MAX 1000

struct snp_ctx {
    const char *tenant, *id, *owner, *session_id, *text;
    int64_t created_ms;
    int limit;
    json_t *out;
};

static int put_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct snp_ctx *c = arg;
    char cms[24];
    eai_pg_i64(c->created_ms, cms);
    const char *p[6] = {c->id, c->tenant, c->owner, c->session_id, cms, c->text};
    /* another tenant's row is not visible (row-level security): its id
     * conflicts on the key and nothing is written */
    PGresult *r = eai_pg_q(tx,
        "INSERT INTO eai.sandbox_snapshots AS s (id, tenant_id, owner, session_id, created_ms, doc)"
        " VALUES ($1, $2::uuid, $3, $4, $5::bigint, $6::json) ON CONFLICT (id) DO UPDATE"
        " SET owner = excluded.owner, doc = excluded.doc, updated_at = now()"
        " WHERE s.tenant_id = excluded.tenant_id RETURNING 1", 6, p, err);
    if (!r)
        return -1;
    int n = PQntuples(r);
    PQclear(r);
    if (n != 1)
        return eai_pg_fail(tx->pg, err, EAI_E_CONFLICT, "snapshot %s belongs to another tenant", c->id);
    return 0;
}

int eai_pg_snapshot_put(void *self, const char *tenant, const json_t *doc, struct eai_error **err)
{
    struct eai_pg *pg = self;
    struct snp_ctx c = {.tenant = tenant, .id = eai_jstr(doc, "id"), .owner = eai_jstr(doc, "owner"),
                        .session_id = eai_jstr(doc, "session_id")};
    const char *created = eai_jstr(doc, "created_at");
    if (!eai_pg_uuid_valid(tenant) || !c.id || !c.owner || !c.session_id || !created ||
        eai_time_parse_rfc3339(created, &c.created_ms) < 0)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED,
                           "snapshot_put: the record needs tenant, id, owner, session_id and created_at");
    char *text = eai_pg_dump(doc);
    if (!text)
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    c.text = text;
    int rc = eai_pg_run(pg, tenant, put_body, &c, err);
    free(text);
    return rc < 0 ? -1 : 0;
}

static int get_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct snp_ctx *c = arg;
    json_decref(c->out);
    c->out = NULL;
    const char *p[2] = {c->tenant, c->id};
    PGresult *r = eai_pg_q(tx, "SELECT doc FROM eai.sandbox_snapshots WHERE tenant_id = $1::uuid AND id = $2",
                           2, p, err);
    if (!r)
        return -1;
    int rc = 0;
    if (PQntuples(r) == 1) {
        c->out = eai_pg_cell_json(r, 0, 0);
        if (!c->out)
            rc = eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "snapshot with a bad document");
    }
    PQclear(r);
    return rc;
}

int eai_pg_snapshot_get(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!eai_pg_uuid_valid(tenant) || !id)
        return 0;
    struct snp_ctx c = {.tenant = tenant, .id = id};
    if (eai_pg_run(pg, tenant, get_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}

static int rows_body(struct eai_pg_tx *tx, json_t **out, PGresult *r, int with_tenant, struct eai_error **err)
{
    json_decref(*out);
    *out = json_array();
    if (!*out)
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *d = eai_pg_cell_json(r, i, with_tenant ? 1 : 0);
        if (!d)
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "snapshot with a bad document");
        if (with_tenant)
            d = json_pack("{s:s, s:o}", "tenant_id", PQgetvalue(r, i, 0), "doc", d);
        if (!d || json_array_append_new(*out, d) < 0)
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    return 0;
}

static int list_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct snp_ctx *c = arg;
    char lim[24];
    eai_pg_i64(c->limit, lim);
    const char *p[3] = {c->tenant, c->session_id, lim};
    PGresult *r = eai_pg_q(tx,
        "SELECT doc FROM eai.sandbox_snapshots WHERE tenant_id = $1::uuid"
        " AND ($2::text IS NULL OR session_id = $2::text)"
        " ORDER BY created_ms DESC, id DESC LIMIT $3::integer", 3, p, err);
    if (!r)
        return -1;
    int rc = rows_body(tx, &c->out, r, 0, err);
    PQclear(r);
    return rc;
}

int eai_pg_snapshot_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                         struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    json_int_t limit = json_integer_value(json_object_get(filter, "limit"));
    if (limit < 1 || limit > SNP_LIST_MAX)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "snapshot_list: limit outside 1..%d", SNP_LIST_MAX);
    if (!eai_pg_uuid_valid(tenant)) {
        *out = json_array();
        return *out ? 0 : eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    struct snp_ctx c = {.tenant = tenant, .session_id = eai_jstr(filter, "session_id"), .limit = (int)limit};
    if (eai_pg_run(pg, tenant, list_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}

static int delete_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct snp_ctx *c = arg;
    const char *p[2] = {c->tenant, c->id};
    return eai_pg_cmd(tx, "DELETE FROM eai.sandbox_snapshots WHERE tenant_id = $1::uuid AND id = $2", 2, p, err);
}

int eai_pg_snapshot_delete(void *self, const char *tenant, const char *id, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant) || !id)
        return 0;
    struct snp_ctx c = {.tenant = tenant, .id = id};
    return eai_pg_run(pg, tenant, delete_body, &c, err) < 0 ? -1 : 0;
}

static int owned_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct snp_ctx *c = arg;
    char lim[24];
    eai_pg_i64(c->limit, lim);
    const char *p[2] = {c->owner, lim};
    PGresult *r = eai_pg_q(tx, "SELECT tenant_id::text, doc FROM eai.snapshot_owned($1, $2::integer)", 2, p, err);
    if (!r)
        return -1;
    int rc = rows_body(tx, &c->out, r, 1, err);
    PQclear(r);
    return rc;
}

int eai_pg_snapshot_owned(void *self, const char *owner, int limit, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!owner || limit < 1 || limit > SNP_LIST_MAX)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "snapshot_owned: owner and a limit in 1..%d",
                           SNP_LIST_MAX);
    struct snp_ctx c = {.owner = owner, .limit = limit};
    if (eai_pg_run(pg, NULL, owned_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}
