/*
 * Stored sessions (docs/sessions.md "Stored sessions"; storage ops
 * session_put, session_get, session_list, session_owned of ABI 1.4).
 *
 * Every change of a session's state (and its executions count, and a
 * heartbeat every minute while it lives) writes its record: the public view
 * plus what this node needs to bill it or read it back (owner node, limits,
 * usage so far, times) under "x".  Writes go to a worker; doc.rev orders
 * them in the storage, so a late write never overwrites a newer one.
 *
 * Reads: GET and list answer from storage when the registry of this node
 * does not hold the session (after a restart, or a session of another
 * replica); a route on an id this node does not hold answers from the
 * record (ended: 409 session_ended; live on another node: 409 conflict).
 *
 * At start the records this node left live in a previous life (kill -9,
 * power loss: the gVisor start-up sweep removed their sandboxes) are ended
 * `interrupted`, with a usage event marked partial (what the record knew:
 * its duration up to the last heartbeat, cpu 0) and an audit event.  The
 * node's name is kept in <data_dir>/node-name so that a restart finds them.
 */
#include <errno.h>
#include <event2/http.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session/session_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "http/http_util.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "plugin/host.h"
#include "http_client.h"

#define SES_LIST_DEFAULT 100
#define SES_LIST_MAX 1000

int ses_store_on(const struct eai_app *app)
{
    const struct eai_storage_ops *st = app ? app->store : NULL;
    return st && st->session_put && st->session_get && st->session_list && st->session_owned;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static int64_t jint(const json_t *o, const char *k)
{
    return (int64_t)json_integer_value(json_object_get(o, k));
}

/* ------------------------------------------------------------ the record */

static json_t *record_of(struct eai_session *s, int64_t now)
{
    json_t *d = ses_view(s);
    json_t *x = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:O, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:b, s:I}",
                          "actor", s->actor, "request_id", s->request_id, "backend", s->backend,
                          "cpu_millis", (json_int_t)s->cpu_millis, "memory_bytes", (json_int_t)s->memory_bytes,
                          "pids", (json_int_t)s->pids, "disk_bytes", (json_int_t)s->disk_bytes, "env", s->env,
                          "created_ms", (json_int_t)s->created_ms, "ready_ms", (json_int_t)s->ready_ms,
                          "ended_ms", (json_int_t)s->ended_ms, "last_used_ms", (json_int_t)s->last_used_ms,
                          "paused_ms", (json_int_t)s->paused_ms, "paused_s", s->paused_s,
                          "cpu_seconds", s->cpu_seconds, "peak_mb", s->peak_mb, "interrupted", s->interrupted,
                          "seen_ms", (json_int_t)now);
    if (!d || !x) {
        json_decref(d);
        json_decref(x);
        return NULL;
    }
    json_object_set_new(d, "rev", json_integer(++s->rev));
    json_object_set_new(d, "owner", json_string(s->reg->node));
    /* where the other replicas forward calls on it (sessions.advertise_url) */
    const struct eai_config *cfg = s->reg->app->cfg;
    if (cfg && cfg->sessions_advertise_url && cfg->sessions_advertise_url[0])
        json_object_set_new(d, "owner_url", json_string(cfg->sessions_advertise_url));
    /* this process: only it claims the session's executions (PostgreSQL) */
    if (s->reg->app->host && s->reg->app->host->node_id)
        json_object_set_new(d, "claim_owner", json_string(s->reg->app->host->node_id));
    json_object_set_new(d, "tenant_id", json_string(s->tenant));
    json_object_set_new(x, "paused_by", json_string(s->paused_by));
    json_object_set_new(d, "x", x);
    return d;
}

json_t *ses_record(struct eai_session *s)
{
    return record_of(s, eai_now_ms());
}

/* The public view kept in a record. */
static json_t *view_of_record(const json_t *doc)
{
    json_t *v = json_deep_copy(doc);
    if (v) {
        json_object_del(v, "rev");
        json_object_del(v, "owner");
        json_object_del(v, "claim_owner");
        json_object_del(v, "owner_url");
        json_object_del(v, "tenant_id");
        json_object_del(v, "x");
    }
    return v;
}

static int status_terminal(const char *st)
{
    return !st || !strcmp(st, "ended") || !strcmp(st, "failed") || !strcmp(st, "interrupted");
}

