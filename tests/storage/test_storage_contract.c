/*
 * The storage contract: every op of struct eai_storage_ops, against the
 * backend chosen at run time.
 *   EAI_TEST_STORAGE unset or "sqlite": built-in SQLite on a fresh temp file.
 *   EAI_TEST_STORAGE=postgres://...: eai-storage-postgres.so loaded from
 *   eai_plugin_dir() with config {"url": URL}.
 *
 * Every test works with fresh tenants (tenant_create) and fresh ids, and
 * makes every execution it creates terminal before it returns, so the suite
 * can share one PostgreSQL database with earlier runs.  The queue ops are
 * SYSTEM-wide: the claim tests expect no other process to queue executions
 * in the same database while they run.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stddef.h>

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <sqlite3.h>

#include <eai/storage.h>

#include "obs/audit.h"
#include "base/errors.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "store/store_sqlite.h"
#include "store/store_sqlite_int.h"
#include "base/util.h"
#include "record_schema_check.h"

static const struct eai_plugin_descriptor *g_desc;
static const struct eai_storage_ops *g_ops;
static void *g_st;
static struct eai_host *g_host;
static char g_dir[64];
static int g_is_sqlite = 1;

#define AUDIT_ALL 100000

/* ------------------------------------------------------------ helpers */

static int report(const char *what, struct eai_error *err)
{
    if (err) {
        fprintf(stderr, "  %s: %s (%s)\n", what, err->message ? err->message : "?",
                eai_code_name(err->code));
        eai_error_free(err);
    }
    return 0;
}

#define OK(call)                                                 \
    do {                                                         \
        struct eai_error *err_ = NULL;                           \
        struct eai_error **err = &err_;                          \
        int rc_ = (call);                                        \
        if (rc_ < 0)                                             \
            report(#call, err_);                                 \
        CU_ASSERT_FATAL(rc_ >= 0);                               \
    } while (0)

/* Call expecting -1 with an error of `code`. */
#define FAILS(code_, call)                                       \
    do {                                                         \
        struct eai_error *err_ = NULL;                           \
        struct eai_error **err = &err_;                          \
        int rc_ = (call);                                        \
        CU_ASSERT_EQUAL(rc_, -1);                                \
        CU_ASSERT_PTR_NOT_NULL(err_);                            \
        if (err_) {                                              \
            CU_ASSERT_EQUAL(err_->code, (code_));                \
            eai_error_free(err_);                                \
        }                                                        \
    } while (0)

static void new_tenant(char out[37])
{
    json_t *t = NULL;
    char name[64];
    eai_random_hex(name, 6);
    OK(g_ops->tenant_create(g_st, name, &t, err));
    CU_ASSERT_FATAL(json_is_object(t));
    CU_ASSERT_STRING_EQUAL(eai_jstr(t, "name"), name);
    CU_ASSERT_FATAL(eai_jstr(t, "id") != NULL && strlen(eai_jstr(t, "id")) == 36);
    snprintf(out, 37, "%s", eai_jstr(t, "id"));
    json_decref(t);
}

static void new_exec_id(char out[41])
{
    char u[37];
    eai_uuid_v4(u);
    snprintf(out, 41, "sbx_%s", u);
}

static json_t *audit_event(const char *action, const char *target)
{
    char id[37];
    eai_uuid_v4(id);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:n}", "id", id, "actor", "key-test",
                     "action", action, "target", target ? target : "", "decision", "allow",
                     "reason", "", "request_id", "req-test", "trace_id");
}

/* The same event again, with a fresh id (ids are unique per event). */
static json_t *reid(json_t *ev)
{
    char id[37];
    eai_uuid_v4(id);
    json_object_set_new(ev, "id", json_string(id));
    return ev;
}

/* A queued execution record as core builds it (inputs included). */
static json_t *exec_record(const char *id, const char *run_id, const char *key, const char *hash)
{
    char now[32];
    eai_time_rfc3339(eai_now_ms(), now);
    json_t *e = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:[s,s,s], s:{s:s, s:s, s:i}, s:{s:s}, s:s, s:b,"
        " s:[{s:s, s:s}], s:[s], s:[], s:s, s:s, s:s, s:s, s:s}",
        "id", id, "status", "queued", "profile", "gvisor-small", "backend", "gvisor",
        "image", "python:3.11-slim", "command", "python3", "-c", "print(2+2)",
        "limits", "cpu", "500m", "memory", "256Mi", "timeout_s", 30,
        "env", "SECRET", "hunter2", "stdin", "stdin-secret", "stdin_b64", 0,
        "files_in", "path", "/tmp/in/a.txt", "content_b64", "c2VjcmV0",
        "collect", "/tmp/outputs", "egress",
        "project_id", "proj-1", "agent_id", "agent-1", "run_id", run_id ? run_id : "run-1",
        "trace_id", "0af7651916cd43dd8448eb211c80319c", "created_at", now);
    if (key)
        json_object_set_new(e, "idempotency_key", json_string(key));
    if (hash)
        json_object_set_new(e, "request_hash", json_string(hash));
    return e;
}

