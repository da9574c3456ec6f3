/* The routes of /v1/sandbox/sessions: create, get, list, delete and the
 * executions inside a session (session_int.h, docs/sessions.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session/session_int.h"
#include "vol/volume.h"
#include "exec/budget.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/exec.h"
#include "exec/exec_validate.h"
#include "http/http_util.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "obs/metrics.h"
#include "schema/jsonschema.h"

static json_t *detail1(const char *path, const char *msg)
{
    return json_pack("[{s:s, s:s}]", "path", path, "message", msg);
}

static void audit_deny(struct eai_app *app, struct eai_req *r, const char *action, const char *target,
                       const char *reason)
{
    if (!eai_req_tenant(r))
        return;
    json_t *ev = eai_req_audit_event(r, action, target, "deny", reason);
    if (ev)
        eai_req_audit_async(app, eai_req_tenant(r), ev);
}

static void refuse(struct eai_app *app, struct eai_req *r, const char *action, const char *target,
                   enum eai_code code, json_t *details)
{
    audit_deny(app, r, action, target, eai_code_name(code));
    if (code == EAI_E_NOT_FOUND) { /* said of the session, never "Execution not found" */
        json_decref(details);
        eai_reply_not_found(r, EAI_MISSING_SESSION);
        return;
    }
    eai_reply_error(r, code, details);
}

/* The refusal of err (its code and details; its message as the detail
 * when with_message): a 429 of the node budget with Retry-After
 * (docs/admission.md). */
static void refuse_err(struct eai_app *app, struct eai_req *r, const char *action, const char *target,
                       const struct eai_error *err, int with_message)
{
    enum eai_code code = err ? err->code : EAI_E_INTERNAL;
    json_t *details = err && err->details                     ? json_incref(err->details)
                      : with_message && err && err->message ? detail1("", err->message)
                                                            : NULL;
    if (code == EAI_E_NODE_BUDGET_EXHAUSTED || code == EAI_E_TENANT_SHARE_EXHAUSTED) {
        audit_deny(app, r, action, target, eai_code_name(code));
        char ra[48];
        snprintf(ra, sizeof ra, "Retry-After: %d", EAI_BUDGET_RETRY_AFTER_S);
        const char *h[] = {ra, NULL};
        json_t *env = eai_http_error_envelope(code, eai_req_lang(r), eai_req_id(r), details);
        if (env)
            eai_reply_json_headers(r, 429, env, h);
        else
            eai_reply_error(r, code, NULL);
        return;
    }
    refuse(app, r, action, target, code, details);
}

/* 429 session_limit with Retry-After, or 503 when the tenant's parked
 * sessions could not be counted (parked < 0: perr).  Parked sessions count
 * against the cap on every replica: any may resume them (docs/sessions.md
 * "Any replica"). */
static void refuse_session_limit(struct eai_app *app, struct eai_req *r, const char *action, const char *target,
                                 int cap, int parked, const struct eai_error *perr)
{
    char m[300];
    if (parked < 0) {
        snprintf(m, sizeof m, "the tenant's parked sessions could not be counted: %s",
                 perr && perr->message ? perr->message : "storage did not answer");
        refuse(app, r, action, target, perr ? perr->code : EAI_E_STORAGE_UNAVAILABLE, detail1("", m));
        return;
    }
    if (parked > 0)
        snprintf(m, sizeof m, "at most %d live sessions per tenant (sessions.max_per_tenant), %d of them parked",
                 cap, parked);
    else
        snprintf(m, sizeof m, "at most %d live sessions per tenant (sessions.max_per_tenant)", cap);
    audit_deny(app, r, action, target, "session_limit");
    const char *h[] = {"Retry-After: 5", NULL};
    json_t *env = eai_http_error_envelope(EAI_E_SESSION_LIMIT, eai_req_lang(r), eai_req_id(r), detail1("", m));
    if (env)
        eai_reply_json_headers(r, 429, env, h);
    else
        eai_reply_error(r, EAI_E_SESSION_LIMIT, NULL);
}

/* An integer member in [lo, hi], or def when absent.  -1 when wrong. */
static int int_member(const json_t *o, const char *k, int64_t lo, int64_t hi, int64_t def, int64_t *out)
{
    const json_t *v = json_object_get(o, k);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return -1;
    *out = json_integer_value(v);
    return 0;
}

/* ------------------------------------------------------------ create */

struct create_job {
    struct eai_app *app;
    char tenant[64], actor[64], request_id[128];
    json_t *body;                  /* the pseudo execution body validated on the worker */
    int64_t idle_s, ttl_s, maxc, paused_ttl_s;
    int auto_resume, auto_pause;
    json_t *rec;                   /* eai_exec_validate's record */
    const struct eai_profile *prof;
    struct eai_error *err;
    json_t *volumes;               /* resolved (vol/volume.h), or NULL */
    int parked;                    /* the tenant's parked sessions (-1: storage did not answer: perr) */
    struct eai_error *perr;
};

static int image_known(void *arg, const struct eai_profile *p, const char *image)
{
    const struct create_job *j = arg;
    const struct eai_host *h = j->app->host;
    char buf[4096];
    if (!ses_profile_ops(p))
        return 1; /* sessions_unsupported is the answer, not the image */
    return h && h->image_rootfs && h->image_rootfs(h, image, buf, sizeof buf) == 0;
}

static void create_work(void *arg)
{
    struct create_job *j = arg;
    struct eai_exec_vopts o = {
        .files_max_total_bytes = j->app->cfg ? j->app->cfg->files_max_total_bytes : 8 << 20,
        .image_known = image_known,
        .image_arg = j,
    };
    if (eai_exec_validate(j->body, NULL, j->app->profiles, j->app->nprofiles, &o, &j->rec, &j->prof, &j->err) < 0)
        j->rec = NULL;
    else
        j->parked = ses_parked_count(j->app, j->tenant, &j->perr);
}