static enum ses_state state_of(const char *st)
{
    for (int i = 0; i <= SES_INTERRUPTED; i++)
        if (st && !strcmp(st, ses_state_name((enum ses_state)i)))
            return (enum ses_state)i;
    return SES_INTERRUPTED;
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

/* A session rebuilt from its record (not in any list yet). */
struct eai_session *ses_of_record(struct eai_sessions *reg, const char *tenant, const json_t *doc)
{
    const json_t *x = json_object_get(doc, "x");
    const char *id = jstr(doc, "id");
    if (!ses_id_ok(id) || !json_is_object(x))
        return NULL;
    struct eai_session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->reg = reg;
    copy_str(s->id, sizeof s->id, id);
    copy_str(s->tenant, sizeof s->tenant, tenant);
    copy_str(s->actor, sizeof s->actor, jstr(x, "actor"));
    copy_str(s->request_id, sizeof s->request_id, jstr(x, "request_id"));
    s->state = state_of(jstr(doc, "status"));
    copy_str(s->end_reason, sizeof s->end_reason, jstr(doc, "end_reason"));
    copy_str(s->message, sizeof s->message, jstr(doc, "message"));
    copy_str(s->profile, sizeof s->profile, jstr(doc, "profile"));
    copy_str(s->backend, sizeof s->backend, jstr(x, "backend"));
    s->prof = eai_app_profile(reg->app, s->profile);
    copy_str(s->image, sizeof s->image, jstr(doc, "image"));
    copy_str(s->project_id, sizeof s->project_id, jstr(doc, "project_id"));
    copy_str(s->agent_id, sizeof s->agent_id, jstr(doc, "agent_id"));
    copy_str(s->run_id, sizeof s->run_id, jstr(doc, "run_id"));
    s->limits = json_deep_copy(json_object_get(doc, "limits"));
    const json_t *eg = json_object_get(json_object_get(doc, "network"), "egress");
    if (json_array_size(eg) > 0)
        s->egress = json_deep_copy(eg);
    s->env = json_deep_copy(json_object_get(x, "env"));
    if (!s->limits)
        s->limits = json_object();
    if (!s->env)
        s->env = json_object();
    s->cpu_millis = jint(x, "cpu_millis");
    s->memory_bytes = jint(x, "memory_bytes");
    s->pids = jint(x, "pids");
    s->disk_bytes = jint(x, "disk_bytes");
    s->idle_timeout_s = jint(doc, "idle_timeout_s");
    s->ttl_s = jint(doc, "ttl_s");
    s->max_concurrent = (int)jint(doc, "max_concurrent_executions");
    s->auto_resume = json_is_true(json_object_get(doc, "auto_resume"));
    s->auto_pause = !json_is_false(json_object_get(doc, "auto_pause"));
    s->paused_ttl_s = json_is_integer(json_object_get(doc, "paused_ttl_s")) ? jint(doc, "paused_ttl_s") : 86400;
    s->created_ms = jint(x, "created_ms");
    s->ready_ms = jint(x, "ready_ms");
    s->ended_ms = jint(x, "ended_ms");
    s->last_used_ms = jint(x, "last_used_ms");
    s->paused_ms = jint(x, "paused_ms");
    s->paused_s = json_number_value(json_object_get(x, "paused_s"));
    s->cpu_seconds = json_number_value(json_object_get(x, "cpu_seconds"));
    s->peak_mb = json_number_value(json_object_get(x, "peak_mb"));
    s->interrupted = json_is_true(json_object_get(x, "interrupted"));
    s->executions = jint(doc, "executions");
    s->rev = jint(doc, "rev");
    copy_str(s->paused_by, sizeof s->paused_by, jstr(x, "paused_by"));
    if (!s->limits || !s->env) {
        ses_free(s);
        return NULL;
    }
    return s;
}

/* ------------------------------------------------------------ writes */

struct put_job {
    struct eai_app *app;
    char tenant[64], id[48];
    json_t *doc;
    int rc;
    struct eai_error *err;
};

static void put_work(void *arg)
{
    struct put_job *j = arg;
    j->rc = j->app->store->session_put(j->app->storage.self, j->tenant, j->doc, NULL, &j->err);
}

static void put_answer(struct eai_req *r, void *arg)
{
    (void)r;
    struct put_job *j = arg;
    if (j->rc < 0)
        eai_log(SES_COMPONENT, EAI_LOG_ERROR, "session %s: writing its record failed: %s", j->id,
                j->err && j->err->message ? j->err->message : "?");
}

static void put_free(void *arg)
{
    struct put_job *j = arg;
    json_decref(j->doc);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops put_ops = {
    .what = "session_put", .work = put_work, .answer = put_answer, .free = put_free,
};

void ses_persist(struct eai_session *s)
{
    struct eai_sessions *reg = s->reg;
    if (!reg || !reg->parks || !ses_store_on(reg->app))
        return;
    struct put_job *j = calloc(1, sizeof *j);
    int64_t now = eai_now_ms();
    if (!j || !(j->doc = record_of(s, now))) {
        free(j);
        eai_log(SES_COMPONENT, EAI_LOG_ERROR, "session %s: out of memory writing its record", s->id);
        return;
    }
    j->app = reg->app;
    copy_str(j->tenant, sizeof j->tenant, s->tenant);
    copy_str(j->id, sizeof j->id, s->id);
    s->persisted_ms = now;
    eai_park(reg->parks, NULL, &put_ops, j);
}

/* ------------------------------------------------------------ a previous life */

/* The record of a session this node left live when it died: ended with
 * partial usage (a session being ended keeps its reason and is `ended`;
 * any other is `interrupted`), billed, audited, written, and kept in the
 * registry like any ended session.  Returns it (NULL when out of memory). */
static struct eai_session *adopt_dead(struct eai_sessions *reg, const char *tenant, const json_t *doc)
{
    struct eai_session *s = ses_of_record(reg, tenant, doc);
    if (!s)
        return NULL;
    const json_t *x = json_object_get(doc, "x");
    int64_t seen = jint(x, "seen_ms");
    int was_ending = s->state == SES_ENDING && s->end_reason[0];
    s->state = was_ending ? SES_ENDED : SES_INTERRUPTED;
    if (!was_ending)
        copy_str(s->end_reason, sizeof s->end_reason, "interrupted");
    copy_str(s->message, sizeof s->message, "its eaid stopped without a drain (crash, kill -9 or power loss):"
             " the sandbox was removed at the next start");
    s->ended_ms = seen > s->created_ms ? seen : eai_now_ms();
    s->interrupted = 1;
    s->next = reg->list;
    reg->list = s;
    eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s (tenant %s) was live when this node last stopped: %s",
            s->id, s->tenant, s->end_reason);
    ses_record_end(reg, s);
    ses_persist(s);
    return s;
}

/* A record this node left paused (drained by a stop, or paused and kept):
 * taken back from its backend as a paused session, resumed by the next
 * call as from any pause.  NULL when the backend has nothing kept under
 * its id (then the caller ends it as interrupted). */
static struct eai_session *adopt_paused(struct eai_sessions *reg, const char *tenant, const json_t *doc)
{
    const char *st = jstr(doc, "status");
    if (!st || strcmp(st, "paused") != 0)
        return NULL;
    struct eai_session *s = ses_of_record(reg, tenant, doc);
    if (!s)
        return NULL;
    struct eai_error *err = NULL;
    if (!s->prof || !ses_profile_ops(s->prof) || ses_adopt(s, &err) < 0) {
        eai_log(SES_COMPONENT, EAI_LOG_WARN, "session %s: its paused sandbox cannot be taken back: %s", s->id,
                err && err->message ? err->message : "its profile or backend is gone");
        eai_error_free(err);
        ses_free(s);
        return NULL;
    }
    if (!s->paused_ms)
        s->paused_ms = eai_now_ms();
    s->last_used_ms = eai_now_ms();
    s->next = reg->list;
    reg->list = s;
    eai_log(SES_COMPONENT, EAI_LOG_INFO, "session %s (tenant %s) kept paused across the restart", s->id,
            s->tenant);
    ses_persist(s); /* owner: this node's name, as before */
    return s;
}

struct sweep_job {
    struct eai_app *app;
    struct eai_sessions *reg;
    char node[64];
    json_t *out;
    int rc;
    struct eai_error *err;
};

static void sweep_work(void *arg)
{
    struct sweep_job *j = arg;
    j->rc = j->app->store->session_owned(j->app->storage.self, j->node, SES_SWEEP_MAX, &j->out, &j->err);
}

static void sweep_answer(struct eai_req *r, void *arg)
{
    (void)r;
    struct sweep_job *j = arg;
    struct eai_sessions *reg = ses_reg(j->app);
    if (!reg)
        return;
    if (j->rc < 0) {
        eai_log(SES_COMPONENT, EAI_LOG_ERROR, "sessions: reading the records of a previous life failed: %s",
                j->err && j->err->message ? j->err->message : "?");
        return;
    }
    size_t i, n = 0, kept = 0;
    json_t *one;
    json_array_foreach(j->out, i, one) {
        const char *tenant = jstr(one, "tenant_id");
        const json_t *doc = json_object_get(one, "doc");
        if (!tenant || ses_find(reg, tenant, jstr(doc, "id")))
            continue; /* adopted meanwhile by a call on it */
        if (!strcmp(jstr(doc, "status") ? jstr(doc, "status") : "", "resuming") &&
            jstr(json_object_get(doc, "x"), "handoff_dir")) {
            ses_unclaim(reg, tenant, doc); /* claimed from the handoff directory, died before it ran */
            continue;
        }
        if (adopt_paused(reg, tenant, doc)) {
            kept++;
            continue;
        }
        n += adopt_dead(reg, tenant, doc) != NULL;
    }
    if (n)
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "sessions: %zu session(s) of a previous life recorded ended", n);
    if (kept)
        eai_log(SES_COMPONENT, EAI_LOG_INFO, "sessions: %zu paused session(s) kept across the restart", kept);
    /* what the backends kept and no record claims goes */
    for (int p = 0; p < j->app->nprofiles; p++) {
        const struct eai_profile *prof = &j->app->profiles[p];
        const struct eai_isolation_ops *ops = ses_profile_ops(prof);
        int seen = 0;
        for (int q = 0; q < p && !seen; q++)
            seen = j->app->profiles[q].iso == prof->iso;
        if (!seen && ops && ops->session_drop_kept)
            ops->session_drop_kept(prof->iso->self);
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
    .what = "session_sweep", .work = sweep_work, .answer = sweep_answer, .free = sweep_free,
};

/* <data_dir>/node-name: made once (a uuid), read at every start. */
static int node_name(struct eai_sessions *reg, struct eai_error **err)
{
    const char *dir = reg->app->cfg && reg->app->cfg->data_dir ? reg->app->cfg->data_dir : NULL;
    if (!dir) {
        copy_str(reg->node, sizeof reg->node, reg->app->host ? reg->app->host->node_id : "node");
        return 0;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/node-name", dir);
    char buf[64] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
            buf[--n] = 0;
        if (n < 8 || n > 40 || strspn(buf, "0123456789abcdef-") != (size_t)n)
            return eai_error_set(err, EAI_E_INTERNAL, "sessions: %s does not hold a node name (a uuid)", path);
        copy_str(reg->node, sizeof reg->node, buf);
        return 0;
    }
    if (errno != ENOENT)
        return eai_error_set(err, EAI_E_INTERNAL, "sessions: cannot read %s: %s", path, strerror(errno));
    char id[37];
    eai_uuid_v4(id);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 || write(fd, id, 36) != 36 || write(fd, "\n", 1) != 1 || fsync(fd) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return eai_error_set(err, EAI_E_INTERNAL, "sessions: cannot write %s: %s", path, strerror(e));
    }
    close(fd);
    copy_str(reg->node, sizeof reg->node, id);
    return 0;
}

