#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/log.h"
#include "base/worker.h"

#define EAI_WORKERS_MAX 64

struct eai_work {
    eai_work_fn fn;
    eai_work_done_fn done;
    void *arg;
    struct eai_work *next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct eai_work *head, *tail;     /* to run */
    struct eai_work *done_head, *done_tail;
    int queued, running, stopping, nthreads;
    int queue_max;                    /* EAI_WORK_QUEUE_MAX, or the test hook's */
    pthread_t threads[EAI_WORKERS_MAX];
    int efd;
    struct event *ev;
} eai_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .efd = -1};

static void *eai_worker_main(void *unused)
{
    for (;;) {
        pthread_mutex_lock(&eai_pool.mu);
        while (!eai_pool.head && !eai_pool.stopping)
            pthread_cond_wait(&eai_pool.cv, &eai_pool.mu);
        if (!eai_pool.head) {
            pthread_mutex_unlock(&eai_pool.mu);
            return NULL;
        }
        struct eai_work *w = eai_pool.head;
        eai_pool.head = w->next;
        if (!eai_pool.head)
            eai_pool.tail = NULL;
        eai_pool.queued--;
        eai_pool.running++;
        pthread_mutex_unlock(&eai_pool.mu);

        w->fn(w->arg);

        pthread_mutex_lock(&eai_pool.mu);
        eai_pool.running--;
        w->next = NULL;
        if (eai_pool.done_tail)
            eai_pool.done_tail->next = w;
        else
            eai_pool.done_head = w;
        eai_pool.done_tail = w;
        pthread_mutex_unlock(&eai_pool.mu);
        uint64_t one = 1;
        ssize_t r = write(eai_pool.efd, &one, sizeof(one));
        (void)r;
    }
}

static void eai_workers_drain_done(void)
{
    pthread_mutex_lock(&eai_pool.mu);
    struct eai_work *w = eai_pool.done_head;
    eai_pool.done_head = eai_pool.done_tail = NULL;
    pthread_mutex_unlock(&eai_pool.mu);
    while (w) {
        struct eai_work *next = w->next;
        if (w->done)
            w->done(w->arg);
        free(w);
        w = next;
    }
}

static void eai_workers_on_event(evutil_socket_t fd, short what, void *arg)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));
    (void)r;
    eai_workers_drain_done();
}

int eai_workers_start(struct event_base *base, int nthreads)
{
    if (nthreads < 1)
        nthreads = 1;
    if (nthreads > EAI_WORKERS_MAX)
        nthreads = EAI_WORKERS_MAX;
    eai_pool.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (eai_pool.efd < 0)
        return -1;
    eai_pool.ev = event_new(base, eai_pool.efd, EV_READ | EV_PERSIST, eai_workers_on_event, NULL);
    if (!eai_pool.ev || event_add(eai_pool.ev, NULL) < 0)
        return -1;
    eai_pool.stopping = 0;
    /* Test-only hook (docs/api.md, "Overload"): a smaller queue bound, so a
     * test can fill it with a few dozen requests. */
    eai_pool.queue_max = EAI_WORK_QUEUE_MAX;
    const char *qm = getenv("EAI_TEST_WORK_QUEUE_MAX");
    if (qm && atoi(qm) >= 1 && atoi(qm) < EAI_WORK_QUEUE_MAX) {
        eai_pool.queue_max = atoi(qm);
        eai_log("worker", EAI_LOG_WARN, "test hook EAI_TEST_WORK_QUEUE_MAX: worker queue bound %d",
                eai_pool.queue_max);
    }
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&eai_pool.threads[i], NULL, eai_worker_main, NULL) != 0)
            return -1;
        eai_pool.nthreads++;
    }
    return 0;
}

int eai_work_submit(eai_work_fn fn, eai_work_done_fn done, void *arg)
{
    struct eai_work *w = calloc(1, sizeof(*w));
    if (!w)
        return -1;
    w->fn = fn;
    w->done = done;
    w->arg = arg;
    pthread_mutex_lock(&eai_pool.mu);
    if (eai_pool.stopping || eai_pool.nthreads == 0 || eai_pool.queued >= eai_pool.queue_max) {
        int full = !eai_pool.stopping && eai_pool.nthreads > 0;
        pthread_mutex_unlock(&eai_pool.mu);
        free(w);
        return full ? EAI_WORK_FULL : -1;
    }
    if (eai_pool.tail)
        eai_pool.tail->next = w;
    else
        eai_pool.head = w;
    eai_pool.tail = w;
    eai_pool.queued++;
    pthread_cond_signal(&eai_pool.cv);
    pthread_mutex_unlock(&eai_pool.mu);
    return 0;
}

int eai_workers_pending(void)
{
    pthread_mutex_lock(&eai_pool.mu);
    int n = eai_pool.queued + eai_pool.running;
    pthread_mutex_unlock(&eai_pool.mu);
    return n;
}

void eai_workers_stop(void)
{
    pthread_mutex_lock(&eai_pool.mu);
    eai_pool.stopping = 1;
    pthread_cond_broadcast(&eai_pool.cv);
    pthread_mutex_unlock(&eai_pool.mu);
    for (int i = 0; i < eai_pool.nthreads; i++)
        pthread_join(eai_pool.threads[i], NULL);
    eai_pool.nthreads = 0;
    eai_workers_drain_done();
    if (eai_pool.ev)
        event_free(eai_pool.ev);
    eai_pool.ev = NULL;
    if (eai_pool.efd >= 0)
        close(eai_pool.efd);
    eai_pool.efd = -1;
}
