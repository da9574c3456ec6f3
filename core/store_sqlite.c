/*
 * Built-in storage backend: embedded SQLite (WAL), see core/store_sqlite.h
 * and docs/storage.md.
 *
 * Concurrency: a small pool of connections guarded by a mutex; a thread
 * takes one connection for the duration of one op.  Every write runs in
 * BEGIN IMMEDIATE (the database write lock is taken up front, so two
 * writers never deadlock on a lock upgrade and reads inside the
 * transaction see the state they will modify).  busy_timeout makes a
 * writer wait for another (thread or process, e.g. the CLI) and BEGIN is
 * retried a few times on SQLITE_BUSY before the op fails with
 * storage_unavailable.
 *
 * Tenant scope: every statement of a tenant-scoped op carries
 * `tenant_id = ?`; SYSTEM ops (claim, renew, stale, counts, outbox,
 * audit_list with NULL tenant, tenant/key lookups) are the only ones that
 * do not.
 *
 * The execution record lives in one JSON column (doc); the indexed fields
 * are columns too.  The volatile ones (seq, status, lease_owner,
 * lease_until, cancel_requested, updated_at) are authoritative in their
 * columns and overlaid on the document on every read, so lease renewal
 * and cancel requests are plain UPDATEs.
 *
 */
#include "store_sqlite.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#define EAI_SQ_VERSION "1.0.0"
#define EAI_SQ_SCHEMA_VERSION 1
#define EAI_SQ_BEGIN_TRIES 4
#define EAI_SQ_IDEMPOTENCY_MS (24LL * 3600 * 1000)

struct eai_sq_conn {
    sqlite3 *db;
    struct eai_sq_conn *next;
};

struct eai_sq {
    const struct eai_host *host;
    char *path;
    int busy_ms;
    int pool_max;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct eai_sq_conn *idle;
    int open_count;
};

/* ------------------------------------------------------------ small helpers */

