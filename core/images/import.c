/*
 * `eaid images import NAME[:TAG] ARCHIVE` (docs/images.md): a root
 * filesystem from an OCI image layout (directory, or a tar of one, as
 * `skopeo copy ... oci-archive:` or `podman save --format oci-archive`
 * write) or a `docker save` tar.
 *
 *   1. a tar ARCHIVE is unpacked (regular files and directories only;
 *      symlinks inside it become hard links when they stay inside) into
 *      <image_dir>/<name>/.import-<tag>-<rnd>/archive;
 *   2. the manifest is found (index.json, one level of nested index, the
 *      linux/amd64 entry when there are several; or manifest.json) and every
 *      blob it names (manifest, config, layers) is hashed and compared with
 *      its digest and size before anything is unpacked (docker save: the
 *      config against its file name, each layer against the config's
 *      rootfs.diff_ids);
 *   3. layers are applied in order into .../rootfs: first the layer's
 *      whiteouts (.wh.NAME removes NAME, .wh..wh..opq empties its directory
 *      of what lower layers put there), then its entries.  An entry with an
 *      absolute path, a `..` component, or a parent that is a symlink or not
 *      a directory fails the import; device nodes and sockets are dropped,
 *      setuid/setgid bits cleared, xattrs (file capabilities included)
 *      ignored; the unpacked bytes and the entry count are capped;
 *   4. meta.json records the image digest and its own command (config.
 *      Entrypoint + Cmd, image_cmd.c), and the tag directory is renamed
 *      into place.  Any failure removes the whole .import-* directory, so a
 *      failed import leaves nothing.
 *
 * CLI code: it blocks (docs/architecture.md).  Every path operation is
 * relative to a directory fd and never follows a symlink.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "images/images_int.h"
#include "images/import_int.h"

/* ------------------------------------------------------------ command */

static int parse_size(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v <= 0)
        return -1;
    int64_t m = 1;
    if (*end == 'K' || *end == 'k')
        m = 1LL << 10;
    else if (*end == 'M')
        m = 1LL << 20;
    else if (*end == 'G')
        m = 1LL << 30;
    else if (*end)
        return -1;
    if (*end && end[1])
        return -1;
    if (v > INT64_MAX / m)
        return -1;
    *out = v * m;
    return 0;
}