static void create_answer(struct eai_req *r, void *arg)
{
    struct create_job *j = arg;
    struct eai_app *app = j->app;
    struct eai_sessions *reg = ses_reg(app);
    if (!r)
        return;
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    if (!j->rec) {
        enum eai_code code = j->err ? j->err->code : EAI_E_INTERNAL;
        refuse(app, r, "sandbox.session.create", "", code,
               j->err && j->err->details ? json_incref(j->err->details) : NULL);
        return;
    }
    if (!ses_profile_ops(j->prof)) {
        char m[200];
        snprintf(m, sizeof m, "the backend '%s' of profile '%s' does not support sessions", j->prof->backend,
                 j->prof->name);
        refuse(app, r, "sandbox.session.create", "", EAI_E_SESSIONS_UNSUPPORTED, detail1("/profile", m));
        return;
    }
    if (j->volumes) {
        struct eai_iso_probe pr;
        memset(&pr, 0, sizeof pr);
        pr.size = sizeof pr;
        ses_profile_ops(j->prof)->probe(j->prof->iso->self, &pr);
        if (!(pr.caps & EAI_ISO_CAP_VOLUMES)) {
            char m[300];
            snprintf(m, sizeof m,
                     "volumes need a backend that mounts them on this node (gvisor); the backend '%s' of profile "
                     "'%s' cannot (docs/volumes.md)",
                     j->prof->backend, j->prof->name);
            refuse(app, r, "sandbox.session.create", "", EAI_E_VOLUMES_UNSUPPORTED, detail1("/volumes", m));
            return;
        }
    }
    int cap = app->cfg ? app->cfg->sessions_max_per_tenant : 10;
    if (j->parked < 0 || ses_live_count(reg, j->tenant) + j->parked >= cap) {
        refuse_session_limit(app, r, "sandbox.session.create", "", cap, j->parked, j->perr);
        return;
    }
    struct eai_exec_limits lim;
    json_t *limits = json_object_get(j->rec, "limits");
    if (eai_exec_limits_parse(limits, &lim) < 0) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    struct eai_session *s = calloc(1, sizeof *s);
    if (!s) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    char uuid[37];
    eai_uuid_v4(uuid);
    snprintf(s->id, sizeof s->id, "ses_%s", uuid);
    snprintf(s->tenant, sizeof s->tenant, "%s", j->tenant);
    snprintf(s->actor, sizeof s->actor, "%s", j->actor);
    snprintf(s->request_id, sizeof s->request_id, "%s", j->request_id);
    snprintf(s->image, sizeof s->image, "%s", json_string_value(json_object_get(j->rec, "image")));
    const char *ids[3] = {json_string_value(json_object_get(j->rec, "project_id")),
                          json_string_value(json_object_get(j->rec, "agent_id")),
                          json_string_value(json_object_get(j->rec, "run_id"))};
    snprintf(s->project_id, sizeof s->project_id, "%s", ids[0] ? ids[0] : "");
    snprintf(s->agent_id, sizeof s->agent_id, "%s", ids[1] ? ids[1] : "");
    snprintf(s->run_id, sizeof s->run_id, "%s", ids[2] ? ids[2] : "");
    s->reg = reg;
    s->prof = j->prof;
    snprintf(s->profile, sizeof s->profile, "%s", j->prof->name);
    snprintf(s->backend, sizeof s->backend, "%s", j->prof->backend);
    s->limits = json_pack("{s:O?, s:O?, s:O?, s:O?}", "cpu", json_object_get(limits, "cpu"), "memory",
                          json_object_get(limits, "memory"), "pids", json_object_get(limits, "pids"), "disk",
                          json_object_get(limits, "disk"));
    s->env = json_incref(json_object_get(j->rec, "env"));
    /* granted egress (exec_validate checked it against the profile) */
    if (json_array_size(json_object_get(j->rec, "egress")) > 0)
        s->egress = json_deep_copy(json_object_get(j->rec, "egress"));
    if (!s->env)
        s->env = json_object();
    s->cpu_millis = lim.cpu_millis;
    s->memory_bytes = lim.memory_bytes;
    s->pids = lim.pids;
    s->disk_bytes = lim.disk_bytes;
    s->idle_timeout_s = j->idle_s;
    s->ttl_s = j->ttl_s;
    s->max_concurrent = (int)j->maxc;
    s->auto_resume = j->auto_resume;
    s->auto_pause = j->auto_pause;
    s->paused_ttl_s = j->paused_ttl_s;
    s->created_ms = s->last_used_ms = eai_now_ms();
    s->state = SES_STARTING;
    if (j->volumes) {
        enum eai_code vcode;
        char why[300];
        s->volumes = json_incref(j->volumes);
        s->vol_att = eai_vols_attach(app, s->tenant, j->volumes, s->id, &vcode, why, sizeof why);
        if (!s->vol_att) {
            refuse(app, r, "sandbox.session.create", "", vcode, detail1("/volumes", why));
            ses_free(s);
            return;
        }
    }
    struct eai_error *err = NULL;
    /* its limits from the node budget, until its end or its pause */
    if (ses_budget_take(s, &err) < 0) {
        eai_log_req(SES_COMPONENT, EAI_LOG_INFO, eai_req_id(r), "session refused: %s",
                    err && err->message ? err->message : "?");
        refuse_err(app, r, "sandbox.session.create", "", err, 0);
        eai_error_free(err);
        ses_free(s);
        return;
    }
    if (!s->limits || ses_start(s, &err) < 0) {
        enum eai_code code = err ? err->code : EAI_E_INTERNAL;
        if (code != EAI_E_SANDBOX_UNAVAILABLE && code != EAI_E_IMAGE_MISSING && code != EAI_E_INTERNAL &&
            code != EAI_E_EGRESS_UNSUPPORTED)
            code = EAI_E_SANDBOX_FAILED;
        eai_log_req(SES_COMPONENT, EAI_LOG_WARN, eai_req_id(r), "session not started: %s",
                    err && err->message ? err->message : "?");
        refuse(app, r, "sandbox.session.create", "", code,
               err && err->message ? detail1("", err->message) : NULL);
        eai_error_free(err);
        ses_free(s);
        return;
    }
    s->next = reg->list;
    reg->list = s;
    ses_persist(s);
    eai_metrics_add("eai_sessions_created_total", NULL, 1);
    ses_audit(app, s, "sandbox.session.create", "allow", NULL);
    /* answered when the sandbox is ready (or could not boot) */
    if (s->state == SES_FAILED) { /* told from inside the call */
        eai_reply_error(r, EAI_E_SANDBOX_FAILED, detail1("", s->message));
        return;
    }
    s->hold = eai_park_hold(reg->parks, r);
    if (!s->hold) {
        json_t *v = ses_view(s);
        eai_reply_json(r, 201, v);
    }
}

