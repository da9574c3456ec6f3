/*
 * test_exec_scheduler: the execution lifecycle below HTTP, for real: a real
 * event loop and worker pool, the built-in SQLite storage, the real gVisor
 * backend (eai-isolation-gvisor.so, Debian's runsc) and a real image
 * (python:3.11-slim from EAI_IMAGE_DIR or <build>/images, built once when
 * absent).  Executions are recorded as the POST handler records them
 * (eai_exec_validate + exec_create) and then left to the scheduler.
 *
 * Checks: restart recovery (a row left running by a dead process ends in
 * error/interrupted; a queued one runs), statuses (succeeded, failed with
 * exit code, timeout), output cap and base64 encoding, files in and out,
 * the concurrency bound, cancel of a running execution, a backend that is
 * not ready (error sandbox_unavailable, nothing run), graceful stop
 * (interrupted), usage outbox rows and audit events.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/Basic.h>
#include <event2/event.h>
#include <jansson.h>

#include "config/config.h"
#include "base/errors.h"
#include "exec/exec.h"
#include "exec/exec_int.h"
#include "exec/exec_validate.h"
#include "exec/scheduler.h"
#include "plugin/host.h"
#include "images/images.h"
#include "plugin/loader.h"
#include "store/store_sqlite.h"
#include "base/util.h"
#include "base/worker.h"

#define IMAGE "python:3.11-slim"
#define IMAGE_PACKAGES "python3-minimal,libpython3.11-stdlib"
#define MI (1LL << 20)
#define GI (1LL << 30)

static struct eai_app app;
static struct eai_plugin_inst isolation[1];
static struct eai_config cfg;
static char g_data[PATH_MAX], g_images[PATH_MAX];
static char tenant[37];
static char *no_egress[] = {NULL};
static struct eai_profile profiles[2];
static int max_seen_running;

/* ------------------------------------------------------------ helpers */

static void *S(void) { return app.storage.self; }

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "(null)";
}

/* Record an execution exactly as POST does; returns its id (static buffer
 * per call site is the caller's). */
static int submit(const char *body_text, char id[64])
{
    json_t *body = json_loads(body_text, 0, NULL);
    if (!body)
        return -1;
    struct eai_exec_vopts o = {.files_max_total_bytes = 8 * MI};
    json_t *rec = NULL;
    struct eai_error *err = NULL;
    if (eai_exec_validate(body, NULL, profiles, 2, &o, &rec, NULL, &err) < 0) {
        char *d = err && err->details ? json_dumps(err->details, 0) : NULL;
        fprintf(stderr, "refused: %s %s\n", err ? eai_code_name(err->code) : "?", d ? d : "");
        free(d);
        eai_error_free(err);
        json_decref(body);
        return -1;
    }
    char uuid[37], hash[65];
    eai_uuid_v4(uuid);
    snprintf(id, 64, "sbx_%s", uuid);
    eai_exec_request_hash(body, hash);
    json_object_set_new(rec, "id", json_string(id));
    json_object_set_new(rec, "status", json_string("queued"));
    json_object_set_new(rec, "request_hash", json_string(hash));
    int rc = app.store->exec_create(S(), tenant, rec, NULL, NULL, &err);
    eai_error_free(err);
    json_decref(rec);
    json_decref(body);
    return rc == EAI_STORE_CREATED ? 0 : -1;
}

static json_t *get(const char *id)
{
    json_t *out = NULL;
    struct eai_error *err = NULL;
    if (app.store->exec_get(S(), tenant, id, &out, &err) < 0)
        eai_error_free(err);
    return out;
}

struct waitc {
    const char *const *ids;
    int n;
    int64_t deadline;
    int done;
};

static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct waitc *w = arg;
    int running = eai_exec_running(&app);
    if (running > max_seen_running)
        max_seen_running = running;
    int all = 1;
    for (int i = 0; i < w->n && all; i++) {
        json_t *e = get(w->ids[i]);
        const char *s = json_string_value(json_object_get(e, "status"));
        if (!s || !eai_exec_status_terminal(s))
            all = 0;
        json_decref(e);
    }
    if (all || eai_now_ms() > w->deadline) {
        w->done = all;
        event_base_loopbreak(app.base);
    }
}

