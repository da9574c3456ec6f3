/*
 * eai-isolation-kata.so: runs each execution as a containerd container with
 * the runtime io.containerd.kata.v2 (a Kata Containers microVM), driven by
 * `ctr` child processes watched with pidfds on the loop (docs/kata.md).
 *
 * Fail closed: create() checks that the shim binary for the runtime
 * (containerd-shim-kata-v2) is on PATH and that the containerd socket
 * exists, then probes in the background: `ctr version`, the `ctr events`
 * subscription, and one trivial container through the runtime whose exit
 * must be seen on the event stream.  Until that succeeds probe() says not
 * ready and start() refuses with EAI_E_SANDBOX_UNAVAILABLE; nothing runs.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "kata.h"

static const struct eai_config_key kt_keys[] = {
    {"address", EAI_CFG_STRING, 0, "/run/containerd/containerd.sock", "containerd's gRPC socket"},
    {"namespace", EAI_CFG_STRING, 0, "eai", "containerd namespace of our containers (one eaid per namespace)"},
    {"ctr", EAI_CFG_STRING, 0, "ctr", "ctr binary: absolute path, or a name looked up in PATH"},
    {"runtime", EAI_CFG_STRING, 0, "io.containerd.kata.v2",
     "containerd runtime; its shim (containerd-shim-<name>-<version>) must be on PATH"},
    {"work_dir", EAI_CFG_STRING, 0, NULL, "per-execution specs and /tmp mounts (default <data_dir>/kata/work)"},
    {"uid", EAI_CFG_INT, 0, "65534", "unprivileged uid/gid the program runs as inside the sandbox"},
    {"probe", EAI_CFG_BOOL, 0, "true", "run one trivial container through the runtime before accepting work"},
    {"kill_grace_ms", EAI_CFG_INT, 0, "2000", "SIGTERM to SIGKILL delay on timeout and cancel"},
    {NULL, 0, 0, NULL, NULL},
};

/* ------------------------------------------------------------ helpers */

/* containerd's rule: "io.containerd.kata.v2" -> "containerd-shim-kata-v2";
 * an absolute path names the shim itself. */
static int shim_name(const char *runtime, char *out, size_t len)
{
    if (runtime[0] == '/') {
        snprintf(out, len, "%s", runtime);
        return 0;
    }
    const char *last = strrchr(runtime, '.');
    if (!last || last == runtime || !last[1])
        return -1;
    const char *prev = last - 1;
    while (prev > runtime && prev[-1] != '.')
        prev--;
    if (prev == last)
        return -1;
    snprintf(out, len, "containerd-shim-%.*s-%s", (int)(last - prev), prev, last + 1);
    return 0;
}

int kt_shim_check(struct kt *k, char *why, size_t whylen)
{
    char name[PATH_MAX];
    if (shim_name(k->runtime, name, sizeof(name)) < 0) {
        snprintf(why, whylen, "runtime %s names no shim binary", k->runtime);
        return -1;
    }
    if (eai_pc_find_in_path(name, k->shim, sizeof(k->shim)) < 0) {
        snprintf(why, whylen, "%s not found on PATH: the %s runtime is not installed", name, k->runtime);
        return -1;
    }
    return 0;
}

void kt_ctr_argv(struct kt *k, char *argv[KT_CTR_ARGC])
{
    argv[0] = k->ctr;
    argv[1] = "--address";
    argv[2] = k->address;
    argv[3] = "--namespace";
    argv[4] = k->ns;
    argv[5] = "--connect-timeout";
    argv[6] = "5s";
}

int kt_ready(const struct kt *k)
{
    return k->probe_state == 1 && !k->sweeping && kt_events_running(k);
}

static void kt_free(struct kt *k)
{
    if (k->reprobe_ev)
        event_free(k->reprobe_ev);
    if (k->probe_wait_ev)
        event_free(k->probe_wait_ev);
    eai_pc_runner_free(k->runner);
    free(k);
}

