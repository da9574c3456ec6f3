/* The node-local scheduler (scheduler.h, docs/executions.md). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "obs/audit.h"
#include "config/config.h"
#include "obs/delivery.h"
#include "base/errors.h"
#include "exec/exec_validate.h"
#include "base/log.h"
#include "obs/metrics.h"
#include "exec/scheduler.h"
#include "obs/trace.h"
#include "base/util.h"

#define SCHED_COMPONENT "scheduler"
#define SCHED_IDLE_POLL_MS 1000    /* claim poll when nothing is known to be pending */
#define SCHED_RETRY_MS 1000        /* after a storage error */
#define SCHED_FINISH_RETRY_MS 2000 /* exec_finish failed: keep the lease and retry */


struct eai_run {
    struct eai_run *next;
    struct eai_sched *s;           /* NULL once orphaned by eai_sched_stop */
    json_t *rec;                   /* the claimed record (owned) */
    const char *id, *tenant;       /* inside rec */
    const struct eai_profile *prof;
    struct eai_plugin_inst *iso;
    void *handle;
    int live;                      /* on_exit pending */
    int finishing;                 /* terminal write pending */
    int cancel_sent;
    int recovered;
    struct eai_outbuf out, err;
    int64_t start_ms;
    char started_at[32];
    struct eai_span *span;
    /* the job and what it points to */
    struct eai_iso_job job;
    const char **argv, **envp, **collect, **egress;
    char **env_strs;
    size_t nenv;
    unsigned char *stdin_data;
    struct eai_iso_file *files;
    size_t nfiles;
    char traceparent[56];
};

struct eai_sched {
    struct eai_exec_state *st;
    struct eai_app *app;
    struct eai_run *runs;          /* live and finishing runs */
    int nlive;                     /* slots in use */
    int claim_inflight, claim_again;
    int renew_inflight, stale_inflight;
    struct event *claim_ev, *renew_ev, *stale_ev;
    int64_t lease_ms;
    int stopping;
    int64_t last_claim_error_ms;
};

static void *store_self(const struct eai_app *app) { return app->storage.self; }

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static void timer_in(struct event *ev, int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    event_add(ev, &tv);
}

/* ------------------------------------------------------------ helpers */

/* An audit event written by the scheduler itself (no request). */
static json_t *sched_audit(const json_t *rec, const char *action, const char *decision,
                           const char *reason)
{
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s?, s:s?}",
                           "id", id, "time", now, "actor", "system:scheduler",
                           "action", action, "target", jstr(rec, "id") ? jstr(rec, "id") : "",
                           "decision", decision, "reason", reason,
                           "trace_id", jstr(rec, "trace_id"));
    if (ev) {
        const char *rid = jstr(rec, "request_id");
        json_object_set_new(ev, "request_id", rid ? json_string(rid) : json_null());
    }
    return ev;
}

/* The usage event of API.md "FinOps" for a terminal record. */
static json_t *usage_event(const json_t *rec, const json_t *patch)
{
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    const json_t *u = json_object_get(patch, "usage");
    double cpu = json_number_value(json_object_get(u, "cpu_seconds"));
    double mem = json_number_value(json_object_get(u, "memory_mb_seconds"));
    double dur = json_number_value(json_object_get(u, "duration_s"));
    const char *fin = jstr(patch, "finished_at");
    return json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:f, s:f, s:f, s:s?, s:s?, s:s?, s:s?, s:s}",
                     "id", id, "tenant_id", jstr(rec, "tenant_id"),
                     "project_id", jstr(rec, "project_id"), "agent_id", jstr(rec, "agent_id"),
                     "run_id", jstr(rec, "run_id"), "profile", jstr(rec, "profile"),
                     "backend", jstr(rec, "backend"),
                     "cpu_seconds", cpu, "memory_mb_seconds", mem, "duration_s", dur,
                     "execution_id", jstr(rec, "id"), "trace_id", jstr(rec, "trace_id"),
                     "started_at", jstr(patch, "started_at") ? jstr(patch, "started_at") : jstr(rec, "started_at"),
                     "finished_at", fin ? fin : now, "created_at", now);
}

static void metrics_finish(const json_t *rec, const json_t *patch)
{
    const char *profile = jstr(rec, "profile") ? jstr(rec, "profile") : "";
    const char *status = jstr(patch, "status") ? jstr(patch, "status") : "error";
    char *pe = eai_metrics_label_escape(profile);
    if (!pe)
        return;
    char l2[256], l1[160];
    snprintf(l2, sizeof l2, "profile=\"%s\",status=\"%s\"", pe, status);
    snprintf(l1, sizeof l1, "profile=\"%s\"", pe);
    free(pe);
    const json_t *u = json_object_get(patch, "usage");
    eai_metrics_add("eai_sandbox_executions_total", l2, 1);
    eai_metrics_add("eai_sandbox_cpu_seconds_total", l1, json_number_value(json_object_get(u, "cpu_seconds")));
    eai_metrics_add("eai_sandbox_memory_megabyte_seconds_total", l1,
                    json_number_value(json_object_get(u, "memory_mb_seconds")));
    eai_metrics_observe("eai_sandbox_duration_seconds", l1, json_number_value(json_object_get(u, "duration_s")));
}

