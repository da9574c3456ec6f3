/* Bearer-key authentication of a request (docs/api.md "Authentication"):
 * the key is parsed on the loop, looked up and checked on a worker (the
 * request is parked, http/park.h), then the route's handler runs with the
 * tenant set, or 401 is answered and auth.refused audited. */
#ifndef EAI_CORE_BEARER_H
#define EAI_CORE_BEARER_H

#include "http/request.h"

/* authorization: the request's Authorization header (NULL: none). */
void eai_auth_start(struct eai_req *r, const char *authorization);

/* The cache of verified keys (http/auth_cache.h): made at server start
 * (auth.cache_ttl_ms, the data dir's revocation marker), freed at stop. */
void eai_bearer_init(const struct eai_app *app);
void eai_bearer_shutdown(void);

#endif
