/*
 * Bundle layout, OCI config.json, cgroup leaves and file collection for the
 * gVisor backend.  Everything here runs on worker threads (host->work_submit),
 * never on the loop.
 *
 *   <work_dir>/<cid>/config.json
 *   <work_dir>/<cid>/tmp/        a host tmpfs of job->disk_bytes, bound at /tmp
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

#include "eai_pc.h"
#include "gvisor.h"

#define GV_DEFAULT_DISK EAI_PC_DEFAULT_DISK
#define GV_DEFAULT_PIDS 128
#define GV_NOFILE 1024

/* ------------------------------------------------------------ OCI spec */

static json_t *rlimit(const char *type, int64_t v)
{
    return json_pack("{s:s, s:I, s:I}", "type", type, "hard", (json_int_t)v, "soft", (json_int_t)v);
}

/* The OCI `process` object of a job (also runsc exec's --process file). */
static json_t *process_new(const struct eai_pc_bundle *b, const struct eai_iso_job *job, int supervised)
{
    json_t *args, *env;
    if (eai_pc_oci_args_env(job, &args, &env) < 0)
        return NULL;
    if (supervised) {
        /* the client of the session's supervisor (launcher/eai_launcher_session.c),
         * which starts the job's argv as a child of the sandbox's init */
        json_t *via = json_pack("[s, s, s]", GV_LAUNCHER_PATH, "--run", GV_SES_SOCKET);
        if (!via || json_array_extend(via, args) < 0) {
            json_decref(via);
            json_decref(args);
            json_decref(env);
            return NULL;
        }
        json_decref(args);
        args = via;
    }
    int64_t pids = job->pids > 0 ? job->pids : GV_DEFAULT_PIDS;
    json_t *caps = json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective", "inheritable",
                             "permitted", "ambient");
    json_t *rl = json_pack("[o, o]", rlimit("RLIMIT_NOFILE", GV_NOFILE), rlimit("RLIMIT_NPROC", pids));
    json_t *process = json_pack("{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:o, s:o, s:b}", "terminal", 0, "user", "uid",
                                (int)b->uid, "gid", (int)b->uid, "args", args, "env", env, "cwd", "/tmp",
                                "capabilities", caps, "rlimits", rl, "noNewPrivileges", 1);
    return process;
}

