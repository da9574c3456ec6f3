/* Gateway tokens (core/http/jwt.c): keys made here with OpenSSL, tokens
 * signed here, every refusal of docs/auth.md "Gateway tokens". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rsa.h>

#include "http/jwt.h"
#include "unit_main.h"

static EVP_PKEY *rsa, *ec, *ed, *rsa_small;
static char jwks[8192];
static const int64_t NOW = 1800000000;
static const char *const AUDS[] = {"eai-sandbox", "other", NULL};
static const struct eai_jwt_policy POL = {
    .issuer = "https://gw.example", .audiences = AUDS, .algs = EAI_JWT_RS256 | EAI_JWT_ES256 | EAI_JWT_EDDSA,
    .skew_s = 60, .max_bytes = 8192, .tenant_claim = "tenant_id", .project_claim = "project_id",
    .agent_claim = "agent_id",
};

static void b64u(const unsigned char *d, size_t n, char *out)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = t[v >> 6 & 63];
        if (i + 2 < n)
            out[o++] = t[v & 63];
    }
    out[o] = '\0';
}

static void bn_b64u(EVP_PKEY *k, const char *name, char *out, int pad)
{
    BIGNUM *bn = NULL;
    EVP_PKEY_get_bn_param(k, name, &bn);
    unsigned char buf[1024];
    int n = pad ? BN_bn2binpad(bn, buf, pad) : BN_bn2bin(bn, buf);
    b64u(buf, (size_t)n, out);
    BN_free(bn);
}

static void rsa_jwk(EVP_PKEY *k, const char *kid, char *out, size_t len)
{
    char n[800], e[16];
    bn_b64u(k, OSSL_PKEY_PARAM_RSA_N, n, 0);
    bn_b64u(k, OSSL_PKEY_PARAM_RSA_E, e, 0);
    snprintf(out, len, "{\"kty\":\"RSA\",\"kid\":\"%s\",\"use\":\"sig\",\"n\":\"%s\",\"e\":\"%s\"}", kid, n, e);
}

static void ec_jwk(EVP_PKEY *k, const char *kid, const char *extra, char *out, size_t len)
{
    char x[64], y[64];
    bn_b64u(k, OSSL_PKEY_PARAM_EC_PUB_X, x, 32);
    bn_b64u(k, OSSL_PKEY_PARAM_EC_PUB_Y, y, 32);
    snprintf(out, len, "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"%s\",\"x\":\"%s\",\"y\":\"%s\"%s}", kid, x, y,
             extra);
}

static void ed_jwk(EVP_PKEY *k, const char *kid, char *out, size_t len)
{
    unsigned char raw[32];
    size_t rl = sizeof raw;
    EVP_PKEY_get_raw_public_key(k, raw, &rl);
    char x[64];
    b64u(raw, rl, x);
    snprintf(out, len, "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"%s\",\"x\":\"%s\"}", kid, x);
}

/* header.payload.signature with key k (alg from the header; NULL k: the
 * signature given as sig_text). */
static char *sign(const char *header, const char *payload, EVP_PKEY *k)
{
    static char tok[12000];
    char h[2048], p[4096];
    b64u((const unsigned char *)header, strlen(header), h);
    b64u((const unsigned char *)payload, strlen(payload), p);
    char input[7000];
    snprintf(input, sizeof input, "%s.%s", h, p);
    unsigned char sig[1024];
    size_t sl = sizeof sig;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int is_ed = EVP_PKEY_get_id(k) == EVP_PKEY_ED25519;
    CU_ASSERT_FATAL(EVP_DigestSignInit(ctx, NULL, is_ed ? NULL : EVP_sha256(), NULL, k) == 1);
    CU_ASSERT_FATAL(EVP_DigestSign(ctx, sig, &sl, (unsigned char *)input, strlen(input)) == 1);
    EVP_MD_CTX_free(ctx);
    if (EVP_PKEY_get_id(k) == EVP_PKEY_EC) { /* DER -> R || S */
        const unsigned char *pp = sig;
        ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &pp, (long)sl);
        unsigned char rs[64];
        BN_bn2binpad(ECDSA_SIG_get0_r(es), rs, 32);
        BN_bn2binpad(ECDSA_SIG_get0_s(es), rs + 32, 32);
        ECDSA_SIG_free(es);
        memcpy(sig, rs, 64);
        sl = 64;
    }
    char s[2048];
    b64u(sig, sl, s);
    snprintf(tok, sizeof tok, "%s.%s", input, s);
    return tok;
}

