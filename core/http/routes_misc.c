/*
 * Health, readiness, metrics, profiles and contracts (docs/api.md).
 * Manifests: routes_manifests.c; the FinOps ledger: routes_finops.c.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <eai/storage.h>

#include "app.h"
#include "net/egress_host.h"
#include "config/config.h"
#include "base/errors.h"
#include "schema/jsonschema.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "obs/obs_app.h"
#include "http/http_util.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "http/routes.h"
#include "http/routes_job.h"
#include "http/request.h"
#include "http/ops_access.h"
#include "base/util.h"


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
    if (!eai_ops_allowed(app, j->r)) {
        /* no versions, reasons or backends for who may not read them */
        json_decref(checks);
        checks = json_pack("{s:b}", "restricted", 1);
    }
    if (storage_ok && any_ready && !app->shutting_down && !app->draining) {
        eai_reply_json(j->r, 200, json_pack("{s:s, s:o}", "status", "ready", "checks", checks));
        return;
    }
    int stopping = app->shutting_down || app->draining;
    enum eai_code code = !storage_ok ? EAI_E_STORAGE_UNAVAILABLE
                         : !any_ready ? EAI_E_SANDBOX_UNAVAILABLE : EAI_E_SHUTTING_DOWN;
    json_t *details = json_array();
    if (!storage_ok)
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/checks/storage", "message",
                                                 "storage is unreachable"));
    if (!any_ready)
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "/checks/isolation", "message",
                                                 "no isolation backend is ready"));
    if (stopping)
        json_array_append_new(details, json_pack("{s:s, s:s}", "path", "", "message",
                                                 app->shutting_down ? "shutting down"
                                                 : "draining: running executions end, no new ones are taken"));
    /* the envelope of every error (details localised), and the checks */
    json_t *env = eai_http_error_envelope(code, eai_req_lang(j->r), eai_req_id(j->r), details);
    if (env) {
        json_object_set_new(env, "status", json_string(app->draining && !app->shutting_down ? "draining"
                                                                                                : "not_ready"));
        json_object_set_new(env, "checks", checks);
    } else {
        json_decref(checks);
    }
    eai_reply_json(j->r, 503, env);
}

void eai_misc_readyz(struct eai_app *app, struct eai_req *r)
{
    struct misc_job *j = eai_misc_job_new(app, r, ready_work, ready_done);
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_misc_job_submit(j);
}

void eai_misc_metrics(struct eai_app *app, struct eai_req *r)
{
    if (!eai_ops_allowed(app, r)) {
        eai_reply_error(r, EAI_E_FORBIDDEN,
                        json_pack("[{s:s, s:s}]", "path", "", "message",
                                  "metrics are served to loopback clients or with the ops token (ops.access)"));
        return;
    }
    eai_obs_scrape(app);  /* backend readiness (non-blocking probes), process_* from procfs */
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

/* The backend's readiness; *caps its capabilities. */
static int backend_ready(const struct eai_profile *p, unsigned *caps)
{
    *caps = 0;
    if (!p->iso || !p->iso->desc)
        return 0;
    const struct eai_isolation_ops *ops = p->iso->desc->ops;
    struct eai_iso_probe pr;
    memset(&pr, 0, sizeof(pr));
    pr.size = sizeof(pr);
    ops->probe(p->iso->self, &pr);
    *caps = pr.caps;
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
        unsigned caps;
        int ready = backend_ready(p, &caps);
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:b, s:b}",
            "name", p->name, "backend", p->backend, "runtime_class", p->runtime_class ? p->runtime_class : "",
            "defaults", limits_json(p->def_cpu_millis, p->def_memory, p->def_timeout_s, p->def_pids,
                                    p->def_output_bytes, p->def_disk),
            "max", limits_json(p->max_cpu_millis, p->max_memory, p->max_timeout_s, p->max_pids,
                               p->max_output_bytes, p->max_disk),
            "egress_allow", eg, "available", ready,
            /* can its backend carry a granted egress on this eaid (docs/egress.md) */
            "egress", eai_egress_carried(app, caps)));
    }
    if (!arr) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_reply_json(r, 200, json_pack("{s:o}", "profiles", arr));
}

/* ------------------------------------------------------------ contracts */

const struct eai_schema *eai_contract_schema(struct eai_app *app, const char *name)
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
json_t *eai_manifest_errors(struct eai_app *app, const struct eai_schema *s, const json_t *doc,
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
    const struct eai_schema *s = eai_contract_schema(app, name);
    if (!s) {
        eai_reply_not_found(r, EAI_MISSING_CONTRACT);
        return;
    }
    json_t *doc = eai_req_body_json(r, 1);
    if (!doc)
        return;
    enum eai_code code;
    json_t *errors = eai_manifest_errors(app, s, doc, strcmp(name, "tool-manifest") == 0, &code);
    json_decref(doc);
    if (json_array_size(errors) == 0) {
        json_decref(errors);
        eai_reply_json(r, 200, json_pack("{s:b}", "valid", 1));
    } else {
        eai_reply_json(r, 200, json_pack("{s:b, s:o}", "valid", 0, "errors", errors));
    }
}

