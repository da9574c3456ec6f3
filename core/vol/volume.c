/* Tenant volumes (volume.h, docs/volumes.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "vol/volume.h"
#include "app.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "config/config_check.h"
#include "exec/exec_validate.h"
#include "http/park.h"
#include "http/req_audit.h"
#include "http/request.h"
#include "obs/metrics.h"

#include "eai_pc.h" /* plugins/common: symlink-safe file operations under <dir>/tmp */

#define VOL_COMPONENT "volumes"
#define VOL_MKFS "/usr/sbin/mkfs.ext4"
#define VOL_MOUNT "/usr/bin/mount"
#define VOL_META_MAX 4096
#define VOL_LIST_MAX 10000
#define VOL_FILE_MAX (64LL << 20) /* a file GET / PUT through the API */

extern char **environ;

enum vol_state { V_CREATING, V_READY, V_DELETING };

struct vol {
    struct vol *next;
    char id[48];                 /* vol_<uuid> */
    char tenant[64];
    char name[64];
    int64_t size;
    int64_t created_ms;
    enum vol_state state;
    char writer[64];             /* the read-write holder, "" when none */
    int readers;                 /* read-only holders */
    int files_inflight;          /* file operations on a worker now */
    int64_t billed_ms;           /* usage recorded up to here (volume.json billed_ms) */
    int billing;                 /* a periodic usage event on a worker now */
};

struct eai_vols {
    struct eai_app *app;
    char dir[PATH_MAX];          /* <data_dir>/volumes */
    struct vol *list;
    struct eai_park_set *parks;
    struct event *tick;          /* the periodic usage events */
    int64_t max_bytes, max_count, max_total;
    int64_t period_ms;           /* volumes.usage_period_s: a usage event per volume this often */
    int ok;                      /* mkfs.ext4 and mount found, running as root */
    char why[200];               /* why not */
};

struct eai_vol_att {
    size_t n;
    char holder[64];
    char ids[EAI_VOL_MAX_MOUNTS][48];
    struct eai_iso_volume v[EAI_VOL_MAX_MOUNTS];
    char host[EAI_VOL_MAX_MOUNTS][PATH_MAX];
    char path[EAI_VOL_MAX_MOUNTS][256];
};

static struct eai_vols *G; /* one per process (the app's) */
static _Atomic int vol_stopping; /* eai_vols_stop ran: a create finishing on a worker undoes itself */

static struct eai_vols *vols_of(struct eai_app *app)
{
    return G && (!app || G->app == app) ? G : NULL;
}

/* ------------------------------------------------------------ on disk (workers) */

static void vol_dir(const struct eai_vols *vs, const char *id, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", vs->dir, id);
}

static int run_quiet(char *const argv[], char *msg, size_t msglen)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        snprintf(msg, msglen, "%s: %s", argv[0], strerror(rc));
        return -1;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(msg, msglen, "%s: waitpid: %s", argv[0], strerror(errno));
            return -1;
        }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(msg, msglen, "%s failed (status %d)", argv[0], WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return -1;
    }
    return 0;
}

/* 1 when <dir>/tmp is a mount point (another device than dir). */
static int is_mounted(const char *dir)
{
    char mp[PATH_MAX + 8];
    struct stat a, b;
    snprintf(mp, sizeof mp, "%s/tmp", dir);
    if (stat(dir, &a) < 0 || lstat(mp, &b) < 0)
        return 0;
    return a.st_dev != b.st_dev;
}

static int vol_mount(const char *dir, char *msg, size_t msglen)
{
    if (is_mounted(dir))
        return 0;
    char img[PATH_MAX + 16], mp[PATH_MAX + 8];
    snprintf(img, sizeof img, "%s/disk.img", dir);
    snprintf(mp, sizeof mp, "%s/tmp", dir);
    if (mkdir(mp, 0700) < 0 && errno != EEXIST) {
        snprintf(msg, msglen, "mkdir %s: %s", mp, strerror(errno));
        return -1;
    }
    char *argv[] = {VOL_MOUNT, "-t", "ext4", "-o", "loop,nosuid,nodev", img, mp, NULL};
    if (run_quiet(argv, msg, msglen) < 0)
        return -1;
    char lf[PATH_MAX + 32];
    snprintf(lf, sizeof lf, "%s/lost+found", mp);
    rmdir(lf); /* mkfs' own, empty: not the tenant's */
    return 0;
}

/* Never a lazy (MNT_DETACH) unmount: a detached ext4 still in use while
 * the next start mounts the same image again would be one filesystem
 * mounted twice, which ext4 does not survive.  Busy (a sandbox's gofer
 * still ending): retried for up to 2 s (a worker, or the stop once nothing
 * is served), then left mounted: the next start reuses the mount, a delete
 * answers 409 and can be retried. */
static void vol_umount(const char *dir)
{
    char mp[PATH_MAX + 8];
    snprintf(mp, sizeof mp, "%s/tmp", dir);
    for (int i = 0; i < 20 && is_mounted(dir); i++)
        if (umount2(mp, 0) < 0 && errno == EBUSY)
            usleep(100 * 1000);
    if (is_mounted(dir))
        eai_log(VOL_COMPONENT, EAI_LOG_ERROR, "%s: still busy, left mounted", mp);
}

