/*
 * Gateway tokens (issue 35 item 4; docs/auth.md "Gateway tokens"): JSON Web
 * Tokens signed by the API gateway, checked against a JSON Web Key Set.
 * Pure functions, no I/O, no globals: callable on any thread (workers do)
 * and by the fuzz target.
 *
 * Accepted: compact JWS with alg RS256 (RSA >= 2048 bits), ES256 (P-256)
 * or EdDSA (Ed25519), among those the policy allows.  Never "none", never
 * an HMAC alg (a public key used as an HMAC secret is the classic alg
 * confusion), never a key whose kty, crv, alg or use disagrees with the
 * token's alg, never a key named by the token itself (jku, jwk, x5u, x5c
 * are ignored), never a header with "crit".
 */
#ifndef EAI_CORE_HTTP_JWT_H
#define EAI_CORE_HTTP_JWT_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h" /* EAI_JWT_RS256, EAI_JWT_ES256, EAI_JWT_EDDSA */

#define EAI_JWKS_MAX_KEYS 64
#define EAI_JWKS_MAX_BYTES (256u << 10)

struct eai_jwks; /* a parsed key set (immutable once made) */

/* A key set from a JWKS document ({"keys": [...]}): keys of kty RSA, EC
 * (crv P-256) and OKP (crv Ed25519); others, and keys with use other than
 * "sig", are skipped.  NULL with why filled when the document is not a key
 * set or holds no usable key. */
struct eai_jwks *eai_jwks_parse(const char *doc, size_t len, char *why, size_t whylen);
void eai_jwks_free(struct eai_jwks *k);
int eai_jwks_count(const struct eai_jwks *k);

struct eai_jwt_policy {
    const char *issuer;             /* iss must equal it (required) */
    const char *const *audiences;   /* aud (string or array) must hold one of them (required) */
    unsigned algs;                  /* EAI_JWT_* allowed */
    int skew_s;                     /* clock skew allowed on exp / nbf / iat */
    size_t max_bytes;               /* longer tokens are refused unread */
    const char *tenant_claim;       /* required */
    const char *project_claim;      /* optional: NULL */
    const char *agent_claim;        /* optional: NULL */
};

struct eai_jwt_claims {
    char tenant[64];
    char project[129];
    char agent[129];
    char subject[129];
    char kid[65];
    int64_t exp;                    /* epoch seconds */
};

/* 0: the token is signed by a key of keys, valid at now_s and for the
 * policy; *c filled.  -1: refused, *reason one of the short static strings
 * of docs/auth.md ("malformed", "oversized", "unsupported alg", "unknown
 * kid", "key mismatch", "bad signature", "expired", "not yet valid",
 * "wrong issuer", "wrong audience", "no tenant claim", "bad claim"). */
int eai_jwt_verify(const struct eai_jwks *keys, const struct eai_jwt_policy *p, const char *token, size_t len,
                   int64_t now_s, struct eai_jwt_claims *c, const char **reason);

/* 1 when s looks like a compact JWS (three base64url parts) rather than an
 * API key: the bearer path picks the check by it. */
int eai_jwt_shaped(const char *s);

#endif
