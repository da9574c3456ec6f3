/*
 * Connection pool and transactions.
 *
 * A fixed array of pool_size slots guarded by a mutex and a condition
 * variable.  Connections open lazily; a slot whose connection broke is
 * closed and reopened by the next op that takes it.  While the database is
 * unreachable, connection attempts are spaced by an exponential backoff
 * (100 ms doubling to 5 s) and ops fail at once with
 * EAI_E_STORAGE_UNAVAILABLE; nothing is acknowledged before COMMIT returns,
 * so nothing acknowledged is lost.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg.h"

#define EAI_PG_BACKOFF_MIN_MS 100
#define EAI_PG_BACKOFF_MAX_MS 5000
#define EAI_PG_ACQUIRE_WAIT_MS 15000

static void eai_pg_vmsg(char *msg, size_t size, const char *fmt, va_list ap)
{
    vsnprintf(msg, size, fmt, ap);
    /* Trim libpq's trailing newline. */
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
}

struct eai_error *eai_pg_err(struct eai_pg *pg, enum eai_code code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    eai_pg_vmsg(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pg->host->error_new(code, 0, "postgres: %s", msg);
}

int eai_pg_fail(struct eai_pg *pg, struct eai_error **err, enum eai_code code, const char *fmt, ...)
{
    if (!err || *err)
        return -1;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    eai_pg_vmsg(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return eai_host_error_set(pg->host, err, code, "postgres: %s", msg);
}

static void eai_pg_notice(void *arg, const char *message)
{
    struct eai_pg *pg = arg;
    pg->host->log(pg->host, EAI_PG_COMPONENT, EAI_LOG_DEBUG, "server notice: %s", message);
}

int eai_pg_pool_init(struct eai_pg *pg, struct eai_error **err)
{
    pg->conns = calloc((size_t)pg->pool_size, sizeof(*pg->conns));
    if (!pg->conns) {
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "out of memory");
    }
    if (pthread_mutex_init(&pg->mu, NULL) != 0) {
        free(pg->conns);
        pg->conns = NULL;
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "pthread_mutex_init failed");
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&pg->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        pthread_mutex_destroy(&pg->mu);
        free(pg->conns);
        pg->conns = NULL;
        return eai_pg_fail(pg, err, EAI_E_INTERNAL, "pthread_cond_init failed");
    }
    return 0;
}

void eai_pg_pool_close(struct eai_pg *pg)
{
    if (!pg->conns)
        return;
    for (int i = 0; i < pg->pool_size; i++)
        if (pg->conns[i].conn)
            PQfinish(pg->conns[i].conn);
    free(pg->conns);
    pg->conns = NULL;
    pthread_cond_destroy(&pg->cv);
    pthread_mutex_destroy(&pg->mu);
}

