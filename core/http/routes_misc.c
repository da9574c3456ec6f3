/*
 * Routes besides executions: health, readiness, metrics, profiles,
 * contracts, manifests and the in-process FinOps ledger (docs/api.md).
 * Storage calls run on the worker pool; the handler is parked meanwhile.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <eai/storage.h>

#include "app_ext.h"
#include "config/config.h"
#include "base/errors.h"
#include "schema/jsonschema.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "http/routes.h"
#include "http/server.h"
#include "base/util.h"
#include "base/worker.h"

#define MISC_COMPONENT "http"

/* ------------------------------------------------------------ worker jobs */

struct misc_job;
typedef void (*misc_work_fn)(struct misc_job *j);
typedef void (*misc_done_fn)(struct misc_job *j);

struct misc_job {
    struct eai_app *app;
    struct eai_req *r;
    misc_work_fn work;
    misc_done_fn done;
    char tenant[64];
    char kind[96];
    char name[128];
    json_t *in;        /* owned */
    json_t *audit;     /* owned */
    json_t *out;       /* owned */
    struct eai_error *err;
    int rc;
};

static void job_work(void *arg)
{
    struct misc_job *j = arg;
    j->work(j);
}

static void job_done(void *arg)
{
    struct misc_job *j = arg;
    j->done(j);
    json_decref(j->in);
    json_decref(j->audit);
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static struct misc_job *job_new(struct eai_app *app, struct eai_req *r, misc_work_fn w, misc_done_fn d)
{
    struct misc_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->app = app;
    j->r = r;
    j->work = w;
    j->done = d;
    if (r && eai_req_tenant(r))
        snprintf(j->tenant, sizeof(j->tenant), "%s", eai_req_tenant(r));
    return j;
}

static void job_submit(struct misc_job *j)
{
    if (!j->app->store) {
        struct eai_req *r = j->r;
        j->r = NULL;
        j->done = NULL;
        json_decref(j->in);
        json_decref(j->audit);
        free(j);
        if (r)
            eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    if (eai_work_submit(job_work, job_done, j) < 0) {
        struct eai_req *r = j->r;
        json_decref(j->in);
        json_decref(j->audit);
        free(j);
        if (r)
            eai_reply_error(r, EAI_E_RATE_LIMITED, NULL);
    }
}

static enum eai_code storage_code(const struct eai_error *e)
{
    if (!e)
        return EAI_E_INTERNAL;
    switch (e->code) {
    case EAI_E_STORAGE_UNAVAILABLE:
    case EAI_E_NOT_FOUND:
    case EAI_E_VALIDATION_FAILED:
        return e->code;
    default:
        return EAI_E_INTERNAL;
    }
}

static void reply_storage_error(struct misc_job *j)
{
    eai_log_req(MISC_COMPONENT, EAI_LOG_ERROR, eai_req_id(j->r), "storage: %s",
                j->err && j->err->message ? j->err->message : "?");
    eai_reply_error(j->r, storage_code(j->err), NULL);
}

/* ------------------------------------------------------------ health */

void eai_misc_healthz(struct eai_app *app, struct eai_req *r)
{
    eai_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

static void ready_work(struct misc_job *j)
{
    j->rc = j->app->store->ping(j->app->storage.self, &j->err);
}

static void ready_done(struct misc_job *j)
{
    struct eai_app *app = j->app;
    json_t *checks = json_object();
    json_t *iso = json_object();
    int storage_ok = j->rc == 0;
    json_object_set_new(checks, "storage", json_pack("{s:b, s:s}", "ok", storage_ok, "backend",
                                                    app->cfg && app->cfg->storage_backend ? app->cfg->storage_backend : "?"));
    if (!storage_ok)
        json_object_set_new(json_object_get(checks, "storage"), "error",
                            json_string(j->err && j->err->code == EAI_E_FORBIDDEN
                                            ? "refused: unsafe database role (see the log)"
                                            : "unreachable"));
    int any_ready = 0;
    for (int i = 0; i < app->nisolation; i++) {
        const struct eai_isolation_ops *ops = app->isolation[i].desc->ops;
        struct eai_iso_probe p;
        memset(&p, 0, sizeof(p));
        p.size = sizeof(p);
        ops->probe(app->isolation[i].self, &p);
        p.version[sizeof(p.version) - 1] = '\0';
        p.reason[sizeof(p.reason) - 1] = '\0';
        any_ready |= p.ready;
        json_t *o = json_pack("{s:b, s:s}", "ready", p.ready, "version", p.version);
        if (!p.ready)
            json_object_set_new(o, "reason", json_string(p.reason[0] ? p.reason : "not ready"));
        json_object_set_new(iso, app->isolation[i].desc->name, o);
    }
    const char *name;
    json_t *sub;
    if (app->cfg && app->cfg->isolation)
        json_object_foreach(app->cfg->isolation, name, sub) {
            const char *why = eai_app_isolation_failure(app, name);
            if (why && !json_object_get(iso, name))
                json_object_set_new(iso, name, json_pack("{s:b, s:s}", "ready", 0, "reason", why));
        }
    json_object_set_new(checks, "isolation", iso);
    if (storage_ok && any_ready && !app->shutting_down) {
        eai_reply_json(j->r, 200, json_pack("{s:s, s:o}", "status", "ready", "checks", checks));
        return;
    }
    enum eai_code code = !storage_ok ? EAI_E_STORAGE_UNAVAILABLE : EAI_E_SANDBOX_UNAVAILABLE;
    json_t *details = json_array();
    if (!storage_ok)
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/checks/storage", "message",
                                                 "storage is unreachable"));
    if (!any_ready)
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/checks/isolation", "message",
                                                 "no isolation backend is ready"));
    if (app->shutting_down)
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "", "message", "shutting down"));
    json_t *env = json_pack("{s:{s:s, s:s, s:{s:s, s:s}, s:s, s:o}, s:s, s:o}", "error",
                            "code", eai_code_name(code), "message", eai_code_message(code, eai_req_lang(j->r)),
                            "message_i18n", "en", eai_code_message(code, "en"), "fr", eai_code_message(code, "fr"),
                            "request_id", eai_req_id(j->r), "details", details,
                            "status", "not_ready", "checks", checks);
    eai_reply_json(j->r, 503, env);
}

