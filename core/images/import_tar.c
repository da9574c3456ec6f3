/* `eaid images import`: libarchive, opened at the first import; the outer
 * archive unpacked, each layer applied with its whiteouts (import_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "base/dynlib.h"
#include "images/import_int.h"

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

int imp_archive_load(void)
{
    if (eai_dynlib_open(&la_lib) < 0) {
        fprintf(stderr, "images import: libarchive is needed (Debian: libarchive13): %s\n", la_lib.err);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ tar reading */

/* A layer tar (any compression libarchive knows) at dirfd/rel; *fdp is the
 * file, to close after archive_read_free. */
static struct archive *tar_open(int dirfd, const char *rel, int *fdp)
{
    const char *leaf;
    int pfd = imp_open_parent(dirfd, rel, 0, &leaf);
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
int imp_unpack_outer(struct imp *im, const char *archive_path, int dirfd)
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
        if (imp_clean_path(name, rel, sizeof(rel)) < 0) {
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
        int pfd = imp_open_parent(dirfd, rel, 1, &leaf);
        if (pfd < 0) {
            FAIL("archive entry '%.200s': %s", rel, strerror(errno));
            goto out;
        }
        int ok = 0;
        if (archive_entry_hardlink(e)) {
            char t[PATH_MAX];
            if (imp_clean_path(archive_entry_hardlink(e), t, sizeof(t)) == 0 && t[0]) {
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
        int fp = imp_open_parent(dirfd, from, 1, &fl);
        int tp = imp_open_parent(dirfd, to, 0, &tl);
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
        if (imp_clean_path(name, rel, sizeof(rel)) < 0) {
            FAIL("layer %s: entry '%.200s' escapes the root (absolute or ..)", layer, name ? name : "");
            return -1;
        }
        const char *slash = strrchr(rel, '/');
        const char *base = slash ? slash + 1 : rel;
        if (strncmp(base, ".wh.", 4) != 0)
            continue;
        const char *leaf;
        int pfd = imp_open_parent(rootfd, rel, 0, &leaf);
        if (pfd < 0) {
            if (errno == ENOENT)
                continue; /* nothing below to hide */
            FAIL("layer %s: whiteout '%.200s': %s", layer, rel, errno == ELOOP ? "goes through a symlink"
                                                                              : strerror(errno));
            return -1;
        }
        int rc;
        if (!strcmp(base, ".wh..wh..opq")) {
            rc = imp_clear_dir(pfd);
        } else {
            const char *victim = base + 4;
            if (!*victim || !strcmp(victim, ".") || !strcmp(victim, "..") || !strncmp(victim, ".wh.", 4)) {
                close(pfd);
                FAIL("layer %s: invalid whiteout '%.200s'", layer, rel);
                return -1;
            }
            rc = imp_rm_at(pfd, victim);
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
    int pfd = imp_open_parent(rootfd, rel, 1, &leaf);
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
    if (exists && imp_rm_at(pfd, leaf) < 0)
        goto err;
    if (hl) {
        char t[PATH_MAX];
        if (imp_clean_path(hl, t, sizeof(t)) < 0 || !t[0]) {
            FAIL("layer %s: hard link '%.200s' -> '%.200s' escapes the root", layer, rel, hl);
            goto out;
        }
        const char *tl;
        int tp = imp_open_parent(rootfd, t, 0, &tl);
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

int imp_apply_layer(struct imp *im, int layoutfd, const char *blob, int rootfd)
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
        if (imp_clean_path(name, rel, sizeof(rel)) < 0) {
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
