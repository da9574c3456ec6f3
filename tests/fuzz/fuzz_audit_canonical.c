/* Audit canonical JSON (core/obs/audit.h) of any parsed JSON object.
 * Invariants: canonical(x) parses back, to x without its top-level "hash";
 * canonical(parse(canonical(x))) == canonical(x); a real number anywhere
 * or a string with NUL is refused (NULL); a sealed event checks, and stops checking when changed. */
#include "obs/audit.h"
#include "fuzz_util.h"
#include "base/util.h"

/* A real number or a string (key or value) that is not UTF-8 without NUL:
 * the canonical form refuses those (audit events never hold them). */
static int unsealable(const json_t *v)
{
    const char *k;
    json_t *x;
    size_t i;
    switch (json_typeof(v)) {
    case JSON_REAL:
        return 1;
    case JSON_STRING:
        return !eai_utf8_valid(json_string_value(v), json_string_length(v));
    case JSON_OBJECT:
        json_object_foreach((json_t *)v, k, x) if (!eai_utf8_valid(k, strlen(k)) || unsealable(x)) return 1;
        return 0;
    case JSON_ARRAY:
        json_array_foreach(v, i, x) if (unsealable(x)) return 1;
        return 0;
    default:
        return 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *x = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!x)
        return 0;
    char *c1 = eai_audit_canonical(x);
    if (!json_is_object(x)) {
        FZ_ASSERT(c1 == NULL);
        json_decref(x);
        return 0;
    }
    json_t *x_nohash = json_deep_copy(x);
    FZ_ASSERT(x_nohash != NULL);
    json_object_del(x_nohash, "hash");
    if (unsealable(x_nohash)) {
        FZ_ASSERT(c1 == NULL);
        json_decref(x_nohash);
        json_decref(x);
        return 0;
    }
    FZ_ASSERT(c1 != NULL);
    json_t *y = json_loads(c1, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!y)
        fprintf(stderr, "canonical text does not parse: %s: %s\n", je.text, c1);
    FZ_ASSERT(y != NULL);
    FZ_ASSERT(json_equal(x_nohash, y));
    char *c2 = eai_audit_canonical(y);
    FZ_ASSERT(c2 != NULL && strcmp(c1, c2) == 0);

    /* seal and check */
    FZ_ASSERT(eai_audit_seal(y, NULL) == 0);
    FZ_ASSERT(eai_audit_check(y) == 1);
    /* any change to a sealed event breaks its hash */
    json_t *old = json_object_get(y, "fuzz_tamper");
    FZ_ASSERT(json_object_set_new(y, "fuzz_tamper", json_boolean(!json_is_true(old))) == 0);
    FZ_ASSERT(eai_audit_check(y) == 0);

    free(c2);
    json_decref(x_nohash);
    json_decref(y);
    free(c1);
    json_decref(x);
    return 0;
}
