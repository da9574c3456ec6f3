/*
 * Bundle files shared by the gVisor and Kata backends (docs/gvisor.md,
 * docs/kata.md).  Everything here runs on worker threads, never on the loop.
 *
 *   <dir>/config.json
 *   <dir>/tmp/        a host tmpfs of job->disk_bytes, bound at /tmp
 *
 * Input files are written into that tmpfs walking with openat(O_NOFOLLOW)
 * from the tmpfs root: a symlink is never followed on the host.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <jansson.h>
#include <linux/magic.h>

#include "eai_pc.h"

/* ------------------------------------------------------------ paths */

int eai_pc_tmp_path_valid(const char *p)
{
    if (!p || strncmp(p, "/tmp/", 5) != 0 || strlen(p) > EAI_PC_MAX_PATH_BYTES)
        return 0;
    const char *s = p + 5;
    if (!*s)
        return 0;
    for (;;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || n > EAI_PC_MAX_NAME_BYTES || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        if (!e)
            return 1;
        s = e + 1;
    }
}

/* ------------------------------------------------------------ bundles */

int eai_pc_bundle_tmpfs(const char *dir, int64_t disk_bytes, int *mounted, char *msg, size_t msglen)
{
    char p[PATH_MAX + 32];
    if (mkdir(dir, 0700) < 0) {
        return eai_pc_fail(msg, msglen, "mkdir %s: %s", dir, strerror(errno));
    }
    snprintf(p, sizeof(p), "%s/tmp", dir);
    if (mkdir(p, 0755) < 0) {
        return eai_pc_fail(msg, msglen, "mkdir %s: %s", p, strerror(errno));
    }
    int64_t disk = disk_bytes > 0 ? disk_bytes : EAI_PC_DEFAULT_DISK;
    char opts[128];
    snprintf(opts, sizeof(opts), "size=%lld,mode=1777,nr_inodes=%lld", (long long)disk,
             (long long)(disk / 4096 > 1024 ? disk / 4096 : 1024));
    if (mount("eai-tmp", p, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
        return eai_pc_fail(msg, msglen, "mount tmpfs on %s: %s", p, strerror(errno));
    }
    *mounted = 1;
    return 0;
}

/* Write one input file below the tmpfs root, creating directories owned by
 * the sandbox uid; never follows a symlink. */
static int put_file(int rootfd, const char *path, const unsigned char *data, size_t len, unsigned uid)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path + 5); /* below /tmp/ */
    int dfd = dup(rootfd);
    if (dfd < 0)
        return -1;
    char *s = buf;
    for (;;) {
        char *slash = strchr(s, '/');
        if (!slash)
            break;
        *slash = '\0';
        if (mkdirat(dfd, s, 0755) == 0) {
            if (fchownat(dfd, s, uid, uid, AT_SYMLINK_NOFOLLOW) < 0) {
                close(dfd);
                return -1;
            }
        } else if (errno != EEXIST) {
            close(dfd);
            return -1;
        }
        int nfd = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dfd);
        if (nfd < 0)
            return -1;
        dfd = nfd;
        s = slash + 1;
    }
    /* written beside under a name of its own, then renamed over the target:
     * a write that fails (the tmpfs full) leaves the old file or nothing,
     * never an empty or cut one (issue 36) */
    static _Atomic unsigned seq;
    char tmp[64];
    snprintf(tmp, sizeof(tmp), ".eai-put-%d-%u", (int)getpid(), ++seq);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        close(dfd);
        errno = e;
        return -1;
    }
    int rc = eai_write_all(fd, data, len);
    if (rc == 0 && fchown(fd, uid, uid) < 0)
        rc = -1;
    if (close(fd) < 0)
        rc = -1;
    if (rc == 0 && renameat(dfd, tmp, dfd, s) < 0)
        rc = -1;
    if (rc < 0) {
        int e = errno;
        unlinkat(dfd, tmp, 0);
        errno = e;
    }
    close(dfd);
    return rc;
}

int eai_pc_write_inputs(const char *dir, unsigned uid, const struct eai_iso_job *job, char *msg, size_t msglen)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/tmp", dir);
    int rootfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0) {
        return eai_pc_fail(msg, msglen, "open %s: %s", p, strerror(errno));
    }
    /* only into the sandbox's tmpfs: a write racing the end of a session
     * (its tmpfs unmounted) must not land on the data directory's disk */
    struct statfs sf;
    if (fstatfs(rootfd, &sf) < 0 || sf.f_type != TMPFS_MAGIC) {
        close(rootfd);
        eai_pc_fail(msg, msglen, "%s is not the sandbox's tmpfs (gone)", p);
        errno = ENOENT;
        return -1;
    }
    for (size_t i = 0; i < job->nfiles; i++) {
        const struct eai_iso_file *f = &job->files[i];
        if (!eai_pc_tmp_path_valid(f->path) || put_file(rootfd, f->path, f->data, f->len, uid) < 0) {
            int e = eai_pc_tmp_path_valid(f->path) ? errno : EINVAL;
            snprintf(msg, msglen, "input file %s: %s", f->path ? f->path : "(null)",
                     e != EINVAL ? strerror(e) : "invalid path");
            close(rootfd);
            errno = e; /* the caller tells ENOSPC, ENOTDIR... apart */
            return -1;
        }
    }
    close(rootfd);
    return 0;
}

