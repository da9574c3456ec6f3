/*
 * Readers of the protocols the egress gateway checks (docs/egress.md): HTTP/1.x
 * request heads and TLS handshake messages.  Pure: no I/O, no allocation;
 * every function is total over its input (fuzzed by fuzz_egress).  The
 * stream inspector (egress_inspect.h) drives them over a connection.
 */
#ifndef EAI_NET_EGRESS_PROTO_H
#define EAI_NET_EGRESS_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "net/egress_policy.h"

/* Bytes one unit (a request head, a ClientHello with its record headers, a
 * record) may take: a TLS record of 2^14 + 2048 bytes and its header. */
#define EAI_PROTO_UNIT_MAX (16384 + 2048 + 5)
#define EAI_TLS_RECORD_MAX (16384 + 2048) /* a record's content, ciphertext included */
#define EAI_TLS_HELLO_MAX 16384           /* a ClientHello or ServerHello message body */
#define EAI_HTTP_LEAD_MAX 64              /* CR/LF before a request line */

enum { EAI_TLS_CCS = 20, EAI_TLS_ALERT = 21, EAI_TLS_HANDSHAKE = 22, EAI_TLS_APPDATA = 23 };

/* RFC 9110 tchar */
int eai_http_tchar(unsigned char c);

/* One HTTP/1.x request head at the start of buf, after any CR/LF. */
struct eai_http_head {
    size_t len;              /* bytes of the head, leading CR/LF and the final CRLF CRLF included */
    char host[EAI_EGRESS_NAME_MAX + 1];
    uint16_t port;           /* of Host, 0 when absent */
    int chunked;             /* Transfer-Encoding: chunked */
    uint64_t content_length; /* Content-Length, 0 when absent */
};

/* 1: a complete head in h; -1: need more bytes; -2: malformed or refused
 * (*why: "http_malformed" or "http2_refused").  scanned: NULL, or where an
 * earlier call on the same start stopped looking for the end (0 at first).  Strict where servers
 * differ: CRLF line ends, no obs-fold, exactly one Host, origin-form or "*"
 * target, no CONNECT, at most one Content-Length (digits) and one
 * Transfer-Encoding (exactly "chunked", not in HTTP/1.0), never both. */
int eai_http_head_parse(const char *buf, size_t len, size_t *scanned, struct eai_http_head *h, const char **why);

/* A TLS handshake message of type want whose first byte starts the record
 * at buf, over as many handshake records as it takes (EAI_PROTO_UNIT_MAX
 * bytes at most).  1: complete, copied to msg (its 4-byte header included,
 * *msglen), *end the bytes of the records read; -1 need more; -2 malformed.
 * exact: the message must end where its last record ends. */
int eai_tls_hs_collect(const uint8_t *buf, size_t len, unsigned want, int exact, uint8_t *msg, size_t msgcap,
                       size_t *msglen, size_t *end);

/* SNI of a whole ClientHello message (header included).  1 found (lower
 * case, into out), 0 none, -2 malformed. */
int eai_tls_hello_sni(const uint8_t *msg, size_t len, char *out, size_t outlen);

/* Version a whole ServerHello message (header included) selects:
 * supported_versions when present, else legacy_version; a
 * HelloRetryRequest is TLS 1.3.  The version, or -2 malformed. */
int eai_tls_server_version(const uint8_t *msg, size_t len);

/* The end of a section of CRLF-ended lines closed by an empty line (a head
 * from its request line, a trailer), scanning from *scanned (bytes before
 * were seen by an earlier call; 0 the first time) and from first.  The
 * offset after the closing CRLF; 0 need more (*scanned updated); -1 a bare
 * LF, a NUL or control byte, or longer than EAI_PROTO_UNIT_MAX. */
long eai_http_lines_end(const char *buf, size_t len, size_t first, size_t *scanned);

/* One field line [line, le), le at its CR: name ':' OWS value OWS.  Name
 * and trimmed value out; 0, or -1 (obs-fold, no colon, a control byte). */
int eai_http_field_line(const char *line, const char *le, const char **name, size_t *nlen, const char **val,
                        size_t *vlen);

/* Server name of a TLS ClientHello at the start of buf (over one or more
 * records).  1: found, copied lower case into out; 0: a complete ClientHello
 * without server_name; -1: need more bytes; -2: not a TLS ClientHello, or
 * malformed. */
int eai_tls_sni(const uint8_t *buf, size_t len, char *out, size_t outlen);

/* Host of a plain HTTP/1.x request head at the start of buf
 * (eai_http_head_parse).  1: found (name lower case into out, port into
 * *port, 0 when absent); -1: need more bytes; -2: refused. */
int eai_http_host(const char *buf, size_t len, char *out, size_t outlen, uint16_t *port);

#endif
