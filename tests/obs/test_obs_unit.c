/*
 * Observability unit tests: W3C traceparent, canonical JSON of the audit
 * chain (fixed vectors), `eaid audit verify` against tampering done
 * directly in the SQLite file, /metrics text checked by promtool, span
 * queue bound.
 */
#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <sqlite3.h>

#include "obs/audit.h"
#include "obs/audit_verify.h"
#include "obs/metrics.h"
#include "obs_common.h"
#include "obs/telemetry.h"
#include "otlp_json.h"
#include "obs/trace.h"

/* ================================================================ traceparent */

static void test_traceparent_valid(void)
{
    struct eai_trace_ctx c;
    CU_ASSERT_EQUAL(eai_traceparent_parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", &c), 0);
    CU_ASSERT_STRING_EQUAL(c.trace_id, "0af7651916cd43dd8448eb211c80319c");
    CU_ASSERT_STRING_EQUAL(c.span_id, "b7ad6b7169203331");
    CU_ASSERT_EQUAL(c.flags, 1);
    CU_ASSERT_EQUAL(c.valid, 1);
    CU_ASSERT_EQUAL(eai_traceparent_parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", &c), 0);
    CU_ASSERT_EQUAL(c.flags, 0);
}

static void test_traceparent_invalid(void)
{
    static const char *const bad[] = {
        "",
        "00",
        /* uppercase hex anywhere */
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-B7AD6B7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0A",
        "0A-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        /* lengths */
        "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319cc-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-001",
        /* version 00 with anything after the flags */
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
        /* all-zero ids */
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        /* version ff is invalid */
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        /* separators and junk */
        "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331-01",
        " 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 ",
        "00-0af7651916cd43dd8448eb211c8031zz-b7ad6b7169203331-01",
        /* future version: longer must continue with '-' */
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
    };
    struct eai_trace_ctx c;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&c, 0x5a, sizeof(c));
        int r = eai_traceparent_parse(bad[i], &c);
        if (r != -1)
            fprintf(stderr, "accepted: '%s'\n", bad[i]);
        CU_ASSERT_EQUAL(r, -1);
    }
    CU_ASSERT_EQUAL(eai_traceparent_parse(NULL, &c), -1);
}

static void test_traceparent_future(void)
{
    struct eai_trace_ctx c;
    /* a higher version is read like 00, extra fields after '-' ignored */
    CU_ASSERT_EQUAL(eai_traceparent_parse("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-the-future-holds", &c), 0);
    CU_ASSERT_STRING_EQUAL(c.trace_id, "0af7651916cd43dd8448eb211c80319c");
    CU_ASSERT_STRING_EQUAL(c.span_id, "b7ad6b7169203331");
    CU_ASSERT_EQUAL(c.flags, 1);
    CU_ASSERT_EQUAL(eai_traceparent_parse("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-03", &c), 0);
    CU_ASSERT_EQUAL(c.flags, 1);  /* only the bits we know */
}

/* The hex check reads eight characters at a time: any byte that is not a
 * lowercase hex digit, at any place of the trace or the parent id, is
 * refused; each digit at each place is taken. */
static void test_traceparent_every_byte(void)
{
    static const char good[] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    struct eai_trace_ctx c;
    char h[sizeof good];
    for (size_t at = 3; at < 52; at++) {
        if (at == 35)
            continue;
        for (unsigned v = 1; v < 256; v++) {
            memcpy(h, good, sizeof good);
            h[at] = (char)v;
            int hex = (v >= '0' && v <= '9') || (v >= 'a' && v <= 'f');
            int rc = eai_traceparent_parse(h, &c);
            if (rc != (hex ? 0 : -1))
                fprintf(stderr, "traceparent byte 0x%02x at %zu: %d\n", v, at, rc);
            CU_ASSERT_EQUAL(rc, hex ? 0 : -1);
        }
    }
}

