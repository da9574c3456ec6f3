/* Helpers of core/config/config.c shared with the app and the tests: quantity
 * values in config trees, listen addresses and plugin config subtrees. */
#ifndef EAI_CORE_CONFIG_CHECK_H
#define EAI_CORE_CONFIG_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <eai/plugin.h>

struct eai_profile_limits {
    int64_t cpu_millis, memory, timeout_s, pids, output_bytes, disk;
};

/* A size (integer bytes or a quantity string like "256Mi"); 0 or -1. */
int eai_cfg_quantity_bytes(const json_t *v, int64_t *out);
/* A CPU quantity (integer cores, real cores, or "500m" / "1.5"); 0 or -1. */
int eai_cfg_quantity_cpu(const json_t *v, int64_t *out);
/* Limits of a completed profile object (as in cfg->profiles); 0 or -1. */
int eai_cfg_profile_limits(const json_t *profile, struct eai_profile_limits *def,
                           struct eai_profile_limits *max);
/* "HOST:PORT" or "[V6]:PORT"; 0 or -1. */
int eai_cfg_parse_listen(const char *v, char *host, size_t hostlen, int *port);
/* 1 when url selects the postgres storage plugin. */
int eai_cfg_is_postgres_url(const char *url);
/* Check a plugin's config subtree against its key table: unknown key,
 * wrong type, missing required key -> -1 + *err naming file, path, key. */
int eai_cfg_check_plugin(const struct eai_config_key *keys, const json_t *conf, const char *file,
                         const char *path, struct eai_error **err);
int eai_cfg_plugin_has_key(const struct eai_config_key *keys, const char *name);

#endif