void eai_misc_readyz(struct eai_app *app, struct eai_req *r)
{
    struct misc_job *j = job_new(app, r, ready_work, ready_done);
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    job_submit(j);
}

void eai_misc_metrics(struct eai_app *app, struct eai_req *r)
{
    char *text = eai_metrics_render();
    if (!text) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_reply_raw(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
    free(text);
}

/* ------------------------------------------------------------ profiles */

static json_t *limits_json(int64_t cpu, int64_t mem, int64_t timeout, int64_t pids, int64_t out, int64_t disk)
{
    char c[32], m[32], d[32];
    eai_format_cpu(cpu, c, sizeof(c));
    eai_format_bytes(mem, m, sizeof(m));
    eai_format_bytes(disk, d, sizeof(d));
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:s}", "cpu", c, "memory", m, "timeout_s", (json_int_t)timeout,
                     "pids", (json_int_t)pids, "output_bytes", (json_int_t)out, "disk", d);
}

static int backend_ready(const struct eai_profile *p)
{
    if (!p->iso || !p->iso->desc)
        return 0;
    const struct eai_isolation_ops *ops = p->iso->desc->ops;
    struct eai_iso_probe pr;
    memset(&pr, 0, sizeof(pr));
    pr.size = sizeof(pr);
    ops->probe(p->iso->self, &pr);
    return pr.ready;
}

void eai_misc_profiles(struct eai_app *app, struct eai_req *r)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < app->nprofiles; i++) {
        const struct eai_profile *p = &app->profiles[i];
        json_t *eg = json_array();
        for (int k = 0; p->egress_allow && p->egress_allow[k]; k++)
            json_array_append_new(eg, json_string(p->egress_allow[k]));
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:b}",
            "name", p->name, "backend", p->backend, "runtime_class", p->runtime_class ? p->runtime_class : "",
            "defaults", limits_json(p->def_cpu_millis, p->def_memory, p->def_timeout_s, p->def_pids,
                                    p->def_output_bytes, p->def_disk),
            "max", limits_json(p->max_cpu_millis, p->max_memory, p->max_timeout_s, p->max_pids,
                               p->max_output_bytes, p->max_disk),
            "egress_allow", eg, "available", backend_ready(p)));
    }
    if (!arr) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_reply_json(r, 200, json_pack("{s:o}", "profiles", arr));
}

