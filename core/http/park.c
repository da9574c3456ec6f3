/* Parking a request while a worker runs its job (park.h). */
#include <stdlib.h>

#include "http/park.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/worker.h"

#define PARK_COMPONENT "park"

struct eai_parked {
    struct eai_parked *next, *prev;
    struct eai_park_set *set;       /* NULL: not in a set */
    struct eai_req *r;              /* NULL once answered by a close */
};

struct eai_park_set {
    struct eai_parked *head;
    int count;
    int closed;
    int refs;                       /* the owner's + one per job in flight */
};

struct park_job {
    struct eai_parked p;
    const struct eai_park_ops *ops;
    void *job;
};

static void set_unref(struct eai_park_set *s)
{
    if (s && --s->refs == 0)
        free(s);
}

static void link_in(struct eai_park_set *s, struct eai_parked *p, struct eai_req *r)
{
    p->r = r;
    p->set = s;
    p->prev = NULL;
    p->next = NULL;
    if (!s)
        return;
    s->refs++;
    if (!r)
        return;
    p->next = s->head;
    if (s->head)
        s->head->prev = p;
    s->head = p;
    s->count++;
}

/* Unlink p; r or NULL when a close answered it.  Drops p's set reference. */
static struct eai_req *link_out(struct eai_parked *p)
{
    struct eai_park_set *s = p->set;
    struct eai_req *r = p->r;
    if (s && r) {
        if (p->prev)
            p->prev->next = p->next;
        else
            s->head = p->next;
        if (p->next)
            p->next->prev = p->prev;
        s->count--;
    }
    p->next = p->prev = NULL;
    p->r = NULL;
    p->set = NULL;
    set_unref(s);
    return r;
}

static void job_work(void *arg)
{
    struct park_job *pj = arg;
    pj->ops->work(pj->job);
}

static void job_done(void *arg)
{
    struct park_job *pj = arg;
    struct eai_req *r = link_out(&pj->p);
    if (pj->ops->answer)
        pj->ops->answer(r, pj->job);
    else if (r)
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
    if (pj->ops->free)
        pj->ops->free(pj->job);
    free(pj);
}

int eai_park(struct eai_park_set *set, struct eai_req *r, const struct eai_park_ops *ops, void *job)
{
    int rc = -1;
    int stopped = set && set->closed;
    struct park_job *pj = stopped ? NULL : calloc(1, sizeof *pj);
    if (pj) {
        stopped = 1; /* unless the queue is only full */
        pj->ops = ops;
        pj->job = job;
        link_in(set, &pj->p, r);
        rc = eai_work_submit(job_work, job_done, pj);
        if (rc == 0)
            return 0;
        link_out(&pj->p);
        free(pj);
    }
    if (rc == EAI_WORK_FULL) {
        /* the one answer to a full queue: 429 + Retry-After (docs/api.md) */
        if (r)
            eai_log_req(PARK_COMPONENT, EAI_LOG_WARN, eai_req_id(r), "%s: worker queue full",
                        ops->what ? ops->what : "job");
        else
            eai_log(PARK_COMPONENT, EAI_LOG_ERROR, "%s: worker queue full, job dropped",
                    ops->what ? ops->what : "job");
        if (r)
            eai_reply_error(r, EAI_E_RATE_LIMITED, NULL);
    } else if (r) {
        eai_reply_error(r, stopped ? EAI_E_STORAGE_UNAVAILABLE : EAI_E_INTERNAL, NULL);
    }
    if (ops->free)
        ops->free(job);
    return -1;
}

struct eai_parked *eai_park_hold(struct eai_park_set *set, struct eai_req *r)
{
    struct eai_parked *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    link_in(set, p, r);
    return p;
}

struct eai_req *eai_park_release(struct eai_parked *p)
{
    if (!p)
        return NULL;
    struct eai_req *r = link_out(p);
    free(p);
    return r;
}

enum eai_code eai_park_storage_code(const struct eai_error *e)
{
    if (!e)
        return EAI_E_INTERNAL;
    switch (e->code) {
    case EAI_E_STORAGE_UNAVAILABLE:
    case EAI_E_NOT_FOUND:
    case EAI_E_VALIDATION_FAILED:
        return e->code;
    default:
        return EAI_E_INTERNAL;
    }
}

void eai_park_reply_storage(struct eai_req *r, const char *what, const struct eai_error *e)
{
    if (!r)
        return;
    eai_log_req(PARK_COMPONENT, EAI_LOG_ERROR, eai_req_id(r), "%s: %s", what ? what : "storage",
                e && e->message ? e->message : "storage error");
    eai_reply_error(r, eai_park_storage_code(e), NULL);
}

struct eai_park_set *eai_park_set_new(void)
{
    struct eai_park_set *s = calloc(1, sizeof *s);
    if (s)
        s->refs = 1;
    return s;
}

void eai_park_set_close(struct eai_park_set *s)
{
    if (!s || s->closed)
        return;
    s->closed = 1;
    while (s->head) {
        struct eai_parked *p = s->head;
        struct eai_req *r = p->r;
        s->head = p->next;
        if (s->head)
            s->head->prev = NULL;
        p->next = p->prev = NULL;
        p->r = NULL;      /* its job (or hold) only frees now; keeps its set ref */
        s->count--;
        eai_reply_error(r, EAI_E_STORAGE_UNAVAILABLE, NULL);
    }
    set_unref(s);
}

int eai_park_count(const struct eai_park_set *s)
{
    return s ? s->count : 0;
}
