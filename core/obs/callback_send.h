/*
 * Completion callbacks: the sender of the callback rows of the usage
 * outbox (core/obs/callback_send.c; the pure part is callback.h).  Owned
 * by the delivery loops (core/obs/delivery.c), which hand it every batch
 * of outbox rows they fetch; FinOps and the ledger skip those rows.
 * Loop thread only.
 */
#ifndef EAI_OBS_CALLBACK_SEND_H
#define EAI_OBS_CALLBACK_SEND_H

#include <jansson.h>

#include "app.h"
#include "base/errors.h"
#include "obs/callback.h"

struct eai_cb_sender;

/* From app->cfg (callbacks.allow, timeout_ms, backoff_cap_s,
 * max_attempts).  NULL + *err on a bad allow entry. */
struct eai_cb_sender *eai_cb_sender_new(struct eai_app *app, struct eai_error **err);
/* In-flight attempts finish in the background and free what they hold. */
void eai_cb_sender_stop(struct eai_cb_sender *s);
/* Outbox rows just fetched: start an attempt for each callback row that
 * is due (its backoff elapsed, not in flight). */
void eai_cb_sender_offer(struct eai_cb_sender *s, const json_t *rows);
const struct eai_cb_policy *eai_cb_sender_policy(const struct eai_cb_sender *s);

#endif