/* ------------------------------------------------------------ contracts */

static const struct eai_schema *contract_schema(struct eai_app *app, const char *name)
{
    if (!name)
        return NULL;
    if (strcmp(name, "tool-manifest") == 0)
        return app->schema_tool_manifest;
    if (strcmp(name, "sandbox-execution") == 0)
        return app->schema_execution;
    return NULL;
}

/* Schema errors plus the server-side checks a schema cannot express. */
static json_t *manifest_errors(struct eai_app *app, const struct eai_schema *s, const json_t *doc,
                               int is_tool, enum eai_code *code)
{
    json_t *errors = NULL;
    *code = EAI_E_VALIDATION_FAILED;
    eai_schema_validate(s, doc, &errors);
    if (!errors)
        errors = json_array();
    if (json_array_size(errors) == 0 && is_tool) {
        const char *prof = json_string_value(json_object_get(json_object_get(doc, "spec"), "sandbox_profile"));
        if (prof && !eai_app_profile(app, prof)) {
            char msg[200];
            snprintf(msg, sizeof(msg), "unknown sandbox profile '%.100s'", prof);
            json_array_append_new(errors, json_pack("{s:s, s:s}", "path", "/spec/sandbox_profile", "message", msg));
            *code = EAI_E_UNKNOWN_PROFILE;
        }
    }
    return errors;
}

