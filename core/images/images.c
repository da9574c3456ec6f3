/*
 * The local image store (docs/images.md):
 *
 *   <image_dir>/<name>/<tag>/rootfs      the root filesystem, read-only for sandboxes
 *   <image_dir>/<name>/<tag>/meta.json   {name, tag, digest, created, source, suite, packages, shim,
 *                                         command (image_cmd.c)}
 *
 * `eaid images build NAME[:TAG] --packages P,...` runs mmdebstrap
 * (--variant=essential, Debian bookworm) into a hidden directory beside the
 * final one, installs the statx shim as /etc/ld.so.preload, writes
 * meta.json, then renames the whole tag directory into place, so a reader
 * sees either no image or a complete one.  This is CLI code: it blocks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "images/images.h"
#include "images/images_int.h"
#include "base/util.h"

extern char **environ;

#define EAI_IMAGE_SUITE "bookworm"
/* What every built image says about where it runs: nothing. */
#define EAI_IMAGE_HOSTNAME "sandbox"
#define EAI_IMAGE_RESOLV "# eai-sandbox: sandboxes have no network and no resolver\n"

/* ------------------------------------------------------------ references */

static int part_valid(const char *s, size_t n)
{
    if (n == 0 || n > EAI_IMAGE_PART_MAX || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
        if (c == '.' && i + 1 < n && s[i + 1] == '.')
            return 0;
    }
    return 1;
}

int eai_images_ref_split(const char *ref, char name[EAI_IMAGE_PART_MAX + 1], char tag[EAI_IMAGE_PART_MAX + 1])
{
    if (!ref)
        return -1;
    const char *colon = strchr(ref, ':');
    size_t nlen = colon ? (size_t)(colon - ref) : strlen(ref);
    const char *t = colon ? colon + 1 : "latest";
    size_t tlen = strlen(t);
    if (!part_valid(ref, nlen) || !part_valid(t, tlen) || strchr(t, ':'))
        return -1;
    memcpy(name, ref, nlen);
    name[nlen] = '\0';
    memcpy(tag, t, tlen);
    tag[tlen] = '\0';
    return 0;
}

int eai_images_resolve(const char *image_dir, const char *ref, char *rootfs, size_t len)
{
    char name[EAI_IMAGE_PART_MAX + 1], tag[EAI_IMAGE_PART_MAX + 1], path[PATH_MAX];
    if (!image_dir || !*image_dir || eai_images_ref_split(ref, name, tag) < 0)
        return -1;
    int n = snprintf(path, sizeof(path), "%s/%s/%s/rootfs", image_dir, name, tag);
    if (n < 0 || (size_t)n >= sizeof(path) || (size_t)n >= len)
        return -1;
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return -1;
    memcpy(rootfs, path, (size_t)n + 1);
    return 0;
}

static int run_wait(char *const argv[])
{
    pid_t pid;
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -1;
    /* The command's chatter goes to stderr: stdout carries the result. */
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "images: cannot run %s: %s\n", argv[0], strerror(rc));
        return -1;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

int eai_images_copy_file(const char *src, const char *dst, mode_t mode)
{
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (out < 0) {
        close(in);
        return -1;
    }
    char buf[65536];
    ssize_t r;
    int rc = 0;
    while ((r = read(in, buf, sizeof(buf))) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = -1;
            break;
        }
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                rc = -1;
                break;
            }
            off += w;
        }
        if (rc)
            break;
    }
    close(in);
    if (fchmod(out, mode) < 0)
        rc = -1;
    if (close(out) < 0)
        rc = -1;
    return rc;
}

int eai_images_write_text(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    int rc = (w == (ssize_t)n) ? 0 : -1;
    if (close(fd) < 0)
        rc = -1;
    return rc;
}

