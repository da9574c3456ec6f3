/*
 * Sessions any replica resumes (docs/sessions.md "Any replica"; issue 31
 * items 2 and 3): with sessions.handoff_dir, a directory every replica
 * mounts, a session its idle timer paused is *parked* there and leaves its
 * node:
 *
 *   park   (its node)  the backend copies its saved state (checkpoint image,
 *                      /tmp) to <handoff_dir>/<id> (session_snapshot of a
 *                      paused session), its local sandbox is removed (the
 *                      cpu it used read then), and its record is written
 *                      with owner "parked" (expect_owner: this node), then
 *                      it leaves the registry;
 *   claim  (any node)  a call on a parked record moves it to this node in
 *                      one write (session_put, expect_owner "parked": of
 *                      several replicas claiming at once exactly one wins,
 *                      the others read the record again and forward to the
 *                      winner), then the backend restores it from the
 *                      directory (session_create with restore_from, as a
 *                      fork but under its own id), the calls wait and are
 *                      routed once it runs, and the directory goes.
 *
 * No node holds a parked session, so there is never a second live copy:
 * a copy runs only where a claim was written.  Its node may die (kill -9,
 * power loss) and the session still resumes elsewhere.  Sessions paused
 * by their user or by a stop stay on their node (forwarded there, kept
 * across its restart).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "session/session_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/budget.h"
#include "http/http_util.h"
#include "http/park.h"
#include "eaibase.h"

static const char *handoff_root(const struct eai_app *app)
{
    const char *d = app && app->cfg ? app->cfg->sessions_handoff_dir : NULL;
    return d && d[0] == '/' ? d : NULL;
}

/* Bytes free for eaid in dir, -1 when unknown.  A blocking call on a
 * network file system: at start, or on a worker. */
static int64_t free_bytes(const char *dir)
{
    struct statvfs vfs;
    if (!dir || statvfs(dir, &vfs) != 0)
        return -1;
    return (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
}

int ses_handoff_start(struct eai_sessions *reg, struct eai_error **err)
{
    const char *d = reg->app->cfg ? reg->app->cfg->sessions_handoff_dir : NULL;
    reg->handoff_avail = -1;
    if (!d || !d[0])
        return 0;
    if (d[0] != '/')
        return eai_error_set(err, EAI_E_VALIDATION_FAILED, "sessions.handoff_dir must be an absolute path: %s", d);
    if (!ses_store_on(reg->app))
        return eai_error_set(err, EAI_E_VALIDATION_FAILED,
                             "sessions.handoff_dir needs stored sessions (a storage with the session ops)");
    if (eai_mkdir_p(d, 0700) < 0)
        return eai_error_set(err, EAI_E_INTERNAL, "sessions.handoff_dir %s: cannot create it", d);
    reg->handoff_avail = free_bytes(d);
    eai_log(SES_COMPONENT, EAI_LOG_INFO, "sessions: idle-paused sessions are parked in %s for any replica", d);
    return 0;
}

static void handoff_path(const struct eai_session *s, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", handoff_root(s->reg->app), s->id);
}

/* ------------------------------------------------------------ removal (worker) */

struct rm_job {
    char dir[PATH_MAX];
    char id[48];
    int rc;
};

static void rm_work(void *arg)
{
    struct rm_job *j = arg;
    j->rc = eai_rm_tree(j->dir);
}

static void rm_answer(struct eai_req *r, void *arg)
{
    (void)r;
    struct rm_job *j = arg;
    if (j->rc < 0)
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s: its handoff directory could not all be removed", j->id);
}

static const struct eai_park_ops rm_ops = {.what = "handoff_remove", .work = rm_work, .answer = rm_answer,
                                           .free = free};

static void remove_dir(struct eai_sessions *reg, const char *id, const char *dir)
{
    struct rm_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    snprintf(j->dir, sizeof j->dir, "%s", dir);
    snprintf(j->id, sizeof j->id, "%s", id);
    eai_park(reg->parks, NULL, &rm_ops, j);
}

/* ------------------------------------------------------------ park */

int ses_park_on(const struct eai_session *s)
{
    const struct eai_isolation_ops *ops = s->prof ? ses_ops(s) : NULL;
    return handoff_root(s->reg->app) && ses_store_on(s->reg->app) && ops && ops->session_snapshot &&
           json_array_size(s->egress) == 0 && json_array_size(s->volumes) == 0 && !s->need_netns &&
           (!strcmp(s->paused_by, "idle") || !strcmp(s->paused_by, "drain")); /* (a volume: on its node only) */
}

static void unlink_session(struct eai_sessions *reg, struct eai_session *s)
{
    for (struct eai_session **pp = &reg->list; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            return;
        }
}

struct publish_job {
    struct eai_app *app;
    struct eai_session *s;
    char tenant[64];
    json_t *doc;
    int rc;
    struct eai_error *err;
};

static void publish_work(void *arg)
{
    struct publish_job *j = arg;
    struct eai_sessions *reg = j->s->reg;
    j->rc = j->app->store->session_put(j->app->storage.self, j->tenant, j->doc, reg->node, &j->err);
}

static void publish_answer(struct eai_req *r, void *arg)
{
    (void)r;
    struct publish_job *j = arg;
    struct eai_session *s = j->s;
    struct eai_sessions *reg = s->reg;
    if (reg->stopped)
        return;
    if (j->rc == 0) {
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s parked for any replica (%.3f cpu s so far)", s->id,
                s->cpu_seconds);
        s->drain_wait = 0;
        unlink_session(reg, s);
        ses_free(s);
        return;
    }
    if (reg->stopping) {
        /* stopping, its sandbox gone, its record not parked: ended */
        eai_log(SES_COMPONENT, EAI_LOG_ERROR, "session %s: parking it at the stop failed (%s): interrupted", s->id,
                j->err && j->err->message ? j->err->message : "?");
        s->parking = 0;
        s->drain_wait = 0;
        s->state = SES_ENDED;
        s->ended_ms = eai_now_ms();
        snprintf(s->end_reason, sizeof s->end_reason, "interrupted");
        ses_record_end(reg, s);
        ses_persist(s);
        char dir[PATH_MAX];
        handoff_path(s, dir, sizeof dir);
        remove_dir(reg, s->id, dir);
        return;
    }
    /* not published: it stays this node's, restored from the directory
     * (its record still says paused here) */
    eai_log(SES_COMPONENT, EAI_LOG_ERROR, "session %s: parking it failed (%s): restored here", s->id,
            j->err && j->err->message ? j->err->message : "?");
    s->parking = 0;
    ses_budget_take(s, NULL); /* (running again: over the budget rather than lost) */
    if (ses_claim_boot(s, NULL) < 0)
        eai_log(SES_COMPONENT, EAI_LOG_ERROR, "session %s: lost", s->id);
}

