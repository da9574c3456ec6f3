/* Egress for local backends: engine, nftables table, one namespace per
 * execution (egress_host.h, docs/egress.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <event2/event.h>

#include "app.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "base/worker.h"
#include "config/config.h"
#include "net/egress.h"
#include "net/egress_host.h"
#include "net/netns.h"
#include "obs/metrics.h"

#define EH_COMPONENT "egress"
#define EH_DEFAULT_POOL "10.213.0.0/16"
#define EH_DEFAULT_SYNTHETIC "198.51.100.0/24"
#define EH_AUDIT_REFUSALS 16

struct eai_egress_host {
    struct eai_app *app;
    struct eai_egress *eng;
    char pool[64];
    char prefix[8];                /* names: netns P-<tag>, veth P<tag>h, table inet P */
    uint32_t nslots;
    unsigned char *slot_used;      /* 1 while leased or its namespace is being removed */
    uint32_t next_slot;
    struct eai_egress_lease *leases;
    /* namespaces made ahead (fresh, never used twice): a lease takes one
     * at once instead of waiting for `ip` (~40 ms) */
    struct eai_egress_lease *spares; /* ready or being made */
    struct eai_egress_lease *closing; /* namespace being removed on a worker */
    int spare_target;
    int64_t log_second;            /* refusals logged this second (EH_LOG_PER_S at most) */
    int log_count, log_suppressed;
};

#define EH_LOG_PER_S 10

struct eai_egress_lease {
    struct eai_egress_lease *next;
    struct eai_egress_host *h;
    char exec_id[64];
    char tenant[128];
    char profile[64];
    uint32_t slot;
    char tag[9];
    char prefix[8];                /* copy: read by the worker */
    char host_ip[16], sandbox_ip[16];
    struct eai_netns ns;
    struct eai_egress_grant *grant;
    char **entries;
    size_t nentries;
    eai_egress_lease_fn cb;
    void *arg;
    /* a namespace without a grant (eai_egress_ns_take, the warm pool for
     * egress): ns_cb instead of cb; bound later by eai_egress_lease_bind */
    int unbound;
    int released;                  /* released while still being made */
    eai_netns_fn ns_cb;
    void *ns_arg;
    int creating;                  /* create_work in flight */
    int deferred;                  /* taken from the spares: its callback is queued on the loop */
    int orphan;                    /* host stopped meanwhile: create_done removes it */
    int rc;
    char msg[256];
};

/* ------------------------------------------------------------ metrics */

static void count(const char *profile, const char *decision, const char *kind)
{
    char *pe = eai_metrics_label_escape(profile ? profile : "");
    if (!pe)
        return;
    char l[256];
    snprintf(l, sizeof l, "profile=\"%s\",decision=\"%s\"", pe, decision);
    free(pe);
    eai_metrics_add(strcmp(kind, "dns") == 0 ? "eai_sandbox_egress_dns_queries_total"
                                             : "eai_sandbox_egress_connections_total",
                    l, 1);
}

static void on_decision(void *arg, const char *exec_id, const json_t *entry)
{
    struct eai_egress_host *h = arg;
    const char *profile = "";
    for (struct eai_egress_lease *l = h->leases; l; l = l->next)
        if (strcmp(l->exec_id, exec_id) == 0) {
            profile = l->profile;
            break;
        }
    const char *kind = json_string_value(json_object_get(entry, "kind"));
    const char *dec = json_string_value(json_object_get(entry, "decision"));
    count(profile, dec ? dec : "refused", kind ? kind : "connect");
    if (!dec || strcmp(dec, "refused") != 0)
        return;
    /* eaid's log gets at most EH_LOG_PER_S refusals a second (the network
     * log of each execution and the metrics keep every one): a sandbox
     * asking in a loop cannot flood it */
    int64_t now_s = eai_now_ms() / 1000;
    if (now_s != h->log_second) {
        if (h->log_suppressed)
            eai_log(EH_COMPONENT, EAI_LOG_INFO, "%d more egress refusals not logged (network logs keep them)",
                    h->log_suppressed);
        h->log_second = now_s;
        h->log_count = 0;
        h->log_suppressed = 0;
    }
    if (++h->log_count > EH_LOG_PER_S) {
        h->log_suppressed++;
        return;
    }
    const char *name = json_string_value(json_object_get(entry, "name"));
    const char *reason = json_string_value(json_object_get(entry, "reason"));
    eai_log(EH_COMPONENT, EAI_LOG_INFO, "%s: %s %s:%lld refused (%s)", exec_id, kind ? kind : "?", name ? name : "",
            (long long)json_integer_value(json_object_get(entry, "port")), reason ? reason : "?");
}

