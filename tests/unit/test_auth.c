/* API keys: format, parsing, hashing with the pepper, the pepper file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/auth.h"
#include "base/errors.h"
#include "unit_main.h"
#include "base/util.h"

static char tmpdir[256];

static int setup(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/eai-test-auth-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_generate_parse(void)
{
    char id[EAI_KEY_ID_LEN + 1], sec[EAI_KEY_SECRET_LEN + 1], full[EAI_KEY_LEN + 1];
    CU_ASSERT_EQUAL_FATAL(eai_auth_key_generate(id, sec, full), 0);
    CU_ASSERT_EQUAL(strlen(full), EAI_KEY_LEN);
    CU_ASSERT(strncmp(full, "eai_", 4) == 0);
    char hdr[200], pid[EAI_KEY_ID_LEN + 1], psec[EAI_KEY_SECRET_LEN + 1];
    snprintf(hdr, sizeof(hdr), "Bearer %s", full);
    CU_ASSERT_EQUAL_FATAL(eai_auth_parse_bearer(hdr, pid, psec), 0);
    CU_ASSERT_STRING_EQUAL(pid, id);
    CU_ASSERT_STRING_EQUAL(psec, sec);
    snprintf(hdr, sizeof(hdr), "bearer   %s  ", full);
    CU_ASSERT_EQUAL(eai_auth_parse_bearer(hdr, pid, psec), 0);
    /* two keys differ */
    char id2[EAI_KEY_ID_LEN + 1], sec2[EAI_KEY_SECRET_LEN + 1], full2[EAI_KEY_LEN + 1];
    CU_ASSERT_EQUAL(eai_auth_key_generate(id2, sec2, full2), 0);
    CU_ASSERT(strcmp(full, full2) != 0);
}