void kt_release(void *self)
{
    struct kt *k = self;
    k->inflight--;
    if (k->destroying && k->inflight <= 0)
        kt_free(k);
}

/* ------------------------------------------------------------ probe */

static void probe_start(struct kt *k);

static void probe_finish(struct kt *k, int ok, const char *reason)
{
    if (k->destroying)
        return;
    if (ok) {
        k->probe_state = 1;
        k->reason[0] = '\0';
        k->host->log(k->host, KT_COMPONENT, EAI_LOG_INFO, "ready: %s (namespace %s, shim %s)", k->version, k->ns,
                     k->shim);
    } else {
        k->probe_state = -1;
        snprintf(k->reason, sizeof(k->reason), "%s", reason);
        k->host->log(k->host, KT_COMPONENT, EAI_LOG_ERROR, "not ready: %s", k->reason);
        struct timeval tv = {KT_REPROBE_MS / 1000, 0};
        if (k->reprobe_ev)
            evtimer_add(k->reprobe_ev, &tv);
    }
}

struct probe_ctx {
    struct kt *k;
    char dir[PATH_MAX];
    char spec[PATH_MAX + 16];
    char fifo[PATH_MAX + 16];
    char msg[256];
    int rc;
};

static void probe_cleanup_work(void *arg)
{
    struct probe_ctx *p = arg;
    eai_rm_tree(p->dir);
}

static void probe_cleanup_done(void *arg)
{
    struct probe_ctx *p = arg;
    struct kt *k = p->k;
    free(p);
    kt_release(k);
}

static void probe_cleanup(struct probe_ctx *p)
{
    struct kt *k = p->k;
    if (k->probe_ctx == p)
        k->probe_ctx = NULL;
    if (k->destroying || k->host->work_submit(k->host, probe_cleanup_work, probe_cleanup_done, p) < 0) {
        probe_cleanup_work(p);
        probe_cleanup_done(p);
    }
}

static void probe_settle(struct kt *k, int timed_out)
{
    k->probe_waiting = 0;
    event_del(k->probe_wait_ev);
    if (!k->probe_seen.exited && timed_out && !k->probe_retried) {
        /* The container ran but its event did not come: the subscription
         * may have been made just too late.  Once more, right away. */
        k->probe_retried = 1;
        if (k->probe_ctx)
            probe_cleanup(k->probe_ctx);
        k->host->log(k->host, KT_COMPONENT, EAI_LOG_WARN, "probe: no exit event seen, retrying once");
        probe_start(k);
        return;
    }
    if (k->probe_seen.exited && k->probe_seen.exit_status == 0)
        probe_finish(k, 1, NULL);
    else if (k->probe_seen.exited)
        probe_finish(k, 0, "trivial container: exit event with a non-zero status");
    else
        probe_finish(k, 0, timed_out ? "trivial container ran but ctr events reported no /tasks/exit for it"
                                     : "trivial container: no exit event");
    if (k->probe_ctx)
        probe_cleanup(k->probe_ctx);
}

static void on_probe_wait(evutil_socket_t fd, short what, void *arg)
{
    struct kt *k = arg;
    if (k->probe_waiting)
        probe_settle(k, 1);
}

static void probe_run_done(void *arg, int status, const char *out, size_t outlen)
{
    struct probe_ctx *p = arg;
    struct kt *k = p->k;
    if (k->destroying) {
        probe_cleanup(p);
        return;
    }
    if (status != 0) {
        char reason[256], line[200];
        eai_pc_one_line(line, sizeof(line), out);
        snprintf(reason, sizeof(reason), "trivial container through %s failed (%s %d)%s%s", k->runtime,
                 status < 0 ? "spawn" : WIFEXITED(status) ? "exit" : "signal",
                 status < 0 ? 0 : WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), line[0] ? ": " : "",
                 line);
        probe_finish(k, 0, reason);
        probe_cleanup(p);
        return;
    }
    if (k->probe_seen.exited) {
        probe_settle(k, 0);
        return;
    }
    /* ctr returned before its events reached us: wait a little. */
    k->probe_waiting = 1;
    struct timeval tv = {KT_EVENT_WAIT_MS / 1000, (KT_EVENT_WAIT_MS % 1000) * 1000};
    evtimer_add(k->probe_wait_ev, &tv);
}

