/*
 * Egress for local backends (docs/egress.md): the glue between the
 * scheduler and the egress engine.  At start (when a profile allows
 * egress) it sweeps a dead eaid's leftovers, starts the engine (DNS and
 * gateway on the loop) and installs eaid's nftables table; per execution
 * with granted egress it leases a pool slot, creates its network namespace
 * and veth on a worker and registers the grant; at the end it takes the
 * grant's network log, forgets the grant and removes the namespace on a
 * worker.  Decisions are counted in /metrics
 * (eai_sandbox_egress_connections_total{profile,decision}, bytes).
 *
 * Loop thread only (start and stop may block: they run at start-up and
 * shutdown, like the rest of eaid's set-up).
 */
#ifndef EAI_NET_EGRESS_HOST_H
#define EAI_NET_EGRESS_HOST_H

#include <jansson.h>

#include <eai/isolation.h>

struct eai_app;
struct eai_egress_host;
struct eai_egress_lease;

/* NULL when no profile allows egress, or when the host cannot carry it
 * (not root, no `nft`/`ip`, ports): logged; local backends then refuse
 * granted egress (egress_unsupported). */
struct eai_egress_host *eai_egress_host_start(struct eai_app *app);
/* Remove every namespace still leased, the nftables table, the engine. */
void eai_egress_host_stop(struct eai_egress_host *h);

/* 1 when a backend announcing caps carries granted egress on this eaid:
 * it enforces egress itself (EAI_ISO_CAP_EGRESS), or it runs jobs in the
 * namespace core makes (EAI_ISO_CAP_EGRESS_NETNS) and core's egress is up. */
int eai_egress_carried(const struct eai_app *app, unsigned caps);

/* Called on the loop: lease ready (NULL + why on failure). */
typedef void (*eai_egress_lease_fn)(void *arg, struct eai_egress_lease *l, const char *why);

/* Lease a namespace for exec_id (of tenant: its connection budget) with the
 * allow-list entries (NULL-terminated); cb follows exactly once, on the
 * loop.  0, or -1 (cb not called). */
int eai_egress_lease_open(struct eai_egress_host *h, const char *exec_id, const char *tenant, const char *profile,
                          const char *const *entries, eai_egress_lease_fn cb, void *arg);
/* The warm pool for egress (docs/egress.md): a namespace with no grant
 * (host->netns_take of the plugin API: its DNS refused, its TCP reset);
 * the token, cb once on a later loop turn unless released first; NULL when
 * none can be had. */
void *eai_egress_ns_take(struct eai_egress_host *h, eai_netns_fn cb, void *arg);
/* End a token still unbound (pending or ready): the namespace is removed. */
void eai_egress_ns_release(struct eai_egress_host *h, void *token);
/* Bind an execution's grant to a ready unbound token (checked to be one of
 * h's): the lease, from now on ended by eai_egress_lease_close like one of
 * eai_egress_lease_open; NULL and why (the token is left as it was). */
struct eai_egress_lease *eai_egress_lease_bind(struct eai_egress_host *h, void *token, const char *exec_id,
                                               const char *tenant, const char *profile, const char *const *entries,
                                               const char **why);
const char *eai_egress_lease_netns(const struct eai_egress_lease *l); /* /var/run/netns/... */
const char *eai_egress_lease_dns(const struct eai_egress_lease *l);   /* host side IPv4 */
/* End it: the grant's network log (new reference, NULL when out of memory)
 * plus its summary; the grant is forgotten at once, the namespace removed
 * on a worker.  l is freed. */
json_t *eai_egress_lease_close(struct eai_egress_lease *l);

/* Replace the lease's allow list (NULL-terminated entries, each checked):
 * effective for the next DNS query and connection at once (a session's
 * PUT .../network).  0 or -1 with *err. */
int eai_egress_lease_set_entries(struct eai_egress_lease *l, const char *const *entries, struct eai_error **err);
/* The lease's live log (new reference), NULL when none. */
json_t *eai_egress_lease_log(const struct eai_egress_lease *l);
/* The live log of a running execution's grant on this node (new
 * reference), or NULL. */
json_t *eai_egress_live_log(struct eai_egress_host *h, const char *exec_id);

/* {"connections":n, "allowed":n, "refused":n, "dns_queries":n,
 * "bytes_out":n, "bytes_in":n, "dropped":n} of a stored network log. */
json_t *eai_egress_log_summary(const json_t *log);
/* For the audit: {"allowed":n, "refused":n, "refusals":[first 16 refused
 * decisions: kind, name, port, address, reason]} (new reference). */
json_t *eai_egress_log_audit(const json_t *log);

#endif