static void test_traceparent_generate_format(void)
{
    struct eai_trace_ctx a, b, p;
    eai_trace_ctx_generate(&a);
    eai_trace_ctx_generate(&b);
    CU_ASSERT_EQUAL(strlen(a.trace_id), 32);
    CU_ASSERT_EQUAL(strlen(a.span_id), 16);
    CU_ASSERT_EQUAL(a.valid, 0);
    CU_ASSERT_STRING_NOT_EQUAL(a.trace_id, b.trace_id);
    char tp[56];
    eai_traceparent_format(a.trace_id, a.span_id, a.flags, tp);
    CU_ASSERT_EQUAL(strlen(tp), 55);
    CU_ASSERT_EQUAL(eai_traceparent_parse(tp, &p), 0);  /* round trip */
    CU_ASSERT_STRING_EQUAL(p.trace_id, a.trace_id);
    CU_ASSERT_STRING_EQUAL(p.span_id, a.span_id);

    struct eai_span *s = eai_span_start("x", EAI_SPAN_SERVER, a.trace_id, a.span_id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_STRING_EQUAL(eai_span_trace_id(s), a.trace_id);
    CU_ASSERT_STRING_NOT_EQUAL(eai_span_id(s), a.span_id);
    eai_span_end(s, 0);
    /* a bad trace id gives a fresh one rather than garbage */
    s = eai_span_start("y", EAI_SPAN_INTERNAL, "00000000000000000000000000000000", NULL);
    CU_ASSERT_EQUAL(strlen(eai_span_trace_id(s)), 32);
    CU_ASSERT_STRING_NOT_EQUAL(eai_span_trace_id(s), "00000000000000000000000000000000");
    eai_span_end(s, 1);
    eai_span_end(NULL, 0);
}

/* ================================================================ canonical JSON */

#define ZERO EAI_AUDIT_ZERO_HASH
#define H1 "77eca80f687bf938ebc695f842cd68db16cb3723ebb79613a266dcafc6ac3284"

static void test_canonical_vectors(void)
{
    json_t *ev = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:s, s:n, s:s, s:s}",
                           "id", "e1", "tenant_id", "t1", "seq", 1, "time", "2026-11-29T10:00:00.000Z",
                           "actor", "k1", "action", "sandbox.execute", "target", "sbx_1",
                           "decision", "allow", "reason", "request_id", "r1",
                           "trace_id", "0af7651916cd43dd8448eb211c80319c");
    CU_ASSERT_EQUAL_FATAL(eai_audit_seal(ev, NULL), 0);
    char *c = eai_audit_canonical(ev);
    CU_ASSERT_STRING_EQUAL(c,
        "{\"action\":\"sandbox.execute\",\"actor\":\"k1\",\"decision\":\"allow\",\"id\":\"e1\","
        "\"prev_hash\":\"" ZERO "\",\"reason\":null,\"request_id\":\"r1\",\"seq\":1,"
        "\"target\":\"sbx_1\",\"tenant_id\":\"t1\",\"time\":\"2026-11-29T10:00:00.000Z\","
        "\"trace_id\":\"0af7651916cd43dd8448eb211c80319c\"}");
    free(c);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(ev, "hash")), H1);
    CU_ASSERT_EQUAL(eai_audit_check(ev), 1);

    /* escapes, key order by UTF-8 bytes, nested objects, negative ints */
    json_t *ev2 = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s, s:{s:[i,i,{s:b,s:b}], s:s, s:s, s:s}}",
                            "id", "e2", "tenant_id", "t1", "seq", 2, "action", "auth.refused",
                            "decision", "deny", "reason", "cl\xc3\xa9 \"r\xc3\xa9voqu\xc3\xa9""e\"\n\t\x01\\",
                            "details", "b", 1, -2, "z", 1, "a", 0, "A", "x", "_", "y", "\xc3\xa9", "z");
    CU_ASSERT_EQUAL_FATAL(eai_audit_seal(ev2, H1), 0);
    c = eai_audit_canonical(ev2);
    CU_ASSERT_STRING_EQUAL(c,
        "{\"action\":\"auth.refused\",\"decision\":\"deny\",\"details\":{\"A\":\"x\",\"_\":\"y\","
        "\"b\":[1,-2,{\"a\":false,\"z\":true}],\"\xc3\xa9\":\"z\"},\"id\":\"e2\",\"prev_hash\":\"" H1 "\","
        "\"reason\":\"cl\xc3\xa9 \\\"r\xc3\xa9voqu\xc3\xa9""e\\\"\\n\\t\\u0001\\\\\",\"seq\":2,\"tenant_id\":\"t1\"}");
    free(c);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(ev2, "hash")),
                           "b886e5d1b0377faad74e950ce57b54e50ea143046cd2f4499aea20d164a00604");

    /* any change breaks the hash; "hash" itself is not hashed */
    json_object_set_new(ev2, "decision", json_string("allow"));
    CU_ASSERT_EQUAL(eai_audit_check(ev2), 0);
    json_object_set_new(ev2, "decision", json_string("deny"));
    CU_ASSERT_EQUAL(eai_audit_check(ev2), 1);
    json_object_set_new(ev2, "prev_hash", json_string(ZERO));
    CU_ASSERT_EQUAL(eai_audit_check(ev2), 0);

    /* real numbers are refused */
    json_t *r = json_pack("{s:f}", "x", 1.5);
    CU_ASSERT_PTR_NULL(eai_audit_canonical(r));
    CU_ASSERT_EQUAL(eai_audit_seal(r, NULL), -1);
    json_decref(r);
    json_decref(ev);
    json_decref(ev2);
}

/* ================================================================ verify */

struct vfx {
    char *dir;
    struct eai_host *host;
    const struct eai_storage_ops *ops;
    void *st;
    char *ta, *tb;
};

static void vfx_open(struct vfx *f, int n_a, int n_b)
{
    memset(f, 0, sizeof(*f));
    f->dir = obs_tmpdir();
    f->host = eai_host_new(NULL, f->dir);
    f->st = obs_store_new(f->host, f->dir, &f->ops);
    f->ta = obs_tenant(f->ops, f->st, "a");
    f->tb = obs_tenant(f->ops, f->st, "b");
    for (int i = 0; i < n_a + n_b; i++) {
        const char *t = i < n_a ? f->ta : f->tb;
        char target[32];
        snprintf(target, sizeof(target), "sbx_%d", i);
        json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s}", "actor", "key1", "action", "sandbox.execute",
                               "target", target, "decision", i % 3 ? "allow" : "deny", "reason", "");
        struct eai_error *e = NULL;
        if (f->ops->audit_append(f->st, t, ev, &e) < 0)
            obs_die("audit_append", e);
        json_decref(ev);
    }
}

