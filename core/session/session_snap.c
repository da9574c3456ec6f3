/* Snapshots and forks of a session (docs/sessions.md "Snapshots and
 * forks"): POST /v1/sandbox/sessions/{id}/snapshots takes a snapshot of a
 * running session through the backend's session_snapshot (ABI 1.5), which
 * keeps running; GET/DELETE /v1/sandbox/snapshots[/{id}] read and remove
 * them; POST /v1/sandbox/sessions with from_snapshot (and count) creates
 * new sessions restored from one (session_routes.c calls ses_fork here).
 *
 * A snapshot's image lives on this node's data disk, <data_dir>/snapshots/
 * <id>/ (the backend's image and its copy of /tmp).  Its record (the
 * session's spec the forks get, the tenant, the node, the times, the size)
 * is a row of the storage backend when it has the snapshot ops (ABI 1.5:
 * SQLite, PostgreSQL with row-level security), else a file beside the
 * image, <id>.json.  The records of this node are read back at start: a
 * snapshot outlives a restart of eaid on its node; another node's are
 * read (GET, the list) but not forked or deleted there (409).  Every file
 * and storage operation runs on a worker. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "session/session_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "http/http_util.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "obs/metrics.h"

#define SNP_REC_MAX (256 * 1024) /* one record read back at start */

static json_t *detail1(const char *path, const char *msg)
{
    return json_pack("[{s:s, s:s}]", "path", path, "message", msg);
}

/* The storage backend keeps the records (ABI 1.5, the five ops). */
static int snp_store_on(const struct eai_app *app)
{
    const struct eai_storage_ops *st = app ? app->store : NULL;
    return st && st->size >= EAI_STORAGE_OPS_SIZE_1_5 && st->snapshot_put && st->snapshot_get &&
           st->snapshot_list && st->snapshot_delete && st->snapshot_owned;
}

int snp_id_ok(const char *id)
{
    if (!id || strncmp(id, "snp_", 4) != 0 || strlen(id) != 40)
        return 0;
    for (const char *p = id + 4; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == '-'))
            return 0;
    return 1;
}

static const char *snp_root(const struct eai_app *app, char *buf, size_t len)
{
    snprintf(buf, len, "%s/snapshots", app->cfg && app->cfg->data_dir ? app->cfg->data_dir : ".");
    return buf;
}

static json_t *time_or_null(int64_t ms)
{
    char t[32];
    if (!ms)
        return json_null();
    eai_time_rfc3339(ms, t);
    return json_string(t);
}

static const char *snp_state_name(const struct eai_snapshot *p)
{
    static const char *const n[] = {"creating", "ready", "deleting", "deleted"};
    return n[p->state];
}

json_t *snp_view(const struct eai_snapshot *p)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:o, s:o, s:O?, s:O?, s:i}", "id", p->id, "session_id", p->session_id,
                     "status", snp_state_name(p), "size_bytes", (json_int_t)p->size_bytes, "created_at",
                     time_or_null(p->created_ms), "expires_at", time_or_null(p->expires_ms), "profile",
                     json_object_get(p->spec, "profile"), "image", json_object_get(p->spec, "image"), "forks",
                     p->forks);
}

/* The record of p (<root>/<id>.json): what a restart reads back. */
static json_t *snp_record(const struct eai_snapshot *p)
{
    char created[32];
    eai_time_rfc3339(p->created_ms, created);
    json_t *d = json_pack("{s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:O, s:s, s:s}", "version", 1, "id", p->id,
                          "tenant_id", p->tenant, "session_id", p->session_id, "actor", p->actor, "size_bytes",
                          (json_int_t)p->size_bytes, "created_ms", (json_int_t)p->created_ms, "expires_ms",
                          (json_int_t)p->expires_ms, "spec", p->spec, "created_at", created, "owner",
                          p->app && p->app->sessions ? p->app->sessions->node : "");
    return d;
}

/* A snapshot from its record (read back, or another node's): NULL when
 * the record is not one. */
static struct eai_snapshot *snp_from_record(struct eai_app *app, const char *tenant, const json_t *rec)
{
    const char *id = json_string_value(json_object_get(rec, "id"));
    const char *sid = json_string_value(json_object_get(rec, "session_id"));
    if (!tenant || !snp_id_ok(id) || !sid || !json_is_object(json_object_get(rec, "spec")))
        return NULL;
    struct eai_snapshot *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    snprintf(p->id, sizeof p->id, "%s", id);
    snprintf(p->tenant, sizeof p->tenant, "%s", tenant);
    snprintf(p->session_id, sizeof p->session_id, "%s", sid);
    snprintf(p->actor, sizeof p->actor, "%s",
             json_string_value(json_object_get(rec, "actor")) ? json_string_value(json_object_get(rec, "actor")) : "");
    p->app = app;
    p->state = SNP_READY;
    p->size_bytes = json_integer_value(json_object_get(rec, "size_bytes"));
    p->created_ms = json_integer_value(json_object_get(rec, "created_ms"));
    p->expires_ms = json_integer_value(json_object_get(rec, "expires_ms"));
    p->spec = json_incref(json_object_get(rec, "spec"));
    return p;
}