static int write_meta(const char *dir, const json_t *doc, char *msg, size_t msglen)
{
    char p[PATH_MAX + 24], t[PATH_MAX + 24];
    snprintf(p, sizeof p, "%s/volume.json", dir);
    snprintf(t, sizeof t, "%s/volume.json.new", dir);
    char *s = json_dumps(doc, JSON_COMPACT);
    int fd = s ? open(t, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
    int rc = fd >= 0 && eai_write_all(fd, s, strlen(s)) == 0 && fsync(fd) == 0 ? 0 : -1;
    if (fd >= 0 && close(fd) < 0)
        rc = -1;
    if (rc == 0 && rename(t, p) < 0)
        rc = -1;
    if (rc < 0)
        snprintf(msg, msglen, "%s: %s", p, strerror(errno));
    free(s);
    return rc;
}

static int vol_make(const char *dir, int64_t size, const json_t *meta, char *msg, size_t msglen)
{
    if (mkdir(dir, 0700) < 0) {
        snprintf(msg, msglen, "mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    char img[PATH_MAX + 16], owner[64];
    snprintf(img, sizeof img, "%s/disk.img", dir);
    int fd = open(img, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    /* reserved, not sparse: a host disk filling up under a sparse image
     * would turn the volume's writes into I/O errors (and its ext4 into a
     * damaged one) instead of ENOSPC at create */
    int rc = fd < 0 ? errno : posix_fallocate(fd, 0, size);
    if (rc != 0) {
        snprintf(msg, msglen, "%s: %s", img, strerror(rc));
        if (fd >= 0)
            close(fd);
        errno = rc;
        return -1;
    }
    close(fd);
    snprintf(owner, sizeof owner, "nodiscard,root_owner=%d:%d", EAI_VOL_UID, EAI_VOL_UID);
    char *argv[] = {VOL_MKFS, "-q", "-F", "-m", "0", "-E", owner, img, NULL};
    if (run_quiet(argv, msg, msglen) < 0)
        return -1;
    if (write_meta(dir, meta, msg, msglen) < 0)
        return -1;
    return vol_mount(dir, msg, msglen);
}

static int vol_remove(const char *dir, char *msg, size_t msglen)
{
    vol_umount(dir);
    if (is_mounted(dir)) {
        snprintf(msg, msglen, "%s/tmp is still mounted", dir);
        return -1;
    }
    if (eai_rm_tree(dir) < 0) {
        snprintf(msg, msglen, "remove %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ registry */

static struct vol *find_id(struct eai_vols *vs, const char *tenant, const char *id)
{
    for (struct vol *v = vs ? vs->list : NULL; v; v = v->next)
        if (!strcmp(v->id, id) && (!tenant || !strcmp(v->tenant, tenant)))
            return v;
    return NULL;
}

static struct vol *find_name(struct eai_vols *vs, const char *tenant, const char *name)
{
    for (struct vol *v = vs ? vs->list : NULL; v; v = v->next)
        if (!strcmp(v->name, name) && !strcmp(v->tenant, tenant))
            return v;
    return NULL;
}

/* {id} of a route: a volume id (vol_...) or a name. */
static struct vol *find_ref(struct eai_vols *vs, const char *tenant, const char *ref)
{
    if (!ref)
        return NULL;
    return strncmp(ref, "vol_", 4) == 0 ? find_id(vs, tenant, ref) : find_name(vs, tenant, ref);
}

/* eai_volumes, eai_volume_bytes, eai_volume_mounts (observability.md). */
static void gauges(const struct eai_vols *vs)
{
    double n = 0, bytes = 0, mounts = 0;
    for (const struct vol *v = vs ? vs->list : NULL; v; v = v->next) {
        n++;
        bytes += (double)v->size;
        mounts += v->readers + (v->writer[0] ? 1 : 0);
    }
    eai_metrics_set("eai_volumes", NULL, n);
    eai_metrics_set("eai_volume_bytes", NULL, bytes);
    eai_metrics_set("eai_volume_mounts", NULL, mounts);
}

static void unlink_vol(struct eai_vols *vs, struct vol *v)
{
    for (struct vol **pp = &vs->list; *pp; pp = &(*pp)->next)
        if (*pp == v) {
            *pp = v->next;
            return;
        }
}

static int name_ok(const char *n)
{
    size_t len = n ? strlen(n) : 0;
    if (len < 1 || len > 63)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = n[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '-' && c != '.' && c != '_')))
            return 0;
    }
    return strncmp(n, "vol_", 4) != 0; /* names never look like ids */
}

static const char *state_name(enum vol_state s)
{
    return s == V_CREATING ? "creating" : s == V_DELETING ? "deleting" : "ready";
}

/* GB-hours (GB = 10^9 bytes) of v's provisioned size from `from` to `to`. */
static double gb_hours_between(const struct vol *v, int64_t from, int64_t to)
{
    double h = (double)(to - from) / 3600000.0;
    return (double)v->size / 1e9 * (h < 0 ? 0 : h);
}

static double gb_hours(const struct vol *v, int64_t now)
{
    return gb_hours_between(v, v->created_ms, now);
}

static json_t *meta_of(const struct vol *v, int64_t billed_ms)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "id", v->id, "tenant_id", v->tenant, "name", v->name,
                     "size_bytes", (json_int_t)v->size, "created_ms", (json_int_t)v->created_ms, "billed_ms",
                     (json_int_t)billed_ms);
}

/* The usage event of v's provisioned size from v->billed_ms to now (API.md
 * "FinOps", kind "volume").  Its id is the volume's and the period's start:
 * an event recorded twice (a crash between the outbox and volume.json) is
 * the same event to the ledger. */
static json_t *usage_event(const struct vol *v, int64_t now, int final)
{
    char eid[128], t0[32], t1[32];
    snprintf(eid, sizeof eid, "%s:%lld", v->id, (long long)v->billed_ms);
    eai_time_rfc3339(v->billed_ms, t0);
    eai_time_rfc3339(now, t1);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:f, s:b, s:{s:s, s:I}}", "id", eid, "kind",
                     "volume", "tenant_id", v->tenant, "volume_id", v->id, "started_at", t0, "finished_at", t1,
                     "created_at", t1, "duration_s", (double)(now - v->billed_ms) / 1000.0, "cpu_seconds", 0.0,
                     "memory_mb_seconds", 0.0, "gb_hours", gb_hours_between(v, v->billed_ms, now), "final",
                     final, "volume", "name", v->name, "size_bytes", (json_int_t)v->size);
}

static json_t *vol_view(const struct vol *v)
{
    char ts[32];
    eai_time_rfc3339(v->created_ms, ts);
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:{s:o, s:i}, s:{s:f}}", "id", v->id, "name", v->name, "size_bytes",
                     (json_int_t)v->size, "status", state_name(v->state), "created_at", ts, "attached", "writer",
                     v->writer[0] ? json_string(v->writer) : json_null(), "readers", v->readers, "usage",
                     "gb_hours", gb_hours(v, eai_now_ms()));
}

static void tenant_use(struct eai_vols *vs, const char *tenant, int64_t *count, int64_t *bytes)
{
    *count = *bytes = 0;
    for (struct vol *v = vs->list; v; v = v->next)
        if (!strcmp(v->tenant, tenant)) {
            (*count)++;
            *bytes += v->size;
        }
}

static void vol_audit(struct eai_app *app, const char *tenant, const char *actor, const char *action,
                      const char *target, const char *decision, const char *reason)
{
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", id, "time", now, "tenant_id",
                           tenant, "actor", actor ? actor : "system", "action", action, "target", target,
                           "decision", decision, "reason", reason ? reason : "", "request_id", "", "trace_id", "");
    if (ev)
        eai_req_audit_async(app, tenant, ev);
}

static void req_audit(struct eai_app *app, struct eai_req *r, const char *action, const char *target,
                      const char *decision, const char *reason)
{
    json_t *ev = eai_req_audit_event(r, action, target ? target : "", decision, reason);
    if (ev)
        eai_req_audit_async(app, eai_req_tenant(r), ev);
}

static json_t *detail1(const char *path, const char *msg)
{
    return json_pack("[{s:s, s:s}]", "path", path, "message", msg);
}

/* ------------------------------------------------------------ periodic usage */