/* RFC 3339 (util.h) or a bare date "2026-11-29" (midnight UTC) to epoch ms. */
static int sq_parse_time(const char *s, int64_t *out)
{
    if (s && strlen(s) == 10) {
        char buf[32];
        snprintf(buf, sizeof buf, "%sT00:00:00Z", s);
        return eai_time_parse_rfc3339(buf, out);
    }
    return eai_time_parse_rfc3339(s, out);
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int sq_is_terminal(const char *status)
{
    static const char *const terminal[] = {"succeeded", "failed", "timeout",
                                           "oom_killed", "cancelled", "error"};
    if (!status)
        return 0;
    for (size_t i = 0; i < sizeof terminal / sizeof terminal[0]; i++)
        if (strcmp(status, terminal[i]) == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------------------ errors */

static int sq_fail(struct eai_sq *s, struct eai_error **err, enum eai_code code,
                   int errno_cause, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int sq_fail(struct eai_sq *s, struct eai_error **err, enum eai_code code,
                   int errno_cause, const char *fmt, ...)
{
    if (err && !*err && s->host && s->host->error_new) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        *err = s->host->error_new(code, errno_cause, "sqlite: %s", buf);
    }
    return -1;
}

static int sq_db_fail(struct eai_sq *s, struct eai_error **err, sqlite3 *db, const char *what)
{
    int rc = sqlite3_extended_errcode(db);
    enum eai_code code;
    switch (rc & 0xff) {
    case SQLITE_BUSY: case SQLITE_LOCKED: case SQLITE_IOERR: case SQLITE_CANTOPEN:
    case SQLITE_FULL: case SQLITE_READONLY: case SQLITE_PROTOCOL: case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
        code = EAI_E_STORAGE_UNAVAILABLE;
        break;
    case SQLITE_CONSTRAINT:
        code = EAI_E_CONFLICT;
        break;
    default:
        code = EAI_E_INTERNAL;
    }
    return sq_fail(s, err, code, 0, "%s: %s (%d)", what, sqlite3_errmsg(db), rc);
}

static int sq_oom(struct eai_sq *s, struct eai_error **err)
{
    return sq_fail(s, err, EAI_E_INTERNAL, ENOMEM, "out of memory");
}

/* ------------------------------------------------------------ schema */

static const char sq_schema[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, version INTEGER NOT NULL UNIQUE,"
    " name TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS tenants ("
    " id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL CHECK (tenant_id = id), name TEXT NOT NULL,"
    " created_at TEXT NOT NULL, updated_at TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS api_keys ("
    " id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,"
    " hash TEXT NOT NULL, name TEXT, revoked INTEGER NOT NULL DEFAULT 0,"
    " created_at TEXT NOT NULL, updated_at TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys(tenant_id);"
    "CREATE TABLE IF NOT EXISTS sandbox_executions ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, tenant_id TEXT NOT NULL,"
    " status TEXT NOT NULL, run_id TEXT, project_id TEXT, idempotency_key TEXT, request_hash TEXT,"
    " lease_owner TEXT, lease_until INTEGER, cancel_requested INTEGER NOT NULL DEFAULT 0,"
    " created_at TEXT NOT NULL, created_ms INTEGER NOT NULL, updated_at TEXT NOT NULL,"
    " doc TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS sandbox_executions_tenant_seq ON sandbox_executions(tenant_id, seq);"
    "CREATE INDEX IF NOT EXISTS sandbox_executions_status ON sandbox_executions(status, tenant_id, seq);"
    "CREATE INDEX IF NOT EXISTS sandbox_executions_idem ON sandbox_executions(tenant_id, idempotency_key)"
    " WHERE idempotency_key IS NOT NULL;"
    "CREATE INDEX IF NOT EXISTS sandbox_executions_run ON sandbox_executions(tenant_id, run_id, seq);"
    "CREATE INDEX IF NOT EXISTS sandbox_executions_project ON sandbox_executions(tenant_id, project_id);"
    "CREATE INDEX IF NOT EXISTS sandbox_executions_created ON sandbox_executions(tenant_id, created_at);"
    "CREATE INDEX IF NOT EXISTS sandbox_executions_lease ON sandbox_executions(lease_owner, status);"
    "CREATE TABLE IF NOT EXISTS execution_files ("
    " id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,"
    " execution_id TEXT NOT NULL REFERENCES sandbox_executions(id) ON DELETE CASCADE,"
    " path TEXT NOT NULL, size INTEGER NOT NULL, sha256 TEXT NOT NULL, content BLOB NOT NULL,"
    " created_at TEXT NOT NULL, updated_at TEXT NOT NULL, UNIQUE (tenant_id, execution_id, path));"
    "CREATE INDEX IF NOT EXISTS execution_files_exec ON execution_files(execution_id);"
    "CREATE TABLE IF NOT EXISTS manifests ("
    " id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,"
    " doc TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,"
    " UNIQUE (tenant_id, kind, name));"
    "CREATE TABLE IF NOT EXISTS audit_events ("
    " id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, seq INTEGER NOT NULL, time TEXT NOT NULL,"
    " actor TEXT, action TEXT, target TEXT, decision TEXT, prev_hash TEXT NOT NULL,"
    " hash TEXT NOT NULL, doc TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,"
    " UNIQUE (tenant_id, seq));"
    "CREATE TABLE IF NOT EXISTS usage_outbox ("
    " ord INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, tenant_id TEXT NOT NULL,"
    " event TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_attempt_at TEXT,"
    " created_at TEXT NOT NULL, updated_at TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS usage_ledger ("
    " ord INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, tenant_id TEXT NOT NULL,"
    " project_id TEXT, run_id TEXT, agent_id TEXT, execution_id TEXT,"
    " occurred_ms INTEGER NOT NULL, event TEXT NOT NULL,"
    " created_at TEXT NOT NULL, updated_at TEXT NOT NULL, UNIQUE (tenant_id, id));"
    "CREATE INDEX IF NOT EXISTS usage_ledger_time ON usage_ledger(tenant_id, occurred_ms);"
    "CREATE INDEX IF NOT EXISTS usage_ledger_project ON usage_ledger(tenant_id, project_id, occurred_ms);"
    "CREATE TABLE IF NOT EXISTS kv ("
    " id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, value TEXT NOT NULL,"
    " created_at TEXT NOT NULL, updated_at TEXT NOT NULL);";

/* ------------------------------------------------------------ connections */

static int sq_exec_sql(struct eai_sq *s, sqlite3 *db, const char *sql, struct eai_error **err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        sq_fail(s, err, (sqlite3_errcode(db) == SQLITE_BUSY) ? EAI_E_STORAGE_UNAVAILABLE
                                                              : EAI_E_INTERNAL,
                0, "%.60s: %s", sql, msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static sqlite3 *sq_open(struct eai_sq *s, struct eai_error **err)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                SQLITE_OPEN_EXRESCODE;
    if (sqlite3_open_v2(s->path, &db, flags, NULL) != SQLITE_OK) {
        sq_fail(s, err, EAI_E_STORAGE_UNAVAILABLE, 0, "open %s: %s", s->path,
                db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, s->busy_ms);
    /* journal_mode=WAL persists in the file; setting it again is a no-op. */
    if (sq_exec_sql(s, db, "PRAGMA journal_mode=WAL", err) < 0 ||
        sq_exec_sql(s, db, "PRAGMA foreign_keys=ON", err) < 0 ||
        sq_exec_sql(s, db, "PRAGMA synchronous=FULL", err) < 0) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

/* Take a connection (opening one while under pool_max, else waiting). */
static struct eai_sq_conn *sq_acquire(struct eai_sq *s, struct eai_error **err)
{
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->idle) {
            struct eai_sq_conn *c = s->idle;
            s->idle = c->next;
            c->next = NULL;
            pthread_mutex_unlock(&s->mu);
            return c;
        }
        if (s->open_count < s->pool_max)
            break;
        pthread_cond_wait(&s->cv, &s->mu);
    }
    s->open_count++;
    pthread_mutex_unlock(&s->mu);

    struct eai_sq_conn *c = calloc(1, sizeof *c);
    if (c)
        c->db = sq_open(s, err);
    else
        sq_oom(s, err);
    if (!c || !c->db) {
        free(c);
        pthread_mutex_lock(&s->mu);
        s->open_count--;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    return c;
}

static void sq_release(struct eai_sq *s, struct eai_sq_conn *c)
{
    if (!c)
        return;
    /* Never hand back a connection stuck inside a transaction. */
    if (!sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    pthread_mutex_lock(&s->mu);
    c->next = s->idle;
    s->idle = c;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static int sq_begin(struct eai_sq *s, sqlite3 *db, struct eai_error **err)
{
    for (int i = 0; i < EAI_SQ_BEGIN_TRIES; i++) {
        int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            return 0;
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            break;
    }
    return sq_db_fail(s, err, db, "BEGIN IMMEDIATE");
}

static int sq_commit(struct eai_sq *s, sqlite3 *db, struct eai_error **err)
{
    for (int i = 0; i < EAI_SQ_BEGIN_TRIES; i++) {
        int rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            return 0;
        if ((rc & 0xff) != SQLITE_BUSY)
            break;
    }
    sq_db_fail(s, err, db, "COMMIT");
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
}

static void sq_rollback(sqlite3 *db)
{
    if (!sqlite3_get_autocommit(db))
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
}

static sqlite3_stmt *sq_prep(struct eai_sq *s, sqlite3 *db, const char *sql,
                             struct eai_error **err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        sq_db_fail(s, err, db, "prepare");
        return NULL;
    }
    return st;
}

static void sq_bind_str(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* Step a statement that returns no rows; 0 or -1. */
static int sq_step_done(struct eai_sq *s, sqlite3 *db, sqlite3_stmt *st, const char *what,
                        struct eai_error **err)
{
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return sq_db_fail(s, err, db, what);
    return 0;
}

static const char *sq_col_text(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

static json_t *sq_col_json(sqlite3_stmt *st, int i)
{
    const char *t = sq_col_text(st, i);
    return t ? json_loads(t, 0, NULL) : NULL;
}

static json_t *sq_col_str_or_null(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return json_null();
    return json_string(sq_col_text(st, i));
}

static char *sq_dump(const json_t *j)
{
    return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* ------------------------------------------------------------ audit */

/* Append one audit event of `tenant` inside the caller's write transaction. */
static int sq_audit_insert(struct eai_sq *s, sqlite3 *db, const char *tenant,
                           const json_t *event, struct eai_error **err)
{
    if (!json_is_object(event))
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "audit event is not an object");
    if (!tenant)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "audit event without tenant");
    if (!s->host || !s->host->audit_seal)
        return sq_fail(s, err, EAI_E_INTERNAL, 0, "host has no audit_seal");

    int ret = -1;
    char *prev = NULL, *doc = NULL;
    json_t *ev = NULL;
    int64_t seq = 1;
    sqlite3_stmt *st = sq_prep(s, db,
        "SELECT seq, hash FROM audit_events WHERE tenant_id = ?1 ORDER BY seq DESC LIMIT 1", err);
    if (!st)
        return -1;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        seq = sqlite3_column_int64(st, 0) + 1;
        prev = strdup(sq_col_text(st, 1) ? sq_col_text(st, 1) : "");
        if (!prev) {
            sq_oom(s, err);
            goto out;
        }
    } else if (rc != SQLITE_DONE) {
        sq_db_fail(s, err, db, "audit last");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;

    ev = json_deep_copy(event);
    if (!ev) {
        sq_oom(s, err);
        goto out;
    }
    int64_t now = eai_now_ms();
    char now_s[32];
    eai_time_rfc3339(now, now_s);
    if (!jstr(ev, "id")) {
        char id[37];
        eai_uuid_v4(id);
        json_object_set_new(ev, "id", json_string(id));
    }
    if (!jstr(ev, "time"))
        json_object_set_new(ev, "time", json_string(now_s));
    json_object_set_new(ev, "tenant_id", json_string(tenant));
    json_object_set_new(ev, "seq", json_integer(seq));
    json_object_del(ev, "hash");
    json_object_del(ev, "prev_hash");
    if (s->host->audit_seal(ev, prev) != 0 || !jstr(ev, "hash") || !jstr(ev, "prev_hash")) {
        sq_fail(s, err, EAI_E_INTERNAL, 0, "audit_seal failed");
        goto out;
    }
    doc = sq_dump(ev);
    if (!doc) {
        sq_oom(s, err);
        goto out;
    }
    st = sq_prep(s, db,
        "INSERT INTO audit_events (id, tenant_id, seq, time, actor, action, target, decision,"
        " prev_hash, hash, doc, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12)", err);
    if (!st)
        goto out;
    sq_bind_str(st, 1, jstr(ev, "id"));
    sq_bind_str(st, 2, tenant);
    sqlite3_bind_int64(st, 3, seq);
    sq_bind_str(st, 4, jstr(ev, "time"));
    sq_bind_str(st, 5, jstr(ev, "actor"));
    sq_bind_str(st, 6, jstr(ev, "action"));
    sq_bind_str(st, 7, jstr(ev, "target"));
    sq_bind_str(st, 8, jstr(ev, "decision"));
    sq_bind_str(st, 9, jstr(ev, "prev_hash"));
    sq_bind_str(st, 10, jstr(ev, "hash"));
    sqlite3_bind_text(st, 11, doc, -1, SQLITE_STATIC);
    sq_bind_str(st, 12, now_s);
    if (sq_step_done(s, db, st, "audit insert", err) < 0)
        goto out;
    ret = 0;
out:
    sqlite3_finalize(st);
    free(prev);
    free(doc);
    json_decref(ev);
    return ret;
}

/* ------------------------------------------------------------ lifecycle */

static int sq_migrate_db(struct eai_sq *s, sqlite3 *db, struct eai_error **err)
{
    if (sq_begin(s, db, err) < 0)
        return -1;
    if (sq_exec_sql(s, db, sq_schema, err) < 0)
        goto fail;
    char now_s[32], id[37];
    eai_time_rfc3339(eai_now_ms(), now_s);
    eai_uuid_v4(id);
    sqlite3_stmt *st = sq_prep(s, db,
        "INSERT INTO schema_migrations (id, tenant_id, version, name, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, 'init', ?4, ?4) ON CONFLICT (version) DO NOTHING", err);
    if (!st)
        goto fail;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, EAI_SYSTEM_TENANT, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, EAI_SQ_SCHEMA_VERSION);
    sqlite3_bind_text(st, 4, now_s, -1, SQLITE_TRANSIENT);
    int rc = sq_step_done(s, db, st, "schema_migrations", err);
    sqlite3_finalize(st);
    if (rc < 0)
        goto fail;
    return sq_commit(s, db, err);
fail:
    sq_rollback(db);
    return -1;
}

static int sq_cfg_int(const json_t *config, const char *key, int def)
{
    const json_t *v = json_object_get(config, key);
    if (json_is_integer(v))
        return (int)json_integer_value(v);
    if (json_is_string(v))
        return atoi(json_string_value(v));
    return def;
}

static void sq_destroy(void *self)
{
    struct eai_sq *s = self;
    if (!s)
        return;
    while (s->idle) {
        struct eai_sq_conn *c = s->idle;
        s->idle = c->next;
        sqlite3_close(c->db);
        free(c);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->path);
    free(s);
}

static void *sq_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    const char *path = jstr(config, "path");
    if (!host || !host->error_new)
        return NULL;
    if (!path || !*path) {
        if (err)
            *err = host->error_new(EAI_E_VALIDATION_FAILED, 0, "sqlite: config key 'path' is required");
        return NULL;
    }
    struct eai_sq *s = calloc(1, sizeof *s);
    if (!s) {
        if (err)
            *err = host->error_new(EAI_E_INTERNAL, ENOMEM, "sqlite: out of memory");
        return NULL;
    }
    s->host = host;
    s->busy_ms = sq_cfg_int(config, "busy_timeout_ms", 5000);
    s->pool_max = sq_cfg_int(config, "pool_size", 8);
    if (s->busy_ms < 0)
        s->busy_ms = 0;
    if (s->pool_max < 1)
        s->pool_max = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->path = strdup(path);
    if (!s->path) {
        sq_oom(s, err);
        sq_destroy(s);
        return NULL;
    }
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c) {
        sq_destroy(s);
        return NULL;
    }
    int rc = sq_migrate_db(s, c->db, err);
    sq_release(s, c);
    if (rc < 0) {
        sq_destroy(s);
        return NULL;
    }
    return s;
}

/* Run `body` on a pooled connection: the common frame of every op. */
#define SQ_WITH_CONN(s, err, c)                      \
    struct eai_sq_conn *c = sq_acquire((s), (err)); \
    if (!c)                                          \
        return -1

static int sq_migrate(void *self, const char *app_role, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int rc = sq_migrate_db(s, c->db, err);
    sq_release(s, c);
    return rc;
}

static int sq_ping(void *self, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int rc = sq_exec_sql(s, c->db, "SELECT 1", err);
    sq_release(s, c);
    return rc;
}

/* ------------------------------------------------------------ tenants and keys */

static int sq_tenant_create(void *self, const char *name, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!name || !*name)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "tenant name is empty");
    char id[37], now_s[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now_s);
    json_t *t = json_pack("{s:s, s:s, s:s}", "id", id, "name", name, "created_at", now_s);
    if (!t)
        return sq_oom(s, err);
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c) {
        json_decref(t);
        return -1;
    }
    int rc = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "INSERT INTO tenants (id, tenant_id, name, created_at, updated_at)"
        " VALUES (?1, ?1, ?2, ?3, ?3)", err);
    if (st) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, now_s, -1, SQLITE_STATIC);
        rc = sq_step_done(s, c->db, st, "tenant insert", err);
        sqlite3_finalize(st);
    }
    sq_release(s, c);
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

