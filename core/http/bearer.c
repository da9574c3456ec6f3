/* Bearer-key authentication of a request (http/bearer.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/bearer.h"
#include "http/auth_refusals.h"
#include "base/worker.h"
#include "http/auth.h"
#include "http/auth_cache.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "http/request_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "config/config.h"
#include "base/util.h"
#include "obs/trace.h"

#define SRV_COMPONENT "http"


static struct eai_auth_cache *g_cache; /* loop thread only */

void eai_bearer_init(const struct eai_app *app)
{
    eai_auth_cache_free(g_cache);
    g_cache = eai_auth_cache_new(app->cfg ? app->cfg->auth_cache_ttl_ms : 0,
                                 app->cfg ? app->cfg->data_dir : NULL);
}

void eai_bearer_shutdown(void)
{
    eai_auth_cache_free(g_cache);
    g_cache = NULL;
}

struct auth_job {
    struct eai_req *r;
    struct eai_app *app;
    int refresh;        /* a background refresh of the cache: no request */
    uint64_t gen;       /* the cache's generation when storage was asked */
    unsigned char digest[32]; /* SHA-256 of the secret, for the cache */
    int digest_ok;
    char key_id[EAI_KEY_ID_LEN + 1];
    char secret[EAI_KEY_SECRET_LEN + 1];
    json_t *rec;
    struct eai_error *err;
    int rc;
    int ok;
};

/* Key lookups on workers at once: a flood of well-formed bad keys keeps
 * most of the worker queue for real work (past it: 429 + Retry-After,
 * the queue-full answer, without touching the queue). */
#define AUTH_LOOKUPS_MAX (EAI_WORK_QUEUE_MAX / 8)
static int lookups_in_flight;

static void auth_refuse(struct eai_req *r, const char *reason)
{
    r->tenant[0] = '\0';
    /* counted, audited once per source, reason and window: no audit row
     * and no worker job per refused request (http/auth_refusals.h) */
    eai_auth_refusal(r->app, r, reason);
    eai_reply_error(r, EAI_E_UNAUTHENTICATED, NULL);
}

static void auth_work(void *arg)
{
    struct auth_job *j = arg;
    struct eai_app *app = j->app;
    j->rc = app->store->key_get(app->storage.self, j->key_id, &j->rec, &j->err);
    if (j->rc == 0)
        j->ok = eai_auth_check(j->rec, app->pepper, j->secret);
    if (j->ok)
        j->digest_ok = eai_auth_cache_digest(j->secret, j->digest) == 0;
    explicit_bzero(j->secret, sizeof(j->secret));
}

/* A key that exists, live, whose secret fails the HMAC: a wrong secret,
 * or a pepper that differs from the one that made the key (a replica or
 * the CLI with another EAI_AUTH_PEPPER_FILE).  Say so in the log, at most
 * once a minute (a client guessing secrets must not flood it). */
static void pepper_hint(const struct eai_req *r)
{
    static int64_t last_ms;
    int64_t now = eai_now_ms();
    if (last_ms && now - last_ms < 60000)
        return;
    last_ms = now;
    eai_log_req("auth", EAI_LOG_WARN, r->request_id,
                "key %s exists but its secret fails the HMAC check: a wrong secret, or this process's pepper "
                "(auth.pepper_file / EAI_AUTH_PEPPER_FILE: %s) differs from the one that made the key; every "
                "replica and the CLI must share one pepper file (docs/postgres.md; compare the pepper "
                "fingerprints logged at start)",
                r->key_id, r->app->cfg && r->app->cfg->pepper_file ? r->app->cfg->pepper_file : "?");
}

/* r's key is good (r->tenant set): the tenant's connection bound, then
 * the route.  From a storage lookup (worker answer) or the key cache. */
static void auth_passed(struct eai_req *r)
{
    if (!r->gone && r->owner && r->owner->admit && r->owner->admit(r->owner_arg, r) < 0) {
        /* the tenant holds limits.max_connections_per_tenant connections */
        eai_reply_error(r, EAI_E_RATE_LIMITED,
                        json_pack("[{s:s, s:s}]", "path", "", "message",
                                  "too many connections for this tenant (limits.max_connections_per_tenant)"));
        return;
    }
    if (r->span)
        eai_span_set_str(r->span, "eai.tenant_id", r->tenant);
    if (r->gone)
        eai_reply_error(r, EAI_E_INTERNAL, NULL); /* only frees */
    else
        r->route->fn(r->app, r);
}

