/* Cache of verified API keys on the loop thread (http/auth_cache.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <pthread.h>
#include <unistd.h>


#include "http/auth_cache.h"
#include "http/auth.h"
#include "base/log.h"
#include "base/util.h"

#define SLOTS 256 /* direct-mapped by key id (random hex): a collision only costs a miss */

struct slot {
    char key_id[EAI_KEY_ID_LEN + 1]; /* "" when empty */
    char secret[EAI_KEY_SECRET_LEN]; /* the secret that passed the HMAC check (zeroed when the slot goes) */
    size_t secret_len;
    char tenant[64];
    int64_t expires_ms;              /* INT64_MAX: never */
    int64_t until_ms;                /* cached until */
    int64_t refresh_ms;              /* a hit from then on asks storage again in the background */
    int refreshing;                  /* that background lookup is under way */
};

struct eai_auth_cache {
    int ttl_ms;
    const volatile uint64_t *counter; /* <data_dir>/keys.gen mapped (shared), NULL without */
    uint64_t seen;                   /* its value when the slots were last valid */
    uint64_t gen;                    /* bumped by every clear */
    struct slot slot[SLOTS];
};

/* a[0..n) == b[0..n), in time that depends on n only: the bytes are
 * folded eight at a time into one difference, tested once at the end
 * (CRYPTO_memcmp's byte loop was 460 instructions of a GET) */
static int same_secret(const char *a, const char *b, size_t n)
{
    uint64_t diff = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        diff |= x ^ y;
    }
    for (; i < n; i++)
        diff |= (uint64_t)((unsigned char)a[i] ^ (unsigned char)b[i]);
    /* no branch on diff before here; the one below is the verdict */
    __asm__ volatile("" : "+r"(diff));
    return diff == 0;
}

