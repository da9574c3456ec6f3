/*
 * Per-tenant quotas (docs/configuration.md, "Quotas and retention").
 *
 * The storage measures a tenant's footprint (ops tenant_usage: executions
 * created in the window, stored bytes, manifests).  Summing bytes is not
 * free, so a measurement is kept QUOTA_TTL_MS per tenant and what this
 * process admits since is added to it: a burst cannot slip past a quota
 * here; other replicas' admissions are seen at the next measurement.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "exec/quota.h"
#include "app.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"

#define QUOTA_TTL_MS 5000
#define QUOTA_SLOTS 256

struct quota_slot {
    char tenant[64];
    int64_t fetched_ms, window_start_ms;
    int64_t executions, stored_bytes, manifests;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct quota_slot g_slots[QUOTA_SLOTS];

int eai_quota_enabled(const struct eai_app *app)
{
    const struct eai_config *c = app->cfg;
    return c && app->store && app->store->tenant_usage &&
           (c->quota_executions > 0 || c->quota_stored_bytes > 0 || c->quota_manifests > 0);
}

void eai_quota_log_start(const struct eai_app *app)
{
    const struct eai_config *c = app->cfg;
    if (!c || (c->quota_executions <= 0 && c->quota_stored_bytes <= 0 && c->quota_manifests <= 0))
        return;
    if (!app->store || !app->store->tenant_usage)
        eai_log("quota", EAI_LOG_WARN, "quotas are set but the %s storage cannot measure a tenant: not enforced",
                c->storage_backend ? c->storage_backend : "configured");
    else
        eai_log("quota", EAI_LOG_INFO, "quotas per tenant: %lld executions per %lld s, %lld bytes, %lld manifests (0: off)",
                (long long)c->quota_executions, (long long)c->quota_window_s, (long long)c->quota_stored_bytes,
                (long long)c->quota_manifests);
}

int eai_quota_refusal(const struct eai_error *err)
{
    return err && (err->code == EAI_E_QUOTA_EXCEEDED || err->code == EAI_E_STORAGE_QUOTA_EXCEEDED);
}

/* A refusal with one detail {path, message}; the message is also the log's. */
static struct eai_error *refusal(enum eai_code code, const char *path, const char *fmt, long long a, long long b,
                                 long long w)
{
    char msg[160];
    snprintf(msg, sizeof msg, fmt, a, b, w);
    struct eai_error *e = eai_error_new(code, 0, "quota: %s", msg);
    if (e)
        e->details = json_pack("[{s:s, s:s}]", "path", path, "message", msg);
    return e;
}

/* The tenant's slot, measured at most QUOTA_TTL_MS ago (g_mu held on
 * return, NULL with err on a storage error: g_mu released). */
static struct quota_slot *slot_of(struct eai_app *app, const char *tenant, struct eai_error **err)
{
    int64_t now = eai_now_ms();
    int64_t win_ms = app->cfg->quota_window_s * 1000;
    pthread_mutex_lock(&g_mu);
    struct quota_slot *sl = NULL, *oldest = &g_slots[0];
    for (int i = 0; i < QUOTA_SLOTS && !sl; i++) {
        if (!strcmp(g_slots[i].tenant, tenant))
            sl = &g_slots[i];
        else if (g_slots[i].fetched_ms < oldest->fetched_ms)
            oldest = &g_slots[i];
    }
    if (sl && now - sl->fetched_ms < QUOTA_TTL_MS && now - win_ms <= sl->window_start_ms + QUOTA_TTL_MS)
        return sl;
    pthread_mutex_unlock(&g_mu);
    /* Measure without the lock (a storage call). */
    json_t *u = NULL;
    if (app->store->tenant_usage(app->storage.self, tenant, now - win_ms, &u, err) < 0)
        return NULL;
    pthread_mutex_lock(&g_mu);
    if (!sl || strcmp(sl->tenant, tenant) != 0) {
        sl = oldest;
        memset(sl, 0, sizeof *sl);
        snprintf(sl->tenant, sizeof sl->tenant, "%s", tenant);
    }
    sl->fetched_ms = now;
    sl->window_start_ms = now - win_ms;
    sl->executions = json_integer_value(json_object_get(u, "executions_since"));
    sl->stored_bytes = json_integer_value(json_object_get(u, "stored_bytes"));
    sl->manifests = json_integer_value(json_object_get(u, "manifests"));
    json_decref(u);
    return sl;
}

static int bytes_ok(const struct eai_config *c, const struct quota_slot *sl, size_t add, struct eai_error **err)
{
    if (c->quota_stored_bytes <= 0 || sl->stored_bytes + (int64_t)add <= c->quota_stored_bytes)
        return 0;
    *err = refusal(EAI_E_STORAGE_QUOTA_EXCEEDED, "/quota/stored_bytes", "%lld bytes stored, %lld more asked, quota %lld",
                   (long long)sl->stored_bytes, (long long)add, (long long)c->quota_stored_bytes);
    return -1;
}

int eai_quota_admit_exec(struct eai_app *app, const char *tenant, size_t add_bytes, struct eai_error **err)
{
    if (!eai_quota_enabled(app))
        return 0;
    const struct eai_config *c = app->cfg;
    struct quota_slot *sl = slot_of(app, tenant, err);
    if (!sl)
        return -1;
    int rc = 0;
    if (c->quota_executions > 0 && sl->executions >= c->quota_executions) {
        *err = refusal(EAI_E_QUOTA_EXCEEDED, "/quota/executions_per_window", "%lld of %lld executions in the last %lld s",
                       (long long)sl->executions, (long long)c->quota_executions, (long long)c->quota_window_s);
        rc = -1;
    } else if (bytes_ok(c, sl, add_bytes, err) < 0) {
        rc = -1;
    } else {
        sl->executions++;
        sl->stored_bytes += (int64_t)add_bytes;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int eai_quota_admit_manifest(struct eai_app *app, const char *tenant, int is_new, size_t add_bytes,
                             struct eai_error **err)
{
    if (!eai_quota_enabled(app))
        return 0;
    const struct eai_config *c = app->cfg;
    struct quota_slot *sl = slot_of(app, tenant, err);
    if (!sl)
        return -1;
    int rc = 0;
    if (is_new && c->quota_manifests > 0 && sl->manifests >= c->quota_manifests) {
        *err = refusal(EAI_E_STORAGE_QUOTA_EXCEEDED, "/quota/manifests", "%lld manifests stored, quota %lld, %lld more asked",
                       (long long)sl->manifests, (long long)c->quota_manifests, 1LL);
        rc = -1;
    } else if (bytes_ok(c, sl, add_bytes, err) < 0) {
        rc = -1;
    } else {
        sl->manifests += is_new ? 1 : 0;
        sl->stored_bytes += (int64_t)add_bytes;
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}