void eai_misc_contract_validate(struct eai_app *app, struct eai_req *r)
{
    const char *name = eai_req_param(r, "name");
    const struct eai_schema *s = contract_schema(app, name);
    if (!s) {
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    json_t *doc = eai_req_body_json(r, 1);
    if (!doc)
        return;
    enum eai_code code;
    json_t *errors = manifest_errors(app, s, doc, strcmp(name, "tool-manifest") == 0, &code);
    json_decref(doc);
    if (json_array_size(errors) == 0) {
        json_decref(errors);
        eai_reply_json(r, 200, json_pack("{s:b}", "valid", 1));
    } else {
        eai_reply_json(r, 200, json_pack("{s:b, s:o}", "valid", 0, "errors", errors));
    }
}

/* ------------------------------------------------------------ manifests */

char *eai_manifest_kind_slug(const char *kind)
{
    if (!kind || !*kind || strlen(kind) > 63)
        return NULL;
    char *out = malloc(strlen(kind) * 2 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; kind[i]; i++) {
        unsigned char c = (unsigned char)kind[i];
        if (isupper(c)) {
            if (i > 0 && kind[i - 1] != '-')
                out[o++] = '-';
            out[o++] = (char)tolower(c);
        } else if (islower(c) || isdigit(c) || c == '-') {
            out[o++] = (char)c;
        } else {
            free(out);
            return NULL;
        }
    }
    out[o] = '\0';
    return out;
}

static void apply_work(struct misc_job *j)
{
    j->rc = j->app->store->manifest_put(j->app->storage.self, j->tenant, j->kind, j->name, j->in, j->audit, &j->err);
}

static void apply_done(struct misc_job *j)
{
    if (j->rc < 0) {
        reply_storage_error(j);
        return;
    }
    int created = j->rc == EAI_STORE_CREATED;
    eai_reply_json(j->r, created ? 201 : 200,
                   json_pack("{s:s, s:s, s:s, s:O}", "kind", j->kind, "name", j->name,
                             "result", created ? "created" : "updated", "manifest", j->in));
}

void eai_misc_manifest_apply(struct eai_app *app, struct eai_req *r)
{
    json_t *doc = eai_req_body_json(r, 1);
    if (!doc)
        return;
    if (!app->schema_tool_manifest) {
        json_decref(doc);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    enum eai_code code;
    json_t *errors = manifest_errors(app, app->schema_tool_manifest, doc, 1, &code);
    if (json_array_size(errors) > 0) {
        json_t *ev = eai_req_audit_event(r, "manifest.apply", "", "deny", eai_code_name(code));
        eai_req_audit_async(app, eai_req_tenant(r), ev);
        json_decref(doc);
        eai_reply_error(r, code, errors);
        return;
    }
    json_decref(errors);
    char *kind = eai_manifest_kind_slug(json_string_value(json_object_get(doc, "kind")));
    const char *name = json_string_value(json_object_get(json_object_get(doc, "metadata"), "name"));
    struct misc_job *j = kind && name ? job_new(app, r, apply_work, apply_done) : NULL;
    if (!j) {
        free(kind);
        json_decref(doc);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    snprintf(j->kind, sizeof(j->kind), "%s", kind);
    snprintf(j->name, sizeof(j->name), "%s", name);
    free(kind);
    char target[256];
    snprintf(target, sizeof(target), "manifest/%s/%s", j->kind, j->name);
    j->in = doc;
    j->audit = eai_req_audit_event(r, "manifest.apply", target, "allow", NULL);
    job_submit(j);
}

static int manifest_params(struct eai_req *r, struct misc_job *j)
{
    char *kind = eai_manifest_kind_slug(eai_req_param(r, "kind"));
    const char *name = eai_req_param(r, "name");
    if (!kind || !name || strlen(name) >= sizeof(j->name)) {
        free(kind);
        return -1;
    }
    snprintf(j->kind, sizeof(j->kind), "%s", kind);
    snprintf(j->name, sizeof(j->name), "%s", name);
    free(kind);
    return 0;
}

static void mget_work(struct misc_job *j)
{
    j->rc = j->app->store->manifest_get(j->app->storage.self, j->tenant, j->kind, j->name, &j->out, &j->err);
}

static void mget_done(struct misc_job *j)
{
    if (j->rc < 0) {
        reply_storage_error(j);
        return;
    }
    if (!j->out) {
        eai_reply_error(j->r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    eai_reply_json(j->r, 200, json_incref(j->out));
}

void eai_misc_manifest_get(struct eai_app *app, struct eai_req *r)
{
    struct misc_job *j = job_new(app, r, mget_work, mget_done);
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (manifest_params(r, j) < 0) {
        free(j);
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    job_submit(j);
}

static void mdel_work(struct misc_job *j)
{
    j->rc = j->app->store->manifest_delete(j->app->storage.self, j->tenant, j->kind, j->name, j->audit, &j->err);
}

static void mdel_done(struct misc_job *j)
{
    if (j->rc < 0) {
        if (j->err && j->err->code == EAI_E_NOT_FOUND) {
            eai_reply_error(j->r, EAI_E_NOT_FOUND, NULL);
            return;
        }
        reply_storage_error(j);
        return;
    }
    eai_reply_json(j->r, 200, json_pack("{s:s, s:s, s:s}", "kind", j->kind, "name", j->name, "result", "deleted"));
}

void eai_misc_manifest_delete(struct eai_app *app, struct eai_req *r)
{
    struct misc_job *j = job_new(app, r, mdel_work, mdel_done);
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (manifest_params(r, j) < 0) {
        free(j);
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    char target[256];
    snprintf(target, sizeof(target), "manifest/%s/%s", j->kind, j->name);
    j->audit = eai_req_audit_event(r, "manifest.delete", target, "allow", NULL);
    job_submit(j);
}

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
        reply_storage_error(j);
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
    struct misc_job *j = job_new(app, r, usage_get_work, usage_get_done);
    if (!j) {
        json_decref(filter);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->in = filter;
    job_submit(j);
}

static void usage_post_work(struct misc_job *j)
{
    j->rc = j->app->store->ledger_insert(j->app->storage.self, j->tenant, j->in, &j->err);
}

static void usage_post_done(struct misc_job *j)
{
    if (j->rc < 0) {
        reply_storage_error(j);
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
    struct misc_job *j = job_new(app, r, usage_post_work, usage_post_done);
    if (!j) {
        json_decref(ev);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->in = ev;
    job_submit(j);
    return;
invalid:
    json_decref(ev);
    eai_reply_error(r, EAI_E_VALIDATION_FAILED, details);
}
