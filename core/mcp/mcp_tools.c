/* The tools of /v1/mcp (mcp/mcp_tools.h): each one the REST route it names,
 * called by eaid on itself over loopback with the caller's credential. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mcp/mcp_tools.h"
#include "http/park.h"
#include "base/log.h"
#include "base/util.h"
#include "config/config.h"
#include "exec/exec.h"

#define MCP_PROGRESS_TEXT 4096   /* output bytes in one progress notification */
#define MCP_FILE_MAX (1u << 20)  /* session_read_file answers at most this much */

struct mcp_call {
    struct eai_app *app;
    struct mcp_session *s;       /* NULL once the session is gone */
    struct mcp_call *next;
    struct eai_parked *hold;
    json_t *id;                  /* the JSON-RPC id */
    char *auth;                  /* "Authorization: ..." of the caller */
    char *lang;                  /* "Accept-Language: ..." */
    char *url;                   /* the self-call's URL (kept while it flies) */
    char *body;                  /* its body */
    size_t body_len;
    char tool[32];
    json_t *args;
    char exec_id[64];
    json_t *progress_token;
    int streaming;               /* answering with an event stream */
    int cancelled;
    size_t sent_out;             /* stdout bytes already reported */
    int progress_n;
};

struct mcp_call *eai_mcp_call_next(struct mcp_call *c) { return c->next; }
struct mcp_call **eai_mcp_call_nextp(struct mcp_call *c) { return &c->next; }
void eai_mcp_call_orphan(struct mcp_call *c) { c->s = NULL; }

/* ------------------------------------------------------------ the tools' schemas */

static json_t *obj(const char *json)
{
    json_error_t e;
    json_t *v = json_loads(json, 0, &e);
    if (!v)
        eai_log("mcp", EAI_LOG_ERROR, "tool schema: %s", e.text);
    return v ? v : json_object();
}

#define LIMITS "{\"type\":\"object\",\"properties\":{\"cpu\":{\"type\":\"string\"},\"memory\":{\"type\":\"string\"}," \
               "\"timeout_s\":{\"type\":\"integer\",\"minimum\":1}}}"
#define RUN_PROPS                                                                                                 \
    "\"code\":{\"type\":\"string\",\"description\":\"Source to run with language's interpreter.\"},"            \
    "\"language\":{\"type\":\"string\",\"enum\":[\"python\",\"bash\",\"sh\",\"node\"],\"default\":\"python\"},"   \
    "\"command\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"argv, instead of code.\"}," \
    "\"stdin\":{\"type\":\"string\"},"                                                                           \
    "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"                              \
    "\"files\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"  \
    "\"content\":{\"type\":\"string\"},\"content_b64\":{\"type\":\"string\"}},\"required\":[\"path\"]},"         \
    "\"description\":\"Files written under /tmp before the run.\"},"                                             \
    "\"collect\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"description\":\"Paths under /tmp returned after the run.\"}"
#define RUN_OUT                                                                                                   \
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"},"         \
    "\"exit_code\":{\"type\":[\"integer\",\"null\"]},\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"}," \
    "\"files\":{\"type\":\"array\"},\"error\":{\"type\":\"object\"}}}"

