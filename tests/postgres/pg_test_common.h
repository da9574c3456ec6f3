/* Helpers shared by the PostgreSQL tests (header-only, static). */
#ifndef EAI_PG_TEST_COMMON_H
#define EAI_PG_TEST_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <libpq-fe.h>

#include <eai/storage.h>

#include "base/errors.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "base/util.h"

#define EAI_PG_TEST_SKIP 77

static const char *pgt_owner_url, *pgt_app_url, *pgt_super_url;
static const struct eai_plugin_descriptor *pgt_desc;
static const struct eai_storage_ops *pgt_ops;
static struct eai_host *pgt_host;
static char pgt_dir[64];

/* 0 when the cluster URLs are set; else prints the SKIP line. */
static int pgt_env(void)
{
    pgt_owner_url = getenv("EAI_TEST_PG_OWNER_URL");
    pgt_app_url = getenv("EAI_TEST_PG_APP_URL");
    pgt_super_url = getenv("EAI_TEST_PG_SUPER_URL");
    if (!pgt_owner_url || !*pgt_owner_url || !pgt_app_url || !*pgt_app_url) {
        printf("SKIP: no PostgreSQL (EAI_TEST_PG_OWNER_URL / EAI_TEST_PG_APP_URL unset;"
               " start one with tests/support/pg_cluster.sh)\n");
        return -1;
    }
    return 0;
}

static void pgt_report(const char *what, struct eai_error *e)
{
    if (e) {
        fprintf(stderr, "  %s: %s (%s)\n", what, e->message ? e->message : "?", eai_code_name(e->code));
        eai_error_free(e);
    }
}

static int pgt_load(void)
{
    snprintf(pgt_dir, sizeof pgt_dir, "/tmp/eai-pgtest-XXXXXX");
    if (!mkdtemp(pgt_dir))
        return -1;
    pgt_host = eai_host_new(NULL, pgt_dir);
    if (!pgt_host)
        return -1;
    struct eai_error *e = NULL;
    pgt_desc = eai_plugin_load(eai_plugin_dir(), EAI_KIND_STORAGE, "postgres", &e);
    if (!pgt_desc) {
        pgt_report("loading eai-storage-postgres.so", e);
        return -1;
    }
    pgt_ops = pgt_desc->ops;
    return 0;
}

static void pgt_unload(void)
{
    if (pgt_host)
        eai_host_free(pgt_host);
    if (pgt_dir[0])
        rmdir(pgt_dir);
}

/* A plugin instance on url (NULL + report on failure). */
static void *pgt_open(const char *url, int pool)
{
    json_t *cfg = json_pack("{s:s, s:i}", "url", url, "pool_size", pool);
    struct eai_error *e = NULL;
    void *st = pgt_desc->create(pgt_host, cfg, &e);
    json_decref(cfg);
    if (!st)
        pgt_report("create", e);
    return st;
}

/* A raw libpq connection (NULL on failure). */
static PGconn *pgt_connect(const char *url)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "  connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

/* Run sql; returns the status, prints errors; *out gets the result if asked. */
static ExecStatusType pgt_exec(PGconn *c, const char *sql, PGresult **out)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK && getenv("EAI_TEST_VERBOSE"))
        fprintf(stderr, "  [%s] %s", sql, PQresultErrorMessage(r));
    if (out)
        *out = r;
    else
        PQclear(r);
    return s;
}

/* First cell of a one-row query as a long (-1 on error). */
static long pgt_long(PGconn *c, const char *sql)
{
    PGresult *r = NULL;
    long v = -1;
    if (pgt_exec(c, sql, &r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        v = strtol(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

static int pgt_run_suite(CU_pSuite s)
{
    (void)s;
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failures = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return (failures == 0 && run > 0) ? 0 : 1;
}

#endif
