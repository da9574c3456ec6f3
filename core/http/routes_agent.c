/*
 * The agent view (docs/api.md "Runs and agents"): what a platform reads to
 * see an agent's work, tenant-scoped and read only.
 *   GET /v1/runs/{run_id}          one run: its executions and this node's
 *                                  sessions in order, counts, usage, trace ids
 *   GET /v1/runs?agent_id=&project_id=&limit=&after=    runs by run_id
 *   GET /v1/agents?limit=&after=   agents by agent_id
 *   GET /v1/agents/{agent_id}      runs, usage per profile, last seen
 * Storage ops of ABI 1.3 (run_get, run_list, agent_list, agent_get) on a
 * worker (STYLE.md section 8); the sessions of a run come from this node's
 * registry on the loop thread when the storage answer is back.  A miss is
 * 404 with a "deny" audit event, like a read of a missing execution.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "http/routes.h"
#include "http/routes_job.h"
#include "http/req_audit.h"
#include "session/session.h"

#define AGENT_ID_MAX 128          /* project_id, agent_id, run_id: as in the execution contract */
#define AGENT_PAGE_DEFAULT 20
#define AGENT_PAGE_MAX 100        /* page size of GET /v1/runs and /v1/agents */
#define RUN_EXEC_DEFAULT 100      /* executions listed by GET /v1/runs/{run_id} */
#define RUN_EXEC_MAX 1000
#define RUN_SESSIONS_MAX 100      /* sessions listed by GET /v1/runs/{run_id} */

static void audit_miss(struct eai_app *app, struct eai_req *r, const char *action, const char *target)
{
    if (!eai_req_tenant(r))
        return;
    json_t *ev = eai_req_audit_event(r, action, target, "deny", "not_found");
    if (ev)
        eai_req_audit_async(app, eai_req_tenant(r), ev);
}

static void detail(json_t *details, const char *path, const char *message)
{
    json_array_append_new(details, json_pack("{s:s, s:s}", "path", path, "message", message));
}

/* ?name= as an integer lo..hi (def when absent), else a detail. */
static int query_int(struct eai_req *r, const char *name, int lo, int hi, int def, json_t *details)
{
    const char *v = eai_req_query(r, name);
    if (!v || !*v)
        return def;
    int ok = strlen(v) <= 4;
    for (const char *p = v; ok && *p; p++)
        ok = isdigit((unsigned char)*p);
    int n = ok ? atoi(v) : 0;
    if (n < lo || n > hi) {
        char path[64], m[96];
        snprintf(path, sizeof path, "/query/%s", name);
        snprintf(m, sizeof m, "must be an integer from %d to %d", lo, hi);
        detail(details, path, m);
    }
    return n;
}

/* ?name= as an id of at most AGENT_ID_MAX characters (NULL when absent or empty). */
static const char *query_id(struct eai_req *r, const char *name, const char *what, json_t *details)
{
    const char *v = eai_req_query(r, name);
    if (!v || !*v)
        return NULL;
    if (strlen(v) > AGENT_ID_MAX) {
        char path[64];
        snprintf(path, sizeof path, "/query/%s", name);
        detail(details, path, what);
    }
    return v;
}

static int refuse_details(struct eai_req *r, json_t *details)
{
    if (json_array_size(details) == 0) {
        json_decref(details);
        return 0;
    }
    eai_reply_error(r, EAI_E_VALIDATION_FAILED, details);
    return -1;
}

static int storage_has(struct eai_app *app, struct eai_req *r, int has)
{
    if (app->store && has)
        return 1;
    eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE,
                    json_pack("[{s:s, s:s}]", "path", "", "message",
                              "this storage backend has no agent view (ABI 1.3: upgrade its plugin)"));
    return 0;
}

/* A page: out holds up to limit + 1 rows; items = the first limit, next =
 * key of the last one when there were more. */
