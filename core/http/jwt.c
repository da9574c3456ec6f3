/* Gateway tokens: JWKS parsing and JWT verification (http/jwt.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "http/jwt.h"

struct jwk {
    char kid[65];
    unsigned alg;       /* the one alg this key serves (from kty/crv) */
    EVP_PKEY *pkey;
};

struct eai_jwks {
    int n;
    struct jwk k[EAI_JWKS_MAX_KEYS];
};

/* ------------------------------------------------------------ base64url */

static int b64u_val(unsigned char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '-')
        return 62;
    if (ch == '_')
        return 63;
    return -1;
}

/* Decode base64url without padding (RFC 7515 section 2) into a new buffer
 * (NUL-terminated, *outlen bytes); NULL on a bad character, a length of 1
 * mod 4, or non-zero trailing bits. */
static unsigned char *b64u_decode(const char *s, size_t n, size_t *outlen)
{
    if (n % 4 == 1)
        return NULL;
    unsigned char *out = malloc(n / 4 * 3 + 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64u_val((unsigned char)s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    if (bits && (acc & ((1u << bits) - 1))) { /* non-canonical: trailing bits set */
        free(out);
        return NULL;
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

static unsigned char *b64u_member(const json_t *o, const char *name, size_t *len)
{
    const char *s = json_string_value(json_object_get(o, name));
    return s ? b64u_decode(s, strlen(s), len) : NULL;
}

/* ------------------------------------------------------------ JWKS */

static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *b)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(b);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (!params || !ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pkey;
}

static EVP_PKEY *rsa_key(const json_t *o)
{
    size_t nl = 0, el = 0;
    unsigned char *n = b64u_member(o, "n", &nl), *e = b64u_member(o, "e", &el);
    EVP_PKEY *pkey = NULL;
    BIGNUM *bn = n ? BN_bin2bn(n, (int)nl, NULL) : NULL, *be = e ? BN_bin2bn(e, (int)el, NULL) : NULL;
    OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
    /* at least 2048 bits, at most 8192 (verification time is the bound) */
    if (bn && be && b && BN_num_bits(bn) >= 2048 && BN_num_bits(bn) <= 8192 && BN_num_bits(be) <= 64 &&
        OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_RSA_N, bn) && OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_RSA_E, be))
        pkey = from_params("RSA", b);
    OSSL_PARAM_BLD_free(b);
    BN_free(bn);
    BN_free(be);
    free(n);
    free(e);
    return pkey;
}

static EVP_PKEY *ec_key(const json_t *o)
{
    const char *crv = json_string_value(json_object_get(o, "crv"));
    if (!crv || strcmp(crv, "P-256") != 0)
        return NULL;
    size_t xl = 0, yl = 0;
    unsigned char *x = b64u_member(o, "x", &xl), *y = b64u_member(o, "y", &yl);
    EVP_PKEY *pkey = NULL;
    if (x && y && xl == 32 && yl == 32) {
        unsigned char pt[65];
        pt[0] = 0x04;
        memcpy(pt + 1, x, 32);
        memcpy(pt + 33, y, 32);
        OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
        if (b && OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
            OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof pt))
            pkey = from_params("EC", b);
        OSSL_PARAM_BLD_free(b);
    }
    free(x);
    free(y);
    if (pkey) { /* the point must be on the curve */
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
        int ok = ctx && EVP_PKEY_public_check(ctx) == 1;
        EVP_PKEY_CTX_free(ctx);
        if (!ok) {
            EVP_PKEY_free(pkey);
            pkey = NULL;
        }
    }
    return pkey;
}

static EVP_PKEY *okp_key(const json_t *o)
{
    const char *crv = json_string_value(json_object_get(o, "crv"));
    if (!crv || strcmp(crv, "Ed25519") != 0)
        return NULL;
    size_t xl = 0;
    unsigned char *x = b64u_member(o, "x", &xl);
    EVP_PKEY *pkey = x && xl == 32 ? EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, 32) : NULL;
    free(x);
    return pkey;
}