static void vfx_close(struct vfx *f)
{
    obs_store_free(f->st);
    eai_host_free(f->host);
    obs_rmrf(f->dir);
    free(f->dir);
    free(f->ta);
    free(f->tb);
}

/* Run SQL on the database file itself, as an attacker with file access. */
static void vfx_sql(struct vfx *f, const char *fmt, ...)
{
    char path[512], *sql = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&sql, fmt, ap) < 0)
        obs_die("vasprintf", NULL);
    va_end(ap);
    snprintf(path, sizeof(path), "%s/eai.db", f->dir);
    sqlite3 *db;
    char *msg = NULL;
    CU_ASSERT_EQUAL_FATAL(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fprintf(stderr, "sql '%s': %s\n", sql, msg ? msg : "?");
    CU_ASSERT_EQUAL(rc, SQLITE_OK);
    CU_ASSERT(sqlite3_changes(db) > 0);
    sqlite3_free(msg);
    sqlite3_close(db);
    free(sql);
}

static int vfx_verify(struct vfx *f, const char *tenant, struct eai_audit_verify_result *res)
{
    struct eai_error *e = NULL;
    int r = eai_audit_verify(f->ops, f->st, tenant, res, &e);
    if (r < 0)
        fprintf(stderr, "verify error: %s\n", e && e->message ? e->message : "?");
    else if (r == 1)
        fprintf(stderr, "    (verify says: tenant %.8s.. seq %lld: %s)\n", res->tenant, (long long)res->seq, res->what);
    eai_error_free(e);
    return r;
}

static void test_verify_intact(void)
{
    struct vfx f;
    struct eai_audit_verify_result res;
    vfx_open(&f, 5, 4);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 0);
    CU_ASSERT_EQUAL(res.events, 9);
    CU_ASSERT_EQUAL(res.chains, 2);
    CU_ASSERT_EQUAL(vfx_verify(&f, f.ta, &res), 0);
    CU_ASSERT_EQUAL(res.events, 5);
    CU_ASSERT_EQUAL(res.chains, 1);
    /* anchors written and still intact */
    json_t *heads = NULL;
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(eai_audit_heads(f.ops, f.st, &heads, &e), 0);
    CU_ASSERT_EQUAL(json_array_size(heads), 2);
    CU_ASSERT_EQUAL(eai_audit_anchor_update(f.ops, f.st, heads, &e), 0);
    json_decref(heads);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 0);
    CU_ASSERT_EQUAL(eai_audit_verify_cli(f.ops, f.st, NULL), 0);
    vfx_close(&f);
}

static void test_verify_modified_doc(void)
{
    struct vfx f;
    struct eai_audit_verify_result res;
    vfx_open(&f, 5, 4);
    vfx_sql(&f, "UPDATE audit_events SET doc = json_set(doc, '$.decision', 'allow', '$.reason', 'ok')"
                " WHERE tenant_id = '%s' AND seq = 3", f.ta);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 1);
    CU_ASSERT_STRING_EQUAL(res.tenant, f.ta);
    CU_ASSERT_EQUAL(res.seq, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(res.what, "modified"));
    CU_ASSERT_EQUAL(eai_audit_verify_cli(f.ops, f.st, f.ta), 1);
    CU_ASSERT_EQUAL(eai_audit_verify_cli(f.ops, f.st, f.tb), 0);  /* other chain intact */
    vfx_close(&f);
}

static void test_verify_modified_column(void)
{
    struct vfx f;
    struct eai_audit_verify_result res;
    vfx_open(&f, 3, 3);
    /* only the indexed column, not the JSON document */
    vfx_sql(&f, "UPDATE audit_events SET action = 'sandbox.cancel' WHERE tenant_id = '%s' AND seq = 2", f.tb);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 1);
    CU_ASSERT_STRING_EQUAL(res.tenant, f.tb);
    CU_ASSERT_EQUAL(res.seq, 2);
    vfx_close(&f);
}

static void test_verify_modified_hash(void)
{
    struct vfx f;
    struct eai_audit_verify_result res;
    vfx_open(&f, 3, 0);
    /* a consistent rewrite of one event (doc + its hash) still breaks the next link */
    vfx_sql(&f, "UPDATE audit_events SET doc = json_set(doc, '$.hash', '%s'), hash = '%s'"
                " WHERE tenant_id = '%s' AND seq = 2", H1, H1, f.ta);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 1);
    CU_ASSERT_EQUAL(res.seq, 2);
    vfx_close(&f);
}

