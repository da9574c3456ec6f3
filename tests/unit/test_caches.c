/* The loop-side caches of issue 15: verified API keys (http/auth_cache.c:
 * secret, expiry, TTL, revocation marker, generation guard) and finished
 * executions' documents (exec/doc_cache.c: per tenant, byte budget). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "exec/doc_cache.h"
#include "http/auth_cache.h"
#include "unit_main.h"

static char tmpdir[256];

static int setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/eai-test-caches-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *KID = "0123456789abcdef";
static const char *SEC = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

static json_t *rec(const char *tenant, const char *expires)
{
    return json_pack("{s:s, s:s, s:b, s:s?}", "tenant_id", tenant, "hash", "unused", "revoked", 0, "expires_at",
                     expires);
}

static void put(struct eai_auth_cache *c, const char *secret, json_t *r, int64_t now)
{
    eai_auth_cache_put(c, eai_auth_cache_gen(c), KID, secret, r, now);
    json_decref(r);
}

static void test_auth_hit_miss(void)
{
    struct eai_auth_cache *c = eai_auth_cache_new(1000, tmpdir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char t[64] = "";
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1000, t, sizeof t), 0); /* empty */
    put(c, SEC, rec("tenant-a", NULL), 1000);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1001, t, sizeof t), 1);
    CU_ASSERT_STRING_EQUAL(t, "tenant-a");
    /* another secret for the same key id: storage decides */
    char other[65];
    memcpy(other, SEC, 65);
    other[63] = 'e';
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, other, 1002, t, sizeof t), 0);
    /* the whole secret is compared: a first byte, a middle byte, a prefix,
     * a longer one and the empty one all miss; the good one still hits */
    other[63] = SEC[63];
    other[0] = '1';
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, other, 1002, t, sizeof t), 0);
    other[0] = SEC[0];
    other[31] = other[31] == 'f' ? '0' : 'f';
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, other, 1002, t, sizeof t), 0);
    memcpy(other, SEC, 65);
    other[40] = '\0';
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, other, 1002, t, sizeof t), 0);
    char longer[80];
    snprintf(longer, sizeof longer, "%s00", SEC);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, longer, 1002, t, sizeof t), 0);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, "", 1002, t, sizeof t), 0);
    /* the same secret under another key id misses */
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, "fedcba9876543210", SEC, 1002, t, sizeof t), 0);
    t[0] = '\0';
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1002, t, sizeof t), 1);
    CU_ASSERT_STRING_EQUAL(t, "tenant-a");
    /* past half the TTL: still good, once asking for a refresh */
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1600, t, sizeof t), 2);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1601, t, sizeof t), 1);
    /* a refresh that found the key gone drops it */
    eai_auth_cache_drop(c, KID, 0);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1602, t, sizeof t), 0);
    /* TTL */
    put(c, SEC, rec("tenant-a", NULL), 2000);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 2999, t, sizeof t) > 0, 1);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 3000, t, sizeof t), 0);
    /* the key's own expiry, before the TTL */
    put(c, SEC, rec("tenant-a", "1970-01-01T00:00:04.500Z"), 4000);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 4499, t, sizeof t) > 0, 1);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 4500, t, sizeof t), 0);
    eai_auth_cache_free(c);
    /* ttl 0: off */
    c = eai_auth_cache_new(0, tmpdir);
    put(c, SEC, rec("tenant-a", NULL), 1000);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1001, t, sizeof t), 0);
    eai_auth_cache_free(c);
}

static void test_auth_revocation_marker(void)
{
    struct eai_auth_cache *c = eai_auth_cache_new(60000, tmpdir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    char t[64];
    put(c, SEC, rec("tenant-a", NULL), 1000);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1001, t, sizeof t), 1);
    /* what `eaid keys revoke` does: the very next check misses */
    CU_ASSERT_EQUAL(eai_auth_cache_notify(tmpdir), 0);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1002, t, sizeof t), 0);
    /* other files of the data dir change nothing */
    put(c, SEC, rec("tenant-a", NULL), 1000);
    char p[400];
    snprintf(p, sizeof p, "%s/other", tmpdir);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1003, t, sizeof t), 1);
    /* a lookup that started before a revocation was seen is not cached */
    uint64_t gen = eai_auth_cache_gen(c);
    CU_ASSERT_EQUAL(eai_auth_cache_notify(tmpdir), 0);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1004, t, sizeof t), 0); /* sees the marker */
    json_t *r = rec("tenant-a", NULL);
    eai_auth_cache_put(c, gen, KID, SEC, r, 1005);
    json_decref(r);
    CU_ASSERT_EQUAL(eai_auth_cache_check(c, KID, SEC, 1006, t, sizeof t), 0);
    eai_auth_cache_free(c);
}

