/* Sessions: the registry of this node's sessions, their lifetimes, the
 * backend's callbacks and their end (session_int.h, docs/sessions.md). */
#include <stdio.h>
#include <sys/statvfs.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "session/session_int.h"
#include "vol/volume.h"
#include "exec/budget.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "obs/metrics.h"
#include "net/egress_host.h"

struct eai_sessions *ses_reg(struct eai_app *app)
{
    return app && !app->shutting_down && app->sessions && !app->sessions->stopped ? app->sessions : NULL;
}

int ses_id_ok(const char *id)
{
    if (!id || strncmp(id, "ses_", 4) != 0 || strlen(id) != 40)
        return 0;
    for (const char *p = id + 4; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == '-'))
            return 0;
    return 1;
}

struct eai_session *ses_find(struct eai_sessions *reg, const char *tenant, const char *id)
{
    for (struct eai_session *s = reg ? reg->list : NULL; s; s = s->next)
        if (id && tenant && !strcmp(s->id, id) && !strcmp(s->tenant, tenant))
            return s;
    return NULL;
}

int ses_live(const struct eai_session *s)
{
    return s->state != SES_ENDED && s->state != SES_FAILED && s->state != SES_INTERRUPTED;
}

int ses_live_count(const struct eai_sessions *reg, const char *tenant)
{
    int n = 0;
    for (const struct eai_session *s = reg ? reg->list : NULL; s; s = s->next)
        n += ses_live(s) && (!tenant || !strcmp(s->tenant, tenant));
    return n;
}

json_t *eai_sessions_of_run(struct eai_app *app, const char *tenant, const char *run_id, size_t max,
                            int *truncated)
{
    struct eai_sessions *reg = ses_reg(app);
    json_t *out = json_array();
    *truncated = 0;
    if (!reg || !out)
        return out;
    /* the registry is newest first: prepend, so the answer is oldest first */
    for (struct eai_session *s = reg->list; s; s = s->next) {
        if (strcmp(s->tenant, tenant) != 0 || strcmp(s->run_id, run_id) != 0)
            continue;
        if (json_array_size(out) >= max) {
            *truncated = 1;
            break;
        }
        json_t *v = ses_view(s);
        if (v)
            json_array_insert_new(out, 0, v);
    }
    return out;
}

int eai_sessions_live(const struct eai_app *app)
{
    return app ? ses_live_count(app->sessions, NULL) : 0;
}

const struct eai_isolation_ops *ses_profile_ops(const struct eai_profile *p)
{
    const struct eai_isolation_ops *ops = p && p->iso && p->iso->desc ? p->iso->desc->ops : NULL;
    return ops && ops->session_create && ops->session_destroy && ops->session_busy && ops->session_file ? ops
                                                                                                         : NULL;
}

const struct eai_isolation_ops *ses_ops(const struct eai_session *s)
{
    return ses_profile_ops(s->prof);
}

void ses_free(struct eai_session *s)
{
    ses_budget_give(s);
    free(s->restore_from);
    eai_vols_detach(NULL, s->vol_att);
    json_decref(s->volumes);
    json_decref(s->limits);
    json_decref(s->env);
    json_decref(s->egress);
    json_decref(s->net_summary);
    free(s);
}

/* ------------------------------------------------------------ views */

static json_t *time_or_null(int64_t ms)
{
    char t[32];
    if (!ms)
        return json_null();
    eai_time_rfc3339(ms, t);
    return json_string(t);
}

const char *ses_state_name(enum ses_state st)
{
    static const char *const n[] = {"starting", "running", "ending", "ended", "failed", "pausing", "paused",
                                    "resuming", "interrupted"};
    return n[st];
}

static double ses_duration_s(const struct eai_session *s)
{
    int64_t from = s->ready_ms ? s->ready_ms : s->created_ms;
    int64_t to = s->ended_ms ? s->ended_ms : eai_now_ms();
    return to > from ? (double)(to - from) / 1000.0 : 0;
}

/* Its lifetime less the time it spent paused (on disk, not in memory). */
static double ses_running_s(const struct eai_session *s)
{
    double d = ses_duration_s(s) - s->paused_s;
    if (s->paused_ms) {
        int64_t to = s->ended_ms ? s->ended_ms : eai_now_ms();
        d -= to > s->paused_ms ? (double)(to - s->paused_ms) / 1000.0 : 0;
    }
    return d > 0 ? d : 0;
}

/* Seconds spent paused (the current pause included). */
static double ses_paused_total_s(const struct eai_session *s)
{
    double d = s->paused_s;
    if (s->paused_ms) {
        int64_t to = s->ended_ms ? s->ended_ms : eai_now_ms();
        d += to > s->paused_ms ? (double)(to - s->paused_ms) / 1000.0 : 0;
    }
    return d;
}

/* The usage of a session (its view once ended, its usage event): running
 * and paused time billed apart (issue 31 item 6): memory MB-seconds while
 * running (peak x running seconds), checkpoint MB-seconds while paused (the
 * checkpoint's bound, its memory limit, x paused seconds). */
