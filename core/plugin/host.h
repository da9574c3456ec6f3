/* The host API table handed to plugins' create(). */
#ifndef EAI_CORE_HOST_H
#define EAI_CORE_HOST_H

#include <eai/plugin.h>

struct eai_http_client;

/* A host for the loop `base` (may be NULL for CLI use: then work_submit
 * and http_request fail).  data_dir must exist.  image_dir: NULL means
 * <data_dir>/images. */
struct eai_host *eai_host_new(struct event_base *base, const char *data_dir);
void eai_host_set_image_dir(struct eai_host *h, const char *image_dir);
const char *eai_host_image_dir(const struct eai_host *h);
/* The shared HTTP client (created lazily on the loop). */
struct eai_http_client *eai_host_http_client(const struct eai_host *h);
void eai_host_free(struct eai_host *h);
/* Where netns_take / netns_release lead (NULL: egress off, they fail). */
struct eai_egress_host;
void eai_host_set_egress(struct eai_host *h, struct eai_egress_host *egress);

/* A handle for one plugin instance: a copy of the shared host whose
 * plugin_name is set, so logs ("<name>/<component>"), metrics (label
 * plugin="<name>") and errors (error_new_h: "plugin <name>: ...") name
 * the plugin by themselves.  Freed with eai_host_instance_free(), after
 * the instance is destroyed. */
struct eai_host *eai_host_instance_new(const struct eai_host *shared, enum eai_plugin_kind kind, const char *name);
void eai_host_instance_free(struct eai_host *h);

/* create() through a new instance handle.  On failure the host cleans up:
 * the handle is freed, an instance returned along with an error is
 * destroyed, a NULL without an error gets one, and the error names the
 * plugin.  On success *self and *handle (free it after destroy()). */
int eai_plugin_create(const struct eai_plugin_descriptor *d, const struct eai_host *shared,
                      const json_t *config, void **self, struct eai_host **handle, struct eai_error **err);
/* destroy() then free the handle; both may be NULL. */
void eai_plugin_destroy(const struct eai_plugin_descriptor *d, void *self, struct eai_host *handle);

#endif
