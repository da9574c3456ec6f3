/*
 * Built-in storage backend on an embedded SQLite file (WAL mode).
 *
 * A descriptor like any plugin's (kind EAI_KIND_STORAGE, name "sqlite"),
 * kept in core so the loader treats it like a loaded plugin.  Config keys:
 *   path            string, required: database file (core passes <data_dir>/eai.db)
 *   busy_timeout_ms int, default 5000: how long a statement waits for a lock
 *   pool_size       int, default 8: connections kept open (one per thread in use)
 * See docs/storage.md for the schema and transaction rules.
 */
#ifndef EAI_STORE_SQLITE_H
#define EAI_STORE_SQLITE_H

#include <eai/storage.h>

const struct eai_plugin_descriptor *eai_builtin_storage_sqlite(void);

#endif