/* Another node's snapshot, read from storage: its view, with its node. */
static json_t *snp_view_record(struct eai_app *app, const char *tenant, const json_t *rec)
{
    struct eai_snapshot *p = snp_from_record(app, tenant, rec);
    json_t *v = p ? snp_view(p) : NULL;
    if (v)
        json_object_set(v, "node", json_object_get(rec, "owner"));
    if (p) {
        json_decref(p->spec);
        free(p);
    }
    return v;
}

static void snp_free(struct eai_snapshot *p)
{
    json_decref(p->spec);
    free(p);
}

void snp_free_all(struct eai_sessions *reg)
{
    for (struct eai_snapshot *p = reg->snaps, *n; p; p = n) {
        n = p->next;
        snp_free(p);
    }
    reg->snaps = NULL;
}

static struct eai_snapshot *snp_find(struct eai_sessions *reg, const char *tenant, const char *id)
{
    for (struct eai_snapshot *p = reg ? reg->snaps : NULL; p; p = p->next)
        if (tenant && id && !strcmp(p->id, id) && !strcmp(p->tenant, tenant) && p->state != SNP_DELETED)
            return p;
    return NULL;
}

static void snp_unlink(struct eai_sessions *reg, struct eai_snapshot *p)
{
    for (struct eai_snapshot **pp = &reg->snaps; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

static void snp_audit(struct eai_app *app, const struct eai_snapshot *p, const char *actor, const char *action,
                      const char *decision, const char *reason, const char *request_id)
{
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "time", now,
                           "tenant_id", p->tenant, "actor", actor && actor[0] ? actor : "system", "action", action,
                           "target", p->id, "decision", decision, "reason", reason ? reason : "", "request_id",
                           request_id ? request_id : "", "trace_id", "");
    if (ev)
        eai_req_audit_async(app, p->tenant, ev);
}

/* ------------------------------------------------------------ removal (worker) */

struct rm_job {
    struct eai_app *app;
    struct eai_snapshot *p;        /* unlinked from the registry, freed here */
    char dir[PATH_MAX], rec[PATH_MAX + 8];
    int rc;
    char reason[32];
};

/* The usage event of a snapshot's life (FinOps, delivered through the
 * outbox as a session's): its size x the seconds it was kept. */
static json_t *snp_usage(const struct eai_snapshot *p, const char *reason)
{
    char id[37], now[32], created[32], ended[32];
    int64_t end = eai_now_ms();
    double secs = end > p->created_ms ? (double)(end - p->created_ms) / 1000.0 : 0;
    eai_uuid_v4(id);
    eai_time_rfc3339(end, now);
    eai_time_rfc3339(p->created_ms, created);
    eai_time_rfc3339(end, ended);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:O?, s:I, s:f, s:f, s:s, s:s, s:s, s:s, s:i}", "id", id, "kind",
                     "snapshot", "tenant_id", p->tenant, "snapshot_id", p->id, "session_id", p->session_id,
                     "profile", json_object_get(p->spec, "profile"), "size_bytes", (json_int_t)p->size_bytes,
                     "duration_s", secs, "storage_mb_seconds", (double)p->size_bytes / (1024.0 * 1024.0) * secs,
                     "started_at", created, "finished_at", ended, "created_at", now, "end_reason", reason,
                     "forks", p->forks);
}

static void rm_work(void *arg)
{
    struct rm_job *j = arg;
    if (j->reason[0] && j->app->store->outbox_append) {
        /* a snapshot that was kept: its storage is billed */
        json_t *u = snp_usage(j->p, j->reason);
        struct eai_error *e = NULL;
        if (u && j->app->store->outbox_append(j->app->storage.self, j->p->tenant, u, NULL, &e) < 0)
            eai_log(SES_COMPONENT, EAI_LOG_WARN, "snapshot %s: its usage event: %s", j->p->id,
                    e && e->message ? e->message : "?");
        eai_error_free(e);
        json_decref(u);
    }
    j->rc = eai_rm_tree(j->dir);
    if (snp_store_on(j->app)) {
        struct eai_error *e = NULL;
        if (j->app->store->snapshot_delete(j->app->storage.self, j->p->tenant, j->p->id, &e) < 0)
            j->rc = -1;
        eai_error_free(e);
    }
    if (unlink(j->rec) < 0 && errno != ENOENT)
        j->rc = -1;
}

static void rm_answer(struct eai_req *r, void *arg)
{
    struct rm_job *j = arg;
    if (j->rc < 0)
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "snapshot %s: its files could not all be removed", j->p->id);
    j->p->state = SNP_DELETED;
    if (!r)
        return;
    json_t *v = snp_view(j->p);
    if (v)
        eai_reply_json(r, 200, v);
    else
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
}

static void rm_free(void *arg)
{
    struct rm_job *j = arg;
    snp_free(j->p);
    free(j);
}

static const struct eai_park_ops rm_ops = {
    .what = "snapshot_delete", .work = rm_work, .answer = rm_answer, .free = rm_free,
};

/* Remove p (its directory and record) on a worker; r (may be NULL) is
 * answered with its last view.  p leaves the registry now. */
