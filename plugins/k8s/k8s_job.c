/*
 * eai-isolation-k8s.so, one execution: its Pod's life as a state machine
 * (k8s.c is the plugin around it: probe, sweep, create, destroy).
 *
 * One execution, one Pod in namespace <namespace_prefix><tenant>:
 *   ensure namespace (+ default-deny NetworkPolicy)   once per tenant
 *   resolve the egress allow list (worker)           when asked
 *   POST Pod -> POST egress NetworkPolicy -> POST input Secret
 *     (the pod waits for its Secret volume, so it cannot start before its
 *      egress policy exists; both are owned by the pod)
 *   poll the Pod with backoff up to poll_ms, and the namespace's watch
 *     (k8s_watch.c): whichever sees the terminal state first
 *   while it runs: usage from the node's kubelet (kubelet_stats)
 *   terminal: read the log, the collect sidecar's files (collector_image),
 *   DELETE the Pod (the garbage collector takes the Secret and the
 *   policy), on_exit.
 * Cancel deletes the pod; our own watchdog (timeout + deadline_grace_ms)
 * backs up activeDeadlineSeconds; API errors end the execution in `error`
 * with the API's message.  recover() finds the pod by label and polls it.
 *
 * Kept whole (about 1100 lines): it is one job, the machine above; its
 * steps, the pod's evaluation and usage sampling all read and write the
 * one struct k8s_job; call_done hands each API answer to its step's handler.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "k8s.h"


enum job_state { JS_NS = 0, JS_NS_RBAC, JS_NS_POLICY, JS_RESOLVE, JS_POD, JS_POD_ADOPT, JS_EGRESS, JS_SECRET,
                 JS_POLL, JS_LOGS, JS_COLLECT, JS_DELETE, JS_RECOVER };

struct k8s_job {
    struct k8s *k;
    struct k8s_job *prev, *next;   /* in the plugin's list */
    struct eai_iso_callbacks cb;
    void *cb_arg;
    char id[96], tenant[96], ns[128], pod[96], uid[64], image[512];
    json_t *pod_body, *secret_data, *egress_rules;
    char **egress;
    const json_t *private_cidrs;   /* the profile's egress_private_cidrs (config-owned) or NULL */
    int64_t timeout_ms, output_bytes, cpu_millis, memory_bytes;
    enum job_state state;
    int busy;                  /* an API call or a worker job is in flight */
    int cancelled, deadline_hit, terminal, exited, pod_created, started, recovering;
    int api_failures;          /* consecutive refusals (4xx) reading the pod */
    int watching;              /* joined its namespace's watch (k8s_watch.c) */
    /* usage sampled from the node's kubelet while the container runs */
    char host_ip[64];
    struct event *usage_timer;
    int usage_busy, usage_samples, usage_off;
    double cpu_ns, mem_peak, mem_sum_mb;
    /* collect through the sidecar (k8s_collector.c) */
    int collecting;
    int64_t collect_log_bytes;
    struct eai_iso_collected *files;
    size_t nfiles;
    int files_truncated;
    struct event *timer, *watchdog;
    long poll_delay;
    int64_t t_start, t_running, t_terminal, waiting_since, c_started, c_finished;
    int64_t outage_since;      /* first of the current run of 0/429/5xx answers to the poll */
    struct eai_iso_result res;
    char errmsg[512];
};

static void job_tick(evutil_socket_t fd, short what, void *arg);

/* ------------------------------------------------------------ job basics */

static void log_job(struct k8s_job *j, enum eai_log_level lvl, const char *fmt, const char *a)
{
    if (!j->k->closing)
        j->k->host->log(j->k->host, K8S_COMPONENT, lvl, "%s: %s%s", j->id, fmt, a ? a : "");
}

static void job_free(struct k8s_job *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else if (j->k->jobs == j)
        j->k->jobs = j->next;
    if (j->next)
        j->next->prev = j->prev;
    if (j->timer)
        event_free(j->timer);
    if (j->watchdog)
        event_free(j->watchdog);
    if (j->usage_timer)
        event_free(j->usage_timer);
    k8s_collect_free(j->files, j->nfiles);
    json_decref(j->pod_body);
    json_decref(j->secret_data);
    json_decref(j->egress_rules);
    if (j->watching)
        k8s_watch_leave(j->k, j->ns);
    for (char **e = j->egress; e && *e; e++)
        free(*e);
    free(j->egress);
    struct k8s *k = j->k;
    free(j);
    k8s_unref(k);
}

static void job_later(struct k8s_job *j, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(j->timer, &tv);
}

