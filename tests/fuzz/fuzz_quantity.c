/* Client quantities and encodings (core/base/util.h): eai_parse_cpu_millis,
 * eai_parse_bytes, eai_time_parse_rfc3339, eai_b64_decode, eai_utf8_valid.
 * Invariants: accepted quantities are >= 0 and their canonical text parses
 * back to the same value; RFC 3339 times format and parse back; base64
 * decode(encode(decode(x))) == decode(x) and decode(encode(raw)) == raw;
 * eai_utf8_valid agrees with a small reference decoder. */
#include "fuzz_util.h"
#include "base/util.h"

/* Reference: strict UTF-8 (no overlong, no surrogate, <= U+10FFFF), no NUL. */
static int ref_utf8(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c == 0)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xbf;   /* range of the second byte */
        if (c >= 0xc2 && c <= 0xdf)
            len = 2;
        else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0)
                lo = 0xa0;
            if (c == 0xed)
                hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0)
                lo = 0x90;
            if (c == 0xf4)
                hi = 0x8f;
        } else
            return 0;
        if (i + len > n)
            return 0;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return 0;
        for (size_t k = 2; k < len; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xbf)
                return 0;
        i += len;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FZ_ASSERT(eai_utf8_valid((const char *)data, size) == ref_utf8(data, size));

    char *s = fz_cstr(data, size);
    if (!s)
        return 0;
    int64_t v, v2;
    char buf[64];

    if (eai_parse_cpu_millis(s, &v) == 0) {
        FZ_ASSERT(v >= 0);
        eai_format_cpu(v, buf, sizeof(buf));
        FZ_ASSERT(eai_parse_cpu_millis(buf, &v2) == 0);
        FZ_ASSERT(v2 == v);
    }
    if (eai_parse_bytes(s, &v) == 0) {
        FZ_ASSERT(v >= 0);
        eai_format_bytes(v, buf, sizeof(buf));
        FZ_ASSERT(eai_parse_bytes(buf, &v2) == 0);
        FZ_ASSERT(v2 == v);
    }
    if (eai_time_parse_rfc3339(s, &v) == 0) {
        /* years 0000..9999 print as four digits and must parse back */
        if (v >= -62167219200000LL && v < 253402300800000LL) {
            char t[32];
            eai_time_rfc3339(v, t);
            FZ_ASSERT(eai_time_parse_rfc3339(t, &v2) == 0);
            FZ_ASSERT(v2 == v);
        }
    }

    size_t n = 0;
    unsigned char *d = eai_b64_decode(s, &n);
    if (d) {
        FZ_ASSERT(n <= strlen(s) / 4 * 3);
        char *e = eai_b64_encode(d, n);
        FZ_ASSERT(e != NULL);
        FZ_ASSERT(strlen(e) == strlen(s));
        size_t n2 = 0;
        unsigned char *d2 = eai_b64_decode(e, &n2);
        FZ_ASSERT(d2 != NULL && n2 == n && memcmp(d, d2, n) == 0);
        free(d2);
        free(e);
        free(d);
    }
    char *e = eai_b64_encode(data, size);
    FZ_ASSERT(e != NULL);
    d = eai_b64_decode(e, &n);
    FZ_ASSERT(d != NULL && n == size && memcmp(d, data, size) == 0);
    free(d);
    free(e);
    free(s);
    return 0;
}