int ses_store_start(struct eai_sessions *reg, struct eai_error **err)
{
    if (!ses_store_on(reg->app))
        return 0;
    if (node_name(reg, err) < 0)
        return -1;
    struct sweep_job *j = calloc(1, sizeof *j);
    if (!j)
        return eai_error_set(err, EAI_E_INTERNAL, "sessions: out of memory");
    j->app = reg->app;
    j->reg = reg;
    copy_str(j->node, sizeof j->node, reg->node);
    eai_park(reg->parks, NULL, &sweep_ops, j);
    return 0;
}

/* ------------------------------------------------------------ reads */

struct get_job {
    struct eai_app *app;
    char tenant[64], id[48], action[64];
    void (*route)(struct eai_app *, struct eai_req *);
    json_t *doc;
    int rc;
    struct eai_error *err;
    int again;                     /* after a lost claim: never claims again */
};

static void get_work(void *arg)
{
    struct get_job *j = arg;
    j->rc = j->app->store->session_get(j->app->storage.self, j->tenant, j->id, &j->doc, &j->err);
}

static void reply_detail(struct eai_req *r, enum eai_code code, const char *msg)
{
    eai_reply_error(r, code, json_pack("[{s:s, s:s}]", "path", "", "message", msg));
}

/* ------------------------------------------------------------ forwarding */