int eai_images_add_mountpoints(const char *rootfs)
{
    char d[PATH_MAX + 16], f[PATH_MAX + 32];
    struct stat st;
    snprintf(d, sizeof(d), "%s" EAI_IMAGE_LAUNCHER_DIR, rootfs);
    snprintf(f, sizeof(f), "%s" EAI_IMAGE_LAUNCHER_PATH, rootfs);
    if (lstat(d, &st) < 0 && mkdir(d, 0755) < 0)
        return -1;
    if (lstat(d, &st) < 0 || !S_ISDIR(st.st_mode) || chmod(d, 0755) < 0) {
        errno = errno ? errno : ENOTDIR;
        return -1;
    }
    int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0755);
    if (fd < 0)
        return -1;
    int rc = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fchmod(fd, 0755) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The statx shim built next to eaid (see tools/images/). */
int eai_images_find_shim(char *out, size_t len)
{
    const char *env = getenv("EAI_STATX_SHIM");
    if (env && *env) {
        snprintf(out, len, "%s", env);
        return file_exists(out) ? 0 : -1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    static const char *const rel[] = {"", "/..", "/../lib/eai", "/plugins"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        int k = snprintf(out, len, "%s%s/" EAI_IMAGE_SHIM_NAME, exe, rel[i]);
        if (k > 0 && (size_t)k < len && file_exists(out))
            return 0;
    }
    return -1;
}

/* ------------------------------------------------------------ digest */

struct digest_ctx {
    EVP_MD_CTX *md;
    size_t prefix;
    int failed;
};
static struct digest_ctx *g_digest; /* nftw has no user pointer; CLI is single-threaded */

static int digest_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct path_list {
    char **v;
    size_t n, cap;
};
static struct path_list *g_paths;

static int collect_path(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    if (g_paths->n == g_paths->cap) {
        size_t cap = g_paths->cap ? g_paths->cap * 2 : 1024;
        char **v = realloc(g_paths->v, cap * sizeof(*v));
        if (!v)
            return -1;
        g_paths->v = v;
        g_paths->cap = cap;
    }
    char *d = strdup(p);
    if (!d)
        return -1;
    g_paths->v[g_paths->n++] = d;
    return 0;
}

static void digest_entry(const char *p)
{
    struct digest_ctx *c = g_digest;
    struct stat st;
    if (lstat(p, &st) < 0) {
        c->failed = 1;
        return;
    }
    char hdr[PATH_MAX + 128];
    int n = snprintf(hdr, sizeof(hdr), "%s\n%o %u %u %lld\n", p + c->prefix, (unsigned)st.st_mode,
                     (unsigned)st.st_uid, (unsigned)st.st_gid,
                     S_ISREG(st.st_mode) ? (long long)st.st_size : 0LL);
    EVP_DigestUpdate(c->md, hdr, (size_t)n);
    if (S_ISLNK(st.st_mode)) {
        char t[PATH_MAX];
        ssize_t k = readlink(p, t, sizeof(t));
        if (k > 0)
            EVP_DigestUpdate(c->md, t, (size_t)k);
    } else if (S_ISREG(st.st_mode)) {
        int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
            c->failed = 1;
            return;
        }
        char buf[65536];
        ssize_t r;
        while ((r = read(fd, buf, sizeof(buf))) > 0)
            EVP_DigestUpdate(c->md, buf, (size_t)r);
        close(fd);
    }
}

/* "sha256:<hex>" over the sorted tree: path, mode, owner, size, content or
 * link target.  Timestamps are left out so equal trees hash equal. */
