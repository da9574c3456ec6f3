/* Load, configure and create one plugin instance of a kind chosen by name
 * from the config (storage, audit, FinOps, telemetry, isolation alike). */
#ifndef EAI_CORE_PLUGIN_OPEN_H
#define EAI_CORE_PLUGIN_OPEN_H

#include <jansson.h>
#include <eai/plugin.h>

struct eai_plugin_inst;

/* Load `name` of `kind` from plugin_dir (built-ins first), check conf
 * against its config keys, create it through its own host handle.  Every
 * failure names the config file, path and key that chose the plugin
 * ("config <file>: /audit: key 'backend': ..."): an unknown name, a bad
 * key in conf, a failed create().  conf is borrowed. */
int eai_plugin_open(const char *plugin_dir, const struct eai_host *host, enum eai_plugin_kind kind,
                    const char *name, const json_t *conf, const char *file, const char *path,
                    const char *key, struct eai_plugin_inst *out, struct eai_error **err);
/* The first half of eai_plugin_open: load and check conf, create nothing
 * (`eaid config check`).  The descriptor, or NULL + *err as above. */
const struct eai_plugin_descriptor *eai_plugin_check_conf(const char *plugin_dir, enum eai_plugin_kind kind,
                                                           const char *name, const json_t *conf,
                                                           const char *file, const char *path,
                                                           const char *key, struct eai_error **err);
/* destroy() and free the handle; resets out.  Safe on an empty inst. */
void eai_plugin_close(struct eai_plugin_inst *inst);

#endif
