/* The daemon: start and stop of everything in order (core/daemon.c), and
 * what the CLI shares with it (data dir, storage).  The top of the include
 * graph: nothing in core includes it but main.c and cli.c. */
#ifndef EAI_CORE_DAEMON_H
#define EAI_CORE_DAEMON_H

#include <stdio.h>

#include "app.h"

struct eai_host;

/* `eaid serve`: load config_file (may be NULL), start everything, run the
 * loop until SIGTERM/SIGINT, stop gracefully.  Returns the exit code. */
int eai_app_serve(const char *config_file);

/* Start on an existing loop (tests): config, data dir, pepper, workers,
 * host, storage, schemas, isolation, profiles, executions, delivery,
 * server.  On failure everything started is stopped again. */
int eai_app_start(struct eai_app *app, struct event_base *base, struct eai_config *cfg,
                  struct eai_error **err);
/* Graceful stop: stop accepting, executions, drain requests (bounded),
 * server, delivery, plugins, workers, storage. Frees app's members. */
void eai_app_stop(struct eai_app *app);

/* Load and create the storage backend of cfg (built-in sqlite on
 * <data_dir>/eai.db, or the postgres plugin for a postgres:// URL).
 * migrate: apply the schema first (sqlite always may; postgres only when
 * asked by `eaid migrate`). */
int eai_app_storage_open(const struct eai_config *cfg, const struct eai_host *host,
                         struct eai_plugin_inst *out, struct eai_error **err);
void eai_app_storage_close(struct eai_plugin_inst *inst);

/* contracts/v1 directory: EAI_CONTRACTS_DIR, <exe>/../contracts/v1,
 * <exe>/contracts/v1, then the source tree. */
const char *eai_app_contracts_dir(void);

/* Refuse (error naming the chmod that fixes it) a data dir (is_dir) that
 * group/others may access, or a pepper file that others may access or that
 * is group-writable or group-readable by a group other than eaid's. */
int eai_app_check_private(const char *what, const char *path, int is_dir, struct eai_error **err);

/* Make the data dir (0700), check it is private, read/create the pepper
 * into out and check it is private (eai_app_check_private). */
int eai_app_prepare_data_dir(const struct eai_config *cfg, char pepper[65], struct eai_error **err);

/* `eaid config check`: what start-up checks of cfg without starting or
 * creating anything: every plugin-backed section's plugin loaded and its
 * keys checked (storage, isolation.*, audit, finops, telemetry).  One line
 * per section to out; 0, or -1 + *err naming file, path and key. */
int eai_app_check_config(const struct eai_config *cfg, FILE *out, struct eai_error **err);

#endif
