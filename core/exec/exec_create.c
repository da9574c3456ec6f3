/* Admission of an execution: POST /v1/sandbox/executions (exec_int.h). */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "exec/exec_int.h"
#include "vol/volume.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/scheduler.h"
#include "exec/watch.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "exec/budget.h"
#include "exec/exec_validate.h"
#include "obs/callback.h"
#include "images/images.h"
#include "plugin/host.h"
#include "net/egress_host.h"
#include "exec/quota.h"
#include "schema/jsonschema.h"
#include "obs/trace.h"
#include "record/exec_record.h"

/* ------------------------------------------------------------ create */

struct probe_snap {
    const struct eai_plugin_inst *iso;
    int ready;
    unsigned caps;
    struct eai_exec_blimits lim;   /* published by the probe (ABI 1.1) */
    char reason[256];
};

struct create_job {
    struct eai_app *app;
    struct eai_parked *hold;       /* parked while a backend's first probe runs */
    char tenant[64];
    char id[64];
    char session_id[64];           /* inside a session's sandbox, or "" */
    json_t *body;
    char *idem;
    char request_id[128];
    char trace_id[33], span_id[17], traceparent[56];
    json_t *audit;                 /* sandbox.execute allow */
    struct probe_snap *probes;     /* one per loaded isolation backend */
    int nprobes;
    /* results */
    int rc;                        /* eai_store_result or -1 */
    struct eai_error *err;         /* refusal or storage error */
    int refused;                   /* err is a refusal (4xx/503), not storage */
    json_t *existing;
    const struct eai_profile *prof;
    struct eai_exec *st;     /* held by the probe wait timer */
    struct event *park_ev;         /* waiting for a backend's first probe */
    int64_t park_until_ms;
    struct eai_sched_claim *claim; /* the claim this job runs after its commit, or NULL */
    json_t *volumes;               /* resolved [{id, name, path, read_only}] (vol/volume.h), or NULL */
};

static const struct probe_snap *snap_for(const struct create_job *j, const struct eai_profile *p)
{
    for (int i = 0; p && i < j->nprobes; i++)
        if (j->probes[i].iso == p->iso)
            return &j->probes[i];
    return NULL;
}

static int image_known_cb(void *arg, const struct eai_profile *p, const char *image)
{
    const struct create_job *j = arg;
    const struct probe_snap *ps = snap_for(j, p);
    if (!ps || !(ps->caps & EAI_ISO_CAP_LOCAL_IMAGES))
        return 1; /* the backend resolves images itself (e.g. Kubernetes) */
    if (!ps->ready)
        return 1; /* no runtime: answer 503 sandbox_unavailable below, not unknown_image */
    const struct eai_host *h = j->app->host;
    char buf[4096];
    return h && h->image_rootfs && h->image_rootfs(h, image, buf, sizeof buf) == 0;
}

/* No command given: the image's own (docs/images.md "The image's own command"). */
static int image_command_cb(void *arg, const struct eai_profile *p, const char *image, json_t **argv, char *why,
                            size_t whylen)
{
    const struct create_job *j = arg;
    const struct probe_snap *ps = snap_for(j, p);
    *argv = NULL;
    if (!ps || !(ps->caps & EAI_ISO_CAP_LOCAL_IMAGES)) {
        snprintf(why, whylen, "the backend of profile '%.64s' takes images from a registry and cannot tell an "
                 "image's own command here", p->name);
        return 0;
    }
    if (eai_images_command(eai_host_image_dir(j->app->host), image, argv) < 0)
        snprintf(why, whylen, "unknown image '%.200s'", image);
    else if (!*argv)
        snprintf(why, whylen, "image '%.200s' has no command of its own (no Entrypoint or Cmd)", image);
    return 0;
}

static void backend_limits_cb(void *arg, const struct eai_profile *p, struct eai_exec_blimits *out)
{
    const struct create_job *j = arg;
    const struct probe_snap *ps = snap_for(j, p);
    if (ps) {
        *out = ps->lim;
        /* a ready backend that cannot carry egress here: refuse, never run offline */
        out->egress_unsupported = ps->ready && !eai_egress_carried(j->app, ps->caps);
    } else {
        out->stdin_stream_unsupported = 1;
    }
}

/* unknown_image: say which images exist, or how to make one (worker: lists
 * the image store). */
