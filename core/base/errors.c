#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"

/* eai_code_table and eai_errors_markdown are generated at build time from
 * include/eai/errcodes.txt by tools/gen_errcodes.py (build/generated/). */

const struct eai_code_info *eai_code_info(enum eai_code code)
{
    if ((int)code < 0 || code >= EAI_CODE_MAX || eai_code_table[code].name == NULL)
        return &eai_code_table[EAI_E_INTERNAL];
    return &eai_code_table[code];
}

const char *eai_code_name(enum eai_code code) { return eai_code_info(code)->name; }
int eai_code_http_status(enum eai_code code) { return eai_code_info(code)->http_status; }

enum eai_code eai_code_from_name(const char *name)
{
    for (int i = 0; i < EAI_CODE_MAX; i++)
        if (eai_code_table[i].name && name && strcmp(eai_code_table[i].name, name) == 0)
            return (enum eai_code)i;
    return EAI_CODE_MAX;
}

const char *eai_code_message(enum eai_code code, const char *lang)
{
    const struct eai_code_info *ci = eai_code_info(code);
    return (lang && strcmp(lang, "fr") == 0) ? ci->fr : ci->en;
}

struct eai_error *eai_error_newv(enum eai_code code, int errno_cause, const char *fmt, va_list ap)
{
    struct eai_error *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->code = code;
    e->errno_cause = errno_cause;
    if (fmt && vasprintf(&e->message, fmt, ap) < 0)
        e->message = NULL;
    return e;
}

struct eai_error *eai_error_new(enum eai_code code, int errno_cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    struct eai_error *e = eai_error_newv(code, errno_cause, fmt, ap);
    va_end(ap);
    return e;
}

static int error_setv(struct eai_error **err, enum eai_code code, int errno_cause, const char *fmt, va_list ap)
{
    if (err && !*err)
        *err = eai_error_newv(code, errno_cause, fmt, ap);
    return -1;
}

int eai_error_set(struct eai_error **err, enum eai_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_setv(err, code, 0, fmt, ap);
    va_end(ap);
    return -1;
}

int eai_error_set_sys(struct eai_error **err, enum eai_code code, int errno_cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_setv(err, code, errno_cause, fmt, ap);
    va_end(ap);
    return -1;
}

void eai_error_free(struct eai_error *e)
{
    if (!e)
        return;
    free(e->message);
    json_decref(e->details);
    free(e);
}

void eai_error_prefix(struct eai_error *e, const char *fmt, ...)
{
    if (!e)
        return;
    char *pre = NULL, *joined = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&pre, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (asprintf(&joined, "%s: %s", pre, e->message ? e->message : eai_code_name(e->code)) >= 0) {
        free(e->message);
        e->message = joined;
    }
    free(pre);
}

void eai_error_propagate(struct eai_error **dst, struct eai_error *src)
{
    if (dst)
        *dst = src;
    else
        eai_error_free(src);
}