static int create_exec(const char *tenant, char id[41], const char *run_id)
{
    new_exec_id(id);
    json_t *e = exec_record(id, run_id, NULL, NULL);
    json_t *existing = NULL;
    int rc = 0;
    OK(rc = g_ops->exec_create(g_st, tenant, e, NULL, &existing, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    CU_ASSERT_PTR_NULL(existing);
    json_decref(e);
    return rc;
}

static json_t *get_exec(const char *tenant, const char *id)
{
    json_t *out = NULL;
    OK(g_ops->exec_get(g_st, tenant, id, &out, err));
    return out;
}

static const char *exec_status(const char *tenant, const char *id, char buf[32])
{
    json_t *e = get_exec(tenant, id);
    snprintf(buf, 32, "%s", e && eai_jstr(e, "status") ? eai_jstr(e, "status") : "(none)");
    json_decref(e);
    return buf;
}

/* Make an execution terminal (cleanup); NOOP when it already is. */
static void finish_exec(const char *tenant, const char *id, const char *status)
{
    json_t *patch = json_pack("{s:s, s:i}", "status", status, "exit_code", 0);
    int rc = 0;
    OK(rc = g_ops->exec_finish(g_st, tenant, id, patch, NULL, NULL, NULL, err));
    CU_ASSERT(rc == EAI_STORE_UPDATED || rc == EAI_STORE_NOOP);
    json_decref(patch);
}

static int array_has_id(const json_t *arr, const char *id)
{
    size_t i;
    const json_t *v;
    json_array_foreach(arr, i, v) {
        if (eai_jstr(v, "id") && strcmp(eai_jstr(v, "id"), id) == 0)
            return 1;
    }
    return 0;
}

static json_int_t audit_count(const char *tenant)
{
    json_t *l = NULL;
    OK(g_ops->audit_list(g_st, tenant, 0, AUDIT_ALL, &l, err));
    json_int_t n = (json_int_t)json_array_size(l);
    json_decref(l);
    return n;
}

static json_t *audit_last(const char *tenant)
{
    json_t *l = NULL;
    OK(g_ops->audit_list(g_st, tenant, 0, AUDIT_ALL, &l, err));
    json_t *last = json_incref(json_array_get(l, json_array_size(l) - 1));
    json_decref(l);
    return last;
}

/* ------------------------------------------------------------ descriptor, migrate, ping */

static void test_descriptor_migrate_ping(void)
{
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(eai_plugin_check(g_desc, EAI_KIND_STORAGE, g_desc->name, "contract", &e), 0);
    report("plugin_check", e);
    CU_ASSERT(g_ops->size >= sizeof(struct eai_storage_ops));
    OK(g_ops->ping(g_st, err));
    if (g_is_sqlite) {
        OK(g_ops->migrate(g_st, NULL, err));
        OK(g_ops->migrate(g_st, NULL, err)); /* idempotent */
        OK(g_ops->ping(g_st, err));
    }
}

/* ------------------------------------------------------------ tenants and keys */

static void test_tenants_keys(void)
{
    char a[37], key_id[40], missing[37];
    new_tenant(a);
    json_t *t = NULL;
    OK(g_ops->tenant_get(g_st, a, &t, err));
    CU_ASSERT_FATAL(t != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(t, "id"), a);
    CU_ASSERT_PTR_NOT_NULL(eai_jstr(t, "created_at"));
    json_decref(t);
    eai_uuid_v4(missing);
    t = (json_t *)1;
    OK(g_ops->tenant_get(g_st, missing, &t, err));
    CU_ASSERT_PTR_NULL(t);

    char hash[65];
    eai_sha256_hex("secret", 6, hash);
    eai_random_hex(key_id, 12);
    OK(g_ops->key_create(g_st, a, key_id, hash, "ci", err));
    json_t *k = NULL;
    OK(g_ops->key_get(g_st, key_id, &k, err));
    CU_ASSERT_FATAL(k != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(k, "key_id"), key_id);
    CU_ASSERT_STRING_EQUAL(eai_jstr(k, "tenant_id"), a);
    CU_ASSERT_STRING_EQUAL(eai_jstr(k, "hash"), hash);
    CU_ASSERT_STRING_EQUAL(eai_jstr(k, "name"), "ci");
    CU_ASSERT(json_is_false(json_object_get(k, "revoked")));
    json_decref(k);

    OK(g_ops->key_revoke(g_st, key_id, err));
    OK(g_ops->key_get(g_st, key_id, &k, err));
    CU_ASSERT_FATAL(k != NULL);
    CU_ASSERT(json_is_true(json_object_get(k, "revoked")));
    json_decref(k);

    char unknown[40];
    eai_random_hex(unknown, 12);
    k = (json_t *)1;
    OK(g_ops->key_get(g_st, unknown, &k, err));
    CU_ASSERT_PTR_NULL(k);
    FAILS(EAI_E_NOT_FOUND, g_ops->key_revoke(g_st, unknown, err));
}

/* ------------------------------------------------------------ admin listings, key expiry */

#define T_2099 4070908800000LL /* 2099-01-01T00:00:00.000Z */

static const json_t *find_key(const json_t *list, const char *key_id)
{
    size_t i;
    const json_t *k;
    json_array_foreach(list, i, k)
        if (eai_jstr(k, "key_id") && strcmp(eai_jstr(k, "key_id"), key_id) == 0)
            return k;
    return NULL;
}

static void test_admin_lists_expiry(void)
{
    CU_ASSERT_FATAL(g_ops->size >= offsetof(struct eai_storage_ops, key_create_expiring) +
                                       sizeof g_ops->key_create_expiring);
    CU_ASSERT_FATAL(g_ops->tenant_list && g_ops->key_list && g_ops->key_create_expiring);
    char a[37], b[37], missing[37];
    new_tenant(a);
    new_tenant(b);

    /* tenant_list: pages of 2 in id order, each tenant exactly once */
    char cursor[37] = "";
    int seen_a = 0, seen_b = 0, pages = 0;
    for (;;) {
        json_t *page = NULL;
        OK(g_ops->tenant_list(g_st, cursor[0] ? cursor : NULL, 2, &page, err));
        CU_ASSERT_FATAL(json_is_array(page));
        CU_ASSERT(json_array_size(page) <= 2);
        size_t n = json_array_size(page), i;
        json_t *t;
        json_array_foreach(page, i, t) {
            CU_ASSERT_FATAL(eai_jstr(t, "id") != NULL);
            CU_ASSERT(strcmp(eai_jstr(t, "id"), cursor) > 0);
            CU_ASSERT_PTR_NOT_NULL(eai_jstr(t, "name"));
            CU_ASSERT_PTR_NOT_NULL(eai_jstr(t, "created_at"));
            seen_a += strcmp(eai_jstr(t, "id"), a) == 0;
            seen_b += strcmp(eai_jstr(t, "id"), b) == 0;
            snprintf(cursor, sizeof cursor, "%s", eai_jstr(t, "id"));
        }
        json_decref(page);
        if (n == 0 || ++pages > 100000)
            break;
    }
    CU_ASSERT_EQUAL(seen_a, 1);
    CU_ASSERT_EQUAL(seen_b, 1);
    json_t *page = NULL;
    FAILS(EAI_E_VALIDATION_FAILED, g_ops->tenant_list(g_st, NULL, 0, &page, err));
    FAILS(EAI_E_VALIDATION_FAILED, g_ops->tenant_list(g_st, NULL, 1001, &page, err));

    /* keys: one that never expires, one in 2099, one already expired */
    char hash[65], k1[40], k2[40], k3[40], kb[40];
    eai_sha256_hex("list-secret", 11, hash);
    eai_random_hex(k1, 8);
    eai_random_hex(k2, 8);
    eai_random_hex(k3, 8);
    eai_random_hex(kb, 8);
    OK(g_ops->key_create(g_st, a, k1, hash, "plain", err));
    OK(g_ops->key_create_expiring(g_st, a, k2, hash, "later", T_2099, err));
    OK(g_ops->key_create_expiring(g_st, a, k3, hash, NULL, 1000, err));
    OK(g_ops->key_create_expiring(g_st, b, kb, hash, "b", 0, err));
    eai_uuid_v4(missing);
    FAILS(EAI_E_NOT_FOUND, g_ops->key_create_expiring(g_st, missing, "feedfacefeedface", hash, "x", T_2099, err));

    json_t *k = NULL;
    OK(g_ops->key_get(g_st, k2, &k, err));
    CU_ASSERT_FATAL(k != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(k, "expires_at") ? eai_jstr(k, "expires_at") : "", "2099-01-01T00:00:00.000Z");
    CU_ASSERT_STRING_EQUAL(eai_jstr(k, "hash"), hash);
    json_decref(k);
    OK(g_ops->key_get(g_st, k1, &k, err));
    CU_ASSERT_FATAL(k != NULL);
    CU_ASSERT(json_is_null(json_object_get(k, "expires_at")));
    json_decref(k);
    OK(g_ops->key_get(g_st, k3, &k, err));
    CU_ASSERT_FATAL(k != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(k, "expires_at") ? eai_jstr(k, "expires_at") : "", "1970-01-01T00:00:01.000Z");
    json_decref(k);
    OK(g_ops->key_revoke(g_st, k1, err));

    json_t *list = NULL;
    OK(g_ops->key_list(g_st, a, &list, err));
    CU_ASSERT_FATAL(json_is_array(list));
    CU_ASSERT_EQUAL(json_array_size(list), 3);
    char *dump = json_dumps(list, JSON_COMPACT);
    CU_ASSERT_FATAL(dump != NULL);
    CU_ASSERT(strstr(dump, hash) == NULL); /* never the hash */
    CU_ASSERT(strstr(dump, "\"hash\"") == NULL);
    free(dump);
    const json_t *x1 = find_key(list, k1), *x2 = find_key(list, k2), *x3 = find_key(list, k3);
    CU_ASSERT_FATAL(x1 && x2 && x3);
    CU_ASSERT_STRING_EQUAL(eai_jstr(x1, "name"), "plain");
    CU_ASSERT(json_is_true(json_object_get(x1, "revoked")));
    CU_ASSERT(json_is_null(json_object_get(x1, "expires_at")));
    CU_ASSERT_PTR_NOT_NULL(eai_jstr(x1, "created_at"));
    CU_ASSERT(json_is_false(json_object_get(x2, "revoked")));
    CU_ASSERT_STRING_EQUAL(eai_jstr(x2, "expires_at") ? eai_jstr(x2, "expires_at") : "", "2099-01-01T00:00:00.000Z");
    CU_ASSERT(json_is_null(json_object_get(x3, "name")));
    CU_ASSERT_PTR_NULL(find_key(list, kb)); /* another tenant's key */
    json_decref(list);
    OK(g_ops->key_list(g_st, b, &list, err));
    CU_ASSERT_EQUAL(json_array_size(list), 1);
    CU_ASSERT_PTR_NOT_NULL(find_key(list, kb));
    json_decref(list);
    OK(g_ops->key_list(g_st, missing, &list, err));
    CU_ASSERT(json_is_array(list) && json_array_size(list) == 0);
    json_decref(list);
    OK(g_ops->key_list(g_st, "not-a-tenant", &list, err));
    CU_ASSERT(json_is_array(list) && json_array_size(list) == 0);
    json_decref(list);
}

/* SQLite: a database made before key expiry existed gains the column at
 * open, and its keys keep working (never expiring). */
static void test_sqlite_key_expiry_upgrade(void)
{
    if (!g_is_sqlite)
        return;
    char path[128];
    snprintf(path, sizeof path, "%s/old.db", g_dir);
    sqlite3 *db = NULL;
    CU_ASSERT_FATAL(sqlite3_open(path, &db) == SQLITE_OK);
    const char *old =
        "CREATE TABLE tenants (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL CHECK (tenant_id = id),"
        " name TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);"
        "CREATE TABLE api_keys (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id)"
        " ON DELETE CASCADE, hash TEXT NOT NULL, name TEXT, revoked INTEGER NOT NULL DEFAULT 0,"
        " created_at TEXT NOT NULL, updated_at TEXT NOT NULL);"
        "INSERT INTO tenants VALUES ('11111111-1111-4111-8111-111111111111',"
        " '11111111-1111-4111-8111-111111111111', 'old', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');"
        "INSERT INTO api_keys VALUES ('0123456789abcdef', '11111111-1111-4111-8111-111111111111', 'h', 'k',"
        " 0, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');";
    CU_ASSERT_FATAL(sqlite3_exec(db, old, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    json_t *cfg = json_pack("{s:s}", "path", path);
    struct eai_error *e = NULL;
    void *st = g_desc->create(g_host, cfg, &e);
    json_decref(cfg);
    report("create on an old database", e);
    CU_ASSERT_FATAL(st != NULL);
    json_t *k = NULL;
    OK(g_ops->key_get(st, "0123456789abcdef", &k, err));
    CU_ASSERT_FATAL(k != NULL);
    CU_ASSERT(json_is_null(json_object_get(k, "expires_at")));
    json_decref(k);
    OK(g_ops->key_create_expiring(st, "11111111-1111-4111-8111-111111111111", "fedcba9876543210", "h2", NULL,
                                  T_2099, err));
    json_t *list = NULL;
    OK(g_ops->key_list(st, "11111111-1111-4111-8111-111111111111", &list, err));
    CU_ASSERT_EQUAL(json_array_size(list), 2);
    json_decref(list);
    OK(g_ops->migrate(st, NULL, err)); /* again: the column is there, nothing to do */
    g_desc->destroy(st);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
}

/* ------------------------------------------------------------ executions */

static void test_exec_create_get_list_isolation(void)
{
    char a[37], b[37], ids[3][41];
    new_tenant(a);
    new_tenant(b);
    json_int_t audits = audit_count(a);
    for (int i = 0; i < 3; i++) {
        new_exec_id(ids[i]);
        json_t *e = exec_record(ids[i], i < 2 ? "r1" : "r2", NULL, NULL);
        json_t *ev = audit_event("sandbox.execute", ids[i]);
        int rc = 0;
        OK(rc = g_ops->exec_create(g_st, a, e, ev, NULL, err));
        CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
        json_decref(e);
        json_decref(ev);
    }
    /* Audit in the same transaction: one event per create. */
    CU_ASSERT_EQUAL(audit_count(a), audits + 3);
    json_t *last = audit_last(a);
    CU_ASSERT_STRING_EQUAL(eai_jstr(last, "action"), "sandbox.execute");
    CU_ASSERT_STRING_EQUAL(eai_jstr(last, "target"), ids[2]);
    CU_ASSERT_STRING_EQUAL(eai_jstr(last, "tenant_id"), a);
    json_decref(last);

    json_t *e = get_exec(a, ids[0]);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "id"), ids[0]);
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "tenant_id"), a);
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "status"), "queued");
    CU_ASSERT_STRING_EQUAL(eai_jstr(e, "image"), "python:3.11-slim");
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_object_get(e, "env"), "SECRET"), "hunter2");
    CU_ASSERT(json_is_integer(json_object_get(e, "seq")));
    CU_ASSERT(json_is_false(json_object_get(e, "cancel_requested")));
    CU_ASSERT_PTR_NOT_NULL(eai_jstr(e, "created_at"));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(e, "command")), 3);
    json_int_t seq0 = json_integer_value(json_object_get(e, "seq"));
    json_decref(e);

    /* Tenant B sees nothing of A. */
    CU_ASSERT_PTR_NULL(get_exec(b, ids[0]));
    json_t *l = NULL, *f = json_pack("{s:i}", "limit", 100);
    OK(g_ops->exec_list(g_st, b, f, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 0);
    json_decref(l);

    /* Newest first, seq increasing with creation. */
    OK(g_ops->exec_list(g_st, a, f, &l, err));
    CU_ASSERT_FATAL(json_array_size(l) == 3);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, (size_t)i), "id"), ids[2 - i]);
    json_int_t s2 = json_integer_value(json_object_get(json_array_get(l, 0), "seq"));
    json_int_t s1 = json_integer_value(json_object_get(json_array_get(l, 1), "seq"));
    CU_ASSERT(s2 > s1 && s1 > seq0);
    json_decref(l);
    json_decref(f);

    /* Cursor paging: limit 2, then after = seq of the last one. */
    f = json_pack("{s:i}", "limit", 2);
    OK(g_ops->exec_list(g_st, a, f, &l, err));
    CU_ASSERT_FATAL(json_array_size(l) == 2);
    json_int_t cursor = json_integer_value(json_object_get(json_array_get(l, 1), "seq"));
    json_decref(l);
    json_object_set_new(f, "after", json_integer(cursor));
    OK(g_ops->exec_list(g_st, a, f, &l, err));
    CU_ASSERT_FATAL(json_array_size(l) == 1);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 0), "id"), ids[0]);
    json_decref(l);
    json_decref(f);

    /* Items carry no inputs (files_in, stdin, env); {id, limit 1} is the
     * light read of one execution, tenant-scoped (issue 16.3). */
    f = json_pack("{s:s, s:i}", "id", ids[1], "limit", 1);
    OK(g_ops->exec_list(g_st, a, f, &l, err));
    CU_ASSERT_FATAL(json_array_size(l) == 1);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 0), "id"), ids[1]);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(l, 0), "status"), "queued");
    CU_ASSERT_PTR_NULL(json_object_get(json_array_get(l, 0), "env"));
    CU_ASSERT_PTR_NULL(json_object_get(json_array_get(l, 0), "stdin"));
    CU_ASSERT_PTR_NULL(json_object_get(json_array_get(l, 0), "files_in"));
    json_decref(l);
    OK(g_ops->exec_list(g_st, b, f, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 0);
    json_decref(l);
    json_object_set_new(f, "id", json_string("sbx_00000000-0000-4000-8000-000000000000"));
    OK(g_ops->exec_list(g_st, a, f, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 0);
    json_decref(l);
    json_decref(f);

    /* Filters. */
    f = json_pack("{s:i, s:s}", "limit", 100, "run_id", "r1");
    OK(g_ops->exec_list(g_st, a, f, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 2);
    CU_ASSERT(array_has_id(l, ids[0]) && array_has_id(l, ids[1]));
    json_decref(l);
    OK(g_ops->exec_list(g_st, b, f, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 0);
    json_decref(l);
    json_decref(f);
    f = json_pack("{s:i, s:s}", "limit", 100, "status", "running");
    OK(g_ops->exec_list(g_st, a, f, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 0);
    json_decref(l);
    json_object_set_new(f, "status", json_string("queued"));
    OK(g_ops->exec_list(g_st, a, f, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 3);
    json_decref(l);
    json_decref(f);

    /* B cannot finish or cancel A's execution. */
    json_t *patch = json_pack("{s:s}", "status", "failed");
    FAILS(EAI_E_NOT_FOUND, g_ops->exec_finish(g_st, b, ids[0], patch, NULL, NULL, NULL, err));
    json_decref(patch);
    json_t *out = (json_t *)1;
    OK(g_ops->exec_cancel(g_st, b, ids[0], NULL, NULL, &out, err));
    CU_ASSERT_PTR_NULL(out);
    char buf[32];
    CU_ASSERT_STRING_EQUAL(exec_status(a, ids[0], buf), "queued");

    for (int i = 0; i < 3; i++)
        finish_exec(a, ids[i], "cancelled");
}

static void test_idempotency(void)
{
    char a[37], b[37], id1[41], id2[41], id3[41], id4[41];
    new_tenant(a);
    new_tenant(b);
    char key[40];
    eai_random_hex(key, 8);
    new_exec_id(id1);
    json_t *e = exec_record(id1, NULL, key, "hash-1");
    json_t *ev = audit_event("sandbox.execute", id1);
    json_t *existing = NULL;
    int rc = 0;
    OK(rc = g_ops->exec_create(g_st, a, e, ev, &existing, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    CU_ASSERT_PTR_NULL(existing);
    json_decref(e);
    json_int_t audits = audit_count(a);

    /* Same key, same hash: EXISTS with the first row, nothing inserted. */
    new_exec_id(id2);
    e = exec_record(id2, NULL, key, "hash-1");
    OK(rc = g_ops->exec_create(g_st, a, e, ev, &existing, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_EXISTS);
    CU_ASSERT_FATAL(existing != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(existing, "id"), id1);
    CU_ASSERT_STRING_EQUAL(eai_jstr(existing, "idempotency_key"), key);
    json_decref(existing);
    existing = NULL;
    CU_ASSERT_PTR_NULL(get_exec(a, id2));
    CU_ASSERT_EQUAL(audit_count(a), audits);
    json_decref(e);

    /* Same key, other hash: CONFLICT. */
    new_exec_id(id3);
    e = exec_record(id3, NULL, key, "hash-2");
    OK(rc = g_ops->exec_create(g_st, a, e, ev, &existing, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CONFLICT);
    CU_ASSERT_PTR_NULL(get_exec(a, id3));
    json_decref(existing);
    existing = NULL;
    json_decref(e);

    /* Keys are per tenant. */
    new_exec_id(id4);
    e = exec_record(id4, NULL, key, "hash-2");
    OK(rc = g_ops->exec_create(g_st, b, e, NULL, &existing, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    json_decref(e);

    /* Still EXISTS once the first one is terminal (within 24 h). */
    finish_exec(a, id1, "succeeded");
    e = exec_record(id2, NULL, key, "hash-1");
    OK(rc = g_ops->exec_create(g_st, a, e, NULL, &existing, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_EXISTS);
    CU_ASSERT(existing && strcmp(eai_jstr(existing, "status"), "succeeded") == 0);
    json_decref(existing);
    json_decref(e);
    json_decref(ev);

    /* Same id twice (no key): refused, never a second row. */
    e = exec_record(id4, NULL, NULL, NULL);
    FAILS(EAI_E_CONFLICT, g_ops->exec_create(g_st, b, e, NULL, NULL, err));
    json_decref(e);
    finish_exec(b, id4, "cancelled");
}

/* ------------------------------------------------------------ queue */

static int claimed_set_is(const json_t *claimed, char (*want)[41], size_t n)
{
    if (json_array_size(claimed) != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!array_has_id(claimed, want[i]))
            return 0;
    return 1;
}

static void test_claim_fairness(void)
{
    char a[37], b[37], c[37], ea[6][41], eb[2][41], ec[1][41], owner[40];
    new_tenant(a);
    new_tenant(b);
    new_tenant(c);
    eai_random_hex(owner, 8);
    int64_t q0 = 0, r0 = 0, q = 0, r = 0;
    OK(g_ops->exec_counts(g_st, &q0, &r0, err));
    for (int i = 0; i < 6; i++)
        create_exec(a, ea[i], NULL);
    for (int i = 0; i < 2; i++)
        create_exec(b, eb[i], NULL);
    create_exec(c, ec[0], NULL);
    OK(g_ops->exec_counts(g_st, &q, &r, err));
    CU_ASSERT_EQUAL(q, q0 + 9);
    CU_ASSERT_EQUAL(r, r0);

    int64_t before = eai_now_ms();
    json_t *cl = NULL;
    /* Round-robin: the oldest of every tenant before anyone's second. */
    OK(g_ops->exec_claim(g_st, owner, 30000, 3, 2, &cl, err));
    char want1[3][41];
    memcpy(want1[0], ea[0], 41);
    memcpy(want1[1], eb[0], 41);
    memcpy(want1[2], ec[0], 41);
    CU_ASSERT(claimed_set_is(cl, want1, 3));
    size_t i;
    json_t *v;
    json_array_foreach(cl, i, v) {
        CU_ASSERT_STRING_EQUAL(eai_jstr(v, "status"), "running");
        CU_ASSERT_STRING_EQUAL(eai_jstr(v, "lease_owner"), owner);
        json_int_t lu = json_integer_value(json_object_get(v, "lease_until"));
        CU_ASSERT(lu >= before + 30000 && lu <= eai_now_ms() + 30000);
        CU_ASSERT_PTR_NOT_NULL(eai_jstr(v, "started_at"));
    }
    json_decref(cl);

    /* At most per_tenant_max (2) of A in one call. */
    OK(g_ops->exec_claim(g_st, owner, 30000, 10, 2, &cl, err));
    char want2[3][41];
    memcpy(want2[0], ea[1], 41);
    memcpy(want2[1], ea[2], 41);
    memcpy(want2[2], eb[1], 41);
    CU_ASSERT(claimed_set_is(cl, want2, 3));
    json_decref(cl);
    OK(g_ops->exec_claim(g_st, owner, 30000, 10, 2, &cl, err));
    CU_ASSERT(claimed_set_is(cl, ea + 3, 2));
    json_decref(cl);
    OK(g_ops->exec_claim(g_st, owner, 30000, 10, 2, &cl, err));
    CU_ASSERT(claimed_set_is(cl, ea + 5, 1));
    json_decref(cl);
    OK(g_ops->exec_claim(g_st, owner, 30000, 10, 2, &cl, err));
    CU_ASSERT_EQUAL(json_array_size(cl), 0);
    json_decref(cl);

    OK(g_ops->exec_counts(g_st, &q, &r, err));
    CU_ASSERT_EQUAL(q, q0);
    CU_ASSERT_EQUAL(r, r0 + 9);
    char buf[32];
    CU_ASSERT_STRING_EQUAL(exec_status(a, ea[5], buf), "running");

    for (int k = 0; k < 6; k++)
        finish_exec(a, ea[k], "succeeded");
    for (int k = 0; k < 2; k++)
        finish_exec(b, eb[k], "succeeded");
    finish_exec(c, ec[0], "succeeded");
    OK(g_ops->exec_counts(g_st, &q, &r, err));
    CU_ASSERT_EQUAL(q, q0);
    CU_ASSERT_EQUAL(r, r0);
}

/* exec_claim_excluding (optional op, at the end of the ops table): rows of
 * an excluded tenant are never claimed; the others are, round-robin. */
static void test_claim_excluding(void)
{
    if (g_ops->size < offsetof(struct eai_storage_ops, exec_claim_excluding) + sizeof(void *) ||
        !g_ops->exec_claim_excluding)
        return;
    char a[37], b[37], ea[2][41], eb[1][41], owner[40];
    new_tenant(a);
    new_tenant(b);
    eai_random_hex(owner, 8);
    for (int i = 0; i < 2; i++)
        create_exec(a, ea[i], NULL);
    create_exec(b, eb[0], NULL);
    json_t *ex_a = json_pack("[s]", a), *ex_b = json_pack("[s]", b), *cl = NULL;
    CU_ASSERT_FATAL(ex_a && ex_b);
    OK(g_ops->exec_claim_excluding(g_st, owner, 30000, 10, 10, ex_a, &cl, err));
    CU_ASSERT(claimed_set_is(cl, eb, 1));
    json_decref(cl);
    OK(g_ops->exec_claim_excluding(g_st, owner, 30000, 10, 10, ex_b, &cl, err));
    CU_ASSERT(claimed_set_is(cl, ea, 2));
    json_decref(cl);
    json_decref(ex_a);
    json_decref(ex_b);
    for (int k = 0; k < 2; k++)
        finish_exec(a, ea[k], "succeeded");
    finish_exec(b, eb[0], "succeeded");
}

#define RACE_ROWS 50
#define RACE_THREADS 2

struct race_arg {
    char owner[40];
    char ids[RACE_ROWS][41];
    int n;
    int errors;
};

static void *race_claimer(void *p)
{
    struct race_arg *ra = p;
    for (int rounds = 0; rounds < 10 * RACE_ROWS; rounds++) {
        json_t *cl = NULL;
        struct eai_error *e = NULL;
        if (g_ops->exec_claim(g_st, ra->owner, 30000, 3, 3, &cl, &e) < 0) {
            report("race claim", e);
            ra->errors++;
            continue;
        }
        size_t n = json_array_size(cl), i;
        json_t *v;
        json_array_foreach(cl, i, v) {
            if (ra->n < RACE_ROWS)
                snprintf(ra->ids[ra->n], 41, "%s", eai_jstr(v, "id"));
            ra->n++;
        }
        json_decref(cl);
        if (n == 0)
            break;
    }
    return NULL;
}

static void test_claim_race(void)
{
    char t[37];
    static char ids[RACE_ROWS][41];
    new_tenant(t);
    for (int i = 0; i < RACE_ROWS; i++)
        create_exec(t, ids[i], NULL);
    static struct race_arg ra[RACE_THREADS];
    pthread_t th[RACE_THREADS];
    memset(ra, 0, sizeof ra);
    for (int i = 0; i < RACE_THREADS; i++) {
        eai_random_hex(ra[i].owner, 8);
        CU_ASSERT_FATAL(pthread_create(&th[i], NULL, race_claimer, &ra[i]) == 0);
    }
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(th[i], NULL);
    int total = 0;
    for (int i = 0; i < RACE_THREADS; i++) {
        CU_ASSERT_EQUAL(ra[i].errors, 0);
        total += ra[i].n;
    }
    /* Every row claimed exactly once. */
    CU_ASSERT_EQUAL(total, RACE_ROWS);
    for (int i = 0; i < RACE_ROWS; i++) {
        int seen = 0;
        for (int k = 0; k < RACE_THREADS; k++)
            for (int j = 0; j < ra[k].n && j < RACE_ROWS; j++)
                seen += strcmp(ra[k].ids[j], ids[i]) == 0;
        CU_ASSERT_EQUAL(seen, 1);
    }
    for (int i = 0; i < RACE_ROWS; i++)
        finish_exec(t, ids[i], "succeeded");
}

static void test_renew_cancel_stale(void)
{
    char t[37], b[37], e[3][41], q[41], owner[40];
    new_tenant(t);
    new_tenant(b);
    eai_random_hex(owner, 8);
    for (int i = 0; i < 3; i++)
        create_exec(t, e[i], NULL);
    json_t *cl = NULL;
    OK(g_ops->exec_claim(g_st, owner, 1000, 10, 10, &cl, err));
    CU_ASSERT_FATAL(claimed_set_is(cl, e, 3));
    json_decref(cl);

    /* Cancel a running one: flag only, still running. */
    json_int_t audits = audit_count(t);
    json_t *ev = audit_event("sandbox.cancel", e[0]);
    json_t *patch = json_pack("{s:s}", "status", "cancelled");
    json_t *out = NULL;
    int crc = 0;
    OK(crc = g_ops->exec_cancel(g_st, t, e[0], patch, ev, &out, err));
    CU_ASSERT_EQUAL(crc, EAI_STORE_UPDATED); /* this call changed the row */
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(out, "status"), "running");
    CU_ASSERT(json_is_true(json_object_get(out, "cancel_requested")));
    json_decref(out);
    CU_ASSERT_EQUAL(audit_count(t), audits + 1);
    /* the same cancel again changes nothing: NOOP, no second audit row */
    out = NULL;
    OK(crc = g_ops->exec_cancel(g_st, t, e[0], patch, reid(ev), &out, err));
    CU_ASSERT_EQUAL(crc, EAI_STORE_NOOP);
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT(json_is_true(json_object_get(out, "cancel_requested")));
    json_decref(out);
    CU_ASSERT_EQUAL(audit_count(t), audits + 1);

    /* Another tenant cannot cancel it (answers like a missing one). */
    out = (json_t *)1;
    OK(g_ops->exec_cancel(g_st, b, e[1], patch, NULL, &out, err));
    CU_ASSERT_PTR_NULL(out);

    /* Renew extends every lease of the owner and reports the cancel. */
    int64_t before = eai_now_ms();
    json_t *cancel_ids = NULL;
    OK(g_ops->exec_renew(g_st, owner, 60000, &cancel_ids, err));
    CU_ASSERT_FATAL(json_is_array(cancel_ids));
    CU_ASSERT_EQUAL(json_array_size(cancel_ids), 1);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(cancel_ids, 0), "id"), e[0]);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(cancel_ids, 0), "tenant_id"), t);
    json_decref(cancel_ids);
    for (int i = 0; i < 3; i++) {
        json_t *x = get_exec(t, e[i]);
        CU_ASSERT_FATAL(x != NULL);
        CU_ASSERT(json_integer_value(json_object_get(x, "lease_until")) >= before + 60000);
        CU_ASSERT_EQUAL(json_is_true(json_object_get(x, "cancel_requested")), i == 0);
        json_decref(x);
    }
    /* Another owner renews nothing of these. */
    char other[40];
    eai_random_hex(other, 8);
    OK(g_ops->exec_renew(g_st, other, 60000, &cancel_ids, err));
    CU_ASSERT_EQUAL(json_array_size(cancel_ids), 0);
    json_decref(cancel_ids);

    /* Stale: leases ending before now_ms. */
    json_t *stale = NULL;
    OK(g_ops->exec_stale(g_st, eai_now_ms(), &stale, err));
    for (int i = 0; i < 3; i++)
        CU_ASSERT(!array_has_id(stale, e[i]));
    json_decref(stale);
    OK(g_ops->exec_stale(g_st, eai_now_ms() + 120000, &stale, err));
    for (int i = 0; i < 3; i++)
        CU_ASSERT(array_has_id(stale, e[i]));
    json_decref(stale);

    /* Cancel a queued one: terminal at once, inputs scrubbed. */
    create_exec(t, q, NULL);
    OK(crc = g_ops->exec_cancel(g_st, t, q, patch, reid(ev), &out, err));
    CU_ASSERT_EQUAL(crc, EAI_STORE_UPDATED);
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(out, "status"), "cancelled");
    CU_ASSERT_PTR_NOT_NULL(eai_jstr(out, "finished_at"));
    CU_ASSERT_EQUAL(json_object_size(json_object_get(out, "env")), 0);
    CU_ASSERT(json_is_null(json_object_get(out, "stdin")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(out, "files_in")), 0);
    json_decref(out);
    json_t *x = get_exec(t, q);
    CU_ASSERT_FATAL(x != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(x, "status"), "cancelled");
    CU_ASSERT_EQUAL(json_object_size(json_object_get(x, "env")), 0);
    json_decref(x);

    /* Cancel a terminal one: unchanged, no audit; finish: NOOP. */
    audits = audit_count(t);
    OK(crc = g_ops->exec_cancel(g_st, t, q, patch, reid(ev), &out, err));
    CU_ASSERT_EQUAL(crc, EAI_STORE_NOOP); /* a replay: nothing changed */
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(out, "status"), "cancelled");
    json_decref(out);
    CU_ASSERT_EQUAL(audit_count(t), audits);
    json_t *p2 = json_pack("{s:s}", "status", "succeeded");
    int rc = 0;
    OK(rc = g_ops->exec_finish(g_st, t, q, p2, NULL, NULL, NULL, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_NOOP);
    json_decref(p2);
    char buf[32];
    CU_ASSERT_STRING_EQUAL(exec_status(t, q, buf), "cancelled");

    /* The running one with cancel_requested ends as cancelled by finish. */
    finish_exec(t, e[0], "cancelled");
    CU_ASSERT_STRING_EQUAL(exec_status(t, e[0], buf), "cancelled");
    for (int i = 1; i < 3; i++)
        finish_exec(t, e[i], "succeeded");
    OK(g_ops->exec_renew(g_st, owner, 60000, &cancel_ids, err));
    CU_ASSERT_EQUAL(json_array_size(cancel_ids), 0);
    json_decref(cancel_ids);
    json_decref(patch);
    json_decref(ev);
}

static void test_finish_scrub_files_outbox(void)
{
    char t[37], b[37], id[41];
    new_tenant(t);
    new_tenant(b);
    create_exec(t, id, NULL);
    char owner[40];
    eai_random_hex(owner, 8);
    json_t *cl = NULL;
    OK(g_ops->exec_claim(g_st, owner, 30000, 10, 10, &cl, err));
    CU_ASSERT(array_has_id(cl, id));
    json_decref(cl);

    static const unsigned char bin[] = {0, 1, 2, 0xff, 'x', 0, 'y'};
    char sha_txt[65], sha_bin[65];
    eai_sha256_hex("hello", 5, sha_txt);
    eai_sha256_hex(bin, sizeof bin, sha_bin);
    char *b64_bin = eai_b64_encode(bin, sizeof bin);
    CU_ASSERT_FATAL(b64_bin != NULL);
    char now[32], uid[37];
    eai_time_rfc3339(eai_now_ms(), now);
    eai_uuid_v4(uid);
    json_t *patch = json_pack(
        "{s:s, s:i, s:n, s:s, s:s, s:b, s:b, s:s, s:s, s:{s:i, s:i, s:i}, s:n, s:s}",
        "status", "succeeded", "exit_code", 0, "signal", "stdout", "4\n", "stderr", "",
        "stdout_truncated", 0, "stderr_truncated", 0, "stdout_encoding", "utf-8",
        "stderr_encoding", "utf-8", "usage", "cpu_seconds", 1, "memory_mb_seconds", 3,
        "duration_s", 1, "error", "finished_at", now);
    json_t *files = json_pack("[{s:s, s:i, s:s, s:s}, {s:s, s:i, s:s, s:s}]",
                              "path", "/tmp/outputs/r.txt", "size", 5, "sha256", sha_txt,
                              "content_b64", "aGVsbG8=",
                              "path", "/tmp/outputs/b.bin", "size", (int)sizeof bin,
                              "sha256", sha_bin, "content_b64", b64_bin);
    free(b64_bin);
    json_t *usage = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", uid,
                              "tenant_id", t, "execution_id", id, "project_id", "proj-1",
                              "run_id", "run-1", "profile", "gvisor-small", "backend", "gvisor",
                              "finished_at", now);
    json_t *ev = audit_event("sandbox.finish", id);
    int rc = 0;
    OK(rc = g_ops->exec_finish(g_st, t, id, patch, files, usage, ev, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_UPDATED);

    json_t *x = get_exec(t, id);
    CU_ASSERT_FATAL(x != NULL);
    CU_ASSERT_STRING_EQUAL(eai_jstr(x, "status"), "succeeded");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(x, "exit_code")), 0);
    CU_ASSERT_STRING_EQUAL(eai_jstr(x, "stdout"), "4\n");
    CU_ASSERT_STRING_EQUAL(eai_jstr(x, "finished_at"), now);
    CU_ASSERT_PTR_NOT_NULL(eai_jstr(x, "started_at"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(x, "usage"), "memory_mb_seconds")), 3);
    CU_ASSERT(json_is_null(json_object_get(x, "error")));
    /* Scrubbed inputs, kept identity. */
    CU_ASSERT(json_is_object(json_object_get(x, "env")));
    CU_ASSERT_EQUAL(json_object_size(json_object_get(x, "env")), 0);
    CU_ASSERT(json_is_null(json_object_get(x, "stdin")));
    CU_ASSERT_EQUAL(json_array_size(json_object_get(x, "files_in")), 0);
    char *dump = json_dumps(x, 0);
    CU_ASSERT(dump && !strstr(dump, "hunter2") && !strstr(dump, "stdin-secret") &&
              !strstr(dump, "c2VjcmV0"));
    free(dump);
    CU_ASSERT_STRING_EQUAL(eai_jstr(x, "image"), "python:3.11-slim");
    /* The list carries the record without its output (bounded memory). */
    {
        json_t *lf = json_pack("{s:i}", "limit", 100), *l = NULL;
        OK(g_ops->exec_list(g_st, t, lf, &l, err));
        json_t *item = NULL;
        size_t k;
        json_t *it;
        json_array_foreach(l, k, it)
            if (eai_jstr(it, "id") && strcmp(eai_jstr(it, "id"), id) == 0)
                item = it;
        CU_ASSERT_FATAL(item != NULL);
        CU_ASSERT_STRING_EQUAL(eai_jstr(item, "status"), "succeeded");
        CU_ASSERT_PTR_NULL(json_object_get(item, "stdout"));
        CU_ASSERT_PTR_NULL(json_object_get(item, "stderr"));
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(item, "exit_code")), 0);
        json_decref(l);
        json_decref(lf);
    }
    /* Public file list: path, size, sha256; no content. */
    json_t *fl = json_object_get(x, "files");
    CU_ASSERT_FATAL(json_array_size(fl) == 2);
    size_t i;
    json_t *f;
    int seen = 0;
    json_array_foreach(fl, i, f) {
        CU_ASSERT_PTR_NULL(json_object_get(f, "content_b64"));
        if (strcmp(eai_jstr(f, "path"), "/tmp/outputs/r.txt") == 0) {
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(f, "size")), 5);
            CU_ASSERT_STRING_EQUAL(eai_jstr(f, "sha256"), sha_txt);
            seen++;
        } else if (strcmp(eai_jstr(f, "path"), "/tmp/outputs/b.bin") == 0) {
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(f, "size")), (json_int_t)sizeof bin);
            seen++;
        }
    }
    CU_ASSERT_EQUAL(seen, 2);
    json_decref(x);

    /* Raw bytes back, tenant-scoped. */
    unsigned char *data = NULL;
    size_t len = 0;
    OK(g_ops->file_get(g_st, t, id, "/tmp/outputs/r.txt", &data, &len, err));
    CU_ASSERT_FATAL(data != NULL);
    CU_ASSERT(len == 5 && memcmp(data, "hello", 5) == 0);
    free(data);
    data = NULL;
    OK(g_ops->file_get(g_st, t, id, "/tmp/outputs/b.bin", &data, &len, err));
    CU_ASSERT_FATAL(data != NULL);
    CU_ASSERT(len == sizeof bin && memcmp(data, bin, sizeof bin) == 0);
    free(data);
    data = (unsigned char *)1;
    OK(g_ops->file_get(g_st, b, id, "/tmp/outputs/r.txt", &data, &len, err));
    CU_ASSERT_PTR_NULL(data);
    data = (unsigned char *)1;
    OK(g_ops->file_get(g_st, t, id, "/tmp/outputs/none", &data, &len, err));
    CU_ASSERT_PTR_NULL(data);

    /* Finish only once: the terminal status never changes. */
    json_int_t audits = audit_count(t);
    json_t *p2 = json_pack("{s:s, s:i, s:s}", "status", "failed", "exit_code", 1, "stdout", "x");
    OK(rc = g_ops->exec_finish(g_st, t, id, p2, NULL, usage, reid(ev), err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_NOOP);
    json_decref(p2);
    x = get_exec(t, id);
    CU_ASSERT_STRING_EQUAL(eai_jstr(x, "status"), "succeeded");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(x, "exit_code")), 0);
    CU_ASSERT_STRING_EQUAL(eai_jstr(x, "stdout"), "4\n");
    json_decref(x);
    CU_ASSERT_EQUAL(audit_count(t), audits);
    json_t *last = audit_last(t);
    CU_ASSERT_STRING_EQUAL(eai_jstr(last, "action"), "sandbox.finish");
    json_decref(last);

    /* Outbox: exactly one row for this execution; ack failed, then delivered. */
    json_t *ob = NULL;
    char ob_id[64] = "";
    int found = 0;
    OK(g_ops->outbox_fetch(g_st, 1000, &ob, err));
    json_array_foreach(ob, i, f) {
        const json_t *event = json_object_get(f, "event");
        if (eai_jstr(event, "execution_id") && strcmp(eai_jstr(event, "execution_id"), id) == 0) {
            found++;
            snprintf(ob_id, sizeof ob_id, "%s", eai_jstr(f, "id"));
            CU_ASSERT_STRING_EQUAL(eai_jstr(f, "tenant_id"), t);
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(f, "attempts")), 0);
            CU_ASSERT_STRING_EQUAL(eai_jstr(event, "project_id"), "proj-1");
        }
    }
    json_decref(ob);
    CU_ASSERT_FATAL(found == 1);
    OK(g_ops->outbox_ack(g_st, ob_id, 0, err));
    OK(g_ops->outbox_fetch(g_st, 1000, &ob, err));
    found = 0;
    json_array_foreach(ob, i, f) {
        if (strcmp(eai_jstr(f, "id"), ob_id) == 0) {
            found++;
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(f, "attempts")), 1);
        }
    }
    json_decref(ob);
    CU_ASSERT_EQUAL(found, 1);
    OK(g_ops->outbox_ack(g_st, ob_id, 1, err));
    OK(g_ops->outbox_fetch(g_st, 1000, &ob, err));
    CU_ASSERT(!array_has_id(ob, ob_id));
    json_decref(ob);

    /* Unknown execution. */
    char missing[41];
    new_exec_id(missing);
    FAILS(EAI_E_NOT_FOUND, g_ops->exec_finish(g_st, t, missing, patch, NULL, NULL, NULL, err));

    json_decref(patch);
    json_decref(files);
    json_decref(usage);
    json_decref(ev);
}