static void probe_bundle_work(void *arg)
{
    struct probe_ctx *p = arg;
    eai_rm_tree(p->dir);
    p->rc = eai_pc_probe_bundle(p->dir, p->k->uid, NULL, p->msg, sizeof(p->msg));
}

static void probe_bundle_done(void *arg)
{
    struct probe_ctx *p = arg;
    struct kt *k = p->k;
    if (k->destroying) {
        probe_cleanup(p);
        return;
    }
    if (p->rc < 0) {
        char reason[300];
        snprintf(reason, sizeof(reason), "probe bundle: %s", p->msg);
        probe_finish(k, 0, reason);
        probe_cleanup(p);
        return;
    }
    snprintf(p->spec, sizeof(p->spec), "%s/config.json", p->dir);
    snprintf(p->fifo, sizeof(p->fifo), "%s/fifo", p->dir);
    memset(&k->probe_seen, 0, sizeof(k->probe_seen));
    char *argv[KT_CTR_ARGC + 12];
    kt_ctr_argv(k, argv);
    int n = KT_CTR_ARGC;
    argv[n++] = "run";
    argv[n++] = "--rm";
    argv[n++] = "--null-io";
    argv[n++] = "--config";
    argv[n++] = p->spec;
    argv[n++] = "--runtime";
    argv[n++] = k->runtime;
    argv[n++] = "--fifo-dir";
    argv[n++] = p->fifo;
    argv[n++] = k->probe_cid;
    argv[n] = NULL;
    k->probe_ctx = p;
    if (!eai_pc_child_spawn(k->host->base, k, argv, -1, -1, -1, 1, KT_PROBE_TIMEOUT_MS, probe_run_done, p)) {
        char reason[300];
        snprintf(reason, sizeof(reason), "cannot run %s: %s", k->ctr, strerror(errno));
        probe_finish(k, 0, reason);
        probe_cleanup(p);
    }
}

static void version_done(void *arg, int status, const char *out, size_t outlen)
{
    struct kt *k = arg;
    if (k->destroying) {
        kt_release(k);
        return;
    }
    if (status != 0) {
        char reason[256], line[200];
        const char *msg = out ? strstr(out, "ctr: ") : NULL;
        eai_pc_one_line(line, sizeof(line), msg ? msg : out);
        snprintf(reason, sizeof(reason), "containerd at %s does not answer (ctr version: %s %d)%s%s", k->address,
                 status < 0 ? "spawn" : WIFEXITED(status) ? "exit" : "signal",
                 status < 0 ? 0 : WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), line[0] ? ": " : "",
                 line);
        probe_finish(k, 0, reason);
        kt_release(k);
        return;
    }
    /* "Server:\n  Version:  1.6.20~ds1" */
    char server[64] = "";
    const char *s = out ? strstr(out, "Server:") : NULL;
    const char *v = s ? strstr(s, "Version:") : NULL;
    if (v) {
        v += strlen("Version:");
        while (*v == ' ')
            v++;
        eai_pc_one_line(server, sizeof(server), v);
    }
    if (!server[0]) {
        probe_finish(k, 0, "ctr version printed no server version");
        kt_release(k);
        return;
    }
    snprintf(k->version, sizeof(k->version), "containerd %s, runtime %s", server, k->runtime);
    if (kt_events_start(k) < 0 && !kt_events_running(k)) {
        probe_finish(k, 0, "cannot subscribe to containerd events (ctr events)");
        kt_release(k);
        return;
    }
    if (!k->probe_enabled) {
        probe_finish(k, 1, NULL);
        kt_release(k);
        return;
    }
    struct probe_ctx *p = calloc(1, sizeof(*p));
    if (!p) {
        probe_finish(k, 0, "out of memory");
        kt_release(k);
        return;
    }
    p->k = k;
    snprintf(k->probe_cid, sizeof(k->probe_cid), "%s%lu", k->probe_prefix, ++k->seq);
    snprintf(p->dir, sizeof(p->dir), "%s/%s", k->work_dir, k->probe_cid);
    /* inflight stays taken by p until probe_cleanup_done. */
    if (k->host->work_submit(k->host, probe_bundle_work, probe_bundle_done, p) < 0) {
        probe_bundle_work(p);
        probe_bundle_done(p);
    }
}

