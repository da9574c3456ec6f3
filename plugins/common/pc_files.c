/* File operations on a live sandbox's host tmpfs (<dir>/tmp, bound at /tmp
 * inside): the session file API (docs/sessions.md).  Worker threads only.
 * Every walk starts at the tmpfs root and opens each component with
 * O_NOFOLLOW: a symlink the sandbox made is never followed on the host. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "eai_pc.h"

#define PC_LIST_DEPTH 16

static int open_root(const char *dir)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/tmp", dir);
    return open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* The directory holding the last component of path (under /tmp/), opened
 * without following symlinks; *base points at that component in buf. */
static int open_parent(int rootfd, const char *path, char *buf, size_t buflen, char **base)
{
    snprintf(buf, buflen, "%s", path + 5); /* below /tmp/ */
    int dfd = dup(rootfd);
    char *s = buf;
    for (char *slash; dfd >= 0 && (slash = strchr(s, '/'));) {
        *slash = '\0';
        int nfd = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(dfd);
        errno = e == ELOOP ? ENOENT : e;
        dfd = nfd;
        s = slash + 1;
    }
    *base = s;
    return dfd;
}

/* The checks and walk every file operation starts with: path valid (else
 * EINVAL), the tmpfs root of dir, then the directory holding path's last
 * component (open_parent); buf holds the copy *base points into. */
static int open_parent_of(const char *dir, const char *path, char *buf, size_t buflen, char **base)
{
    if (!eai_pc_tmp_path_valid(path)) {
        errno = EINVAL;
        return -1;
    }
    int rootfd = open_root(dir);
    if (rootfd < 0)
        return -1;
    int dfd = open_parent(rootfd, path, buf, buflen, base);
    int e = errno;
    close(rootfd);
    errno = e;
    return dfd;
}

int eai_pc_tmp_put(const char *dir, unsigned uid, const char *path, const unsigned char *data, size_t len,
                   char *msg, size_t msglen)
{
    struct eai_iso_file f = {.path = path, .data = data, .len = len};
    struct eai_iso_job job;
    memset(&job, 0, sizeof(job));
    job.size = sizeof(job);
    job.files = &f;
    job.nfiles = 1;
    return eai_pc_write_inputs(dir, uid, &job, msg, msglen);
}

int eai_pc_tmp_get(const char *dir, const char *path, int64_t max, unsigned char **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    char buf[PATH_MAX], *base;
    int dfd = open_parent_of(dir, path, buf, sizeof(buf), &base);
    if (dfd < 0)
        return -1;
    int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    int e = errno;
    close(dfd);
    struct stat st;
    if (fd < 0) {
        errno = e == ELOOP ? ENOENT : e;
        return -1;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = ENOENT;
        return -1;
    }
    if (max > 0 && st.st_size > max) {
        close(fd);
        errno = EFBIG;
        return -1;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    unsigned char *d = malloc(cap);
    while (d) {
        ssize_t r = read(fd, d + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (max > 0 && (int64_t)n > max) { /* grew while we read */
            free(d);
            d = NULL;
            errno = EFBIG;
            break;
        }
        if (n == cap) {
            unsigned char *nd = realloc(d, cap * 2);
            if (!nd) {
                free(d);
                d = NULL;
                break;
            }
            d = nd;
            cap *= 2;
        }
    }
    e = errno;
    close(fd);
    if (!d) {
        errno = e ? e : ENOMEM;
        return -1;
    }
    *out = d;
    *outlen = n;
    return 0;
}

int eai_pc_tmp_delete(const char *dir, const char *path)
{
    char buf[PATH_MAX], *base;
    int dfd = open_parent_of(dir, path, buf, sizeof(buf), &base);
    if (dfd < 0)
        return -1;
    int rc = unlinkat(dfd, base, 0);
    if (rc < 0 && (errno == EISDIR || errno == EPERM))
        rc = unlinkat(dfd, base, AT_REMOVEDIR);
    int e = errno;
    close(dfd);
    errno = e;
    return rc;
}

static void list_dir(int dfd, const char *vdir, int depth, json_t *out, size_t max)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) && json_array_size(out) < max) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char vpath[PATH_MAX];
        int n = snprintf(vpath, sizeof(vpath), "%s/%s", vdir, de->d_name);
        if (n < 0 || (size_t)n >= sizeof(vpath))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        const char *type = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir" : S_ISLNK(st.st_mode) ? "symlink" : "other";
        json_array_append_new(out, json_pack("{s:s, s:I, s:s}", "path", vpath, "size",
                                             (json_int_t)(S_ISREG(st.st_mode) ? st.st_size : 0), "type", type));
        if (S_ISDIR(st.st_mode) && depth < PC_LIST_DEPTH) {
            int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                list_dir(sub, vpath, depth + 1, out, max);
        }
    }
    closedir(d);
}

int eai_pc_tmp_list(const char *dir, const char *path, size_t max, json_t **out)
{
    *out = NULL;
    int top = !strcmp(path, "/tmp") || !strcmp(path, "/tmp/");
    int dfd;
    if (top) {
        dfd = open_root(dir);
        if (dfd < 0)
            return -1;
    } else {
        char buf[PATH_MAX], *base;
        int pfd = open_parent_of(dir, path, buf, sizeof(buf), &base);
        if (pfd < 0)
            return -1;
        dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(pfd);
        if (dfd < 0) {
            errno = e == ELOOP ? ENOTDIR : e;
            return -1;
        }
    }
    json_t *a = json_array();
    if (!a) {
        close(dfd);
        errno = ENOMEM;
        return -1;
    }
    char vdir[PATH_MAX];
    snprintf(vdir, sizeof(vdir), "%s", top ? "/tmp" : path);
    list_dir(dfd, vdir, 0, a, max);
    *out = a;
    return 0;
}