static int sq_tenant_get(void *self, const char *id, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    json_t *t = NULL;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "SELECT id, name, created_at FROM tenants WHERE id = ?1", err);
    if (!st)
        goto out;
    sq_bind_str(st, 1, id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        t = json_pack("{s:s, s:s, s:s}", "id", sq_col_text(st, 0), "name", sq_col_text(st, 1),
                      "created_at", sq_col_text(st, 2));
        if (!t) {
            sq_oom(s, err);
            goto out;
        }
    } else if (rc != SQLITE_DONE) {
        sq_db_fail(s, err, c->db, "tenant get");
        goto out;
    }
    *out = t;
    ret = 0;
out:
    sqlite3_finalize(st);
    sq_release(s, c);
    return ret;
}

static int sq_key_create(void *self, const char *tenant, const char *key_id,
                         const char *secret_hash_hex, const char *name, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !key_id || !secret_hash_hex)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "key_create: missing argument");
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "INSERT INTO api_keys (id, tenant_id, hash, name, revoked, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5)", err);
    if (st) {
        sqlite3_bind_text(st, 1, key_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, secret_hash_hex, -1, SQLITE_STATIC);
        sq_bind_str(st, 4, name);
        sqlite3_bind_text(st, 5, now_s, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            ret = 0;
        else if (sqlite3_extended_errcode(c->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
            sq_fail(s, err, EAI_E_NOT_FOUND, 0, "key_create: unknown tenant %s", tenant);
        else
            sq_db_fail(s, err, c->db, "key insert");
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

static int sq_key_get(void *self, const char *key_id, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    json_t *k = NULL;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "SELECT id, tenant_id, hash, revoked, name FROM api_keys WHERE id = ?1", err);
    if (!st)
        goto out;
    sq_bind_str(st, 1, key_id);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        k = json_pack("{s:s, s:s, s:s, s:b, s:o}", "key_id", sq_col_text(st, 0),
                      "tenant_id", sq_col_text(st, 1), "hash", sq_col_text(st, 2),
                      "revoked", sqlite3_column_int(st, 3) != 0,
                      "name", sq_col_str_or_null(st, 4));
        if (!k) {
            sq_oom(s, err);
            goto out;
        }
    } else if (rc != SQLITE_DONE) {
        sq_db_fail(s, err, c->db, "key get");
        goto out;
    }
    *out = k;
    ret = 0;
out:
    sqlite3_finalize(st);
    sq_release(s, c);
    return ret;
}

static int sq_key_revoke(void *self, const char *key_id, struct eai_error **err)
{
    struct eai_sq *s = self;
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "UPDATE api_keys SET revoked = 1, updated_at = ?2 WHERE id = ?1", err);
    if (st) {
        sq_bind_str(st, 1, key_id);
        sqlite3_bind_text(st, 2, now_s, -1, SQLITE_STATIC);
        if (sq_step_done(s, c->db, st, "key revoke", err) == 0) {
            if (sqlite3_changes(c->db) == 0)
                sq_fail(s, err, EAI_E_NOT_FOUND, 0, "unknown key %s", key_id ? key_id : "");
            else
                ret = 0;
        }
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ executions */

#define SQ_EXEC_COLS \
    "seq, status, lease_owner, lease_until, cancel_requested, updated_at, doc"

/* Build the record of one row selected with SQ_EXEC_COLS at column 0. */
static json_t *sq_row_exec(sqlite3_stmt *st)
{
    json_t *doc = sq_col_json(st, 6);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return NULL;
    }
    json_object_set_new(doc, "seq", json_integer(sqlite3_column_int64(st, 0)));
    json_object_set_new(doc, "status", sq_col_str_or_null(st, 1));
    json_object_set_new(doc, "lease_owner", sq_col_str_or_null(st, 2));
    json_object_set_new(doc, "lease_until", sqlite3_column_type(st, 3) == SQLITE_NULL
                                                ? json_null()
                                                : json_integer(sqlite3_column_int64(st, 3)));
    json_object_set_new(doc, "cancel_requested", json_boolean(sqlite3_column_int(st, 4)));
    json_object_set_new(doc, "updated_at", sq_col_str_or_null(st, 5));
    return doc;
}

/* Load one execution of `tenant` (NULL tenant: by seq, SYSTEM) into *out;
 * *out NULL when absent. */
static int sq_load_exec(struct eai_sq *s, sqlite3 *db, const char *tenant, const char *id,
                        int64_t seq, json_t **out, struct eai_error **err)
{
    sqlite3_stmt *st = sq_prep(s, db, tenant
        ? "SELECT " SQ_EXEC_COLS " FROM sandbox_executions WHERE tenant_id = ?1 AND id = ?2"
        : "SELECT " SQ_EXEC_COLS " FROM sandbox_executions WHERE seq = ?3", err);
    if (!st)
        return -1;
    if (tenant) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sq_bind_str(st, 2, id);
    } else {
        sqlite3_bind_int64(st, 3, seq);
    }
    int ret = 0;
    json_t *e = NULL;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        e = sq_row_exec(st);
        if (!e)
            ret = sq_fail(s, err, EAI_E_INTERNAL, 0, "execution row with a bad document");
    } else if (rc != SQLITE_DONE) {
        ret = sq_db_fail(s, err, db, "execution select");
    }
    sqlite3_finalize(st);
    if (ret == 0)
        *out = e;
    return ret;
}

