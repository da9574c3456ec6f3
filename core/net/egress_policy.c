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

/* ---------------------------------------------------------------- TLS SNI */

#define TLS_RECORD_MAX (16384 + 2048)

static unsigned rd16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

int eai_tls_sni(const uint8_t *buf, size_t len, char *out, size_t outlen)
{
    if (!buf || !out)
        return -2;
    if (len >= 1 && buf[0] != 0x16)
        return -2; /* not a handshake record */
    if (len >= 2 && buf[1] != 0x03)
        return -2;
    if (len < 5)
        return -1;
    size_t rec = rd16(buf + 3);
    if (rec < 4 || rec > TLS_RECORD_MAX)
        return -2;
    if (len < 5 + rec)
        return -1;
    const uint8_t *p = buf + 5, *end = buf + 5 + rec;
    if (p[0] != 0x01)
        return -2; /* not a ClientHello */
    size_t hs = (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
    p += 4;
    if (hs > (size_t)(end - p))
        return -2; /* a ClientHello split over records: refused (docs/egress.md) */
    end = p + hs;
    /* version(2) random(32) */
    if (end - p < 34)
        return -2;
    p += 34;
    /* session_id */
    if (end - p < 1 || (size_t)(end - p) < 1u + p[0])
        return -2;
    p += 1 + p[0];
    /* cipher_suites */
    if (end - p < 2 || (size_t)(end - p) < 2u + rd16(p))
        return -2;
    p += 2 + rd16(p);
    /* compression_methods */
    if (end - p < 1 || (size_t)(end - p) < 1u + p[0])
        return -2;
    p += 1 + p[0];
    if (p == end)
        return 0; /* no extensions at all */
    if (end - p < 2 || (size_t)(end - p) < 2u + rd16(p))
        return -2;
    end = p + 2 + rd16(p);
    p += 2;
    while (p < end) {
        if (end - p < 4)
            return -2;
        unsigned type = rd16(p), elen = rd16(p + 2);
        p += 4;
        if ((size_t)(end - p) < elen)
            return -2;
        if (type == 0x0000) {
            const uint8_t *q = p, *qe = p + elen;
            if (qe - q < 2 || (size_t)(qe - q) < 2u + rd16(q))
                return -2;
            qe = q + 2 + rd16(q);
            q += 2;
            while (q < qe) {
                if (qe - q < 3)
                    return -2;
                unsigned nt = q[0], nl = rd16(q + 1);
                q += 3;
                if ((size_t)(qe - q) < nl)
                    return -2;
                if (nt == 0) /* host_name */
                    return eai_egress_name_normalize((const char *)q, nl, out, outlen) == 0 ? 1 : -2;
                q += nl;
            }
            return 0;
        }
        p += elen;
    }
    return 0;
}

/* ---------------------------------------------------------------- HTTP Host */

#define HTTP_HEAD_MAX 16384

int eai_http_host(const char *buf, size_t len, char *out, size_t outlen, uint16_t *port)
{
    if (!buf || !out || !port)
        return -2;
    size_t scan = len < HTTP_HEAD_MAX ? len : HTTP_HEAD_MAX;
    /* method: 1..16 upper-case letters, then one space */
    size_t i = 0;
    while (i < scan && i < 17 && buf[i] >= 'A' && buf[i] <= 'Z')
        i++;
    if (i == scan)
        return len >= HTTP_HEAD_MAX ? -2 : -1;
    if (i == 0 || i > 16 || buf[i] != ' ')
        return -2;
    if (i == 7 && memcmp(buf, "CONNECT", 7) == 0)
        return -2; /* a tunnel request names its target elsewhere */
    /* origin-form or "*" only: an absolute-form target could name another host */
    if (i + 1 < scan && buf[i + 1] != '/' && buf[i + 1] != '*')
        return -2;
    const char *head_end = NULL;
    for (size_t k = 0; k + 3 < scan; k++) {
        if (buf[k] == '\r' && buf[k + 1] == '\n' && buf[k + 2] == '\r' && buf[k + 3] == '\n') {
            head_end = buf + k + 2; /* keep the last header's CRLF */
            break;
        }
    }
    if (!head_end)
        return len >= HTTP_HEAD_MAX ? -2 : -1;
    const char *line = memchr(buf, '\n', (size_t)(head_end - buf));
    if (!line || line == buf || line[-1] != '\r')
        return -2;
    const char *reqline_end = line - 1;
    if (reqline_end - buf < 10 || memcmp(reqline_end - 9, " HTTP/1.", 8) != 0 ||
        (reqline_end[-1] != '0' && reqline_end[-1] != '1'))
        return -2;
    line++;
    const char *host = NULL;
    size_t host_len = 0;
    int hosts = 0;
    while (line < head_end) {
        const char *eol = memchr(line, '\n', (size_t)(head_end - line));
        if (!eol || eol == line || eol[-1] != '\r')
            return -2;
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (!colon || colon == line)
            return -2;
        for (const char *c = line; c < colon; c++)
            if (*c == ' ' || *c == '\t')
                return -2; /* no space before the colon (RFC 9112 5.1) */
        if (colon - line == 4 && strncasecmp(line, "host", 4) == 0) {
            const char *v = colon + 1, *ve = eol - 1;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            host = v;
            host_len = (size_t)(ve - v);
            hosts++;
        }
        line = eol + 1;
    }
    if (hosts != 1 || host_len == 0)
        return -2;
    /* [v6]:port, name:port, name */
    const char *h = host, *hend = host + host_len, *pstart = NULL;
    if (*h == '[') {
        const char *close = memchr(h, ']', host_len);
        if (!close)
            return -2;
        if (close + 1 < hend) {
            if (close[1] != ':')
                return -2;
            pstart = close + 2;
        }
        size_t al = (size_t)(close - h - 1);
        char a[64];
        struct eai_ip ip;
        if (al == 0 || al >= sizeof(a) || al + 1 > outlen)
            return -2;
        memcpy(a, h + 1, al);
        a[al] = '\0';
        if (inet_pton(AF_INET6, a, ip.b) != 1)
            return -2;
        for (size_t k = 0; k <= al; k++)
            out[k] = (char)((a[k] >= 'A' && a[k] <= 'F') ? a[k] + 32 : a[k]);
    } else {
        const char *c = memchr(h, ':', host_len);
        size_t nl = c ? (size_t)(c - h) : host_len;
        if (c)
            pstart = c + 1;
        if (eai_egress_name_normalize(h, nl, out, outlen) < 0)
            return -2;
    }
    *port = 0;
    if (pstart) {
        char p[8];
        size_t pl = (size_t)(hend - pstart);
        if (pl == 0 || pl >= sizeof(p))
            return -2;
        memcpy(p, pstart, pl);
        p[pl] = '\0';
        if (parse_port(p, port) < 0)
            return -2;
    }
    return 1;
}