static void create_free(void *arg)
{
    struct create_job *j = arg;
    json_decref(j->body);
    json_decref(j->rec);
    json_decref(j->volumes);
    eai_error_free(j->err);
    eai_error_free(j->perr);
    free(j);
}

static const struct eai_park_ops create_ops = {
    .what = "session_create", .work = create_work, .answer = create_answer, .free = create_free,
};

/* ------------------------------------------------------------ forks */

static void fork_route_counted(struct eai_app *app, struct eai_req *r, json_t *body, int parked,
                               const struct eai_error *perr);

/* With handoff_dir, the tenant's parked sessions are counted on a worker
 * (storage) first; then fork_route_counted. */
struct fork_count_job {
    struct eai_app *app;
    char tenant[64];
    json_t *body;
    int parked;
    struct eai_error *err;
};

static void fork_count_work(void *arg)
{
    struct fork_count_job *j = arg;
    j->parked = ses_parked_count(j->app, j->tenant, &j->err);
}

static void fork_count_answer(struct eai_req *r, void *arg)
{
    struct fork_count_job *j = arg;
    json_t *body = j->body;
    j->body = NULL;
    if (r)
        fork_route_counted(j->app, r, body, j->parked, j->err);
    else
        json_decref(body);
}

static void fork_count_free(void *arg)
{
    struct fork_count_job *j = arg;
    json_decref(j->body);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops fork_count_ops = {
    .what = "session_fork_count", .work = fork_count_work, .answer = fork_count_answer, .free = fork_count_free,
};

static void fork_route(struct eai_app *app, struct eai_req *r, json_t *body)
{
    struct eai_sessions *reg = ses_reg(app);
    if (!reg || !ses_handoff_on(app)) {
        fork_route_counted(app, r, body, 0, NULL);
        return;
    }
    struct fork_count_job *j = calloc(1, sizeof *j);
    if (!j) {
        json_decref(body);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->app = app;
    j->body = body;
    snprintf(j->tenant, sizeof j->tenant, "%s", eai_req_tenant(r));
    eai_park(reg->parks, r, &fork_count_ops, j);
}

static void fork_answer(struct ses_fork *g)
{
    struct eai_req *r = g->hold ? eai_park_release(g->hold) : NULL;
    g->hold = NULL;
    if (r) {
        int ok = 0;
        const char *why = NULL;
        for (int i = 0; i < g->n; i++) {
            const json_t *v = json_array_get(g->items, (size_t)i);
            const char *st = json_string_value(json_object_get(v, "status"));
            if (st && (!strcmp(st, "running") || !strcmp(st, "ending") || !strcmp(st, "ended")))
                ok++;
            else if (!why)
                why = json_string_value(json_object_get(v, "message"));
        }
        if (!ok) {
            eai_reply_error(r, EAI_E_SANDBOX_FAILED, detail1("", why ? why : "the fork could not be restored"));
        } else if (g->single) {
            json_t *v = json_incref(json_array_get(g->items, 0));
            char loc[96];
            snprintf(loc, sizeof loc, "Location: /v1/sandbox/sessions/%s",
                     json_string_value(json_object_get(v, "id")));
            const char *h[] = {loc, NULL};
            eai_reply_json_headers(r, 201, v, h);
        } else {
            eai_reply_json(r, 201, json_pack("{s:O, s:s}", "items", g->items, "from_snapshot", g->snap->id));
        }
    }
    json_decref(g->items);
    free(g);
}

void ses_fork_settled(struct eai_session *s)
{
    struct ses_fork *g = s->fork;
    s->fork = NULL;
    free(s->restore_from);
    s->restore_from = NULL;
    json_t *v = ses_view(s);
    if (v)
        json_array_set_new(g->items, (size_t)s->fork_idx, v);
    if (g->snap->users > 0)
        g->snap->users--;
    if (--g->pending == 0 && !g->building)
        fork_answer(g);
}

void ses_fork_abort(struct eai_session *s)
{
    struct ses_fork *g = s->fork;
    s->fork = NULL;
    if (g->snap->users > 0)
        g->snap->users--;
    if (--g->pending > 0 || g->building)
        return;
    struct eai_req *r = g->hold ? eai_park_release(g->hold) : NULL;
    if (r)
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
    json_decref(g->items);
    free(g);
}

static int id_member(const json_t *body, const char *k, const char **out)
{
    const json_t *v = json_object_get(body, k);
    *out = NULL;
    if (!v)
        return 0;
    if (!json_is_string(v) || json_string_length(v) < 1 || json_string_length(v) > 128)
        return -1;
    *out = json_string_value(v);
    return 0;
}

/* POST /v1/sandbox/sessions with from_snapshot: count (1..fork_max_count)
 * new sessions restored from the snapshot, each with its own id, sandbox,
 * limits (the snapshot's, enforced apart) and copy of /tmp.  parked: the
 * tenant's parked sessions (fork_route), -1 with perr when not counted. */
static void fork_route_counted(struct eai_app *app, struct eai_req *r, json_t *body, int parked,
                               const struct eai_error *perr)
{
    struct eai_sessions *reg = ses_reg(app);
    const struct eai_config *cfg = app->cfg;
    const char *action = "sandbox.session.fork";
    static const char *const allowed[] = {"from_snapshot", "count", "idle_timeout_s", "ttl_s", "project_id",
                                          "agent_id", "run_id", "network", NULL};
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = !strcmp(*a, k);
        if (!ok) {
            char p[300];
            snprintf(p, sizeof p, "/%s", k);
            json_decref(body);
            refuse(app, r, action, "", EAI_E_VALIDATION_FAILED,
                   detail1(p, "a fork takes from_snapshot, count, network, idle_timeout_s, ttl_s and the ids; its"
                              " profile, image, limits and env are the snapshot's"));
            return;
        }
    }
    const char *sid = json_string_value(json_object_get(body, "from_snapshot"));
    int64_t count = 1, idle_s = -1, ttl_s = -1;
    int fmax = cfg ? cfg->sessions_fork_max_count : 10;
    const char *ids[3];
    const char *bad = NULL;
    if (!sid || !snp_id_ok(sid))
        bad = "/from_snapshot";
    else if (int_member(body, "count", 1, fmax, 1, &count) < 0)
        bad = "/count";
    else if (int_member(body, "idle_timeout_s", 1, cfg->sessions_max_idle_timeout_s, -1, &idle_s) < 0)
        bad = "/idle_timeout_s";
    else if (int_member(body, "ttl_s", 1, cfg->sessions_max_ttl_s, -1, &ttl_s) < 0)
        bad = "/ttl_s";
    else if (id_member(body, "project_id", &ids[0]) < 0)
        bad = "/project_id";
    else if (id_member(body, "agent_id", &ids[1]) < 0)
        bad = "/agent_id";
    else if (id_member(body, "run_id", &ids[2]) < 0)
        bad = "/run_id";
    if (bad) {
        char m[200];
        if (!strcmp(bad, "/from_snapshot"))
            snprintf(m, sizeof m, "must be a snapshot id (snp_...)");
        else if (!strcmp(bad, "/count"))
            snprintf(m, sizeof m, "must be an integer in 1..%d (sessions.fork_max_count)", fmax);
        else if (bad[1] == 'i' || bad[1] == 't')
            snprintf(m, sizeof m, "must be an integer within the configured bounds (docs/sessions.md)");
        else
            snprintf(m, sizeof m, "must be a string of 1..128 characters");
        json_decref(body);
        refuse(app, r, action, "", EAI_E_VALIDATION_FAILED, detail1(bad, m));
        return;
    }
    struct eai_snapshot *snap = snp_lookup(reg, eai_req_tenant(r), sid);
    if (!snap && snp_route_stored(app, r, 2, sid, NULL, 0)) {
        json_decref(body); /* another node's: 409, or 404 */
        return;
    }
    if (!snap) {
        json_decref(body);
        audit_deny(app, r, action, sid, "not_found");
        eai_reply_not_found(r, EAI_MISSING_SNAPSHOT);
        return;
    }
    if (snap->state != SNP_READY) {
        json_decref(body);
        refuse(app, r, action, sid, EAI_E_CONFLICT,
               detail1("/from_snapshot", "the snapshot is still being taken or is being deleted"));
        return;
    }
    int cap = cfg ? cfg->sessions_max_per_tenant : 10;
    if (parked < 0 || ses_live_count(reg, eai_req_tenant(r)) + parked + count > cap) {
        json_decref(body);
        refuse_session_limit(app, r, action, sid, cap, parked, perr);
        return;
    }
    struct eai_session probe;
    memset(&probe, 0, sizeof probe);
    int filled = snp_fill_session(app, snap, &probe);
    json_decref(probe.limits);
    json_decref(probe.env);
    if (filled < 0) {
        json_decref(body);
        refuse(app, r, action, sid, EAI_E_SESSIONS_UNSUPPORTED,
               detail1("/from_snapshot", "the snapshot's profile is not configured on this node, or has no sessions"));
        return;
    }
    /* its network: the allow list of this request (never the parent's),
     * checked against the profile as a create's; a snapshot of a session
     * with network is restored in a namespace of the fork's own (with an
     * empty list when the request gives none: everything refused) */
    json_t *egress = NULL;
    const json_t *net = json_object_get(body, "network");
    int snap_netns = json_is_true(json_object_get(snap->spec, "netns"));
    if (net) {
        json_t *pseudo = json_pack("{s:[s], s:O?, s:O?, s:O}", "command", "sh", "profile",
                                   json_object_get(snap->spec, "profile"), "image", json_object_get(snap->spec, "image"),
                                   "network", net);
        json_t *errors = NULL, *rec = NULL;
        const struct eai_profile *vp = NULL;
        struct eai_error *verr = NULL;
        if (pseudo && app->schema_execution)
            eai_schema_validate(app->schema_execution, pseudo, &errors);
        if (json_array_size(errors) > 0) {
            json_decref(pseudo);
            json_decref(body);
            refuse(app, r, action, sid, EAI_E_VALIDATION_FAILED, errors);
            return;
        }
        json_decref(errors);
        struct eai_exec_vopts o = {.files_max_total_bytes = cfg ? cfg->files_max_total_bytes : 8 << 20};
        if (!pseudo || eai_exec_validate(pseudo, NULL, app->profiles, app->nprofiles, &o, &rec, &vp, &verr) < 0) {
            enum eai_code code = verr ? verr->code : EAI_E_INTERNAL;
            json_t *d = verr && verr->details ? json_incref(verr->details) : NULL;
            eai_error_free(verr);
            json_decref(pseudo);
            json_decref(body);
            refuse(app, r, action, sid, code, d);
            return;
        }
        json_decref(pseudo);
        egress = json_deep_copy(json_object_get(rec, "egress"));
        json_decref(rec);
        if (json_array_size(egress) > 0 && !snap_netns) {
            json_decref(egress);
            json_decref(body);
            refuse(app, r, action, sid, EAI_E_VALIDATION_FAILED,
                   detail1("/network/egress", "the snapshot was taken of a session without network: its forks have"
                                              " none"));
            return;
        }
    }
    if (snap_netns && !egress)
        egress = json_array();
    char dir[4096];
    struct ses_fork *g = calloc(1, sizeof *g);
    if (!g || !(g->items = json_array()) || snp_dir(app, snap, dir, sizeof dir) < 0) {
        free(g);
        json_decref(egress);
        json_decref(body);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    g->snap = snap;
    g->single = !json_object_get(body, "count");
    g->n = (int)count;
    g->building = 1;
    for (int i = 0; i < g->n; i++)
        json_array_append_new(g->items, json_null());
    for (int i = 0; i < g->n; i++) {
        struct eai_session *s = calloc(1, sizeof *s);
        if (!s || snp_fill_session(app, snap, s) < 0 || !(s->restore_from = strdup(dir))) {
            if (s)
                ses_free(s);
            json_array_set_new(g->items, (size_t)i, json_pack("{s:s, s:s}", "status", "failed", "message",
                                                               "out of memory"));
            continue;
        }
        char uuid[37];
        eai_uuid_v4(uuid);
        snprintf(s->id, sizeof s->id, "ses_%s", uuid);
        snprintf(s->tenant, sizeof s->tenant, "%s", eai_req_tenant(r));
        snprintf(s->actor, sizeof s->actor, "%s", eai_req_key_id(r) ? eai_req_key_id(r) : "anonymous");
        snprintf(s->request_id, sizeof s->request_id, "%s", eai_req_id(r) ? eai_req_id(r) : "");
        snprintf(s->from_snapshot, sizeof s->from_snapshot, "%s", snap->id);
        if (ids[0])
            snprintf(s->project_id, sizeof s->project_id, "%s", ids[0]);
        if (ids[1])
            snprintf(s->agent_id, sizeof s->agent_id, "%s", ids[1]);
        if (ids[2])
            snprintf(s->run_id, sizeof s->run_id, "%s", ids[2]);
        if (idle_s > 0)
            s->idle_timeout_s = idle_s;
        if (ttl_s > 0)
            s->ttl_s = ttl_s;
        if (s->need_netns)
            s->egress = egress ? json_deep_copy(egress) : json_array();
        s->reg = reg;
        s->created_ms = s->last_used_ms = eai_now_ms();
        s->state = SES_STARTING;
        s->fork = g;
        s->fork_idx = i;
        g->pending++;
        snap->users++;
        snap->forks++;
        struct eai_error *err = NULL;
        if (ses_start(s, &err) < 0) {
            g->pending--;
            snap->users--;
            snap->forks--;
            eai_log_req(SES_COMPONENT, EAI_LOG_WARN, eai_req_id(r), "fork not started: %s",
                        err && err->message ? err->message : "?");
            json_array_set_new(g->items, (size_t)i,
                               json_pack("{s:s, s:s}", "status", "failed", "message",
                                         err && err->message ? err->message : "not started"));
            eai_error_free(err);
            s->fork = NULL;
            ses_free(s);
            continue;
        }
        s->next = reg->list;
        reg->list = s;
        ses_persist(s);
        eai_metrics_add("eai_sessions_created_total", NULL, 1);
        eai_metrics_add("eai_sessions_forked_total", NULL, 1);
        char reason[80];
        snprintf(reason, sizeof reason, "from=%s", snap->id);
        ses_audit(app, s, "sandbox.session.fork", "allow", reason);
    }
    json_decref(body);
    json_decref(egress);
    g->building = 0;
    if (g->pending == 0) {
        g->hold = NULL;
        /* nothing started (or all told from inside the call) */
        struct eai_parked *hold = eai_park_hold(reg->parks, r);
        g->hold = hold;
        if (!hold) {
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
            json_decref(g->items);
            free(g);
            return;
        }
        fork_answer(g);
        return;
    }
    g->hold = eai_park_hold(reg->parks, r);
    if (!g->hold)
        eai_reply_json(r, 202, json_pack("{s:O}", "items", g->items));
}

void eai_session_route_create(struct eai_app *app, struct eai_req *r)
{
    struct eai_sessions *reg = ses_reg(app);
    const char *tenant = eai_req_tenant(r);
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    if (!tenant) {
        eai_reply_error(r, EAI_E_UNAUTHENTICATED, NULL);
        return;
    }
    json_t *body = eai_req_body_json(r, 0);
    if (!body)
        return; /* replied 400 / 415 */
    if (!json_is_object(body)) {
        json_decref(body);
        refuse(app, r, "sandbox.session.create", "", EAI_E_VALIDATION_FAILED, detail1("", "must be an object"));
        return;
    }
    const char *field = NULL;
    if (eai_req_apply_token_ids(r, body, &field) < 0) { /* audited and answered 403 */
        json_decref(body);
        refuse(app, r, "sandbox.session.create", "", EAI_E_FORBIDDEN,
               detail1(strcmp(field, "project_id") ? "/agent_id" : "/project_id",
                       "differs from the claim of the gateway token"));
        return;
    }
    if (json_object_get(body, "from_snapshot") || json_object_get(body, "count")) {
        fork_route(app, r, body); /* a fork of a snapshot (session_snap.c) */
        return;
    }
    static const char *const allowed[] = {"profile", "image", "limits", "env", "idle_timeout_s", "ttl_s",
                                          "max_concurrent_executions", "network", "auto_resume", "auto_pause",
                                          "paused_ttl_s", "volumes",
                                          "project_id", "agent_id", "run_id", NULL};
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = !strcmp(*a, k);
        if (!ok) {
            char p[300];
            snprintf(p, sizeof p, "/%s", k);
            json_decref(body);
            refuse(app, r, "sandbox.session.create", "", EAI_E_VALIDATION_FAILED, detail1(p, "unknown field"));
            return;
        }
    }
    const struct eai_config *cfg = app->cfg;
    struct create_job *j = calloc(1, sizeof *j);
    if (!j) {
        json_decref(body);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    const char *bad = NULL;
    if (int_member(body, "idle_timeout_s", 1, cfg->sessions_max_idle_timeout_s, cfg->sessions_idle_timeout_s,
                   &j->idle_s) < 0)
        bad = "/idle_timeout_s";
    else if (int_member(body, "ttl_s", 1, cfg->sessions_max_ttl_s, cfg->sessions_ttl_s, &j->ttl_s) < 0)
        bad = "/ttl_s";
    else if (int_member(body, "max_concurrent_executions", 1, cfg->sessions_max_concurrent, 1, &j->maxc) < 0)
        bad = "/max_concurrent_executions";
    else if (json_object_get(body, "auto_resume") && !json_is_boolean(json_object_get(body, "auto_resume")))
        bad = "/auto_resume";
    else if (json_object_get(body, "auto_pause") && !json_is_boolean(json_object_get(body, "auto_pause")))
        bad = "/auto_pause";
    else if (int_member(body, "paused_ttl_s", 1, cfg->sessions_max_paused_ttl_s, cfg->sessions_paused_ttl_s,
                        &j->paused_ttl_s) < 0)
        bad = "/paused_ttl_s";
    j->auto_resume = json_is_true(json_object_get(body, "auto_resume"));
    j->auto_pause = !json_is_false(json_object_get(body, "auto_pause")); /* on by default */
    const json_t *lim = json_object_get(body, "limits");
    if (!bad && lim && (json_object_get(lim, "timeout_s") || json_object_get(lim, "output_bytes")))
        bad = "/limits";
    if (bad) {
        char m[200];
        if (!strcmp(bad, "/auto_resume") || !strcmp(bad, "/auto_pause"))
            snprintf(m, sizeof m, "must be a boolean");
        else if (!strcmp(bad, "/limits"))
            snprintf(m, sizeof m, "timeout_s and output_bytes are given per execution, not per session");
        else
            snprintf(m, sizeof m, "must be an integer within the configured bounds (docs/sessions.md)");
        json_decref(body);
        free(j);
        refuse(app, r, "sandbox.session.create", "", EAI_E_VALIDATION_FAILED, detail1(bad, m));
        return;
    }
    if (json_object_get(body, "volumes")) {
        /* mounted for the session's whole life (docs/volumes.md) */
        enum eai_code vcode;
        json_t *vdet = NULL;
        if (eai_vols_resolve(app, tenant, json_object_get(body, "volumes"), "/volumes", 1, &j->volumes, &vcode,
                             &vdet) < 0) {
            json_decref(body);
            free(j);
            refuse(app, r, "sandbox.session.create", "", vcode, vdet);
            return;
        }
    }
    /* the limits, image, profile and env are those of an execution: one
     * validation (schema, then profile maxima, image, env) for both */
    json_t *pseudo = json_pack("{s:[s]}", "command", "sh");
    /* project_id, agent_id, run_id: checked as an execution's (1..128
     * characters), kept by the session, inherited by its executions and
     * shown by GET /v1/runs/{run_id} (docs/sessions.md) */
    static const char *const copy[] = {"profile", "image", "limits", "env", "project_id", "agent_id", "run_id",
                                       "network", NULL};
    for (const char *const *c = copy; pseudo && *c; c++)
        if (json_object_get(body, *c))
            json_object_set(pseudo, *c, json_object_get(body, *c));
    json_decref(body);
    if (!pseudo) {
        json_decref(j->volumes);
        free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (app->schema_execution) {
        json_t *errors = NULL;
        eai_schema_validate(app->schema_execution, pseudo, &errors);
        if (json_array_size(errors) > 0) {
            json_decref(pseudo);
            json_decref(j->volumes);
            free(j);
            refuse(app, r, "sandbox.session.create", "", EAI_E_VALIDATION_FAILED, errors);
            return;
        }
        json_decref(errors);
    }
    j->app = app;
    j->body = pseudo;
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
    snprintf(j->actor, sizeof j->actor, "%s", eai_req_key_id(r) ? eai_req_key_id(r) : "anonymous");
    snprintf(j->request_id, sizeof j->request_id, "%s", eai_req_id(r) ? eai_req_id(r) : "");
    eai_park(reg->parks, r, &create_ops, j);
}

/* 429 rate_limited with Retry-After: too many pauses and resumes. */
static void refuse_rate(struct eai_app *app, struct eai_req *r, const char *action, const char *target,
                        int64_t retry_s)
{
    audit_deny(app, r, action, target, "rate_limited");
    char ra[48];
    snprintf(ra, sizeof ra, "Retry-After: %lld", (long long)retry_s);
    const char *h[] = {ra, NULL};
    json_t *env = eai_http_error_envelope(EAI_E_RATE_LIMITED, eai_req_lang(r), eai_req_id(r),
                                          detail1("", "too many pauses and resumes of this session or tenant per"
                                                      " minute (sessions.pause_per_minute,"
                                                      " sessions.tenant_pause_per_minute)"));
    if (env)
        eai_reply_json_headers(r, 429, env, h);
    else
        eai_reply_error(r, EAI_E_RATE_LIMITED, NULL);
}

/* ------------------------------------------------------------ get, list, delete */

/* The session {id} of r's tenant, or NULL after answering 404 (with a deny
 * audit event: another tenant's session is not found either). */
static struct eai_session *session_of(struct eai_app *app, struct eai_req *r, const char *action,
                                      void (*route)(struct eai_app *, struct eai_req *))
{
    struct eai_sessions *reg = ses_reg(app);
    const char *id = eai_req_param(r, "id");
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return NULL;
    }
    struct eai_session *s = ses_id_ok(id) ? ses_find(reg, eai_req_tenant(r), id) : NULL;
    if (!s && ses_id_ok(id) && ses_store_on(app)) {
        /* not in this node's memory: its stored record answers (a restart
         * never turns a known id into 404) */
        ses_route_stored(app, r, action, route);
        return NULL;
    }
    if (!s)
        refuse(app, r, action, ses_id_ok(id) ? id : "", EAI_E_NOT_FOUND, NULL);
    else if (strcmp(action, "sandbox.session.get") != 0 && ses_claim_wait(s, r, route))
        return NULL; /* being parked, or restored here (session_handoff.c): it waits or retries */
    return s;
}

void eai_session_route_get(struct eai_app *app, struct eai_req *r)
{
    struct eai_session *s = session_of(app, r, "sandbox.session.get", eai_session_route_get);
    if (!s)
        return;
    json_t *v = ses_view(s);
    if (v)
        eai_reply_json(r, 200, v);
    else
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
}

void eai_session_route_list(struct eai_app *app, struct eai_req *r)
{
    struct eai_sessions *reg = ses_reg(app);
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    if (ses_store_on(app)) {
        ses_list_stored(app, r);
        return;
    }
    const char *status = eai_req_query(r, "status");
    json_t *items = json_array();
    for (struct eai_session *s = reg->list; s && items; s = s->next) {
        if (strcmp(s->tenant, eai_req_tenant(r)) != 0)
            continue;
        if (status && strcmp(status, "live") == 0 && !ses_live(s))
            continue;
        json_t *v = ses_view(s);
        if (v && status && strcmp(status, "live") != 0 && strcmp(status, json_string_value(json_object_get(v, "status"))))
            json_decref(v);
        else if (v)
            json_array_append_new(items, v);
    }
    if (!items) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

void eai_session_route_delete(struct eai_app *app, struct eai_req *r)
{
    struct eai_session *s = session_of(app, r, "sandbox.session.delete", eai_session_route_delete);
    if (!s)
        return;
    json_t *ev = eai_req_audit_event(r, "sandbox.session.delete", s->id, "allow", NULL);
    if (ev)
        eai_req_audit_async(app, s->tenant, ev);
    if (ses_live(s) && s->state != SES_ENDING && !s->hold) {
        ses_end(s, "deleted");
        /* answered with the final view once the sandbox is gone */
        s->hold = eai_park_hold(s->reg->parks, r);
        s->hold_is_delete = 1;
        s->hold_is_pause = 0;
        if (s->hold)
            return;
    } else if (ses_live(s)) {
        ses_end(s, "deleted");
    }
    json_t *v = ses_view(s);
    if (v)
        eai_reply_json(r, ses_live(s) ? 202 : 200, v);
    else
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
}

/* ------------------------------------------------------------ executions */

void eai_session_route_exec(struct eai_app *app, struct eai_req *r)
{
    struct eai_session *s = session_of(app, r, "sandbox.execute", eai_session_route_exec);
    if (!s)
        return;
    json_t *body = eai_req_body_json(r, 0);
    if (!body)
        return;
    if (!json_is_object(body)) {
        json_decref(body);
        refuse(app, r, "sandbox.execute", s->id, EAI_E_VALIDATION_FAILED, detail1("", "must be an object"));
        return;
    }
    if (s->state == SES_PAUSED || s->state == SES_PAUSING || s->state == SES_RESUMING) {
        struct eai_error *err = NULL;
        /* paused by its idle timeout or by a stop of eaid: resumed by the
         * call, as with auto_resume; paused by its user: only with it */
        int transparent = s->auto_resume || (s->paused_by[0] && strcmp(s->paused_by, "user") != 0);
        if (!transparent && s->state != SES_RESUMING) {
            json_decref(body);
            refuse(app, r, "sandbox.execute", s->id, EAI_E_SESSION_PAUSED,
                   detail1("", "resume it (POST .../resume) or create it with auto_resume"));
            return;
        }
        /* auto_resume: the execution waits in the backend until it runs */
        int64_t retry = 0;
        if (s->state == SES_PAUSED && !ses_rate_take(s, &retry)) {
            json_decref(body);
            refuse_rate(app, r, "sandbox.execute", s->id, retry);
            return;
        }
        if (s->state != SES_RESUMING && ses_resume(s, &err) < 0) {
            json_decref(body);
            refuse_err(app, r, "sandbox.execute", s->id, err, 0);
            eai_error_free(err);
            return;
        }
        ses_audit(app, s, "sandbox.session.resume", "allow", s->auto_resume ? "auto_resume" : s->paused_by);
    } else if (s->state != SES_RUNNING) {
        json_decref(body);
        refuse(app, r, "sandbox.execute", s->id, EAI_E_SESSION_ENDED,
               detail1("", s->state == SES_STARTING ? "the session is still starting" : "the session has ended"));
        return;
    }
    static const char *const allowed[] = {"command", "stdin", "stdin_mode", "env", "timeout_s", "output_bytes",
                                          "files", "collect", "project_id", "agent_id", "run_id", NULL};
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = !strcmp(*a, k);
        if (!ok) {
            char p[300];
            snprintf(p, sizeof p, "/%s", k);
            json_decref(body);
            refuse(app, r, "sandbox.execute", s->id, EAI_E_VALIDATION_FAILED, detail1(p, "unknown field"));
            return;
        }
    }
    if (json_object_get(body, "env") && !json_is_object(json_object_get(body, "env"))) {
        json_decref(body);
        refuse(app, r, "sandbox.execute", s->id, EAI_E_VALIDATION_FAILED, detail1("/env", "must be an object"));
        return;
    }
    /* the session's profile, image and limits; timeout and output cap per
     * execution; the session's env under the execution's */
    json_t *limits = json_deep_copy(s->limits);
    json_t *env = json_deep_copy(s->env);
    json_t *eb = json_object();
    if (!limits || !env || !eb) {
        json_decref(limits);
        json_decref(env);
        json_decref(eb);
        json_decref(body);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (json_object_get(body, "timeout_s"))
        json_object_set(limits, "timeout_s", json_object_get(body, "timeout_s"));
    if (json_object_get(body, "output_bytes"))
        json_object_set(limits, "output_bytes", json_object_get(body, "output_bytes"));
    if (json_is_object(json_object_get(body, "env")))
        json_object_update(env, json_object_get(body, "env"));
    json_object_set_new(eb, "profile", json_string(s->prof->name));
    json_object_set_new(eb, "image", json_string(s->image));
    json_object_set_new(eb, "limits", limits);
    json_object_set_new(eb, "env", env);
    static const char *const copy[] = {"command", "stdin", "stdin_mode", "files", "collect", "project_id",
                                       "agent_id", "run_id", NULL};
    for (const char *const *c = copy; *c; c++)
        if (json_object_get(body, *c))
            json_object_set(eb, *c, json_object_get(body, *c));
    json_decref(body);
    /* the session's ids unless the execution gives its own */
    const char *const idk[] = {"project_id", "agent_id", "run_id"};
    const char *const idv[] = {s->project_id, s->agent_id, s->run_id};
    for (int n = 0; n < 3; n++)
        if (idv[n][0] && !json_object_get(eb, idk[n]))
            json_object_set_new(eb, idk[n], json_string(idv[n]));
    s->last_used_ms = eai_now_ms();
    s->executions++;
    ses_persist(s);
    eai_exec_create_in_session(app, r, eb, s->id);
}

/* ------------------------------------------------------------ pause, resume */

static void pause_route(struct eai_app *app, struct eai_req *r, int pause)
{
    const char *action = pause ? "sandbox.session.pause" : "sandbox.session.resume";
    struct eai_session *s = session_of(app, r, action, pause ? eai_session_route_pause : eai_session_route_resume);
    if (!s)
        return;
    enum ses_state done = pause ? SES_PAUSED : SES_RUNNING;
    enum ses_state from = pause ? SES_RUNNING : SES_PAUSED;
    if (s->state != done && s->state != from) {
        int ended = !ses_live(s) || s->state == SES_ENDING;
        refuse(app, r, action, s->id, ended ? EAI_E_SESSION_ENDED : EAI_E_CONFLICT,
               detail1("/status", ended ? "the session has ended" : "the session is pausing, resuming or starting"));
        return;
    }
    if (s->state == from) {
        if (s->hold) {
            refuse(app, r, action, s->id, EAI_E_CONFLICT, detail1("", "another call on this session is waiting"));
            return;
        }
        struct eai_error *err = NULL;
        int64_t retry = 0;
        if (!ses_rate_take(s, &retry)) {
            refuse_rate(app, r, action, s->id, retry);
            return;
        }
        if (pause)
            snprintf(s->paused_by, sizeof s->paused_by, "user");
        if ((pause ? ses_pause(s, &err) : ses_resume(s, &err)) < 0) {
            if (pause)
                s->paused_by[0] = 0;
            refuse_err(app, r, action, s->id, err, 1);
            eai_error_free(err);
            return;
        }
        json_t *ev = eai_req_audit_event(r, action, s->id, "allow", NULL);
        if (ev)
            eai_req_audit_async(app, s->tenant, ev);
        /* answered once the backend has paused / resumed it */
        s->hold = eai_park_hold(s->reg->parks, r);
        s->hold_is_pause = 1;
        s->hold_is_delete = 0;
        if (s->hold)
            return;
    }
    json_t *v = ses_view(s);
    if (v)
        eai_reply_json(r, s->state == done ? 200 : 202, v);
    else
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
}

void eai_session_route_snapshot(struct eai_app *app, struct eai_req *r)
{
    struct eai_session *s = session_of(app, r, "sandbox.snapshot.create", eai_session_route_snapshot);
    if (s)
        ses_snapshot_create(app, r, s);
}

void eai_session_route_pause(struct eai_app *app, struct eai_req *r)
{
    pause_route(app, r, 1);
}

void eai_session_route_resume(struct eai_app *app, struct eai_req *r)
{
    pause_route(app, r, 0);
}
