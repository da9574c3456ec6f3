/* Manifests: apply, get, delete (docs/api.md "Manifests"); storage on a
 * worker (routes_job.h). */
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
#include "exec/exec.h"


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

/* A manifest as answered: a tool's callback secret is never echoed. */
static json_t *manifest_public(const json_t *doc)
{
    json_t *d = json_deep_copy(doc);
    json_t *cb = json_object_get(json_object_get(d, "spec"), "callback");
    if (json_object_get(cb, "secret"))
        json_object_set_new(cb, "secret", json_string("(hidden)"));
    return d;
}

#define APPLY_REFUSED (-2)

static void apply_work(struct misc_job *j)
{
    if (j->ctx && eai_exec_tool_check_run(j->ctx, j->in, &j->err) < 0) {
        j->rc = APPLY_REFUSED;  /* it could never run: refused as its execution would be */
        return;
    }
    j->rc = j->app->store->manifest_put(j->app->storage.self, j->tenant, j->kind, j->name, j->in, j->audit, &j->err);
}

static void apply_done(struct misc_job *j)
{
    if (j->rc == APPLY_REFUSED) {
        enum eai_code code = j->err ? j->err->code : EAI_E_VALIDATION_FAILED;
        char target[256];
        snprintf(target, sizeof(target), "manifest/%s/%s", j->kind, j->name);
        eai_req_audit_async(j->app, j->tenant, eai_req_audit_event(j->r, "manifest.apply", target, "deny",
                                                                   eai_code_name(code)));
        eai_reply_error(j->r, code, j->err && j->err->details ? json_incref(j->err->details) : NULL);
        return;
    }
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
        return;
    }
    int created = j->rc == EAI_STORE_CREATED;
    eai_reply_json(j->r, created ? 201 : 200,
                   json_pack("{s:s, s:s, s:s, s:o}", "kind", j->kind, "name", j->name,
                             "result", created ? "created" : "updated", "manifest", manifest_public(j->in)));
}

static void tool_check_free(void *c) { eai_exec_tool_check_free(c); }

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
    json_t *errors = eai_manifest_errors(app, app->schema_tool_manifest, doc, 1, &code);
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
    struct misc_job *j = kind && name ? eai_misc_job_new(app, r, apply_work, apply_done) : NULL;
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
    if (strcmp(j->kind, "tool") == 0) {
        j->ctx = eai_exec_tool_check_new(app);  /* NULL (out of memory): stored unchecked */
        j->ctx_free = tool_check_free;
    }
    eai_misc_job_submit(j);
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
        eai_misc_reply_storage_error(j);
        return;
    }
    if (!j->out) {
        eai_reply_not_found(j->r, EAI_MISSING_MANIFEST);
        return;
    }
    eai_reply_json(j->r, 200, manifest_public(j->out));
}

void eai_misc_manifest_get(struct eai_app *app, struct eai_req *r)
{
    struct misc_job *j = eai_misc_job_new(app, r, mget_work, mget_done);
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (manifest_params(r, j) < 0) {
        free(j);
        eai_reply_not_found(r, EAI_MISSING_MANIFEST);
        return;
    }
    eai_misc_job_submit(j);
}

static void mdel_work(struct misc_job *j)
{
    j->rc = j->app->store->manifest_delete(j->app->storage.self, j->tenant, j->kind, j->name, j->audit, &j->err);
}

static void mdel_done(struct misc_job *j)
{
    if (j->rc < 0) {
        if (j->err && j->err->code == EAI_E_NOT_FOUND) {
            eai_reply_not_found(j->r, EAI_MISSING_MANIFEST);
            return;
        }
        eai_misc_reply_storage_error(j);
        return;
    }
    eai_reply_json(j->r, 200, json_pack("{s:s, s:s, s:s}", "kind", j->kind, "name", j->name, "result", "deleted"));
}

void eai_misc_manifest_delete(struct eai_app *app, struct eai_req *r)
{
    struct misc_job *j = eai_misc_job_new(app, r, mdel_work, mdel_done);
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (manifest_params(r, j) < 0) {
        free(j);
        eai_reply_not_found(r, EAI_MISSING_MANIFEST);
        return;
    }
    char target[256];
    snprintf(target, sizeof(target), "manifest/%s/%s", j->kind, j->name);
    j->audit = eai_req_audit_event(r, "manifest.delete", target, "allow", NULL);
    eai_misc_job_submit(j);
}


/* GET /v1/manifests?kind=Tool&limit=&after=: a page of manifests by name. */
#define MLIST_DEFAULT 20
#define MLIST_MAX 100

static void mlist_work(struct misc_job *j)
{
    int limit = (int)json_integer_value(json_object_get(j->in, "limit"));
    const char *after = json_string_value(json_object_get(j->in, "after"));
    /* one more than asked: tells whether a next page exists */
    j->rc = j->app->store->manifest_list(j->app->storage.self, j->tenant, j->kind, after, limit + 1, &j->out,
                                         &j->err);
}

static void mlist_done(struct misc_job *j)
{
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
        return;
    }
    size_t limit = (size_t)json_integer_value(json_object_get(j->in, "limit"));
    json_t *items = json_array();
    size_t i;
    const json_t *d;
    json_array_foreach(j->out, i, d) {
        if (i >= limit)
            break;
        json_array_append_new(items, manifest_public(d));
    }
    json_t *next = json_null();
    if (json_array_size(j->out) > limit && limit > 0) {
        const char *last = json_string_value(
            json_object_get(json_object_get(json_array_get(j->out, limit - 1), "metadata"), "name"));
        if (last)
            next = json_string(last);
    }
    eai_reply_json(j->r, 200, json_pack("{s:o, s:o}", "items", items, "next", next));
}

void eai_misc_manifest_list(struct eai_app *app, struct eai_req *r)
{
    const char *kq = eai_req_query(r, "kind");
    json_t *details = json_array();
    char *kind = eai_manifest_kind_slug(kq && *kq ? kq : "Tool");
    if (!kind)
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/query/kind",
                                                 "message", "must be a manifest kind such as Tool"));
    int limit = MLIST_DEFAULT;
    const char *ls = eai_req_query(r, "limit");
    if (ls && *ls) {
        int ok = strlen(ls) <= 3;
        for (const char *p = ls; ok && *p; p++)
            ok = isdigit((unsigned char)*p);
        limit = ok ? atoi(ls) : 0;
        if (limit < 1 || limit > MLIST_MAX)
            json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/query/limit",
                                                     "message", "must be an integer from 1 to 100"));
    }
    const char *after = eai_req_query(r, "after");
    if (after && strlen(after) > 127)
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/query/after",
                                                 "message", "is not a cursor from a previous page"));
    if (json_array_size(details) > 0) {
        free(kind);
        eai_reply_error(r, EAI_E_VALIDATION_FAILED, details);
        return;
    }
    json_decref(details);
    if (!app->store || !app->store->manifest_list) {
        free(kind);
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE,
                        json_pack("[{s:s, s:s}]", "path", "", "message",
                                  "this storage backend cannot list manifests (upgrade its plugin)"));
        return;
    }
    struct misc_job *j = eai_misc_job_new(app, r, mlist_work, mlist_done);
    if (!j || !(j->in = json_pack("{s:i, s:s?}", "limit", limit, "after", after && *after ? after : NULL))) {
        free(j);
        free(kind);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    snprintf(j->kind, sizeof(j->kind), "%s", kind);
    free(kind);
    eai_misc_job_submit(j);
}
