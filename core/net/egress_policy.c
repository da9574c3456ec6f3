/* Egress policy decisions (egress_policy.h, docs/egress.md). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "net/egress_policy.h"

/* ---------------------------------------------------------------- names */

int eai_egress_name_normalize(const char *name, size_t len, char *out, size_t outlen)
{
    if (!name || !out)
        return -1;
    if (len > 0 && name[len - 1] == '.')
        len--; /* the root label */
    if (len == 0 || len > EAI_EGRESS_NAME_MAX || len + 1 > outlen)
        return -1;
    size_t label = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '.') {
            if (label == 0 || name[i - 1] == '-')
                return -1; /* empty label, or one ending with '-' */
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (c >= 'A' && c <= 'Z')) {
            if (c == '-' && label == 0)
                return -1;
            if (++label > 63)
                return -1;
            c = (unsigned char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
        } else {
            return -1; /* '_', '*', NUL, spaces, non-ASCII: not a host name */
        }
        out[i] = (char)c;
    }
    if (label == 0 || name[len - 1] == '-')
        return -1;
    out[len] = '\0';
    return 0;
}

/* ---------------------------------------------------------------- addresses */

int eai_ip_parse(const char *s, struct eai_ip *out)
{
    struct eai_ip ip;
    memset(&ip, 0, sizeof(ip));
    /* inet_pton(AF_INET) takes only four decimal parts without leading
     * zeros: 0x7f.1, 017.0.0.1, 2130706433 and 127.1 are all refused. */
    if (inet_pton(AF_INET, s, ip.b) == 1) {
        ip.family = 4;
    } else if (inet_pton(AF_INET6, s, ip.b) == 1) {
        ip.family = 6;
    } else {
        return -1;
    }
    *out = ip;
    return 0;
}

int eai_ip_in(const struct eai_ip *ip, const struct eai_ip *net, int prefix)
{
    if (!ip || !net || ip->family != net->family)
        return 0;
    int bits = ip->family == 4 ? 32 : 128;
    if (prefix < 0 || prefix > bits)
        return 0;
    int full = prefix / 8, rest = prefix % 8;
    if (memcmp(ip->b, net->b, (size_t)full) != 0)
        return 0;
    if (rest) {
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        if ((ip->b[full] & mask) != (net->b[full] & mask))
            return 0;
    }
    return 1;
}

static enum eai_addr_class classify4(const uint8_t *b)
{
    if (b[0] == 0)
        return EAI_ADDR_UNSPECIFIED;
    if (b[0] == 10 || (b[0] == 172 && (b[1] & 0xf0) == 16) || (b[0] == 192 && b[1] == 168))
        return EAI_ADDR_PRIVATE;
    if (b[0] == 100 && (b[1] & 0xc0) == 64)
        return EAI_ADDR_CGNAT;
    if (b[0] == 127)
        return EAI_ADDR_LOOPBACK;
    if (b[0] == 169 && b[1] == 254)
        return EAI_ADDR_LINK_LOCAL;
    if (b[0] == 192 && b[1] == 0 && b[2] == 0)
        return EAI_ADDR_RESERVED;
    if (b[0] >= 224 && b[0] < 240)
        return EAI_ADDR_MULTICAST;
    if (b[0] >= 240)
        return EAI_ADDR_RESERVED;
    return EAI_ADDR_PUBLIC;
}

enum eai_addr_class eai_addr_classify(const struct eai_ip *ip)
{
    static const uint8_t zero[16];
    if (!ip)
        return EAI_ADDR_UNSPECIFIED;
    if (ip->family == 4)
        return classify4(ip->b);
    const uint8_t *b = ip->b;
    if (memcmp(b, zero, 16) == 0)
        return EAI_ADDR_UNSPECIFIED;
    if (memcmp(b, zero, 15) == 0 && b[15] == 1)
        return EAI_ADDR_LOOPBACK;
    /* ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), 64:ff9b::/96 (NAT64)
     * and 2002::/16 (6to4) all lead to an IPv4 address: refused whatever
     * that address is, so no IPv6 spelling reaches a refused IPv4 one. */
    if (memcmp(b, zero, 10) == 0 && ((b[10] == 0xff && b[11] == 0xff) || (b[10] == 0 && b[11] == 0)))
        return EAI_ADDR_V4_EMBEDDED;
    static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    if (memcmp(b, nat64, 12) == 0)
        return EAI_ADDR_V4_EMBEDDED;
    if (b[0] == 0x20 && b[1] == 0x02)
        return EAI_ADDR_V4_EMBEDDED;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
        return EAI_ADDR_LINK_LOCAL;
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
        return EAI_ADDR_PRIVATE; /* site-local, deprecated but routable in places */
    if ((b[0] & 0xfe) == 0xfc)
        return EAI_ADDR_ULA;
    if (b[0] == 0xff)
        return EAI_ADDR_MULTICAST;
    return EAI_ADDR_PUBLIC;
}

const char *eai_addr_class_name(enum eai_addr_class c)
{
    static const char *const names[EAI_ADDR_CLASS_MAX] = {
        "public", "unspecified", "loopback", "private", "link_local",
        "cgnat", "multicast", "reserved", "ula", "ipv4_embedded",
    };
    return ((int)c >= 0 && c < EAI_ADDR_CLASS_MAX) ? names[c] : "unknown";
}

/* ---------------------------------------------------------------- rules */