/* A session's end (sessions.md): one usage event without an execution row
 * and its audit event, in one transaction; the outbox delivers it as any. */
static void test_outbox_append(void)
{
    if (!g_ops->outbox_append) {
        CU_FAIL("outbox_append missing: sessions would not be billed");
        return;
    }
    char t[37], sid[64], eid[37];
    new_tenant(t);
    eai_uuid_v4(eid);
    snprintf(sid, sizeof sid, "ses_%s", eid);
    json_t *usage = json_pack("{s:s, s:s, s:s, s:f}", "id", eid, "kind", "session", "session_id", sid,
                              "cpu_seconds", 1.5);
    json_t *ev = audit_event("sandbox.session.end", sid);
    size_t audits = audit_count(t);
    OK(g_ops->outbox_append(g_st, t, usage, ev, err));
    CU_ASSERT_EQUAL(audit_count(t), audits + 1);
    json_t *last = audit_last(t);
    CU_ASSERT_STRING_EQUAL(eai_jstr(last, "action"), "sandbox.session.end");
    json_decref(last);
    json_t *ob = NULL;
    size_t i;
    const json_t *f;
    int found = 0;
    OK(g_ops->outbox_fetch(g_st, 1000, &ob, err));
    json_array_foreach(ob, i, f) {
        const json_t *event = json_object_get(f, "event");
        if (eai_jstr(event, "session_id") && strcmp(eai_jstr(event, "session_id"), sid) == 0) {
            found++;
            CU_ASSERT_STRING_EQUAL(eai_jstr(f, "tenant_id"), t);
            CU_ASSERT_STRING_EQUAL(eai_jstr(event, "kind"), "session");
            OK(g_ops->outbox_ack(g_st, eai_jstr(f, "id"), 1, err));
        }
    }
    json_decref(ob);
    CU_ASSERT_EQUAL(found, 1);
    /* no audit: the usage row alone */
    OK(g_ops->outbox_append(g_st, t, usage, NULL, err));
    CU_ASSERT_EQUAL(audit_count(t), audits + 1);
    json_decref(usage);
    json_decref(ev);
}

