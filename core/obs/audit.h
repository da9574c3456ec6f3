/* The audit chain: canonical JSON and the hash seal (docs/audit.md). */
#ifndef EAI_CORE_AUDIT_H
#define EAI_CORE_AUDIT_H

#include <jansson.h>

#define EAI_AUDIT_ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

/* Canonical form of event without its "hash" member (malloc'd), or NULL
 * when the event holds a real number or invalid UTF-8 (never produced). */
char *eai_audit_canonical(const json_t *event);
/* Set "prev_hash" (prev, or the zero hash when NULL) and "hash" =
 * sha256_hex(prev_hash || canonical(event)).  0 or -1. */
int eai_audit_seal(json_t *event, const char *prev_hash);
/* Recompute: 1 when "hash" matches the event and its "prev_hash". */
int eai_audit_check(const json_t *event);

#endif
