/*
 * Admin CLI against the real build/eaid (label http): `eaid tenants list`,
 * `eaid keys list --tenant ID` (never a secret or a hash), `eaid keys create
 * --expires` and an expired key refused with 401 by a running server over
 * loopback; plus the --expires parser (eai_cli_parse_expires).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../unit/unit_main.h"
#include "base/util.h"
#include "cli.h"
#include "http_client.h"

static char eaid[512], tmpdir[256], logfile[400], base_url[128];
static pid_t server_pid;

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

/* eaid ARGS: exit code; stdout (malloc'd) in *out when out is non-NULL. */
static int run(char **out, const char *const *args) { return th_eaid(eaid, out, args); }

static int make_tenant(const char *name, char id[64])
{
    char *out = NULL;
    const char *a[] = {"tenants", "create", name, NULL};
    if (run(&out, a) != 0)
        return -1;
    json_t *t = json_loads(out, 0, NULL);
    free(out);
    const char *v = json_string_value(json_object_get(t, "id"));
    int rc = v ? 0 : -1;
    if (v)
        snprintf(id, 64, "%s", v);
    json_decref(t);
    return rc;
}

static int make_key(const char *tenant, const char *expires, char key[128])
{
    char *out = NULL;
    const char *a[] = {"keys", "create", "--tenant", tenant, "--name", "adm", expires ? "--expires" : NULL, expires,
                       NULL};
    int rc = run(&out, a);
    if (rc == 0) {
        chomp(out);
        snprintf(key, 128, "%s", out);
    }
    free(out);
    return rc;
}

static long get_with(const char *key, struct th_resp *r)
{
    char auth[200], u[256];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    snprintf(u, sizeof u, "%s/v1/sandbox/executions", base_url);
    const char *h[] = {auth, NULL};
    if (th_request("GET", u, h, NULL, 0, 0, r) < 0)
        return -1;
    return r->status;
}

static int setup(void)
{
    const char *bd = getenv("EAI_BUILD_DIR");
    snprintf(eaid, sizeof eaid, "%s/eaid", bd ? bd : ".");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/eai-test-admin-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    unsetenv("EAI_DATABASE_URL");
    unsetenv("EAI_AUTH_PEPPER_FILE");
    unsetenv("EAI_FINOPS_URL");
    unsetenv("EAI_AUDIT_URL");
    unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
    setenv("EAI_SANDBOX_RUNSC", "/nonexistent", 1);
    char dd[400], listen[64];
    snprintf(dd, sizeof dd, "%s/var", tmpdir);
    setenv("EAI_DATA_DIR", dd, 1);
    int port = th_free_port();
    if (port <= 0)
        return -1;
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(base_url, sizeof base_url, "http://127.0.0.1:%d", port);
    setenv("EAI_LISTEN", listen, 1);
    snprintf(logfile, sizeof logfile, "%s/eaid.log", tmpdir);
    /* the data dir and schema exist before the server starts */
    char id[64];
    if (make_tenant("first", id) < 0)
        return -1;
    server_pid = th_serve(eaid, NULL, logfile);
    char u[256];
    snprintf(u, sizeof u, "%s/healthz", base_url);
    return server_pid > 0 && th_wait_up(u, 15000) == 0 ? 0 : -1;
}

