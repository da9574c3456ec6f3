/* The end of a run (scheduler_int.h): the output and the collected files
 * are encoded and hashed on a worker, which writes the terminal record in
 * one transaction (exec_finish, usage outbox row, audit sandbox.finish)
 * and builds the record handed to the watch hub. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "exec/scheduler_int.h"
#include "base/errors.h"
#include "base/log.h"
#include "base/util.h"
#include "exec/exec_result.h"
#include "obs/callback.h"
#include "net/egress_host.h"
#include "obs/delivery.h"
#include "obs/metrics.h"
#include "record/exec_record.h"

/* ------------------------------------------------------------ helpers */

/* An audit event written by the scheduler itself (no request). */
static json_t *sched_audit_event(const json_t *rec, const char *action, const char *decision,
                           const char *reason)
{
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s?, s:s?}",
                           "id", id, "time", now, "actor", "system:scheduler",
                           "action", action, "target", eai_jstr(rec, "id") ? eai_jstr(rec, "id") : "",
                           "decision", decision, "reason", reason,
                           "trace_id", eai_jstr(rec, "trace_id"));
    if (ev) {
        const char *rid = eai_jstr(rec, "request_id");
        json_object_set_new(ev, "request_id", rid ? json_string(rid) : json_null());
    }
    return ev;
}

/* The usage event of API.md "FinOps" for a terminal record. */
static json_t *sched_usage_event(const json_t *rec, const json_t *patch)
{
    char id[37], now[32];
    eai_uuid_v4(id);
    eai_time_rfc3339(eai_now_ms(), now);
    const json_t *u = json_object_get(patch, "usage");
    double cpu = json_number_value(json_object_get(u, "cpu_seconds"));
    double mem = json_number_value(json_object_get(u, "memory_mb_seconds"));
    double dur = json_number_value(json_object_get(u, "duration_s"));
    const char *fin = eai_jstr(patch, "finished_at");
    json_t *ev = json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:f, s:f, s:f, s:s?, s:s?, s:s?, s:s?, s:s}",
                     "id", id, "tenant_id", eai_jstr(rec, "tenant_id"),
                     "project_id", eai_jstr(rec, "project_id"), "agent_id", eai_jstr(rec, "agent_id"),
                     "run_id", eai_jstr(rec, "run_id"), "profile", eai_jstr(rec, "profile"),
                     "backend", eai_jstr(rec, "backend"),
                     "cpu_seconds", cpu, "memory_mb_seconds", mem, "duration_s", dur,
                     "execution_id", eai_jstr(rec, "id"), "trace_id", eai_jstr(rec, "trace_id"),
                     "started_at",
                     eai_jstr(patch, "started_at") ? eai_jstr(patch, "started_at") : eai_jstr(rec, "started_at"),
                     "finished_at", fin ? fin : now, "created_at", now);
    if (ev && eai_jstr(rec, "session_id"))
        json_object_set_new(ev, "session_id", json_string(eai_jstr(rec, "session_id")));
    return ev;
}