/* Run the loop until every id is terminal (1) or timeout_s passes (0). */
static int wait_terminal(const char *const *ids, int n, int timeout_s)
{
    struct waitc w = {ids, n, eai_now_ms() + timeout_s * 1000LL, 0};
    struct event *ev = event_new(app.base, -1, EV_PERSIST, tick, &w);
    struct timeval tv = {0, 50 * 1000};
    event_add(ev, &tv);
    event_base_dispatch(app.base);
    event_free(ev);
    return w.done;
}

static void loop_for_ms(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    event_base_loopexit(app.base, &tv);
    event_base_dispatch(app.base);
}

static int wait_one(const char *id, int timeout_s)
{
    const char *ids[] = {id};
    return wait_terminal(ids, 1, timeout_s);
}

/* ------------------------------------------------------------ setup */

static int setup(void)
{
    snprintf(g_data, sizeof g_data, "/tmp/eai-test-sched-XXXXXX");
    if (!mkdtemp(g_data))
        return -1;
    const char *img = getenv("EAI_IMAGE_DIR");
    const char *bd = getenv("EAI_BUILD_DIR");
    if (img && *img)
        snprintf(g_images, sizeof g_images, "%s", img);
    else
        snprintf(g_images, sizeof g_images, "%s/images", bd ? bd : ".");
    char rootfs[PATH_MAX];
    if (eai_images_resolve(g_images, IMAGE, rootfs, sizeof rootfs) < 0) {
        fprintf(stderr, "building image %s into %s (once)\n", IMAGE, g_images);
        char *argv[] = {"build", IMAGE, "--packages", IMAGE_PACKAGES, NULL};
        if (eai_images_cli(g_images, 4, argv) != 0)
            return -1;
    }
    app.base = event_base_new();
    app.host = eai_host_new(app.base, g_data);
    if (!app.base || !app.host)
        return -1;
    eai_host_set_image_dir(app.host, g_images);
    if (eai_workers_start(app.base, 4) < 0)
        return -1;

    cfg.max_concurrent = 2;
    cfg.max_per_tenant = 2;
    cfg.max_queued_per_tenant = 1000;
    cfg.lease_ms = 30000;
    cfg.collect_max_files = 16;
    cfg.collect_max_file_bytes = 1 * MI;
    cfg.collect_max_total_bytes = 4 * MI;
    cfg.files_max_total_bytes = 8 * MI;
    app.cfg = &cfg;

    struct eai_error *err = NULL;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/eai.db", g_data);
    app.storage.desc = eai_builtin_storage_sqlite();
    json_t *scfg = json_pack("{s:s}", "path", path);
    app.storage.self = app.storage.desc->create(app.host, scfg, &err);
    json_decref(scfg);
    if (!app.storage.self)
        return -1;
    app.store = app.storage.desc->ops;
    if (app.store->migrate(S(), NULL, &err) < 0)
        return -1;
    json_t *t = NULL;
    if (app.store->tenant_create(S(), "sched", &t, &err) < 0 || !t)
        return -1;
    snprintf(tenant, sizeof tenant, "%s", jstr(t, "id"));
    json_decref(t);

    const struct eai_plugin_descriptor *d = eai_plugin_load(eai_plugin_dir(), EAI_KIND_ISOLATION, "gvisor", &err);
    if (!d) {
        fprintf(stderr, "gvisor plugin: %s\n", err && err->message ? err->message : "?");
        return -1;
    }
    json_t *gcfg = json_object();
    const char *runsc = getenv("EAI_SANDBOX_RUNSC");
    if (runsc && *runsc)
        json_object_set_new(gcfg, "runsc", json_string(runsc));
    app.isolation = isolation;
    app.isolation[0].desc = d;
    /* through its own host handle, as eaid does (ABI 1.4: the plugin's metrics) */
    if (eai_plugin_create(d, app.host, gcfg, &app.isolation[0].self, &app.isolation[0].host, &err) < 0)
        app.isolation[0].self = NULL;
    json_decref(gcfg);
    if (!app.isolation[0].self) {
        fprintf(stderr, "gvisor create: %s\n", err && err->message ? err->message : "?");
        return -1;
    }
    app.nisolation = 1;
    profiles[0] = (struct eai_profile){.name = "gvisor", .backend = "gvisor", .runtime_class = "gvisor",
        .def_cpu_millis = 1000, .max_cpu_millis = 2000, .def_memory = 512 * MI, .max_memory = 2 * GI,
        .def_timeout_s = 30, .max_timeout_s = 300, .def_pids = 128, .max_pids = 512,
        .def_output_bytes = 1 * MI, .max_output_bytes = 8 * MI, .def_disk = 64 * MI, .max_disk = 1 * GI,
        .egress_allow = no_egress, .iso = &app.isolation[0]};
    profiles[1] = profiles[0];
    profiles[1].name = "gone"; /* a profile whose backend is not loaded */
    profiles[1].iso = NULL;
    app.profiles = profiles;
    app.nprofiles = 2;
    /* wait for the backend's first probe */
    for (int i = 0; i < 600; i++) {
        struct eai_iso_probe pr = {.size = sizeof pr};
        ((const struct eai_isolation_ops *)d->ops)->probe(app.isolation[0].self, &pr);
        if (pr.ready)
            return 0;
        if (!eai_iso_probe_pending(&pr)) {
            fprintf(stderr, "gvisor not ready: %s\n", pr.reason);
            return -1;
        }
        loop_for_ms(100);
    }
    return -1;
}