struct vol_job {
    struct eai_app *app;
    struct eai_vols *vs;         /* loop only: a worker reads dir, never vs (a stop frees it) */
    char dir[PATH_MAX];
    char id[48], tenant[64], actor[64];
    int64_t size;
    json_t *meta, *usage, *audit, *total;
    int64_t until_ms;            /* billing: the period's end */
    int64_t min_free;            /* create: bytes the data disk keeps free */
    char parent[PATH_MAX];       /* create: <data_dir>/volumes */
    int rc, nospace;
    char msg[300];
};

static void vol_job_free(void *arg)
{
    struct vol_job *j = arg;
    json_decref(j->meta);
    json_decref(j->usage);
    json_decref(j->audit);
    json_decref(j->total);
    free(j);
}


static void bill_work(void *arg)
{
    struct vol_job *j = arg;
    const struct eai_storage_ops *st = j->app->store;
    struct eai_error *err = NULL;
    j->rc = st->outbox_append ? st->outbox_append(j->app->storage.self, j->tenant, j->usage, NULL, &err) : -1;
    if (j->rc < 0) {
        snprintf(j->msg, sizeof j->msg, "%s", err && err->message ? err->message : "no outbox_append");
        eai_error_free(err);
        return;
    }
    const char *dir = j->dir;
    if (write_meta(dir, j->meta, j->msg, sizeof j->msg) < 0)
        eai_log(VOL_COMPONENT, EAI_LOG_WARN, "volume %s: %s (its next event repeats this period's id)", j->id,
                j->msg);
}

static void bill_answer(struct eai_req *r, void *arg)
{
    (void)r;
    struct vol_job *j = arg;
    struct eai_vols *vs = vols_of(j->app);
    struct vol *v = vs ? find_id(vs, NULL, j->id) : NULL;
    if (!v)
        return;
    v->billing = 0;
    if (j->rc < 0) {
        eai_log(VOL_COMPONENT, EAI_LOG_ERROR, "volume %s: periodic usage not recorded: %s", j->id, j->msg);
        return;
    }
    v->billed_ms = j->until_ms;
}

static const struct eai_park_ops bill_ops = {
    .what = "volume_usage", .work = bill_work, .answer = bill_answer, .free = vol_job_free,
};

/* Every volume billed up to at most usage_period_s ago: one usage event per
 * volume and period, through the outbox (docs/volumes.md "Usage"). */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_vols *vs = arg;
    int64_t now = eai_now_ms();
    if (!vs->app->store->outbox_append)
        return;
    for (struct vol *v = vs->list; v; v = v->next) {
        if (v->state != V_READY || v->billing || now - v->billed_ms < vs->period_ms)
            continue;
        struct vol_job *j = calloc(1, sizeof *j);
        if (!j)
            return;
        j->app = vs->app;
        j->vs = vs;
        snprintf(j->id, sizeof j->id, "%s", v->id);
        vol_dir(vs, v->id, j->dir, sizeof j->dir);
        snprintf(j->tenant, sizeof j->tenant, "%s", v->tenant);
        j->until_ms = now;
        j->usage = usage_event(v, now, 0);
        j->meta = meta_of(v, now);
        if (!j->usage || !j->meta) {
            vol_job_free(j);
            return;
        }
        v->billing = 1;
        if (eai_park(vs->parks, NULL, &bill_ops, j) < 0) {
            v->billing = 0;
            return; /* the queue is full: the next tick */
        }
    }
}

/* ------------------------------------------------------------ start and stop */

static int load_one(struct eai_vols *vs, const char *id)
{
    char dir[PATH_MAX], p[PATH_MAX + 24], msg[300] = "";
    vol_dir(vs, id, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/volume.json", dir);
    char *s = eai_read_file(p, VOL_META_MAX, NULL);
    json_t *doc = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    const char *tenant = eai_jstr(doc, "tenant_id"), *name = eai_jstr(doc, "name");
    json_int_t size = json_integer_value(json_object_get(doc, "size_bytes"));
    if (!tenant || !name || size <= 0 || strcmp(eai_jstr(doc, "id") ? eai_jstr(doc, "id") : "", id) != 0 ||
        json_is_true(json_object_get(doc, "deleting"))) {
        /* a create or a delete cut short: nothing a tenant was answered about */
        eai_log(VOL_COMPONENT, EAI_LOG_WARN, "%s: unfinished (create or delete cut short): removed", dir);
        json_decref(doc);
        vol_remove(dir, msg, sizeof msg);
        return 0;
    }
    struct vol *v = calloc(1, sizeof *v);
    if (!v) {
        json_decref(doc);
        return -1;
    }
    snprintf(v->id, sizeof v->id, "%s", id);
    snprintf(v->tenant, sizeof v->tenant, "%s", tenant);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->size = size;
    v->created_ms = json_integer_value(json_object_get(doc, "created_ms"));
    v->billed_ms = json_integer_value(json_object_get(doc, "billed_ms"));
    if (v->billed_ms < v->created_ms)
        v->billed_ms = v->created_ms;
    v->state = V_READY;
    json_decref(doc);
    if (vol_mount(dir, msg, sizeof msg) < 0) {
        eai_log(VOL_COMPONENT, EAI_LOG_ERROR, "volume %s: %s (kept on disk, not served)", id, msg);
        free(v);
        return 0;
    }
    v->next = vs->list;
    vs->list = v;
    return 0;
}

int eai_vols_start(struct eai_app *app, struct eai_error **err)
{
    struct eai_vols *vs = calloc(1, sizeof *vs);
    if (!vs) {
        *err = eai_error_new(EAI_E_INTERNAL, 0, "out of memory");
        return -1;
    }
    vs->app = app;
    snprintf(vs->dir, sizeof vs->dir, "%s/volumes", app->cfg && app->cfg->data_dir ? app->cfg->data_dir : "./var");
    vs->max_bytes = app->cfg ? app->cfg->volumes_max_bytes : EAI_VOL_DEF_MAX_BYTES;
    vs->max_count = app->cfg ? app->cfg->volumes_max_per_tenant : EAI_VOL_DEF_MAX_COUNT;
    vs->max_total = app->cfg ? app->cfg->volumes_max_total_bytes : EAI_VOL_DEF_MAX_TOTAL;
    vs->period_ms = (app->cfg ? app->cfg->volumes_usage_period_s : 3600) * 1000;
    vs->parks = eai_park_set_new();
    if (geteuid() != 0)
        snprintf(vs->why, sizeof vs->why, "eaid does not run as root (loop mounts)");
    else if (access(VOL_MKFS, X_OK) < 0 || access(VOL_MOUNT, X_OK) < 0)
        snprintf(vs->why, sizeof vs->why, "%s or %s is missing (Debian: e2fsprogs, mount)", VOL_MKFS, VOL_MOUNT);
    else if (eai_mkdir_p(vs->dir, 0700) < 0)
        snprintf(vs->why, sizeof vs->why, "%s: %s", vs->dir, strerror(errno));
    else
        vs->ok = 1;
    G = vs;
    vol_stopping = 0;
    vs->tick = event_new(app->base, -1, EV_PERSIST, on_tick, vs);
    if (vs->tick) {
        int64_t ms = vs->period_ms < 60000 ? vs->period_ms : 60000;
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        event_add(vs->tick, &tv);
    }
    if (!vs->ok) {
        eai_log(VOL_COMPONENT, EAI_LOG_WARN, "volumes unavailable: %s", vs->why);
        return 0;
    }
    /* start-up, before the server listens: mounting here holds no request */
    DIR *d = opendir(vs->dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)))
        if (strncmp(de->d_name, "vol_", 4) == 0 && strlen(de->d_name) < 48 && load_one(vs, de->d_name) == 0)
            n++;
    if (d)
        closedir(d);
    if (n)
        eai_log(VOL_COMPONENT, EAI_LOG_INFO, "%d volume(s) under %s", n, vs->dir);
    gauges(vs);
    return 0;
}