/* One tenant's 300 pending callbacks hold back neither its own usage events
 * nor another tenant's (issue 36 item 4): a fetch of 100 has both, and at
 * most EAI_OUTBOX_FAIR_SHARE(100) callbacks of that tenant. */
static void test_outbox_fair(void)
{
    if (!g_ops->outbox_append)
        return;
    char a[37], b[37], id[37];
    new_tenant(a);
    new_tenant(b);
    for (int i = 0; i < 300; i++) {
        eai_uuid_v4(id);
        json_t *cb = json_pack("{s:s, s:s, s:s, s:i}", "id", id, "target", "callback", "url",
                               "https://hooks.example/x", "n", i);
        OK(g_ops->outbox_append(g_st, a, cb, NULL, err));
        json_decref(cb);
    }
    char ua[37], ub[37];
    eai_uuid_v4(ua);
    eai_uuid_v4(ub);
    json_t *u = json_pack("{s:s, s:s}", "id", ua, "kind", "execution");
    OK(g_ops->outbox_append(g_st, a, u, NULL, err));
    json_decref(u);
    u = json_pack("{s:s, s:s}", "id", ub, "kind", "execution");
    OK(g_ops->outbox_append(g_st, b, u, NULL, err));
    json_decref(u);
    json_t *ob = NULL;
    OK(g_ops->outbox_fetch(g_st, 100, &ob, err));
    int cbs = 0, usage_a = 0, usage_b = 0;
    size_t i;
    const json_t *f;
    json_array_foreach(ob, i, f) {
        const json_t *ev = json_object_get(f, "event");
        const char *t = eai_jstr(f, "tenant_id");
        if (t && !strcmp(t, a) && eai_jstr(ev, "target"))
            cbs++;
        if (eai_jstr(ev, "id") && !strcmp(eai_jstr(ev, "id"), ua))
            usage_a++;
        if (eai_jstr(ev, "id") && !strcmp(eai_jstr(ev, "id"), ub))
            usage_b++;
    }
    json_decref(ob);
    CU_ASSERT_EQUAL(usage_a, 1);
    CU_ASSERT_EQUAL(usage_b, 1);
    CU_ASSERT_TRUE(cbs > 0 && cbs <= EAI_OUTBOX_FAIR_SHARE(100));
    /* clean up: every row of both tenants (fetches take a share at a time) */
    for (int round = 0; round < 100; round++) {
        OK(g_ops->outbox_fetch(g_st, 1000, &ob, err));
        int acked = 0;
        json_array_foreach(ob, i, f) {
            const char *t = eai_jstr(f, "tenant_id");
            if (t && (!strcmp(t, a) || !strcmp(t, b))) {
                OK(g_ops->outbox_ack(g_st, eai_jstr(f, "id"), 1, err));
                acked++;
            }
        }
        json_decref(ob);
        if (!acked)
            break;
    }
}

