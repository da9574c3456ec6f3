/* details[].message in French (core/http/details_i18n.c): templates with
 * holes, nested messages, the envelope's details localised by language. */
#include <stdlib.h>
#include <string.h>

#include "http/details_i18n.h"
#include "http/http_util.h"
#include "unit_main.h"

static void expect(const char *en, const char *fr)
{
    char *got = eai_detail_fr(en);
    if (!got || strcmp(got, fr) != 0)
        fprintf(stderr, "'%s': got '%s', want '%s'\n", en, got ? got : "(none)", fr);
    CU_ASSERT(got && strcmp(got, fr) == 0);
    free(got);
}

static void test_templates(void)
{
    expect("is required", "est obligatoire");
    expect("must be at least 16 characters long", "doit compter au moins 16 caractères");
    expect("must have at least 2 items", "doit avoir au moins 2 éléments");
    expect("must have at least 1 item", "doit avoir au moins 1 élément");
    expect("1Gi exceeds the maximum 512Mi of profile 'gvisor-small'",
           "1Gi dépasse le maximum 512Mi du profil 'gvisor-small'");
    expect("unknown image 'nosuch:1'; the images here are: python:3.11-slim, x:y (eaid images list)",
           "image inconnue 'nosuch:1' ; les images présentes sont : python:3.11-slim, x:y (eaid images list)");
    /* the hint of core/exec/exec_create.c, whole: every part of it in French */
    expect("unknown image 'py:3'; the image store is empty: build one with `eaid images build py:3 --packages x` "
           "or import one with `eaid images import NAME:TAG ARCHIVE` (docs/images.md)",
           "image inconnue 'py:3' ; le magasin d'images est vide : construisez-en une avec "
           "`eaid images build py:3 --packages x` ou importez-en une avec `eaid images import NAME:TAG ARCHIVE` "
           "(docs/images.md)");
    expect("unknown image 'a'", "image inconnue 'a'");
    expect("'evil.example:443' is not in the allow list of profile 'fake'",
           "'evil.example:443' n'est pas dans la liste autorisée du profil 'fake'");
    expect("must be an integer from 1 to 100", "doit être un entier de 1 à 100");
    /* a nested message: the prefix's own template translates the rest */
    expect("the tool manifest's '10.0.0.1' is a private address: add '10.0.0.1:80' (or its range) to "
           "callbacks.allow to call it",
           "(manifeste de l'outil) '10.0.0.1' est une adresse de classe private : ajoutez '10.0.0.1:80' (ou sa "
           "plage) à callbacks.allow pour l'appeler");
    /* no regular expression in quantity and path refusals: they have words */
    expect("must be a CPU quantity: millicores such as \"500m\", or cores such as \"1\" or \"1.5\" (at most 3 "
           "decimals)",
           "doit être une quantité de CPU : des millicœurs comme \"500m\", ou des cœurs comme \"1\" ou \"1.5\" "
           "(3 décimales au plus)");
    char *none = eai_detail_fr("a message nobody wrote");
    CU_ASSERT_PTR_NULL(none);
    free(none);
    /* a hole takes at least one character */
    none = eai_detail_fr("unknown tool ''");
    CU_ASSERT_PTR_NULL(none);
    free(none);
}

static void test_envelope(void)
{
    json_t *d = json_pack("[{s:s, s:s}, {s:s, s:s}]", "path", "/limits/cpu", "message", "must be greater than zero",
                          "path", "/x", "message", "a message nobody wrote");
    json_t *e = eai_http_error_envelope(EAI_E_VALIDATION_FAILED, "fr", "rid", d);
    json_t *d0 = json_array_get(json_object_get(json_object_get(e, "error"), "details"), 0);
    json_t *d1 = json_array_get(json_object_get(json_object_get(e, "error"), "details"), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d0, "message")), "doit être supérieur à zéro");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "en")),
                           "must be greater than zero");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d1, "message")), "a message nobody wrote");
    json_decref(e);
    d = json_pack("[{s:s, s:s}]", "path", "/limits/cpu", "message", "must be greater than zero");
    e = eai_http_error_envelope(EAI_E_VALIDATION_FAILED, "en", "rid", d);
    d0 = json_array_get(json_object_get(json_object_get(e, "error"), "details"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d0, "message")), "must be greater than zero");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "fr")),
                           "doit être supérieur à zéro");
    json_decref(e);
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("details_i18n", NULL, NULL);
    if (!s || !CU_add_test(s, "templates", test_templates) || !CU_add_test(s, "envelope", test_envelope))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
