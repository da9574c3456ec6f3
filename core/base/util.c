#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/util.h"

static void eai_hex(const unsigned char *b, size_t n, char *out);

static int random_direct(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Small requests (ids on every HTTP request: request id, trace and span
 * ids) come from a per-thread pool refilled by one getrandom() of 256
 * bytes: one syscall per ~10 requests instead of 3 per request.  Bytes
 * handed out are wiped from the pool; a forked child starts empty. */
#define RAND_POOL 256
static __thread unsigned char rand_pool[RAND_POOL];
static __thread size_t rand_avail;
static pthread_once_t rand_once = PTHREAD_ONCE_INIT;

static void rand_child(void) { rand_avail = 0; }
static void rand_init(void) { pthread_atfork(NULL, NULL, rand_child); }

/* n (<= 64) bytes of the pool, refilled first when short; NULL when
 * getrandom fails.  The caller wipes them once used (explicit_bzero). */
static unsigned char *pool_take(size_t n)
{
    static __thread int ready; /* this thread has seen rand_once done */
    if (!ready) {
        pthread_once(&rand_once, rand_init);
        ready = 1;
    }
    if (rand_avail < n) {
        if (random_direct(rand_pool, RAND_POOL) < 0)
            return NULL;
        rand_avail = RAND_POOL;
    }
    unsigned char *src = rand_pool + (RAND_POOL - rand_avail);
    rand_avail -= n;
    return src;
}

int eai_random_bytes(void *buf, size_t n)
{
    if (n > 64)
        return random_direct(buf, n);
    unsigned char *src = pool_take(n);
    if (!src)
        return -1;
    memcpy(buf, src, n);
    explicit_bzero(src, n);
    return 0;
}

/* hex straight from the pool: no copy of the bytes to wipe as well */
int eai_random_hex(char *out, size_t nbytes)
{
    unsigned char *src = nbytes > 64 ? NULL : pool_take(nbytes);
    if (!src)
        return -1;
    eai_hex(src, nbytes, out);
    explicit_bzero(src, nbytes);
    return 0;
}

void eai_uuid_v4(char out[37])
{
    unsigned char *src = pool_take(16);
    if (!src)
        abort(); /* no entropy: nothing safe to do */
    unsigned char b[16];
    memcpy(b, src, 16);
    explicit_bzero(src, 16);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    /* 8-4-4-4-12 hex digits: the 32 digits once, then the dashes */
    char h[33];
    eai_hex(b, 16, h);
    memcpy(out, h, 8);
    out[8] = '-';
    memcpy(out + 9, h + 8, 4);
    out[13] = '-';
    memcpy(out + 14, h + 12, 4);
    out[18] = '-';
    memcpy(out + 19, h + 16, 4);
    out[23] = '-';
    memcpy(out + 24, h + 20, 12);
    out[36] = '\0';
}

void *eai_zalloc(size_t n)
{
    void *p = malloc(n);
    if (p) {
        __asm__ volatile("" : : "r"(p) : "memory"); /* GCC folds malloc + memset into calloc */
        memset(p, 0, n);
    }
    return p;
}

/* Lowercase hex (every HTTP request hexes its request, trace and span
 * ids).  Each byte is split into its two nibbles, high first, and a nibble
 * n becomes '0' + n, plus 'a' - '0' - 10 when n > 9: sixteen bytes at once
 * with SSE2; else, on a little-endian machine, four bytes in a 64-bit word
 * (spread to a nibble a byte; n + 6 carries into bit 4 exactly when n > 9). */
#ifdef __SSE2__
static __m128i hex_nibbles(__m128i n)
{
    __m128i gt9 = _mm_cmpgt_epi8(n, _mm_set1_epi8(9));
    return _mm_add_epi8(_mm_add_epi8(n, _mm_set1_epi8('0')), _mm_and_si128(gt9, _mm_set1_epi8('a' - '0' - 10)));
}
#endif

static void eai_hex(const unsigned char *b, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    size_t i = 0;
#ifdef __SSE2__
    const __m128i low4 = _mm_set1_epi8(0x0f);
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + i));
        __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4), lo = _mm_and_si128(v, low4);
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i), hex_nibbles(_mm_unpacklo_epi8(hi, lo)));
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i + 16), hex_nibbles(_mm_unpackhi_epi8(hi, lo)));
    }
    for (; i + 8 <= n; i += 8) {
        __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)(b + i));
        __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), low4), lo = _mm_and_si128(v, low4);
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i), hex_nibbles(_mm_unpacklo_epi8(hi, lo)));
    }
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 4 <= n; i += 4) {
        uint32_t w;
        memcpy(&w, b + i, 4);
        uint64_t x = w;
        x = (x | x << 16) & 0x0000ffff0000ffffull;
        x = (x | x << 8) & 0x00ff00ff00ff00ffull;
        uint64_t d = ((x >> 4) & 0x000f000f000f000full) | ((x & 0x000f000f000f000full) << 8);
        d += 0x3030303030303030ull + (((d + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull) * 0x27;
        memcpy(out + 2 * i, &d, 8);
    }
#endif
    for (; i < n; i++) {
        out[2 * i] = hx[b[i] >> 4];
        out[2 * i + 1] = hx[b[i] & 15];
    }
    out[2 * n] = '\0';
}

void eai_hex_encode(const void *b, size_t n, char *out) { eai_hex(b, n, out); }

/* Sixteen characters at once with SSE2 (signed compares: a byte >= 0x80
 * is below '0' and fails both ranges); else eight a word: with no byte
 * >= 0x80, adding 0x80 - c to each byte sets its top bit exactly when the
 * byte is >= c, and no sum carries into the next byte (a byte >= 0x80 fails
 * on its own top bit).  A short end is padded with '0'. */
#ifdef __SSE2__
static int hex_lower_bad16(const char *p)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
    __m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('a' - 1)), _mm_cmplt_epi8(v, _mm_set1_epi8('f' + 1)));
    return _mm_movemask_epi8(_mm_or_si128(digit, alpha)) ^ 0xffff;
}

