/* core/config/config.c: defaults, YAML, strict checking, environment overrides. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/config_check.h"
#include "base/errors.h"
#include "unit_main.h"

static char tmpdir[256];
static const char *envs[] = {"EAI_LISTEN", "EAI_DATA_DIR", "EAI_IMAGE_DIR", "EAI_LOG_LEVEL", "EAI_DATABASE_URL",
                             "EAI_AUTH_PEPPER_FILE", "EAI_FINOPS_URL", "EAI_AUDIT_URL", "OTEL_EXPORTER_OTLP_ENDPOINT",
                             "EAI_SANDBOX_NAMESPACE_PREFIX", "EAI_SANDBOX_RUNSC", NULL};

static void clear_env(void)
{
    for (int i = 0; envs[i]; i++)
        unsetenv(envs[i]);
}

static int setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/eai-test-config-XXXXXX");
    clear_env();
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_defaults(void)
{
    clear_env();
    struct eai_error *err = NULL;
    struct eai_config *c = eai_config_load(NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->listen, "127.0.0.1:8080");
    CU_ASSERT_EQUAL(c->data_dir[0], '/');
    size_t n = strlen(c->data_dir);
    CU_ASSERT(n > 4 && strcmp(c->data_dir + n - 4, "/var") == 0);
    CU_ASSERT_STRING_EQUAL(c->storage_backend, "sqlite");
    CU_ASSERT_PTR_NULL(c->database_url);
    CU_ASSERT_EQUAL(c->max_body_bytes, 10u * 1024 * 1024);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(c->isolation, "gvisor"));
    CU_ASSERT_EQUAL(json_object_size(c->isolation), 1);
    CU_ASSERT_PTR_NULL(c->finops_url);
    CU_ASSERT_PTR_NULL(c->runsc);
    struct eai_profile_limits d, m;
    CU_ASSERT_EQUAL_FATAL(eai_cfg_profile_limits(json_object_get(c->profiles, "gvisor-small"), &d, &m), 0);
    CU_ASSERT_EQUAL(d.cpu_millis, 500);
    CU_ASSERT_EQUAL(d.memory, 256LL << 20);
    CU_ASSERT_EQUAL(d.timeout_s, 30);
    CU_ASSERT_EQUAL(m.cpu_millis, 1000);
    CU_ASSERT_EQUAL(m.memory, 512LL << 20);
    CU_ASSERT_EQUAL(m.timeout_s, 60);
    CU_ASSERT_EQUAL(m.pids, 256);
    CU_ASSERT_EQUAL_FATAL(eai_cfg_profile_limits(json_object_get(c->profiles, "gvisor"), &d, &m), 0);
    CU_ASSERT_EQUAL(d.cpu_millis, 1000);
    CU_ASSERT_EQUAL(m.memory, 2LL << 30);
    CU_ASSERT_EQUAL(m.timeout_s, 300);
    CU_ASSERT_EQUAL(m.disk, 1LL << 30);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(c->profiles, "gvisor"), "backend")), "gvisor");
    eai_config_free(c);
}

static void test_yaml_file(void)
{
    clear_env();
    const char *path = write_file("ok.yaml",
        "server:\n  listen: 0.0.0.0:9090\n  max_body_bytes: 2Mi\n  max_connections: 50\n"
        "data_dir: /srv/eai\n"
        "storage:\n  url: postgres://eai@localhost/eai\n  workers: 4\n"
        "callbacks:\n  allow: [\"127.0.0.1:9000\", \"*.example.com:443\"]\n  max_attempts: 5\n"
        "scheduler:\n  max_concurrent: 3\n"
        "isolation:\n  gvisor:\n    runsc: /usr/bin/runsc\n  k8s: {}\n"
        "profiles:\n  tiny:\n    backend: gvisor\n    defaults: {cpu: 250m, memory: 64Mi}\n"
        "    max: {cpu: 0.5, memory: 128Mi, timeout_s: 10}\n    egress_allow: [\"pypi.org:443\"]\n"
        "finops:\n  url: http://127.0.0.1:9\n"
        "network:\n  resolver: \"198.18.2.53:53\"\n  pool: 198.19.0.0/24\n  prefix: eabc\n  spare: 0\n"
        "  max_bytes: 64Mi\n");
    struct eai_error *err = NULL;
    struct eai_config *c = eai_config_load(path, &err);
    if (!c)
        fprintf(stderr, "unexpected: %s\n", err->message);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->listen, "0.0.0.0:9090");
    /* network: egress of local sandboxes */
    CU_ASSERT_STRING_EQUAL(c->net_resolver, "198.18.2.53:53");
    CU_ASSERT_STRING_EQUAL(c->net_pool, "198.19.0.0/24");
    CU_ASSERT_STRING_EQUAL(c->net_prefix, "eabc");
    CU_ASSERT_EQUAL(c->net_spare, 0);
    CU_ASSERT_EQUAL(c->net_max_bytes, 64 << 20);
    CU_ASSERT_EQUAL(c->net_max_connections, 32);
    CU_ASSERT_EQUAL(c->max_body_bytes, 2u << 20);
    CU_ASSERT_EQUAL(c->max_connections, 50);
    CU_ASSERT_STRING_EQUAL(c->data_dir, "/srv/eai");
    CU_ASSERT_STRING_EQUAL(c->image_dir, "/srv/eai/images");
    CU_ASSERT_STRING_EQUAL(c->pepper_file, "/srv/eai/pepper");
    CU_ASSERT_STRING_EQUAL(c->storage_backend, "postgres");
    CU_ASSERT_EQUAL(c->workers, 4);
    CU_ASSERT_EQUAL(json_array_size(c->callbacks_allow), 2);
    CU_ASSERT_EQUAL(c->callbacks_max_attempts, 5);
    CU_ASSERT_EQUAL(c->max_concurrent, 3);
    CU_ASSERT_EQUAL(c->max_per_tenant, 4);
    CU_ASSERT_STRING_EQUAL(c->finops_url, "http://127.0.0.1:9");
    CU_ASSERT_EQUAL(json_object_size(c->isolation), 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(c->isolation, "gvisor"), "runsc")),
                           "/usr/bin/runsc");
    /* profiles given in the file replace the defaults */
    CU_ASSERT_PTR_NULL(json_object_get(c->profiles, "gvisor"));
    struct eai_profile_limits d, m;
    CU_ASSERT_EQUAL_FATAL(eai_cfg_profile_limits(json_object_get(c->profiles, "tiny"), &d, &m), 0);
    CU_ASSERT_EQUAL(d.cpu_millis, 250);
    CU_ASSERT_EQUAL(m.cpu_millis, 500);
    CU_ASSERT_EQUAL(m.timeout_s, 10);
    CU_ASSERT_EQUAL(d.timeout_s, 10); /* generic default 30 capped at the maximum */
    CU_ASSERT_EQUAL(d.pids, 128);     /* from the generic defaults */
    CU_ASSERT_PTR_NOT_NULL(c);
    eai_config_free(c);
}