static int parse_port(const char *s, uint16_t *port)
{
    size_t n = strlen(s);
    if (n == 0 || n > 5 || s[0] == '0' || strspn(s, "0123456789") != n)
        return -1;
    unsigned long v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (unsigned long)(s[i] - '0');
    if (v == 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

static int parse_prefix(const char *s, int max, int *prefix)
{
    size_t n = strlen(s);
    if (n == 0 || n > 3 || strspn(s, "0123456789") != n || (n > 1 && s[0] == '0'))
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    if (v > max)
        return -1;
    *prefix = v;
    return 0;
}

/* addr or addr/prefix into r (kind ADDR or CIDR). */
static int parse_addr_part(char *a, struct eai_egress_rule *r)
{
    char *slash = strchr(a, '/');
    if (slash)
        *slash = '\0';
    if (eai_ip_parse(a, &r->ip) < 0)
        return -1;
    int bits = r->ip.family == 4 ? 32 : 128;
    if (!slash) {
        r->kind = EAI_EGRESS_ADDR;
        r->prefix = bits;
        return 0;
    }
    if (parse_prefix(slash + 1, bits, &r->prefix) < 0)
        return -1;
    /* host bits must be zero: 10.0.0.1/8 is a typo, not a range */
    struct eai_ip net = r->ip;
    int full = r->prefix / 8, rest = r->prefix % 8;
    if (rest)
        net.b[full] &= (uint8_t)(0xff << (8 - rest));
    for (int i = full + (rest ? 1 : 0); i < 16; i++)
        net.b[i] = 0;
    if (memcmp(net.b, r->ip.b, 16) != 0)
        return -1;
    r->kind = EAI_EGRESS_CIDR;
    return 0;
}

int eai_egress_rule_parse(const char *s, struct eai_egress_rule *out)
{
    if (!s || !out)
        return -1;
    size_t n = strlen(s);
    if (n == 0 || n > EAI_EGRESS_NAME_MAX + 16)
        return -1;
    char buf[EAI_EGRESS_NAME_MAX + 17];
    memcpy(buf, s, n + 1);
    struct eai_egress_rule r;
    memset(&r, 0, sizeof(r));
    char *colon;
    if (buf[0] == '[') {
        char *close = strchr(buf, ']');
        if (!close || close[1] != ':')
            return -1;
        *close = '\0';
        if (parse_port(close + 2, &r.port) < 0 || strchr(buf + 1, '.') || parse_addr_part(buf + 1, &r) < 0 ||
            r.ip.family != 6)
            return -1; /* brackets hold IPv6 only (::ffff:1.2.3.4 is written as 1.2.3.4) */
        *out = r;
        return 0;
    }
    colon = strrchr(buf, ':');
    if (!colon || colon == buf)
        return -1;
    *colon = '\0';
    if (parse_port(colon + 1, &r.port) < 0)
        return -1;
    if (strchr(buf, ':'))
        return -1; /* bare IPv6 without brackets */
    if (strchr(buf, '/')) {
        if (parse_addr_part(buf, &r) < 0 || r.ip.family != 4)
            return -1;
        *out = r;
        return 0;
    }
    if (eai_ip_parse(buf, &r.ip) == 0) {
        r.kind = EAI_EGRESS_ADDR;
        r.prefix = 32;
        *out = r;
        return 0;
    }
    /* A name made of numbers (2130706433, 0x7f.1, 127.1) is an address in
     * another spelling to the sandbox's resolver: never a name entry. */
    struct in_addr ignored;
    if (inet_aton(buf, &ignored) != 0)
        return -1;
    const char *name = buf;
    r.kind = EAI_EGRESS_NAME;
    if (buf[0] == '*') {
        if (buf[1] != '.')
            return -1;
        name = buf + 2;
        r.kind = EAI_EGRESS_SUFFIX;
    }
    if (strlen(name) && name[strlen(name) - 1] == '.')
        return -1; /* entries are written without the root dot */
    if (eai_egress_name_normalize(name, strlen(name), r.name, sizeof(r.name)) < 0)
        return -1;
    /* The last label is never all digits (RFC 3696 section 2). */
    const char *last = strrchr(r.name, '.');
    last = last ? last + 1 : r.name;
    if (strspn(last, "0123456789") == strlen(last))
        return -1;
    *out = r;
    return 0;
}

int eai_egress_name_match(const struct eai_egress_rule *rules, size_t n, const char *name, uint16_t port)
{
    if (!rules || !name)
        return -1;
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i++) {
        const struct eai_egress_rule *r = &rules[i];
        if (port != 0 && r->port != port)
            continue;
        if (r->kind == EAI_EGRESS_NAME && strcmp(r->name, name) == 0)
            return (int)i;
        if (r->kind == EAI_EGRESS_SUFFIX) {
            size_t sl = strlen(r->name);
            if (nl > sl + 1 && name[nl - sl - 1] == '.' && strcmp(name + nl - sl, r->name) == 0)
                return (int)i;
        }
    }
    return -1;
}

int eai_egress_addr_match(const struct eai_egress_rule *rules, size_t n, const struct eai_ip *ip, uint16_t port)
{
    if (!rules || !ip)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct eai_egress_rule *r = &rules[i];
        if ((r->kind == EAI_EGRESS_ADDR || r->kind == EAI_EGRESS_CIDR) && r->port == port &&
            eai_ip_in(ip, &r->ip, r->prefix))
            return (int)i;
    }
    return -1;
}
