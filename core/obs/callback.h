/*
 * Completion callbacks (docs/executions.md, "Completion callbacks"): the
 * pure part.  An execution (or its tool manifest) names
 * `callback: {url, secret}`; on its terminal status a callback event is
 * written to the usage outbox in the same transaction as the terminal
 * record, and core/obs/callback_send.c POSTs it, signed:
 *
 *   Eai-Signature: t=<unix seconds>,v1=<hex HMAC-SHA-256(secret, "<t>.<body>")>
 *   Eai-Event-Id:  <event id>   (the idempotency key: same on every retry)
 *
 * URL policy: http(s) only, no user info; the host must match
 * `callbacks.allow` when that list is not empty (same grammar as a
 * profile's egress allow list, core/net/egress_policy.h); an address of a
 * refused class (loopback, private, link-local, ...) is refused unless an
 * address or CIDR entry of `callbacks.allow` lists it.  Literal addresses
 * are checked at admission, resolved names before every delivery.
 */
#ifndef EAI_OBS_CALLBACK_H
#define EAI_OBS_CALLBACK_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "net/egress_policy.h"

#define EAI_CALLBACK_HOST_MAX 256
#define EAI_CALLBACK_SIG_MAX 96    /* "t=<20>,v1=<64>" */
#define EAI_CALLBACK_KV_PREFIX "callback:"

/* The parsed allow list of `callbacks.allow`. */
struct eai_cb_policy {
    struct eai_egress_rule *rules;
    size_t n;
};

/* Build a policy from a JSON array of allow entries (NULL: empty).  0, or
 * -1 with the bad entry's index in *bad. */
int eai_cb_policy_init(struct eai_cb_policy *p, const json_t *allow, size_t *bad);
void eai_cb_policy_free(struct eai_cb_policy *p);

/* Split an http(s) URL: host (lower case, brackets of a v6 literal
 * removed) and port (default 80/443).  0 or -1. */
int eai_cb_url_parse(const char *url, char *host, size_t hostlen, uint16_t *port, int *https);

/* The admission check of a callback URL against the policy (p may be NULL:
 * no allow list).  0, or -1 with a sentence for the user in why. */
int eai_cb_url_check(const struct eai_cb_policy *p, const char *url, char *why, size_t whylen);

/* The check of one address of the URL's host (literal, or resolved before
 * a delivery; name_allowed: the host name matched a name entry).  A
 * refused class needs an address/CIDR entry.  1 allowed, 0 refused. */
int eai_cb_addr_ok(const struct eai_cb_policy *p, const struct eai_ip *ip, uint16_t port, int name_allowed);

/* "t=<t>,v1=<hex>" into out (EAI_CALLBACK_SIG_MAX bytes). */
void eai_cb_sign(const char *secret, int64_t t, const char *body, size_t len, char *out);

/* The outbox event of a terminal execution with a callback: {id, target:
 * "callback", tenant_id, execution_id, url, secret, body{...summary}}.
 * rec: the stored record (has callback), terminal: the record after the
 * end (status, exit_code, usage, ...).  NULL when rec has no callback. */
json_t *eai_cb_event(const json_t *rec, const json_t *terminal);

/* 1 when an outbox row's event is a callback. */
int eai_cb_is_callback(const json_t *event);

/* Backoff before retry number n (1-based) of one callback, in ms:
 * 1 s * 2^(n-1), capped at cap_ms. */
int64_t eai_cb_backoff_ms(int n, int64_t cap_ms);

/* The public view of a record's callback for GET: {url, attempts,
 * last_status, delivered_at} from rec.callback and the delivery state
 * (kv value, may be NULL).  NULL when rec has no callback. */
json_t *eai_cb_view(const json_t *rec, const char *state);

#endif
