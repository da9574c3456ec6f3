/* Readers of the protocols the egress gateway checks: HTTP/1.x request
 * heads, TLS handshake messages (egress_proto.h, docs/egress.md). */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "net/egress_proto.h"


static unsigned rd16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static unsigned rd24(const uint8_t *p)
{
    return (unsigned)p[0] << 16 | (unsigned)p[1] << 8 | p[2];
}

/* RFC 9110 tchar */
int eai_http_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* ---------------------------------------------------------------- HTTP */

static int parse_port(const char *s, size_t n, uint16_t *port)
{
    if (n == 0 || n > 5 || s[0] == '0')
        return -1;
    unsigned long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

/* A Host value: name, name:port, [v6], [v6]:port.  0 or -1. */
static int host_value(const char *h, size_t n, char *out, size_t outlen, uint16_t *port)
{
    const char *hend = h + n, *pstart = NULL;
    *port = 0;
    if (n == 0)
        return -1;
    if (*h == '[') {
        const char *close = memchr(h, ']', n);
        if (!close)
            return -1;
        if (close + 1 < hend) {
            if (close[1] != ':')
                return -1;
            pstart = close + 2;
        }
        size_t al = (size_t)(close - h - 1);
        char a[64];
        uint8_t ip[16];
        if (al == 0 || al >= sizeof(a) || al + 1 > outlen)
            return -1;
        memcpy(a, h + 1, al);
        a[al] = '\0';
        if (inet_pton(AF_INET6, a, ip) != 1)
            return -1;
        for (size_t k = 0; k <= al; k++)
            out[k] = (char)((a[k] >= 'A' && a[k] <= 'F') ? a[k] + 32 : a[k]);
    } else {
        const char *c = memchr(h, ':', n);
        size_t nl = c ? (size_t)(c - h) : n;
        if (c)
            pstart = c + 1;
        if (eai_egress_name_normalize(h, nl, out, outlen) < 0)
            return -1;
    }
    if (pstart && parse_port(pstart, (size_t)(hend - pstart), port) < 0)
        return -1;
    return 0;
}

/* One field line [line, le) (le at its CR): name ':' OWS value OWS.  The
 * name and trimmed value out; 0 or -1 (obs-fold, no colon, a bad byte). */
int eai_http_field_line(const char *line, const char *le, const char **name, size_t *nlen, const char **val,
                      size_t *vlen)
{
    if (line[0] == ' ' || line[0] == '\t')
        return -1; /* obs-fold: servers differ, so refused */
    const char *colon = line;
    while (colon < le && eai_http_tchar((unsigned char)*colon))
        colon++;
    if (colon == line || colon == le || *colon != ':')
        return -1;
    const char *v = colon + 1, *ve = le;
    for (const char *q = v; q < ve; q++) {
        unsigned char ch = (unsigned char)*q;
        if (ch != '\t' && (ch < 0x20 || ch == 0x7f))
            return -1;
    }
    while (v < ve && (*v == ' ' || *v == '\t'))
        v++;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    *name = line;
    *nlen = (size_t)(colon - line);
    *val = v;
    *vlen = (size_t)(ve - v);
    return 0;
}

/* The end of a section of lines ending with an empty line, scanned from
 * *scanned on (the bytes before were seen already).  Offset after the final
 * CRLF CRLF; 0 need more; -1 a bare LF, NUL or control byte, or too long.
 * first: where the lines start (an empty first line ends the section). */
long eai_http_lines_end(const char *buf, size_t len, size_t first, size_t *scanned)
{
    size_t k = *scanned > first ? *scanned : first;
    for (; k < len && k < EAI_PROTO_UNIT_MAX; k++) {
        unsigned char c = (unsigned char)buf[k];
        if (c == '\n') {
            if (k == first || buf[k - 1] != '\r')
                return -1; /* a bare LF ends a line for some servers, not for us */
            if (k == first + 1 || (k >= first + 3 && buf[k - 2] == '\n' && buf[k - 3] == '\r'))
                return (long)(k + 1);
        } else if (c != '\r' && c != '\t' && (c < 0x20 || c == 0x7f)) {
            return -1;
        }
    }
    *scanned = k;
    return k >= EAI_PROTO_UNIT_MAX ? -1 : 0;
}

/* The head, from *scanned on; -1 need more, -2 refused (*why). */
static int head_parse(const char *buf, size_t len, size_t *scanned, struct eai_http_head *h, const char **why)
{
    *why = "http_malformed";
    size_t i = 0;
    while (i < len && (buf[i] == '\r' || buf[i] == '\n'))
        i++;
    if (i > EAI_HTTP_LEAD_MAX)
        return -2;
    if (i == len)
        return -1;
    /* method: 1..16 upper-case letters, then one space ("GET" alone waits) */
    size_t m = i;
    while (m < len && m - i <= 16 && buf[m] >= 'A' && buf[m] <= 'Z')
        m++;
    if (m == len && m - i <= 16)
        return -1;
    if (m == i || m - i > 16 || buf[m] != ' ')
        return -2;
    /* the request line, judged as soon as it is complete */
    const char *p = buf + m + 1;
    const char *eol = memchr(p, '\n', len - m - 1);
    if (!eol)
        return len >= EAI_PROTO_UNIT_MAX ? -2 : -1;
    if (eol[-1] != '\r')
        return -2; /* a bare LF */
    eol--;
    const char *sp = memchr(p, ' ', (size_t)(eol - p));
    if (!sp || sp == p)
        return -2;
    for (const char *q = p; q < sp; q++)
        if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
            return -2;
    size_t mlen = m - i, tlen = (size_t)(sp - p), vlen = (size_t)(eol - sp - 1);
    const char *ver = sp + 1;
    if (mlen == 3 && memcmp(buf + i, "PRI", 3) == 0 && tlen == 1 && *p == '*' && vlen == 8 &&
        memcmp(ver, "HTTP/2.0", 8) == 0) {
        *why = "http2_refused"; /* HTTP/2 prior knowledge: its :authority is not read */
        return -2;
    }
    if (vlen != 8 || memcmp(ver, "HTTP/1.", 7) != 0 || (ver[7] != '0' && ver[7] != '1'))
        return -2;
    if (mlen == 7 && memcmp(buf + i, "CONNECT", 7) == 0)
        return -2; /* a tunnel request names its target elsewhere */
    if (*p != '/' && !(tlen == 1 && *p == '*'))
        return -2; /* absolute-form could name another host than Host */
    /* the end: CRLF CRLF (eai_http_lines_end sees the request line as a line) */
    long e = eai_http_lines_end(buf, len, m + 1, scanned);
    if (e < 0)
        return -2;
    if (e == 0)
        return -1;
    const char *end = buf + e;
    int http10 = ver[7] == '0';
    int hosts = 0, cls = 0, tes = 0;
    memset(h, 0, sizeof(*h));
    const char *line = eol + 2;
    while (line < end - 2) {
        const char *le = memchr(line, '\r', (size_t)(end - line));
        const char *name, *val;
        size_t nl, vl;
        if (!le || le[1] != '\n' || eai_http_field_line(line, le, &name, &nl, &val, &vl) < 0)
            return -2;
        if (nl == 4 && strncasecmp(name, "host", 4) == 0) {
            if (++hosts > 1 || host_value(val, vl, h->host, sizeof(h->host), &h->port) < 0)
                return -2;
        } else if (nl == 14 && strncasecmp(name, "content-length", 14) == 0) {
            if (++cls > 1 || vl == 0 || vl > 18)
                return -2;
            for (size_t k = 0; k < vl; k++) {
                if (val[k] < '0' || val[k] > '9')
                    return -2;
                h->content_length = h->content_length * 10 + (uint64_t)(val[k] - '0');
            }
        } else if (nl == 17 && strncasecmp(name, "transfer-encoding", 17) == 0) {
            if (++tes > 1 || vl != 7 || strncasecmp(val, "chunked", 7) != 0)
                return -2;
            h->chunked = 1;
        }
        line = le + 2;
    }
    if (hosts != 1 || (cls && tes) || (tes && http10))
        return -2;
    h->len = (size_t)e;
    return 1;
}

int eai_http_head_parse(const char *buf, size_t len, size_t *scanned, struct eai_http_head *h, const char **why)
{
    const char *w = NULL;
    size_t from = 0;
    if (!buf || !h)
        return -2;
    int rc = head_parse(buf, len, scanned ? scanned : &from, h, &w);
    if (why)
        *why = w;
    return rc;
}

int eai_http_host(const char *buf, size_t len, char *out, size_t outlen, uint16_t *port)
{
    struct eai_http_head h;
    if (!out || !port)
        return -2;
    int rc = eai_http_head_parse(buf, len, NULL, &h, NULL);
    if (rc != 1)
        return rc;
    if (strlen(h.host) + 1 > outlen)
        return -2;
    memcpy(out, h.host, strlen(h.host) + 1);
    *port = h.port;
    return 1;
}

/* ---------------------------------------------------------------- TLS */

int eai_tls_hs_collect(const uint8_t *buf, size_t len, unsigned want, int exact, uint8_t *msg, size_t msgcap,
                       size_t *msglen, size_t *end)
{
    if (!buf || !msg || msgcap < 4)
        return -2;
    size_t off = 0, got = 0, need = 0;
    for (;;) {
        if (len - off >= 1 && buf[off] != EAI_TLS_HANDSHAKE)
            return -2;
        if (len - off >= 2 && buf[off + 1] != 0x03)
            return -2;
        if (len - off < 5)
            return off + 5 > EAI_PROTO_UNIT_MAX ? -2 : -1;
        size_t rec = rd16(buf + off + 3);
        if (rec == 0 || rec > EAI_TLS_RECORD_MAX || off + 5 + rec > EAI_PROTO_UNIT_MAX)
            return -2;
        if (len - off < 5 + rec)
            return -1;
        const uint8_t *c = buf + off + 5;
        if (got < msgcap) {
            size_t k = rec < msgcap - got ? rec : msgcap - got;
            memcpy(msg + got, c, k);
        }
        if (got == 0 && msg[0] != want)
            return -2;
        got += rec;
        off += 5 + rec;
        if (!need && got >= 4) {
            need = 4 + (size_t)rd24(msg + 1);
            if (need > msgcap)
                return -2;
        }
        if (need && got >= need) {
            if (got > need && exact)
                return -2; /* more after the message in its last record */
            *msglen = need;
            *end = off;
            return 1;
        }
    }
}

int eai_tls_hello_sni(const uint8_t *msg, size_t len, char *out, size_t outlen)
{
    if (!msg || !out || len < 4 || msg[0] != 0x01 || rd24(msg + 1) != len - 4)
        return -2;
    const uint8_t *p = msg + 4, *end = msg + len;
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
    if (end - p < 2 || (size_t)(end - p) != 2u + rd16(p))
        return -2; /* the extensions fill the message exactly */
    p += 2;
    int found = 0;
    while (p < end) {
        if (end - p < 4)
            return -2;
        unsigned type = rd16(p), elen = rd16(p + 2);
        p += 4;
        if ((size_t)(end - p) < elen)
            return -2;
        if (type == 0x0000) {
            /* server_name: a list holding exactly one host_name */
            const uint8_t *q = p;
            if (found || elen < 5 || rd16(q) != elen - 2 || q[2] != 0 || rd16(q + 3) != elen - 5)
                return -2;
            if (eai_egress_name_normalize((const char *)q + 5, elen - 5, out, outlen) < 0)
                return -2;
            found = 1;
        }
        p += elen;
    }
    return found;
}

int eai_tls_sni(const uint8_t *buf, size_t len, char *out, size_t outlen)
{
    uint8_t msg[EAI_TLS_HELLO_MAX + 4];
    size_t mlen, end;
    if (!buf || !out)
        return -2;
    int rc = eai_tls_hs_collect(buf, len, 0x01, 0, msg, sizeof(msg), &mlen, &end);
    if (rc != 1)
        return rc;
    return eai_tls_hello_sni(msg, mlen, out, outlen);
}

int eai_tls_server_version(const uint8_t *msg, size_t len)
{
    static const uint8_t hrr[32] = {0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c,
                                    0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb,
                                    0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};
    if (!msg || len < 4 || msg[0] != 0x02 || rd24(msg + 1) != len - 4)
        return -2;
    const uint8_t *p = msg + 4, *end = msg + len;
    if (end - p < 34)
        return -2;
    int legacy = (int)rd16(p);
    if (memcmp(p + 2, hrr, sizeof(hrr)) == 0)
        return 0x0304; /* a HelloRetryRequest: TLS 1.3 only */
    p += 34;
    if (end - p < 1 || (size_t)(end - p) < 1u + p[0])
        return -2;
    p += 1 + p[0];
    if (end - p < 3)
        return -2; /* cipher_suite, compression_method */
    p += 3;
    if (p == end)
        return legacy;
    if (end - p < 2 || (size_t)(end - p) != 2u + rd16(p))
        return -2;
    p += 2;
    while (p < end) {
        if (end - p < 4)
            return -2;
        unsigned type = rd16(p), elen = rd16(p + 2);
        p += 4;
        if ((size_t)(end - p) < elen)
            return -2;
        if (type == 43) /* supported_versions: the selected one */
            return elen == 2 ? (int)rd16(p) : -2;
        p += elen;
    }
    return legacy;
}