static void publish_free(void *arg)
{
    struct publish_job *j = arg;
    json_decref(j->doc);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops publish_ops = {
    .what = "session_park", .work = publish_work, .answer = publish_answer, .free = publish_free,
};

/* The copy is made: remove the local sandbox (its on_end comes to
 * ses_park_end). */
static void park_copied(void *arg, const struct eai_error *err, int64_t size_bytes)
{
    struct eai_session *s = arg;
    if (s->reg->stopped)
        return;
    if (err || s->state != SES_PAUSED) {
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s: not parked (%s): it stays paused here", s->id,
                err && err->message ? err->message : "no longer paused");
        s->parking = 0;
        char dir[PATH_MAX];
        handoff_path(s, dir, sizeof dir);
        remove_dir(s->reg, s->id, dir);
        if (s->reg->stopping) { /* kept for this node's restart instead */
            ses_drain_keep(s, s->state == SES_PAUSED ? NULL : err);
            return;
        }
        if (s->resume_asked) {
            s->resume_asked = 0;
            ses_resume(s, NULL);
        }
        return;
    }
    s->park_bytes = size_bytes;
    if (s->reg->handoff_avail >= 0) /* until the next minute's read */
        s->reg->handoff_avail = s->reg->handoff_avail > size_bytes ? s->reg->handoff_avail - size_bytes : 0;
    s->parking = 2;
    ses_ops(s)->session_destroy(s->prof->iso->self, s->id);
}

