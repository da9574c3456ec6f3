/* core/base/dynlib.h: a library opened at first use, every name resolved or
 * none, and a failure that says why (and stays a failure). */
#include <string.h>

#include <CUnit/CUnit.h>

#include "base/dynlib.h"
#include "unit_main.h"

#define LIBC_FNS(X) X(strlen) X(strchr)
EAI_DYNLIB_TABLE(lc, "libc.so.6", LIBC_FNS);

#define MISSING_FNS(X) X(strlen)
EAI_DYNLIB_TABLE(nolib, "libeai-no-such-library.so.1", MISSING_FNS);

/* a real library without one of the names: resolved all or nothing */
int eai_dynlib_test_absent(void);
#define ABSENT_FNS(X) X(strlen) X(eai_dynlib_test_absent)
EAI_DYNLIB_TABLE(half, "libc.so.6", ABSENT_FNS);

static void test_open(void)
{
    CU_ASSERT_EQUAL_FATAL(eai_dynlib_open(&lc_lib), 0);
    CU_ASSERT_EQUAL(lc.strlen("four"), 4);
    CU_ASSERT_STRING_EQUAL(lc.strchr("a:b", ':'), ":b");
    CU_ASSERT_EQUAL(eai_dynlib_open(&lc_lib), 0); /* once */
}

static void test_missing(void)
{
    CU_ASSERT_EQUAL(eai_dynlib_open(&nolib_lib), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(nolib_lib.err, "libeai-no-such-library.so.1"));
    CU_ASSERT_PTR_NULL(nolib.strlen);
    CU_ASSERT_EQUAL(eai_dynlib_open(&nolib_lib), -1); /* not retried, still refused */

    CU_ASSERT_EQUAL(eai_dynlib_open(&half_lib), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(half_lib.err, "no symbol eai_dynlib_test_absent"));
    CU_ASSERT_PTR_NULL(half.strlen); /* what resolved is dropped */
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("dynlib", NULL, NULL);
    if (!s || !CU_add_test(s, "open at first use", test_open) || !CU_add_test(s, "missing library or name", test_missing))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