static void probe_start(struct kt *k)
{
    k->probe_state = 0;
    snprintf(k->reason, sizeof(k->reason), "probe in progress");
    char name[PATH_MAX];
    snprintf(name, sizeof(name), "%s", k->ctr);
    if (eai_pc_find_in_path(name, k->ctr, sizeof(k->ctr)) < 0) {
        char reason[PATH_MAX + 64];
        snprintf(reason, sizeof(reason), "ctr not found or not executable: %s", k->ctr);
        probe_finish(k, 0, reason);
        return;
    }
    char why[PATH_MAX + 128];
    if (kt_shim_check(k, why, sizeof(why)) < 0) {
        probe_finish(k, 0, why);
        return;
    }
    struct stat st;
    if (stat(k->address, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        char reason[PATH_MAX + 64];
        snprintf(reason, sizeof(reason), "no containerd socket at %s", k->address);
        probe_finish(k, 0, reason);
        return;
    }
    /* Subscribe first: the probe's container must find it listening. */
    kt_events_start(k);
    char *argv[KT_CTR_ARGC + 2];
    kt_ctr_argv(k, argv);
    argv[KT_CTR_ARGC] = "version";
    argv[KT_CTR_ARGC + 1] = NULL;
    k->inflight++;
    if (!eai_pc_child_spawn(k->host->base, k, argv, -1, -1, -1, 1, KT_CTR_TIMEOUT_MS, version_done, k)) {
        char reason[PATH_MAX + 64];
        snprintf(reason, sizeof(reason), "cannot run %s: %s", k->ctr, strerror(errno));
        k->inflight--;
        probe_finish(k, 0, reason);
    }
}

static void on_reprobe(evutil_socket_t fd, short what, void *arg)
{
    struct kt *k = arg;
    if (k->probe_state < 0 && !k->destroying)
        probe_start(k);
}

void kt_on_event(struct kt *k, const char *topic, const char *cid, int exit_status)
{
    if (k->probe_cid[0] && !strcmp(cid, k->probe_cid)) {
        if (!strcmp(topic, "/tasks/exit")) {
            k->probe_seen.exited = 1;
            k->probe_seen.exit_status = exit_status;
            if (k->probe_waiting)
                probe_settle(k, 0);
        }
        return;
    }
    kt_exec_event(k, topic, cid, exit_status);
}

/* ------------------------------------------------------------ ops */

static void kt_probe(void *self, struct eai_iso_probe *out)
{
    struct kt *k = self;
    memset(out, 0, sizeof(*out));
    out->size = sizeof(*out);
    out->ready = kt_ready(k);
    out->pending = k->probe_state == 0; /* ABI 1.1: first probe still running */
    out->caps = EAI_ISO_CAP_LOCAL_IMAGES | EAI_ISO_CAP_MEMORY_LIMIT | EAI_ISO_CAP_FILES;
    out->max_path_bytes = EAI_PC_MAX_PATH_BYTES; /* ABI 1.1: checked at admission */
    out->max_name_bytes = EAI_PC_MAX_NAME_BYTES;
    snprintf(out->version, sizeof(out->version), "%s", k->version);
    if (!out->ready) {
        if (k->probe_state == 1 && k->sweeping)
            snprintf(out->reason, sizeof(out->reason), "sweeping leftovers of an earlier run");
        else if (k->probe_state == 1)
            snprintf(out->reason, sizeof(out->reason), "containerd event stream (ctr events) is down");
        else
            snprintf(out->reason, sizeof(out->reason), "%s", k->reason);
    }
}

static int kt_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb, void *cb_arg,
                    void **handle, struct eai_error **err)
{
    struct kt *k = self;
    /* not wired to core's egress namespace yet (docs/egress.md): a granted
     * egress is refused, never run offline (core refuses it at admission:
     * this backend announces no egress capability) */
    if (job->egress && job->egress[0])
        return eai_host_error_set(k->host, err, EAI_E_EGRESS_UNSUPPORTED, "kata: granted egress is not supported");
    return eai_pc_runner_start(k->runner, job, cb, cb_arg, handle, err);
}

