/*
 * Cgroup file primitives shared by the gVisor and Kata backends.  Worker
 * threads only (cgroupfs reads and the rmdir retries may block briefly).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "eai_pc.h"

int eai_pc_cg_write(const char *dir, const char *file, const char *val)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = eai_write_all(fd, val, strlen(val));
    close(fd);
    return rc;
}

int eai_pc_cg_read(const char *dir, const char *file, char *buf, size_t len)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t r = read(fd, buf, len - 1);
    close(fd);
    if (r < 0)
        return -1;
    buf[r] = '\0';
    return 0;
}

long long eai_pc_cg_key(const char *text, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, key, k) && p[k] == ' ')
            return atoll(p + k + 1);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

/* SIGKILL each pid listed in <dir>/cgroup.procs; 1 when it listed any,
 * 0 when empty, -1 when unreadable. */
static int kill_listed(const char *dir)
{
    char buf[4096];
    if (eai_pc_cg_read(dir, "cgroup.procs", buf, sizeof(buf)) < 0)
        return -1;
    int any = 0;
    for (char *p = buf; *p;) {
        pid_t pid = (pid_t)atoi(p);
        if (pid > 1) {
            kill(pid, SIGKILL);
            any = 1;
        }
        p = strchr(p, '\n');
        if (!p)
            break;
        p++;
    }
    return any;
}

int eai_pc_cg_kill(const char *dir, int wait_ms)
{
    eai_pc_cg_write(dir, "cgroup.kill", "1"); /* v2, 5.14+: the whole subtree at once */
    /* killed processes leave within a few ms: look every 1 ms at first
     * (this wait is on the path of every execution's end), then every 10 */
    for (int waited = 0;;) {
        int rc = kill_listed(dir);
        if (rc <= 0)
            return rc < 0 && errno != ENOENT ? -1 : 0;
        if (waited >= wait_ms)
            return -1;
        int step = waited < 30 ? 1 : 10;
        struct timespec ts = {0, step * 1000 * 1000};
        nanosleep(&ts, NULL);
        waited += step;
    }
}

int eai_pc_cg_kill_rmdir(const char *dir)
{
    /* up to ~5 s: under load the sandbox's last processes can take a while
     * to leave the leaf after the run exits */
    for (int tries = 0; tries < 250; tries++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY)
            return -1;
        char buf[4096];
        if (eai_pc_cg_read(dir, "cgroup.procs", buf, sizeof(buf)) == 0) {
            for (char *p = buf; *p;) {
                pid_t pid = (pid_t)atoi(p);
                if (pid > 1)
                    kill(pid, SIGKILL);
                p = strchr(p, '\n');
                if (!p)
                    break;
                p++;
            }
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

void eai_pc_cg2_enable(const char *cgpath, const char *const *ctrls, int leaf_too)
{
    char p[PATH_MAX] = "/sys/fs/cgroup";
    char rel[256];
    snprintf(rel, sizeof(rel), "%s", cgpath);
    char *save = NULL;
    for (char *t = strtok_r(rel, "/", &save);; t = strtok_r(NULL, "/", &save)) {
        if (!t && !leaf_too)
            break;
        for (size_t i = 0; ctrls[i]; i++)
            eai_pc_cg_write(p, "cgroup.subtree_control", ctrls[i]);
        if (!t)
            break;
        size_t n = strlen(p);
        snprintf(p + n, sizeof(p) - n, "/%s", t);
    }
}
