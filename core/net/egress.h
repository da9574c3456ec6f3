/*
 * Egress engine: eaid's DNS responder for sandboxes and its egress gateway,
 * both on the loop (docs/egress.md).
 *
 * A sandbox with granted egress lives in a network namespace whose veth is
 * redirected by nftables: UDP 53 to the DNS port, every TCP connection to the
 * gateway port.  The sandbox's own address says which grant applies.  The
 * DNS responder answers only allowed names, each with a synthetic address
 * that the gateway maps back to the name; nothing is forwarded upstream.  The
 * gateway reads the original destination (SO_ORIGINAL_DST), checks name,
 * port, SNI or Host, resolves the name itself, refuses refused address
 * classes, then connects and splices.  Every decision goes to the grant's
 * bounded log and to the decision hook (audit, metrics).
 *
 * Loop thread only.
 */
#ifndef EAI_NET_EGRESS_H
#define EAI_NET_EGRESS_H

#include <stdint.h>

#include <jansson.h>

#include <eai/plugin.h>

#include "net/egress_policy.h"

struct event_base;
struct eai_egress;
struct eai_egress_grant;

struct eai_egress_config {
    const char *listen_addr;    /* IPv4 address the DNS and gateway sockets bind ("0.0.0.0") */
    uint16_t dns_port;          /* 0: any free port (eai_egress_dns_port tells) */
    uint16_t gateway_port;      /* 0: any free port */
    const char *resolver;       /* "ip" or "ip:port" eaid resolves allowed names with;
                                   NULL or "": the system's /etc/resolv.conf */
    const char *synthetic_cidr; /* IPv4 range of synthetic answers ("198.51.100.0/24"...) */
    int max_connections;        /* per grant, open at once */
    int max_connections_total;  /* per grant, over its life */
    int max_connections_tenant; /* the grants of one tenant together, open at once (0: no bound) */
    int max_connections_node;   /* every grant together, open at once (0: no bound): the gateway's
                                   share of eaid's descriptors (~6 a connection) */
    int64_t max_bytes;          /* per grant, both directions */
    int idle_timeout_s;         /* a connection without traffic is closed */
    int sniff_ms;               /* other ports: a client silent this long may let the server
                                   speak first (0: 300) */
    int first_flight_ms;        /* the client's first unit (80/443: before any upstream
                                   connection), and any later unit begun, must be complete
                                   within this (0: 10000); else refused (sniff_timeout) */
    int connect_timeout_s;
    size_t log_max;             /* entries kept per grant; later ones only counted */
    int no_splice;              /* 1: splice through bufferevents (user-space copies) instead
                                   of splice(2) through a pipe (tests and the bench compare) */
};

/* Called for every decision with the log entry (borrowed). */
typedef void (*eai_egress_decision_fn)(void *arg, const char *exec_id, const json_t *entry);

struct eai_egress *eai_egress_new(struct event_base *base, const struct eai_egress_config *cfg,
                                  eai_egress_decision_fn on_decision, void *arg, struct eai_error **err);
void eai_egress_free(struct eai_egress *eg);
uint16_t eai_egress_dns_port(const struct eai_egress *eg);
uint16_t eai_egress_gateway_port(const struct eai_egress *eg);

/* A grant for the sandbox at sandbox_ip with the allow-list entries (all
 * checked; a bad one fails the call), counted against tenant's connection
 * budget (NULL or "": a tenant of its own).  NULL + *err on failure. */
struct eai_egress_grant *eai_egress_grant_add(struct eai_egress *eg, const char *exec_id, const char *tenant,
                                              const char *sandbox_ip, const char *const *entries,
                                              size_t n, struct eai_error **err);
/* Replace the grant's allow list (all checked; a bad one changes nothing):
 * every later DNS answer and connection is decided by the new list;
 * connections already open stay.  0 or -1 with *err. */
int eai_egress_grant_set_rules(struct eai_egress_grant *g, const char *const *entries, size_t n,
                               struct eai_error **err);
/* Connections open through the gateway now; accept failures (EMFILE, ...)
 * since start. */
int eai_egress_open_connections(const struct eai_egress *eg);
uint64_t eai_egress_accept_errors(const struct eai_egress *eg);
/* The grant's log: {"entries":[...], "dropped":n, "connections":n,
 * "bytes_out":n, "bytes_in":n} (new reference). */
json_t *eai_egress_grant_log(const struct eai_egress_grant *g);
/* Close the grant's connections and forget it. */
void eai_egress_grant_remove(struct eai_egress_grant *g);

#endif
