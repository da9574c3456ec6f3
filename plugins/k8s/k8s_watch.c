/*
 * The pods of each tenant namespace with live jobs, watched (issue 28).
 *
 * The host's HTTP client hands a response over only when it is complete
 * (host->http_request has no streaming callback), so a watch here is a
 * bounded long poll: GET ...pods?watch=1&resourceVersion=RV&timeoutSeconds=T
 * returns after T seconds with every event of that window, one JSON object a
 * line; the next round resumes from the last resourceVersion seen (an event's
 * or a BOOKMARK's).  Events reach the jobs (k8s_pod_seen) at the end of a
 * round, so the per-pod poll stays as the fallback and keeps its pace: the
 * first of the two to see a terminal state ends the job.
 *
 *   no resourceVersion  -> LIST the namespace's sandbox pods (label
 *                          managed-by), every item to the jobs, RV = the list's
 *   RV                  -> WATCH from RV for watch_timeout_s
 *   410 Gone (HTTP status, or an ERROR event with code 410: the RV was
 *   compacted away in etcd or is older than the API server's watch cache)
 *                       -> forget RV, LIST again, WATCH from the new RV
 *   0 / 429 / 5xx       -> the API server is away (restarting): keep RV, retry
 *                          with backoff 500 ms doubling to 5 s
 *   any other refusal   -> the same backoff, keeping RV (an API server just
 *                          restarted answers 403 until its RBAC cache is primed)
 * Every round is bounded: timeoutSeconds on the server, timeoutSeconds +
 * api_timeout_ms on our side, the response at most the HTTP client's cap.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "k8s.h"

struct k8s_watch {
    struct k8s *k;
    struct k8s_watch *next;
    char ns[128];
    char rv[64];               /* resume from here; "" = list first */
    int users;                 /* live jobs of the namespace */
    int busy;                  /* a LIST or WATCH in flight */
    int listing;
    long backoff_ms;
    int64_t outage_since;
    int64_t round_start;        /* rounds start >= 250 ms apart (a server that ignores timeoutSeconds) */
    unsigned long rounds, events, gone;
    struct event *timer;
};

static void watch_round(struct k8s_watch *w);

static void wlog(struct k8s_watch *w, enum eai_log_level lvl, const char *what, const char *detail)
{
    if (!w->k->closing)
        w->k->host->log(w->k->host, K8S_COMPONENT, lvl, "watch of pods in %s: %s%.400s", w->ns, what,
                        detail ? detail : "");
}

static void watch_free(struct k8s_watch *w)
{
    struct k8s *k = w->k;
    for (struct k8s_watch **p = &k->watches; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    if (w->timer)
        event_free(w->timer);
    free(w);
    k8s_unref(k);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct k8s_watch *w = arg;
    if (w->users <= 0 || w->k->closing) {
        watch_free(w);
        return;
    }
    watch_round(w);
}

static void again(struct k8s_watch *w, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(w->timer, &tv);
}

/* The API server is away or refused: retry later, keeping RV for 0/429/5xx. */
static void round_failed(struct k8s_watch *w, const struct k8s_result *r)
{
    long st = r->status;
    if (st == 0 || st == 429 || st >= 500) {
        if (!w->outage_since) {
            w->outage_since = eai_now_ms();
            wlog(w, EAI_LOG_WARN, "the API server does not answer; retrying from the same resourceVersion: ",
                 r->message);
        }
        w->backoff_ms = w->backoff_ms ? w->backoff_ms * 2 : 500;
        if (w->backoff_ms > 5000)
            w->backoff_ms = 5000;
        again(w, w->backoff_ms);
        return;
    }
    /* e.g. 403 from an API server just restarted whose RBAC cache is not
     * primed yet: keep the resourceVersion (only 410 or a broken answer
     * makes us relist) */
    wlog(w, EAI_LOG_WARN, "refused; retrying from the same resourceVersion: ", r->message);
    w->backoff_ms = w->backoff_ms ? w->backoff_ms * 2 : 500;
    if (w->backoff_ms > 5000)
        w->backoff_ms = 5000;
    again(w, w->backoff_ms);
}

static void set_rv(struct k8s_watch *w, const json_t *obj)
{
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (rv && strlen(rv) < sizeof w->rv)
        snprintf(w->rv, sizeof w->rv, "%s", rv);
}

/* One watch event line; 1 when it was a 410 (the caller relists). */
static int watch_event(struct k8s_watch *w, const json_t *ev)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *obj = json_object_get(ev, "object");
    if (!type || !obj)
        return 0;
    if (!strcmp(type, "ERROR")) {
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        const char *m = json_string_value(json_object_get(obj, "message"));
        char d[400];
        snprintf(d, sizeof d, "%lld %.300s", (long long)code, m ? m : "");
        if (code == 410)
            return 1;
        wlog(w, EAI_LOG_WARN, "error event, listing again: ", d);
        w->rv[0] = '\0';
        return 0;
    }
    set_rv(w, obj);
    if (!strcmp(type, "BOOKMARK"))
        return 0;
    w->events++;
    if (strcmp(type, "DELETED") != 0) /* a deleted pod: the poll's 404 says how */
        k8s_pod_seen(w->k, w->ns, obj);
    return 0;
}

