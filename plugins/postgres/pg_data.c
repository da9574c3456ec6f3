/*
 * Tenants, API keys, manifests, the audit chain, the usage outbox and
 * ledger, and the small key/value table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* A body running one statement whose rows feed a callback. */
struct eai_pg_simple_ctx {
    const char *sql;
    int n;
    const char *params[12];
    /* Build the output from the result; 0 or -1 (with *err). */
    int (*build)(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                 struct eai_error **err);
    json_t *out;
    int rc;
};

static int eai_pg_simple_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_simple_ctx *c = arg;
    json_decref(c->out);
    c->out = NULL;
    c->rc = 0;
    PGresult *r = eai_pg_q(tx, c->sql, c->n, c->params, err);
    if (!r)
        return -1;
    int rc = c->build ? c->build(tx, c, r, err) : 0;
    PQclear(r);
    return rc < 0 ? -1 : c->rc;
}

static int eai_pg_simple(struct eai_pg *pg, const char *tenant, struct eai_pg_simple_ctx *c,
                         struct eai_error **err)
{
    int rc = eai_pg_run(pg, tenant, eai_pg_simple_body, c, err);
    if (rc < 0) {
        json_decref(c->out);
        c->out = NULL;
    }
    return rc;
}

/* ---------------------------------------------------------------- tenants and keys */

static int eai_pg_build_tenant(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                               struct eai_error **err)
{
    if (PQntuples(r) == 0)
        return 0;
    c->out = json_object();
    if (!c->out || json_object_set_new(c->out, "id", eai_pg_cell_str(r, 0, 0)) < 0 ||
        json_object_set_new(c->out, "name", eai_pg_cell_str(r, 0, 1)) < 0 ||
        json_object_set_new(c->out, "created_at", eai_pg_cell_time(r, 0, 2)) < 0) {
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    return 0;
}

int eai_pg_tenant_create(void *self, const char *name, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!name || !*name) {
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "tenant name is empty");
    }
    char id[37];
    eai_pg_uuid_v4(id);
    /* Runs under the new tenant's own scope: the RLS WITH CHECK passes,
     * so the application role needs no special privilege for this. */
    struct eai_pg_simple_ctx c = {
        .sql = "INSERT INTO eai.tenants (id, tenant_id, name) VALUES ($1, $1, $2)"
               " RETURNING id::text, name, floor(extract(epoch FROM created_at) * 1000)::bigint",
        .n = 2, .params = {id, name}, .build = eai_pg_build_tenant};
    if (eai_pg_simple(pg, id, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

int eai_pg_tenant_get(void *self, const char *id, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!eai_pg_uuid_valid(id))
        return 0;
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT id::text, name, created_ms FROM eai.tenant_get($1)",
        .n = 1, .params = {id}, .build = eai_pg_build_tenant};
    if (eai_pg_simple(pg, NULL, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

int eai_pg_key_create(void *self, const char *tenant, const char *key_id,
                      const char *secret_hash_hex, const char *name, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant)) {
        return eai_pg_fail(pg, err, EAI_E_NOT_FOUND, "unknown tenant");
    }
    if (!key_id || !*key_id || !secret_hash_hex) {
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "key id and hash are required");
    }
    struct eai_pg_simple_ctx c = {
        .sql = "INSERT INTO eai.api_keys (tenant_id, key_id, secret_hash, name) VALUES ($1, $2, $3, $4)",
        .n = 4, .params = {tenant, key_id, secret_hash_hex, name}};
    return eai_pg_simple(pg, tenant, &c, err) < 0 ? -1 : 0;
}

