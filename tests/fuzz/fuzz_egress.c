/* Egress policy readers (core/net/egress_policy.h): the first byte picks
 * the reader, the rest is its input: allow-list entry, TLS ClientHello,
 * HTTP request head.  Invariants: a name that comes out is lower-case LDH
 * without a trailing dot, and matches itself as a NAME entry; a prefix of a
 * ClientHello record the reader accepted only ever gets "need more" or a
 * refusal;
 * an accepted entry's CIDR has no host bits set. */
#include "fuzz_util.h"
#include "net/egress_proto.h"

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
