/* The node budget's accounting (core/exec/budget.c, docs/admission.md):
 * node and per-tenant bounds, the never-fits case, give back and the
 * listener, refusals' codes and details, config defaults. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit_main.h"
#include "base/errors.h"
#include "exec/budget.h"

#define MI (1LL << 20)

static void test_node_and_share(void)
{
    /* 1 GiB, 2000m; a tenant at most half: 512 MiB, 1000m */
    struct eai_budget *b = eai_budget_new(1024 * MI, 2000, 500);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(eai_budget_tenant_memory_cap(b, "a"), 512 * MI);
    CU_ASSERT_EQUAL(eai_budget_tenant_cpu_cap(b, NULL), 1000);
    CU_ASSERT_EQUAL(eai_budget_take(b, "a", 256 * MI, 500), EAI_BUDGET_FITS);
    CU_ASSERT_EQUAL(eai_budget_take(b, "a", 256 * MI, 500), EAI_BUDGET_FITS);
    /* a's share is full; b still gets in */
    CU_ASSERT_EQUAL(eai_budget_take(b, "a", 1 * MI, 1), EAI_BUDGET_TENANT_FULL);
    CU_ASSERT_EQUAL(eai_budget_take(b, "b", 256 * MI, 500), EAI_BUDGET_FITS);
    CU_ASSERT_EQUAL(eai_budget_take(b, "c", 256 * MI, 500), EAI_BUDGET_FITS);
    /* the node is full: d, holding nothing, is refused for the node */
    CU_ASSERT_EQUAL(eai_budget_take(b, "d", 1 * MI, 1), EAI_BUDGET_NODE_FULL);
    CU_ASSERT_EQUAL(eai_budget_memory_used(b), 1024 * MI);
    CU_ASSERT_EQUAL(eai_budget_cpu_used(b), 2000);
    CU_ASSERT_EQUAL(eai_budget_tenants(b), 3);
    /* check takes nothing */
    eai_budget_give(b, "c", 256 * MI, 500);
    CU_ASSERT_EQUAL(eai_budget_check(b, "d", 256 * MI, 500), EAI_BUDGET_FITS);
    CU_ASSERT_EQUAL(eai_budget_memory_used(b), 768 * MI);
    CU_ASSERT_EQUAL(eai_budget_tenants(b), 2);
    int64_t m, c;
    eai_budget_tenant_used(b, "a", &m, &c);
    CU_ASSERT_EQUAL(m, 512 * MI);
    CU_ASSERT_EQUAL(c, 1000);
    eai_budget_tenant_used(b, "zz", &m, &c);
    CU_ASSERT_EQUAL(m, 0);
    eai_budget_free(b);
}

static void test_cpu_bound_alone(void)
{
    /* memory plenty, CPU the bound */
    struct eai_budget *b = eai_budget_new(64LL << 30, 1000, 1000);
    CU_ASSERT_EQUAL(eai_budget_take(b, "a", MI, 600), EAI_BUDGET_FITS);
    CU_ASSERT_EQUAL(eai_budget_take(b, "b", MI, 600), EAI_BUDGET_NODE_FULL);
    CU_ASSERT_EQUAL(eai_budget_take(b, "b", MI, 400), EAI_BUDGET_FITS);
    eai_budget_free(b);
}

static void test_too_large(void)
{
    struct eai_budget *b = eai_budget_new(1024 * MI, 2000, 250);
    /* more than a tenant's whole share: never, even on an empty node */
    CU_ASSERT_EQUAL(eai_budget_take(b, "a", 257 * MI, 100), EAI_BUDGET_TOO_LARGE);
    CU_ASSERT_EQUAL(eai_budget_take(b, "a", MI, 501), EAI_BUDGET_TOO_LARGE);
    CU_ASSERT_EQUAL(eai_budget_memory_used(b), 0);
    CU_ASSERT_EQUAL(eai_budget_tenants(b), 0);
    eai_budget_free(b);
}

static int calls;
static void listener(void *arg)
{
    (void)arg;
    calls++;
}