static int eai_pg_build_key(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                            struct eai_error **err)
{
    if (PQntuples(r) == 0)
        return 0;
    c->out = json_object();
    if (!c->out || json_object_set_new(c->out, "key_id", eai_pg_cell_str(r, 0, 0)) < 0 ||
        json_object_set_new(c->out, "tenant_id", eai_pg_cell_str(r, 0, 1)) < 0 ||
        json_object_set_new(c->out, "hash", eai_pg_cell_str(r, 0, 2)) < 0 ||
        json_object_set_new(c->out, "revoked", eai_pg_cell_bool(r, 0, 3)) < 0 ||
        json_object_set_new(c->out, "name", eai_pg_cell_str(r, 0, 4)) < 0) {
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    /* key_create_expiring: the expiry, RFC 3339 or null */
    if (json_object_set_new(c->out, "expires_at", eai_pg_cell_time(r, 0, 5)) < 0) {
        *err = eai_pg_err(tx->pg, EAI_E_INTERNAL, "out of memory");
        return -1;
    }
    return 0;
}

int eai_pg_key_get(void *self, const char *key_id, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!key_id)
        return 0;
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT key_id, tenant_id::text, secret_hash, revoked, name, expires_ms FROM eai.key_lookup($1)",
        .n = 1, .params = {key_id}, .build = eai_pg_build_key};
    if (eai_pg_simple(pg, NULL, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

static int eai_pg_build_found(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                              struct eai_error **err)
{
    if (PQntuples(r) != 1 || PQgetvalue(r, 0, 0)[0] != 't') {
        return eai_pg_fail(tx->pg, err, EAI_E_NOT_FOUND, "not found");
    }
    return 0;
}

int eai_pg_key_revoke(void *self, const char *key_id, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!key_id) {
        return eai_pg_fail(pg, err, EAI_E_NOT_FOUND, "unknown key");
    }
    struct eai_pg_simple_ctx c = {.sql = "SELECT eai.key_revoke($1)", .n = 1, .params = {key_id},
                                  .build = eai_pg_build_found};
    return eai_pg_simple(pg, NULL, &c, err) < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- admin listings, key expiry */

static int eai_pg_build_tenants(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                                struct eai_error **err)
{
    c->out = json_array();
    for (int i = 0; c->out && i < PQntuples(r); i++) {
        json_t *t = json_pack("{s:o, s:o, s:o}", "id", eai_pg_cell_str(r, i, 0), "name", eai_pg_cell_str(r, i, 1),
                              "created_at", eai_pg_cell_time(r, i, 2));
        if (!t || json_array_append_new(c->out, t) < 0) {
            json_decref(c->out);
            c->out = NULL;
        }
    }
    if (!c->out) {
        *err = eai_pg_err(tx->pg, EAI_E_INTERNAL, "out of memory");
        return -1;
    }
    return 0;
}

int eai_pg_tenant_list(void *self, const char *after, int limit, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (limit < 1 || limit > 1000) {
        *err = eai_pg_err(pg, EAI_E_VALIDATION_FAILED, "tenant_list: limit %d outside 1..1000", limit);
        return -1;
    }
    if (after && !eai_pg_uuid_valid(after)) {
        *err = eai_pg_err(pg, EAI_E_VALIDATION_FAILED, "tenant_list: 'after' is not a tenant id");
        return -1;
    }
    char lim[24];
    eai_pg_i64(limit, lim);
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT id::text, name, created_ms FROM eai.tenant_list($1::uuid, $2::int)",
        .n = 2, .params = {after, lim}, .build = eai_pg_build_tenants};
    if (eai_pg_simple(pg, NULL, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

static int eai_pg_build_keys(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                             struct eai_error **err)
{
    c->out = json_array();
    for (int i = 0; c->out && i < PQntuples(r); i++) {
        json_t *k = json_pack("{s:o, s:o, s:o, s:o, s:o}", "key_id", eai_pg_cell_str(r, i, 0),
                              "name", eai_pg_cell_str(r, i, 1), "revoked", eai_pg_cell_bool(r, i, 2),
                              "created_at", eai_pg_cell_time(r, i, 3), "expires_at", eai_pg_cell_time(r, i, 4));
        if (!k || json_array_append_new(c->out, k) < 0) {
            json_decref(c->out);
            c->out = NULL;
        }
    }
    if (!c->out) {
        *err = eai_pg_err(tx->pg, EAI_E_INTERNAL, "out of memory");
        return -1;
    }
    return 0;
}

int eai_pg_key_list(void *self, const char *tenant, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!eai_pg_uuid_valid(tenant)) {
        *out = json_array();
        if (!*out) {
            *err = eai_pg_err(pg, EAI_E_INTERNAL, "out of memory");
            return -1;
        }
        return 0;
    }
    /* Tenant-scoped: row-level security shows this tenant's keys only. */
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT key_id, name, revoked, floor(extract(epoch FROM created_at) * 1000)::bigint,"
               " floor(extract(epoch FROM expires_at) * 1000)::bigint"
               " FROM eai.api_keys WHERE tenant_id = $1 ORDER BY created_at, key_id",
        .n = 1, .params = {tenant}, .build = eai_pg_build_keys};
    if (eai_pg_simple(pg, tenant, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

int eai_pg_key_create_expiring(void *self, const char *tenant, const char *key_id,
                               const char *secret_hash_hex, const char *name, int64_t expires_ms,
                               struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant)) {
        *err = eai_pg_err(pg, EAI_E_NOT_FOUND, "unknown tenant");
        return -1;
    }
    if (!key_id || !*key_id || !secret_hash_hex || expires_ms < 0) {
        *err = eai_pg_err(pg, EAI_E_VALIDATION_FAILED, "key id, hash and a non-negative expiry are required");
        return -1;
    }
    char exp[24];
    eai_pg_i64(expires_ms, exp);
    struct eai_pg_simple_ctx c = {
        .sql = "INSERT INTO eai.api_keys (tenant_id, key_id, secret_hash, name, expires_at)"
               " VALUES ($1, $2, $3, $4, CASE WHEN $5::bigint > 0 THEN to_timestamp($5::bigint / 1000.0) END)",
        .n = 5, .params = {tenant, key_id, secret_hash_hex, name, exp}};
    return eai_pg_simple(pg, tenant, &c, err) < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- audit */

int eai_pg_audit_append_tx(struct eai_pg_tx *tx, const char *tenant, const json_t *event,
                           struct eai_error **err)
{
    struct eai_pg *pg = tx->pg;
    if (!json_is_object(event)) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "audit event is not an object");
    }
    const char *p1[1] = {tenant};
    /* One writer per tenant chain at a time, until COMMIT. */
    if (eai_pg_cmd(tx, "SELECT pg_advisory_xact_lock(hashtext('eai.audit'), hashtext($1))", 1, p1,
                   err) < 0)
        return -1;
    PGresult *r = eai_pg_q(tx, "SELECT seq, hash FROM eai.audit_events WHERE tenant_id = $1"
                               " ORDER BY seq DESC LIMIT 1", 1, p1, err);
    if (!r)
        return -1;
    int64_t seq = 1;
    char prev[80] = "";
    if (PQntuples(r) == 1) {
        seq = strtoll(PQgetvalue(r, 0, 0), NULL, 10) + 1;
        snprintf(prev, sizeof(prev), "%s", PQgetvalue(r, 0, 1));
    }
    PQclear(r);
    json_t *ev = json_deep_copy(event);
    if (!ev) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    int bad = 0;
    char id[37];
    const char *eid = eai_jstr(ev, "id");
    if (eid && eai_pg_uuid_valid(eid)) {
        snprintf(id, sizeof(id), "%s", eid);
    } else {
        eai_pg_uuid_v4(id);
        bad |= json_object_set_new(ev, "id", json_string(id));
    }
    if (!json_is_string(json_object_get(ev, "time"))) {
        char t[32];
        eai_time_rfc3339(eai_now_ms(), t);
        bad |= json_object_set_new(ev, "time", json_string(t));
    }
    bad |= json_object_set_new(ev, "tenant_id", json_string(tenant));
    bad |= json_object_set_new(ev, "seq", json_integer(seq));
    json_object_del(ev, "hash");
    if (bad || pg->host->audit_seal(ev, prev[0] ? prev : NULL) < 0) {
        json_decref(ev);
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "cannot seal audit event");
    }
    char *text = eai_pg_dump(ev);
    char seqs[24];
    const char *p[7] = {id, tenant, eai_pg_i64(seq, seqs), eai_jstr(ev, "action"),
                        eai_jstr(ev, "prev_hash"), eai_jstr(ev, "hash"), text};
    if (!text || !p[4] || !p[5]) {
        free(text);
        json_decref(ev);
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "cannot encode audit event");
    }
    int rc = eai_pg_cmd(tx, "INSERT INTO eai.audit_events (id, tenant_id, seq, action, prev_hash,"
                            " hash, event) VALUES ($1, $2, $3, $4, $5, $6, $7::json)", 7, p, err);
    free(text);
    json_decref(ev);
    return rc;
}