static void job_finish(struct k8s_job *j)
{
    if (!j->exited && !j->k->closing) {
        j->exited = 1;
        struct eai_iso_result *r = &j->res;
        int64_t end = j->t_terminal ? j->t_terminal : eai_now_ms();
        int64_t begin = j->t_running ? j->t_running : end;
        double observed = (double)(end - begin) / 1000.0;
        double dur = observed;
        if (j->c_started > 0 && j->c_finished >= j->c_started) {
            /* the API's timestamps have a one-second resolution */
            double c = (double)(j->c_finished - j->c_started) / 1000.0;
            if (c >= 1.0 || observed > c + 1.0)
                dur = c;
        }
        if (dur < 0)
            dur = 0;
        r->duration_s = dur;
        if (j->usage_samples > 0) {
            /* measured by the kubelet (docs/kubernetes.md "Usage figures"): CPU to the
             * last sample, memory = mean working set x duration, peak = largest sample */
            r->cpu_seconds = j->cpu_ns / 1e9;
            r->memory_mb_seconds = dur * j->mem_sum_mb / j->usage_samples;
            r->peak_memory_mb = j->mem_peak / 1048576.0;
            if (!j->k->closing) {
                char m[192];
                snprintf(m, sizeof m, "%d samples, cpu %.3f s, mean working set %.1f MiB, peak %.1f MiB",
                         j->usage_samples, r->cpu_seconds, j->mem_sum_mb / j->usage_samples, r->peak_memory_mb);
                log_job(j, EAI_LOG_INFO, "usage from the kubelet: ", m);
            }
        } else {
            /* reserved, not measured: limits x wall time (docs/kubernetes.md) */
            r->cpu_seconds = dur * (double)j->cpu_millis / 1000.0;
            r->memory_mb_seconds = dur * (double)j->memory_bytes / 1048576.0;
            r->peak_memory_mb = 0;
        }
        if (r->outcome == EAI_OUT_ERROR)
            r->error_message = j->errmsg;
        r->files = j->files;
        r->nfiles = j->nfiles;
        r->files_truncated = j->files_truncated;
        j->cb.on_exit(j->cb_arg, r);
    }
    j->exited = 1;
    if (!j->busy && !j->usage_busy)
        job_free(j);
}

static void set_error(struct k8s_job *j, enum eai_code code, const char *msg)
{
    j->terminal = 1;
    j->res.outcome = EAI_OUT_ERROR;
    j->res.error_code = code;
    j->res.exit_code = -1;
    snprintf(j->errmsg, sizeof j->errmsg, "%s", msg);
    log_job(j, EAI_LOG_WARN, "", msg);
}

static enum eai_code code_for_status(long st)
{
    if (st == 0 || st == 401 || st == 403 || st == 404 || st == 429 || st >= 500)
        return EAI_E_SANDBOX_UNAVAILABLE;
    return EAI_E_SANDBOX_FAILED;
}

static void call_done(void *arg, const struct k8s_result *r);

static int job_call(struct k8s_job *j, enum job_state st, const char *method, const char *path,
                    const json_t *body, unsigned flags)
{
    j->state = st;
    j->busy = 1;
    if (k8s_call(j->k, method, path, body, flags, call_done, j) < 0) {
        j->busy = 0;
        set_error(j, EAI_E_INTERNAL, "out of memory");
        return -1;
    }
    return 0;
}

static void step_delete(struct k8s_job *j)
{
    char path[512];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", j->ns, j->pod);
    json_t *opts = k8s_delete_options();
    int rc = opts ? job_call(j, JS_DELETE, "DELETE", path, opts, K8S_CALL_RETRY) : -1;
    json_decref(opts);
    if (rc < 0)
        job_finish(j);
}

/* End now: delete the pod when there is one, then on_exit. */
static void job_end(struct k8s_job *j)
{
    j->terminal = 1;
    if (!j->t_terminal)
        j->t_terminal = eai_now_ms();
    if (j->pod_created)
        step_delete(j);
    else
        job_finish(j);
}

static void step_logs(struct k8s_job *j)
{
    char path[640];
    if (j->output_bytes > 0)
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/log?container=%s&limitBytes=%lld", j->ns, j->pod,
                 K8S_CONTAINER, (long long)j->output_bytes + 1);
    else
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/log?container=%s", j->ns, j->pod, K8S_CONTAINER);
    if (job_call(j, JS_LOGS, "GET", path, NULL, K8S_CALL_RETRY) < 0)
        job_end(j);
}

/* After the log: the collect sidecar's own log holds the files. */
static void step_collect(struct k8s_job *j)
{
    char path[640];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/log?container=%s&limitBytes=%lld", j->ns, j->pod,
             K8S_COLLECTOR, (long long)j->collect_log_bytes);
    if (job_call(j, JS_COLLECT, "GET", path, NULL, K8S_CALL_RETRY) < 0)
        job_end(j);
}

/* Cancel and watchdog requests, checked whenever the job is between steps.
 * 1 when the job took that path. */
