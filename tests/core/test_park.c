/*
 * test_park: the parking primitive (core/http/park.c) on a real event loop
 * and the real worker pool: the job runs on a worker, the answer on the loop
 * exactly once, free last; a full queue answers 429 rate_limited; a stopped
 * pool 503; closing a set answers what it holds with 503 and the late job
 * only frees; the one storage-error mapping.
 *
 * Requests are real struct eai_req objects without a connection (evreq
 * NULL: the reply path frees them); their owner hooks record the status.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>
#include <event2/event.h>

#include "../unit/unit_main.h"
#include "base/errors.h"
#include "base/worker.h"
#include "http/park.h"
#include "http/request_int.h"

static struct event_base *base;
static pthread_t loop_thread;
static int replies, last_status, frees;

static void owner_replied(void *arg, struct eai_req *r)
{
    (void)arg;
    replies++;
    last_status = r->status;
}

static void owner_freed(void *arg, struct eai_req *r)
{
    (void)arg;
    (void)r;
}

static const struct eai_req_owner owner = {.replied = owner_replied, .freed = owner_freed};

static struct eai_req *req_new(void)
{
    struct eai_req *r = calloc(1, sizeof *r);
    r->owner = &owner;
    r->lang = "en";
    snprintf(r->request_id, sizeof r->request_id, "test");
    return r;
}

struct job {
    pthread_t worker;
    int worked, answered, got_request;
    pthread_mutex_t *gate;         /* held by the test to keep the worker busy */
};

static void job_work(void *arg)
{
    struct job *j = arg;
    j->worker = pthread_self();
    if (j->gate) {
        pthread_mutex_lock(j->gate);
        pthread_mutex_unlock(j->gate);
    }
    j->worked = 1;
}

static void job_answer(struct eai_req *r, void *arg)
{
    struct job *j = arg;
    CU_ASSERT_TRUE(pthread_equal(pthread_self(), loop_thread));
    j->answered++;
    j->got_request = r != NULL;
    if (r)
        eai_reply_json(r, 200, json_pack("{s:b}", "ok", 1));
}

static void job_free(void *arg)
{
    struct job *j = arg;
    CU_ASSERT_TRUE(pthread_equal(pthread_self(), loop_thread));
    frees++;
    if (!j->gate)
        free(j);
}

static const struct eai_park_ops ops = {.what = "test", .work = job_work, .answer = job_answer, .free = job_free};

static void noop(void *arg) { (void)arg; }