int eai_hex_lower_ok(const char *s, size_t n)
{
    int bad = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        bad |= hex_lower_bad16(s + i);
    if (i < n) {
        char t[16];
        memset(t, '0', sizeof t);
        memcpy(t, s + i, n - i);
        bad |= hex_lower_bad16(t);
    }
    return bad == 0;
}
#else
#define HEX_ONES  0x0101010101010101ull
#define HEX_HIGHS 0x8080808080808080ull
static uint64_t hex_lower_bad(uint64_t w)
{
    uint64_t digit = (w + HEX_ONES * (0x80 - '0')) & ~(w + HEX_ONES * (0x80 - '9' - 1));
    uint64_t alpha = (w + HEX_ONES * (0x80 - 'a')) & ~(w + HEX_ONES * (0x80 - 'f' - 1));
    return (w | ~(digit | alpha)) & HEX_HIGHS;
}

int eai_hex_lower_ok(const char *s, size_t n)
{
    uint64_t bad = 0, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        bad |= hex_lower_bad(w);
    }
    if (i < n) {
        w = HEX_ONES * '0';
        memcpy(&w, s + i, n - i);
        bad |= hex_lower_bad(w);
    }
    return bad == 0;
}
#endif

void eai_sha256_hex(const void *d, size_t n, char out[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(d, n, md, &len, EVP_sha256(), NULL);
    eai_hex(md, 32, out);
}

void eai_hmac_sha256_hex(const void *key, size_t klen, const void *d, size_t n, char out[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key, (int)klen, d, n, md, &len);
    eai_hex(md, 32, out);
}

int eai_ct_streq(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb)
        return 0;
    return CRYPTO_memcmp(a, b, la) == 0;
}

char *eai_b64_encode(const void *d, size_t n)
{
    size_t cap = 4 * ((n + 2) / 3) + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    EVP_EncodeBlock((unsigned char *)out, d, (int)n);
    return out;
}

unsigned char *eai_b64_decode(const char *s, size_t *outlen)
{
    size_t n = strlen(s);
    if (n % 4 != 0)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '+' || c == '/' || (c == '=' && i >= n - 2);
        if (!ok || (c != '=' && i > 0 && s[i - 1] == '='))
            return NULL;
    }
    unsigned char *out = malloc(n / 4 * 3 + 1);
    if (!out)
        return NULL;
    int r = n ? EVP_DecodeBlock(out, (const unsigned char *)s, (int)n) : 0;
    if (r < 0) {
        free(out);
        return NULL;
    }
    size_t pad = (n >= 1 && s[n - 1] == '=') + (n >= 2 && s[n - 2] == '=');
    *outlen = (size_t)r - pad;
    return out;
}