static void unknown_image_hint(struct eai_app *app, struct eai_error *e)
{
    if (!e || e->code != EAI_E_UNKNOWN_IMAGE || !app->cfg || !app->cfg->image_dir)
        return;
    char names[1024], msg[1400];
    int n = eai_images_names(app->cfg->image_dir, names, sizeof names);
    size_t i;
    json_t *x;
    json_array_foreach(e->details, i, x) {
        const char *m = eai_jstr(x, "message");
        if (!m || strncmp(m, "unknown image", 13) != 0)
            continue;
        if (n > 0)
            snprintf(msg, sizeof msg, "%s; the images here are: %s (eaid images list)", m, names);
        else
            snprintf(msg, sizeof msg, "%s; the image store is empty: build one with "
                     "`eaid images build python:3.11-slim --packages python3-minimal` or import one with "
                     "`eaid images import NAME:TAG ARCHIVE` (docs/images.md)", m);
        json_object_set_new(x, "message", json_string(msg));
    }
}

static void create_work(void *arg)
{
    struct create_job *j = arg;
    struct eai_app *app = j->app;
    json_t *tool_doc = NULL;
    const char *tool = eai_jstr(j->body, "tool");
    if (tool) {
        if (app->store->manifest_get(app->storage.self, j->tenant, "tool", tool, &tool_doc, &j->err) < 0) {
            j->rc = -1;
            return;
        }
    }
    struct eai_exec_vopts o = {
        .files_max_total_bytes = app->cfg ? app->cfg->files_max_total_bytes : 8 << 20,
        .image_known = image_known_cb,
        .image_command = image_command_cb,
        .image_arg = j,
        .backend_limits = backend_limits_cb,
    };
    struct eai_cb_policy cbp;
    if (eai_cb_policy_init(&cbp, app->cfg ? app->cfg->callbacks_allow : NULL, NULL) == 0)
        o.callbacks = &cbp;  /* checked at start: fails only out of memory (then any public address) */
    json_t *rec = NULL;
    int rc = eai_exec_validate(j->body, tool_doc, app->profiles, app->nprofiles, &o, &rec, &j->prof, &j->err);
    if (o.callbacks)
        eai_cb_policy_free(&cbp);
    json_decref(tool_doc);
    if (rc < 0) {
        unknown_image_hint(app, j->err);
        j->refused = 1;
        j->rc = -1;
        return;
    }
    const struct probe_snap *ps = snap_for(j, j->prof);
    if (!ps || !ps->ready) {
        j->err = eai_error_new(EAI_E_SANDBOX_UNAVAILABLE, 0, "backend of profile '%s' not ready: %s",
                               j->prof->name, ps ? ps->reason : "not loaded");
        j->refused = 1;
        j->rc = -1;
        json_decref(rec);
        return;
    }
    if (j->volumes && !(ps->caps & EAI_ISO_CAP_VOLUMES)) {
        /* k8s would map a volume to a PersistentVolumeClaim: not built (docs/volumes.md) */
        j->err = eai_error_new(EAI_E_VOLUMES_UNSUPPORTED, 0,
                               "volumes need a backend that mounts them on this node (gvisor); the backend '%s' "
                               "of profile '%s' cannot (docs/volumes.md)",
                               j->prof->backend, j->prof->name);
        j->refused = 1;
        j->rc = -1;
        json_decref(rec);
        return;
    }
    /* Limits that can never fit in a tenant's share of the node budget
     * (docs/admission.md): refused now rather than failed once claimed.
     * Inside a session the session holds the limits; k8s runs elsewhere. */
    struct eai_exec_limits lim;
    if (!j->session_id[0] && app->budget && eai_budget_counts_backend(j->prof->backend) &&
        eai_exec_limits_parse(json_object_get(rec, "limits"), &lim) == 0 &&
        eai_budget_exceeds_share(app->budget, j->tenant, lim.memory_bytes, lim.cpu_millis)) {
        j->err = eai_budget_refusal(app->budget, EAI_BUDGET_TOO_LARGE, j->tenant, lim.memory_bytes, lim.cpu_millis);
        j->refused = 1;
        j->rc = -1;
        json_decref(rec);
        return;
    }
    if (j->volumes)
        json_object_set(rec, "volumes", j->volumes); /* attached when the execution starts */
    /* Quotas, once the rest would admit it (docs/configuration.md): the record's size is what it adds. */
    if (eai_quota_enabled(app) &&
        eai_quota_admit_exec(app, j->tenant, json_dumpb(rec, NULL, 0, JSON_COMPACT) + 512, &j->err) < 0) {
        j->refused = eai_quota_refusal(j->err);
        j->rc = -1;
        json_decref(rec);
        return;
    }
    char now[32], hash[65];
    eai_time_rfc3339(eai_now_ms(), now);
    if (eai_exec_request_hash(j->body, hash) < 0) {
        j->err = eai_error_new(EAI_E_INTERNAL, 0, "out of memory hashing the request");
        j->rc = -1;
        json_decref(rec);
        return;
    }
    const struct eai_exec_record_ids ids = {
        .id = j->id, .tenant_id = j->tenant, .created_at = now, .request_id = j->request_id,
        .request_hash = hash, .idempotency_key = j->idem, .trace_id = j->trace_id,
        .span_id = j->span_id, .traceparent = j->traceparent, .session_id = j->session_id,
    };
    if (eai_exec_record_init(rec, &ids) < 0) {
        j->err = eai_error_new(EAI_E_INTERNAL, 0, "out of memory building the record");
        j->rc = -1;
        json_decref(rec);
        return;
    }
    j->rc = app->store->exec_create(app->storage.self, j->tenant, rec, j->audit, &j->existing, &j->err);
    /* a new row: claim it (and whatever else is queued) on this worker,
     * without a round trip through the loop (scheduler.h) */
    if (j->rc >= 0 && j->rc != EAI_STORE_EXISTS && j->rc != EAI_STORE_CONFLICT)
        eai_sched_claim_work(j->claim);
    json_decref(rec);
}