static void snp_remove(struct eai_sessions *reg, struct eai_snapshot *p, struct eai_req *r, const char *reason)
{
    struct rm_job *j = calloc(1, sizeof *j);
    char root[PATH_MAX];
    int kept = p->state == SNP_READY; /* billed: one that was taken (a failed one is not) */
    snp_unlink(reg, p);
    p->state = SNP_DELETING;
    if (!j) {
        snp_free(p);
        if (r)
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->app = reg->app;
    j->p = p;
    /* a failed snapshot (never ready) is not billed */
    if (kept && reason)
        snprintf(j->reason, sizeof j->reason, "%s", reason);
    snp_root(reg->app, root, sizeof root);
    snprintf(j->dir, sizeof j->dir, "%s/%s", root, p->id);
    snprintf(j->rec, sizeof j->rec, "%s/%s.json", root, p->id);
    eai_park(reg->parks, r, &rm_ops, j);
}

/* ------------------------------------------------------------ create */

struct rec_job {
    struct eai_app *app;
    struct eai_snapshot *p;
    char path[PATH_MAX + 8];
    char *text;
    json_t *doc;
    int rc;
};

static void rec_work(void *arg)
{
    struct rec_job *j = arg;
    if (snp_store_on(j->app)) { /* a row of the storage backend */
        struct eai_error *e = NULL;
        j->rc = j->app->store->snapshot_put(j->app->storage.self, j->p->tenant, j->doc, &e);
        if (j->rc < 0)
            eai_log(SES_COMPONENT, EAI_LOG_ERROR, "snapshot %s: storing its record: %s", j->p->id,
                    e && e->message ? e->message : "?");
        eai_error_free(e);
        return;
    }
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.new", j->path);
    /* 0600: the record holds the session's env */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    j->rc = -1;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return;
    }
    int ok = fputs(j->text, f) >= 0;
    ok = fflush(f) == 0 && ok && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, j->path) == 0)
        j->rc = 0;
    else
        unlink(tmp);
}

static void rec_answer(struct eai_req *r, void *arg)
{
    struct rec_job *j = arg;
    struct eai_sessions *reg = ses_reg(j->app);
    if (j->rc < 0) {
        eai_log(SES_COMPONENT, EAI_LOG_ERROR, "snapshot %s: its record could not be written", j->p->id);
        if (r)
            eai_reply_error(r, EAI_E_INTERNAL, detail1("", "the snapshot's record could not be written"));
        if (reg)
            snp_remove(reg, j->p, NULL, NULL);
        return;
    }
    j->p->state = SNP_READY;
    eai_metrics_add("eai_snapshots_created_total", NULL, 1);
    eai_log(SES_COMPONENT, EAI_LOG_INFO, "snapshot %s of session %s: %lld bytes in %lld ms", j->p->id,
            j->p->session_id, (long long)j->p->size_bytes, (long long)(eai_now_ms() - j->p->created_ms));
    if (!r)
        return;
    json_t *v = snp_view(j->p);
    char loc[96];
    snprintf(loc, sizeof loc, "Location: /v1/sandbox/snapshots/%s", j->p->id);
    const char *h[] = {loc, NULL};
    if (v)
        eai_reply_json_headers(r, 201, v, h);
    else
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
}

static void rec_free(void *arg)
{
    struct rec_job *j = arg;
    free(j->text);
    json_decref(j->doc);
    free(j);
}

static const struct eai_park_ops rec_ops = {
    .what = "snapshot_record", .work = rec_work, .answer = rec_answer, .free = rec_free,
};

/* The backend's answer (loop). */
static void snap_done(void *arg, const struct eai_error *err, int64_t size)
{
    struct eai_snapshot *p = arg;
    struct eai_app *app = p->app;
    struct eai_sessions *reg = ses_reg(app);
    struct eai_req *r = p->hold ? eai_park_release(p->hold) : NULL;
    p->hold = NULL;
    struct eai_session *s = reg ? ses_find(reg, p->tenant, p->session_id) : NULL;
    if (s && s->snapshotting)
        s->snapshotting--;
    if (!reg) /* stopping: the registry's end frees it; its directory is swept at the next start */
        return;
    if (err) {
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "snapshot %s of session %s failed: %s", p->id, p->session_id,
                err->message ? err->message : "?");
        snp_audit(app, p, p->actor, "sandbox.snapshot.create", "deny", "sandbox_failed", p->request_id);
        /* the session deleted (or ended) meanwhile: said as such */
        int ended = !s || !ses_live(s) || s->state == SES_ENDING;
        if (r)
            eai_reply_error(r, ended ? EAI_E_SESSION_ENDED : EAI_E_SANDBOX_FAILED,
                            detail1("", ended ? "the session ended during the snapshot"
                                              : err->message ? err->message : "snapshot failed"));
        snp_remove(reg, p, NULL, NULL);
        return;
    }
    p->size_bytes = size;
    snp_audit(app, p, p->actor, "sandbox.snapshot.create", "allow", p->session_id, p->request_id);
    struct rec_job *j = calloc(1, sizeof *j);
    json_t *rec = snp_record(p);
    char root[PATH_MAX];
    if (j && rec) {
        j->app = app;
        j->p = p;
        snprintf(j->path, sizeof j->path, "%s/%s.json", snp_root(app, root, sizeof root), p->id);
        j->text = json_dumps(rec, JSON_COMPACT);
        j->doc = json_incref(rec);
    }
    json_decref(rec);
    if (!j || !j->text) {
        if (j)
            free(j);
        if (r)
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
        snp_remove(reg, p, NULL, NULL);
        return;
    }
    eai_park(reg->parks, r, &rec_ops, j);
}

