/* Loader tests: every refusal of the ABI rules, proven with real .so files. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include <eai/isolation.h>

#include "base/errors.h"
#include "plugin/host.h"
#include "plugin/loader.h"

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
    struct eai_host *h = eai_host_new(NULL, tmp_dir);
    struct eai_error *err = NULL;
    void *self = d->create(h, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL(self);
    CU_ASSERT_PTR_NULL(err);
    const struct eai_isolation_ops *ops = d->ops;
    struct eai_iso_probe p = {.size = sizeof(p)};
    ops->probe(self, &p);
    CU_ASSERT_EQUAL(p.ready, 0);
    d->destroy(self);
    eai_host_free(h);
}

static void test_wrong_major(void)
{
    char file[PATH_MAX];
    snprintf(file, sizeof(file), "%s/eai-isolation-wrongmajor.so", fixture_dir);
    const char *needles[] = {file, "ABI 2.0", "ABI 1.0", NULL};
    expect_refused("wrongmajor", needles);
}

static void test_newer_minor(void)
{
    const char *needles[] = {"eai-isolation-newerminor.so", "ABI 1.7", "ABI 1.0", NULL};
    expect_refused("newerminor", needles);
}

static void test_short_struct(void)
{
    const char *needles[] = {"eai-isolation-shortstruct.so", "too short", "1.0", NULL};
    expect_refused("shortstruct", needles);
}

static void test_short_ops(void)
{
    const char *needles[] = {"eai-isolation-shortops.so", "ops table too short", NULL};
    expect_refused("shortops", needles);
}

static void test_missing_symbol(void)
{
    const char *needles[] = {"eai-isolation-nosymbol.so", "eai_plugin_descriptor", NULL};
    expect_refused("nosymbol", needles);
}

static void test_wrong_kind_and_name(void)
{
    const char *k[] = {"eai-isolation-wrongkind.so", "storage", NULL};
    expect_refused("wrongkind", k);
    const char *n[] = {"eai-isolation-mislabel.so", "someone-else", NULL};
    expect_refused("mislabel", n);
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
    CU_add_test(s, "wrong major refused naming both versions", test_wrong_major);
    CU_add_test(s, "newer minor refused", test_newer_minor);
    CU_add_test(s, "short descriptor refused", test_short_struct);
    CU_add_test(s, "short ops table refused", test_short_ops);
    CU_add_test(s, "missing symbol refused", test_missing_symbol);
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
