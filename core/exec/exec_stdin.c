/* POST /v1/sandbox/executions/{id}/stdin: input to a running program
 * started with stdin_mode "stream" (docs/executions.md, "Input to a running
 * program").  On the loop: the bytes go to the backend's stdin_write op
 * (ABI 1.4), which never blocks and holds at most EAI_ISO_STDIN_BUFFER
 * bytes the program has not read (past that: 429 stdin_busy, retry).  An
 * execution this node does not run is looked up in storage on a worker to
 * answer 404 / 409 / 429. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exec/exec_int.h"
#include "base/errors.h"
#include "base/util.h"
#include "exec/exec_result.h"
#include "exec/scheduler.h"
#include "http/http_util.h"
#include "http/park.h"
#include "http/req_audit.h"

static const char *const busy_headers[] = {"Retry-After: 1", NULL};

static void reply_refusal(struct eai_app *app, struct eai_req *r, const char *id, enum eai_code code,
                          const char *detail)
{
    exec_audit_deny(app, r, "sandbox.stdin", id, eai_code_name(code));
    json_t *d = detail ? exec_detail1("", detail) : NULL;
    exec_reply_error_headers(r, code, d, code == EAI_E_STDIN_BUSY ? busy_headers : NULL);
}

/* ------------------------------------------------------------ not local: storage */

struct stdin_job {
    struct eai_app *app;
    char tenant[64], id[64];
    json_t *out;
    int rc;
    struct eai_error *err;
};

static void stdin_work(void *arg)
{
    struct stdin_job *j = arg;
    j->rc = j->app->store->exec_get(j->app->storage.self, j->tenant, j->id, &j->out, &j->err);
}

static void stdin_answer(struct eai_req *r, void *arg)
{
    struct stdin_job *j = arg;
    if (!r)
        return;
    if (j->rc < 0) {
        exec_reply_storage_error(r, "exec_get", j->err);
        return;
    }
    if (!j->out) {
        exec_audit_deny(j->app, r, "sandbox.stdin", j->id, "not_found");
        eai_reply_error(r, EAI_E_NOT_FOUND, NULL);
        return;
    }
    const char *mode = eai_jstr(j->out, "stdin_mode");
    const char *status = eai_jstr(j->out, "status");
    if (!mode || strcmp(mode, "stream") != 0)
        reply_refusal(j->app, r, j->id, EAI_E_STDIN_NOT_STREAMED, NULL);
    else if (!status || eai_exec_status_terminal(status))
        reply_refusal(j->app, r, j->id, EAI_E_ALREADY_FINISHED, NULL);
    else if (strcmp(status, "queued") == 0)
        reply_refusal(j->app, r, j->id, EAI_E_STDIN_BUSY, "the execution is queued: it has not started yet");
    else
        /* running, but not here: another replica runs it (or it starts
         * here right now); the input must reach the node running it */
        reply_refusal(j->app, r, j->id, EAI_E_STDIN_BUSY,
                      "the execution is not running on this server yet (or runs on another replica)");
}

static void stdin_free(void *arg)
{
    struct stdin_job *j = arg;
    json_decref(j->out);
    eai_error_free(j->err);
    free(j);
}

static const struct eai_park_ops stdin_ops = {
    .what = "exec_stdin", .work = stdin_work, .answer = stdin_answer, .free = stdin_free,
};

/* ------------------------------------------------------------ the body */

static int flag_true(const char *v)
{
    return v && (!strcmp(v, "true") || !strcmp(v, "1"));
}

/* The bytes and eof of the request: 0, or -1 when answered. *data is
 * malloc'd (free it) or points into the request (*owned 0). */
