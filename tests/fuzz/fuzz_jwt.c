/* Gateway tokens (core/http/jwt.h): a token checked against a fixed key
 * set (an Ed25519 key, RFC 8032's first test vector, and an EC P-256 key,
 * the curve's generator), and the same bytes read as a key set.
 * Invariants: no crash, leak or undefined behaviour on any input; a token
 * accepted has a tenant and an expiry, a refusal a reason and no claims;
 * the answer is the same twice; a key set parsed has 1 to 64 keys. */
#include "http/jwt.h"
#include "fuzz_util.h"

static const char JWKS[] =
    "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"d\",\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"},"
    "{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"e\",\"x\":\"axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY\","
    "\"y\":\"T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU\"}]}";
static struct eai_jwks *keys;
static const char *const AUDS[] = {"eai", NULL};
static const struct eai_jwt_policy POL = {
    .issuer = "iss", .audiences = AUDS, .algs = EAI_JWT_RS256 | EAI_JWT_ES256 | EAI_JWT_EDDSA, .skew_s = 60,
    .max_bytes = 8192, .tenant_claim = "tenant_id", .project_claim = "project_id", .agent_claim = "agent_id",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char why[256];
    keys = eai_jwks_parse(JWKS, sizeof JWKS - 1, why, sizeof why);
    if (!keys) {
        fprintf(stderr, "fuzz_jwt: the fixed key set: %s\n", why);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fz_cstr(data, size);
    if (!s)
        return 0;
    size_t len = strlen(s);
    struct eai_jwt_claims c, c2;
    const char *why = NULL, *why2 = NULL;
    int rc = eai_jwt_verify(keys, &POL, s, len, 1800000000, &c, &why);
    int rc2 = eai_jwt_verify(keys, &POL, s, len, 1800000000, &c2, &why2);
    FZ_ASSERT(rc == rc2);
    if (rc == 0) {
        FZ_ASSERT(why == NULL && c.tenant[0] && c.exp > 0);
        FZ_ASSERT(eai_jwt_shaped(s));
    } else {
        FZ_ASSERT(why != NULL && why2 != NULL && strcmp(why, why2) == 0 && c.tenant[0] == '\0');
    }
    char w[256];
    struct eai_jwks *k = eai_jwks_parse((const char *)data, size, w, sizeof w);
    FZ_ASSERT(!k || (eai_jwks_count(k) >= 1 && eai_jwks_count(k) <= EAI_JWKS_MAX_KEYS));
    eai_jwks_free(k);
    free(s);
    return 0;
}
