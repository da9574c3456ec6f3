/* Opaque per-tenant list cursors (cursor.h). */
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "exec/cursor.h"

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* HMAC-SHA-256(pepper, label || tenant) -> out (32 bytes).  0 or -1. */
static int derive(const char *pepper_hex, const char *label, const char *tenant, unsigned char out[32])
{
    unsigned char key[32];
    if (!pepper_hex || strlen(pepper_hex) < 64)
        return -1;
    for (int i = 0; i < 32; i++) {
        int h = hexval(pepper_hex[2 * i]), l = hexval(pepper_hex[2 * i + 1]);
        if (h < 0 || l < 0)
            return -1;
        key[i] = (unsigned char)(h << 4 | l);
    }
    unsigned char msg[256];
    size_t ll = strlen(label), tl = tenant ? strlen(tenant) : 0;
    if (ll + tl > sizeof msg)
        return -1;
    memcpy(msg, label, ll);
    if (tl)
        memcpy(msg + ll, tenant, tl);
    unsigned int n = 32;
    unsigned char *r = HMAC(EVP_sha256(), key, sizeof key, msg, ll + tl, out, &n);
    OPENSSL_cleanse(key, sizeof key);
    return r && n == 32 ? 0 : -1;
}

/* One AES-128-ECB block, no padding.  0 or -1. */
static int aes_block(const unsigned char key[16], const unsigned char in[16], unsigned char out[16], int enc)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, m = 0, ok = ctx && EVP_CipherInit_ex(ctx, EVP_aes_128_ecb(), NULL, key, NULL, enc) == 1 &&
                           EVP_CIPHER_CTX_set_padding(ctx, 0) == 1 && EVP_CipherUpdate(ctx, out, &n, in, 16) == 1 &&
                           EVP_CipherFinal_ex(ctx, out + n, &m) == 1 && n + m == 16;
    EVP_CIPHER_CTX_free(ctx);
    return ok ? 0 : -1;
}

static const char b64u[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int eai_cursor_encode(const char *pepper_hex, const char *tenant, int64_t seq, char *out)
{
    unsigned char key[32], tag[32], blk[16], ct[16];
    out[0] = '\0';
    if (seq < 0 || derive(pepper_hex, "eai list cursor key v1", NULL, key) < 0 ||
        derive(pepper_hex, "eai list cursor tenant v1:", tenant, tag) < 0)
        return -1;
    for (int i = 0; i < 8; i++)
        blk[i] = (unsigned char)((uint64_t)seq >> (56 - 8 * i));
    memcpy(blk + 8, tag, 8);
    int rc = aes_block(key, blk, ct, 1);
    OPENSSL_cleanse(key, sizeof key);
    if (rc < 0)
        return -1;
    /* 16 bytes -> 22 base64url characters (the last holds 2 bits) */
    size_t k = 0;
    for (int i = 0; i < 16; i += 3) {
        uint32_t v = (uint32_t)ct[i] << 16 | (i + 1 < 16 ? (uint32_t)ct[i + 1] << 8 : 0) | (i + 2 < 16 ? ct[i + 2] : 0);
        int chars = i + 2 < 16 ? 4 : 2;
        for (int c = 0; c < chars; c++)
            out[k++] = b64u[(v >> (18 - 6 * c)) & 63];
    }
    out[k] = '\0';
    return k == EAI_CURSOR_LEN ? 0 : -1;
}

int eai_cursor_decode(const char *pepper_hex, const char *tenant, const char *c, int64_t *seq)
{
    if (!c || strlen(c) != EAI_CURSOR_LEN)
        return -1;
    unsigned char ct[18] = {0}, blk[16], key[32], tag[32];
    size_t k = 0;
    for (int i = 0; i < EAI_CURSOR_LEN; i += 4) {
        uint32_t v = 0;
        int chars = i + 4 <= EAI_CURSOR_LEN ? 4 : EAI_CURSOR_LEN - i;
        for (int j = 0; j < 4; j++) {
            const char *p = j < chars ? strchr(b64u, c[i + j]) : b64u;
            if (!p || !*p)
                return -1;
            v = v << 6 | (uint32_t)(p - b64u);
        }
        ct[k++] = (unsigned char)(v >> 16);
        ct[k++] = (unsigned char)(v >> 8);
        ct[k++] = (unsigned char)v;
    }
    if (derive(pepper_hex, "eai list cursor key v1", NULL, key) < 0 ||
        derive(pepper_hex, "eai list cursor tenant v1:", tenant, tag) < 0)
        return -1;
    int rc = aes_block(key, ct, blk, 0);
    OPENSSL_cleanse(key, sizeof key);
    if (rc < 0 || CRYPTO_memcmp(blk + 8, tag, 8) != 0)
        return -1;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | blk[i];
    if (v > INT64_MAX)
        return -1;
    *seq = (int64_t)v;
    return 0;
}