static void kt_cancel(void *self, void *handle)
{
    struct kt *k = self;
    eai_pc_runner_cancel(k->runner, handle);
}

/* containerd's namespace rule: [A-Za-z0-9]+([._-][A-Za-z0-9]+)*, <= 63. */
static int ns_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return 0;
    int prev_sep = 1;
    for (const char *p = s; *p; p++) {
        int alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        int sep = *p == '.' || *p == '_' || *p == '-';
        if (!alnum && !(sep && !prev_sep))
            return 0;
        prev_sep = sep;
    }
    return !prev_sep;
}

static void *kt_create(const struct eai_host *host, const json_t *config, struct eai_error **err)
{
    const char *what = NULL;
    if (config && !json_is_object(config))
        what = "config must be an object";
    else if (!host->base)
        what = "needs an event loop";
    if (what) {
        if (err)
            *err = host->error_new(EAI_E_VALIDATION_FAILED, 0, "kata: %s", what);
        return NULL;
    }
    struct kt *k = calloc(1, sizeof(*k));
    if (!k) {
        if (err)
            *err = host->error_new(EAI_E_INTERNAL, ENOMEM, "kata: out of memory");
        return NULL;
    }
    k->host = host;
    const char *s;
    s = eai_pc_cfg_str(config, "address");
    if (s && !strncmp(s, "unix://", 7))
        s += 7;
    snprintf(k->address, sizeof(k->address), "%s", s ? s : "/run/containerd/containerd.sock");
    snprintf(k->ns, sizeof(k->ns), "%s", (s = eai_pc_cfg_str(config, "namespace")) ? s : "eai");
    snprintf(k->ctr, sizeof(k->ctr), "%s", (s = eai_pc_cfg_str(config, "ctr")) ? s : "ctr");
    snprintf(k->runtime, sizeof(k->runtime), "%s", (s = eai_pc_cfg_str(config, "runtime")) ? s : "io.containerd.kata.v2");
    if ((s = eai_pc_cfg_str(config, "work_dir")))
        snprintf(k->work_dir, sizeof(k->work_dir), "%s", s);
    else
        snprintf(k->work_dir, sizeof(k->work_dir), "%s/kata/work", host->data_dir);
    json_t *v = config ? json_object_get(config, "uid") : NULL;
    k->uid = json_is_integer(v) ? (unsigned)json_integer_value(v) : 65534;
    v = config ? json_object_get(config, "probe") : NULL;
    k->probe_enabled = json_is_boolean(v) ? json_is_true(v) : 1;
    v = config ? json_object_get(config, "kill_grace_ms") : NULL;
    k->kill_grace_ms = json_is_integer(v) ? (int64_t)json_integer_value(v) : 2000;
    char shim[PATH_MAX];
    if (!ns_valid(k->ns))
        what = "invalid namespace";
    else if (shim_name(k->runtime, shim, sizeof(shim)) < 0)
        what = "runtime names no shim (want io.containerd.<name>.<version> or an absolute path)";
    else if (k->address[0] != '/')
        what = "address must be an absolute unix socket path";
    else if (k->kill_grace_ms < 0 || k->kill_grace_ms > 600000)
        what = "kill_grace_ms out of range";
    else if (k->work_dir[0] != '/')
        what = "work_dir must be absolute";
    if (what) {
        if (err)
            *err = host->error_new(EAI_E_VALIDATION_FAILED, 0, "kata: %s", what);
        free(k);
        return NULL;
    }
    char fifo[PATH_MAX + 8];
    snprintf(fifo, sizeof(fifo), "%s/fifo", k->work_dir);
    if (eai_mkdir_p(k->work_dir, 0700) < 0 || eai_mkdir_p(fifo, 0700) < 0) {
        if (err)
            *err = host->error_new(EAI_E_INTERNAL, errno, "kata: cannot create %s", k->work_dir);
        free(k);
        return NULL;
    }
    struct stat st;
    k->cg_v2 = stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0;
    /* Our own cgroup subtree, distinct per work dir: two servers on one
     * host never sweep each other's cgroups. */
    snprintf(k->cg_parent, sizeof(k->cg_parent), "eai-kata/%016llx", eai_pc_fnv1a(k->work_dir));
    unsigned char rnd[4] = {0};
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        memset(rnd, 0, sizeof(rnd));
    snprintf(k->probe_prefix, sizeof(k->probe_prefix), KT_CID_PREFIX "probe-%02x%02x%02x%02x-", rnd[0], rnd[1],
             rnd[2], rnd[3]);
    k->reprobe_ev = evtimer_new(host->base, on_reprobe, k);
    k->probe_wait_ev = evtimer_new(host->base, on_probe_wait, k);
    k->runner = kt_runner_new(k);
    if (!k->reprobe_ev || !k->probe_wait_ev || !k->runner) {
        if (err)
            *err = host->error_new(EAI_E_INTERNAL, ENOMEM, "kata: out of memory");
        kt_free(k);
        return NULL;
    }
    probe_start(k);
    return k;
}