static void test_give_and_listener(void)
{
    struct eai_budget *b = eai_budget_new(1024 * MI, 2000, 1000);
    eai_budget_set_listener(b, listener, NULL);
    calls = 0;
    CU_ASSERT_EQUAL(eai_budget_take(b, "a", 100 * MI, 100), EAI_BUDGET_FITS);
    CU_ASSERT_EQUAL(eai_budget_force(b, "a", 2048 * MI, 100), 0); /* a reattached run counts whatever the sum */
    CU_ASSERT_EQUAL(eai_budget_check(b, "b", 1, 1), EAI_BUDGET_NODE_FULL);
    CU_ASSERT_EQUAL(calls, 0);
    eai_budget_give(b, "a", 2048 * MI, 100);
    CU_ASSERT_EQUAL(calls, 1);
    eai_budget_give(b, "a", 100 * MI, 100);
    CU_ASSERT_EQUAL(calls, 2);
    CU_ASSERT_EQUAL(eai_budget_memory_used(b), 0);
    CU_ASSERT_EQUAL(eai_budget_cpu_used(b), 0);
    CU_ASSERT_EQUAL(eai_budget_tenants(b), 0);
    /* giving what one does not hold changes nothing (logged) */
    eai_budget_give(b, "nobody", 5, 5);
    CU_ASSERT_EQUAL(eai_budget_memory_used(b), 0);
    /* never below zero: a give larger than the hold is clamped */
    CU_ASSERT_EQUAL(eai_budget_take(b, "a", 10, 10), EAI_BUDGET_FITS);
    eai_budget_give(b, "a", 100, 100);
    CU_ASSERT_EQUAL(eai_budget_memory_used(b), 0);
    CU_ASSERT_EQUAL(eai_budget_cpu_used(b), 0);
    /* a tenant id of any length is one holder */
    char longid[200];
    memset(longid, 'x', sizeof longid - 1);
    longid[sizeof longid - 1] = '\0';
    CU_ASSERT_EQUAL(eai_budget_take(b, longid, 10, 10), EAI_BUDGET_FITS);
    CU_ASSERT_EQUAL(eai_budget_take(b, longid, 10, 10), EAI_BUDGET_FITS);
    CU_ASSERT_EQUAL(eai_budget_tenants(b), 1);
    eai_budget_give(b, longid, 10, 10);
    eai_budget_give(b, longid, 10, 10);
    CU_ASSERT_EQUAL(eai_budget_tenants(b), 0);
    CU_ASSERT_EQUAL(eai_budget_memory_used(b), 0);
    /* NULL budget: everything fits, nothing is held */
    CU_ASSERT_EQUAL(eai_budget_take(NULL, "a", 1LL << 50, 1 << 30), EAI_BUDGET_FITS);
    eai_budget_give(NULL, "a", 1, 1);
    eai_budget_free(b);
}

static void test_counts_backend(void)
{
    CU_ASSERT_EQUAL(eai_budget_counts_backend("gvisor"), 1);
    CU_ASSERT_EQUAL(eai_budget_counts_backend("kata"), 1);
    CU_ASSERT_EQUAL(eai_budget_counts_backend("k8s"), 0); /* pods run on the cluster's nodes */
    CU_ASSERT_EQUAL(eai_budget_counts_backend(NULL), 0);
    struct eai_budget *b = eai_budget_new(1024 * MI, 2000, 500);
    CU_ASSERT_EQUAL(eai_budget_exceeds_share(b, "a", 512 * MI, 1000), 0);
    CU_ASSERT_EQUAL(eai_budget_exceeds_share(b, "a", 512 * MI + 1, 1000), 1);
    CU_ASSERT_EQUAL(eai_budget_exceeds_share(b, "a", 1, 1001), 1);
    CU_ASSERT_EQUAL(eai_budget_exceeds_share(NULL, "a", 1LL << 50, 1), 0);
    eai_budget_free(b);
}

static void test_own_share(void)
{
    /* default a quarter; "big" may hold 3/4, "tiny" a tenth */
    struct eai_budget *b = eai_budget_new(1000 * MI, 4000, 250);
    CU_ASSERT_EQUAL(eai_budget_set_tenant_share(b, "big", 750), 0);
    CU_ASSERT_EQUAL(eai_budget_set_tenant_share(b, "tiny", 100), 0);
    CU_ASSERT_EQUAL(eai_budget_set_tenant_share(b, "bad", 0), -1);
    CU_ASSERT_EQUAL(eai_budget_set_tenant_share(b, "bad", 1001), -1);
    CU_ASSERT_EQUAL(eai_budget_tenant_memory_cap(b, "big"), 750 * MI);
    CU_ASSERT_EQUAL(eai_budget_tenant_cpu_cap(b, "tiny"), 400);
    CU_ASSERT_EQUAL(eai_budget_tenant_cpu_cap(b, "other"), 1000);
    CU_ASSERT_EQUAL(eai_budget_take(b, "big", 600 * MI, 100), EAI_BUDGET_FITS);   /* above the default share */
    CU_ASSERT_EQUAL(eai_budget_take(b, "tiny", 101 * MI, 100), EAI_BUDGET_TOO_LARGE);
    CU_ASSERT_EQUAL(eai_budget_exceeds_share(b, "tiny", 101 * MI, 1), 1);
    CU_ASSERT_EQUAL(eai_budget_exceeds_share(b, "big", 700 * MI, 1), 0);
    CU_ASSERT_EQUAL(eai_budget_take(b, "other", 250 * MI, 100), EAI_BUDGET_FITS);
    /* the node: 850 of 1000 MiB held, then 950 */
    CU_ASSERT_EQUAL(eai_budget_take(b, "big", 151 * MI, 100), EAI_BUDGET_TENANT_FULL); /* 751 > 750 */
    CU_ASSERT_EQUAL(eai_budget_take(b, "tiny", 100 * MI, 100), EAI_BUDGET_FITS);
    CU_ASSERT_EQUAL(eai_budget_take(b, "x", 100 * MI, 100), EAI_BUDGET_NODE_FULL);
    eai_budget_free(b);
}

