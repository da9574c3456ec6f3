/* Egress policy readers (core/net/egress_policy.h, egress_proto.h) and the
 * stream inspector (egress_inspect.h): the first byte picks, the rest is
 * the input.  First byte < 0x80: byte % 3 picks allow-list entry, TLS
 * ClientHello, HTTP request head.  Invariants: a name that comes out is
 * lower-case LDH without a trailing dot, and matches itself as a NAME entry;
 * a prefix of a ClientHello record the reader accepted only ever gets "need
 * more" or a refusal; an accepted entry's CIDR has no host bits set.
 * First byte >= 0x80: the inspector, protocol (byte & 3), fed the rest as a
 * client stream cut into segments of 1 + next byte % 64 bytes, then again
 * whole; invariants: a step never passes more than it was given, never waits
 * on EAI_INSPECT_MAX bytes, a refusal has a reason, and the outcome (bytes
 * passed, refused or not, why) does not depend on the cut; the rest also
 * goes through the server side. */
#include "fuzz_util.h"
#include "net/egress_inspect.h"

/* Feed data[0..n) as it arrives in segments of seg bytes (0: whole), as the
 * gateway does; the bytes passed, *refused the reason or NULL. */
static size_t feed(enum eai_inspect_proto proto, const uint8_t *data, size_t n, size_t seg, const char **refused)
{
    struct eai_inspect in;
    eai_inspect_init(&in, proto, "allowed.test", proto == EAI_INSPECT_TLS ? 443 : 80);
    size_t start = 0, avail = 0;
    *refused = NULL;
    while (avail < n) {
        avail = seg && n - avail > seg ? avail + seg : n;
        for (;;) {
            size_t len = avail - start;
            if (len == 0)
                break;
            size_t look = len < EAI_INSPECT_MAX ? len : EAI_INSPECT_MAX;
            long r = eai_inspect_step(&in, EAI_INSPECT_CLIENT, data + start, look);
            FZ_ASSERT(r >= -1 && r <= (long)look);
            if (r < 0) {
                FZ_ASSERT(in.reason != NULL);
                *refused = in.reason;
                return start;
            }
            if (r == 0) {
                FZ_ASSERT(look < EAI_INSPECT_MAX);
                break;
            }
            start += (size_t)r;
        }
    }
    return start;
}

static int ldh(const char *s)
{
    if (!*s || s[strlen(s) - 1] == '.')
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] >= 0x80) {
        enum eai_inspect_proto proto = (enum eai_inspect_proto)(data[0] & 3);
        size_t seg = size > 1 ? 1 + data[1] % 64 : 1;
        const uint8_t *p = data + (size > 1 ? 2 : 1);
        size_t n = size - (size > 1 ? 2 : 1);
        const char *why_cut, *why_whole;
        size_t cut = feed(proto, p, n, seg, &why_cut);
        size_t whole = feed(proto, p, n, 0, &why_whole);
        FZ_ASSERT(cut == whole);
        FZ_ASSERT((why_cut == NULL) == (why_whole == NULL));
        FZ_ASSERT(!why_cut || strcmp(why_cut, why_whole) == 0);
        struct eai_inspect in;
        eai_inspect_init(&in, EAI_INSPECT_TLS, "allowed.test", 443);
        long r = eai_inspect_step(&in, EAI_INSPECT_SERVER, p, n < EAI_INSPECT_MAX ? n : EAI_INSPECT_MAX);
        FZ_ASSERT(r >= 0 && (size_t)r <= n);
        return 0;
    }
    uint8_t which = data[0] % 3;
    data++;
    size--;
    char name[256];
    if (which == 0) {
        char *s = fz_cstr(data, size);
        if (!s)
            return 0;
        struct eai_egress_rule r;
        if (eai_egress_rule_parse(s, &r) == 0) {
            FZ_ASSERT(r.port >= 1);
            if (r.kind == EAI_EGRESS_NAME || r.kind == EAI_EGRESS_SUFFIX) {
                FZ_ASSERT(ldh(r.name));
                FZ_ASSERT(eai_egress_name_match(&r, 1, r.kind == EAI_EGRESS_NAME ? r.name : "x.y.z", r.port) <=
                          0);
            } else {
                FZ_ASSERT(r.ip.family == 4 || r.ip.family == 6);
                FZ_ASSERT(eai_egress_addr_match(&r, 1, &r.ip, r.port) == 0);
                eai_addr_classify(&r.ip);
            }
        }
        free(s);
    } else if (which == 1) {
        int rc = eai_tls_sni(data, size, name, sizeof(name));
        FZ_ASSERT(rc >= -2 && rc <= 1);
        if (rc == 1) {
            FZ_ASSERT(ldh(name));
            size_t whole = 5 + ((size_t)data[3] << 8 | data[4]); /* the first record */
            for (size_t k = 0; k < whole; k += 1 + whole / 64) {
                int p = eai_tls_sni(data, k, name, sizeof(name));
                FZ_ASSERT(p == -1 || p == -2);
            }
        }
    } else {
        uint16_t port = 0;
        int rc = eai_http_host((const char *)data, size, name, sizeof(name), &port);
        FZ_ASSERT(rc == 1 || rc == -1 || rc == -2);
        if (rc == 1 && !strchr(name, ':'))
            FZ_ASSERT(ldh(name));
    }
    return 0;
}