static void destroy_work(void *arg);
static void lease_free(struct eai_egress_lease *l);
static void refill(struct eai_egress_host *h);

/* ------------------------------------------------------------ start / stop */

static int any_profile_egress(const struct eai_app *app)
{
    for (int i = 0; i < app->nprofiles; i++)
        if (app->profiles[i].egress_allow && app->profiles[i].egress_allow[0])
            return 1;
    return 0;
}

/* The gateway's share of eaid's descriptors: each connection holds ~6 (two
 * sockets, two pipes); the HTTP server's connections and a reserve for
 * storage, plugins and sandboxes come first. */
#define EH_FDS_PER_CONN 6
#define EH_FD_RESERVE 1024
static int node_budget(const struct eai_config *c)
{
    if (c && c->net_max_connections_node > 0)
        return (int)c->net_max_connections_node;
    struct rlimit rl;
    long nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : 65536;
    long n = (nofile - EH_FD_RESERVE - (c ? c->max_connections : 1024)) / EH_FDS_PER_CONN;
    return n < 64 ? 64 : n > 1000000 ? 1000000 : (int)n;
}

struct eai_egress_host *eai_egress_host_start(struct eai_app *app)
{
    if (!app)
        return NULL;
    const struct eai_config *c = app->cfg;
    if (!any_profile_egress(app)) {
        /* egress off, but what an earlier eaid left (namespaces, veths, its
         * nftables table) goes all the same (issue 36) */
        const char *prefix = c && c->net_prefix ? c->net_prefix : EAI_NETNS_PREFIX;
        int swept = eai_netns_sweep(prefix);
        eai_nft_remove(prefix);
        if (swept > 0)
            eai_log(EH_COMPONENT, EAI_LOG_WARN, "removed %d network namespace(s) left by an earlier eaid", swept);
        return NULL;
    }
    struct eai_egress_host *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->app = app;
    snprintf(h->prefix, sizeof h->prefix, "%s", c && c->net_prefix ? c->net_prefix : EAI_NETNS_PREFIX);
    snprintf(h->pool, sizeof h->pool, "%s", c && c->net_pool ? c->net_pool : EH_DEFAULT_POOL);
    h->nslots = eai_netns_pool_slots(h->pool);
    if (h->nslots == 0) {
        eai_log(EH_COMPONENT, EAI_LOG_ERROR, "network.pool '%s' is not an IPv4 range /8../30: egress off", h->pool);
        free(h);
        return NULL;
    }
    if (h->nslots > 65536)
        h->nslots = 65536;
    h->slot_used = calloc(h->nslots, 1);
    int swept = eai_netns_sweep(h->prefix);
    if (swept > 0)
        eai_log(EH_COMPONENT, EAI_LOG_WARN, "removed %d network namespace(s) left by an earlier eaid", swept);
    struct eai_egress_config ec = {
        .listen_addr = "0.0.0.0",
        .resolver = c ? c->net_resolver : NULL,
        .synthetic_cidr = c && c->net_synthetic ? c->net_synthetic : EH_DEFAULT_SYNTHETIC,
        .max_connections = c ? (int)c->net_max_connections : 32,
        .max_connections_total = c ? (int)c->net_max_connections * 32 : 1024,
        .max_connections_tenant = c ? (int)c->net_max_connections_tenant : 256,
        .max_connections_node = node_budget(c),
        .max_bytes = c ? c->net_max_bytes : 1LL << 30,
        .idle_timeout_s = c ? (int)c->net_idle_timeout_s : 60,
        .sniff_ms = 300,
        .first_flight_ms = 10000,
        .connect_timeout_s = 10,
        .log_max = 256,
    };
    struct eai_error *err = NULL;
    if (!h->slot_used || !(h->eng = eai_egress_new(app->base, &ec, on_decision, h, &err)) ||
        eai_nft_install(h->prefix, eai_egress_dns_port(h->eng), eai_egress_gateway_port(h->eng), &err) < 0) {
        eai_log(EH_COMPONENT, EAI_LOG_ERROR, "egress off (granted egress on local backends is refused): %s",
                err && err->message ? err->message : "out of memory");
        eai_error_free(err);
        if (h->eng)
            eai_egress_free(h->eng);
        free(h->slot_used);
        free(h);
        return NULL;
    }
    eai_metrics_describe("eai_sandbox_egress_connections_total", EAI_METRIC_COUNTER,
                         "Sandbox egress connections by profile and decision (allowed, refused)");
    eai_metrics_describe("eai_sandbox_egress_dns_queries_total", EAI_METRIC_COUNTER,
                         "Sandbox DNS queries answered by eaid, by profile and decision");
    eai_metrics_describe("eai_sandbox_egress_bytes_total", EAI_METRIC_COUNTER,
                         "Bytes through the egress gateway by profile and direction (out, in)");
    h->spare_target = c ? (int)c->net_spare : 2;
    refill(h);
    eai_log(EH_COMPONENT, EAI_LOG_INFO,
            "egress on: DNS port %u, gateway port %u, pool %s (%u slots), table inet %s, connections at once: "
            "%d a tenant, %d in all",
            eai_egress_dns_port(h->eng), eai_egress_gateway_port(h->eng), h->pool, h->nslots, h->prefix,
            ec.max_connections_tenant, ec.max_connections_node);
    return h;
}

