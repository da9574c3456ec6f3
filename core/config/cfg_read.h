/* The typed readers of core/config: each checks one key of a YAML/JSON
 * mapping and, on a wrong type, an unknown key or a value out of range,
 * sets *err to validation_failed "config FILE: PATH: key 'KEY': MSG" and
 * returns -1.  A key that is absent leaves *dst as it is.  Sections of
 * the configuration (config.c, profiles.c, and each feature's own file)
 * read their keys with these. */
#ifndef EAI_CORE_CONFIG_CFG_READ_H
#define EAI_CORE_CONFIG_CFG_READ_H

#include <stdint.h>
#include <jansson.h>
#include <eai/plugin.h>

/* strdup(v) into *dst (NULL v clears it); -1 out of memory. */
int eai_cfg_set_str(char **dst, const char *v);
/* validation_failed naming file, path and key; always returns -1. */
int eai_cfg_fail(struct eai_error **err, const char *file, const char *path, const char *key,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* "PARENT/KEY" into out. */
void eai_cfg_child_path(char *out, size_t len, const char *parent, const char *key);
/* Every key of obj is in the NULL-terminated list known. */
int eai_cfg_check_keys(const char *file, const char *path, const json_t *obj,
                       const char *const *known, struct eai_error **err);
/* v is a mapping. */
int eai_cfg_need_object(const char *file, const char *path, const char *key, const json_t *v,
                        struct eai_error **err);
/* obj[key]: a string (null clears *dst). */
int eai_cfg_get_string(const char *file, const char *path, const json_t *obj, const char *key,
                       char **dst, struct eai_error **err);
/* obj[key]: an integer in [min, max]. */
int eai_cfg_get_int(const char *file, const char *path, const json_t *obj, const char *key,
                    int64_t min, int64_t max, int64_t *dst, struct eai_error **err);
int eai_cfg_get_int32(const char *file, const char *path, const json_t *obj, const char *key,
                      int min, int max, int *dst, struct eai_error **err);
/* obj[key]: a size (bytes or a quantity like 10Mi) in [min, max]. */
int eai_cfg_get_size(const char *file, const char *path, const json_t *obj, const char *key,
                     int64_t min, int64_t max, int64_t *dst, struct eai_error **err);

/* profiles.c */
/* The built-in profiles (DESIGN.md section 6) as a JSON document. */
extern const char *const eai_cfg_default_profiles_json;
/* Check and complete the profiles mapping into c->profiles. */
struct eai_config;
int eai_cfg_apply_profiles(const char *file, struct eai_config *c, const json_t *profiles,
                           struct eai_error **err);
/* Every profile: defaults <= maxima. */
int eai_cfg_check_profile_bounds(const struct eai_config *c, struct eai_error **err);

/* tls_cfg.c: server.tls (cert, key, client_ca); v may be NULL. */
int eai_cfg_server_tls(struct eai_config *c, const char *file, const char *path, const json_t *v,
                       struct eai_error **err);

/* jwt_cfg.c: auth.jwt (v may be NULL) into c->jwt. */
int eai_cfg_auth_jwt(struct eai_config *c, const char *file, const char *path, const json_t *v,
                     struct eai_error **err);

/* config.c: "HOST:PORT" in key of path. */
int eai_cfg_check_listen(const char *file, const char *path, const char *key, const char *v,
                         struct eai_error **err);

/* sections.c: the top-level keys of the configuration file, applied in
 * this order.  A feature with its own section adds a line to the table
 * and its apply function in its own file.  v is the section's value
 * (checked to be a mapping first when mapping is set); path is "/NAME". */
struct eai_cfg_section {
    const char *name;
    int mapping;
    int (*apply)(struct eai_config *c, const char *file, const char *path, const json_t *v,
                 struct eai_error **err);
};
extern const struct eai_cfg_section eai_cfg_sections[];
const struct eai_cfg_section *eai_cfg_section(const char *name);

#endif