static void reply_page(struct misc_job *j, const char *key)
{
    size_t limit = (size_t)json_integer_value(json_object_get(j->in, "limit"));
    json_t *next = json_null();
    if (json_array_size(j->out) > limit && limit > 0) {
        const char *last = json_string_value(json_object_get(json_array_get(j->out, limit - 1), key));
        if (last)
            next = json_string(last);
        while (json_array_size(j->out) > limit)
            json_array_remove(j->out, limit);
    }
    eai_reply_json(j->r, 200, json_pack("{s:O, s:o}", "items", j->out, "next", next));
}

/* ------------------------------------------------------------ GET /v1/runs/{run_id} */

static void run_work(struct misc_job *j)
{
    int limit = (int)json_integer_value(json_object_get(j->in, "limit"));
    j->rc = j->app->store->run_get(j->app->storage.self, j->tenant, j->name, limit, &j->out, &j->err);
}

/* Trace ids of the listed executions, each once, in order. */
static json_t *trace_ids(const json_t *items)
{
    json_t *ids = json_array();
    size_t i, k;
    const json_t *e, *t;
    json_array_foreach(items, i, e) {
        const char *tid = json_string_value(json_object_get(e, "trace_id"));
        int seen = !tid;
        json_array_foreach(ids, k, t)
            seen |= tid && strcmp(json_string_value(t), tid) == 0;
        if (!seen)
            json_array_append_new(ids, json_string(tid));
    }
    return ids;
}