static void gauges(struct eai_sched *s)
{
    eai_metrics_set("eai_sandbox_running", NULL, s->nlive);
}

/* ------------------------------------------------------------ finishing */

struct finish_job {
    struct eai_sched *s;
    struct eai_run *run;            /* NULL for an execution without a local run */
    char id[64], tenant[64];
    json_t *patch, *files, *usage, *audit;
    int rc;
    struct eai_error *err;
    struct event *retry_ev;
};

static void run_free(struct eai_run *r);
static void run_unlink(struct eai_sched *s, struct eai_run *r);
static void finish_submit(struct finish_job *j);

static void finish_work(void *arg)
{
    struct finish_job *j = arg;
    struct eai_app *app = j->s->app;
    j->rc = app->store->exec_finish(store_self(app), j->tenant, j->id, j->patch, j->files,
                                    j->usage, j->audit, &j->err);
}

static void finish_job_free(struct finish_job *j)
{
    json_decref(j->patch);
    json_decref(j->files);
    json_decref(j->usage);
    json_decref(j->audit);
    eai_error_free(j->err);
    if (j->retry_ev)
        event_free(j->retry_ev);
    free(j);
}

static void finish_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct finish_job *j = arg;
    struct eai_exec_state *st = j->s->st;
    finish_submit(j);
    eai_exec_state_unref(st); /* the timer's reference */
}

/* Retry j later, holding a reference on the state meanwhile. */
static int finish_later(struct finish_job *j, int64_t ms)
{
    if (j->s->stopping)
        return -1;
    if (!j->retry_ev)
        j->retry_ev = evtimer_new(j->s->app->base, finish_retry_cb, j);
    if (!j->retry_ev)
        return -1;
    eai_exec_state_ref(j->s->st);
    timer_in(j->retry_ev, ms);
    return 0;
}

static void finish_done(void *arg)
{
    struct finish_job *j = arg;
    struct eai_sched *s = j->s;
    if (j->rc < 0 && !s->stopping) {
        eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "execution %s: recording the end failed (%s); retrying",
                j->id, j->err && j->err->message ? j->err->message : "?");
        eai_error_free(j->err);
        j->err = NULL;
        if (finish_later(j, SCHED_FINISH_RETRY_MS) == 0)
            return;
    }
    if (j->rc == EAI_STORE_UPDATED) {
        const json_t *rec = j->run ? j->run->rec : NULL;
        if (rec)
            metrics_finish(rec, j->patch);
        eai_log(SCHED_COMPONENT, EAI_LOG_INFO, "execution %s ended: %s", j->id,
                jstr(j->patch, "status") ? jstr(j->patch, "status") : "?");
        if (!s->stopping)
            eai_delivery_kick(s->app);
    }
    struct eai_run *r = j->run;
    if (r) {
        run_unlink(s, r);
        run_free(r);
    }
    if (!s->stopping) {
        /* terminal (or already terminal elsewhere): wake the waiters */
        eai_exec_notify_status(s->st, j->id, j->tenant, jstr(j->patch, "status"));
        eai_sched_kick(s->st);
    }
    finish_job_free(j);
}

static void finish_submit(struct finish_job *j)
{
    if (eai_exec_submit(j->s->st, finish_work, finish_done, j) == 0)
        return;
    if (finish_later(j, 100) == 0)
        return;
    eai_log(SCHED_COMPONENT, EAI_LOG_ERROR, "execution %s: cannot record its end", j->id);
    if (j->run) {
        run_unlink(j->s, j->run);
        run_free(j->run);
    }
    finish_job_free(j);
}

/* Record the end of rec with patch (stolen) and files (stolen, may be
 * NULL); run may be NULL. */
static void finish_record(struct eai_sched *s, struct eai_run *run, const json_t *rec,
                          json_t *patch, json_t *files)
{
    struct finish_job *j = calloc(1, sizeof *j);
    if (!j || !patch) {
        eai_log(SCHED_COMPONENT, EAI_LOG_ERROR, "out of memory finishing %s", jstr(rec, "id"));
        free(j);
        json_decref(patch);
        json_decref(files);
        if (run) {
            run_unlink(s, run);
            run_free(run);
        }
        return;
    }
    char now[32];
    eai_time_rfc3339(eai_now_ms(), now);
    if (!jstr(patch, "finished_at"))
        json_object_set_new(patch, "finished_at", json_string(now));
    if (!json_object_get(patch, "usage"))
        json_object_set_new(patch, "usage", json_pack("{s:f, s:f, s:f}", "cpu_seconds", 0.0,
                                                      "memory_mb_seconds", 0.0, "duration_s", 0.0));
    for (const char *const *k = (const char *const[]){"stdout", "stderr", NULL}; *k; k++) {
        if (!json_object_get(patch, *k)) {
            char key[32];
            json_object_set_new(patch, *k, json_string(""));
            snprintf(key, sizeof key, "%s_encoding", *k);
            json_object_set_new(patch, key, json_string("utf-8"));
            snprintf(key, sizeof key, "%s_truncated", *k);
            json_object_set_new(patch, key, json_false());
        }
    }
    if (!json_object_get(patch, "exit_code"))
        json_object_set_new(patch, "exit_code", json_null());
    if (!json_object_get(patch, "signal"))
        json_object_set_new(patch, "signal", json_null());
    j->s = s;
    j->run = run;
    snprintf(j->id, sizeof j->id, "%s", jstr(rec, "id") ? jstr(rec, "id") : "");
    snprintf(j->tenant, sizeof j->tenant, "%s", jstr(rec, "tenant_id") ? jstr(rec, "tenant_id") : "");
    j->patch = patch;
    j->files = files;
    j->usage = usage_event(rec, patch);
    j->audit = sched_audit(rec, "sandbox.finish", "allow", jstr(patch, "status"));
    if (run)
        run->finishing = 1;
    finish_submit(j);
}