static int tree_digest(const char *root, char out[80])
{
    struct path_list pl = {0};
    struct digest_ctx c = {.md = EVP_MD_CTX_new(), .prefix = strlen(root)};
    int rc = -1;
    if (!c.md || EVP_DigestInit_ex(c.md, EVP_sha256(), NULL) != 1)
        goto out;
    g_paths = &pl;
    if (nftw(root, collect_path, 32, FTW_PHYS | FTW_MOUNT) != 0)
        goto out;
    qsort(pl.v, pl.n, sizeof(*pl.v), digest_cmp);
    g_digest = &c;
    for (size_t i = 0; i < pl.n && !c.failed; i++)
        digest_entry(pl.v[i]);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (c.failed || EVP_DigestFinal_ex(c.md, md, &mdlen) != 1)
        goto out;
    strcpy(out, "sha256:");
    for (unsigned i = 0; i < mdlen && i < 32; i++)
        snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
    rc = 0;
out:
    for (size_t i = 0; i < pl.n; i++)
        free(pl.v[i]);
    free(pl.v);
    EVP_MD_CTX_free(c.md);
    g_paths = NULL;
    g_digest = NULL;
    return rc;
}

int eai_images_place(const char *tmp, const char *final)
{
    struct stat st;
    if (lstat(final, &st) == 0) /* --force: swap atomically; the caller drops the old tree */
        return renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE);
    return rename(tmp, final);
}

/* ------------------------------------------------------------ build */

/* Debian package names: [a-z0-9][a-z0-9.+-]*, comma-separated.  A name
 * starting with '-' would reach mmdebstrap's --include as an option. */