void ses_park(struct eai_session *s)
{
    /* The directory's free-space floor (sessions.min_free_bytes, as for the
     * data disk): a copy of up to its memory limit must leave that much, or
     * it stays paused here, in this node's checkpoint quota. */
    const struct eai_config *cfg = s->reg->app->cfg;
    int64_t floor_b = cfg ? cfg->sessions_min_free_bytes : 1LL << 30, avail = s->reg->handoff_avail;
    if (avail >= 0 && avail - s->memory_bytes < floor_b) {
        eai_log(SES_COMPONENT, EAI_LOG_WARN,
                "session %s: not parked (sessions.handoff_dir has %lld bytes free: a copy of up to %lld would leave"
                " less than sessions.min_free_bytes): it stays paused here",
                s->id, (long long)avail, (long long)s->memory_bytes);
        return;
    }
    char dir[PATH_MAX];
    handoff_path(s, dir, sizeof dir);
    struct eai_error *err = NULL;
    s->parking = 1;
    if (ses_ops(s)->session_snapshot(s->prof->iso->self, s->id, dir, park_copied, s, &err) < 0) {
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s: not parked (%s): it stays paused here", s->id,
                err && err->message ? err->message : "?");
        eai_error_free(err);
        s->parking = 0;
    }
}

int ses_park_end(struct eai_session *s, const struct eai_iso_session_end *end)
{
    if (s->parking != 2)
        return 0;
    struct eai_sessions *reg = s->reg;
    s->backend_live = 0;
    s->cpu_seconds = s->cpu_before + end->cpu_seconds;
    if (end->peak_memory_mb > s->peak_mb)
        s->peak_mb = end->peak_memory_mb;
    s->cpu_before = s->cpu_seconds;
    s->parking = 3;
    struct publish_job *j = calloc(1, sizeof *j);
    json_t *doc = j ? ses_record(s) : NULL;
    if (!doc) {
        free(j);
        eai_log(SES_COMPONENT, EAI_LOG_ERROR, "session %s: out of memory parking it", s->id);
        s->parking = 0;
        ses_claim_boot(s, NULL);
        return 1;
    }
    char dir[PATH_MAX];
    handoff_path(s, dir, sizeof dir);
    json_object_set_new(doc, "owner", json_string(SES_PARKED_OWNER));
    json_object_del(doc, "owner_url");
    json_object_del(doc, "claim_owner");
    json_t *x = json_object_get(doc, "x");
    json_object_set_new(x, "handoff_dir", json_string(dir));
    json_object_set_new(x, "handoff_bytes", json_integer(s->park_bytes));
    j->app = reg->app;
    j->s = s;
    j->doc = doc;
    snprintf(j->tenant, sizeof j->tenant, "%s", s->tenant);
    eai_park(reg->parks, NULL, &publish_ops, j);
    return 1;
}

/* ------------------------------------------------------------ calls meanwhile */

int ses_claim_wait(struct eai_session *s, struct eai_req *r, void (*route)(struct eai_app *, struct eai_req *))
{
    /* 503 sandbox_unavailable carries Retry-After: 1 */
    if (s->parking) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE,
                        json_pack("[{s:s, s:s}]", "path", "", "message",
                                  "the session is being parked for any replica: retry in a moment"));
        return 1;
    }
    if (!s->claiming)
        return 0;
    if (s->nclaim_wait >= SES_CLAIM_WAIT_MAX || !route) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE,
                        json_pack("[{s:s, s:s}]", "path", "", "message",
                                  "the session is being resumed: retry in a moment"));
        return 1;
    }
    struct eai_parked *p = eai_park_hold(s->reg->parks, r);
    if (!p) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return 1;
    }
    s->claim_wait[s->nclaim_wait].hold = p;
    s->claim_wait[s->nclaim_wait].route = route;
    s->nclaim_wait++;
    return 1;
}

/* ------------------------------------------------------------ claim */

int ses_claim_boot(struct eai_session *s, struct eai_error **err)
{
    char dir[PATH_MAX];
    const char *d = s->handoff_dir[0] ? s->handoff_dir : NULL;
    if (!d) {
        handoff_path(s, dir, sizeof dir);
        snprintf(s->handoff_dir, sizeof s->handoff_dir, "%s", dir);
    }
    free(s->restore_from);
    s->restore_from = strdup(s->handoff_dir);
    s->claiming = 1;
    s->state = SES_RESUMING;
    struct eai_error *e = NULL;
    if (!s->restore_from || ses_boot(s, &e) < 0) {
        if (err && e)
            *err = e;
        else
            eai_error_free(e);
        s->claiming = 0;
        return -1;
    }
    return 0;
}

/* The claimed session runs (err NULL) or could not be restored: the calls
 * that waited are routed, or answered. */