/* ------------------------------------------------------------ runs */

static void run_unlink(struct eai_sched *s, struct eai_run *r)
{
    if (!s)
        return;
    for (struct eai_run **pp = &s->runs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            r->next = NULL;
            return;
        }
}

static void run_free(struct eai_run *r)
{
    if (!r)
        return;
    eai_outbuf_free(&r->out);
    eai_outbuf_free(&r->err);
    for (size_t i = 0; i < r->nenv; i++)
        free(r->env_strs[i]);
    free(r->env_strs);
    free(r->envp);
    free(r->argv);
    free(r->collect);
    free(r->egress);
    free(r->stdin_data);
    for (size_t i = 0; i < r->nfiles; i++)
        free((void *)r->files[i].data);
    free(r->files);
    if (r->span)
        eai_span_end(r->span, 1);
    json_decref(r->rec);
    free(r);
}

/* NULL-terminated array of the strings of a JSON array (borrowed). */
static const char **str_array(const json_t *a)
{
    size_t n = json_is_array(a) ? json_array_size(a) : 0;
    const char **v = calloc(n + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        v[i] = json_string_value(json_array_get(a, i));
        if (!v[i]) {
            free(v);
            return NULL;
        }
    }
    return v;
}

/* Fill r->job from r->rec; 0 or -1. */
static int run_build_job(struct eai_sched *s, struct eai_run *r)
{
    const json_t *rec = r->rec;
    const struct eai_config *cfg = s->app->cfg;
    struct eai_exec_limits lim;
    if (eai_exec_limits_parse(json_object_get(rec, "limits"), &lim) < 0)
        return -1;
    r->argv = str_array(json_object_get(rec, "command"));
    r->collect = str_array(json_object_get(rec, "collect"));
    const json_t *eg = json_object_get(rec, "egress");
    r->egress = json_array_size(eg) > 0 ? str_array(eg) : NULL;
    if (!r->argv || !r->argv[0] || !r->collect || (json_array_size(eg) > 0 && !r->egress))
        return -1;
    const json_t *env = json_object_get(rec, "env");
    size_t nenv = json_is_object(env) ? json_object_size(env) : 0;
    r->env_strs = calloc(nenv + 1, sizeof *r->env_strs);
    r->envp = calloc(nenv + 1, sizeof *r->envp);
    if (!r->env_strs || !r->envp)
        return -1;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)env, k, v) {
        if (!json_is_string(v))
            continue;
        size_t len = strlen(k) + json_string_length(v) + 2;
        char *e = malloc(len);
        if (!e)
            return -1;
        snprintf(e, len, "%s=%s", k, json_string_value(v));
        r->env_strs[r->nenv] = e;
        r->envp[r->nenv++] = e;
    }
    const json_t *in = json_object_get(rec, "stdin");
    size_t stdin_len = 0;
    if (json_is_string(in)) {
        if (json_is_true(json_object_get(rec, "stdin_b64"))) {
            r->stdin_data = eai_b64_decode(json_string_value(in), &stdin_len);
        } else {
            stdin_len = json_string_length(in);
            r->stdin_data = malloc(stdin_len + 1);
            if (r->stdin_data)
                memcpy(r->stdin_data, json_string_value(in), stdin_len);
        }
        if (!r->stdin_data)
            return -1;
    }
    const json_t *fin = json_object_get(rec, "files_in");
    size_t nf = json_is_array(fin) ? json_array_size(fin) : 0;
    if (nf) {
        r->files = calloc(nf, sizeof *r->files);
        if (!r->files)
            return -1;
        for (size_t i = 0; i < nf; i++) {
            const json_t *f = json_array_get(fin, i);
            size_t len = 0;
            unsigned char *data = eai_b64_decode(jstr(f, "content_b64") ? jstr(f, "content_b64") : "", &len);
            if (!data || !jstr(f, "path")) {
                free(data);
                return -1;
            }
            r->files[i].path = jstr(f, "path");
            r->files[i].data = data;
            r->files[i].len = len;
            r->nfiles++;
        }
    }
    struct eai_iso_job *jb = &r->job;
    memset(jb, 0, sizeof *jb);
    jb->size = sizeof *jb;
    jb->id = r->id;
    jb->tenant_id = r->tenant;
    jb->profile = r->prof->name;
    jb->runtime_class = r->prof->runtime_class;
    jb->image = jstr(rec, "image");
    jb->argv = r->argv;
    jb->env = r->envp;
    jb->stdin_data = r->stdin_data;
    jb->stdin_len = stdin_len;
    jb->files = r->files;
    jb->nfiles = r->nfiles;
    jb->collect = r->collect;
    jb->egress = r->egress;
    jb->traceparent = r->traceparent[0] ? r->traceparent : NULL;
    jb->cpu_millis = lim.cpu_millis;
    jb->memory_bytes = lim.memory_bytes;
    jb->timeout_ms = lim.timeout_s * 1000;
    jb->pids = lim.pids;
    /* one byte past the cap: a backend that stops reading at the cap still
     * shows core that there was more (the *_truncated flags) */
    jb->output_bytes = lim.output_bytes + 1;
    jb->disk_bytes = lim.disk_bytes;
    jb->collect_max_files = cfg ? cfg->collect_max_files : 64;
    jb->collect_max_file_bytes = cfg ? cfg->collect_max_file_bytes : 10 << 20;
    jb->collect_max_total_bytes = cfg ? cfg->collect_max_total_bytes : 32 << 20;
    if (!jb->image)
        return -1;
    eai_outbuf_init(&r->out, (size_t)lim.output_bytes);
    eai_outbuf_init(&r->err, (size_t)lim.output_bytes);
    return 0;
}