static void test_verify_deleted(void)
{
    struct vfx f;
    struct eai_audit_verify_result res;
    vfx_open(&f, 5, 2);
    vfx_sql(&f, "DELETE FROM audit_events WHERE tenant_id = '%s' AND seq = 2", f.ta);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 1);
    CU_ASSERT_STRING_EQUAL(res.tenant, f.ta);
    CU_ASSERT_EQUAL(res.seq, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(res.what, "missing"));
    vfx_close(&f);

    /* the first event */
    vfx_open(&f, 3, 0);
    vfx_sql(&f, "DELETE FROM audit_events WHERE tenant_id = '%s' AND seq = 1", f.ta);
    CU_ASSERT_EQUAL(vfx_verify(&f, f.ta, &res), 1);
    CU_ASSERT_EQUAL(res.seq, 2);
    vfx_close(&f);

    /* the last event: caught by the anchor the delivery loop records */
    vfx_open(&f, 4, 1);
    json_t *heads = NULL;
    struct eai_error *e = NULL;
    CU_ASSERT_EQUAL(eai_audit_heads(f.ops, f.st, &heads, &e), 0);
    CU_ASSERT_EQUAL(eai_audit_anchor_update(f.ops, f.st, heads, &e), 0);
    json_decref(heads);
    vfx_sql(&f, "DELETE FROM audit_events WHERE tenant_id = '%s' AND seq = 4", f.ta);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 1);
    CU_ASSERT_STRING_EQUAL(res.tenant, f.ta);
    CU_ASSERT_PTR_NOT_NULL(strstr(res.what, "deleted"));
    CU_ASSERT_EQUAL(vfx_verify(&f, f.ta, &res), 1);
    /* regrowing the chain past the anchor does not hide the cut */
    json_t *ev = json_pack("{s:s, s:s}", "action", "sandbox.execute", "decision", "allow");
    CU_ASSERT_EQUAL(f.ops->audit_append(f.st, f.ta, ev, &e), 0);
    CU_ASSERT_EQUAL(f.ops->audit_append(f.st, f.ta, ev, &e), 0);
    json_decref(ev);
    CU_ASSERT_EQUAL(eai_audit_heads(f.ops, f.st, &heads, &e), 0);
    CU_ASSERT_EQUAL(eai_audit_anchor_update(f.ops, f.st, heads, &e), 1);  /* kept, reported */
    json_decref(heads);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 1);
    CU_ASSERT_EQUAL(res.seq, 4);
    vfx_close(&f);
}

static void test_verify_reordered(void)
{
    struct vfx f;
    struct eai_audit_verify_result res;
    vfx_open(&f, 5, 1);
    /* swap seq 2 and 3 (columns and documents, as a careful attacker would) */
    vfx_sql(&f, "UPDATE audit_events SET seq = -1, doc = json_set(doc, '$.seq', 3) WHERE tenant_id = '%s' AND seq = 2;"
                "UPDATE audit_events SET seq = 2, doc = json_set(doc, '$.seq', 2) WHERE tenant_id = '%s' AND seq = 3;"
                "UPDATE audit_events SET seq = 3 WHERE tenant_id = '%s' AND seq = -1;", f.ta, f.ta, f.ta);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 1);
    CU_ASSERT_STRING_EQUAL(res.tenant, f.ta);
    CU_ASSERT_EQUAL(res.seq, 2);
    vfx_close(&f);

    /* only the seq column: the listing order changes, the documents do not */
    vfx_open(&f, 4, 0);
    vfx_sql(&f, "UPDATE audit_events SET seq = 100 WHERE tenant_id = '%s' AND seq = 2", f.ta);
    CU_ASSERT_EQUAL(vfx_verify(&f, NULL, &res), 1);
    vfx_close(&f);
}

/* The server appends and moves the anchor while verify walks: not a deletion. */
static struct eai_storage_ops g_wrap;
static const struct eai_storage_ops *g_real;
static struct vfx *g_rf;
static int g_race_done;

static int race_audit_list(void *self, const char *tenant, int64_t after, int limit, json_t **out,
                           struct eai_error **err)
{
    int r = g_real->audit_list(self, tenant, after, limit, out, err);
    if (!g_race_done) {
        g_race_done = 1;
        json_t *ev = json_pack("{s:s, s:s}", "action", "sandbox.execute", "decision", "allow"), *heads = NULL;
        struct eai_error *e = NULL;
        CU_ASSERT_EQUAL(g_real->audit_append(self, g_rf->ta, ev, &e), 0);
        CU_ASSERT_EQUAL(g_real->audit_append(self, g_rf->ta, ev, &e), 0);
        CU_ASSERT_EQUAL(eai_audit_heads(g_real, self, &heads, &e), 0);
        CU_ASSERT_EQUAL(eai_audit_anchor_update(g_real, self, heads, &e), 0);
        json_decref(heads);
        json_decref(ev);
    }
    return r;
}

static void test_verify_concurrent_append(void)
{
    struct vfx f;
    struct eai_audit_verify_result res;
    vfx_open(&f, 5, 2);
    g_real = f.ops;
    g_wrap = *f.ops;
    g_wrap.audit_list = race_audit_list;
    g_rf = &f;
    for (int pass = 0; pass < 2; pass++) {
        g_race_done = 0;
        struct eai_error *e = NULL;
        int r = eai_audit_verify(&g_wrap, f.st, pass ? f.ta : NULL, &res, &e);
        if (r != 0)
            fprintf(stderr, "    (verify says: %s)\n", res.what);
        CU_ASSERT_EQUAL(r, 0);
        eai_error_free(e);
    }
    CU_ASSERT_EQUAL(res.events, 9);  /* 5 + 2 + 2 in tenant a */
    vfx_close(&f);
}

/* ================================================================ metrics */

/* Resolved series refs (the HTTP request metrics' hot path): the same
 * series as by name, stale after a reset until resolved again. */