/* Write back every mutable column of an execution from its document. */
static int sq_store_exec(struct eai_sq *s, sqlite3 *db, const json_t *e, struct eai_error **err)
{
    char *doc = sq_dump(e);
    if (!doc)
        return sq_oom(s, err);
    sqlite3_stmt *st = sq_prep(s, db,
        "UPDATE sandbox_executions SET status = ?2, lease_owner = ?3, lease_until = ?4,"
        " cancel_requested = ?5, updated_at = ?6, doc = ?7 WHERE seq = ?1", err);
    if (!st) {
        free(doc);
        return -1;
    }
    const json_t *lu = json_object_get(e, "lease_until");
    sqlite3_bind_int64(st, 1, json_integer_value(json_object_get(e, "seq")));
    sq_bind_str(st, 2, jstr(e, "status"));
    sq_bind_str(st, 3, jstr(e, "lease_owner"));
    if (json_is_integer(lu))
        sqlite3_bind_int64(st, 4, json_integer_value(lu));
    else
        sqlite3_bind_null(st, 4);
    sqlite3_bind_int(st, 5, json_is_true(json_object_get(e, "cancel_requested")));
    sq_bind_str(st, 6, jstr(e, "updated_at"));
    sqlite3_bind_text(st, 7, doc, -1, SQLITE_STATIC);
    int rc = sq_step_done(s, db, st, "execution update", err);
    sqlite3_finalize(st);
    free(doc);
    return rc;
}

/* Apply a terminal patch: merge, default status/finished_at, scrub inputs. */
static int sq_apply_terminal(struct eai_sq *s, json_t *e, const json_t *patch,
                             const char *default_status, const char *now_s,
                             struct eai_error **err)
{
    if (patch && !json_is_object(patch))
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "terminal patch is not an object");
    if (patch) {
        json_t *p = json_deep_copy(patch);
        if (!p)
            return sq_oom(s, err);
        /* Keys storage owns are never taken from a patch. */
        static const char *const owned[] = {"id", "tenant_id", "seq", "created_at",
                                            "idempotency_key", "request_hash"};
        for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
            json_object_del(p, owned[i]);
        json_object_update(e, p);
        json_decref(p);
    }
    if (!jstr(e, "status") || !sq_is_terminal(jstr(e, "status"))) {
        if (!default_status)
            return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0,
                           "terminal patch without a terminal status");
        json_object_set_new(e, "status", json_string(default_status));
    }
    if (!jstr(e, "finished_at"))
        json_object_set_new(e, "finished_at", json_string(now_s));
    json_object_set_new(e, "env", json_object());
    json_object_set_new(e, "stdin", json_null());
    json_object_set_new(e, "files_in", json_array());
    json_object_set_new(e, "updated_at", json_string(now_s));
    return 0;
}

