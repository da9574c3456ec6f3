/*
 * PostgreSQL backend: stored sessions (storage ops session_put,
 * session_get, session_list, session_owned of ABI 1.4; include/eai/
 * storage.h, docs/sessions.md "Stored sessions").  Table
 * eai.sandbox_sessions of migrations/postgres/0008_sessions.sql, under the
 * tenant's row-level security; session_owned (a node's own sessions of
 * every tenant, the start-up sweep) through the SECURITY DEFINER function
 * eai.session_owned.
 */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

#define SES_LIST_MAX 1000

struct ses_ctx {
    const char *tenant, *id, *owner, *status, *expect, *text, *before, *claim_owner;
    int64_t created_ms, rev;
    int limit, live;
    json_t *out;
};

static int put_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct ses_ctx *c = arg;
    char cms[24], rev[24];
    eai_pg_i64(c->created_ms, cms);
    eai_pg_i64(c->rev, rev);
    const char *p[9] = {c->id, c->tenant, c->owner, c->status, cms, c->text, c->expect, rev, c->claim_owner};
    PGresult *r = eai_pg_q(tx,
        "INSERT INTO eai.sandbox_sessions AS s (id, tenant_id, owner, status, created_ms, rev, doc, claim_owner)"
        " VALUES ($1, $2::uuid, $3, $4, $5::bigint, $8::bigint, $6::json, $9) ON CONFLICT (id) DO UPDATE"
        " SET owner = excluded.owner, status = excluded.status, rev = excluded.rev, doc = excluded.doc,"
        " claim_owner = excluded.claim_owner, updated_at = now()"
        " WHERE s.tenant_id = excluded.tenant_id AND ($7::text IS NULL OR s.owner = $7::text)"
        " AND excluded.rev >= s.rev RETURNING 1", 9, p, err);
    if (!r)
        return -1;
    int n = PQntuples(r);
    PQclear(r);
    if (n == 1)
        return 0;
    /* not written: another owner (a conflict) or an older rev than the
     * stored one (a late write: ignored); another tenant's row is not
     * visible here (row-level security) and its id conflicts */
    const char *q[1] = {c->id};
    r = eai_pg_q(tx, "SELECT owner FROM eai.sandbox_sessions WHERE id = $1", 1, q, err);
    if (!r)
        return -1;
    int conflict = PQntuples(r) != 1 || (c->expect && strcmp(PQgetvalue(r, 0, 0), c->expect) != 0);
    PQclear(r);
    if (conflict)
        return eai_pg_fail(tx->pg, err, EAI_E_CONFLICT, "session %s is owned by another node", c->id);
    return 0;
}

int eai_pg_session_put(void *self, const char *tenant, const json_t *doc, const char *expect_owner,
                       struct eai_error **err)
{
    struct eai_pg *pg = self;
    struct ses_ctx c = {.tenant = tenant, .id = eai_jstr(doc, "id"), .owner = eai_jstr(doc, "owner"),
                        .status = eai_jstr(doc, "status"), .expect = expect_owner,
                        .rev = json_integer_value(json_object_get(doc, "rev")),
                        .claim_owner = eai_jstr(doc, "claim_owner")};
    const char *created = eai_jstr(doc, "created_at");
    if (!eai_pg_uuid_valid(tenant) || !c.id || !c.owner || !c.status || !created ||
        eai_time_parse_rfc3339(created, &c.created_ms) < 0)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED,
                           "session_put: the record needs tenant, id, owner, status and created_at");
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
    struct ses_ctx *c = arg;
    json_decref(c->out);
    c->out = NULL;
    const char *p[2] = {c->tenant, c->id};
    PGresult *r = eai_pg_q(tx, "SELECT doc FROM eai.sandbox_sessions WHERE tenant_id = $1::uuid AND id = $2",
                           2, p, err);
    if (!r)
        return -1;
    int rc = 0;
    if (PQntuples(r) == 1) {
        c->out = eai_pg_cell_json(r, 0, 0);
        if (!c->out)
            rc = eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "session with a bad document");
    }
    PQclear(r);
    return rc;
}

int eai_pg_session_get(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!eai_pg_uuid_valid(tenant) || !id)
        return 0;
    struct ses_ctx c = {.tenant = tenant, .id = id};
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
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "session with a bad document");
        if (with_tenant)
            d = json_pack("{s:s, s:o}", "tenant_id", PQgetvalue(r, i, 0), "doc", d);
        if (!d || json_array_append_new(*out, d) < 0)
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    return 0;
}

static int list_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct ses_ctx *c = arg;
    char lim[24];
    eai_pg_i64(c->limit, lim);
    const char *p[5] = {c->tenant, c->status, c->live ? "t" : "f", c->before, lim};
    PGresult *r = eai_pg_q(tx,
        "SELECT doc FROM eai.sandbox_sessions WHERE tenant_id = $1::uuid"
        " AND ($2::text IS NULL OR status = $2::text)"
        " AND (NOT $3::boolean OR status NOT IN ('ended', 'failed', 'interrupted'))"
        " AND ($4::text IS NULL OR (created_ms, id) < (SELECT b.created_ms, b.id FROM eai.sandbox_sessions b"
        "                                            WHERE b.tenant_id = $1::uuid AND b.id = $4::text))"
        " ORDER BY created_ms DESC, id DESC LIMIT $5::integer", 5, p, err);
    if (!r)
        return -1;
    int rc = rows_body(tx, &c->out, r, 0, err);
    PQclear(r);
    return rc;
}

int eai_pg_session_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    json_int_t limit = json_integer_value(json_object_get(filter, "limit"));
    if (limit < 1 || limit > SES_LIST_MAX)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "session_list: limit outside 1..%d", SES_LIST_MAX);
    if (!eai_pg_uuid_valid(tenant)) {
        *out = json_array();
        return *out ? 0 : eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    struct ses_ctx c = {.tenant = tenant, .status = eai_jstr(filter, "status"), .before = eai_jstr(filter, "before"),
                        .live = json_is_true(json_object_get(filter, "live")), .limit = (int)limit};
    if (eai_pg_run(pg, tenant, list_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}

static int owned_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct ses_ctx *c = arg;
    char lim[24];
    eai_pg_i64(c->limit, lim);
    const char *p[2] = {c->owner, lim};
    PGresult *r = eai_pg_q(tx, "SELECT tenant_id::text, doc FROM eai.session_owned($1, $2::integer)", 2, p, err);
    if (!r)
        return -1;
    int rc = rows_body(tx, &c->out, r, 1, err);
    PQclear(r);
    return rc;
}

int eai_pg_session_owned(void *self, const char *owner, int limit, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!owner || limit < 1 || limit > SES_LIST_MAX)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "session_owned: owner and a limit in 1..%d",
                           SES_LIST_MAX);
    struct ses_ctx c = {.owner = owner, .limit = limit};
    if (eai_pg_run(pg, NULL, owned_body, &c, err) < 0) {
        json_decref(c.out);
        return -1;
    }
    *out = c.out;
    return 0;
}
