/* eaibase: a JSON object's string member (eaibase.h). */
#include <jansson.h>

#include "eaibase.h"

const char *eai_jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}
