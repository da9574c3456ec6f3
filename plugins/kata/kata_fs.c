/*
 * Container layout, OCI spec, cgroup and file collection for the Kata
 * backend.  Everything here runs on worker threads (host->work_submit),
 * never on the loop.  Same layout as the gVisor backend (docs/kata.md):
 *
 *   <work_dir>/<cid>/config.json  the spec given to `ctr run --config`
 *   <work_dir>/<cid>/tmp/         a host tmpfs of job->disk_bytes, bound at /tmp
 *
 * Input files are written into that tmpfs before start and collected from it
 * after exit, walking with openat(O_NOFOLLOW) from the tmpfs root: a symlink
 * the sandbox left behind is never followed on the host.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "kata.h"

#define KT_DEFAULT_DISK (64LL << 20)
#define KT_DEFAULT_PIDS 128
#define KT_NOFILE 1024
#define KT_COLLECT_FILES 100
#define KT_COLLECT_FILE_BYTES (10LL << 20)
#define KT_COLLECT_TOTAL_BYTES (50LL << 20)
#define KT_COLLECT_DEPTH 16

/* ------------------------------------------------------------ paths */

int kt_tmp_path_valid(const char *p)
{
    if (!p || strncmp(p, "/tmp/", 5) != 0 || strlen(p) > 4095)
        return 0;
    const char *s = p + 5;
    if (!*s)
        return 0;
    for (;;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || n > 255 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        if (!e)
            return 1;
        s = e + 1;
    }
}

