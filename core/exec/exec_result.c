/* Output buffers, output encoding and status mapping (exec_result.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errors.h"
#include "exec/exec_result.h"
#include "obs/callback.h"
#include "net/egress_host.h"
#include "base/util.h"
#include "record/exec_record.h"

void eai_outbuf_init(struct eai_outbuf *b, size_t limit)
{
    memset(b, 0, sizeof *b);
    b->limit = limit;
}

int eai_outbuf_append(struct eai_outbuf *b, const char *d, size_t n, size_t *kept)
{
    size_t room = b->limit > b->len ? b->limit - b->len : 0;
    size_t take = n < room ? n : room;
    b->seen += n;
    if (take < n)
        b->truncated = 1;
    if (kept)
        *kept = 0;
    if (take == 0)
        return 0;
    if (b->len + take > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + take)
            cap *= 2;
        if (cap > b->limit)
            cap = b->limit;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->truncated = 1;
            return -1;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, d, take);
    b->len += take;
    if (kept)
        *kept = take;
    return 0;
}

void eai_outbuf_free(struct eai_outbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* Length of an incomplete (but so far well-formed) UTF-8 sequence at the
 * end of d, 0 when none. */
static size_t partial_tail(const char *d, size_t n)
{
    const unsigned char *p = (const unsigned char *)d;
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned c = p[n - back];
        if ((c & 0xc0) == 0x80)
            continue; /* continuation byte: look further back */
        size_t need = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

/* Bytes of d as a JSON string body: control bytes become \u00XX (6) or a
 * two-byte escape, '"' and '\\' two; everything else as is. */
static size_t json_escaped_len(const char *d, size_t n)
{
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)d[i];
        if (c == '"' || c == '\\' || c == '\n' || c == '\t' || c == '\r' || c == '\b' || c == '\f')
            out += 2;
        else if (c < 0x20)
            out += 6;
        else
            out += 1;
    }
    return out;
}

int eai_output_encode(json_t *rec, const char *key, const char *d, size_t n, int cut_partial)
{
    char enc_key[64];
    snprintf(enc_key, sizeof enc_key, "%s_encoding", key);
    if (!d)
        d = "";
    size_t use = n;
    if (!eai_utf8_valid(d, n) && cut_partial) {
        size_t tail = partial_tail(d, n);
        if (tail && eai_utf8_valid(d, n - tail))
            use = n - tail;
    }
    json_t *v, *enc;
    /* text that JSON escaping would more than double (control bytes: 6x
     * each) is stored and served as base64 (4/3): a stream of control
     * bytes must not inflate every read of it (issue 16.3); quotes and
     * newlines (2x) alone never get there */
    if (eai_utf8_valid(d, use) && json_escaped_len(d, use) <= 2 * use) {
        v = json_stringn_nocheck(d, use);
        enc = json_string("utf-8");
    } else {
        char *b = eai_b64_encode(d, n);
        v = b ? json_string(b) : NULL;
        free(b);
        enc = json_string("base64");
    }
    if (!v || !enc || json_object_set_new(rec, key, v) < 0) {
        json_decref(enc);
        return -1;
    }
    return json_object_set_new(rec, enc_key, enc);
}

