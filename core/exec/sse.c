/* Server-Sent Events frames of an execution (sse.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/sse.h"
#include "exec/exec_result.h"
#include "base/util.h"

void eai_sse_event(struct eai_req *r, const char *event, int64_t id, json_t *data /* stolen */)
{
    char *d = data ? json_dumps(data, JSON_COMPACT) : NULL;
    json_decref(data);
    if (!d)
        return;
    size_t n = strlen(event) + strlen(d) + 64;
    char *msg = malloc(n);
    if (msg) {
        int len = id >= 0 ? snprintf(msg, n, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)id, event, d)
                          : snprintf(msg, n, "event: %s\ndata: %s\n\n", event, d);
        eai_stream_send(r, msg, (size_t)len);
        free(msg);
    }
    free(d);
}

void eai_sse_chunk(struct eai_req *r, enum eai_iso_stream s, int64_t id, const char *data, size_t len)
{
    json_t *o;
    if (eai_utf8_valid(data, len)) {
        o = json_pack("{s:s%}", "data", data, len);
    } else {
        char *b = eai_b64_encode(data, len);
        o = b ? json_pack("{s:s, s:s}", "data", b, "encoding", "base64") : NULL;
        free(b);
    }
    eai_sse_event(r, s == EAI_STREAM_STDERR ? "stderr" : "stdout", id, o);
}

void eai_sse_ping(struct eai_req *r)
{
    eai_stream_send(r, ": ping\n\n", 8);
}

json_t *eai_sse_status_data(const json_t *rec)
{
    json_t *o = json_pack("{s:s}", "status", eai_jstr(rec, "status") ? eai_jstr(rec, "status") : "queued");
    if (o && eai_exec_status_terminal(eai_jstr(rec, "status"))) {
        for (const char *const *k = (const char *const[]){"exit_code", "signal", "error", NULL}; *k; k++)
            json_object_set(o, *k, json_object_get(rec, *k) ? json_object_get(rec, *k) : json_null());
    }
    return o;
}

int64_t eai_sse_last_id(const struct eai_req *r)
{
    const char *s = eai_req_header(r, "Last-Event-ID");
    if (!s || !*s)
        s = eai_req_query(r, "last_event_id");
    if (!s || !*s || strlen(s) > 18)
        return -1;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            return -1;
    return strtoll(s, NULL, 10);
}

/* The stored bytes of one stream of a terminal record (decoded). */
static unsigned char *stored_output(const json_t *rec, const char *key, size_t *len)
{
    const char *s = eai_jstr(rec, key);
    char ek[32];
    snprintf(ek, sizeof ek, "%s_encoding", key);
    *len = 0;
    if (!s || !*s)
        return NULL;
    if (eai_jstr(rec, ek) && strcmp(eai_jstr(rec, ek), "base64") == 0)
        return eai_b64_decode(s, len);
    size_t n = json_string_length(json_object_get(rec, key));
    unsigned char *d = malloc(n ? n : 1);
    if (d) {
        memcpy(d, s, n);
        *len = n;
    }
    return d;
}

/* The output events of a terminal record: its "output_events" or, for a
 * record without them (recorded before they existed, or without a run of
 * this service), all stdout then all stderr. */
static json_t *events_of(const json_t *rec, size_t olen, size_t elen)
{
    const json_t *ev = json_object_get(rec, "output_events");
    if (json_is_array(ev))
        return json_incref((json_t *)ev);
    json_t *a = json_array();
    if (a && olen)
        json_array_append_new(a, json_integer((json_int_t)olen));
    if (a && elen)
        json_array_append_new(a, json_integer(-(json_int_t)elen));
    return a;
}

int64_t eai_sse_status_id(const json_t *rec)
{
    const char *st = eai_jstr(rec, "status");
    if (!eai_exec_status_terminal(st))
        return st && strcmp(st, "queued") != 0 ? EAI_SSE_ID_RUNNING : EAI_SSE_ID_QUEUED;
    const json_t *ev = json_object_get(rec, "output_events");
    size_t n = 0;
    if (json_is_array(ev))
        n = json_array_size(ev);
    else
        n = (eai_jstr(rec, "stdout") && *eai_jstr(rec, "stdout")) +
            (eai_jstr(rec, "stderr") && *eai_jstr(rec, "stderr"));
    return EAI_SSE_ID_FIRST_OUTPUT + (int64_t)n;
}

void eai_sse_replay_end(struct eai_req *r, const json_t *rec, int64_t after)
{
    size_t len[2];
    unsigned char *d[2];
    d[0] = stored_output(rec, "stdout", &len[0]);
    d[1] = stored_output(rec, "stderr", &len[1]);
    json_t *ev = events_of(rec, len[0], len[1]);
    size_t off[2] = {0, 0};
    size_t i;
    const json_t *e;
    json_array_foreach(ev, i, e) {
        json_int_t v = json_integer_value(e);
        int k = v < 0;
        size_t n = (size_t)(v < 0 ? -v : v);
        /* a cut UTF-8 sequence at the end of a truncated stream was not stored */
        if (off[k] + n > len[k])
            n = off[k] < len[k] ? len[k] - off[k] : 0;
        int64_t id = EAI_SSE_ID_FIRST_OUTPUT + (int64_t)i;
        if (id > after && n)
            eai_sse_chunk(r, k ? EAI_STREAM_STDERR : EAI_STREAM_STDOUT, id, (const char *)d[k] + off[k], n);
        off[k] += n;
    }
    int64_t sid = EAI_SSE_ID_FIRST_OUTPUT + (int64_t)json_array_size(ev);
    json_decref(ev);
    free(d[0]);
    free(d[1]);
    if (sid > after)
        eai_sse_event(r, "status", sid, eai_sse_status_data(rec));
    eai_stream_end(r);
}
