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

#include "eai_pc.h"
#include "kata.h"

#define KT_DEFAULT_DISK EAI_PC_DEFAULT_DISK
#define KT_DEFAULT_PIDS 128
#define KT_NOFILE 1024

/* ------------------------------------------------------------ OCI spec */

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
static json_t *spec_new(const struct eai_pc_bundle *b, const struct eai_iso_job *job)
{
    json_t *args, *env;
    if (eai_pc_oci_args_env(job, &args, &env) < 0)
        return NULL;

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
    if (res && job->cpu_millis > 0)
        json_object_set_new(res, "cpu", eai_pc_oci_cpu(job->cpu_millis));
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
}

/* ------------------------------------------------------------ bundles */

int kt_bundle_prepare(struct eai_pc_bundle *b, const struct eai_iso_job *job, char *msg, size_t msglen)
{
    if (eai_pc_bundle_prepare(b, job, spec_new, msg, msglen) < 0)
        return -1;
    b->cg_made = 1;
    return kt_cgroup_create(b, msg, msglen);
}