static json_t *ses_usage(const struct eai_session *s)
{
    double running = ses_running_s(s), paused = ses_paused_total_s(s);
    double ckpt_mb = (double)s->memory_bytes / (1024.0 * 1024.0);
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "cpu_seconds", s->cpu_seconds, "memory_mb_seconds",
                     s->peak_mb * running, "duration_s", ses_duration_s(s), "running_s", running, "paused_s",
                     paused, "checkpoint_mb_seconds", ckpt_mb * paused);
}

json_t *ses_view(const struct eai_session *s)
{
    json_t *v = json_pack("{s:s, s:s, s:s, s:s, s:O, s:I, s:I, s:i, s:o, s:o, s:o, s:o, s:o, s:I}",
                          "id", s->id, "status", ses_state_name(s->state), "profile", s->profile,
                          "image", s->image, "limits", s->limits,
                          "idle_timeout_s", (json_int_t)s->idle_timeout_s, "ttl_s", (json_int_t)s->ttl_s,
                          "max_concurrent_executions", s->max_concurrent,
                          "created_at", time_or_null(s->created_ms),
                          "expires_at", time_or_null(s->created_ms + s->ttl_s * 1000),
                          "last_used_at", time_or_null(s->last_used_ms),
                          "ended_at", time_or_null(s->ended_ms),
                          "end_reason", s->end_reason[0] ? json_string(s->end_reason) : json_null(),
                          "executions", (json_int_t)s->executions);
    if (!v)
        return NULL;
    json_object_set_new(v, "auto_resume", json_boolean(s->auto_resume));
    json_object_set_new(v, "auto_pause", json_boolean(s->auto_pause));
    json_object_set_new(v, "paused_ttl_s", json_integer(s->paused_ttl_s));
    json_object_set_new(v, "project_id", s->project_id[0] ? json_string(s->project_id) : json_null());
    json_object_set_new(v, "agent_id", s->agent_id[0] ? json_string(s->agent_id) : json_null());
    json_object_set_new(v, "run_id", s->run_id[0] ? json_string(s->run_id) : json_null());
    json_object_set_new(v, "paused_at", time_or_null(s->paused_ms));
    json_object_set_new(v, "from_snapshot", s->from_snapshot[0] ? json_string(s->from_snapshot) : json_null());
    json_object_set_new(v, "network", json_pack("{s:o}", "egress", s->egress ? json_incref(s->egress) : json_array()));
    json_object_set_new(v, "volumes", s->volumes ? json_incref(s->volumes) : json_array());
    if (s->net_summary)
        json_object_set(json_object_get(v, "network"), "summary", s->net_summary);
    json_object_set_new(v, "paused_by", s->state == SES_PAUSED && s->paused_by[0] ? json_string(s->paused_by)
                                                                                 : json_null());
    if (s->state == SES_ENDED || s->state == SES_INTERRUPTED) {
        json_t *u = ses_usage(s);
        if (u && s->interrupted)
            json_object_set_new(u, "partial", json_true());
        json_object_set_new(v, "usage", u ? u : json_null());
    } else {
        json_object_set_new(v, "usage", json_null());
    }
    if (s->message[0] && !ses_live(s))
        json_object_set_new(v, "message", json_string(s->message));
    return v;
}

/* ------------------------------------------------------------ audit and usage */

static json_t *audit_event(const struct eai_session *s, const char *action, const char *decision,
                           const char *reason)
{
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "time", now, "tenant_id",
                     s->tenant, "actor", s->actor[0] ? s->actor : "system", "action", action, "target", s->id,
                     "decision", decision ? decision : "allow", "reason", reason ? reason : "", "request_id",
                     s->request_id, "trace_id", "");
}

void ses_audit(struct eai_app *app, const struct eai_session *s, const char *action, const char *decision,
               const char *reason)
{
    json_t *ev = audit_event(s, action, decision, reason);
    if (ev)
        eai_req_audit_async(app, s->tenant, ev);
}

struct end_job {
    struct eai_app *app;
    char tenant[64], id[48];
    json_t *usage, *audit;
    int rc;
    struct eai_error *err;
};

static void end_work(void *arg)
{
    struct end_job *j = arg;
    const struct eai_storage_ops *st = j->app->store;
    if (st->outbox_append)
        j->rc = st->outbox_append(j->app->storage.self, j->tenant, j->usage, j->audit, &j->err);
    else
        j->rc = st->audit_append(j->app->storage.self, j->tenant, j->audit, &j->err);
}

static void end_answer(struct eai_req *r, void *arg)
{
    (void)r;
    struct end_job *j = arg;
    if (j->rc < 0)
        eai_log(SES_COMPONENT, EAI_LOG_ERROR, "session %s: recording its end failed: %s", j->id,
                j->err && j->err->message ? j->err->message : "?");
    else if (!j->app->store->outbox_append)
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s: the storage backend has no outbox_append: its"
                " lifetime usage is not billed", j->id);
}