static void create_job_free(struct create_job *j)
{
    eai_sched_claim_done(j->claim); /* not run: the job never ran or was answered without it */
    if (j->park_ev)
        event_free(j->park_ev);
    json_decref(j->body);
    json_decref(j->volumes);
    json_decref(j->audit);
    json_decref(j->existing);
    eai_error_free(j->err);
    free(j->idem);
    free(j->probes);
    free(j);
}


static void create_answer(struct eai_req *r, void *arg)
{
    struct create_job *j = arg;
    struct eai_exec *st = exec_state_of(j->app);
    if (!r) {
        /* answered by eai_exec_stop */
    } else if (j->rc < 0 && j->refused) {
        enum eai_code code = j->err ? j->err->code : EAI_E_INTERNAL;
        json_t *details = j->err && j->err->details ? json_incref(j->err->details) : NULL;
        exec_audit_deny(j->app, r, "sandbox.execute", j->prof ? j->prof->name : "", eai_code_name(code));
        eai_log_req(EXEC_COMPONENT, EAI_LOG_INFO, eai_req_id(r), "execution refused: %s",
                    j->err && j->err->message ? j->err->message : eai_code_name(code));
        eai_reply_error(r, code, details);
    } else if (j->rc < 0) {
        exec_reply_storage_error(r, "exec_create", j->err);
    } else if (j->rc == EAI_STORE_EXISTS) {
        const char *id = eai_jstr(j->existing, "id") ? eai_jstr(j->existing, "id") : j->id;
        const char *s = eai_jstr(j->existing, "status") ? eai_jstr(j->existing, "status") : "queued";
        if (eai_req_span(r))
            eai_span_set_str(eai_req_span(r), "eai.execution_id", id);
        exec_reply_accepted(r, 200, id, s);
    } else if (j->rc == EAI_STORE_CONFLICT) {
        exec_audit_deny(j->app, r, "sandbox.execute", "", "idempotency_conflict");
        eai_reply_error(r, EAI_E_IDEMPOTENCY_CONFLICT,
                        exec_detail1("Idempotency-Key", "was used with a different request body"));
    } else {
        if (st) {
            eai_watch_queued(st->hub, j->id, j->tenant);
            if (!j->claim)
                eai_sched_kick(st->sched);
        }
        if (eai_req_span(r))  /* only an accepted POST names an execution */
            eai_span_set_str(eai_req_span(r), "eai.execution_id", j->id);
        eai_log_req(EXEC_COMPONENT, EAI_LOG_INFO, eai_req_id(r), "execution %s queued (profile %s)",
                    j->id, j->prof ? j->prof->name : "?");
        exec_reply_accepted(r, 202, j->id, "queued");
    }
    /* after the answer: what the claim took starts now (running is its next state) */
    struct eai_sched_claim *c = j->claim;
    j->claim = NULL;
    eai_sched_claim_done(c);
}

