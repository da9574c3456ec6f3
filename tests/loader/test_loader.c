/* Loader tests: every refusal of the ABI rules, proven with real .so files. */
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include <eai/isolation.h>
#include <eai/storage.h>

#include "base/errors.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "obs/metrics.h"
#include "http/details_i18n.h"
#include "base/worker.h"
#include <event2/event.h>

static const char *fixture_dir;
static char tmp_dir[PATH_MAX];

static const struct eai_plugin_descriptor *load(const char *name, char **msg)
{
    struct eai_error *err = NULL;
    const struct eai_plugin_descriptor *d = eai_plugin_load(fixture_dir, EAI_KIND_ISOLATION, name, &err);
    if (msg)
        *msg = err && err->message ? strdup(err->message) : NULL;
    eai_error_free(err);
    return d;
}

static void expect_refused(const char *name, const char *const *needles)
{
    char *msg = NULL;
    const struct eai_plugin_descriptor *d = load(name, &msg);
    CU_ASSERT_PTR_NULL(d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    for (const char *const *n = needles; *n; n++) {
        if (!strstr(msg, *n)) {
            fprintf(stderr, "\nmessage for %s lacks '%s': %s\n", name, *n, msg);
            CU_FAIL("loader message lacks an expected part");
        }
    }
    free(msg);
}

static void test_valid_loads_and_creates(void)
{
    const struct eai_plugin_descriptor *d = load("valid", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_STRING_EQUAL(d->name, "valid");
    CU_ASSERT_EQUAL(d->kind, EAI_KIND_ISOLATION);
    CU_ASSERT_EQUAL(d->abi_minor, EAI_ABI_MINOR);
    CU_ASSERT_PTR_EQUAL(load("valid", NULL), d); /* one normalised copy per plugin */
    struct eai_host *h = eai_host_new(NULL, tmp_dir);
    struct eai_error *err = NULL;
    void *self = d->create(h, NULL, &err); /* the shared host still works */
    CU_ASSERT_PTR_NOT_NULL(self);
    CU_ASSERT_PTR_NULL(err);
    const struct eai_isolation_ops *ops = d->ops;
    struct eai_iso_probe p = {.size = sizeof(p)};
    ops->probe(self, &p);
    CU_ASSERT_EQUAL(p.ready, 0);
    d->destroy(self);
    eai_host_free(h);
}

/* The per-instance handle names the plugin in errors, metrics and wraps. */
static void test_instance_handle_attributes(void)
{
    const struct eai_plugin_descriptor *d = load("valid", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    struct eai_host *h = eai_host_new(NULL, tmp_dir);
    void *self = NULL;
    struct eai_host *handle = NULL;
    struct eai_error *err = NULL;
    double before = eai_metrics_get("eai_fixture_created_total", "plugin=\"valid\"");
    CU_ASSERT_EQUAL_FATAL(eai_plugin_create(d, h, NULL, &self, &handle, &err), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(handle);
    CU_ASSERT_STRING_EQUAL(handle->plugin_name, "valid");
    CU_ASSERT_PTR_NULL(h->plugin_name);
    CU_ASSERT(handle->size >= EAI_HOST_SIZE_1_1);
    /* the fixture's create() counted itself without naming itself */
    CU_ASSERT_EQUAL(eai_metrics_get("eai_fixture_created_total", "plugin=\"valid\"") - before, 1.0);
    const struct eai_isolation_ops *ops = d->ops;
    struct eai_iso_job job = {.size = sizeof(job), .id = "sbx_1"};
    void *hd = NULL;
    CU_ASSERT_EQUAL(ops->start(self, &job, NULL, NULL, &hd, &err), -1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_EQUAL(err->code, EAI_E_SANDBOX_FAILED);
    /* error_new_h attributed it, error_wrap added context after the name */
    CU_ASSERT_STRING_EQUAL(err->message, "plugin valid: starting sbx_1: no runtime here");
    eai_error_free(err);
    err = NULL;
    /* the 1.0 error_new (no host argument) is attributed too */
    struct eai_error *e10 = handle->error_new(EAI_E_INTERNAL, 0, "valid: %s", "old style");
    CU_ASSERT_STRING_EQUAL(e10->message, "plugin valid: old style");
    eai_error_free(e10);
    /* and eai_host_error_set through the handle */
    CU_ASSERT_EQUAL(eai_host_error_set(handle, &err, EAI_E_INTERNAL, "%d bytes", 3), -1);
    CU_ASSERT_STRING_EQUAL(err->message, "plugin valid: 3 bytes");
    eai_error_free(err);
    err = NULL;
    /* the shared host: no attribution */
    CU_ASSERT_EQUAL(eai_host_error_set(h, &err, EAI_E_INTERNAL, "plain"), -1);
    CU_ASSERT_STRING_EQUAL(err->message, "plain");
    eai_error_free(err);
    eai_plugin_destroy(d, self, handle);
    eai_host_free(h);
}

static void test_wrong_major(void)
{
    char file[PATH_MAX];
    snprintf(file, sizeof(file), "%s/eai-isolation-wrongmajor.so", fixture_dir);
    char built[32], provides[32];
    snprintf(built, sizeof built, "built for ABI 2.%d", EAI_ABI_MINOR);
    snprintf(provides, sizeof provides, "provides ABI 1.%d", EAI_ABI_MINOR);
    const char *needles[] = {file, built, provides, NULL};
    expect_refused("wrongmajor", needles);
}

static void test_newer_minor(void)
{
    char host[32];
    snprintf(host, sizeof host, "ABI 1.%d", EAI_ABI_MINOR);
    const char *needles[] = {"eai-isolation-newerminor.so", "ABI 1.7", host, NULL};
    expect_refused("newerminor", needles);
}

/* Built against a (simulated) next minor: longer descriptor and ops. */
static void test_future_minor_refused(void)
{
    char built[64], provides[64], rebuild[96];
    snprintf(built, sizeof built, "plugin was built for ABI 1.%d", EAI_ABI_MINOR + 1);
    snprintf(provides, sizeof provides, "this eaid provides ABI 1.%d", EAI_ABI_MINOR);
    snprintf(rebuild, sizeof rebuild, "rebuild it against the headers of ABI 1.%d or older", EAI_ABI_MINOR);
    const char *needles[] = {"eai-isolation-future.so", built, provides, rebuild, NULL};
    expect_refused("future", needles);
}

static void test_short_struct(void)
{
    const char *needles[] = {"eai-isolation-shortstruct.so", "descriptor too short: 16 bytes",
                             "ABI 1.0 needs at least 72", NULL};
    expect_refused("shortstruct", needles);
}

static void test_short_ops(void)
{
    const char *needles[] = {"eai-isolation-shortops.so", "isolation ops table too short: 16 bytes",
                             "ABI 1.0 needs at least 48", NULL};
    expect_refused("shortops", needles);
}

static void test_long_ops(void)
{
    /* today's table size: it grows as ops are appended (sessions) */
    char too_long[64], knows[64];
    snprintf(too_long, sizeof too_long, "isolation ops table too long: %zu bytes",
             sizeof(struct eai_isolation_ops) + 8);
    snprintf(knows, sizeof knows, "ABI 1.%d knows %zu", EAI_ABI_MINOR, sizeof(struct eai_isolation_ops));
    const char *needles[] = {"eai-isolation-longops.so", too_long, knows, NULL};
    expect_refused("longops", needles);
}

static void test_mandatory_op(void)
{
    const char *needles[] = {"eai-isolation-nostart.so", "mandatory isolation op 'start' is NULL", NULL};
    expect_refused("nostart", needles);
}

static void test_storage_mandatory_op(void)
{
    char *msg = NULL;
    struct eai_error *err = NULL;
    CU_ASSERT_PTR_NULL(eai_plugin_load(fixture_dir, EAI_KIND_STORAGE, "old10nokv", &err));
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    msg = err->message;
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "eai-storage-old10nokv.so"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "mandatory storage op 'kv_set' is NULL (plugin ABI 1.0)"));
    eai_error_free(err);
}

static void test_missing_symbol(void)
{
    const char *needles[] = {"eai-isolation-nosymbol.so", "missing symbol eai_plugin_descriptor()",
                             "EAI_PLUGIN_DECLARE(my_descriptor)", "EAI_PLUGIN_EXPORT", "extern \"C\"",
                             "nm -D --defined-only", NULL};
    expect_refused("nosymbol", needles);
}

static void test_fingerprint_mismatch(void)
{
    char host_jansson[64], host_libevent[64];
    const struct eai_build_fingerprint *fp = eai_host_fingerprint();
    CU_ASSERT_EQUAL(fp->jansson_major, JANSSON_MAJOR_VERSION);
    CU_ASSERT(fp->libevent_major == 2); /* core sees libevent's headers */
    snprintf(host_jansson, sizeof(host_jansson), "eaid against jansson %u.%u", fp->jansson_major,
             fp->jansson_minor);
    snprintf(host_libevent, sizeof(host_libevent), "eaid against libevent %u.%u", fp->libevent_major,
             fp->libevent_minor);
    const char *j[] = {"eai-isolation-jansson99.so", "incompatible build", "plugin was built against jansson 99.",
                       host_jansson, NULL};
    expect_refused("jansson99", j);
    const char *l[] = {"eai-isolation-libevent20.so", "incompatible build",
                       "plugin was built against libevent 2.0", host_libevent, NULL};
    expect_refused("libevent20", l);
    const char *s[] = {"eai-isolation-jsonint4.so", "plugin has sizeof(json_int_t) = 4",
                       "eaid has sizeof(json_int_t) = 8", NULL};
    expect_refused("jsonint4", s);
    const char *n[] = {"eai-isolation-nofingerprint.so", "no build fingerprint", "EAI_PLUGIN_DESCRIPTOR_HEADER",
                       NULL};
    expect_refused("nofingerprint", n);
}

static void test_wrong_kind_and_name(void)
{
    const char *k[] = {"eai-isolation-wrongkind.so", "storage", NULL};
    expect_refused("wrongkind", k);
    const char *n[] = {"eai-isolation-mislabel.so", "someone-else", NULL};
    expect_refused("mislabel", n);
}

static int fixture_live(const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/eai-isolation-%s.so", fixture_dir, name);
    void *dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!dl)
        return -1;
    int *live = dlsym(dl, "fixture_live");
    int v = live ? *live : -1;
    dlclose(dl);
    return v;
}

static void test_failing_create(void)
{
    const struct eai_plugin_descriptor *d = load("failcreate", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    struct eai_host *h = eai_host_new(NULL, tmp_dir);
    struct eai_error *err = NULL;
    void *self = d->create(h, NULL, &err);
    CU_ASSERT_PTR_NULL(self);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_EQUAL(err->code, EAI_E_SANDBOX_UNAVAILABLE);
    /* made by eai_host_error_set, the header-only helper, inside the .so */
    CU_ASSERT_STRING_EQUAL(err->message, "fixture: create refused on purpose");
    eai_error_free(err);
    err = NULL;
    CU_ASSERT_PTR_NULL(d->create(h, NULL, NULL)); /* a NULL err is safe */
    /* through the host: the error names the plugin, no handle is left */
    struct eai_host *handle = (struct eai_host *)1;
    CU_ASSERT_EQUAL(eai_plugin_create(d, h, NULL, &self, &handle, &err), -1);
    CU_ASSERT_PTR_NULL(self);
    CU_ASSERT_PTR_NULL(handle);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_EQUAL(err->code, EAI_E_SANDBOX_UNAVAILABLE);
    CU_ASSERT_STRING_EQUAL(err->message, "plugin failcreate: fixture: create refused on purpose");
    eai_error_free(err);
    err = NULL;
    /* NULL without an error: the host supplies one */
    d = load("silentfail", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(eai_plugin_create(d, h, NULL, &self, &handle, &err), -1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_STRING_EQUAL(err->message, "plugin silentfail: create() failed without saying why");
    eai_error_free(err);
    err = NULL;
    /* an instance returned along with an error is destroyed by the host */
    d = load("halfmade", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(eai_plugin_create(d, h, NULL, &self, &handle, &err), -1);
    CU_ASSERT_PTR_NULL(self);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_STRING_EQUAL(err->message, "plugin halfmade: half made");
    CU_ASSERT_EQUAL(fixture_live("halfmade"), 0);
    eai_error_free(err);
    eai_host_free(h);
}

/* Built against the frozen headers of each released minor (fixture_abi.c):
 * loads into today's host and runs; what its minor lacks is NULL. */
static int f10_started, f10_exited;
static char f10_out[64];
static void f10_on_output(void *arg, enum eai_iso_stream s, const char *data, size_t len)
{
    strncat(f10_out, data, len < sizeof(f10_out) - strlen(f10_out) - 1 ? len : sizeof(f10_out) - strlen(f10_out) - 1);
}
static void f10_on_started(void *arg) { f10_started++; }
static void f10_on_exit(void *arg, const struct eai_iso_result *r) { f10_exited += r->outcome == EAI_OUT_EXITED; }

/* Load eai-isolation-<name>.so, check its minor and table, probe it and
 * run one job (session_id set when session is not NULL): its output. */
static void old_isolation_runs(const char *name, unsigned minor, size_t ops_size, const char *session,
                               const char *want_out)
{
    struct eai_error *err = NULL;
    const struct eai_plugin_descriptor *d = eai_plugin_load(fixture_dir, EAI_KIND_ISOLATION, name, &err);
    if (!d)
        fprintf(stderr, "\n%s\n", err && err->message ? err->message : "?");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->abi_minor, minor);
    /* 1.0: no fingerprint, zero-filled in the copy */
    CU_ASSERT_EQUAL(d->build.size, minor == 0 ? 0 : sizeof(struct eai_build_fingerprint));
    /* the plugin's table is its minor's, the host's copy today's */
    CU_ASSERT_EQUAL(eai_plugin_ops_size(d), ops_size);
    const struct eai_isolation_ops *ops = d->ops;
    CU_ASSERT_EQUAL(ops->size, sizeof(struct eai_isolation_ops));
    struct event_base *base = event_base_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(base);
    CU_ASSERT_EQUAL_FATAL(eai_workers_start(base, 1), 0);
    struct eai_host *h = eai_host_new(base, tmp_dir);
    void *self = NULL;
    struct eai_host *handle = NULL;
    CU_ASSERT_EQUAL_FATAL(eai_plugin_create(d, h, NULL, &self, &handle, &err), 0);
    struct eai_iso_probe p;
    memset(&p, 0, sizeof(p));
    p.size = sizeof(p);
    ops->probe(self, &p);
    CU_ASSERT_EQUAL(p.ready, 1);
    CU_ASSERT_EQUAL(p.pending, 0);
    CU_ASSERT_EQUAL(p.max_files, minor >= 1 ? 9 : 0); /* a 1.1 field: 0 from a 1.0 plugin */
    char version[32];
    snprintf(version, sizeof version, "fixture-abi-1.%u", minor);
    CU_ASSERT_STRING_EQUAL(p.version, version);
    char argv1[16];
    snprintf(argv1, sizeof argv1, "-1.%u", minor);
    const char *argv[] = {"hello", argv1, NULL};
    struct eai_iso_job job = {.size = sizeof(job), .id = "sbx_10", .argv = argv, .session_id = session};
    struct eai_iso_callbacks cb = {.size = sizeof(cb), .on_output = f10_on_output, .on_started = f10_on_started,
                                   .on_exit = f10_on_exit};
    f10_started = f10_exited = 0;
    f10_out[0] = '\0';
    void *hd = NULL;
    CU_ASSERT_EQUAL(ops->start(self, &job, &cb, NULL, &hd, &err), 0);
    /* the callbacks come on the loop, after the plugin's work_submit */
    for (int i = 0; i < 200 && !f10_exited; i++) {
        struct timeval tv = {0, 10000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
    }
    CU_ASSERT_EQUAL(f10_started, 1);
    CU_ASSERT_EQUAL(f10_exited, 1);
    CU_ASSERT_STRING_EQUAL(f10_out, want_out);
    CU_ASSERT_PTR_NULL(ops->recover); /* absent in the plugin's table: NULL */
    CU_ASSERT_PTR_NULL(ops->sweep);
    /* 1.2 ops: NULL past an older plugin's table, so core never calls them
     * (sessions answer 422 sessions_unsupported, no egress pool) */
    if (minor < 2) {
        CU_ASSERT_PTR_NULL(ops->session_create);
        CU_ASSERT_PTR_NULL(ops->session_destroy);
        CU_ASSERT_PTR_NULL(ops->session_busy);
        CU_ASSERT_PTR_NULL(ops->session_file);
    } else {
        CU_ASSERT_PTR_NOT_NULL_FATAL(ops->session_busy);
        CU_ASSERT_EQUAL(ops->session_busy(self, "ses_1"), 0);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ops->session_create);
        struct eai_iso_session ses = {.size = sizeof(ses), .id = "ses_1"};
        struct eai_iso_session_callbacks scb = {.size = sizeof(scb)};
        CU_ASSERT_EQUAL(ops->session_create(self, &ses, &scb, NULL, &err), -1);
        CU_ASSERT_PTR_NOT_NULL(err);
        eai_error_free(err);
        err = NULL;
    }
    CU_ASSERT_PTR_NULL(ops->session_pause);
    CU_ASSERT_PTR_NULL(ops->session_resume);
    CU_ASSERT_PTR_NULL(ops->egress_claim);
    eai_plugin_destroy(d, self, handle);
    eai_host_free(h);
    eai_workers_stop();
    event_base_free(base);
}

static void test_abi_1_0_isolation_runs(void)
{
    old_isolation_runs("old10", 0, EAI_ISOLATION_OPS_SIZE_1_0, NULL, "hello-1.0");
}

/* A 1.1 plugin knows no session_id: a job carrying one runs as any other
 * (core never gives it one: it has no session ops). */
static void test_abi_1_1_isolation_runs(void)
{
    old_isolation_runs("old11", 1, EAI_ISOLATION_OPS_SIZE_1_1, "ses_1", "hello-1.1");
}

static void test_abi_1_2_isolation_runs(void)
{
    old_isolation_runs("old12", 2, EAI_ISOLATION_OPS_SIZE_1_2, "ses_1", "hello-1.2 in ses_1");
}

/* Load eai-storage-<name>.so of a released minor: its table normalised,
 * the 1.0 ops working, an error of the plugin named. */
static void old_storage_normalised(const char *name, unsigned minor, size_t ops_size)
{
    struct eai_error *err = NULL;
    const struct eai_plugin_descriptor *d = eai_plugin_load(fixture_dir, EAI_KIND_STORAGE, name, &err);
    if (!d)
        fprintf(stderr, "\n%s\n", err && err->message ? err->message : "?");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->abi_minor, minor);
    const struct eai_storage_ops *ops = d->ops;
    /* the plugin's table is its minor's, the host's copy today's */
    CU_ASSERT_EQUAL(eai_plugin_ops_size(d), ops_size);
    CU_ASSERT(ops_size <= sizeof(struct eai_storage_ops));
    CU_ASSERT_EQUAL(ops->size, sizeof(struct eai_storage_ops));
    CU_ASSERT((ops->audit_heads != NULL) == (minor >= 1)); /* set by the 1.1 and 1.2 fixtures */
    CU_ASSERT_PTR_NULL(ops->exec_claim_excluding);
    CU_ASSERT((ops->manifest_list != NULL) == (minor >= 2)); /* 1.2: past a 1.0 or 1.1 table */
    CU_ASSERT_PTR_NULL(ops->outbox_append);
    CU_ASSERT_PTR_NULL(ops->tenant_usage);
    CU_ASSERT_PTR_NULL(ops->exec_prune);
    CU_ASSERT((ops->agent_list != NULL) == (minor >= 3)); /* 1.3: past a 1.0, 1.1 or 1.2 table */
    CU_ASSERT_PTR_NULL(ops->run_get);
    CU_ASSERT_PTR_NULL(ops->agent_get);
    CU_ASSERT_PTR_NULL(ops->session_put);   /* 1.4: the fixture has no stored sessions */
    CU_ASSERT_PTR_NOT_NULL(ops->kv_set);
    struct eai_host *h = eai_host_new(NULL, tmp_dir);
    void *self = NULL;
    struct eai_host *handle = NULL;
    CU_ASSERT_EQUAL_FATAL(eai_plugin_create(d, h, NULL, &self, &handle, &err), 0);
    CU_ASSERT_EQUAL(ops->ping(self, &err), 0);
    CU_ASSERT_EQUAL(ops->kv_set(self, "cursor", "42", &err), 0);
    char *v = NULL;
    CU_ASSERT_EQUAL(ops->kv_get(self, "cursor", &v, &err), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    CU_ASSERT_STRING_EQUAL(v, "42");
    free(v);
    if (minor >= 3) {
        json_t *agents = NULL;
        CU_ASSERT_EQUAL(ops->agent_list(self, "t", NULL, 10, &agents, &err), 0);
        CU_ASSERT(json_is_array(agents));
        json_decref(agents);
    }
    if (minor >= 1) {
        json_t *heads = NULL;
        CU_ASSERT_EQUAL(ops->audit_heads(self, &heads, &err), 0);
        CU_ASSERT(json_is_array(heads));
        json_decref(heads);
    }
    /* an error made by the plugin with the 1.0 error_new names it */
    json_t *out = NULL;
    CU_ASSERT_EQUAL(ops->exec_get(self, "t", "x", &out, &err), -1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    char want[64];
    snprintf(want, sizeof want, "plugin %s: not supported by this fixture", name);
    CU_ASSERT_STRING_EQUAL(err->message, want);
    eai_error_free(err);
    eai_plugin_destroy(d, self, handle);
    eai_host_free(h);
}

static void test_abi_1_0_storage_normalised(void)
{
    old_storage_normalised("old10", 0, EAI_STORAGE_OPS_SIZE_1_0);
    CU_ASSERT(EAI_STORAGE_OPS_SIZE_1_0 < sizeof(struct eai_storage_ops));
}

static void test_abi_1_1_storage_normalised(void)
{
    old_storage_normalised("old11", 1, EAI_STORAGE_OPS_SIZE_1_1);
}

static void test_abi_1_2_storage_normalised(void)
{
    old_storage_normalised("old12", 2, EAI_STORAGE_OPS_SIZE_1_2);
}

static void test_abi_1_3_storage_normalised(void)
{
    old_storage_normalised("old13", 3, EAI_STORAGE_OPS_SIZE_1_3);
}

static void test_abi_1_3_isolation_runs(void)
{
    old_isolation_runs("old13", 3, EAI_ISOLATION_OPS_SIZE_1_3, "ses_1", "hello-1.3 in ses_1");
}

/* 1.4: the plugin's own metric (described at create, updated by handle,
 * named plugin="old14" by the host) and its message table (French). */
static void test_abi_1_4_metrics_and_messages(void)
{
    eai_metrics_reset();
    old_isolation_runs("old14", 4, EAI_ISOLATION_OPS_SIZE_1_4, "ses_1", "hello-1.4 in ses_1");
    char *m = eai_metrics_render();
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "# HELP eai_fixture_old14_starts_total Jobs the fixture started, by argv[0]."));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "# TYPE eai_fixture_old14_starts_total counter"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "eai_fixture_old14_starts_total{plugin=\"old14\",argv0="));
    free(m);
    char *fr = eai_detail_fr("the fixture old14 greets you");
    CU_ASSERT(fr && strcmp(fr, "la fixture old14 salue you") == 0);
    free(fr);
    old_storage_normalised("old14", 4, EAI_STORAGE_OPS_SIZE_1_4);
}

/* A message without French: the plugin is refused at load, naming it.  A
 * metric name against the rules: refused at create, naming the rule. */
static void test_messages_and_metrics_refused(void)
{
    expect_refused("nofrench", (const char *const[]){"message 'fixture.untranslated' has no French", NULL});
    const struct eai_plugin_descriptor *d = load("badmetric", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    struct eai_host *h = eai_host_new(NULL, tmp_dir);
    struct eai_error *err = NULL;
    void *self = NULL;
    struct eai_host *handle = NULL;
    CU_ASSERT_EQUAL(eai_plugin_create(d, h, NULL, &self, &handle, &err), -1);
    CU_ASSERT(err && strstr(err->message, "gauge 'eai_fixture_things_total' must not end in _total") != NULL);
    if (err)
        fprintf(stderr, "\n%s\n", err->message);
    eai_error_free(err);
    eai_host_free(h);
}

static void test_bad_names(void)
{
    const char *bad[] = {"../valid", "a/b", "valid.so", "", "UPPER", NULL};
    for (const char *const *n = bad; *n; n++) {
        struct eai_error *err = NULL;
        CU_ASSERT_PTR_NULL(eai_plugin_load(fixture_dir, EAI_KIND_ISOLATION, *n, &err));
        CU_ASSERT_PTR_NOT_NULL(err);
        eai_error_free(err);
    }
}

static void test_symlink_and_directory_refused(void)
{
    char src[PATH_MAX], link[PATH_MAX], dir[PATH_MAX];
    snprintf(src, sizeof(src), "%s/eai-isolation-valid.so", fixture_dir);
    snprintf(link, sizeof(link), "%s/eai-isolation-valid.so", tmp_dir);
    snprintf(dir, sizeof(dir), "%s/eai-isolation-adir.so", tmp_dir);
    CU_ASSERT_EQUAL_FATAL(symlink(src, link), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0700), 0);
    struct eai_error *err = NULL;
    CU_ASSERT_PTR_NULL(eai_plugin_load(tmp_dir, EAI_KIND_ISOLATION, "valid", &err));
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "not a regular file"));
    eai_error_free(err);
    err = NULL;
    CU_ASSERT_PTR_NULL(eai_plugin_load(tmp_dir, EAI_KIND_ISOLATION, "adir", &err));
    CU_ASSERT_PTR_NOT_NULL(err);
    eai_error_free(err);
    unlink(link);
    rmdir(dir);
}

