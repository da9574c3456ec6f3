/* The HTTP integration test's fixture (http_server.h). */
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http_server.h"

char eaid[512];
char base_url[128];
char tmpdir[256];
char logfile[400];
pid_t server_pid;
char key_a[128], key_b[128], tenant_a[64], tenant_b[64];
char auth_a[200], auth_b[200];

/* ------------------------------------------------------------ helpers */

void check_at(int cond, const char *file, int line, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!cond)
        fprintf(stderr, "\n  FAIL (line %d): %s\n", line, msg);
    CU_assertImplementation(cond ? CU_TRUE : CU_FALSE, (unsigned)line, msg, file, "", CU_FALSE);
}

void url(char *out, size_t n, const char *path) { snprintf(out, n, "%s%s", base_url, path); }

long req(const char *method, const char *path, const char *const *headers, const char *body,
                struct th_resp *r)
{
    char u[1024];
    url(u, sizeof(u), path);
    if (th_request(method, u, headers, body, body ? strlen(body) : 0, 0, r) < 0)
        return -1;
    return r->status;
}

void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

int make_tenant_key(const char *name, char tenant[64], char key[128])
{
    char *out = NULL;
    const char *a1[] = {"tenants", "create", name, NULL};
    if (th_eaid(eaid, &out, a1) != 0)
        return -1;
    json_error_t je;
    json_t *t = json_loads(out, 0, &je);
    free(out);
    const char *id = json_string_value(json_object_get(t, "id"));
    if (!id || strcmp(json_string_value(json_object_get(t, "name")), name) != 0) {
        json_decref(t);
        return -1;
    }
    snprintf(tenant, 64, "%s", id);
    json_decref(t);
    const char *a2[] = {"keys", "create", "--tenant", tenant, "--name", "test", NULL};
    if (th_eaid(eaid, &out, a2) != 0)
        return -1;
    chomp(out);
    /* printed once, on its own line */
    int ok = strchr(out, '\n') == NULL && strncmp(out, "eai_", 4) == 0;
    snprintf(key, 128, "%s", out);
    free(out);
    return ok ? 0 : -1;
}

int start_server(const char *config)
{
    snprintf(logfile, sizeof(logfile), "%s/eaid.log", tmpdir);
    char dd[400], listen[64];
    snprintf(dd, sizeof(dd), "%s/var", tmpdir);
    int port = th_free_port();
    if (port <= 0)
        return -1;
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d", port);
    setenv("EAI_DATA_DIR", dd, 1);
    setenv("EAI_LISTEN", listen, 1);
    setenv("EAI_LOG_LEVEL", "info", 1);
    if (make_tenant_key("tenant-a", tenant_a, key_a) < 0 || make_tenant_key("tenant-b", tenant_b, key_b) < 0) {
        fprintf(stderr, "cannot create tenants and keys with %s\n", eaid);
        return -1;
    }
    snprintf(auth_a, sizeof(auth_a), "Authorization: Bearer %s", key_a);
    snprintf(auth_b, sizeof(auth_b), "Authorization: Bearer %s", key_b);
    server_pid = th_serve(eaid, config, logfile);
    char u[256];
    url(u, sizeof(u), "/healthz");
    if (server_pid <= 0 || th_wait_up(u, 15000) < 0) {
        fprintf(stderr, "eaid did not come up; log %s\n", logfile);
        return -1;
    }
    return 0;
}

int common_setup(void)
{
    const char *bd = getenv("EAI_BUILD_DIR");
    snprintf(eaid, sizeof(eaid), "%s/eaid", bd ? bd : ".");
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/eai-test-http-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    unsetenv("EAI_DATABASE_URL");
    unsetenv("EAI_FINOPS_URL");
    unsetenv("EAI_AUDIT_URL");
    unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    unsetenv("EAI_AUTH_PEPPER_FILE");
    return 0;
}

