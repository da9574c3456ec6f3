/*
 * API keys (docs/api.md, "Authentication"):
 *   eai_<key_id>_<secret>
 * key_id: 16 lowercase hex characters (8 random bytes), stored in clear;
 * secret: 64 lowercase hex characters (32 random bytes), never stored:
 * storage keeps HMAC-SHA-256(pepper, secret) as hex, where the pepper is
 * 32 random bytes kept hex-encoded in <data_dir>/pepper (mode 0600,
 * created at first use) or in the file EAI_AUTH_PEPPER_FILE names.
 */
#ifndef EAI_CORE_AUTH_H
#define EAI_CORE_AUTH_H

#include <jansson.h>
#include <eai/plugin.h>

#define EAI_KEY_ID_LEN 16
#define EAI_KEY_SECRET_LEN 64
#define EAI_KEY_LEN (4 + EAI_KEY_ID_LEN + 1 + EAI_KEY_SECRET_LEN)

/* Read the pepper file, or create it (64 hex + newline, mode 0600,
 * atomically) when absent and create is set.  out: 64 hex + NUL. */
int eai_auth_pepper_load(const char *path, int create, char out[65], struct eai_error **err);

/* A fresh key: key_id, secret and the full "eai_<id>_<secret>" text. */
int eai_auth_key_generate(char key_id[EAI_KEY_ID_LEN + 1], char secret[EAI_KEY_SECRET_LEN + 1],
                          char full[EAI_KEY_LEN + 1]);

/* HMAC-SHA-256(pepper bytes, secret) as lowercase hex. */
void eai_auth_secret_hash(const char *pepper_hex, const char *secret, char out[65]);

/* Parse an Authorization header value ("Bearer eai_..."); 0 or -1 when
 * missing or malformed. */
int eai_auth_parse_bearer(const char *header, char key_id[EAI_KEY_ID_LEN + 1],
                          char secret[EAI_KEY_SECRET_LEN + 1]);

/* 1 when rec (storage key_get record, may be NULL) is a live key whose
 * hash matches secret; the work done is the same for every outcome.
 * Live: not revoked and not expired (eai_auth_expired). */
int eai_auth_check(const json_t *rec, const char *pepper_hex, const char *secret);

/* 1 when rec's expires_at (RFC 3339; absent or null: never) is at or before
 * now_ms, or is not a valid time (fail closed); 0 otherwise. */
int eai_auth_expired(const json_t *rec, int64_t now_ms);

#endif