static void kt_destroy(void *self)
{
    struct kt *k = self;
    if (!k)
        return;
    k->destroying = 1;
    k->inflight++; /* what runs inline below may drop the last reference */
    event_del(k->reprobe_ev);
    event_del(k->probe_wait_ev);
    /* Running executions: SIGKILL their ctr, reap it (and the kill helpers);
     * each then ends synchronously, leftovers deleted, no callback. */
    eai_pc_runner_shutdown(k->runner, 0);
    eai_pc_runner_shutdown(k->runner, 1);
    kt_events_stop(k);
    eai_pc_child_reap_all(k);
    if (!eai_pc_runner_count(k->runner))
        kt_cgroup_rmdir_parent(k->cg_parent, k->cg_v2);
    if (k->probe_ctx && k->probe_waiting) {
        k->probe_waiting = 0;
        probe_cleanup(k->probe_ctx);
    }
    kt_release(k);
}

static const struct eai_isolation_ops kt_ops = {
    .size = sizeof(struct eai_isolation_ops),
    .probe = kt_probe,
    .start = kt_start,
    .cancel = kt_cancel,
    .recover = NULL,
    .sweep = kt_sweep,
};

static const struct eai_plugin_descriptor kt_descriptor = {
    EAI_PLUGIN_DESCRIPTOR_HEADER, /* ABI version, size and build fingerprint */
    .name = "kata",
    .kind = EAI_KIND_ISOLATION,
    .version = EAI_VERSION, /* the build's (CMake project version) */
    .create = kt_create,
    .destroy = kt_destroy,
    .ops = &kt_ops,
    .config_keys = kt_keys,
};

EAI_PLUGIN_DECLARE(kt_descriptor)