static int sq_exec_create(void *self, const char *tenant, const json_t *exec,
                          const json_t *audit, json_t **existing, struct eai_error **err)
{
    struct eai_sq *s = self;
    const char *id = jstr(exec, "id");
    if (!tenant || !json_is_object(exec) || !id)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_create: record without id");
    int64_t now = eai_now_ms();
    char now_s[32];
    eai_time_rfc3339(now, now_s);
    json_t *e = json_deep_copy(exec);
    if (!e)
        return sq_oom(s, err);
    json_object_del(e, "seq");
    json_object_set_new(e, "tenant_id", json_string(tenant));
    json_object_set_new(e, "status", json_string("queued"));
    json_object_set_new(e, "lease_owner", json_null());
    json_object_set_new(e, "lease_until", json_null());
    json_object_set_new(e, "cancel_requested", json_false());
    if (!jstr(e, "created_at"))
        json_object_set_new(e, "created_at", json_string(now_s));
    json_object_set_new(e, "updated_at", json_string(now_s));
    int64_t created_ms;
    if (sq_parse_time(jstr(e, "created_at"), &created_ms) < 0)
        created_ms = now;
    const char *key = jstr(e, "idempotency_key");
    const char *hash = jstr(e, "request_hash");
    char *doc = sq_dump(e);
    if (!doc) {
        json_decref(e);
        return sq_oom(s, err);
    }

    int ret = -1;
    sqlite3_stmt *st = NULL;
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c)
        goto out;
    if (sq_begin(s, c->db, err) < 0)
        goto out;
    if (key) {
        st = sq_prep(s, c->db,
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
            const char *old = sq_col_text(st, 7);
            int same = (!old && !hash) || (old && hash && strcmp(old, hash) == 0);
            if (same) {
                json_t *row = sq_row_exec(st);
                if (!row) {
                    sq_fail(s, err, EAI_E_INTERNAL, 0, "execution row with a bad document");
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
            sq_db_fail(s, err, c->db, "idempotency lookup");
            goto out;
        }
        sqlite3_finalize(st);
        st = NULL;
    }
    st = sq_prep(s, c->db,
        "INSERT INTO sandbox_executions (id, tenant_id, status, run_id, project_id,"
        " idempotency_key, request_hash, lease_owner, lease_until, cancel_requested,"
        " created_at, created_ms, updated_at, doc)"
        " VALUES (?1, ?2, 'queued', ?3, ?4, ?5, ?6, NULL, NULL, 0, ?7, ?8, ?9, ?10)", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
    sq_bind_str(st, 3, jstr(e, "run_id"));
    sq_bind_str(st, 4, jstr(e, "project_id"));
    sq_bind_str(st, 5, key);
    sq_bind_str(st, 6, hash);
    sq_bind_str(st, 7, jstr(e, "created_at"));
    sqlite3_bind_int64(st, 8, created_ms);
    sqlite3_bind_text(st, 9, now_s, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 10, doc, -1, SQLITE_STATIC);
    if (sq_step_done(s, c->db, st, "execution insert", err) < 0)
        goto out;
    if (audit && sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (sq_commit(s, c->db, err) < 0)
        goto out;
    ret = EAI_STORE_CREATED;
out:
    sqlite3_finalize(st);
    if (c) {
        sq_rollback(c->db);
        sq_release(s, c);
    }
    free(doc);
    json_decref(e);
    return ret;
}

static int sq_exec_get(void *self, const char *tenant, const char *id, json_t **out,
                       struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_get without tenant");
    SQ_WITH_CONN(s, err, c);
    int rc = sq_load_exec(s, c->db, tenant, id, 0, out, err);
    sq_release(s, c);
    return rc;
}

/* Collect every row of a SQ_EXEC_COLS statement into an array. */
static int sq_collect_execs(struct eai_sq *s, sqlite3 *db, sqlite3_stmt *st, json_t **out,
                            struct eai_error **err)
{
    json_t *arr = json_array();
    if (!arr)
        return sq_oom(s, err);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *e = sq_row_exec(st);
        if (!e || json_array_append_new(arr, e) < 0) {
            json_decref(arr);
            return sq_fail(s, err, EAI_E_INTERNAL, 0, "bad execution row");
        }
    }
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return sq_db_fail(s, err, db, "execution list");
    }
    *out = arr;
    return 0;
}

static int sq_exec_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_list without tenant");
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
            return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "bad cursor");
        has_after = 1;
    }
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "SELECT " SQ_EXEC_COLS " FROM sandbox_executions WHERE tenant_id = ?1"
        " AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR run_id = ?3)"
        " AND (?4 IS NULL OR seq < ?4) ORDER BY seq DESC LIMIT ?5", err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sq_bind_str(st, 2, jstr(filter, "status"));
        sq_bind_str(st, 3, jstr(filter, "run_id"));
        if (has_after)
            sqlite3_bind_int64(st, 4, after_seq);
        sqlite3_bind_int64(st, 5, limit);
        ret = sq_collect_execs(s, c->db, st, out, err);
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

static int sq_exec_claim(void *self, const char *owner, int64_t lease_ms, int max,
                         int per_tenant_max, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!owner)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_claim without owner");
    json_t *arr = json_array();
    if (!arr)
        return sq_oom(s, err);
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
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c)
        goto out;
    if (sq_begin(s, c->db, err) < 0)
        goto out;
    /* Round-robin: rank each tenant's queued rows by age; take rank 1 of
     * every tenant (oldest tenant first), then rank 2, ... */
    st = sq_prep(s, c->db,
        "SELECT seq FROM (SELECT seq, ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY seq) AS rn"
        " FROM sandbox_executions WHERE status = 'queued')"
        " WHERE rn <= ?1 ORDER BY rn, seq LIMIT ?2", err);
    if (!st)
        goto out;
    sqlite3_bind_int(st, 1, per_tenant_max);
    sqlite3_bind_int(st, 2, max);
    seqs = calloc((size_t)max, sizeof *seqs);
    if (!seqs) {
        sq_oom(s, err);
        goto out;
    }
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && nseq < (size_t)max)
        seqs[nseq++] = sqlite3_column_int64(st, 0);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        sq_db_fail(s, err, c->db, "claim select");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;
    for (size_t i = 0; i < nseq; i++) {
        json_t *e = NULL;
        if (sq_load_exec(s, c->db, NULL, NULL, seqs[i], &e, err) < 0)
            goto out;
        if (!e)
            continue;
        json_object_set_new(e, "status", json_string("running"));
        json_object_set_new(e, "lease_owner", json_string(owner));
        json_object_set_new(e, "lease_until", json_integer(now + lease_ms));
        json_object_set_new(e, "started_at", json_string(now_s));
        json_object_set_new(e, "updated_at", json_string(now_s));
        if (sq_store_exec(s, c->db, e, err) < 0 || json_array_append_new(arr, e) < 0)
            goto out;
    }
    if (sq_commit(s, c->db, err) < 0)
        goto out;
    *out = arr;
    arr = NULL;
    ret = 0;
out:
    sqlite3_finalize(st);
    free(seqs);
    if (c) {
        sq_rollback(c->db);
        sq_release(s, c);
    }
    json_decref(arr);
    return ret;
}

static int sq_exec_renew(void *self, const char *owner, int64_t lease_ms, json_t **cancel_ids,
                         struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!owner)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_renew without owner");
    json_t *ids = json_array();
    if (!ids)
        return sq_oom(s, err);
    int ret = -1;
    sqlite3_stmt *st = NULL;
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c)
        goto out;
    if (sq_begin(s, c->db, err) < 0)
        goto out;
    st = sq_prep(s, c->db,
        "UPDATE sandbox_executions SET lease_until = ?2"
        " WHERE lease_owner = ?1 AND status = 'running'", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, eai_now_ms() + lease_ms);
    if (sq_step_done(s, c->db, st, "renew", err) < 0)
        goto out;
    sqlite3_finalize(st);
    st = sq_prep(s, c->db,
        "SELECT id, tenant_id FROM sandbox_executions"
        " WHERE lease_owner = ?1 AND status = 'running' AND cancel_requested = 1 ORDER BY seq", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *o = json_pack("{s:s, s:s}", "id", sq_col_text(st, 0),
                              "tenant_id", sq_col_text(st, 1));
        if (!o || json_array_append_new(ids, o) < 0) {
            sq_oom(s, err);
            goto out;
        }
    }
    if (rc != SQLITE_DONE) {
        sq_db_fail(s, err, c->db, "renew select");
        goto out;
    }
    if (sq_commit(s, c->db, err) < 0)
        goto out;
    if (cancel_ids) {
        *cancel_ids = ids;
        ids = NULL;
    }
    ret = 0;
out:
    sqlite3_finalize(st);
    if (c) {
        sq_rollback(c->db);
        sq_release(s, c);
    }
    json_decref(ids);
    return ret;
}