int ses_claim_ready(struct eai_session *s, const struct eai_error *err)
{
    if (!s->claiming)
        return 0;
    struct eai_sessions *reg = s->reg;
    s->claiming = 0;
    free(s->restore_from);
    s->restore_from = NULL;
    int64_t now = eai_now_ms();
    if (s->paused_ms) {
        s->paused_s += (double)(now - s->paused_ms) / 1000.0;
        s->paused_ms = 0;
    }
    if (err) {
        /* its saved state did not come back: ended, billed for what it used */
        s->backend_live = 0;
        ses_budget_give(s);
        s->state = SES_ENDED;
        s->ended_ms = now;
        snprintf(s->end_reason, sizeof s->end_reason, "crashed");
        snprintf(s->message, sizeof s->message, "its parked state could not be restored: %s",
                 err->message ? err->message : "?");
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s: %s", s->id, s->message);
        ses_record_end(reg, s);
        ses_persist(s);
    } else {
        s->state = SES_RUNNING;
        s->paused_by[0] = 0;
        s->last_used_ms = now;
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s resumed here from its handoff directory", s->id);
        ses_audit(reg->app, s, "sandbox.session.resume", "allow", "handoff");
        ses_persist(s);
    }
    remove_dir(reg, s->id, s->handoff_dir);
    s->handoff_dir[0] = 0;
    int n = s->nclaim_wait;
    s->nclaim_wait = 0;
    for (int i = 0; i < n; i++) {
        struct eai_req *r = eai_park_release(s->claim_wait[i].hold);
        if (!r)
            continue;
        if (err)
            eai_reply_error(r, EAI_E_SANDBOX_FAILED,
                            json_pack("[{s:s, s:s}]", "path", "", "message", s->message));
        else
            s->claim_wait[i].route(reg->app, r);
    }
    return 1;
}

struct claim_job {
    struct eai_app *app;
    struct eai_session *s;         /* not in the registry until the claim is written */
    const char *expect;            /* the owner the write expects: "parked" (a claim), this node (giving it back) */
    char tenant[64], action[64];
    void (*route)(struct eai_app *, struct eai_req *);
    json_t *doc;
    int rc;
    struct eai_error *err;
};

static void claim_work(void *arg)
{
    struct claim_job *j = arg;
    j->rc = j->app->store->session_put(j->app->storage.self, j->tenant, j->doc, j->expect, &j->err);
}

static void claim_free(void *arg);
static const struct eai_park_ops claim_ops;

/* Give a record this node claimed (status resuming) back to the handoff
 * directory, unrestored: parked again, for the next call anywhere. */
void ses_unclaim(struct eai_sessions *reg, const char *tenant, const json_t *doc)
{
    struct claim_job *j = calloc(1, sizeof *j);
    json_t *d = json_deep_copy(doc);
    if (!j || !d) {
        free(j);
        json_decref(d);
        return;
    }
    json_object_set_new(d, "owner", json_string(SES_PARKED_OWNER));
    json_object_set_new(d, "status", json_string("paused"));
    json_object_set_new(d, "rev", json_integer(json_integer_value(json_object_get(d, "rev")) + 1));
    json_object_del(d, "owner_url");
    json_object_del(d, "claim_owner");
    j->app = reg->app;
    j->doc = d;
    j->expect = reg->node;
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
    eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s: claimed here but not restored: parked again",
            json_string_value(json_object_get(doc, "id")));
    eai_park(reg->parks, NULL, &claim_ops, j);
}

