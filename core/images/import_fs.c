/* `eaid images import`: paths relative to a directory fd, never through a
 * symlink; digests of files; verified blobs; JSON documents (import_int.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "images/import_int.h"

/* ------------------------------------------------------------ paths */

/* Tar entry name -> clean relative path ("a/b/c"): leading "./" dropped,
 * empty and "." components dropped.  -1 for an absolute path or a ".."
 * component; 0 with out = "" for the root itself. */
int imp_clean_path(const char *in, char *out, size_t len)
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
int imp_open_parent(int rootfd, const char *rel, int create, const char **leaf)
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
int imp_rm_at(int dirfd, const char *name)
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
        if (imp_rm_at(fd, e->d_name) < 0)
            rc = -1;
    }
    closedir(d);
    if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
        rc = -1;
    return rc;
}

/* Empty the directory fd (opaque whiteout). */
int imp_clear_dir(int fd)
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
        if (imp_rm_at(fd, e->d_name) < 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

/* ------------------------------------------------------------ digests */

int imp_hex64(const char *s)
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
int imp_file_sha256(int dirfd, const char *rel, char out[72], int64_t *size)
{
    const char *leaf;
    int pfd = imp_open_parent(dirfd, rel, 0, &leaf);
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
int imp_verify_descriptor(int layoutfd, json_t *desc, char *path, size_t len, char digest[72])
{
    const char *dg = json_string_value(json_object_get(desc, "digest"));
    json_t *sz = json_object_get(desc, "size");
    if (!dg || strncmp(dg, "sha256:", 7) || !imp_hex64(dg + 7)) {
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
    if (imp_file_sha256(layoutfd, path, got, &size) < 0) {
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

json_t *imp_load_json_at(int dirfd, const char *rel)
{
    const char *leaf;
    int pfd = imp_open_parent(dirfd, rel, 0, &leaf);
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