/* Run the loop until cond or 5 s. */
static void loop_until(int *cond)
{
    for (int i = 0; i < 500 && !*cond; i++) {
        struct timeval tv = {0, 10000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
    }
}

static void test_park_answers_once(void)
{
    struct job *j = calloc(1, sizeof *j);
    replies = frees = 0;
    CU_ASSERT_EQUAL_FATAL(eai_park(NULL, req_new(), &ops, j), 0);
    loop_until(&frees);
    CU_ASSERT_EQUAL(frees, 1);
    CU_ASSERT_EQUAL(replies, 1);
    CU_ASSERT_EQUAL(last_status, 200);
    /* j is freed now; the facts were checked in the callbacks */
}

static void test_park_on_worker(void)
{
    static struct job j;
    pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
    memset(&j, 0, sizeof j);
    j.gate = &gate;
    replies = frees = 0;
    CU_ASSERT_EQUAL_FATAL(eai_park(NULL, req_new(), &ops, &j), 0);
    loop_until(&frees);
    CU_ASSERT_TRUE(j.worked);
    CU_ASSERT_FALSE(pthread_equal(j.worker, loop_thread));
    CU_ASSERT_EQUAL(j.answered, 1);
    CU_ASSERT_TRUE(j.got_request);
}

static void test_full_queue_429(void)
{
    /* the only worker waits on the gate; the queue is filled to its bound */
    pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
    static struct job blocker;
    memset(&blocker, 0, sizeof blocker);
    blocker.gate = &gate;
    pthread_mutex_lock(&gate);
    replies = frees = 0;
    CU_ASSERT_EQUAL_FATAL(eai_park(NULL, NULL, &ops, &blocker), 0);
    while (eai_workers_pending() < 1 || !blocker.worker)
        ; /* the worker took it */
    int queued = 0;
    while (eai_work_submit(noop, NULL, NULL) == 0)
        queued++;
    CU_ASSERT_EQUAL(queued, EAI_WORK_QUEUE_MAX);
    CU_ASSERT_EQUAL(eai_work_submit(noop, NULL, NULL), EAI_WORK_FULL);
    struct job *j = calloc(1, sizeof *j);
    CU_ASSERT_EQUAL(eai_park(NULL, req_new(), &ops, j), -1);
    CU_ASSERT_EQUAL(replies, 1);
    CU_ASSERT_EQUAL(last_status, 429);   /* rate_limited, Retry-After */
    CU_ASSERT_EQUAL(frees, 1);            /* j freed by eai_park */
    pthread_mutex_unlock(&gate);
    int done = 0;
    for (int i = 0; i < 500 && !done; i++) {
        loop_until(&done);
        done = eai_workers_pending() == 0 && frees == 2;
    }
    CU_ASSERT_EQUAL(frees, 2);
    CU_ASSERT_EQUAL(blocker.answered, 1);
    CU_ASSERT_FALSE(blocker.got_request); /* a background job */
}

static void test_set_close(void)
{
    pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
    static struct job j;
    memset(&j, 0, sizeof j);
    j.gate = &gate;
    pthread_mutex_lock(&gate);
    struct eai_park_set *set = eai_park_set_new();
    replies = frees = 0;
    CU_ASSERT_EQUAL_FATAL(eai_park(set, req_new(), &ops, &j), 0);
    struct eai_req *held = req_new();
    struct eai_parked *h = eai_park_hold(set, held);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(eai_park_count(set), 2);
    eai_park_set_close(set);               /* both answered now */
    CU_ASSERT_EQUAL(replies, 2);
    CU_ASSERT_EQUAL(last_status, 503);
    CU_ASSERT_PTR_NULL(eai_park_release(h)); /* already answered */
    pthread_mutex_unlock(&gate);
    loop_until(&frees);
    CU_ASSERT_EQUAL(frees, 1);
    CU_ASSERT_EQUAL(j.answered, 1);
    CU_ASSERT_FALSE(j.got_request);         /* the close answered it */
    CU_ASSERT_EQUAL(replies, 2);            /* no second reply */
    /* the set is freed with its last job; parking on a closed set is
     * tested with a fresh one */
    struct eai_park_set *set2 = eai_park_set_new();
    eai_park_set_close(set2);
}

static void test_storage_mapping(void)
{
    struct eai_error e = {0};
    e.code = EAI_E_STORAGE_UNAVAILABLE;
    CU_ASSERT_EQUAL(eai_park_storage_code(&e), EAI_E_STORAGE_UNAVAILABLE);
    e.code = EAI_E_NOT_FOUND;
    CU_ASSERT_EQUAL(eai_park_storage_code(&e), EAI_E_NOT_FOUND);
    e.code = EAI_E_VALIDATION_FAILED;
    CU_ASSERT_EQUAL(eai_park_storage_code(&e), EAI_E_VALIDATION_FAILED);
    e.code = EAI_E_CONFLICT;
    CU_ASSERT_EQUAL(eai_park_storage_code(&e), EAI_E_INTERNAL);
    CU_ASSERT_EQUAL(eai_park_storage_code(NULL), EAI_E_INTERNAL);
    replies = 0;
    e.code = EAI_E_STORAGE_UNAVAILABLE;
    eai_park_reply_storage(req_new(), "test", &e);
    CU_ASSERT_EQUAL(replies, 1);
    CU_ASSERT_EQUAL(last_status, 503);
}

static void test_stopped_pool_503(void)
{
    eai_workers_stop();
    struct job *j = calloc(1, sizeof *j);
    replies = frees = 0;
    CU_ASSERT_EQUAL(eai_park(NULL, req_new(), &ops, j), -1);
    CU_ASSERT_EQUAL(last_status, 503);
    CU_ASSERT_EQUAL(frees, 1);
}

static int init(void)
{
    loop_thread = pthread_self();
    base = event_base_new();
    return base && eai_workers_start(base, 1) == 0 ? 0 : -1;
}

static int fini(void)
{
    event_base_free(base);
    return 0;
}

static int reg(void)
{
    CU_pSuite s = CU_add_suite("park", init, fini);
    if (!s || !CU_add_test(s, "job on a worker, one answer on the loop, free last", test_park_answers_once) ||
        !CU_add_test(s, "work runs on a worker thread", test_park_on_worker) ||
        !CU_add_test(s, "full queue: 429 rate_limited, job freed", test_full_queue_429) ||
        !CU_add_test(s, "closing a set answers 503 once; the late job only frees", test_set_close) ||
        !CU_add_test(s, "one storage-error mapping", test_storage_mapping) ||
        !CU_add_test(s, "stopped pool: 503", test_stopped_pool_503))
        return -1;
    return 0;
}

EAI_UNIT_MAIN(reg)