/* ------------------------------------------------------------ manifests */

static void test_manifests(void)
{
    char a[37], b[37];
    new_tenant(a);
    new_tenant(b);
    json_t *doc = json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "apiVersion", "eai/v1",
                            "kind", "tool-manifest", "metadata", "name", "grep",
                            "spec", "sandbox_profile", "gvisor-small");
    json_t *ev = audit_event("manifest.apply", "tool-manifest/grep");
    json_int_t audits = audit_count(a);
    int rc = 0;
    OK(rc = g_ops->manifest_put(g_st, a, "tool-manifest", "grep", doc, ev, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    json_object_set_new(json_object_get(doc, "spec"), "sandbox_profile", json_string("gvisor"));
    OK(rc = g_ops->manifest_put(g_st, a, "tool-manifest", "grep", doc, reid(ev), err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_UPDATED);
    CU_ASSERT_EQUAL(audit_count(a), audits + 2);

    json_t *out = NULL;
    OK(g_ops->manifest_get(g_st, a, "tool-manifest", "grep", &out, err));
    CU_ASSERT_FATAL(out != NULL);
    CU_ASSERT(json_equal(out, doc));
    json_decref(out);
    out = (json_t *)1;
    OK(g_ops->manifest_get(g_st, b, "tool-manifest", "grep", &out, err));
    CU_ASSERT_PTR_NULL(out);
    out = (json_t *)1;
    OK(g_ops->manifest_get(g_st, a, "other-kind", "grep", &out, err));
    CU_ASSERT_PTR_NULL(out);

    /* B has its own namespace: same name is B's own row. */
    OK(rc = g_ops->manifest_put(g_st, b, "tool-manifest", "grep", doc, NULL, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    OK(g_ops->manifest_delete(g_st, b, "tool-manifest", "grep", NULL, err));
    FAILS(EAI_E_NOT_FOUND, g_ops->manifest_delete(g_st, b, "tool-manifest", "grep", NULL, err));
    OK(g_ops->manifest_get(g_st, a, "tool-manifest", "grep", &out, err));
    CU_ASSERT_PTR_NOT_NULL(out);
    json_decref(out);

    OK(g_ops->manifest_delete(g_st, a, "tool-manifest", "grep", reid(ev), err));
    CU_ASSERT_EQUAL(audit_count(a), audits + 3);
    out = (json_t *)1;
    OK(g_ops->manifest_get(g_st, a, "tool-manifest", "grep", &out, err));
    CU_ASSERT_PTR_NULL(out);
    FAILS(EAI_E_NOT_FOUND, g_ops->manifest_delete(g_st, a, "tool-manifest", "grep", reid(ev), err));
    CU_ASSERT_EQUAL(audit_count(a), audits + 3);
    json_decref(doc);
    json_decref(ev);
}

/* exec_finish with an array of outbox events (usage + completion callback):
 * one row each, in the same transaction */
static void test_outbox_events_array(void)
{
    char t[37], id[41];
    new_tenant(t);
    create_exec(t, id, NULL);
    char e1[37], e2[37];
    eai_uuid_v4(e1);
    eai_uuid_v4(e2);
    json_t *evs = json_pack("[{s:s, s:s}, {s:s, s:s, s:s}]", "id", e1, "execution_id", id, "id", e2,
                            "execution_id", id, "target", "callback");
    json_t *patch = json_pack("{s:s, s:i}", "status", "succeeded", "exit_code", 0);
    int rc = 0;
    OK(rc = g_ops->exec_finish(g_st, t, id, patch, NULL, evs, NULL, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_UPDATED);
    json_t *ob = NULL;
    OK(g_ops->outbox_fetch(g_st, 1000, &ob, err));
    int n = 0, callbacks = 0;
    size_t i;
    const json_t *f;
    json_array_foreach(ob, i, f) {
        const json_t *ev = json_object_get(f, "event");
        if (eai_jstr(ev, "execution_id") && strcmp(eai_jstr(ev, "execution_id"), id) == 0) {
            n++;
            callbacks += eai_jstr(ev, "target") != NULL;
            OK(g_ops->outbox_ack(g_st, eai_jstr(f, "id"), 1, err));
        }
    }
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(callbacks, 1);
    json_decref(ob);
    json_decref(evs);
    json_decref(patch);
}

/* manifest_list: pages by name after a cursor, one tenant and one kind */
static void test_manifest_list(void)
{
    CU_ASSERT_FATAL(g_ops->manifest_list != NULL);
    char a[37], b[37];
    new_tenant(a);
    new_tenant(b);
    const char *names[] = {"zeta", "alpha", "mid", NULL};
    for (const char *const *n = names; *n; n++) {
        json_t *doc = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "eai.dev/v1", "kind", "Tool", "metadata",
                                "name", *n);
        OK(g_ops->manifest_put(g_st, a, "tool", *n, doc, NULL, err));
        json_decref(doc);
    }
    json_t *other = json_pack("{s:{s:s}}", "metadata", "name", "b-only");
    OK(g_ops->manifest_put(g_st, b, "tool", "b-only", other, NULL, err));
    OK(g_ops->manifest_put(g_st, a, "other-kind", "aaa", other, NULL, err));
    json_decref(other);
    json_t *page = NULL;
    OK(g_ops->manifest_list(g_st, a, "tool", NULL, 2, &page, err));
    CU_ASSERT_EQUAL_FATAL(json_array_size(page), 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(json_array_get(page, 0), "metadata"), "name")), "alpha");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(json_array_get(page, 1), "metadata"), "name")), "mid");
    json_decref(page);
    OK(g_ops->manifest_list(g_st, a, "tool", "mid", 2, &page, err));
    CU_ASSERT_EQUAL_FATAL(json_array_size(page), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(json_array_get(page, 0), "metadata"), "name")), "zeta");
    json_decref(page);
    OK(g_ops->manifest_list(g_st, b, "tool", NULL, 10, &page, err));
    CU_ASSERT_EQUAL(json_array_size(page), 1);
    json_decref(page);
    FAILS(EAI_E_VALIDATION_FAILED, g_ops->manifest_list(g_st, a, "tool", NULL, 0, &page, err));
}