static const struct eai_storage_ops *dummy_ops_ptr;
static const struct eai_plugin_descriptor builtin_desc_bad = {
    .abi_major = EAI_ABI_MAJOR + 1, .abi_minor = 0, .struct_size = sizeof(struct eai_plugin_descriptor),
    .name = "builtin-bad", .kind = EAI_KIND_AUDIT,
};
static const struct eai_plugin_descriptor *builtin_bad(void) { return &builtin_desc_bad; }

static void test_builtins_checked_alike(void)
{
    (void)dummy_ops_ptr;
    CU_ASSERT_EQUAL(eai_plugin_register_builtin(builtin_bad), 0);
    struct eai_error *err = NULL;
    CU_ASSERT_PTR_NULL(eai_plugin_load(fixture_dir, EAI_KIND_AUDIT, "builtin-bad", &err));
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "built-in"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "ABI 2.0"));
    eai_error_free(err);
}

/* Every plugin the build produced loads with the real loader. */
static void test_all_built_plugins_load(void)
{
    const char *dir = getenv("EAI_PLUGIN_DIR");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
    DIR *d = opendir(dir);
    if (!d) {
        CU_FAIL("plugin dir missing");
        return;
    }
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        char kind[32], name[64];
        size_t len = strlen(de->d_name);
        if (len < 8 || strcmp(de->d_name + len - 3, ".so") != 0 || strncmp(de->d_name, "eai-", 4) != 0)
            continue;
        if (sscanf(de->d_name, "eai-%31[a-z]-%63[a-z0-9_-]", kind, name) != 2)
            continue;
        name[strlen(name) - 0] = '\0';
        char *dot = strstr(name, ".so");
        if (dot)
            *dot = '\0';
        int k = -1;
        for (int i = 0; i < EAI_KIND_MAX; i++)
            if (strcmp(eai_kind_name((enum eai_plugin_kind)i), kind) == 0)
                k = i;
        CU_ASSERT(k >= 0);
        struct eai_error *err = NULL;
        const struct eai_plugin_descriptor *p = eai_plugin_load(dir, (enum eai_plugin_kind)k, name, &err);
        if (!p)
            fprintf(stderr, "\n%s: %s\n", de->d_name, err && err->message ? err->message : "?");
        CU_ASSERT_PTR_NOT_NULL(p);
        eai_error_free(err);
        n++;
    }
    closedir(d);
    printf("\n  %d built plugin(s) loaded\n", n);
}

