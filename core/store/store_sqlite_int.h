/*
 * Private to the built-in SQLite backend (core/store/): the
 * instance, the connection pool, transaction and statement helpers, and the
 * ops each file implements.  See core/store/store_sqlite.c for the design.
 */
#ifndef EAI_STORE_SQLITE_INT_H
#define EAI_STORE_SQLITE_INT_H

#include <pthread.h>
#include <stdint.h>

#include <jansson.h>
#include <sqlite3.h>

#include "store/store_sqlite.h"

#define EAI_SQ_BEGIN_TRIES 4
#define EAI_SQ_IDEMPOTENCY_MS (24LL * 3600 * 1000)
#define EAI_SQ_CACHE_KIB 512          /* default PRAGMA cache_size of a connection */

struct eai_sq_conn {
    sqlite3 *db;
    struct eai_sq_conn *next;
};

struct eai_sq {
    const struct eai_host *host;
    char *path;
    int busy_ms;
    int test_delay_ms;           /* EAI_TEST_STORAGE_DELAY_MS: slow storage, tests only */
    int pool_max;
    int cache_kib;               /* page cache of one connection (PRAGMA cache_size) */
    int sync_full;               /* synchronous: full (fsync at every commit) or normal */
    pthread_mutex_t mu;
    pthread_mutex_t wmu;         /* this process's writers, one at a time (eai_sq_begin) */
    pthread_cond_t cv;
    struct eai_sq_conn *idle;
    int open_count;
};

/* Take a pooled connection for the rest of the op (returns -1 when none). */
#define SQ_WITH_CONN(s, err, c)                         \
    struct eai_sq_conn *c = eai_sq_acquire((s), (err)); \
    if (!c)                                             \
        return -1

/* store_sqlite.c: helpers, errors, pool, transactions, audit append */
int eai_sq_parse_time(const char *s, int64_t *out);
int eai_sq_fail(struct eai_sq *s, struct eai_error **err, enum eai_code code,
                int errno_cause, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
int eai_sq_db_fail(struct eai_sq *s, struct eai_error **err, sqlite3 *db, const char *what);
int eai_sq_oom(struct eai_sq *s, struct eai_error **err);
struct eai_sq_conn *eai_sq_acquire(struct eai_sq *s, struct eai_error **err);
void eai_sq_release(struct eai_sq *s, struct eai_sq_conn *c);
int eai_sq_begin(struct eai_sq *s, sqlite3 *db, struct eai_error **err);
int eai_sq_exec_sql(struct eai_sq *s, sqlite3 *db, const char *sql, struct eai_error **err);
int eai_sq_commit(struct eai_sq *s, sqlite3 *db, struct eai_error **err);
void eai_sq_rollback(sqlite3 *db);
sqlite3_stmt *eai_sq_prep(struct eai_sq *s, sqlite3 *db, const char *sql,
                          struct eai_error **err);
void eai_sq_bind_str(sqlite3_stmt *st, int i, const char *v);
int eai_sq_step_done(struct eai_sq *s, sqlite3 *db, sqlite3_stmt *st, const char *what,
                     struct eai_error **err);
const char *eai_sq_col_text(sqlite3_stmt *st, int i);
json_t *eai_sq_col_json(sqlite3_stmt *st, int i);
json_t *eai_sq_col_str_or_null(sqlite3_stmt *st, int i);
/* Step st to the end, turning each row into a value with row() (NULL: a bad
 * row, refused); *out = the array.  what names the query in errors. */
int eai_sq_collect(struct eai_sq *s, sqlite3 *db, sqlite3_stmt *st, json_t *(*row)(sqlite3_stmt *),
                   const char *what, json_t **out, struct eai_error **err);
char *eai_sq_dump(const json_t *j);
int eai_sq_audit_insert(struct eai_sq *s, sqlite3 *db, const char *tenant,
                        const json_t *event, struct eai_error **err);

/* store_sqlite_exec.c: executions and their files */
int eai_sq_exec_create(void *self, const char *tenant, const json_t *exec,
                       const json_t *audit, json_t **existing, struct eai_error **err);
int eai_sq_exec_get(void *self, const char *tenant, const char *id, json_t **out,
                    struct eai_error **err);
int eai_sq_exec_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                     struct eai_error **err);
int eai_sq_exec_claim(void *self, const char *owner, int64_t lease_ms, int max,
                      int per_tenant_max, json_t **out, struct eai_error **err);
int eai_sq_exec_claim_excluding(void *self, const char *owner, int64_t lease_ms, int max,
                                int per_tenant_max, const json_t *exclude, json_t **out,
                                struct eai_error **err);
int eai_sq_exec_renew(void *self, const char *owner, int64_t lease_ms, json_t **cancel_ids,
                      struct eai_error **err);
int eai_sq_exec_cancel(void *self, const char *tenant, const char *id,
                       const json_t *cancelled_patch, const json_t *audit, json_t **out,
                          struct eai_error **err);
int eai_sq_exec_finish(void *self, const char *tenant, const char *id, const json_t *patch,
                       const json_t *files, const json_t *usage_event, const json_t *audit,
                          struct eai_error **err);
int eai_sq_exec_stale(void *self, int64_t now_ms, json_t **out, struct eai_error **err);
int eai_sq_outbox_append(void *self, const char *tenant, const json_t *usage_event, const json_t *audit,
                         struct eai_error **err);
