/*
 * List cursors (GET /v1/sandbox/executions?after=): opaque and bound to
 * one tenant.  A cursor is the AES-128 encryption of one block, the row's
 * storage sequence (8 bytes) and a tag of the tenant (8 bytes), under a key
 * derived from the auth pepper (every replica shares it), as unpadded
 * base64url (22 characters).  The global sequence, which would tell how
 * many executions other tenants made, never shows, and a cursor of one
 * tenant is refused for another (docs/api.md "Lists").
 */
#ifndef EAI_CORE_EXEC_CURSOR_H
#define EAI_CORE_EXEC_CURSOR_H

#include <stdint.h>

#define EAI_CURSOR_LEN 22

/* out: EAI_CURSOR_LEN + 1 bytes.  0 or -1. */
int eai_cursor_encode(const char *pepper_hex, const char *tenant, int64_t seq, char *out);
/* 0 and *seq, or -1 when c is not a cursor this server made for tenant. */
int eai_cursor_decode(const char *pepper_hex, const char *tenant, const char *c, int64_t *seq);

#endif