static void test_docs(void)
{
    struct eai_doc_cache *c = eai_doc_cache_new(4096);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    size_t n = 0;
    CU_ASSERT_PTR_NULL(eai_doc_cache_get(c, "ta", "sbx_1", &n));
    eai_doc_cache_put(c, "ta", "sbx_1", "{\"a\":1}\n", 8);
    const char *d = eai_doc_cache_get(c, "ta", "sbx_1", &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(n, 8);
    CU_ASSERT(memcmp(d, "{\"a\":1}\n", 8) == 0);
    /* never another tenant's, even with a key that concatenates alike */
    CU_ASSERT_PTR_NULL(eai_doc_cache_get(c, "tb", "sbx_1", &n));
    CU_ASSERT_PTR_NULL(eai_doc_cache_get(c, "t", "asbx_1", &n));
    /* the budget: the oldest goes first */
    char big[1500];
    memset(big, 'x', sizeof big);
    eai_doc_cache_put(c, "ta", "sbx_2", big, sizeof big);
    eai_doc_cache_put(c, "ta", "sbx_3", big, sizeof big);
    eai_doc_cache_put(c, "ta", "sbx_4", big, sizeof big);
    CU_ASSERT_PTR_NULL(eai_doc_cache_get(c, "ta", "sbx_1", &n));
    CU_ASSERT_PTR_NULL(eai_doc_cache_get(c, "ta", "sbx_2", &n));
    CU_ASSERT_PTR_NOT_NULL(eai_doc_cache_get(c, "ta", "sbx_4", &n));
    /* too big for the budget: not kept */
    char huge[5000];
    memset(huge, 'y', sizeof huge);
    eai_doc_cache_put(c, "ta", "sbx_5", huge, sizeof huge);
    CU_ASSERT_PTR_NULL(eai_doc_cache_get(c, "ta", "sbx_5", &n));
    /* a held document (an answer still sending it) outlives its eviction,
     * a clear and the cache itself, and is freed by its last release
     * (LeakSanitizer and ASan builds check both ends) */
    void *hold = NULL;
    d = eai_doc_cache_hold(c, "ta", "sbx_4", &n, &hold);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(hold);
    CU_ASSERT_EQUAL(n, sizeof big);
    eai_doc_cache_clear(c);
    CU_ASSERT_PTR_NULL(eai_doc_cache_get(c, "ta", "sbx_4", &n));
    CU_ASSERT_EQUAL(d[0], 'x');
    CU_ASSERT_EQUAL(d[sizeof big - 1], 'x');
    eai_doc_cache_release(d, sizeof big, hold);
    CU_ASSERT_PTR_NULL(eai_doc_cache_hold(c, "ta", "sbx_4", &n, &hold));
    eai_doc_cache_put(c, "ta", "sbx_6", "{}", 2);
    d = eai_doc_cache_hold(c, "ta", "sbx_6", &n, &hold);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    eai_doc_cache_free(c);
    CU_ASSERT(memcmp(d, "{}", 2) == 0);
    eai_doc_cache_release(d, 2, hold);
    /* keys of every length around the hash's eight-byte steps: each finds
     * its own document and no other's */
    c = eai_doc_cache_new(1 << 20);
    char tn[64], id[64], body[64];
    for (int tl = 1; tl <= 20; tl++)
        for (int il = 1; il <= 20; il++) {
            snprintf(tn, sizeof tn, "%.*s", tl, "8c03c877-a4fe-4633-94c6-5e09a5fb42db");
            snprintf(id, sizeof id, "%.*s", il, "sbx_9932e1d3-cc61-4e22-8b90-2b4519ed2f6b");
            int bl = snprintf(body, sizeof body, "%d/%d", tl, il);
            eai_doc_cache_put(c, tn, id, body, (size_t)bl);
        }
    int wrong = 0;
    for (int tl = 1; tl <= 20; tl++)
        for (int il = 1; il <= 20; il++) {
            snprintf(tn, sizeof tn, "%.*s", tl, "8c03c877-a4fe-4633-94c6-5e09a5fb42db");
            snprintf(id, sizeof id, "%.*s", il, "sbx_9932e1d3-cc61-4e22-8b90-2b4519ed2f6b");
            int bl = snprintf(body, sizeof body, "%d/%d", tl, il);
            d = eai_doc_cache_get(c, tn, id, &n);
            wrong += !d || n != (size_t)bl || memcmp(d, body, n) != 0;
            id[il - 1] ^= 1; /* the same length, one bit apart */
            wrong += eai_doc_cache_get(c, tn, id, &n) != NULL;
        }
    CU_ASSERT_EQUAL(wrong, 0);
    eai_doc_cache_free(c);
    c = eai_doc_cache_new(0); /* off */
    eai_doc_cache_put(c, "ta", "sbx_1", "{}", 2);
    CU_ASSERT_PTR_NULL(eai_doc_cache_get(c, "ta", "sbx_1", &n));
    eai_doc_cache_free(c);
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("caches", setup, teardown);
    if (!s || !CU_add_test(s, "auth cache: hit, miss, refresh, TTL, expiry", test_auth_hit_miss) ||
        !CU_add_test(s, "auth cache: revocation marker, generation guard", test_auth_revocation_marker) ||
        !CU_add_test(s, "document cache: tenants, budget", test_docs))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
