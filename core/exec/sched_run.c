/* One run (scheduler_int.h): the backend job built from the claimed
 * record, the sandbox.run span, the start, and the backend's callbacks
 * (output to the watch hub; exit hands the result to sched_finish.c). */
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
#include "config/config.h"
#include "exec/budget.h"
#include "exec/exec_result.h"
#include "exec/exec_validate.h"
#include "net/egress_host.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "vol/volume.h"


void sched_run_unlink(struct eai_sched *s, struct eai_run *r)
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

void sched_run_free(struct eai_run *r)
{
    if (!r)
        return;
    sched_run_budget_give(r);
    if (r->egress_lease)
        json_decref(eai_egress_lease_close(r->egress_lease));
    eai_vols_detach(r->s ? r->s->app : NULL, r->vol_att);
    r->vol_att = NULL;
    eai_watch_release(r->live_state);
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
            unsigned char *data = eai_b64_decode(eai_jstr(f, "content_b64") ? eai_jstr(f, "content_b64") : "", &len);
            if (!data || !eai_jstr(f, "path")) {
                free(data);
                return -1;
            }
            r->files[i].path = eai_jstr(f, "path");
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
    jb->image = eai_jstr(rec, "image");
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
    /* the time it waited for the node budget counts against its timeout
     * (sched_budget.c ended it before it was all gone) */
    jb->timeout_ms = lim.timeout_s * 1000 - r->waited_ms;
    if (jb->timeout_ms < 1000 && lim.timeout_s > 0)
        jb->timeout_ms = 1000;
    jb->pids = lim.pids;
    /* one byte past the cap: a backend that stops reading at the cap still
     * shows core that there was more (the *_truncated flags) */
    jb->output_bytes = lim.output_bytes + 1;
    jb->disk_bytes = lim.disk_bytes;
    jb->collect_max_files = cfg ? cfg->collect_max_files : 64;
    jb->collect_max_file_bytes = cfg ? cfg->collect_max_file_bytes : 10 << 20;
    jb->collect_max_total_bytes = cfg ? cfg->collect_max_total_bytes : 32 << 20;
    /* inside a session's sandbox (docs/sessions.md); only a backend with
     * session ops ever sees one: core refused the session otherwise */
    jb->session_id = eai_jstr(rec, "session_id");
    /* ABI 1.4: stdin fed by POST .../stdin (admission checked the backend has stdin_write) */
    jb->stdin_stream = eai_jstr(rec, "stdin_mode") && strcmp(eai_jstr(rec, "stdin_mode"), "stream") == 0;
    if (!jb->image)
        return -1;
    r->output_limit = (size_t)lim.output_bytes;
    return 0;
}

/* --- backend callbacks */

static void cb_output(void *arg, enum eai_iso_stream which, const char *data, size_t len)
{
    struct eai_run *r = arg;
    if (!r->s)
        return;
    eai_watch_output(r->live_state, which, data, len);
}

static void cb_started(void *arg)
{
    struct eai_run *r = arg;
    r->program_ms = eai_now_ms();
    if (r->span)
        eai_span_set_int(r->span, "eai.queue_ms", r->program_ms - r->start_ms);
}

/* Take the collected files out of the result for the worker that hashes
 * and encodes them: the backend frees them when on_exit returns, so they
 * are taken over when it allows it (files_movable: no copy on the loop),
 * else copied (one memcpy; docs/executions.md "Inside").  files_movable is
 * ABI 1.1 and lies where a 1.0 result has its tail padding (abi.lock:
 * `padding eai_iso_result.files_movable`): the size alone cannot tell it
 * from padding, the backend's minor can.  0 or -1. */
