#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>

#include "base/log.h"
#include "base/util.h"

static enum eai_log_level eai_log_min = EAI_LOG_INFO;
static const char *const eai_level_names[EAI_LOG_MAX] = {"debug", "info", "warn", "error"};

void eai_log_set_level(enum eai_log_level lvl) { eai_log_min = lvl; }

int eai_log_level_parse(const char *s)
{
    for (int i = 0; s && i < EAI_LOG_MAX; i++)
        if (strcmp(s, eai_level_names[i]) == 0)
            return i;
    return -1;
}

int eai_log_enabled(enum eai_log_level lvl) { return lvl >= eai_log_min; }

void eai_logv(const char *component, enum eai_log_level lvl, const char *request_id,
              const char *fmt, va_list ap)
{
    if (lvl < eai_log_min || lvl >= EAI_LOG_MAX)
        return;
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        return;
    char ts[32];
    eai_time_rfc3339(eai_now_ms(), ts);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "ts", ts, "level", eai_level_names[lvl],
                          "component", component ? component : "core", "msg", msg);
    if (o && request_id)
        json_object_set_new(o, "request_id", json_string(request_id));
    char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    if (line) {
        fprintf(stderr, "%s\n", line);
        free(line);
    } else {
        fprintf(stderr, "%s %s %s\n", eai_level_names[lvl], component ? component : "core", msg);
    }
    json_decref(o);
    free(msg);
}

void eai_log(const char *component, enum eai_log_level lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    eai_logv(component, lvl, NULL, fmt, ap);
    va_end(ap);
}

void eai_log_req(const char *component, enum eai_log_level lvl, const char *request_id,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    eai_logv(component, lvl, request_id, fmt, ap);
    va_end(ap);
}