int eai_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        unsigned cp;
        if (c == 0)
            return 0;
        if (c < 0x80) { i++; continue; }
        else if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
        else return 0;
        if (i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

void eai_utf8_scrub(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t len = p[i] < 0x80 ? 1 : (p[i] & 0xe0) == 0xc0 ? 2 : (p[i] & 0xf0) == 0xe0 ? 3
                   : (p[i] & 0xf8) == 0xf0 ? 4 : 0;
        if (len && i + len <= n && eai_utf8_valid(s + i, len))
            i += len;
        else
            p[i++] = '?';
    }
}

/* Digits with an optional fraction: value scaled by 10^scale_digits exactly;
 * -1 when more fraction digits than allowed, overflow or junk. */
static int eai_parse_decimal(const char **ps, int max_frac, int64_t *ip, int64_t *fp, int *fdigits)
{
    const char *p = *ps;
    int64_t ipart = 0, fpart = 0;
    int nd = 0, fd = 0;
    while (*p >= '0' && *p <= '9') {
        if (ipart > (INT64_MAX - 9) / 10)
            return -1;
        ipart = ipart * 10 + (*p - '0');
        p++;
        nd++;
    }
    if (nd == 0)
        return -1;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') {
            if (fd >= max_frac)
                return -1;
            fpart = fpart * 10 + (*p - '0');
            fd++;
            p++;
        }
        if (fd == 0)
            return -1;
    }
    *ps = p;
    *ip = ipart;
    *fp = fpart;
    *fdigits = fd;
    return 0;
}

int eai_parse_cpu_millis(const char *s, int64_t *out)
{
    if (!s || !*s)
        return -1;
    const char *p = s;
    int64_t ip, fp;
    int fd;
    if (eai_parse_decimal(&p, 3, &ip, &fp, &fd) < 0)
        return -1;
    if (*p == 'm') {
        if (fd != 0 || p[1] != '\0')
            return -1;
        *out = ip;
        return 0;
    }
    if (*p != '\0' || ip > INT64_MAX / 1000 - 1)
        return -1;
    for (int d = fd; d < 3; d++)
        fp *= 10;
    *out = ip * 1000 + fp;
    return 0;
}

int eai_parse_bytes(const char *s, int64_t *out)
{
    static const struct { const char *sfx; int64_t mul; } units[] = {
        {"Ki", 1LL << 10}, {"Mi", 1LL << 20}, {"Gi", 1LL << 30}, {"Ti", 1LL << 40},
        {"k", 1000LL}, {"K", 1000LL}, {"M", 1000000LL}, {"G", 1000000000LL}, {"T", 1000000000000LL},
        {"", 1},
    };
    if (!s || !*s)
        return -1;
    const char *p = s;
    int64_t ip, fp;
    int fd;
    if (eai_parse_decimal(&p, 9, &ip, &fp, &fd) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(p, units[i].sfx) != 0)
            continue;
        int64_t mul = units[i].mul;
        if (ip > INT64_MAX / mul)
            return -1;
        int64_t scale = 1;
        for (int d = 0; d < fd; d++)
            scale *= 10;
        /* fraction must give a whole number of bytes */
        __int128 frac = (__int128)fp * mul;
        if (frac % scale != 0)
            return -1;
        __int128 v = (__int128)ip * mul + frac / scale;
        if (v > INT64_MAX)
            return -1;
        *out = (int64_t)v;
        return 0;
    }
    return -1;
}

void eai_format_bytes(int64_t b, char *out, size_t len)
{
    if (b > 0 && b % (1LL << 30) == 0)
        snprintf(out, len, "%lldGi", (long long)(b >> 30));
    else if (b > 0 && b % (1LL << 20) == 0)
        snprintf(out, len, "%lldMi", (long long)(b >> 20));
    else if (b > 0 && b % (1LL << 10) == 0)
        snprintf(out, len, "%lldKi", (long long)(b >> 10));
    else
        snprintf(out, len, "%lld", (long long)b);
}

void eai_format_cpu(int64_t millis, char *out, size_t len)
{
    if (millis % 1000 == 0)
        snprintf(out, len, "%lld", (long long)(millis / 1000));
    else
        snprintf(out, len, "%lldm", (long long)millis);
}

