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

#define LEDGER_TOTALS_PAGE 1000
#define LEDGER_TOTALS_MAX_PAGES 200   /* 200k events: past that the totals say partial */

/* The time an event is filed under, as the storage backends file it. */
static int64_t event_ms(const json_t *ev)
{
    static const char *const keys[] = {"finished_at", "time", "timestamp", "created_at"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int64_t t;
        const char *v = json_string_value(json_object_get(ev, keys[i]));
        if (v && eai_time_parse_rfc3339(v, &t) == 0)
            return t;
    }
    return 0;
}

static void add_num(json_t *o, const char *k, double v)
{
    json_object_set_new(o, k, json_real(json_number_value(json_object_get(o, k)) + v));
}

static json_t *sums_new(void)
{
    return json_pack("{s:f, s:f, s:f, s:i}", "cpu_seconds", 0.0, "memory_mb_seconds", 0.0, "duration_s", 0.0,
                     "executions", 0);
}

static void sums_add(json_t *all, json_t *by, const json_t *ev)
{
    const char *prof = json_string_value(json_object_get(ev, "profile"));
    if (!prof)
        prof = "";
    json_t *t = json_object_get(by, prof);
    if (!t) {
        t = sums_new();
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

/* The page asked for, then the totals of the whole period (every page of
 * the same filter, from its start), on the worker. */
static void usage_get_work(struct misc_job *j)
{
    const struct eai_storage_ops *ops = j->app->store;
    j->rc = ops->ledger_query(j->app->storage.self, j->tenant, j->in, &j->out, &j->err);
    if (j->rc < 0)
        return;
    json_t *f = json_deep_copy(j->in);
    json_t *all = sums_new(), *by = json_object();
    if (!f || !all || !by) {
        json_decref(f);
        json_decref(all);
        json_decref(by);
        return;
    }
    json_object_del(f, "after_ms");
    json_object_del(f, "after_id");
    json_object_set_new(f, "limit", json_integer(LEDGER_TOTALS_PAGE));
    int complete = 0;
    char last_id[160] = "";
    for (int page = 0; page < LEDGER_TOTALS_MAX_PAGES; page++) {
        json_t *rows = NULL;
        struct eai_error *e = NULL;
        if (ops->ledger_query(j->app->storage.self, j->tenant, f, &rows, &e) < 0) {
            eai_error_free(e);
            break;
        }
        size_t n = json_array_size(rows), i;
        json_t *ev;
        json_array_foreach(rows, i, ev)
            sums_add(all, by, ev);
        const json_t *lastev = n ? json_array_get(rows, n - 1) : NULL;
        const char *lid = json_string_value(json_object_get(lastev, "id"));
        if (n < LEDGER_TOTALS_PAGE || !lid || strcmp(lid, last_id) == 0) {
            /* the end (or a backend without the cursor: never loop) */
            complete = n < LEDGER_TOTALS_PAGE;
            json_decref(rows);
            break;
        }
        snprintf(last_id, sizeof last_id, "%s", lid);
        json_object_set_new(f, "after_ms", json_integer(event_ms(lastev)));
        json_object_set_new(f, "after_id", json_string(lid));
        json_decref(rows);
    }
    json_decref(f);
    json_object_set_new(all, "by_profile", by);
    json_object_set_new(all, "complete", json_boolean(complete));
    json_object_set_new(j->in, "_totals", all);
}

static void cursor_of(const json_t *ev, char *out, size_t len)
{
    char raw[200];
    snprintf(raw, sizeof raw, "%lld:%s", (long long)event_ms(ev),
             json_string_value(json_object_get(ev, "id")) ? json_string_value(json_object_get(ev, "id")) : "");
    char *b = eai_b64_encode(raw, strlen(raw));
    size_t o = 0;
    for (const char *p = b ? b : ""; *p && o + 1 < len; p++)  /* base64url, unpadded: safe in a query */
        if (*p != '=')
            out[o++] = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    out[o] = 0;
    free(b);
}

static void usage_get_done(struct misc_job *j)
{
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
        return;
    }
    json_t *totals = json_object_get(j->in, "_totals");
    size_t n = json_array_size(j->out);
    json_int_t limit = json_integer_value(json_object_get(j->in, "limit"));
    json_t *next = json_null();
    if (n > 0 && (json_int_t)n >= limit) {
        char cur[300];
        cursor_of(json_array_get(j->out, n - 1), cur, sizeof cur);
        next = json_string(cur);
    }
    eai_reply_json(j->r, 200, json_pack("{s:O, s:O?, s:o}", "usage", j->out, "totals", totals, "next", next));
}

/* "<ms>:<id>" in base64 (a previous answer's next). 0 or -1. */
static int cursor_parse(const char *c, json_t *filter)
{
    size_t n = 0, cl = c ? strlen(c) : 0;
    if (cl == 0 || cl >= 400)
        return -1;
    char std[408];
    size_t o = 0;
    for (size_t i = 0; i < cl; i++) {
        if (c[i] == '+' || c[i] == '/' || c[i] == '=')
            return -1;
        std[o++] = c[i] == '-' ? '+' : c[i] == '_' ? '/' : c[i];
    }
    while (o % 4)
        std[o++] = '=';
    std[o] = 0;
    unsigned char *raw = eai_b64_decode(std, &n);
    if (!raw)
        return -1;
    char buf[300];
    snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf ? n : sizeof buf - 1), (const char *)raw);
    free(raw);
    char *colon = strchr(buf, ':'), *end = NULL;
    if (!colon || colon == buf)
        return -1;
    *colon = 0;
    long long ms = strtoll(buf, &end, 10);
    if (*end || ms < 0 || !id_ok(colon + 1))
        return -1;
    json_object_set_new(filter, "after_ms", json_integer(ms));
    json_object_set_new(filter, "after_id", json_string(colon + 1));
    return 0;
}

void eai_misc_usage_get(struct eai_app *app, struct eai_req *r)
{
    if (app->finops.desc) {
        /* usage events go to the external FinOps service, not to this ledger */
        eai_reply_not_found(r, EAI_MISSING_LEDGER);
        return;
    }
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
    const char *after = eai_req_query(r, "after");
    if (after && *after && cursor_parse(after, filter) < 0)
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/query/after", "message",
                                                 "is not a cursor from a previous page"));
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

