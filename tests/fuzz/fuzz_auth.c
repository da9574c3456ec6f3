/* Authorization header -> eai_auth_parse_bearer (core/http/auth.h).
 * Invariants: an accepted value yields a 16-hex key id and a 64-hex secret
 * that occur in the header as "eai_<id>_<secret>" after a case-insensitive
 * "Bearer" and blanks; rebuilding the canonical header parses the same. */
#include <strings.h>

#include "http/auth.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *h = fz_cstr(data, size);
    if (!h)
        return 0;
    char id[EAI_KEY_ID_LEN + 1], sec[EAI_KEY_SECRET_LEN + 1];
    if (eai_auth_parse_bearer(h, id, sec) == 0) {
        FZ_ASSERT(fz_lower_hex(id, EAI_KEY_ID_LEN));
        FZ_ASSERT(fz_lower_hex(sec, EAI_KEY_SECRET_LEN));
        char key[EAI_KEY_LEN + 1];
        snprintf(key, sizeof(key), "eai_%s_%s", id, sec);
        FZ_ASSERT(strstr(h, key) != NULL);
        FZ_ASSERT(strcasestr(h, "bearer") != NULL);
        char canon[EAI_KEY_LEN + 16], id2[EAI_KEY_ID_LEN + 1], sec2[EAI_KEY_SECRET_LEN + 1];
        snprintf(canon, sizeof(canon), "Bearer %s", key);
        FZ_ASSERT(eai_auth_parse_bearer(canon, id2, sec2) == 0);
        FZ_ASSERT(strcmp(id, id2) == 0 && strcmp(sec, sec2) == 0);
    }
    free(h);
    return 0;
}
