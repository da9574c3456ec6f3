/* Egress inspection: what the gateway reads of a connection, both ways, for
 * its whole life (egress_inspect.h, docs/egress.md "How the gateway reads a
 * connection"). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "net/egress_inspect.h"

#define HTTP_LINE_MAX 4096 /* a chunk-size line */

/* client states */
enum { H_HEAD = 0, H_BODY, H_CHUNK_SIZE, H_CHUNK_DATA, H_CHUNK_END, H_TRAILER };
enum { T_FIRST = 0, T_RECORD, T_CONTENT };
/* server states */
enum { S_OPAQUE = 0, S_HELLO, S_UNDECIDED };

static unsigned rd16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static unsigned rd24(const uint8_t *p)
{
    return (unsigned)p[0] << 16 | (unsigned)p[1] << 8 | p[2];
}

/* ---------------------------------------------------------------- inspector */

enum eai_inspect_proto eai_inspect_proto_for_port(uint16_t port)
{
    return port == 80 ? EAI_INSPECT_HTTP : port == 443 ? EAI_INSPECT_TLS : EAI_INSPECT_FIRST;
}

void eai_inspect_init(struct eai_inspect *in, enum eai_inspect_proto proto, const char *name, uint16_t port)
{
    memset(in, 0, sizeof(*in));
    if (!name || !*name || proto >= EAI_INSPECT_PROTO_MAX)
        proto = EAI_INSPECT_OPAQUE; /* an address entry: the address is the check */
    in->proto = proto;
    snprintf(in->name, sizeof(in->name), "%s", name ? name : "");
    in->port = port;
    in->st = proto == EAI_INSPECT_TLS ? T_FIRST : 0;
    in->sst = proto == EAI_INSPECT_TLS ? S_HELLO : proto == EAI_INSPECT_FIRST ? S_UNDECIDED : S_OPAQUE;
}

static long refuse(struct eai_inspect *in, const char *reason, const char *seen)
{
    in->reason = reason;
    snprintf(in->seen, sizeof(in->seen), "%s", seen ? seen : "");
    return -1;
}

uint64_t eai_inspect_passable(const struct eai_inspect *in, enum eai_inspect_side side)
{
    if (side == EAI_INSPECT_SERVER)
        return in->sst == S_HELLO ? 0 : EAI_INSPECT_ALL;
    switch (in->proto) {
    case EAI_INSPECT_OPAQUE:
        return EAI_INSPECT_ALL;
    case EAI_INSPECT_HTTP:
        return in->st == H_BODY || in->st == H_CHUNK_DATA ? in->left : 0;
    case EAI_INSPECT_TLS:
        return in->st == T_CONTENT ? in->left : 0;
    default:
        return 0;
    }
}

void eai_inspect_skip(struct eai_inspect *in, enum eai_inspect_side side, uint64_t n)
{
    if (side == EAI_INSPECT_SERVER) {
        if (in->sst == S_UNDECIDED && n > 0) {
            in->sst = S_OPAQUE; /* the server spoke first: its hello, if any, went by unread */
            in->version = -1;
        }
        return;
    }
    if (in->proto == EAI_INSPECT_OPAQUE || n == 0)
        return;
    in->left = n < in->left ? in->left - n : 0;
    if (in->left > 0)
        return;
    if (in->proto == EAI_INSPECT_HTTP)
        in->st = in->st == H_CHUNK_DATA ? H_CHUNK_END : H_HEAD;
    else if (in->proto == EAI_INSPECT_TLS)
        in->st = T_RECORD;
}

/* Check a request head or ClientHello's name against the allowed one. */
static int name_ok(const struct eai_inspect *in, const char *seen, uint16_t port)
{
    return strcmp(seen, in->name) == 0 && (port == 0 || port == in->port);
}