/* ------------------------------------------------------------ tests */

static char dead_id[64], early_id[64];

static void test_recovery(void)
{
    CU_ASSERT_PTR_NOT_NULL_FATAL(app.exec);
    CU_ASSERT_TRUE(wait_one(dead_id, 30));
    json_t *e = get(dead_id);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "error");
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(e, "error"), "code"), "interrupted");
    json_decref(e);
    /* the queued one left by the "previous process" runs */
    CU_ASSERT_TRUE(wait_one(early_id, 60));
    e = get(early_id);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "succeeded");
    CU_ASSERT_STRING_EQUAL(jstr(e, "stdout"), "early\n");
    json_decref(e);
}

static void test_statuses(void)
{
    char ok[64], fail[64], slow[64];
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"command\": [\"python3\", \"-c\","
                                 " \"import sys; print(2+2); print('warn', file=sys.stderr)\"]}", ok), 0);
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"command\": [\"python3\", \"-c\","
                                 " \"import sys; sys.exit(3)\"]}", fail), 0);
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"limits\": {\"timeout_s\": 4},"
                                 " \"command\": [\"python3\", \"-c\", \"import time; print('before', flush=True);"
                                 " time.sleep(30)\"]}", slow), 0);
    eai_exec_kick(&app);
    const char *ids[] = {ok, fail, slow};
    int64_t t0 = eai_now_ms();
    CU_ASSERT_TRUE_FATAL(wait_terminal(ids, 3, 90));
    CU_ASSERT_TRUE(eai_now_ms() - t0 < 30000);
    json_t *e = get(ok);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "succeeded");
    CU_ASSERT_STRING_EQUAL(jstr(e, "stdout"), "4\n");
    CU_ASSERT_STRING_EQUAL(jstr(e, "stderr"), "warn\n");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(e, "exit_code")), 0);
    CU_ASSERT_TRUE(json_is_object(json_object_get(e, "usage")));
    CU_ASSERT_TRUE(json_number_value(json_object_get(json_object_get(e, "usage"), "duration_s")) > 0);
    CU_ASSERT_STRING_NOT_EQUAL(jstr(e, "started_at"), "(null)");
    CU_ASSERT_STRING_NOT_EQUAL(jstr(e, "finished_at"), "(null)");
    CU_ASSERT_EQUAL(json_object_size(json_object_get(e, "env")), 0);
    json_decref(e);
    e = get(fail);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "failed");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(e, "exit_code")), 3);
    json_decref(e);
    e = get(slow);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "timeout");
    CU_ASSERT_STRING_EQUAL(jstr(e, "stdout"), "before\n"); /* output so far is kept */
    json_decref(e);
    CU_ASSERT_TRUE(max_seen_running <= 2);
}