json_t *eai_mcp_tools_list(void)
{
    json_t *a = json_array();
    json_array_append_new(a, json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:{s:b, s:b}}", "name", "execute", "title", "Run code in a sandbox",
        "description", "Runs code (or a command) once in a fresh gVisor/Kata sandbox with no network unless the "
                       "profile allows it, and returns exit code, stdout, stderr and collected files.",
        "inputSchema", obj("{\"type\":\"object\",\"properties\":{\"image\":{\"type\":\"string\"},\"profile\":{\"type\":\"string\"},"
                           "\"limits\":" LIMITS "," RUN_PROPS "}}"),
        "outputSchema", obj(RUN_OUT), "annotations", "readOnlyHint", 0, "openWorldHint", 0));
    json_array_append_new(a, json_pack(
        "{s:s, s:s, s:s, s:o}", "name", "session_create", "title", "Start a sandbox session", "description",
        "Starts a sandbox that keeps its files and processes across calls; returns its session_id.", "inputSchema",
        obj("{\"type\":\"object\",\"properties\":{\"image\":{\"type\":\"string\"},\"profile\":{\"type\":\"string\"},"
            "\"limits\":" LIMITS ",\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
            "\"idle_timeout_s\":{\"type\":\"integer\"},\"ttl_s\":{\"type\":\"integer\"}}}")));
    json_array_append_new(a, json_pack(
        "{s:s, s:s, s:s, s:o, s:o}", "name", "session_exec", "title", "Run code in a session", "description",
        "Runs code or a command in a live session (its files and background processes stay).", "inputSchema",
        obj("{\"type\":\"object\",\"required\":[\"session_id\"],\"properties\":{\"session_id\":{\"type\":\"string\"},"
            RUN_PROPS "}}"),
        "outputSchema", obj(RUN_OUT)));
    json_array_append_new(a, json_pack(
        "{s:s, s:s, s:s, s:o}", "name", "session_write_file", "title", "Write a file in a session", "description",
        "Writes a file under /tmp of a session (content as text, or content_b64).", "inputSchema",
        obj("{\"type\":\"object\",\"required\":[\"session_id\",\"path\"],\"properties\":{\"session_id\":{\"type\":\"string\"},"
            "\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"},\"content_b64\":{\"type\":\"string\"}}}")));
    json_array_append_new(a, json_pack(
        "{s:s, s:s, s:s, s:o}", "name", "session_read_file", "title", "Read a file of a session", "description",
        "Reads a file under /tmp of a session (text, or base64 when it is not UTF-8; at most 1 MiB).", "inputSchema",
        obj("{\"type\":\"object\",\"required\":[\"session_id\",\"path\"],\"properties\":{\"session_id\":{\"type\":\"string\"},"
            "\"path\":{\"type\":\"string\"}}}")));
    json_array_append_new(a, json_pack(
        "{s:s, s:s, s:s, s:o}", "name", "session_list_files", "title", "List a session's files", "description",
        "Lists the files under /tmp of a session.", "inputSchema",
        obj("{\"type\":\"object\",\"required\":[\"session_id\"],\"properties\":{\"session_id\":{\"type\":\"string\"}}}")));
    json_array_append_new(a, json_pack(
        "{s:s, s:s, s:s, s:o}", "name", "session_close", "title", "End a session", "description",
        "Ends a session: its sandbox, files and processes are gone.", "inputSchema",
        obj("{\"type\":\"object\",\"required\":[\"session_id\"],\"properties\":{\"session_id\":{\"type\":\"string\"}}}")));
    return a;
}

/* ------------------------------------------------------------ answers */

static void call_free(struct mcp_call *c)
{
    if (c->s)
        eai_mcp_session_call_drop(c->s, c);
    json_decref(c->id);
    json_decref(c->args);
    json_decref(c->progress_token);
    free(c->auth);
    free(c->lang);
    free(c->url);
    free(c->body);
    free(c);
}

static void send_event(struct eai_req *r, json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!s)
        return;
    size_t n = strlen(s) + 32;
    char *ev = malloc(n);
    if (ev) {
        int k = snprintf(ev, n, "event: message\ndata: %s\n\n", s);
        eai_stream_send(r, ev, (size_t)k);
    }
    free(ev);
    free(s);
}

/* The call's answer (result stolen; NULL: none, a cancelled call), then the call is freed. */
static void finish(struct mcp_call *c, json_t *result)
{
    struct eai_req *r = c->hold ? eai_park_release(c->hold) : NULL;
    c->hold = NULL;
    json_t *msg = result ? json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", c->id, "result", result)
                         : json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", c->id, "error", "code",
                                     -32800, "message", "request cancelled");
    if (r) {
        if (c->streaming) {
            if (result)
                send_event(r, msg);
            else
                json_decref(msg); /* cancelled: no response (MCP cancellation) */
            eai_stream_end(r);
        } else {
            eai_reply_json(r, 200, msg);
        }
    } else {
        json_decref(msg);
    }
    call_free(c);
}

static json_t *text_content(const char *text)
{
    return json_pack("[{s:s, s:s}]", "type", "text", "text", text ? text : "");
}

