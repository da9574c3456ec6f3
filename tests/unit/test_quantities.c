/* Kubernetes quantities of core/base/util.c, parsed exactly; its hex and
 * random ids. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit_main.h"
#include "base/util.h"

static void test_cpu_valid(void)
{
    struct { const char *s; int64_t want; } ok[] = {
        {"500m", 500}, {"1", 1000}, {"2", 2000}, {"1.5", 1500}, {"0.25", 250}, {"0.001", 1},
        {"1m", 1}, {"0", 0}, {"16", 16000}, {"1.125", 1125},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t v = -1;
        CU_ASSERT_EQUAL_FATAL(eai_parse_cpu_millis(ok[i].s, &v), 0);
        CU_ASSERT_EQUAL(v, ok[i].want);
    }
}

static void test_cpu_invalid(void)
{
    const char *bad[] = {"", "m", "1.5m", "0.0001", "-1", "1 ", " 1", "1e3", "abc", "1..5", ".5", "5.", "1Mi",
                         "99999999999999999999", NULL};
    for (int i = 0; bad[i]; i++) {
        int64_t v = 42;
        CU_ASSERT_EQUAL(eai_parse_cpu_millis(bad[i], &v), -1);
    }
    int64_t v;
    CU_ASSERT_EQUAL(eai_parse_cpu_millis(NULL, &v), -1);
}

static void test_bytes_valid(void)
{
    struct { const char *s; int64_t want; } ok[] = {
        {"256Mi", 256LL << 20}, {"1Gi", 1LL << 30}, {"1G", 1000000000LL}, {"1.5Gi", 3LL << 29},
        {"1048576", 1048576}, {"64Ki", 65536}, {"1k", 1000}, {"2M", 2000000}, {"1Ti", 1LL << 40},
        {"0.5Ki", 512}, {"0", 0},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t v = -1;
        CU_ASSERT_EQUAL_FATAL(eai_parse_bytes(ok[i].s, &v), 0);
        CU_ASSERT_EQUAL(v, ok[i].want);
    }
}

static void test_bytes_invalid(void)
{
    /* 0.1 byte, a fraction of a byte, junk suffixes, negative, overflow */
    const char *bad[] = {"", "Mi", "1.1", "0.3Ki", "256MiB", "256mi", "-1", "1 Gi", "1e9", "1Pi",
                         "99999999999Ti", "1.", NULL};
    for (int i = 0; bad[i]; i++) {
        int64_t v = 42;
        CU_ASSERT_EQUAL(eai_parse_bytes(bad[i], &v), -1);
    }
}

static void test_format_roundtrip(void)
{
    char buf[32];
    eai_format_bytes(256LL << 20, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "256Mi");
    eai_format_bytes(1LL << 30, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "1Gi");
    eai_format_bytes(1000, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "1000");
    eai_format_cpu(500, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "500m");
    eai_format_cpu(2000, buf, sizeof(buf));
    CU_ASSERT_STRING_EQUAL(buf, "2");
    /* what is formatted parses back to the same value */
    int64_t vals[] = {1, 512, 1536, 3LL << 29, 1LL << 40, 123456789};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        int64_t back = -1;
        eai_format_bytes(vals[i], buf, sizeof(buf));
        CU_ASSERT_EQUAL(eai_parse_bytes(buf, &back), 0);
        CU_ASSERT_EQUAL(back, vals[i]);
        eai_format_cpu(vals[i], buf, sizeof(buf));
        CU_ASSERT_EQUAL(eai_parse_cpu_millis(buf, &back), 0);
        CU_ASSERT_EQUAL(back, vals[i]);
    }
}

/* eai_hex_encode works sixteen, eight or four bytes at a time: every byte
 * value at every offset of every length up to 40 gives what printf gives,
 * and nothing is written past the NUL. */
static void test_hex_encode(void)
{
    unsigned char b[40];
    char out[82], want[82];
    for (size_t len = 0; len <= sizeof b; len++)
        for (size_t at = 0; at < (len ? len : 1); at++)
            for (unsigned v = 0; v < 256; v++) {
                for (size_t i = 0; i < len; i++)
                    b[i] = (unsigned char)(i * 37 + 11);
                if (len)
                    b[at] = (unsigned char)v;
                for (size_t i = 0; i < len; i++)
                    snprintf(want + 2 * i, 3, "%02x", b[i]);
                want[2 * len] = '\0';
                memset(out, '#', sizeof out);
                eai_hex_encode(b, len, out);
                if (strcmp(out, want) != 0 || (2 * len + 1 < sizeof out && out[2 * len + 1] != '#')) {
                    fprintf(stderr, "hex of %zu bytes, 0x%02x at %zu: %s\n", len, v, at, out);
                    CU_FAIL("hex");
                    return;
                }
            }
}