static long http_step(struct eai_inspect *in, const uint8_t *ubuf, size_t len)
{
    const char *buf = (const char *)ubuf;
    switch (in->st) {
    case H_HEAD: {
        struct eai_http_head h;
        const char *why = NULL;
        int rc = eai_http_head_parse(buf, len, &in->scanned, &h, &why);
        if (rc == -1)
            return 0;
        if (rc != 1)
            return refuse(in, why, "");
        if (!name_ok(in, h.host, h.port))
            return refuse(in, "host_mismatch", h.host);
        in->units++;
        in->scanned = 0;
        in->left = h.content_length;
        in->st = h.chunked ? H_CHUNK_SIZE : h.content_length ? H_BODY : H_HEAD;
        return (long)h.len;
    }
    case H_CHUNK_SIZE: {
        /* 1*HEXDIG [BWS ";" ext] CRLF */
        size_t i = 0;
        uint64_t size = 0;
        while (i < len && i < 16 && ((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f') ||
                                     (buf[i] >= 'A' && buf[i] <= 'F'))) {
            char c = buf[i++];
            size = size * 16 + (uint64_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        if (i == len)
            return i < 16 ? 0 : refuse(in, "http_malformed", "");
        if (i == 0 || i >= 16)
            return refuse(in, "http_malformed", ""); /* no size, or one past 2^60 */
        size_t k = i;
        while (k < len && k < HTTP_LINE_MAX && buf[k] != '\r') {
            unsigned char c = (unsigned char)buf[k];
            if (c != '\t' && (c < 0x20 || c == 0x7f))
                return refuse(in, "http_malformed", "");
            k++;
        }
        size_t b = i;
        while (b < k && (buf[b] == ' ' || buf[b] == '\t'))
            b++;
        if (b < k && buf[b] != ';')
            return refuse(in, "http_malformed", ""); /* after the size: [BWS] ";" ext, nothing else */
        if (k + 1 >= len)
            return k >= HTTP_LINE_MAX ? refuse(in, "http_malformed", "") : 0;
        if (buf[k] != '\r' || buf[k + 1] != '\n')
            return refuse(in, "http_malformed", "");
        in->left = size;
        in->st = size ? H_CHUNK_DATA : H_TRAILER;
        return (long)(k + 2);
    }
    case H_CHUNK_END:
        if (buf[0] != '\r' || (len > 1 && buf[1] != '\n'))
            return refuse(in, "http_malformed", "");
        if (len < 2)
            return 0;
        in->st = H_CHUNK_SIZE;
        return 2;
    case H_TRAILER: {
        long e = eai_http_lines_end(buf, len, 0, &in->scanned);
        if (e < 0)
            return refuse(in, "http_malformed", "");
        if (e == 0)
            return 0;
        for (const char *line = buf, *end = buf + e; line < end - 2;) {
            const char *le = memchr(line, '\r', (size_t)(end - line));
            const char *n, *v;
            size_t nl, vl;
            if (!le || le[1] != '\n' || eai_http_field_line(line, le, &n, &nl, &v, &vl) < 0)
                return refuse(in, "http_malformed", "");
            line = le + 2;
        }
        in->scanned = 0;
        in->st = H_HEAD;
        return e;
    }
    default:
        return refuse(in, "http_malformed", "");
    }
}

/* A ClientHello at the start of buf (a record's start): checked. */
static long tls_hello(struct eai_inspect *in, const uint8_t *buf, size_t len)
{
    uint8_t msg[EAI_TLS_HELLO_MAX + 4];
    size_t mlen, end;
    char seen[EAI_EGRESS_NAME_MAX + 1];
    int rc = eai_tls_hs_collect(buf, len, 0x01, 1, msg, sizeof(msg), &mlen, &end);
    if (rc == -1)
        return 0;
    if (rc != 1)
        return refuse(in, "tls_malformed", "");
    rc = eai_tls_hello_sni(msg, mlen, seen, sizeof(seen));
    if (rc < 0)
        return refuse(in, "tls_malformed", "");
    if (rc == 0)
        return refuse(in, "sni_missing", "");
    if (!name_ok(in, seen, 0))
        return refuse(in, "sni_mismatch", seen);
    in->units++;
    in->st = T_RECORD;
    return (long)end;
}

static long tls_step(struct eai_inspect *in, const uint8_t *buf, size_t len)
{
    if (in->st == T_FIRST)
        return tls_hello(in, buf, len);
    /* T_RECORD: a record header */
    if (buf[0] < EAI_TLS_CCS || buf[0] > EAI_TLS_APPDATA || (len > 1 && buf[1] != 0x03))
        return refuse(in, "tls_malformed", "");
    if (len < 5)
        return 0;
    size_t rec = rd16(buf + 3);
    if (rec > EAI_TLS_RECORD_MAX)
        return refuse(in, "tls_malformed", "");
    if (buf[0] == EAI_TLS_HANDSHAKE) {
        /* Plaintext until the client's ChangeCipherSpec, or always in TLS
         * 1.3 (its encrypted records are application_data); after it in
         * TLS 1.2 and older: encrypted (Finished, renegotiation). */
        if (in->ccs && in->version <= 0)
            return refuse(in, "tls_malformed", ""); /* cannot tell without the server's hello */
        if (!in->ccs || in->version >= 0x0304) {
            if (rec == 0)
                return refuse(in, "tls_malformed", "");
            if (len < 5 + rec)
                return 0; /* a whole plaintext record: <= EAI_INSPECT_MAX */
            if (in->hs_skip == 0 && in->hs_hdr_n == 0 && buf[5] == 0x01)
                return tls_hello(in, buf, len); /* a ClientHello again (after a HelloRetryRequest) */
            for (size_t pos = 0; pos < rec;) {
                const uint8_t *c = buf + 5;
                if (in->hs_skip > 0) {
                    size_t k = in->hs_skip < rec - pos ? in->hs_skip : rec - pos;
                    in->hs_skip -= (uint32_t)k;
                    pos += k;
                    continue;
                }
                in->hs_hdr[in->hs_hdr_n++] = c[pos++];
                if (in->hs_hdr_n == 1 && in->hs_hdr[0] == 0x01)
                    return refuse(in, "tls_malformed", ""); /* a ClientHello not at a record's start */
                if (in->hs_hdr_n == 4) {
                    in->hs_skip = rd24(in->hs_hdr + 1);
                    in->hs_hdr_n = 0;
                }
            }
            return (long)(5 + rec);
        }
    } else if (buf[0] == EAI_TLS_CCS) {
        in->ccs = 1;
    }
    in->left = rec;
    in->st = rec ? T_CONTENT : T_RECORD;
    return 5;
}

/* Other ports: the first bytes say TLS, HTTP or neither. */
static long first_step(struct eai_inspect *in, const uint8_t *buf, size_t len)
{
    if (buf[0] == EAI_TLS_HANDSHAKE) {
        in->proto = EAI_INSPECT_TLS;
        in->st = T_FIRST;
        if (in->sst == S_UNDECIDED)
            in->sst = S_HELLO;
        return tls_step(in, buf, len);
    }
    int http = 0, decided = 0;
    if (buf[0] == '\r' || buf[0] == '\n' || buf[0] == ' ' || buf[0] == '\t') {
        http = 1; /* servers skip leading CR/LF (RFC 9112 2.2): the HTTP reader decides */
    } else if (eai_http_tchar(buf[0])) {
        /* a first line that names HTTP anywhere, or token SP "/" or "*": HTTP */
        size_t t = 0;
        while (t < len && t < 32 && eai_http_tchar(buf[t]))
            t++;
        if (t + 1 < len && buf[t] == ' ' && (buf[t + 1] == '/' || buf[t + 1] == '*'))
            http = 1;
        size_t k = in->scanned;
        for (; !http && k < len && k < EAI_INSPECT_MAX; k++) {
            unsigned char c = buf[k];
            if (c == '\n' || (c != '\r' && c != '\t' && (c < 0x20 || c >= 0x7f))) {
                decided = 1;
                break;
            }
            if (k >= 4 && strncasecmp((const char *)buf + k - 4, "HTTP/", 5) == 0)
                http = 1;
            if (k >= 2 && memcmp(buf + k - 2, "://", 3) == 0)
                http = 1;
        }
        in->scanned = k;
        if (!http && !decided && k < EAI_INSPECT_MAX)
            return 0; /* the first line is not over */
    }
    in->scanned = 0;
    if (in->sst == S_UNDECIDED)
        in->sst = S_OPAQUE;
    if (http) {
        in->proto = EAI_INSPECT_HTTP;
        in->st = H_HEAD;
        return http_step(in, buf, len);
    }
    in->proto = EAI_INSPECT_OPAQUE; /* another protocol: reaches only the name's addresses */
    return (long)len;
}

/* The server's first flight on TLS: its hello's version, then unread. */
static long server_step(struct eai_inspect *in, const uint8_t *buf, size_t len)
{
    uint8_t msg[EAI_TLS_HELLO_MAX + 4];
    size_t mlen, end;
    int rc = eai_tls_hs_collect(buf, len, 0x02, 0, msg, sizeof(msg), &mlen, &end);
    if (rc == -1)
        return 0;
    int v = rc == 1 ? eai_tls_server_version(msg, mlen) : -2;
    in->version = v > 0 ? v : -1; /* an alert or no TLS: none coming */
    in->sst = S_OPAQUE;
    return (long)len;
}

long eai_inspect_step(struct eai_inspect *in, enum eai_inspect_side side, const uint8_t *buf, size_t len)
{
    if (!in || !buf || len == 0)
        return 0;
    uint64_t pass = eai_inspect_passable(in, side);
    if (pass > 0) {
        size_t n = pass < len ? (size_t)pass : len;
        eai_inspect_skip(in, side, n);
        return (long)n;
    }
    if (side == EAI_INSPECT_SERVER)
        return server_step(in, buf, len);
    switch (in->proto) {
    case EAI_INSPECT_HTTP:
        return http_step(in, buf, len);
    case EAI_INSPECT_TLS:
        return tls_step(in, buf, len);
    case EAI_INSPECT_FIRST:
        return first_step(in, buf, len);
    default:
        return (long)len;
    }
}