static json_t *spec_new(const struct eai_pc_bundle *b, const struct eai_iso_job *job)
{
    json_t *process = process_new(b, job, 0);
    if (!process)
        return NULL;
    int64_t disk = job->disk_bytes > 0 ? job->disk_bytes : GV_DEFAULT_DISK;
    char tmpsrc[PATH_MAX + 8], shm_opt[64];
    snprintf(tmpsrc, sizeof(tmpsrc), "%s/tmp", b->dir);
    snprintf(shm_opt, sizeof(shm_opt), "size=%lldk", (long long)((disk / 2 + 1023) / 1024));
    json_t *mounts = json_pack(
        "[{s:s, s:s, s:s}, {s:s, s:s, s:s, s:[s,s,s,s]}, {s:s, s:s, s:s, s:[s,s,s,s,s]}, {s:s, s:s, s:s, s:[s,s,s,s]}]",
        "destination", "/proc", "type", "proc", "source", "proc",
        "destination", "/tmp", "type", "bind", "source", tmpsrc, "options", "rbind", "rw", "nosuid", "nodev",
        "destination", "/dev/shm", "type", "tmpfs", "source", "shm", "options", "nosuid", "nodev", "noexec",
        "mode=1777", shm_opt,
        "destination", "/sys", "type", "sysfs", "source", "sysfs", "options", "ro", "nosuid", "nodev", "noexec");
    if (mounts && b->launcher) {
        /* the warm pool's init (gvisor_launcher.c): <work_dir>/launcher.bin */
        char lsrc[PATH_MAX + 32];
        snprintf(lsrc, sizeof(lsrc), "%s", b->dir);
        char *slash = strrchr(lsrc, '/');
        if (slash)
            snprintf(slash + 1, sizeof(lsrc) - (size_t)(slash + 1 - lsrc), "%s", GV_LAUNCHER_FILE);
        json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s,s,s,s]}", "destination", GV_LAUNCHER_PATH,
                                                "type", "bind", "source", lsrc, "options", "bind", "ro", "nosuid",
                                                "nodev"));
    }
    /* tenant volumes (docs/volumes.md): the host directory core mounted,
     * bound straight (gVisor's gofer serves it; --overlay2 overlays the
     * root only), so what the program writes lands in the volume */
    const struct eai_iso_volume *vols;
    size_t nvols = gv_job_volumes(job, &vols);
    for (size_t i = 0; mounts && i < nvols && i < GV_MAX_VOLUMES; i++)
        if (vols[i].host_path && vols[i].path)
            json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s,s,s,s]}", "destination", vols[i].path,
                                                    "type", "bind", "source", vols[i].host_path, "options", "rbind",
                                                    vols[i].read_only ? "ro" : "rw", "nosuid", "nodev"));
    json_t *res = json_object();
    if (res && job->memory_bytes > 0)
        json_object_set_new(res, "memory", json_pack("{s:I}", "limit", (json_int_t)job->memory_bytes));
    if (res && job->cpu_millis > 0)
        json_object_set_new(res, "cpu", eai_pc_oci_cpu(job->cpu_millis));
    char cgp[256];
    snprintf(cgp, sizeof(cgp), "/%s", b->cgpath);
    json_t *linux_ = json_pack("{s:[{s:s},{s:s},{s:s},{s:s},{s:s}], s:o, s:s}", "namespaces", "type", "pid", "type",
                               "network", "type", "ipc", "type", "uts", "type", "mount", "resources",
                               res ? res : json_object(), "cgroupsPath", cgp);
    if (linux_ && gv_job_netns(job)) {
        /* granted egress: gVisor's own network stack in the namespace core
         * made (runsc --network=sandbox copies its eth0 and routes), and
         * core's DNS as the only resolver */
        json_object_set_new(json_array_get(json_object_get(linux_, "namespaces"), 1), "path",
                            json_string(gv_job_netns(job)));
        char rsrc[PATH_MAX + 16];
        snprintf(rsrc, sizeof(rsrc), "%s/resolv.conf", b->dir);
        json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:[s,s,s,s]}", "destination", "/etc/resolv.conf",
                                                "type", "bind", "source", rsrc, "options", "bind", "ro", "nosuid",
                                                "nodev"));
    }
    json_t *spec = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2", "process", process,
                             "root", "path", b->rootfs, "readonly", 1, "hostname", "sandbox", "mounts",
                             mounts ? mounts : json_array(), "linux", linux_ ? linux_ : json_object());
    if (spec && (!mounts || !linux_)) {
        json_decref(spec);
        spec = NULL;
    }
    return spec;
}

/* ------------------------------------------------------------ cgroups */

static int cg_leaf(char *out, size_t len, const char *ctrl, const char *cgpath, int v2)
{
    int n = v2 ? snprintf(out, len, "/sys/fs/cgroup/%s", cgpath)
               : snprintf(out, len, "/sys/fs/cgroup/%s/%s", ctrl, cgpath);
    return (n > 0 && (size_t)n < len) ? 0 : -1;
}

/* The CPU weight of a leaf: GV_CPU_WEIGHT_IDLE while a warm sandbox boots
 * and idles, the default once an execution has it (gv_cgroup_weight). */
#define GV_CPU_SHARES_IDLE "2"    /* v1 cpu.shares: the kernel's least */
#define GV_CPU_SHARES_RUN "1024"  /* v1 default */
#define GV_CPU_WEIGHT_IDLE "1"    /* v2 cpu.weight: the least */
#define GV_CPU_WEIGHT_RUN "100"   /* v2 default */

/* Pre-created leaves are the caller's to configure: runsc applies the
 * spec's resources only to the controllers whose leaf it makes itself
 * (cgroup v1), and to none under v2 when the leaf exists.  So eaid writes
 * the memory limit, and the CPU quota and weight, itself. */