static void end_free(void *arg)
{
    struct end_job *j = arg;
    json_decref(j->usage);
    json_decref(j->audit);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops end_ops = {
    .what = "session_end", .work = end_work, .answer = end_answer, .free = end_free,
};

/* The usage event (API.md "FinOps") of the session's whole lifetime and
 * the audit event of its end, in one transaction on a worker. */
void ses_record_end(struct eai_sessions *reg, struct eai_session *s)
{
    struct end_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    j->app = reg->app;
    snprintf(j->tenant, sizeof j->tenant, "%s", s->tenant);
    snprintf(j->id, sizeof j->id, "%s", s->id);
    double dur = ses_duration_s(s);
    json_t *started = time_or_null(s->ready_ms ? s->ready_ms : s->created_ms);
    json_t *ended = time_or_null(s->ended_ms);
    j->usage = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:O, s:O, s:s, s:s, s:I}", "id", id,
                         "kind", "session", "tenant_id", s->tenant, "session_id", s->id, "profile",
                         s->profile, "backend", s->backend, "cpu_seconds", s->cpu_seconds,
                         "memory_mb_seconds", s->peak_mb * ses_running_s(s), "duration_s", dur, "started_at", started,
                         "finished_at", ended, "created_at", now, "end_reason", s->end_reason, "executions",
                         (json_int_t)s->executions);
    json_decref(started);
    json_decref(ended);
    json_t *u = ses_usage(s);
    if (j->usage && u) /* running and paused time apart */
        json_object_update_missing(j->usage, u);
    json_decref(u);
    if (j->usage && s->interrupted)
        json_object_set_new(j->usage, "partial", json_true());
    j->audit = audit_event(s, "sandbox.session.end", "allow", s->end_reason);
    if (!j->usage || !j->audit) {
        end_free(j);
        return;
    }
    eai_park(reg->parks, NULL, &end_ops, j);
}

/* The session's namespace and grant go (its end): the log's summary kept. */
static void ses_close_lease(struct eai_session *s)
{
    if (!s->lease)
        return;
    json_t *log = eai_egress_lease_close(s->lease);
    s->lease = NULL;
    if (log) {
        json_decref(s->net_summary);
        s->net_summary = eai_egress_log_summary(log);
        ses_audit(s->reg->app, s, "sandbox.session.network.end", "allow", NULL);
        json_decref(log);
    }
}

/* ------------------------------------------------------------ backend callbacks */

static void answer_hold(struct eai_session *s)
{
    if (s->fork)
        ses_fork_settled(s); /* a fork: ready or failed */
    if (!s->hold)
        return;
    struct eai_req *r = eai_park_release(s->hold);
    s->hold = NULL;
    if (!r)
        return;
    if (s->state == SES_FAILED) {
        eai_reply_error(r, EAI_E_SANDBOX_FAILED,
                        json_pack("[{s:s, s:s}]", "path", "", "message", s->message[0] ? s->message : "boot failed"));
        return;
    }
    json_t *v = ses_view(s);
    if (!v) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (s->hold_is_delete || s->hold_is_pause) {
        eai_reply_json(r, 200, v);
        return;
    }
    char loc[96];
    snprintf(loc, sizeof loc, "Location: /v1/sandbox/sessions/%s", s->id);
    const char *h[] = {loc, NULL};
    eai_reply_json_headers(r, 201, v, h);
}

static void cb_ready(void *arg, const struct eai_error *err)
{
    struct eai_session *s = arg;
    struct eai_sessions *reg = s->reg;
    if (reg->stopping || reg->stopped) { /* stopping: eai_sessions_free frees it */
        if (err)
            s->backend_live = 0;
        return;
    }
    if (ses_claim_ready(s, err)) /* restored from the handoff directory */
        return;
    if (err) {
        s->backend_live = 0;
        ses_close_lease(s);
        eai_vols_detach(reg->app, s->vol_att); /* no sandbox: the volumes are free */
        s->vol_att = NULL;
        s->state = SES_FAILED;
        ses_budget_give(s);
        s->ended_ms = eai_now_ms();
        snprintf(s->end_reason, sizeof s->end_reason, "boot_failed");
        snprintf(s->message, sizeof s->message, "%s", err->message ? err->message : "boot failed");
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s did not boot: %s", s->id, s->message);
        ses_audit(reg->app, s, "sandbox.session.end", "allow", "boot_failed");
        ses_persist(s);
        answer_hold(s);
        return;
    }
    s->ready_ms = s->last_used_ms = eai_now_ms();
    if (s->state == SES_STARTING)
        s->state = SES_RUNNING;
    ses_persist(s);
    eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s ready in %lld ms (tenant %s, profile %s)", s->id,
            (long long)(s->ready_ms - s->created_ms), s->tenant, s->prof->name);
    answer_hold(s);
    if (s->state == SES_ENDING) /* deleted while booting */
        ses_ops(s)->session_destroy(s->prof->iso->self, s->id);
}

