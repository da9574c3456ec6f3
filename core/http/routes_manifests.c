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
#include "exec/quota.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "http/routes.h"
#include "http/routes_job.h"
#include "http/request.h"
#include "base/util.h"


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
    if (eai_quota_enabled(j->app)) { /* quotas.manifests, quotas.stored_bytes */
        json_t *old = NULL;
        if (j->app->store->manifest_get(j->app->storage.self, j->tenant, j->kind, j->name, &old, &j->err) < 0) {
            j->rc = -1;
            return;
        }
        size_t add = json_dumpb(j->in, NULL, 0, JSON_COMPACT);
        int is_new = old == NULL;
        json_decref(old);
        if (eai_quota_admit_manifest(j->app, j->tenant, is_new, add, &j->err) < 0) {
            j->rc = -1;
            return;
        }
    }
    j->rc = j->app->store->manifest_put(j->app->storage.self, j->tenant, j->kind, j->name, j->in, j->audit, &j->err);
}

static void apply_done(struct misc_job *j)
{
    if (j->rc < 0 && eai_quota_refusal(j->err)) {
        eai_log_req("http", EAI_LOG_INFO, eai_req_id(j->r), "manifest refused: %s", j->err->message);
        eai_req_audit_async(j->app, j->tenant, eai_req_audit_event(j->r, "manifest.apply", "", "deny",
                                                                    eai_code_name(j->err->code)));
        eai_reply_error(j->r, j->err->code, j->err->details ? json_incref(j->err->details) : NULL);
        return;
    }
    if (j->rc < 0) {
        eai_misc_reply_storage_error(j);
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
        eai_reply_error(j->r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    eai_reply_json(j->r, 200, json_incref(j->out));
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
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
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
            eai_reply_error(j->r, EAI_E_NOT_FOUND, NULL);
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
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    char target[256];
    snprintf(target, sizeof(target), "manifest/%s/%s", j->kind, j->name);
    j->audit = eai_req_audit_event(r, "manifest.delete", target, "allow", NULL);
    eai_misc_job_submit(j);
}