/* What a fork of s gets: its profile, image, limits, env, lifetimes and ids. */
static json_t *ses_spec(const struct eai_session *s)
{
    /* netns: its sandbox runs gVisor's network stack in a namespace of
     * core's; a fork is restored with it, in a namespace of its own with
     * the allow list of the fork request (never the parent's) */
    json_t *sp = json_pack("{s:s, s:s, s:O, s:O, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:b, s:b, s:I, s:s, s:s, s:s}",
                     "profile", s->profile, "image", s->image, "limits", s->limits, "env", s->env, "cpu_millis",
                     (json_int_t)s->cpu_millis, "memory_bytes", (json_int_t)s->memory_bytes, "pids",
                     (json_int_t)s->pids, "disk_bytes", (json_int_t)s->disk_bytes, "idle_timeout_s",
                     (json_int_t)s->idle_timeout_s, "ttl_s", (json_int_t)s->ttl_s, "max_concurrent",
                     s->max_concurrent, "auto_resume", s->auto_resume, "auto_pause", s->auto_pause,
                     "paused_ttl_s", (json_int_t)s->paused_ttl_s, "project_id", s->project_id, "agent_id",
                     s->agent_id, "run_id", s->run_id);
    if (sp)
        json_object_set_new(sp, "netns", json_boolean(s->lease != NULL));
    return sp;
}

static void refuse(struct eai_app *app, struct eai_req *r, const char *action, const char *target,
                   enum eai_code code, json_t *details)
{
    if (eai_req_tenant(r)) {
        json_t *ev = eai_req_audit_event(r, action, target, "deny", eai_code_name(code));
        if (ev)
            eai_req_audit_async(app, eai_req_tenant(r), ev);
    }
    if (code == EAI_E_NOT_FOUND) {
        json_decref(details);
        eai_reply_not_found(r, EAI_MISSING_SNAPSHOT);
        return;
    }
    eai_reply_error(r, code, details);
}