static int take_files(const struct eai_iso_result *res, unsigned backend_minor, struct raw_file **out,
                      size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (!res->files || res->nfiles == 0)
        return 0;
    int movable = backend_minor >= 1 && res->size >= EAI_ISO_RESULT_SIZE_1_1 && res->files_movable;
    struct raw_file *raw = calloc(res->nfiles, sizeof *raw);
    if (!raw)
        return -1;
    for (size_t i = 0; i < res->nfiles; i++) {
        const struct eai_iso_collected *f = &res->files[i];
        raw[i].path = strdup(f->path ? f->path : "");
        raw[i].len = f->len;
        if (movable && f->data) {
            raw[i].data = f->data;
            ((struct eai_iso_collected *)f)->data = NULL; /* ours now (isolation.h) */
        } else {
            raw[i].data = malloc(f->len ? f->len : 1);
            if (raw[i].data && f->len)
                memcpy(raw[i].data, f->data, f->len);
        }
        if (!raw[i].path || !raw[i].data) {
            /* taken buffers are freed with the rest: they are ours */
            for (size_t k = 0; k <= i; k++) {
                free(raw[k].path);
                free(raw[k].data);
            }
            free(raw);
            return -1;
        }
    }
    *out = raw;
    *nout = res->nfiles;
    return 0;
}

static void cb_exit(void *arg, const struct eai_iso_result *res)
{
    struct eai_run *r = arg;
    struct eai_sched *s = r->s;
    /* the sandbox is gone: its grant and namespace go now, whatever the end */
    json_t *netlog = r->egress_lease ? eai_egress_lease_close(r->egress_lease) : NULL;
    r->egress_lease = NULL;
    eai_vols_detach(s ? s->app : NULL, r->vol_att); /* the next writer may mount them now */
    r->vol_att = NULL;
    if (!s) {
        json_decref(netlog);
        /* orphaned by eai_sched_stop: its end was already recorded */
        sched_run_free(r);
        return;
    }
    r->live = 0;
    s->nlive--;
    sched_gauges(s);
    sched_run_budget_give(r); /* the sandbox is gone */
    /* runsc's own failure line on the program's stderr: not the program's */
    eai_watch_output_end(r->live_state, res->size >= EAI_ISO_RESULT_SIZE_1_2 ? res->stderr_runtime_bytes : 0);
    json_t *patch = eai_exec_result_patch(res);
    struct raw_file *raw = NULL;
    size_t nraw = 0;
    int encode = 1;
    if (!patch) {
        patch = eai_exec_error_patch(EAI_E_SANDBOX_FAILED, "out of memory recording the result");
        if (patch) /* measured usage is billed whatever else fails */
            json_object_set_new(patch, "usage",
                                json_pack("{s:f, s:f, s:f}", "cpu_seconds", res->cpu_seconds < 0 ? 0 : res->cpu_seconds,
                                          "memory_mb_seconds", res->memory_mb_seconds < 0 ? 0 : res->memory_mb_seconds,
                                          "duration_s", res->duration_s < 0 ? 0 : res->duration_s));
        encode = 0;
    } else if (take_files(res, r->iso && r->iso->desc ? r->iso->desc->abi_minor : 0, &raw, &nraw) < 0) {
        /* the files are lost, not the run: usage and output are kept */
        eai_exec_patch_fail(patch, EAI_E_SANDBOX_FAILED, "out of memory recording the collected files");
    }
    if (patch && netlog)
        json_object_set(patch, "network", netlog); /* the network log, stored with the record */
    /* started_at is when the program started, not when this node took the
     * execution: an execution that waited inside its session for a slot
     * says so (issue 36 12b) */
    if (patch && r->program_ms > 0) {
        char ts[32];
        eai_time_rfc3339(r->program_ms, ts);
        json_object_set_new(patch, "started_at", json_string(ts));
    }
    json_decref(netlog);
    if (r->span) {
        const char *st = patch ? eai_jstr(patch, "status") : "error";
        eai_span_set_str(r->span, "eai.status", st ? st : "error");
        if (res->exit_code >= 0)
            eai_span_set_int(r->span, "eai.exit_code", res->exit_code);
        eai_span_set_double(r->span, "eai.cpu_seconds", res->cpu_seconds);
        eai_span_end(r->span, st && strcmp(st, "error") == 0);
        r->span = NULL;
    }
    /* output and files are encoded on the worker that records the end; the
     * freed slot is claimed again once that end is committed (finish_done):
     * a claim now would race the finish for the write lock */
    sched_finish_record(s, r, r->rec, patch, raw, nraw, encode && res->files_truncated, encode);
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
    r->id = eai_jstr(rec, "id");
    r->tenant = eai_jstr(rec, "tenant_id");
    r->start_ms = eai_now_ms();
    return r;
}

