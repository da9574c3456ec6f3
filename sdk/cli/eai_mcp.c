/*
 * `eai mcp`: the stdio bridge of /v1/mcp (docs/mcp.md "Over stdio"), for
 * agent hosts that only launch local MCP servers.  Newline-delimited
 * JSON-RPC messages on stdin, each POSTed to EAI_URL/v1/mcp with
 * EAI_API_KEY; every JSON-RPC message of the answer (a JSON body, or each
 * event of an event stream) written to stdout as one line.  Nothing but
 * MCP messages goes to stdout; diagnostics go to stderr.
 *
 * initialize is sent at once and its Mcp-Session-Id kept; every other
 * message is sent by a thread of its own, so a notifications/cancelled
 * reaches the server while the tool call it cancels still runs.  At the
 * end of stdin the bridge waits for the calls in flight, ends the MCP
 * session (DELETE) and exits 0.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "eai.h"

#define MCP_LINE_MAX (4u << 20)  /* one message, as the server's bound */
#define MCP_THREADS_MAX 64       /* messages in flight */

static struct {
    const char *base;
    char *auth;
    char lang[40];
    char session[128];           /* "Mcp-Session-Id: ..." once initialized */
    char version[64];            /* "MCP-Protocol-Version: ..." */
    pthread_mutex_t out;         /* one line at a time on stdout */
    pthread_mutex_t lock;
    pthread_cond_t idle;
    int inflight;
} g = {.out = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER};

static void emit(const char *json, size_t len)
{
    while (len && (json[len - 1] == '\n' || json[len - 1] == '\r' || json[len - 1] == ' '))
        len--; /* one message, one line */
    pthread_mutex_lock(&g.out);
    fwrite(json, 1, len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    pthread_mutex_unlock(&g.out);
}

/* An answer body: the SSE events' data lines are messages; a JSON body is one. */
struct answer {
    char *data;
    size_t len;
    int sse;
    size_t scanned;              /* SSE: bytes already turned into messages */
    char sid[96];
};

static void sse_flush(struct answer *a)
{
    /* events end with a blank line; "data:" lines of one event are joined */
    for (;;) {
        char *start = a->data + a->scanned;
        char *end = strstr(start, "\n\n");
        if (!end)
            return;
        *end = '\0';
        size_t cap = (size_t)(end - start) + 1, n = 0;
        char *joined = malloc(cap);
        for (char *line = start; joined && line && *line;) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            if (!strncmp(line, "data:", 5)) {
                const char *v = line[5] == ' ' ? line + 6 : line + 5;
                size_t k = strlen(v);
                memcpy(joined + n, v, k);
                n += k;
            }
            line = nl ? nl + 1 : NULL;
        }
        if (joined && n)
            emit(joined, n);
        free(joined);
        a->scanned = (size_t)(end - a->data) + 2;
    }
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
    struct answer *a = arg;
    size_t n = size * nmemb;
    if (a->len + n > EAI_MAX_RESPONSE)
        return 0;
    char *nd = realloc(a->data, a->len + n + 1);
    if (!nd)
        return 0;
    memcpy(nd + a->len, p, n);
    a->data = nd;
    a->len += n;
    a->data[a->len] = '\0';
    if (a->sse)
        sse_flush(a); /* progress notifications go out as they come */
    return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
    struct answer *a = arg;
    size_t n = size * nmemb;
    if (n > 13 && !strncasecmp(p, "Content-Type:", 13) && strstr(p, "text/event-stream"))
        a->sse = 1;
    if (n > 15 && !strncasecmp(p, "Mcp-Session-Id:", 15)) {
        const char *v = p + 15;
        while (*v == ' ')
            v++;
        size_t k = 0;
        while (k < sizeof a->sid - 1 && v + k < p + n && v[k] != '\r' && v[k] != '\n')
            k++;
        memcpy(a->sid, v, k);
        a->sid[k] = '\0';
    }
    return n;
}

/* POST one message (or DELETE the session: body NULL); answers emitted. */
static long send_msg(const char *body, struct answer *a)
{
    CURL *c = curl_easy_init();
    if (!c)
        return 0;
    char url[1024];
    snprintf(url, sizeof url, "%s/v1/mcp", g.base);
    struct curl_slist *h = NULL;
    const char *list[] = {g.auth, g.lang, "Accept: application/json, text/event-stream",
                          body ? "Content-Type: application/json" : NULL, g.session[0] ? g.session : NULL,
                          g.version[0] ? g.version : NULL};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        if (list[i])
            h = curl_slist_append(h, list[i]);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    long status = 0;
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else
        fprintf(stderr, "eai mcp: %s: %s\n", url, curl_easy_strerror(rc));
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (a->sse)
        sse_flush(a);
    return status;
}

