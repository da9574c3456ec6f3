/*
 * Cgroups of the Kata backend (docs/kata.md), on worker threads only.
 *
 * Our cgroup <cgpath> = eai-kata/<hash of work_dir>/<cid> is made before the
 * task and outlives it: the runtime creates and removes <cgpath>/task, and
 * hierarchical usage stays readable in <cgpath> until we remove it.
 * Works on cgroup v1 (memory + cpuacct, hybrid hosts included) and v2.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "eai_pc.h"
#include "kata.h"

int kt_cgroup_create(const struct eai_pc_bundle *b, char *msg, size_t msglen)
{
    char dir[PATH_MAX];
    if (b->cg_v2) {
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", b->cgpath);
        if (eai_mkdir_p(dir, 0755) < 0)
            goto fail;
        static const char *const ctrls[] = {"+memory", "+cpu", "+pids", NULL};
        eai_pc_cg2_enable(b->cgpath, ctrls, 1); /* for children along the path and the task's */
        return 0;
    }
    static const char *const ctrls[] = {"memory", "cpuacct"};
    for (size_t i = 0; i < sizeof(ctrls) / sizeof(ctrls[0]); i++) {
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s/%s", ctrls[i], b->cgpath);
        if (eai_mkdir_p(dir, 0755) < 0)
            goto fail;
    }
    return 0;
fail:
    return eai_pc_fail(msg, msglen, "cgroup %s: %s", b->cgpath, strerror(errno));
}

void kt_cgroup_stats(const struct eai_pc_bundle *b, struct eai_pc_stats *st)
{
    char dir[PATH_MAX], buf[4096];
    memset(st, 0, sizeof(*st));
    if (b->cg_v2) {
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", b->cgpath);
        if (eai_pc_cg_read(dir, "cpu.stat", buf, sizeof(buf)) == 0) {
            long long us = eai_pc_cg_key(buf, "usage_usec");
            st->cpu_seconds = us > 0 ? (double)us / 1e6 : 0;
        }
        if (eai_pc_cg_read(dir, "memory.peak", buf, sizeof(buf)) == 0)
            st->peak_mb = (double)atoll(buf) / (1024.0 * 1024.0);
        return;
    }
    snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory/%s", b->cgpath);
    if (eai_pc_cg_read(dir, "memory.max_usage_in_bytes", buf, sizeof(buf)) == 0)
        st->peak_mb = (double)atoll(buf) / (1024.0 * 1024.0);
    snprintf(dir, sizeof(dir), "/sys/fs/cgroup/cpuacct/%s", b->cgpath);
    if (eai_pc_cg_read(dir, "cpuacct.usage", buf, sizeof(buf)) == 0)
        st->cpu_seconds = (double)atoll(buf) / 1e9;
}

/* Remove dir's subdirectories depth first, then dir. */
static int cg_remove_tree(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char sub[PATH_MAX + 300];
        snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
        if (depth < 8 && cg_remove_tree(sub, depth + 1) < 0)
            rc = -1;
    }
    closedir(d);
    if (eai_pc_cg_kill_rmdir(dir) < 0)
        rc = -1;
    return rc;
}

int kt_cgroup_remove(const char *cgpath, int cg_v2)
{
    char dir[PATH_MAX];
    if (cg_v2) {
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", cgpath);
        return cg_remove_tree(dir, 0);
    }
    /* The runtime creates <cgpath>/task in every v1 hierarchy (and the v2
     * one of a hybrid host); after a killed run they may stay. */
    DIR *d = opendir("/sys/fs/cgroup");
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue; /* symlinks such as cpu -> cpu,cpuacct are skipped */
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s/%s", e->d_name, cgpath);
        if (cg_remove_tree(dir, 0) < 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

void kt_cgroup_rmdir_parent(const char *cg_parent, int cg_v2)
{
    char dir[PATH_MAX], up[PATH_MAX];
    snprintf(up, sizeof(up), "%s", cg_parent);
    char *slash = strchr(up, '/');
    if (slash)
        *slash = '\0';
    if (cg_v2) {
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", cg_parent);
        rmdir(dir);
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", up);
        rmdir(dir);
        return;
    }
    DIR *d = opendir("/sys/fs/cgroup");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_type != DT_DIR || e->d_name[0] == '.')
            continue;
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s/%s", e->d_name, cg_parent);
        rmdir(dir); /* only when empty: never anyone's live cgroup */
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s/%s", e->d_name, up);
        rmdir(dir);
    }
    closedir(d);
}

