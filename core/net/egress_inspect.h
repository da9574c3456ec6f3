/*
 * Egress inspection: what the gateway reads of a connection, in both
 * directions, for as long as the connection lives (docs/egress.md, "How the
 * gateway reads a connection").
 *
 * Pure: no I/O, no allocation, no loop; the gateway (core/net/egress.c)
 * holds the bytes and asks.  Every function is total over its input (fuzzed
 * by fuzz_egress).
 *
 * The protocol follows the port of the allow-list entry:
 *   80     HTTP/1.x: every request head is read (leading CR/LF skipped) and
 *          its one Host must be the allowed name; bodies are framed by
 *          Content-Length or chunked and pass unread; anything ambiguous,
 *          HTTP/2 prior knowledge, absolute-form and CONNECT are refused.
 *   443    TLS: the first bytes must be a ClientHello (over one or more
 *          records) whose SNI is the allowed name; records are framed for
 *          the life of the connection, and every plaintext handshake record
 *          is read, so a later ClientHello (after a HelloRetryRequest) is
 *          checked too.  The server's hello is read for the version, which
 *          tells plaintext from encrypted handshake records.
 *   other  the first bytes pick: a TLS record -> as 443; a first line
 *          naming HTTP -> as 80; anything else passes unread.
 * An address entry (no name) passes unread.
 */
#ifndef EAI_NET_EGRESS_INSPECT_H
#define EAI_NET_EGRESS_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "net/egress_proto.h"

/* Bytes one unit may take before it is refused: a request head (leading
 * CR/LF included), a ClientHello with its record headers, one plaintext
 * handshake record, the server's hello. */
#define EAI_INSPECT_MAX EAI_PROTO_UNIT_MAX

/* Passable for the rest of the connection (eai_inspect_passable). */
#define EAI_INSPECT_ALL UINT64_MAX

enum eai_inspect_proto {
    EAI_INSPECT_HTTP = 0, /* port 80 */
    EAI_INSPECT_TLS,      /* port 443 */
    EAI_INSPECT_FIRST,    /* other ports: the first bytes decide */
    EAI_INSPECT_OPAQUE,   /* passes unread (an address entry, or the first bytes said so) */
    EAI_INSPECT_PROTO_MAX
};

enum eai_inspect_side { EAI_INSPECT_CLIENT = 0, EAI_INSPECT_SERVER, EAI_INSPECT_SIDE_MAX };

struct eai_inspect {
    enum eai_inspect_proto proto;
    char name[EAI_EGRESS_NAME_MAX + 1]; /* the allowed name */
    uint16_t port;
    /* client -> server */
    int st;               /* state within proto */
    uint64_t left;        /* bytes that pass unread: a body, a chunk, a record's content */
    size_t scanned;       /* bytes of the pending head already scanned for its end */
    unsigned units;       /* request heads and ClientHellos checked and passed */
    int ccs;              /* the client sent ChangeCipherSpec */
    uint32_t hs_skip;     /* plaintext handshake: bytes of the current message left */
    uint8_t hs_hdr[4];    /* plaintext handshake: a message header split over records */
    int hs_hdr_n;
    /* server -> client */
    int sst;
    int version;          /* the server's TLS version: 0 not seen yet, -1 none coming */
    /* a refusal */
    const char *reason;   /* host_mismatch, sni_mismatch, sni_missing, http_malformed,
                             http2_refused, tls_malformed */
    char seen[EAI_EGRESS_NAME_MAX + 1]; /* the name the refused unit carried, "" if none */
};

/* The protocol of a name entry's port: 80 HTTP, 443 TLS, others FIRST. */
enum eai_inspect_proto eai_inspect_proto_for_port(uint16_t port);

/* name: the allowed name (lower case), or "" / NULL for an address entry,
 * which makes the connection OPAQUE whatever proto says. */
void eai_inspect_init(struct eai_inspect *in, enum eai_inspect_proto proto, const char *name, uint16_t port);

/* Read buf[0..len), the next bytes of one side not passed yet (the caller
 * keeps them until told; it calls again with the same start and more bytes,
 * or after passing what it was told, with the bytes after).
 *   >0  that many bytes at the front may pass to the other side;
 *    0  more bytes are needed (never once len >= EAI_INSPECT_MAX: then a
 *       refusal); the caller bounds the wait in time;
 *   -1  refused: in->reason, in->seen. */
long eai_inspect_step(struct eai_inspect *in, enum eai_inspect_side side, const uint8_t *buf, size_t len);

/* How many of the side's next bytes pass unread, without a step (so the
 * caller may move them without looking: splice(2)); EAI_INSPECT_ALL for the
 * rest of the connection, 0 when the next bytes must be read. */
uint64_t eai_inspect_passable(const struct eai_inspect *in, enum eai_inspect_side side);

/* n (<= passable) of those bytes passed. */
void eai_inspect_skip(struct eai_inspect *in, enum eai_inspect_side side, uint64_t n);

#endif
