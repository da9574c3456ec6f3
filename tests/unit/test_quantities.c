/* Kubernetes quantities of core/base/util.c, parsed exactly. */
#include <stdint.h>
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

static int reg(void)
{
    CU_pSuite s = CU_add_suite("quantities", NULL, NULL);
    if (!s || !CU_add_test(s, "cpu valid", test_cpu_valid) || !CU_add_test(s, "cpu invalid", test_cpu_invalid) ||
        !CU_add_test(s, "bytes valid", test_bytes_valid) || !CU_add_test(s, "bytes invalid", test_bytes_invalid) ||
        !CU_add_test(s, "format round trip", test_format_roundtrip))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