struct eai_pg_audit_ctx {
    const char *tenant;
    const json_t *event;
};

static int eai_pg_audit_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_audit_ctx *c = arg;
    return eai_pg_audit_append_tx(tx, c->tenant, c->event, err);
}

int eai_pg_audit_append(void *self, const char *tenant, const json_t *event, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant)) {
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "audit_append: bad tenant");
    }
    struct eai_pg_audit_ctx c = {.tenant = tenant, .event = event};
    return eai_pg_run(pg, tenant, eai_pg_audit_body, &c, err) < 0 ? -1 : 0;
}

/* Column 0 of every row parsed as JSON into an array. */
static int eai_pg_build_json_list(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                                  struct eai_error **err)
{
    c->out = json_array();
    if (!c->out) {
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *v = eai_pg_cell_json(r, i, 0);
        if (!v || json_array_append_new(c->out, v) < 0) {
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "bad stored JSON or out of memory");
        }
    }
    return 0;
}

int eai_pg_audit_list(void *self, const char *tenant, int64_t after_seq, int limit, json_t **out,
                      struct eai_error **err)
{
    struct eai_pg *pg = self;
    char after[24], lim[24];
    eai_pg_i64(after_seq, after);
    eai_pg_i64(limit > 0 ? limit : 1000, lim);
    struct eai_pg_simple_ctx c = {.build = eai_pg_build_json_list};
    if (tenant) {
        if (!eai_pg_uuid_valid(tenant)) {
            *out = json_array();
            return *out ? 0 : -1;
        }
        c.sql = "SELECT event FROM eai.audit_events WHERE tenant_id = $1 AND seq > $2::bigint"
                " ORDER BY seq LIMIT $3::int";
        c.n = 3;
        c.params[0] = tenant;
        c.params[1] = after;
        c.params[2] = lim;
    } else {
        c.sql = "SELECT event FROM eai.audit_list_all($1::bigint, $2::int)";
        c.n = 2;
        c.params[0] = after;
        c.params[1] = lim;
    }
    if (eai_pg_simple(pg, tenant, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

static int eai_pg_build_heads(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                              struct eai_error **err)
{
    c->out = json_array();
    for (int i = 0; c->out && i < PQntuples(r); i++) {
        json_t *o = json_object();
        if (!o || json_array_append_new(c->out, o) < 0 ||
            json_object_set_new(o, "tenant_id", eai_pg_cell_str(r, i, 0)) < 0 ||
            json_object_set_new(o, "seq", eai_pg_cell_int(r, i, 1)) < 0 ||
            json_object_set_new(o, "hash", eai_pg_cell_str(r, i, 2)) < 0) {
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
        }
    }
    if (!c->out) {
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    return 0;
}

int eai_pg_audit_heads(void *self, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT tenant_id::text, seq, hash FROM eai.audit_heads()",
        .build = eai_pg_build_heads};
    if (eai_pg_simple(pg, NULL, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

/* ---------------------------------------------------------------- manifests */

struct eai_pg_manifest_ctx {
    const char *tenant, *kind, *name, *doc_text;
    const json_t *audit;
    int delete;
};

static int eai_pg_manifest_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_manifest_ctx *c = arg;
    int rc;
    if (c->delete) {
        const char *p[3] = {c->tenant, c->kind, c->name};
        PGresult *r = eai_pg_q(tx, "DELETE FROM eai.manifests WHERE tenant_id = $1 AND kind = $2"
                                   " AND name = $3 RETURNING id", 3, p, err);
        if (!r)
            return -1;
        int n = PQntuples(r);
        PQclear(r);
        if (n == 0) {
            return eai_pg_fail(tx->pg, err, EAI_E_NOT_FOUND, "manifest not found");
        }
        rc = 0;
    } else {
        const char *p[4] = {c->tenant, c->kind, c->name, c->doc_text};
        PGresult *r = eai_pg_q(tx, "INSERT INTO eai.manifests (tenant_id, kind, name, doc)"
                                   " VALUES ($1, $2, $3, $4::json)"
                                   " ON CONFLICT (tenant_id, kind, name) DO UPDATE"
                                   " SET doc = EXCLUDED.doc, updated_at = now()"
                                   " RETURNING (xmax = 0)", 4, p, err);
        if (!r)
            return -1;
        rc = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't' ? EAI_STORE_CREATED : EAI_STORE_UPDATED;
        PQclear(r);
    }
    if (c->audit && eai_pg_audit_append_tx(tx, c->tenant, c->audit, err) < 0)
        return -1;
    return rc;
}

int eai_pg_manifest_put(void *self, const char *tenant, const char *kind, const char *name,
                        const json_t *doc, const json_t *audit, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant) || !kind || !name || !doc) {
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "manifest_put: bad arguments");
    }
    char *text = eai_pg_dump(doc);
    if (!text) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    struct eai_pg_manifest_ctx c = {.tenant = tenant, .kind = kind, .name = name, .doc_text = text,
                                    .audit = audit};
    int rc = eai_pg_run(pg, tenant, eai_pg_manifest_body, &c, err);
    free(text);
    return rc;
}

int eai_pg_manifest_delete(void *self, const char *tenant, const char *kind, const char *name,
                           const json_t *audit, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant) || !kind || !name) {
        return eai_pg_fail(pg, err, EAI_E_NOT_FOUND, "manifest not found");
    }
    struct eai_pg_manifest_ctx c = {.tenant = tenant, .kind = kind, .name = name, .audit = audit,
                                    .delete = 1};
    return eai_pg_run(pg, tenant, eai_pg_manifest_body, &c, err) < 0 ? -1 : 0;
}

