/*
 * Refused authentications, counted and audited per window (issue 16.4):
 * one `auth.refused` audit event per (source address, reason) and window
 * of EAI_REFUSAL_WINDOW_MS, written when the window closes, with the count,
 * the first target (truncated) and the window's bounds.  A flood of bad
 * keys costs a counter, not an audit row and a worker-queue slot per
 * request.  Loop thread only.
 */
#ifndef EAI_CORE_HTTP_AUTH_REFUSALS_H
#define EAI_CORE_HTTP_AUTH_REFUSALS_H

#include <stdint.h>

#define EAI_REFUSAL_WINDOW_MS 10000
#define EAI_REFUSAL_SOURCES 128     /* (source, reason) pairs per window; more go to source "*" */
#define EAI_REFUSAL_TARGET_MAX 128  /* bytes of the first target kept */

struct eai_app;
struct eai_req;

/* Count one refusal of r (reason: "missing key", "unknown key", ...). */
void eai_auth_refusal(struct eai_app *app, struct eai_req *r, const char *reason);
/* Write what is counted now (the window ends early); at stop, before the
 * workers stop.  Frees the timer. */
void eai_auth_refusals_flush(struct eai_app *app, int stopping);

#endif