void eai_vols_stop(struct eai_app *app)
{
    struct eai_vols *vs = vols_of(app);
    if (!vs)
        return;
    vol_stopping = 1;
    if (vs->tick)
        event_free(vs->tick);
    eai_park_set_close(vs->parks);
    for (struct vol *v = vs->list, *nx; v; v = nx) {
        nx = v->next;
        if (vs->ok && v->state != V_CREATING) { /* a create in flight unmounts nothing of its own yet */
            char dir[PATH_MAX];
            vol_dir(vs, v->id, dir, sizeof dir);
            vol_umount(dir);
        }
        free(v);
    }
    vs->list = NULL;
    G = NULL;
    free(vs);
}

/* ------------------------------------------------------------ attachments */

/* "/mnt/<seg>[/<seg>...]": segments of [A-Za-z0-9._-], not "." or "..". */
static int mount_path_ok(const char *p)
{
    size_t len = p ? strlen(p) : 0;
    if (len < 6 || len > 200 || strncmp(p, "/mnt/", 5) != 0)
        return 0;
    const char *s = p + 5;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return 0;
        for (size_t i = 0; i < n; i++) {
            char c = s[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == '-'))
                return 0;
        }
        if (!e)
            break;
        s = e + 1;
        if (!*s)
            return 0; /* trailing slash */
    }
    return 1;
}

/* One path inside another ("/mnt/a" and "/mnt/a/b"): a mount would hide the other. */
static int path_nests(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    const char *s = la <= lb ? a : b, *l = la <= lb ? b : a;
    size_t ls = strlen(s);
    return strncmp(s, l, ls) == 0 && (l[ls] == '\0' || l[ls] == '/');
}

int eai_vols_resolve(struct eai_app *app, const char *tenant, const json_t *v, const char *pointer,
                     int check_writer, json_t **out, enum eai_code *code, json_t **details)
{
    *out = NULL;
    *details = NULL;
    *code = EAI_E_VALIDATION_FAILED;
    if (!v || json_is_null(v))
        return 0;
    char ptr[96];
    if (!json_is_array(v)) {
        *details = detail1(pointer, "must be an array of {name, path, read_only}");
        return -1;
    }
    if (json_array_size(v) == 0)
        return 0; /* [] is no volume */
    if (json_array_size(v) > EAI_VOL_MAX_MOUNTS) {
        char m[96];
        snprintf(m, sizeof m, "at most %d volumes", EAI_VOL_MAX_MOUNTS);
        *details = detail1(pointer, m);
        return -1;
    }
    struct eai_vols *vs = vols_of(app);
    if (json_array_size(v) > 0 && (!vs || !vs->ok)) {
        *code = EAI_E_VOLUMES_UNSUPPORTED;
        *details = detail1(pointer, "volumes are not available on this server");
        return -1;
    }
    json_t *res = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it) {
        snprintf(ptr, sizeof ptr, "%s/%zu", pointer, i);
        const char *name = eai_jstr(it, "name"), *path = eai_jstr(it, "path");
        const json_t *ro = json_object_get(it, "read_only");
        const char *k;
        json_t *x;
        int extra = 0;
        json_object_foreach((json_t *)it, k, x) if (strcmp(k, "name") && strcmp(k, "path") && strcmp(k, "read_only"))
            extra = 1;
        if (!json_is_object(it) || extra || !name || !path || (ro && !json_is_boolean(ro))) {
            *details = detail1(ptr, "must be {name, path, read_only (boolean, optional)}");
            goto fail;
        }
        if (!mount_path_ok(path)) {
            snprintf(ptr, sizeof ptr, "%s/%zu/path", pointer, i);
            *details = detail1(ptr, "must be an absolute path under /mnt, normalised (no '.', '..', empty "
                                    "segments or trailing '/'; letters, digits, '.', '_', '-')");
            goto fail;
        }
        struct vol *vol = find_ref(vs, tenant, name);
        if (!vol || vol->state != V_READY) {
            snprintf(ptr, sizeof ptr, "%s/%zu/name", pointer, i);
            *code = vol ? EAI_E_VOLUME_IN_USE : EAI_E_NOT_FOUND;
            *details = detail1(ptr, vol ? "the volume is being created or deleted" : "no such volume");
            goto fail;
        }
        size_t j;
        json_t *o;
        json_array_foreach(res, j, o) {
            if (!strcmp(eai_jstr(o, "id"), vol->id)) {
                snprintf(ptr, sizeof ptr, "%s/%zu/name", pointer, i);
                *details = detail1(ptr, "names a volume already mounted by this request");
                goto fail;
            }
            if (path_nests(eai_jstr(o, "path"), path)) {
                snprintf(ptr, sizeof ptr, "%s/%zu/path", pointer, i);
                *details = detail1(ptr, "must not equal or nest in another volume's path");
                goto fail;
            }
        }
        int rw = !json_is_true(ro);
        if (rw && check_writer && (vol->writer[0] || vol->files_inflight)) {
            snprintf(ptr, sizeof ptr, "%s/%zu/name", pointer, i);
            *code = EAI_E_VOLUME_IN_USE;
            *details = detail1(ptr, "another sandbox mounts this volume read-write");
            goto fail;
        }
        json_array_append_new(res, json_pack("{s:s, s:s, s:s, s:b}", "id", vol->id, "name", vol->name, "path",
                                             path, "read_only", !rw));
    }
    *out = res;
    return 0;
fail:
    json_decref(res);
    return -1;
}