const struct eai_isolation_ops *sched_iso_ops(const struct eai_plugin_inst *iso)
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
    sched_finish_record(s, r, r->rec, patch, NULL, 0, 0, 0);
}

/* Start r on its backend (after its egress namespace, when it has one). */
static void run_launch(struct eai_sched *s, struct eai_run *r, int recover)
{
    const struct eai_isolation_ops *ops = sched_iso_ops(r->iso);
    const json_t *rec = r->rec;
    r->recovered = recover;
    r->live = 1;
    r->live_state = eai_watch_run(s->hub, r->id, r->tenant, r->output_limit);
    if (r->job.size >= EAI_ISO_JOB_SIZE_1_4 && r->job.stdin_stream)
        eai_watch_no_err_hold(r->live_state);
    r->next = s->runs;
    s->runs = r;
    s->nlive++;
    struct eai_error *err = NULL;
    int rc = recover ? ops->recover(r->iso->self, rec, &run_callbacks, r, &r->handle, &err)
                     : ops->start(r->iso->self, &r->job, &run_callbacks, r, &r->handle, &err);
    if (rc < 0) {
        r->live = 0;
        s->nlive--;
        sched_run_unlink(s, r);
        enum eai_code code = err ? err->code : EAI_E_SANDBOX_FAILED;
        if (recover)
            code = EAI_E_INTERRUPTED;
        else if (code != EAI_E_SANDBOX_UNAVAILABLE && code != EAI_E_IMAGE_MISSING &&
                 code != EAI_E_EGRESS_UNSUPPORTED)
            code = EAI_E_SANDBOX_FAILED;
        char why[300];
        snprintf(why, sizeof why, "%s", err && err->message ? err->message : "start failed");
        eai_error_free(err);
        fail_run(s, r, code, why);
        return;
    }
    sched_gauges(s);
    if (!recover)
        eai_log(SCHED_COMPONENT, EAI_LOG_DEBUG, "execution %s started on %s", r->id, r->prof->backend);
    /* cancelled while the claim was in flight: stop it now */
    if (r->live && (json_is_true(json_object_get(rec, "cancel_requested")) ||
                    eai_watch_take_cancel(s->hub, r->id)))
        eai_sched_cancel_local(s, r->id);
}

/* The egress namespace of r is ready (or not): start it, or end it. */
static void lease_ready(void *arg, struct eai_egress_lease *l, const char *why)
{
    struct eai_run *r = arg;
    struct eai_sched *s = r->s;
    r->leasing = 0;
    if (s->stopping) {
        /* eaid stops: the claim's lease lapses and the next start ends it */
        if (l)
            json_decref(eai_egress_lease_close(l));
        sched_run_free(r);
        sched_unref(s);
        return;
    }
    s->nlive--;
    if (!l) {
        char msg[300];
        snprintf(msg, sizeof msg, "network namespace: %s", why ? why : "failed");
        fail_run(s, r, EAI_E_SANDBOX_FAILED, msg);
    } else {
        r->egress_lease = l;
        r->job.netns_path = eai_egress_lease_netns(l);
        r->job.dns_server = eai_egress_lease_dns(l);
        run_launch(s, r, 0);
    }
    sched_unref(s);
}