/* Load must fail and the message must name the file, the path and the key. */
static void expect_error(const char *name, const char *yaml, const char *path_part, const char *key)
{
    const char *file = write_file(name, yaml);
    struct eai_error *err = NULL;
    struct eai_config *c = eai_config_load(file, &err);
    CU_ASSERT_PTR_NULL(c);
    eai_config_free(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err->message);
    if (!strstr(err->message, file) || !strstr(err->message, path_part) || !strstr(err->message, key))
        fprintf(stderr, "message lacks file/path/key (%s, %s): %s\n", path_part, key, err->message);
    CU_ASSERT_PTR_NOT_NULL(strstr(err->message, file));
    CU_ASSERT_PTR_NOT_NULL(strstr(err->message, path_part));
    CU_ASSERT_PTR_NOT_NULL(strstr(err->message, key));
    eai_error_free(err);
}

static void test_strict(void)
{
    clear_env();
    expect_error("u1.yaml", "bogus: 1\n", "/", "'bogus'");
    expect_error("u2.yaml", "server:\n  listen: 127.0.0.1:1\n  colour: red\n", "/server", "'colour'");
    expect_error("t1.yaml", "server:\n  max_connections: many\n", "/server", "'max_connections'");
    expect_error("t2.yaml", "server: [1, 2]\n", "/", "'server'");
    expect_error("t3.yaml", "storage:\n  workers: 1.5\n", "/storage", "'workers'");
    expect_error("c1.yaml", "callbacks:\n  allow: [\"nohost\"]\n", "/callbacks", "'allow'");
    expect_error("c2.yaml", "callbacks:\n  retries: 3\n", "/callbacks", "'retries'");
    expect_error("t4.yaml", "server:\n  listen: nowhere\n", "/server", "'listen'");
    expect_error("m1.yaml", "profiles:\n  p1:\n    runtime_class: gvisor\n", "/profiles/p1", "'backend'");
    expect_error("m2.yaml", "profiles:\n  p1:\n    backend: gvisor\n    max: {memory: lots}\n",
                 "/profiles/p1/max", "'memory'");
    expect_error("m3.yaml", "profiles:\n  p1:\n    backend: gvisor\n    defaults: {cpu: '4'}\n    max: {cpu: '2'}\n",
                 "/profiles/p1/defaults", "'cpu'");
    expect_error("m4.yaml", "profiles:\n  p1:\n    backend: gvisor\n    egress_allow: [\"nohost\"]\n",
                 "/profiles/p1", "'egress_allow'");
    expect_error("y1.yaml", "server: {listen: [\n", "y1.yaml", "YAML");
    expect_error("n1.yaml", "network:\n  prefix: EAIX\n", "/network", "'prefix'");
    expect_error("n2.yaml", "network:\n  spare: 99\n", "/network", "'spare'");
    expect_error("n3.yaml", "network:\n  dns: 1.1.1.1\n", "/network", "'dns'");
    expect_error("b1.yaml", "node:\n  tenant_share: 1.5\n", "/node", "'tenant_share'");
    expect_error("b2.yaml", "node:\n  tenant_share: 0\n", "/node", "'tenant_share'");
    expect_error("b3.yaml", "node:\n  cpu_budget: lots\n", "/node", "'cpu_budget'");
    expect_error("b4.yaml", "node:\n  memory_budget: -1\n", "/node", "'memory_budget'");
    expect_error("b5.yaml", "node:\n  memory: 1Gi\n", "/node", "'memory'");
    expect_error("b6.yaml", "node:\n  tenant_shares: {t1: 2}\n", "/node", "'tenant_shares'");
    expect_error("b7.yaml", "node:\n  tenant_shares: [0.5]\n", "/node", "'tenant_shares'");
}