#define SES_FWD_HEADER "X-EAI-Forwarded"
#define SES_FWD_TIMEOUT_MS 120000

struct fwd {
    struct eai_parked *hold;
    int raw;                       /* the answer is a file's bytes (GET .../files/...) */
};

static void fwd_done(void *arg, const struct eai_http_response *resp)
{
    struct fwd *f = arg;
    struct eai_req *r = eai_park_release(f->hold);
    if (r) {
        if (!resp || resp->status == 0) {
            eai_log(SES_COMPONENT, EAI_LOG_WARN, "forwarding to the session's node failed: %s",
                    resp && resp->error ? resp->error : "?");
            eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE,
                            json_pack("[{s:s, s:s}]", "path", "", "message",
                                      "the node that runs the session did not answer"));
        } else if (f->raw && resp->status == 200) {
            eai_reply_raw(r, 200, "application/octet-stream", resp->body ? resp->body : "", resp->body_len);
        } else {
            json_t *j = resp->body ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
            if (j && (resp->status == 429 || resp->status == 503)) {
                const char *h[] = {"Retry-After: 1", NULL};
                eai_reply_json_headers(r, (int)resp->status, j, h);
            } else if (j) {
                eai_reply_json(r, (int)resp->status, j);
            } else {
                eai_reply_raw(r, (int)resp->status, "text/plain", resp->body ? resp->body : "", resp->body_len);
            }
        }
    }
    free(f);
}