static unsigned alg_bit(const char *alg)
{
    if (!alg)
        return 0;
    if (!strcmp(alg, "RS256"))
        return EAI_JWT_RS256;
    if (!strcmp(alg, "ES256"))
        return EAI_JWT_ES256;
    if (!strcmp(alg, "EdDSA"))
        return EAI_JWT_EDDSA;
    return 0;
}

struct eai_jwks *eai_jwks_parse(const char *doc, size_t len, char *why, size_t whylen)
{
    if (len > EAI_JWKS_MAX_BYTES) {
        snprintf(why, whylen, "the key set is larger than %u bytes", EAI_JWKS_MAX_BYTES);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &je);
    json_t *keys = json_object_get(root, "keys");
    if (!json_is_array(keys)) {
        snprintf(why, whylen, "not a JSON Web Key Set (an object with a \"keys\" array)%s%s",
                 root ? "" : ": ", root ? "" : je.text);
        json_decref(root);
        return NULL;
    }
    struct eai_jwks *set = calloc(1, sizeof *set);
    if (!set) {
        json_decref(root);
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    size_t i;
    json_t *o;
    json_array_foreach(keys, i, o) {
        if (set->n >= EAI_JWKS_MAX_KEYS)
            break;
        const char *kty = json_string_value(json_object_get(o, "kty"));
        const char *use = json_string_value(json_object_get(o, "use"));
        const char *kid = json_string_value(json_object_get(o, "kid"));
        const char *alg = json_string_value(json_object_get(o, "alg"));
        if (!kty || (use && strcmp(use, "sig") != 0) || (kid && strlen(kid) >= sizeof set->k[0].kid))
            continue;
        unsigned bit = 0;
        EVP_PKEY *pkey = NULL;
        if (!strcmp(kty, "RSA")) {
            bit = EAI_JWT_RS256;
            pkey = rsa_key(o);
        } else if (!strcmp(kty, "EC")) {
            bit = EAI_JWT_ES256;
            pkey = ec_key(o);
        } else if (!strcmp(kty, "OKP")) {
            bit = EAI_JWT_EDDSA;
            pkey = okp_key(o);
        }
        if (pkey && alg && alg_bit(alg) != bit) { /* a key's declared alg must be the one its type serves */
            EVP_PKEY_free(pkey);
            pkey = NULL;
        }
        if (!pkey)
            continue;
        struct jwk *k = &set->k[set->n++];
        snprintf(k->kid, sizeof k->kid, "%s", kid ? kid : "");
        k->alg = bit;
        k->pkey = pkey;
    }
    json_decref(root);
    if (set->n == 0) {
        snprintf(why, whylen, "the key set holds no usable signing key (RSA >= 2048 bits, EC P-256, OKP Ed25519)");
        free(set);
        return NULL;
    }
    return set;
}

void eai_jwks_free(struct eai_jwks *k)
{
    if (!k)
        return;
    for (int i = 0; i < k->n; i++)
        EVP_PKEY_free(k->k[i].pkey);
    free(k);
}

int eai_jwks_count(const struct eai_jwks *k) { return k ? k->n : 0; }

/* ------------------------------------------------------------ verification */

int eai_jwt_shaped(const char *s)
{
    int dots = 0;
    size_t n = 0;
    for (; s[n]; n++) {
        if (s[n] == '.')
            dots++;
        else if (b64u_val((unsigned char)s[n]) < 0)
            return 0;
    }
    return dots == 2 && n >= 5;
}

static int verify_sig(const struct jwk *k, const unsigned char *msg, size_t mlen, const unsigned char *sig,
                      size_t slen)
{
    unsigned char *der = NULL;
    int ok = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        return 0;
    if (k->alg == EAI_JWT_ES256) {
        /* JWS carries R || S (32 bytes each, RFC 7518 section 3.4); OpenSSL wants DER */
        if (slen != 64)
            goto out;
        ECDSA_SIG *es = ECDSA_SIG_new();
        BIGNUM *r = BN_bin2bn(sig, 32, NULL), *s = BN_bin2bn(sig + 32, 32, NULL);
        if (!es || !r || !s || !ECDSA_SIG_set0(es, r, s)) {
            BN_free(r);
            BN_free(s);
            ECDSA_SIG_free(es);
            goto out;
        }
        int dl = i2d_ECDSA_SIG(es, &der);
        ECDSA_SIG_free(es);
        if (dl <= 0)
            goto out;
        ok = EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, k->pkey) == 1 &&
             EVP_DigestVerify(ctx, der, (size_t)dl, msg, mlen) == 1;
    } else if (k->alg == EAI_JWT_RS256) {
        ok = EVP_DigestVerifyInit(ctx, NULL, EVP_sha256(), NULL, k->pkey) == 1 &&
             EVP_DigestVerify(ctx, sig, slen, msg, mlen) == 1;
    } else if (k->alg == EAI_JWT_EDDSA) {
        ok = slen == 64 && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
             EVP_DigestVerify(ctx, sig, slen, msg, mlen) == 1;
    }
out:
    OPENSSL_free(der);
    EVP_MD_CTX_free(ctx);
    return ok;
}