/* A tool error: the API's own code and message (in the caller's language). */
static json_t *tool_error(const json_t *envelope_error, const char *fallback)
{
    const char *code = json_string_value(json_object_get(envelope_error, "code"));
    const char *msg = json_string_value(json_object_get(envelope_error, "message"));
    char text[1200];
    int n = snprintf(text, sizeof text, "%s: %s", code ? code : "internal", msg ? msg : fallback);
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(envelope_error, "details"), i, d) { /* the model needs the why */
        const char *p = json_string_value(json_object_get(d, "path"));
        const char *m = json_string_value(json_object_get(d, "message"));
        if (i >= 8 || n < 0 || (size_t)n >= sizeof text - 1)
            break;
        n += snprintf(text + n, sizeof text - (size_t)n, "%s%s%s%s", i ? "; " : " (", p && *p ? p : "",
                      p && *p ? ": " : "", m ? m : "");
    }
    if (json_array_size(json_object_get(envelope_error, "details")) && n > 0 && (size_t)n < sizeof text - 1)
        snprintf(text + n, sizeof text - (size_t)n, ")");
    json_t *err = envelope_error ? json_deep_copy(envelope_error)
                                 : json_pack("{s:s, s:s}", "code", "internal", "message", fallback);
    return json_pack("{s:o, s:{s:o}, s:b}", "content", text_content(text), "structuredContent", "error", err,
                     "isError", 1);
}

static void finish_error(struct mcp_call *c, const struct eai_http_response *resp)
{
    json_t *body = resp && resp->body_len ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    const json_t *e = json_object_get(body, "error");
    char fb[200];
    snprintf(fb, sizeof fb, "the sandbox API answered %ld%s%s", resp ? resp->status : 0L,
             resp && resp->error ? ": " : "", resp && resp->error ? resp->error : "");
    finish(c, tool_error(json_is_object(e) ? e : NULL, fb));
    json_decref(body);
}

/* ------------------------------------------------------------ calling ourselves */

static void self_base(const struct eai_app *app, char *out, size_t len)
{
    const char *listen = app->cfg && app->cfg->listen ? app->cfg->listen : "127.0.0.1:8080";
    const char *colon = strrchr(listen, ':');
    char host[128];
    snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - listen) : 0, listen);
    const char *h = host;
    if (!*h || !strcmp(h, "0.0.0.0"))
        h = "127.0.0.1";
    else if (!strcmp(h, "::") || !strcmp(h, "[::]"))
        h = "[::1]";
    int v6 = strchr(h, ':') && h[0] != '[';
    snprintf(out, len, "%s://%s%s%s:%d", app->cfg && app->cfg->tls_cert ? "https" : "http", v6 ? "[" : "", h,
             v6 ? "]" : "", app->port);
}

/* path with every byte outside [A-Za-z0-9/._~-] percent-encoded. */
static void escape_path(const char *p, char *out, size_t len)
{
    size_t o = 0;
    for (; *p && o + 4 < len; p++) {
        unsigned char ch = (unsigned char)*p;
        if (isalnum(ch) || strchr("/._~-", ch))
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, len - o, "%%%02X", ch);
    }
    out[o] = '\0';
}

static int self_call(struct mcp_call *c, const char *method, const char *path, const char *body, size_t blen,
                     const char *ctype, eai_http_done_fn done)
{
    char base[200];
    self_base(c->app, base, sizeof base);
    free(c->url);
    free(c->body);
    c->url = NULL;
    c->body = NULL;
    if (asprintf(&c->url, "%s%s", base, path) < 0) {
        c->url = NULL;
        return -1;
    }
    if (body) {
        c->body = malloc(blen + 1);
        if (!c->body)
            return -1;
        memcpy(c->body, body, blen);
        c->body[blen] = '\0';
        c->body_len = blen;
    }
    char ct[80];
    snprintf(ct, sizeof ct, "Content-Type: %s", ctype ? ctype : "application/json");
    const char *headers[] = {c->auth, c->lang ? c->lang : "Accept-Language: en", ct, "User-Agent: eaid-mcp/1", NULL};
    struct eai_http_request hr = {
        .method = method, .url = c->url, .headers = headers, .body = c->body, .body_len = body ? c->body_len : 0,
        .timeout_ms = 90000, .insecure = c->app->cfg && c->app->cfg->tls_cert ? 1 : 0, /* ourselves on loopback */
    };
    return c->app->host->http_request(c->app->host, &hr, done, c);
}

