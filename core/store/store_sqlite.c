/*
 * Built-in storage backend: embedded SQLite (WAL), see core/store/store_sqlite.h
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
 * Files: this one (helpers, pool, transactions, schema, audit append,
 * lifecycle, descriptor), store_sqlite_exec.c (executions, files) and
 * store_sqlite_data.c (tenants, keys, manifests, audit, outbox, ledger, kv).
 */
#include "store/store_sqlite_int.h"
#include "base/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ small helpers */

/* RFC 3339 (util.h) or a bare date "2026-11-29" (midnight UTC) to epoch ms. */
int eai_sq_parse_time(const char *s, int64_t *out)
{
    if (s && strlen(s) == 10) {
        char buf[32];
        snprintf(buf, sizeof buf, "%sT00:00:00Z", s);
        return eai_time_parse_rfc3339(buf, out);
    }
    return eai_time_parse_rfc3339(s, out);
}

/* ------------------------------------------------------------ errors */

int eai_sq_fail(struct eai_sq *s, struct eai_error **err, enum eai_code code,
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

int eai_sq_db_fail(struct eai_sq *s, struct eai_error **err, sqlite3 *db, const char *what)
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
    return eai_sq_fail(s, err, code, 0, "%s: %s (%d)", what, sqlite3_errmsg(db), rc);
}

int eai_sq_oom(struct eai_sq *s, struct eai_error **err)
{
    return eai_sq_fail(s, err, EAI_E_INTERNAL, ENOMEM, "out of memory");
}

/* ------------------------------------------------------------ connections */