static int sq_exec_cancel(void *self, const char *tenant, const char *id,
                          const json_t *cancelled_patch, const json_t *audit, json_t **out,
                          struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_cancel without tenant");
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    int ret = -1;
    json_t *e = NULL;
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c)
        return -1;
    if (sq_begin(s, c->db, err) < 0)
        goto out;
    if (sq_load_exec(s, c->db, tenant, id, 0, &e, err) < 0)
        goto out;
    if (!e) {
        sq_rollback(c->db);
        *out = NULL;
        ret = 0;
        goto out;
    }
    const char *status = jstr(e, "status");
    if (status && strcmp(status, "queued") == 0) {
        if (sq_apply_terminal(s, e, cancelled_patch, "cancelled", now_s, err) < 0)
            goto out;
    } else if (status && strcmp(status, "running") == 0) {
        json_object_set_new(e, "cancel_requested", json_true());
        json_object_set_new(e, "updated_at", json_string(now_s));
    } else {
        /* Terminal: unchanged, nothing written (core answers 409). */
        sq_rollback(c->db);
        *out = e;
        e = NULL;
        ret = 0;
        goto out;
    }
    if (sq_store_exec(s, c->db, e, err) < 0)
        goto out;
    if (audit && sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (sq_commit(s, c->db, err) < 0)
        goto out;
    *out = e;
    e = NULL;
    ret = 0;
out:
    sq_rollback(c->db);
    sq_release(s, c);
    json_decref(e);
    return ret;
}

static int sq_outbox_insert(struct eai_sq *s, sqlite3 *db, const char *tenant,
                            const json_t *event, const char *now_s, struct eai_error **err)
{
    if (!json_is_object(event))
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "usage event is not an object");
    json_t *ev = json_deep_copy(event);
    if (!ev)
        return sq_oom(s, err);
    if (!jstr(ev, "id")) {
        char id[37];
        eai_uuid_v4(id);
        json_object_set_new(ev, "id", json_string(id));
    }
    char *doc = sq_dump(ev);
    if (!doc) {
        json_decref(ev);
        return sq_oom(s, err);
    }
    int rc = -1;
    sqlite3_stmt *st = sq_prep(s, db,
        "INSERT INTO usage_outbox (id, tenant_id, event, attempts, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, 0, ?4, ?4)", err);
    if (st) {
        sq_bind_str(st, 1, jstr(ev, "id"));
        sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, doc, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, now_s, -1, SQLITE_STATIC);
        rc = sq_step_done(s, db, st, "outbox insert", err);
        sqlite3_finalize(st);
    }
    free(doc);
    json_decref(ev);
    return rc;
}

/* Insert collected files and return the public list [{path,size,sha256}]. */
static json_t *sq_files_insert(struct eai_sq *s, sqlite3 *db, const char *tenant,
                               const char *exec_id, const json_t *files, const char *now_s,
                               struct eai_error **err)
{
    json_t *pub = json_array();
    if (!pub) {
        sq_oom(s, err);
        return NULL;
    }
    sqlite3_stmt *st = sq_prep(s, db,
        "INSERT INTO execution_files (id, tenant_id, execution_id, path, size, sha256, content,"
        " created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)"
        " ON CONFLICT (tenant_id, execution_id, path) DO UPDATE SET size = excluded.size,"
        " sha256 = excluded.sha256, content = excluded.content, updated_at = excluded.updated_at",
        err);
    if (!st) {
        json_decref(pub);
        return NULL;
    }
    size_t i;
    const json_t *f;
    json_array_foreach(files, i, f) {
        const char *path = jstr(f, "path");
        const char *b64 = jstr(f, "content_b64");
        size_t len = 0;
        unsigned char *data = eai_b64_decode(b64 ? b64 : "", &len);
        char sha[65], id[37];
        if (!path || !data) {
            free(data);
            sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "file %zu: bad path or content_b64", i);
            goto fail;
        }
        const char *given = jstr(f, "sha256");
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
        if (sq_step_done(s, db, st, "file insert", err) < 0)
            goto fail;
        json_t *o = json_pack("{s:s, s:I, s:s}", "path", path, "size", (json_int_t)len,
                              "sha256", sha);
        if (!o || json_array_append_new(pub, o) < 0) {
            sq_oom(s, err);
            goto fail;
        }
    }
    sqlite3_finalize(st);
    return pub;
fail:
    sqlite3_finalize(st);
    json_decref(pub);
    return NULL;
}

static int sq_exec_finish(void *self, const char *tenant, const char *id, const json_t *patch,
                          const json_t *files, const json_t *usage_event, const json_t *audit,
                          struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !id)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_finish without tenant or id");
    if (files && !json_is_array(files))
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "exec_finish: files is not an array");
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    int ret = -1;
    json_t *e = NULL;
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c)
        return -1;
    if (sq_begin(s, c->db, err) < 0)
        goto out;
    if (sq_load_exec(s, c->db, tenant, id, 0, &e, err) < 0)
        goto out;
    if (!e) {
        sq_fail(s, err, EAI_E_NOT_FOUND, 0, "execution %s not found", id);
        goto out;
    }
    const char *status = jstr(e, "status");
    if (!status || (strcmp(status, "queued") != 0 && strcmp(status, "running") != 0)) {
        ret = EAI_STORE_NOOP;
        goto out;
    }
    if (sq_apply_terminal(s, e, patch, NULL, now_s, err) < 0)
        goto out;
    if (files && json_array_size(files) > 0) {
        json_t *pub = sq_files_insert(s, c->db, tenant, id, files, now_s, err);
        if (!pub)
            goto out;
        json_object_set_new(e, "files", pub);
    } else if (!json_is_array(json_object_get(e, "files"))) {
        json_object_set_new(e, "files", json_array());
    }
    if (sq_store_exec(s, c->db, e, err) < 0)
        goto out;
    if (usage_event && sq_outbox_insert(s, c->db, tenant, usage_event, now_s, err) < 0)
        goto out;
    if (audit && sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (sq_commit(s, c->db, err) < 0)
        goto out;
    ret = EAI_STORE_UPDATED;
out:
    sq_rollback(c->db);
    sq_release(s, c);
    json_decref(e);
    return ret;
}