/* A NumericDate claim (RFC 7519 section 2): 1 with *v, 0 absent, -1 not a number. */
static int numeric_date(const json_t *payload, const char *name, int64_t *v)
{
    const json_t *x = json_object_get(payload, name);
    if (!x)
        return 0;
    if (json_is_integer(x)) {
        *v = (int64_t)json_integer_value(x);
        return 1;
    }
    if (json_is_real(x) && json_real_value(x) > -9e15 && json_real_value(x) < 9e15) {
        *v = (int64_t)json_real_value(x);
        return 1;
    }
    return -1;
}

static int aud_ok(const json_t *aud, const char *const *want)
{
    for (const char *const *w = want; w && *w; w++) {
        if (json_is_string(aud) && !strcmp(json_string_value(aud), *w))
            return 1;
        size_t i;
        json_t *a;
        if (json_is_array(aud))
            json_array_foreach(aud, i, a) if (json_is_string(a) && !strcmp(json_string_value(a), *w)) return 1;
    }
    return 0;
}

/* A string claim into dst (1..dstlen-1 bytes, no control characters):
 * 1 copied, 0 absent, -1 present and unusable. */
static int str_claim(const json_t *payload, const char *name, char *dst, size_t dstlen)
{
    if (!name)
        return 0;
    const json_t *x = json_object_get(payload, name);
    if (!x)
        return 0;
    const char *s = json_string_value(x);
    size_t n = s ? strlen(s) : 0;
    if (!s || n == 0 || n >= dstlen)
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return -1;
    memcpy(dst, s, n + 1);
    return 1;
}

#define REFUSE(why)                                                                                                \
    do {                                                                                                           \
        *reason = (why);                                                                                           \
        goto out;                                                                                                  \
    } while (0)