static int cg_create(const struct eai_pc_bundle *b, const struct eai_iso_job *job, int idle, char *msg,
                     size_t msglen)
{
    char leaf[PATH_MAX], v[32], q[48];
    int64_t memory = job->memory_bytes;
    snprintf(v, sizeof(v), "%lld", (long long)memory);
    long long quota = (long long)eai_pc_cpu_quota(job->cpu_millis); /* as the spec's (eai_pc_oci_cpu) */
    if (b->cg_v2) {
        char parent[PATH_MAX];
        cg_leaf(parent, sizeof(parent), NULL, b->cgpath, 1);
        *strrchr(parent, '/') = '\0';
        if (eai_mkdir_p(parent, 0755) < 0)
            goto fail;
        static const char *const ctrls[] = {"+memory", "+cpu", NULL};
        eai_pc_cg2_enable(b->cgpath, ctrls, 0); /* for children along the path */
        cg_leaf(leaf, sizeof(leaf), NULL, b->cgpath, 1);
        if (mkdir(leaf, 0755) < 0 || (memory > 0 && eai_pc_cg_write(leaf, "memory.max", v) < 0))
            goto fail;
        eai_pc_cg_write(leaf, "memory.swap.max", "0");
        snprintf(q, sizeof(q), "%lld %d", quota, EAI_PC_CPU_PERIOD_US);
        if (quota > 0 && eai_pc_cg_write(leaf, "cpu.max", q) < 0)
            goto fail;
        if (idle)
            eai_pc_cg_write(leaf, "cpu.weight", GV_CPU_WEIGHT_IDLE);
        return 0;
    }
    if (cg_leaf(leaf, sizeof(leaf), "memory", b->cgpath, 0) < 0 || eai_mkdir_p(leaf, 0755) < 0)
        goto fail;
    if (memory > 0) {
        if (eai_pc_cg_write(leaf, "memory.limit_in_bytes", v) < 0)
            goto fail;
        eai_pc_cg_write(leaf, "memory.memsw.limit_in_bytes", v); /* no swap escape, when accounted */
    }
    /* cpuacct: pre-created so it outlives runsc and usage can be read. */
    if (cg_leaf(leaf, sizeof(leaf), "cpuacct", b->cgpath, 0) < 0 || eai_mkdir_p(leaf, 0755) < 0)
        goto fail;
    /* cpu: pre-created only for a warm sandbox, booted at the least weight
     * (runsc would make it with the default); quota and period as runsc
     * writes them */
    if (idle) {
        char period[16];
        snprintf(q, sizeof(q), "%lld", quota);
        snprintf(period, sizeof(period), "%d", EAI_PC_CPU_PERIOD_US);
        if (cg_leaf(leaf, sizeof(leaf), "cpu", b->cgpath, 0) < 0 || eai_mkdir_p(leaf, 0755) < 0 ||
            (quota > 0 && (eai_pc_cg_write(leaf, "cpu.cfs_period_us", period) < 0 ||
                           eai_pc_cg_write(leaf, "cpu.cfs_quota_us", q) < 0)))
            goto fail;
        eai_pc_cg_write(leaf, "cpu.shares", GV_CPU_SHARES_IDLE);
    }
    return 0;
fail:
    return eai_pc_fail(msg, msglen, "cgroup %s: %s", b->cgpath, strerror(errno));
}

void gv_cgroup_weight(const struct eai_pc_bundle *b, int idle)
{
    char leaf[PATH_MAX];
    if (!b->cg_made || cg_leaf(leaf, sizeof(leaf), b->cg_v2 ? NULL : "cpu", b->cgpath, b->cg_v2) < 0)
        return;
    if (b->cg_v2)
        eai_pc_cg_write(leaf, "cpu.weight", idle ? GV_CPU_WEIGHT_IDLE : GV_CPU_WEIGHT_RUN);
    else
        eai_pc_cg_write(leaf, "cpu.shares", idle ? GV_CPU_SHARES_IDLE : GV_CPU_SHARES_RUN);
}