static void run_done(struct misc_job *j)
{
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
        return;
    }
    int more = 0;
    json_t *sessions = eai_sessions_of_run(j->app, j->tenant, j->name, RUN_SESSIONS_MAX, &more);
    if (!sessions) {
        eai_reply_error(j->r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (!j->out && json_array_size(sessions) == 0) {
        json_decref(sessions);
        audit_miss(j->app, j->r, "runs.read", j->name);
        eai_reply_not_found(j->r, EAI_MISSING_RUN);
        return;
    }
    json_t *run = j->out ? json_incref(j->out)
                         : json_pack("{s:s, s:n, s:n, s:[], s:b, s:i, s:{}, s:{s:f, s:f, s:f}, s:n, s:n}",
                                     "run_id", j->name, "agent_id", "project_id", "executions", "truncated", 0,
                                     "total", 0, "counts", "usage", "cpu_seconds", 0.0, "memory_mb_seconds", 0.0,
                                     "duration_s", 0.0, "first_at", "last_at");
    if (!run) {
        json_decref(sessions);
        eai_reply_error(j->r, EAI_E_INTERNAL, NULL);
        return;
    }
    /* first_at / last_at cover the sessions too */
    size_t i;
    const json_t *s;
    json_array_foreach(sessions, i, s) {
        const char *c = json_string_value(json_object_get(s, "created_at"));
        const char *l = json_string_value(json_object_get(s, "ended_at"));
        const char *f = json_string_value(json_object_get(run, "first_at"));
        const char *z = json_string_value(json_object_get(run, "last_at"));
        if (!l)
            l = json_string_value(json_object_get(s, "last_used_at"));
        if (!l)
            l = c;
        if (c && (!f || strcmp(c, f) < 0))
            json_object_set_new(run, "first_at", json_string(c));
        if (l && (!z || strcmp(l, z) > 0))
            json_object_set_new(run, "last_at", json_string(l));
    }
    json_object_set_new(run, "trace_ids", trace_ids(json_object_get(run, "executions")));
    json_object_set_new(run, "sessions", sessions);
    json_object_set_new(run, "sessions_truncated", json_boolean(more));
    json_object_set_new(run, "sessions_scope", json_string("node"));
    eai_reply_json(j->r, 200, run);
}

void eai_agent_route_run_get(struct eai_app *app, struct eai_req *r)
{
    const char *id = eai_req_param(r, "run_id");
    if (!id || !*id || strlen(id) > AGENT_ID_MAX) {
        audit_miss(app, r, "runs.read", "");
        eai_reply_not_found(r, EAI_MISSING_RUN);
        return;
    }
    json_t *details = json_array();
    int limit = query_int(r, "limit", 1, RUN_EXEC_MAX, RUN_EXEC_DEFAULT, details);
    if (refuse_details(r, details) < 0 || !storage_has(app, r, app->store && app->store->run_get))
        return;
    struct misc_job *j = eai_misc_job_new(app, r, run_work, run_done);
    if (!j || !(j->in = json_pack("{s:i}", "limit", limit))) {
        free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    snprintf(j->name, sizeof j->name, "%s", id);
    eai_misc_job_submit(j);
}

/* ------------------------------------------------------------ GET /v1/runs */

static void runs_work(struct misc_job *j)
{
    json_t *f = json_deep_copy(j->in);
    /* one more than asked: tells whether a next page exists */
    json_object_set_new(f, "limit", json_integer(json_integer_value(json_object_get(j->in, "limit")) + 1));
    j->rc = j->app->store->run_list(j->app->storage.self, j->tenant, f, &j->out, &j->err);
    json_decref(f);
}

static void runs_done(struct misc_job *j)
{
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
        return;
    }
    reply_page(j, "run_id");
}

void eai_agent_route_run_list(struct eai_app *app, struct eai_req *r)
{
    json_t *details = json_array();
    const char *msg = "must be at most 128 characters long";
    const char *agent = query_id(r, "agent_id", msg, details);
    const char *project = query_id(r, "project_id", msg, details);
    const char *after = query_id(r, "after", "is not a cursor from a previous page", details);
    int limit = query_int(r, "limit", 1, AGENT_PAGE_MAX, AGENT_PAGE_DEFAULT, details);
    if (refuse_details(r, details) < 0 || !storage_has(app, r, app->store && app->store->run_list))
        return;
    struct misc_job *j = eai_misc_job_new(app, r, runs_work, runs_done);
    if (!j || !(j->in = json_pack("{s:i, s:s?, s:s?, s:s?}", "limit", limit, "agent_id", agent, "project_id",
                                  project, "after", after))) {
        free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_misc_job_submit(j);
}

/* ------------------------------------------------------------ GET /v1/agents */

static void agents_work(struct misc_job *j)
{
    int limit = (int)json_integer_value(json_object_get(j->in, "limit"));
    const char *after = json_string_value(json_object_get(j->in, "after"));
    j->rc = j->app->store->agent_list(j->app->storage.self, j->tenant, after, limit + 1, &j->out, &j->err);
}

static void agents_done(struct misc_job *j)
{
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
        return;
    }
    reply_page(j, "agent_id");
}

void eai_agent_route_agent_list(struct eai_app *app, struct eai_req *r)
{
    json_t *details = json_array();
    const char *after = query_id(r, "after", "is not a cursor from a previous page", details);
    int limit = query_int(r, "limit", 1, AGENT_PAGE_MAX, AGENT_PAGE_DEFAULT, details);
    if (refuse_details(r, details) < 0 || !storage_has(app, r, app->store && app->store->agent_list))
        return;
    struct misc_job *j = eai_misc_job_new(app, r, agents_work, agents_done);
    if (!j || !(j->in = json_pack("{s:i, s:s?}", "limit", limit, "after", after))) {
        free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_misc_job_submit(j);
}

/* ------------------------------------------------------------ GET /v1/agents/{agent_id} */

static void agent_work(struct misc_job *j)
{
    j->rc = j->app->store->agent_get(j->app->storage.self, j->tenant, j->name, &j->out, &j->err);
}

static void agent_done(struct misc_job *j)
{
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
        return;
    }
    if (!j->out) {
        audit_miss(j->app, j->r, "agents.read", j->name);
        eai_reply_not_found(j->r, EAI_MISSING_AGENT);
        return;
    }
    eai_reply_json(j->r, 200, json_incref(j->out));
}

void eai_agent_route_agent_get(struct eai_app *app, struct eai_req *r)
{
    const char *id = eai_req_param(r, "agent_id");
    if (!id || !*id || strlen(id) > AGENT_ID_MAX) {
        audit_miss(app, r, "agents.read", "");
        eai_reply_not_found(r, EAI_MISSING_AGENT);
        return;
    }
    if (!storage_has(app, r, app->store && app->store->agent_get))
        return;
    struct misc_job *j = eai_misc_job_new(app, r, agent_work, agent_done);
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    snprintf(j->name, sizeof j->name, "%s", id);
    eai_misc_job_submit(j);
}