/* The answer of one POST on stdout: an event stream went out as it came; a
 * JSON-RPC body goes out now; anything else (a transport error, the API's
 * error envelope: 401, 413...) becomes a JSON-RPC error for the request's
 * id, so the host is never left waiting and never reads a non-MCP line. */
static void deliver(const char *body, long status, const struct answer *a)
{
    if (a->sse)
        return;
    json_t *r = a->len ? json_loads(a->data, 0, NULL) : NULL;
    if (json_object_get(r, "jsonrpc")) {
        emit(a->data, a->len);
        json_decref(r);
        return;
    }
    json_t *m = json_loads(body, 0, NULL);
    const json_t *id = json_object_get(m, "id");
    if (id && json_object_get(m, "method")) {
        const char *why = json_string_value(json_object_get(json_object_get(r, "error"), "message"));
        char msg[300];
        snprintf(msg, sizeof msg, "the sandbox service answered HTTP %ld%s%s", status, why ? ": " : "",
                 why ? why : "");
        json_t *e = json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", -32603,
                              "message", msg);
        char *s = json_dumps(e, JSON_COMPACT);
        if (s)
            emit(s, strlen(s));
        free(s);
        json_decref(e);
    }
    json_decref(m);
    json_decref(r);
}

static void *worker(void *arg)
{
    char *body = arg;
    struct answer a = {0};
    long status = send_msg(body, &a);
    deliver(body, status, &a);
    free(a.data);
    free(body);
    pthread_mutex_lock(&g.lock);
    g.inflight--;
    pthread_cond_broadcast(&g.idle);
    pthread_mutex_unlock(&g.lock);
    return NULL;
}

static void wait_idle(int below)
{
    pthread_mutex_lock(&g.lock);
    while (g.inflight >= below)
        pthread_cond_wait(&g.idle, &g.lock);
    pthread_mutex_unlock(&g.lock);
}

int eai_cmd_mcp(const struct eai_opts *o, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct eai_http h;
    if (eai_http_init(&h, o) < 0)
        return 1;
    g.base = h.base;
    g.auth = h.auth;
    snprintf(g.lang, sizeof g.lang, "%s", h.lang_hdr);
    char *line = malloc(MCP_LINE_MAX + 2);
    if (!line)
        return 1;
    while (fgets(line, MCP_LINE_MAX + 2, stdin)) {
        size_t n = strlen(line);
        if (n > MCP_LINE_MAX) {
            fprintf(stderr, "eai mcp: a message longer than 4 MiB: dropped\n");
            int ch;
            while ((ch = getchar()) != EOF && ch != '\n')
                ;
            continue;
        }
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!n)
            continue;
        json_t *m = json_loads(line, 0, NULL);
        const char *method = json_string_value(json_object_get(m, "method"));
        if (method && !strcmp(method, "initialize")) {
            wait_idle(1);
            struct answer a = {0};
            long status = send_msg(line, &a);
            if (status == 200 && a.sid[0])
                snprintf(g.session, sizeof g.session, "Mcp-Session-Id: %s", a.sid);
            json_t *r = !a.sse && a.len ? json_loads(a.data, 0, NULL) : NULL;
            const char *v = json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion"));
            if (v)
                snprintf(g.version, sizeof g.version, "MCP-Protocol-Version: %s", v);
            json_decref(r);
            deliver(line, status, &a);
            free(a.data);
        } else {
            wait_idle(MCP_THREADS_MAX);
            char *copy = strdup(line);
            pthread_t t;
            pthread_mutex_lock(&g.lock);
            g.inflight++;
            pthread_mutex_unlock(&g.lock);
            if (!copy || pthread_create(&t, NULL, worker, copy) != 0) {
                free(copy);
                pthread_mutex_lock(&g.lock);
                g.inflight--;
                pthread_mutex_unlock(&g.lock);
                fprintf(stderr, "eai mcp: cannot start a thread: message dropped\n");
            } else {
                pthread_detach(t);
            }
        }
        json_decref(m);
    }
    wait_idle(1);
    if (g.session[0]) {
        struct answer a = {0};
        send_msg(NULL, &a);
        free(a.data);
    }
    free(line);
    eai_http_free(&h);
    return 0;
}
