/*
 * HTTP integration test (test_http.c registers the suites): suites "queue" (the per-tenant queue bound under a replayed
 * cancel) and "burst" (400 submissions from 32 threads, none lost).
 */
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http_server.h"

/* ------------------------------------------------------------ suite: queue (issue 16, item 5) */

static const char *held_body = "{\"profile\":\"held\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"]}";

static long post_held(char id[128])
{
    struct th_resp r;
    const char *h[] = {auth_a, "Content-Type: application/json", NULL};
    long st = req("POST", "/v1/sandbox/executions", h, held_body, &r);
    const char *v = json_string_value(json_object_get(r.json, "id"));
    snprintf(id, 128, "%s", v ? v : "");
    th_resp_free(&r);
    return st;
}

static const char *status_of(const char *id, char out[32])
{
    char p[200];
    snprintf(p, sizeof(p), "/v1/sandbox/executions/%s", id);
    struct th_resp r;
    const char *h[] = {auth_a, NULL};
    out[0] = '\0';
    if (req("GET", p, h, NULL, &r) == 200)
        snprintf(out, 32, "%s", json_string_value(json_object_get(r.json, "status")) ?
                                    json_string_value(json_object_get(r.json, "status")) : "");
    th_resp_free(&r);
    return out;
}

static long cancel_with(const char *id, const char *request_id)
{
    char p[200], rid[160];
    snprintf(p, sizeof(p), "/v1/sandbox/executions/%s/cancel", id);
    snprintf(rid, sizeof(rid), "X-Request-Id: %s", request_id);
    const char *h[] = {auth_a, rid, NULL};
    struct th_resp r;
    long st = req("POST", p, h, NULL, &r);
    th_resp_free(&r);
    return st;
}

/* A cancel replayed with the same client-chosen X-Request-Id changes
 * nothing the second time: 409, and the queued count is not decremented
 * again, so max_queued_per_tenant still holds. */
static void test_replayed_cancel_keeps_queue_bound(void)
{
    char run[128], q1[128], q2[128], extra[128], st[32];
    CU_ASSERT_EQUAL_FATAL(post_held(run), 202);
    for (int i = 0; i < 100 && strcmp(status_of(run, st), "running") != 0; i++)
        usleep(50 * 1000);
    CU_ASSERT_STRING_EQUAL_FATAL(st, "running");
    CU_ASSERT_EQUAL(post_held(q1), 202);
    CU_ASSERT_EQUAL(post_held(q2), 202);
    CU_ASSERT_EQUAL(post_held(extra), 429); /* two queued: the cap */
    {   /* that refusal: Retry-After, and its detail in both languages */
        struct th_resp r;
        const char *h[] = {auth_a, "Content-Type: application/json", "Accept-Language: fr", NULL};
        CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h, held_body, &r), 429);
        CU_ASSERT_STRING_EQUAL(th_code(&r), "rate_limited");
        CU_ASSERT_STRING_EQUAL(th_header(&r, "Retry-After") ? th_header(&r, "Retry-After") : "", "5");
        json_t *d0 = json_array_get(json_object_get(json_object_get(r.json, "error"), "details"), 0);
        const char *dfr = json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "fr"));
        CU_ASSERT(dfr && strcmp(dfr, "trop d'exécutions en attente pour ce locataire") == 0);
        th_resp_free(&r);
    }
    /* cancel q1 once, then replay it twice with the same request id */
    CU_ASSERT_EQUAL(cancel_with(q1, "replay-1"), 202);
    CU_ASSERT_STRING_EQUAL(status_of(q1, st), "cancelled");
    CU_ASSERT_EQUAL(cancel_with(q1, "replay-1"), 409);
    CU_ASSERT_EQUAL(cancel_with(q1, "replay-1"), 409);
    CU_ASSERT_EQUAL(cancel_with(q1, "other-id"), 409);
    /* one queued (q2): one more fits, the next is refused */
    CU_ASSERT_EQUAL(post_held(extra), 202);
    CU_ASSERT_EQUAL(post_held(extra), 429);
    /* a running execution: 202; its replay 202 while the stop is under
     * way, 409 once it ended (the double ends it at once) */
    CU_ASSERT_EQUAL(cancel_with(run, "replay-2"), 202);
    long again = cancel_with(run, "replay-2");
    CU_ASSERT(again == 202 || again == 409);
    for (int i = 0; i < 100 && strcmp(status_of(run, st), "cancelled") != 0; i++)
        usleep(50 * 1000);
    CU_ASSERT_STRING_EQUAL(st, "cancelled");
    /* leave nothing held: the slot went to a queued one, which the double
     * would hold through the drain's 30 s (the suite's stop waits 10 s) */
    int left = -1;
    for (int i = 0; i < 100 && left != 0; i++) {
        struct th_resp r;
        const char *h[] = {auth_a, NULL};
        left = 0;
        if (req("GET", "/v1/sandbox/executions?limit=100", h, NULL, &r) == 200) {
            size_t k;
            const json_t *e;
            json_array_foreach(json_object_get(r.json, "items"), k, e) {
                const char *eid = json_string_value(json_object_get(e, "id"));
                const char *est = json_string_value(json_object_get(e, "status"));
                if (eid && est && (strcmp(est, "queued") == 0 || strcmp(est, "running") == 0)) {
                    left++;
                    char rid[64];
                    snprintf(rid, sizeof rid, "cleanup-%d-%zu", i, k);
                    cancel_with(eid, rid);
                }
            }
        } else {
            left = -1;
        }
        th_resp_free(&r);
        if (left)
            usleep(50 * 1000);
    }
    CU_ASSERT_EQUAL(left, 0);
}

