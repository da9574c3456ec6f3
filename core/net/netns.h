/*
 * Host plumbing of egress (docs/egress.md): one network namespace and veth
 * pair per execution with granted egress, and eaid's one nftables table that
 * sends every sandbox veth's DNS to eaid's responder and its TCP to eaid's
 * gateway, and drops everything else.
 *
 * Blocking (runs `ip` and `nft`): call from a worker, or at start and stop.
 * Names, for a 4-letter prefix P (default "eaix"; tests use their own):
 * netns "P-<tag>", host side "P<tag>h", sandbox side "eth0", nftables
 * table "inet P"; <tag> is 8 lower-case hex characters.  The rules match the
 * host sides by the wildcard "P*", so a new execution adds no rule.
 */
#ifndef EAI_NET_NETNS_H
#define EAI_NET_NETNS_H

#include <stdint.h>

#include <eai/plugin.h>

#define EAI_NETNS_PREFIX "eaix"
/* MTU of both ends of a sandbox veth.  The veth only ever carries the
 * sandbox's packets to eaid's own DNS and gateway on the host side (nothing
 * is forwarded), so it need not match any real link; 65520 (the largest
 * loopback-like size) lets gVisor's netstack handle a 64 KiB segment as one
 * packet instead of ~45, which is most of its per-byte cost under ptrace
 * (docs/egress.md, "Throughput"). */
#define EAI_NETNS_MTU 65520

struct eai_netns {
    char name[24];          /* netns name; /var/run/netns/<name> */
    char path[64];          /* /var/run/netns/<name> */
    char host_if[16];
    char host_ip[16];       /* the sandbox's gateway and DNS address */
    char sandbox_ip[16];
};

/* Addresses of slot `slot` of the pool net/prefix: each slot is a /30,
 * host .1 and sandbox .2.  0, or -1 when slot is outside the pool. */
int eai_netns_slot_addrs(const char *pool_cidr, uint32_t slot, char host_ip[16], char sandbox_ip[16]);
/* Number of /30 slots in the pool (0 when the CIDR is not IPv4 /8../30). */
uint32_t eai_netns_pool_slots(const char *pool_cidr);

/* Create the namespace and veth for tag with the slot's addresses; IPv6
 * off on the host side.  On failure nothing is left. */
int eai_netns_create(const char *prefix, const char *tag, const char *host_ip, const char *sandbox_ip,
                     struct eai_netns *out, struct eai_error **err);
/* Remove them (idempotent). */
void eai_netns_destroy(const struct eai_netns *n);
/* Remove every namespace and link of the prefix (a dead eaid's leftovers);
 * returns how many namespaces were removed. */
int eai_netns_sweep(const char *prefix);

/* (Re)create table inet <prefix> with the redirect and drop rules for
 * dns_port and gateway_port; remove it. */
int eai_nft_install(const char *prefix, uint16_t dns_port, uint16_t gateway_port, struct eai_error **err);
void eai_nft_remove(const char *prefix);

#endif
