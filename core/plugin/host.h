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

#endif
