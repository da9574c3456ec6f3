/* Inside the config loader, shared by config.c (tree, environment,
 * derived values) and config_profiles.c (profiles). */
#ifndef EAI_CORE_CONFIG_INT_H
#define EAI_CORE_CONFIG_INT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <eai/plugin.h>

#include "config/config.h"

/* The built-in profiles (JSON), completed and overridden by the config. */
extern const char *const eai_default_profiles_json;

void eai_cfg_child_path(char *out, size_t len, const char *parent, const char *key);
int eai_cfg_check_keys(const char *file, const char *path, const json_t *obj, const char *const *known, struct eai_error **err);
int eai_cfg_need_object(const char *file, const char *path, const char *key, const json_t *v, struct eai_error **err);
int eai_cfg_get_string(const char *file, const char *path, const json_t *obj, const char *key, char **dst, struct eai_error **err);
int eai_cfg_get_int(const char *file, const char *path, const json_t *obj, const char *key, int64_t min, int64_t max, int64_t *dst, struct eai_error **err);
int eai_cfg_get_int32(const char *file, const char *path, const json_t *obj, const char *key, int min, int max, int *dst, struct eai_error **err);
int eai_cfg_get_size(const char *file, const char *path, const json_t *obj, const char *key, int64_t min, int64_t max, int64_t *dst, struct eai_error **err);
int eai_cfg_apply_profiles(const char *file, struct eai_config *c, const json_t *profiles, struct eai_error **err);
int eai_cfg_check_profile_bounds(const struct eai_config *c, struct eai_error **err);

#endif