static char *hs256(const char *header, const char *payload, const unsigned char *secret, size_t slen)
{
    static char tok[12000];
    char h[2048], p[4096], input[7000], s[128];
    b64u((const unsigned char *)header, strlen(header), h);
    b64u((const unsigned char *)payload, strlen(payload), p);
    snprintf(input, sizeof input, "%s.%s", h, p);
    unsigned char mac[32];
    unsigned int ml = sizeof mac;
    HMAC(EVP_sha256(), secret, (int)slen, (unsigned char *)input, strlen(input), mac, &ml);
    b64u(mac, ml, s);
    snprintf(tok, sizeof tok, "%s.%s", input, s);
    return tok;
}

static char payload_buf[2048];
static const char *claims(const char *extra)
{
    snprintf(payload_buf, sizeof payload_buf,
             "{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"sub\":\"agent-7\",\"exp\":%lld,"
             "\"iat\":%lld,\"tenant_id\":\"acme\",\"project_id\":\"p1\",\"agent_id\":\"a1\"%s}",
             (long long)(NOW + 300), (long long)NOW, extra ? extra : "");
    return payload_buf;
}

static struct eai_jwks *keys;

static int setup(void)
{
    rsa = EVP_RSA_gen(2048);
    rsa_small = EVP_RSA_gen(1024);
    ec = EVP_EC_gen("P-256");
    ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    if (!rsa || !ec || !ed || !rsa_small)
        return -1;
    char a[1200], b[300], c[300], d[1200];
    rsa_jwk(rsa, "r1", a, sizeof a);
    ec_jwk(ec, "e1", ",\"alg\":\"ES256\"", b, sizeof b);
    ed_jwk(ed, "d1", c, sizeof c);
    rsa_jwk(rsa_small, "small", d, sizeof d);
    snprintf(jwks, sizeof jwks, "{\"keys\":[%s,%s,%s,%s,{\"kty\":\"oct\",\"kid\":\"h\",\"k\":\"c2VjcmV0\"}]}", a, b, c,
             d);
    char why[256];
    keys = eai_jwks_parse(jwks, strlen(jwks), why, sizeof why);
    return keys ? 0 : -1;
}

static int teardown(void)
{
    eai_jwks_free(keys);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(rsa_small);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(ed);
    return 0;
}

static const char *verify(const char *tok, struct eai_jwt_claims *c)
{
    const char *reason = NULL;
    int rc = eai_jwt_verify(keys, &POL, tok, strlen(tok), NOW, c, &reason);
    CU_ASSERT((rc == 0) == (reason == NULL));
    return rc == 0 ? "ok" : reason;
}

static void test_key_set(void)
{
    /* 1024-bit RSA and the symmetric key are left out: 3 usable keys */
    CU_ASSERT_EQUAL(eai_jwks_count(keys), 3);
    char why[256];
    CU_ASSERT_PTR_NULL(eai_jwks_parse("{}", 2, why, sizeof why));
    CU_ASSERT_PTR_NULL(eai_jwks_parse("[1]", 3, why, sizeof why));
    CU_ASSERT_PTR_NULL(eai_jwks_parse("{\"keys\":[{\"kty\":\"oct\",\"k\":\"AA\"}]}", 34, why, sizeof why));
    /* an EC point that is not on the curve */
    const char *off = "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\","
                      "\"y\":\"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}]}";
    CU_ASSERT_PTR_NULL(eai_jwks_parse(off, strlen(off), why, sizeof why));
    /* an EC key that says it is for RS256 */
    char b[400], doc[500];
    ec_jwk(ec, "e2", ",\"alg\":\"RS256\"", b, sizeof b);
    snprintf(doc, sizeof doc, "{\"keys\":[%s]}", b);
    CU_ASSERT_PTR_NULL(eai_jwks_parse(doc, strlen(doc), why, sizeof why));
}

