/* List cursors (core/exec/cursor.c): opaque, bound to one tenant and one
 * pepper, the sequence never readable (issue 16 item 10). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "exec/cursor.h"
#include "unit_main.h"

static const char *P1 = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
static const char *P2 = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";

static void test_round_trip(void)
{
    static const int64_t seqs[] = {1, 2, 41, 1000000, 9007199254740993LL, INT64_MAX};
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
        char c[EAI_CURSOR_LEN + 1];
        int64_t back = -1;
        CU_ASSERT_EQUAL_FATAL(eai_cursor_encode(P1, "ten_a", seqs[i], c), 0);
        CU_ASSERT_EQUAL(strlen(c), EAI_CURSOR_LEN);
        CU_ASSERT_EQUAL(strspn(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), EAI_CURSOR_LEN);
        CU_ASSERT_EQUAL(eai_cursor_decode(P1, "ten_a", c, &back), 0);
        CU_ASSERT_EQUAL(back, seqs[i]);
    }
}

static void test_opaque(void)
{
    /* consecutive sequences share nothing visible, and the old readable
     * form ("s<seq>" in base64url) is no cursor any more */
    char a[EAI_CURSOR_LEN + 1], b[EAI_CURSOR_LEN + 1];
    CU_ASSERT_EQUAL_FATAL(eai_cursor_encode(P1, "ten_a", 41, a), 0);
    CU_ASSERT_EQUAL_FATAL(eai_cursor_encode(P1, "ten_a", 42, b), 0);
    int same = 0;
    for (int i = 0; i < EAI_CURSOR_LEN; i++)
        same += a[i] == b[i];
    CU_ASSERT(same < 8);
    CU_ASSERT(strstr(a, "czQx") == NULL); /* base64 of "s41" */
    int64_t v;
    CU_ASSERT_EQUAL(eai_cursor_decode(P1, "ten_a", "czQx", &v), -1);
}

static void test_bound_to_tenant_and_pepper(void)
{
    char c[EAI_CURSOR_LEN + 1];
    int64_t v = -1;
    CU_ASSERT_EQUAL_FATAL(eai_cursor_encode(P1, "ten_a", 77, c), 0);
    CU_ASSERT_EQUAL(eai_cursor_decode(P1, "ten_b", c, &v), -1);
    CU_ASSERT_EQUAL(eai_cursor_decode(P2, "ten_a", c, &v), -1);
    /* one character changed: refused (the tenant tag no longer matches) */
    for (int i = 0; i < EAI_CURSOR_LEN - 1; i++) {
        char d[EAI_CURSOR_LEN + 1];
        memcpy(d, c, sizeof d);
        d[i] = d[i] == 'A' ? 'B' : 'A';
        CU_ASSERT_EQUAL(eai_cursor_decode(P1, "ten_a", d, &v), -1);
    }
    CU_ASSERT_EQUAL(eai_cursor_decode(P1, "ten_a", "", &v), -1);
    CU_ASSERT_EQUAL(eai_cursor_decode(P1, "ten_a", "!!!!!!!!!!!!!!!!!!!!!!", &v), -1);
    CU_ASSERT_EQUAL(eai_cursor_decode(P1, "ten_a", NULL, &v), -1);
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("cursor", NULL, NULL);
    if (!s || !CU_add_test(s, "round trip", test_round_trip) || !CU_add_test(s, "opaque", test_opaque) ||
        !CU_add_test(s, "bound to tenant and pepper", test_bound_to_tenant_and_pepper))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
