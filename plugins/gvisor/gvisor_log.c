/*
 * runsc's own log read as a stream of JSON values (gvisor_log.h,
 * docs/gvisor.md "runsc's own words").  Pure: no I/O, no globals, no
 * logging; the caller (gvisor_exec.c, on a worker) decides and logs.
 */
#include <stdint.h>
#include <string.h>

#include "gvisor_log.h"

/* The "msg" of v when v is {"level": "error", "msg": "<string>", ...}. */
static json_t *error_msg(json_t *v)
{
    const char *lvl = json_string_value(json_object_get(v, "level"));
    json_t *m = json_object_get(v, "msg");
    return lvl && strcmp(lvl, "error") == 0 && json_is_string(m) ? m : NULL;
}

/* Bytes jansson read from a value's start, within [1, room]: all of a
 * parsed value (JSON_DISABLE_EOF_CHECK), up to the error of a failed one. */
static size_t read_len(const json_error_t *e, size_t room)
{
    if (e->position <= 0)
        return 1;
    return (size_t)e->position < room ? (size_t)e->position : room;
}

json_t *gv_log_errors(const char *text, size_t len)
{
    json_t *msgs = json_array();
    size_t budget = GV_LOG_SCAN_BUDGET;
    const char *p = text, *end = text + len;

    while (msgs && p < end) {
        const char *o = memchr(p, '{', (size_t)(end - p));
        if (!o)
            break;

        json_error_t e;
        json_t *v = json_loadb(o, (size_t)(end - o), JSON_DISABLE_EOF_CHECK, &e);
        size_t used = read_len(&e, (size_t)(end - o));
        if (!v) {
            /* not a value from here (inside the object the tail began in,
             * or a truncated one): the next '{' may be one */
            if (used >= budget)
                break;
            budget -= used;
            p = o + 1;
            continue;
        }

        json_t *m = error_msg(v);
        if (m) {
            if (json_array_size(msgs) == GV_LOG_ERRORS_MAX)
                json_array_remove(msgs, 0);
            if (json_array_append(msgs, m) < 0) {
                json_decref(msgs);
                msgs = NULL;
            }
        }
        json_decref(v);
        p = o + used;
    }
    return msgs;
}

size_t gv_log_stderr_copies(const char *err, size_t len, const json_t *msgs)
{
    size_t n = json_array_size(msgs);
    size_t first = n > GV_LOG_ERRORS_MAX ? n - GV_LOG_ERRORS_MAX : 0;
    unsigned char used[GV_LOG_ERRORS_MAX] = {0};
    size_t end = len;

    for (;;) {
        size_t took = 0;
        for (size_t i = n; i-- > first && !took;) {
            const json_t *s = json_array_get(msgs, i);
            const char *m = json_string_value(s);
            size_t ml = json_string_length(s);
            if (used[i - first] || !m || ml + 1 > end || err[end - 1] != '\n' ||
                memcmp(err + end - 1 - ml, m, ml) != 0)
                continue;
            used[i - first] = 1;
            took = ml + 1;
        }
        if (!took)
            break;
        end -= took;
    }
    return len - end;
}