static void claim_answer(struct eai_req *r, void *arg)
{
    struct claim_job *j = arg;
    struct eai_session *s = j->s;
    struct eai_sessions *reg = ses_reg(j->app);
    if (!s) { /* ses_unclaim's write */
        if (j->rc < 0)
            eai_log(SES_COMPONENT, EAI_LOG_ERROR, "a session could not be parked again: %s",
                    j->err && j->err->message ? j->err->message : "?");
        return;
    }
    if (!reg || reg->stopping) {
        if (reg && j->rc == 0)
            ses_unclaim(reg, j->tenant, j->doc); /* claimed as eaid stops: back to the directory */
        if (r)
            eai_reply_error(r, EAI_E_SHUTTING_DOWN, NULL);
        return;
    }
    if (j->rc < 0) {
        if (j->err && j->err->code == EAI_E_CONFLICT) {
            /* another replica claimed it first: its record says where */
            if (r && j->route)
                ses_route_stored_again(j->app, r, j->action, j->route);
        } else if (r) {
            eai_park_reply_storage(r, "session_put", j->err);
        }
        return;
    }
    j->s = NULL; /* the registry's now */
    s->next = reg->list;
    reg->list = s;
    int64_t now = eai_now_ms();
    if ((s->ttl_s > 0 && now - s->created_ms >= s->ttl_s * 1000) ||
        (s->paused_ms && now - s->paused_ms >= s->paused_ttl_s * 1000)) {
        /* its lifetime ran out while it was parked: ended, never restored */
        s->state = SES_ENDED;
        s->ended_ms = now;
        if (s->paused_ms) {
            s->paused_s += (double)(now - s->paused_ms) / 1000.0;
            s->paused_ms = 0;
        }
        snprintf(s->end_reason, sizeof s->end_reason, "%s",
                 s->ttl_s > 0 && now - s->created_ms >= s->ttl_s * 1000 ? "ttl" : "paused_ttl");
        ses_budget_give(s);
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s ended while parked: %s", s->id, s->end_reason);
        ses_record_end(reg, s);
        ses_persist(s);
        remove_dir(reg, s->id, s->handoff_dir);
        if (r && j->route)
            j->route(j->app, r); /* answered from the ended session */
        return;
    }
    struct eai_error *e = NULL;
    if (ses_claim_boot(s, &e) < 0) {
        ses_budget_give(s);
        s->state = SES_ENDED;
        s->ended_ms = now;
        snprintf(s->end_reason, sizeof s->end_reason, "crashed");
        snprintf(s->message, sizeof s->message, "its parked state could not be restored: %s",
                 e && e->message ? e->message : "?");
        eai_error_free(e);
        ses_record_end(reg, s);
        ses_persist(s);
        if (r && j->route)
            j->route(j->app, r);
        return;
    }
    eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s (tenant %s) claimed from the handoff directory", s->id,
            s->tenant);
    if (r && j->route && !ses_claim_wait(s, r, j->route))
        j->route(j->app, r);
}