static int eai_pg_build_first_json(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                                   struct eai_error **err)
{
    if (PQntuples(r) == 0)
        return 0;
    c->out = eai_pg_cell_json(r, 0, 0);
    if (!c->out) {
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "bad stored JSON");
    }
    return 0;
}

static int eai_pg_build_json_rows(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                                  struct eai_error **err)
{
    c->out = json_array();
    for (int i = 0; c->out && i < PQntuples(r); i++) {
        json_t *d = eai_pg_cell_json(r, i, 0);
        if (!d || json_array_append_new(c->out, d) < 0) {
            json_decref(c->out);
            c->out = NULL;
        }
    }
    if (!c->out)
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "bad stored JSON or out of memory");
    return 0;
}

int eai_pg_manifest_list(void *self, const char *tenant, const char *kind, const char *after, int limit,
                         json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (limit < 1 || limit > 1000)
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "manifest_list: limit outside 1..1000");
    if (!eai_pg_uuid_valid(tenant) || !kind) {
        *out = json_array();
        return *out ? 0 : eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    char lim[24];
    eai_pg_i64(limit, lim);
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT doc FROM eai.manifests WHERE tenant_id = $1 AND kind = $2 AND name COLLATE \"C\" > $3"
               " ORDER BY name COLLATE \"C\" LIMIT $4::int",
        .n = 4, .params = {tenant, kind, after ? after : "", lim}, .build = eai_pg_build_json_rows};
    if (eai_pg_simple(pg, tenant, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

int eai_pg_manifest_get(void *self, const char *tenant, const char *kind, const char *name,
                        json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!eai_pg_uuid_valid(tenant) || !kind || !name)
        return 0;
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT doc FROM eai.manifests WHERE tenant_id = $1 AND kind = $2 AND name = $3",
        .n = 3, .params = {tenant, kind, name}, .build = eai_pg_build_first_json};
    if (eai_pg_simple(pg, tenant, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

/* ---------------------------------------------------------------- outbox */

int eai_pg_outbox_insert_tx(struct eai_pg_tx *tx, const char *tenant, const char *exec_uuid,
                            const json_t *event, struct eai_error **err)
{
    if (json_is_array(event)) {  /* several rows (usage event, completion callback) */
        size_t i;
        const json_t *one;
        json_array_foreach(event, i, one)
            if (eai_pg_outbox_insert_tx(tx, tenant, exec_uuid, one, err) < 0)
                return -1;
        return 0;
    }
    char *text = eai_pg_dump(event);
    if (!text) {
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    const char *p[3] = {tenant, exec_uuid, text};
    int rc = eai_pg_cmd(tx, "INSERT INTO eai.usage_outbox (tenant_id, execution_id, event)"
                            " VALUES ($1, $2, $3::json)", 3, p, err);
    free(text);
    return rc;
}

struct eai_pg_outbox_append_ctx {
    const char *tenant;
    const json_t *event, *audit;
};

static int eai_pg_outbox_append_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_outbox_append_ctx *c = arg;
    if (c->event && eai_pg_outbox_insert_tx(tx, c->tenant, NULL, c->event, err) < 0)
        return -1;
    if (c->audit && eai_pg_audit_append_tx(tx, c->tenant, c->audit, err) < 0)
        return -1;
    return 0;
}

/* A session's lifetime usage and the audit event of its end, in one
 * transaction (storage.h outbox_append): no execution row behind it. */
int eai_pg_outbox_append(void *self, const char *tenant, const json_t *usage_event, const json_t *audit,
                         struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant)) {
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "outbox_append: bad tenant");
    }
    struct eai_pg_outbox_append_ctx c = {.tenant = tenant, .event = usage_event, .audit = audit};
    return eai_pg_run(pg, tenant, eai_pg_outbox_append_body, &c, err) < 0 ? -1 : 0;
}

