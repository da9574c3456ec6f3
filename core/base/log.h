/* One logger: JSON lines on stderr with level, component and the request
 * and trace ids of the current request when set. */
#ifndef EAI_CORE_LOG_H
#define EAI_CORE_LOG_H

#include <stdarg.h>
#include <eai/plugin.h>

void eai_log_set_level(enum eai_log_level lvl);
/* "debug", "info", "warn", "error"; -1 when unknown. */
int eai_log_level_parse(const char *s);
int eai_log_enabled(enum eai_log_level lvl);
void eai_log(const char *component, enum eai_log_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void eai_logv(const char *component, enum eai_log_level lvl, const char *request_id,
              const char *fmt, va_list ap);
/* With a request id (may be NULL). */
void eai_log_req(const char *component, enum eai_log_level lvl, const char *request_id,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