void eai_egress_host_stop(struct eai_egress_host *h)
{
    if (!h)
        return;
    while (h->spares) {
        struct eai_egress_lease *l = h->spares;
        h->spares = l->next;
        if (l->creating) {
            l->orphan = 1;
            l->h = NULL;
            continue;
        }
        destroy_work(l);
        lease_free(l);
    }
    while (h->leases) {
        struct eai_egress_lease *l = h->leases;
        if (l->creating || l->deferred) {
            h->leases = l->next;
            l->orphan = 1;
            l->h = NULL;
            continue;
        }
        json_decref(eai_egress_lease_close(l)); /* namespace removed inline: shutting down */
    }
    /* removals still queued finish without us; the sweep below catches
     * what they have not removed yet */
    for (struct eai_egress_lease *l = h->closing; l; l = l->next)
        l->h = NULL;
    h->closing = NULL;
    /* what workers could not take: the sweep by name catches it */
    eai_netns_sweep(h->prefix);
    eai_nft_remove(h->prefix);
    eai_egress_free(h->eng);
    free(h->slot_used);
    free(h);
}

int eai_egress_carried(const struct eai_app *app, unsigned caps)
{
    if (caps & EAI_ISO_CAP_EGRESS)
        return 1;
    return (caps & EAI_ISO_CAP_EGRESS_NETNS) && app && app->egress;
}

/* ------------------------------------------------------------ leases */

static void lease_free(struct eai_egress_lease *l)
{
    for (size_t i = 0; i < l->nentries; i++)
        free(l->entries[i]);
    free(l->entries);
    free(l);
}