static const char *stored_status(const char *id, char buf[32])
{
    json_t *e = get(id);
    snprintf(buf, 32, "%s", jstr(e, "status"));
    json_decref(e);
    return buf;
}

/* A claim when none is in flight (the idle poll's may be, for a moment). */
static struct eai_sched_claim *take_claim(struct eai_sched *sched)
{
    struct eai_sched_claim *c = NULL;
    for (int i = 0; i < 200 && !(c = eai_sched_claim_take(sched)); i++)
        loop_for_ms(10);
    return c;
}

/* The claim a create job carries (scheduler.h eai_sched_claim_take): run on
 * the job's own thread right after the commit, the row is running in
 * storage before the loop sees the answer; one claim at a time; a claim
 * released without running hands its turn on (a kick meanwhile claims). */
static void test_claim_carried(void)
{
    const char *body = "{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"command\": [\"python3\", \"-c\","
                       " \"print(6*7)\"]}";
    struct eai_sched *sched = exec_state_of(&app)->sched;
    char a[64], b[64], st[32];
    struct eai_sched_claim *c = take_claim(sched);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_PTR_NULL(eai_sched_claim_take(sched)); /* one claim at a time */
    CU_ASSERT_EQUAL_FATAL(submit(body, a), 0);
    CU_ASSERT_STRING_EQUAL(stored_status(a, st), "queued");
    eai_sched_claim_work(c);  /* what create_work does after its commit */
    CU_ASSERT_STRING_EQUAL(stored_status(a, st), "running");
    eai_sched_claim_done(c);  /* on the loop: starts it */
    CU_ASSERT_TRUE_FATAL(wait_one(a, 60));
    json_t *e = get(a);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "succeeded");
    CU_ASSERT_STRING_EQUAL(jstr(e, "stdout"), "42\n");
    json_decref(e);

    /* released without running: the kick it held back claims b */
    c = take_claim(sched);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(submit(body, b), 0);
    eai_exec_kick(&app);      /* coalesced into the claim held, as the idle poll's */
    loop_for_ms(1500);        /* past the idle poll (SCHED_IDLE_POLL_MS) */
    CU_ASSERT_STRING_EQUAL(stored_status(b, st), "queued");
    eai_sched_claim_done(c);
    loop_for_ms(300);         /* the kick it held back, not a timer, claims b */
    CU_ASSERT_STRING_NOT_EQUAL(stored_status(b, st), "queued");
    CU_ASSERT_TRUE_FATAL(wait_one(b, 60));
    CU_ASSERT_STRING_EQUAL(stored_status(b, st), "succeeded");
}

static void test_output_and_files(void)
{
    char flood[64], bin[64], files[64];
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"limits\": {\"output_bytes\": 1000},"
                                 " \"command\": [\"python3\", \"-c\", \"print('x' * 100000)\"]}", flood), 0);
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"command\": [\"python3\", \"-c\","
                                 " \"import sys; sys.stdout.buffer.write(bytes([0, 255, 1]))\"]}", bin), 0);
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"stdin\": \"from stdin\","
                                 " \"env\": {\"GREETING\": \"hi\"},"
                                 " \"files\": [{\"path\": \"/tmp/in/data.txt\", \"content\": \"21\"}],"
                                 " \"command\": [\"python3\", \"-c\", \"import os, sys; os.makedirs('/tmp/outputs', exist_ok=True);"
                                 " n = int(open('/tmp/in/data.txt').read());"
                                 " open('/tmp/outputs/r.txt', 'w').write(str(n * 2));"
                                 " print(os.environ['GREETING'], sys.stdin.read())\"]}", files), 0);
    eai_exec_kick(&app);
    const char *ids[] = {flood, bin, files};
    CU_ASSERT_TRUE_FATAL(wait_terminal(ids, 3, 90));
    json_t *e = get(flood);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "succeeded");
    CU_ASSERT_EQUAL(strlen(jstr(e, "stdout")), 1000);
    CU_ASSERT_TRUE(json_is_true(json_object_get(e, "stdout_truncated")));
    CU_ASSERT_FALSE(json_is_true(json_object_get(e, "stderr_truncated")));
    json_decref(e);
    e = get(bin);
    CU_ASSERT_STRING_EQUAL(jstr(e, "stdout_encoding"), "base64");
    CU_ASSERT_STRING_EQUAL(jstr(e, "stdout"), "AP8B");
    json_decref(e);
    e = get(files);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "succeeded");
    CU_ASSERT_STRING_EQUAL(jstr(e, "stdout"), "hi from stdin\n");
    json_t *fl = json_object_get(e, "files");
    CU_ASSERT_EQUAL(json_array_size(fl), 1);
    CU_ASSERT_STRING_EQUAL(jstr(json_array_get(fl, 0), "path"), "/tmp/outputs/r.txt");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(fl, 0), "size")), 2);
    json_decref(e);
    unsigned char *data = NULL;
    size_t len = 0;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL(app.store->file_get(S(), tenant, files, "/tmp/outputs/r.txt", &data, &len, &err), 0);
    CU_ASSERT_EQUAL(len, 2);
    CU_ASSERT_TRUE(data && memcmp(data, "42", 2) == 0);
    free(data);
}