/* --- backend callbacks */

static void cb_output(void *arg, enum eai_iso_stream which, const char *data, size_t len)
{
    struct eai_run *r = arg;
    if (!r->s)
        return;
    struct eai_outbuf *b = which == EAI_STREAM_STDERR ? &r->err : &r->out;
    size_t kept = 0;
    eai_outbuf_append(b, data, len, &kept);
    if (kept)
        eai_exec_notify_output(r->s->st, r->id, which, data, kept);
}

static void cb_started(void *arg)
{
    struct eai_run *r = arg;
    if (r->span)
        eai_span_set_int(r->span, "eai.queue_ms", eai_now_ms() - r->start_ms);
}

static json_t *collected_files(const struct eai_iso_result *res)
{
    json_t *a = json_array();
    for (size_t i = 0; a && res->files && i < res->nfiles; i++) {
        const struct eai_iso_collected *f = &res->files[i];
        char sha[65];
        eai_sha256_hex(f->data ? (const void *)f->data : "", f->len, sha);
        char *b64 = eai_b64_encode(f->data ? (const void *)f->data : "", f->len);
        json_t *o = b64 ? json_pack("{s:s, s:I, s:s, s:s}", "path", f->path ? f->path : "",
                                    "size", (json_int_t)f->len, "sha256", sha, "content_b64", b64)
                        : NULL;
        free(b64);
        if (!o || json_array_append_new(a, o) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static void cb_exit(void *arg, const struct eai_iso_result *res)
{
    struct eai_run *r = arg;
    struct eai_sched *s = r->s;
    if (!s) {
        /* orphaned by eai_sched_stop: its end was already recorded */
        run_free(r);
        return;
    }
    r->live = 0;
    s->nlive--;
    gauges(s);
    json_t *patch = eai_exec_result_patch(res);
    json_t *files = collected_files(res);
    if (!patch || !files) {
        json_decref(patch);
        json_decref(files);
        patch = eai_exec_error_patch(EAI_E_SANDBOX_FAILED, "out of memory recording the result");
        files = NULL;
    } else {
        eai_output_encode(patch, "stdout", r->out.data, r->out.len, r->out.truncated);
        eai_output_encode(patch, "stderr", r->err.data, r->err.len, r->err.truncated);
        json_object_set_new(patch, "stdout_truncated", json_boolean(r->out.truncated));
        json_object_set_new(patch, "stderr_truncated", json_boolean(r->err.truncated));
        if (res->files_truncated)
            json_object_set_new(patch, "files_truncated", json_true());
    }
    if (r->span) {
        const char *st = patch ? jstr(patch, "status") : "error";
        eai_span_set_str(r->span, "eai.status", st ? st : "error");
        if (res->exit_code >= 0)
            eai_span_set_int(r->span, "eai.exit_code", res->exit_code);
        eai_span_set_double(r->span, "eai.cpu_seconds", res->cpu_seconds);
        eai_span_end(r->span, st && strcmp(st, "error") == 0);
        r->span = NULL;
    }
    finish_record(s, r, r->rec, patch, files);
    eai_sched_kick(s->st);
}

static const struct eai_iso_callbacks run_callbacks = {
    .size = sizeof(struct eai_iso_callbacks),
    .on_output = cb_output,
    .on_started = cb_started,
    .on_exit = cb_exit,
};

static struct eai_run *run_new(struct eai_sched *s, json_t *rec /* stolen */)
{
    struct eai_run *r = calloc(1, sizeof *r);
    if (!r) {
        json_decref(rec);
        return NULL;
    }
    r->s = s;
    r->rec = rec;
    r->id = jstr(rec, "id");
    r->tenant = jstr(rec, "tenant_id");
    r->start_ms = eai_now_ms();
    return r;
}

static const struct eai_isolation_ops *iso_ops(const struct eai_plugin_inst *iso)
{
    return iso && iso->desc ? (const struct eai_isolation_ops *)iso->desc->ops : NULL;
}

/* Ends an execution that could not (or can no longer) run. */
static void fail_run(struct eai_sched *s, struct eai_run *r, enum eai_code code, const char *why)
{
    eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "execution %s not run: %s (%s)", r->id ? r->id : "?",
            eai_code_name(code), why ? why : "");
    json_t *patch = eai_exec_error_patch(code, NULL);
    r->next = s->runs;
    s->runs = r;
    finish_record(s, r, r->rec, patch, NULL);
}

/* Start one claimed execution (or reattach one when recover is set). */
static void run_start(struct eai_sched *s, json_t *rec /* stolen */, int recover)
{
    struct eai_run *r = run_new(s, rec);
    if (!r)
        return;
    if (!r->id || !r->tenant) {
        eai_log(SCHED_COMPONENT, EAI_LOG_ERROR, "claimed execution without id or tenant");
        run_free(r);
        return;
    }
    r->prof = eai_app_profile(s->app, jstr(rec, "profile"));
    r->iso = r->prof ? r->prof->iso : NULL;
    const struct eai_isolation_ops *ops = iso_ops(r->iso);
    if (!r->prof || !ops) {
        fail_run(s, r, recover ? EAI_E_INTERRUPTED : EAI_E_SANDBOX_UNAVAILABLE,
                 "profile or backend no longer configured");
        return;
    }
    if (recover && !ops->recover) { /* normalised at load: NULL when the backend lacks it */
        fail_run(s, r, EAI_E_INTERRUPTED, "the backend cannot reattach");
        return;
    }
    if (!recover) {
        struct eai_iso_probe pr;
        memset(&pr, 0, sizeof pr);
        pr.size = sizeof pr;
        ops->probe(r->iso->self, &pr);
        /* still probing: start() holds the job until it knows (or fails it) */
        if (!pr.ready && !eai_iso_probe_pending(&pr)) {
            fail_run(s, r, EAI_E_SANDBOX_UNAVAILABLE, pr.reason);
            return;
        }
    }
    /* the sandbox.run span, child of the request's span */
    const char *trace_id = jstr(rec, "trace_id");
    struct eai_trace_ctx tc;
    unsigned flags = 1;
    if (jstr(rec, "traceparent") && eai_traceparent_parse(jstr(rec, "traceparent"), &tc) == 0)
        flags = tc.flags;
    if (trace_id && strlen(trace_id) == 32 && !recover) {
        /* sandbox.schedule: from the POST's record to this claim (queue wait) */
        struct eai_span *sch = eai_span_start("sandbox.schedule", EAI_SPAN_INTERNAL, trace_id,
                                              jstr(rec, "span_id"));
        int64_t created_ms;
        if (sch && jstr(rec, "created_at") && eai_time_parse_rfc3339(jstr(rec, "created_at"), &created_ms) == 0)
            eai_span_set_start_ms(sch, created_ms);
        eai_span_set_str(sch, "gen_ai.operation.name", "execute_tool");
        eai_span_set_str(sch, "eai.tenant_id", r->tenant);
        eai_span_set_str(sch, "eai.execution_id", r->id);
        eai_span_set_str(sch, "eai.run_id", jstr(rec, "run_id"));
        eai_span_set_str(sch, "eai.profile", r->prof->name);
        eai_span_set_str(sch, "eai.node_id", s->app->host->node_id);
        eai_span_end(sch, 0);
    }
    if (trace_id && strlen(trace_id) == 32) {
        r->span = eai_span_start("sandbox.run", EAI_SPAN_INTERNAL, trace_id, jstr(rec, "span_id"));
        if (r->span) {
            eai_span_set_str(r->span, "gen_ai.operation.name", "execute_tool");
            if (jstr(rec, "tool"))
                eai_span_set_str(r->span, "gen_ai.tool.name", jstr(rec, "tool"));
            if (jstr(rec, "agent_id"))
                eai_span_set_str(r->span, "gen_ai.agent.id", jstr(rec, "agent_id"));
            if (jstr(rec, "run_id"))
                eai_span_set_str(r->span, "eai.run_id", jstr(rec, "run_id"));
            eai_span_set_str(r->span, "eai.tenant_id", r->tenant);
            eai_span_set_str(r->span, "eai.execution_id", r->id);
            eai_span_set_str(r->span, "eai.profile", r->prof->name);
            eai_traceparent_format(trace_id, eai_span_id(r->span), flags, r->traceparent);
        }
    }
    if (run_build_job(s, r) < 0) {
        fail_run(s, r, recover ? EAI_E_INTERRUPTED : EAI_E_SANDBOX_FAILED, "cannot build the job");
        return;
    }
    r->recovered = recover;
    r->live = 1;
    r->next = s->runs;
    s->runs = r;
    s->nlive++;
    struct eai_error *err = NULL;
    int rc = recover ? ops->recover(r->iso->self, rec, &run_callbacks, r, &r->handle, &err)
                     : ops->start(r->iso->self, &r->job, &run_callbacks, r, &r->handle, &err);
    if (rc < 0) {
        r->live = 0;
        s->nlive--;
        run_unlink(s, r);
        enum eai_code code = err ? err->code : EAI_E_SANDBOX_FAILED;
        if (recover)
            code = EAI_E_INTERRUPTED;
        else if (code != EAI_E_SANDBOX_UNAVAILABLE && code != EAI_E_IMAGE_MISSING)
            code = EAI_E_SANDBOX_FAILED;
        char why[300];
        snprintf(why, sizeof why, "%s", err && err->message ? err->message : "start failed");
        eai_error_free(err);
        fail_run(s, r, code, why);
        return;
    }
    gauges(s);
    if (!recover)
        eai_log(SCHED_COMPONENT, EAI_LOG_DEBUG, "execution %s started on %s", r->id, r->prof->backend);
    /* cancelled while the claim was in flight: stop it now */
    if (r->live && (json_is_true(json_object_get(rec, "cancel_requested")) ||
                    eai_exec_take_cancel(s->st, r->id)))
        eai_sched_cancel_local(s->st, r->id);
}

/* ------------------------------------------------------------ claiming */

struct claim_job {
    struct eai_sched *s;
    int max, per_tenant;
    json_t *exclude;               /* tenants at their bound (exec_claim_excluding) */
    json_t *out;
    int64_t queued, running;
    int rc, counts_rc;
    struct eai_error *err;
};

static void claim_work(void *arg)
{
    struct claim_job *j = arg;
    struct eai_app *app = j->s->app;
    if (j->exclude)
        j->rc = app->store->exec_claim_excluding(store_self(app), app->host->node_id, j->s->lease_ms,
                                                 j->max, j->per_tenant, j->exclude, &j->out, &j->err);
    else
        j->rc = app->store->exec_claim(store_self(app), app->host->node_id, j->s->lease_ms, j->max,
                                       j->per_tenant, &j->out, &j->err);
    struct eai_error *e2 = NULL;
    j->counts_rc = app->store->exec_counts ? app->store->exec_counts(store_self(app), &j->queued,
                                                                     &j->running, &e2) : -1;
    eai_error_free(e2);
}

static void claim_done(void *arg)
{
    struct claim_job *j = arg;
    struct eai_sched *s = j->s;
    s->claim_inflight = 0;
    size_t n = j->rc == 0 && json_is_array(j->out) ? json_array_size(j->out) : 0;
    if (s->stopping) {
        /* claimed while stopping: the next start recovers them */
        json_decref(j->out);
        json_decref(j->exclude);
        eai_error_free(j->err);
        free(j);
        return;
    }
    if (j->counts_rc == 0)
        eai_metrics_set("eai_sandbox_queued", NULL, (double)j->queued);
    if (j->rc < 0) {
        int64_t now = eai_now_ms();
        if (now - s->last_claim_error_ms > 30000) {
            eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "claim failed: %s",
                    j->err && j->err->message ? j->err->message : "?");
            s->last_claim_error_ms = now;
        }
        timer_in(s->claim_ev, SCHED_RETRY_MS);
    } else {
        for (size_t i = 0; i < n; i++) {
            json_t *rec = json_incref(json_array_get(j->out, i));
            eai_exec_notify_status(s->st, jstr(rec, "id"), jstr(rec, "tenant_id"), "running");
            run_start(s, rec, 0);
        }
        if (s->claim_again || (n > 0 && ((int)n == j->max || j->exclude)))
            eai_sched_kick(s->st);
        else
            timer_in(s->claim_ev, SCHED_IDLE_POLL_MS);
    }
    s->claim_again = 0;
    json_decref(j->out);
    json_decref(j->exclude);
    eai_error_free(j->err);
    free(j);
}

void eai_sched_kick(struct eai_exec_state *st)
{
    struct eai_sched *s = st ? st->sched : NULL;
    if (!s || s->stopping)
        return;
    if (s->claim_inflight) {
        s->claim_again = 1;
        return;
    }
    const struct eai_config *cfg = s->app->cfg;
    int maxc = cfg && cfg->max_concurrent > 0 ? cfg->max_concurrent : 8;
    int per = cfg && cfg->max_per_tenant > 0 ? cfg->max_per_tenant : maxc;
    int free_slots = maxc - s->nlive;
    if (free_slots <= 0) {
        s->claim_again = 0;
        timer_in(s->claim_ev, SCHED_IDLE_POLL_MS);
        return;
    }
    struct claim_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->s = s;
    j->max = free_slots;
    j->per_tenant = per < free_slots ? per : free_slots;
    const struct eai_storage_ops *so = s->app->store;
    if (so->exec_claim_excluding) { /* ABI 1.1; NULL for a 1.0 backend (normalised at load) */
        /* strict per-tenant bound: tenants at it are skipped, the others
         * get at most their remaining room in this claim */
        json_t *count = json_object();
        j->exclude = json_array();
        if (!count || !j->exclude) {
            json_decref(count);
            json_decref(j->exclude);
            free(j);
            return;
        }
        for (struct eai_run *r = s->runs; r; r = r->next)
            if (r->live)
                json_object_set_new(count, r->tenant,
                                    json_integer(json_integer_value(json_object_get(count, r->tenant)) + 1));
        const char *t;
        json_t *c;
        json_object_foreach(count, t, c) {
            int room = per - (int)json_integer_value(c);
            if (room <= 0)
                json_array_append_new(j->exclude, json_string(t));
            else if (room < j->per_tenant)
                j->per_tenant = room;
        }
        json_decref(count);
    }
    s->claim_inflight = 1;
    s->claim_again = 0;
    if (eai_exec_submit(st, claim_work, claim_done, j) < 0) {
        s->claim_inflight = 0;
        free(j);
        timer_in(s->claim_ev, SCHED_RETRY_MS);
    }
}

static void claim_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sched *s = arg;
    eai_sched_kick(s->st);
}

