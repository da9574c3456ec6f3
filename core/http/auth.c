#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/auth.h"
#include "base/errors.h"
#include "base/util.h"

/* lowercase hex digits, eight a word, in a time that does not depend on
 * them (every request's key goes through here) */
static int is_hex(const char *s, size_t n) { return eai_hex_lower_ok(s, n); }

static int hexval(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

static int pepper_read(const char *path, char out[65], struct eai_error **err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    char buf[130];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int saved = errno;
    close(fd);
    if (n < 0) {
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, saved, "pepper %s: %s", path, strerror(saved)));
        return -2;
    }
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    if (n != 64 || !is_hex(buf, 64)) {
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, 0,
            "pepper %s: expected 64 lowercase hex characters (32 bytes)", path));
        return -2;
    }
    memcpy(out, buf, 65);
    return 0;
}

int eai_auth_pepper_load(const char *path, int create, char out[65], struct eai_error **err)
{
    int rc = pepper_read(path, out, err);
    if (rc == 0)
        return 0;
    if (rc == -2)
        return -1;
    if (errno != ENOENT || !create) {
        int e = errno;
        return eai_error_set_sys(err, EAI_E_INTERNAL, e, "pepper %s: %s", path, strerror(e));
    }
    /* Create atomically: write a temporary file, then link() it into
     * place (fails with EEXIST when another process won the race). */
    char hex[65];
    if (eai_random_hex(hex, 32) < 0) {
        return eai_error_set_sys(err, EAI_E_INTERNAL, errno, "pepper: no randomness");
    }
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        int e = errno;
        return eai_error_set_sys(err, EAI_E_INTERNAL, e, "pepper %s: %s", tmp, strerror(e));
    }
    char line[66];
    snprintf(line, sizeof(line), "%s\n", hex);
    int ok = write(fd, line, 65) == 65 && fchmod(fd, 0600) == 0 && fsync(fd) == 0;
    int e = errno;
    close(fd);
    if (!ok) {
        unlink(tmp);
        return eai_error_set_sys(err, EAI_E_INTERNAL, e, "pepper %s: write: %s", tmp, strerror(e));
    }
    if (link(tmp, path) < 0 && errno != EEXIST) {
        e = errno;
        unlink(tmp);
        return eai_error_set_sys(err, EAI_E_INTERNAL, e, "pepper %s: %s", path, strerror(e));
    }
    unlink(tmp);
    rc = pepper_read(path, out, err);
    if (rc == -1) {
        e = errno;
        eai_error_propagate(err, eai_error_new(EAI_E_INTERNAL, e, "pepper %s: %s", path, strerror(e)));
    }
    return rc == 0 ? 0 : -1;
}

int eai_auth_key_generate(char key_id[EAI_KEY_ID_LEN + 1], char secret[EAI_KEY_SECRET_LEN + 1],
                          char full[EAI_KEY_LEN + 1])
{
    if (eai_random_hex(key_id, EAI_KEY_ID_LEN / 2) < 0 || eai_random_hex(secret, EAI_KEY_SECRET_LEN / 2) < 0)
        return -1;
    snprintf(full, EAI_KEY_LEN + 1, "eai_%s_%s", key_id, secret);
    return 0;
}

void eai_auth_secret_hash(const char *pepper_hex, const char *secret, char out[65])
{
    unsigned char key[32];
    for (int i = 0; i < 32; i++)
        key[i] = (unsigned char)(hexval(pepper_hex[2 * i]) << 4 | hexval(pepper_hex[2 * i + 1]));
    eai_hmac_sha256_hex(key, sizeof(key), secret, strlen(secret), out);
}

int eai_auth_parse_bearer(const char *h, char key_id[EAI_KEY_ID_LEN + 1], char secret[EAI_KEY_SECRET_LEN + 1])
{
    if (!h)
        return -1;
    while (*h == ' ' || *h == '\t')
        h++;
    if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
        return -1;
    h += 6;
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strlen(h);
    while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    if (n != EAI_KEY_LEN || strncmp(h, "eai_", 4) != 0 || h[4 + EAI_KEY_ID_LEN] != '_')
        return -1;
    const char *id = h + 4, *sec = h + 5 + EAI_KEY_ID_LEN;
    if (!is_hex(id, EAI_KEY_ID_LEN) || !is_hex(sec, EAI_KEY_SECRET_LEN))
        return -1;
    memcpy(key_id, id, EAI_KEY_ID_LEN);
    key_id[EAI_KEY_ID_LEN] = '\0';
    memcpy(secret, sec, EAI_KEY_SECRET_LEN);
    secret[EAI_KEY_SECRET_LEN] = '\0';
    return 0;
}

int eai_auth_expired(const json_t *rec, int64_t now_ms)
{
    const json_t *v = json_object_get(rec, "expires_at");
    if (!v || json_is_null(v))
        return 0;
    int64_t at = 0;
    if (!json_is_string(v) || eai_time_parse_rfc3339(json_string_value(v), &at) < 0)
        return 1;
    return at <= now_ms;
}

int eai_auth_check(const json_t *rec, const char *pepper_hex, const char *secret)
{
    static const char dummy[65] = "0000000000000000000000000000000000000000000000000000000000000000";
    char got[65];
    eai_auth_secret_hash(pepper_hex, secret, got);
    const char *want = rec ? json_string_value(json_object_get(rec, "hash")) : NULL;
    int live = rec && want && strlen(want) == 64 && !json_is_true(json_object_get(rec, "revoked")) &&
               !eai_auth_expired(rec, eai_now_ms()) && json_string_value(json_object_get(rec, "tenant_id"));
    int same = eai_ct_streq(got, live ? want : dummy);
    return live && same;
}