static int teardown(void)
{
    int rc = server_pid > 0 ? th_stop(server_pid, 10000) : 0;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        return -1;
    return rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------ tests */

static void test_parse_expires(void)
{
    const int64_t now = 1800000000000LL; /* 2027-01-15T08:00:00Z */
    int64_t at = 0;
    CU_ASSERT_EQUAL(eai_cli_parse_expires("90d", now, &at), 0);
    CU_ASSERT_EQUAL(at, now + 90LL * 86400 * 1000);
    CU_ASSERT_EQUAL(eai_cli_parse_expires("1h30m", now, &at), 0);
    CU_ASSERT_EQUAL(at, now + 5400LL * 1000);
    CU_ASSERT_EQUAL(eai_cli_parse_expires("2w", now, &at), 0);
    CU_ASSERT_EQUAL(at, now + 14LL * 86400 * 1000);
    CU_ASSERT_EQUAL(eai_cli_parse_expires("45s", now, &at), 0);
    CU_ASSERT_EQUAL(at, now + 45000);
    CU_ASSERT_EQUAL(eai_cli_parse_expires("2027-02-01T00:00:00Z", now, &at), 0);
    CU_ASSERT_EQUAL(at, 1801440000000LL);
    CU_ASSERT_EQUAL(eai_cli_parse_expires("2027-02-01T01:00:00+01:00", now, &at), 0);
    CU_ASSERT_EQUAL(at, 1801440000000LL);
    at = 7;
    const char *bad[] = {"", "30", "0s", "0d", "-1d", "1y", "d", "1.5h", "1h 30m", "2020-01-01T00:00:00Z",
                         "2027-01-15T08:00:00Z" /* now is not the future */, "2027-13-01T00:00:00Z",
                         "tomorrow", "36601d" /* over 100 years */, "99999999999999999999s", NULL};
    for (int i = 0; bad[i]; i++) {
        CU_ASSERT_EQUAL(eai_cli_parse_expires(bad[i], now, &at), -1);
        if (eai_cli_parse_expires(bad[i], now, &at) != -1)
            fprintf(stderr, "accepted: '%s'\n", bad[i]);
    }
    CU_ASSERT_EQUAL(at, 7); /* untouched on failure */
}

static void test_tenants_list(void)
{
    char a[64], b[64];
    CU_ASSERT_EQUAL_FATAL(make_tenant("list-a", a), 0);
    CU_ASSERT_EQUAL_FATAL(make_tenant("list\tb", b), 0);
    char *out = NULL;
    const char *j[] = {"tenants", "list", "--json", NULL};
    CU_ASSERT_EQUAL_FATAL(run(&out, j), 0);
    int seen_a = 0, seen_b = 0, lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *t = json_loads(line, 0, NULL);
        CU_ASSERT_FATAL(json_is_object(t));
        CU_ASSERT_EQUAL(json_object_size(t), 3);
        const char *id = json_string_value(json_object_get(t, "id"));
        const char *name = json_string_value(json_object_get(t, "name"));
        CU_ASSERT_PTR_NOT_NULL(json_string_value(json_object_get(t, "created_at")));
        if (id && strcmp(id, a) == 0) {
            seen_a++;
            CU_ASSERT_STRING_EQUAL(name, "list-a");
        }
        if (id && strcmp(id, b) == 0) {
            seen_b++;
            CU_ASSERT_STRING_EQUAL(name, "list\tb");
        }
        lines++;
        json_decref(t);
    }
    free(out);
    CU_ASSERT_EQUAL(seen_a, 1);
    CU_ASSERT_EQUAL(seen_b, 1);
    CU_ASSERT(lines >= 3); /* "first" from setup too */
    /* the table: a header, one line per tenant, a tab inside a name shown as '?' */
    const char *t[] = {"tenants", "list", NULL};
    CU_ASSERT_EQUAL_FATAL(run(&out, t), 0);
    CU_ASSERT(strncmp(out, "ID\tNAME\tCREATED_AT\n", 19) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, a));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "list?b"));
    free(out);
    const char *u[] = {"tenants", "list", "--yaml", NULL};
    CU_ASSERT_EQUAL(run(NULL, u), 2);
}

