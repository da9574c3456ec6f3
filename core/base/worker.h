/* A bounded pool of worker threads for blocking work (storage, file I/O).
 * done() callbacks run on the loop thread. */
#ifndef EAI_CORE_WORKER_H
#define EAI_CORE_WORKER_H

#include <eai/plugin.h>

struct event_base;

int eai_workers_start(struct event_base *base, int nthreads);
/* Queue fn on a worker; done (may be NULL) then runs on the loop thread.
 * 0; EAI_WORK_FULL when the queue is at its bound (EAI_WORK_QUEUE_MAX);
 * -1 when the pool is stopped (or out of memory).  Both are negative. */
#define EAI_WORK_QUEUE_MAX 4096
#define EAI_WORK_FULL (-2)
int eai_work_submit(eai_work_fn fn, eai_work_done_fn done, void *arg);
/* Jobs queued or running. */
int eai_workers_pending(void);
/* Finish queued work, run the remaining done callbacks, join threads. */
void eai_workers_stop(void);

#endif
