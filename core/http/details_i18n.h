/*
 * details[].message of an error envelope in the negotiated language
 * (docs/errors.md): each detail gets message_i18n {en, fr} and, for
 * Accept-Language fr, its message in French.  Pure functions.
 */
#ifndef EAI_HTTP_DETAILS_I18N_H
#define EAI_HTTP_DETAILS_I18N_H

#include <jansson.h>

/* The French form of an English detail message (malloc'd), or NULL when
 * the table has no template for it. */
char *eai_detail_fr(const char *en);
/* The table's shape (tests): every template, its holes filled with "Q1",
 * "Q2"..., comes back as its own French (no earlier template takes it),
 * every French hole names an English one, at most 4 holes.  0, or -1 with
 * the first entry that fails in why. */
int eai_details_table_check(char *why, size_t whylen);
/* Localise every {path, message} of details in place (lang "en" or "fr"). */
void eai_details_localize(json_t *details, const char *lang);

#endif