static void test_keys_list_expiry(void)
{
    char t[64], other[64], live[128], soon[128], plain[128], forever[128];
    CU_ASSERT_EQUAL_FATAL(make_tenant("keys", t), 0);
    CU_ASSERT_EQUAL_FATAL(make_tenant("keys-other", other), 0);
    CU_ASSERT_EQUAL_FATAL(make_key(t, "1h", live), 0);
    CU_ASSERT_EQUAL_FATAL(make_key(t, "2s", soon), 0);
    int64_t soon_made = eai_now_ms();
    CU_ASSERT_EQUAL_FATAL(make_key(t, NULL, plain), 0);
    CU_ASSERT_EQUAL_FATAL(make_key(other, "2099-01-01T00:00:00Z", forever), 0);
    /* refusals: malformed, past, unknown tenant */
    char junk[128];
    CU_ASSERT_EQUAL(make_key(t, "30", junk), 2);
    CU_ASSERT_EQUAL(make_key(t, "2020-01-01T00:00:00Z", junk), 2);
    CU_ASSERT_EQUAL(make_key("11111111-1111-4111-8111-111111111111", "1h", junk), 1);

    /* a key with a future expiry works; once its time passed it is refused */
    struct th_resp r;
    CU_ASSERT_EQUAL(get_with(live, &r), 200);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(get_with(forever, &r), 200);
    th_resp_free(&r);
    while (eai_now_ms() < soon_made + 2500)
        usleep(100000);
    CU_ASSERT_EQUAL(get_with(soon, &r), 401);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "unauthenticated");
    CU_ASSERT_STRING_EQUAL(th_header(&r, "WWW-Authenticate") ? th_header(&r, "WWW-Authenticate") : "", "Bearer");
    th_resp_free(&r);
    CU_ASSERT_EQUAL(get_with(plain, &r), 200);
    th_resp_free(&r);

    /* keys list --json: this tenant's three keys, statuses, no secret, no hash */
    char *out = NULL;
    const char *j[] = {"keys", "list", "--tenant", t, "--json", NULL};
    CU_ASSERT_EQUAL_FATAL(run(&out, j), 0);
    CU_ASSERT(strstr(out, live + 21) == NULL); /* the secret part of each key */
    CU_ASSERT(strstr(out, soon + 21) == NULL);
    CU_ASSERT(strstr(out, plain + 21) == NULL);
    CU_ASSERT(strstr(out, "hash") == NULL);
    CU_ASSERT(strstr(out, forever + 4) == NULL && strstr(out, "eai_") == NULL);
    int n = 0, active = 0, expired = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *k = json_loads(line, 0, NULL);
        CU_ASSERT_FATAL(json_is_object(k));
        const char *id = json_string_value(json_object_get(k, "key_id"));
        const char *st = json_string_value(json_object_get(k, "status"));
        CU_ASSERT_FATAL(id && st && strlen(id) == 16);
        CU_ASSERT(strncmp(soon + 4, id, 16) == 0 || strncmp(live + 4, id, 16) == 0 ||
                  strncmp(plain + 4, id, 16) == 0);
        if (strncmp(soon + 4, id, 16) == 0) {
            expired++;
            CU_ASSERT_STRING_EQUAL(st, "expired");
        } else {
            active++;
            CU_ASSERT_STRING_EQUAL(st, "active");
        }
        if (strncmp(plain + 4, id, 16) == 0) {
            CU_ASSERT(json_is_null(json_object_get(k, "expires_at")));
        } else {
            CU_ASSERT(json_is_string(json_object_get(k, "expires_at")));
        }
        n++;
        json_decref(k);
    }
    free(out);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(active, 2);
    CU_ASSERT_EQUAL(expired, 1);

    /* revoked shows as revoked in the table */
    char kid[17];
    memcpy(kid, plain + 4, 16);
    kid[16] = '\0';
    const char *rv[] = {"keys", "revoke", kid, NULL};
    CU_ASSERT_EQUAL(run(NULL, rv), 0);
    const char *tb[] = {"keys", "list", "--tenant", t, NULL};
    CU_ASSERT_EQUAL_FATAL(run(&out, tb), 0);
    CU_ASSERT(strncmp(out, "KEY_ID\tNAME\tSTATUS\tCREATED_AT\tEXPIRES_AT\n", 41) == 0);
    char want[64];
    snprintf(want, sizeof want, "%s\tadm\trevoked\t", kid);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    CU_ASSERT(strstr(out, plain + 21) == NULL);
    free(out);
    /* usage and unknown tenant */
    const char *u1[] = {"keys", "list", NULL};
    CU_ASSERT_EQUAL(run(NULL, u1), 2);
    const char *u2[] = {"keys", "list", "--tenant", "11111111-1111-4111-8111-111111111111", NULL};
    CU_ASSERT_EQUAL(run(NULL, u2), 1);
}

static int register_tests(void)
{
    CU_pSuite p = CU_add_suite("expires parser", NULL, NULL);
    if (!p || !CU_add_test(p, "durations and RFC 3339", test_parse_expires))
        return -1;
    CU_pSuite s = CU_add_suite("admin cli", setup, teardown);
    if (!s || !CU_add_test(s, "tenants list", test_tenants_list) ||
        !CU_add_test(s, "keys list, --expires, expired key 401", test_keys_list_expiry))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(register_tests)