static PGconn *eai_pg_connect(struct eai_pg *pg, struct eai_error **err)
{
    char ct[16];
    snprintf(ct, sizeof(ct), "%d", pg->connect_timeout_s);
    const char *keys[] = {"dbname", "connect_timeout", "application_name", "keepalives",
                          "keepalives_idle", "keepalives_interval", "keepalives_count", NULL};
    const char *vals[] = {pg->url, ct, "eaid", "1", "30", "10", "3", NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (!c) {
        eai_pg_fail(pg, err, EAI_E_STORAGE_UNAVAILABLE, "out of memory connecting");
        return NULL;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        eai_pg_fail(pg, err, EAI_E_STORAGE_UNAVAILABLE, "cannot connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, eai_pg_notice, pg);
    char setup[256];
    snprintf(setup, sizeof(setup),
             "SET statement_timeout = %d; SET lock_timeout = %d; "
             "SET idle_in_transaction_session_timeout = 60000; SET client_encoding = 'UTF8'; "
             "SET TIME ZONE 'UTC'",
             pg->statement_timeout_ms, pg->statement_timeout_ms);
    PGresult *r = PQexec(c, setup);
    if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
        eai_pg_fail(pg, err, EAI_E_STORAGE_UNAVAILABLE, "session setup failed: %s", PQerrorMessage(c));
        PQclear(r);
        PQfinish(c);
        return NULL;
    }
    PQclear(r);
    return c;
}

static int64_t eai_pg_deadline_wait(struct eai_pg *pg, int64_t deadline_ms)
{
    int64_t now = eai_monotonic_ms();
    if (now >= deadline_ms)
        return -1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t wait = deadline_ms - now;
    ts.tv_sec += wait / 1000;
    ts.tv_nsec += (wait % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&pg->cv, &pg->mu, &ts);
    return 0;
}

/* Take a slot with a live connection.  Returns the slot index or -1. */
static int eai_pg_acquire(struct eai_pg *pg, struct eai_error **err)
{
    int64_t deadline = eai_monotonic_ms() + EAI_PG_ACQUIRE_WAIT_MS;
    pthread_mutex_lock(&pg->mu);
    int slot = -1;
    for (;;) {
        /* Prefer a slot with an open connection. */
        for (int i = 0; i < pg->pool_size && slot < 0; i++)
            if (!pg->conns[i].busy && pg->conns[i].conn)
                slot = i;
        for (int i = 0; i < pg->pool_size && slot < 0; i++)
            if (!pg->conns[i].busy)
                slot = i;
        if (slot >= 0)
            break;
        if (eai_pg_deadline_wait(pg, deadline) < 0) {
            pthread_mutex_unlock(&pg->mu);
            return eai_pg_fail(pg, err, EAI_E_STORAGE_UNAVAILABLE, "connection pool exhausted (%d busy)",
                               pg->pool_size);
        }
    }
    pg->conns[slot].busy = 1;
    PGconn *c = pg->conns[slot].conn;
    if (c && PQstatus(c) == CONNECTION_OK) {
        pthread_mutex_unlock(&pg->mu);
        return slot;
    }
    if (c) {
        pg->conns[slot].conn = NULL;
        PQfinish(c);
    }
    if (pg->backoff_ms > 0 && eai_monotonic_ms() < pg->backoff_until_ms) {
        pg->conns[slot].busy = 0;
        pthread_cond_signal(&pg->cv);
        pthread_mutex_unlock(&pg->mu);
        return eai_pg_fail(pg, err, EAI_E_STORAGE_UNAVAILABLE, "database unreachable (retrying)");
    }
    pthread_mutex_unlock(&pg->mu);

    struct eai_error *e = NULL;
    c = eai_pg_connect(pg, &e);

    pthread_mutex_lock(&pg->mu);
    if (!c) {
        pg->backoff_ms = pg->backoff_ms ? pg->backoff_ms * 2 : EAI_PG_BACKOFF_MIN_MS;
        if (pg->backoff_ms > EAI_PG_BACKOFF_MAX_MS)
            pg->backoff_ms = EAI_PG_BACKOFF_MAX_MS;
        pg->backoff_until_ms = eai_monotonic_ms() + pg->backoff_ms;
        int log_it = !pg->down_logged;
        pg->down_logged = 1;
        pg->conns[slot].busy = 0;
        pthread_cond_signal(&pg->cv);
        pthread_mutex_unlock(&pg->mu);
        if (log_it)
            pg->host->log(pg->host, EAI_PG_COMPONENT, EAI_LOG_WARN, "database unreachable: %s",
                          e->message);
        *err = e;
        return -1;
    }
    int was_down = pg->down_logged;
    pg->backoff_ms = 0;
    pg->backoff_until_ms = 0;
    pg->down_logged = 0;
    pg->conns[slot].conn = c;
    pthread_mutex_unlock(&pg->mu);
    if (was_down)
        pg->host->log(pg->host, EAI_PG_COMPONENT, EAI_LOG_INFO, "database reachable again");
    return slot;
}

static void eai_pg_release(struct eai_pg *pg, int slot, int broken)
{
    PGconn *c = pg->conns[slot].conn;
    if (c && !broken && PQtransactionStatus(c) != PQTRANS_IDLE) {
        PGresult *r = PQexec(c, "ROLLBACK");
        PQclear(r);
        if (PQtransactionStatus(c) != PQTRANS_IDLE)
            broken = 1;
    }
    if (c && (broken || PQstatus(c) != CONNECTION_OK)) {
        PQfinish(c);
        c = NULL;
    }
    pthread_mutex_lock(&pg->mu);
    if (broken) {
        /* One dead connection usually means the server restarted or the
         * network dropped: the idle ones are most likely dead too.  Close
         * them so the retry (and the next ops) connect afresh instead of
         * failing once per stale connection. */
        for (int i = 0; i < pg->pool_size; i++) {
            if (i != slot && !pg->conns[i].busy && pg->conns[i].conn) {
                PQfinish(pg->conns[i].conn);
                pg->conns[i].conn = NULL;
            }
        }
    }
    pg->conns[slot].conn = c;
    pg->conns[slot].busy = 0;
    pthread_cond_signal(&pg->cv);
    pthread_mutex_unlock(&pg->mu);
}

static int eai_pg_state_is(const char *st, const char *prefix)
{
    return strncmp(st, prefix, strlen(prefix)) == 0;
}

/* Map a failed result to an error; marks connection loss. */
static struct eai_error *eai_pg_result_error(struct eai_pg_tx *tx, const PGresult *r)
{
    struct eai_pg *pg = tx->pg;
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = r ? PQresultErrorMessage(r) : NULL;
    if (!msg || !*msg)
        msg = PQerrorMessage(tx->conn);
    snprintf(tx->sqlstate, sizeof(tx->sqlstate), "%s", st ? st : "");
    if (PQstatus(tx->conn) != CONNECTION_OK || !st) {
        tx->conn_lost = 1;
        return eai_pg_err(pg, EAI_E_STORAGE_UNAVAILABLE, "connection lost: %s", msg);
    }
    if (eai_pg_state_is(st, "08") || eai_pg_state_is(st, "57P")) {
        tx->conn_lost = 1;
        return eai_pg_err(pg, EAI_E_STORAGE_UNAVAILABLE, "[%s] %s", st, msg);
    }
    enum eai_code code = EAI_E_INTERNAL;
    if (eai_pg_state_is(st, "53") || strcmp(st, "57014") == 0 || strcmp(st, "55P03") == 0 ||
        strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0 || strcmp(st, "25006") == 0)
        code = EAI_E_STORAGE_UNAVAILABLE;
    else if (strcmp(st, "42P01") == 0 || strcmp(st, "3F000") == 0 || strcmp(st, "42883") == 0)
        code = EAI_E_STORAGE_UNAVAILABLE;   /* schema missing: `eaid migrate` not run */
    else if (strcmp(st, "23503") == 0)
        code = EAI_E_NOT_FOUND;
    else if (eai_pg_state_is(st, "23"))
        code = EAI_E_CONFLICT;
    else if (strcmp(st, "42501") == 0)
        code = EAI_E_FORBIDDEN;
    else if (eai_pg_state_is(st, "22"))
        code = EAI_E_VALIDATION_FAILED;
    return eai_pg_err(pg, code, "[%s] %s", st, msg);
}

PGresult *eai_pg_qx(struct eai_pg_tx *tx, const char *sql, int n, const char *const *params,
                    const int *lengths, const int *formats, struct eai_error **err)
{
    PGresult *r = PQexecParams(tx->conn, sql, n, NULL, params, lengths, formats, 0);
    ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
        return r;
    *err = eai_pg_result_error(tx, r);
    PQclear(r);
    return NULL;
}

PGresult *eai_pg_q(struct eai_pg_tx *tx, const char *sql, int n, const char *const *params,
                   struct eai_error **err)
{
    return eai_pg_qx(tx, sql, n, params, NULL, NULL, err);
}

int eai_pg_cmd(struct eai_pg_tx *tx, const char *sql, int n, const char *const *params,
               struct eai_error **err)
{
    PGresult *r = eai_pg_q(tx, sql, n, params, err);
    if (!r)
        return -1;
    PQclear(r);
    return 0;
}

static int eai_pg_retryable_state(const char *st)
{
    return strcmp(st, "40001") == 0 || strcmp(st, "40P01") == 0;
}

int eai_pg_role_refused(struct eai_pg *pg)
{
    return __atomic_load_n(&pg->role_state, __ATOMIC_ACQUIRE) < 0;
}

static struct eai_error *eai_pg_role_error(struct eai_pg *pg)
{
    pthread_mutex_lock(&pg->mu);
    struct eai_error *e = eai_pg_err(pg, EAI_E_STORAGE_UNAVAILABLE, "%s", pg->role_msg);
    pthread_mutex_unlock(&pg->mu);
    return e;
}

/* The serving role must not escape row-level security: refuse a superuser,
 * a BYPASSRLS role, or one that owns (or may become the owner of) an eai
 * table, since an owner can ALTER TABLE ... NO FORCE ROW LEVEL SECURITY. */
static int eai_pg_role_check(struct eai_pg_tx *tx, struct eai_error **err)
{
    struct eai_pg *pg = tx->pg;
    int st = __atomic_load_n(&pg->role_state, __ATOMIC_ACQUIRE);
    if (st > 0)
        return 0;
    if (st < 0) {
        *err = eai_pg_role_error(pg);
        return -1;
    }
    PGresult *r = eai_pg_q(tx,
        "SELECT current_user, r.rolsuper, r.rolbypassrls,"
        " (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "   WHERE n.nspname = 'eai' AND c.relkind IN ('r', 'p')),"
        " (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "   WHERE n.nspname = 'eai' AND c.relkind IN ('r', 'p')"
        "   AND pg_has_role(current_user, c.relowner, 'MEMBER')),"
        " (SELECT min(c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "   WHERE n.nspname = 'eai' AND c.relkind IN ('r', 'p')"
        "   AND pg_has_role(current_user, c.relowner, 'MEMBER'))"
        " FROM pg_roles r WHERE r.rolname = current_user", 0, NULL, err);
    if (!r)
        return -1;
    if (PQntuples(r) != 1) {
        PQclear(r);
        *err = eai_pg_err(pg, EAI_E_INTERNAL, "cannot read the attributes of the connected role");
        return -1;
    }
    char role[128], why[256] = "";
    snprintf(role, sizeof(role), "%s", PQgetvalue(r, 0, 0));
    int super = PQgetvalue(r, 0, 1)[0] == 't', bypass = PQgetvalue(r, 0, 2)[0] == 't';
    long tables = strtol(PQgetvalue(r, 0, 3), NULL, 10);
    long owned = strtol(PQgetvalue(r, 0, 4), NULL, 10);
    size_t n = 0;
    if (super)
        n += (size_t)snprintf(why + n, sizeof(why) - n, "is a superuser");
    if (bypass && n < sizeof(why))
        n += (size_t)snprintf(why + n, sizeof(why) - n, "%shas BYPASSRLS", n ? ", " : "");
    if (owned > 0 && n < sizeof(why))
        snprintf(why + n, sizeof(why) - n, "%sowns table eai.%s%s", n ? ", " : "",
                 PQgetvalue(r, 0, 5), owned > 1 ? " and the other eai tables" : "");
    PQclear(r);
    if (why[0]) {
        pthread_mutex_lock(&pg->mu);
        snprintf(pg->role_msg, sizeof(pg->role_msg),
                 "refusing to serve as role '%s': it %s, so row-level security would not isolate"
                 " tenants; connect the server as a NOSUPERUSER NOBYPASSRLS role that does not own"
                 " the eai tables (the one given to `eaid migrate --app-role`; docs/postgres.md)",
                 role, why);
        pthread_mutex_unlock(&pg->mu);
        if (__atomic_exchange_n(&pg->role_state, -1, __ATOMIC_ACQ_REL) >= 0)
            pg->host->log(pg->host, EAI_PG_COMPONENT, EAI_LOG_ERROR, "%s", pg->role_msg);
        *err = eai_pg_role_error(pg);
        return -1;
    }
    /* Safe for good only once the schema exists (an empty database tells
     * nothing about table ownership yet). */
    if (tables > 0)
        __atomic_store_n(&pg->role_state, 1, __ATOMIC_RELEASE);
    return 0;
}

static int eai_pg_run_impl(struct eai_pg *pg, const char *tenant, eai_pg_body_fn body, void *ctx,
                           int check_role, struct eai_error **err)
{
    int lost_retries = 1, conflict_retries = 3;
    for (;;) {
        struct eai_error *e = NULL;
        int slot = eai_pg_acquire(pg, &e);
        if (slot < 0) {
            *err = e;
            return -1;
        }
        struct eai_pg_tx tx = {.pg = pg, .conn = pg->conns[slot].conn};
        int rc = -1, committing = 0;
        if (eai_pg_cmd(&tx, "BEGIN", 0, NULL, &e) == 0 &&
            (!check_role || eai_pg_role_check(&tx, &e) == 0)) {
            const char *p[1] = {tenant};
            if (!tenant ||
                eai_pg_cmd(&tx, "SELECT set_config('app.tenant_id', $1, true)", 1, p, &e) == 0) {
                rc = body(&tx, ctx, &e);
                if (rc >= 0) {
                    committing = 1;
                    if (eai_pg_cmd(&tx, "COMMIT", 0, NULL, &e) < 0)
                        rc = -1;
                }
            }
        }
        int lost = tx.conn_lost;
        char st[6];
        memcpy(st, tx.sqlstate, sizeof(st));
        eai_pg_release(pg, slot, lost);
        if (rc >= 0)
            return rc;
        eai_pg_fail(pg, &e, EAI_E_INTERNAL, "operation failed"); /* unless the body said why */
        /* A connection that died before COMMIT was sent: the transaction
         * rolled back for sure, so one retry on a fresh connection is safe
         * (typical after a database restart: every pooled connection is
         * stale).  A lost COMMIT is ambiguous: report it, never retry. */
        if (lost && !committing && lost_retries-- > 0) {
            pg->host->error_free(e);
            continue;
        }
        if (!lost && eai_pg_retryable_state(st) && conflict_retries-- > 0) {
            pg->host->error_free(e);
            continue;
        }
        *err = e;
        return -1;
    }
}

int eai_pg_run(struct eai_pg *pg, const char *tenant, eai_pg_body_fn body, void *ctx,
               struct eai_error **err)
{
    return eai_pg_run_impl(pg, tenant, body, ctx, 1, err);
}

int eai_pg_run_owner(struct eai_pg *pg, const char *tenant, eai_pg_body_fn body, void *ctx,
                     struct eai_error **err)
{
    return eai_pg_run_impl(pg, tenant, body, ctx, 0, err);
}
