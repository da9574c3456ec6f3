/*
 * Parking a request while a worker runs its job: the one primitive behind
 * every handler that needs storage (Redis modules' blocked client,
 * tests/modules/blockonbackground.c, is the model).
 *
 *   handler (loop)          eai_park(set, r, &ops, job)    r is parked
 *   worker thread           ops->work(job)                  blocking calls
 *   loop                    ops->answer(r, job)             exactly one reply
 *   loop                    ops->free(job)                  always, last
 *
 * It owns the two answers every parked request shares:
 *  - a full worker queue: 429 rate_limited with Retry-After (a stopped pool
 *    or a closed set: 503 storage_unavailable); docs/api.md "Overload";
 *  - a storage error: eai_park_reply_storage, the single mapping from a
 *    storage error code to the HTTP envelope.
 * Everything here runs on the loop thread except ops->work.
 */
#ifndef EAI_CORE_PARK_H
#define EAI_CORE_PARK_H

#include <eai/plugin.h>

#include "http/request.h"

/* The requests parked by one owner (executions): closing the set answers
 * every one of them at once (503 storage_unavailable) while the server can
 * still send; their jobs then only free.  NULL means "no owner". */
struct eai_park_set;

struct eai_park_ops {
    const char *what;                             /* for logs: "exec_get" */
    void (*work)(void *job);                      /* on a worker */
    /* On the loop; r is NULL when the set was closed meanwhile (r was
     * answered then) or for a background job (eai_park with r NULL). */
    void (*answer)(struct eai_req *r, void *job);
    void (*free)(void *job);                      /* on the loop, always */
};

/* Park r (may be NULL: a background job, nothing to answer) and queue
 * ops->work.  0 when queued.  Otherwise r is answered here (429 / 503, see
 * above), ops->free(job) is called and -1 returned. */
int eai_park(struct eai_park_set *set, struct eai_req *r, const struct eai_park_ops *ops, void *job);

/* Park r without a job yet (waiting on a timer); NULL when out of memory
 * (r is then not parked and still the caller's). */
struct eai_parked *eai_park_hold(struct eai_park_set *set, struct eai_req *r);
/* End a hold: r, or NULL when closing the set answered it. */
struct eai_req *eai_park_release(struct eai_parked *p);

/* The one mapping from a storage error to the envelope: storage_unavailable,
 * not_found and validation_failed keep their code; anything else is
 * internal.  The detail goes to the log, labelled what. */
enum eai_code eai_park_storage_code(const struct eai_error *e);
void eai_park_reply_storage(struct eai_req *r, const char *what, const struct eai_error *e);

struct eai_park_set *eai_park_set_new(void);
/* Answer every request parked in set (503 storage_unavailable) and drop
 * the owner's reference; the set is freed when its last job returns.
 * Later eai_park calls on it answer 503 at once.  NULL is accepted. */
void eai_park_set_close(struct eai_park_set *set);
/* Requests parked in set now. */
int eai_park_count(const struct eai_park_set *set);

#endif
