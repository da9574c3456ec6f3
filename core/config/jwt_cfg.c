/* auth.jwt and auth.api_keys: gateway tokens next to (or instead of) API
 * keys (docs/auth.md "Gateway tokens"; the check is http/jwt.c, the
 * request side http/jwt_auth.c). */
#include <stdlib.h>
#include <string.h>

#include "config/cfg_read.h"
#include "config/config.h"
#include "base/errors.h"

void eai_cfg_jwt_free(struct eai_jwt_cfg *j)
{
    if (!j)
        return;
    free(j->jwks_file);
    free(j->jwks_url);
    free(j->issuer);
    for (int i = 0; i < j->n_audiences; i++)
        free(j->audiences[i]);
    free(j->tenant_claim);
    free(j->project_claim);
    free(j->agent_claim);
    free(j);
}

static int audiences(struct eai_jwt_cfg *j, const char *file, const char *p, const json_t *v,
                     struct eai_error **err)
{
    const json_t *a = json_object_get(v, "audience");
    if (json_is_string(a)) {
        j->audiences[0] = strdup(json_string_value(a));
        j->n_audiences = j->audiences[0] ? 1 : 0;
    } else if (json_is_array(a) && json_array_size(a) > 0 && json_array_size(a) <= EAI_JWT_MAX_AUDIENCES) {
        size_t i;
        json_t *x;
        json_array_foreach(a, i, x) {
            if (!json_is_string(x) || !*json_string_value(x))
                return eai_cfg_fail(err, file, p, "audience", "a list of non-empty strings");
            j->audiences[j->n_audiences] = strdup(json_string_value(x));
            if (!j->audiences[j->n_audiences])
                return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
            j->n_audiences++;
        }
    } else {
        return eai_cfg_fail(err, file, p, "audience", "required: a string or a list of 1 to %d strings",
                            EAI_JWT_MAX_AUDIENCES);
    }
    return j->n_audiences ? 0 : eai_cfg_fail(err, file, p, "audience", "must not be empty");
}

static int algorithms(struct eai_jwt_cfg *j, const char *file, const char *p, const json_t *v,
                      struct eai_error **err)
{
    const json_t *a = json_object_get(v, "algorithms");
    j->algs = EAI_JWT_RS256 | EAI_JWT_ES256 | EAI_JWT_EDDSA;
    if (!a)
        return 0;
    if (!json_is_array(a) || json_array_size(a) == 0)
        return eai_cfg_fail(err, file, p, "algorithms", "a non-empty list of RS256, ES256, EdDSA");
    j->algs = 0;
    size_t i;
    json_t *x;
    json_array_foreach(a, i, x) {
        const char *s = json_string_value(x);
        if (s && !strcmp(s, "RS256"))
            j->algs |= EAI_JWT_RS256;
        else if (s && !strcmp(s, "ES256"))
            j->algs |= EAI_JWT_ES256;
        else if (s && !strcmp(s, "EdDSA"))
            j->algs |= EAI_JWT_EDDSA;
        else
            return eai_cfg_fail(err, file, p, "algorithms",
                                "'%s' is not accepted: RS256, ES256 or EdDSA (never none, never an HMAC alg)",
                                s ? s : "?");
    }
    return 0;
}

int eai_cfg_auth_jwt(struct eai_config *c, const char *file, const char *path, const json_t *v,
                     struct eai_error **err)
{
    static const char *const k[] = {"jwks_file", "jwks_url", "refresh_s", "issuer", "audience", "algorithms",
                                    "clock_skew_s", "max_token_bytes", "tenant_claim", "project_claim",
                                    "agent_claim", "create_tenants", NULL};
    char p[128];
    if (!v || json_is_null(v))
        return 0;
    if (eai_cfg_need_object(file, path, "jwt", v, err) < 0)
        return -1;
    eai_cfg_child_path(p, sizeof p, path, "jwt");
    struct eai_jwt_cfg *j = calloc(1, sizeof *j);
    if (!j)
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    eai_cfg_jwt_free(c->jwt);
    c->jwt = j;
    j->refresh_s = 300;
    j->skew_s = 60;
    j->max_bytes = 8192;
    const json_t *ct = json_object_get(v, "create_tenants");
    if (eai_cfg_check_keys(file, p, v, k, err) < 0 || eai_cfg_get_string(file, p, v, "jwks_file", &j->jwks_file, err) < 0 ||
        eai_cfg_get_string(file, p, v, "jwks_url", &j->jwks_url, err) < 0 ||
        eai_cfg_get_int32(file, p, v, "refresh_s", 10, 86400, &j->refresh_s, err) < 0 ||
        eai_cfg_get_string(file, p, v, "issuer", &j->issuer, err) < 0 ||
        eai_cfg_get_int32(file, p, v, "clock_skew_s", 0, 600, &j->skew_s, err) < 0 ||
        eai_cfg_get_int(file, p, v, "max_token_bytes", 256, 65536, &j->max_bytes, err) < 0 ||
        eai_cfg_get_string(file, p, v, "tenant_claim", &j->tenant_claim, err) < 0 ||
        eai_cfg_get_string(file, p, v, "project_claim", &j->project_claim, err) < 0 ||
        eai_cfg_get_string(file, p, v, "agent_claim", &j->agent_claim, err) < 0 ||
        audiences(j, file, p, v, err) < 0 || algorithms(j, file, p, v, err) < 0)
        return -1;
    if (ct && !json_is_boolean(ct))
        return eai_cfg_fail(err, file, p, "create_tenants", "true or false");
    j->create_tenants = json_is_true(ct);
    if (!j->jwks_file == !j->jwks_url)
        return eai_cfg_fail(err, file, p, j->jwks_file ? "jwks_url" : "jwks_file",
                            "exactly one of jwks_file and jwks_url");
    if (j->jwks_url && strncmp(j->jwks_url, "https://", 8) != 0 && strncmp(j->jwks_url, "http://127.", 11) != 0 &&
        strncmp(j->jwks_url, "http://localhost", 16) != 0 && strncmp(j->jwks_url, "http://[::1]", 12) != 0)
        return eai_cfg_fail(err, file, p, "jwks_url", "https:// (plain http only to loopback)");
    if (!j->issuer || !*j->issuer)
        return eai_cfg_fail(err, file, p, "issuer", "required");
    if ((!j->tenant_claim && eai_cfg_set_str(&j->tenant_claim, "tenant_id") < 0) ||
        (!j->project_claim && eai_cfg_set_str(&j->project_claim, "project_id") < 0) ||
        (!j->agent_claim && eai_cfg_set_str(&j->agent_claim, "agent_id") < 0))
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    return 0;
}
