/*
 * YAML -> JSON (jansson) with libyaml's event API.  One document; mappings
 * become objects (keys are the scalar's text), sequences arrays, plain
 * scalars resolve per the YAML 1.2 core schema (null, booleans, integers,
 * floats), quoted and block scalars stay strings.  Aliases are expanded by
 * copy under a node budget and a budget of expanded bytes (4 x input + 64
 * KiB: billion laughs, long aliased strings), duplicate keys are refused.
 * See docs/contracts.md.
 */
#ifndef EAI_YAMLJSON_H
#define EAI_YAMLJSON_H

#include <stddef.h>
#include <jansson.h>
#include <eai/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Deepest nesting of collections accepted. */
#define EAI_YAML_MAX_DEPTH 256

/* A new JSON value (json null for an empty stream), or NULL and *err with
 * code EAI_E_INVALID_JSON and a message "line L, column C: ..." (1-based);
 * err->details is [{"path": "", "message": same text}]. */
json_t *eai_yaml_to_json(const char *buf, size_t len, struct eai_error **err);

#ifdef __cplusplus
}
#endif
#endif