int eai_jwt_verify(const struct eai_jwks *keys, const struct eai_jwt_policy *p, const char *token, size_t len,
                   int64_t now_s, struct eai_jwt_claims *c, const char **reason)
{
    int rc = -1;
    unsigned char *hdr = NULL, *body = NULL, *sig = NULL;
    json_t *h = NULL, *pl = NULL;
    memset(c, 0, sizeof *c);
    *reason = "malformed";
    if (len > p->max_bytes)
        REFUSE("oversized");
    const char *d1 = memchr(token, '.', len);
    const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token)))
        REFUSE("malformed");
    size_t hl = 0, bl = 0, sl = 0;
    hdr = b64u_decode(token, (size_t)(d1 - token), &hl);
    body = b64u_decode(d1 + 1, (size_t)(d2 - d1 - 1), &bl);
    sig = b64u_decode(d2 + 1, len - (size_t)(d2 + 1 - token), &sl);
    if (!hdr || !body || !sig || hl == 0 || bl == 0)
        REFUSE("malformed");
    json_error_t je;
    h = json_loadb((const char *)hdr, hl, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(h))
        REFUSE("malformed");
    const char *alg = json_string_value(json_object_get(h, "alg"));
    const char *typ = json_string_value(json_object_get(h, "typ"));
    const char *kid = json_string_value(json_object_get(h, "kid"));
    unsigned bit = alg_bit(alg);
    if (!bit || !(bit & p->algs))
        REFUSE("unsupported alg"); /* none, HS256, PS256, ... and algs the policy left out */
    if (json_object_get(h, "crit"))
        REFUSE("unsupported alg"); /* no extension is understood here (RFC 7515 section 4.1.11) */
    if (typ && strcasecmp(typ, "JWT") != 0 && strcasecmp(typ, "at+jwt") != 0)
        REFUSE("malformed");
    if (json_object_get(h, "kid") && (!kid || strlen(kid) > 64))
        REFUSE("malformed");
    /* the key: by kid; without a kid, the set's only key of this alg */
    const struct jwk *k = NULL;
    int same_alg = 0;
    for (int i = 0; keys && i < keys->n; i++) {
        if (kid ? strcmp(keys->k[i].kid, kid) == 0 : keys->k[i].alg == bit) {
            if (kid) {
                k = &keys->k[i];
                break;
            }
            same_alg++;
            k = &keys->k[i];
        }
    }
    if (!k || (!kid && same_alg != 1))
        REFUSE("unknown kid");
    if (k->alg != bit)
        REFUSE("key mismatch"); /* e.g. an RSA key named by a token that says ES256 */
    if (!verify_sig(k, (const unsigned char *)token, (size_t)(d2 - token), sig, sl))
        REFUSE("bad signature");
    /* signed by our gateway: now its claims */
    pl = json_loadb((const char *)body, bl, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(pl))
        REFUSE("malformed");
    int64_t exp = 0, nbf = 0, iat = 0;
    int has_exp = numeric_date(pl, "exp", &exp), has_nbf = numeric_date(pl, "nbf", &nbf),
        has_iat = numeric_date(pl, "iat", &iat);
    if (has_exp < 0 || has_nbf < 0 || has_iat < 0)
        REFUSE("bad claim");
    if (has_exp == 0 || now_s > exp + p->skew_s)
        REFUSE("expired"); /* a token without exp never expires: refused as if expired */
    if ((has_nbf && now_s + p->skew_s < nbf) || (has_iat && now_s + p->skew_s < iat))
        REFUSE("not yet valid");
    const char *iss = json_string_value(json_object_get(pl, "iss"));
    if (!p->issuer || !iss || strcmp(iss, p->issuer) != 0)
        REFUSE("wrong issuer");
    if (!aud_ok(json_object_get(pl, "aud"), p->audiences))
        REFUSE("wrong audience");
    int t = str_claim(pl, p->tenant_claim, c->tenant, sizeof c->tenant);
    if (t == 0)
        REFUSE("no tenant claim");
    if (t < 0 || str_claim(pl, p->project_claim, c->project, sizeof c->project) < 0 ||
        str_claim(pl, p->agent_claim, c->agent, sizeof c->agent) < 0 ||
        str_claim(pl, "sub", c->subject, sizeof c->subject) < 0)
        REFUSE("bad claim");
    snprintf(c->kid, sizeof c->kid, "%s", kid ? kid : "");
    c->exp = exp;
    *reason = NULL;
    rc = 0;
out:
    json_decref(h);
    json_decref(pl);
    free(hdr);
    free(body);
    free(sig);
    if (rc < 0)
        memset(c, 0, sizeof *c);
    return rc;
}