static int eai_pg_build_outbox(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                               struct eai_error **err)
{
    c->out = json_array();
    for (int i = 0; c->out && i < PQntuples(r); i++) {
        json_t *o = json_object();
        if (!o || json_array_append_new(c->out, o) < 0 ||
            json_object_set_new(o, "id", eai_pg_cell_str(r, i, 0)) < 0 ||
            json_object_set_new(o, "tenant_id", eai_pg_cell_str(r, i, 1)) < 0 ||
            json_object_set_new(o, "event", eai_pg_cell_json(r, i, 2)) < 0 ||
            json_object_set_new(o, "attempts", eai_pg_cell_int(r, i, 3)) < 0) {
            return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
        }
    }
    if (!c->out) {
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
    }
    return 0;
}

int eai_pg_outbox_fetch(void *self, int limit, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    char lim[24];
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT id::text, tenant_id::text, event, attempts FROM eai.outbox_fetch($1::int)",
        .n = 1, .params = {eai_pg_i64(limit > 0 ? limit : 100, lim)}, .build = eai_pg_build_outbox};
    if (eai_pg_simple(pg, NULL, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

int eai_pg_outbox_ack(void *self, const char *id, int delivered, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(id)) {
        return eai_pg_fail(pg, err, EAI_E_NOT_FOUND, "unknown outbox row");
    }
    struct eai_pg_simple_ctx c = {.sql = "SELECT eai.outbox_ack($1, $2::boolean)", .n = 2,
                                  .params = {id, delivered ? "true" : "false"}};
    return eai_pg_simple(pg, NULL, &c, err) < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- ledger */

static int eai_pg_build_inserted(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                                 struct eai_error **err)
{
    c->rc = PQntuples(r) == 1 ? EAI_STORE_CREATED : EAI_STORE_EXISTS;
    return 0;
}

static const char *eai_pg_event_time(const json_t *ev)
{
    static const char *const keys[] = {"finished_at", "time", "timestamp", "created_at", NULL};
    for (int i = 0; keys[i]; i++) {
        const char *v = eai_jstr(ev, keys[i]);
        if (v && *v)
            return v;
    }
    return NULL;
}

int eai_pg_ledger_insert(void *self, const char *tenant, const json_t *event, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant) || !json_is_object(event)) {
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "ledger_insert: bad arguments");
    }
    char gen[37], now[32];
    const char *eid = eai_jstr(event, "id");
    if (!eid) {
        eai_pg_uuid_v4(gen);
        eid = gen;
    }
    const char *when = eai_pg_event_time(event);
    int64_t when_ms;
    if (!when || eai_time_parse_rfc3339(when, &when_ms) < 0)
        when_ms = eai_now_ms();
    eai_time_rfc3339(when_ms, now);
    when = now;
    char *text = eai_pg_dump(event);
    if (!text) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    struct eai_pg_simple_ctx c = {
        .sql = "INSERT INTO eai.usage_ledger (tenant_id, event_id, project_id, run_id, occurred_at, event)"
               " VALUES ($1, $2, $3, $4, $5::timestamptz, $6::json)"
               " ON CONFLICT (tenant_id, event_id) DO NOTHING RETURNING id",
        .n = 6,
        .params = {tenant, eid, eai_jstr(event, "project_id"), eai_jstr(event, "run_id"), when,
                   text},
        .build = eai_pg_build_inserted};
    int rc = eai_pg_simple(pg, tenant, &c, err);
    free(text);
    return rc;
}