static int is_lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* uuid v4 and random hex: their form, and no two alike */
static void test_random_ids(void)
{
    char u[37], v[37];
    eai_uuid_v4(u);
    eai_uuid_v4(v);
    CU_ASSERT_STRING_NOT_EQUAL(u, v);
    for (int k = 0; k < 200; k++) {
        eai_uuid_v4(u);
        CU_ASSERT_EQUAL(strlen(u), 36);
        CU_ASSERT(u[8] == '-' && u[13] == '-' && u[18] == '-' && u[23] == '-');
        CU_ASSERT(is_lower_hex(u, 8) && is_lower_hex(u + 9, 4) && is_lower_hex(u + 14, 4) &&
                  is_lower_hex(u + 19, 4) && is_lower_hex(u + 24, 12));
        CU_ASSERT_EQUAL(u[14], '4');
        CU_ASSERT(u[19] == '8' || u[19] == '9' || u[19] == 'a' || u[19] == 'b');
    }
    char h[129], g[129];
    for (size_t n = 1; n <= 64; n++) {
        memset(h, '#', sizeof h);
        CU_ASSERT_EQUAL(eai_random_hex(h, n), 0);
        CU_ASSERT_EQUAL(strlen(h), 2 * n);
        CU_ASSERT(is_lower_hex(h, 2 * n));
    }
    CU_ASSERT_EQUAL(eai_random_hex(h, 16), 0);
    CU_ASSERT_EQUAL(eai_random_hex(g, 16), 0);
    CU_ASSERT_STRING_NOT_EQUAL(h, g);
    CU_ASSERT_EQUAL(eai_random_hex(h, 65), -1);
}

/* eai_hex_lower_ok checks eight bytes a word: every byte value at every
 * place of every length up to 40 is refused unless it is 0-9 or a-f. */
static void test_hex_lower_ok(void)
{
    char s[40];
    CU_ASSERT(eai_hex_lower_ok("", 0));
    for (size_t len = 1; len <= sizeof s; len++)
        for (size_t at = 0; at < len; at++)
            for (unsigned v = 0; v < 256; v++) {
                for (size_t i = 0; i < len; i++)
                    s[i] = "0123456789abcdef"[(i * 7 + 3) % 16];
                s[at] = (char)v;
                int want = (v >= '0' && v <= '9') || (v >= 'a' && v <= 'f');
                if (eai_hex_lower_ok(s, len) != want) {
                    fprintf(stderr, "hex check of %zu bytes, 0x%02x at %zu: %d\n", len, v, at, !want);
                    CU_FAIL("hex check");
                    return;
                }
            }
}

/* eai_zalloc zeroes what malloc hands back: a chunk just freed dirty (the
 * thread cache gives the same one back) comes back all zero. */
static void test_zalloc(void)
{
    for (size_t n = 1; n <= 1024; n = n * 3 + 1) {
        unsigned char *d = malloc(n);
        CU_ASSERT_PTR_NOT_NULL_FATAL(d);
        memset(d, 0xa5, n);
        free(d);
        unsigned char *z = eai_zalloc(n);
        CU_ASSERT_PTR_NOT_NULL_FATAL(z);
        size_t nz = 0;
        for (size_t i = 0; i < n; i++)
            nz += z[i] != 0;
        CU_ASSERT_EQUAL(nz, 0);
        free(z);
    }
}

/* RFC 3339 times (lib/eaibase, one parser for core and the postgres
 * plugin): what the grammar allows, digits only where it has them. */
static void test_rfc3339(void)
{
    int64_t ms = 0;
    CU_ASSERT(eai_time_parse_rfc3339("2026-02-01T00:00:00.000Z", &ms) == 0 && ms == 1769904000000LL);
    CU_ASSERT(eai_time_parse_rfc3339("2026-02-01t01:00:00.5+01:00", &ms) == 0 && ms == 1769904000500LL);
    CU_ASSERT(eai_time_parse_rfc3339("2026-02-01T00:00:00-00:30", &ms) == 0 && ms == 1769905800000LL);
    static const char *const bad[] = {"2026-02-01 00:00:00Z", "2026- 2-01T00:00:00Z", "2026-+2-01T00:00:00Z",
                                      "2026-02-01T00:00:00", "2026-02-01T00:00:00+25:00", "2026-02-01T00:00:00.Z",
                                      "2026-13-01T00:00:00Z", "2026-02-01T00:00:00Zx", "", "2026-02-01"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ms = 42;
        CU_ASSERT_EQUAL(eai_time_parse_rfc3339(bad[i], &ms), -1);
        CU_ASSERT_EQUAL(ms, 42);
    }
    char out[32];
    eai_time_rfc3339(-1, out);
    CU_ASSERT_STRING_EQUAL(out, "1969-12-31T23:59:59.999Z");
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("quantities", NULL, NULL);
    if (!s || !CU_add_test(s, "cpu valid", test_cpu_valid) || !CU_add_test(s, "cpu invalid", test_cpu_invalid) ||
        !CU_add_test(s, "bytes valid", test_bytes_valid) || !CU_add_test(s, "bytes invalid", test_bytes_invalid) ||
        !CU_add_test(s, "format round trip", test_format_roundtrip) || !CU_add_test(s, "hex", test_hex_encode) ||
        !CU_add_test(s, "random ids", test_random_ids) || !CU_add_test(s, "hex check", test_hex_lower_ok) ||
        !CU_add_test(s, "zeroed allocation", test_zalloc) || !CU_add_test(s, "RFC 3339 times", test_rfc3339))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
