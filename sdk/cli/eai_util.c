/* eai: base64, UTF-8, SHA-256, local files and safe output paths. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eai.h"

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *eai_b64_encode(const unsigned char *d, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)d[i] << 16 | (i + 1 < n ? (unsigned)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
        out[k++] = b64chars[(v >> 18) & 63];
        out[k++] = b64chars[(v >> 12) & 63];
        out[k++] = i + 1 < n ? b64chars[(v >> 6) & 63] : '=';
        out[k++] = i + 2 < n ? b64chars[v & 63] : '=';
    }
    out[k] = '\0';
    return out;
}

unsigned char *eai_b64_decode(const char *s, size_t *len)
{
    size_t n = strlen(s);
    unsigned char *out = malloc(n / 4 * 3 + 3);
    if (!out)
        return NULL;
    size_t k = 0;
    unsigned v = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=' || s[i] == '\n')
            continue;
        const char *p = strchr(b64chars, s[i]);
        if (!p) {
            free(out);
            return NULL;
        }
        v = v << 6 | (unsigned)(p - b64chars);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (unsigned char)(v >> bits);
        }
    }
    *len = k;
    return out;
}

int eai_utf8_valid(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i], cp;
        size_t len;
        if (c == 0)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

unsigned char *eai_read_local(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rbe");
    if (!f)
        return NULL;
    size_t cap = 65536, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
        if (n == cap) {
            if (cap >= EAI_MAX_LOCAL_FILE) {
                free(buf);
                buf = NULL;
                errno = EFBIG;
                break;
            }
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        *len = n;
    return buf;
}

void eai_fwrite_all(FILE *f, const char *d, size_t n)
{
    if (n && fwrite(d, 1, n, f) != n)
        perror("eai: write");
    fflush(f);
}

void eai_print_stream(const json_t *rec, const char *key, FILE *f)
{
    char ek[32];
    snprintf(ek, sizeof ek, "%s_encoding", key);
    const json_t *v = json_object_get(rec, key);
    if (!json_is_string(v))
        return;
    const char *enc = eai_jstr(rec, ek);
    if (enc && strcmp(enc, "base64") == 0) {
        size_t n = 0;
        unsigned char *raw = eai_b64_decode(json_string_value(v), &n);
        if (raw)
            eai_fwrite_all(f, (const char *)raw, n);
        free(raw);
    } else {
        eai_fwrite_all(f, json_string_value(v), json_string_length(v));
    }
}

void eai_print_json(const json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    if (s)
        printf("%s\n", s);
    else
        fprintf(stderr, "eai: out of memory\n");
    free(s);
    fflush(stdout);
}

int eai_is_terminal(const char *s)
{
    static const char *const t[] = {"succeeded", "failed", "timeout", "oom_killed", "cancelled", "error"};
    for (size_t i = 0; s && i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i]) == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------------------ SHA-256 (FIPS 180-4) */

struct sha256 {
    uint32_t h[8];
    uint64_t len;
    unsigned char buf[64];
    size_t n;
};

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(struct sha256 *s, const unsigned char *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, h;
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

static void sha256_init(struct sha256 *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->n = 0;
}

static void sha256_update(struct sha256 *s, const unsigned char *p, size_t n)
{
    s->len += n;
    while (n) {
        size_t k = 64 - s->n < n ? 64 - s->n : n;
        memcpy(s->buf + s->n, p, k);
        s->n += k;
        p += k;
        n -= k;
        if (s->n == 64) {
            sha256_block(s, s->buf);
            s->n = 0;
        }
    }
}

static void sha256_hex(struct sha256 *s, char hex[65])
{
    uint64_t bits = s->len * 8;
    unsigned char pad = 0x80, zero = 0, lenb[8];
    sha256_update(s, &pad, 1);
    while (s->n != 56)
        sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++)
        lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(s, lenb, 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", s->h[i]);
}

int eai_sha256_file(FILE *f, char hex[65])
{
    struct sha256 s;
    unsigned char buf[65536];
    size_t n;
    sha256_init(&s);
    if (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0)
        return -1;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sha256_update(&s, buf, n);
    if (ferror(f))
        return -1;
    sha256_hex(&s, hex);
    return 0;
}

/* ------------------------------------------------------------ safe output paths */

static int seg_ok(const char *s, size_t n)
{
    return n > 0 && n < 256 && !(n == 1 && s[0] == '.') && !(n == 2 && s[0] == '.' && s[1] == '.');
}

const char *eai_rel_to_tmp(const char *path)
{
    if (!path || strncmp(path, "/tmp/", 5) != 0)
        return NULL;
    const char *rel = path + 5;
    for (const char *p = rel;;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (!seg_ok(p, n))
            return NULL;
        if (!e)
            break;
        p = e + 1;
    }
    return rel;
}

FILE *eai_out_open(const char *dir, const char *rel, struct eai_out *ctx)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->dirfd = -1;
    if (!rel || !*rel || rel[0] == '/') {
        errno = EINVAL;
        return NULL;
    }
    if (mkdir(dir, 0777) < 0 && errno != EEXIST)
        return NULL;
    /* The target directory itself may be a symlink the user chose; below
     * it nothing is followed. */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    const char *p = rel;
    for (;;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (!seg_ok(p, n)) {
            close(fd);
            errno = EINVAL;
            return NULL;
        }
        char seg[256];
        memcpy(seg, p, n);
        seg[n] = '\0';
        if (!e) {
            snprintf(ctx->name, sizeof ctx->name, "%s", seg);
            break;
        }
        if (mkdirat(fd, seg, 0777) < 0 && errno != EEXIST) {
            close(fd);
            return NULL;
        }
        int nfd = openat(fd, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(fd);
        if (nfd < 0)
            return NULL;
        fd = nfd;
        p = e + 1;
    }
    snprintf(ctx->tmp, sizeof ctx->tmp, ".eai-download.%ld.tmp", (long)getpid());
    int ofd = openat(fd, ctx->tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (ofd < 0) {
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(ofd, "w+b");
    if (!f) {
        close(ofd);
        unlinkat(fd, ctx->tmp, 0);
        close(fd);
        return NULL;
    }
    ctx->dirfd = fd;
    return f;
}

int eai_out_commit(FILE *f, struct eai_out *ctx)
{
    int ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (ok && renameat(ctx->dirfd, ctx->tmp, ctx->dirfd, ctx->name) < 0)
        ok = 0;
    if (!ok) {
        int e = errno;
        unlinkat(ctx->dirfd, ctx->tmp, 0);
        errno = e;
    }
    close(ctx->dirfd);
    ctx->dirfd = -1;
    return ok ? 0 : -1;
}

void eai_out_abort(FILE *f, struct eai_out *ctx)
{
    if (f)
        fclose(f);
    if (ctx->dirfd >= 0) {
        unlinkat(ctx->dirfd, ctx->tmp, 0);
        close(ctx->dirfd);
    }
    ctx->dirfd = -1;
}
