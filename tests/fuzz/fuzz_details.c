/* An English detail message -> eai_detail_fr, eai_details_localize
 * (core/http/details_i18n.c; they run on the event loop for every error).
 * Invariants: over the 2048-byte cap the English stays; a French form is
 * at most twice the English plus a template's length; the answer is the
 * same every time; localising a detail keeps its English in
 * message_i18n.en and puts the French form (or the English) in .fr. */
#include <jansson.h>

#include "fuzz_util.h"
#include "http/details_i18n.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *en = fz_cstr(data, size);
    if (!en)
        return 0;
    size_t enl = strlen(en);
    char *fr = eai_detail_fr(en);
    if (enl > 2048)
        FZ_ASSERT(fr == NULL);
    if (fr)
        FZ_ASSERT(strlen(fr) < 2 * enl + 512);
    char *again = eai_detail_fr(en);
    FZ_ASSERT((fr == NULL) == (again == NULL));
    FZ_ASSERT(!fr || strcmp(fr, again) == 0);
    json_t *details = json_pack("[{s:s, s:s}]", "path", "", "message", en); /* NULL: not UTF-8 */
    if (details) {
        eai_details_localize(details, "fr");
        json_t *d = json_array_get(details, 0), *i18n = json_object_get(d, "message_i18n");
        const char *ien = json_string_value(json_object_get(i18n, "en"));
        const char *ifr = json_string_value(json_object_get(i18n, "fr"));
        const char *msg = json_string_value(json_object_get(d, "message"));
        FZ_ASSERT(ien && ifr && msg);
        FZ_ASSERT(strcmp(ien, en) == 0);
        FZ_ASSERT(strcmp(ifr, fr ? fr : en) == 0);
        FZ_ASSERT(strcmp(msg, fr ? fr : en) == 0);
        json_decref(details);
    }
    free(again);
    free(fr);
    free(en);
    return 0;
}