/* ------------------------------------------------------------ suite: burst */

/* BURST_N submissions from BURST_CLIENTS threads (issue 15 item 5 without a
 * runtime): a 429 is retried; every 202 has a distinct id and ends terminal;
 * nothing is lost between admission, the queue and the scheduler. */
#define BURST_N 400
#define BURST_CLIENTS 32
static char burst_ids[BURST_N][64];
static int burst_next, burst_accepted, burst_refused, burst_failed;
static pthread_mutex_t burst_mu = PTHREAD_MUTEX_INITIALIZER;

static void *burst_client(void *arg)
{
    (void)arg;
    static const char body[] = "{\"profile\":\"fake\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"]}";
    const char *h[] = {auth_a, "Content-Type: application/json", NULL};
    for (;;) {
        pthread_mutex_lock(&burst_mu);
        int i = burst_next < BURST_N ? burst_next++ : -1;
        pthread_mutex_unlock(&burst_mu);
        if (i < 0)
            return NULL;
        for (int tries = 0;; tries++) {
            struct th_resp r;
            long st = req("POST", "/v1/sandbox/executions", h, body, &r);
            const char *id = json_string_value(json_object_get(r.json, "id"));
            pthread_mutex_lock(&burst_mu);
            if (st == 429 && tries < 600)
                burst_refused++;
            else if (st == 202 && id && strlen(id) < sizeof burst_ids[0])
                snprintf(burst_ids[burst_accepted++], sizeof burst_ids[0], "%s", id);
            else
                burst_failed++;
            pthread_mutex_unlock(&burst_mu);
            th_resp_free(&r);
            if (st != 429 || tries >= 600)
                break;
            usleep(50 * 1000); /* back-pressure: the queue drains meanwhile */
        }
    }
}

static int cmp_id(const void *a, const void *b) { return strcmp(a, b); }

