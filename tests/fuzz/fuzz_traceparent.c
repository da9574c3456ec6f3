/* W3C traceparent header -> eai_traceparent_parse (core/obs/trace.h).
 * Invariants: an accepted header has lowercase-hex, non-zero ids; for
 * version 00 formatting the parsed context gives the header back. */
#include "fuzz_util.h"
#include "obs/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *h = fz_cstr(data, size);
    if (!h)
        return 0;
    struct eai_trace_ctx c;
    memset(&c, 0, sizeof(c));
    if (eai_traceparent_parse(h, &c) == 0) {
        FZ_ASSERT(c.valid == 1);
        FZ_ASSERT(fz_lower_hex(c.trace_id, 32));
        FZ_ASSERT(fz_lower_hex(c.span_id, 16));
        FZ_ASSERT(strcmp(c.trace_id, "00000000000000000000000000000000") != 0);
        FZ_ASSERT(strcmp(c.span_id, "0000000000000000") != 0);
        FZ_ASSERT(c.flags <= 0xff);
        char out[56];
        eai_traceparent_format(c.trace_id, c.span_id, c.flags, out);
        if (strncmp(h, "00-", 3) == 0)
            FZ_ASSERT(strcmp(out, h) == 0);
        struct eai_trace_ctx c2;
        FZ_ASSERT(eai_traceparent_parse(out, &c2) == 0);
        FZ_ASSERT(strcmp(c2.trace_id, c.trace_id) == 0 && strcmp(c2.span_id, c.span_id) == 0 &&
                  c2.flags == c.flags);
    }
    free(h);
    return 0;
}
