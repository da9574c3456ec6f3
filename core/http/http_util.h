/* Pure helpers of the HTTP server (core/http/server.c), kept apart so the unit
 * tests can reach them: language negotiation, request ids, route
 * patterns, the error envelope. */
#ifndef EAI_CORE_HTTP_UTIL_H
#define EAI_CORE_HTTP_UTIL_H

#include <stddef.h>
#include <jansson.h>
#include <eai/plugin.h>

/* "en" or "fr" from an Accept-Language value (q-values honoured, "fr-CA"
 * means fr, q=0 excludes, ties keep the header's order, default "en"). */
const char *eai_http_negotiate_lang(const char *accept_language);

/* 1 when a client-supplied X-Request-Id may be echoed: 1..128 characters
 * of [A-Za-z0-9._:-]. */
int eai_http_request_id_ok(const char *id);

#define EAI_ROUTE_MAX_PARAMS 4
struct eai_route_params {
    int n;
    char name[EAI_ROUTE_MAX_PARAMS][16];
    char *value[EAI_ROUTE_MAX_PARAMS];   /* malloc'd, percent-decoded */
};

/* Match a path ("/v1/x/abc", no query) against a pattern with {name}
 * (one segment) and {*name} (one or more segments) captures.  1 match,
 * 0 no match, -1 malformed escape or embedded NUL in a capture.
 * On 1, params holds the captures (free with eai_route_params_clear). */
int eai_route_match(const char *pattern, const char *path, struct eai_route_params *params);
void eai_route_params_clear(struct eai_route_params *params);

/* The API.md error envelope for code in lang; details stolen (NULL: []). */
json_t *eai_http_error_envelope(enum eai_code code, const char *lang, const char *request_id,
                                json_t *details);

/* Reason phrase of a status code. */
const char *eai_http_reason(int status);

#endif