/* ------------------------------------------------------------ executions */

static int terminal(const char *st)
{
    return st && strcmp(st, "queued") != 0 && strcmp(st, "running") != 0;
}

static void poll_exec(struct mcp_call *c);

static void report_progress(struct mcp_call *c)
{
    if (!c->streaming || !c->hold)
        return;
    struct eai_req *r = eai_park_release(c->hold);
    c->hold = r ? eai_park_hold(eai_mcp_parks(), r) : NULL;
    if (!r)
        return;
    const char *out = NULL;
    size_t len = 0;
    /* the output so far when this node runs it (docs/mcp.md: on another replica only the beat) */
    eai_exec_local_output(c->app, c->exec_id, EAI_STREAM_STDOUT, &out, &len);
    char text[MCP_PROGRESS_TEXT + 1] = "";
    if (len > c->sent_out) {
        size_t n = len - c->sent_out < MCP_PROGRESS_TEXT ? len - c->sent_out : MCP_PROGRESS_TEXT;
        memcpy(text, out + c->sent_out, n);
        text[n] = '\0';
        c->sent_out += n;
    }
    json_t *params = json_pack("{s:O, s:i, s:s}", "progressToken", c->progress_token, "progress", ++c->progress_n,
                               "message", text[0] ? text : "running");
    send_event(r, json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", "notifications/progress", "params", params));
}

static json_t *exec_result(const json_t *doc)
{
    const char *st = json_string_value(json_object_get(doc, "status"));
    const char *out = json_string_value(json_object_get(doc, "stdout"));
    const char *err = json_string_value(json_object_get(doc, "stderr"));
    json_t *sc = json_pack("{s:O?, s:s, s:O?, s:s, s:s, s:O?}", "id", json_object_get(doc, "id"), "status", st ? st : "",
                           "exit_code", json_object_get(doc, "exit_code"), "stdout", out ? out : "", "stderr",
                           err ? err : "", "files", json_object_get(doc, "files"));
    if (json_is_object(json_object_get(doc, "error")))
        json_object_set(sc, "error", json_object_get(doc, "error"));
    if (!json_object_get(sc, "exit_code"))
        json_object_set_new(sc, "exit_code", json_null());
    if (!json_object_get(sc, "files"))
        json_object_set_new(sc, "files", json_array());
    json_t *content = text_content(out);
    if (err && *err)
        json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", err));
    if (json_is_object(json_object_get(doc, "error"))) {
        const char *m = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));
        json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", m ? m : ""));
    }
    /* collected files: links to the REST route (the client reads them with its own credential) */
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(doc, "files"), i, f) {
        const char *p = json_string_value(json_object_get(f, "path"));
        const char *id = json_string_value(json_object_get(doc, "id"));
        if (!p || !id)
            continue;
        char esc[8192], uri[8400];
        escape_path(p[0] == '/' ? p + 1 : p, esc, sizeof esc);
        snprintf(uri, sizeof uri, "/v1/sandbox/executions/%s/files/%s", id, esc);
        json_array_append_new(content, json_pack("{s:s, s:s, s:s}", "type", "resource_link", "uri", uri, "name", p));
    }
    return json_pack("{s:o, s:o, s:b}", "content", content, "structuredContent", sc, "isError",
                     !st || strcmp(st, "succeeded") != 0);
}

static void on_polled(void *arg, const struct eai_http_response *resp)
{
    struct mcp_call *c = arg;
    if (resp->status != 200) {
        finish_error(c, resp);
        return;
    }
    json_t *doc = json_loadb(resp->body, resp->body_len, 0, NULL);
    const char *st = json_string_value(json_object_get(doc, "status"));
    if (terminal(st)) {
        if (c->cancelled && !strcmp(st, "cancelled"))
            finish(c, NULL);
        else
            finish(c, exec_result(doc));
    } else if (!c->hold) {
        finish(c, NULL); /* the server stops: nobody to answer */
    } else {
        report_progress(c);
        poll_exec(c);
    }
    json_decref(doc);
}

