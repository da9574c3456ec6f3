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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "base/dynlib.h"
#include "base/util.h"
#include "images/images.h"
#include "images/images_int.h"

/* libarchive is opened at the first import, not linked (base/dynlib.h):
 * `eaid serve` never maps it nor ICU, libxml2 and libstdc++ behind it. */
#define ARCHIVE_FNS(X)                                                                                             \
    X(archive_entry_filetype) X(archive_entry_gid) X(archive_entry_hardlink) X(archive_entry_mtime)                \
    X(archive_entry_pathname) X(archive_entry_perm) X(archive_entry_size) X(archive_entry_size_is_set)             \
    X(archive_entry_symlink) X(archive_entry_uid) X(archive_error_string) X(archive_read_data)                     \
    X(archive_read_free) X(archive_read_new) X(archive_read_next_header) X(archive_read_open_fd)                   \
    X(archive_read_support_filter_bzip2) X(archive_read_support_filter_gzip) X(archive_read_support_filter_xz)     \
    X(archive_read_support_filter_zstd) X(archive_read_support_format_gnutar) X(archive_read_support_format_tar)
EAI_DYNLIB_TABLE(la, "libarchive.so.13", ARCHIVE_FNS);
#define archive_entry_filetype (la.archive_entry_filetype)
#define archive_entry_gid (la.archive_entry_gid)
#define archive_entry_hardlink (la.archive_entry_hardlink)
#define archive_entry_mtime (la.archive_entry_mtime)
#define archive_entry_pathname (la.archive_entry_pathname)
#define archive_entry_perm (la.archive_entry_perm)
#define archive_entry_size (la.archive_entry_size)
#define archive_entry_size_is_set (la.archive_entry_size_is_set)
#define archive_entry_symlink (la.archive_entry_symlink)
#define archive_entry_uid (la.archive_entry_uid)
#define archive_error_string (la.archive_error_string)
#define archive_read_data (la.archive_read_data)
#define archive_read_free (la.archive_read_free)
#define archive_read_new (la.archive_read_new)
#define archive_read_next_header (la.archive_read_next_header)
#define archive_read_open_fd (la.archive_read_open_fd)
#define archive_read_support_filter_bzip2 (la.archive_read_support_filter_bzip2)
#define archive_read_support_filter_gzip (la.archive_read_support_filter_gzip)
#define archive_read_support_filter_xz (la.archive_read_support_filter_xz)
#define archive_read_support_filter_zstd (la.archive_read_support_filter_zstd)
#define archive_read_support_format_gnutar (la.archive_read_support_format_gnutar)
#define archive_read_support_format_tar (la.archive_read_support_format_tar)

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

/* ------------------------------------------------------------ paths */

/* Tar entry name -> clean relative path ("a/b/c"): leading "./" dropped,
 * empty and "." components dropped.  -1 for an absolute path or a ".."
 * component; 0 with out = "" for the root itself. */
static int clean_path(const char *in, char *out, size_t len)
{
    if (!in || in[0] == '/')
        return -1;
    size_t o = 0;
    const char *p = in;
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0)
            break;
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -1;
        if (!(n == 1 && p[0] == '.')) {
            if (o + n + 2 > len)
                return -1;
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    out[o] = '\0';
    return 0;
}

/* Open the directory that holds `rel` (clean) below rootfd, never following
 * a symlink; missing directories are created (0755) when create is set.
 * *leaf points into rel.  Returns an fd, -1 with errno (ELOOP/ENOTDIR for a
 * symlink or non-directory used as a parent). */
static int open_parent(int rootfd, const char *rel, int create, const char **leaf)
{
    int fd = dup(rootfd);
    if (fd < 0)
        return -1;
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        if (!slash)
            break;
        char comp[NAME_MAX + 1];
        size_t n = (size_t)(slash - p);
        if (n == 0 || n > NAME_MAX) {
            close(fd);
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && create) {
            if (mkdirat(fd, comp, 0755) < 0 && errno != EEXIST) {
                close(fd);
                return -1;
            }
            next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0) {
            int e = errno;
            struct stat st;
            /* O_NOFOLLOW|O_DIRECTORY on a symlink: ENOTDIR or ELOOP. */
            if (fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                e = ELOOP;
            close(fd);
            errno = e;
            return -1;
        }
        close(fd);
        fd = next;
        p = slash + 1;
    }
    if (strlen(p) > NAME_MAX) {
        close(fd);
        errno = ENAMETOOLONG;
        return -1;
    }
    *leaf = p;
    return fd;
}