static int parse_body(struct eai_app *app, struct eai_req *r, const char *id, const unsigned char **data,
                      size_t *len, int *eof, unsigned char **owned)
{
    const char *ct = eai_req_header(r, "Content-Type");
    *owned = NULL;
    if (!ct || strncasecmp(ct, "application/octet-stream", 24) == 0) {
        size_t n = 0;
        const char *b = eai_req_body(r, &n);
        const char *q = eai_req_query(r, "eof");
        if (q && strcmp(q, "true") && strcmp(q, "false") && strcmp(q, "1") && strcmp(q, "0")) {
            exec_audit_deny(app, r, "sandbox.stdin", id, "validation_failed");
            eai_reply_error(r, EAI_E_VALIDATION_FAILED, exec_detail1("eof", "must be true or false"));
            return -1;
        }
        *data = (const unsigned char *)(b ? b : "");
        *len = b ? n : 0;
        *eof = flag_true(q);
        return 0;
    }
    if (strncasecmp(ct, "application/json", 16) != 0) {
        exec_audit_deny(app, r, "sandbox.stdin", id, "unsupported_media_type");
        eai_reply_error(r, EAI_E_UNSUPPORTED_MEDIA_TYPE,
                        exec_detail1("Content-Type", "must be application/octet-stream or application/json"));
        return -1;
    }
    json_t *body = eai_req_body_json(r, 0);
    if (!body)
        return -1; /* answered 400 */
    json_t *d = json_array();
    const char *k;
    json_t *v;
    if (!json_is_object(body)) {
        json_array_append_new(d, json_pack("{s:s, s:s}", "path", "", "message", "must be an object"));
    } else {
        json_object_foreach(body, k, v) {
            if (strcmp(k, "data") && strcmp(k, "data_b64") && strcmp(k, "eof")) {
                char p[80];
                snprintf(p, sizeof p, "/%.60s", k);
                json_array_append_new(d, json_pack("{s:s, s:s}", "path", p, "message", "is not allowed (unknown property)"));
            }
        }
        json_t *t = json_object_get(body, "data"), *b = json_object_get(body, "data_b64"),
               *e = json_object_get(body, "eof");
        if (t && !json_is_string(t))
            json_array_append_new(d, json_pack("{s:s, s:s}", "path", "/data", "message", "must be a string"));
        if (b && !json_is_string(b))
            json_array_append_new(d, json_pack("{s:s, s:s}", "path", "/data_b64", "message", "must be a string"));
        if (t && b)
            json_array_append_new(d, json_pack("{s:s, s:s}", "path", "/data_b64", "message",
                                               "give data or data_b64, not both"));
        if (e && !json_is_boolean(e))
            json_array_append_new(d, json_pack("{s:s, s:s}", "path", "/eof", "message", "must be a boolean"));
        if (json_array_size(d) == 0) {
            *eof = json_is_true(e);
            if (json_is_string(b)) {
                size_t n = 0;
                unsigned char *x = eai_b64_decode(json_string_value(b), &n);
                if (!x)
                    json_array_append_new(d, json_pack("{s:s, s:s}", "path", "/data_b64", "message",
                                                       "is not valid base64"));
                *owned = x;
                *data = x;
                *len = n;
            } else if (json_is_string(t)) {
                size_t n = json_string_length(t);
                unsigned char *x = malloc(n + 1);
                if (x)
                    memcpy(x, json_string_value(t), n);
                *owned = x;
                *data = x;
                *len = x ? n : 0;
            } else {
                *data = (const unsigned char *)"";
                *len = 0;
            }
        }
    }
    json_decref(body);
    if (json_array_size(d) > 0) {
        free(*owned);
        *owned = NULL;
        exec_audit_deny(app, r, "sandbox.stdin", id, "validation_failed");
        eai_reply_error(r, EAI_E_VALIDATION_FAILED, d);
        return -1;
    }
    json_decref(d);
    return 0;
}

void eai_exec_route_stdin(struct eai_app *app, struct eai_req *r)
{
    struct eai_exec *st = exec_route_state(app, r);
    if (!st)
        return;
    const char *id = exec_route_id(app, r, "sandbox.stdin");
    if (!id)
        return;
    const char *tenant = eai_req_tenant(r);
    const unsigned char *data = NULL;
    size_t len = 0;
    int eof = 0;
    unsigned char *owned = NULL;
    if (parse_body(app, r, id, &data, &len, &eof, &owned) < 0)
        return;
    if (len > EAI_ISO_STDIN_BUFFER) {
        free(owned);
        exec_audit_deny(app, r, "sandbox.stdin", id, "payload_too_large");
        char msg[128];
        snprintf(msg, sizeof msg, "%zu bytes; one call carries at most %d", len, EAI_ISO_STDIN_BUFFER);
        eai_reply_error(r, EAI_E_PAYLOAD_TOO_LARGE, exec_detail1("", msg));
        return;
    }
    size_t pending = 0;
    struct eai_error *err = NULL;
    int local = eai_sched_stdin(st->sched, tenant, id, data, len, eof, &pending, &err);
    free(owned);
    if (!local) {
        struct stdin_job *j = calloc(1, sizeof *j);
        if (!j) {
            eai_reply_error(r, EAI_E_INTERNAL, NULL);
            return;
        }
        j->app = app;
        snprintf(j->tenant, sizeof j->tenant, "%s", tenant);
        snprintf(j->id, sizeof j->id, "%s", id);
        eai_park(st->parks, r, &stdin_ops, j);
        return;
    }
    if (err) {
        enum eai_code code = err->code;
        if (code != EAI_E_STDIN_BUSY && code != EAI_E_STDIN_CLOSED && code != EAI_E_STDIN_NOT_STREAMED)
            code = EAI_E_STDIN_CLOSED;
        char detail[300];
        snprintf(detail, sizeof detail, "%s", err->message ? err->message : "");
        eai_error_free(err);
        reply_refusal(app, r, id, code, detail[0] ? detail : NULL);
        return;
    }
    char reason[64];
    snprintf(reason, sizeof reason, "bytes=%zu eof=%s", len, eof ? "true" : "false");
    json_t *ev = eai_req_audit_event(r, "sandbox.stdin", id, "allow", reason);
    if (ev)
        eai_req_audit_async(app, tenant, ev);
    eai_reply_json(r, 200, json_pack("{s:s, s:I, s:b, s:I}", "id", id, "written", (json_int_t)len, "eof", eof,
                                     "pending", (json_int_t)pending));
}