static void test_valid_each_alg(void)
{
    struct eai_jwt_claims c;
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"RS256\",\"kid\":\"r1\",\"typ\":\"JWT\"}", claims(NULL), rsa), &c), "ok");
    CU_ASSERT_STRING_EQUAL(c.tenant, "acme");
    CU_ASSERT_STRING_EQUAL(c.project, "p1");
    CU_ASSERT_STRING_EQUAL(c.agent, "a1");
    CU_ASSERT_STRING_EQUAL(c.subject, "agent-7");
    CU_ASSERT_EQUAL(c.exp, NOW + 300);
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"ES256\",\"kid\":\"e1\"}", claims(NULL), ec), &c), "ok");
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"EdDSA\",\"kid\":\"d1\"}", claims(NULL), ed), &c), "ok");
    /* no kid: the set's only key of that alg */
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"EdDSA\"}", claims(NULL), ed), &c), "ok");
    /* aud as a list holding one of ours */
    char p[2048];
    snprintf(p, sizeof p, "{\"iss\":\"https://gw.example\",\"aud\":[\"x\",\"other\"],\"exp\":%lld,\"tenant_id\":\"t\"}",
             (long long)(NOW + 10));
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"ES256\",\"kid\":\"e1\"}", p, ec), &c), "ok");
    CU_ASSERT_STRING_EQUAL(c.project, "");
}

static void test_alg_refusals(void)
{
    struct eai_jwt_claims c;
    /* alg none, with and without a signature */
    char h[200], p[2048], tok[4000];
    b64u((const unsigned char *)"{\"alg\":\"none\"}", 14, h);
    b64u((const unsigned char *)claims(NULL), strlen(claims(NULL)), p);
    snprintf(tok, sizeof tok, "%s.%s.", h, p);
    CU_ASSERT_STRING_EQUAL(verify(tok, &c), "unsupported alg");
    /* HS256 keyed with the RSA key's own JWK text: the alg confusion */
    char jwk[1200];
    rsa_jwk(rsa, "r1", jwk, sizeof jwk);
    CU_ASSERT_STRING_EQUAL(verify(hs256("{\"alg\":\"HS256\",\"kid\":\"r1\"}", claims(NULL), (unsigned char *)jwk,
                                        strlen(jwk)), &c), "unsupported alg");
    /* a token that says ES256 naming the RSA key */
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"ES256\",\"kid\":\"r1\"}", claims(NULL), ec), &c), "key mismatch");
    /* an alg the policy leaves out */
    struct eai_jwt_policy only = POL;
    only.algs = EAI_JWT_EDDSA;
    const char *reason = NULL;
    const char *t = sign("{\"alg\":\"RS256\",\"kid\":\"r1\"}", claims(NULL), rsa);
    CU_ASSERT_EQUAL(eai_jwt_verify(keys, &only, t, strlen(t), NOW, &c, &reason), -1);
    CU_ASSERT_STRING_EQUAL(reason, "unsupported alg");
    /* crit, PS256, an unknown kid, the small RSA key (not in the set) */
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"crit\":[\"x\"],\"x\":1}", claims(NULL), ed), &c),
                           "unsupported alg");
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"PS256\",\"kid\":\"r1\"}", claims(NULL), rsa), &c), "unsupported alg");
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"EdDSA\",\"kid\":\"nope\"}", claims(NULL), ed), &c), "unknown kid");
    CU_ASSERT_STRING_EQUAL(verify(sign("{\"alg\":\"RS256\",\"kid\":\"small\"}", claims(NULL), rsa_small), &c),
                           "unknown kid");
    /* a key named by the token itself is never used */
    char ed2jwk[300];
    EVP_PKEY *ed2 = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    ed_jwk(ed2, "d1", ed2jwk, sizeof ed2jwk);
    char hdr[600];
    snprintf(hdr, sizeof hdr, "{\"alg\":\"EdDSA\",\"kid\":\"d1\",\"jwk\":%s,\"jku\":\"https://evil/jwks\"}", ed2jwk);
    CU_ASSERT_STRING_EQUAL(verify(sign(hdr, claims(NULL), ed2), &c), "bad signature");
    EVP_PKEY_free(ed2);
}