static void test_metrics_refs(void)
{
    eai_metrics_reset();
    eai_obs_describe_metrics();
    struct eai_metric_ref t = {0}, d = {0};
    CU_ASSERT_EQUAL(eai_metrics_ref_add(&t, 1), -1); /* unresolved */
    CU_ASSERT_EQUAL(eai_metrics_ref(&t, "eai_http_requests_total", "route=\"x\",code=\"200\"", 0), 0);
    CU_ASSERT_EQUAL(eai_metrics_ref_add(&t, 1), 0);
    CU_ASSERT_EQUAL(eai_metrics_ref_add(&t, 2), 0);
    eai_metrics_add("eai_http_requests_total", "route=\"x\",code=\"200\"", 1);
    CU_ASSERT_EQUAL(eai_metrics_get("eai_http_requests_total", "route=\"x\",code=\"200\""), 4);
    CU_ASSERT_EQUAL(eai_metrics_ref(&d, "eai_http_request_duration_seconds", "route=\"x\"", 2), 0);
    CU_ASSERT_EQUAL(eai_metrics_ref_observe(&d, 0.001), 0);
    char *text = eai_metrics_render();
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "eai_http_request_duration_seconds_count{route=\"x\"} 1"));
    free(text);
    eai_metrics_reset();
    CU_ASSERT_EQUAL(eai_metrics_ref_add(&t, 1), -1); /* stale: never a freed series */
    CU_ASSERT_EQUAL(eai_metrics_ref_observe(&d, 1), -1);
    CU_ASSERT_EQUAL(eai_metrics_get("eai_http_requests_total", "route=\"x\",code=\"200\""), 0);
}

static void test_metrics_promtool(void)
{
    eai_metrics_reset();
    eai_obs_describe_metrics();
    eai_metrics_add("eai_sandbox_executions_total", "profile=\"gvisor\",status=\"succeeded\"", 3);
    eai_metrics_add("eai_sandbox_executions_total", "profile=\"gvisor-small\",status=\"timeout\"", 1);
    eai_metrics_add("eai_sandbox_cpu_seconds_total", "profile=\"gvisor\"", 0.125);
    eai_metrics_observe("eai_sandbox_duration_seconds", "profile=\"gvisor\"", 0.41);
    eai_metrics_observe("eai_sandbox_duration_seconds", "profile=\"gvisor\"", 7);
    char *esc = eai_metrics_label_escape("/v1/x\"y\\z\n");
    char labels[256];
    snprintf(labels, sizeof(labels), "route=\"%s\",code=\"200\"", esc);
    free(esc);
    eai_metrics_add("eai_http_requests_total", labels, 1);
    eai_metrics_set("eai_sandbox_queued", NULL, 2);
    eai_metrics_set("eai_sandbox_running", NULL, 1);
    eai_metrics_set("eai_outbox_backlog", NULL, 0);
    eai_metrics_set("eai_audit_sink_backlog", NULL, 0);
    eai_metrics_add("eai_trace_spans_dropped_total", NULL, 0);
    char *text = eai_metrics_render();
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "# TYPE eai_sandbox_cpu_seconds_total counter"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "# TYPE eai_sandbox_duration_seconds histogram"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "eai_sandbox_duration_seconds_bucket{profile=\"gvisor\",le=\"0.5\"} 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "eai_sandbox_duration_seconds_count{profile=\"gvisor\"} 2"));

    char dir[] = "/tmp/eai-obs-XXXXXX", file[128], cmd[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/metrics.txt", dir);
    FILE *f = fopen(file, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
    free(text);

    char tool[512] = "";
    snprintf(cmd, sizeof(cmd), "%s/tests/support/promtool.sh", obs_source_dir());
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (!fgets(tool, sizeof(tool), p))
        tool[0] = '\0';
    int prc = pclose(p);
    tool[strcspn(tool, "\n")] = '\0';
    CU_ASSERT_EQUAL(prc, 0);
    CU_ASSERT_FATAL(tool[0] != '\0');
    snprintf(cmd, sizeof(cmd), "'%s' check metrics < '%s'", tool, file);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof(cmd), "cat '%s' >&2", file);
        if (system(cmd) != 0)
            fprintf(stderr, "(cannot show %s)\n", file);
    }
    CU_ASSERT_EQUAL(rc, 0);

    /* the seed's exact name as a counter is what promtool complains about */
    f = fopen(file, "w");
    fputs("# HELP eai_sandbox_cpu_seconds x\n# TYPE eai_sandbox_cpu_seconds counter\n"
          "eai_sandbox_cpu_seconds{profile=\"gvisor\"} 1\n", f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "'%s' check metrics < '%s' 2>/dev/null", tool, file);
    CU_ASSERT_NOT_EQUAL(system(cmd), 0);
    obs_rmrf(dir);
}

/* ================================================================ span queue */

static int fake_export_calls;
static size_t fake_export_spans;

static int fake_export(void *self, const json_t *spans, eai_deliver_done_fn done, void *arg)
{
    fake_export_calls++;
    fake_export_spans += json_array_size(spans);
    done(arg, 1, NULL);
    return 0;
}

static const struct eai_telemetry_ops fake_ops = {.size = sizeof(struct eai_telemetry_ops), .export_spans = fake_export};

