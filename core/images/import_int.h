/*
 * `eaid images import` (docs/images.md "Importing images"), in four files:
 *   import.c        the command: arguments, the steps in order, meta.json
 *   import_fs.c     paths relative to a directory fd (never through a
 *                   symlink), sha256 of files, verified blobs and JSON
 *   import_tar.c    libarchive (opened at the first import): the outer
 *                   archive, and each layer applied with its whiteouts
 *   import_plan.c   the formats: an OCI image layout or a `docker save`
 *                   archive read into a plan (digests, config, layers)
 * CLI code: it blocks.  Not an API: shared by those files only.
 */
#ifndef EAI_CORE_IMAGES_IMPORT_INT_H
#define EAI_CORE_IMAGES_IMPORT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#define IMP_DEFAULT_MAX_BYTES (8LL << 30) /* unpacked bytes, all layers together */
#define IMP_MAX_ENTRIES 2000000           /* entries, all layers together */
#define IMP_MAX_LAYERS 256
#define IMP_JSON_MAX (4 << 20) /* index, manifest, config */

struct imp {
    int64_t max_bytes, bytes;
    int64_t entries;
    unsigned devices, setids;
};

#define FAIL(...)                                                                                                  \
    do {                                                                                                           \
        fprintf(stderr, "images import: " __VA_ARGS__);                                                            \
        fputc('\n', stderr);                                                                                       \
    } while (0)

struct plan {
    char format[16];   /* "oci" or "docker-archive" */
    char digest[72];   /* the image digest: OCI manifest, docker config (image id) */
    char config[72];
    char *layers[IMP_MAX_LAYERS]; /* paths below the layout */
    char layer_digest[IMP_MAX_LAYERS][72];
    size_t nlayers;
    json_t *command;   /* config.Entrypoint + config.Cmd, or NULL (image_cmd.c) */
};

/* import_fs.c */
int imp_clean_path(const char *in, char *out, size_t len);
int imp_open_parent(int rootfd, const char *rel, int create, const char **leaf);
int imp_rm_at(int dirfd, const char *name);
int imp_clear_dir(int fd);
int imp_hex64(const char *s);
int imp_file_sha256(int dirfd, const char *rel, char out[72], int64_t *size);
int imp_verify_descriptor(int layoutfd, json_t *desc, char *path, size_t len, char digest[72]);
json_t *imp_load_json_at(int dirfd, const char *rel);

/* import_tar.c: libarchive loaded (0), or -1 with why on stderr */
int imp_archive_load(void);
int imp_unpack_outer(struct imp *im, const char *archive_path, int dirfd);
int imp_apply_layer(struct imp *im, int layoutfd, const char *blob, int rootfd);

/* import_plan.c */
void imp_plan_free(struct plan *p);
int imp_plan_oci(int layoutfd, struct plan *p);
int imp_plan_docker(int layoutfd, const char *ref, struct plan *p);

#endif