void ses_snapshot_create(struct eai_app *app, struct eai_req *r, struct eai_session *s)
{
    struct eai_sessions *reg = s->reg;
    const struct eai_config *cfg = app->cfg;
    const char *action = "sandbox.snapshot.create";
    const struct eai_isolation_ops *ops = ses_ops(s);
    /* body: optional, {"ttl_s": N} */
    int64_t ttl = cfg ? cfg->sessions_snapshot_ttl_s : 7 * 86400;
    size_t blen = 0;
    const char *b = eai_req_body(r, &blen);
    if (b && blen > 0) {
        json_t *body = eai_req_body_json(r, 0);
        if (!body)
            return; /* replied 400 / 415 */
        const char *k;
        json_t *v;
        const char *bad = json_is_object(body) ? NULL : "";
        json_object_foreach(body, k, v) {
            if (bad)
                break;
            if (strcmp(k, "ttl_s") != 0)
                bad = "unknown";
            else if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                     json_integer_value(v) > (cfg ? cfg->sessions_max_snapshot_ttl_s : 30 * 86400))
                bad = "/ttl_s";
            else
                ttl = json_integer_value(v);
        }
        json_decref(body);
        if (bad) {
            refuse(app, r, action, s->id, EAI_E_VALIDATION_FAILED,
                   !strcmp(bad, "/ttl_s") ? detail1("/ttl_s", "must be an integer within the configured bounds"
                                                             " (docs/sessions.md)")
                   : !strcmp(bad, "") ? detail1("", "must be an object")
                                      : detail1("", "unknown field: a snapshot's body takes only ttl_s"));
            return;
        }
    }
    if (!ops || !ops->session_snapshot || ops->size < EAI_ISOLATION_OPS_SIZE_1_5) {
        char m[200];
        snprintf(m, sizeof m, "the backend '%s' of profile '%s' cannot take snapshots", s->backend, s->profile);
        refuse(app, r, action, s->id, EAI_E_SNAPSHOTS_UNSUPPORTED, detail1("", m));
        return;
    }
    if (!ses_live(s) || s->state == SES_ENDING) {
        refuse(app, r, action, s->id, EAI_E_SESSION_ENDED, detail1("/status", "the session has ended"));
        return;
    }
    if (s->state != SES_RUNNING || s->snapshotting) {
        refuse(app, r, action, s->id, EAI_E_CONFLICT,
               detail1("/status", "only a running session can be snapshotted (not paused, starting or in another"
                                  " snapshot)"));
        return;
    }
    /* quotas: how many the tenant keeps, their bytes (one in flight counts
     * its bound: memory limit + /tmp size), the data disk's floor */
    int max_n = cfg ? cfg->sessions_snapshots_max_per_tenant : 20;
    int64_t quota = cfg ? cfg->sessions_snapshot_quota : 8LL << 30;
    int64_t floor_b = cfg ? cfg->sessions_min_free_bytes : 1LL << 30;
    int n = 0;
    int64_t used = 0, bound = s->memory_bytes + s->disk_bytes;
    for (const struct eai_snapshot *p = reg->snaps; p; p = p->next) {
        if (strcmp(p->tenant, s->tenant) != 0 || p->state == SNP_DELETED)
            continue;
        n++;
        used += p->state == SNP_CREATING ? p->bound_bytes : p->size_bytes;
    }
    if (n >= max_n) {
        char m[160];
        snprintf(m, sizeof m, "at most %d snapshots per tenant (sessions.snapshots_max_per_tenant)", max_n);
        refuse(app, r, action, s->id, EAI_E_SNAPSHOT_LIMIT, detail1("", m));
        return;
    }
    if (used + bound > quota) {
        char m[300];
        snprintf(m, sizeof m, "the tenant's snapshots would hold up to %lld bytes, over its quota of %lld"
                 " (sessions.snapshot_quota_bytes)", (long long)(used + bound), (long long)quota);
        refuse(app, r, action, s->id, EAI_E_STORAGE_QUOTA_EXCEEDED, detail1("", m));
        return;
    }
    char root[PATH_MAX];
    struct statvfs vfs;
    if (statvfs(cfg && cfg->data_dir ? cfg->data_dir : ".", &vfs) == 0) {
        int64_t avail = (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
        if (avail - bound < floor_b) {
            char m[300];
            snprintf(m, sizeof m, "the data disk has %lld bytes free: a snapshot of up to %lld bytes would leave"
                     " less than sessions.min_free_bytes (%lld)", (long long)avail, (long long)bound,
                     (long long)floor_b);
            refuse(app, r, action, s->id, EAI_E_INSUFFICIENT_STORAGE, detail1("", m));
            return;
        }
    }
    int64_t retry = 0;
    if (!ses_rate_take(s, &retry)) {
        json_t *ev = eai_req_audit_event(r, action, s->id, "deny", "rate_limited");
        if (ev)
            eai_req_audit_async(app, s->tenant, ev);
        char ra[48];
        snprintf(ra, sizeof ra, "Retry-After: %lld", (long long)retry);
        const char *h[] = {ra, NULL};
        json_t *env = eai_http_error_envelope(EAI_E_RATE_LIMITED, eai_req_lang(r), eai_req_id(r),
                                              detail1("", "too many pauses and resumes of this session or tenant per"
                                                          " minute (sessions.pause_per_minute,"
                                                          " sessions.tenant_pause_per_minute)"));
        if (env)
            eai_reply_json_headers(r, 429, env, h);
        else
            eai_reply_error(r, EAI_E_RATE_LIMITED, NULL);
        return;
    }
    struct eai_snapshot *p = calloc(1, sizeof *p);
    if (!p || !(p->spec = ses_spec(s))) {
        free(p);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    char uuid[37], dir[PATH_MAX + 64];
    eai_uuid_v4(uuid);
    snprintf(p->id, sizeof p->id, "snp_%s", uuid);
    snprintf(p->tenant, sizeof p->tenant, "%s", s->tenant);
    snprintf(p->session_id, sizeof p->session_id, "%s", s->id);
    snprintf(p->actor, sizeof p->actor, "%s", eai_req_key_id(r) ? eai_req_key_id(r) : "anonymous");
    snprintf(p->request_id, sizeof p->request_id, "%s", eai_req_id(r) ? eai_req_id(r) : "");
    p->app = app;
    p->state = SNP_CREATING;
    p->bound_bytes = bound;
    p->created_ms = eai_now_ms();
    p->expires_ms = p->created_ms + ttl * 1000;
    snprintf(dir, sizeof dir, "%s/%s", snp_root(app, root, sizeof root), p->id);
    struct eai_error *err = NULL;
    if (ops->session_snapshot(s->prof->iso->self, s->id, dir, snap_done, p, &err) < 0) {
        enum eai_code code = err ? err->code : EAI_E_INTERNAL;
        refuse(app, r, action, s->id, code, err && err->message ? detail1("", err->message) : NULL);
        eai_error_free(err);
        snp_free(p);
        return;
    }
    s->snapshotting++;
    s->last_used_ms = eai_now_ms();
    p->next = reg->snaps;
    reg->snaps = p;
    /* answered once the backend is done and the record written */
    p->hold = eai_park_hold(reg->parks, r);
    if (!p->hold) {
        json_t *v = snp_view(p);
        eai_reply_json(r, 202, v);
    }
}

/* ------------------------------------------------------------ another node's (storage) */

enum lk_kind { LK_GET = 0, LK_DELETE, LK_FORK };

struct lookup_job {
    struct eai_app *app;
    enum lk_kind kind;
    char tenant[64], id[48], session_id[48];
    int list;                      /* GET /v1/sandbox/snapshots: the tenant's records */
    json_t *out;                   /* the record, or the list */
    int rc;
};

static void lookup_work(void *arg)
{
    struct lookup_job *j = arg;
    struct eai_error *e = NULL;
    const struct eai_storage_ops *st = j->app->store;
    if (j->list) {
        json_t *f = json_pack("{s:i}", "limit", 1000);
        if (f && j->session_id[0])
            json_object_set_new(f, "session_id", json_string(j->session_id));
        j->rc = f ? st->snapshot_list(j->app->storage.self, j->tenant, f, &j->out, &e) : -1;
        json_decref(f);
    } else {
        j->rc = st->snapshot_get(j->app->storage.self, j->tenant, j->id, &j->out, &e);
    }
    if (j->rc < 0)
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "snapshots: reading storage: %s", e && e->message ? e->message : "?");
    eai_error_free(e);
}