static void unlink_lease(struct eai_egress_lease *l)
{
    for (struct eai_egress_lease **pp = &l->h->leases; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            return;
        }
}

static void create_work(void *arg)
{
    struct eai_egress_lease *l = arg;
    struct eai_error *err = NULL;
    l->rc = eai_netns_create(l->prefix, l->tag, l->host_ip, l->sandbox_ip, &l->ns, &err);
    if (l->rc < 0)
        snprintf(l->msg, sizeof l->msg, "%s", err && err->message ? err->message : "cannot create the namespace");
    eai_error_free(err);
}

static void destroy_work(void *arg)
{
    struct eai_egress_lease *l = arg;
    if (l->ns.name[0])
        eai_netns_destroy(&l->ns);
}

static void destroy_done(void *arg)
{
    struct eai_egress_lease *l = arg;
    if (l->h) {
        for (struct eai_egress_lease **pp = &l->h->closing; *pp; pp = &(*pp)->next)
            if (*pp == l) {
                *pp = l->next;
                break;
            }
        if (l->slot < l->h->nslots)
            l->h->slot_used[l->slot] = 0;
    }
    lease_free(l);
}

/* Remove l's namespace on a worker (inline when that is impossible or eaid
 * stops); its slot is free again afterwards. */
static void queue_destroy(struct eai_egress_lease *l)
{
    if (l->h->app->shutting_down || eai_work_submit(destroy_work, destroy_done, l) < 0) {
        destroy_work(l);
        destroy_done(l);
        return;
    }
    l->next = l->h->closing;
    l->h->closing = l;
}

/* Register the grant of a lease whose namespace exists; its callback. */
static void grant_and_ready(struct eai_egress_lease *l)
{
    if (l->released) {
        /* released by its owner while being made: nobody waits for it */
        unlink_lease(l);
        queue_destroy(l);
        return;
    }
    if (l->unbound) {
        if (l->rc < 0) {
            eai_log(EH_COMPONENT, EAI_LOG_WARN, "pooled namespace: %s", l->msg);
            unlink_lease(l);
            l->ns_cb(l->ns_arg, NULL, NULL, NULL, l->msg);
            queue_destroy(l);
            return;
        }
        l->ns_cb(l->ns_arg, l, l->ns.path, l->ns.host_ip, NULL);
        return;
    }
    if (l->rc == 0) {
        struct eai_error *err = NULL;
        l->grant = eai_egress_grant_add(l->h->eng, l->exec_id, l->tenant, l->sandbox_ip,
                                        (const char *const *)l->entries, l->nentries, &err);
        if (!l->grant) {
            snprintf(l->msg, sizeof l->msg, "%s", err && err->message ? err->message : "cannot register the grant");
            l->rc = -1;
        }
        eai_error_free(err);
    }
    if (l->rc < 0) {
        eai_log(EH_COMPONENT, EAI_LOG_ERROR, "%s: %s", l->exec_id, l->msg);
        unlink_lease(l);
        l->cb(l->arg, NULL, l->msg);
        /* nothing was left by a failed create; a failed grant leaves the namespace */
        queue_destroy(l);
        return;
    }
    l->cb(l->arg, l, NULL);
}

static void create_done(void *arg)
{
    struct eai_egress_lease *l = arg;
    l->creating = 0;
    if (l->orphan) {
        destroy_work(l);
        lease_free(l);
        return;
    }
    grant_and_ready(l);
}

static void deferred_ready(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_egress_lease *l = arg;
    l->deferred = 0;
    if (l->orphan) {
        destroy_work(l);
        lease_free(l);
        return;
    }
    grant_and_ready(l);
}