static void cb_end(void *arg, const struct eai_iso_session_end *end)
{
    struct eai_session *s = arg;
    struct eai_sessions *reg = s->reg;
    s->backend_live = 0;
    if (reg->stopped)
        return;
    if (ses_park_end(s, end)) /* its local sandbox, removed once parked */
        return;
    ses_close_lease(s);
    eai_vols_detach(reg->app, s->vol_att); /* the sandbox is gone: the next writer may mount them */
    s->vol_att = NULL;
    s->ended_ms = eai_now_ms();
    s->cpu_seconds = s->cpu_before + end->cpu_seconds; /* (cpu_before: its earlier nodes') */
    s->peak_mb = end->peak_memory_mb;
    if (s->state != SES_ENDING || !s->end_reason[0]) {
        /* it died on its own */
        snprintf(s->end_reason, sizeof s->end_reason, "%s", end->oom ? "oom_killed" : "crashed");
        if (end->message)
            snprintf(s->message, sizeof s->message, "%s", end->message);
    }
    s->state = SES_ENDED;
    ses_budget_give(s); /* its sandbox is gone */
    eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s ended: %s (%lld executions, %.3f cpu s)", s->id,
            s->end_reason, (long long)s->executions, s->cpu_seconds);
    eai_metrics_add("eai_sessions_ended_total", NULL, 1);
    ses_record_end(reg, s);
    ses_persist(s);
    answer_hold(s);
}

/* The hold of a pause / resume request: the view, or the error. */
static void answer_pause_hold(struct eai_session *s, const struct eai_error *err)
{
    if (!s->hold || !s->hold_is_pause)
        return;
    if (!err) {
        answer_hold(s);
        return;
    }
    struct eai_req *r = eai_park_release(s->hold);
    s->hold = NULL;
    if (r)
        eai_reply_error(r, EAI_E_SANDBOX_FAILED,
                        json_pack("[{s:s, s:s}]", "path", "", "message", err->message ? err->message : "?"));
}

static void drain_kept(struct eai_session *s, const struct eai_error *err);

static void cb_paused(void *arg, const struct eai_error *err)
{
    struct eai_session *s = arg;
    if (s->drain_wait && s->reg->stopping && !s->reg->stopped) {
        drain_kept(s, err);
        return;
    }
    if (s->reg->stopping || s->reg->stopped)
        return;
    if (err) {
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s: pause failed: %s", s->id, err->message);
        if (s->state == SES_PAUSING) {
            s->state = SES_RUNNING;
            s->paused_by[0] = 0;
        }
    } else if (s->state == SES_PAUSING) {
        s->state = SES_PAUSED;
        ses_budget_give(s); /* a paused session holds no memory or CPU of the node */
        s->paused_ms = eai_now_ms();
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s paused", s->id);
    }
    ses_persist(s);
    answer_pause_hold(s, err);
    if (!err && s->state == SES_PAUSED && s->resume_asked) {
        /* a call came meanwhile (auto_resume) */
        s->resume_asked = 0;
        struct eai_error *e = NULL;
        if (ses_resume(s, &e) < 0) /* the node budget is held by others: it stays paused */
            eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s: not resumed: %s", s->id,
                    e && e->message ? e->message : "?");
        eai_error_free(e);
    } else if (!err && s->state == SES_PAUSED && ses_park_on(s)) {
        ses_park(s); /* idle: parked for any replica (session_handoff.c) */
    }
}

static void cb_resumed(void *arg, const struct eai_error *err)
{
    struct eai_session *s = arg;
    if (s->reg->stopping || s->reg->stopped)
        return;
    if (s->paused_ms) {
        s->paused_s += (double)(eai_now_ms() - s->paused_ms) / 1000.0;
        s->paused_ms = 0;
    }
    if (!err && s->state == SES_RESUMING) {
        s->state = SES_RUNNING;
        s->paused_by[0] = 0;
        s->last_used_ms = eai_now_ms();
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s resumed", s->id);
    } else if (err) {
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s: resume failed: %s", s->id, err->message);
    }
    ses_persist(s);
    answer_pause_hold(s, err);
}

static const struct eai_iso_session_callbacks ses_callbacks = {
    .size = sizeof(struct eai_iso_session_callbacks),
    .on_ready = cb_ready,
    .on_end = cb_end,
    .on_paused = cb_paused,
    .on_resumed = cb_resumed,
};

