/* The local image store: <image_dir>/<name>/<tag>/rootfs + meta.json
 * (docs/images.md).  Owned by the gVisor work; declared here first so the
 * host API can resolve images. */
#ifndef EAI_CORE_IMAGES_H
#define EAI_CORE_IMAGES_H

#include <stddef.h>

/* rootfs path of NAME[:TAG] (default tag "latest") into rootfs; 0 when
 * found, -1 when unknown or the reference is malformed. */
int eai_images_resolve(const char *image_dir, const char *ref, char *rootfs, size_t len);
/* `eaid images build|list ...`: argv[0] is the subcommand; exit code. */
int eai_images_cli(const char *image_dir, int argc, char **argv);

#endif