static void test_span_queue_bound(void)
{
    struct event_base *base = event_base_new();
    CU_ASSERT_EQUAL_FATAL(eai_trace_exporter_start(base, &fake_ops, NULL), 0);
    double before = eai_metrics_get("eai_trace_spans_dropped_total", NULL);
    for (int i = 0; i < EAI_TRACE_QUEUE_MAX + 100; i++)
        eai_span_end(eai_span_start("burst", EAI_SPAN_INTERNAL, NULL, NULL), 0);
    CU_ASSERT_EQUAL(eai_trace_queued(), EAI_TRACE_QUEUE_MAX);
    CU_ASSERT_EQUAL(eai_metrics_get("eai_trace_spans_dropped_total", NULL) - before, 100);
    eai_trace_flush();
    CU_ASSERT_EQUAL(eai_trace_queued(), 0);
    CU_ASSERT_EQUAL(fake_export_spans, EAI_TRACE_QUEUE_MAX);
    CU_ASSERT_EQUAL(fake_export_calls, EAI_TRACE_QUEUE_MAX / EAI_TRACE_BATCH_MAX);
    eai_trace_exporter_stop();
    /* after stop: spans go to the log, nothing queued */
    eai_span_end(eai_span_start("late", EAI_SPAN_INTERNAL, NULL, NULL), 0);
    CU_ASSERT_EQUAL(eai_trace_queued(), 0);
    event_base_free(base);
}

/* OTEL_EXPORTER_OTLP_HEADERS: k=v pairs, percent-decoded values, refusals */
static void test_otlp_headers(void)
{
    char *h[8] = {0};
    CU_ASSERT_EQUAL(eai_otlp_parse_headers("Authorization=Bearer%20tok, x-team = obs ,", h, 8), 2);
    CU_ASSERT_STRING_EQUAL(h[0] ? h[0] : "", "Authorization: Bearer tok");
    CU_ASSERT_STRING_EQUAL(h[1] ? h[1] : "", "x-team: obs");
    free(h[0]);
    free(h[1]);
    CU_ASSERT_EQUAL(eai_otlp_parse_headers("", h, 8), 0);
    CU_ASSERT_EQUAL(eai_otlp_parse_headers("bad key=1", h, 8), -1);
    CU_ASSERT_EQUAL(eai_otlp_parse_headers("k=v%0Aevil: 1", h, 8), -1);  /* no header injection */
    CU_ASSERT_EQUAL(eai_otlp_parse_headers("novalue", h, 8), -1);
    CU_ASSERT_EQUAL(eai_otlp_parse_headers("a=1,b=2,c=3", h, 2), -1);   /* bounded */
}

/* The metrics exposition as OTLP: counters, gauges, histograms (per-bucket
 * counts), escaped labels, NaN; a malformed line fails the whole export. */
static const json_t *find_metric(const json_t *req, const char *name)
{
    const json_t *ms = json_object_get(
        json_array_get(json_object_get(json_array_get(json_object_get(req, "resourceMetrics"), 0), "scopeMetrics"), 0),
        "metrics");
    size_t i;
    const json_t *m;
    json_array_foreach(ms, i, m)
        if (!strcmp(json_string_value(json_object_get(m, "name")) ?: "", name))
            return m;
    return NULL;
}

