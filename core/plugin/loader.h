/* The plugin loader: built-in descriptors and eai-<kind>-<name>.so files. */
#ifndef EAI_CORE_LOADER_H
#define EAI_CORE_LOADER_H

#include <eai/plugin.h>

const char *eai_kind_name(enum eai_plugin_kind kind);
/* EAI_PLUGIN_DIR, else <directory of the running executable>/plugins (build
 * tree), else <exe dir>/EAI_PLUGIN_RELDIR (installed: ../lib/eai/plugins). */
const char *eai_plugin_dir(void);
/* Make a built-in fallback loadable by name (same checks as a file). */
int eai_plugin_register_builtin(eai_plugin_descriptor_fn fn);
/* Built-in first, then <plugin_dir>/eai-<kind>-<name>.so.  Checks ABI
 * major/minor, struct and ops sizes (from the frozen 1.0 size to today's),
 * the build fingerprint, kind and name; the error names the file and both
 * versions.  Returns the host-side copy of the descriptor, whose ops table
 * has today's size with NULL past the plugin's end (same pointer for every
 * load of one plugin).  Loaded files are never unloaded. */
const struct eai_plugin_descriptor *eai_plugin_load(const char *plugin_dir, enum eai_plugin_kind kind,
                                                    const char *name, struct eai_error **err);
/* 0 when NAME of KIND is unknown: no built-in and no file at all (any
 * other problem is eai_plugin_load's to report). */
int eai_plugin_exists(const char *plugin_dir, enum eai_plugin_kind kind, const char *name);
/* Validate a descriptor (used for built-ins and files); what: for messages. */
int eai_plugin_check(const struct eai_plugin_descriptor *d, enum eai_plugin_kind kind,
                     const char *name, const char *what, struct eai_error **err);

/* The ops table size the plugin itself declared (the normalised copy says
 * today's size). */
size_t eai_plugin_ops_size(const struct eai_plugin_descriptor *d);
/* This eaid's own build fingerprint. */
const struct eai_build_fingerprint *eai_host_fingerprint(void);

#endif