/* node: the budget executions and sessions share (docs/admission.md) */
static void test_node_budget(void)
{
    clear_env();
    struct eai_error *err = NULL;
    struct eai_config *c = eai_config_load(NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->node_memory_budget, 0); /* 0: the host's, at start */
    CU_ASSERT_EQUAL(c->node_cpu_budget, 0);
    CU_ASSERT_EQUAL(c->node_tenant_share, 500);
    eai_config_free(c);
    const char *path = write_file("node.yaml", "node:\n  memory_budget: 48Gi\n  cpu_budget: 3500m\n  tenant_share: 0.25\n");
    c = eai_config_load(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->node_memory_budget, 48LL << 30);
    CU_ASSERT_EQUAL(c->node_cpu_budget, 3500);
    CU_ASSERT_EQUAL(c->node_tenant_share, 250);
    eai_config_free(c);
    path = write_file("node2.yaml", "node:\n  cpu_budget: 16\n  tenant_share: 1\n  tenant_shares: {big: 0.75, tiny: 0.1}\n");
    c = eai_config_load(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->node_cpu_budget, 16000);
    CU_ASSERT_EQUAL(c->node_tenant_share, 1000);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(c->node_tenant_shares, "big")), 750);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(c->node_tenant_shares, "tiny")), 100);
    eai_config_free(c);
}