int main(void)
{
    fixture_dir = getenv("EAI_FIXTURE_DIR");
    if (!fixture_dir) {
        fprintf(stderr, "EAI_FIXTURE_DIR not set\n");
        return 2;
    }
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/eai-loader-XXXXXX");
    if (!mkdtemp(tmp_dir))
        return 2;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("loader", NULL, NULL);
    CU_add_test(s, "valid plugin loads and creates", test_valid_loads_and_creates);
    CU_add_test(s, "instance handle names the plugin", test_instance_handle_attributes);
    CU_add_test(s, "wrong major refused naming both versions", test_wrong_major);
    CU_add_test(s, "newer minor refused", test_newer_minor);
    CU_add_test(s, "plugin of the next minor refused", test_future_minor_refused);
    CU_add_test(s, "short descriptor refused", test_short_struct);
    CU_add_test(s, "short ops table refused", test_short_ops);
    CU_add_test(s, "ops table longer than today's refused", test_long_ops);
    CU_add_test(s, "NULL mandatory op refused", test_mandatory_op);
    CU_add_test(s, "NULL mandatory 1.0 storage op refused", test_storage_mandatory_op);
    CU_add_test(s, "missing symbol refused with a hint", test_missing_symbol);
    CU_add_test(s, "build fingerprint mismatch refused naming both", test_fingerprint_mismatch);
    CU_add_test(s, "1.0 isolation plugin loads and runs", test_abi_1_0_isolation_runs);
    CU_add_test(s, "1.0 storage plugin normalised and runs", test_abi_1_0_storage_normalised);
    CU_add_test(s, "1.1 isolation plugin loads and runs, no 1.2 op", test_abi_1_1_isolation_runs);
    CU_add_test(s, "1.1 storage plugin normalised and runs", test_abi_1_1_storage_normalised);
    CU_add_test(s, "1.2 isolation plugin loads and runs with its session ops", test_abi_1_2_isolation_runs);
    CU_add_test(s, "1.2 storage plugin normalised and runs", test_abi_1_2_storage_normalised);
    CU_add_test(s, "1.3 isolation plugin loads and runs with its session ops", test_abi_1_3_isolation_runs);
    CU_add_test(s, "1.3 storage plugin normalised and runs (agent view op)", test_abi_1_3_storage_normalised);
    CU_add_test(s, "1.4 plugin: its metric and its messages", test_abi_1_4_metrics_and_messages);
    CU_add_test(s, "a message without French, a metric against the rules: refused", test_messages_and_metrics_refused);
    CU_add_test(s, "wrong kind or name refused", test_wrong_kind_and_name);
    CU_add_test(s, "failing create reports its error", test_failing_create);
    CU_add_test(s, "names with separators refused", test_bad_names);
    CU_add_test(s, "symlink and directory refused", test_symlink_and_directory_refused);
    CU_add_test(s, "built-ins checked like files", test_builtins_checked_alike);
    CU_add_test(s, "every built plugin loads", test_all_built_plugins_load);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures();
    CU_cleanup_registry();
    rmdir(tmp_dir);
    return failed ? 1 : 0;
}