static int sq_exec_stale(void *self, int64_t now_ms, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "SELECT " SQ_EXEC_COLS " FROM sandbox_executions"
        " WHERE status = 'running' AND lease_until < ?1 ORDER BY seq", err);
    if (st) {
        sqlite3_bind_int64(st, 1, now_ms);
        ret = sq_collect_execs(s, c->db, st, out, err);
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

static int sq_exec_counts(void *self, int64_t *queued, int64_t *running, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    int64_t q = 0, r = 0;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "SELECT status, count(*) FROM sandbox_executions"
        " WHERE status IN ('queued', 'running') GROUP BY status", err);
    if (st) {
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *k = sq_col_text(st, 0);
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
            sq_db_fail(s, err, c->db, "counts");
        }
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ files */

static int sq_file_get(void *self, const char *tenant, const char *exec_id, const char *path,
                       unsigned char **data, size_t *len, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "file_get without tenant");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "SELECT content FROM execution_files"
        " WHERE tenant_id = ?1 AND execution_id = ?2 AND path = ?3", err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sq_bind_str(st, 2, exec_id);
        sq_bind_str(st, 3, path);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const void *b = sqlite3_column_blob(st, 0);
            size_t n = (size_t)sqlite3_column_bytes(st, 0);
            unsigned char *copy = malloc(n ? n : 1);
            if (!copy) {
                sq_oom(s, err);
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
            sq_db_fail(s, err, c->db, "file get");
        }
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ manifests */

static int sq_manifest_put(void *self, const char *tenant, const char *kind, const char *name,
                           const json_t *doc, const json_t *audit, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !kind || !name || !doc)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "manifest_put: missing argument");
    char now_s[32], id[37];
    eai_time_rfc3339(eai_now_ms(), now_s);
    eai_uuid_v4(id);
    char *text = sq_dump(doc);
    if (!text)
        return sq_oom(s, err);
    int ret = -1, existed = 0;
    sqlite3_stmt *st = NULL;
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c) {
        free(text);
        return -1;
    }
    if (sq_begin(s, c->db, err) < 0)
        goto out;
    st = sq_prep(s, c->db,
        "SELECT 1 FROM manifests WHERE tenant_id = ?1 AND kind = ?2 AND name = ?3", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, name, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        sq_db_fail(s, err, c->db, "manifest lookup");
        goto out;
    }
    existed = (rc == SQLITE_ROW);
    sqlite3_finalize(st);
    st = sq_prep(s, c->db,
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
    if (sq_step_done(s, c->db, st, "manifest upsert", err) < 0)
        goto out;
    if (audit && sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (sq_commit(s, c->db, err) < 0)
        goto out;
    ret = existed ? EAI_STORE_UPDATED : EAI_STORE_CREATED;
out:
    sqlite3_finalize(st);
    sq_rollback(c->db);
    sq_release(s, c);
    free(text);
    return ret;
}

static int sq_manifest_get(void *self, const char *tenant, const char *kind, const char *name,
                           json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "manifest_get without tenant");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "SELECT doc FROM manifests WHERE tenant_id = ?1 AND kind = ?2 AND name = ?3", err);
    if (st) {
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sq_bind_str(st, 2, kind);
        sq_bind_str(st, 3, name);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            json_t *d = sq_col_json(st, 0);
            if (d) {
                *out = d;
                ret = 0;
            } else {
                sq_fail(s, err, EAI_E_INTERNAL, 0, "manifest with a bad document");
            }
        } else if (rc == SQLITE_DONE) {
            *out = NULL;
            ret = 0;
        } else {
            sq_db_fail(s, err, c->db, "manifest get");
        }
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

static int sq_manifest_delete(void *self, const char *tenant, const char *kind, const char *name,
                              const json_t *audit, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "manifest_delete without tenant");
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = NULL;
    if (sq_begin(s, c->db, err) < 0)
        goto out;
    st = sq_prep(s, c->db,
        "DELETE FROM manifests WHERE tenant_id = ?1 AND kind = ?2 AND name = ?3", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sq_bind_str(st, 2, kind);
    sq_bind_str(st, 3, name);
    if (sq_step_done(s, c->db, st, "manifest delete", err) < 0)
        goto out;
    if (sqlite3_changes(c->db) == 0) {
        sq_fail(s, err, EAI_E_NOT_FOUND, 0, "manifest %s/%s not found", kind ? kind : "",
                name ? name : "");
        goto out;
    }
    if (audit && sq_audit_insert(s, c->db, tenant, audit, err) < 0)
        goto out;
    if (sq_commit(s, c->db, err) < 0)
        goto out;
    ret = 0;
out:
    sqlite3_finalize(st);
    sq_rollback(c->db);
    sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ audit ops */

static int sq_audit_append(void *self, const char *tenant, const json_t *event,
                           struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    if (sq_begin(s, c->db, err) == 0 && sq_audit_insert(s, c->db, tenant, event, err) == 0 &&
        sq_commit(s, c->db, err) == 0)
        ret = 0;
    sq_rollback(c->db);
    sq_release(s, c);
    return ret;
}

static int sq_audit_list(void *self, const char *tenant, int64_t after_seq, int limit,
                         json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    json_t *arr = json_array();
    if (!arr)
        return sq_oom(s, err);
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c) {
        json_decref(arr);
        return -1;
    }
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db, tenant
        ? "SELECT doc FROM audit_events WHERE tenant_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"
        : "SELECT doc FROM audit_events WHERE seq > ?2 ORDER BY tenant_id, seq LIMIT ?3", err);
    if (st) {
        if (tenant)
            sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, after_seq);
        sqlite3_bind_int(st, 3, limit > 0 ? limit : -1);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            json_t *ev = sq_col_json(st, 0);
            if (!ev || json_array_append_new(arr, ev) < 0) {
                sq_fail(s, err, EAI_E_INTERNAL, 0, "audit row with a bad document");
                break;
            }
        }
        if (rc == SQLITE_DONE) {
            *out = arr;
            arr = NULL;
            ret = 0;
        } else if (rc != SQLITE_ROW) {
            sq_db_fail(s, err, c->db, "audit list");
        }
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    json_decref(arr);
    return ret;
}

/* ------------------------------------------------------------ outbox and ledger */

static int sq_outbox_fetch(void *self, int limit, json_t **out, struct eai_error **err)
{
    struct eai_sq *s = self;
    json_t *arr = json_array();
    if (!arr)
        return sq_oom(s, err);
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c) {
        json_decref(arr);
        return -1;
    }
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "SELECT id, tenant_id, event, attempts FROM usage_outbox ORDER BY ord LIMIT ?1", err);
    if (st) {
        sqlite3_bind_int(st, 1, limit > 0 ? limit : 100);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            json_t *o = json_pack("{s:s, s:s, s:o, s:I}", "id", sq_col_text(st, 0),
                                  "tenant_id", sq_col_text(st, 1), "event", sq_col_json(st, 2),
                                  "attempts", (json_int_t)sqlite3_column_int64(st, 3));
            if (!o || json_array_append_new(arr, o) < 0) {
                sq_fail(s, err, EAI_E_INTERNAL, 0, "outbox row with a bad document");
                break;
            }
        }
        if (rc == SQLITE_DONE) {
            *out = arr;
            arr = NULL;
            ret = 0;
        } else if (rc != SQLITE_ROW) {
            sq_db_fail(s, err, c->db, "outbox fetch");
        }
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    json_decref(arr);
    return ret;
}

/* Idempotent: acking an id that is gone (another replica delivered it) is 0. */
static int sq_outbox_ack(void *self, const char *id, int delivered, struct eai_error **err)
{
    struct eai_sq *s = self;
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db, delivered
        ? "DELETE FROM usage_outbox WHERE id = ?1"
        : "UPDATE usage_outbox SET attempts = attempts + 1, last_attempt_at = ?2,"
          " updated_at = ?2 WHERE id = ?1", err);
    if (st) {
        sq_bind_str(st, 1, id);
        if (!delivered)
            sqlite3_bind_text(st, 2, now_s, -1, SQLITE_STATIC);
        ret = sq_step_done(s, c->db, st, "outbox ack", err);
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

/* The time a usage event is filed under: finished, else time, else created. */
static int64_t sq_event_time(const json_t *ev, int64_t def)
{
    static const char *const keys[] = {"finished_at", "time", "timestamp", "created_at"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int64_t t;
        if (sq_parse_time(jstr(ev, keys[i]), &t) == 0)
            return t;
    }
    return def;
}

static int sq_ledger_insert(void *self, const char *tenant, const json_t *event,
                            struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant || !json_is_object(event))
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "ledger_insert: bad event");
    int64_t now = eai_now_ms();
    char now_s[32], id[37];
    eai_time_rfc3339(now, now_s);
    json_t *ev = json_deep_copy(event);
    if (!ev)
        return sq_oom(s, err);
    if (!jstr(ev, "id")) {
        eai_uuid_v4(id);
        json_object_set_new(ev, "id", json_string(id));
    }
    json_object_set_new(ev, "tenant_id", json_string(tenant));
    char *doc = sq_dump(ev);
    if (!doc) {
        json_decref(ev);
        return sq_oom(s, err);
    }
    struct eai_sq_conn *c = sq_acquire(s, err);
    int ret = -1;
    if (c) {
        sqlite3_stmt *st = sq_prep(s, c->db,
            "INSERT INTO usage_ledger (id, tenant_id, project_id, run_id, agent_id, execution_id,"
            " occurred_ms, event, created_at, updated_at)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) ON CONFLICT (tenant_id, id) DO NOTHING",
            err);
        if (st) {
            sq_bind_str(st, 1, jstr(ev, "id"));
            sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
            sq_bind_str(st, 3, jstr(ev, "project_id"));
            sq_bind_str(st, 4, jstr(ev, "run_id"));
            sq_bind_str(st, 5, jstr(ev, "agent_id"));
            sq_bind_str(st, 6, jstr(ev, "execution_id"));
            sqlite3_bind_int64(st, 7, sq_event_time(ev, now));
            sqlite3_bind_text(st, 8, doc, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 9, now_s, -1, SQLITE_STATIC);
            if (sq_step_done(s, c->db, st, "ledger insert", err) == 0)
                ret = sqlite3_changes(c->db) > 0 ? EAI_STORE_CREATED : EAI_STORE_EXISTS;
            sqlite3_finalize(st);
        }
        sq_release(s, c);
    }
    free(doc);
    json_decref(ev);
    return ret;
}