static void test_burst_none_lost(void)
{
    struct th_resp r;
    CU_ASSERT_EQUAL_FATAL(req("GET", "/readyz", NULL, NULL, &r), 200);
    th_resp_free(&r);
    pthread_t th[BURST_CLIENTS];
    int started = 0;
    for (; started < BURST_CLIENTS; started++)
        if (pthread_create(&th[started], NULL, burst_client, NULL) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    CHECK(started == BURST_CLIENTS, "%d client threads", started);
    fprintf(stderr, "  burst: %d accepted, %d answers 429 (retried), %d failed\n", burst_accepted, burst_refused,
            burst_failed);
    CHECK(burst_failed == 0 && burst_accepted == BURST_N, "accepted %d of %d, %d failed", burst_accepted, BURST_N,
          burst_failed);
    CHECK(burst_refused > 0, "a queue of 50 and %d submissions: back-pressure expected", BURST_N);
    qsort(burst_ids, (size_t)burst_accepted, sizeof burst_ids[0], cmp_id);
    int dup = 0;
    for (int i = 1; i < burst_accepted; i++)
        dup += strcmp(burst_ids[i - 1], burst_ids[i]) == 0;
    CHECK(dup == 0, "%d duplicate ids", dup);
    /* every accepted one terminal (the double ends each as it starts) */
    int terminal = 0;
    char st[32] = "";
    for (int i = 0; i < burst_accepted; i++) {
        for (int k = 0; k < 200; k++) {
            status_of(burst_ids[i], st);
            if (*st && strcmp(st, "queued") != 0 && strcmp(st, "running") != 0)
                break;
            usleep(50 * 1000);
        }
        terminal += strcmp(st, "error") == 0;
    }
    CHECK(terminal == burst_accepted, "%d of %d terminal (error, from the double); last %s", terminal,
          burst_accepted, st);
}

/* Streamed stdin on a backend without the stdin_write op (the hold double,
 * ABI of today but no op): refused at submission, 422 at /stdin_mode in
 * both languages; POST .../stdin of an execution without it: 409
 * stdin_not_streamed, another tenant's 404 (docs/executions.md "Input to a
 * running program"). */
static void test_stdin_stream_refused_without_op(void)
{
    struct th_resp r;
    const char *h[] = {auth_a, "Content-Type: application/json", "Accept-Language: fr", NULL};
    const char *body = "{\"profile\":\"held\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],"
                       "\"stdin_mode\":\"stream\"}";
    CU_ASSERT_EQUAL(req("POST", "/v1/sandbox/executions", h, body, &r), 422);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "validation_failed");
    json_t *d0 = json_array_get(json_object_get(json_object_get(r.json, "error"), "details"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d0, "path")) ? json_string_value(json_object_get(d0, "path")) : "",
                           "/stdin_mode");
    const char *dfr = json_string_value(json_object_get(json_object_get(d0, "message_i18n"), "fr"));
    CU_ASSERT(dfr && strstr(dfr, "ne peut pas transmettre") != NULL);
    th_resp_free(&r);

    char run[128], st[32], p[200];
    CU_ASSERT_EQUAL_FATAL(post_held(run), 202);
    for (int i = 0; i < 100 && strcmp(status_of(run, st), "running") != 0; i++)
        usleep(50 * 1000);
    snprintf(p, sizeof p, "/v1/sandbox/executions/%s/stdin", run);
    const char *ho[] = {auth_a, "Content-Type: application/octet-stream", NULL};
    CU_ASSERT_EQUAL(req("POST", p, ho, "x", &r), 409);
    CU_ASSERT_STRING_EQUAL(th_code(&r), "stdin_not_streamed");
    th_resp_free(&r);
    const char *hb[] = {auth_b, "Content-Type: application/octet-stream", NULL};
    CU_ASSERT_EQUAL(req("POST", p, hb, "x", &r), 404);
    th_resp_free(&r);
    CU_ASSERT_EQUAL(cancel_with(run, "stdin-cleanup"), 202);
    for (int i = 0; i < 100 && strcmp(status_of(run, st), "cancelled") != 0; i++)
        usleep(50 * 1000);
    CU_ASSERT_STRING_EQUAL(st, "cancelled");
}

int http_reg_queue(CU_pSuite s)
{
    if (!s ||
        !CU_add_test(s, "stdin_mode stream refused without stdin_write", test_stdin_stream_refused_without_op) ||
        !CU_add_test(s, "replayed cancel keeps the queue bound", test_replayed_cancel_keeps_queue_bound))
        return -1;
    return 0;
}

int http_reg_burst(CU_pSuite s)
{
    if (!s ||
        !CU_add_test(s, "400 submissions from 32 clients: none lost", test_burst_none_lost))
        return -1;
    return 0;
}