int ses_pause_admit(const struct eai_session *s, struct eai_error **err)
{
    const struct eai_app *app = s->reg->app;
    const struct eai_config *cfg = app->cfg;
    int64_t quota = cfg ? cfg->sessions_checkpoint_quota : 8LL << 30;
    int64_t floor_b = cfg ? cfg->sessions_min_free_bytes : 1LL << 30;
    int64_t used = 0;
    for (const struct eai_session *o = s->reg->list; o; o = o->next)
        if (o != s && !strcmp(o->tenant, s->tenant) && (o->state == SES_PAUSING || o->state == SES_PAUSED))
            used += o->memory_bytes;
    if (used + s->memory_bytes > quota) {
        eai_error_set(err, EAI_E_STORAGE_QUOTA_EXCEEDED,
                      "the tenant's paused sessions would hold %lld bytes of checkpoints, over its quota of %lld"
                      " (sessions.checkpoint_quota_bytes; a paused session counts its memory limit)",
                      (long long)(used + s->memory_bytes), (long long)quota);
        return -1;
    }
    struct statvfs vfs;
    const char *dir = cfg && cfg->data_dir ? cfg->data_dir : ".";
    if (statvfs(dir, &vfs) == 0) {
        int64_t avail = (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
        if (avail - s->memory_bytes < floor_b) {
            eai_error_set(err, EAI_E_INSUFFICIENT_STORAGE,
                          "the data disk has %lld bytes free: a checkpoint of up to %lld bytes would leave less"
                          " than sessions.min_free_bytes (%lld)", (long long)avail, (long long)s->memory_bytes,
                          (long long)floor_b);
            return -1;
        }
    }
    return 0;
}

int ses_rate_take(struct eai_session *s, int64_t *retry_after_s)
{
    struct eai_sessions *reg = s->reg;
    const struct eai_config *cfg = reg->app->cfg;
    int per_ses = cfg ? cfg->sessions_pause_per_minute : 30;
    int per_tenant = cfg ? cfg->sessions_tenant_pause_per_minute : 120;
    int64_t now = eai_now_ms();
    if (now - s->rate_start_ms >= 60000) {
        s->rate_start_ms = now;
        s->rate_n = 0;
    }
    if (!reg->rates)
        reg->rates = json_object();
    json_t *t = reg->rates ? json_object_get(reg->rates, s->tenant) : NULL;
    int64_t tstart = t ? json_integer_value(json_array_get(t, 0)) : 0;
    int64_t tn = t ? json_integer_value(json_array_get(t, 1)) : 0;
    if (now - tstart >= 60000) {
        tstart = now;
        tn = 0;
    }
    if (s->rate_n >= per_ses || tn >= per_tenant) {
        int64_t from = s->rate_n >= per_ses ? s->rate_start_ms : tstart;
        *retry_after_s = (from + 60000 - now + 999) / 1000;
        if (*retry_after_s < 1)
            *retry_after_s = 1;
        return 0;
    }
    s->rate_n++;
    if (reg->rates)
        json_object_set_new(reg->rates, s->tenant, json_pack("[I, I]", (json_int_t)tstart, (json_int_t)(tn + 1)));
    return 1;
}

/* ------------------------------------------------------------ node budget */

int ses_budget_take(struct eai_session *s, struct eai_error **err)
{
    struct eai_budget *b = s->reg && s->reg->app ? s->reg->app->budget : NULL;
    /* a backend whose sandboxes run elsewhere holds nothing of this node */
    if (s->budget_held || !b || !s->prof || !eai_budget_counts_backend(s->prof->backend))
        return 0;
    enum eai_budget_fit fit = eai_budget_take(b, s->tenant, s->memory_bytes, s->cpu_millis);
    if (fit != EAI_BUDGET_FITS) {
        struct eai_error *e = eai_budget_refusal(b, fit, s->tenant, s->memory_bytes, s->cpu_millis);
        if (!e)
            return eai_error_set(err, EAI_E_NODE_BUDGET_EXHAUSTED, "node budget");
        eai_error_propagate(err, e);
        return -1;
    }
    s->budget_held = 1;
    return 0;
}

void ses_budget_give(struct eai_session *s)
{
    if (!s->budget_held)
        return;
    s->budget_held = 0;
    struct eai_budget *b = s->reg && s->reg->app ? s->reg->app->budget : NULL;
    eai_budget_give(b, s->tenant, s->memory_bytes, s->cpu_millis);
}

int ses_pause(struct eai_session *s, struct eai_error **err)
{
    const struct eai_isolation_ops *ops = ses_ops(s);
    if (ses_pause_admit(s, err) < 0)
        return -1;
    if (!ops->session_pause || !ops->session_resume)
        return eai_error_set(err, EAI_E_SESSIONS_UNSUPPORTED, "the backend cannot pause sessions");
    if (ops->session_pause(s->prof->iso->self, s->id, err) < 0)
        return -1;
    if (!s->paused_by[0])
        snprintf(s->paused_by, sizeof s->paused_by, "user");
    s->state = SES_PAUSING;
    ses_persist(s);
    return 0;
}

int ses_resume(struct eai_session *s, struct eai_error **err)
{
    const struct eai_isolation_ops *ops = ses_ops(s);
    if (s->state == SES_PAUSING) { /* once paused */
        s->resume_asked = 1;
        return 0;
    }
    if (!ops->session_resume)
        return eai_error_set(err, EAI_E_SESSIONS_UNSUPPORTED, "the backend cannot resume sessions");
    int took = !s->budget_held;
    if (ses_budget_take(s, err) < 0)
        return -1;
    if (ops->session_resume(s->prof->iso->self, s->id, err) < 0) {
        if (took)
            ses_budget_give(s);
        return -1;
    }
    s->state = SES_RESUMING;
    ses_persist(s);
    return 0;
}

int ses_boot(struct eai_session *s, struct eai_error **err)
{
    const struct eai_isolation_ops *ops = ses_ops(s);
    struct eai_iso_session spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.id = s->id;
    spec.tenant_id = s->tenant;
    spec.profile = s->prof->name;
    spec.runtime_class = s->prof->runtime_class;
    spec.image = s->image;
    spec.cpu_millis = s->cpu_millis;
    spec.memory_bytes = s->memory_bytes;
    spec.pids = s->pids;
    spec.disk_bytes = s->disk_bytes;
    spec.max_concurrent = s->max_concurrent;
    spec.volumes = eai_vol_att_mounts(s->vol_att, &spec.nvolumes);
    if (s->lease) {
        spec.netns_path = eai_egress_lease_netns(s->lease);
        spec.dns_server = eai_egress_lease_dns(s->lease);
    }
    spec.restore_from = s->restore_from; /* a fork (ABI 1.5) */
    s->backend_live = 1; /* before: a failure may be told from inside the call */
    if (ops->session_create(s->prof->iso->self, &spec, &ses_callbacks, s, err) < 0) {
        s->backend_live = 0;
        return -1;
    }
    return 0;
}

static void lease_ready(void *arg, struct eai_egress_lease *l, const char *why)
{
    struct eai_session *s = arg;
    struct eai_sessions *reg = s->reg;
    s->leasing = 0;
    if (reg->stopping || reg->stopped || s->state != SES_STARTING) {
        /* deleted (or eaid stopping) while its namespace was made */
        if (l)
            json_decref(eai_egress_lease_close(l));
        if (!reg->stopped) {
            s->state = SES_ENDED;
            ses_budget_give(s);
            s->ended_ms = eai_now_ms();
            if (!s->end_reason[0])
                snprintf(s->end_reason, sizeof s->end_reason, "interrupted");
            ses_record_end(reg, s);
            ses_persist(s);
            answer_hold(s);
        }
        return;
    }
    struct eai_error *err = NULL;
    if (l)
        s->lease = l;
    if (!l || ses_boot(s, &err) < 0) {
        ses_close_lease(s);
        s->state = SES_FAILED;
        ses_budget_give(s);
        s->ended_ms = eai_now_ms();
        snprintf(s->end_reason, sizeof s->end_reason, "boot_failed");
        snprintf(s->message, sizeof s->message, "%s%s", l ? "" : "network namespace: ",
                 l ? (err && err->message ? err->message : "boot failed") : (why ? why : "failed"));
        eai_error_free(err);
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s did not start: %s", s->id, s->message);
        ses_audit(reg->app, s, "sandbox.session.end", "allow", "boot_failed");
        ses_persist(s);
        answer_hold(s);
    }
}

int ses_start(struct eai_session *s, struct eai_error **err)
{
    if (json_array_size(s->egress) == 0 && !s->need_netns)
        return ses_boot(s, err);
    struct eai_app *app = s->reg->app;
    if (!app->egress)
        return eai_error_set(err, EAI_E_EGRESS_UNSUPPORTED, "network egress is off on this node (docs/egress.md)");
    size_t n = json_array_size(s->egress);
    const char **entries = calloc(n + 1, sizeof *entries);
    if (!entries)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++)
        entries[i] = json_string_value(json_array_get(s->egress, i));
    s->leasing = 1;
    int rc = eai_egress_lease_open(app->egress, s->id, s->tenant, s->prof->name, entries, lease_ready, s);
    free(entries);
    if (rc < 0) {
        s->leasing = 0;
        return eai_error_set(err, EAI_E_SANDBOX_UNAVAILABLE, "no network namespace could be leased");
    }
    return 0;
}