static void poll_exec(struct mcp_call *c)
{
    char path[200];
    snprintf(path, sizeof path, "/v1/sandbox/executions/%s?wait_s=%d", c->exec_id, 1);
    if (self_call(c, "GET", path, NULL, 0, NULL, on_polled) != 0)
        finish_error(c, NULL);
}

static void on_created(void *arg, const struct eai_http_response *resp)
{
    struct mcp_call *c = arg;
    json_t *doc = resp->status == 202 || resp->status == 200 ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    const char *id = json_string_value(json_object_get(doc, "id"));
    if (!id || strlen(id) >= sizeof c->exec_id) {
        json_decref(doc);
        finish_error(c, resp);
        return;
    }
    snprintf(c->exec_id, sizeof c->exec_id, "%s", id);
    json_decref(doc);
    if (c->progress_token && c->hold) {
        struct eai_req *r = eai_park_release(c->hold);
        c->hold = r ? eai_park_hold(eai_mcp_parks(), r) : NULL;
        if (r) {
            eai_stream_start(r, "text/event-stream");
            c->streaming = 1;
        }
    }
    if (c->cancelled) { /* cancelled while the POST flew */
        eai_mcp_cancel(c->s, c->id);
    }
    poll_exec(c);
}

/* The REST body of an execution from the tool's arguments (code + language,
 * or command; the rest passed through); NULL + why. */
static json_t *exec_body(const json_t *a, int in_session, const char *def_profile, const char **why)
{
    static const char *const pass[] = {"image", "profile", "limits", "stdin", "env", "files", "collect", NULL};
    json_t *b = json_object();
    if (!in_session && def_profile)
        json_object_set_new(b, "profile", json_string(def_profile));
    for (const char *const *k = pass; *k; k++) {
        if (in_session && (!strcmp(*k, "image") || !strcmp(*k, "profile") || !strcmp(*k, "limits")))
            continue;
        if (json_object_get(a, *k))
            json_object_set(b, *k, json_object_get(a, *k));
    }
    const char *code = json_string_value(json_object_get(a, "code"));
    const json_t *cmd = json_object_get(a, "command");
    if (code && cmd) {
        *why = "give code or command, not both";
    } else if (cmd) {
        json_object_set(b, "command", (json_t *)cmd);
    } else if (code) {
        const char *lang = json_string_value(json_object_get(a, "language"));
        const char *argv0 = "python3", *flag = "-c";
        if (!lang || !strcmp(lang, "python"))
            ;
        else if (!strcmp(lang, "bash"))
            argv0 = "bash";
        else if (!strcmp(lang, "sh"))
            argv0 = "sh";
        else if (!strcmp(lang, "node"))
            argv0 = "node", flag = "-e";
        else
            *why = "language: python, bash, sh or node";
        json_object_set_new(b, "command", json_pack("[s, s, s]", argv0, flag, code));
        if (!in_session && !json_object_get(b, "image") && (!lang || strcmp(lang, "node") != 0))
            json_object_set_new(b, "image", json_string("python:3.11-slim"));
    } else {
        *why = "code (with language) or command is required";
    }
    if (*why) {
        json_decref(b);
        return NULL;
    }
    return b;
}

/* ------------------------------------------------------------ sessions */

static int session_id_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 64)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
            return 0;
    return 1;
}

static void on_simple(void *arg, const struct eai_http_response *resp)
{
    struct mcp_call *c = arg;
    if (resp->status < 200 || resp->status >= 300) {
        finish_error(c, resp);
        return;
    }
    json_t *doc = resp->body_len ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    if (!json_is_object(doc)) {
        json_decref(doc);
        doc = json_pack("{s:b}", "ok", 1);
    }
    if (!strcmp(c->tool, "session_create") && json_object_get(doc, "id") && !json_object_get(doc, "session_id"))
        json_object_set(doc, "session_id", json_object_get(doc, "id"));
    char *text = json_dumps(doc, JSON_COMPACT);
    finish(c, json_pack("{s:o, s:o, s:b}", "content", text_content(text), "structuredContent", doc, "isError", 0));
    free(text);
}