/* A lease with a free slot of the pool (slot taken), or NULL. */
static struct eai_egress_lease *slot_lease(struct eai_egress_host *h, const char *why)
{
    uint32_t slot = h->nslots;
    for (uint32_t k = 0; k < h->nslots; k++) {
        uint32_t s = (h->next_slot + k) % h->nslots;
        if (!h->slot_used[s]) {
            slot = s;
            break;
        }
    }
    if (slot == h->nslots) {
        eai_log(EH_COMPONENT, EAI_LOG_ERROR, "%s: network.pool %s has no free slot", why, h->pool);
        return NULL;
    }
    struct eai_egress_lease *l = calloc(1, sizeof *l);
    if (!l || eai_netns_slot_addrs(h->pool, slot, l->host_ip, l->sandbox_ip) < 0) {
        free(l);
        return NULL;
    }
    l->h = h;
    l->slot = slot;
    snprintf(l->tag, sizeof l->tag, "%08x", slot);
    snprintf(l->prefix, sizeof l->prefix, "%s", h->prefix);
    h->slot_used[slot] = 1;
    h->next_slot = (slot + 1) % h->nslots;
    return l;
}

static void spare_done(void *arg)
{
    struct eai_egress_lease *l = arg;
    l->creating = 0;
    if (l->orphan) {
        destroy_work(l);
        lease_free(l);
        return;
    }
    if (l->rc < 0) {
        /* no retry loop: executions make their own namespace from now on */
        eai_log(EH_COMPONENT, EAI_LOG_WARN, "spare namespace: %s (no more spares)", l->msg);
        struct eai_egress_host *h = l->h;
        h->spare_target = 0;
        for (struct eai_egress_lease **pp = &h->spares; *pp; pp = &(*pp)->next)
            if (*pp == l) {
                *pp = l->next;
                break;
            }
        destroy_done(l); /* frees the slot; a failed create left nothing */
    }
}

/* Make namespaces ahead up to spare_target (on workers). */
static void refill(struct eai_egress_host *h)
{
    int n = 0;
    for (struct eai_egress_lease *l = h->spares; l; l = l->next)
        n++;
    while (n < h->spare_target) {
        struct eai_egress_lease *l = slot_lease(h, "spare namespace");
        if (!l)
            return;
        l->creating = 1;
        if (eai_work_submit(create_work, spare_done, l) < 0) {
            h->slot_used[l->slot] = 0;
            free(l);
            return;
        }
        l->next = h->spares;
        h->spares = l;
        n++;
    }
}

/* A spare namespace (ready: its callback on the next loop turn) or a new
 * one (made on a worker), in h->leases; what waits for it is set by the
 * caller before the callback can run.  NULL when none can be had. */
static struct eai_egress_lease *lease_get(struct eai_egress_host *h, const char *why)
{
    struct eai_egress_lease *l = NULL;
    for (struct eai_egress_lease **pp = &h->spares; *pp; pp = &(*pp)->next)
        if (!(*pp)->creating) {
            l = *pp;
            *pp = l->next;
            l->next = NULL;
            break;
        }
    if (l) {
        /* the callback on the next loop turn, never inside the caller */
        struct timeval now = {0, 0};
        l->deferred = 1;
        if (event_base_once(h->app->base, -1, EV_TIMEOUT, deferred_ready, l, &now) < 0) {
            l->deferred = 0;
            l->next = h->spares;
            h->spares = l;
            return NULL;
        }
    } else {
        if (!(l = slot_lease(h, why)))
            return NULL;
        l->creating = 1;
        if (eai_work_submit(create_work, create_done, l) < 0) {
            h->slot_used[l->slot] = 0;
            lease_free(l);
            return NULL;
        }
    }
    l->next = h->leases;
    h->leases = l;
    refill(h);
    return l;
}

static char **entries_copy(const char *const *entries, size_t *nout)
{
    size_t n = 0;
    while (entries[n])
        n++;
    char **copy = calloc(n + 1, sizeof *copy);
    size_t ok = 0;
    for (size_t i = 0; copy && i < n; i++)
        if ((copy[i] = strdup(entries[i])))
            ok++;
    if (!copy || ok != n) {
        for (size_t i = 0; copy && i < n; i++)
            free(copy[i]);
        free(copy);
        return NULL;
    }
    *nout = n;
    return copy;
}