/* ------------------------------------------------------------ leases */

struct renew_job {
    struct eai_sched *s;
    json_t *cancel_ids;
    int rc;
    struct eai_error *err;
};

static void renew_work(void *arg)
{
    struct renew_job *j = arg;
    struct eai_app *app = j->s->app;
    j->rc = app->store->exec_renew(store_self(app), app->host->node_id, j->s->lease_ms,
                                   &j->cancel_ids, &j->err);
}

static void renew_done(void *arg)
{
    struct renew_job *j = arg;
    struct eai_sched *s = j->s;
    s->renew_inflight = 0;
    if (!s->stopping) {
        if (j->rc < 0) {
            eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "lease renewal failed: %s",
                    j->err && j->err->message ? j->err->message : "?");
        } else {
            size_t i;
            const json_t *c;
            json_array_foreach(j->cancel_ids, i, c)
                eai_sched_cancel_local(s->st, jstr(c, "id"));
        }
    }
    json_decref(j->cancel_ids);
    eai_error_free(j->err);
    free(j);
}

static void renew_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sched *s = arg;
    if (s->stopping)
        return;
    timer_in(s->renew_ev, s->lease_ms / 3);
    if (!s->runs || s->renew_inflight)
        return;
    struct renew_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->s = s;
    s->renew_inflight = 1;
    if (eai_exec_submit(s->st, renew_work, renew_done, j) < 0) {
        s->renew_inflight = 0;
        free(j);
    }
}