/* Remove name below dirfd, recursively, never following symlinks. */
static int rm_at(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlinkat(dirfd, name, 0);
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (rm_at(fd, e->d_name) < 0)
            rc = -1;
    }
    closedir(d);
    if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
        rc = -1;
    return rc;
}

/* Empty the directory fd (opaque whiteout). */
static int clear_dir(int fd)
{
    int d2 = dup(fd);
    if (d2 < 0)
        return -1;
    DIR *d = fdopendir(d2);
    if (!d) {
        close(d2);
        return -1;
    }
    rewinddir(d);
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (rm_at(fd, e->d_name) < 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

/* ------------------------------------------------------------ digests */

static int hex64(const char *s)
{
    if (strlen(s) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* sha256 of the file (at dirfd/rel, no symlinks) into "sha256:<hex>" and
 * its size. */
static int file_sha256(int dirfd, const char *rel, char out[72], int64_t *size)
{
    const char *leaf;
    int pfd = open_parent(dirfd, rel, 0, &leaf);
    if (pfd < 0)
        return -1;
    int fd = openat(pfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    close(pfd);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int rc = -1;
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        goto out;
    static unsigned char buf[1 << 16];
    ssize_t r;
    int64_t total = 0;
    while ((r = read(fd, buf, sizeof(buf))) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            goto out;
        }
        EVP_DigestUpdate(md, buf, (size_t)r);
        total += r;
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dl = 0;
    if (EVP_DigestFinal_ex(md, d, &dl) != 1 || dl != 32)
        goto out;
    strcpy(out, "sha256:");
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", d[i]);
    *size = total;
    rc = 0;
out:
    EVP_MD_CTX_free(md);
    close(fd);
    return rc;
}

/* OCI descriptor -> verified blob path ("blobs/sha256/<hex>"). */
static int verify_descriptor(int layoutfd, json_t *desc, char *path, size_t len, char digest[72])
{
    const char *dg = json_string_value(json_object_get(desc, "digest"));
    json_t *sz = json_object_get(desc, "size");
    if (!dg || strncmp(dg, "sha256:", 7) || !hex64(dg + 7)) {
        FAIL("descriptor digest '%.80s' is not sha256:<64 hex> (only sha256 is supported)", dg ? dg : "");
        return -1;
    }
    if (!json_is_integer(sz) || json_integer_value(sz) < 0) {
        FAIL("descriptor %s has no valid size", dg);
        return -1;
    }
    snprintf(path, len, "blobs/sha256/%s", dg + 7);
    char got[72];
    int64_t size;
    if (file_sha256(layoutfd, path, got, &size) < 0) {
        FAIL("blob %s: %s", dg, strerror(errno));
        return -1;
    }
    if (strcmp(got, dg) != 0) {
        FAIL("blob %s: content hashes to %s", dg, got);
        return -1;
    }
    if (size != json_integer_value(sz)) {
        FAIL("blob %s: %" PRId64 " bytes, descriptor says %" JSON_INTEGER_FORMAT, dg, size,
             json_integer_value(sz));
        return -1;
    }
    snprintf(digest, 72, "%s", dg);
    return 0;
}

static json_t *load_json_at(int dirfd, const char *rel)
{
    const char *leaf;
    int pfd = open_parent(dirfd, rel, 0, &leaf);
    if (pfd < 0)
        return NULL;
    int fd = openat(pfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    close(pfd);
    if (fd < 0)
        return NULL;
    struct stat st;
    json_t *j = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= IMP_JSON_MAX) {
        FILE *f = fdopen(fd, "r");
        if (f) {
            json_error_t err;
            j = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
            if (!j)
                FAIL("%s: %s (line %d)", rel, err.text, err.line);
            fclose(f);
            return j;
        }
    }
    close(fd);
    return NULL;
}

/* ------------------------------------------------------------ tar reading */

/* A layer tar (any compression libarchive knows) at dirfd/rel; *fdp is the
 * file, to close after archive_read_free. */
static struct archive *tar_open(int dirfd, const char *rel, int *fdp)
{
    const char *leaf;
    int pfd = open_parent(dirfd, rel, 0, &leaf);
    if (pfd < 0)
        return NULL;
    int fd = openat(pfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    close(pfd);
    if (fd < 0)
        return NULL;
    struct archive *a = archive_read_new();
    if (!a) {
        close(fd);
        return NULL;
    }
    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_zstd(a);
    archive_read_support_filter_bzip2(a);
    archive_read_support_filter_xz(a);
    if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
        FAIL("%s: %s", rel, archive_error_string(a));
        archive_read_free(a);
        close(fd);
        return NULL;
    }
    *fdp = fd;
    return a;
}

/* Copy the entry's data into fd, counting against the cap. */
static int copy_data(struct imp *im, struct archive *a, int fd, const char *name)
{
    static char buf[1 << 16];
    for (;;) {
        la_ssize_t r = archive_read_data(a, buf, sizeof(buf));
        if (r == 0)
            return 0;
        if (r < 0) {
            FAIL("%s: %s", name, archive_error_string(a));
            return -1;
        }
        im->bytes += r;
        if (im->bytes > im->max_bytes) {
            FAIL("unpacked size over the cap of %" PRId64 " bytes (--max-size)", im->max_bytes);
            return -1;
        }
        for (la_ssize_t off = 0; off < r;) {
            ssize_t w = write(fd, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                FAIL("%s: write: %s", name, strerror(errno));
                return -1;
            }
            off += w;
        }
    }
}

/* ------------------------------------------------------------ outer archive */

/* Unpack the ARCHIVE tar into dirfd: regular files and directories;
 * symlinks that resolve inside become hard links afterwards.  Anything else
 * (or any escaping path) fails. */
static int unpack_outer(struct imp *im, const char *archive_path, int dirfd)
{
    int fd = open(archive_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        FAIL("%s: %s", archive_path, strerror(errno));
        return -1;
    }
    struct archive *a = archive_read_new();
    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_zstd(a);
    archive_read_support_filter_xz(a);
    int rc = -1;
    json_t *links = json_array();
    if (archive_read_open_fd(a, fd, 65536) != ARCHIVE_OK) {
        FAIL("%s: not a tar archive: %s", archive_path, archive_error_string(a));
        goto out;
    }
    struct archive_entry *e;
    int r;
    char rel[PATH_MAX];
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        const char *name = archive_entry_pathname(e);
        if (clean_path(name, rel, sizeof(rel)) < 0) {
            FAIL("archive entry '%.200s' escapes the archive", name ? name : "");
            goto out;
        }
        if (!rel[0])
            continue;
        if (++im->entries > IMP_MAX_ENTRIES) {
            FAIL("more than %d entries", IMP_MAX_ENTRIES);
            goto out;
        }
        mode_t type = archive_entry_filetype(e);
        const char *leaf;
        int pfd = open_parent(dirfd, rel, 1, &leaf);
        if (pfd < 0) {
            FAIL("archive entry '%.200s': %s", rel, strerror(errno));
            goto out;
        }
        int ok = 0;
        if (archive_entry_hardlink(e)) {
            char t[PATH_MAX];
            if (clean_path(archive_entry_hardlink(e), t, sizeof(t)) == 0 && t[0]) {
                json_array_append_new(links, json_pack("[s,s]", rel, t));
                ok = 1;
            }
        } else if (type == AE_IFDIR) {
            ok = mkdirat(pfd, leaf, 0755) == 0 || errno == EEXIST;
        } else if (type == AE_IFREG) {
            int ofd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
            if (ofd >= 0) {
                ok = copy_data(im, a, ofd, rel) == 0;
                if (close(ofd) < 0)
                    ok = 0;
                if (!ok) {
                    close(pfd);
                    goto out;
                }
            }
        } else if (type == AE_IFLNK) {
            /* docker save writes duplicate layers as symlinks to blobs. */
            const char *tg = archive_entry_symlink(e);
            char joined[PATH_MAX * 2], t[PATH_MAX];
            const char *slash = strrchr(rel, '/');
            if (tg && tg[0] != '/') {
                snprintf(joined, sizeof(joined), "%.*s%s%s", slash ? (int)(slash - rel) : 0, rel, slash ? "/" : "",
                         tg);
                /* resolve ".." lexically, refusing to climb above the root */
                char *parts[PATH_MAX / 2];
                int np = 0, bad = 0;
                char *save = NULL;
                for (char *c = strtok_r(joined, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
                    if (!strcmp(c, "."))
                        continue;
                    if (!strcmp(c, "..")) {
                        if (np == 0) {
                            bad = 1;
                            break;
                        }
                        np--;
                    } else if (np < (int)(sizeof(parts) / sizeof(parts[0]))) {
                        parts[np++] = c;
                    }
                }
                size_t o = 0;
                for (int i = 0; i < np && !bad; i++) {
                    int k = snprintf(t + o, sizeof(t) - o, "%s%s", i ? "/" : "", parts[i]);
                    if (k < 0 || (size_t)k >= sizeof(t) - o)
                        bad = 1;
                    else
                        o += (size_t)k;
                }
                if (!bad && np > 0) {
                    json_array_append_new(links, json_pack("[s,s]", rel, t));
                    ok = 1;
                }
            }
            if (!ok) {
                FAIL("archive entry '%.200s' links outside the archive", rel);
                close(pfd);
                goto out;
            }
        } else {
            FAIL("archive entry '%.200s' is not a file, directory or link", rel);
            close(pfd);
            goto out;
        }
        close(pfd);
        if (!ok) {
            FAIL("archive entry '%.200s': %s", rel, strerror(errno));
            goto out;
        }
    }
    if (r != ARCHIVE_EOF) {
        FAIL("%s: %s", archive_path, archive_error_string(a));
        goto out;
    }
    /* Links last, in order (a link may name an earlier link). */
    size_t i;
    json_t *l;
    json_array_foreach(links, i, l)
    {
        const char *from = json_string_value(json_array_get(l, 0)), *to = json_string_value(json_array_get(l, 1));
        const char *fl, *tl;
        int fp = open_parent(dirfd, from, 1, &fl);
        int tp = open_parent(dirfd, to, 0, &tl);
        struct stat st;
        int ok = fp >= 0 && tp >= 0 && fstatat(tp, tl, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                 linkat(tp, tl, fp, fl, 0) == 0;
        if (fp >= 0)
            close(fp);
        if (tp >= 0)
            close(tp);
        if (!ok) {
            FAIL("archive link '%.200s' -> '%.200s' does not name a file in the archive", from, to);
            goto out;
        }
    }
    rc = 0;
out:
    json_decref(links);
    archive_read_free(a);
    close(fd);
    return rc;
}

/* ------------------------------------------------------------ layers */

static int whiteouts(struct archive *a, int rootfd, const char *layer)
{
    struct archive_entry *e;
    int r;
    char rel[PATH_MAX];
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        const char *name = archive_entry_pathname(e);
        if (clean_path(name, rel, sizeof(rel)) < 0) {
            FAIL("layer %s: entry '%.200s' escapes the root (absolute or ..)", layer, name ? name : "");
            return -1;
        }
        const char *slash = strrchr(rel, '/');
        const char *base = slash ? slash + 1 : rel;
        if (strncmp(base, ".wh.", 4) != 0)
            continue;
        const char *leaf;
        int pfd = open_parent(rootfd, rel, 0, &leaf);
        if (pfd < 0) {
            if (errno == ENOENT)
                continue; /* nothing below to hide */
            FAIL("layer %s: whiteout '%.200s': %s", layer, rel, errno == ELOOP ? "goes through a symlink"
                                                                              : strerror(errno));
            return -1;
        }
        int rc;
        if (!strcmp(base, ".wh..wh..opq")) {
            rc = clear_dir(pfd);
        } else {
            const char *victim = base + 4;
            if (!*victim || !strcmp(victim, ".") || !strcmp(victim, "..") || !strncmp(victim, ".wh.", 4)) {
                close(pfd);
                FAIL("layer %s: invalid whiteout '%.200s'", layer, rel);
                return -1;
            }
            rc = rm_at(pfd, victim);
        }
        close(pfd);
        if (rc < 0) {
            FAIL("layer %s: whiteout '%.200s': %s", layer, rel, strerror(errno));
            return -1;
        }
    }
    if (r != ARCHIVE_EOF) {
        FAIL("layer %s: %s", layer, archive_error_string(a));
        return -1;
    }
    return 0;
}

static void set_owner_time(struct archive_entry *e, int pfd, const char *leaf)
{
    /* As root the owner is applied; as another user EPERM is expected. */
    if (fchownat(pfd, leaf, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) < 0 &&
        errno != EPERM)
        return;
    struct timespec ts[2] = {{.tv_sec = archive_entry_mtime(e), .tv_nsec = 0},
                             {.tv_sec = archive_entry_mtime(e), .tv_nsec = 0}};
    utimensat(pfd, leaf, ts, AT_SYMLINK_NOFOLLOW);
}

static int apply_entry(struct imp *im, struct archive *a, struct archive_entry *e, int rootfd, const char *layer,
                       const char *rel)
{
    mode_t type = archive_entry_filetype(e);
    mode_t perm = archive_entry_perm(e) & 07777;
    const char *hl = archive_entry_hardlink(e);
    if (!hl && (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK)) {
        im->devices++;
        return 0;
    }
    if (perm & (S_ISUID | S_ISGID)) {
        im->setids++;
        perm &= (mode_t)~(S_ISUID | S_ISGID);
    }
    int64_t sz = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
    if (sz > im->max_bytes - im->bytes) {
        FAIL("unpacked size over the cap of %" PRId64 " bytes (--max-size)", im->max_bytes);
        return -1;
    }
    const char *leaf;
    int pfd = open_parent(rootfd, rel, 1, &leaf);
    if (pfd < 0) {
        FAIL("layer %s: entry '%.200s': %s", layer, rel,
             errno == ELOOP ? "a parent is a symlink" : errno == ENOTDIR ? "a parent is not a directory"
                                                                        : strerror(errno));
        return -1;
    }
    int rc = -1;
    struct stat st;
    int exists = fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!hl && type == AE_IFDIR) {
        if (exists && !S_ISDIR(st.st_mode) && unlinkat(pfd, leaf, 0) < 0)
            goto err;
        if ((!exists || !S_ISDIR(st.st_mode)) && mkdirat(pfd, leaf, 0700) < 0)
            goto err;
        set_owner_time(e, pfd, leaf);
        if (fchmodat(pfd, leaf, perm, 0) < 0)
            goto err;
        rc = 0;
        goto out;
    }
    if (exists && rm_at(pfd, leaf) < 0)
        goto err;
    if (hl) {
        char t[PATH_MAX];
        if (clean_path(hl, t, sizeof(t)) < 0 || !t[0]) {
            FAIL("layer %s: hard link '%.200s' -> '%.200s' escapes the root", layer, rel, hl);
            goto out;
        }
        const char *tl;
        int tp = open_parent(rootfd, t, 0, &tl);
        struct stat ts;
        if (tp < 0 || fstatat(tp, tl, &ts, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(ts.st_mode)) {
            if (tp >= 0)
                close(tp);
            FAIL("layer %s: hard link '%.200s' -> '%.200s': no such file in the image", layer, rel, hl);
            goto out;
        }
        int lr = linkat(tp, tl, pfd, leaf, 0);
        close(tp);
        if (lr < 0)
            goto err;
        rc = 0;
    } else if (type == AE_IFREG) {
        int fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
            goto err;
        if (copy_data(im, a, fd, rel) < 0) {
            close(fd);
            goto out;
        }
        if (fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0 && errno != EPERM) {
            close(fd);
            goto err;
        }
        if (fchmod(fd, perm) < 0) {
            close(fd);
            goto err;
        }
        struct timespec ts[2] = {{.tv_sec = archive_entry_mtime(e)}, {.tv_sec = archive_entry_mtime(e)}};
        futimens(fd, ts);
        if (close(fd) < 0)
            goto err;
        rc = 0;
    } else if (type == AE_IFLNK) {
        const char *tg = archive_entry_symlink(e);
        if (!tg || !*tg || strlen(tg) >= PATH_MAX) {
            FAIL("layer %s: symlink '%.200s' has no valid target", layer, rel);
            goto out;
        }
        /* A target may point anywhere: inside a sandbox "/" is the image.
         * Here nothing ever follows it (see open_parent). */
        if (symlinkat(tg, pfd, leaf) < 0)
            goto err;
        set_owner_time(e, pfd, leaf);
        rc = 0;
    } else if (type == AE_IFIFO) {
        if (mkfifoat(pfd, leaf, perm) < 0)
            goto err;
        set_owner_time(e, pfd, leaf);
        fchmodat(pfd, leaf, perm, 0);
        rc = 0;
    } else {
        FAIL("layer %s: entry '%.200s' has an unknown type", layer, rel);
        goto out;
    }
    goto out;
err:
    FAIL("layer %s: entry '%.200s': %s", layer, rel, strerror(errno));
out:
    close(pfd);
    return rc;
}

static int apply_layer(struct imp *im, int layoutfd, const char *blob, int rootfd)
{
    /* Pass 1: whiteouts (they hide what lower layers put there, never what
     * this layer adds, whatever the order inside the tar). */
    int fd = -1;
    struct archive *a = tar_open(layoutfd, blob, &fd);
    if (!a) {
        FAIL("layer %s: cannot open", blob);
        return -1;
    }
    int rc = whiteouts(a, rootfd, blob);
    archive_read_free(a);
    close(fd);
    if (rc < 0)
        return -1;
    /* Pass 2: the entries. */
    a = tar_open(layoutfd, blob, &fd);
    if (!a)
        return -1;
    struct archive_entry *e;
    int r;
    char rel[PATH_MAX];
    while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
        const char *name = archive_entry_pathname(e);
        if (clean_path(name, rel, sizeof(rel)) < 0) {
            FAIL("layer %s: entry '%.200s' escapes the root", blob, name ? name : "");
            rc = -1;
            break;
        }
        if (!rel[0])
            continue; /* the root itself */
        const char *slash = strrchr(rel, '/');
        if (!strncmp(slash ? slash + 1 : rel, ".wh.", 4))
            continue;
        if (++im->entries > IMP_MAX_ENTRIES) {
            FAIL("more than %d entries", IMP_MAX_ENTRIES);
            rc = -1;
            break;
        }
        if (apply_entry(im, a, e, rootfd, blob, rel) < 0) {
            rc = -1;
            break;
        }
    }
    if (rc == 0 && r != ARCHIVE_EOF) {
        FAIL("layer %s: %s", blob, archive_error_string(a));
        rc = -1;
    }
    archive_read_free(a);
    close(fd);
    return rc;
}

/* ------------------------------------------------------------ formats */

struct plan {
    char format[16];   /* "oci" or "docker-archive" */
    char digest[72];   /* the image digest: OCI manifest, docker config (image id) */
    char config[72];
    char *layers[IMP_MAX_LAYERS]; /* paths below the layout */
    char layer_digest[IMP_MAX_LAYERS][72];
    size_t nlayers;
    json_t *command;   /* config.Entrypoint + config.Cmd, or NULL (image_cmd.c) */
};

static void plan_free(struct plan *p)
{
    json_decref(p->command);
    for (size_t i = 0; i < p->nlayers; i++)
        free(p->layers[i]);
}

static int is_index_type(const char *mt)
{
    return mt && (!strcmp(mt, "application/vnd.oci.image.index.v1+json") ||
                  !strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json"));
}

/* The manifest descriptor of an index: the only one, else linux/amd64. */
static json_t *pick_manifest(json_t *index)
{
    json_t *ms = json_object_get(index, "manifests");
    if (!json_is_array(ms) || json_array_size(ms) == 0)
        return NULL;
    if (json_array_size(ms) == 1)
        return json_array_get(ms, 0);
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m)
    {
        json_t *pf = json_object_get(m, "platform");
        const char *os = json_string_value(json_object_get(pf, "os"));
        const char *arch = json_string_value(json_object_get(pf, "architecture"));
        if (os && arch && !strcmp(os, "linux") && !strcmp(arch, "amd64"))
            return m;
    }
    return NULL;
}

/* The image's own command from its config (already verified against its digest). */
static int plan_command(const json_t *cfg, struct plan *p)
{
    char why[200];
    if (!json_is_object(cfg)) {
        FAIL("config %s: not a JSON object", p->config);
        return -1;
    }
    if (eai_images_command_from_config(cfg, &p->command, why, sizeof(why)) < 0) {
        FAIL("config %s: %s", p->config, why);
        return -1;
    }
    return 0;
}

static int plan_oci(int layoutfd, struct plan *p)
{
    json_t *lay = load_json_at(layoutfd, "oci-layout");
    const char *ver = json_string_value(json_object_get(lay, "imageLayoutVersion"));
    if (!ver || strcmp(ver, "1.0.0") != 0) {
        json_decref(lay);
        FAIL("oci-layout: imageLayoutVersion is not 1.0.0");
        return -1;
    }
    json_decref(lay);
    json_t *index = load_json_at(layoutfd, "index.json");
    if (!index) {
        FAIL("index.json: missing or invalid");
        return -1;
    }
    json_t *manifest = NULL;
    int rc = -1;
    char path[PATH_MAX], dg[72];
    json_t *cur = index;
    for (int depth = 0; depth < 3; depth++) {
        json_t *desc = pick_manifest(cur);
        if (!desc) {
            FAIL("index: no manifest (or several and none for linux/amd64)");
            goto out;
        }
        const char *mt = json_string_value(json_object_get(desc, "mediaType"));
        if (verify_descriptor(layoutfd, desc, path, sizeof(path), dg) < 0)
            goto out;
        json_t *j = load_json_at(layoutfd, path);
        if (!j) {
            FAIL("manifest %s: not JSON", dg);
            goto out;
        }
        const char *inner = json_string_value(json_object_get(j, "mediaType"));
        int nested = is_index_type(mt) || is_index_type(inner) || json_is_array(json_object_get(j, "manifests"));
        if (cur != index)
            json_decref(cur); /* desc and mt belonged to it */
        if (nested) {
            cur = j;
            continue;
        }
        manifest = j;
        cur = index;
        break;
    }
    if (cur != index)
        json_decref(cur);
    if (!manifest) {
        FAIL("index: nested too deep");
        goto out;
    }
    snprintf(p->format, sizeof(p->format), "oci");
    snprintf(p->digest, sizeof(p->digest), "%s", dg);
    if (verify_descriptor(layoutfd, json_object_get(manifest, "config"), path, sizeof(path), p->config) < 0)
        goto out;
    json_t *cfg = load_json_at(layoutfd, path);
    int crc = plan_command(cfg, p);
    json_decref(cfg);
    if (crc < 0)
        goto out;
    json_t *layers = json_object_get(manifest, "layers");
    if (!json_is_array(layers) || json_array_size(layers) > IMP_MAX_LAYERS) {
        FAIL("manifest %s: layers missing or more than %d", p->digest, IMP_MAX_LAYERS);
        goto out;
    }
    size_t i;
    json_t *l;
    json_array_foreach(layers, i, l)
    {
        const char *mt = json_string_value(json_object_get(l, "mediaType"));
        if (mt && (strstr(mt, "nondistributable") || strstr(mt, "foreign"))) {
            FAIL("layer %zu: media type %s is not in the archive", i, mt);
            goto out;
        }
        if (verify_descriptor(layoutfd, l, path, sizeof(path), p->layer_digest[p->nlayers]) < 0)
            goto out;
        if (!(p->layers[p->nlayers] = strdup(path)))
            goto out;
        p->nlayers++;
    }
    rc = 0;
out:
    json_decref(manifest);
    json_decref(index);
    return rc;
}

static int plan_docker(int layoutfd, const char *ref, struct plan *p)
{
    json_t *mf = load_json_at(layoutfd, "manifest.json");
    int rc = -1;
    json_t *cfg = NULL;
    if (!json_is_array(mf) || json_array_size(mf) == 0) {
        FAIL("manifest.json: not a non-empty array");
        goto out;
    }
    json_t *ent = json_array_get(mf, 0);
    if (json_array_size(mf) > 1) { /* several images: the one tagged like the import, else refuse */
        ent = NULL;
        size_t i, k;
        json_t *m, *t;
        json_array_foreach(mf, i, m)
        {
            json_array_foreach(json_object_get(m, "RepoTags"), k, t)
            {
                const char *s = json_string_value(t);
                size_t sl = s ? strlen(s) : 0, rl = strlen(ref);
                if (s && sl >= rl && !strcmp(s + sl - rl, ref))
                    ent = m;
            }
        }
        if (!ent) {
            FAIL("manifest.json: %zu images and none tagged %s", json_array_size(mf), ref);
            goto out;
        }
    }
    const char *cpath = json_string_value(json_object_get(ent, "Config"));
    json_t *layers = json_object_get(ent, "Layers");
    char rel[PATH_MAX];
    if (!cpath || clean_path(cpath, rel, sizeof(rel)) < 0 || !rel[0]) {
        FAIL("manifest.json: invalid Config");
        goto out;
    }
    int64_t size;
    if (file_sha256(layoutfd, rel, p->config, &size) < 0) {
        FAIL("config %s: %s", rel, strerror(errno));
        goto out;
    }
    /* The config is named after its digest (<hex>.json, or blobs/sha256/<hex>). */
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    char hex[65];
    snprintf(hex, sizeof(hex), "%.64s", base);
    if (!hex64(hex) || strcmp(hex, p->config + 7) != 0) {
        FAIL("config %s: content hashes to %s", rel, p->config);
        goto out;
    }
    cfg = load_json_at(layoutfd, rel);
    json_t *diff = json_object_get(json_object_get(cfg, "rootfs"), "diff_ids");
    if (!json_is_array(layers) || !json_is_array(diff) || json_array_size(layers) != json_array_size(diff) ||
        json_array_size(layers) > IMP_MAX_LAYERS) {
        FAIL("manifest.json Layers and config rootfs.diff_ids differ (or over %d layers)", IMP_MAX_LAYERS);
        goto out;
    }
    if (plan_command(cfg, p) < 0)
        goto out;
    snprintf(p->format, sizeof(p->format), "docker-archive");
    snprintf(p->digest, sizeof(p->digest), "%s", p->config);
    size_t i;
    json_t *l;
    json_array_foreach(layers, i, l)
    {
        const char *lp = json_string_value(l), *want = json_string_value(json_array_get(diff, i));
        if (!lp || clean_path(lp, rel, sizeof(rel)) < 0 || !rel[0] || !want) {
            FAIL("manifest.json: invalid layer %zu", i);
            goto out;
        }
        char got[72];
        if (file_sha256(layoutfd, rel, got, &size) < 0) {
            FAIL("layer %s: %s", rel, strerror(errno));
            goto out;
        }
        if (strcmp(got, want) != 0) {
            FAIL("layer %s: content hashes to %s, config says %.80s", rel, got, want);
            goto out;
        }
        snprintf(p->layer_digest[p->nlayers], 72, "%s", got);
        if (!(p->layers[p->nlayers] = strdup(rel)))
            goto out;
        p->nlayers++;
    }
    rc = 0;
out:
    json_decref(cfg);
    json_decref(mf);
    return rc;
}

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
    if (eai_dynlib_open(&la_lib) < 0) {
        fprintf(stderr, "images import: libarchive is needed (Debian: libarchive13): %s\n", la_lib.err);
        return 1;
    }
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
        if (unpack_outer(&im, src, layoutfd) < 0)
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
        if (plan_oci(layoutfd, &plan) < 0)
            goto out;
    } else if (fstatat(layoutfd, "manifest.json", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        char want[2 * EAI_IMAGE_PART_MAX + 2];
        snprintf(want, sizeof(want), "%s:%s", name, tag);
        if (plan_docker(layoutfd, want, &plan) < 0)
            goto out;
    } else {
        fprintf(stderr, "images import: %s is neither an OCI image layout (oci-layout, index.json) nor a "
                        "docker save archive (manifest.json)\n", src);
        goto out;
    }
    for (size_t i = 0; i < plan.nlayers; i++) {
        fprintf(stderr, "images import: layer %zu/%zu %s\n", i + 1, plan.nlayers, plan.layer_digest[i]);
        if (apply_layer(&im, layoutfd, plan.layers[i], rootfd) < 0)
            goto out;
    }
    close(layoutfd);
    layoutfd = -1;
    snprintf(p, sizeof(p), "%s/archive", tmp);
    if (eai_images_rm_tree(p) < 0)
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
    plan_free(&plan);
    eai_images_rm_tree(tmp); /* the failed import, or the replaced image after --force */
    if (rc != 0 && made_namedir)
        rmdir(namedir); /* only when empty */
    return rc;
}