static int packages_valid(const char *list)
{
    if (!list || !*list)
        return 0;
    for (const char *p = list; *p; p++) {
        char c = *p;
        int first = (p == list || p[-1] == ',');
        if (first && !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            return 0;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-' || c == ','))
            return 0;
        if (c == ',' && p[1] == '\0')
            return 0;
    }
    return 1;
}

void eai_images_usage(void)
{
    fprintf(stderr,
            "usage: eaid images build NAME[:TAG] --packages P1,P2,... [--mirror URL] [--force] [--no-shim]\n"
            "         [--cmd JSON]  the image's own command (default: [\"python3\"] or [\"bash\"] when there)\n"
            "       eaid images import NAME[:TAG] ARCHIVE [--force] [--max-size BYTES] [--no-shim]\n"
            "         ARCHIVE: an OCI image layout (directory or tar) or a `docker save` tar\n"
            "       eaid images list\n"
            "       eaid images remove NAME[:TAG]\n"
            "NAME and TAG: lowercase [a-z0-9._-]+; TAG defaults to latest.\n");
}

static int images_build(const char *image_dir, int argc, char **argv)
{
    const char *ref = NULL, *packages = NULL, *mirror = getenv("EAI_IMAGE_MIRROR"), *cmd_arg = NULL;
    int force = 0, shim = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cmd") && i + 1 < argc)
            cmd_arg = argv[++i];
        else if (!strncmp(argv[i], "--cmd=", 6))
            cmd_arg = argv[i] + 6;
        else if (!strcmp(argv[i], "--packages") && i + 1 < argc)
            packages = argv[++i];
        else if (!strncmp(argv[i], "--packages=", 11))
            packages = argv[i] + 11;
        else if (!strcmp(argv[i], "--mirror") && i + 1 < argc)
            mirror = argv[++i];
        else if (!strcmp(argv[i], "--force"))
            force = 1;
        else if (!strcmp(argv[i], "--no-shim"))
            shim = 0;
        else if (!ref && argv[i][0] != '-')
            ref = argv[i];
        else {
            eai_images_usage();
            return 2;
        }
    }
    char name[EAI_IMAGE_PART_MAX + 1], tag[EAI_IMAGE_PART_MAX + 1];
    if (!ref || eai_images_ref_split(ref, name, tag) < 0) {
        fprintf(stderr, "images build: invalid image reference '%s'\n", ref ? ref : "");
        eai_images_usage();
        return 2;
    }
    /* The reference image needs no package list: `eaid images build
     * python:3.11-slim` alone builds Debian bookworm's python3 (3.11). */
    if (!packages && !strcmp(name, "python") && (!strcmp(tag, "3.11-slim") || !strcmp(tag, "3.11")))
        packages = "python3-minimal,libpython3.11-stdlib";
    if (!packages_valid(packages)) {
        fprintf(stderr, "images build: --packages needs a comma-separated list of Debian package names\n");
        return 2;
    }
    if (mirror && (strncmp(mirror, "http://", 7) && strncmp(mirror, "https://", 8) && strncmp(mirror, "file://", 7))) {
        fprintf(stderr, "images build: --mirror must be an http(s):// or file:// URL\n");
        return 2;
    }
    /* --cmd '["python3", "-u"]': the image's own command (image_cmd.c) */
    if (cmd_arg) {
        json_t *cmd = json_loads(cmd_arg, JSON_REJECT_DUPLICATES, NULL);
        int bad = !cmd || eai_images_command_check(cmd) < 0;
        json_decref(cmd);
        if (bad) {
            fprintf(stderr, "images build: --cmd needs a JSON array of 1 to %d non-empty strings, e.g. "
                            "'[\"python3\"]'\n", EAI_IMAGE_CMD_MAX_ARGS);
            return 2;
        }
    }
    char shim_src[PATH_MAX] = "";
    if (shim && eai_images_find_shim(shim_src, sizeof(shim_src)) < 0) {
        fprintf(stderr, "images build: statx shim %s not found (set EAI_STATX_SHIM or pass --no-shim)\n",
                EAI_IMAGE_SHIM_NAME);
        return 1;
    }
    char namedir[PATH_MAX], final[PATH_MAX], tmp[PATH_MAX], rootfs[PATH_MAX], p[PATH_MAX + 64];
    char rnd[17];
    if (eai_random_hex(rnd, 8) < 0)
        return 1;
    snprintf(namedir, sizeof(namedir), "%s/%s", image_dir, name);
    snprintf(final, sizeof(final), "%s/%s", namedir, tag);
    snprintf(tmp, sizeof(tmp), "%s/.build-%s-%s", namedir, tag, rnd);
    snprintf(rootfs, sizeof(rootfs), "%s/rootfs", tmp);
    struct stat st;
    if (!force && lstat(final, &st) == 0) {
        fprintf(stderr, "images build: %s:%s already exists (use --force to rebuild)\n", name, tag);
        return 1;
    }
    if (eai_mkdir_p(namedir, 0755) < 0 || mkdir(tmp, 0755) < 0) {
        fprintf(stderr, "images build: cannot create %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    int rc = 1;
    char include[4096];
    snprintf(include, sizeof(include), "--include=%s", packages);
    char *mm[] = {"mmdebstrap", "--variant=essential", "--quiet", include, "--format=directory",
                  EAI_IMAGE_SUITE, rootfs, (char *)mirror, NULL};
    fprintf(stderr, "images build: mmdebstrap %s %s into %s\n", EAI_IMAGE_SUITE, include, tmp);
    int mrc = run_wait(mm);
    if (mrc != 0) {
        fprintf(stderr, "images build: mmdebstrap failed (exit %d)\n", mrc);
        goto out;
    }
    /* Names never lie: `python` must be the python3 that was installed. */
    snprintf(p, sizeof(p), "%s/usr/bin/python3", rootfs);
    if (file_exists(p)) {
        snprintf(p, sizeof(p), "%s/usr/bin/python", rootfs);
        if (lstat(p, &st) < 0 && symlink("python3", p) < 0) {
            fprintf(stderr, "images build: cannot add python symlink: %s\n", strerror(errno));
            goto out;
        }
    }
    /* mmdebstrap copies the build host's /etc/hostname and /etc/resolv.conf:
     * an image must not tell its sandboxes where it was made. */
    snprintf(p, sizeof(p), "%s/etc/hostname", rootfs);
    unlink(p);
    if (eai_images_write_text(p, EAI_IMAGE_HOSTNAME "\n", 0644) < 0) {
        fprintf(stderr, "images build: cannot write /etc/hostname: %s\n", strerror(errno));
        goto out;
    }
    snprintf(p, sizeof(p), "%s/etc/resolv.conf", rootfs);
    unlink(p);
    if (eai_images_write_text(p, EAI_IMAGE_RESOLV, 0644) < 0) {
        fprintf(stderr, "images build: cannot write /etc/resolv.conf: %s\n", strerror(errno));
        goto out;
    }
    if (eai_images_add_mountpoints(rootfs) < 0) {
        fprintf(stderr, "images build: cannot add the launcher's mount point %s: %s\n", EAI_IMAGE_LAUNCHER_PATH,
                strerror(errno));
        goto out;
    }
    if (shim) {
        snprintf(p, sizeof(p), "%s" EAI_IMAGE_SHIM_PATH, rootfs);
        if (eai_images_copy_file(shim_src, p, 0755) < 0) {
            fprintf(stderr, "images build: cannot install shim: %s\n", strerror(errno));
            goto out;
        }
        snprintf(p, sizeof(p), "%s/etc/ld.so.preload", rootfs);
        if (eai_images_write_text(p, EAI_IMAGE_SHIM_PATH "\n", 0644) < 0) {
            fprintf(stderr, "images build: cannot write ld.so.preload: %s\n", strerror(errno));
            goto out;
        }
    }
    char digest[80];
    if (tree_digest(rootfs, digest) < 0) {
        fprintf(stderr, "images build: cannot hash the rootfs\n");
        goto out;
    }
    char created[32];
    eai_time_rfc3339(eai_now_ms(), created);
    json_t *pk = json_array();
    char *pcopy = strdup(packages);
    if (!pk || !pcopy) {
        json_decref(pk);
        free(pcopy);
        goto out;
    }
    char *save = NULL;
    for (char *t = strtok_r(pcopy, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(pk, json_string(t));
    free(pcopy);
    char source[PATH_MAX + 128];
    snprintf(source, sizeof(source), "mmdebstrap --variant=essential %s%s%s", EAI_IMAGE_SUITE,
             mirror ? " " : "", mirror ? mirror : "");
    json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:b}", "name", name, "tag", tag, "digest",
                             digest, "created", created, "source", source, "suite", EAI_IMAGE_SUITE, "packages",
                             pk, "shim", shim);
    json_t *cmd = cmd_arg ? json_loads(cmd_arg, JSON_REJECT_DUPLICATES, NULL) : eai_images_command_default(rootfs);
    if (!meta) {
        json_decref(cmd);
        goto out;
    }
    if (cmd && json_object_set_new(meta, "command", cmd) < 0) {
        json_decref(meta);
        goto out;
    }
    snprintf(p, sizeof(p), "%s/meta.json", tmp);
    int jrc = json_dump_file(meta, p, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(meta);
    if (jrc != 0) {
        fprintf(stderr, "images build: cannot write meta.json\n");
        goto out;
    }
    if (eai_images_place(tmp, final) < 0) {
        fprintf(stderr, "images build: cannot move %s into place: %s\n", final, strerror(errno));
        goto out;
    }
    printf("{\"image\":\"%s:%s\",\"digest\":\"%s\",\"path\":\"%s\"}\n", name, tag, digest, final);
    rc = 0;
out:
    eai_rm_tree(tmp); /* after an exchange this holds the old image */
    return rc;
}

static int images_list(const char *image_dir)
{
    DIR *d = opendir(image_dir);
    if (!d)
        return errno == ENOENT ? 0 : 1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!part_valid(e->d_name, strlen(e->d_name)))
            continue;
        char nd[PATH_MAX];
        snprintf(nd, sizeof(nd), "%s/%s", image_dir, e->d_name);
        DIR *td = opendir(nd);
        if (!td)
            continue;
        struct dirent *t;
        while ((t = readdir(td))) {
            if (!part_valid(t->d_name, strlen(t->d_name)))
                continue;
            char mp[PATH_MAX + 300];
            snprintf(mp, sizeof(mp), "%s/%s/meta.json", nd, t->d_name);
            json_t *m = json_load_file(mp, 0, NULL);
            if (!m)
                m = json_object();
            if (!m)
                continue;
            char ref[2 * EAI_IMAGE_PART_MAX + 2];
            snprintf(ref, sizeof(ref), "%s:%s", e->d_name, t->d_name);
            json_object_set_new(m, "image", json_string(ref));
            char *s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
            if (s)
                printf("%s\n", s);
            free(s);
            json_decref(m);
        }
        closedir(td);
    }
    closedir(d);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int eai_images_names(const char *image_dir, char *out, size_t len)
{
    char *refs[256];
    int n = 0;
    if (len)
        out[0] = 0;
    DIR *d = opendir(image_dir);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        if (!part_valid(e->d_name, strlen(e->d_name)))
            continue;
        char nd[PATH_MAX];
        snprintf(nd, sizeof(nd), "%s/%s", image_dir, e->d_name);
        DIR *td = opendir(nd);
        if (!td)
            continue;
        struct dirent *t;
        while ((t = readdir(td)) && n < 256) {
            char rp[PATH_MAX + 300];
            struct stat sb;
            snprintf(rp, sizeof(rp), "%s/%s/rootfs", nd, t->d_name);
            if (!part_valid(t->d_name, strlen(t->d_name)) || stat(rp, &sb) != 0 || !S_ISDIR(sb.st_mode))
                continue;
            char ref[2 * EAI_IMAGE_PART_MAX + 2];
            snprintf(ref, sizeof(ref), "%s:%s", e->d_name, t->d_name);
            if ((refs[n] = strdup(ref)))
                n++;
        }
        closedir(td);
    }
    closedir(d);
    qsort(refs, (size_t)n, sizeof refs[0], cmp_str);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        size_t need = strlen(refs[i]) + (i ? 2 : 0);
        if (len > 6 && o + need + 6 < len) {
            o += (size_t)snprintf(out + o, len - o, "%s%s", i ? ", " : "", refs[i]);
        } else if (len > 6 && o + 6 <= len && (i == 0 || strcmp(out + o - 3, "...") != 0)) {
            o += (size_t)snprintf(out + o, len - o, "%s...", i ? ", " : "");
        }
        free(refs[i]);
    }
    return n;
}