int eai_pg_ledger_query(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!eai_pg_uuid_valid(tenant)) {
        *out = json_array();
        return *out ? 0 : -1;
    }
    json_int_t limit = json_integer_value(json_object_get(filter, "limit"));
    if (limit < 1 || limit > 10000)
        limit = limit < 1 ? 1000 : 10000;
    /* from / to: RFC 3339 only (PostgreSQL alone would take 'yesterday'). */
    char from_ms[24], to_ms[24];
    const char *from_p = NULL, *to_p = NULL;
    const char *from = eai_jstr(filter, "from"), *to = eai_jstr(filter, "to");
    int64_t v;
    if (from) {
        if (eai_time_parse_rfc3339(from, &v) < 0) {
            return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "from: not an RFC 3339 time");
        }
        from_p = eai_pg_i64(v, from_ms);
    }
    if (to) {
        if (eai_time_parse_rfc3339(to, &v) < 0) {
            return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "to: not an RFC 3339 time");
        }
        to_p = eai_pg_i64(v, to_ms);
    }
    char lim[24], after_ms[24];
    const json_t *am = json_object_get(filter, "after_ms");
    const char *after_p = json_is_integer(am) ? eai_pg_i64((int64_t)json_integer_value(am), after_ms) : NULL;
    const char *after_id = eai_jstr(filter, "after_id");
    /* [from, to) like SQLite; the cursor (after_ms, after_id) is the last
     * row of the previous page in (time, event id) order */
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT event FROM eai.usage_ledger WHERE tenant_id = $1"
               " AND ($2::text IS NULL OR project_id = $2)"
               " AND ($3::text IS NULL OR run_id = $3)"
               " AND ($4::bigint IS NULL OR occurred_at >= to_timestamp($4::bigint / 1000.0))"
               " AND ($5::bigint IS NULL OR occurred_at < to_timestamp($5::bigint / 1000.0))"
               " AND ($7::text IS NULL OR (event->>'agent_id') = $7)"
               " AND ($8::bigint IS NULL OR occurred_at > to_timestamp($8::bigint / 1000.0)"
               "      OR (occurred_at = to_timestamp($8::bigint / 1000.0) AND event_id COLLATE \"C\" > $9))"
               " ORDER BY occurred_at, event_id COLLATE \"C\" LIMIT $6::int",
        .n = 9,
        .params = {tenant, eai_jstr(filter, "project_id"), eai_jstr(filter, "run_id"), from_p,
                   to_p, eai_pg_i64(limit, lim), eai_jstr(filter, "agent_id"), after_p,
                   after_p ? (after_id ? after_id : "") : NULL},
        .build = eai_pg_build_json_list};
    if (eai_pg_simple(pg, tenant, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

/* ---------------------------------------------------------------- kv (system tenant rows) */

static int eai_pg_build_kv(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                           struct eai_error **err)
{
    if (PQntuples(r) == 1)
        c->out = eai_pg_cell_str(r, 0, 0);
    return 0;
}

int eai_pg_kv_get(void *self, const char *key, char **value, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *value = NULL;
    if (!key)
        return 0;
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT value FROM eai.kv WHERE tenant_id = $1 AND key = $2", .n = 2,
        .params = {EAI_SYSTEM_TENANT, key}, .build = eai_pg_build_kv};
    if (eai_pg_simple(pg, EAI_SYSTEM_TENANT, &c, err) < 0)
        return -1;
    if (json_is_string(c.out)) {
        *value = strdup(json_string_value(c.out));
        json_decref(c.out);
        if (!*value) {
            return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
        }
    }
    return 0;
}

int eai_pg_kv_set(void *self, const char *key, const char *value, struct eai_error **err)
{
    struct eai_pg *pg = self;
    if (!key || !value) {
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "kv_set: key and value are required");
    }
    struct eai_pg_simple_ctx c = {
        .sql = "INSERT INTO eai.kv (tenant_id, key, value) VALUES ($1, $2, $3)"
               " ON CONFLICT (tenant_id, key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
        .n = 3, .params = {EAI_SYSTEM_TENANT, key, value}};
    return eai_pg_simple(pg, EAI_SYSTEM_TENANT, &c, err) < 0 ? -1 : 0;
}