static int write_all(int fd, const void *d, size_t n)
{
    const char *p = d;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
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
    int fd = openat(dfd, s, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    close(dfd);
    if (fd < 0)
        return -1;
    int rc = write_all(fd, data, len);
    if (fchown(fd, uid, uid) < 0)
        rc = -1;
    if (close(fd) < 0)
        rc = -1;
    return rc;
}

/* ------------------------------------------------------------ OCI spec */

static int env_has(const char *const *env, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], key, k) && env[i][k] == '=')
            return 1;
    return 0;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* The OCI spec handed to `ctr run --config`: containerd takes it as is
 * (no image config, no snapshot), the Kata shim (or the stand-in's runc)
 * applies it.  Read-only root straight from the image store, our tmpfs
 * bound at /tmp, no capabilities, noNewPrivileges, an unprivileged uid,
 * a network namespace with loopback only (no CNI), memory/cpu/pids limits
 * and a cgroup below ours so usage can be read after the task is gone. */
static json_t *spec_new(const struct kt_bundle *b, const struct eai_iso_job *job)
{
    json_t *args = json_array(), *env = json_array();
    if (!args || !env)
        goto fail;
    for (size_t i = 0; job->argv[i]; i++)
        if (json_array_append_new(args, json_string(job->argv[i])) < 0)
            goto fail;
    for (size_t i = 0; job->env && job->env[i]; i++) {
        const char *eq = strchr(job->env[i], '=');
        if (eq && eq != job->env[i] && json_array_append_new(env, json_string(job->env[i])) < 0)
            goto fail;
    }
    if (!env_has(job->env, "PATH"))
        json_array_append_new(env, json_string("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
    if (!env_has(job->env, "HOME"))
        json_array_append_new(env, json_string("HOME=/tmp"));
    if (!env_has(job->env, "LANG"))
        json_array_append_new(env, json_string("LANG=C.UTF-8"));
    if (job->traceparent && *job->traceparent && !env_has(job->env, "TRACEPARENT")) {
        char tp[256];
        snprintf(tp, sizeof(tp), "TRACEPARENT=%s", job->traceparent);
        json_array_append_new(env, json_string(tp));
    }
    if (json_array_size(args) == 0)
        goto fail;

    int64_t pids = job->pids > 0 ? job->pids : KT_DEFAULT_PIDS;
    int64_t disk = job->disk_bytes > 0 ? job->disk_bytes : KT_DEFAULT_DISK;
    char tmpsrc[PATH_MAX + 8], shm_opt[64];
    snprintf(tmpsrc, sizeof(tmpsrc), "%s/tmp", b->dir);
    snprintf(shm_opt, sizeof(shm_opt), "size=%lldk", (long long)((disk / 2 + 1023) / 1024));

    json_t *caps = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective", "inheritable",
                             "permitted", "ambient");
    json_t *rl = json_pack("[{s:s, s:i, s:i}]", "type", "RLIMIT_NOFILE", "hard", KT_NOFILE, "soft", KT_NOFILE);
    json_t *process = json_pack("{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:o, s:b}", "terminal", 0, "user", "uid",
                                (int)b->uid, "gid", (int)b->uid, "args", args, "env", env, "cwd", "/tmp",
                                "capabilities", caps, "rlimits", rl, "noNewPrivileges", 1);
    args = env = NULL;
    if (!process)
        return NULL;
    json_t *mounts = json_pack(
        "[{s:s, s:s, s:s, s:[s,s,s]},"
        " {s:s, s:s, s:s, s:[s,s,s,s]},"
        " {s:s, s:s, s:s, s:[s,s,s,s,s,s]},"
        " {s:s, s:s, s:s, s:[s,s,s,s,s]},"
        " {s:s, s:s, s:s, s:[s,s,s]},"
        " {s:s, s:s, s:s, s:[s,s,s,s]},"
        " {s:s, s:s, s:s, s:[s,s,s,s]}]",
        "destination", "/proc", "type", "proc", "source", "proc", "options", "nosuid", "noexec", "nodev",
        "destination", "/dev", "type", "tmpfs", "source", "tmpfs", "options", "nosuid", "strictatime", "mode=755",
        "size=65536k",
        "destination", "/dev/pts", "type", "devpts", "source", "devpts", "options", "nosuid", "noexec",
        "newinstance", "ptmxmode=0666", "mode=0620", "gid=5",
        "destination", "/dev/shm", "type", "tmpfs", "source", "shm", "options", "nosuid", "nodev", "noexec",
        "mode=1777", shm_opt,
        "destination", "/dev/mqueue", "type", "mqueue", "source", "mqueue", "options", "nosuid", "noexec", "nodev",
        "destination", "/sys", "type", "sysfs", "source", "sysfs", "options", "nosuid", "noexec", "nodev", "ro",
        "destination", "/tmp", "type", "bind", "source", tmpsrc, "options", "rbind", "rw", "nosuid", "nodev");
    json_t *res = json_pack("{s:[{s:b, s:s}], s:{s:I}}", "devices", "allow", 0, "access", "rwm", "pids", "limit",
                            (json_int_t)pids);
    if (res && job->memory_bytes > 0) {
        json_t *mem = json_pack("{s:I}", "limit", (json_int_t)job->memory_bytes);
        /* No swap escape where swap is accounted (v1 memsw; v2 runc ignores
         * swap == limit when memory.swap.max does not exist). */
        if (mem && (b->cg_v2 || file_exists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes")))
            json_object_set_new(mem, "swap", json_integer((json_int_t)job->memory_bytes));
        json_object_set_new(res, "memory", mem);
    }
    if (res && job->cpu_millis > 0) {
        int64_t quota = job->cpu_millis * 100;
        if (quota < 1000)
            quota = 1000;
        json_object_set_new(res, "cpu", json_pack("{s:I, s:I}", "quota", (json_int_t)quota, "period", 100000));
    }
    char cgp[256];
    snprintf(cgp, sizeof(cgp), "/%s/task", b->cgpath);
    json_t *masked = json_pack("[s,s,s,s,s,s,s,s,s,s]", "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
                               "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
                               "/sys/firmware", "/proc/scsi");
    json_t *ro = json_pack("[s,s,s,s,s,s]", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
                           "/sys/fs/cgroup");
    json_t *linux_ = json_pack("{s:[{s:s},{s:s},{s:s},{s:s},{s:s}], s:o, s:s, s:o, s:o}", "namespaces", "type", "pid",
                               "type", "network", "type", "ipc", "type", "uts", "type", "mount", "resources",
                               res ? res : json_object(), "cgroupsPath", cgp, "maskedPaths",
                               masked ? masked : json_array(), "readonlyPaths", ro ? ro : json_array());
    json_t *spec = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2", "process", process,
                             "root", "path", b->rootfs, "readonly", 1, "hostname", "sandbox", "mounts",
                             mounts ? mounts : json_array(), "linux", linux_ ? linux_ : json_object());
    if (spec && (!mounts || !linux_ || !res || !masked || !ro)) {
        json_decref(spec);
        spec = NULL;
    }
    return spec;
fail:
    json_decref(args);
    json_decref(env);
    return NULL;
}

/* ------------------------------------------------------------ bundles */

int kt_bundle_prepare(struct kt_bundle *b, const struct eai_iso_job *job, char *msg, size_t msglen)
{
    char p[PATH_MAX + 32];
    int rootfd = -1;
    if (mkdir(b->dir, 0700) < 0) {
        snprintf(msg, msglen, "mkdir %s: %s", b->dir, strerror(errno));
        return -1;
    }
    snprintf(p, sizeof(p), "%s/tmp", b->dir);
    if (mkdir(p, 0755) < 0) {
        snprintf(msg, msglen, "mkdir %s: %s", p, strerror(errno));
        return -1;
    }
    int64_t disk = job->disk_bytes > 0 ? job->disk_bytes : KT_DEFAULT_DISK;
    char opts[128];
    snprintf(opts, sizeof(opts), "size=%lld,mode=1777,nr_inodes=%lld", (long long)disk,
             (long long)(disk / 4096 > 1024 ? disk / 4096 : 1024));
    if (mount("eai-tmp", p, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
        snprintf(msg, msglen, "mount tmpfs on %s: %s", p, strerror(errno));
        return -1;
    }
    b->mounted = 1;
    rootfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0) {
        snprintf(msg, msglen, "open %s: %s", p, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < job->nfiles; i++) {
        const struct eai_iso_file *f = &job->files[i];
        if (!kt_tmp_path_valid(f->path) || put_file(rootfd, f->path, f->data, f->len, b->uid) < 0) {
            snprintf(msg, msglen, "input file %s: %s", f->path ? f->path : "(null)",
                     kt_tmp_path_valid(f->path) ? strerror(errno) : "invalid path");
            close(rootfd);
            return -1;
        }
    }
    close(rootfd);
    json_t *spec = spec_new(b, job);
    if (!spec) {
        snprintf(msg, msglen, "cannot build config.json");
        return -1;
    }
    snprintf(p, sizeof(p), "%s/config.json", b->dir);
    int jrc = json_dump_file(spec, p, JSON_COMPACT);
    json_decref(spec);
    if (jrc != 0) {
        snprintf(msg, msglen, "write %s failed", p);
        return -1;
    }
    b->cg_made = 1;
    return kt_cgroup_create(b, msg, msglen);
}

/* A minimal static ELF that calls exit(0): the probe's whole root fs. */
#if defined(__x86_64__)
static const unsigned char kt_true_elf[] = {
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
static const unsigned char kt_true_elf[] = {
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
#error "kata probe: no tiny ELF for this architecture"
#endif

int kt_probe_bundle(const char *dir, unsigned uid, char *msg, size_t msglen)
{
    char p[PATH_MAX + 32];
    static const char *const sub[] = {"", "/rootfs", "/rootfs/proc", "/rootfs/dev", "/rootfs/tmp", "/rootfs/sys"};
    for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", dir, sub[i]);
        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
            snprintf(msg, msglen, "mkdir %s: %s", p, strerror(errno));
            return -1;
        }
    }
    snprintf(p, sizeof(p), "%s/rootfs/true", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0755);
    if (fd < 0 || write_all(fd, kt_true_elf, sizeof(kt_true_elf)) < 0 || fchmod(fd, 0755) < 0) {
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
    if (!spec) {
        snprintf(msg, msglen, "cannot build probe config.json");
        return -1;
    }
    snprintf(p, sizeof(p), "%s/config.json", dir);
    int jrc = json_dump_file(spec, p, JSON_COMPACT);
    json_decref(spec);
    if (jrc != 0) {
        snprintf(msg, msglen, "write %s failed", p);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ removal */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    int r = (flag == FTW_DP) ? rmdir(p) : unlink(p);
    return (r < 0 && errno != ENOENT) ? -1 : 0;
}

int kt_rm_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

int kt_bundle_remove(const char *dir)
{
    char p[PATH_MAX + 8];
    snprintf(p, sizeof(p), "%s/tmp", dir);
    if (umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
        return -1;
    return kt_rm_tree(dir);
}

/* ------------------------------------------------------------ collect */

struct collect_state {
    const struct eai_iso_job *job;
    struct kt_collect_result *r;
    size_t cap;
    int64_t total;
    int64_t max_files, max_file, max_total;
};

static void add_file(struct collect_state *cs, int dirfd, const char *name, const char *vpath)
{
    struct kt_collect_result *r = cs->r;
    for (size_t i = 0; i < r->nfiles; i++) /* overlapping collect paths */
        if (!strcmp(r->files[i].path, vpath))
            return;
    if ((int64_t)r->nfiles >= cs->max_files) {
        r->truncated = 1;
        return;
    }
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return;
    }
    if (st.st_size > cs->max_file || cs->total + st.st_size > cs->max_total) {
        r->truncated = 1;
        close(fd);
        return;
    }
    size_t want = (size_t)st.st_size;
    unsigned char *data = malloc(want ? want : 1);
    char *vp = strdup(vpath);
    if (!data || !vp) {
        free(data);
        free(vp);
        close(fd);
        return;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, data + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (r->nfiles == cs->cap) {
        size_t ncap = cs->cap ? cs->cap * 2 : 8;
        struct eai_iso_collected *nf = realloc(r->files, ncap * sizeof(*nf));
        if (!nf) {
            free(data);
            free(vp);
            return;
        }
        r->files = nf;
        cs->cap = ncap;
    }
    r->files[r->nfiles].path = vp;
    r->files[r->nfiles].data = data;
    r->files[r->nfiles].len = got;
    r->nfiles++;
    cs->total += (int64_t)got;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* dirfd is owned by this call. */
static void walk_dir(struct collect_state *cs, int dirfd, const char *vdir, int depth)
{
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **nn = realloc(names, nc * sizeof(*nn));
            if (!nn)
                break;
            names = nn;
            cap = nc;
        }
        if (!(names[n] = strdup(e->d_name)))
            break;
        n++;
        if (n > 100000) /* a directory bomb: stop listing */
            break;
    }
    qsort(names, n, sizeof(*names), name_cmp); /* stable, deterministic order */
    for (size_t i = 0; i < n; i++) {
        char vp[4096];
        if (snprintf(vp, sizeof(vp), "%s/%s", vdir, names[i]) >= (int)sizeof(vp))
            continue;
        struct stat st;
        if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG(st.st_mode)) {
            add_file(cs, dirfd, names[i], vp);
        } else if (S_ISDIR(st.st_mode) && depth < KT_COLLECT_DEPTH) {
            int sub = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                walk_dir(cs, sub, vp, depth + 1);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
}

static void collect_one(struct collect_state *cs, int rootfd, const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path + 5);
    int dfd = dup(rootfd);
    if (dfd < 0)
        return;
    char *s = buf;
    for (;;) {
        char *slash = strchr(s, '/');
        if (!slash)
            break;
        *slash = '\0';
        int nfd = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dfd);
        if (nfd < 0)
            return;
        dfd = nfd;
        s = slash + 1;
    }
    struct stat st;
    if (fstatat(dfd, s, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISREG(st.st_mode)) {
            add_file(cs, dfd, s, path);
        } else if (S_ISDIR(st.st_mode)) {
            int sub = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                walk_dir(cs, sub, path, 0);
        }
    }
    close(dfd);
}

void kt_collect(const struct kt_bundle *b, const struct eai_iso_job *job, struct kt_collect_result *out)
{
    memset(out, 0, sizeof(*out));
    if (!b->mounted || !job->collect)
        return;
    struct collect_state cs = {
        .job = job,
        .r = out,
        .max_files = job->collect_max_files > 0 ? job->collect_max_files : KT_COLLECT_FILES,
        .max_file = job->collect_max_file_bytes > 0 ? job->collect_max_file_bytes : KT_COLLECT_FILE_BYTES,
        .max_total = job->collect_max_total_bytes > 0 ? job->collect_max_total_bytes : KT_COLLECT_TOTAL_BYTES,
    };
    char p[PATH_MAX + 8];
    snprintf(p, sizeof(p), "%s/tmp", b->dir);
    int rootfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0)
        return;
    for (size_t i = 0; job->collect[i]; i++)
        if (kt_tmp_path_valid(job->collect[i]))
            collect_one(&cs, rootfd, job->collect[i]);
    close(rootfd);
}

void kt_collect_free(struct kt_collect_result *r)
{
    for (size_t i = 0; i < r->nfiles; i++) {
        free(r->files[i].path);
        free(r->files[i].data);
    }
    free(r->files);
    memset(r, 0, sizeof(*r));
}