static void create_free(void *arg)
{
    create_job_free(arg);
}

static const struct eai_park_ops create_ops = {
    .what = "exec_create", .work = create_work, .answer = create_answer, .free = create_free,
};

/* Readiness of every backend, taken on the loop (probe never blocks).
 * Returns how many are still starting (their first probe runs). */
static int take_probes(struct create_job *j)
{
    struct eai_app *app = j->app;
    int starting = 0;
    j->nprobes = 0;
    if (!j->probes && app->nisolation > 0 && !(j->probes = calloc((size_t)app->nisolation, sizeof *j->probes)))
        return 0; /* out of memory: every profile answers "not ready" */
    for (int i = 0; i < app->nisolation; i++) {
        struct eai_plugin_inst *iso = &app->isolation[i];
        struct probe_snap *ps = &j->probes[j->nprobes++];
        memset(ps, 0, sizeof *ps);
        ps->iso = iso;
        const struct eai_isolation_ops *ops = iso->desc ? iso->desc->ops : NULL;
        if (!ops || !iso->self) {
            snprintf(ps->reason, sizeof ps->reason, "backend not loaded");
            continue;
        }
        struct eai_iso_probe pr;
        memset(&pr, 0, sizeof pr);
        pr.size = sizeof pr;
        ops->probe(iso->self, &pr);
        ps->ready = pr.ready;
        ps->caps = pr.caps;
        ps->lim.max_path_bytes = pr.max_path_bytes;
        ps->lim.max_name_bytes = pr.max_name_bytes;
        ps->lim.max_input_bytes = pr.max_input_bytes;
        ps->lim.max_files = pr.max_files;
        ps->lim.max_env_name_bytes = pr.max_env_name_bytes;
        ps->lim.flags = pr.limit_flags;
        ps->lim.stdin_stream_unsupported = !ops->stdin_write; /* the normalised table: NULL below 1.4 */
        snprintf(ps->reason, sizeof ps->reason, "%s", pr.reason[0] ? pr.reason : "starting");
        starting += !pr.ready && eai_iso_probe_pending(&pr);
    }
    return starting;
}

static void create_park_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct create_job *j = arg;
    struct eai_exec *st = j->st;
    struct eai_req *r = eai_park_release(j->hold);
    j->hold = NULL;
    if (!r) {
        /* answered by eai_exec_stop */
        create_job_free(j);
    } else if (take_probes(j) > 0 && eai_now_ms() < j->park_until_ms &&
               (j->hold = eai_park_hold(st->parks, r))) {
        struct timeval tv = {0, 100 * 1000};
        event_add(j->park_ev, &tv);
        return; /* keeps the reference */
    } else {
        j->claim = eai_sched_claim_take(st->sched);
        eai_park(st->parks, r, &create_ops, j);
    }
    exec_unref(st);
}

/* ------------------------------------------------------------ tool manifests at apply */

struct eai_tool_check {
    struct create_job j;   /* app and probes: the callbacks of create_work */
};

struct eai_tool_check *eai_exec_tool_check_new(struct eai_app *app)
{
    struct eai_tool_check *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->j.app = app;
    take_probes(&c->j);
    return c;
}

