/* The table of error codes (code name, HTTP status, retryable, English and
 * French text), generated from include/eai/errcodes.txt, and the struct
 * eai_error helpers. */
#ifndef EAI_CORE_ERRORS_H
#define EAI_CORE_ERRORS_H

#include <stdarg.h>
#include <eai/plugin.h>

struct eai_code_info {
    enum eai_code code;
    const char *name;          /* stable wire code, e.g. "not_found" */
    int http_status;
    int retryable;
    const char *en;
    const char *fr;
};

/* Generated at build time by tools/gen_errcodes.py (build/generated/). */
extern const struct eai_code_info eai_code_table[EAI_CODE_MAX];
/* docs/errors.md as generated (what `eaid errors --markdown` prints). */
extern const char eai_errors_markdown[];

const struct eai_code_info *eai_code_info(enum eai_code code);
const char *eai_code_name(enum eai_code code);
int eai_code_http_status(enum eai_code code);
/* Code from its wire name; EAI_CODE_MAX when unknown. */
enum eai_code eai_code_from_name(const char *name);
/* Message in "en" or "fr" (anything else: en). */
const char *eai_code_message(enum eai_code code, const char *lang);

struct eai_error *eai_error_new(enum eai_code code, int errno_cause, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct eai_error *eai_error_newv(enum eai_code code, int errno_cause, const char *fmt, va_list ap);
void eai_error_free(struct eai_error *e);
/* An error return in one statement, as crun's crun_make_error:
 *     return eai_error_set(err, EAI_E_INTERNAL, "plugin %s: %s", path, why);
 * fills *err with a new error (errno_cause 0) and returns -1.  Does nothing
 * but return -1 when err is NULL or *err is already set (the first error,
 * the root cause, is kept; nothing leaks).  Plugins use
 * eai_host_error_set() from <eai/plugin.h>. */
int eai_error_set(struct eai_error **err, enum eai_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with the errno that caused it (kept in e->errno_cause). */
int eai_error_set_sys(struct eai_error **err, enum eai_code code, int errno_cause, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prepend context: "loading plugin 'x': <old message>". */
void eai_error_prefix(struct eai_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Move *src into *dst when dst is not NULL, else free it. */
void eai_error_propagate(struct eai_error **dst, struct eai_error *src);

#endif