static void on_read(void *arg, const struct eai_http_response *resp)
{
    struct mcp_call *c = arg;
    if (resp->status != 200) {
        finish_error(c, resp);
        return;
    }
    size_t n = resp->body_len < MCP_FILE_MAX ? resp->body_len : MCP_FILE_MAX;
    const char *path = json_string_value(json_object_get(c->args, "path"));
    json_t *sc;
    json_t *t = json_stringn(resp->body, n); /* NULL when not UTF-8 */
    if (t) {
        sc = json_pack("{s:s, s:O, s:I, s:b}", "path", path, "content", t, "size", (json_int_t)resp->body_len,
                       "truncated", resp->body_len > n);
    } else {
        char *b64 = eai_b64_encode(resp->body, n);
        sc = json_pack("{s:s, s:s, s:I, s:b}", "path", path, "content_b64", b64 ? b64 : "", "size",
                       (json_int_t)resp->body_len, "truncated", resp->body_len > n);
        free(b64);
        t = json_string("(binary: see content_b64)");
    }
    finish(c, json_pack("{s:[{s:s, s:O}], s:o, s:b}", "content", "type", "text", "text", t, "structuredContent", sc,
                        "isError", 0));
    json_decref(t);
}

/* ------------------------------------------------------------ the call */

/* A call without a profile gets gvisor-small when configured, else the first profile. */
static const char *default_profile(const struct eai_app *app)
{
    if (eai_app_profile(app, "gvisor-small"))
        return "gvisor-small";
    return app->nprofiles > 0 ? app->profiles[0].name : NULL;
}

static void start(struct mcp_call *c)
{
    const json_t *a = c->args;
    const char *why = NULL;
    const char *sid = json_string_value(json_object_get(a, "session_id"));
    const char *path = json_string_value(json_object_get(a, "path"));
    char url[9000], esc[8300];
    int rc = -1;
    if (!strcmp(c->tool, "execute") || !strcmp(c->tool, "session_exec")) {
        int in_session = c->tool[0] == 's';
        if (in_session && !session_id_ok(sid)) {
            why = "session_id is required";
        } else {
            json_t *b = exec_body(a, in_session, default_profile(c->app), &why);
            char *s = b ? json_dumps(b, JSON_COMPACT) : NULL;
            json_decref(b);
            if (s) {
                if (in_session)
                    snprintf(url, sizeof url, "/v1/sandbox/sessions/%s/executions", sid);
                else
                    snprintf(url, sizeof url, "/v1/sandbox/executions");
                rc = self_call(c, "POST", url, s, strlen(s), NULL, on_created);
                free(s);
            }
        }
    } else if (!strcmp(c->tool, "session_create")) {
        json_t *b = json_deep_copy(a);
        if (b && !json_object_get(b, "profile") && default_profile(c->app))
            json_object_set_new(b, "profile", json_string(default_profile(c->app)));
        char *s = b ? json_dumps(b, JSON_COMPACT) : NULL;
        json_decref(b);
        rc = s ? self_call(c, "POST", "/v1/sandbox/sessions", s, strlen(s), NULL, on_simple) : -1;
        free(s);
    } else if (!session_id_ok(sid)) {
        why = "session_id is required";
    } else if (!strcmp(c->tool, "session_close")) {
        snprintf(url, sizeof url, "/v1/sandbox/sessions/%s", sid);
        rc = self_call(c, "DELETE", url, NULL, 0, NULL, on_simple);
    } else if (!strcmp(c->tool, "session_list_files")) {
        snprintf(url, sizeof url, "/v1/sandbox/sessions/%s/files", sid);
        rc = self_call(c, "GET", url, NULL, 0, NULL, on_simple);
    } else if (!path || !*path || strlen(path) > 4096) {
        why = "path is required";
    } else {
        escape_path(path[0] == '/' ? path + 1 : path, esc, sizeof esc);
        snprintf(url, sizeof url, "/v1/sandbox/sessions/%s/files/%s", sid, esc);
        if (!strcmp(c->tool, "session_read_file")) {
            rc = self_call(c, "GET", url, NULL, 0, NULL, on_read);
        } else { /* session_write_file */
            const char *text = json_string_value(json_object_get(a, "content"));
            const char *b64 = json_string_value(json_object_get(a, "content_b64"));
            size_t n = 0;
            unsigned char *raw = b64 ? eai_b64_decode(b64, &n) : NULL;
            if (b64 && !raw)
                why = "content_b64 is not base64";
            else if (!text && !b64)
                why = "content or content_b64 is required";
            else
                rc = self_call(c, "PUT", url, raw ? (const char *)raw : text, raw ? n : strlen(text),
                               "application/octet-stream", on_simple);
            free(raw);
        }
    }
    if (why) {
        json_t *e = json_pack("{s:s, s:s}", "code", "validation_failed", "message", why);
        finish(c, tool_error(e, why));
        json_decref(e);
    } else if (rc != 0) {
        finish_error(c, NULL);
    }
}

