/*
 * Start-up sweep of the Kata backend (docs/kata.md): leftovers of an earlier
 * eaid under our naming prefix "eai-": containers in our containerd
 * namespace (killed, task and container deleted), per-execution dirs in
 * the work dir (tmpfs unmounted), cgroups under ours.  Runs on a worker;
 * start() is refused until it is done.  Our own probe's ids are kept.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kata.h"

struct sweep_ctx {
    struct kt *k;
    char keep[64];               /* our own probe's id prefix */
    int containers, dirs, cgroups;
};

static int sweepable(const struct sweep_ctx *s, const char *name)
{
    return !strncmp(name, KT_CID_PREFIX, strlen(KT_CID_PREFIX)) &&
           !(s->keep[0] && !strncmp(name, s->keep, strlen(s->keep)));
}

static void sweep_work(void *arg)
{
    struct sweep_ctx *s = arg;
    struct kt *k = s->k;
    char out[65536];
    char *argv[KT_CTR_ARGC + 8];
    kt_ctr_argv(k, argv);
    argv[KT_CTR_ARGC] = "containers";
    argv[KT_CTR_ARGC + 1] = "ls";
    argv[KT_CTR_ARGC + 2] = "-q";
    argv[KT_CTR_ARGC + 3] = NULL;
    struct stat st;
    if (access(k->ctr, X_OK) == 0 && stat(k->address, &st) == 0 &&
        eai_pc_run_sync(argv, KT_CTR_TIMEOUT_MS, out, sizeof(out)) == 0) {
        char *save = NULL;
        for (char *id = strtok_r(out, "\n", &save); id; id = strtok_r(NULL, "\n", &save)) {
            if (!sweepable(s, id))
                continue;
            char *kill_argv[KT_CTR_ARGC + 6], *tdel_argv[KT_CTR_ARGC + 5], *cdel_argv[KT_CTR_ARGC + 4];
            kt_ctr_argv(k, kill_argv);
            kt_ctr_argv(k, tdel_argv);
            kt_ctr_argv(k, cdel_argv);
            char *kv[] = {"task", "kill", "--signal", "SIGKILL", id, NULL};
            char *tv[] = {"task", "delete", "--force", id, NULL};
            char *cv[] = {"containers", "delete", id, NULL};
            memcpy(kill_argv + KT_CTR_ARGC, kv, sizeof(kv));
            memcpy(tdel_argv + KT_CTR_ARGC, tv, sizeof(tv));
            memcpy(cdel_argv + KT_CTR_ARGC, cv, sizeof(cv));
            eai_pc_run_sync(kill_argv, KT_CTR_TIMEOUT_MS, NULL, 0);
            eai_pc_run_sync(tdel_argv, KT_CTR_TIMEOUT_MS, NULL, 0);
            eai_pc_run_sync(cdel_argv, KT_CTR_TIMEOUT_MS, NULL, 0);
            s->containers++;
        }
    }
    DIR *d = opendir(k->work_dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!sweepable(s, e->d_name))
                continue;
            char p[PATH_MAX + 300];
            snprintf(p, sizeof(p), "%s/%s", k->work_dir, e->d_name);
            if (eai_pc_bundle_remove(p) == 0)
                s->dirs++;
        }
        closedir(d);
    }
    /* Our cgroups: <cg_parent>/<cid> in the memory hierarchy (v1) or v2. */
    char dir[PATH_MAX];
    if (k->cg_v2)
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/%s", k->cg_parent);
    else
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory/%s", k->cg_parent);
    DIR *cd = opendir(dir);
    if (cd) {
        struct dirent *e;
        while ((e = readdir(cd))) {
            if (!sweepable(s, e->d_name))
                continue;
            char cg[PATH_MAX + 300];
            snprintf(cg, sizeof(cg), "%s/%s", k->cg_parent, e->d_name);
            if (kt_cgroup_remove(cg, k->cg_v2) == 0)
                s->cgroups++;
        }
        closedir(cd);
    }
}

static void sweep_done(void *arg)
{
    struct sweep_ctx *s = arg;
    struct kt *k = s->k;
    if (!k->destroying) {
        if (s->containers || s->dirs || s->cgroups)
            k->host->log(k->host, KT_COMPONENT, EAI_LOG_INFO, "sweep removed %d containers, %d dirs, %d cgroups",
                         s->containers, s->dirs, s->cgroups);
        k->sweeping = 0;
    }
    free(s);
    kt_release(k);
}

void kt_sweep(void *self)
{
    struct kt *k = self;
    struct sweep_ctx *s = calloc(1, sizeof(*s));
    if (!s)
        return;
    s->k = k;
    /* The probe may be running now: its ids are "<probe_prefix>N". */
    snprintf(s->keep, sizeof(s->keep), "%s", k->probe_prefix);
    k->sweeping = 1;
    k->inflight++;
    if (k->host->work_submit(k->host, sweep_work, sweep_done, s) < 0) {
        sweep_work(s);
        sweep_done(s);
    }
}