struct eai_vol_att *eai_vols_attach(struct eai_app *app, const char *tenant, const json_t *resolved,
                                    const char *holder, enum eai_code *code, char *why, size_t whylen)
{
    struct eai_vols *vs = vols_of(app);
    *code = EAI_E_VOLUMES_UNSUPPORTED;
    if (!vs || !vs->ok) {
        snprintf(why, whylen, "volumes are not available on this server%s%s", vs ? ": " : "", vs ? vs->why : "");
        return NULL;
    }
    size_t n = json_array_size(resolved);
    if (n > EAI_VOL_MAX_MOUNTS) {
        *code = EAI_E_VALIDATION_FAILED;
        snprintf(why, whylen, "too many volumes");
        return NULL;
    }
    struct vol *vols[EAI_VOL_MAX_MOUNTS];
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(resolved, i);
        const char *id = eai_jstr(it, "id");
        vols[i] = id ? find_id(vs, tenant, id) : NULL;
        if (!vols[i] || vols[i]->state != V_READY) {
            *code = vols[i] ? EAI_E_VOLUME_IN_USE : EAI_E_NOT_FOUND;
            snprintf(why, whylen, "volume %s: %s", eai_jstr(it, "name") ? eai_jstr(it, "name") : "?",
                     vols[i] ? "being deleted"
                             : "not on this node (deleted meanwhile, or another replica took the work: "
                               "volumes are node-local, docs/volumes.md)");
            return NULL;
        }
        if (!json_is_true(json_object_get(it, "read_only")) && (vols[i]->writer[0] || vols[i]->files_inflight)) {
            *code = EAI_E_VOLUME_IN_USE;
            snprintf(why, whylen, "volume %s: %s mounts it read-write", vols[i]->name,
                     vols[i]->writer[0] ? vols[i]->writer : "the files API");
            vol_audit(app, tenant, holder, "volume.attach", vols[i]->id, "deny", "volume_in_use");
            return NULL;
        }
    }
    struct eai_vol_att *a = calloc(1, sizeof *a);
    if (!a) {
        *code = EAI_E_INTERNAL;
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    snprintf(a->holder, sizeof a->holder, "%s", holder);
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(resolved, i);
        int ro = json_is_true(json_object_get(it, "read_only"));
        if (ro)
            vols[i]->readers++;
        else
            snprintf(vols[i]->writer, sizeof vols[i]->writer, "%s", holder);
        snprintf(a->ids[i], sizeof a->ids[i], "%s", vols[i]->id);
        snprintf(a->host[i], sizeof a->host[i], "%s/%s/tmp", vs->dir, vols[i]->id);
        snprintf(a->path[i], sizeof a->path[i], "%s", eai_jstr(it, "path") ? eai_jstr(it, "path") : "");
        a->v[i].host_path = a->host[i];
        a->v[i].path = a->path[i];
        a->v[i].read_only = ro;
        vol_audit(app, tenant, holder, "volume.attach", vols[i]->id, "allow", ro ? "read_only" : "read_write");
    }
    a->n = n;
    gauges(vs);
    return a;
}

const struct eai_iso_volume *eai_vol_att_mounts(const struct eai_vol_att *a, size_t *n)
{
    *n = a ? a->n : 0;
    return a && a->n ? a->v : NULL;
}

void eai_vols_detach(struct eai_app *app, struct eai_vol_att *a)
{
    if (!a)
        return;
    struct eai_vols *vs = vols_of(app);
    for (size_t i = 0; vs && i < a->n; i++) {
        struct vol *v = find_id(vs, NULL, a->ids[i]);
        if (!v)
            continue;
        if (a->v[i].read_only) {
            if (v->readers > 0)
                v->readers--;
        } else if (!strcmp(v->writer, a->holder)) {
            v->writer[0] = '\0';
        }
    }
    if (vs)
        gauges(vs);
    free(a);
}

/* ------------------------------------------------------------ routes: lifecycle */

static void create_work(void *arg)
{
    struct vol_job *j = arg;
    const char *dir = j->dir;
    /* the data disk keeps sessions.min_free_bytes free (checkpoints, images) */
    struct statvfs sv;
    if (statvfs(j->parent, &sv) == 0 && (int64_t)sv.f_bavail * (int64_t)sv.f_frsize < j->size + j->min_free) {
        j->rc = -1;
        j->nospace = 1;
        snprintf(j->msg, sizeof j->msg, "%s: %lld bytes free, %lld asked and %lld kept free", j->parent,
                 (long long)sv.f_bavail * (long long)sv.f_frsize, (long long)j->size, (long long)j->min_free);
        return;
    }
    j->rc = vol_make(dir, j->size, j->meta, j->msg, sizeof j->msg);
    j->nospace = j->rc < 0 && (errno == ENOSPC || errno == EDQUOT);
    if (j->rc == 0 && vol_stopping) { /* nobody was answered 201: nothing of it stays */
        j->rc = -1;
        snprintf(j->msg, sizeof j->msg, "eaid stopped");
    }
    if (j->rc < 0) {
        char m[8];
        vol_remove(dir, m, sizeof m);
    }
}

static void create_answer(struct eai_req *r, void *arg)
{
    struct vol_job *j = arg;
    struct eai_vols *vs = vols_of(j->app);
    struct vol *v = vs ? find_id(vs, NULL, j->id) : NULL;
    if (!v)
        return; /* stopping */
    if (j->rc < 0) {
        eai_log(VOL_COMPONENT, EAI_LOG_ERROR, "volume %s: create failed: %s", j->id, j->msg);
        unlink_vol(vs, v);
        free(v);
        if (r) {
            req_audit(j->app, r, "volume.create", j->id, "deny", j->nospace ? "insufficient_storage" : "internal");
            eai_reply_error(r, j->nospace ? EAI_E_INSUFFICIENT_STORAGE : EAI_E_INTERNAL,
                            detail1("", j->nospace ? "this server has no disk space for the volume now"
                                                   : "the volume could not be made on this server"));
        }
        return;
    }
    v->state = V_READY;
    gauges(vs);
    if (r) {
        req_audit(j->app, r, "volume.create", j->id, "allow", NULL);
        eai_reply_json(r, 201, vol_view(v));
    }
}

static const struct eai_park_ops create_ops = {
    .what = "volume_create", .work = create_work, .answer = create_answer, .free = vol_job_free,
};

static struct eai_vols *route_vols(struct eai_app *app, struct eai_req *r)
{
    struct eai_vols *vs = vols_of(app);
    if (!vs || !vs->ok) {
        eai_reply_error(r, EAI_E_VOLUMES_UNSUPPORTED,
                        detail1("", "volumes are not available on this server"));
        return NULL;
    }
    return vs;
}