/* ------------------------------------------------------------ audit chain */

#define AUDIT_THREADS 4
#define AUDIT_PER_THREAD 20

struct audit_arg {
    const char *tenant;
    int n;
    int errors;
};

static void *audit_writer(void *p)
{
    struct audit_arg *aa = p;
    for (int i = 0; i < aa->n; i++) {
        json_t *ev = audit_event("test.append", aa->tenant);
        struct eai_error *e = NULL;
        if (g_ops->audit_append(g_st, aa->tenant, ev, &e) < 0) {
            report("audit_append", e);
            aa->errors++;
        }
        json_decref(ev);
    }
    return NULL;
}

/* seq 1..n contiguous, prev_hash(n+1) == hash(n), every hash recomputes. */
static void check_chain(const char *tenant, json_int_t want)
{
    json_t *l = NULL;
    OK(g_ops->audit_list(g_st, tenant, 0, AUDIT_ALL, &l, err));
    CU_ASSERT_EQUAL_FATAL((json_int_t)json_array_size(l), want);
    const char *prev = EAI_AUDIT_ZERO_HASH;
    size_t i;
    json_t *ev;
    int broken = 0;
    json_array_foreach(l, i, ev) {
        if (json_integer_value(json_object_get(ev, "seq")) != (json_int_t)i + 1 ||
            !eai_jstr(ev, "prev_hash") || strcmp(eai_jstr(ev, "prev_hash"), prev) != 0 ||
            !eai_jstr(ev, "hash") || strlen(eai_jstr(ev, "hash")) != 64 || eai_audit_check(ev) != 1 ||
            strcmp(eai_jstr(ev, "tenant_id"), tenant) != 0 || !eai_jstr(ev, "time") || !eai_jstr(ev, "id")) {
            if (!broken)
                fprintf(stderr, "  chain of %s broken at index %zu\n", tenant, i);
            broken = 1;
        }
        prev = eai_jstr(ev, "hash") ? eai_jstr(ev, "hash") : "";
    }
    CU_ASSERT_FALSE(broken);
    json_decref(l);
}

static void test_audit_chain(void)
{
    char a[37], b[37];
    new_tenant(a);
    new_tenant(b);
    struct audit_arg first = {a, 5, 0};
    audit_writer(&first);
    CU_ASSERT_EQUAL(first.errors, 0);
    check_chain(a, 5);

    pthread_t th[AUDIT_THREADS + 1];
    struct audit_arg aa[AUDIT_THREADS + 1];
    for (int i = 0; i < AUDIT_THREADS; i++)
        aa[i] = (struct audit_arg){a, AUDIT_PER_THREAD, 0};
    aa[AUDIT_THREADS] = (struct audit_arg){b, 10, 0};
    for (int i = 0; i <= AUDIT_THREADS; i++)
        CU_ASSERT_FATAL(pthread_create(&th[i], NULL, audit_writer, &aa[i]) == 0);
    for (int i = 0; i <= AUDIT_THREADS; i++) {
        pthread_join(th[i], NULL);
        CU_ASSERT_EQUAL(aa[i].errors, 0);
    }
    check_chain(a, 5 + AUDIT_THREADS * AUDIT_PER_THREAD);
    check_chain(b, 10);

    /* after_seq and limit. */
    json_t *l = NULL;
    OK(g_ops->audit_list(g_st, a, 80, AUDIT_ALL, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 5);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(l, 0), "seq")), 81);
    json_decref(l);
    OK(g_ops->audit_list(g_st, a, 10, 7, &l, err));
    CU_ASSERT_EQUAL(json_array_size(l), 7);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(l, 0), "seq")), 11);
    json_decref(l);

    /* The stored event is exactly what was given plus the chain fields. */
    json_t *ev = audit_event("auth.refused", "/v1/sandbox/executions");
    json_object_set_new(ev, "decision", json_string("deny"));
    json_object_set_new(ev, "reason", json_string("unknown key"));
    OK(g_ops->audit_append(g_st, b, ev, err));
    json_t *last = audit_last(b);
    CU_ASSERT_STRING_EQUAL(eai_jstr(last, "id"), eai_jstr(ev, "id"));
    CU_ASSERT_STRING_EQUAL(eai_jstr(last, "decision"), "deny");
    CU_ASSERT_STRING_EQUAL(eai_jstr(last, "reason"), "unknown key");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(last, "seq")), 11);
    json_decref(last);
    json_decref(ev);

    /* Unauthenticated refusals go to the system tenant's chain. */
    json_int_t n0 = audit_count(EAI_SYSTEM_TENANT);
    ev = audit_event("auth.refused", "/v1/x");
    OK(g_ops->audit_append(g_st, EAI_SYSTEM_TENANT, ev, err));
    json_decref(ev);
    last = audit_last(EAI_SYSTEM_TENANT);
    CU_ASSERT_STRING_EQUAL(eai_jstr(last, "tenant_id"), EAI_SYSTEM_TENANT);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(last, "seq")), n0 + 1);
    CU_ASSERT_EQUAL(eai_audit_check(last), 1);
    json_decref(last);

    /* SYSTEM listing: ordered by tenant, then seq. */
    OK(g_ops->audit_list(g_st, NULL, 0, 5000, &l, err));
    CU_ASSERT(json_array_size(l) > 0);
    size_t i;
    int ordered = 1;
    const char *pt = "";
    json_int_t ps = 0;
    json_array_foreach(l, i, ev) {
        const char *tt = eai_jstr(ev, "tenant_id");
        json_int_t sq = json_integer_value(json_object_get(ev, "seq"));
        int c = strcmp(tt, pt);
        if (c < 0 || (c == 0 && sq <= ps))
            ordered = 0;
        pt = tt;
        ps = sq;
    }
    CU_ASSERT(ordered);
    json_decref(l);
}

/* Another process (the CLI while the server runs) appends to the same
 * chain at the same time through its own instance. */
static void test_audit_two_processes(void)
{
    char t[37];
    new_tenant(t);
    json_t *cfg = g_is_sqlite ? NULL : json_pack("{s:s}", "url", getenv("EAI_TEST_STORAGE"));
    if (g_is_sqlite) {
        char path[128];
        snprintf(path, sizeof path, "%s/eai.db", g_dir);
        cfg = json_pack("{s:s}", "path", path);
    }
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        struct eai_error *e = NULL;
        void *mine = g_desc->create(g_host, cfg, &e);
        int bad = !mine;
        for (int i = 0; mine && i < 30; i++) {
            json_t *ev = audit_event("cli.append", t);
            if (g_ops->audit_append(mine, t, ev, &e) < 0) {
                report("child append", e);
                e = NULL;
                bad = 1;
            }
            json_decref(ev);
        }
        if (mine)
            g_desc->destroy(mine);
        _exit(bad);
    }
    struct audit_arg aa = {t, 30, 0};
    audit_writer(&aa);
    int status = 0;
    CU_ASSERT_FATAL(waitpid(pid, &status, 0) == pid);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT_EQUAL(aa.errors, 0);
    check_chain(t, 60);
    json_decref(cfg);
}

/* ------------------------------------------------------------ ledger */

static json_t *usage_event(const char *project, const char *run, const char *finished)
{
    char id[37], exec_id[41];
    eai_uuid_v4(id);
    new_exec_id(exec_id);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:s}", "id", id,
                     "execution_id", exec_id, "project_id", project, "agent_id", "agent-1",
                     "run_id", run, "profile", "gvisor-small", "cpu_seconds", 1.5,
                     "memory_mb_seconds", 12.0, "duration_s", 2.25, "finished_at", finished);
}

static size_t ledger_count(const char *tenant, json_t *filter)
{
    json_t *l = NULL;
    OK(g_ops->ledger_query(g_st, tenant, filter, &l, err));
    size_t n = json_array_size(l);
    json_decref(l);
    json_decref(filter);
    return n;
}

static void test_ledger(void)
{
    char a[37], b[37];
    new_tenant(a);
    new_tenant(b);
    json_t *e1 = usage_event("p1", "r1", "2026-01-01T10:00:00.000Z");
    json_t *e2 = usage_event("p1", "r2", "2026-01-02T10:00:00.000Z");
    json_t *e3 = usage_event("p2", "r1", "2026-01-03T10:00:00.000Z");
    int rc = 0;
    OK(rc = g_ops->ledger_insert(g_st, a, e1, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    OK(rc = g_ops->ledger_insert(g_st, a, e2, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    OK(rc = g_ops->ledger_insert(g_st, a, e3, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    OK(rc = g_ops->ledger_insert(g_st, a, e1, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_EXISTS);

    json_t *l = NULL, *all = json_pack("{s:i}", "limit", 100);
    OK(g_ops->ledger_query(g_st, a, all, &l, err));
    json_decref(all);
    CU_ASSERT_EQUAL(json_array_size(l), 3);
    json_t *first = json_array_get(l, 0);
    CU_ASSERT_STRING_EQUAL(eai_jstr(first, "id"), eai_jstr(e1, "id"));
    CU_ASSERT_STRING_EQUAL(eai_jstr(first, "project_id"), "p1");
    CU_ASSERT(json_real_value(json_object_get(first, "cpu_seconds")) == 1.5 ||
              json_number_value(json_object_get(first, "cpu_seconds")) == 1.5);
    json_decref(l);

    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{s:s}", "project_id", "p1")), 2);
    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{s:s}", "run_id", "r1")), 2);
    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{s:s, s:s}", "project_id", "p1", "run_id", "r1")), 1);
    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{s:s}", "from", "2026-01-02T00:00:00Z")), 2);
    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{s:s}", "to", "2026-01-02T00:00:00Z")), 1);
    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{s:s, s:s}", "from", "2026-01-01T12:00:00.000Z",
                                              "to", "2026-01-02T12:00:00+00:00")), 1);
    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{s:s}", "from", "2026-01-01T10:00:00Z")), 3);
    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{s:i}", "limit", 2)), 2);
    CU_ASSERT_EQUAL(ledger_count(b, json_pack("{}")), 0);
    CU_ASSERT_EQUAL(ledger_count(b, json_pack("{s:s}", "project_id", "p1")), 0);

    json_t *eb = usage_event("p1", "r1", "2026-01-01T11:00:00.000Z");
    OK(rc = g_ops->ledger_insert(g_st, b, eb, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_CREATED);
    CU_ASSERT_EQUAL(ledger_count(b, json_pack("{}")), 1);
    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{}")), 3);

    /* "to" is exclusive on every backend */
    CU_ASSERT_EQUAL(ledger_count(a, json_pack("{s:s}", "to", "2026-01-02T10:00:00.000Z")), 1);
    /* keyset cursor: (time, event id) after the last row of a page; ties split across pages */
    {
        char c[37];
        new_tenant(c);
        const char *ids[] = {"tie-b", "tie-a", "tie-c"};
        for (int i = 0; i < 3; i++) {
            json_t *e = usage_event("p9", "r9", "2026-02-01T00:00:00.000Z");
            json_object_set_new(e, "id", json_string(ids[i]));
            json_object_set_new(e, "agent_id", json_string(i == 1 ? "ag-1" : "ag-2"));
            OK(g_ops->ledger_insert(g_st, c, e, err));
            json_decref(e);
        }
        json_t *f = json_pack("{s:i}", "limit", 2), *p1 = NULL, *p2 = NULL;
        OK(g_ops->ledger_query(g_st, c, f, &p1, err));
        CU_ASSERT_EQUAL_FATAL(json_array_size(p1), 2);
        CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(p1, 0), "id"), "tie-a");
        CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(p1, 1), "id"), "tie-b");
        int64_t ms = 0;
        eai_time_parse_rfc3339("2026-02-01T00:00:00.000Z", &ms);
        json_object_set_new(f, "after_ms", json_integer(ms));
        json_object_set_new(f, "after_id", json_string("tie-b"));
        OK(g_ops->ledger_query(g_st, c, f, &p2, err));
        CU_ASSERT_EQUAL_FATAL(json_array_size(p2), 1);
        CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(p2, 0), "id"), "tie-c");
        json_decref(p1);
        json_decref(p2);
        json_decref(f);
        CU_ASSERT_EQUAL(ledger_count(c, json_pack("{s:s}", "agent_id", "ag-2")), 2);
    }

    json_t *bad = json_pack("{s:s}", "from", "yesterday");
    FAILS(EAI_E_VALIDATION_FAILED, g_ops->ledger_query(g_st, a, bad, &l, err));
    json_decref(bad);
    json_decref(e1);
    json_decref(e2);
    json_decref(e3);
    json_decref(eb);
}