void eai_mcp_tool_call(struct eai_app *app, struct eai_req *r, struct mcp_session *s, const json_t *id,
                       const json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    const json_t *args = json_object_get(params, "arguments");
    static const char *const tools[] = {"execute", "session_create", "session_exec", "session_write_file",
                                        "session_read_file", "session_list_files", "session_close", NULL};
    int known = 0;
    for (const char *const *t = tools; name && *t; t++)
        known |= !strcmp(name, *t);
    if (!known || (args && !json_is_object(args))) {
        eai_reply_json(r, 200, json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                                         -32602, "message", known ? "arguments must be an object" : "unknown tool"));
        return;
    }
    struct mcp_call *c = calloc(1, sizeof *c);
    const char *auth = eai_req_header(r, "Authorization");
    const char *lang = eai_req_header(r, "Accept-Language");
    if (!c || !auth || asprintf(&c->auth, "Authorization: %s", auth) < 0 ||
        (lang && asprintf(&c->lang, "Accept-Language: %.100s", lang) < 0) || !(c->hold = eai_park_hold(eai_mcp_parks(), r))) {
        if (c)
            free(c->auth);
        free(c);
        eai_reply_error(r, EAI_E_INTERNAL, NULL);
        return;
    }
    c->app = app;
    c->s = s;
    c->id = json_incref((json_t *)id);
    c->args = args ? json_deep_copy(args) : json_object();
    snprintf(c->tool, sizeof c->tool, "%s", name);
    const json_t *meta = json_object_get(params, "_meta");
    const json_t *tok = json_object_get(meta, "progressToken");
    if (json_is_string(tok) || json_is_integer(tok))
        c->progress_token = json_incref((json_t *)tok);
    eai_mcp_session_call_add(s, c, &c->next);
    start(c);
}

/* ------------------------------------------------------------ cancellation */

static void on_cancel_sent(void *arg, const struct eai_http_response *resp)
{
    (void)resp;
    char **bits = arg;
    free(bits[0]);
    free(bits[1]);
    free(bits);
}

void eai_mcp_cancel(struct mcp_session *s, const json_t *request_id)
{
    if (!s || !request_id)
        return;
    struct mcp_call *c = eai_mcp_session_calls(s);
    while (c && !json_equal(c->id, request_id))
        c = c->next;
    if (!c || c->cancelled)
        return;
    c->cancelled = 1;
    if (!c->exec_id[0])
        return; /* its POST still flies: on_created cancels */
    char base[200];
    self_base(c->app, base, sizeof base);
    char **bits = calloc(2, sizeof *bits);
    if (!bits || asprintf(&bits[0], "%s/v1/sandbox/executions/%s/cancel", base, c->exec_id) < 0 ||
        !(bits[1] = strdup(c->auth))) {
        if (bits)
            free(bits[0]);
        free(bits);
        return;
    }
    const char *headers[] = {bits[1], "Content-Type: application/json", "User-Agent: eaid-mcp/1", NULL};
    struct eai_http_request hr = {.method = "POST", .url = bits[0], .headers = headers, .body = "{}", .body_len = 2,
                                  .timeout_ms = 30000, .insecure = c->app->cfg && c->app->cfg->tls_cert ? 1 : 0};
    c->app->host->http_request(c->app->host, &hr, on_cancel_sent, bits);
}
