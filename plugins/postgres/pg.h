/*
 * PostgreSQL storage plugin: internal declarations shared by its files.
 *
 * postgres.c   descriptor, create/destroy, ops table, migrate, ping
 * pg_pool.c    connection pool, transactions, retries, error mapping
 * pg_exec.c    executions, files
 * pg_data.c    tenants, keys, manifests, audit, outbox, ledger, kv
 * pg_util.c    uuids, time, base64, row -> json helpers
 *
 * Ops run on core's worker threads (never the loop thread), so blocking
 * libpq calls are fine here; every op borrows one pooled connection for
 * one transaction.  See docs/postgres.md.
 */
#ifndef EAI_PG_H
#define EAI_PG_H

#include <pthread.h>
#include <stdint.h>
#include <libpq-fe.h>
#include <eai/storage.h>
#include "eaibase.h" /* eai_now_ms, eai_monotonic_ms, eai_time_rfc3339, eai_jstr */

#define EAI_PG_COMPONENT "postgres"

struct eai_pg_conn {
    PGconn *conn;
    int busy;
};

struct eai_pg {
    const struct eai_host *host;
    char *url;
    int pool_size;
    int statement_timeout_ms;
    int connect_timeout_s;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct eai_pg_conn *conns;
    int64_t backoff_until_ms;   /* no connect attempt before this (monotonic ms) */
    int64_t backoff_ms;         /* current backoff step; 0 when healthy */
    int down_logged;
    /* Serving-role check (eai_pg_run): 0 not yet, 1 safe, -1 refused with
     * role_msg (written under mu before role_state is set to -1). */
    int role_state;
    char role_msg[512];
};

/* One transaction's context handed to an op body. */
struct eai_pg_tx {
    struct eai_pg *pg;
    PGconn *conn;
    int conn_lost;              /* a connection-level failure happened */
    char sqlstate[6];           /* SQLSTATE of the last failed statement */
};

/* An op body run inside BEGIN ... COMMIT; returns >= 0 to commit (the value
 * is handed back by eai_pg_run), < 0 to roll back (with *err set). */
typedef int (*eai_pg_body_fn)(struct eai_pg_tx *tx, void *ctx, struct eai_error **err);

/* Run body in one transaction on a pooled connection.  tenant: uuid set as
 * app.tenant_id (set_config(..., true)) first; NULL for system ops.
 * Retries once on a fresh connection when the connection broke before
 * COMMIT was sent, and up to 3 times on serialization failures/deadlocks.
 * The body must therefore only publish its outputs at the end (or reset
 * them on entry). */
int eai_pg_run(struct eai_pg *pg, const char *tenant, eai_pg_body_fn body, void *ctx,
               struct eai_error **err);
/* Before its first transaction, eai_pg_run checks that the role it connects
 * as is not superuser, not BYPASSRLS and not (a member of) the owner of an
 * eai table; otherwise every op fails with EAI_E_STORAGE_UNAVAILABLE and
 * a message saying so (ping: EAI_E_FORBIDDEN, so start can refuse).  The
 * check passes for good only once the schema exists.  eai_pg_run_owner
 * skips it: for `eaid migrate`, which must connect as the owner. */
int eai_pg_run_owner(struct eai_pg *pg, const char *tenant, eai_pg_body_fn body, void *ctx,
                     struct eai_error **err);
/* 1 when the serving-role check refused this instance's role. */
int eai_pg_role_refused(struct eai_pg *pg);

/* PQexecParams with text parameters (NULL entries are SQL NULL).  Returns
 * the result when its status is COMMAND_OK or TUPLES_OK, else NULL with
 * *err (mapped from SQLSTATE) and tx->conn_lost set on connection loss. */
PGresult *eai_pg_q(struct eai_pg_tx *tx, const char *sql, int n, const char *const *params,
                   struct eai_error **err);
/* Same with explicit lengths/formats (binary parameters such as bytea). */
PGresult *eai_pg_qx(struct eai_pg_tx *tx, const char *sql, int n, const char *const *params,
                    const int *lengths, const int *formats, struct eai_error **err);
/* Run a statement and drop the result; 0 or -1. */
int eai_pg_cmd(struct eai_pg_tx *tx, const char *sql, int n, const char *const *params,
               struct eai_error **err);