static void test_signature_and_shape(void)
{
    struct eai_jwt_claims c;
    char tok[12000];
    snprintf(tok, sizeof tok, "%s", sign("{\"alg\":\"ES256\",\"kid\":\"e1\"}", claims(NULL), ec));
    char *last = strrchr(tok, '.') + 5;
    *last = *last == 'A' ? 'B' : 'A';
    CU_ASSERT_STRING_EQUAL(verify(tok, &c), "bad signature");
    /* the payload changed after signing */
    snprintf(tok, sizeof tok, "%s", sign("{\"alg\":\"EdDSA\",\"kid\":\"d1\"}", claims(NULL), ed));
    char other[12000];
    snprintf(other, sizeof other, "%s", sign("{\"alg\":\"EdDSA\",\"kid\":\"d1\"}", claims(",\"admin\":true"), ed));
    char *d1 = strchr(tok, '.'), *d2 = strrchr(tok, '.'), *o1 = strchr(other, '.'), *o2 = strrchr(other, '.');
    char mixed[24000];
    snprintf(mixed, sizeof mixed, "%.*s%.*s%s", (int)(d1 - tok), tok, (int)(o2 - o1), o1, d2);
    CU_ASSERT_STRING_EQUAL(verify(mixed, &c), "bad signature");
    CU_ASSERT_STRING_EQUAL(verify("a.b", &c), "malformed");
    CU_ASSERT_STRING_EQUAL(verify("a.b.c.d", &c), "malformed");
    CU_ASSERT_STRING_EQUAL(verify("e30.e30.!!", &c), "malformed");
    CU_ASSERT_STRING_EQUAL(verify("W10.e30.AA", &c), "malformed"); /* header [] */
    CU_ASSERT(eai_jwt_shaped("eyJh.eyJi.c2ln"));
    CU_ASSERT(!eai_jwt_shaped("eai_0123456789abcdef_0123"));
    CU_ASSERT(!eai_jwt_shaped("a.b.c.d"));
    /* oversized: refused unread */
    char *big = malloc(9000);
    memset(big, 'A', 8999);
    big[8999] = '\0';
    big[10] = big[20] = '.';
    CU_ASSERT_STRING_EQUAL(verify(big, &c), "oversized");
    free(big);
}

static void test_claims(void)
{
    struct eai_jwt_claims c;
    char p[2048];
    const char *h = "{\"alg\":\"EdDSA\",\"kid\":\"d1\"}";
#define TOK(...) (snprintf(p, sizeof p, __VA_ARGS__), sign(h, p, ed))
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"exp\":%lld,"
                                      "\"tenant_id\":\"t\"}", (long long)(NOW - 61)), &c), "expired");
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"exp\":%lld,"
                                      "\"tenant_id\":\"t\"}", (long long)(NOW - 59)), &c), "ok"); /* within the skew */
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"tenant_id\":\"t\"}"), &c),
                           "expired"); /* no exp */
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"exp\":%lld,\"nbf\":%lld,"
                                      "\"tenant_id\":\"t\"}", (long long)(NOW + 900), (long long)(NOW + 120)), &c),
                           "not yet valid");
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"exp\":\"soon\","
                                      "\"tenant_id\":\"t\"}"), &c), "bad claim");
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://evil\",\"aud\":\"eai-sandbox\",\"exp\":%lld,"
                                      "\"tenant_id\":\"t\"}", (long long)(NOW + 9)), &c), "wrong issuer");
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"aud\":\"eai-sandbox\",\"exp\":%lld,\"tenant_id\":\"t\"}", (long long)(NOW + 9)), &c),
                           "wrong issuer");
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"someone-else\",\"exp\":%lld,"
                                      "\"tenant_id\":\"t\"}", (long long)(NOW + 9)), &c), "wrong audience");
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"exp\":%lld}",
                                      (long long)(NOW + 9)), &c), "no tenant claim");
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"exp\":%lld,"
                                      "\"tenant_id\":42}", (long long)(NOW + 9)), &c), "bad claim");
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"exp\":%lld,"
                                      "\"tenant_id\":\"t\",\"project_id\":\"a\\nb\"}", (long long)(NOW + 9)), &c),
                           "bad claim");
    /* a duplicate member is not a token */
    CU_ASSERT_STRING_EQUAL(verify(TOK("{\"iss\":\"https://gw.example\",\"aud\":\"eai-sandbox\",\"exp\":%lld,"
                                      "\"tenant_id\":\"t\",\"tenant_id\":\"u\"}", (long long)(NOW + 9)), &c),
                           "malformed");
#undef TOK
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("jwt", setup, teardown);
    return s && CU_add_test(s, "key set", test_key_set) && CU_add_test(s, "valid, each alg", test_valid_each_alg) &&
                   CU_add_test(s, "alg refusals", test_alg_refusals) &&
                   CU_add_test(s, "signature and shape", test_signature_and_shape) &&
                   CU_add_test(s, "claims", test_claims)
               ? 0 : -1;
}

EAI_UNIT_MAIN(reg)