int eai_exec_tool_check_run(struct eai_tool_check *c, const json_t *doc, struct eai_error **err)
{
    struct eai_app *app = c->j.app;
    const char *name = eai_jstr(json_object_get(doc, "metadata"), "name");
    const json_t *spec = json_object_get(doc, "spec");
    json_t *body = json_pack("{s:s}", "tool", name ? name : "");
    if (!body)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    /* an execution may bring the image or the command itself: stand-ins, so
     * that every other check runs */
    int has_image = json_object_get(spec, "image") != NULL;
    if (!has_image)
        json_object_set_new(body, "image", json_string("(given by the execution)"));
    if (!json_object_get(spec, "command"))
        json_object_set_new(body, "command", json_pack("[s]", "true"));
    struct eai_exec_vopts o = {
        .files_max_total_bytes = app->cfg ? app->cfg->files_max_total_bytes : 8 << 20,
        .image_known = has_image ? image_known_cb : NULL,
        .image_arg = &c->j,
        .backend_limits = backend_limits_cb,
    };
    struct eai_cb_policy cbp;
    if (eai_cb_policy_init(&cbp, app->cfg ? app->cfg->callbacks_allow : NULL, NULL) == 0)
        o.callbacks = &cbp;
    json_t *rec = NULL;
    const struct eai_profile *prof = NULL;
    struct eai_error *e = NULL;
    int rc = eai_exec_validate(body, doc, app->profiles, app->nprofiles, &o, &rec, &prof, &e);
    if (o.callbacks)
        eai_cb_policy_free(&cbp);
    json_decref(body);
    json_decref(rec);
    if (rc == 0)
        return 0;
    unknown_image_hint(app, e);
    json_t *d = e ? e->details : NULL;
    /* the execution's paths, as the manifest's */
    for (size_t i = 0; i < json_array_size(d); i++) {
        json_t *x = json_array_get(d, i);
        const char *p = eai_jstr(x, "path");
        char np[160];
        if (!p)
            continue;
        if (!strcmp(p, "/profile"))
            snprintf(np, sizeof np, "/spec/sandbox_profile");
        else if (!strncmp(p, "/network/egress", 15))
            snprintf(np, sizeof np, "/spec/egress%s", p + 15);
        else
            snprintf(np, sizeof np, "/spec%s", p);
        json_object_set_new(x, "path", json_string(np));
    }
    *err = e;
    return -1;
}

void eai_exec_tool_check_free(struct eai_tool_check *c)
{
    if (!c)
        return;
    free(c->j.probes);
    free(c);
}

/* Idempotency-Key: 1..255 printable ASCII characters. */
static int idem_ok(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > EAI_EXEC_IDEMPOTENCY_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] < 0x20 || (unsigned char)k[i] > 0x7e)
            return 0;
    return 1;
}

static void create_with_body(struct eai_app *app, struct eai_req *r, json_t *body, const char *session_id);

void eai_exec_route_create(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = exec_state_of(app);
    if (app->draining || app->shutting_down) {
        /* SIGTERM: the runs here end, no new work (another replica takes it) */
        eai_reply_error(r, EAI_E_SHUTTING_DOWN, NULL);
        return;
    }
    if (!st) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    if (!eai_req_tenant(r)) {
        eai_reply_error(r, EAI_E_UNAUTHENTICATED, NULL);
        return;
    }
    json_t *body = eai_req_body_json(r, 0);
    if (!body)
        return; /* replied 400 / 415 */
    create_with_body(app, r, body, NULL);
}