int ses_can_keep(const struct eai_session *s)
{
    const struct eai_isolation_ops *ops = ses_ops(s);
    /* a session with egress is not kept: its namespace goes with eaid */
    return ops && ops->session_keep && ops->session_adopt && ops->session_drop_kept && ops->session_pause &&
           ops->session_resume && ses_store_on(s->reg->app) && json_array_size(s->egress) == 0 &&
           !s->volumes; /* nor one with volumes: their holds are this process's (docs/volumes.md) */
}

int ses_adopt(struct eai_session *s, struct eai_error **err)
{
    if (!ses_can_keep(s))
        return eai_error_set(err, EAI_E_SESSIONS_UNSUPPORTED, "the backend cannot keep sessions");
    const struct eai_isolation_ops *ops = ses_ops(s);
    struct eai_iso_session spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.id = s->id;
    spec.tenant_id = s->tenant;
    spec.profile = s->prof->name;
    spec.runtime_class = s->prof->runtime_class;
    spec.image = s->image;
    spec.cpu_millis = s->cpu_millis;
    spec.memory_bytes = s->memory_bytes;
    spec.pids = s->pids;
    spec.disk_bytes = s->disk_bytes;
    spec.max_concurrent = s->max_concurrent;
    if (ops->session_adopt(s->prof->iso->self, &spec, &ses_callbacks, s, err) < 0)
        return -1;
    s->backend_live = 1;
    s->state = SES_PAUSED;
    return 0;
}

/* The shutdown paused s (or could not): kept by the backend for the next
 * process and recorded paused, or ended interrupted. */
static void drain_kept(struct eai_session *s, const struct eai_error *err)
{
    s->drain_wait = 0;
    if (!err) {
        s->state = SES_PAUSED;
        ses_budget_give(s);
        if (!s->paused_ms)
            s->paused_ms = eai_now_ms();
        if (!s->paused_by[0])
            snprintf(s->paused_by, sizeof s->paused_by, "drain");
        if (ses_park_on(s)) {
            /* parked for any replica rather than kept for this node's
             * restart: a deploy that replaces the node loses nothing
             * (session_handoff.c); the stop waits for it (drain_wait) */
            s->drain_wait = 1;
            ses_park(s);
            if (s->parking)
                return;
            s->drain_wait = 0;
        }
    }
    ses_drain_keep(s, err);
}

