/* The record schema check of the storage contract suite (record_schema_check.h). */
#include "record_schema_check.h"

#include <stdio.h>
#include <stdlib.h>

#include <CUnit/CUnit.h>

#include "base/errors.h"
#include "schema/jsonschema.h"

static const struct eai_storage_ops *g_real;
static struct eai_storage_ops g_checked;
static struct eai_schema *g_schema;
static long g_n, g_bad;

/* Validate one record (list items: the record without output and inputs). */
static void check_one(const char *op, const json_t *rec)
{
    json_t *errors = NULL;
    g_n++;
    if (eai_schema_validate(g_schema, rec, &errors) == 1) {
        json_decref(errors);
        return;
    }
    g_bad++;
    char *e = json_dumps(errors, JSON_COMPACT);
    char *r = json_dumps(rec, JSON_COMPACT);
    fprintf(stderr, "%s: record off the schema: %s\n  record: %.2000s\n", op, e ? e : "?", r ? r : "?");
    free(e);
    free(r);
    json_decref(errors);
    CU_FAIL("a record returned by the backend does not match execution-record.schema.json");
}

static void check_any(const char *op, const json_t *v)
{
    if (json_is_array(v)) {
        size_t i;
        const json_t *one;
        json_array_foreach(v, i, one)
            check_one(op, one);
    } else if (v) {
        check_one(op, v);
    }
}

/* ------------------------------------------------------------ wrapped ops */

static int w_exec_create(void *self, const char *tenant, const json_t *exec, const json_t *audit,
                         json_t **existing, struct eai_error **err)
{
    int rc = g_real->exec_create(self, tenant, exec, audit, existing, err);
    if (rc == EAI_STORE_EXISTS && existing)
        check_any("exec_create", *existing);
    return rc;
}

static int w_exec_get(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err)
{
    int rc = g_real->exec_get(self, tenant, id, out, err);
    if (rc >= 0)
        check_any("exec_get", *out);
    return rc;
}

static int w_exec_list(void *self, const char *tenant, const json_t *filter, json_t **out,
                       struct eai_error **err)
{
    int rc = g_real->exec_list(self, tenant, filter, out, err);
    if (rc >= 0)
        check_any("exec_list", *out);
    return rc;
}

static int w_exec_claim(void *self, const char *owner, int64_t lease_ms, int max, int per_tenant_max,
                        json_t **out, struct eai_error **err)
{
    int rc = g_real->exec_claim(self, owner, lease_ms, max, per_tenant_max, out, err);
    if (rc >= 0)
        check_any("exec_claim", *out);
    return rc;
}

static int w_exec_claim_excluding(void *self, const char *owner, int64_t lease_ms, int max,
                                  int per_tenant_max, const json_t *exclude, json_t **out,
                                  struct eai_error **err)
{
    int rc = g_real->exec_claim_excluding(self, owner, lease_ms, max, per_tenant_max, exclude, out, err);
    if (rc >= 0)
        check_any("exec_claim_excluding", *out);
    return rc;
}

static int w_exec_cancel(void *self, const char *tenant, const char *id, const json_t *patch,
                         const json_t *audit, json_t **out, struct eai_error **err)
{
    int rc = g_real->exec_cancel(self, tenant, id, patch, audit, out, err);
    if (rc >= 0)
        check_any("exec_cancel", *out);
    return rc;
}

static int w_exec_stale(void *self, int64_t now_ms, json_t **out, struct eai_error **err)
{
    int rc = g_real->exec_stale(self, now_ms, out, err);
    if (rc >= 0)
        check_any("exec_stale", *out);
    return rc;
}

const struct eai_storage_ops *record_schema_wrap(const struct eai_storage_ops *real)
{
    struct eai_error *err = NULL;
    g_schema = eai_schema_load_file(EAI_SOURCE_DIR "/contracts/v1/execution-record.schema.json", &err);
    if (!g_schema) {
        fprintf(stderr, "execution-record.schema.json: %s\n", err && err->message ? err->message : "?");
        eai_error_free(err);
        return NULL;
    }
    g_real = real;
    g_checked = *real;
    g_checked.exec_create = w_exec_create;
    g_checked.exec_get = w_exec_get;
    g_checked.exec_list = w_exec_list;
    g_checked.exec_claim = w_exec_claim;
    if (real->exec_claim_excluding)
        g_checked.exec_claim_excluding = w_exec_claim_excluding;
    g_checked.exec_cancel = w_exec_cancel;
    g_checked.exec_stale = w_exec_stale;
    return &g_checked;
}

long record_schema_checked(void)
{
    return g_n;
}

long record_schema_failed(void)
{
    return g_bad;
}

void record_schema_done(void)
{
    eai_schema_free(g_schema);
    g_schema = NULL;
}