static int interrupted(struct k8s_job *j)
{
    if (j->terminal)
        return 0;
    if (j->cancelled) {
        j->terminal = 1;
        j->res.outcome = EAI_OUT_CANCELLED;
        j->res.exit_code = -1;
        job_end(j);
        return 1;
    }
    if (j->deadline_hit) {
        j->terminal = 1;
        j->t_terminal = eai_now_ms();
        if (j->started) {
            j->res.outcome = EAI_OUT_TIMEOUT;
            j->res.exit_code = -1;
            log_job(j, EAI_LOG_WARN, "the pod outlived its deadline; deleting it", NULL);
            step_logs(j);
        } else {
            char m[256];
            snprintf(m, sizeof m, "the sandbox pod did not start within %lld ms (timeout plus deadline_grace_ms)",
                     (long long)(j->timeout_ms + j->k->cfg.deadline_grace_ms));
            set_error(j, EAI_E_SANDBOX_UNAVAILABLE, m);
            job_end(j);
        }
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ the steps */

static void step_pod(struct k8s_job *j);
static void step_poll(struct k8s_job *j);

static void step_ns(struct k8s_job *j)
{
    if (json_object_get(j->k->tenants_ready, j->tenant)) {
        if (j->egress && j->egress[0]) {
            j->state = JS_RESOLVE;
            job_later(j, 0);
            return;
        }
        step_pod(j);
        return;
    }
    json_t *ns = k8s_namespace_obj(j->ns, j->tenant);
    int rc = ns ? job_call(j, JS_NS, "POST", "/api/v1/namespaces?fieldValidation=Strict", ns, K8S_CALL_RETRY) : -1;
    json_decref(ns);
    if (rc < 0)
        job_end(j);
}

struct resolve_ctx {
    struct k8s_job *j;
    const char *const *egress;
    const json_t *private_cidrs;
    json_t *rules;
    char msg[400];
};

static void resolve_work(void *arg)
{
    struct resolve_ctx *c = arg;
    c->rules = k8s_egress_rules(c->egress, c->private_cidrs, c->msg, sizeof c->msg);
}

static void resolve_done(void *arg)
{
    struct resolve_ctx *c = arg;
    struct k8s_job *j = c->j;
    j->busy = 0;
    json_t *rules = c->rules;
    char msg[400];
    snprintf(msg, sizeof msg, "%s", c->msg);
    free(c);
    if (j->k->closing || j->exited) {
        json_decref(rules);
        job_finish(j);
        return;
    }
    if (interrupted(j)) {
        json_decref(rules);
        return;
    }
    if (!rules) {
        set_error(j, EAI_E_EGRESS_NOT_ALLOWED, msg);
        job_end(j);
        return;
    }
    j->egress_rules = rules;
    step_pod(j);
}

static void step_resolve(struct k8s_job *j)
{
    struct resolve_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        set_error(j, EAI_E_INTERNAL, "out of memory");
        job_end(j);
        return;
    }
    c->j = j;
    c->egress = (const char *const *)j->egress;
    c->private_cidrs = j->private_cidrs;
    j->state = JS_RESOLVE;
    j->busy = 1;
    if (j->k->host->work_submit(j->k->host, resolve_work, resolve_done, c) < 0) {
        j->busy = 0;
        free(c);
        set_error(j, EAI_E_SANDBOX_UNAVAILABLE, "cannot resolve the egress allow list (no worker)");
        job_end(j);
    }
}

static void step_pod(struct k8s_job *j)
{
    char path[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?fieldValidation=Strict", j->ns);
    if (job_call(j, JS_POD, "POST", path, j->pod_body, K8S_CALL_RETRY) < 0)
        job_end(j);
}

static void step_secret(struct k8s_job *j)
{
    char path[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/secrets?fieldValidation=Strict", j->ns);
    json_t *data = j->secret_data;
    j->secret_data = NULL;
    json_t *s = k8s_secret_obj(j->ns, j->pod, j->uid, j->id, j->tenant, data);
    int rc = s ? job_call(j, JS_SECRET, "POST", path, s, K8S_CALL_RETRY) : -1;
    json_decref(s);
    if (rc < 0)
        job_end(j);
}

static void step_egress(struct k8s_job *j)
{
    if (!j->egress_rules) {
        step_secret(j);
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies?fieldValidation=Strict",
             j->ns);
    json_t *rules = j->egress_rules;
    j->egress_rules = NULL;
    json_t *np = k8s_egress_obj(j->ns, j->pod, j->uid, j->id, rules);
    int rc = np ? job_call(j, JS_EGRESS, "POST", path, np, K8S_CALL_RETRY) : -1;
    json_decref(np);
    if (rc < 0)
        job_end(j);
}

static void step_poll(struct k8s_job *j)
{
    char path[256];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", j->ns, j->pod);
    if (job_call(j, JS_POLL, "GET", path, NULL, 0) < 0)
        job_end(j);
}

static void next_poll(struct k8s_job *j)
{
    j->state = JS_POLL;
    if (!j->watching && j->k->cfg.watch) {
        j->watching = 1;
        k8s_watch_join(j->k, j->ns);
    }
    j->poll_delay = j->poll_delay ? j->poll_delay * 2 : 50;
    if (j->poll_delay > j->k->cfg.poll_ms)
        j->poll_delay = j->k->cfg.poll_ms;
    job_later(j, j->poll_delay);
}

static void step_recover(struct k8s_job *j)
{
    char sel[256], esc[512], path[768];
    snprintf(sel, sizeof sel, "%s=%s,%s=%s", K8S_LABEL_MANAGED, K8S_MANAGED_BY, K8S_LABEL_EXEC, j->id);
    k8s_qescape(sel, esc, sizeof esc);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=%s", j->ns, esc);
    if (job_call(j, JS_RECOVER, "GET", path, NULL, K8S_CALL_RETRY) < 0)
        job_end(j);
}

/* ------------------------------------------------------------ pod status */

static const char *jstr2(const json_t *o, const char *a, const char *b)
{
    return json_string_value(json_object_get(json_object_get(o, a), b));
}

/* ------------------------------------------------------------ usage */

/* While the container runs, every usage_interval_ms: the node's kubelet
 * /stats/summary (cumulative CPU, working set of our container).  The
 * kubelet drops a container's stats once it exits, so CPU counts to the
 * last sample; without any sample the figures stay reserved ones. */
static void usage_later(struct k8s_job *j, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(j->usage_timer, &tv);
}

static void usage_done(void *arg, const struct k8s_result *r)
{
    struct k8s_job *j = arg;
    j->usage_busy = 0;
    if (j->exited || j->k->closing) {
        if (!j->busy)
            job_free(j);
        return;
    }
    /* availableBytes can exceed int64 (2^64 - x when unlimited): reals */
    json_t *sum = r->status == 200 ? json_loadb(r->body, r->body_len, JSON_DECODE_INT_AS_REAL, NULL) : NULL;
    if (!sum) {
        j->usage_off = 1;
        log_job(j, EAI_LOG_WARN, "cannot read the kubelet's stats (usage stays limits x duration): ",
                r->message ? r->message : "not a JSON summary");
        return;
    }
    size_t i, k;
    json_t *p, *c;
    json_array_foreach(json_object_get(sum, "pods"), i, p)
    {
        const json_t *ref = json_object_get(p, "podRef");
        const char *n = json_string_value(json_object_get(ref, "name"));
        const char *ns = json_string_value(json_object_get(ref, "namespace"));
        if (!n || !ns || strcmp(n, j->pod) != 0 || strcmp(ns, j->ns) != 0)
            continue;
        json_array_foreach(json_object_get(p, "containers"), k, c)
        {
            if (!json_is_string(json_object_get(c, "name")) ||
                strcmp(json_string_value(json_object_get(c, "name")), K8S_CONTAINER) != 0)
                continue;
            json_t *cpu = json_object_get(json_object_get(c, "cpu"), "usageCoreNanoSeconds");
            json_t *ws = json_object_get(json_object_get(c, "memory"), "workingSetBytes");
            if (!json_is_number(cpu) || !json_is_number(ws))
                break;
            if (json_number_value(cpu) > j->cpu_ns)
                j->cpu_ns = json_number_value(cpu);
            if (json_number_value(ws) > j->mem_peak)
                j->mem_peak = json_number_value(ws);
            j->mem_sum_mb += json_number_value(ws) / 1048576.0;
            j->usage_samples++;
            break;
        }
        break;
    }
    json_decref(sum);
    if (!j->terminal)
        usage_later(j, j->k->cfg.usage_interval_ms);
}

static void usage_tick(evutil_socket_t fd, short what, void *arg)
{
    struct k8s_job *j = arg;
    if (j->exited || j->terminal || j->usage_busy || j->usage_off || j->k->closing)
        return;
    if (!j->host_ip[0]) {
        usage_later(j, j->k->cfg.usage_interval_ms);
        return;
    }
    char url[192];
    int v6 = strchr(j->host_ip, ':') != NULL;
    snprintf(url, sizeof url, "https://%s%s%s:%ld/stats/summary?only_cpu_and_memory=true", v6 ? "[" : "",
             j->host_ip, v6 ? "]" : "", j->k->cfg.kubelet_port);
    j->usage_busy = 1;
    if (k8s_call(j->k, "GET", url, NULL, K8S_CALL_ABS, usage_done, j) < 0)
        j->usage_busy = 0;
}

static void usage_start(struct k8s_job *j)
{
    if (!j->k->cfg.kubelet_stats || j->usage_timer)
        return;
    j->usage_timer = evtimer_new(j->k->host->base, usage_tick, j);
    if (j->usage_timer)
        usage_later(j, 0);
}

/* Read a pod; 1 when it reached a terminal state (j->res set). */
static int evaluate_pod(struct k8s_job *j, const json_t *pod)
{
    const json_t *st = json_object_get(pod, "status");
    const char *phase = json_string_value(json_object_get(st, "phase"));
    const json_t *cs = json_array_get(json_object_get(st, "containerStatuses"), 0);
    const json_t *state = json_object_get(cs, "state");
    const json_t *term = json_object_get(state, "terminated");
    const json_t *wait = json_object_get(state, "waiting");
    const char *uid = jstr2(pod, "metadata", "uid");
    if (uid && !j->uid[0])
        snprintf(j->uid, sizeof j->uid, "%s", uid);
    const char *hip = json_string_value(json_object_get(st, "hostIP"));
    if (hip && !j->host_ip[0] && strlen(hip) < sizeof j->host_ip)
        snprintf(j->host_ip, sizeof j->host_ip, "%s", hip);
    if ((json_object_get(state, "running") || term) && !j->started) {
        j->started = 1;
        j->t_running = eai_now_ms();
        j->cb.on_started(j->cb_arg);
        if (json_object_get(state, "running"))
            usage_start(j);
    }
    if (term) {
        j->c_started = k8s_parse_time_ms(json_string_value(json_object_get(term, "startedAt")));
        j->c_finished = k8s_parse_time_ms(json_string_value(json_object_get(term, "finishedAt")));
    }
    int failed = phase && strcmp(phase, "Failed") == 0;
    if (phase && (failed || strcmp(phase, "Succeeded") == 0)) {
        const char *preason = json_string_value(json_object_get(st, "reason"));
        const char *treason = json_string_value(json_object_get(term, "reason"));
        json_t *ec = json_object_get(term, "exitCode");
        json_t *sig = json_object_get(term, "signal");
        j->terminal = 1;
        j->t_terminal = eai_now_ms();
        j->res.exit_code = json_is_integer(ec) ? (int)json_integer_value(ec) : -1;
        j->res.signal = json_is_integer(sig) ? (int)json_integer_value(sig) : 0;
        if (failed && preason && strcmp(preason, "DeadlineExceeded") == 0) {
            j->res.outcome = EAI_OUT_TIMEOUT;
        } else if (treason && strcmp(treason, "OOMKilled") == 0) {
            j->res.outcome = EAI_OUT_OOM;
        } else if (failed && preason && strcmp(preason, "Evicted") == 0) {
            char m[512];
            const char *pm = json_string_value(json_object_get(st, "message"));
            snprintf(m, sizeof m, "the pod was evicted: %.400s", pm ? pm : "no reason given");
            set_error(j, EAI_E_SANDBOX_FAILED, m);
        } else if (term && json_is_integer(ec)) {
            j->res.outcome = EAI_OUT_EXITED;
        } else {
            char m[512];
            const char *pm = json_string_value(json_object_get(st, "message"));
            snprintf(m, sizeof m, "the pod ended %s without a container exit status%s%.300s", phase,
                     pm ? ": " : "", pm ? pm : "");
            set_error(j, EAI_E_SANDBOX_FAILED, m);
        }
        return 1;
    }
    /* the collect sidecar (an init container) is started first: its image
     * or config errors hold the sandbox container in PodInitializing */
    const json_t *iwait = json_object_get(
        json_object_get(json_array_get(json_object_get(st, "initContainerStatuses"), 0), "state"), "waiting");
    const char *iwr = json_string_value(json_object_get(iwait, "reason"));
    int sidecar = iwr && strcmp(iwr, "PodInitializing") != 0 && strcmp(iwr, "ContainerCreating") != 0;
    if (sidecar)
        wait = iwait;
    const char *wr = json_string_value(json_object_get(wait, "reason"));
    if (wr) {
        int image = !strcmp(wr, "ErrImagePull") || !strcmp(wr, "ImagePullBackOff") ||
                    !strcmp(wr, "InvalidImageName") || !strcmp(wr, "ErrImageNeverPull");
        int config = !strcmp(wr, "CreateContainerConfigError") || !strcmp(wr, "CreateContainerError") ||
                     !strcmp(wr, "RunContainerError");
        if (image || config) {
            int64_t now = eai_now_ms();
            if (!j->waiting_since)
                j->waiting_since = now;
            if (!strcmp(wr, "InvalidImageName") || now - j->waiting_since >= j->k->cfg.image_pull_grace_ms) {
                const char *wm = json_string_value(json_object_get(wait, "message"));
                char m[512];
                if (sidecar)
                    snprintf(m, sizeof m, "the collect sidecar (collector_image %.150s) cannot start (%s): %.250s",
                             j->k->cfg.collector_image ? j->k->cfg.collector_image : "?", wr, wm ? wm : "");
                else if (image)
                    snprintf(m, sizeof m, "image %.200s cannot be pulled (%s)", j->image, wr);
                else
                    snprintf(m, sizeof m, "the container cannot be created (%s): %.300s", wr, wm ? wm : "");
                /* the sidecar's image is the operator's, not the request's */
                set_error(j, image && !sidecar ? EAI_E_IMAGE_MISSING : EAI_E_SANDBOX_FAILED, m);
                return 1;
            }
        } else {
            j->waiting_since = 0;
        }
    }
    return 0;
}

/* A pod read by the poll or delivered by the watch: terminal -> logs (or
 * the end), else the next poll. */
static void pod_read(struct k8s_job *j, const json_t *pod, const char *via)
{
    if (evaluate_pod(j, pod)) {
        log_job(j, EAI_LOG_INFO, "terminal state seen by the ", via);
        if (j->res.outcome == EAI_OUT_ERROR)
            job_end(j);
        else
            step_logs(j);
        return;
    }
    if (interrupted(j))
        return;
    next_poll(j);
}

/* ------------------------------------------------------------ call results */

static void fail_call(struct k8s_job *j, const struct k8s_result *r, const char *what)
{
    char m[512];
    snprintf(m, sizeof m, "Kubernetes API refused %s: %.440s", what, r->message ? r->message : "?");
    set_error(j, code_for_status(r->status), m);
    job_end(j);
}

/* The namespace's default-deny NetworkPolicy: after the namespace (and
 * its RoleBinding when tenant_role is set). */
static void post_default_deny(struct k8s_job *j)
{
    char path[256];
    snprintf(path, sizeof path, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies?fieldValidation=Strict",
             j->ns);
    json_t *np = k8s_default_deny_obj(j->ns);
    int rc = np ? job_call(j, JS_NS_POLICY, "POST", path, np, K8S_CALL_RETRY | K8S_CALL_RETRY_403) : -1;
    json_decref(np);
    if (rc < 0)
        job_end(j);
}

/* JS_NS, JS_NS_RBAC, JS_NS_POLICY: the tenant's namespace, once. */
static void ns_done(struct k8s_job *j, const struct k8s_result *r)
{
    long st = r->status;
    if (interrupted(j))
        return;
    if (j->state == JS_NS) {
        if (st != 201 && st != 409) {
            fail_call(j, r, "the tenant namespace");
            return;
        }
        if (j->k->cfg.tenant_role) {
            /* our rights in the namespace: a RoleBinding (namespaced RBAC) */
            char path[256];
            snprintf(path, sizeof path,
                     "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings?fieldValidation=Strict", j->ns);
            const struct k8s_cfg *c = &j->k->cfg;
            json_t *rb = k8s_rolebinding_obj(j->ns, c->tenant_role, c->sa_namespace, c->sa_name);
            int rc = rb ? job_call(j, JS_NS_RBAC, "POST", path, rb, K8S_CALL_RETRY) : -1;
            json_decref(rb);
            if (rc < 0)
                job_end(j);
            return;
        }
        post_default_deny(j);
        return;
    }
    if (j->state == JS_NS_RBAC) {
        if (st != 201 && st != 409) {
            fail_call(j, r, "the tenant namespace's RoleBinding");
            return;
        }
        post_default_deny(j);
        return;
    }
    if (st != 201 && st != 409) { /* JS_NS_POLICY */
        fail_call(j, r, "the namespace's default-deny NetworkPolicy");
        return;
    }
    json_object_set_new(j->k->tenants_ready, j->tenant, json_true());
    if (j->egress && j->egress[0])
        step_resolve(j);
    else
        step_pod(j);
}

/* JS_POD: the pod created (or a 409: ours from a retried create?). */
static void pod_done(struct k8s_job *j, const struct k8s_result *r)
{
    long st = r->status;
    if (st == 201) {
        j->pod_created = 1;
        const char *uid = r->json ? jstr2(r->json, "metadata", "uid") : NULL;
        snprintf(j->uid, sizeof j->uid, "%s", uid ? uid : "");
        if (interrupted(j))
            return;
        if (!j->uid[0]) {
            set_error(j, EAI_E_SANDBOX_FAILED, "the API server answered the pod without a uid");
            job_end(j);
            return;
        }
        step_egress(j);
        return;
    }
    if (st == 409) {
        /* our own earlier attempt (a retried create), or someone else's pod? */
        char path[256];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", j->ns, j->pod);
        if (job_call(j, JS_POD_ADOPT, "GET", path, NULL, K8S_CALL_RETRY) < 0)
            job_end(j);
        return;
    }
    if (interrupted(j))
        return;
    fail_call(j, r, "the sandbox pod");
}

/* JS_POD_ADOPT: a pod of this name existed: ours (this node's) or not. */
static void pod_adopt_done(struct k8s_job *j, const struct k8s_result *r)
{
    long st = r->status;
    const char *node = r->json ? json_string_value(json_object_get(
                                     json_object_get(json_object_get(r->json, "metadata"), "annotations"),
                                     "eai-sandbox.dev/node")) : NULL;
    const char *uid = r->json ? jstr2(r->json, "metadata", "uid") : NULL;
    if (st == 200 && node && uid && strcmp(node, j->k->host->node_id) == 0) {
        j->pod_created = 1;
        snprintf(j->uid, sizeof j->uid, "%s", uid);
        if (interrupted(j))
            return;
        step_egress(j);
        return;
    }
    if (interrupted(j))
        return;
    set_error(j, EAI_E_SANDBOX_FAILED, "a pod for this execution already exists (created by another process)");
    job_end(j);
}

/* JS_RECOVER: the pod found by label after a restart. */
static void recover_done(struct k8s_job *j, const struct k8s_result *r)
{
    long st = r->status;
    if (interrupted(j))
        return;
    json_t *items = r->json ? json_object_get(r->json, "items") : NULL;
    json_t *pod = json_array_get(items, 0);
    if (st != 200 || !pod) {
        char m[512];
        snprintf(m, sizeof m, "no pod to reattach to after the restart%s%.400s", r->message ? ": " : "",
                 r->message ? r->message : "");
        set_error(j, EAI_E_INTERRUPTED, m);
        job_end(j);
        return;
    }
    const char *name = jstr2(pod, "metadata", "name");
    snprintf(j->pod, sizeof j->pod, "%s", name ? name : j->pod);
    j->pod_created = 1;
    log_job(j, EAI_LOG_INFO, "reattached to pod ", j->pod);
    if (evaluate_pod(j, pod)) {
        if (j->res.outcome == EAI_OUT_ERROR)
            job_end(j);
        else
            step_logs(j);
        return;
    }
    next_poll(j);
}

/* JS_POLL: the pod read; an API outage is waited out for api_outage_grace_ms. */
static void poll_done(struct k8s_job *j, const struct k8s_result *r)
{
    long st = r->status;
    if (st == 200 && r->json) {
        j->api_failures = 0;
        if (j->outage_since) {
            char m[96];
            snprintf(m, sizeof m, "%lld ms", (long long)(eai_now_ms() - j->outage_since));
            log_job(j, EAI_LOG_INFO, "the API server answers again after ", m);
            j->outage_since = 0;
        }
        pod_read(j, r->json, "poll");
        return;
    }
    if (st == 404) {
        if (interrupted(j))
            return;
        j->pod_created = 0;
        set_error(j, j->recovering ? EAI_E_INTERRUPTED : EAI_E_SANDBOX_FAILED,
                  "the sandbox pod was deleted outside eai-sandbox");
        job_end(j);
        return;
    }
    if (interrupted(j))
        return;
    if (st == 0 || st == 429 || st >= 500) {
        /* The API server is away (restarting, overloaded), not the pod:
         * the kubelet runs it and enforces its deadline meanwhile, so
         * keep reading for api_outage_grace_ms (our watchdog still
         * bounds it), logging the start of the outage once. */
        int64_t now = eai_now_ms();
        if (!j->outage_since) {
            j->outage_since = now;
            log_job(j, EAI_LOG_WARN, "the Kubernetes API does not answer; polling on: ", r->message);
        }
        if (now - j->outage_since >= j->k->cfg.api_outage_grace_ms) {
            fail_call(j, r, "reading the sandbox pod");
            return;
        }
    } else if (++j->api_failures >= 5) {
        fail_call(j, r, "reading the sandbox pod");
        return;
    } else {
        log_job(j, EAI_LOG_WARN, "polling the pod failed, retrying: ", r->message);
    }
    j->poll_delay = j->k->cfg.poll_ms;
    next_poll(j);
}

/* JS_LOGS, JS_COLLECT, JS_DELETE: the end, in that order. */
static void end_done(struct k8s_job *j, const struct k8s_result *r)
{
    long st = r->status;
    if (j->state == JS_LOGS) {
        if (st == 200 && r->body_len)
            j->cb.on_output(j->cb_arg, EAI_STREAM_STDOUT, r->body, r->body_len);
        else if (st != 200)
            log_job(j, EAI_LOG_WARN, "cannot read the pod's log: ", r->message);
        if (j->collecting && (j->res.outcome == EAI_OUT_EXITED || j->res.outcome == EAI_OUT_TIMEOUT ||
                              j->res.outcome == EAI_OUT_OOM)) {
            step_collect(j);
            return;
        }
        step_delete(j);
        return;
    }
    if (j->state == JS_COLLECT) {
        char m[256];
        if (st != 200) {
            j->files_truncated = 1;
            log_job(j, EAI_LOG_WARN, "cannot read the collected files: ", r->message);
        } else if (k8s_collect_parse(r->body, r->body_len, &j->files, &j->nfiles, &j->files_truncated, m,
                                     sizeof m) < 0) {
            j->files_truncated = 1; /* what was parsed is kept; the rest is missing, and said so */
            log_job(j, EAI_LOG_WARN, "collected files incomplete: ", m);
        }
        step_delete(j);
        return;
    }
    if (st != 200 && st != 202 && st != 404)
        log_job(j, EAI_LOG_WARN, "cannot delete the pod (sweep will): ", r->message);
    job_finish(j);
}

/* An API call of the job answered: the step its state names goes on. */
static void call_done(void *arg, const struct k8s_result *r)
{
    struct k8s_job *j = arg;
    j->busy = 0;
    if (j->k->closing || j->exited) {
        job_finish(j);
        return;
    }
    long st = r->status;
    switch (j->state) {
    case JS_NS:
    case JS_NS_RBAC:
    case JS_NS_POLICY:
        ns_done(j, r);
        return;
    case JS_POD:
        pod_done(j, r);
        return;
    case JS_POD_ADOPT:
        pod_adopt_done(j, r);
        return;
    case JS_EGRESS:
        if (interrupted(j))
            return;
        if (st != 201 && st != 409) {
            fail_call(j, r, "the egress NetworkPolicy");
            return;
        }
        step_secret(j);
        return;
    case JS_SECRET:
        if (interrupted(j))
            return;
        if (st != 201 && st != 409) {
            fail_call(j, r, "the input Secret");
            return;
        }
        next_poll(j);
        return;
    case JS_RECOVER:
        recover_done(j, r);
        return;
    case JS_POLL:
        poll_done(j, r);
        return;
    case JS_LOGS:
    case JS_COLLECT:
    case JS_DELETE:
        end_done(j, r);
        return;
    case JS_RESOLVE:
        break;
    }
    job_finish(j);
}

/* Timer: the first step, the next poll, or a cancel/deadline to act on. */
static void job_tick(evutil_socket_t fd, short what, void *arg)
{
    struct k8s_job *j = arg;
    if (j->busy || j->exited)
        return;
    if (j->k->closing) {
        job_finish(j);
        return;
    }
    if (interrupted(j))
        return;
    switch (j->state) {
    case JS_NS:
        step_ns(j);
        break;
    case JS_RESOLVE:
        step_resolve(j);
        break;
    case JS_RECOVER:
        step_recover(j);
        break;
    default:
        step_poll(j);
        break;
    }
}

/* The watch saw a pod of ns: the job it belongs to, when that job is
 * between two polls, reads it now (a poll in flight will read it anyway). */
void k8s_pod_seen(struct k8s *k, const char *ns, const json_t *pod)
{
    const char *name = jstr2(pod, "metadata", "name");
    const char *uid = jstr2(pod, "metadata", "uid");
    if (!name || k->closing)
        return;
    for (struct k8s_job *j = k->jobs; j; j = j->next) {
        if (strcmp(j->pod, name) != 0 || strcmp(j->ns, ns) != 0)
            continue;
        if (j->state != JS_POLL || j->busy || j->terminal || j->exited || !j->pod_created || j->cancelled ||
            j->deadline_hit ||
            (j->uid[0] && uid && strcmp(j->uid, uid) != 0))
            return;
        evtimer_del(j->timer);
        j->poll_delay /= 2; /* next_poll doubles it again: the watch does not slow the poll */
        pod_read(j, pod, "watch");
        return;
    }
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    struct k8s_job *j = arg;
    j->deadline_hit = 1;
    if (!j->busy && !j->terminal && !j->exited)
        job_later(j, 0);
}
/* ------------------------------------------------------------ start, cancel, recover */

static struct k8s_job *job_new(struct k8s *k, const struct eai_iso_callbacks *cb, void *cb_arg,
                               int64_t watchdog_ms)
{
    struct k8s_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->k = k;
    j->cb = *cb;
    j->cb_arg = cb_arg;
    j->res.size = sizeof j->res;
    j->res.exit_code = -1;
    j->t_start = eai_now_ms();
    j->timer = evtimer_new(k->host->base, job_tick, j);
    j->watchdog = evtimer_new(k->host->base, on_watchdog, j);
    if (!j->timer || !j->watchdog) {
        if (j->timer)
            event_free(j->timer);
        if (j->watchdog)
            event_free(j->watchdog);
        free(j);
        return NULL;
    }
    if (watchdog_ms > 0) {
        struct timeval tv = {watchdog_ms / 1000, (watchdog_ms % 1000) * 1000};
        evtimer_add(j->watchdog, &tv);
    }
    k8s_ref(k);
    j->next = k->jobs;
    if (k->jobs)
        k->jobs->prev = j;
    k->jobs = j;
    return j;
}

int k8s_job_start(void *self, const struct eai_iso_job *job, const struct eai_iso_callbacks *cb, void *cb_arg,
                     void **handle, struct eai_error **err)
{
    struct k8s *k = self;
    const struct eai_host *h = k->host;
    char ns[128], pod[96];
    if (!job->id || !job->tenant_id || !job->image) {
        return eai_host_error_set(h, err, EAI_E_SANDBOX_FAILED, "k8s: job without id, tenant or image");
    }
    if (k8s_pod_name(job->id, pod, sizeof pod) < 0) {
        return eai_host_error_set(h, err, EAI_E_SANDBOX_FAILED, "k8s: execution id %s is not a valid pod name", job->id);
    }
    if (k8s_namespace_name(k->cfg.ns_prefix, job->tenant_id, ns, sizeof ns) < 0) {
        return eai_host_error_set(h, err, EAI_E_SANDBOX_UNAVAILABLE,
                                  "k8s: namespace '%s' + tenant is not a valid namespace name (63 chars, [a-z0-9-])",
                                  k->cfg.ns_prefix);
    }
    json_t *secret_data = NULL;
    json_t *body = k8s_pod_obj(&k->cfg, job, ns, pod, h->node_id, &secret_data, h, err);
    if (!body)
        return -1;
    struct k8s_job *j = job_new(k, cb, cb_arg, job->timeout_ms > 0 ? job->timeout_ms + k->cfg.deadline_grace_ms : 0);
    if (!j) {
        json_decref(body);
        json_decref(secret_data);
        return eai_host_error_set(h, err, EAI_E_INTERNAL, "k8s: out of memory");
    }
    snprintf(j->id, sizeof j->id, "%s", job->id);
    snprintf(j->tenant, sizeof j->tenant, "%s", job->tenant_id);
    snprintf(j->ns, sizeof j->ns, "%s", ns);
    snprintf(j->pod, sizeof j->pod, "%s", pod);
    snprintf(j->image, sizeof j->image, "%s", job->image);
    j->pod_body = body;
    j->secret_data = secret_data;
    j->private_cidrs = k8s_profile_private_cidrs(&k->cfg, job->profile);
    j->timeout_ms = job->timeout_ms;
    j->output_bytes = job->output_bytes;
    j->cpu_millis = job->cpu_millis;
    j->memory_bytes = job->memory_bytes;
    if (k->cfg.collector_image && job->collect && job->collect[0]) {
        int64_t nf, fb, tb;
        k8s_collect_caps(job, &nf, &fb, &tb);
        j->collecting = 1;
        j->collect_log_bytes = k8s_collect_log_bytes(nf, fb, tb);
    }
    size_t n = 0;
    for (const char *const *e = job->egress; e && *e; e++)
        n++;
    if (n) {
        j->egress = calloc(n + 1, sizeof *j->egress);
        for (size_t i = 0; j->egress && i < n; i++)
            j->egress[i] = strdup(job->egress[i]);
        if (!j->egress || !j->egress[n - 1]) {
            job_free(j);
            return eai_host_error_set(h, err, EAI_E_INTERNAL, "k8s: out of memory");
        }
    }
    j->state = JS_NS;
    job_later(j, 0); /* on_exit never runs inside start() */
    *handle = j;
    return 0;
}

void k8s_job_cancel(void *self, void *handle)
{
    struct k8s_job *j = handle;
    if (!j || j->exited || j->terminal)
        return;
    j->cancelled = 1;
    if (!j->busy)
        job_later(j, 0);
}

int k8s_job_recover(void *self, const json_t *execution, const struct eai_iso_callbacks *cb, void *cb_arg,
                       void **handle, struct eai_error **err)
{
    struct k8s *k = self;
    const char *id = json_string_value(json_object_get(execution, "id"));
    const char *tenant = json_string_value(json_object_get(execution, "tenant_id"));
    char ns[128], pod[96];
    if (!id || !tenant || k8s_pod_name(id, pod, sizeof pod) < 0 ||
        k8s_namespace_name(k->cfg.ns_prefix, tenant, ns, sizeof ns) < 0) {
        return eai_host_error_set(k->host, err, EAI_E_INTERRUPTED, "k8s: execution record without a usable id or tenant");
    }
    json_t *lim = json_object_get(execution, "limits");
    json_int_t tmo_s = json_integer_value(json_object_get(lim, "timeout_s"));
    int64_t wd = tmo_s > 0 ? (int64_t)tmo_s * 1000 + k->cfg.deadline_grace_ms : 0;
    struct k8s_job *j = job_new(k, cb, cb_arg, wd);
    if (!j) {
        return eai_host_error_set(k->host, err, EAI_E_INTERNAL, "k8s: out of memory");
    }
    snprintf(j->id, sizeof j->id, "%s", id);
    snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
    snprintf(j->ns, sizeof j->ns, "%s", ns);
    snprintf(j->pod, sizeof j->pod, "%s", pod);
    const char *image = json_string_value(json_object_get(execution, "image"));
    snprintf(j->image, sizeof j->image, "%s", image ? image : "?");
    j->timeout_ms = tmo_s * 1000;
    json_t *ob = json_object_get(lim, "output_bytes");
    j->output_bytes = json_is_integer(ob) ? json_integer_value(ob) : 1048576;
    j->recovering = 1;
    j->state = JS_RECOVER;
    job_later(j, 0);
    *handle = j;
    return 0;
}

/* destroy(): jobs waiting on a timer go now; those with a call in flight
 * go when it completes (the HTTP client answers every call, also at its end) */
void k8s_jobs_close(struct k8s *k)
{
    struct k8s_job *j = k->jobs;
    while (j) {
        struct k8s_job *n = j->next;
        j->exited = 1;
        if (!j->busy && !j->usage_busy)
            job_free(j);
        j = n;
    }
}