char *eai_name_percent_encode(const char *name)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(name);
    char *out = malloc(n * 3 + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (*p > 0x20 && *p < 0x7f && *p != '%') {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

const char *eai_exec_outcome_status(const struct eai_iso_result *res)
{
    switch (res->outcome) {
    case EAI_OUT_EXITED:
        return res->exit_code == 0 && res->signal == 0 ? "succeeded" : "failed";
    case EAI_OUT_TIMEOUT:
        return "timeout";
    case EAI_OUT_OOM:
        return "oom_killed";
    case EAI_OUT_CANCELLED:
        return "cancelled";
    default:
        return "error";
    }
}

json_t *eai_exec_error_patch(enum eai_code code, const char *message)
{
    if (code == EAI_OK || code >= EAI_CODE_MAX)
        code = EAI_E_SANDBOX_FAILED;
    return json_pack("{s:s, s:{s:s, s:s}}", "status", "error", "error",
                     "code", eai_code_name(code),
                     "message", message && *message ? message : eai_code_message(code, "en"));
}

int eai_exec_patch_fail(json_t *patch, enum eai_code code, const char *message)
{
    json_t *e = eai_exec_error_patch(code, message);
    if (!patch || !e) {
        json_decref(e);
        return -1;
    }
    int rc = json_object_update(patch, e);
    json_decref(e);
    return rc;
}

json_t *eai_exec_result_patch(const struct eai_iso_result *res)
{
    const char *status = eai_exec_outcome_status(res);
    json_t *p;
    if (res->outcome == EAI_OUT_ERROR || res->outcome >= EAI_OUT_MAX) {
        p = eai_exec_error_patch(res->error_code, res->error_message);
    } else {
        p = json_pack("{s:s, s:n}", "status", status, "error");
    }
    if (!p)
        return NULL;
    /* exit code and signal are facts of the program's own end; for a run
     * the platform stopped (timeout, OOM, cancel) they are kept when the
     * backend reported them, null otherwise. */
    json_object_set_new(p, "exit_code", res->exit_code >= 0 ? json_integer(res->exit_code) : json_null());
    json_object_set_new(p, "signal", res->signal > 0 ? json_integer(res->signal) : json_null());
    json_t *u = json_pack("{s:f, s:f, s:f}", "cpu_seconds", res->cpu_seconds < 0 ? 0 : res->cpu_seconds,
                          "memory_mb_seconds", res->memory_mb_seconds < 0 ? 0 : res->memory_mb_seconds,
                          "duration_s", res->duration_s < 0 ? 0 : res->duration_s);
    if (!u || json_object_set_new(p, "usage", u) < 0) {
        json_decref(p);
        return NULL;
    }
    return p;
}

int eai_exec_status_terminal(const char *s)
{
    return eai_exec_record_is_terminal(s);   /* the record's statuses have one list */
}

json_t *eai_exec_view(const json_t *rec)
{
    static const char *const copy[] = {"id", "status", "profile", "backend", "image", "command",
                                       "limits", "exit_code", "signal", "stdout", "stderr",
                                       "stdout_truncated", "stderr_truncated", "stdout_encoding",
                                       "stderr_encoding", "usage", "error", "tool", "project_id",
                                       "agent_id", "run_id", "trace_id", "created_at",
                                       "started_at", "finished_at"};
    json_t *v = json_object();
    if (!v)
        return NULL;
    for (size_t i = 0; i < sizeof copy / sizeof copy[0]; i++) {
        json_t *x = json_object_get(rec, copy[i]);
        json_object_set(v, copy[i], x ? x : json_null());
    }
    for (const char *const *k = (const char *const[]){"stdout", "stderr", NULL}; *k; k++) {
        char key[32];
        if (!json_is_string(json_object_get(v, *k)))
            json_object_set_new(v, *k, json_string(""));
        snprintf(key, sizeof key, "%s_truncated", *k);
        if (!json_is_boolean(json_object_get(v, key)))
            json_object_set_new(v, key, json_false());
        snprintf(key, sizeof key, "%s_encoding", *k);
        if (!json_is_string(json_object_get(v, key)))
            json_object_set_new(v, key, json_string("utf-8"));
    }
    json_t *files = json_array();
    size_t i;
    const json_t *f;
    json_array_foreach(json_object_get(rec, "files"), i, f) {
        json_t *e = json_pack("{s:O?, s:O?, s:O?}", "path", json_object_get(f, "path"),
                              "size", json_object_get(f, "size"), "sha256", json_object_get(f, "sha256"));
        if (e && json_is_string(json_object_get(f, "name_encoding")))
            json_object_set(e, "name_encoding", json_object_get(f, "name_encoding"));
        json_array_append_new(files, e);
    }
    json_object_set_new(v, "files", files);
    /* a collect cap (count, size, total) left files out */
    json_object_set_new(v, "files_truncated",
                        json_boolean(json_is_true(json_object_get(rec, "files_truncated"))));
    const json_t *eg = json_object_get(rec, "egress");
    if (json_array_size(eg) > 0) {
        /* the summary of the network log once the execution ended; the
         * log itself at GET .../network (docs/egress.md) */
        const json_t *log = json_object_get(rec, "network");
        json_object_set_new(v, "network", json_pack("{s:O, s:o}", "egress", eg, "summary",
                                                    log ? eai_egress_log_summary(log) : json_null()));
    }
    /* completion callback: url and delivery state, never the secret */
    json_t *cb = eai_cb_view(rec, json_string_value(json_object_get(rec, "callback_state")));
    if (cb)
        json_object_set_new(v, "callback", cb);
    /* an execution inside a session (docs/sessions.md) */
    if (json_is_string(json_object_get(rec, "session_id")))
        json_object_set(v, "session_id", json_object_get(rec, "session_id"));
    /* its volumes (docs/volumes.md): [{id, name, path, read_only}] */
    if (json_array_size(json_object_get(rec, "volumes")) > 0)
        json_object_set(v, "volumes", json_object_get(rec, "volumes"));
    return v;
}
