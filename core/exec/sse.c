/* Server-Sent Events frames of an execution (sse.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/sse.h"
#include "exec/exec_result.h"
#include "base/util.h"

static const char *sse_jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

void eai_sse_event(struct eai_req *r, const char *event, json_t *data /* stolen */)
{
    char *d = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    if (!d)
        return;
    size_t n = strlen(event) + strlen(d) + 32;
    char *msg = malloc(n);
    if (msg) {
        int len = snprintf(msg, n, "event: %s\ndata: %s\n\n", event, d);
        eai_stream_send(r, msg, (size_t)len);
        free(msg);
    }
    free(d);
}

void eai_sse_chunk(struct eai_req *r, enum eai_iso_stream s, const char *data, size_t len)
{
    json_t *o;
    if (eai_utf8_valid(data, len)) {
        o = json_pack("{s:s%}", "data", data, len);
    } else {
        char *b = eai_b64_encode(data, len);
        o = b ? json_pack("{s:s, s:s}", "data", b, "encoding", "base64") : NULL;
        free(b);
    }
    eai_sse_event(r, s == EAI_STREAM_STDERR ? "stderr" : "stdout", o);
}

json_t *eai_sse_status_data(const json_t *rec)
{
    json_t *o = json_pack("{s:s}", "status", sse_jstr(rec, "status") ? sse_jstr(rec, "status") : "queued");
    if (o && eai_exec_status_terminal(sse_jstr(rec, "status"))) {
        for (const char *const *k = (const char *const[]){"exit_code", "signal", "error", NULL}; *k; k++)
            json_object_set(o, *k, json_object_get(rec, *k) ? json_object_get(rec, *k) : json_null());
    }
    return o;
}

/* Stored output of a terminal record, then its status; ends the stream. */
void eai_sse_replay_end(struct eai_req *r, const json_t *rec, int with_output)
{
    for (int k = 0; with_output && k < 2; k++) {
        const char *key = k ? "stderr" : "stdout";
        const char *s = sse_jstr(rec, key);
        char ek[32];
        snprintf(ek, sizeof ek, "%s_encoding", key);
        if (!s || !*s)
            continue;
        json_t *o = json_pack("{s:s}", "data", s);
        if (o && sse_jstr(rec, ek) && strcmp(sse_jstr(rec, ek), "base64") == 0)
            json_object_set_new(o, "encoding", json_string("base64"));
        eai_sse_event(r, key, o);
    }
    eai_sse_event(r, "status", eai_sse_status_data(rec));
    eai_stream_end(r);
}