static void test_otlp_metrics(void)
{
    static const char text[] =
        "# HELP eai_sandbox_executions_total Executions by profile and status\n"
        "# TYPE eai_sandbox_executions_total counter\n"
        "eai_sandbox_executions_total{profile=\"gvisor\",status=\"succeeded\"} 3\n"
        "eai_sandbox_executions_total{profile=\"gvi\\\"so\\\\r\\n\",status=\"failed\"} 1\n"
        "# HELP eai_queue Queue\\nlength\n"
        "# TYPE eai_queue gauge\n"
        "eai_queue 7\n"
        "eai_nan NaN\n"
        "# TYPE eai_sandbox_duration_seconds histogram\n"
        "eai_sandbox_duration_seconds_bucket{profile=\"gvisor\",le=\"0.1\"} 1\n"
        "eai_sandbox_duration_seconds_bucket{profile=\"gvisor\",le=\"1\"} 3\n"
        "eai_sandbox_duration_seconds_bucket{profile=\"gvisor\",le=\"+Inf\"} 4\n"
        "eai_sandbox_duration_seconds_sum{profile=\"gvisor\"} 9.5\n"
        "eai_sandbox_duration_seconds_count{profile=\"gvisor\"} 4\n"
        "# TYPE eai_described_only counter\n";
    char why[200] = "";
    json_t *req = eai_otlp_encode_metrics(text, sizeof text - 1, "eaid-test", 1000, 2000, why, sizeof why);
    CU_ASSERT_PTR_NOT_NULL_FATAL(req);
    const json_t *c = find_metric(req, "eai_sandbox_executions_total");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(c, "description")), "Executions by profile and status");
    const json_t *sum = json_object_get(c, "sum");
    CU_ASSERT_TRUE(json_is_true(json_object_get(sum, "isMonotonic")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(sum, "aggregationTemporality")), 2);
    const json_t *dps = json_object_get(sum, "dataPoints");
    CU_ASSERT_EQUAL(json_array_size(dps), 2);
    int seen_escaped = 0;
    size_t i;
    const json_t *dp;
    json_array_foreach(dps, i, dp) {
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(dp, "startTimeUnixNano")), "1000");
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(dp, "timeUnixNano")), "2000");
        const json_t *a;
        size_t k;
        json_array_foreach(json_object_get(dp, "attributes"), k, a) {
            const char *v = json_string_value(json_object_get(json_object_get(a, "value"), "stringValue"));
            if (v && !strcmp(v, "gvi\"so\\r\n"))
                seen_escaped = json_real_value(json_object_get(dp, "asDouble")) == 1.0;
        }
    }
    CU_ASSERT_TRUE(seen_escaped);
    const json_t *g = find_metric(req, "eai_queue");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(g, "description")), "Queue\nlength");
    CU_ASSERT_EQUAL(json_real_value(json_object_get(json_array_get(json_object_get(json_object_get(g, "gauge"),
                                                                                   "dataPoints"), 0), "asDouble")), 7.0);
    const json_t *nan = find_metric(req, "eai_nan"); /* untyped: a gauge; NaN as the JSON mapping's string */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(nan, "gauge"),
                                                                                            "dataPoints"), 0), "asDouble")), "NaN");
    const json_t *h = json_object_get(find_metric(req, "eai_sandbox_duration_seconds"), "histogram");
    const json_t *hp = json_array_get(json_object_get(h, "dataPoints"), 0);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(h, "dataPoints")), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(hp, "count")), "4");
    CU_ASSERT_EQUAL(json_real_value(json_object_get(hp, "sum")), 9.5);
    char *b = json_dumps(json_object_get(hp, "explicitBounds"), JSON_COMPACT);
    char *bc = json_dumps(json_object_get(hp, "bucketCounts"), JSON_COMPACT);
    CU_ASSERT_STRING_EQUAL(b, "[0.10000000000000001,1.0]");
    CU_ASSERT_STRING_EQUAL(bc, "[\"1\",\"2\",\"1\"]"); /* per bucket, not cumulative; the last is +Inf's */
    free(b);
    free(bc);
    CU_ASSERT_PTR_NULL(find_metric(req, "eai_described_only")); /* described, never observed */
    json_decref(req);
    /* refused whole */
    static const char *const bad[] = {"x{a=\"1} 2\n", "x 1 2 3 four\n", "x{a=1} 2\n", "9x 1\n",
                                      "# TYPE x kind\n", "x{a=\"b\"} notanumber\n",
                                      "# TYPE h histogram\nh_bucket{a=\"b\"} 1\n"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        why[0] = '\0';
        json_t *r = eai_otlp_encode_metrics(bad[k], strlen(bad[k]), NULL, 0, 0, why, sizeof why);
        CU_ASSERT_PTR_NULL(r);
        CU_ASSERT_TRUE(strncmp(why, "line 1", 6) == 0 || strncmp(why, "line 2", 6) == 0);
        if (r)
            fprintf(stderr, "accepted: %s\n", bad[k]);
        json_decref(r);
    }
    /* eaid's own /metrics, as rendered, converts whole */
    char *mine = eai_metrics_render();
    json_t *r = mine ? eai_otlp_encode_metrics(mine, strlen(mine), NULL, 1, 2, why, sizeof why) : NULL;
    CU_ASSERT_PTR_NOT_NULL(r);
    if (!r)
        fprintf(stderr, "own metrics refused: %s\n", why);
    json_decref(r);
    free(mine);
}

/* Prometheus naming, checked once where a family is described (a
 * plugin's through eai_host.metric_describe, ABI 1.4); a plugin cannot
 * take a name core or another plugin described. */