/* ------------------------------------------------------------ recovery */

struct stale_job {
    struct eai_sched *s;
    int64_t before;
    json_t *out;
    int rc;
    struct eai_error *err;
};

static void stale_work(void *arg)
{
    struct stale_job *j = arg;
    struct eai_app *app = j->s->app;
    j->rc = app->store->exec_stale(store_self(app), j->before, &j->out, &j->err);
}

static void stale_handle(struct eai_sched *s, json_t *list)
{
    size_t i;
    json_t *rec;
    json_array_foreach(list, i, rec) {
        const char *id = jstr(rec, "id");
        if (!id || eai_sched_find(s->st, id))
            continue; /* ours and alive: the next renewal extends it */
        eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "execution %s was left running by %s: recovering",
                id, jstr(rec, "lease_owner") ? jstr(rec, "lease_owner") : "?");
        run_start(s, json_incref(rec), 1);
    }
}

static void stale_done(void *arg)
{
    struct stale_job *j = arg;
    struct eai_sched *s = j->s;
    s->stale_inflight = 0;
    if (!s->stopping) {
        if (j->rc < 0)
            eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "stale lease scan failed: %s",
                    j->err && j->err->message ? j->err->message : "?");
        else
            stale_handle(s, j->out);
    }
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static void stale_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct eai_sched *s = arg;
    if (s->stopping)
        return;
    timer_in(s->stale_ev, s->lease_ms / 2);
    if (s->stale_inflight)
        return;
    struct stale_job *j = calloc(1, sizeof *j);
    if (!j)
        return;
    j->s = s;
    j->before = eai_now_ms();
    s->stale_inflight = 1;
    if (eai_exec_submit(s->st, stale_work, stale_done, j) < 0) {
        s->stale_inflight = 0;
        free(j);
    }
}

