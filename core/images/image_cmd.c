/*
 * The image's own command (docs/images.md "The image's own command"): what
 * runs when an execution names no `command`, as Docker and Kubernetes run an
 * image's Entrypoint + Cmd.
 *
 *   import  the image config's config.Entrypoint + config.Cmd, checked,
 *           recorded in meta.json as "command" (absent: the image has none);
 *   build   `--cmd JSON` when given, else ["python3"] when the image has
 *           /usr/bin/python3 (as Docker's python images), else ["bash"] when
 *           it has /bin/bash (as Docker's debian images), else none;
 *   read    eai_images_command(): meta.json's "command"; an image built
 *           before the key existed gets the build's default from its rootfs.
 *
 * Blocking file reads: CLI code and worker threads only.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "images/images.h"
#include "images/images_int.h"

int eai_images_command_check(const json_t *argv)
{
    if (!json_is_array(argv) || json_array_size(argv) < 1 || json_array_size(argv) > EAI_IMAGE_CMD_MAX_ARGS)
        return -1;
    size_t i, total = 0;
    const json_t *a;
    json_array_foreach(argv, i, a) {
        const char *s = json_string_value(a);
        if (!s || strlen(s) != json_string_length(a))
            return -1; /* not a string, or one with a NUL */
        total += json_string_length(a) + 1;
    }
    if (json_string_length(json_array_get(argv, 0)) == 0 || total > EAI_IMAGE_CMD_MAX_BYTES)
        return -1;
    return 0;
}

int eai_images_command_from_config(const json_t *config, json_t **out, char *why, size_t whylen)
{
    *out = NULL;
    const json_t *c = json_object_get(config, "config");
    const json_t *parts[2] = {json_object_get(c, "Entrypoint"), json_object_get(c, "Cmd")};
    json_t *argv = json_array();
    if (!argv) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        if (!parts[k] || json_is_null(parts[k]))
            continue;
        if (!json_is_array(parts[k])) {
            snprintf(why, whylen, "config.%s is not an array", k ? "Cmd" : "Entrypoint");
            json_decref(argv);
            return -1;
        }
        json_array_extend(argv, (json_t *)parts[k]);
    }
    if (json_array_size(argv) == 0) {
        json_decref(argv);
        return 0; /* no command of its own */
    }
    if (eai_images_command_check(argv) < 0) {
        snprintf(why, whylen, "config.Entrypoint + config.Cmd: not 1 to %d strings without NUL, the first "
                 "non-empty, at most %d bytes", EAI_IMAGE_CMD_MAX_ARGS, EAI_IMAGE_CMD_MAX_BYTES);
        json_decref(argv);
        return -1;
    }
    *out = argv;
    return 0;
}

json_t *eai_images_command_default(const char *rootfs)
{
    static const struct {
        const char *path, *argv0;
    } known[] = {{"/usr/bin/python3", "python3"}, {"/bin/bash", "bash"}, {"/usr/bin/bash", "bash"}};
    char p[PATH_MAX + 32];
    struct stat st;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        snprintf(p, sizeof p, "%s%s", rootfs, known[i].path);
        /* stat follows the image's own links (usr-merge /bin -> usr/bin):
         * only a name, never opened, is derived from it */
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            return json_pack("[s]", known[i].argv0);
    }
    return NULL;
}

int eai_images_command(const char *image_dir, const char *ref, json_t **argv)
{
    char rootfs[PATH_MAX], meta[PATH_MAX + 16];
    *argv = NULL;
    if (eai_images_resolve(image_dir, ref, rootfs, sizeof rootfs) < 0)
        return -1;
    snprintf(meta, sizeof meta, "%.*s/meta.json", (int)(strlen(rootfs) - strlen("/rootfs")), rootfs);
    json_t *m = json_load_file(meta, 0, NULL);
    const json_t *c = json_object_get(m, "command");
    if (c) {
        if (eai_images_command_check(c) == 0)
            *argv = json_incref((json_t *)c);
    } else if (json_object_get(m, "packages")) {
        *argv = eai_images_command_default(rootfs); /* built before meta.json recorded it */
    }
    json_decref(m);
    return 0;
}