/* ---------------------------------------------------------------- quotas */

static int eai_pg_build_usage(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r,
                              struct eai_error **err)
{
    if (PQntuples(r) != 1)
        return eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "tenant_usage: no row");
    c->out = json_pack("{s:I, s:I, s:I}", "executions_since", (json_int_t)atoll(PQgetvalue(r, 0, 0)),
                       "stored_bytes", (json_int_t)atoll(PQgetvalue(r, 0, 1)),
                       "manifests", (json_int_t)atoll(PQgetvalue(r, 0, 2)));
    return c->out ? 0 : eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
}

/* Quotas (docs/configuration.md, "Quotas and retention"): the tenant's
 * footprint under its own row-level security context. */
int eai_pg_tenant_usage(void *self, const char *tenant, int64_t since_ms, json_t **out, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *out = NULL;
    if (!eai_pg_uuid_valid(tenant))
        return eai_pg_fail(pg, err, EAI_E_VALIDATION_FAILED, "tenant_usage: bad tenant");
    char since[24];
    eai_pg_i64(since_ms, since);
    struct eai_pg_simple_ctx c = {
        .sql = "SELECT"
               " (SELECT count(*) FROM eai.sandbox_executions WHERE tenant_id = $1::uuid"
               "   AND created_at >= to_timestamp($2::bigint / 1000.0)),"
               " (SELECT coalesce(sum(octet_length(doc::text)), 0) FROM eai.sandbox_executions"
               "   WHERE tenant_id = $1::uuid)"
               " + (SELECT coalesce(sum(size), 0) FROM eai.execution_files WHERE tenant_id = $1::uuid)"
               " + (SELECT coalesce(sum(octet_length(doc::text)), 0) FROM eai.manifests WHERE tenant_id = $1::uuid),"
               " (SELECT count(*) FROM eai.manifests WHERE tenant_id = $1::uuid)",
        .n = 2, .params = {tenant, since}, .build = eai_pg_build_usage};
    if (eai_pg_simple(pg, tenant, &c, err) < 0)
        return -1;
    *out = c.out;
    return 0;
}