/* ------------------------------------------------------------ kv */

static void test_kv(void)
{
    char key[64], rnd[17];
    eai_random_hex(rnd, 8);
    snprintf(key, sizeof key, "test.cursor.%s", rnd);
    char *v = (char *)1;
    OK(g_ops->kv_get(g_st, key, &v, err));
    CU_ASSERT_PTR_NULL(v);
    OK(g_ops->kv_set(g_st, key, "42", err));
    OK(g_ops->kv_get(g_st, key, &v, err));
    CU_ASSERT_FATAL(v != NULL);
    CU_ASSERT_STRING_EQUAL(v, "42");
    free(v);
    OK(g_ops->kv_set(g_st, key, "43", err));
    OK(g_ops->kv_get(g_st, key, &v, err));
    CU_ASSERT_FATAL(v != NULL);
    CU_ASSERT_STRING_EQUAL(v, "43");
    free(v);
}

/* ------------------------------------------------------------ sessions (1.4) */

static json_t *ses_doc(const char *id, const char *owner, const char *status, int64_t created_ms, int rev)
{
    char t[32];
    eai_time_rfc3339(created_ms, t);
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:{s:s}}", "id", id, "owner", owner, "status", status,
                     "created_at", t, "rev", rev, "x", "actor", "key-1");
}

static void new_ses_id(char out[41])
{
    char u[37];
    eai_uuid_v4(u);
    snprintf(out, 41, "ses_%s", u);
}

static size_t list_n(const char *tenant, json_t *filter, json_t **out)
{
    OK(g_ops->session_list(g_st, tenant, filter, out, err));
    json_decref(filter);
    CU_ASSERT_FATAL(json_is_array(*out));
    return json_array_size(*out);
}

/* session_put / get / list / owned: writes in rev order, the owner check,
 * tenant isolation, newest first with a cursor, the live and status
 * filters, a node's live sessions of every tenant. */
static void test_sessions(void)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_ops->session_put);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_ops->session_get);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_ops->session_list);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g_ops->session_owned);
    char a[37], b[37], id[3][41], node[40], other[40], rnd[9];
    new_tenant(a);
    new_tenant(b);
    eai_random_hex(rnd, 4);
    snprintf(node, sizeof node, "node-%s", rnd);
    snprintf(other, sizeof other, "other-%s", rnd);
    int64_t t0 = eai_now_ms() - 10000;
    for (int i = 0; i < 3; i++)
        new_ses_id(id[i]);
    json_t *d = ses_doc(id[0], node, "starting", t0, 1), *out = NULL;
    OK(g_ops->session_put(g_st, a, d, NULL, err));
    json_decref(d);
    OK(g_ops->session_get(g_st, a, id[0], &out, err));
    CU_ASSERT_FATAL(json_is_object(out));
    CU_ASSERT_STRING_EQUAL(eai_jstr(out, "status"), "starting");
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_object_get(out, "x"), "actor"), "key-1");
    json_decref(out);
    /* another tenant's: not found, never written over */
    OK(g_ops->session_get(g_st, b, id[0], &out, err));
    CU_ASSERT_PTR_NULL(out);
    d = ses_doc(id[0], node, "running", t0, 9);
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(g_ops->session_put(g_st, b, d, NULL, &e), -1);
    eai_error_free(e);
    json_decref(d);
    /* rev orders the writes: a late one is ignored */
    d = ses_doc(id[0], node, "running", t0, 3);
    OK(g_ops->session_put(g_st, a, d, NULL, err));
    json_decref(d);
    d = ses_doc(id[0], node, "starting", t0, 2);
    OK(g_ops->session_put(g_st, a, d, NULL, err));
    json_decref(d);
    OK(g_ops->session_get(g_st, a, id[0], &out, err));
    CU_ASSERT_STRING_EQUAL(eai_jstr(out, "status"), "running");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(out, "rev")), 3);
    json_decref(out);
    /* the owner check: a move from the wrong owner is refused, from the
     * right one done */
    d = ses_doc(id[0], other, "paused", t0, 4);
    FAILS(EAI_E_CONFLICT, g_ops->session_put(g_st, a, d, "not-the-owner", err));
    OK(g_ops->session_put(g_st, a, d, node, err));
    json_decref(d);
    OK(g_ops->session_get(g_st, a, id[0], &out, err));
    CU_ASSERT_STRING_EQUAL(eai_jstr(out, "owner"), other);
    json_decref(out);
    /* two more: one ended, one live, newer */
    d = ses_doc(id[1], node, "ended", t0 + 1000, 1);
    OK(g_ops->session_put(g_st, a, d, NULL, err));
    json_decref(d);
    d = ses_doc(id[2], node, "running", t0 + 2000, 1);
    OK(g_ops->session_put(g_st, a, d, NULL, err));
    json_decref(d);
    CU_ASSERT_EQUAL(list_n(a, json_pack("{s:i}", "limit", 10), &out), 3);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(out, 0), "id"), id[2]); /* newest first */
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(out, 2), "id"), id[0]);
    json_decref(out);
    CU_ASSERT_EQUAL(list_n(a, json_pack("{s:i}", "limit", 2), &out), 2);
    json_decref(out);
    CU_ASSERT_EQUAL(list_n(a, json_pack("{s:i, s:s}", "limit", 10, "before", id[2]), &out), 2);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(out, 0), "id"), id[1]);
    json_decref(out);
    CU_ASSERT_EQUAL(list_n(a, json_pack("{s:i, s:b}", "limit", 10, "live", 1), &out), 2);
    json_decref(out);
    CU_ASSERT_EQUAL(list_n(a, json_pack("{s:i, s:s}", "limit", 10, "status", "ended"), &out), 1);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(out, 0), "id"), id[1]);
    json_decref(out);
    CU_ASSERT_EQUAL(list_n(b, json_pack("{s:i}", "limit", 10), &out), 0);
    json_decref(out);
    json_t *bad = json_pack("{s:i}", "limit", 0);
    FAILS(EAI_E_VALIDATION_FAILED, g_ops->session_list(g_st, a, bad, &out, err));
    json_decref(bad);
    /* a node's live sessions, of every tenant */
    char idb[41];
    new_ses_id(idb);
    d = ses_doc(idb, node, "paused", t0 + 3000, 1);
    OK(g_ops->session_put(g_st, b, d, NULL, err));
    json_decref(d);
    OK(g_ops->session_owned(g_st, node, 10, &out, err));
    CU_ASSERT_EQUAL_FATAL(json_array_size(out), 2); /* id[2] of a, idb of b; id[0] moved, id[1] ended */
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_object_get(json_array_get(out, 0), "doc"), "id"), id[2]);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(out, 0), "tenant_id"), a);
    CU_ASSERT_STRING_EQUAL(eai_jstr(json_array_get(out, 1), "tenant_id"), b);
    json_decref(out);
    OK(g_ops->session_owned(g_st, other, 10, &out, err));
    CU_ASSERT_EQUAL(json_array_size(out), 1);
    json_decref(out);
    FAILS(EAI_E_VALIDATION_FAILED, g_ops->session_owned(g_st, node, 0, &out, err));
    /* a record without its keys is refused */
    d = json_pack("{s:s}", "id", idb);
    FAILS(EAI_E_VALIDATION_FAILED, g_ops->session_put(g_st, a, d, NULL, err));
    json_decref(d);
    /* retention: exec_prune also deletes old ended records, never live ones */
    char old_id[41], old_live[41];
    new_ses_id(old_id);
    new_ses_id(old_live);
    int64_t long_ago = 86400000LL; /* 1970-01-02 */
    d = ses_doc(old_id, node, "ended", long_ago, 1);
    OK(g_ops->session_put(g_st, a, d, NULL, err));
    json_decref(d);
    d = ses_doc(old_live, node, "running", long_ago, 1);
    OK(g_ops->session_put(g_st, a, d, NULL, err));
    json_decref(d);
    if (g_ops->exec_prune) {
        int64_t gone = 0;
        OK(g_ops->exec_prune(g_st, long_ago + 1000, 1000, &gone, err));
        OK(g_ops->session_get(g_st, a, old_id, &out, err));
        CU_ASSERT_PTR_NULL(out);
        json_decref(out);
        OK(g_ops->session_get(g_st, a, old_live, &out, err));
        CU_ASSERT_PTR_NOT_NULL(out);
        json_decref(out);
    }
    d = ses_doc(old_live, node, "ended", long_ago, 2); /* leave nothing live behind */
    OK(g_ops->session_put(g_st, a, d, NULL, err));
    json_decref(d);
}

/* ------------------------------------------------------------ SQLite only */

/* A second instance on the same file (as the CLI in another process would
 * be) sees the first's writes; WAL is on. */
static void test_sqlite_second_instance(void)
{
    if (!g_is_sqlite)
        return;
    char path[128];
    snprintf(path, sizeof path, "%s/eai.db", g_dir);
    json_t *cfg = json_pack("{s:s}", "path", path);
    struct eai_error *e = NULL;
    void *other = g_desc->create(g_host, cfg, &e);
    report("second create", e);
    CU_ASSERT_FATAL(other != NULL);
    char t[37], id[41];
    new_tenant(t);
    create_exec(t, id, NULL);
    json_t *x = NULL;
    OK(g_ops->exec_get(other, t, id, &x, err));
    CU_ASSERT_PTR_NOT_NULL(x);
    json_decref(x);
    json_t *patch = json_pack("{s:s}", "status", "cancelled");
    int rc = 0;
    OK(rc = g_ops->exec_finish(other, t, id, patch, NULL, NULL, NULL, err));
    CU_ASSERT_EQUAL(rc, EAI_STORE_UPDATED);
    char buf[32];
    CU_ASSERT_STRING_EQUAL(exec_status(t, id, buf), "cancelled");
    json_decref(patch);
    g_desc->destroy(other);

    /* Missing path is refused at create. */
    json_t *empty = json_object();
    e = NULL;
    CU_ASSERT_PTR_NULL(g_desc->create(g_host, empty, &e));
    CU_ASSERT_PTR_NOT_NULL(e);
    eai_error_free(e);
    json_decref(empty);
    json_decref(cfg);

    char jm[64] = "";
    FILE *p = NULL;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "sqlite3 %s 'PRAGMA journal_mode' 2>/dev/null", path);
    p = popen(cmd, "r");
    if (p) {
        if (fgets(jm, sizeof jm, p))
            CU_ASSERT(strncmp(jm, "wal", 3) == 0);
        pclose(p);
    }
}