static void test_env(void)
{
    clear_env();
    const char *path = write_file("env.yaml", "server:\n  listen: 127.0.0.1:7000\ndata_dir: /srv/a\n");
    setenv("EAI_LISTEN", "127.0.0.1:7001", 1);
    setenv("EAI_DATA_DIR", "rel/dir", 1);
    setenv("EAI_DATABASE_URL", "postgresql://u@h/db", 1);
    setenv("EAI_SANDBOX_RUNSC", "/nonexistent", 1);
    setenv("EAI_AUTH_PEPPER_FILE", "/etc/eai/pepper", 1);
    setenv("EAI_FINOPS_URL", "", 1); /* empty: the in-process fallback */
    struct eai_error *err = NULL;
    struct eai_config *c = eai_config_load(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_STRING_EQUAL(c->listen, "127.0.0.1:7001");
    char cwd[512], want[600];
    CU_ASSERT_PTR_NOT_NULL(getcwd(cwd, sizeof(cwd)));
    snprintf(want, sizeof(want), "%s/rel/dir", cwd);
    CU_ASSERT_STRING_EQUAL(c->data_dir, want);
    CU_ASSERT_STRING_EQUAL(c->storage_backend, "postgres");
    CU_ASSERT_STRING_EQUAL(c->runsc, "/nonexistent");
    CU_ASSERT_STRING_EQUAL(c->pepper_file, "/etc/eai/pepper");
    CU_ASSERT_PTR_NULL(c->finops_url);
    eai_config_free(c);
    setenv("EAI_LISTEN", "not-an-address", 1);
    c = eai_config_load(NULL, &err);
    CU_ASSERT_PTR_NULL(c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err->message, "EAI_LISTEN"));
    eai_error_free(err);
    err = NULL;
    clear_env();
    setenv("EAI_DATABASE_URL", "mysql://x", 1);
    c = eai_config_load(NULL, &err);
    CU_ASSERT_PTR_NULL(c);
    eai_error_free(err);
    clear_env();
}

static void test_plugin_keys(void)
{
    static const struct eai_config_key keys[] = {
        {"url", EAI_CFG_STRING, 1, NULL, "u"},
        {"pool_size", EAI_CFG_INT, 0, "4", "p"},
        {"probe", EAI_CFG_BOOL, 0, "true", "b"},
        {NULL, 0, 0, NULL, NULL},
    };
    struct eai_error *err = NULL;
    json_t *ok = json_pack("{s:s, s:i, s:b}", "url", "x", "pool_size", 2, "probe", 1);
    CU_ASSERT_EQUAL(eai_cfg_check_plugin(keys, ok, "f.yaml", "/storage", &err), 0);
    json_decref(ok);
    json_t *unknown = json_pack("{s:s, s:i}", "url", "x", "colour", 2);
    CU_ASSERT_EQUAL(eai_cfg_check_plugin(keys, unknown, "f.yaml", "/storage", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err->message, "colour") && strstr(err->message, "/storage"));
    eai_error_free(err);
    err = NULL;
    json_decref(unknown);
    json_t *type = json_pack("{s:s, s:s}", "url", "x", "pool_size", "two");
    CU_ASSERT_EQUAL(eai_cfg_check_plugin(keys, type, "f.yaml", "/storage", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err->message, "pool_size"));
    eai_error_free(err);
    err = NULL;
    json_decref(type);
    json_t *missing = json_pack("{s:i}", "pool_size", 2);
    CU_ASSERT_EQUAL(eai_cfg_check_plugin(keys, missing, "f.yaml", "/storage", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(err && strstr(err->message, "url") && strstr(err->message, "missing"));
    eai_error_free(err);
    json_decref(missing);
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("config", setup, teardown);
    if (!s || !CU_add_test(s, "defaults", test_defaults) || !CU_add_test(s, "YAML file", test_yaml_file) ||
        !CU_add_test(s, "unknown key, wrong type, missing key", test_strict) ||
        !CU_add_test(s, "environment overrides", test_env) ||
        !CU_add_test(s, "node budget keys", test_node_budget) ||
        !CU_add_test(s, "plugin config subtrees", test_plugin_keys))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