/* ------------------------------------------------------------ probe */

/* A minimal static ELF that calls exit(0): the probe's whole root fs. */
#if defined(__x86_64__)
static const unsigned char pc_true_elf[] = {
    0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    2, 0, 0x3e, 0, 1, 0, 0, 0, 0x78, 0, 0x40, 0, 0, 0, 0, 0,            /* x86-64, entry 0x400078 */
    0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                  /* phoff 64, shoff 0 */
    0, 0, 0, 0, 0x40, 0, 0x38, 0, 1, 0, 0, 0, 0, 0, 0, 0,               /* ehsize, phentsize, phnum 1 */
    1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                     /* PT_LOAD, R+X, offset 0 */
    0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0,               /* vaddr, paddr 0x400000 */
    0x81, 0, 0, 0, 0, 0, 0, 0, 0x81, 0, 0, 0, 0, 0, 0, 0,               /* filesz, memsz */
    0, 0x10, 0, 0, 0, 0, 0, 0,                                          /* align */
    0xb8, 0x3c, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05,                        /* exit(0) */
};
#elif defined(__aarch64__)
static const unsigned char pc_true_elf[] = {
    0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    2, 0, 0xb7, 0, 1, 0, 0, 0, 0x78, 0, 0x40, 0, 0, 0, 0, 0,
    0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0x40, 0, 0x38, 0, 1, 0, 0, 0, 0, 0, 0, 0,
    1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0,
    0x84, 0, 0, 0, 0, 0, 0, 0, 0x84, 0, 0, 0, 0, 0, 0, 0,
    0, 0x10, 0, 0, 0, 0, 0, 0,
    0xa8, 0x0b, 0x80, 0xd2, 0x00, 0x00, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4,
};
#else
#error "isolation probe: no tiny ELF for this architecture"
#endif

int eai_pc_probe_bundle(const char *dir, unsigned uid, const char *cgroups_path, char *msg, size_t msglen)
{
    char p[PATH_MAX + 32];
    static const char *const sub[] = {"", "/rootfs", "/rootfs/proc", "/rootfs/dev", "/rootfs/tmp", "/rootfs/sys"};
    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", dir, sub[i]);
        /* chmod: the sandbox user must traverse it whatever eaid's umask (077) */
        if ((mkdir(p, 0755) < 0 && errno != EEXIST) || chmod(p, 0755) < 0) {
            return eai_pc_fail(msg, msglen, "mkdir %s: %s", p, strerror(errno));
        }
    }
    snprintf(p, sizeof(p), "%s/rootfs/true", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0755);
    if (fd < 0 || eai_write_all(fd, pc_true_elf, sizeof(pc_true_elf)) < 0 || fchmod(fd, 0755) < 0) {
        snprintf(msg, msglen, "write %s: %s", p, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    char rootfs[PATH_MAX + 16];
    snprintf(rootfs, sizeof(rootfs), "%s/rootfs", dir);
    json_t *spec = json_pack(
        "{s:s, s:{s:b, s:{s:i, s:i}, s:[s], s:[s], s:s, s:{s:[], s:[], s:[], s:[], s:[]}, s:b},"
        " s:{s:s, s:b}, s:[{s:s, s:s, s:s}], s:{s:[{s:s},{s:s},{s:s},{s:s},{s:s}]}}",
        "ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", (int)uid, "gid", (int)uid, "args", "/true",
        "env", "PATH=/", "cwd", "/", "capabilities", "bounding", "effective", "inheritable", "permitted",
        "ambient", "noNewPrivileges", 1, "root", "path", rootfs, "readonly", 1, "mounts", "destination", "/proc",
        "type", "proc", "source", "proc", "linux", "namespaces", "type", "pid", "type", "network", "type", "ipc",
        "type", "uts", "type", "mount");
    if (spec && cgroups_path &&
        json_object_set_new(json_object_get(spec, "linux"), "cgroupsPath", json_string(cgroups_path)) < 0) {
        json_decref(spec);
        spec = NULL;
    }
    if (!spec) {
        return eai_pc_fail(msg, msglen, "cannot build probe config.json");
    }
    snprintf(p, sizeof(p), "%s/config.json", dir);
    int jrc = json_dump_file(spec, p, JSON_COMPACT);
    json_decref(spec);
    if (jrc != 0) {
        return eai_pc_fail(msg, msglen, "write %s failed", p);
    }
    return 0;
}

int eai_pc_bundle_remove(const char *dir)
{
    char p[PATH_MAX + 8];
    snprintf(p, sizeof(p), "%s/tmp", dir);
    if (umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
        return -1;
    return eai_rm_tree(dir);
}