static void lookup_answer(struct eai_req *r, void *arg)
{
    struct lookup_job *j = arg;
    struct eai_sessions *reg = ses_reg(j->app);
    if (!r)
        return;
    if (j->rc < 0 || !reg) {
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    if (j->list) {
        /* this node's from its registry (their live state), the others'
         * records from storage */
        json_t *items = json_array();
        for (struct eai_snapshot *p = reg->snaps; p && items; p = p->next)
            if (!strcmp(p->tenant, j->tenant) && p->state != SNP_DELETED &&
                (!j->session_id[0] || !strcmp(j->session_id, p->session_id))) {
                json_t *v = snp_view(p);
                if (v)
                    json_array_append_new(items, v);
            }
        size_t i;
        json_t *rec;
        json_array_foreach(j->out, i, rec) {
            const char *id = json_string_value(json_object_get(rec, "id"));
            if (!id || snp_find(reg, j->tenant, id))
                continue;
            const char *owner = json_string_value(json_object_get(rec, "owner"));
            if (owner && !strcmp(owner, reg->node))
                continue; /* this node's, deleted meanwhile */
            json_t *v = snp_view_record(j->app, j->tenant, rec);
            if (v && items)
                json_array_append_new(items, v);
        }
        if (items)
            eai_reply_json(r, 200, json_pack("{s:o}", "items", items));
        else
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    struct eai_snapshot *here = snp_find(reg, j->tenant, j->id);
    const char *owner = json_string_value(json_object_get(j->out, "owner"));
    if (here || !j->out || (owner && !strcmp(owner, reg->node))) {
        /* taken here meanwhile, or gone: the route again answers from the registry */
        if (j->kind == LK_GET && here) {
            json_t *v = snp_view(here);
            if (v)
                eai_reply_json(r, 200, v);
            else
                eai_reply_error(r, EAI_E_INTERNAL, NULL);
            return;
        }
        json_t *ev = eai_req_audit_event(r, j->kind == LK_GET ? "sandbox.snapshot.get" : j->kind == LK_DELETE
                                                                 ? "sandbox.snapshot.delete" : "sandbox.session.fork",
                                         j->id, "deny", "not_found");
        if (ev)
            eai_req_audit_async(j->app, j->tenant, ev);
        eai_reply_not_found(r, EAI_MISSING_SNAPSHOT);
        return;
    }
    if (j->kind == LK_GET) {
        json_t *v = snp_view_record(j->app, j->tenant, j->out);
        if (v)
            eai_reply_json(r, 200, v);
        else
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    char m[300];
    snprintf(m, sizeof m, j->kind == LK_DELETE ? "the snapshot is on node %s: delete it through that node"
                                               : "the snapshot is on node %s: fork it through that node",
             owner ? owner : "?");
    eai_reply_error(r, EAI_E_CONFLICT, detail1(j->kind == LK_FORK ? "/from_snapshot" : "", m));
}

static void lookup_free(void *arg)
{
    struct lookup_job *j = arg;
    json_decref(j->out);
    free(j);
}

static const struct eai_park_ops lookup_ops = {
    .what = "snapshot_lookup", .work = lookup_work, .answer = lookup_answer, .free = lookup_free,
};

/* Not in this node's registry: with the records in storage, look there on
 * a worker (another node's snapshot), else 404 at once.  1 when parked. */
int snp_route_stored(struct eai_app *app, struct eai_req *r, int kind, const char *id, const char *session_id,
                     int list)
{
    struct eai_sessions *reg = ses_reg(app);
    if (!reg || !snp_store_on(app) || !eai_req_tenant(r))
        return 0;
    struct lookup_job *j = calloc(1, sizeof *j);
    if (!j)
        return 0;
    j->app = app;
    j->kind = (enum lk_kind)kind;
    j->list = list;
    snprintf(j->tenant, sizeof j->tenant, "%s", eai_req_tenant(r));
    snprintf(j->id, sizeof j->id, "%s", id ? id : "");
    snprintf(j->session_id, sizeof j->session_id, "%s", session_id ? session_id : "");
    eai_park(reg->parks, r, &lookup_ops, j);
    return 1;
}

/* ------------------------------------------------------------ routes */

void eai_snapshot_route_get(struct eai_app *app, struct eai_req *r)
{
    struct eai_sessions *reg = ses_reg(app);
    const char *id = eai_req_param(r, "id");
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    struct eai_snapshot *p = snp_id_ok(id) ? snp_find(reg, eai_req_tenant(r), id) : NULL;
    if (!p && snp_id_ok(id) && snp_route_stored(app, r, LK_GET, id, NULL, 0))
        return; /* another node's, from storage */
    if (!p) {
        refuse(app, r, "sandbox.snapshot.get", snp_id_ok(id) ? id : "", EAI_E_NOT_FOUND, NULL);
        return;
    }
    json_t *v = snp_view(p);
    if (v)
        eai_reply_json(r, 200, v);
    else
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
}

void eai_snapshot_route_list(struct eai_app *app, struct eai_req *r)
{
    struct eai_sessions *reg = ses_reg(app);
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    const char *sid = eai_req_query(r, "session_id");
    if (sid && strlen(sid) > 47) {
        eai_reply_error(r, EAI_E_VALIDATION_FAILED, detail1("/session_id", "must be a session id (ses_...)"));
        return;
    }
    if (snp_route_stored(app, r, LK_GET, NULL, sid, 1))
        return; /* with storage: every node's */
    json_t *items = json_array();
    for (struct eai_snapshot *p = reg->snaps; p && items; p = p->next) {
        if (strcmp(p->tenant, eai_req_tenant(r)) != 0 || p->state == SNP_DELETED)
            continue;
        if (sid && strcmp(sid, p->session_id) != 0)
            continue;
        json_t *v = snp_view(p);
        if (v)
            json_array_append_new(items, v);
    }
    if (!items) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

void eai_snapshot_route_delete(struct eai_app *app, struct eai_req *r)
{
    struct eai_sessions *reg = ses_reg(app);
    const char *id = eai_req_param(r, "id");
    const char *action = "sandbox.snapshot.delete";
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    struct eai_snapshot *p = snp_id_ok(id) ? snp_find(reg, eai_req_tenant(r), id) : NULL;
    if (!p && snp_id_ok(id) && snp_route_stored(app, r, LK_DELETE, id, NULL, 0))
        return; /* another node's: 409 (or 404) */
    if (!p) {
        refuse(app, r, action, snp_id_ok(id) ? id : "", EAI_E_NOT_FOUND, NULL);
        return;
    }
    if (p->state != SNP_READY || p->users > 0) {
        refuse(app, r, action, p->id, EAI_E_CONFLICT,
               detail1("/status", p->state == SNP_CREATING ? "the snapshot is still being taken"
                                  : p->state == SNP_DELETING ? "the snapshot is being deleted"
                                                             : "sessions are being restored from it: retry once"
                                                               " they are running"));
        return;
    }
    json_t *ev = eai_req_audit_event(r, action, p->id, "allow", NULL);
    if (ev)
        eai_req_audit_async(app, p->tenant, ev);
    eai_metrics_add("eai_snapshots_deleted_total", NULL, 1);
    snp_remove(reg, p, r, "deleted"); /* answered once its files are gone */
}

/* Retention (the registry's tick): expired snapshots go. */
void snp_tick(struct eai_sessions *reg, int64_t now)
{
    for (struct eai_snapshot *p = reg->snaps, *n; p; p = n) {
        n = p->next;
        if (p->state == SNP_READY && p->users == 0 && p->expires_ms && now >= p->expires_ms) {
            eai_log(SES_COMPONENT, EAI_LOG_INFO, "snapshot %s expired: removing it", p->id);
            snp_audit(reg->app, p, "system", "sandbox.snapshot.delete", "allow", "retention", NULL);
            eai_metrics_add("eai_snapshots_deleted_total", NULL, 1);
            snp_remove(reg, p, NULL, "retention");
        }
    }
}

/* ------------------------------------------------------------ forks */

struct eai_snapshot *snp_lookup(struct eai_sessions *reg, const char *tenant, const char *id)
{
    return snp_id_ok(id) ? snp_find(reg, tenant, id) : NULL;
}

/* Fill s (a new session, id set) from snapshot p's spec.  0 or -1 (the
 * profile is gone from this node's configuration). */
int snp_fill_session(struct eai_app *app, const struct eai_snapshot *p, struct eai_session *s)
{
    const json_t *sp = p->spec;
    const char *prof = json_string_value(json_object_get(sp, "profile"));
    s->prof = NULL;
    for (int i = 0; prof && i < app->nprofiles; i++)
        if (!strcmp(app->profiles[i].name, prof))
            s->prof = &app->profiles[i];
    if (!s->prof || !ses_profile_ops(s->prof))
        return -1;
#define SP_STR(dst, key) \
    snprintf(dst, sizeof dst, "%s", json_string_value(json_object_get(sp, key)) ? json_string_value(json_object_get(sp, key)) : "")
#define SP_INT(key) ((int64_t)json_integer_value(json_object_get(sp, key)))
    SP_STR(s->profile, "profile");
    snprintf(s->backend, sizeof s->backend, "%s", s->prof->backend);
    SP_STR(s->image, "image");
    SP_STR(s->project_id, "project_id");
    SP_STR(s->agent_id, "agent_id");
    SP_STR(s->run_id, "run_id");
    s->limits = json_deep_copy(json_object_get(sp, "limits"));
    s->env = json_deep_copy(json_object_get(sp, "env"));
    if (!s->env)
        s->env = json_object();
    s->cpu_millis = SP_INT("cpu_millis");
    s->memory_bytes = SP_INT("memory_bytes");
    s->pids = SP_INT("pids");
    s->disk_bytes = SP_INT("disk_bytes");
    s->idle_timeout_s = SP_INT("idle_timeout_s");
    s->ttl_s = SP_INT("ttl_s");
    s->max_concurrent = (int)SP_INT("max_concurrent");
    s->paused_ttl_s = SP_INT("paused_ttl_s");
    s->auto_resume = json_is_true(json_object_get(sp, "auto_resume"));
    s->auto_pause = json_is_true(json_object_get(sp, "auto_pause"));
    s->need_netns = json_is_true(json_object_get(sp, "netns"));
#undef SP_STR
#undef SP_INT
    if (s->max_concurrent < 1)
        s->max_concurrent = 1;
    return s->limits ? 0 : -1;
}

int snp_dir(struct eai_app *app, const struct eai_snapshot *p, char *out, size_t len)
{
    char root[PATH_MAX];
    return snprintf(out, len, "%s/%s", snp_root(app, root, sizeof root), p->id) >= (int)len ? -1 : 0;
}

/* ------------------------------------------------------------ start */

/* Read back the records of this node's snapshots (start-up, before the
 * routes serve); a directory without a record (a snapshot interrupted
 * by a stop) and a record without its directory are removed. */
int snp_start(struct eai_sessions *reg, struct eai_error **err)
{
    char root[PATH_MAX];
    snp_root(reg->app, root, sizeof root);
    if (eai_mkdir_p(root, 0700) < 0)
        return eai_error_set(err, EAI_E_INTERNAL, "cannot make %s: %s", root, strerror(errno));
    int stored = snp_store_on(reg->app);
    if (stored) {
        /* this node's records, from storage (start-up: before the routes
         * serve, as the sessions' sweep) */
        json_t *rows = NULL;
        if (reg->app->store->snapshot_owned(reg->app->storage.self, reg->node, 1000, &rows, err) < 0)
            return -1;
        size_t i;
        json_t *row;
        json_array_foreach(rows, i, row) {
            const char *tenant = json_string_value(json_object_get(row, "tenant_id"));
            struct eai_snapshot *p = snp_from_record(reg->app, tenant, json_object_get(row, "doc"));
            char dir[PATH_MAX + 64];
            struct stat st;
            if (p)
                snprintf(dir, sizeof dir, "%s/%s", root, p->id);
            if (p && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
                p->next = reg->snaps;
                reg->snaps = p;
            } else if (p) { /* its image is gone: the record goes too */
                struct eai_error *e = NULL;
                reg->app->store->snapshot_delete(reg->app->storage.self, p->tenant, p->id, &e);
                eai_error_free(e);
                json_decref(p->spec);
                free(p);
            }
        }
        json_decref(rows);
    }
    DIR *d = opendir(root);
    if (!d)
        return eai_error_set(err, EAI_E_INTERNAL, "cannot read %s: %s", root, strerror(errno));
    struct dirent *e;
    int loaded = 0, removed = 0;
    int64_t now = eai_now_ms();
    while ((e = readdir(d))) {
        char path[PATH_MAX + 300], other[PATH_MAX + 300], id[64];
        size_t nl = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        if (nl == 45 && !strcmp(e->d_name + 40, ".json") && !stored) {
            snprintf(id, sizeof id, "%.40s", e->d_name);
            snprintf(other, sizeof other, "%s/%s", root, id);
            struct stat st;
            json_t *rec = NULL;
            size_t len = 0;
            char *text = snp_id_ok(id) && stat(other, &st) == 0 && S_ISDIR(st.st_mode)
                             ? eai_read_file(path, SNP_REC_MAX, &len)
                             : NULL;
            if (text)
                rec = json_loadb(text, len, 0, NULL);
            free(text);
            const char *tenant = json_string_value(json_object_get(rec, "tenant_id"));
            const char *sid = json_string_value(json_object_get(rec, "session_id"));
            struct eai_snapshot *p = rec && tenant && sid && json_is_object(json_object_get(rec, "spec"))
                                         ? calloc(1, sizeof *p)
                                         : NULL;
            if (!p) {
                json_decref(rec);
                unlink(path);
                eai_rm_tree(other);
                removed++;
                continue;
            }
            snprintf(p->id, sizeof p->id, "%s", id);
            snprintf(p->tenant, sizeof p->tenant, "%s", tenant);
            snprintf(p->session_id, sizeof p->session_id, "%s", sid);
            snprintf(p->actor, sizeof p->actor, "%s",
                     json_string_value(json_object_get(rec, "actor")) ? json_string_value(json_object_get(rec, "actor"))
                                                                      : "");
            p->app = reg->app;
            p->state = SNP_READY;
            p->size_bytes = json_integer_value(json_object_get(rec, "size_bytes"));
            p->created_ms = json_integer_value(json_object_get(rec, "created_ms"));
            p->expires_ms = json_integer_value(json_object_get(rec, "expires_ms"));
            p->spec = json_incref(json_object_get(rec, "spec"));
            json_decref(rec);
            p->next = reg->snaps;
            reg->snaps = p;
            loaded++;
            continue;
        }
        if (nl == 40 && snp_id_ok(e->d_name)) {
            snprintf(other, sizeof other, "%s.json", path);
            int known = 0;
            for (struct eai_snapshot *p = reg->snaps; p && !known; p = p->next)
                known = !strcmp(p->id, e->d_name);
            if (stored ? !known : access(other, F_OK) != 0) { /* interrupted while taken */
                eai_rm_tree(path);
                removed++;
            }
            continue;
        }
        if (nl > 9 && !strcmp(e->d_name + nl - 9, ".json.new")) {
            unlink(path);
            continue;
        }
    }
    closedir(d);
    if (loaded || removed)
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "snapshots: %d read back, %d incomplete removed", loaded, removed);
    snp_tick(reg, now); /* what expired while eaid was down */
    return 0;
}