/* Forward r to the node at url that runs the session (its own checks
 * follow there: the client's key, the tenant, the state).  Once only: a
 * forwarded request is never forwarded again.  0 when under way. */
static int forward(struct eai_app *app, struct eai_sessions *reg, struct eai_req *r, const char *url)
{
    const char *path = eai_req_path(r), *qp = eai_req_query(r, "path");
    size_t ulen = strlen(url);
    while (ulen && url[ulen - 1] == '/')
        ulen--;
    char *full = NULL, *qenc = qp ? evhttp_encode_uri(qp) : NULL;
    if (asprintf(&full, "%.*s%s%s%s", (int)ulen, url, path, qenc ? "?path=" : "", qenc ? qenc : "") < 0)
        full = NULL;
    free(qenc);
    struct fwd *f = full ? calloc(1, sizeof *f) : NULL;
    if (!f) {
        free(full);
        return -1;
    }
    f->raw = !strcmp(eai_req_method(r), "GET") && strstr(path, "/files/") != NULL;
    char auth[1024], ctype[256], lang[128], rid[200], me[128];
    const char *a = eai_req_header(r, "Authorization"), *ct = eai_req_header(r, "Content-Type");
    snprintf(auth, sizeof auth, "Authorization: %s", a ? a : "");
    snprintf(ctype, sizeof ctype, "Content-Type: %s", ct ? ct : "application/json");
    snprintf(lang, sizeof lang, "Accept-Language: %s", eai_req_lang(r));
    snprintf(rid, sizeof rid, "X-Request-Id: %s", eai_req_id(r) ? eai_req_id(r) : "");
    snprintf(me, sizeof me, SES_FWD_HEADER ": %s", reg->node);
    const char *headers[] = {auth, ctype, lang, rid, me, NULL};
    size_t blen = 0;
    const char *body = eai_req_body(r, &blen);
    struct eai_http_request req = {.method = eai_req_method(r), .url = full, .headers = headers,
                                   .body = blen ? body : NULL, .body_len = blen, .timeout_ms = SES_FWD_TIMEOUT_MS};
    struct eai_http_client *c = eai_host_http_client(app->host);
    f->hold = eai_park_hold(reg->parks, r);
    if (!c || !f->hold || eai_http_client_request(c, &req, fwd_done, f) < 0) {
        if (f->hold)
            eai_park_release(f->hold);
        free(f);
        free(full);
        return -1;
    }
    eai_log(SES_COMPONENT, EAI_LOG_DEBUG, "forwarding %s %s to the session's node", eai_req_method(r), full);
    free(full);
    return 0;
}