void eai_exec_create_in_session(struct eai_app *app, struct eai_req *r, json_t *body, const char *session_id)
{
    if (!exec_state_of(app)) {
        json_decref(body);
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    create_with_body(app, r, body, session_id);
}

/* The body of an execution (stolen): everything of POST after the JSON
 * parse; session_id: it runs inside that session's sandbox. */
static void create_with_body(struct eai_app *app, struct eai_req *r, json_t *body, const char *session_id)
{
    struct eai_exec *st = exec_state_of(app);
    const char *tenant = eai_req_tenant(r);
    const char *idem = eai_req_header(r, "Idempotency-Key");
    if (idem && !idem_ok(idem)) {
        json_decref(body);
        exec_audit_deny(app, r, "sandbox.execute", "", "validation_failed");
        eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                        exec_detail1("Idempotency-Key", "must be 1 to 255 printable ASCII characters"));
        return;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        exec_audit_deny(app, r, "sandbox.execute", "", "validation_failed");
        eai_reply_error(r, EAI_E_VALIDATION_FAILED, exec_detail1("", "must be an object"));
        return;
    }
    const char *field = NULL;
    if (eai_req_apply_token_ids(r, body, &field) < 0) { /* audited, then answered: r is gone after the reply */
        json_decref(body);
        exec_audit_deny(app, r, "sandbox.execute", "", "forbidden");
        eai_req_token_ids_refusal(r, field);
        return;
    }
    if (app->schema_execution) {
        json_t *errors = NULL;
        eai_schema_validate(app->schema_execution, body, &errors);
        eai_exec_schema_filter(body, errors);
        if (json_array_size(errors) > 0) {
            json_decref(body);
            exec_audit_deny(app, r, "sandbox.execute", "", "validation_failed");
            eai_reply_error(r, EAI_E_VALIDATION_FAILED, errors);
            return;
        }
        json_decref(errors);
    }
    json_t *volumes = NULL;
    if (json_object_get(body, "volumes")) {
        enum eai_code vcode;
        json_t *vdet = NULL;
        if (session_id) {
            vcode = EAI_E_VALIDATION_FAILED;
            vdet = exec_detail1("/volumes", "an execution in a session mounts the session's volumes");
        }
        /* with an Idempotency-Key the replay of a started execution must
         * answer its record, not 409 for the volume it holds itself: the
         * writer is then checked when the execution starts only */
        if (vdet || eai_vols_resolve(app, tenant, json_object_get(body, "volumes"), "/volumes", idem == NULL,
                                     &volumes, &vcode, &vdet) < 0) {
            json_decref(body);
            exec_audit_deny(app, r, "sandbox.execute", "", eai_code_name(vcode));
            eai_reply_error(r, vcode, vdet);
            return;
        }
    }
    int64_t maxq = app->cfg && app->cfg->max_queued_per_tenant > 0 ? app->cfg->max_queued_per_tenant : 1000;
    if (eai_watch_queued_count(st->hub, tenant) >= maxq) {
        json_decref(body);
        exec_audit_deny(app, r, "sandbox.execute", "", "rate_limited");
        const char *h[] = {"Retry-After: 5", NULL};
        exec_reply_error_headers(r, EAI_E_RATE_LIMITED,
                            exec_detail1("", "too many queued executions for this tenant"), h);
        json_decref(volumes);
        return;
    }

    struct create_job *j = calloc(1, sizeof *j);
    char uuid[37];
    if (!j) {
        json_decref(volumes);
        json_decref(body);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->app = app;
    j->body = body;
    j->volumes = volumes;
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
    snprintf(j->session_id, sizeof j->session_id, "%s", session_id ? session_id : "");
    eai_uuid_v4(uuid);
    snprintf(j->id, sizeof j->id, "sbx_%s", uuid);
    snprintf(j->request_id, sizeof j->request_id, "%s", eai_req_id(r) ? eai_req_id(r) : "");
    if (idem && !(j->idem = strdup(idem))) {
        create_job_free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    /* trace: the request's server span is the parent of sandbox.run */
    struct eai_span *span = eai_req_span(r);
    const struct eai_trace_ctx *tc = eai_req_trace(r);
    unsigned flags = tc ? tc->flags : 1;
    if (span) {
        snprintf(j->trace_id, sizeof j->trace_id, "%s", eai_span_trace_id(span));
        snprintf(j->span_id, sizeof j->span_id, "%s", eai_span_id(span));
        eai_span_set_str(span, "eai.tenant_id", tenant);
        eai_span_set_str(span, "gen_ai.operation.name", "execute_tool");
        if (eai_jstr(body, "tool"))
            eai_span_set_str(span, "gen_ai.tool.name", eai_jstr(body, "tool"));
        if (eai_jstr(body, "agent_id"))
            eai_span_set_str(span, "gen_ai.agent.id", eai_jstr(body, "agent_id"));
        if (eai_jstr(body, "run_id"))
            eai_span_set_str(span, "eai.run_id", eai_jstr(body, "run_id"));
    } else if (tc) {
        snprintf(j->trace_id, sizeof j->trace_id, "%s", tc->trace_id);
        snprintf(j->span_id, sizeof j->span_id, "%s", tc->span_id);
    }
    if (strlen(j->trace_id) == 32 && strlen(j->span_id) == 16)
        eai_traceparent_format(j->trace_id, j->span_id, flags, j->traceparent);
    j->audit = eai_req_audit_event(r, "sandbox.execute", j->id, "allow", NULL);
    j->st = st;
    if (take_probes(j) > 0) {
        /* a backend is still probing (first start-up): decide once it has */
        j->park_until_ms = eai_now_ms() + EXEC_PROBE_WAIT_MS;
        j->park_ev = evtimer_new(app->base, create_park_cb, j);
        if (j->park_ev && (j->hold = eai_park_hold(st->parks, r))) {
            exec_ref(st);
            struct timeval tv = {0, 100 * 1000};
            event_add(j->park_ev, &tv);
            return;
        }
    }
    j->claim = eai_sched_claim_take(st->sched);
    eai_park(st->parks, r, &create_ops, j);
}