static void test_cancel_running(void)
{
    char id[64];
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"command\": [\"python3\", \"-c\","
                                 " \"import time; print('started', flush=True); time.sleep(60)\"]}", id), 0);
    eai_exec_kick(&app);
    /* wait until it runs and printed */
    int run = 0;
    for (int i = 0; i < 300; i++) {
        loop_for_ms(100);
        const char *d;
        size_t n = 0;
        run = eai_exec_local_output(&app, id, EAI_STREAM_STDOUT, &d, &n);
        if (n > 0)
            break;
    }
    CU_ASSERT_TRUE_FATAL(run);
    /* as the cancel route does: flag in storage, then stop the local run */
    json_t *out = NULL;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL(app.store->exec_cancel(S(), tenant, id, NULL, NULL, &out, &err), EAI_STORE_UPDATED);
    CU_ASSERT_STRING_EQUAL(jstr(out, "status"), "running");
    json_decref(out);
    int64_t t0 = eai_now_ms();
    CU_ASSERT_EQUAL(eai_exec_cancel_local(&app, id), 1);
    CU_ASSERT_TRUE_FATAL(wait_one(id, 30));
    CU_ASSERT_TRUE(eai_now_ms() - t0 < 10000);
    json_t *e = get(id);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "cancelled");
    CU_ASSERT_STRING_EQUAL(jstr(e, "stdout"), "started\n");
    json_decref(e);
}

static void test_not_runnable(void)
{
    char gone[64], noimg[64];
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gone\", \"image\": \"" IMAGE "\", \"command\": [\"true\"]}", gone), 0);
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gvisor\", \"image\": \"no-such-image:1\", \"command\": [\"true\"]}",
                                 noimg), 0);
    eai_exec_kick(&app);
    const char *ids[] = {gone, noimg};
    CU_ASSERT_TRUE_FATAL(wait_terminal(ids, 2, 60));
    json_t *e = get(gone);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "error");
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(e, "error"), "code"), "sandbox_unavailable");
    json_decref(e);
    e = get(noimg);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "error");
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(e, "error"), "code"), "image_missing");
    json_decref(e);
}

static void test_outbox_audit(void)
{
    json_t *rows = NULL;
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL(app.store->outbox_fetch(S(), 100, &rows, &err), 0);
    /* one usage event per execution that was claimed and ended */
    CU_ASSERT_TRUE(json_array_size(rows) >= 10);
    size_t i;
    json_t *r;
    int seen_ok = 0;
    json_array_foreach(rows, i, r) {
        json_t *ev = json_object_get(r, "event");
        CU_ASSERT_STRING_EQUAL(jstr(ev, "tenant_id"), tenant);
        CU_ASSERT_TRUE(json_is_number(json_object_get(ev, "cpu_seconds")));
        CU_ASSERT_TRUE(strncmp(jstr(ev, "execution_id"), "sbx_", 4) == 0);
        seen_ok |= strcmp(jstr(ev, "profile"), "gvisor") == 0;
    }
    CU_ASSERT_TRUE(seen_ok);
    json_decref(rows);
    json_t *events = NULL;
    CU_ASSERT_EQUAL(app.store->audit_list(S(), tenant, 0, 1000, &events, &err), 0);
    int finishes = 0;
    json_array_foreach(events, i, r)
        finishes += strcmp(jstr(r, "action"), "sandbox.finish") == 0;
    CU_ASSERT_TRUE(finishes >= 10);
    json_decref(events);
}

