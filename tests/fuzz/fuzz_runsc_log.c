/* runsc's --log tail -> gv_log_errors, gv_log_stderr_copies
 * (plugins/gvisor/gvisor_log.c, compiled in; issue 37).  The input is split
 * at its first 0x1e byte, if any: runsc's log, then the stderr tail.
 * Invariants: the errors are at most GV_LOG_ERRORS_MAX strings; the answer
 * is the same every time; an error object appended to a short log (with or
 * without a newline) is always its last error, whatever precedes it; the
 * copies stripped are at most the stderr's length, end in a newline, and
 * a copy of the last error appended to stderr is always stripped. */
#include <jansson.h>

#include "fuzz_util.h"
#include "gvisor_log.h"

#define FZ_END_MSG "fz-end: running container: creating container"
#define FZ_END_OBJ "{\"msg\":\"" FZ_END_MSG "\",\"level\":\"error\",\"time\":\"t\"}"

static int same(const json_t *a, const json_t *b)
{
    return a && b && json_equal((json_t *)a, (json_t *)b);
}

static void check_errors(const json_t *e)
{
    FZ_ASSERT(e != NULL);
    FZ_ASSERT(json_is_array(e));
    FZ_ASSERT(json_array_size(e) <= GV_LOG_ERRORS_MAX);
    for (size_t i = 0; i < json_array_size(e); i++)
        FZ_ASSERT(json_is_string(json_array_get(e, i)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *log = (const char *)data;
    const uint8_t *cut = memchr(data, 0x1e, size);
    size_t loglen = cut ? (size_t)(cut - data) : size;
    const char *err = cut ? (const char *)cut + 1 : "";
    size_t errlen = cut ? size - loglen - 1 : 0;

    json_t *e = gv_log_errors(log, loglen);
    check_errors(e);
    json_t *again = gv_log_errors(log, loglen);
    FZ_ASSERT(same(e, again));
    json_decref(again);

    /* whatever a short log holds, an error object after it is read */
    if (loglen <= 256) {
        for (int nl = 0; nl < 2; nl++) {
            size_t n = loglen + nl + sizeof(FZ_END_OBJ) - 1;
            char *t = malloc(n);
            if (!t)
                break;
            memcpy(t, log, loglen);
            if (nl)
                t[loglen] = '\n';
            memcpy(t + loglen + nl, FZ_END_OBJ, sizeof(FZ_END_OBJ) - 1);
            json_t *e2 = gv_log_errors(t, n);
            check_errors(e2);
            size_t k = json_array_size(e2);
            FZ_ASSERT(k >= 1);
            FZ_ASSERT(strcmp(json_string_value(json_array_get(e2, k - 1)), FZ_END_MSG) == 0);
            json_decref(e2);
            free(t);
        }
    }

    size_t c = gv_log_stderr_copies(err, errlen, e);
    FZ_ASSERT(c <= errlen);
    FZ_ASSERT(c == 0 || err[errlen - 1] == '\n');
    FZ_ASSERT(c == gv_log_stderr_copies(err, errlen, e));

    /* runsc's copy of its last error, appended to stderr, is stripped */
    size_t k = json_array_size(e);
    if (k > 0) {
        const json_t *last = json_array_get(e, k - 1);
        size_t ml = json_string_length(last);
        char *t = malloc(errlen + ml + 1);
        if (t) {
            memcpy(t, err, errlen);
            memcpy(t + errlen, json_string_value(last), ml);
            t[errlen + ml] = '\n';
            size_t c2 = gv_log_stderr_copies(t, errlen + ml + 1, e);
            FZ_ASSERT(c2 >= ml + 1);
            FZ_ASSERT(c2 <= errlen + ml + 1);
            free(t);
        }
    }
    json_decref(e);
    return 0;
}