/* ------------------------------------------------------------ public */

int eai_iso_probe_pending(const struct eai_iso_probe *pr)
{
    /* core hands backends a zeroed probe of today's size: a 1.0 backend
     * leaves pending 0 */
    return pr->pending != 0;
}

int eai_sched_start(struct eai_app *app, struct eai_exec_state *st, struct eai_error **err)
{
    struct eai_sched *s = calloc(1, sizeof *s);
    if (!s) {
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "out of memory starting the scheduler");
        return -1;
    }
    s->st = st;
    s->app = app;
    s->lease_ms = app->cfg && app->cfg->lease_ms >= 3000 ? app->cfg->lease_ms : 30000;
    s->claim_ev = evtimer_new(app->base, claim_timer_cb, s);
    s->renew_ev = evtimer_new(app->base, renew_timer_cb, s);
    s->stale_ev = evtimer_new(app->base, stale_timer_cb, s);
    if (!s->claim_ev || !s->renew_ev || !s->stale_ev) {
        eai_sched_free(s);
        if (err)
            *err = eai_error_new(EAI_E_INTERNAL, 0, "cannot create scheduler timers");
        return -1;
    }
    st->sched = s;

    /* Recovery.  Executions left running by a dead process: with the
     * embedded SQLite store only this process uses the queue, so every
     * running row at start belongs to a dead process (whatever its lease
     * says).  With a shared store (PostgreSQL) only rows whose lease has
     * ended are stale; the periodic scan catches replicas that die later.
     * This first scan is synchronous: eai_exec_start runs before the loop
     * serves requests, and the queue must be sane before it does. */
    int single = app->storage.desc && app->storage.desc->name &&
                 strcmp(app->storage.desc->name, "sqlite") == 0;
    json_t *stale = NULL;
    struct eai_error *e = NULL;
    if (app->store->exec_stale(store_self(app), single ? INT64_MAX : eai_now_ms(), &stale, &e) < 0) {
        eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "recovery scan failed: %s",
                e && e->message ? e->message : "?");
        eai_error_free(e);
    } else {
        if (json_array_size(stale) > 0)
            eai_log(SCHED_COMPONENT, EAI_LOG_INFO, "recovering %zu execution(s) left running",
                    json_array_size(stale));
        stale_handle(s, stale);
        json_decref(stale);
    }
    timer_in(s->renew_ev, s->lease_ms / 3);
    timer_in(s->stale_ev, s->lease_ms / 2);
    eai_sched_kick(st);
    return 0;
}