/* ---------------------------------------------------------------- retention */

struct eai_pg_prune_ctx {
    const char *tenant;
    char before[24], limit[24];
    int64_t before_ms;
    int64_t n;
};

/* One tenant: delete (eai.exec_prune) and append the audit anchor, in the
 * tenant's own transaction. */
static int eai_pg_prune_body(struct eai_pg_tx *tx, void *arg, struct eai_error **err)
{
    struct eai_pg_prune_ctx *c = arg;
    c->n = 0;
    const char *p[3] = {c->tenant, c->before, c->limit};
    PGresult *r = eai_pg_q(tx, "SELECT id::text FROM eai.exec_prune($1::uuid, $2::bigint, $3::int)", 3, p, err);
    if (!r)
        return -1;
    int n = PQntuples(r);
    int rc = 0;
    if (n > 0) {
        char id[37], now[32], before[32];
        eai_pg_uuid_v4(id);
        eai_time_rfc3339(eai_now_ms(), now);
        eai_time_rfc3339(c->before_ms, before);
        json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:s, s:s, s:s}}", "id", id, "time", now,
                               "actor", "system:retention", "action", "retention.pruned", "target", "executions",
                               "decision", "allow", "details", "executions", (json_int_t)n, "first_id",
                               PQgetvalue(r, 0, 0), "last_id", PQgetvalue(r, n - 1, 0), "created_before", before);
        rc = ev ? eai_pg_audit_append_tx(tx, c->tenant, ev, err) : eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "oom");
        json_decref(ev);
    }
    PQclear(r);
    if (rc == 0)
        c->n = n;
    return rc;
}

static int eai_pg_build_ids(struct eai_pg_tx *tx, struct eai_pg_simple_ctx *c, PGresult *r, struct eai_error **err)
{
    c->out = json_array();
    for (int i = 0; c->out && i < PQntuples(r); i++)
        json_array_append_new(c->out, json_string(PQgetvalue(r, i, 0)));
    return c->out ? 0 : eai_pg_fail(tx->pg, err, EAI_E_INTERNAL, "out of memory");
}

int eai_pg_exec_prune(void *self, int64_t before_ms, int limit, int64_t *deleted, struct eai_error **err)
{
    struct eai_pg *pg = self;
    *deleted = 0;
    char before[24], lim[24];
    eai_pg_i64(before_ms, before);
    eai_pg_i64(limit > 0 ? limit : 1, lim);
    struct eai_pg_simple_ctx c = {.sql = "SELECT tenant_id::text FROM eai.prune_tenants($1::bigint, $2::int)",
                                  .n = 2, .params = {before, lim}, .build = eai_pg_build_ids};
    if (eai_pg_simple(pg, NULL, &c, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < json_array_size(c.out) && *deleted < limit; i++) {
        struct eai_pg_prune_ctx p = {.tenant = json_string_value(json_array_get(c.out, i)), .before_ms = before_ms};
        snprintf(p.before, sizeof p.before, "%s", before);
        eai_pg_i64(limit - *deleted, p.limit);
        if (eai_pg_run(pg, p.tenant, eai_pg_prune_body, &p, err) < 0) {
            rc = -1;
            break;
        }
        *deleted += p.n;
    }
    json_decref(c.out);
    if (rc == 0) {
        /* and the records of old ended sessions (migration 0008) */
        struct eai_pg_simple_ctx sc = {.sql = "SELECT eai.session_prune($1::bigint, $2::int)", .n = 2,
                                       .params = {before, lim}};
        rc = eai_pg_simple(pg, NULL, &sc, err) < 0 ? -1 : 0;
        json_decref(sc.out);
    }
    return rc;
}
