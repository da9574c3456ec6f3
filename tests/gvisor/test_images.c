/* test_gvisor_images: image references and the local store layout
 * (core/images/images.c), without building anything. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CUnit/Basic.h>

#include "images/images.h"

static char g_dir[PATH_MAX];

static void mk(const char *rel)
{
    char p[PATH_MAX * 2], cmd[PATH_MAX * 2 + 16];
    snprintf(p, sizeof(p), "%s/%s", g_dir, rel);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", p);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

static int init(void)
{
    const char *bd = getenv("EAI_BUILD_DIR");
    snprintf(g_dir, sizeof(g_dir), "%s/images-test-XXXXXX", bd ? bd : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int clean(void)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_resolve(void)
{
    mk("python/3.11-slim/rootfs");
    mk("tools/latest/rootfs");
    char out[PATH_MAX], want[PATH_MAX + 64];
    CU_ASSERT_EQUAL(eai_images_resolve(g_dir, "python:3.11-slim", out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "%s/python/3.11-slim/rootfs", g_dir);
    CU_ASSERT_STRING_EQUAL(out, want);
    CU_ASSERT_EQUAL(eai_images_resolve(g_dir, "tools", out, sizeof(out)), 0);
    snprintf(want, sizeof(want), "%s/tools/latest/rootfs", g_dir);
    CU_ASSERT_STRING_EQUAL(out, want);
    /* Names never lie: no other python tag appears out of nowhere. */
    CU_ASSERT_EQUAL(eai_images_resolve(g_dir, "python:3.12-slim", out, sizeof(out)), -1);
    CU_ASSERT_EQUAL(eai_images_resolve(g_dir, "python", out, sizeof(out)), -1);
    /* Too small a buffer is a miss, not a truncated path. */
    CU_ASSERT_EQUAL(eai_images_resolve(g_dir, "python:3.11-slim", out, 8), -1);
}

static void test_invalid_refs(void)
{
    static const char *bad[] = {"", "Python:3.11", "a/b", "../python:3.11-slim", "python:..", "..", "a..b",
                                "python:3.11-slim:x", ":tag", "name:", ".hidden", "-x", "a b", "a:b/c",
                                "python:3.11-slim/../../etc", NULL};
    char out[PATH_MAX];
    for (int i = 0; bad[i]; i++) {
        int rc = eai_images_resolve(g_dir, bad[i], out, sizeof(out));
        if (rc != -1)
            fprintf(stderr, "accepted bad ref '%s'\n", bad[i]);
        CU_ASSERT_EQUAL(rc, -1);
    }
    CU_ASSERT_EQUAL(eai_images_resolve(g_dir, NULL, out, sizeof(out)), -1);
}

static void test_symlink_rootfs_refused(void)
{
    mk("evil/1");
    char link[PATH_MAX + 32], out[PATH_MAX];
    snprintf(link, sizeof(link), "%s/evil/1/rootfs", g_dir);
    CU_ASSERT_EQUAL(symlink("/", link), 0);
    CU_ASSERT_EQUAL(eai_images_resolve(g_dir, "evil:1", out, sizeof(out)), -1);
}

static void test_cli_usage(void)
{
    char *a1[] = {"bogus", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_dir, 1, a1), 2);
    char *a2[] = {"build", "Bad/Name", "--packages", "python3", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_dir, 4, a2), 2);
    char *a3[] = {"build", "ok:1", "--packages", "python3;rm -rf /", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_dir, 4, a3), 2);
    char *a4[] = {"build", "ok:1", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_dir, 2, a4), 2);
    char *a5[] = {"build", "ok:1", "--packages", "python3", "--mirror", "ftp://x", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_dir, 6, a5), 2);
    /* Existing image without --force: refused before mmdebstrap runs. */
    char *a6[] = {"build", "python:3.11-slim", "--packages", "python3-minimal", "--no-shim", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_dir, 5, a6), 1);
    char *l[] = {"list", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_dir, 1, l), 0);
}

static void test_remove(void)
{
    mk("gone/2/rootfs/etc");
    char out[PATH_MAX];
    CU_ASSERT_EQUAL(eai_images_resolve(g_dir, "gone:2", out, sizeof(out)), 0);
    char *rm[] = {"remove", "gone:2", NULL};
    CU_ASSERT_EQUAL(eai_images_cli(g_dir, 2, rm), 0);
    CU_ASSERT_EQUAL(eai_images_resolve(g_dir, "gone:2", out, sizeof(out)), -1);
    CU_ASSERT_NOT_EQUAL(eai_images_cli(g_dir, 2, rm), 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("images", init, clean);
    CU_add_test(s, "resolve", test_resolve);
    CU_add_test(s, "invalid references", test_invalid_refs);
    CU_add_test(s, "symlinked rootfs refused", test_symlink_rootfs_refused);
    CU_add_test(s, "cli usage", test_cli_usage);
    CU_add_test(s, "remove", test_remove);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned f = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
    CU_cleanup_registry();
    return f ? 1 : 0;
}
