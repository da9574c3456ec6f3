/* Cache of verified API keys on the loop thread (http/auth_cache.c).
 *
 * A key that passed the storage lookup and the HMAC check is remembered for
 * auth.cache_ttl_ms: the next requests with it are answered on the loop
 * (expiry, the presented secret) without a worker hop or a storage read:
 * the whole presented secret must equal, compared in constant time, the
 * secret that passed the HMAC check (a SHA-256 of each presented secret
 * was 10% of the instructions of a cached GET; the slot keeps the secret
 * itself, as evhttp's buffers keep each request's, and zeroes it when the
 * slot is emptied, replaced, or the cache cleared or freed).  Revocation: `eaid keys revoke` adds
 * one to the 8-byte counter <data_dir>/keys.gen, which the server maps
 * (shared) and reads before every cache hit (a memory load, no system
 * call): a changed value empties the cache, so a key revoked by the CLI of
 * this host is refused on the next request.  A revocation this process cannot see
 * (the CLI of another host on a shared PostgreSQL) takes effect within the
 * TTL.  Failures are never cached. */
#ifndef EAI_HTTP_AUTH_CACHE_H
#define EAI_HTTP_AUTH_CACHE_H

#include <stdint.h>
#include <jansson.h>

#define EAI_AUTH_MARKER "keys.gen"

struct eai_auth_cache;

/* ttl_ms 0: no cache (every lookup misses).  data_dir: where the counter
 * lives (NULL: TTL only; a counter that cannot be mapped: no cache). */
struct eai_auth_cache *eai_auth_cache_new(int ttl_ms, const char *data_dir);
void eai_auth_cache_free(struct eai_auth_cache *c);

/* 1: key_id is cached, live, and secret matches (tenant written, up to
 * tenant_sz); 2: the same, and the entry is past half its TTL: the caller
 * refreshes it with a background lookup (a steady client never waits for
 * storage, and 256 connections never all miss at once); 0: ask storage. */
int eai_auth_cache_check(struct eai_auth_cache *c, const char *key_id, const char *secret, int64_t now_ms,
                         char *tenant, size_t tenant_sz);

/* The generation before asking storage: a put with an older one (a
 * revocation was seen meanwhile) is dropped. */
uint64_t eai_auth_cache_gen(struct eai_auth_cache *c);

/* Remember a key record whose secret (NUL-terminated, at most
 * EAI_KEY_SECRET_LEN) just passed eai_auth_check(); gen from
 * eai_auth_cache_gen() taken before the lookup. */
void eai_auth_cache_put(struct eai_auth_cache *c, uint64_t gen, const char *key_id, const char *secret,
                        const json_t *rec, int64_t now_ms);

/* After a background refresh: only_flag 1 (storage failed: the entry
 * stays until its TTL) or 0 (the key is no longer good: forget it). */
void eai_auth_cache_drop(struct eai_auth_cache *c, const char *key_id, int only_flag);

/* Forget everything (a revocation was seen). */
void eai_auth_cache_clear(struct eai_auth_cache *c);

/* The CLI after a revocation: add one to <data_dir>/keys.gen (created,
 * mode 0600).  0 or -1. */
int eai_auth_cache_notify(const char *data_dir);

#endif