static void claim_free(void *arg)
{
    struct claim_job *j = arg;
    if (j->s)
        ses_free(j->s);
    json_decref(j->doc);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops claim_ops = {
    .what = "session_claim", .work = claim_work, .answer = claim_answer, .free = claim_free,
};

int ses_claim_stored(struct eai_app *app, struct eai_req *r, const char *tenant, const json_t *doc,
                     const char *action, void (*route)(struct eai_app *, struct eai_req *))
{
    struct eai_sessions *reg = ses_reg(app);
    const json_t *x = json_object_get(doc, "x");
    const char *dir = json_string_value(json_object_get(x, "handoff_dir"));
    if (!reg || !dir || !handoff_root(app))
        return 0;
    struct eai_session *s = ses_of_record(reg, tenant, doc);
    struct claim_job *j = s ? calloc(1, sizeof *j) : NULL;
    if (!j || !s->prof || !ses_profile_ops(s->prof)) {
        /* a profile this node does not have: the record answers */
        if (s)
            ses_free(s);
        free(j);
        return 0;
    }
    snprintf(s->handoff_dir, sizeof s->handoff_dir, "%s", dir);
    struct eai_error *be = NULL;
    if (route && ses_budget_take(s, &be) < 0) {
        /* the node budget is held by others (docs/admission.md): not claimed
         * here; it stays parked for a later call or another replica */
        enum eai_code code = be ? be->code : EAI_E_NODE_BUDGET_EXHAUSTED;
        json_t *env = eai_http_error_envelope(code, eai_req_lang(r), eai_req_id(r),
                                              be && be->details ? json_incref(be->details) : NULL);
        char ra[48];
        snprintf(ra, sizeof ra, "Retry-After: %d", EAI_BUDGET_RETRY_AFTER_S);
        const char *h[] = {ra, NULL};
        if (env)
            eai_reply_json_headers(r, 429, env, h);
        else
            eai_reply_error(r, code, NULL);
        eai_error_free(be);
        ses_free(s);
        free(j);
        return 1;
    }
    s->cpu_before = s->cpu_seconds;
    s->state = SES_RESUMING;
    s->paused_by[0] = 0;
    j->doc = ses_record(s); /* owner: this node, rev: the stored one + 1 */
    if (!j->doc) {
        ses_free(s);
        free(j);
        return 0;
    }
    /* (kept while it is restored: a start-up after a crash gives it back) */
    json_object_set_new(json_object_get(j->doc, "x"), "handoff_dir", json_string(dir));
    s->state = SES_PAUSED;
    j->app = app;
    j->s = s;
    j->expect = SES_PARKED_OWNER;
    j->route = route;
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
    snprintf(j->action, sizeof j->action, "%s", action);
    eai_park(reg->parks, r, &claim_ops, j);
    return 1;
}

/* ------------------------------------------------------------ lifetimes of parked sessions */

#define SES_PARKED_SWEEP_MS (60 * 1000)
#define SES_PARKED_SWEEP_MAX 100

struct sweep_job {
    struct eai_app *app;
    json_t *out;
    int rc;
    struct eai_error *err;
    int64_t avail;                 /* handoff_dir's free bytes, -1 unknown */
};

static void sweep_work(void *arg)
{
    struct sweep_job *j = arg;
    j->avail = free_bytes(handoff_root(j->app));
    j->rc = j->app->store->session_owned(j->app->storage.self, SES_PARKED_OWNER, SES_PARKED_SWEEP_MAX, &j->out,
                                         &j->err);
}

/* A parked session belongs to no node, so no node's timer ends it: every
 * replica reads the parked records each minute and claims the ones whose
 * TTL or paused TTL ran out; the claim ends them (claim_answer), billed,
 * and removes their directory. */
static void sweep_answer(struct eai_req *r, void *arg)
{
    (void)r;
    struct sweep_job *j = arg;
    struct eai_sessions *reg = ses_reg(j->app);
    if (reg)
        reg->handoff_avail = j->avail;
    if (!reg || reg->stopping || j->rc < 0)
        return;
    int64_t now = eai_now_ms();
    size_t i;
    json_t *one;
    json_array_foreach(j->out, i, one) {
        const char *tenant = json_string_value(json_object_get(one, "tenant_id"));
        const json_t *doc = json_object_get(one, "doc"), *x = json_object_get(doc, "x");
        int64_t created = (int64_t)json_integer_value(json_object_get(x, "created_ms"));
        int64_t paused = (int64_t)json_integer_value(json_object_get(x, "paused_ms"));
        int64_t ttl = (int64_t)json_integer_value(json_object_get(doc, "ttl_s"));
        int64_t pttl = json_is_integer(json_object_get(doc, "paused_ttl_s"))
                           ? (int64_t)json_integer_value(json_object_get(doc, "paused_ttl_s"))
                           : 86400;
        int expired = (ttl > 0 && now - created >= ttl * 1000) || (paused && now - paused >= pttl * 1000);
        if (tenant && expired && !ses_find(reg, tenant, json_string_value(json_object_get(doc, "id"))))
            ses_claim_stored(j->app, NULL, tenant, doc, "sandbox.session.end", NULL);
    }
}

static void sweep_free(void *arg)
{
    struct sweep_job *j = arg;
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops sweep_ops = {
    .what = "parked_sweep", .work = sweep_work, .answer = sweep_answer, .free = sweep_free,
};

void ses_handoff_tick(struct eai_sessions *reg, int64_t now)
{
    if (!handoff_root(reg->app) || reg->stopping || now - reg->parked_sweep_ms < SES_PARKED_SWEEP_MS)
        return;
    reg->parked_sweep_ms = now;
    struct sweep_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->app = reg->app;
    eai_park(reg->parks, NULL, &sweep_ops, j);
}

/* ------------------------------------------------------------ the tenant's bound */

#define SES_PARKED_COUNT_MAX 1000 /* session_list's most; far above any sessions.max_per_tenant */

int ses_handoff_on(const struct eai_app *app)
{
    return handoff_root(app) && ses_store_on(app);
}

int ses_parked_count(struct eai_app *app, const char *tenant, struct eai_error **err)
{
    if (!ses_handoff_on(app))
        return 0;
    json_t *filter = json_pack("{s:b, s:i}", "live", 1, "limit", SES_PARKED_COUNT_MAX), *out = NULL;
    int n = -1;
    if (!filter) {
        eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    } else if (app->store->session_list(app->storage.self, tenant, filter, &out, err) == 0) {
        size_t i;
        json_t *doc;
        n = 0;
        json_array_foreach(out, i, doc) {
            const char *owner = json_string_value(json_object_get(doc, "owner"));
            n += owner && !strcmp(owner, SES_PARKED_OWNER);
        }
    }
    json_decref(filter);
    json_decref(out);
    return n;
}