static void auth_answer(struct eai_req *r, void *arg)
{
    struct auth_job *j = arg;
    if (j->refresh) {
        if (j->rc == 0 && j->ok && j->digest_ok)
            eai_auth_cache_put(g_cache, j->gen, j->key_id, j->digest, j->rec, eai_now_ms());
        else
            eai_auth_cache_drop(g_cache, j->key_id, j->rc < 0);
        return;
    }
    lookups_in_flight--;
    if (!r)
        return;
    if (j->rc < 0) {
        eai_park_reply_storage(r, "key lookup", j->err);
    } else if (!j->ok) {
        const char *why = !j->rec ? "unknown key" :
                          json_is_true(json_object_get(j->rec, "revoked")) ? "revoked key" :
                          eai_auth_expired(j->rec, eai_now_ms()) ? "expired key" : "wrong secret";
        if (strcmp(why, "wrong secret") == 0)
            pepper_hint(r);
        auth_refuse(r, why);
    } else {
        if (j->digest_ok)
            eai_auth_cache_put(g_cache, j->gen, j->key_id, j->digest, j->rec, eai_now_ms());
        snprintf(r->tenant, sizeof(r->tenant), "%s", json_string_value(json_object_get(j->rec, "tenant_id")));
        auth_passed(r);
    }
}

static void auth_free(void *arg)
{
    struct auth_job *j = arg;
    explicit_bzero(j->secret, sizeof(j->secret));
    explicit_bzero(j->digest, sizeof(j->digest));
    json_decref(j->rec);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops auth_park_ops = {
    .what = "key lookup", .work = auth_work, .answer = auth_answer, .free = auth_free,
};

void eai_auth_start(struct eai_req *r)
{
    const char *h = eai_req_header(r, "Authorization");
    char key_id[EAI_KEY_ID_LEN + 1], secret[EAI_KEY_SECRET_LEN + 1];
    _Static_assert(sizeof key_id == sizeof r->key_id, "key id sizes");
    if (!h || eai_auth_parse_bearer(h, key_id, secret) < 0) {
        explicit_bzero(secret, sizeof(secret));
        auth_refuse(r, h ? "malformed key" : "missing key");
        return;
    }
    memcpy(r->key_id, key_id, sizeof(key_id));
    int hit = eai_auth_cache_check(g_cache, key_id, secret, eai_now_ms(), r->tenant, sizeof(r->tenant));
    struct auth_job *j = NULL;
    if (!hit || (hit == 2 && r->app->store)) {
        j = calloc(1, sizeof(*j));
        if (j) {
            j->app = r->app;
            memcpy(j->key_id, key_id, sizeof(key_id));
            memcpy(j->secret, secret, sizeof(secret));
        }
    }
    explicit_bzero(secret, sizeof(secret));
    if (hit) {
        /* verified on the loop: no worker hop, no storage read (nor allocation) */
        if (hit == 2 && r->app->store) { /* past half its TTL: refresh in the background */
            if (j) {
                j->refresh = 1;
                j->gen = eai_auth_cache_gen(g_cache);
            }
            if (!j || eai_park(NULL, NULL, &auth_park_ops, j) < 0)
                eai_auth_cache_drop(g_cache, r->key_id, 1);
        }
        auth_passed(r);
        return;
    }
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->r = r;
    if (!r->app->store) {
        auth_free(j);
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    if (lookups_in_flight >= AUTH_LOOKUPS_MAX) {
        auth_free(j);
        eai_reply_error(r, EAI_E_RATE_LIMITED, NULL);
        return;
    }
    lookups_in_flight++;
    j->gen = eai_auth_cache_gen(g_cache);
    if (eai_park(NULL, r, &auth_park_ops, j) < 0)
        lookups_in_flight--; /* answered and freed by eai_park */
}
