/*
 * File collection after a run (gVisor and Kata backends): job->collect
 * paths are read from the bundle's tmpfs walking with openat(O_NOFOLLOW)
 * from the tmpfs root, so a symlink the sandbox left behind is never
 * followed on the host.  Worker threads only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eai_pc.h"

struct collect_state {
    const struct eai_iso_job *job;
    struct eai_pc_collect_result *r;
    size_t cap;
    int64_t total;
    int64_t max_files, max_file, max_total;
};

static void add_file(struct collect_state *cs, int dirfd, const char *name, const char *vpath)
{
    struct eai_pc_collect_result *r = cs->r;
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
        if (n > 100000) { /* a directory bomb: stop listing */
            cs->r->truncated = 1;
            break;
        }
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
        } else if (S_ISDIR(st.st_mode) && depth < EAI_PC_COLLECT_DEPTH) {
            int sub = openat(dirfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                walk_dir(cs, sub, vp, depth + 1);
        } else if (S_ISDIR(st.st_mode)) {
            cs->r->truncated = 1; /* deeper than the depth cap: left out, and said so */
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

void eai_pc_collect(const char *dir, int mounted, const struct eai_iso_job *job, struct eai_pc_collect_result *out)
{
    memset(out, 0, sizeof(*out));
    if (!mounted || !job->collect)
        return;
    struct collect_state cs = {
        .job = job,
        .r = out,
        .max_files = job->collect_max_files > 0 ? job->collect_max_files : EAI_PC_COLLECT_FILES,
        .max_file = job->collect_max_file_bytes > 0 ? job->collect_max_file_bytes : EAI_PC_COLLECT_FILE_BYTES,
        .max_total = job->collect_max_total_bytes > 0 ? job->collect_max_total_bytes : EAI_PC_COLLECT_TOTAL_BYTES,
    };
    char p[PATH_MAX + 8];
    snprintf(p, sizeof(p), "%s/tmp", dir);
    int rootfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd < 0)
        return;
    for (size_t i = 0; job->collect[i]; i++) {
        const char *c = job->collect[i];
        if (!strcmp(c, "/tmp") || !strcmp(c, "/tmp/")) { /* /tmp itself, as documented */
            /* a fresh open file description: its own directory offset */
            int sub = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (sub >= 0)
                walk_dir(&cs, sub, "/tmp", 0);
        } else if (eai_pc_tmp_path_valid(c)) {
            collect_one(&cs, rootfd, c);
        }
    }
    close(rootfd);
}

void eai_pc_collect_free(struct eai_pc_collect_result *r)
{
    for (size_t i = 0; i < r->nfiles; i++) {
        free(r->files[i].path);
        free(r->files[i].data);
    }
    free(r->files);
    memset(r, 0, sizeof(*r));
}