int eai_sq_exec_counts(void *self, int64_t *queued, int64_t *running, struct eai_error **err);
int eai_sq_file_get(void *self, const char *tenant, const char *exec_id, const char *path,
                    unsigned char **data, size_t *len, struct eai_error **err);

/* store_sqlite_data.c: tenants, keys, manifests, audit, outbox, ledger, kv */
int eai_sq_tenant_create(void *self, const char *name, json_t **out, struct eai_error **err);
int eai_sq_tenant_get(void *self, const char *id, json_t **out, struct eai_error **err);
int eai_sq_key_create(void *self, const char *tenant, const char *key_id,
                      const char *secret_hash_hex, const char *name, struct eai_error **err);
int eai_sq_key_get(void *self, const char *key_id, json_t **out, struct eai_error **err);
int eai_sq_key_revoke(void *self, const char *key_id, struct eai_error **err);
int eai_sq_manifest_put(void *self, const char *tenant, const char *kind, const char *name,
                        const json_t *doc, const json_t *audit, struct eai_error **err);
int eai_sq_manifest_list(void *self, const char *tenant, const char *kind, const char *after, int limit,
                         json_t **out, struct eai_error **err);
int eai_sq_manifest_get(void *self, const char *tenant, const char *kind, const char *name,
                        json_t **out, struct eai_error **err);
int eai_sq_manifest_delete(void *self, const char *tenant, const char *kind, const char *name,
                           const json_t *audit, struct eai_error **err);
int eai_sq_audit_append(void *self, const char *tenant, const json_t *event,
                        struct eai_error **err);
int eai_sq_audit_list(void *self, const char *tenant, int64_t after_seq, int limit,
                      json_t **out, struct eai_error **err);
int eai_sq_audit_heads(void *self, json_t **out, struct eai_error **err);
int eai_sq_outbox_fetch(void *self, int limit, json_t **out, struct eai_error **err);
int eai_sq_outbox_ack(void *self, const char *id, int delivered, struct eai_error **err);
int eai_sq_ledger_insert(void *self, const char *tenant, const json_t *event,
                         struct eai_error **err);
int eai_sq_ledger_query(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err);
/* store_sqlite_agent.c: the agent view (ABI 1.3) */
int eai_sq_run_get(void *self, const char *tenant, const char *run_id, int limit, json_t **out,
                   struct eai_error **err);
int eai_sq_run_list(void *self, const char *tenant, const json_t *filter, json_t **out, struct eai_error **err);
int eai_sq_agent_list(void *self, const char *tenant, const char *after, int limit, json_t **out,
                      struct eai_error **err);
int eai_sq_agent_get(void *self, const char *tenant, const char *agent_id, json_t **out, struct eai_error **err);
/* store_sqlite_session.c: stored sessions (ABI 1.4) */
int eai_sq_session_put(void *self, const char *tenant, const json_t *doc, const char *expect_owner,
                       struct eai_error **err);
int eai_sq_session_get(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err);
int eai_sq_session_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err);
int eai_sq_session_owned(void *self, const char *owner, int limit, json_t **out, struct eai_error **err);
/* store_sqlite_snapshot.c: snapshot records (ABI 1.5) */
int eai_sq_snapshot_put(void *self, const char *tenant, const json_t *doc, struct eai_error **err);
int eai_sq_snapshot_get(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err);
int eai_sq_snapshot_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                         struct eai_error **err);
int eai_sq_snapshot_delete(void *self, const char *tenant, const char *id, struct eai_error **err);
int eai_sq_snapshot_owned(void *self, const char *owner, int limit, json_t **out, struct eai_error **err);
int eai_sq_kv_get(void *self, const char *key, char **value, struct eai_error **err);
int eai_sq_kv_set(void *self, const char *key, const char *value, struct eai_error **err);

/* store_sqlite_admin.c: admin listings, key expiry (api_keys.expires_ms) */
json_t *eai_sq_col_expiry(sqlite3_stmt *st, int i);
int eai_sq_tenant_list(void *self, const char *after, int limit, json_t **out, struct eai_error **err);
/* store_sqlite_quota.c */
int eai_sq_tenant_usage(void *self, const char *tenant, int64_t since_ms, json_t **out, struct eai_error **err);
int eai_sq_exec_prune(void *self, int64_t before_ms, int limit, int64_t *deleted, struct eai_error **err);
int eai_sq_key_list(void *self, const char *tenant, json_t **out, struct eai_error **err);
int eai_sq_key_create_expiring(void *self, const char *tenant, const char *key_id,
                               const char *secret_hash_hex, const char *name, int64_t expires_ms,
                               struct eai_error **err);

/* store_sqlite_migrate.c: migrations/sqlite/, embedded at build time
 * (tools/embed_migrations.cmake -> eai_sq_migrations.c) */
struct eai_sq_migration {
    int version;
    const char *name;   /* "NNNN_name.sql" */
    const char *sql;
};
extern const struct eai_sq_migration eai_sq_migrations[];
extern const int eai_sq_migrations_count;
/* Apply the pending migrations in one transaction (idempotent). */
int eai_sq_migrate_db(struct eai_sq *s, sqlite3 *db, struct eai_error **err);

#endif
