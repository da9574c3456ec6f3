/*
 * Plugins' translated messages (ABI 1.4, eai_plugin_descriptor.messages):
 * checked when a plugin loads, then kept for the process' life as
 * templates details[].message is put in French by (http/details_i18n.c).
 * Core's own messages are in details_i18n.c; no plugin's text is there.
 */
#ifndef EAI_PLUGIN_MESSAGES_H
#define EAI_PLUGIN_MESSAGES_H

#include <stddef.h>

#include <eai/plugin.h>

#define EAI_PLUGIN_MESSAGES_MAX 1024 /* all plugins' messages together */
#define EAI_PLUGIN_MESSAGE_BYTES 512 /* an English or French text */

/* A plugin's table, before it is used: every entry has an id
 * "[a-z0-9_.]+" unique in the table, an English format and a non-empty
 * French whose holes {1}..{n} name the English conversions; at most
 * EAI_PLUGIN_MESSAGES_MAX entries.  0, or -1 + *err naming the entry. */
int eai_plugin_messages_check(const struct eai_message *table, const char *what, struct eai_error **err);
/* Keep a checked table (the plugin is never unloaded).  -1 when all
 * tables together would pass EAI_PLUGIN_MESSAGES_MAX. */
int eai_plugin_messages_add(const struct eai_message *table);
/* The English printf format as a details template: each conversion
 * (%s, %lld, %.200s...) becomes "{}", "%%" becomes "%".  0 or -1 (too long). */
int eai_plugin_message_template(const char *fmt, char *out, size_t len);
/* The templates kept so far: count, then each one's English template
 * and French (any thread; entries never change once counted). */
size_t eai_plugin_messages_count(void);
void eai_plugin_message_at(size_t i, const char **en_template, const char **fr);

#endif