static void test_parse_malformed(void)
{
    char id[EAI_KEY_ID_LEN + 1], sec[EAI_KEY_SECRET_LEN + 1];
    const char *bad[] = {
        "", "Bearer", "Bearer ", "Basic abc", "eai_0123456789abcdef_" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "Bearer eai_0123456789abcdef_0123", /* short secret */
        "Bearer eai_0123456789ABCDEF_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "Bearer xyz_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "Bearer eai_0123456789abcdef-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "Bearer eai_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeff",
        "Bearer eai_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg",
        NULL};
    for (int i = 0; bad[i]; i++)
        CU_ASSERT_EQUAL(eai_auth_parse_bearer(bad[i], id, sec), -1);
    CU_ASSERT_EQUAL(eai_auth_parse_bearer(NULL, id, sec), -1);
    /* the hex check (a table) at every position of the id and the secret:
     * only 0-9 and a-f pass; the neighbours of the ranges do not */
    char good[128];
    snprintf(good, sizeof good, "Bearer eai_0123456789abcdef_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    CU_ASSERT_EQUAL(eai_auth_parse_bearer(good, id, sec), 0);
    static const char odd[] = {'/', ':', '`', 'g', 'A', 'F', '@', (char)0x80, (char)0xb0};
    size_t at0 = strlen("Bearer eai_");
    for (size_t at = at0; at < strlen(good); at++) {
        if (at == at0 + EAI_KEY_ID_LEN)
            continue; /* the '_' between them */
        char t = good[at];
        for (size_t k = 0; k < sizeof odd; k++) {
            good[at] = odd[k];
            CU_ASSERT_EQUAL(eai_auth_parse_bearer(good, id, sec), -1);
        }
        good[at] = t;
    }
    CU_ASSERT_EQUAL(eai_auth_parse_bearer(good, id, sec), 0);
}

static void test_hash_check(void)
{
    const char *pepper = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    const char *other = "ff112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    char id[EAI_KEY_ID_LEN + 1], sec[EAI_KEY_SECRET_LEN + 1], full[EAI_KEY_LEN + 1], h[65], h2[65];
    eai_auth_key_generate(id, sec, full);
    eai_auth_secret_hash(pepper, sec, h);
    eai_auth_secret_hash(other, sec, h2);
    CU_ASSERT_EQUAL(strlen(h), 64);
    CU_ASSERT(strcmp(h, h2) != 0); /* the pepper matters */
    CU_ASSERT(strstr(h, sec) == NULL);
    json_t *rec = json_pack("{s:s, s:s, s:s, s:b}", "key_id", id, "tenant_id", "t1", "hash", h, "revoked", 0);
    CU_ASSERT_EQUAL(eai_auth_check(rec, pepper, sec), 1);
    CU_ASSERT_EQUAL(eai_auth_check(rec, other, sec), 0);
    char wrong[EAI_KEY_SECRET_LEN + 1];
    memcpy(wrong, sec, sizeof(wrong));
    wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
    CU_ASSERT_EQUAL(eai_auth_check(rec, pepper, wrong), 0);
    /* expiry: null or a future time is live; now or past, or garbage, is not */
    json_object_set_new(rec, "expires_at", json_null());
    CU_ASSERT_EQUAL(eai_auth_check(rec, pepper, sec), 1);
    json_object_set_new(rec, "expires_at", json_string("2999-01-01T00:00:00.000Z"));
    CU_ASSERT_EQUAL(eai_auth_check(rec, pepper, sec), 1);
    CU_ASSERT_EQUAL(eai_auth_expired(rec, eai_now_ms()), 0);
    json_object_set_new(rec, "expires_at", json_string("2020-01-01T00:00:00.000Z"));
    CU_ASSERT_EQUAL(eai_auth_check(rec, pepper, sec), 0);
    CU_ASSERT_EQUAL(eai_auth_expired(rec, eai_now_ms()), 1);
    int64_t at = 0;
    CU_ASSERT_EQUAL_FATAL(eai_time_parse_rfc3339("2030-06-01T12:00:00.000Z", &at), 0);
    CU_ASSERT_EQUAL(eai_auth_expired(rec, at), 1);
    json_object_set_new(rec, "expires_at", json_string("2030-06-01T12:00:00.000Z"));
    CU_ASSERT_EQUAL(eai_auth_expired(rec, at - 1), 0);
    CU_ASSERT_EQUAL(eai_auth_expired(rec, at), 1); /* the instant itself is expired */
    json_object_set_new(rec, "expires_at", json_string("tomorrow"));
    CU_ASSERT_EQUAL(eai_auth_check(rec, pepper, sec), 0); /* fail closed */
    json_object_set_new(rec, "expires_at", json_integer(1));
    CU_ASSERT_EQUAL(eai_auth_expired(rec, 0), 1);
    json_object_del(rec, "expires_at");
    CU_ASSERT_EQUAL(eai_auth_check(rec, pepper, sec), 1);
    json_object_set_new(rec, "revoked", json_true());
    CU_ASSERT_EQUAL(eai_auth_check(rec, pepper, sec), 0);
    CU_ASSERT_EQUAL(eai_auth_check(NULL, pepper, sec), 0);
    json_decref(rec);
}

static void test_pepper_file(void)
{
    char path[300], a[65], b[65];
    snprintf(path, sizeof(path), "%s/pepper", tmpdir);
    struct eai_error *err = NULL;
    CU_ASSERT_EQUAL(eai_auth_pepper_load(path, 0, a, &err), -1); /* absent, no create */
    eai_error_free(err);
    err = NULL;
    CU_ASSERT_EQUAL_FATAL(eai_auth_pepper_load(path, 1, a, &err), 0);
    struct stat st;
    CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
    CU_ASSERT_EQUAL(strlen(a), 64);
    CU_ASSERT_EQUAL(eai_auth_pepper_load(path, 1, b, &err), 0); /* read back, not regenerated */
    CU_ASSERT_STRING_EQUAL(a, b);
    /* a malformed pepper file is refused */
    char bad[300];
    snprintf(bad, sizeof(bad), "%s/badpepper", tmpdir);
    FILE *f = fopen(bad, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("short\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(eai_auth_pepper_load(bad, 1, b, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(err);
    eai_error_free(err);
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("auth", setup, teardown);
    if (!s || !CU_add_test(s, "generate and parse", test_generate_parse) ||
        !CU_add_test(s, "malformed keys", test_parse_malformed) ||
        !CU_add_test(s, "hash and check", test_hash_check) ||
        !CU_add_test(s, "pepper file", test_pepper_file))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
