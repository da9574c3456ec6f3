/* The in-process FinOps ledger: GET and POST /v1/finops/usage
 * (docs/api.md "FinOps ledger"); storage on a worker (routes_job.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <eai/storage.h>

#include "app.h"
#include "config/config.h"
#include "base/errors.h"
#include "schema/jsonschema.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "http/routes.h"
#include "http/routes_job.h"
#include "http/request.h"
#include "base/util.h"


/* ------------------------------------------------------------ finops ledger */

static int id_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || strchr("._:-", s[i])))
            return 0;
    return 1;
}

static void usage_get_work(struct misc_job *j)
{
    j->rc = j->app->store->ledger_query(j->app->storage.self, j->tenant, j->in, &j->out, &j->err);
}

static void add_num(json_t *o, const char *k, double v)
{
    json_object_set_new(o, k, json_real(json_number_value(json_object_get(o, k)) + v));
}

static void usage_get_done(struct misc_job *j)
{
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
        return;
    }
    json_t *by = json_object();
    json_t *all = json_pack("{s:f, s:f, s:f, s:i}", "cpu_seconds", 0.0, "memory_mb_seconds", 0.0,
                            "duration_s", 0.0, "executions", 0);
    size_t i;
    json_t *ev;
    json_array_foreach(j->out, i, ev) {
        const char *prof = json_string_value(json_object_get(ev, "profile"));
        if (!prof)
            prof = "";
        json_t *t = json_object_get(by, prof);
        if (!t) {
            t = json_pack("{s:f, s:f, s:f, s:i}", "cpu_seconds", 0.0, "memory_mb_seconds", 0.0,
                          "duration_s", 0.0, "executions", 0);
            json_object_set_new(by, prof, t);
        }
        const char *ks[] = {"cpu_seconds", "memory_mb_seconds", "duration_s"};
        for (int k = 0; k < 3; k++) {
            double v = json_number_value(json_object_get(ev, ks[k]));
            add_num(t, ks[k], v);
            add_num(all, ks[k], v);
        }
        json_object_set_new(t, "executions", json_integer(json_integer_value(json_object_get(t, "executions")) + 1));
        json_object_set_new(all, "executions", json_integer(json_integer_value(json_object_get(all, "executions")) + 1));
    }
    json_object_set_new(all, "by_profile", by);
    eai_reply_json(j->r, 200, json_pack("{s:O, s:o}", "usage", j->out, "totals", all));
}

void eai_misc_usage_get(struct eai_app *app, struct eai_req *r)
{
    json_t *filter = json_object();
    json_t *details = json_array();
    const char *keys[] = {"project_id", "run_id", "agent_id"};
    for (int i = 0; i < 3; i++) {
        const char *v = eai_req_query(r, keys[i]);
        if (v && *v)
            json_object_set_new(filter, keys[i], json_string(v));
    }
    const char *times[] = {"from", "to"};
    for (int i = 0; i < 2; i++) {
        const char *v = eai_req_query(r, times[i]);
        int64_t ms;
        if (!v || !*v)
            continue;
        if (eai_time_parse_rfc3339(v, &ms) < 0) {
            char path[32];
            snprintf(path, sizeof(path), "/query/%s", times[i]);
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", path, "message",
                                                     "expected an RFC 3339 time such as 2026-11-29T10:00:00Z"));
            continue;
        }
        json_object_set_new(filter, times[i], json_string(v));
    }
    const char *lim = eai_req_query(r, "limit");
    long limit = 1000;
    if (lim) {
        char *end;
        limit = strtol(lim, &end, 10);
        if (*lim == '\0' || *end || limit < 1 || limit > 1000)
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/query/limit", "message",
                                                     "expected an integer from 1 to 1000"));
    }
    json_object_set_new(filter, "limit", json_integer(limit));
    if (json_array_size(details) > 0) {
        json_decref(filter);
        eai_reply_error(r, EAI_E_VALIDATION_FAILED, details);
        return;
    }
    json_decref(details);
    struct misc_job *j = eai_misc_job_new(app, r, usage_get_work, usage_get_done);
    if (!j) {
        json_decref(filter);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->in = filter;
    eai_misc_job_submit(j);
}

static void usage_post_work(struct misc_job *j)
{
    j->rc = j->app->store->ledger_insert(j->app->storage.self, j->tenant, j->in, &j->err);
}