static void test_bad_new(void)
{
    CU_ASSERT_PTR_NULL(eai_budget_new(0, 1000, 500));
    CU_ASSERT_PTR_NULL(eai_budget_new(MI, 0, 500));
    CU_ASSERT_PTR_NULL(eai_budget_new(MI, 1000, 0));
    CU_ASSERT_PTR_NULL(eai_budget_new(MI, 1000, 1001));
}

static void test_refusals(void)
{
    struct eai_budget *b = eai_budget_new(1024 * MI, 2000, 500);
    CU_ASSERT_EQUAL(eai_budget_take(b, "a", 512 * MI, 100), EAI_BUDGET_FITS);
    struct eai_error *e = eai_budget_refusal(b, EAI_BUDGET_TENANT_FULL, "a", 256 * MI, 500);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    CU_ASSERT_EQUAL(e->code, EAI_E_TENANT_SHARE_EXHAUSTED);
    CU_ASSERT_EQUAL(eai_code_http_status(e->code), 429);
    CU_ASSERT_PTR_NOT_NULL(strstr(e->message, "(0 MiB and 900m of it free"));
    CU_ASSERT_EQUAL(json_array_size(e->details), 1);
    eai_error_free(e);
    e = eai_budget_refusal(b, EAI_BUDGET_NODE_FULL, "b", 256 * MI, 500);
    CU_ASSERT_EQUAL(e->code, EAI_E_NODE_BUDGET_EXHAUSTED);
    CU_ASSERT_EQUAL(eai_code_http_status(e->code), 429);
    eai_error_free(e);
    e = eai_budget_refusal(b, EAI_BUDGET_TOO_LARGE, "b", 4096 * MI, 500);
    CU_ASSERT_EQUAL(e->code, EAI_E_BUDGET_EXCEEDS_SHARE);
    CU_ASSERT_EQUAL(eai_code_http_status(e->code), 422);
    eai_error_free(e);
    /* both languages */
    CU_ASSERT_STRING_NOT_EQUAL(eai_code_message(EAI_E_NODE_BUDGET_EXHAUSTED, "fr"),
                               eai_code_message(EAI_E_NODE_BUDGET_EXHAUSTED, "en"));
    eai_budget_free(b);
}

static void test_host_defaults(void)
{
    int64_t m = 0, c = 0;
    eai_budget_host_defaults(&m, &c);
    CU_ASSERT(m > 0);
    CU_ASSERT(c >= 1000 * EAI_BUDGET_CPU_OVERCOMMIT);
    CU_ASSERT_EQUAL(c % EAI_BUDGET_CPU_OVERCOMMIT, 0);
    CU_ASSERT_EQUAL(c % 1, 0);
}

static int register_suites(void)
{
    CU_pSuite s = CU_add_suite("budget", NULL, NULL);
    if (!s)
        return -1;
    CU_add_test(s, "node bound and tenant share", test_node_and_share);
    CU_add_test(s, "cpu alone bounds", test_cpu_bound_alone);
    CU_add_test(s, "larger than a share never fits", test_too_large);
    CU_add_test(s, "give back and the listener", test_give_and_listener);
    CU_add_test(s, "bad totals", test_bad_new);
    CU_add_test(s, "a tenant's own share (node.tenant_shares)", test_own_share);
    CU_add_test(s, "which backends count, never-fits on any thread", test_counts_backend);
    CU_add_test(s, "refusals", test_refusals);
    CU_add_test(s, "host defaults", test_host_defaults);
    return 0;
}

EAI_UNIT_MAIN(register_suites)