static void test_stop_interrupts(void)
{
    char id[64];
    CU_ASSERT_EQUAL_FATAL(submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"command\": [\"python3\", \"-c\","
                                 " \"import time; time.sleep(60)\"]}", id), 0);
    eai_exec_kick(&app);
    for (int i = 0; i < 300 && eai_exec_running(&app) == 0; i++)
        loop_for_ms(100);
    CU_ASSERT_EQUAL_FATAL(eai_exec_running(&app), 1);
    eai_exec_stop(&app);
    CU_ASSERT_PTR_NULL(app.exec);
    /* the finish write runs on a worker; the backend's end arrives later */
    for (int i = 0; i < 100; i++) {
        loop_for_ms(100);
        json_t *e = get(id);
        int done = eai_exec_status_terminal(json_string_value(json_object_get(e, "status")));
        json_decref(e);
        if (done)
            break;
    }
    json_t *e = get(id);
    CU_ASSERT_STRING_EQUAL(jstr(e, "status"), "error");
    CU_ASSERT_STRING_EQUAL(jstr(json_object_get(e, "error"), "code"), "interrupted");
    json_decref(e);
    /* let the backend finish killing it and clean its bundle */
    char work[PATH_MAX + 32];
    snprintf(work, sizeof work, "%s/gvisor/work", g_data);
    for (int i = 0; i < 300; i++) {
        loop_for_ms(100);
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s' 2>/dev/null)\"", work);
        if (system(cmd) == 0)
            break;
    }
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "test_exec_scheduler needs root (runsc with cgroups)\n");
        return 1;
    }
    if (setup() < 0) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    /* before the start: one row a dead process left running, one queued */
    struct eai_error *err = NULL;
    json_t *claimed = NULL;
    if (submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"command\": [\"python3\", \"-c\", \"print(1)\"]}",
               dead_id) < 0 ||
        app.store->exec_claim(S(), "dead-node", 600000, 1, 1, &claimed, &err) < 0 ||
        json_array_size(claimed) != 1 ||
        submit("{\"profile\": \"gvisor\", \"image\": \"" IMAGE "\", \"command\": [\"python3\", \"-c\","
               " \"print('early')\"]}", early_id) < 0) {
        fprintf(stderr, "cannot prepare the recovery rows\n");
        return 1;
    }
    json_decref(claimed);
    if (eai_exec_start(&app, &err) < 0) {
        fprintf(stderr, "eai_exec_start: %s\n", err && err->message ? err->message : "?");
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("scheduler", NULL, NULL);
    CU_add_test(s, "restart recovery", test_recovery);
    CU_add_test(s, "statuses and the concurrency bound", test_statuses);
    CU_add_test(s, "a claim carried by the create job", test_claim_carried);
    CU_add_test(s, "output cap, encoding, files", test_output_and_files);
    CU_add_test(s, "cancel a running execution", test_cancel_running);
    CU_add_test(s, "not runnable: error codes", test_not_runnable);
    CU_add_test(s, "usage outbox and audit", test_outbox_audit);
    CU_add_test(s, "graceful stop interrupts", test_stop_interrupts);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures();
    CU_cleanup_registry();
    eai_plugin_destroy(app.isolation[0].desc, app.isolation[0].self, app.isolation[0].host);
    loop_for_ms(500);
    eai_workers_stop();
    app.storage.desc->destroy(app.storage.self);
    eai_host_free(app.host);
    event_base_free(app.base);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_data);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", g_data);
    return failed ? 1 : 0;
}