void gv_cgroup_stats(const struct eai_pc_bundle *b, struct eai_pc_stats *st)
{
    char leaf[PATH_MAX], buf[4096];
    memset(st, 0, sizeof(*st));
    if (b->cg_v2) {
        cg_leaf(leaf, sizeof(leaf), NULL, b->cgpath, 1);
        if (eai_pc_cg_read(leaf, "memory.events", buf, sizeof(buf)) == 0)
            st->oom = eai_pc_cg_key(buf, "oom_kill") > 0 ? (int)eai_pc_cg_key(buf, "oom_kill") : 0;
        if (eai_pc_cg_read(leaf, "cpu.stat", buf, sizeof(buf)) == 0) {
            long long us = eai_pc_cg_key(buf, "usage_usec");
            st->cpu_seconds = us > 0 ? (double)us / 1e6 : 0;
        }
        if (eai_pc_cg_read(leaf, "memory.peak", buf, sizeof(buf)) == 0)
            st->peak_mb = (double)atoll(buf) / (1024.0 * 1024.0);
        return;
    }
    cg_leaf(leaf, sizeof(leaf), "memory", b->cgpath, 0);
    if (eai_pc_cg_read(leaf, "memory.oom_control", buf, sizeof(buf)) == 0)
        st->oom = eai_pc_cg_key(buf, "oom_kill") > 0 ? (int)eai_pc_cg_key(buf, "oom_kill") : 0;
    if (eai_pc_cg_read(leaf, "memory.max_usage_in_bytes", buf, sizeof(buf)) == 0)
        st->peak_mb = (double)atoll(buf) / (1024.0 * 1024.0);
    cg_leaf(leaf, sizeof(leaf), "cpuacct", b->cgpath, 0);
    if (eai_pc_cg_read(leaf, "cpuacct.usage", buf, sizeof(buf)) == 0)
        st->cpu_seconds = (double)atoll(buf) / 1e9;
}

void gv_cgroup_kill(const struct eai_pc_bundle *b, int wait_ms)
{
    char leaf[PATH_MAX];
    if (!b->cg_made || cg_leaf(leaf, sizeof(leaf), "memory", b->cgpath, b->cg_v2) < 0)
        return;
    (void)eai_pc_cg_kill(leaf, wait_ms);
}

int gv_cgroup_remove(const char *cgpath, int cg_v2)
{
    char leaf[PATH_MAX];
    if (cg_v2) {
        cg_leaf(leaf, sizeof(leaf), NULL, cgpath, 1);
        return eai_pc_cg_kill_rmdir(leaf);
    }
    /* runsc creates (and normally removes) the other controllers' leaves;
     * after a SIGKILLed run they may stay, so try every controller. */
    static const char *const ctrls[] = {"memory", "cpuacct", "cpu", "cpuset", "pids", "blkio", "devices",
                                        "freezer", "systemd", "net_cls", "net_prio", "perf_event", "hugetlb",
                                        "rdma", "misc"};
    int rc = 0;
    for (size_t i = 0; i < sizeof(ctrls) / sizeof(ctrls[0]); i++) {
        if (cg_leaf(leaf, sizeof(leaf), ctrls[i], cgpath, 0) == 0 && eai_pc_cg_kill_rmdir(leaf) < 0)
            rc = -1;
    }
    return rc;
}

/* ------------------------------------------------------------ bundles */

