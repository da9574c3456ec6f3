/*
 * Egress policy: the pure decisions of the egress allow list (docs/egress.md).
 *
 * No I/O, no allocation, no loop: the DNS responder and the egress gateway
 * (both on eaid's loop) and admission call these with bytes they already
 * hold.  Every function is total over its input (fuzzed by fuzz_egress).
 *
 * Allow-list grammar (one entry):
 *   name:port          exact DNS name, case-insensitive, trailing dot ignored
 *   *.suffix:port      any name strictly below suffix (not suffix itself)
 *   a.b.c.d:port       one IPv4 address (dotted quad only: no octal, hex or
 *                      decimal forms)
 *   [v6]:port          one IPv6 address
 *   a.b.c.d/n:port, [v6/n]:port   an address range (CIDR)
 * port is 1..65535.  Only an address or CIDR entry can open an address of a
 * refused class (loopback, private, link-local, ...), and only when that
 * entry itself lies inside the class: a public name never resolves into it.
 */
#ifndef EAI_NET_EGRESS_POLICY_H
#define EAI_NET_EGRESS_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define EAI_EGRESS_NAME_MAX 253

enum eai_egress_kind {
    EAI_EGRESS_NAME = 0,   /* exact name */
    EAI_EGRESS_SUFFIX,     /* *.suffix */
    EAI_EGRESS_ADDR,       /* one address */
    EAI_EGRESS_CIDR,       /* an address range */
    EAI_EGRESS_KIND_MAX
};

/* An address in network byte order; IPv4 is held as itself (family 4),
 * never as an IPv4-mapped IPv6 address. */
struct eai_ip {
    int family;            /* 4 or 6 */
    uint8_t b[16];         /* first 4 bytes for IPv4 */
};

struct eai_egress_rule {
    enum eai_egress_kind kind;
    char name[EAI_EGRESS_NAME_MAX + 1]; /* NAME/SUFFIX: lower case, no trailing dot */
    struct eai_ip ip;                   /* ADDR/CIDR */
    int prefix;                         /* CIDR prefix length (ADDR: 32 or 128) */
    uint16_t port;
};

/* Classes of destination address; everything but PUBLIC is refused unless
 * an ADDR/CIDR entry lists it. */
enum eai_addr_class {
    EAI_ADDR_PUBLIC = 0,
    EAI_ADDR_UNSPECIFIED,  /* 0.0.0.0/8, :: */
    EAI_ADDR_LOOPBACK,     /* 127/8, ::1 */
    EAI_ADDR_PRIVATE,      /* 10/8, 172.16/12, 192.168/16, fec0::/10 */
    EAI_ADDR_LINK_LOCAL,   /* 169.254/16 (the metadata address), fe80::/10 */
    EAI_ADDR_CGNAT,        /* 100.64/10 */
    EAI_ADDR_MULTICAST,    /* 224/4, ff00::/8 */
    EAI_ADDR_RESERVED,     /* 192.0.0/24, 240/4 (broadcast included) */
    EAI_ADDR_ULA,          /* fc00::/7 */
    EAI_ADDR_V4_EMBEDDED,  /* ::ffff:0:0/96, ::/96, 64:ff9b::/96, 2002::/16 */
    EAI_ADDR_CLASS_MAX
};

/* Parse one entry; 0, or -1 when it is not in the grammar above. */
int eai_egress_rule_parse(const char *s, struct eai_egress_rule *out);

/* Lower-case a DNS name into out (without a trailing dot) and check it is
 * LDH labels of 1..63 bytes, 253 bytes at most; 0 or -1. */
int eai_egress_name_normalize(const char *name, size_t len, char *out, size_t outlen);

/* Index of the first NAME/SUFFIX rule allowing name (normalised) on port,
 * port 0 meaning any port (the DNS question has none); -1 when none. */
int eai_egress_name_match(const struct eai_egress_rule *rules, size_t n, const char *name, uint16_t port);

/* Index of the first ADDR/CIDR rule containing ip on port; -1 when none. */
int eai_egress_addr_match(const struct eai_egress_rule *rules, size_t n, const struct eai_ip *ip, uint16_t port);

enum eai_addr_class eai_addr_classify(const struct eai_ip *ip);
const char *eai_addr_class_name(enum eai_addr_class c);

/* Dotted-quad or IPv6 text to an address (IPv4-mapped IPv6 text stays
 * family 6); 0 or -1. */
int eai_ip_parse(const char *s, struct eai_ip *out);
int eai_ip_in(const struct eai_ip *ip, const struct eai_ip *net, int prefix);

#endif