void eai_sched_stop(struct eai_exec_state *st)
{
    struct eai_sched *s = st ? st->sched : NULL;
    if (!s || s->stopping)
        return;
    s->stopping = 1;
    event_del(s->claim_ev);
    event_del(s->renew_ev);
    event_del(s->stale_ev);
    /* Live runs: ask the backend to stop them and record them as
     * interrupted now; their callbacks are ignored from here on. */
    struct eai_run *r = s->runs, *next;
    s->runs = NULL;
    for (; r; r = next) {
        next = r->next;
        r->next = NULL;
        if (r->finishing) {
            /* its finish job owns it and frees it */
            continue;
        }
        if (r->live) {
            const struct eai_isolation_ops *ops = iso_ops(r->iso);
            json_t *patch = eai_exec_error_patch(EAI_E_INTERRUPTED, NULL);
            if (patch) {
                eai_output_encode(patch, "stdout", r->out.data, r->out.len, r->out.truncated);
                eai_output_encode(patch, "stderr", r->err.data, r->err.len, r->err.truncated);
                json_object_set_new(patch, "stdout_truncated", json_boolean(r->out.truncated));
                json_object_set_new(patch, "stderr_truncated", json_boolean(r->err.truncated));
                finish_record(s, NULL, r->rec, patch, NULL);
            }
            r->s = NULL; /* orphan: cb_exit frees it */
            if (ops && ops->cancel && !r->cancel_sent) {
                r->cancel_sent = 1;
                ops->cancel(r->iso->self, r->handle);
            }
        } else {
            run_free(r);
        }
    }
    s->nlive = 0;
}

void eai_sched_free(struct eai_sched *s)
{
    if (!s)
        return;
    if (s->claim_ev)
        event_free(s->claim_ev);
    if (s->renew_ev)
        event_free(s->renew_ev);
    if (s->stale_ev)
        event_free(s->stale_ev);
    free(s);
}

int eai_sched_cancel_local(struct eai_exec_state *st, const char *id)
{
    struct eai_sched *s = st ? st->sched : NULL;
    if (!s || !id)
        return 0;
    for (struct eai_run *r = s->runs; r; r = r->next) {
        if (!r->live || strcmp(r->id, id) != 0)
            continue;
        if (!r->cancel_sent) {
            const struct eai_isolation_ops *ops = iso_ops(r->iso);
            r->cancel_sent = 1;
            if (ops && ops->cancel)
                ops->cancel(r->iso->self, r->handle);
        }
        return 1;
    }
    return 0;
}

int eai_sched_running(const struct eai_exec_state *st)
{
    return st && st->sched ? st->sched->nlive : 0;
}

const struct eai_run *eai_sched_find(const struct eai_exec_state *st, const char *id)
{
    if (!st || !st->sched || !id)
        return NULL;
    for (const struct eai_run *r = st->sched->runs; r; r = r->next)
        if (r->id && strcmp(r->id, id) == 0)
            return r;
    return NULL;
}

void eai_sched_run_output(const struct eai_run *r, enum eai_iso_stream which,
                          const char **data, size_t *len)
{
    const struct eai_outbuf *b = which == EAI_STREAM_STDERR ? &r->err : &r->out;
    *data = b->data ? b->data : "";
    *len = b->len;
}