struct eai_error *eai_pg_err(struct eai_pg *pg, enum eai_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error return in one statement: "postgres: MSG" (libpq's trailing newline
 * trimmed) into *err unless err is NULL or *err is set; returns -1. */
int eai_pg_fail(struct eai_pg *pg, struct eai_error **err, enum eai_code code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Audit: append event (borrowed; a sealed copy is stored) for tenant inside
 * tx: per-tenant advisory lock, last hash, host->audit_seal, insert. */
int eai_pg_audit_append_tx(struct eai_pg_tx *tx, const char *tenant, const json_t *event,
                           struct eai_error **err);
/* Outbox insert inside tx. */
int eai_pg_outbox_insert_tx(struct eai_pg_tx *tx, const char *tenant, const char *exec_uuid,
                            const json_t *event, struct eai_error **err);

/* --- utilities (pg_util.c) */
int eai_pg_uuid_valid(const char *s);
void eai_pg_uuid_v4(char out[37]);
/* "sbx_<uuid>" -> uuid (37 bytes) ; 0 or -1 when malformed. */
int eai_pg_exec_uuid(const char *id, char out[37]);
unsigned char *eai_pg_b64_decode(const char *s, size_t *outlen);
char *eai_pg_b64_encode(const unsigned char *d, size_t n);
/* Parse a result cell as JSON (NULL cell -> json null); NULL on bad JSON. */
json_t *eai_pg_cell_json(const PGresult *r, int row, int col);
/* Cell as json string / integer / bool, NULL cell -> json null. */
json_t *eai_pg_cell_str(const PGresult *r, int row, int col);
json_t *eai_pg_cell_int(const PGresult *r, int row, int col);
json_t *eai_pg_cell_bool(const PGresult *r, int row, int col);
json_t *eai_pg_cell_time(const PGresult *r, int row, int col);   /* epoch ms cell -> RFC 3339 */
/* JSON value -> malloc'd compact text (JSON_COMPACT, keys as inserted). */
char *eai_pg_dump(const json_t *v);
/* Decimal text of v into buf. */
const char *eai_pg_i64(int64_t v, char buf[24]);

/* --- ops (pg_exec.c, pg_data.c) */
int eai_pg_tenant_create(void *self, const char *name, json_t **out, struct eai_error **err);
int eai_pg_tenant_get(void *self, const char *id, json_t **out, struct eai_error **err);
int eai_pg_key_create(void *self, const char *tenant, const char *key_id,
                      const char *secret_hash_hex, const char *name, struct eai_error **err);
int eai_pg_key_get(void *self, const char *key_id, json_t **out, struct eai_error **err);
int eai_pg_key_revoke(void *self, const char *key_id, struct eai_error **err);
int eai_pg_tenant_list(void *self, const char *after, int limit, json_t **out, struct eai_error **err);
int eai_pg_key_list(void *self, const char *tenant, json_t **out, struct eai_error **err);
int eai_pg_tenant_usage(void *self, const char *tenant, int64_t since_ms, json_t **out, struct eai_error **err);
int eai_pg_exec_prune(void *self, int64_t before_ms, int limit, int64_t *deleted, struct eai_error **err);
int eai_pg_key_create_expiring(void *self, const char *tenant, const char *key_id,
                               const char *secret_hash_hex, const char *name, int64_t expires_ms,
                               struct eai_error **err);
int eai_pg_exec_create(void *self, const char *tenant, const json_t *exec, const json_t *audit,
                       json_t **existing, struct eai_error **err);
int eai_pg_exec_get(void *self, const char *tenant, const char *id, json_t **out,
                    struct eai_error **err);
int eai_pg_exec_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                     struct eai_error **err);
int eai_pg_exec_claim(void *self, const char *owner, int64_t lease_ms, int max, int per_tenant_max,
                      json_t **out, struct eai_error **err);
int eai_pg_exec_claim_excluding(void *self, const char *owner, int64_t lease_ms, int max,
                                int per_tenant_max, const json_t *exclude, json_t **out,
                                struct eai_error **err);
int eai_pg_exec_renew(void *self, const char *owner, int64_t lease_ms, json_t **cancel_ids,
                      struct eai_error **err);
int eai_pg_exec_cancel(void *self, const char *tenant, const char *id, const json_t *cancelled_patch,
                       const json_t *audit, json_t **out, struct eai_error **err);
int eai_pg_exec_finish(void *self, const char *tenant, const char *id, const json_t *patch,
                       const json_t *files, const json_t *usage_event, const json_t *audit,
                       struct eai_error **err);
int eai_pg_exec_stale(void *self, int64_t now_ms, json_t **out, struct eai_error **err);
int eai_pg_exec_counts(void *self, int64_t *queued, int64_t *running, struct eai_error **err);
int eai_pg_file_get(void *self, const char *tenant, const char *exec_id, const char *path,
                    unsigned char **data, size_t *len, struct eai_error **err);
int eai_pg_manifest_put(void *self, const char *tenant, const char *kind, const char *name,
                        const json_t *doc, const json_t *audit, struct eai_error **err);
int eai_pg_manifest_list(void *self, const char *tenant, const char *kind, const char *after, int limit,
                         json_t **out, struct eai_error **err);
int eai_pg_manifest_get(void *self, const char *tenant, const char *kind, const char *name,
                        json_t **out, struct eai_error **err);
int eai_pg_manifest_delete(void *self, const char *tenant, const char *kind, const char *name,
                           const json_t *audit, struct eai_error **err);
int eai_pg_audit_append(void *self, const char *tenant, const json_t *event, struct eai_error **err);
int eai_pg_audit_list(void *self, const char *tenant, int64_t after_seq, int limit, json_t **out,
                      struct eai_error **err);
int eai_pg_outbox_fetch(void *self, int limit, json_t **out, struct eai_error **err);
int eai_pg_outbox_append(void *self, const char *tenant, const json_t *usage_event, const json_t *audit,
                         struct eai_error **err);
int eai_pg_outbox_ack(void *self, const char *id, int delivered, struct eai_error **err);
int eai_pg_ledger_insert(void *self, const char *tenant, const json_t *event, struct eai_error **err);
int eai_pg_ledger_query(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err);
int eai_pg_kv_get(void *self, const char *key, char **value, struct eai_error **err);
int eai_pg_kv_set(void *self, const char *key, const char *value, struct eai_error **err);
int eai_pg_audit_heads(void *self, json_t **out, struct eai_error **err);
/* pg_agent.c: the agent view (ABI 1.3) */
int eai_pg_run_get(void *self, const char *tenant, const char *run_id, int limit, json_t **out,
                   struct eai_error **err);
int eai_pg_run_list(void *self, const char *tenant, const json_t *filter, json_t **out, struct eai_error **err);
int eai_pg_agent_list(void *self, const char *tenant, const char *after, int limit, json_t **out,
                      struct eai_error **err);
int eai_pg_agent_get(void *self, const char *tenant, const char *agent_id, json_t **out, struct eai_error **err);
/* pg_session.c: stored sessions (ABI 1.4) */
int eai_pg_session_put(void *self, const char *tenant, const json_t *doc, const char *expect_owner,
                       struct eai_error **err);
int eai_pg_session_get(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err);
int eai_pg_session_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err);
int eai_pg_session_owned(void *self, const char *owner, int limit, json_t **out, struct eai_error **err);
/* pg_snapshot.c: snapshot records (ABI 1.5) */
int eai_pg_snapshot_put(void *self, const char *tenant, const json_t *doc, struct eai_error **err);
int eai_pg_snapshot_get(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err);
int eai_pg_snapshot_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                         struct eai_error **err);
int eai_pg_snapshot_delete(void *self, const char *tenant, const char *id, struct eai_error **err);
int eai_pg_snapshot_owned(void *self, const char *owner, int limit, json_t **out, struct eai_error **err);

/* Pool lifecycle (pg_pool.c). */
int eai_pg_pool_init(struct eai_pg *pg, struct eai_error **err);
void eai_pg_pool_close(struct eai_pg *pg);

/* Embedded migrations (generated from migrations/postgres/NNNN_name.sql at build time). */
struct eai_pg_migration {
    int version;
    const char *name;
    const char *sql;
};
extern const struct eai_pg_migration eai_pg_migrations[];
extern const int eai_pg_migrations_count;

#endif