/* The page cache of each pooled connection is bounded by cache_kib: a
 * store reading a table several MiB large through one connection keeps at
 * most about that much (SQLite's default was 2 MiB a connection; with a
 * deep queue the pool's copies were most of eaid's RSS).  The same reads
 * with a large bound keep more: the measure can fail. */
static sqlite3_int64 sqlite_cache_growth(int cache_kib, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.db", g_dir, name);
    json_t *cfg = json_pack("{s:s, s:i, s:i}", "path", path, "cache_kib", cache_kib, "pool_size", 1);
    sqlite3_int64 before = sqlite3_memory_used();
    struct eai_error *e = NULL;
    void *st = g_desc->create(g_host, cfg, &e);
    json_decref(cfg);
    report("create with cache_kib", e);
    if (!st)
        return -1;
    char t[37] = "";
    json_t *out = NULL;
    OK(g_ops->tenant_create(st, "cache", &out, err));
    if (eai_jstr(out, "id"))
        snprintf(t, sizeof t, "%s", eai_jstr(out, "id"));
    json_decref(out);
    char big[4001];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    enum { N = 600 };
    static char ids[N][41];
    for (int i = 0; i < N; i++) {
        new_exec_id(ids[i]);
        json_t *rec = exec_record(ids[i], NULL, NULL, NULL);
        json_object_set_new(rec, "stdin", json_string(big));
        json_t *existing = NULL;
        OK(g_ops->exec_create(st, t, rec, NULL, &existing, err));
        json_decref(existing);
        json_decref(rec);
    }
    for (int i = 0; i < N; i++) {
        json_t *x = NULL;
        OK(g_ops->exec_get(st, t, ids[i], &x, err));
        CU_ASSERT_PTR_NOT_NULL(x);
        json_decref(x);
    }
    sqlite3_int64 grown = sqlite3_memory_used() - before;
    g_desc->destroy(st);
    const char *sfx[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
    return grown;
}

static void test_sqlite_cache_bound(void)
{
    if (!g_is_sqlite)
        return;
    sqlite3_int64 small = sqlite_cache_growth(256, "cache-small");
    sqlite3_int64 large = sqlite_cache_growth(8192, "cache-large");
    fprintf(stderr, "  sqlite memory of a store with 600 rows of 4 KB: cache_kib=256 %lld B, 8192 %lld B\n",
            (long long)small, (long long)large);
    CU_ASSERT(small >= 0 && small < 512 * 1024);
    CU_ASSERT(large > 2 * 1024 * 1024);
}

/* storage.synchronous (docs/performance.md "Durability"): NORMAL unless
 * told "full"; any other value is refused at create.  Read on the
 * instance's own pooled connection (the pragma is per connection). */
static int sqlite_sync_of(const char *value, struct eai_error **e)
{
    char path[128];
    snprintf(path, sizeof path, "%s/eai.db", g_dir);
    json_t *cfg = json_pack("{s:s}", "path", path);
    if (value)
        json_object_set_new(cfg, "synchronous", json_string(value));
    struct eai_sq *sq = g_desc->create(g_host, cfg, e);
    json_decref(cfg);
    if (!sq)
        return -1;
    int v = -2;
    sqlite3_stmt *st = NULL;
    if (sq->idle && sqlite3_prepare_v2(sq->idle->db, "PRAGMA synchronous", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    g_desc->destroy(sq);
    return v;
}

static void test_sqlite_synchronous(void)
{
    if (!g_is_sqlite)
        return;
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(sqlite_sync_of(NULL, &e), 1);      /* NORMAL */
    CU_ASSERT_EQUAL(sqlite_sync_of("normal", &e), 1);
    CU_ASSERT_EQUAL(sqlite_sync_of("full", &e), 2);    /* FULL */
    CU_ASSERT_PTR_NULL(e);
    CU_ASSERT_EQUAL(sqlite_sync_of("sometimes", &e), -1);
    CU_ASSERT_PTR_NOT_NULL(e && strstr(e->message, "synchronous"));
    eai_error_free(e);
}

/* The writers of one process queue on the store's writer mutex (storage.md
 * "Transactions and concurrency"), not on SQLite's busy sleeps: a write
 * waits while the mutex is held, though SQLite's own lock is free, and goes
 * the moment it is released; a failed transaction gives it back. */
struct sq_writer_arg {
    void *st;
    volatile int done;
    int rc;
};

static void *sq_writer_thread(void *arg)
{
    struct sq_writer_arg *w = arg;
    json_t *ids = NULL;
    struct eai_error *e = NULL;
    w->rc = g_ops->exec_renew(w->st, "writer-mutex-test", 30000, &ids, &e);
    json_decref(ids);
    eai_error_free(e);
    w->done = 1;
    return NULL;
}

static void test_sqlite_writer_mutex(void)
{
    if (!g_is_sqlite)
        return;
    struct eai_sq *sq = g_st;
    struct sq_writer_arg w = {.st = g_st};
    pthread_t th;
    pthread_mutex_lock(&sq->wmu);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, sq_writer_thread, &w), 0);
    usleep(150 * 1000);
    CU_ASSERT_EQUAL(w.done, 0);            /* queued on the mutex */
    pthread_mutex_unlock(&sq->wmu);
    for (int i = 0; i < 200 && !w.done; i++)
        usleep(10 * 1000);
    CU_ASSERT_EQUAL(w.done, 1);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(w.rc, 0);
    /* a transaction that fails (a finish of an unknown execution) gives the
     * mutex back: the next writer of another thread is not stuck */
    json_t *patch = json_pack("{s:s}", "status", "cancelled");
    struct eai_error *e = NULL;
    CU_ASSERT(g_ops->exec_finish(g_st, "00000000-0000-4000-8000-000000000000", "sbx_none", patch, NULL, NULL, NULL,
                                 &e) < 0);
    eai_error_free(e);
    json_decref(patch);
    CU_ASSERT_EQUAL(pthread_mutex_trylock(&sq->wmu), 0);
    pthread_mutex_unlock(&sq->wmu);
}

/* ------------------------------------------------------------ main */

static int setup(void)
{
    const char *sel = getenv("EAI_TEST_STORAGE");
    snprintf(g_dir, sizeof g_dir, "/tmp/eai-storage-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return -1;
    }
    g_host = eai_host_new(NULL, g_dir);
    if (!g_host)
        return -1;
    json_t *cfg;
    struct eai_error *err = NULL;
    if (!sel || !*sel || strcmp(sel, "sqlite") == 0) {
        char path[128];
        snprintf(path, sizeof path, "%s/eai.db", g_dir);
        g_desc = eai_builtin_storage_sqlite();
        cfg = json_pack("{s:s}", "path", path);
    } else if (strncmp(sel, "postgres://", 11) == 0 || strncmp(sel, "postgresql://", 13) == 0) {
        g_is_sqlite = 0;
        g_desc = eai_plugin_load(eai_plugin_dir(), EAI_KIND_STORAGE, "postgres", &err);
        if (!g_desc) {
            report("loading the postgres plugin", err);
            return -1;
        }
        cfg = json_pack("{s:s}", "url", sel);
    } else {
        fprintf(stderr, "EAI_TEST_STORAGE: expected sqlite or a postgres:// URL\n");
        return -1;
    }
    /* PostgreSQL: apply the migrations as the owner first when told how
     * (tests/support/pg_cluster.sh exports EAI_TEST_PG_OWNER_URL). */
    const char *owner_url = getenv("EAI_TEST_PG_OWNER_URL");
    if (!g_is_sqlite && owner_url && *owner_url) {
        json_t *ocfg = json_pack("{s:s}", "url", owner_url);
        void *owner = g_desc->create(g_host, ocfg, &err);
        json_decref(ocfg);
        const char *role = getenv("EAI_TEST_PG_APP_ROLE");
        if (!owner || ((const struct eai_storage_ops *)g_desc->ops)->migrate(
                          owner, role && *role ? role : "eai_app", &err) < 0) {
            report("migrate as owner", err);
            if (owner)
                g_desc->destroy(owner);
            json_decref(cfg);
            return -1;
        }
        g_desc->destroy(owner);
    }
    fprintf(stderr, "storage contract: backend %s\n", g_desc->name);
    /* every execution record the backend returns is checked against
     * contracts/v1/execution-record.schema.json (record_schema_check.h) */
    g_ops = record_schema_wrap(g_desc->ops);
    if (!g_ops) {
        json_decref(cfg);
        return -1;
    }
    g_st = g_desc->create(g_host, cfg, &err);
    json_decref(cfg);
    if (!g_st) {
        report("create", err);
        return -1;
    }
    return 0;
}

static void teardown(void)
{
    if (g_st)
        g_desc->destroy(g_st);
    if (g_dir[0]) {
        const char *sfx[] = {"/eai.db", "/eai.db-wal", "/eai.db-shm", "/eai.db-journal"};
        for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
            char p[128];
            snprintf(p, sizeof p, "%s%s", g_dir, sfx[i]);
            unlink(p);
        }
        rmdir(g_dir);
    }
    eai_host_free(g_host);
    record_schema_done();
}

/* Runs last: the wrapped ops validated records all along. */
static void test_record_schema(void)
{
    fprintf(stderr, "execution-record.schema.json: %ld records checked, %ld off the schema\n",
            record_schema_checked(), record_schema_failed());
    CU_ASSERT(record_schema_checked() > 0);
    CU_ASSERT_EQUAL(record_schema_failed(), 0);
}

int main(void)
{
    if (setup() < 0) {
        teardown();
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("storage_contract", NULL, NULL);
    CU_add_test(s, "descriptor, migrate, ping", test_descriptor_migrate_ping);
    CU_add_test(s, "tenants and keys", test_tenants_keys);
    CU_add_test(s, "admin: tenant and key lists, key expiry", test_admin_lists_expiry);
    CU_add_test(s, "sqlite: key expiry column added to an old database", test_sqlite_key_expiry_upgrade);
    CU_add_test(s, "sqlite: each connection's page cache bounded by cache_kib", test_sqlite_cache_bound);
    CU_add_test(s, "executions: create, get, list, tenant isolation", test_exec_create_get_list_isolation);
    CU_add_test(s, "executions: idempotency", test_idempotency);
    CU_add_test(s, "queue: claim fairness and counts", test_claim_fairness);
    CU_add_test(s, "queue: claim excluding tenants at their bound", test_claim_excluding);
    CU_add_test(s, "queue: no double claim from racing threads", test_claim_race);
    CU_add_test(s, "queue: renew, cancel, stale", test_renew_cancel_stale);
    CU_add_test(s, "finish: once, scrub, files, outbox", test_finish_scrub_files_outbox);
    CU_add_test(s, "outbox_append: a session's usage and audit", test_outbox_append);
    CU_add_test(s, "outbox: one tenant's backlog holds back no one", test_outbox_fair);
    CU_add_test(s, "manifests", test_manifests);
    CU_add_test(s, "manifest list", test_manifest_list);
    CU_add_test(s, "outbox: several events of one finish", test_outbox_events_array);
    CU_add_test(s, "audit chain, concurrent appends", test_audit_chain);
    CU_add_test(s, "audit chain, two processes", test_audit_two_processes);
    CU_add_test(s, "ledger", test_ledger);
    CU_add_test(s, "kv", test_kv);
    CU_add_test(s, "sessions: put in rev order, owner check, get, list, owned", test_sessions);
    CU_add_test(s, "sqlite: second instance, WAL", test_sqlite_second_instance);
    CU_add_test(s, "sqlite: synchronous normal or full", test_sqlite_synchronous);
    CU_add_test(s, "sqlite: writers queue on the writer mutex", test_sqlite_writer_mutex);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_add_test(s, "record schema: every execution record returned", test_record_schema);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    teardown();
    return (failures == 0 && run > 0) ? 0 : 1;
}