int eai_sq_exec_sql(struct eai_sq *s, sqlite3 *db, const char *sql, struct eai_error **err)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        eai_sq_fail(s, err, (sqlite3_errcode(db) == SQLITE_BUSY) ? EAI_E_STORAGE_UNAVAILABLE
                                                              : EAI_E_INTERNAL,
                0, "%.60s: %s", sql, msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static sqlite3 *eai_sq_open(struct eai_sq *s, struct eai_error **err)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
                SQLITE_OPEN_EXRESCODE;
    if (sqlite3_open_v2(s->path, &db, flags, NULL) != SQLITE_OK) {
        eai_sq_fail(s, err, EAI_E_STORAGE_UNAVAILABLE, 0, "open %s: %s", s->path,
                    db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, s->busy_ms);
    /* journal_mode=WAL persists in the file; setting it again is a no-op.
     * synchronous (docs/performance.md "Durability"): NORMAL, a commit is
     * in the WAL file (the OS's page cache) when it returns and survives
     * the death of the process, the WAL reaches the disk at checkpoints;
     * FULL, every commit is fsynced before it returns. */
    if (eai_sq_exec_sql(s, db, "PRAGMA journal_mode=WAL", err) < 0 ||
        eai_sq_exec_sql(s, db, "PRAGMA foreign_keys=ON", err) < 0 ||
        eai_sq_exec_sql(s, db, s->sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", err) < 0) {
        sqlite3_close(db);
        return NULL;
    }
    /* Each connection has a page cache of its own (2 MiB by default): the
     * pool's copies of one hot table were most of eaid's RSS with a deep
     * queue.  Bounded to cache_kib each; a miss reads the OS page cache. */
    char sql[48];
    snprintf(sql, sizeof(sql), "PRAGMA cache_size=-%d", s->cache_kib);
    if (eai_sq_exec_sql(s, db, sql, err) < 0) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

static _Thread_local struct eai_sq *sq_writing;  /* the writer mutex this thread holds */
static void sq_writer_done(void);

/* Take a connection (opening one while under pool_max, else waiting). */
struct eai_sq_conn *eai_sq_acquire(struct eai_sq *s, struct eai_error **err)
{
    if (s->test_delay_ms > 0) { /* test hook: every storage call this much slower (workers only) */
        struct timespec ts = {s->test_delay_ms / 1000, (long)(s->test_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
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
        c->db = eai_sq_open(s, err);
    else
        eai_sq_oom(s, err);
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

void eai_sq_release(struct eai_sq *s, struct eai_sq_conn *c)
{
    if (!c)
        return;
    /* Never hand back a connection stuck inside a transaction. */
    if (!sqlite3_get_autocommit(c->db))
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    if (sq_writing == s)
        sq_writer_done();
    pthread_mutex_lock(&s->mu);
    c->next = s->idle;
    s->idle = c;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* The writer mutex (s->wmu): writers of this process queue on it and the
 * next one starts the moment the last commits, where SQLite's own busy
 * handler would have it sleep 1, 2, 5, 10... ms and retry (a claim and a
 * finish racing for the write lock cost a run 1-4 ms).  Another process
 * (the CLI) still meets the busy timeout.  Held from BEGIN to the end of
 * the transaction on this thread: COMMIT, ROLLBACK, or the release of the
 * connection. */
static void sq_writer_done(void)
{
    struct eai_sq *s = sq_writing;
    if (s) {
        sq_writing = NULL;
        pthread_mutex_unlock(&s->wmu);
    }
}

int eai_sq_begin(struct eai_sq *s, sqlite3 *db, struct eai_error **err)
{
    int mine = sq_writing == NULL;
    if (mine) {
        pthread_mutex_lock(&s->wmu);
        sq_writing = s;
    }
    for (int i = 0; i < EAI_SQ_BEGIN_TRIES; i++) {
        int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            return 0;
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            break;
    }
    if (mine)
        sq_writer_done();
    return eai_sq_db_fail(s, err, db, "BEGIN IMMEDIATE");
}

int eai_sq_commit(struct eai_sq *s, sqlite3 *db, struct eai_error **err)
{
    for (int i = 0; i < EAI_SQ_BEGIN_TRIES; i++) {
        int rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
            sq_writer_done();
            return 0;
        }
        if ((rc & 0xff) != SQLITE_BUSY)
            break;
    }
    eai_sq_db_fail(s, err, db, "COMMIT");
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    sq_writer_done();
    return -1;
}

void eai_sq_rollback(sqlite3 *db)
{
    if (!sqlite3_get_autocommit(db)) {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        sq_writer_done();
    }
}

sqlite3_stmt *eai_sq_prep(struct eai_sq *s, sqlite3 *db, const char *sql,
                          struct eai_error **err)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        eai_sq_db_fail(s, err, db, "prepare");
        return NULL;
    }
    return st;
}

void eai_sq_bind_str(sqlite3_stmt *st, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* Step a statement that returns no rows; 0 or -1. */
int eai_sq_step_done(struct eai_sq *s, sqlite3 *db, sqlite3_stmt *st, const char *what,
                     struct eai_error **err)
{
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return eai_sq_db_fail(s, err, db, what);
    return 0;
}

const char *eai_sq_col_text(sqlite3_stmt *st, int i)
{
    return (const char *)sqlite3_column_text(st, i);
}

json_t *eai_sq_col_json(sqlite3_stmt *st, int i)
{
    const char *t = eai_sq_col_text(st, i);
    return t ? json_loads(t, 0, NULL) : NULL;
}

json_t *eai_sq_col_str_or_null(sqlite3_stmt *st, int i)
{
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return json_null();
    return json_string(eai_sq_col_text(st, i));
}

int eai_sq_collect(struct eai_sq *s, sqlite3 *db, sqlite3_stmt *st, json_t *(*row)(sqlite3_stmt *),
                   const char *what, json_t **out, struct eai_error **err)
{
    json_t *arr = json_array();
    if (!arr)
        return eai_sq_oom(s, err);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *v = row(st);
        if (!v || json_array_append_new(arr, v) < 0) {
            json_decref(arr);
            return eai_sq_fail(s, err, EAI_E_INTERNAL, 0, "%s: a row with a bad document", what);
        }
    }
    if (rc != SQLITE_DONE) {
        json_decref(arr);
        return eai_sq_db_fail(s, err, db, what);
    }
    *out = arr;
    return 0;
}

char *eai_sq_dump(const json_t *j)
{
    return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* ------------------------------------------------------------ audit */

/* Append one audit event of `tenant` inside the caller's write transaction. */
int eai_sq_audit_insert(struct eai_sq *s, sqlite3 *db, const char *tenant,
                        const json_t *event, struct eai_error **err)
{
    if (!json_is_object(event))
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "audit event is not an object");
    if (!tenant)
        return eai_sq_fail(s, err, EAI_E_VALIDATION_FAILED, 0, "audit event without tenant");
    if (!s->host || !s->host->audit_seal)
        return eai_sq_fail(s, err, EAI_E_INTERNAL, 0, "host has no audit_seal");

    int ret = -1;
    char *prev = NULL, *doc = NULL;
    json_t *ev = NULL;
    int64_t seq = 1;
    sqlite3_stmt *st = eai_sq_prep(s, db,
        "SELECT seq, hash FROM audit_events WHERE tenant_id = ?1 ORDER BY seq DESC LIMIT 1", err);
    if (!st)
        return -1;
    sqlite3_bind_text(st, 1, tenant, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        seq = sqlite3_column_int64(st, 0) + 1;
        prev = strdup(eai_sq_col_text(st, 1) ? eai_sq_col_text(st, 1) : "");
        if (!prev) {
            eai_sq_oom(s, err);
            goto out;
        }
    } else if (rc != SQLITE_DONE) {
        eai_sq_db_fail(s, err, db, "audit last");
        goto out;
    }
    sqlite3_finalize(st);
    st = NULL;

    ev = json_deep_copy(event);
    if (!ev) {
        eai_sq_oom(s, err);
        goto out;
    }
    int64_t now = eai_now_ms();
    char now_s[32];
    eai_time_rfc3339(now, now_s);
    if (!eai_jstr(ev, "id")) {
        char id[37];
        eai_uuid_v4(id);
        json_object_set_new(ev, "id", json_string(id));
    }
    if (!eai_jstr(ev, "time"))
        json_object_set_new(ev, "time", json_string(now_s));
    json_object_set_new(ev, "tenant_id", json_string(tenant));
    json_object_set_new(ev, "seq", json_integer(seq));
    json_object_del(ev, "hash");
    json_object_del(ev, "prev_hash");
    if (s->host->audit_seal(ev, prev) != 0 || !eai_jstr(ev, "hash") || !eai_jstr(ev, "prev_hash")) {
        eai_sq_fail(s, err, EAI_E_INTERNAL, 0, "audit_seal failed");
        goto out;
    }
    doc = eai_sq_dump(ev);
    if (!doc) {
        eai_sq_oom(s, err);
        goto out;
    }
    st = eai_sq_prep(s, db,
        "INSERT INTO audit_events (id, tenant_id, seq, time, actor, action, target, decision,"
        " prev_hash, hash, doc, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12)", err);
    if (!st)
        goto out;
    eai_sq_bind_str(st, 1, eai_jstr(ev, "id"));
    eai_sq_bind_str(st, 2, tenant);
    sqlite3_bind_int64(st, 3, seq);
    eai_sq_bind_str(st, 4, eai_jstr(ev, "time"));
    eai_sq_bind_str(st, 5, eai_jstr(ev, "actor"));
    eai_sq_bind_str(st, 6, eai_jstr(ev, "action"));
    eai_sq_bind_str(st, 7, eai_jstr(ev, "target"));
    eai_sq_bind_str(st, 8, eai_jstr(ev, "decision"));
    eai_sq_bind_str(st, 9, eai_jstr(ev, "prev_hash"));
    eai_sq_bind_str(st, 10, eai_jstr(ev, "hash"));
    sqlite3_bind_text(st, 11, doc, -1, SQLITE_STATIC);
    eai_sq_bind_str(st, 12, now_s);
    if (eai_sq_step_done(s, db, st, "audit insert", err) < 0)
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

static int eai_sq_cfg_int(const json_t *config, const char *key, int def)
{
    const json_t *v = json_object_get(config, key);
    if (json_is_integer(v))
        return (int)json_integer_value(v);
    if (json_is_string(v))
        return atoi(json_string_value(v));
    return def;
}

static void eai_sq_destroy(void *self)
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
    pthread_mutex_destroy(&s->wmu);
    pthread_cond_destroy(&s->cv);
    free(s->path);
    free(s);
}

static void *eai_sq_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    const char *path = eai_jstr(config, "path");
    if (!host || !host->error_new)
        return NULL;
    if (!path || !*path) {
        eai_host_error_set(host, err, EAI_E_VALIDATION_FAILED, "sqlite: config key 'path' is required");
        return NULL;
    }
    struct eai_sq *s = calloc(1, sizeof *s);
    if (!s) {
        eai_host_error_set(host, err, EAI_E_INTERNAL, "sqlite: out of memory");
        return NULL;
    }
    s->host = host;
    s->busy_ms = eai_sq_cfg_int(config, "busy_timeout_ms", 5000);
    s->pool_max = eai_sq_cfg_int(config, "pool_size", 8);
    s->cache_kib = eai_sq_cfg_int(config, "cache_kib", EAI_SQ_CACHE_KIB);
    if (s->cache_kib < 64)
        s->cache_kib = 64;
    if (s->busy_ms < 0)
        s->busy_ms = 0;
    if (s->pool_max < 1)
        s->pool_max = 1;
    const json_t *sync = json_object_get(config, "synchronous");
    if (sync && (!json_is_string(sync) || (strcmp(json_string_value(sync), "normal") != 0 &&
                                           strcmp(json_string_value(sync), "full") != 0))) {
        eai_host_error_set(host, err, EAI_E_VALIDATION_FAILED, "sqlite: synchronous must be 'normal' or 'full'");
        free(s);
        return NULL;
    }
    s->sync_full = sync && strcmp(json_string_value(sync), "full") == 0;
    /* Test-only hook (docs/api.md, "Overload"): slow storage. */
    const char *delay = getenv("EAI_TEST_STORAGE_DELAY_MS");
    if (delay && atoi(delay) > 0 && atoi(delay) <= 10000) {
        s->test_delay_ms = atoi(delay);
        host->log(host, "sqlite", EAI_LOG_WARN, "test hook EAI_TEST_STORAGE_DELAY_MS: every storage call %d ms slower",
                  s->test_delay_ms);
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->wmu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->path = strdup(path);
    if (!s->path) {
        eai_sq_oom(s, err);
        eai_sq_destroy(s);
        return NULL;
    }
    struct eai_sq_conn *c = eai_sq_acquire(s, err);
    if (!c) {
        eai_sq_destroy(s);
        return NULL;
    }
    int rc = eai_sq_migrate_db(s, c->db, err);
    eai_sq_release(s, c);
    if (rc < 0) {
        eai_sq_destroy(s);
        return NULL;
    }
    return s;
}

static int eai_sq_migrate(void *self, const char *app_role, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int rc = eai_sq_migrate_db(s, c->db, err);
    eai_sq_release(s, c);
    return rc;
}

static int eai_sq_ping(void *self, struct eai_error **err)
{
    struct eai_sq *s = self;
    SQ_WITH_CONN(s, err, c);
    int rc = eai_sq_exec_sql(s, c->db, "SELECT 1", err);
    eai_sq_release(s, c);
    return rc;
}

/* ------------------------------------------------------------ descriptor */

static const struct eai_storage_ops eai_sq_ops = {
    .size = sizeof(struct eai_storage_ops),
    .migrate = eai_sq_migrate,
    .ping = eai_sq_ping,
    .tenant_create = eai_sq_tenant_create,
    .tenant_get = eai_sq_tenant_get,
    .key_create = eai_sq_key_create,
    .key_get = eai_sq_key_get,
    .key_revoke = eai_sq_key_revoke,
    .exec_create = eai_sq_exec_create,
    .exec_get = eai_sq_exec_get,
    .exec_list = eai_sq_exec_list,
    .exec_claim = eai_sq_exec_claim,
    .exec_renew = eai_sq_exec_renew,
    .exec_cancel = eai_sq_exec_cancel,
    .exec_finish = eai_sq_exec_finish,
    .exec_stale = eai_sq_exec_stale,
    .exec_counts = eai_sq_exec_counts,
    .file_get = eai_sq_file_get,
    .manifest_put = eai_sq_manifest_put,
    .manifest_get = eai_sq_manifest_get,
    .manifest_delete = eai_sq_manifest_delete,
    .audit_append = eai_sq_audit_append,
    .audit_list = eai_sq_audit_list,
    .outbox_fetch = eai_sq_outbox_fetch,
    .outbox_ack = eai_sq_outbox_ack,
    .ledger_insert = eai_sq_ledger_insert,
    .ledger_query = eai_sq_ledger_query,
    .kv_get = eai_sq_kv_get,
    .kv_set = eai_sq_kv_set,
    .audit_heads = eai_sq_audit_heads,
    .exec_claim_excluding = eai_sq_exec_claim_excluding,
    .tenant_list = eai_sq_tenant_list,
    .key_list = eai_sq_key_list,
    .key_create_expiring = eai_sq_key_create_expiring,
    .manifest_list = eai_sq_manifest_list,
    .outbox_append = eai_sq_outbox_append,
    .tenant_usage = eai_sq_tenant_usage,
    .exec_prune = eai_sq_exec_prune,
    .run_get = eai_sq_run_get,            /* 1.3: the agent view (store_sqlite_agent.c) */
    .run_list = eai_sq_run_list,
    .agent_list = eai_sq_agent_list,
    .agent_get = eai_sq_agent_get,
    .session_put = eai_sq_session_put,
    .session_get = eai_sq_session_get,
    .session_list = eai_sq_session_list,
    .session_owned = eai_sq_session_owned,
    .snapshot_put = eai_sq_snapshot_put,       /* 1.5: snapshot records */
    .snapshot_get = eai_sq_snapshot_get,
    .snapshot_list = eai_sq_snapshot_list,
    .snapshot_delete = eai_sq_snapshot_delete,
    .snapshot_owned = eai_sq_snapshot_owned,
};

static const struct eai_config_key eai_sq_config_keys[] = {
    {"path", EAI_CFG_STRING, 1, NULL, "SQLite database file (core passes <data_dir>/eai.db)"},
    {"busy_timeout_ms", EAI_CFG_INT, 0, "5000", "how long a statement waits for a lock (ms)"},
    {"pool_size", EAI_CFG_INT, 0, "8", "connections kept open, one per thread in use"},
    {"cache_kib", EAI_CFG_INT, 0, "512", "page cache of each connection in KiB (at least 64)"},
    {"synchronous", EAI_CFG_STRING, 0, "normal",
     "normal: a commit survives the death of eaid, fsync at checkpoints; full: fsync at every commit"},
    {NULL, 0, 0, NULL, NULL},
};

static const struct eai_plugin_descriptor eai_sq_descriptor = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "sqlite",
    .kind = EAI_KIND_STORAGE,
    .version = EAI_VERSION, /* the build's (CMake project version) */
    .create = eai_sq_create,
    .destroy = eai_sq_destroy,
    .ops = &eai_sq_ops,
    .config_keys = eai_sq_config_keys,
};

/* A built-in: the descriptor a vendor's .so would have, but its function is
 * not EAI_PLUGIN_DECLARE's exported eai_plugin_descriptor() (eaid holds
 * several built-ins): core registers it (eai_plugin_register_builtin) and
 * the loader checks it like a file's. */
const struct eai_plugin_descriptor *eai_builtin_storage_sqlite(void)
{
    return &eai_sq_descriptor;
}
