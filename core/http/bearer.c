/* Bearer-key authentication of a request (http/bearer.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "http/bearer.h"
#include "http/auth_refusals.h"
#include "base/worker.h"
#include "http/auth.h"
#include "http/auth_cache.h"
#include "http/jwt.h"
#include "http/jwt_auth.h"
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
    char key_id[EAI_KEY_ID_LEN + 1];
    char secret[EAI_KEY_SECRET_LEN + 1]; /* for the check, then the cache; zeroed when j is freed */
    json_t *rec;
    struct eai_error *err;
    int rc;
    int ok;
    int flying;                /* in g_flights */
    struct auth_job *fnext;    /* g_flights */
    struct auth_job *waiters;  /* requests with the same key waiting for this lookup */
    struct auth_job *wnext;
};

/* Lookups under way (loop thread).  A request whose key is being looked
 * up already waits for that answer instead of asking storage again: a
 * cold cache under 256 connections of one client is one lookup, not one
 * per connection on every worker (each worker's storage connection stayed
 * resident: +1 MiB after the GET bench). */
static struct auth_job *g_flights;

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

static struct auth_job *flight_of(const char *key_id)
{
    for (struct auth_job *f = g_flights; f; f = f->fnext)
        if (strcmp(f->key_id, key_id) == 0)
            return f;
    return NULL;
}

static void flight_drop(struct auth_job *j)
{
    if (!j->flying)
        return;
    for (struct auth_job **pp = &g_flights; *pp; pp = &(*pp)->fnext)
        if (*pp == j) {
            *pp = j->fnext;
            break;
        }
    j->flying = 0;
}

static void auth_lookup(struct eai_req *r, struct auth_job *j);
static void auth_free(void *arg);

static const char *refusal_reason(const struct auth_job *j)
{
    return !j->rec ? "unknown key" :
           json_is_true(json_object_get(j->rec, "revoked")) ? "revoked key" :
           eai_auth_expired(j->rec, eai_now_ms()) ? "expired key" : "wrong secret";
}

/* The lookup j answered: the requests that waited for it with the same
 * secret get its verdict; one with another secret asks for itself. */
static void waiters_answer(struct auth_job *j)
{
    struct auth_job *w = j->waiters;
    j->waiters = NULL;
    while (w) {
        struct auth_job *next = w->wnext;
        w->wnext = NULL;
        struct eai_req *wr = w->r;
        int same = CRYPTO_memcmp(w->secret, j->secret, sizeof w->secret) == 0; /* one length (eai_auth_parse_bearer) */
        if (!same) {
            auth_lookup(wr, w);
        } else {
            if (j->rc < 0) {
                eai_park_reply_storage(wr, "key lookup", j->err);
            } else if (!j->ok) {
                auth_refuse(wr, refusal_reason(j));
            } else {
                snprintf(wr->tenant, sizeof(wr->tenant), "%s",
                         json_string_value(json_object_get(j->rec, "tenant_id")));
                auth_passed(wr);
            }
            auth_free(w);
        }
        w = next;
    }
}

static void auth_answer(struct eai_req *r, void *arg)
{
    struct auth_job *j = arg;
    if (j->refresh) {
        if (j->rc == 0 && j->ok)
            eai_auth_cache_put(g_cache, j->gen, j->key_id, j->secret, j->rec, eai_now_ms());
        else
            eai_auth_cache_drop(g_cache, j->key_id, j->rc < 0);
        return;
    }
    lookups_in_flight--;
    flight_drop(j);
    if (r) {
        if (j->rc < 0) {
            eai_park_reply_storage(r, "key lookup", j->err);
        } else if (!j->ok) {
            const char *why = refusal_reason(j);
            if (strcmp(why, "wrong secret") == 0)
                pepper_hint(r);
            auth_refuse(r, why);
        } else {
            eai_auth_cache_put(g_cache, j->gen, j->key_id, j->secret, j->rec, eai_now_ms());
            snprintf(r->tenant, sizeof(r->tenant), "%s", json_string_value(json_object_get(j->rec, "tenant_id")));
            auth_passed(r);
        }
    }
    waiters_answer(j);
}

static void auth_free(void *arg)
{
    struct auth_job *j = arg;
    flight_drop(j);
    while (j->waiters) { /* the lookup never answered (stopped pool): neither do they wait */
        struct auth_job *w = j->waiters;
        j->waiters = w->wnext;
        w->wnext = NULL;
        eai_reply_error(w->r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        auth_free(w);
    }
    explicit_bzero(j->secret, sizeof(j->secret));
    json_decref(j->rec);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops auth_park_ops = {
    .what = "key lookup", .work = auth_work, .answer = auth_answer, .free = auth_free,
};

/* The token of "Bearer <token>" when it is shaped like a JWT, else NULL. */
static const char *jwt_of(const char *h)
{
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return NULL;
    h += 7;
    while (*h == ' ')
        h++;
    return eai_jwt_shaped(h) ? h : NULL;
}

void eai_auth_start(struct eai_req *r, const char *h)
{
    char key_id[EAI_KEY_ID_LEN + 1], secret[EAI_KEY_SECRET_LEN + 1];
    _Static_assert(sizeof key_id == sizeof r->key_id, "key id sizes");
    /* a gateway token (auth.jwt), or an API key (unless auth.api_keys is false) */
    const char *token = eai_jwt_auth_on() ? jwt_of(h) : NULL;
    if (token) {
        eai_jwt_auth_start(r, token, auth_passed);
        return;
    }
    if (r->app->cfg && !r->app->cfg->api_keys) {
        auth_refuse(r, h ? "not a gateway token" : "missing token");
        return;
    }
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
    auth_lookup(r, j);
}

/* Ask storage for r's key (j holds it), or wait for a lookup of the same
 * key already under way. */
static void auth_lookup(struct eai_req *r, struct auth_job *j)
{
    j->r = r;
    if (!r->app->store) {
        auth_free(j);
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
        return;
    }
    struct auth_job *lead = flight_of(j->key_id);
    if (lead) {
        j->wnext = lead->waiters;
        lead->waiters = j;
        return;
    }
    if (lookups_in_flight >= AUTH_LOOKUPS_MAX) {
        auth_free(j);
        eai_reply_error(r, EAI_E_RATE_LIMITED, NULL);
        return;
    }
    lookups_in_flight++;
    j->gen = eai_auth_cache_gen(g_cache);
    j->fnext = g_flights;
    g_flights = j;
    j->flying = 1;
    if (eai_park(NULL, r, &auth_park_ops, j) < 0)
        lookups_in_flight--; /* answered and freed by eai_park (auth_free: out of the flights) */
}