static int sq_filter_time(struct eai_sq *s, const json_t *filter, const char *key,
                          sqlite3_stmt *st, int idx, struct eai_error **err)
{
    const char *v = jstr(filter, key);
    int64_t t;
    if (!v || !*v) {
        sqlite3_bind_null(st, idx);
        return 0;
    }
    if (sq_parse_time(v, &t) < 0)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "%s: not an RFC 3339 time", key);
    sqlite3_bind_int64(st, idx, t);
    return 0;
}

static int sq_ledger_query(void *self, const char *tenant, const json_t *filter, json_t **out,
                           struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!tenant)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "ledger_query without tenant");
    json_int_t limit = json_integer_value(json_object_get(filter, "limit"));
    if (limit < 1)
        limit = 100;
    if (limit > 1000)
        limit = 1000;
    json_t *arr = json_array();
    if (!arr)
        return sq_oom(s, err);
    struct eai_sq_conn *c = sq_acquire(s, err);
    if (!c) {
        json_decref(arr);
        return -1;
    }
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "SELECT event FROM usage_ledger WHERE tenant_id = ?1"
        " AND (?2 IS NULL OR project_id = ?2) AND (?3 IS NULL OR run_id = ?3)"
        " AND (?4 IS NULL OR occurred_ms >= ?4) AND (?5 IS NULL OR occurred_ms < ?5)"
        " ORDER BY occurred_ms, ord LIMIT ?6", err);
    if (!st)
        goto out;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    sq_bind_str(st, 2, jstr(filter, "project_id"));
    sq_bind_str(st, 3, jstr(filter, "run_id"));
    if (sq_filter_time(s, filter, "from", st, 4, err) < 0 ||
        sq_filter_time(s, filter, "to", st, 5, err) < 0)
        goto out;
    sqlite3_bind_int64(st, 6, limit);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *ev = sq_col_json(st, 0);
        if (!ev || json_array_append_new(arr, ev) < 0) {
            sq_fail(s, err, EAI_E_INTERNAL, 0, "ledger row with a bad document");
            goto out;
        }
    }
    if (rc != SQLITE_DONE) {
        sq_db_fail(s, err, c->db, "ledger query");
        goto out;
    }
    *out = arr;
    arr = NULL;
    ret = 0;
out:
    sqlite3_finalize(st);
    sq_release(s, c);
    json_decref(arr);
    return ret;
}

/* ------------------------------------------------------------ kv */

static int sq_kv_get(void *self, const char *key, char **value, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db, "SELECT value FROM kv WHERE id = ?1", err);
    if (st) {
        sq_bind_str(st, 1, key);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            char *v = strdup(sq_col_text(st, 0) ? sq_col_text(st, 0) : "");
            if (v) {
                *value = v;
                ret = 0;
            } else {
                sq_oom(s, err);
            }
        } else if (rc == SQLITE_DONE) {
            *value = NULL;
            ret = 0;
        } else {
            sq_db_fail(s, err, c->db, "kv get");
        }
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

static int sq_kv_set(void *self, const char *key, const char *value, struct eai_error **err)
{
    struct eai_sq *s = self;
    if (!key || !value)
        return sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "kv_set: missing key or value");
    char now_s[32];
    eai_time_rfc3339(eai_now_ms(), now_s);
    SQ_WITH_CONN(s, err, c);
    int ret = -1;
    sqlite3_stmt *st = sq_prep(s, c->db,
        "INSERT INTO kv (id, tenant_id, value, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)"
        " ON CONFLICT (id) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        err);
    if (st) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, EAI_SYSTEM_TENANT, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, value, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, now_s, -1, SQLITE_STATIC);
        ret = sq_step_done(s, c->db, st, "kv set", err);
        sqlite3_finalize(st);
    }
    sq_release(s, c);
    return ret;
}

/* ------------------------------------------------------------ descriptor */

static const struct eai_storage_ops sq_ops = {
    .size = sizeof(struct eai_storage_ops),
    .migrate = sq_migrate,
    .ping = sq_ping,
    .tenant_create = sq_tenant_create,
    .tenant_get = sq_tenant_get,
    .key_create = sq_key_create,
    .key_get = sq_key_get,
    .key_revoke = sq_key_revoke,
    .exec_create = sq_exec_create,
    .exec_get = sq_exec_get,
    .exec_list = sq_exec_list,
    .exec_claim = sq_exec_claim,
    .exec_renew = sq_exec_renew,
    .exec_cancel = sq_exec_cancel,
    .exec_finish = sq_exec_finish,
    .exec_stale = sq_exec_stale,
    .exec_counts = sq_exec_counts,
    .file_get = sq_file_get,
    .manifest_put = sq_manifest_put,
    .manifest_get = sq_manifest_get,
    .manifest_delete = sq_manifest_delete,
    .audit_append = sq_audit_append,
    .audit_list = sq_audit_list,
    .outbox_fetch = sq_outbox_fetch,
    .outbox_ack = sq_outbox_ack,
    .ledger_insert = sq_ledger_insert,
    .ledger_query = sq_ledger_query,
    .kv_get = sq_kv_get,
    .kv_set = sq_kv_set,
};

static const struct eai_config_key sq_config_keys[] = {
    {"path", EAI_CFG_STRING, 1, NULL, "SQLite database file (core passes <data_dir>/eai.db)"},
    {"busy_timeout_ms", EAI_CFG_INT, 0, "5000", "how long a statement waits for a lock (ms)"},
    {"pool_size", EAI_CFG_INT, 0, "8", "connections kept open, one per thread in use"},
    {NULL, 0, 0, NULL, NULL},
};

static const struct eai_plugin_descriptor sq_descriptor = {
    .abi_major = EAI_ABI_MAJOR,
    .abi_minor = EAI_ABI_MINOR,
    .struct_size = sizeof(struct eai_plugin_descriptor),
    .name = "sqlite",
    .kind = EAI_KIND_STORAGE,
    .version = EAI_SQ_VERSION,
    .create = sq_create,
    .destroy = sq_destroy,
    .ops = &sq_ops,
    .config_keys = sq_config_keys,
};

const struct eai_plugin_descriptor *eai_builtin_storage_sqlite(void)
{
    return &sq_descriptor;
}