static int has_glibc(const char *rootfs)
{
    static const char *const libc[] = {"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                                       "/lib64/libc.so.6", "/usr/lib64/libc.so.6"};
    char p[PATH_MAX + 64];
    struct stat st;
    for (size_t i = 0; i < sizeof(libc) / sizeof(libc[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", rootfs, libc[i]);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            return 1;
    }
    return 0;
}

int eai_images_import(const char *image_dir, int argc, char **argv)
{
    const char *ref = NULL, *src = NULL;
    int force = 0, shim = 1;
    struct imp im = {.max_bytes = IMP_DEFAULT_MAX_BYTES};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--force"))
            force = 1;
        else if (!strcmp(argv[i], "--no-shim"))
            shim = 0;
        else if (!strcmp(argv[i], "--max-size") && i + 1 < argc) {
            if (parse_size(argv[++i], &im.max_bytes) < 0) {
                fprintf(stderr, "images import: --max-size needs a positive size (e.g. 2G, 512M)\n");
                return 2;
            }
        } else if (argv[i][0] != '-' && !ref)
            ref = argv[i];
        else if (argv[i][0] != '-' && !src)
            src = argv[i];
        else {
            eai_images_usage();
            return 2;
        }
    }
    char name[EAI_IMAGE_PART_MAX + 1], tag[EAI_IMAGE_PART_MAX + 1];
    if (!ref || !src || eai_images_ref_split(ref, name, tag) < 0) {
        fprintf(stderr, "images import: needs a valid NAME[:TAG] and an ARCHIVE\n");
        eai_images_usage();
        return 2;
    }
    struct stat st;
    if (stat(src, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))) {
        fprintf(stderr, "images import: %s: not a directory or a file\n", src);
        return 2;
    }
    if (imp_archive_load() < 0)
        return 1;
    int src_is_dir = S_ISDIR(st.st_mode);
    char namedir[PATH_MAX], final[PATH_MAX + 256], tmp[PATH_MAX + 256], p[PATH_MAX + 300], rnd[17];
    if (eai_random_hex(rnd, 8) < 0)
        return 1;
    snprintf(namedir, sizeof(namedir), "%s/%s", image_dir, name);
    snprintf(final, sizeof(final), "%s/%s", namedir, tag);
    snprintf(tmp, sizeof(tmp), "%s/.import-%s-%s", namedir, tag, rnd);
    if (!force && lstat(final, &st) == 0) {
        fprintf(stderr, "images import: %s:%s already exists (use --force to replace it)\n", name, tag);
        return 1;
    }
    int made_namedir = lstat(namedir, &st) < 0;
    if (eai_mkdir_p(namedir, 0755) < 0 || mkdir(tmp, 0755) < 0) {
        fprintf(stderr, "images import: cannot create %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    int rc = 1, layoutfd = -1, rootfd = -1;
    struct plan plan = {0};
    json_t *meta = NULL;
    snprintf(p, sizeof(p), "%s/rootfs", tmp);
    if (mkdir(p, 0755) < 0 || (rootfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        goto out;
    if (src_is_dir) {
        layoutfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } else {
        snprintf(p, sizeof(p), "%s/archive", tmp);
        if (mkdir(p, 0700) < 0 || (layoutfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            goto out;
        if (imp_unpack_outer(&im, src, layoutfd) < 0)
            goto out;
        im.bytes = 0; /* the cap is about the root filesystem */
        im.entries = 0;
    }
    if (layoutfd < 0) {
        fprintf(stderr, "images import: %s: %s\n", src, strerror(errno));
        goto out;
    }
    /* An OCI layout (podman/skopeo, docker >= 25 writes both), else docker save. */
    if (fstatat(layoutfd, "oci-layout", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (imp_plan_oci(layoutfd, &plan) < 0)
            goto out;
    } else if (fstatat(layoutfd, "manifest.json", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        char want[2 * EAI_IMAGE_PART_MAX + 2];
        snprintf(want, sizeof(want), "%s:%s", name, tag);
        if (imp_plan_docker(layoutfd, want, &plan) < 0)
            goto out;
    } else {
        fprintf(stderr, "images import: %s is neither an OCI image layout (oci-layout, index.json) nor a "
                        "docker save archive (manifest.json)\n", src);
        goto out;
    }
    for (size_t i = 0; i < plan.nlayers; i++) {
        fprintf(stderr, "images import: layer %zu/%zu %s\n", i + 1, plan.nlayers, plan.layer_digest[i]);
        if (imp_apply_layer(&im, layoutfd, plan.layers[i], rootfd) < 0)
            goto out;
    }
    close(layoutfd);
    layoutfd = -1;
    snprintf(p, sizeof(p), "%s/archive", tmp);
    if (eai_rm_tree(p) < 0)
        goto out;
    snprintf(p, sizeof(p), "%s/rootfs", tmp);
    /* (an image whose own /.eai is something else is still imported: its
     * pooled sandboxes then start programs with runsc exec, docs/gvisor.md) */
    if (eai_images_add_mountpoints(p) < 0)
        fprintf(stderr, "images import: no launcher mount point %s (%s): warm sandboxes of this image use runsc exec\n",
                EAI_IMAGE_LAUNCHER_PATH, strerror(errno));
    int shimmed = 0;
    if (shim && has_glibc(p)) {
        char shim_src[PATH_MAX], q[PATH_MAX + 400];
        snprintf(q, sizeof(q), "%s/etc/ld.so.preload", p);
        if (lstat(q, &st) == 0) {
            fprintf(stderr, "images import: the image has its own /etc/ld.so.preload: statx shim not added\n");
        } else if (eai_images_find_shim(shim_src, sizeof(shim_src)) < 0) {
            fprintf(stderr, "images import: statx shim not found: not added (see docs/images.md)\n");
        } else {
            struct stat es;
            snprintf(q, sizeof(q), "%s" EAI_IMAGE_SHIM_PATH, p);
            char etc[PATH_MAX + 64];
            snprintf(etc, sizeof(etc), "%s/etc", p);
            /* Only into real directories: never through an image's symlink. */
            char libdir[PATH_MAX + 64];
            snprintf(libdir, sizeof(libdir), "%s/usr/lib", p);
            struct stat ls;
            if (lstat(etc, &es) == 0 && S_ISDIR(es.st_mode) && lstat(libdir, &ls) == 0 && S_ISDIR(ls.st_mode) &&
                lstat(q, &ls) < 0 && eai_images_copy_file(shim_src, q, 0755) == 0) {
                snprintf(q, sizeof(q), "%s/etc/ld.so.preload", p);
                if (eai_images_write_text(q, EAI_IMAGE_SHIM_PATH "\n", 0644) < 0)
                    goto out;
                shimmed = 1;
            }
        }
    }
    json_t *layers = json_array();
    for (size_t i = 0; i < plan.nlayers; i++)
        json_array_append_new(layers, json_string(plan.layer_digest[i]));
    char created[32];
    eai_time_rfc3339(eai_now_ms(), created);
    const char *slash = strrchr(src, '/');
    char source[PATH_MAX + 64];
    snprintf(source, sizeof(source), "import %s %s", plan.format, slash && slash[1] ? slash + 1 : src);
    meta = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:I, s:{s:I, s:I}, s:b}", "name", name, "tag", tag,
                     "digest", plan.digest, "config", plan.config, "format", plan.format, "created", created,
                     "source", source, "layers", layers, "unpacked_bytes", (json_int_t)im.bytes, "dropped",
                     "devices", (json_int_t)im.devices, "setid_bits", (json_int_t)im.setids, "shim", shimmed);
    if (!meta || (plan.command && json_object_set(meta, "command", plan.command) < 0))
        goto out;
    snprintf(p, sizeof(p), "%s/meta.json", tmp);
    if (json_dump_file(meta, p, JSON_INDENT(2) | JSON_SORT_KEYS) != 0) {
        fprintf(stderr, "images import: cannot write meta.json\n");
        goto out;
    }
    if (eai_images_place(tmp, final) < 0) {
        fprintf(stderr, "images import: cannot move %s into place: %s\n", final, strerror(errno));
        goto out;
    }
    printf("{\"image\":\"%s:%s\",\"digest\":\"%s\",\"format\":\"%s\",\"layers\":%zu,\"path\":\"%s\"}\n", name,
           tag, plan.digest, plan.format, plan.nlayers, final);
    rc = 0;
out:
    if (layoutfd >= 0)
        close(layoutfd);
    if (rootfd >= 0)
        close(rootfd);
    json_decref(meta);
    imp_plan_free(&plan);
    eai_rm_tree(tmp); /* the failed import, or the replaced image after --force */
    if (rc != 0 && made_namedir)
        rmdir(namedir); /* only when empty */
    return rc;
}
