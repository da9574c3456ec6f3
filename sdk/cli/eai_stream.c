/* eai: live output of a running execution from its Server-Sent Events
 * (GET /v1/sandbox/executions/{id}/events; docs/executions.md).
 *
 * Output is written as it arrives and counted per stream.  Each connection
 * delivers each stream from its first byte (output so far, then live
 * chunks, or the stored output once terminal), so a cut stream is followed
 * again and only the bytes beyond the counts are written.  Whatever else
 * happens (refused, an unknown event format, Ctrl-C), the caller ends with
 * the terminal record and prints only the bytes beyond those counts, so
 * nothing is lost and nothing is printed twice: the record's output is the
 * first bytes of each stream, and the streamed chunks are a prefix of it
 * (within the output cap). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eai.h"

#define EAI_SSE_MAX_LINE (64 << 20) /* one event: a replayed stream of up to 8 MiB, base64 */

struct sse {
    char *line;
    size_t len, cap;
    char event[32];
    char *data;
    size_t dlen;
    uint64_t *printed;
    uint64_t seen[2]; /* bytes of each stream this connection delivered */
    int terminal;
    int broken;
};

static int grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    if (need > EAI_SSE_MAX_LINE)
        return -1;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    char *q = realloc(*p, n);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Bytes [seen, seen + n) of stream k: write the part beyond printed[k]
 * (every connection starts the stream from its first byte). */
static void emit(struct sse *s, int k, const char *d, size_t n)
{
    uint64_t start = s->seen[k], end = start + n;
    s->seen[k] = end;
    if (end <= s->printed[k])
        return;
    size_t skip = s->printed[k] > start ? (size_t)(s->printed[k] - start) : 0;
    eai_fwrite_all(k ? stderr : stdout, d + skip, n - skip);
    s->printed[k] = end;
}

static void dispatch(struct sse *s)
{
    if (!s->data || !s->event[0])
        goto out;
    json_t *d = json_loadb(s->data, s->dlen, 0, NULL);
    int k = strcmp(s->event, "stdout") == 0 ? 0 : strcmp(s->event, "stderr") == 0 ? 1 : -1;
    if (k >= 0 && json_is_string(json_object_get(d, "data"))) {
        const json_t *v = json_object_get(d, "data");
        const char *enc = eai_jstr(d, "encoding");
        if (enc && strcmp(enc, "base64") == 0) {
            size_t n = 0;
            unsigned char *raw = eai_b64_decode(json_string_value(v), &n);
            if (raw)
                emit(s, k, (const char *)raw, n);
            else
                s->broken = 1;
            free(raw);
        } else {
            emit(s, k, json_string_value(v), json_string_length(v));
        }
    } else if (strcmp(s->event, "status") == 0 && eai_is_terminal(eai_jstr(d, "status"))) {
        s->terminal = 1;
    }
    json_decref(d);
out:
    s->event[0] = '\0';
    s->dlen = 0;
}

/* One line without its end of line. */
static void on_line(struct sse *s, char *l, size_t n)
{
    if (n && l[n - 1] == '\r')
        l[--n] = '\0';
    if (n == 0) {
        dispatch(s);
        return;
    }
    if (l[0] == ':')
        return; /* comment: a heartbeat */
    char *colon = memchr(l, ':', n);
    size_t fl = colon ? (size_t)(colon - l) : n;
    const char *val = colon ? colon + 1 : "";
    if (*val == ' ')
        val++;
    size_t vl = n - (size_t)(val - l);
    if (fl == 5 && memcmp(l, "event", 5) == 0) {
        snprintf(s->event, sizeof s->event, "%.*s", (int)(vl < 31 ? vl : 31), val);
    } else if (fl == 4 && memcmp(l, "data", 4) == 0) {
        char *nd = s->dlen + vl + 2 > EAI_SSE_MAX_LINE ? NULL : realloc(s->data, s->dlen + vl + 2);
        if (!nd) {
            s->broken = 1;
            return;
        }
        s->data = nd;
        if (s->dlen)
            s->data[s->dlen++] = '\n';
        memcpy(s->data + s->dlen, val, vl);
        s->dlen += vl;
        s->data[s->dlen] = '\0';
    } /* id:, retry: and unknown fields are ignored */
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
    struct sse *s = arg;
    size_t n = size * nmemb;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            if (grow(&s->line, &s->cap, s->len + 1) < 0) {
                s->broken = 1;
                return 0;
            }
            s->line[s->len] = '\0';
            on_line(s, s->line, s->len);
            s->len = 0;
            if (s->terminal || s->broken)
                return 0; /* done: stop reading */
            continue;
        }
        if (grow(&s->line, &s->cap, s->len + 2) < 0) {
            s->broken = 1;
            return 0;
        }
        s->line[s->len++] = p[i];
    }
    return n;
}

/* One connection: 1 terminal status seen, 0 a stream (200) that was cut,
 * -1 not a stream (refused, transport error, interrupted, bad data). */
static int follow_once(struct eai_http *h, const char *id, uint64_t printed[2])
{
    char url[8192];
    snprintf(url, sizeof url, "%s/v1/sandbox/executions/%s/events", h->base, id);
    struct curl_slist *hdrs = eai_http_headers(h, "Accept: text/event-stream", NULL, 0);
    if (!hdrs)
        return -1;
    struct sse s = {.printed = printed};
    eai_http_setup(h, url, hdrs, 0L);
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, eai_http_progress);
    /* a quiet stream without heartbeats: give up after 90 s and long-poll */
    curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h->curl, CURLOPT_LOW_SPEED_TIME, 90L);
    curl_easy_perform(h->curl);
    long status = 0;
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdrs);
    free(s.line);
    free(s.data);
    if (status == 200 && s.terminal)
        return 1;
    return status == 200 && !s.broken && !eai_interrupted ? 0 : -1;
}

int eai_follow_events(struct eai_http *h, const char *id, uint64_t printed[2])
{
    /* A cut stream is followed again (it restarts from the first byte,
     * emit() skips what was written); at most 1000 times. */
    int quick = 0;
    for (int i = 0; i < 1000 && quick < 5; i++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = follow_once(h, id, printed);
        if (rc != 0)
            return rc > 0 ? 0 : -1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        /* a stream that keeps ending at once is not worth following */
        quick = t1.tv_sec - t0.tv_sec < 2 ? quick + 1 : 0;
        struct timespec pause = {0, 200 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return -1;
}

void eai_print_rest(const json_t *rec, const uint64_t printed[2])
{
    for (int k = 0; k < 2; k++) {
        const char *key = k ? "stderr" : "stdout";
        char ek[32];
        snprintf(ek, sizeof ek, "%s_encoding", key);
        const json_t *v = json_object_get(rec, key);
        if (!json_is_string(v))
            continue;
        const char *enc = eai_jstr(rec, ek);
        unsigned char *raw = NULL;
        const char *d;
        size_t n;
        if (enc && strcmp(enc, "base64") == 0) {
            raw = eai_b64_decode(json_string_value(v), &n);
            if (!raw)
                continue;
            d = (const char *)raw;
        } else {
            d = json_string_value(v);
            n = json_string_length(v);
        }
        if (n > printed[k])
            eai_fwrite_all(k ? stderr : stdout, d + printed[k], n - (size_t)printed[k]);
        free(raw);
    }
}