static int images_remove(const char *image_dir, int argc, char **argv)
{
    char name[EAI_IMAGE_PART_MAX + 1], tag[EAI_IMAGE_PART_MAX + 1], p[PATH_MAX], rnd[17];
    if (argc != 2 || eai_images_ref_split(argv[1], name, tag) < 0) {
        eai_images_usage();
        return 2;
    }
    char dead[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s/%s", image_dir, name, tag);
    if (eai_random_hex(rnd, 8) < 0)
        return 1;
    snprintf(dead, sizeof(dead), "%s/%s/.dead-%s-%s", image_dir, name, tag, rnd);
    if (rename(p, dead) < 0) {
        fprintf(stderr, "images remove: %s:%s: %s\n", name, tag, strerror(errno));
        return 1;
    }
    return eai_rm_tree(dead) < 0 ? 1 : 0;
}

int eai_images_cli(const char *image_dir, int argc, char **argv)
{
    if (argc < 1 || !image_dir) {
        eai_images_usage();
        return 2;
    }
    if (!strcmp(argv[0], "build"))
        return images_build(image_dir, argc, argv);
    if (!strcmp(argv[0], "import"))
        return eai_images_import(image_dir, argc, argv);
    if (!strcmp(argv[0], "list") && argc == 1)
        return images_list(image_dir);
    if (!strcmp(argv[0], "remove") || !strcmp(argv[0], "rm"))
        return images_remove(image_dir, argc, argv);
    eai_images_usage();
    return 2;
}