/* resolv.conf of a job with granted egress: core's DNS only. */
static int write_resolv(const struct eai_pc_bundle *b, const struct eai_iso_job *job, char *msg, size_t msglen)
{
    char path[PATH_MAX + 16], body[128];
    snprintf(path, sizeof(path), "%s/resolv.conf", b->dir);
    int n = snprintf(body, sizeof(body), "nameserver %s\noptions attempts:2 timeout:2\n", gv_job_dns(job));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    /* readable by the sandbox's user whatever eaid's umask (077) */
    if (fd < 0 || fchmod(fd, 0644) < 0 || write(fd, body, (size_t)n) != n) {
        snprintf(msg, msglen, "resolv.conf: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

int gv_bundle_prepare(struct eai_pc_bundle *b, const struct eai_iso_job *job, int idle, char *msg, size_t msglen)
{
    if (eai_pc_bundle_prepare(b, job, spec_new, msg, msglen) < 0)
        return -1;
    if (gv_job_netns(job) && (!gv_job_dns(job) || write_resolv(b, job, msg, msglen) < 0)) {
        if (!gv_job_dns(job))
            snprintf(msg, msglen, "granted egress without a DNS server");
        return -1;
    }
    b->cg_made = 1;
    return cg_create(b, job, idle, msg, msglen);
}

int gv_write_process(const struct eai_pc_bundle *b, const struct eai_iso_job *job, const char *path, int supervised,
                     char *msg, size_t msglen)
{
    return eai_pc_write_json(path, process_new(b, job, supervised), "process.json", msg, msglen);
}

void gv_cgroup_reset_peak(const struct eai_pc_bundle *b)
{
    char leaf[PATH_MAX];
    if (b->cg_v2) {
        cg_leaf(leaf, sizeof(leaf), NULL, b->cgpath, 1);
        eai_pc_cg_write(leaf, "memory.peak", "0"); /* newer kernels only */
        return;
    }
    cg_leaf(leaf, sizeof(leaf), "memory", b->cgpath, 0);
    eai_pc_cg_write(leaf, "memory.max_usage_in_bytes", "0");
}

/* ------------------------------------------------------------ runsc's logs */

void gv_debug_log_arg(char *out, size_t len, const char *bundle_dir)
{
    snprintf(out, len, "--debug-log=%s/runsc-%%COMMAND%%.log", bundle_dir);
}

/* 1 when the last 64 KiB of <dir>/runsc-<cmd>.log hold needle and, when
 * then is set, then on a later line. */
static int log_has(const char *dir, const char *cmd, const char *needle, const char *then)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/runsc-%s.log", dir, cmd);
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    static const size_t cap = 64 * 1024;
    char *buf = malloc(cap + 1);
    off_t end = lseek(fd, 0, SEEK_END);
    ssize_t n = -1;
    if (buf && end >= 0)
        n = pread(fd, buf, cap, end > (off_t)cap ? end - (off_t)cap : 0);
    close(fd);
    int state = 0; /* 1: needle seen */
    for (ssize_t i = 0; n > 0 && i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' '; /* a NUL must not hide the rest */
    if (n > 0) {
        buf[n] = '\0';
        char *save = NULL;
        for (char *line = strtok_r(buf, "\n", &save); line && state < 2; line = strtok_r(NULL, "\n", &save)) {
            if (state == 0 && strstr(line, needle))
                state = then ? 1 : 2;
            else if (state == 1 && strstr(line, then))
                state = 2;
        }
    }
    free(buf);
    return state == 2;
}

const char *gv_runtime_died(const char *bundle_dir, const char *cmd)
{
    /* Written by runsc itself on the host, out of the program's reach
     * (unlike its stderr, which the program shares).  A sandbox process
     * killed: runsc's wait RPC fails and the sandbox (runsc boot) never logs
     * its own exit (under load the RPC also fails at a normal end, after
     * which boot logs "Exiting with status").  A gofer killed: the sentry kills the
     * container, whose init then dies of SIGKILL (at a normal end the
     * gofer also disconnects, but after init is gone). */
    if (log_has(bundle_dir, cmd, "Will try waiting on the sandbox process instead", NULL) &&
        !log_has(bundle_dir, "boot", "Exiting with status", NULL)) /* a normal end under load */
        return "the sandbox process died";
    if (log_has(bundle_dir, "boot", "Gofer socket disconnected", "Uncaught signal: \"killed\" (9), PID: 1,"))
        return "the gofer process died";
    /* runsc of 2026 (tools/runtime/build.sh) logs the same two lines, in
     * other words, at every end ("Gofer socket disconnected, killing
     * container", then "application exiting with killed by signal 9" when
     * the program died of SIGKILL, by its own hand too): what tells a killed
     * gofer is its own log, which lacks the line a gofer writes when it
     * ends ("All lisafs servers exited"; runsc run reaps the gofer before it
     * exits, so the line is there by now when it ended normally). */
    if (log_has(bundle_dir, "boot", "Gofer socket disconnected", "application exiting with killed by signal 9") &&
        log_has(bundle_dir, "gofer", "Serving \"/\"", NULL) &&
        !log_has(bundle_dir, "gofer", "All lisafs servers exited", NULL))
        return "the gofer process died";
    return NULL;
}

/* ------------------------------------------------------------ removal */

int gv_bundle_remove(const char *dir)
{
    if (!dir || dir[0] != '/' || !strstr(dir, "/" GV_CID_PREFIX))
        return -1; /* never anything but one of our bundles */
    return eai_pc_bundle_remove(dir);
}