void eai_vol_route_create(struct eai_app *app, struct eai_req *r)
{
    struct eai_vols *vs = route_vols(app, r);
    if (!vs)
        return;
    const char *tenant = eai_req_tenant(r);
    json_t *body = eai_req_body_json(r, 0);
    if (!body)
        return;
    const char *name = eai_jstr(body, "name");
    const json_t *sz = json_object_get(body, "size_bytes");
    if (!sz)
        sz = json_object_get(body, "size");
    const char *k;
    json_t *x;
    json_t *det = NULL;
    json_object_foreach(body, k, x) if (strcmp(k, "name") && strcmp(k, "size_bytes") && strcmp(k, "size")) {
        char p[80];
        snprintf(p, sizeof p, "/%.60s", k);
        det = detail1(p, "is not allowed (unknown property)");
        break;
    }
    if (!det && !json_is_object(body))
        det = detail1("", "must be an object");
    if (!det && !name_ok(name))
        det = detail1("/name", "must be 1 to 63 characters of a-z, 0-9, '.', '_', '-', starting with a letter "
                               "or digit, not vol_...");
    if (!det && (json_object_get(body, "size_bytes") && json_object_get(body, "size")))
        det = detail1("/size_bytes", "give size_bytes or size, not both");
    char m[160];
    int64_t size = 0;
    /* bytes, or a quantity as the limits take them ("256Mi", "1Gi") */
    if (!det && (!sz || eai_cfg_quantity_bytes(sz, &size) < 0 || size < EAI_VOL_MIN_BYTES || size > vs->max_bytes)) {
        snprintf(m, sizeof m, "must be a number of bytes (or a quantity like \"1Gi\") from %lld to %lld",
                 (long long)EAI_VOL_MIN_BYTES, (long long)vs->max_bytes);
        det = detail1(json_object_get(body, "size") ? "/size" : "/size_bytes", m);
    }
    if (det) {
        json_decref(body);
        req_audit(app, r, "volume.create", "", "deny", "validation_failed");
        eai_reply_error(r, EAI_E_VALIDATION_FAILED, det);
        return;
    }
    size = (size + 4095) / 4096 * 4096;
    if (find_name(vs, tenant, name)) {
        json_decref(body);
        req_audit(app, r, "volume.create", "", "deny", "conflict");
        eai_reply_error(r, EAI_E_CONFLICT, detail1("/name", "a volume of this name exists"));
        return;
    }
    int64_t count, bytes;
    tenant_use(vs, tenant, &count, &bytes);
    if (count + 1 > vs->max_count || bytes + size > vs->max_total) {
        if (count + 1 > vs->max_count)
            snprintf(m, sizeof m, "at most %lld volumes per tenant", (long long)vs->max_count);
        else
            snprintf(m, sizeof m, "at most %lld bytes of volumes per tenant", (long long)vs->max_total);
        json_decref(body);
        req_audit(app, r, "volume.create", "", "deny", "volume_quota_exceeded");
        eai_reply_error(r, EAI_E_VOLUME_QUOTA_EXCEEDED, detail1("", m));
        return;
    }
    struct vol *v = calloc(1, sizeof *v);
    struct vol_job *j = calloc(1, sizeof *j);
    char uuid[37];
    if (!v || !j) {
        free(v);
        free(j);
        json_decref(body);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    eai_uuid_v4(uuid);
    snprintf(v->id, sizeof v->id, "vol_%s", uuid);
    snprintf(v->tenant, sizeof v->tenant, "%s", tenant);
    snprintf(v->name, sizeof v->name, "%s", name);
    v->size = size;
    v->created_ms = eai_now_ms();
    v->state = V_CREATING;
    v->next = vs->list;
    vs->list = v;
    json_decref(body);
    j->app = app;
    j->vs = vs;
    snprintf(j->id, sizeof j->id, "%s", v->id);
    vol_dir(vs, v->id, j->dir, sizeof j->dir);
    j->size = size;
    v->billed_ms = v->created_ms;
    j->meta = meta_of(v, v->billed_ms);
    j->min_free = app->cfg ? app->cfg->sessions_min_free_bytes : 0;
    snprintf(j->parent, sizeof j->parent, "%s", vs->dir);
    if (eai_park(vs->parks, r, &create_ops, j) < 0) { /* answered and j freed: v goes too */
        unlink_vol(vs, v);
        free(v);
    }
}

void eai_vol_route_list(struct eai_app *app, struct eai_req *r)
{
    struct eai_vols *vs = route_vols(app, r);
    if (!vs)
        return;
    json_t *items = json_array();
    for (struct vol *v = vs->list; v; v = v->next)
        if (!strcmp(v->tenant, eai_req_tenant(r)))
            json_array_append_new(items, vol_view(v));
    eai_reply_json(r, 200, json_pack("{s:o}", "items", items));
}

static struct vol *route_vol(struct eai_app *app, struct eai_req *r, const char *action)
{
    struct eai_vols *vs = route_vols(app, r);
    if (!vs)
        return NULL;
    struct vol *v = find_ref(vs, eai_req_tenant(r), eai_req_param(r, "id"));
    if (!v) {
        req_audit(app, r, action, "", "deny", "not_found");
        eai_reply_not_found(r, EAI_MISSING_VOLUME);
    }
    return v;
}

struct get_job {
    char dir[PATH_MAX];
    json_t *view;
    int64_t used, avail;
    int ok;
};

static void get_work(void *arg)
{
    struct get_job *j = arg;
    char mp[PATH_MAX + 8];
    struct statvfs sv;
    snprintf(mp, sizeof mp, "%s/tmp", j->dir);
    if (is_mounted(j->dir) && statvfs(mp, &sv) == 0) {
        j->used = (int64_t)(sv.f_blocks - sv.f_bfree) * (int64_t)sv.f_frsize;
        j->avail = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
        j->ok = 1;
    }
}

static void get_answer(struct eai_req *r, void *arg)
{
    struct get_job *j = arg;
    if (!r)
        return;
    /* what the filesystem says (ext4 keeps some blocks for itself: used
     * starts above 0, used + free stays below size_bytes) */
    json_object_set_new(j->view, "used_bytes", j->ok ? json_integer(j->used) : json_null());
    json_object_set_new(j->view, "free_bytes", j->ok ? json_integer(j->avail) : json_null());
    eai_reply_json(r, 200, json_incref(j->view));
}

static void get_free(void *arg)
{
    struct get_job *j = arg;
    json_decref(j->view);
    free(j);
}

static const struct eai_park_ops get_ops = {
    .what = "volume_get", .work = get_work, .answer = get_answer, .free = get_free,
};

void eai_vol_route_get(struct eai_app *app, struct eai_req *r)
{
    struct vol *v = route_vol(app, r, "volume.get");
    if (!v)
        return;
    struct get_job *j = calloc(1, sizeof *j);
    if (!j || !(j->view = vol_view(v))) {
        free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    if (v->state != V_READY) { /* nothing mounted to ask */
        json_object_set_new(j->view, "used_bytes", json_null());
        json_object_set_new(j->view, "free_bytes", json_null());
        eai_reply_json(r, 200, json_incref(j->view));
        get_free(j);
        return;
    }
    vol_dir(vols_of(app), v->id, j->dir, sizeof j->dir);
    eai_park(vols_of(app)->parks, r, &get_ops, j); /* the filesystem's figures on a worker */
}

static void delete_work(void *arg)
{
    struct vol_job *j = arg;
    const char *dir = j->dir;
    char m[8];
    /* marked first: a crash in the middle leaves a volume start-up removes */
    json_object_set_new(j->meta, "deleting", json_true());
    write_meta(dir, j->meta, m, sizeof m);
    j->rc = vol_remove(dir, j->msg, sizeof j->msg);
    if (j->rc < 0)
        return;
    const struct eai_storage_ops *st = j->app->store;
    struct eai_error *err = NULL;
    int rc = st->outbox_append ? st->outbox_append(j->app->storage.self, j->tenant, j->usage, j->audit, &err)
                               : st->audit_append(j->app->storage.self, j->tenant, j->audit, &err);
    if (rc < 0)
        eai_log(VOL_COMPONENT, EAI_LOG_ERROR, "volume %s: recording its usage failed: %s", j->id,
                err && err->message ? err->message : "?");
    eai_error_free(err);
}

static void delete_answer(struct eai_req *r, void *arg)
{
    struct vol_job *j = arg;
    struct eai_vols *vs = vols_of(j->app);
    struct vol *v = vs ? find_id(vs, NULL, j->id) : NULL;
    if (!v)
        return;
    if (j->rc < 0) {
        eai_log(VOL_COMPONENT, EAI_LOG_ERROR, "volume %s: delete failed: %s", j->id, j->msg);
        v->state = V_READY;
        if (r)
            eai_reply_error(r, EAI_E_VOLUME_IN_USE, detail1("", "the volume could not be unmounted; retry"));
        return;
    }
    unlink_vol(vs, v);
    free(v);
    gauges(vs);
    if (r)
        eai_reply_json(r, 200, json_pack("{s:s, s:s, s:O}", "id", j->id, "status", "deleted", "usage", j->total));
}

static const struct eai_park_ops delete_ops = {
    .what = "volume_delete", .work = delete_work, .answer = delete_answer, .free = vol_job_free,
};

void eai_vol_route_delete(struct eai_app *app, struct eai_req *r)
{
    struct vol *v = route_vol(app, r, "volume.delete");
    if (!v)
        return;
    if (v->state != V_READY || v->writer[0] || v->readers || v->files_inflight || v->billing) {
        req_audit(app, r, "volume.delete", v->id, "deny", "volume_in_use");
        eai_reply_error(r, EAI_E_VOLUME_IN_USE,
                        detail1("", v->state != V_READY ? "the volume is being created or deleted"
                                                        : "a sandbox or a file operation holds the volume"));
        return;
    }
    struct vol_job *j = calloc(1, sizeof *j);
    if (!j) {
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    struct eai_vols *vs = vols_of(app);
    j->app = app;
    j->vs = vs;
    snprintf(j->id, sizeof j->id, "%s", v->id);
    vol_dir(vs, v->id, j->dir, sizeof j->dir);
    snprintf(j->tenant, sizeof j->tenant, "%s", v->tenant);
    int64_t now = eai_now_ms();
    /* billing: the provisioned size since the last periodic event, at its end */
    j->usage = usage_event(v, now, 1);
    j->total = json_pack("{s:I, s:f}", "size_bytes", (json_int_t)v->size, "gb_hours", gb_hours(v, now));
    j->audit = eai_req_audit_event(r, "volume.delete", v->id, "allow", NULL);
    j->meta = meta_of(v, v->billed_ms);
    if (!j->usage || !j->audit || !j->meta || !j->total) {
        vol_job_free(j);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    v->state = V_DELETING;
    if (eai_park(vs->parks, r, &delete_ops, j) < 0)
        v->state = V_READY;
}

/* ------------------------------------------------------------ routes: files */

struct file_job {
    struct eai_app *app;
    char id[48], dir[PATH_MAX];
    char *path;                  /* "/tmp/<path in the volume>" for eai_pc_tmp_* */
    enum eai_iso_file_op op;
    unsigned char *data;
    size_t len;
    json_t *list;
    int rc, err;
};

/* Worker: write one file under <dir>/tmp (the volume's root, its ext4
 * filesystem only: never the data dir's disk below an unmounted volume),
 * making directories owned by the sandboxes' uid; no component is a
 * symlink followed (O_NOFOLLOW at each step); written beside and renamed,
 * so a full volume leaves the old file or none. */
static int vol_put(const char *dir, const char *path, const unsigned char *data, size_t len)
{
    char root[PATH_MAX + 8], buf[PATH_MAX];
    snprintf(root, sizeof root, "%s/tmp", dir);
    int dfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct statfs sf;
    if (dfd < 0 || fstatfs(dfd, &sf) < 0 || sf.f_type != 0xEF53 /* EXT4_SUPER_MAGIC */) {
        if (dfd >= 0)
            close(dfd);
        errno = ENOENT;
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", path + 5); /* below /tmp/ */
    char *s = buf;
    for (char *slash; (slash = strchr(s, '/'));) {
        *slash = '\0';
        if (mkdirat(dfd, s, 0755) == 0) {
            if (fchownat(dfd, s, EAI_VOL_UID, EAI_VOL_UID, AT_SYMLINK_NOFOLLOW) < 0) {
                close(dfd);
                return -1;
            }
        } else if (errno != EEXIST) {
            int e = errno;
            close(dfd);
            errno = e;
            return -1;
        }
        int nfd = openat(dfd, s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(dfd);
        if (nfd < 0) {
            errno = e == ELOOP ? ENOENT : e;
            return -1;
        }
        dfd = nfd;
        s = slash + 1;
    }
    static _Atomic unsigned seq;
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".eai-put-%d-%u", (int)getpid(), ++seq);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        close(dfd);
        errno = e;
        return -1;
    }
    int rc = eai_write_all(fd, data, len);
    if (rc == 0 && fchown(fd, EAI_VOL_UID, EAI_VOL_UID) < 0)
        rc = -1;
    if (close(fd) < 0)
        rc = -1;
    struct stat st;
    /* a link the sandbox left at the target is replaced, never followed;
     * a directory there is refused */
    if (rc == 0 && fstatat(dfd, s, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        rc = -1;
    }
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

static void file_work(void *arg)
{
    struct file_job *j = arg;
    if (!is_mounted(j->dir)) { /* never the data dir's disk */
        j->rc = -1;
        j->err = ENOENT;
        return;
    }
    switch (j->op) {
    case EAI_ISO_FILE_PUT:
        j->rc = vol_put(j->dir, j->path, j->data, j->len);
        break;
    case EAI_ISO_FILE_GET: {
        unsigned char *out = NULL;
        size_t n = 0;
        j->rc = eai_pc_tmp_get(j->dir, j->path, VOL_FILE_MAX, &out, &n);
        free(j->data);
        j->data = out;
        j->len = n;
        break;
    }
    case EAI_ISO_FILE_DELETE:
        j->rc = eai_pc_tmp_delete(j->dir, j->path);
        break;
    default:
        j->rc = eai_pc_tmp_list(j->dir, j->path, VOL_LIST_MAX, &j->list);
        if (j->rc == 0) { /* paths as the volume's: "/tmp/a" -> "/a" */
            size_t i;
            json_t *it;
            json_array_foreach(j->list, i, it) {
                const char *p = eai_jstr(it, "path");
                if (p && strncmp(p, "/tmp/", 5) == 0) {
                    char *c = strdup(p + 4);
                    if (c)
                        json_object_set_new(it, "path", json_string(c));
                    free(c);
                }
            }
        }
    }
    j->err = j->rc < 0 ? errno : 0;
}

static void file_answer(struct eai_req *r, void *arg)
{
    struct file_job *j = arg;
    struct eai_vols *vs = vols_of(j->app);
    struct vol *v = vs ? find_id(vs, NULL, j->id) : NULL;
    if (v && v->files_inflight > 0)
        v->files_inflight--;
    if (!r)
        return;
    const char *vpath = j->path + 4;
    if (j->rc < 0) {
        int e = j->err;
        if (e == ENOENT || e == ENOTDIR || e == ELOOP) { /* a link is never followed: as missing */
            eai_reply_not_found(r, EAI_MISSING_VOLUME_FILE);
        } else if (e == ENOSPC || e == EDQUOT || e == EFBIG) {
            eai_reply_error(r, EAI_E_PAYLOAD_TOO_LARGE,
                            detail1(vpath, e == EFBIG ? "the file is larger than a file API call carries"
                                                      : "the volume is full"));
        } else if (e == ENOTEMPTY || e == EEXIST || e == EISDIR) {
            eai_reply_error(r, EAI_E_CONFLICT, detail1(vpath, "a directory that is not empty, or not a file"));
        } else {
            eai_reply_error(r, EAI_E_VALIDATION_FAILED, detail1(vpath, strerror(e)));
        }
        return;
    }
    switch (j->op) {
    case EAI_ISO_FILE_GET:
        eai_reply_raw(r, 200, "application/octet-stream", j->data ? (const char *)j->data : "", j->len);
        break;
    case EAI_ISO_FILE_LIST:
        eai_reply_json(r, 200, json_pack("{s:s, s:O}", "path", vpath[0] ? vpath : "/", "items",
                                         j->list ? j->list : json_array()));
        break;
    default:
        eai_reply_json(r, 200, json_pack("{s:s, s:I}", "path", vpath, "size",
                                         (json_int_t)(j->op == EAI_ISO_FILE_PUT ? j->len : 0)));
    }
}

static void file_free(void *arg)
{
    struct file_job *j = arg;
    free(j->path);
    free(j->data);
    json_decref(j->list);
    free(j);
}

static const struct eai_park_ops file_ops = {
    .what = "volume_file", .work = file_work, .answer = file_answer, .free = file_free,
};

static void file_route(struct eai_app *app, struct eai_req *r, enum eai_iso_file_op op, const char *action)
{
    struct vol *v = route_vol(app, r, action);
    if (!v)
        return;
    if (v->state != V_READY || v->writer[0]) {
        req_audit(app, r, action, v->id, "deny", "volume_in_use");
        eai_reply_error(r, EAI_E_VOLUME_IN_USE,
                        detail1("", v->state != V_READY ? "the volume is being created or deleted"
                                                        : "a sandbox mounts the volume read-write"));
        return;
    }
    if (op != EAI_ISO_FILE_GET && op != EAI_ISO_FILE_LIST && v->readers) {
        req_audit(app, r, action, v->id, "deny", "volume_in_use");
        eai_reply_error(r, EAI_E_VOLUME_IN_USE, detail1("", "sandboxes mount the volume: it is read-only now"));
        return;
    }
    /* the path in the volume: {*path}, or ?path= for the listing ("/" = all) */
    const char *p = op == EAI_ISO_FILE_LIST ? eai_req_query(r, "path") : eai_req_param(r, "path");
    if (op == EAI_ISO_FILE_LIST && (!p || !strcmp(p, "/") || !p[0]))
        p = "";
    size_t n = p ? strlen(p) + 8 : 0;
    char *path = n ? malloc(n) : NULL;
    if (path)
        snprintf(path, n, "/tmp%s%s", p[0] == '/' || !p[0] ? "" : "/", p);
    if (!path || !eai_exec_tmp_path_ok(path, strlen(path), op == EAI_ISO_FILE_LIST) ||
        eai_exec_path_max_segment(path) > EAI_EXEC_MAX_NAME_BYTES ||
        (op != EAI_ISO_FILE_LIST && strcmp(path, "/tmp") == 0)) {
        free(path);
        req_audit(app, r, action, v->id, "deny", "validation_failed");
        eai_reply_error(r, EAI_E_VALIDATION_FAILED,
                        detail1("/path", "must be a path in the volume without '.', '..' or empty segments"));
        return;
    }
    struct file_job *j = calloc(1, sizeof *j);
    if (!j) {
        free(path);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    j->app = app;
    snprintf(j->id, sizeof j->id, "%s", v->id);
    vol_dir(vols_of(app), v->id, j->dir, sizeof j->dir);
    j->op = op;
    j->path = path;
    if (op == EAI_ISO_FILE_PUT) {
        size_t len = 0;
        const char *body = eai_req_body(r, &len);
        if ((int64_t)len > VOL_FILE_MAX) {
            file_free(j);
            eai_reply_error(r, EAI_E_PAYLOAD_TOO_LARGE, NULL);
            return;
        }
        j->data = malloc(len ? len : 1);
        if (!j->data) {
            file_free(j);
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
            return;
        }
        if (len)
            memcpy(j->data, body, len);
        j->len = len;
    }
    if (op != EAI_ISO_FILE_GET && op != EAI_ISO_FILE_LIST)
        req_audit(app, r, action, v->id, "allow", path + 4);
    v->files_inflight++;
    if (eai_park(vols_of(app)->parks, r, &file_ops, j) < 0)
        v->files_inflight--;
}

void eai_vol_route_file_put(struct eai_app *app, struct eai_req *r)
{
    file_route(app, r, EAI_ISO_FILE_PUT, "volume.file.put");
}

void eai_vol_route_file_get(struct eai_app *app, struct eai_req *r)
{
    file_route(app, r, EAI_ISO_FILE_GET, "volume.file.get");
}

void eai_vol_route_file_delete(struct eai_app *app, struct eai_req *r)
{
    file_route(app, r, EAI_ISO_FILE_DELETE, "volume.file.delete");
}

void eai_vol_route_file_list(struct eai_app *app, struct eai_req *r)
{
    file_route(app, r, EAI_ISO_FILE_LIST, "volume.file.list");
}