static void sched_metrics_finish(const json_t *rec, const json_t *patch)
{
    const char *profile = eai_jstr(rec, "profile") ? eai_jstr(rec, "profile") : "";
    const char *status = eai_jstr(patch, "status") ? eai_jstr(patch, "status") : "error";
    char *pe = eai_metrics_label_escape(profile);
    if (!pe)
        return;
    char l2[320], l1[160];
    const char *code = eai_jstr(json_object_get(patch, "error"), "code");
    if (strcmp(status, "error") == 0 && code && strlen(code) < 48 && !strpbrk(code, "\"\\\n"))
        snprintf(l2, sizeof l2, "profile=\"%s\",status=\"%s\",code=\"%s\"", pe, status, code);
    else
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

/* ------------------------------------------------------------ finishing */


struct finish_job {
    struct eai_sched *s;
    struct eai_run *run;            /* NULL for an execution without a local run */
    char id[64], tenant[64];
    json_t *patch, *files, *usage, *audit;
    json_t *callback;               /* its callback's outbox event (built once: a stable id) */
    /* encoded on the worker (first attempt only): output of run->live and raw files */
    int encode_output;
    struct raw_file *raw;
    size_t nraw;
    int files_truncated;
    const json_t *rec;              /* the claimed record (run's, or lent for the job) */
    json_t *rec_own;                /* rec when the job owns it */
    json_t *terminal;               /* the record as stored, built on the worker */
    int rc;
    int attempts;                   /* failed exec_finish calls so far */
    struct eai_error *err;
    struct event *retry_ev;
};

/* After this many failed attempts with collected files, the end is
 * recorded without them: the run's usage and output are never held
 * hostage by its files. */
#define SCHED_FINISH_FILES_TRIES 3

static void finish_submit(struct finish_job *j);

static void raw_free(struct finish_job *j)
{
    for (size_t i = 0; i < j->nraw; i++) {
        free(j->raw[i].path);
        free(j->raw[i].data);
    }
    free(j->raw);
    j->raw = NULL;
    j->nraw = 0;
}

/* Hash and base64 of the collected files: [{path, size, sha256, content_b64}]. */
static json_t *encode_files(const struct raw_file *raw, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        const struct raw_file *f = &raw[i];
        char sha[65];
        eai_sha256_hex(f->data ? (const void *)f->data : "", f->len, sha);
        char *b64 = eai_b64_encode(f->data ? (const void *)f->data : "", f->len);
        const char *path = f->path ? f->path : "";
        /* a name that is not UTF-8 cannot be a JSON string: percent-encoded */
        int raw_name = !eai_utf8_valid(path, strlen(path));
        char *enc = raw_name ? eai_name_percent_encode(path) : NULL;
        json_t *o = b64 && (!raw_name || enc)
                        ? json_pack("{s:s, s:I, s:s, s:s}", "path", enc ? enc : path, "size", (json_int_t)f->len,
                                    "sha256", sha, "content_b64", b64)
                        : NULL;
        if (o && enc)
            json_object_set_new(o, "name_encoding", json_string("percent"));
        free(enc);
        free(b64);
        if (!o || json_array_append_new(a, o) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* The stored record after exec_finish, for the waiters: the public fields
 * of rec made terminal by the record module's merge, as storage did
 * (exec_record.h).  Built from copies (rec is only read). */
static json_t *terminal_record(const json_t *rec, const json_t *patch, const json_t *files)
{
    static const char *const keep[] = {"id", "tenant_id", "profile", "backend", "image", "command",
                                       "limits", "tool", "project_id", "agent_id", "run_id",
                                       "trace_id", "created_at", "started_at", "egress",
                                       "lease_owner", "files_truncated", "session_id", "callback"};
    json_t *t = json_object();
    for (size_t i = 0; t && i < sizeof keep / sizeof keep[0]; i++) {
        const json_t *v = json_object_get(rec, keep[i]);
        if (v)
            json_object_set_new(t, keep[i], json_deep_copy(v));
    }
    char now[32];
    eai_time_rfc3339(eai_now_ms(), now);
    if (t && eai_exec_record_terminal(t, patch, files, "error", now, NULL) < 0) {
        json_decref(t);
        return NULL;
    }
    return t;
}

static void finish_work(void *arg)
{
    struct finish_job *j = arg;
    struct eai_app *app = j->s->app;
    if (j->encode_output && j->run && j->run->live_state) {
        /* the run exited: its output no longer changes; read-only here */
        for (int k = 0; k < 2; k++) {
            enum eai_iso_stream st = k ? EAI_STREAM_STDERR : EAI_STREAM_STDOUT;
            const char *key = k ? "stderr" : "stdout";
            const char *d;
            size_t n;
            int trunc;
            eai_watch_output_get(j->run->live_state, st, &d, &n, &trunc);
            eai_output_encode(j->patch, key, d, n, trunc);
            json_object_set_new(j->patch, k ? "stderr_truncated" : "stdout_truncated", json_boolean(trunc));
        }
        /* the order of the events of the stream, for a replay after the end (sse.h) */
        json_t *order = eai_watch_output_events(j->run->live_state);
        if (order)
            json_object_set_new(j->patch, "output_events", order);
        j->encode_output = 0;
    }
    if (j->raw) {
        j->files = encode_files(j->raw, j->nraw);
        raw_free(j);
        if (!j->files)
            eai_exec_patch_fail(j->patch, EAI_E_SANDBOX_FAILED, "out of memory recording the collected files");
    }
    if (j->files_truncated && j->patch)
        json_object_set_new(j->patch, "files_truncated", json_true());
    if (!j->callback && j->rec && json_object_get(j->rec, "callback") && j->patch) {
        json_t *t = terminal_record(j->rec, j->patch, j->files);
        j->callback = t ? eai_cb_event(j->rec, t) : NULL;
        json_decref(t);
    }
    /* the usage event and the callback event: rows of one outbox, one transaction */
    json_t *events = j->callback && j->usage ? json_pack("[O, O]", j->usage, j->callback) : NULL;
    j->rc = app->store->exec_finish(sched_store_self(app), j->tenant, j->id, j->patch, j->files,
                                    events ? events : j->usage, j->audit, &j->err);
    json_decref(events);
    if (j->rc == EAI_STORE_UPDATED && j->rec)
        j->terminal = terminal_record(j->rec, j->patch, j->files);
    if (j->rc >= 0) {
        /* recorded: the encoded files (up to the collect cap) are freed
         * here rather than on the loop */
        json_decref(j->files);
        j->files = NULL;
    }
}

static void finish_job_free(struct finish_job *j)
{
    json_decref(j->patch);
    json_decref(j->files);
    json_decref(j->usage);
    json_decref(j->callback);
    json_decref(j->audit);
    json_decref(j->terminal);
    json_decref(j->rec_own);
    raw_free(j);
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
    struct eai_sched *s = j->s;
    finish_submit(j);
    sched_unref(s); /* the timer's reference */
}

/* Retry j later, holding a reference on the scheduler meanwhile. */
static int finish_later(struct finish_job *j, int64_t ms)
{
    if (j->s->stopping)
        return -1;
    if (!j->retry_ev)
        j->retry_ev = evtimer_new(j->s->app->base, finish_retry_cb, j);
    if (!j->retry_ev)
        return -1;
    j->s->refs++;
    sched_timer_in(j->retry_ev, ms);
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
        if (++j->attempts >= SCHED_FINISH_FILES_TRIES && json_array_size(j->files) > 0) {
            eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "execution %s: recording it without its collected files",
                    j->id);
            json_decref(j->files);
            j->files = NULL;
            eai_exec_patch_fail(j->patch, EAI_E_SANDBOX_FAILED, "the collected files could not be stored");
            json_decref(j->audit);
            j->audit = sched_audit_event(j->rec, "sandbox.finish", "allow", "error");
        }
        if (finish_later(j, SCHED_FINISH_RETRY_MS) == 0)
            return;
    }
    if (j->rc == EAI_STORE_UPDATED) {
        if (j->rec)
            sched_metrics_finish(j->rec, j->patch);
        eai_log(SCHED_COMPONENT, EAI_LOG_INFO, "execution %s ended: %s", j->id,
                eai_jstr(j->patch, "status") ? eai_jstr(j->patch, "status") : "?");
        if (!s->stopping)
            eai_delivery_kick(s->app);
    }
    if (!s->stopping) {
        /* terminal (or already terminal elsewhere: the waiters re-read it) */
        eai_watch_status(s->hub, j->id, j->tenant, eai_jstr(j->patch, "status"),
                         j->rc == EAI_STORE_UPDATED ? j->terminal : NULL);
    }
    struct eai_run *r = j->run;
    if (r) {
        sched_run_unlink(s, r);
        sched_run_free(r);
    }
    if (!s->stopping)
        eai_sched_kick(s);
    finish_job_free(j);
}

static void finish_submit(struct finish_job *j)
{
    if (sched_submit(j->s, finish_work, finish_done, j) == 0)
        return;
    if (finish_later(j, 100) == 0)
        return;
    eai_log(SCHED_COMPONENT, EAI_LOG_ERROR, "execution %s: cannot record its end", j->id);
    if (j->run) {
        sched_run_unlink(j->s, j->run);
        sched_run_free(j->run);
    }
    finish_job_free(j);
}

/* (scheduler_int.h) */
void sched_finish_record(struct eai_sched *s, struct eai_run *run, const json_t *rec, json_t *patch,
                          struct raw_file *raw, size_t nraw, int files_truncated, int encode_output)
{
    struct finish_job *j = calloc(1, sizeof *j);
    if (!j || !patch) {
        eai_log(SCHED_COMPONENT, EAI_LOG_ERROR, "out of memory finishing %s", eai_jstr(rec, "id"));
        free(j);
        json_decref(patch);
        for (size_t i = 0; i < nraw; i++) {
            free(raw[i].path);
            free(raw[i].data);
        }
        free(raw);
        if (run) {
            sched_run_unlink(s, run);
            sched_run_free(run);
        }
        return;
    }
    j->raw = raw;
    j->nraw = nraw;
    j->files_truncated = files_truncated;
    j->encode_output = encode_output && run && run->live_state;
    char now[32];
    eai_time_rfc3339(eai_now_ms(), now);
    if (!eai_jstr(patch, "finished_at"))
        json_object_set_new(patch, "finished_at", json_string(now));
    if (!json_object_get(patch, "usage"))
        json_object_set_new(patch, "usage", json_pack("{s:f, s:f, s:f}", "cpu_seconds", 0.0,
                                                      "memory_mb_seconds", 0.0, "duration_s", 0.0));
    for (const char *const *k = (const char *const[]){"stdout", "stderr", NULL}; *k && !j->encode_output; k++) {
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
    if (run) {
        j->rec = run->rec;
    } else {
        j->rec_own = json_deep_copy(rec);
        j->rec = j->rec_own;
    }
    snprintf(j->id, sizeof j->id, "%s", eai_jstr(rec, "id") ? eai_jstr(rec, "id") : "");
    snprintf(j->tenant, sizeof j->tenant, "%s", eai_jstr(rec, "tenant_id") ? eai_jstr(rec, "tenant_id") : "");
    j->patch = patch;
    j->usage = sched_usage_event(rec, patch);
    j->audit = sched_audit_event(rec, "sandbox.finish", "allow", eai_jstr(patch, "status"));
    if (j->audit && json_object_get(patch, "network")) {
        /* the egress policy decisions, aggregated (docs/egress.md) */
        json_t *eg = eai_egress_log_audit(json_object_get(patch, "network"));
        if (eg)
            json_object_set_new(j->audit, "egress", eg);
    }
    if (run)
        run->finishing = 1;
    finish_submit(j);
}

