/* Plugins' translated messages (plugin/messages.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "plugin/messages.h"

static struct {
    char *en;          /* the English format as a template, malloc'd */
    const char *fr;    /* the plugin's (never unloaded) */
} eai_pmsg[EAI_PLUGIN_MESSAGES_MAX];
static atomic_size_t eai_npmsg;
static pthread_mutex_t eai_pmsg_mu = PTHREAD_MUTEX_INITIALIZER;

int eai_plugin_message_template(const char *fmt, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = fmt; *p; p++) {
        const char *put = NULL;
        char one[2] = {*p, 0};
        if (p[0] == '%' && p[1] == '%') {
            put = "%";
            p++;
        } else if (p[0] == '%') {
            p++; /* flags, width, precision, length, then the conversion */
            while (*p && strchr("-+ #0123456789.*'hlLqjzt", *p))
                p++;
            if (!*p || !strchr("diouxXeEfFgGaAcspn", *p))
                return -1;
            put = "{}";
        } else {
            put = one;
        }
        size_t n = strlen(put);
        if (o + n + 1 > len)
            return -1;
        memcpy(out + o, put, n);
        o += n;
    }
    out[o] = '\0';
    return 0;
}

/* The number of "{}" holes of a template. */
static int en_holes(const char *t)
{
    int n = 0;
    for (; (t = strstr(t, "{}")) != NULL; t += 2)
        n++;
    return n;
}

/* The French holes {n} / {Tn}: each names an English one; 0 or -1. */
static int fr_holes_ok(const char *fr, int holes)
{
    for (const char *f = fr; (f = strchr(f, '{')) != NULL; f++) {
        int k = f[1] == 'T' ? f[2] : f[1];
        int close = f[1] == 'T' ? f[3] : f[2];
        if (k >= '1' && k <= '9' && close == '}' && k - '0' > holes)
            return -1;
    }
    return 0;
}

static int id_ok(const char *id)
{
    if (!id || !*id || strlen(id) > 64)
        return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
            return 0;
    return 1;
}

int eai_plugin_messages_check(const struct eai_message *table, const char *what, struct eai_error **err)
{
    size_t i = 0;
    for (; table && table[i].id; i++) {
        const struct eai_message *m = &table[i];
        char en[EAI_PLUGIN_MESSAGE_BYTES + 64];
        if (i >= EAI_PLUGIN_MESSAGES_MAX)
            return eai_error_set(err, EAI_E_INTERNAL, "plugin %s: more than %d messages in its table", what,
                                 EAI_PLUGIN_MESSAGES_MAX);
        if (!id_ok(m->id))
            return eai_error_set(err, EAI_E_INTERNAL,
                                 "plugin %s: message %zu: id '%.64s' is not 1 to 64 of [a-z0-9_.]", what, i, m->id);
        for (size_t j = 0; j < i; j++)
            if (strcmp(table[j].id, m->id) == 0)
                return eai_error_set(err, EAI_E_INTERNAL, "plugin %s: message id '%s' is in its table twice",
                                     what, m->id);
        if (!m->en || !*m->en || strlen(m->en) > EAI_PLUGIN_MESSAGE_BYTES ||
            eai_plugin_message_template(m->en, en, sizeof en) < 0)
            return eai_error_set(err, EAI_E_INTERNAL,
                                 "plugin %s: message '%s': the English must be a printf format of 1 to %d bytes",
                                 what, m->id, EAI_PLUGIN_MESSAGE_BYTES);
        if (!m->fr || !*m->fr)
            return eai_error_set(err, EAI_E_INTERNAL,
                                 "plugin %s: message '%s' has no French (every message of a plugin's table has "
                                 "both; docs/plugins.md, \"Messages\")", what, m->id);
        if (strlen(m->fr) > EAI_PLUGIN_MESSAGE_BYTES || fr_holes_ok(m->fr, en_holes(en)) < 0)
            return eai_error_set(err, EAI_E_INTERNAL,
                                 "plugin %s: message '%s': the French is over %d bytes or names a hole {n} the "
                                 "English does not have", what, m->id, EAI_PLUGIN_MESSAGE_BYTES);
    }
    return 0;
}

int eai_plugin_messages_add(const struct eai_message *table)
{
    int rc = 0;
    pthread_mutex_lock(&eai_pmsg_mu);
    size_t n = atomic_load(&eai_npmsg);
    for (size_t i = 0; table && table[i].id; i++) {
        char en[EAI_PLUGIN_MESSAGE_BYTES + 64];
        if (n >= EAI_PLUGIN_MESSAGES_MAX || eai_plugin_message_template(table[i].en, en, sizeof en) < 0 ||
            !(eai_pmsg[n].en = strdup(en))) {
            rc = -1;
            break;
        }
        eai_pmsg[n].fr = table[i].fr;
        atomic_store(&eai_npmsg, ++n); /* published whole */
    }
    pthread_mutex_unlock(&eai_pmsg_mu);
    return rc;
}

size_t eai_plugin_messages_count(void)
{
    return atomic_load(&eai_npmsg);
}

void eai_plugin_message_at(size_t i, const char **en_template, const char **fr)
{
    *en_template = i < atomic_load(&eai_npmsg) ? eai_pmsg[i].en : NULL;
    *fr = i < atomic_load(&eai_npmsg) ? eai_pmsg[i].fr : NULL;
}
