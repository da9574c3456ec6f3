/* Gateway tokens on requests (http/jwt_auth.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/event.h>
#include <jansson.h>

#include "http/jwt_auth.h"
#include "http/jwt.h"
#include "http/auth_refusals.h"
#include "http/park.h"
#include "http/request_int.h"
#include "app.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "obs/metrics.h"

#define JWT_COMPONENT "auth"
#define CACHE_SLOTS 4096          /* verified tokens remembered (by SHA-256) */
#define CACHE_MAX_MS 60000        /* a verified token is checked again after a minute at most */
#define EARLY_REFRESH_MS 10000    /* an unknown kid fetches the key set again, at most this often */
#define JOBS_MAX 64               /* token checks on workers at once; past it 429 */

/* A key set shared by the loop and the workers checking with it. */
struct keyset {
    struct eai_jwks *jwks;
    int refs;
};

struct cached {
    char hash[65];
    int64_t until_ms;
    char tenant[64];
    char actor[17];
    char project[129];
    char agent[129];
};

static struct {
    struct eai_app *app;
    const struct eai_jwt_cfg *cfg;
    struct eai_jwt_policy pol;
    const char *auds[EAI_JWT_MAX_AUDIENCES + 1];
    struct keyset *cur;
    struct event *timer;
    int64_t last_fetch_ms;
    int fetching;
    int jobs;
    int on;
    struct cached *cache;
} g;

static struct keyset *ks_ref(struct keyset *k)
{
    if (k)
        __atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED);
    return k;
}

static void ks_unref(struct keyset *k)
{
    if (k && __atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        eai_jwks_free(k->jwks);
        free(k);
    }
}

/* A new key set from a document: installed (0), or kept the old one (-1, logged). */
static int ks_install(const char *doc, size_t len, const char *from)
{
    char why[256] = "";
    struct eai_jwks *j = eai_jwks_parse(doc, len, why, sizeof why);
    struct keyset *k = j ? calloc(1, sizeof *k) : NULL;
    if (!k) {
        eai_jwks_free(j);
        eai_metrics_add("eai_auth_jwks_refresh_failures_total", NULL, 1);
        eai_log(JWT_COMPONENT, EAI_LOG_WARN, "key set from %s refused (%s): the last good one stays", from,
                why[0] ? why : "out of memory");
        return -1;
    }
    k->jwks = j;
    k->refs = 1;
    struct keyset *old = g.cur;
    g.cur = k;
    ks_unref(old);
    eai_log(JWT_COMPONENT, EAI_LOG_INFO, "key set from %s: %d signing key(s)", from, eai_jwks_count(j));
    return 0;
}

/* ------------------------------------------------------------ fetching the key set */