int eai_egress_lease_open(struct eai_egress_host *h, const char *exec_id, const char *tenant, const char *profile,
                          const char *const *entries, eai_egress_lease_fn cb, void *arg)
{
    if (!h || !exec_id || !entries || !cb)
        return -1;
    size_t n = 0;
    char **copy = entries_copy(entries, &n);
    if (!copy)
        return -1;
    struct eai_egress_lease *l = lease_get(h, exec_id);
    if (!l) {
        for (size_t i = 0; i < n; i++)
            free(copy[i]);
        free(copy);
        return -1;
    }
    /* its callback runs on a later loop turn: set what it reads now */
    l->entries = copy;
    l->nentries = n;
    snprintf(l->exec_id, sizeof l->exec_id, "%s", exec_id);
    snprintf(l->tenant, sizeof l->tenant, "%s", tenant ? tenant : "");
    snprintf(l->profile, sizeof l->profile, "%s", profile ? profile : "");
    l->cb = cb;
    l->arg = arg;
    return 0;
}

void *eai_egress_ns_take(struct eai_egress_host *h, eai_netns_fn cb, void *arg)
{
    if (!h || !cb || h->app->shutting_down)
        return NULL;
    struct eai_egress_lease *l = lease_get(h, "pooled namespace");
    if (!l)
        return NULL;
    l->unbound = 1;
    l->ns_cb = cb;
    l->ns_arg = arg;
    return l;
}

/* token, when it is one of h's leases (never trust a pointer from a plugin). */
static struct eai_egress_lease *lease_find(struct eai_egress_host *h, void *token)
{
    for (struct eai_egress_lease *l = h ? h->leases : NULL; l && token; l = l->next)
        if (l == token)
            return l;
    return NULL;
}

void eai_egress_ns_release(struct eai_egress_host *h, void *token)
{
    struct eai_egress_lease *l = lease_find(h, token);
    if (!l || !l->unbound)
        return;
    if (l->creating || l->deferred) {
        l->released = 1; /* grant_and_ready removes it */
        return;
    }
    json_decref(eai_egress_lease_close(l));
}

struct eai_egress_lease *eai_egress_lease_bind(struct eai_egress_host *h, void *token, const char *exec_id,
                                               const char *tenant, const char *profile, const char *const *entries,
                                               const char **why)
{
    struct eai_egress_lease *l = lease_find(h, token);
    *why = NULL;
    if (!l || !l->unbound || l->released || l->creating || l->deferred || l->grant || l->rc < 0 || !exec_id ||
        !entries) {
        *why = "not a ready namespace of core's";
        return NULL;
    }
    size_t n = 0;
    char **copy = entries_copy(entries, &n);
    if (!copy) {
        *why = "out of memory";
        return NULL;
    }
    struct eai_error *err = NULL;
    l->grant = eai_egress_grant_add(h->eng, exec_id, tenant, l->sandbox_ip, entries, n, &err);
    if (!l->grant) {
        snprintf(l->msg, sizeof l->msg, "%s", err && err->message ? err->message : "cannot register the grant");
        *why = l->msg;
        eai_error_free(err);
        for (size_t i = 0; i < n; i++)
            free(copy[i]);
        free(copy);
        return NULL;
    }
    l->unbound = 0;
    l->ns_cb = NULL;
    l->ns_arg = NULL;
    l->entries = copy;
    l->nentries = n;
    snprintf(l->exec_id, sizeof l->exec_id, "%s", exec_id);
    snprintf(l->profile, sizeof l->profile, "%s", profile ? profile : "");
    return l;
}

const char *eai_egress_lease_netns(const struct eai_egress_lease *l)
{
    return l ? l->ns.path : NULL;
}

const char *eai_egress_lease_dns(const struct eai_egress_lease *l)
{
    return l ? l->ns.host_ip : NULL;
}

