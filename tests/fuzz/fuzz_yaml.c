/* YAML body -> eai_yaml_to_json (core/schema/yamljson.h).
 * Invariants: a refusal carries code invalid_json and one detail whose
 * message starts "line L, column C:"; an accepted document dumps to JSON that parses back
 * equal (the value handed to the rest of the server is plain JSON). */
#include "base/errors.h"
#include "fuzz_util.h"
#include "schema/yamljson.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct eai_error *err = NULL;
    json_t *v = eai_yaml_to_json((const char *)data, size, &err);
    if (!v) {
        FZ_ASSERT(err != NULL);
        FZ_ASSERT(err->code == EAI_E_INVALID_JSON);
        FZ_ASSERT(json_is_array(err->details) && json_array_size(err->details) == 1);
        const char *m = json_string_value(json_object_get(json_array_get(err->details, 0), "message"));
        FZ_ASSERT(m && strncmp(m, "line ", 5) == 0);
        eai_error_free(err);
        return 0;
    }
    FZ_ASSERT(err == NULL);
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    FZ_ASSERT(text != NULL);
    json_error_t je;
    json_t *back = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!back)
        fprintf(stderr, "reparse failed: %s: %s\n", je.text, text);
    FZ_ASSERT(back != NULL);
    FZ_ASSERT(json_equal(v, back));
    json_decref(back);
    free(text);
    json_decref(v);
    return 0;
}
