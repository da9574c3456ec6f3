/*
 * JSON Schema validator (draft 2020-12 subset, draft-7 compatible) over
 * jansson, with PCRE2 for "pattern".  See docs/contracts.md for the keyword
 * list, the regex dialect and the error format.
 *
 * A loaded schema is immutable: eai_schema_validate() may run on several
 * threads at once on the same schema.
 */
#ifndef EAI_JSONSCHEMA_H
#define EAI_JSONSCHEMA_H

#include <jansson.h>
#include <eai/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most errors one validation reports; further ones are dropped. */
#define EAI_SCHEMA_MAX_ERRORS 50
/* Deepest nesting of schema applications (guards $ref cycles). */
#define EAI_SCHEMA_MAX_DEPTH 256

struct eai_schema;

/* Compile a schema.  Unknown keywords, malformed keyword values, bad
 * regexes and unresolvable or non-local $ref are refused: NULL and *err
 * (code EAI_E_VALIDATION_FAILED, message naming the keyword and its JSON
 * pointer in the schema).  The schema JSON is referenced, not copied: do
 * not modify it afterwards. */
struct eai_schema *eai_schema_load(const json_t *schema, struct eai_error **err);
struct eai_schema *eai_schema_load_file(const char *path, struct eai_error **err);

/* 1 valid, 0 invalid.  When errors is not NULL it receives a new array of
 * {"path": JSON pointer of the instance location, "message": English text}
 * (empty when valid, at most EAI_SCHEMA_MAX_ERRORS entries). */
int eai_schema_validate(const struct eai_schema *s, const json_t *instance, json_t **errors);

void eai_schema_free(struct eai_schema *s);

#ifdef __cplusplus
}
#endif
#endif