json_t *eai_egress_lease_close(struct eai_egress_lease *l)
{
    if (!l)
        return NULL;
    json_t *log = l->grant ? eai_egress_grant_log(l->grant) : NULL;
    if (l->grant)
        eai_egress_grant_remove(l->grant);
    l->grant = NULL;
    unlink_lease(l);
    if (log) {
        char *pe = eai_metrics_label_escape(l->profile);
        if (pe) {
            char lb[256];
            snprintf(lb, sizeof lb, "profile=\"%s\",direction=\"out\"", pe);
            eai_metrics_add("eai_sandbox_egress_bytes_total", lb,
                            (double)json_integer_value(json_object_get(log, "bytes_out")));
            snprintf(lb, sizeof lb, "profile=\"%s\",direction=\"in\"", pe);
            eai_metrics_add("eai_sandbox_egress_bytes_total", lb,
                            (double)json_integer_value(json_object_get(log, "bytes_in")));
            free(pe);
        }
    }
    queue_destroy(l);
    return log;
}

int eai_egress_lease_set_entries(struct eai_egress_lease *l, const char *const *entries, struct eai_error **err)
{
    size_t n = 0;
    while (entries && entries[n])
        n++;
    if (!l || !l->grant)
        return eai_error_set(err, EAI_E_CONFLICT, "egress: the lease has no grant");
    return eai_egress_grant_set_rules(l->grant, entries, n, err);
}

json_t *eai_egress_lease_log(const struct eai_egress_lease *l)
{
    return l && l->grant ? eai_egress_grant_log(l->grant) : NULL;
}

json_t *eai_egress_live_log(struct eai_egress_host *h, const char *exec_id)
{
    for (struct eai_egress_lease *l = h ? h->leases : NULL; l && exec_id; l = l->next)
        if (l->grant && strcmp(l->exec_id, exec_id) == 0)
            return eai_egress_grant_log(l->grant);
    return NULL;
}

/* ------------------------------------------------------------ summaries */

json_t *eai_egress_log_summary(const json_t *log)
{
    json_int_t allowed = 0, refused = 0, dns = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(log, "entries"), i, e) {
        const char *kind = json_string_value(json_object_get(e, "kind"));
        const char *dec = json_string_value(json_object_get(e, "decision"));
        if (kind && strcmp(kind, "dns") == 0)
            dns++;
        if (dec && strcmp(dec, "allowed") == 0)
            allowed++;
        else
            refused++;
    }
    return json_pack("{s:I, s:I, s:I, s:I, s:O?, s:O?, s:O?}", "decisions", allowed + refused, "allowed", allowed,
                     "refused", refused, "dns_queries", dns,
                     "connections", json_object_get(log, "connections"),
                     "bytes_out", json_object_get(log, "bytes_out"), "bytes_in", json_object_get(log, "bytes_in"),
                     "dropped", json_object_get(log, "dropped"));
}

json_t *eai_egress_log_audit(const json_t *log)
{
    json_int_t allowed = 0, refused = 0;
    json_t *ref = json_array();
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(log, "entries"), i, e) {
        const char *dec = json_string_value(json_object_get(e, "decision"));
        if (dec && strcmp(dec, "allowed") == 0) {
            allowed++;
            continue;
        }
        refused++;
        if (ref && json_array_size(ref) < EH_AUDIT_REFUSALS)
            json_array_append_new(ref, json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?}", "kind",
                                                 json_object_get(e, "kind"), "name", json_object_get(e, "name"),
                                                 "port", json_object_get(e, "port"), "address",
                                                 json_object_get(e, "address"), "reason",
                                                 json_object_get(e, "reason")));
    }
    return json_pack("{s:I, s:I, s:o, s:O?}", "allowed", allowed, "refused", refused, "refusals",
                     ref ? ref : json_array(), "dropped", json_object_get(log, "dropped"));
}