static unsigned slot_of(const char *key_id)
{
    unsigned h = 2166136261u;
    for (const char *p = key_id; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % SLOTS;
}

/* Open (creating) the revocation counter: 8 bytes, never shrunk. */
static int counter_open(const char *data_dir, int writable, volatile uint64_t **out)
{
    char path[PATH_MAX];
    if (!data_dir || snprintf(path, sizeof path, "%s/%s", data_dir, EAI_AUTH_MARKER) >= (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    struct stat st;
    int bad = fstat(fd, &st) < 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (!bad && st.st_size < 8 && ftruncate(fd, 8) < 0)
        bad = errno;
    if (bad) {
        close(fd);
        errno = bad;
        return -1;
    }
    void *p = mmap(NULL, 8, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        errno = e;
        return -1;
    }
    *out = p;
    return 0;
}

static uint64_t counter_read(const struct eai_auth_cache *c)
{
    return __atomic_load_n(c->counter, __ATOMIC_ACQUIRE);
}

struct eai_auth_cache *eai_auth_cache_new(int ttl_ms, const char *data_dir)
{
    struct eai_auth_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ttl_ms = ttl_ms;
    if (ttl_ms > 0 && data_dir) {
        volatile uint64_t *p = NULL;
        if (counter_open(data_dir, 0, &p) < 0) {
            /* without the counter a CLI revocation would wait for the TTL: no cache then */
            eai_log("http", EAI_LOG_WARN, "auth cache off: cannot map %s/%s for revocations: %s", data_dir,
                    EAI_AUTH_MARKER, strerror(errno));
            c->ttl_ms = 0;
        } else {
            c->counter = p;
            c->seen = counter_read(c);
        }
    }
    return c;
}

void eai_auth_cache_free(struct eai_auth_cache *c)
{
    if (!c)
        return;
    if (c->counter)
        munmap((void *)(uintptr_t)c->counter, 8);
    explicit_bzero(c, sizeof *c);
    free(c);
}

void eai_auth_cache_clear(struct eai_auth_cache *c)
{
    if (!c)
        return;
    explicit_bzero(c->slot, sizeof c->slot);
    c->gen++;
}

/* A revocation since the slots were filled empties them: one load of a
 * shared page, no system call (the check runs on every request). */
static void revocations_seen(struct eai_auth_cache *c)
{
    if (!c->counter)
        return;
    uint64_t now = counter_read(c);
    if (now != c->seen) {
        c->seen = now;
        eai_auth_cache_clear(c);
    }
}

uint64_t eai_auth_cache_gen(struct eai_auth_cache *c)
{
    if (!c)
        return 0;
    revocations_seen(c);
    return c->gen;
}

int eai_auth_cache_check(struct eai_auth_cache *c, const char *key_id, const char *secret, int64_t now_ms,
                         char *tenant, size_t tenant_sz)
{
    if (!c || c->ttl_ms <= 0)
        return 0;
    struct slot *s = &c->slot[slot_of(key_id)];
    if (!s->key_id[0] || strcmp(s->key_id, key_id) != 0)
        return 0;
    revocations_seen(c); /* a revocation made before this request was sent is seen now */
    if (!s->key_id[0] || now_ms >= s->until_ms || now_ms >= s->expires_ms) {
        explicit_bzero(s, sizeof *s);
        return 0;
    }
    /* the whole presented secret against the whole stored one, in constant
     * time (the length is public: secrets have one length) */
    size_t sl = strnlen(secret, EAI_KEY_SECRET_LEN + 1);
    if (sl != s->secret_len || !same_secret(secret, s->secret, sl))
        return 0; /* storage decides and says why */
    size_t tl = strnlen(s->tenant, sizeof s->tenant);
    if (tenant_sz == 0)
        return 0;
    if (tl >= tenant_sz)
        tl = tenant_sz - 1;
    memcpy(tenant, s->tenant, tl);
    tenant[tl] = '\0';
    if (now_ms >= s->refresh_ms && !s->refreshing) {
        s->refreshing = 1;
        return 2;
    }
    return 1;
}

void eai_auth_cache_put(struct eai_auth_cache *c, uint64_t gen, const char *key_id, const char *secret,
                        const json_t *rec, int64_t now_ms)
{
    if (!c || c->ttl_ms <= 0 || !rec || strlen(key_id) != EAI_KEY_ID_LEN)
        return;
    size_t sl = strnlen(secret, EAI_KEY_SECRET_LEN + 1);
    if (sl == 0 || sl > EAI_KEY_SECRET_LEN)
        return;
    revocations_seen(c);
    if (gen != c->gen)
        return; /* a revocation was seen while storage was asked: the record may predate it */
    const char *tenant = json_string_value(json_object_get(rec, "tenant_id"));
    if (!tenant || strlen(tenant) >= sizeof c->slot[0].tenant)
        return;
    int64_t exp = INT64_MAX;
    const json_t *e = json_object_get(rec, "expires_at");
    if (e && !json_is_null(e) && (!json_is_string(e) || eai_time_parse_rfc3339(json_string_value(e), &exp) < 0))
        return;
    struct slot *s = &c->slot[slot_of(key_id)];
    explicit_bzero(s, sizeof *s);
    snprintf(s->key_id, sizeof s->key_id, "%s", key_id);
    memcpy(s->secret, secret, sl);
    s->secret_len = sl;
    snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
    s->expires_ms = exp;
    s->until_ms = now_ms + c->ttl_ms;
    s->refresh_ms = now_ms + c->ttl_ms / 2;
    s->refreshing = 0;
}

void eai_auth_cache_drop(struct eai_auth_cache *c, const char *key_id, int only_flag)
{
    if (!c)
        return;
    struct slot *s = &c->slot[slot_of(key_id)];
    if (strcmp(s->key_id, key_id) != 0)
        return;
    if (only_flag)
        s->refreshing = 0;
    else
        explicit_bzero(s, sizeof *s);
}

int eai_auth_cache_notify(const char *data_dir)
{
    volatile uint64_t *p = NULL;
    if (counter_open(data_dir, 1, &p) < 0)
        return -1;
    __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST);
    return munmap((void *)(uintptr_t)p, 8);
}