static void gone(struct k8s_watch *w, const char *why)
{
    w->gone++;
    char d[512];
    snprintf(d, sizeof d, "resourceVersion %s: %.400s; relisting (%lu so far)", w->rv, why, w->gone);
    wlog(w, EAI_LOG_INFO, "410 Gone from ", d);
    w->rv[0] = '\0';
}

static void round_done(void *arg, const struct k8s_result *r)
{
    struct k8s_watch *w = arg;
    w->busy = 0;
    if (w->users <= 0 || w->k->closing) {
        watch_free(w);
        return;
    }
    w->rounds++;
    if (r->status == 410) {
        /* the LIST or WATCH itself answered 410 Gone */
        const char *m = r->json ? json_string_value(json_object_get(r->json, "message")) : NULL;
        gone(w, m ? m : "410");
        again(w, 0);
        return;
    }
    if (r->status != 200) {
        round_failed(w, r);
        return;
    }
    if (w->outage_since) {
        char d[64];
        snprintf(d, sizeof d, "%lld ms", (long long)(eai_now_ms() - w->outage_since));
        wlog(w, EAI_LOG_INFO, "the API server answers again after ", d);
        w->outage_since = 0;
    }
    w->backoff_ms = 0;
    int64_t gap = 250 - (eai_now_ms() - w->round_start);
    long next = gap > 0 ? (long)gap : 0;
    if (w->listing) {
        if (!r->json) {
            wlog(w, EAI_LOG_WARN, "the pod list is not JSON; listing again in 5 s", NULL);
            again(w, 5000);
            return;
        }
        set_rv(w, r->json);
        size_t i;
        json_t *pod;
        json_array_foreach(json_object_get(r->json, "items"), i, pod)
            k8s_pod_seen(w->k, w->ns, pod);
        if (!w->rv[0]) {
            wlog(w, EAI_LOG_WARN, "the pod list has no resourceVersion; listing again in 5 s", NULL);
            again(w, 5000);
            return;
        }
        char d[160];
        snprintf(d, sizeof d, "%zu pods at resourceVersion %s; watching from there",
                 json_array_size(json_object_get(r->json, "items")), w->rv);
        wlog(w, EAI_LOG_INFO, "listed ", d);
        again(w, next);
        return;
    }
    /* one JSON event a line */
    const char *p = r->body, *end = r->body + r->body_len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (len) {
            json_t *ev = json_loadb(p, len, 0, NULL);
            int is_gone = ev && watch_event(w, ev);
            if (is_gone) {
                const char *m = json_string_value(json_object_get(json_object_get(ev, "object"), "message"));
                gone(w, m ? m : "ERROR 410");
            }
            json_decref(ev);
            if (is_gone || w->users <= 0)
                break;
        }
        p += len + 1;
    }
    if (w->users <= 0) {
        watch_free(w);
        return;
    }
    again(w, next);
}

static void watch_round(struct k8s_watch *w)
{
    struct k8s *k = w->k;
    char sel[128], esc[256], path[768];
    snprintf(sel, sizeof sel, "%s=%s", K8S_LABEL_MANAGED, K8S_MANAGED_BY);
    k8s_qescape(sel, esc, sizeof esc);
    long timeout = 0;
    w->listing = !w->rv[0];
    if (w->listing) {
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=%s", w->ns, esc);
    } else {
        snprintf(path, sizeof path,
                 "/api/v1/namespaces/%s/pods?labelSelector=%s&watch=1&allowWatchBookmarks=true"
                 "&resourceVersion=%s&timeoutSeconds=%ld",
                 w->ns, esc, w->rv, k->cfg.watch_timeout_s);
        timeout = k->cfg.watch_timeout_s * 1000 + k->cfg.api_timeout_ms;
    }
    w->busy = 1;
    w->round_start = eai_now_ms();
    if (k8s_call_timeout(k, "GET", path, NULL, 0, timeout, round_done, w) < 0) {
        w->busy = 0;
        again(w, 1000);
    }
}

void k8s_watch_join(struct k8s *k, const char *ns)
{
    if (!k->cfg.watch || k->closing)
        return;
    for (struct k8s_watch *w = k->watches; w; w = w->next) {
        if (!strcmp(w->ns, ns)) {
            if (w->users++ == 0 && !w->busy && !evtimer_pending(w->timer, NULL))
                again(w, 0);
            return;
        }
    }
    struct k8s_watch *w = calloc(1, sizeof *w);
    if (!w)
        return; /* the poll alone */
    w->k = k;
    snprintf(w->ns, sizeof w->ns, "%s", ns);
    w->timer = evtimer_new(k->host->base, on_timer, w);
    if (!w->timer) {
        free(w);
        return;
    }
    w->users = 1;
    k8s_ref(k);
    w->next = k->watches;
    k->watches = w;
    again(w, 0);
}

void k8s_watch_leave(struct k8s *k, const char *ns)
{
    for (struct k8s_watch *w = k->watches; w; w = w->next) {
        if (strcmp(w->ns, ns) != 0)
            continue;
        if (--w->users <= 0 && !w->busy)
            watch_free(w); /* a round in flight frees it when it answers */
        return;
    }
}

void k8s_watch_stop_all(struct k8s *k)
{
    struct k8s_watch *w = k->watches;
    while (w) {
        struct k8s_watch *n = w->next;
        w->users = 0;
        if (!w->busy)
            watch_free(w);
        w = n;
    }
}