static void usage_post_done(struct misc_job *j)
{
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
        return;
    }
    int created = j->rc == EAI_STORE_CREATED;
    eai_reply_json(j->r, created ? 201 : 200, json_pack("{s:s, s:s}", "id",
                   json_string_value(json_object_get(j->in, "id")), "result", created ? "created" : "duplicate"));
}

/* Usage event fields accepted by POST /v1/finops/usage (the shape core
 * itself produces for the outbox). */
void eai_misc_usage_post(struct eai_app *app, struct eai_req *r)
{
    static const char *const strs[] = {"tenant_id", "project_id", "agent_id", "run_id", "profile", "backend",
                                       "execution_id", "trace_id", NULL};
    static const char *const nums[] = {"cpu_seconds", "memory_mb_seconds", "duration_s", NULL};
    static const char *const times[] = {"started_at", "finished_at", "created_at", NULL};
    json_t *ev = eai_req_body_json(r, 0);
    if (!ev)
        return;
    json_t *details = json_array();
    if (!json_is_object(ev)) {
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "", "message", "expected an object"));
        goto invalid;
    }
    const char *k;
    json_t *v;
    json_object_foreach(ev, k, v) {
        char path[300];
        snprintf(path, sizeof(path), "/%s", k);
        int known = strcmp(k, "id") == 0;
        for (int i = 0; strs[i]; i++)
            if (strcmp(k, strs[i]) == 0) {
                known = 1;
                if (!json_is_null(v) && (!json_is_string(v) || strlen(json_string_value(v)) > 256))
                    json_array_append_new(details, json_pack("{s:s, s:s}", "path", path, "message",
                                                             "expected a string of at most 256 characters or null"));
            }
        for (int i = 0; nums[i]; i++)
            if (strcmp(k, nums[i]) == 0) {
                known = 1;
                if (!json_is_number(v) || json_number_value(v) < 0 || !isfinite(json_number_value(v)))
                    json_array_append_new(details, json_pack("{s:s, s:s}", "path", path, "message",
                                                             "expected a number >= 0"));
            }
        for (int i = 0; times[i]; i++)
            if (strcmp(k, times[i]) == 0) {
                known = 1;
                int64_t ms;
                if (!json_is_null(v) && (!json_is_string(v) || eai_time_parse_rfc3339(json_string_value(v), &ms) < 0))
                    json_array_append_new(details, json_pack("{s:s, s:s}", "path", path, "message",
                                                             "expected an RFC 3339 time or null"));
            }
        if (!known)
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", path, "message", "unknown field"));
    }
    for (int i = 0; nums[i]; i++)
        if (!json_object_get(ev, nums[i])) {
            char path[64];
            snprintf(path, sizeof(path), "/%s", nums[i]);
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", path, "message", "required"));
        }
    json_t *id = json_object_get(ev, "id");
    if (id && !id_ok(json_string_value(id)))
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/id", "message",
                                                 "expected 1..128 characters of [A-Za-z0-9._:-]"));
    if (json_array_size(details) > 0)
        goto invalid;
    json_decref(details);
    if (!id) {
        const char *idem = eai_req_header(r, "Idempotency-Key");
        char uuid[37];
        if (idem && id_ok(idem)) {
            json_object_set_new(ev, "id", json_string(idem));
        } else {
            eai_uuid_v4(uuid);
            json_object_set_new(ev, "id", json_string(uuid));
        }
    }
    /* the ledger is the authenticated tenant's: a tenant_id in the event
     * (the producing deployment's) is kept as source_tenant_id */
    json_t *tid = json_object_get(ev, "tenant_id");
    if (json_is_string(tid) && strcmp(json_string_value(tid), eai_req_tenant(r)) != 0)
        json_object_set(ev, "source_tenant_id", tid);
    json_object_set_new(ev, "tenant_id", json_string(eai_req_tenant(r)));
    struct misc_job *j = eai_misc_job_new(app, r, usage_post_work, usage_post_done);
    if (!j) {
        json_decref(ev);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->in = ev;
    eai_misc_job_submit(j);
    return;
invalid:
    json_decref(ev);
    eai_reply_error(r, EAI_E_VALIDATION_FAILED, details);
}