static char *read_small_file(const char *path, size_t max, size_t *len, int *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *e = errno;
        return NULL;
    }
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
    *e = ferror(f) ? EIO : 0;
    fclose(f);
    if (!buf || *e || n > max) {
        if (!*e)
            *e = buf ? EFBIG : ENOMEM;
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

struct file_job {
    char *path;
    char *doc;
    size_t len;
    int err;
};

static void file_work(void *arg)
{
    struct file_job *j = arg;
    j->doc = read_small_file(j->path, EAI_JWKS_MAX_BYTES, &j->len, &j->err);
}

static void file_answer(struct eai_req *r, void *arg)
{
    (void)r;
    struct file_job *j = arg;
    g.fetching = 0;
    if (!g.on)
        return;
    if (!j->doc) {
        eai_metrics_add("eai_auth_jwks_refresh_failures_total", NULL, 1);
        eai_log(JWT_COMPONENT, EAI_LOG_WARN, "key set file %s: %s: the last good key set stays", j->path,
                j->err == EFBIG ? "larger than 256 KiB" : strerror(j->err));
        return;
    }
    ks_install(j->doc, j->len, j->path);
}

static void file_free(void *arg)
{
    struct file_job *j = arg;
    free(j->path);
    free(j->doc);
    free(j);
}

static const struct eai_park_ops file_ops = {
    .what = "jwks file", .work = file_work, .answer = file_answer, .free = file_free,
};

static void url_done(void *arg, const struct eai_http_response *resp)
{
    (void)arg;
    g.fetching = 0;
    if (!g.on)
        return;
    if (resp->status != 200) {
        eai_metrics_add("eai_auth_jwks_refresh_failures_total", NULL, 1);
        eai_log(JWT_COMPONENT, EAI_LOG_WARN, "key set %s: %s %ld: the last good key set stays", g.cfg->jwks_url,
                resp->error ? resp->error : "HTTP", resp->status);
        return;
    }
    ks_install(resp->body ? resp->body : "", resp->body_len, g.cfg->jwks_url);
}

static void fetch(void)
{
    if (g.fetching || !g.on)
        return;
    g.last_fetch_ms = eai_now_ms();
    if (g.cfg->jwks_file) {
        struct file_job *j = calloc(1, sizeof *j);
        if (!j || !(j->path = strdup(g.cfg->jwks_file))) {
            free(j);
            return;
        }
        g.fetching = 1;
        if (eai_park(NULL, NULL, &file_ops, j) < 0)
            g.fetching = 0; /* freed by eai_park; the next tick tries again */
        return;
    }
    static const char *const headers[] = {"Accept: application/json", "User-Agent: eaid-jwks/1", NULL};
    struct eai_http_request hr = {.method = "GET", .url = g.cfg->jwks_url, .headers = headers, .timeout_ms = 10000};
    g.fetching = 1;
    if (!g.app->host || g.app->host->http_request(g.app->host, &hr, url_done, NULL) != 0) {
        g.fetching = 0;
        eai_log(JWT_COMPONENT, EAI_LOG_WARN, "key set %s: the HTTP client refused the request", g.cfg->jwks_url);
    }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    fetch();
}

/* ------------------------------------------------------------ the cache of verified tokens */

static struct cached *cache_slot(const char *hash)
{
    unsigned v = 0;
    for (int i = 0; i < 8; i++)
        v = v * 16 + (unsigned)(hash[i] <= '9' ? hash[i] - '0' : hash[i] - 'a' + 10);
    return g.cache ? &g.cache[v % CACHE_SLOTS] : NULL;
}

/* ------------------------------------------------------------ a token's check */

struct jwt_job {
    struct eai_app *app;
    struct keyset *ks;
    char *token;
    size_t len;
    char hash[65];
    void (*passed)(struct eai_req *r);
    struct eai_jwt_claims c;
    const char *reason;          /* refused: why */
    char tenant_id[64];
    struct eai_error *err;       /* storage failed */
};

static int uuid_shaped(const char *s)
{
    if (strlen(s) != 36)
        return 0;
    for (int i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    }
    return 1;
}

/* The tenant a verified claim names (on the worker): a tenant id that
 * exists; else the tenant this issuer's claim was mapped to when it was
 * first seen (kv "jwt-tenant/<iss>/<claim>"); else, with create_tenants,
 * a new tenant named after the claim, mapped so. */
static void resolve_tenant(struct jwt_job *j)
{
    const struct eai_storage_ops *st = j->app->store;
    void *self = j->app->storage.self;
    json_t *t = NULL;
    if (uuid_shaped(j->c.tenant)) {
        if (st->tenant_get(self, j->c.tenant, &t, &j->err) < 0)
            return;
        if (t)
            snprintf(j->tenant_id, sizeof j->tenant_id, "%s", j->c.tenant);
        json_decref(t);
        if (!j->tenant_id[0])
            j->reason = "unknown tenant";
        return;
    }
    if (!st->kv_get || !st->kv_set) {
        j->reason = "unknown tenant";
        return;
    }
    char key[512];
    snprintf(key, sizeof key, "jwt-tenant/%s/%s", j->app->cfg->jwt->issuer, j->c.tenant);
    char *v = NULL;
    if (st->kv_get(self, key, &v, &j->err) < 0)
        return;
    if (!v && j->app->cfg->jwt->create_tenants) {
        if (st->tenant_create(self, j->c.tenant, &t, &j->err) < 0)
            return;
        const char *id = json_string_value(json_object_get(t, "id"));
        if (!id || st->kv_set(self, key, id, &j->err) < 0) {
            json_decref(t);
            if (!j->err)
                j->reason = "unknown tenant";
            return;
        }
        json_decref(t);
        /* two replicas creating at once: both read back what the store kept */
        if (st->kv_get(self, key, &v, &j->err) < 0)
            return;
    }
    if (v && uuid_shaped(v))
        snprintf(j->tenant_id, sizeof j->tenant_id, "%s", v);
    else
        j->reason = "unknown tenant";
    free(v);
}

static void jwt_work(void *arg)
{
    struct jwt_job *j = arg;
    if (!j->ks) {
        j->reason = "no key set";
        return;
    }
    if (eai_jwt_verify(j->ks->jwks, &g.pol, j->token, j->len, eai_now_ms() / 1000, &j->c, &j->reason) < 0)
        return;
    resolve_tenant(j);
}

static void refuse(struct eai_req *r, const char *reason)
{
    char l[64];
    snprintf(l, sizeof l, "reason=\"%s\"", reason);
    eai_metrics_add("eai_auth_jwt_refused_total", l, 1);
    r->tenant[0] = '\0';
    char why[64];
    snprintf(why, sizeof why, "token: %s", reason);
    eai_auth_refusal(r->app, r, why); /* counted, audited once per source, reason and window */
    eai_reply_error(r, EAI_E_UNAUTHENTICATED, NULL);
}

/* The actor of audit events: "jwt:" and 12 hex of SHA-256(iss, sub), a
 * stable pseudonym of the caller (the subject itself is not stored). */
static void actor_of(const struct eai_jwt_claims *c, char out[17])
{
    char buf[512], h[65];
    snprintf(buf, sizeof buf, "%s\n%s", g.cfg->issuer, c->subject);
    eai_sha256_hex(buf, strlen(buf), h);
    snprintf(out, 17, "jwt:%.12s", h);
}

static void set_identity(struct eai_req *r, const char *tenant, const char *actor, const char *project,
                         const char *agent)
{
    snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
    snprintf(r->key_id, sizeof r->key_id, "%s", actor);
    snprintf(r->jwt_project, sizeof r->jwt_project, "%s", project);
    snprintf(r->jwt_agent, sizeof r->jwt_agent, "%s", agent);
}

static void jwt_answer(struct eai_req *r, void *arg)
{
    struct jwt_job *j = arg;
    g.jobs--;
    if (j->reason && (!strcmp(j->reason, "unknown kid") || !strcmp(j->reason, "no key set")) &&
        eai_now_ms() - g.last_fetch_ms >= EARLY_REFRESH_MS)
        fetch(); /* a rotation the timer has not seen yet: the next request may pass */
    if (!r)
        return;
    if (j->err) {
        eai_park_reply_storage(r, "token tenant lookup", j->err);
        return;
    }
    if (j->reason) {
        refuse(r, j->reason);
        return;
    }
    struct cached *c = cache_slot(j->hash);
    char actor[17];
    actor_of(&j->c, actor);
    if (c) {
        int64_t now = eai_now_ms(), until = j->c.exp * 1000;
        memcpy(c->hash, j->hash, sizeof c->hash);
        c->until_ms = until < now + CACHE_MAX_MS ? until : now + CACHE_MAX_MS;
        snprintf(c->tenant, sizeof c->tenant, "%s", j->tenant_id);
        memcpy(c->actor, actor, sizeof c->actor);
        snprintf(c->project, sizeof c->project, "%s", j->c.project);
        snprintf(c->agent, sizeof c->agent, "%s", j->c.agent);
    }
    set_identity(r, j->tenant_id, actor, j->c.project, j->c.agent);
    j->passed(r);
}

static void jwt_free(void *arg)
{
    struct jwt_job *j = arg;
    ks_unref(j->ks);
    if (j->token)
        explicit_bzero(j->token, j->len);
    free(j->token);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops jwt_ops = {
    .what = "token check", .work = jwt_work, .answer = jwt_answer, .free = jwt_free,
};

void eai_jwt_auth_start(struct eai_req *r, const char *token, void (*passed)(struct eai_req *r))
{
    size_t len = strlen(token);
    if ((int64_t)len > g.cfg->max_bytes) { /* unread, unhashed */
        refuse(r, "oversized");
        return;
    }
    char hash[65];
    eai_sha256_hex(token, len, hash);
    struct cached *c = cache_slot(hash);
    if (c && c->until_ms > eai_now_ms() && !strcmp(c->hash, hash)) {
        set_identity(r, c->tenant, c->actor, c->project, c->agent);
        passed(r);
        return;
    }
    if (g.jobs >= JOBS_MAX) {
        eai_reply_error(r, EAI_E_RATE_LIMITED, NULL);
        return;
    }
    struct jwt_job *j = calloc(1, sizeof *j);
    if (!j || !(j->token = malloc(len + 1))) {
        free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    memcpy(j->token, token, len + 1);
    j->len = len;
    j->app = r->app;
    j->ks = ks_ref(g.cur);
    j->passed = passed;
    memcpy(j->hash, hash, sizeof hash);
    g.jobs++;
    if (eai_park(NULL, r, &jwt_ops, j) < 0)
        g.jobs--; /* answered (429/503) and freed by eai_park */
}

int eai_jwt_auth_on(void) { return g.on; }

int eai_jwt_auth_init(struct eai_app *app, struct eai_error **err)
{
    eai_jwt_auth_shutdown();
    const struct eai_jwt_cfg *cfg = app->cfg ? app->cfg->jwt : NULL;
    if (!cfg)
        return 0;
    g.app = app;
    g.cfg = cfg;
    for (int i = 0; i < cfg->n_audiences; i++)
        g.auds[i] = cfg->audiences[i];
    g.auds[cfg->n_audiences] = NULL;
    g.pol = (struct eai_jwt_policy){
        .issuer = cfg->issuer, .audiences = g.auds, .algs = cfg->algs, .skew_s = cfg->skew_s,
        .max_bytes = (size_t)cfg->max_bytes, .tenant_claim = cfg->tenant_claim,
        .project_claim = cfg->project_claim, .agent_claim = cfg->agent_claim,
    };
    eai_metrics_describe("eai_auth_jwt_refused_total", EAI_METRIC_COUNTER,
                         "Gateway tokens refused, by reason (docs/auth.md).");
    eai_metrics_describe("eai_auth_jwks_refresh_failures_total", EAI_METRIC_COUNTER,
                         "Key set reads or fetches that failed or were refused (the last good set stays).");
    eai_metrics_add("eai_auth_jwks_refresh_failures_total", NULL, 0);
    g.cache = calloc(CACHE_SLOTS, sizeof *g.cache);
    if (!g.cache)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    if (cfg->jwks_file) { /* at start, before serving: a bad file refuses the start */
        size_t len = 0;
        int e = 0;
        char *doc = read_small_file(cfg->jwks_file, EAI_JWKS_MAX_BYTES, &len, &e);
        char why[256] = "";
        struct eai_jwks *j = doc ? eai_jwks_parse(doc, len, why, sizeof why) : NULL;
        free(doc);
        if (!j) {
            free(g.cache);
            g.cache = NULL;
            return eai_error_set(err, EAI_E_VALIDATION_FAILED, "auth.jwt.jwks_file %s: %s", cfg->jwks_file,
                                 doc || !e ? why : (e == EFBIG ? "larger than 256 KiB" : strerror(e)));
        }
        g.cur = calloc(1, sizeof *g.cur);
        if (!g.cur) {
            eai_jwks_free(j);
            return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
        }
        g.cur->jwks = j;
        g.cur->refs = 1;
        g.last_fetch_ms = eai_now_ms();
        eai_log(JWT_COMPONENT, EAI_LOG_INFO, "gateway tokens: key set %s, %d signing key(s), issuer %s",
                cfg->jwks_file, eai_jwks_count(j), cfg->issuer);
    }
    g.on = 1;
    g.timer = event_new(app->base, -1, EV_PERSIST, on_timer, NULL);
    if (g.timer) {
        struct timeval tv = {cfg->refresh_s, 0};
        event_add(g.timer, &tv);
    }
    if (cfg->jwks_url)
        fetch();
    return 0;
}

void eai_jwt_auth_shutdown(void)
{
    if (g.timer)
        event_free(g.timer);
    g.timer = NULL;
    ks_unref(g.cur);
    g.cur = NULL;
    free(g.cache);
    g.cache = NULL;
    g.on = 0;
    g.fetching = 0;
}
