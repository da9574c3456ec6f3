/*
 * Gateway tokens on requests (docs/auth.md "Gateway tokens"): the key set
 * (auth.jwt.jwks_file read again, or jwks_url fetched again, every
 * refresh_s and early on an unknown kid; the last good set kept on
 * failure), the check of a token on a worker (http/jwt.c) with its tenant
 * looked up in storage, a cache of verified tokens on the loop.  Loop
 * thread, except the workers' part.
 */
#ifndef EAI_CORE_HTTP_JWT_AUTH_H
#define EAI_CORE_HTTP_JWT_AUTH_H

struct eai_app;
struct eai_req;
struct eai_error;

/* Nothing when auth.jwt is off.  A jwks_file that cannot be read or holds
 * no usable key refuses the start (-1, err); a jwks_url is fetched now, in
 * the background (tokens are refused until a key set arrives). */
int eai_jwt_auth_init(struct eai_app *app, struct eai_error **err);
void eai_jwt_auth_shutdown(void);
/* auth.jwt is on. */
int eai_jwt_auth_on(void);
/* Check token for r; then passed(r) with r->tenant, r->key_id (actor
 * "jwt:<12 hex>") and r->jwt_project / r->jwt_agent set, or a 401 envelope
 * (counted and audited per window as every refusal, http/auth_refusals.h). */
void eai_jwt_auth_start(struct eai_req *r, const char *token, void (*passed)(struct eai_req *r));

#endif