static void test_metric_names(void)
{
    char why[256];
    static const char *const ok_labels[] = {"result", "profile", NULL};
    CU_ASSERT_EQUAL(eai_metrics_name_check("eai_pool_takes_total", EAI_METRIC_COUNTER, ok_labels, why, sizeof why), 0);
    CU_ASSERT_EQUAL(eai_metrics_name_check("eai:pool_ready", EAI_METRIC_GAUGE, NULL, why, sizeof why), 0);
    CU_ASSERT_EQUAL(eai_metrics_name_check("eai_run_seconds", EAI_METRIC_HISTOGRAM, NULL, why, sizeof why), 0);
    static const struct {
        const char *name;
        enum eai_metric_type type;
        const char *why;
    } bad[] = {
        {"", EAI_METRIC_GAUGE, "1 to 128 characters"},
        {"9lives", EAI_METRIC_GAUGE, "does not match"},
        {"eai-pool", EAI_METRIC_GAUGE, "does not match"},
        {"eai_pool_takes", EAI_METRIC_COUNTER, "must end in _total"},
        {"eai_pool_ready_total", EAI_METRIC_GAUGE, "must not end in _total"},
        {"eai_run_seconds_bucket", EAI_METRIC_HISTOGRAM, "must not end in _bucket"},
        {"eai_things_count", EAI_METRIC_GAUGE, "must not end in _count"},
        {"eai_things_sum", EAI_METRIC_HISTOGRAM, "must not end in _sum"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = 0;
        CU_ASSERT_EQUAL(eai_metrics_name_check(bad[i].name, bad[i].type, NULL, why, sizeof why), -1);
        if (!strstr(why, bad[i].why))
            fprintf(stderr, "'%s': '%s' lacks '%s'\n", bad[i].name, why, bad[i].why);
        CU_ASSERT_PTR_NOT_NULL(strstr(why, bad[i].why));
    }
    static const char *const l_plugin[] = {"plugin", NULL}, *const l_le[] = {"le", NULL},
                             *const l_dup[] = {"a", "a", NULL}, *const l_under[] = {"__x", NULL},
                             *const l_bad[] = {"a-b", NULL};
    CU_ASSERT_EQUAL(eai_metrics_name_check("x_total", EAI_METRIC_COUNTER, l_plugin, why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_metrics_name_check("x_seconds", EAI_METRIC_HISTOGRAM, l_le, why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_metrics_name_check("x_total", EAI_METRIC_COUNTER, l_dup, why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_metrics_name_check("x_total", EAI_METRIC_COUNTER, l_under, why, sizeof why), -1);
    CU_ASSERT_EQUAL(eai_metrics_name_check("x_total", EAI_METRIC_COUNTER, l_bad, why, sizeof why), -1);

    /* unique: core's names and another plugin's are refused, the same
     * plugin's again (another instance) is not */
    eai_metrics_reset();
    eai_metrics_describe("eai_sandbox_running", EAI_METRIC_GAUGE, "Executions running on this node.");
    CU_ASSERT_EQUAL(eai_metrics_claim("eai_sandbox_running", EAI_METRIC_GAUGE, "Mine.", NULL, 0, "p1", why, sizeof why),
                    -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "already described by eaid"));
    CU_ASSERT_EQUAL(eai_metrics_claim("eai_p_total", EAI_METRIC_COUNTER, "P.", NULL, 0, "p1", why, sizeof why), 0);
    CU_ASSERT_EQUAL(eai_metrics_claim("eai_p_total", EAI_METRIC_COUNTER, "P.", NULL, 0, "p1", why, sizeof why), 0);
    CU_ASSERT_EQUAL(eai_metrics_claim("eai_p_total", EAI_METRIC_COUNTER, "P.", NULL, 0, "p2", why, sizeof why), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "already described by plugin p1"));
    CU_ASSERT_EQUAL(eai_metrics_claim("eai_q", EAI_METRIC_GAUGE, "two\nlines", NULL, 0, "p1", why, sizeof why), -1);
    static const double down[] = {1, 0.5};
    CU_ASSERT_EQUAL(eai_metrics_claim("eai_h", EAI_METRIC_HISTOGRAM, "H.", down, 2, "p1", why, sizeof why), -1);
    eai_metrics_reset();
}

/* Every family core describes passes the rules plugins' names are held to. */
static void test_core_metric_names(void)
{
    eai_metrics_reset();
    eai_obs_describe_metrics();
    char *text = eai_metrics_render();
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    int n = 0;
    for (char *line = strstr(text, "# TYPE "); line; line = strstr(line + 1, "# TYPE ")) {
        char name[160], type[32], why[256];
        if (sscanf(line, "# TYPE %159s %31s", name, type) != 2)
            continue;
        enum eai_metric_type t = strcmp(type, "counter") == 0 ? EAI_METRIC_COUNTER
                                 : strcmp(type, "gauge") == 0 ? EAI_METRIC_GAUGE
                                                              : EAI_METRIC_HISTOGRAM;
        int rc = eai_metrics_name_check(name, t, NULL, why, sizeof why);
        if (rc != 0)
            fprintf(stderr, "%s\n", why);
        CU_ASSERT_EQUAL(rc, 0);
        n++;
    }
    CU_ASSERT(n > 20);
    free(text);
    eai_metrics_reset();
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite m = CU_add_suite("metric names", NULL, NULL);
    CU_add_test(m, "Prometheus rules and uniqueness", test_metric_names);
    CU_add_test(m, "core's own families pass them", test_core_metric_names);
    CU_pSuite s = CU_add_suite("traceparent", NULL, NULL);
    CU_add_test(s, "valid", test_traceparent_valid);
    CU_add_test(s, "invalid", test_traceparent_invalid);
    CU_add_test(s, "future version", test_traceparent_future);
    CU_add_test(s, "generate and format", test_traceparent_generate_format);
    CU_add_test(s, "every byte of the ids", test_traceparent_every_byte);
    s = CU_add_suite("canonical", NULL, NULL);
    CU_add_test(s, "fixed vectors", test_canonical_vectors);
    s = CU_add_suite("verify", NULL, NULL);
    CU_add_test(s, "intact", test_verify_intact);
    CU_add_test(s, "modified document", test_verify_modified_doc);
    CU_add_test(s, "modified column", test_verify_modified_column);
    CU_add_test(s, "modified hash", test_verify_modified_hash);
    CU_add_test(s, "deleted", test_verify_deleted);
    CU_add_test(s, "reordered", test_verify_reordered);
    CU_add_test(s, "concurrent append", test_verify_concurrent_append);
    s = CU_add_suite("metrics", NULL, NULL);
    CU_add_test(s, "promtool check metrics", test_metrics_promtool);
    CU_add_test(s, "metric series refs", test_metrics_refs);
    s = CU_add_suite("otlp", NULL, NULL);
    CU_add_test(s, "OTEL_EXPORTER_OTLP_HEADERS", test_otlp_headers);
    CU_add_test(s, "metrics exposition as OTLP", test_otlp_metrics);
    s = CU_add_suite("spans", NULL, NULL);
    CU_add_test(s, "queue bound and batches", test_span_queue_bound);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures();
    CU_cleanup_registry();
    return failures ? 1 : 0;
}