/* Start one claimed execution (or reattach one when recover is set). */
void sched_run_start(struct eai_sched *s, json_t *rec /* stolen */, int recover, int64_t waited_ms)
{
    struct eai_run *r = run_new(s, rec);
    if (!r)
        return;
    if (!r->id || !r->tenant) {
        eai_log(SCHED_COMPONENT, EAI_LOG_ERROR, "claimed execution without id or tenant");
        sched_run_free(r);
        return;
    }
    r->waited_ms = waited_ms;
    /* its part of the node budget until its end (sched_budget_admit found
     * it fits; a reattached one runs already: it counts whatever the sum) */
    int64_t mem, cpu;
    if (sched_budget_need(s, rec, &mem, &cpu) && eai_budget_force(s->app->budget, r->tenant, mem, cpu) == 0) {
        r->budget = s->app->budget;
        r->bud_memory = mem;
        r->bud_cpu = cpu;
    }
    r->prof = eai_app_profile(s->app, eai_jstr(rec, "profile"));
    r->iso = r->prof ? r->prof->iso : NULL;
    const struct eai_isolation_ops *ops = sched_iso_ops(r->iso);
    if (!r->prof || !ops) {
        fail_run(s, r, recover ? EAI_E_INTERRUPTED : EAI_E_SANDBOX_UNAVAILABLE,
                 "profile or backend no longer configured");
        return;
    }
    if (recover && !ops->recover) { /* normalised at load: NULL when the backend lacks it */
        fail_run(s, r, EAI_E_INTERRUPTED, "the backend cannot reattach");
        return;
    }
    unsigned pr_caps = 0;
    int pr_pending = 0;
    if (!recover) {
        struct eai_iso_probe pr;
        memset(&pr, 0, sizeof pr);
        pr.size = sizeof pr;
        ops->probe(r->iso->self, &pr);
        pr_caps = pr.caps;
        pr_pending = eai_iso_probe_pending(&pr);
        /* still probing: start() holds the job until it knows (or fails it) */
        if (!pr.ready && !eai_iso_probe_pending(&pr)) {
            fail_run(s, r, EAI_E_SANDBOX_UNAVAILABLE, pr.reason);
            return;
        }
    }
    /* queue wait: from the POST's record to this claim, by profile */
    int64_t queued_ms;
    if (!recover && eai_jstr(rec, "created_at") &&
        eai_time_parse_rfc3339(eai_jstr(rec, "created_at"), &queued_ms) == 0) {
        char *pe = eai_metrics_label_escape(r->prof->name);
        char l[200];
        snprintf(l, sizeof l, "profile=\"%s\"", pe ? pe : "");
        free(pe);
        double wait = (double)(eai_now_ms() - queued_ms) / 1000.0;
        eai_metrics_observe("eai_sandbox_queue_wait_seconds", l, wait < 0 ? 0 : wait);
    }
    /* the sandbox.run span, child of the request's span */
    const char *trace_id = eai_jstr(rec, "trace_id");
    struct eai_trace_ctx tc;
    unsigned flags = 1;
    if (eai_jstr(rec, "traceparent") && eai_traceparent_parse(eai_jstr(rec, "traceparent"), &tc) == 0)
        flags = tc.flags;
    if (trace_id && strlen(trace_id) == 32 && !recover) {
        /* sandbox.schedule: from the POST's record to this claim (queue wait) */
        struct eai_span *sch = eai_span_start("sandbox.schedule", EAI_SPAN_INTERNAL, trace_id,
                                              eai_jstr(rec, "span_id"));
        int64_t created_ms;
        if (sch && eai_jstr(rec, "created_at") && eai_time_parse_rfc3339(eai_jstr(rec, "created_at"), &created_ms) == 0)
            eai_span_set_start_ms(sch, created_ms);
        eai_span_set_str(sch, "gen_ai.operation.name", "execute_tool");
        eai_span_set_str(sch, "eai.tenant_id", r->tenant);
        eai_span_set_str(sch, "eai.execution_id", r->id);
        eai_span_set_str(sch, "eai.run_id", eai_jstr(rec, "run_id"));
        eai_span_set_str(sch, "eai.profile", r->prof->name);
        eai_span_set_str(sch, "eai.node_id", s->app->host->node_id);
        eai_span_end(sch, 0);
    }
    if (trace_id && strlen(trace_id) == 32) {
        r->span = eai_span_start("sandbox.run", EAI_SPAN_INTERNAL, trace_id, eai_jstr(rec, "span_id"));
        if (r->span) {
            eai_span_set_str(r->span, "gen_ai.operation.name", "execute_tool");
            if (eai_jstr(rec, "tool"))
                eai_span_set_str(r->span, "gen_ai.tool.name", eai_jstr(rec, "tool"));
            if (eai_jstr(rec, "agent_id"))
                eai_span_set_str(r->span, "gen_ai.agent.id", eai_jstr(rec, "agent_id"));
            if (eai_jstr(rec, "run_id"))
                eai_span_set_str(r->span, "eai.run_id", eai_jstr(rec, "run_id"));
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
    if (json_array_size(json_object_get(rec, "volumes")) > 0) {
        /* its volumes (docs/volumes.md): a read-write one only while no
         * other sandbox writes to it; the sandbox binds them at boot */
        enum eai_code vcode;
        char why[300];
        r->vol_att = eai_vols_attach(s->app, r->tenant, json_object_get(rec, "volumes"), r->id, &vcode, why,
                                     sizeof why);
        if (!r->vol_att) {
            fail_run(s, r, recover ? EAI_E_INTERRUPTED : vcode, why);
            return;
        }
        r->job.volumes = eai_vol_att_mounts(r->vol_att, &r->job.nvolumes);
    }
    if (!recover && r->egress && !(pr_caps & EAI_ISO_CAP_EGRESS)) {
        /* granted egress through core's namespace, DNS and gateway */
        /* still probing: the backend's start() refuses if it turns out unable */
        if (!((pr_caps & EAI_ISO_CAP_EGRESS_NETNS) || pr_pending) || !s->app->egress) {
            fail_run(s, r, EAI_E_EGRESS_UNSUPPORTED, "the backend cannot carry the granted egress");
            return;
        }
        /* a pooled sandbox already booted in a namespace of core's: bind
         * the grant to it and start at once (docs/egress.md, warm pool) */
        if ((pr_caps & EAI_ISO_CAP_EGRESS_POOL) && ops->egress_claim) {
            void *tok = ops->egress_claim(r->iso->self, &r->job);
            const char *why = NULL;
            struct eai_egress_lease *l =
                tok ? eai_egress_lease_bind(s->app->egress, tok, r->id, r->tenant, r->prof->name, r->egress, &why) : NULL;
            if (l) {
                r->egress_lease = l;
                r->job.netns_path = eai_egress_lease_netns(l);
                r->job.dns_server = eai_egress_lease_dns(l);
                run_launch(s, r, 0);
                return;
            }
            if (tok) {
                /* never run unbound: the namespace goes, the backend's
                 * claimed sandbox is never started (its claim lapses) */
                eai_log(SCHED_COMPONENT, EAI_LOG_WARN, "%s: pooled egress sandbox not bound (%s): cold start",
                        r->id, why ? why : "?");
                eai_egress_ns_release(s->app->egress, tok);
            }
        }
        r->leasing = 1;
        s->nlive++;
        s->refs++;
        if (eai_egress_lease_open(s->app->egress, r->id, r->tenant, r->prof->name, r->egress, lease_ready, r) < 0) {
            r->leasing = 0;
            s->nlive--;
            s->refs--;
            fail_run(s, r, EAI_E_SANDBOX_FAILED, "no network namespace for the granted egress");
        }
        return;
    }
    run_launch(s, r, recover);
}

