/* The local image store: <image_dir>/<name>/<tag>/rootfs + meta.json
 * (docs/images.md).  Owned by the gVisor work; declared here first so the
 * host API can resolve images. */
#ifndef EAI_CORE_IMAGES_H
#define EAI_CORE_IMAGES_H

#include <stddef.h>

#include <jansson.h>

/* rootfs path of NAME[:TAG] (default tag "latest") into rootfs; 0 when
 * found, -1 when unknown or the reference is malformed. */
int eai_images_resolve(const char *image_dir, const char *ref, char *rootfs, size_t len);
/* The references NAME:TAG of the store, sorted, joined by ", " into out
 * (truncated with ", ..." past len).  Returns how many there are. */
int eai_images_names(const char *image_dir, char *out, size_t len);
/* The image's own command (image_cmd.c, docs/images.md): *argv = a new
 * array of strings (Entrypoint + Cmd of an imported image, the build's
 * default of a built one), or NULL when the image has none.  0, or -1 when
 * the image is unknown.  Blocking (reads meta.json): workers only. */
int eai_images_command(const char *image_dir, const char *ref, json_t **argv);
/* `eaid images build|list ...`: argv[0] is the subcommand; exit code. */
int eai_images_cli(const char *image_dir, int argc, char **argv);

#endif