void ses_drain_keep(struct eai_session *s, const struct eai_error *err)
{
    s->drain_wait = 0;
    struct eai_error *e = NULL;
    if (!err && ses_ops(s)->session_keep(s->prof->iso->self, s->id, &e) == 0) {
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s paused and kept for the next start", s->id);
        ses_persist(s);
        return;
    }
    eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s could not be kept across the stop (%s): interrupted", s->id,
            err && err->message ? err->message : e && e->message ? e->message : "?");
    eai_error_free(e);
    s->stop_end = 1;
    s->state = SES_ENDING;
    snprintf(s->end_reason, sizeof s->end_reason, "interrupted");
    ses_persist(s);
    ses_ops(s)->session_destroy(s->prof->iso->self, s->id);
}

void ses_end(struct eai_session *s, const char *reason)
{
    if (!ses_live(s) || s->state == SES_ENDING)
        return;
    int starting = s->state == SES_STARTING;
    s->state = SES_ENDING;
    snprintf(s->end_reason, sizeof s->end_reason, "%s", reason);
    eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s ending: %s", s->id, reason);
    ses_persist(s);
    if (!starting) /* booting: cb_ready destroys it */
        ses_ops(s)->session_destroy(s->prof->iso->self, s->id);
}

/* ------------------------------------------------------------ lifetimes */

static void prune(struct eai_sessions *reg, int64_t now)
{
    int ended = 0;
    json_t *per = json_object(); /* tenant -> ended sessions kept so far (newest first) */
    for (struct eai_session **pp = &reg->list; *pp;) {
        struct eai_session *s = *pp;
        int done = !ses_live(s) && !s->backend_live && !s->hold;
        int mine = 0;
        if (done && per) {
            mine = (int)json_integer_value(json_object_get(per, s->tenant)) + 1;
            json_object_set_new(per, s->tenant, json_integer(mine));
        }
        if (done && (now - s->ended_ms > SES_KEEP_ENDED_MS || ++ended > SES_KEEP_ENDED_MAX ||
                     mine > SES_KEEP_ENDED_TENANT)) {
            *pp = s->next;
            ses_free(s);
            continue;
        }
        pp = &s->next;
    }
    json_decref(per);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sessions *reg = arg;
    int64_t now = eai_now_ms();
    for (struct eai_session *s = reg->list; s; s = s->next) {
        if (s->parking || s->claiming)
            continue; /* leaving for the handoff directory, or coming back from it */
        if (ses_live(s) && s->state != SES_ENDING && now - s->created_ms >= s->ttl_s * 1000) {
            ses_end(s, "ttl"); /* paused or not */
            continue;
        }
        if (ses_live(s) && now - s->persisted_ms >= SES_HEARTBEAT_MS)
            ses_persist(s); /* seen_at: how long it is known to have lived */
        if (s->state == SES_PAUSED && s->paused_ms && now - s->paused_ms >= s->paused_ttl_s * 1000) {
            ses_end(s, "paused_ttl");
            continue;
        }
        if (s->state != SES_RUNNING)
            continue;
        /* an execution running or waiting inside keeps it from idling */
        if (ses_ops(s)->session_busy(s->prof->iso->self, s->id) > 0 || s->snapshotting)
            s->last_used_ms = now; /* a snapshot being taken counts as use too */
        if (now - s->created_ms >= s->ttl_s * 1000) {
            ses_end(s, "ttl");
        } else if (now - s->last_used_ms >= s->idle_timeout_s * 1000) {
            /* idle means paused (issue 31 item 4): its memory freed, its
             * disk kept, resumed by the next call; ended when it cannot be */
            struct eai_error *e = NULL;
            if (s->auto_pause && ses_ops(s)->session_pause && json_array_size(s->egress) == 0) {
                snprintf(s->paused_by, sizeof s->paused_by, "idle");
                if (ses_pause(s, &e) == 0) {
                    eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s idle for %llds: pausing it", s->id,
                            (long long)s->idle_timeout_s);
                    ses_audit(reg->app, s, "sandbox.session.pause", "allow", "idle_timeout");
                    continue;
                }
                s->paused_by[0] = 0;
                eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s idle, not paused (%s): ending it", s->id,
                        e && e->message ? e->message : "?");
                if (e)
                    snprintf(s->message, sizeof s->message, "not paused: %s", e->message ? e->message : "?");
                eai_error_free(e);
            }
            ses_end(s, "idle_timeout");
        }
    }
    prune(reg, now);
    snp_tick(reg, now);
    ses_handoff_tick(reg, now);
    eai_metrics_set("eai_sessions_live", NULL, ses_live_count(reg, NULL));
}

