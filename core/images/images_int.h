/* Shared between the image store's commands (images.c: build, list,
 * remove; import.c: import).  Not an API: CLI code, blocking. */
#ifndef EAI_CORE_IMAGES_INT_H
#define EAI_CORE_IMAGES_INT_H

#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#define EAI_IMAGE_PART_MAX 128
#define EAI_IMAGE_SHIM_NAME "eai-statx-shim.so"
#define EAI_IMAGE_SHIM_PATH "/usr/lib/eai-statx-shim.so"
/* Where the gVisor backend binds its launcher in pooled sandboxes
 * (GV_LAUNCHER_PATH in plugins/gvisor/gvisor.h): an image carries the empty
 * mount point, so runsc never has to make it (its gofer would, in the image
 * itself, with the server's umask). */
#define EAI_IMAGE_LAUNCHER_DIR "/.eai"
#define EAI_IMAGE_LAUNCHER_PATH "/.eai/launcher"

/* NAME[:TAG] -> name, tag ("latest" when absent).  0 or -1 (malformed). */
int eai_images_ref_split(const char *ref, char name[EAI_IMAGE_PART_MAX + 1], char tag[EAI_IMAGE_PART_MAX + 1]);
/* The statx shim built next to eaid; 0 when found. */
int eai_images_find_shim(char *out, size_t len);
int eai_images_copy_file(const char *src, const char *dst, mode_t mode);
int eai_images_write_text(const char *path, const char *text, mode_t mode);
/* The launcher's mount point in rootfs: /.eai (0755) and an empty
 * /.eai/launcher (0755), never through a symlink.  0 or -1 with errno. */
int eai_images_add_mountpoints(const char *rootfs);
/* Move the complete tag directory tmp to final (swap when it exists);
 * after a swap tmp holds the old image, for the caller to remove. */
int eai_images_place(const char *tmp, const char *final);
/* The image's own command (image_cmd.c): at most this many arguments and
 * bytes (as an execution's `command`, core/exec/exec_validate.h). */
#define EAI_IMAGE_CMD_MAX_ARGS 256
#define EAI_IMAGE_CMD_MAX_BYTES (1 << 20)
/* 0 when argv is 1..EAI_IMAGE_CMD_MAX_ARGS strings without NUL, the first
 * non-empty, their bytes (with a NUL each) at most EAI_IMAGE_CMD_MAX_BYTES. */
int eai_images_command_check(const json_t *argv);
/* config.Entrypoint + config.Cmd of an OCI/Docker image config: 0 with
 * *out a new array (NULL when the image has none), -1 with why when they are
 * malformed (the import fails). */
int eai_images_command_from_config(const json_t *config, json_t **out, char *why, size_t whylen);
/* The command a built image gets when --cmd is not given: ["python3"] or
 * ["bash"] when the rootfs has them, else NULL. */
json_t *eai_images_command_default(const char *rootfs);
/* `eaid images import NAME[:TAG] ARCHIVE ...` (import.c); exit code. */
int eai_images_import(const char *image_dir, int argc, char **argv);
void eai_images_usage(void);

#endif
