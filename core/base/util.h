/* Small helpers: ids, time, hashing, base64, quantities. */
#ifndef EAI_CORE_UTIL_H
#define EAI_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* eai_now_ms, eai_monotonic_ns, eai_time_rfc3339, eai_read_file, eai_mkdir_p,
 * eai_write_all, eai_jstr: shared with the plugins, the launcher and the CLI */
#include "eaibase.h"

void eai_uuid_v4(char out[37]);
/* Fill buf with n random bytes from getrandom(); 0 or -1. */
int eai_random_bytes(void *buf, size_t n);
/* Lowercase hex of n random bytes into out (2n+1). */
int eai_random_hex(char *out, size_t nbytes);
/* Lowercase hex of n bytes into out (2n + 1, NUL-terminated). */
void eai_hex_encode(const void *b, size_t n, char *out);
/* 1 when the n bytes are all lowercase hex digits; the time taken does not
 * depend on the bytes (key secrets go through it). */
int eai_hex_lower_ok(const char *s, size_t n);
/* n zeroed bytes, as calloc(1, n), for the per-request allocations: glibc
 * 2.36's calloc does not take from the thread cache, malloc does (~170
 * instructions less a request each). */
void *eai_zalloc(size_t n);

void eai_sha256_hex(const void *d, size_t n, char out[65]);
void eai_hmac_sha256_hex(const void *key, size_t klen, const void *d, size_t n, char out[65]);
/* Constant-time equality of two equal-length strings (different lengths: 0). */
int eai_ct_streq(const char *a, const char *b);

char *eai_b64_encode(const void *d, size_t n);
unsigned char *eai_b64_decode(const char *s, size_t *outlen);

/* 1 when the n bytes are valid UTF-8 without NUL. */
int eai_utf8_valid(const char *s, size_t n);
/* In place, replace each byte that does not begin a valid UTF-8 sequence
 * with '?': for messages built with "%.64s" from client text, where the cut
 * may split a character (jansson refuses such strings: json_pack fails). */
void eai_utf8_scrub(char *s);

/* Kubernetes quantities, parsed exactly.  CPU: "500m", "1", "1.5" (max 3
 * decimals) -> millicores.  Memory/disk: "256Mi", "1Gi", "1G", "1.5Gi",
 * plain bytes -> bytes (must be an integer number of bytes).  0 or -1. */
int eai_parse_cpu_millis(const char *s, int64_t *out);
int eai_parse_bytes(const char *s, int64_t *out);
/* Canonical text of a quantity for echoing ("500m", "256Mi"). */
void eai_format_bytes(int64_t b, char *out, size_t len);
void eai_format_cpu(int64_t millis, char *out, size_t len);

#endif