int eai_sessions_start(struct eai_app *app, struct eai_error **err)
{
    struct eai_sessions *reg = calloc(1, sizeof *reg);
    if (!reg)
        return eai_error_set(err, EAI_E_INTERNAL, "sessions: out of memory");
    reg->app = app;
    reg->parks = eai_park_set_new();
    reg->tick = event_new(app->base, -1, EV_PERSIST, on_tick, reg);
    struct timeval tv = {SES_TICK_MS / 1000, (SES_TICK_MS % 1000) * 1000};
    if (!reg->parks || !reg->tick || event_add(reg->tick, &tv) < 0) {
        if (reg->tick)
            event_free(reg->tick);
        eai_park_set_close(reg->parks);
        free(reg);
        return eai_error_set(err, EAI_E_INTERNAL, "sessions: out of memory");
    }
    app->sessions = reg;
    if (ses_store_start(reg, err) < 0 || snp_start(reg, err) < 0 || ses_handoff_start(reg, err) < 0) {
        snp_free_all(reg);
        app->sessions = NULL;
        event_free(reg->tick);
        eai_park_set_close(reg->parks);
        free(reg);
        return -1;
    }
    return 0;
}


void eai_sessions_begin_stop(struct eai_app *app)
{
    struct eai_sessions *reg = app ? app->sessions : NULL;
    if (!reg || reg->stopping || reg->stopped)
        return;
    reg->stopping = 1;
    event_free(reg->tick);
    reg->tick = NULL;
    for (struct eai_session *s = reg->list; s; s = s->next) {
        if (s->fork) /* a fork still being restored: its request answers 503 */
            ses_fork_abort(s);
        if (s->hold) { /* a create, delete, pause or resume waiting for the backend */
            struct eai_req *r = eai_park_release(s->hold);
            s->hold = NULL;
            if (r)
                eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        }
        if (!s->backend_live || !ses_live(s))
            continue;
        if (s->parking) { /* being parked (idle): the stop waits for it */
            s->drain_wait = 1;
            continue;
        }
        if (s->state != SES_ENDING && ses_can_keep(s)) {
            /* kept across the stop (issue 31 item 2): a running session with
             * nothing running in it is checkpointed, a paused one kept as it
             * is; both are recorded paused and come back on the next call */
            struct eai_error *e = NULL;
            if (s->state == SES_PAUSED) {
                drain_kept(s, NULL);
                continue;
            }
            if (s->state == SES_PAUSING) {
                s->drain_wait = 1;
                continue;
            }
            if (s->state == SES_RUNNING && ses_ops(s)->session_busy(s->prof->iso->self, s->id) == 0) {
                snprintf(s->paused_by, sizeof s->paused_by, "drain");
                if (ses_pause(s, &e) == 0) {
                    s->drain_wait = 1;
                    eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s: pausing it for the stop", s->id);
                    continue;
                }
                s->paused_by[0] = 0;
                eai_error_free(e);
            }
        }
        s->stop_end = 1; /* its end is awaited (eai_sessions_ending) */
        if (s->state == SES_ENDING && s->end_reason[0])
            continue;    /* already being ended (deleted, idle, ttl): that end stands */
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s interrupted by the shutdown", s->id);
        /* its end comes through cb_end with the sandbox's usage, billed and
         * audited as interrupted */
        s->state = SES_ENDING;
        snprintf(s->end_reason, sizeof s->end_reason, "interrupted");
        ses_persist(s);
        ses_ops(s)->session_destroy(s->prof->iso->self, s->id);
    }
}

int eai_sessions_ending(const struct eai_app *app)
{
    const struct eai_sessions *reg = app ? app->sessions : NULL;
    int n = 0;
    for (const struct eai_session *s = reg && !reg->stopped ? reg->list : NULL; s; s = s->next)
        if ((s->stop_end && s->backend_live) || s->drain_wait)
            n++;
    return n;
}

void eai_sessions_stop(struct eai_app *app)
{
    struct eai_sessions *reg = app ? app->sessions : NULL;
    if (!reg || reg->stopped)
        return;
    eai_sessions_begin_stop(app);
    for (struct eai_session *s = reg->list; s; s = s->next) {
        if (s->drain_wait) {
            /* its checkpoint did not finish in time: the backend's close
             * removes the sandbox; billed as interrupted */
            s->drain_wait = 0;
            snprintf(s->end_reason, sizeof s->end_reason, "interrupted");
            s->stop_end = 1;
            s->backend_live = 1;
        }
        if (s->stop_end && s->backend_live) {
            /* the backend did not report in time: billed as interrupted with
             * what is known (cpu and memory 0, "partial") */
            s->state = SES_ENDED;
            s->ended_ms = eai_now_ms();
            s->interrupted = 1;
            ses_record_end(reg, s);
            ses_persist(s);
        }
    }
    reg->stopped = 1;
    /* answers the parked create / delete / pause requests (503); the end
     * records above still run on the workers */
    eai_park_set_close(reg->parks);
    reg->parks = NULL;
    for (struct eai_session *s = reg->list; s; s = s->next)
        s->hold = NULL;
    /* a file call still on a worker calls into the backend, which is
     * closed next: let it return first (bounded, shutdown only) */
    for (int i = 0; i < 500 && reg->files_inflight > 0; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

void eai_sessions_free(struct eai_app *app)
{
    struct eai_sessions *reg = app ? app->sessions : NULL;
    if (!reg)
        return;
    eai_sessions_stop(app);
    app->sessions = NULL;
    for (struct eai_session *s = reg->list, *n; s; s = n) {
        n = s->next;
        ses_free(s);
    }
    json_decref(reg->rates);
    snp_free_all(reg);
    free(reg);
}