int common_teardown(void)
{
    int rc = th_stop(server_pid, 10000);
    server_pid = 0;
    if (rc != 0) {
        fprintf(stderr, "eaid exit status %d after SIGTERM; log:\n", rc);
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "tail -n 30 '%s' >&2", logfile);
        if (system(cmd) != 0)
            fprintf(stderr, "(no log)\n");
    }
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        return -1;
    return rc == 0 ? 0 : -1;
}

int setup_noruntime(void)
{
    if (common_setup() < 0)
        return -1;
    setenv("EAI_SANDBOX_RUNSC", "/nonexistent", 1);
    unsetenv("EAI_PLUGIN_DIR_OVERRIDE");
    return start_server(NULL);
}

/* eaid on a test double of EAI_HTTP_PLUGIN_DIR (refuse, hold) with this
 * config file text. */
int start_on_double(const char *yaml)
{
    if (common_setup() < 0)
        return -1;
    const char *pd = getenv("EAI_HTTP_PLUGIN_DIR");
    if (!pd)
        return -1;
    setenv("EAI_PLUGIN_DIR", pd, 1);
    unsetenv("EAI_SANDBOX_RUNSC");
    char cfg[400];
    snprintf(cfg, sizeof(cfg), "%s/eaid.yaml", tmpdir);
    FILE *f = fopen(cfg, "w");
    if (!f)
        return -1;
    fputs(yaml, f);
    fclose(f);
    return start_server(cfg);
}

int setup_recording(void)
{
    return start_on_double("# test config: one profile on the refusing test double\n"
                           "isolation:\n  refuse: {}\n"
                           "server:\n  max_body_bytes: 1Mi\n  max_connections: 4\n  max_unauthenticated_connections: 0\n"
                           "profiles:\n"
                           "  fake:\n    backend: refuse\n    runtime_class: none\n"
                           "    defaults: {cpu: 250m, memory: 64Mi, timeout_s: 5}\n"
                           "    max: {cpu: 500m, memory: 128Mi, timeout_s: 10}\n"
                           "    egress_allow: [\"pypi.org:443\"]\n");
}

/* A profile on the holding test double: one execution runs (held until
 * cancelled), the others queue; at most 2 queued per tenant. */
int setup_queue(void)
{
    return start_on_double("isolation:\n  hold: {}\n"
                           "scheduler: {max_concurrent: 1, max_per_tenant: 1, max_queued_per_tenant: 2}\n"
                           "profiles:\n"
                           "  held:\n    backend: hold\n    runtime_class: none\n"
                           "    defaults: {cpu: 250m, memory: 64Mi, timeout_s: 60}\n"
                           "    max: {cpu: 500m, memory: 128Mi, timeout_s: 60}\n");
}

/* A burst on the refusing double: every execution ends in error as soon as
 * it is claimed; all 8 slots to one tenant and a short queue, so the burst
 * meets admission back-pressure (429) as well as the scheduler. */
int setup_burst(void)
{
    return start_on_double("isolation:\n  refuse: {}\n"
                           "scheduler: {max_concurrent: 8, max_per_tenant: 8, max_queued_per_tenant: 50}\n"
                           "profiles:\n"
                           "  fake:\n    backend: refuse\n    runtime_class: none\n"
                           "    defaults: {cpu: 250m, memory: 64Mi, timeout_s: 5}\n"
                           "    max: {cpu: 500m, memory: 128Mi, timeout_s: 10}\n");
}


int raw_connect(void)
{
    int port = atoi(strrchr(base_url, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}


/* 1 when the error envelope has a detail at path. */
int has_detail_path(const struct th_resp *r, const char *path)
{
    json_t *d = json_object_get(json_object_get(r->json, "error"), "details");
    size_t i;
    json_t *x;
    json_array_foreach(d, i, x)
        if (strcmp(json_string_value(json_object_get(x, "path")) ? json_string_value(json_object_get(x, "path")) : "", path) == 0)
            return 1;
    return 0;
}