static void get_answer(struct eai_req *r, void *arg)
{
    struct get_job *j = arg;
    if (!r)
        return;
    struct eai_sessions *reg = ses_reg(j->app);
    if (!reg) {
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    if (ses_find(reg, j->tenant, j->id)) { /* in the registry meanwhile */
        j->route(j->app, r);
        return;
    }
    if (j->rc < 0) {
        eai_park_reply_storage(r, "session_get", j->err);
        return;
    }
    const char *status = jstr(j->doc, "status"), *owner = jstr(j->doc, "owner");
    if (!j->doc || !status) {
        json_t *ev = eai_req_audit_event(r, j->action, j->id, "deny", "not_found");
        if (ev)
            eai_req_audit_async(j->app, j->tenant, ev);
        eai_reply_not_found(r, EAI_MISSING_SESSION);
        return;
    }
    if (!status_terminal(status) && owner && !strcmp(owner, reg->node) && !strcmp(status, "resuming") &&
        json_string_value(json_object_get(json_object_get(j->doc, "x"), "handoff_dir"))) {
        /* claimed from the handoff directory by this node a moment ago:
         * in the registry once the claim's answer runs */
        eai_reply_error(r, EAI_E_SANDBOX_UNAVAILABLE,
                        json_pack("[{s:s, s:s}]", "path", "", "message", "the session is being resumed: retry in a moment"));
        return;
    }
    if (!status_terminal(status) && owner && !strcmp(owner, reg->node)) {
        /* this node's, left live by its previous life, not swept yet */
        if (adopt_paused(reg, j->tenant, j->doc) || adopt_dead(reg, j->tenant, j->doc)) {
            j->route(j->app, r);
            return;
        }
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (!strcmp(j->action, "sandbox.session.network.get") && status_terminal(status)) {
        /* an ended session's network: its list and summary, as its view has them */
        const json_t *net = json_object_get(j->doc, "network");
        const json_t *eg = json_object_get(net, "egress"), *sum = json_object_get(net, "summary");
        json_t *v = json_pack("{s:s, s:o, s:n, s:o}", "session_id", j->id, "egress",
                              eg ? json_deep_copy(eg) : json_array(), "log", "summary",
                              sum ? json_deep_copy(sum) : json_null());
        if (v)
            eai_reply_json(r, 200, v);
        else
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    int is_get = !strcmp(j->action, "sandbox.session.get"), is_del = !strcmp(j->action, "sandbox.session.delete");
    if (is_get || (is_del && status_terminal(status))) {
        json_t *v = view_of_record(j->doc);
        if (v)
            eai_reply_json(r, 200, v);
        else
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    /* parked for any replica (session_handoff.c): claimed here, restored,
     * then routed */
    if (!status_terminal(status) && owner && !strcmp(owner, SES_PARKED_OWNER) && !j->again &&
        ses_claim_stored(j->app, r, j->tenant, j->doc, j->action, j->route))
        return;
    /* live on another node that says where it is: forwarded there (once) */
    const char *url = jstr(j->doc, "owner_url");
    if (!status_terminal(status) && url && !strncmp(url, "http", 4) && !eai_req_header(r, SES_FWD_HEADER) &&
        forward(j->app, reg, r, url) == 0)
        return;
    json_t *ev = eai_req_audit_event(r, j->action, j->id, "deny", status_terminal(status) ? "session_ended" : "conflict");
    if (ev)
        eai_req_audit_async(j->app, j->tenant, ev);
    if (status_terminal(status))
        reply_detail(r, EAI_E_SESSION_ENDED, "the session has ended");
    else
        reply_detail(r, EAI_E_CONFLICT, "the session runs on another node of the service: call it through the"
                                        " node that created it (docs/sessions.md, \"Stored sessions\")");
}

static void get_free(void *arg)
{
    struct get_job *j = arg;
    json_decref(j->doc);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops get_ops = {
    .what = "session_get", .work = get_work, .answer = get_answer, .free = get_free,
};

static void route_stored(struct eai_app *app, struct eai_req *r, const char *action,
                         void (*route)(struct eai_app *, struct eai_req *), int again)
{
    struct eai_sessions *reg = ses_reg(app);
    struct get_job *j = reg ? calloc(1, sizeof *j) : NULL;
    if (!j) {
        eai_reply_error(r, reg ? EAI_E_INTERNAL : EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    j->app = app;
    j->route = route;
    copy_str(j->tenant, sizeof j->tenant, eai_req_tenant(r));
    copy_str(j->id, sizeof j->id, eai_req_param(r, "id"));
    copy_str(j->action, sizeof j->action, action);
    j->again = again;
    eai_park(reg->parks, r, &get_ops, j);
}

void ses_route_stored(struct eai_app *app, struct eai_req *r, const char *action,
                      void (*route)(struct eai_app *, struct eai_req *))
{
    route_stored(app, r, action, route, 0);
}

void ses_route_stored_again(struct eai_app *app, struct eai_req *r, const char *action,
                            void (*route)(struct eai_app *, struct eai_req *))
{
    route_stored(app, r, action, route, 1);
}

struct list_job {
    struct eai_app *app;
    char tenant[64];
    json_t *filter, *out;
    int rc;
    struct eai_error *err;
};

static void list_work(void *arg)
{
    struct list_job *j = arg;
    j->rc = j->app->store->session_list(j->app->storage.self, j->tenant, j->filter, &j->out, &j->err);
}

static void list_answer(struct eai_req *r, void *arg)
{
    struct list_job *j = arg;
    if (!r)
        return;
    struct eai_sessions *reg = ses_reg(j->app);
    if (j->rc < 0) {
        eai_park_reply_storage(r, "session_list", j->err);
        return;
    }
    json_t *items = json_array();
    size_t i;
    json_t *doc;
    json_array_foreach(j->out, i, doc) {
        /* this node's live view is newer than its last write */
        struct eai_session *s = reg ? ses_find(reg, j->tenant, jstr(doc, "id")) : NULL;
        json_t *v = s ? ses_view(s) : view_of_record(doc);
        if (!items || !v || json_array_append_new(items, v) < 0) {
            json_decref(items);
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
            return;
        }
    }
    json_int_t limit = json_integer_value(json_object_get(j->filter, "limit"));
    const char *last = json_array_size(j->out) ? jstr(json_array_get(j->out, json_array_size(j->out) - 1), "id")
                                               : NULL;
    json_t *body = json_pack("{s:o, s:o}", "items", items, "next_before",
                             (json_int_t)json_array_size(j->out) == limit && last ? json_string(last) : json_null());
    if (body)
        eai_reply_json(r, 200, body);
    else
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
}

static void list_free(void *arg)
{
    struct list_job *j = arg;
    json_decref(j->filter);
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops list_ops = {
    .what = "session_list", .work = list_work, .answer = list_answer, .free = list_free,
};

void ses_list_stored(struct eai_app *app, struct eai_req *r)
{
    struct eai_sessions *reg = ses_reg(app);
    const char *status = eai_req_query(r, "status"), *limit_s = eai_req_query(r, "limit"),
               *before = eai_req_query(r, "before");
    long limit = SES_LIST_DEFAULT;
    if (limit_s) {
        char *end = NULL;
        errno = 0;
        limit = strtol(limit_s, &end, 10);
        if (errno || !end || *end || limit < 1 || limit > SES_LIST_MAX) {
            eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                            json_pack("[{s:s, s:s}]", "path", "/limit", "message", "must be an integer in 1..1000"));
            return;
        }
    }
    if (status && strcmp(status, "live") != 0 && state_of(status) == SES_INTERRUPTED &&
        strcmp(status, "interrupted") != 0) {
        eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                        json_pack("[{s:s, s:s}]", "path", "/status", "message",
                                  "must be live or a session status (docs/sessions.md)"));
        return;
    }
    if (before && !ses_id_ok(before)) {
        eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                        json_pack("[{s:s, s:s}]", "path", "/before", "message", "must be a session id (ses_...)"));
        return;
    }
    struct list_job *j = reg ? calloc(1, sizeof *j) : NULL;
    if (!j || !(j->filter = json_pack("{s:I}", "limit", (json_int_t)limit))) {
        free(j);
        eai_reply_error(r, reg ? EAI_E_INTERNAL : EAI_E_SANDBOX_UNAVAILABLE, NULL);
        return;
    }
    if (status && !strcmp(status, "live"))
        json_object_set_new(j->filter, "live", json_true());
    else if (status)
        json_object_set_new(j->filter, "status", json_string(status));
    if (before)
        json_object_set_new(j->filter, "before", json_string(before));
    j->app = app;
    copy_str(j->tenant, sizeof j->tenant, eai_req_tenant(r));
    eai_park(reg->parks, r, &list_ops, j);
}
