/*
 * eai: command-line client of the eai-sandbox API (docs/executions.md, "CLI").
 *
 *   eai exec --profile P --image I [--timeout S] [--memory M] [--cpu C]
 *            [--file LOCAL:/tmp/PATH]... [--env K=V]... [--stdin-file F]
 *            [--tool T] [--collect /tmp/DIR]... [--run-id R] -- CMD ARGS...
 *   eai get ID        the execution as JSON
 *   eai logs ID       its stdout (to stdout), then its stderr (to stderr)
 *   eai cancel ID
 *
 * EAI_URL (default http://127.0.0.1:8080) and EAI_API_KEY.
 * `eai exec` exits with the program's exit code; 124 on timeout, 137 when
 * the memory limit killed it, 125 with a one-line reason on stderr when the
 * request was refused, the execution was cancelled or the platform could
 * not run it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#define EXIT_PLATFORM 125
#define EXIT_TIMEOUT 124
#define EXIT_OOM 137
#define WAIT_S 30
#define MAX_LOCAL_FILE (64 << 20)

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* ------------------------------------------------------------ small helpers */

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *d, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)d[i] << 16 | (i + 1 < n ? (unsigned)d[i + 1] << 8 : 0) |
                     (i + 2 < n ? d[i + 2] : 0);
        out[k++] = b64chars[(v >> 18) & 63];
        out[k++] = b64chars[(v >> 12) & 63];
        out[k++] = i + 1 < n ? b64chars[(v >> 6) & 63] : '=';
        out[k++] = i + 2 < n ? b64chars[v & 63] : '=';
    }
    out[k] = '\0';
    return out;
}

static unsigned char *b64_decode(const char *s, size_t *len)
{
    size_t n = strlen(s);
    unsigned char *out = malloc(n / 4 * 3 + 3);
    if (!out)
        return NULL;
    size_t k = 0;
    unsigned v = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = strchr(b64chars, s[i]);
        if (s[i] == '=' || s[i] == '\n')
            continue;
        if (!p || !s[i]) {
            free(out);
            return NULL;
        }
        v = v << 6 | (unsigned)(p - b64chars);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (unsigned char)(v >> bits);
        }
    }
    *len = k;
    return out;
}

static int utf8_valid(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i], cp;
        size_t len;
        if (c == 0)
            return 0;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}

static unsigned char *read_local(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rbe");
    if (!f)
        return NULL;
    size_t cap = 65536, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
        if (n == cap) {
            if (cap >= MAX_LOCAL_FILE) {
                free(buf);
                buf = NULL;
                errno = EFBIG;
                break;
            }
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        *len = n;
    return buf;
}

/* ------------------------------------------------------------ HTTP */

struct http {
    CURL *curl;
    char *base;
    char *auth;
};

struct buf {
    char *data;
    size_t len;
};

static size_t write_cb(char *p, size_t size, size_t nmemb, void *arg)
{
    struct buf *b = arg;
    size_t n = size * nmemb;
    char *nd = realloc(b->data, b->len + n + 1);
    if (!nd)
        return 0;
    memcpy(nd + b->len, p, n);
    b->data = nd;
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

static int progress_cb(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)arg;
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    return interrupted ? 1 : 0;
}

/* One request; *status = HTTP status (0 on transport error), body in *out
 * (parsed JSON or NULL).  Returns 0 when a response came, -1 otherwise. */
static int http_call(struct http *h, const char *method, const char *path, const char *body,
                     const char *extra_header, long *status, json_t **out, int abortable)
{
    char url[4096];
    snprintf(url, sizeof url, "%s%s", h->base, path);
    struct buf b = {0};
    struct curl_slist *hdrs = NULL;
    hdrs = curl_slist_append(hdrs, h->auth);
    hdrs = curl_slist_append(hdrs, "Accept: application/json");
    if (body)
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    if (extra_header)
        hdrs = curl_slist_append(hdrs, extra_header);
    curl_easy_reset(h->curl);
    curl_easy_setopt(h->curl, CURLOPT_URL, url);
    curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h->curl, CURLOPT_TIMEOUT, (long)WAIT_S + 45);
    curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
    if (abortable) {
        curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, progress_cb);
    }
    if (body) {
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, "");
    }
    CURLcode rc = curl_easy_perform(h->curl);
    curl_slist_free_all(hdrs);
    *status = 0;
    *out = NULL;
    if (rc != CURLE_OK) {
        if (!(abortable && interrupted))
            fprintf(stderr, "eai: %s %s: %s\n", method, url, curl_easy_strerror(rc));
        free(b.data);
        return -1;
    }
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, status);
    if (b.data)
        *out = json_loadb(b.data, b.len, 0, NULL);
    free(b.data);
    return 0;
}

/* One line for an error envelope (or a bare status). */
static void print_api_error(const char *what, long status, const json_t *body)
{
    const json_t *e = json_object_get(body, "error");
    const char *code = jstr(e, "code");
    const char *msg = jstr(e, "message");
    fprintf(stderr, "eai: %s: %s%s%s (HTTP %ld)", what, code ? code : "error", msg ? ": " : "",
            msg ? msg : "", status);
    const json_t *details = json_object_get(e, "details");
    size_t i;
    const json_t *d;
    json_array_foreach(details, i, d) {
        if (i >= 3)
            break;
        fprintf(stderr, "%s %s %s", i ? ";" : ":", jstr(d, "path") ? jstr(d, "path") : "",
                jstr(d, "message") ? jstr(d, "message") : "");
    }
    fputc('\n', stderr);
}

static int http_init(struct http *h)
{
    const char *url = getenv("EAI_URL");
    const char *key = getenv("EAI_API_KEY");
    if (!key || !*key) {
        fprintf(stderr, "eai: EAI_API_KEY is not set\n");
        return -1;
    }
    if (!url || !*url)
        url = "http://127.0.0.1:8080";
    h->base = strdup(url);
    size_t n = strlen(key) + 32;
    h->auth = malloc(n);
    h->curl = curl_easy_init();
    if (!h->base || !h->auth || !h->curl) {
        fprintf(stderr, "eai: out of memory\n");
        return -1;
    }
    size_t bl = strlen(h->base);
    while (bl > 0 && h->base[bl - 1] == '/')
        h->base[--bl] = '\0';
    snprintf(h->auth, n, "Authorization: Bearer %s", key);
    return 0;
}

static void http_free(struct http *h)
{
    if (h->curl)
        curl_easy_cleanup(h->curl);
    free(h->base);
    free(h->auth);
}

/* ------------------------------------------------------------ output */

static void write_all(FILE *f, const char *d, size_t n)
{
    if (n && fwrite(d, 1, n, f) != n)
        perror("eai: write");
    fflush(f);
}

/* Write rec[key] (text or base64 per rec[key_encoding]) to f. */
static void print_stream(const json_t *rec, const char *key, FILE *f)
{
    char ek[32];
    snprintf(ek, sizeof ek, "%s_encoding", key);
    const json_t *v = json_object_get(rec, key);
    if (!json_is_string(v))
        return;
    const char *enc = jstr(rec, ek);
    if (enc && strcmp(enc, "base64") == 0) {
        size_t n = 0;
        unsigned char *raw = b64_decode(json_string_value(v), &n);
        if (raw)
            write_all(f, (const char *)raw, n);
        free(raw);
    } else {
        write_all(f, json_string_value(v), json_string_length(v));
    }
}

static int is_terminal(const char *s)
{
    static const char *const t[] = {"succeeded", "failed", "timeout", "oom_killed", "cancelled", "error"};
    for (size_t i = 0; s && i < sizeof t / sizeof t[0]; i++)
        if (strcmp(s, t[i]) == 0)
            return 1;
    return 0;
}

static int exit_for(const json_t *rec)
{
    const char *s = jstr(rec, "status");
    const char *id = jstr(rec, "id") ? jstr(rec, "id") : "?";
    if (!s)
        return EXIT_PLATFORM;
    if (strcmp(s, "succeeded") == 0)
        return 0;
    if (strcmp(s, "failed") == 0) {
        const json_t *code = json_object_get(rec, "exit_code");
        const json_t *sig = json_object_get(rec, "signal");
        if (json_is_integer(code) && json_integer_value(code) > 0)
            return (int)(json_integer_value(code) & 0xff) ? (int)(json_integer_value(code) & 0xff) : 1;
        if (json_is_integer(sig))
            return 128 + (int)json_integer_value(sig);
        return 1;
    }
    if (strcmp(s, "timeout") == 0) {
        fprintf(stderr, "eai: %s: timeout: the program ran past its time limit and was killed\n", id);
        return EXIT_TIMEOUT;
    }
    if (strcmp(s, "oom_killed") == 0) {
        fprintf(stderr, "eai: %s: oom_killed: the program hit its memory limit and was killed\n", id);
        return EXIT_OOM;
    }
    if (strcmp(s, "cancelled") == 0) {
        fprintf(stderr, "eai: %s: cancelled\n", id);
        return EXIT_PLATFORM;
    }
    const json_t *e = json_object_get(rec, "error");
    fprintf(stderr, "eai: %s: error: %s: %s\n", id, jstr(e, "code") ? jstr(e, "code") : "unknown",
            jstr(e, "message") ? jstr(e, "message") : "the platform could not run the program");
    return EXIT_PLATFORM;
}

/* ------------------------------------------------------------ commands */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: eai exec [options] -- CMD [ARGS...]\n"
        "       eai get ID | eai logs ID | eai cancel ID\n"
        "\n"
        "exec options:\n"
        "  --profile P             sandbox profile (see GET /v1/sandbox/profiles)\n"
        "  --image I               image NAME[:TAG]\n"
        "  --timeout S             wall-clock limit in seconds\n"
        "  --memory M              memory limit (256Mi, 1Gi, bytes)\n"
        "  --cpu C                 CPU limit (500m, 1, 1.5)\n"
        "  --pids N                process limit\n"
        "  --file LOCAL:/tmp/PATH  copy a local file into the sandbox (repeatable)\n"
        "  --env K=V               environment variable (repeatable)\n"
        "  --stdin-file F          file given to the program's standard input (- for ours)\n"
        "  --collect /tmp/DIR      path whose files are kept after exit (repeatable)\n"
        "  --tool NAME             run through an applied tool manifest\n"
        "  --project-id, --agent-id, --run-id ID   attribution for FinOps\n"
        "  --idempotency-key K     send an Idempotency-Key header\n"
        "\n"
        "environment: EAI_URL (default http://127.0.0.1:8080), EAI_API_KEY\n"
        "exit status of exec: the program's own; 124 timeout; 137 out of memory;\n"
        "125 refused, cancelled or platform error (one line on stderr says why)\n");
}

static int add_file(json_t *files, const char *spec)
{
    const char *colon = strstr(spec, ":/");
    if (!colon || colon == spec) {
        fprintf(stderr, "eai: --file wants LOCAL:/tmp/PATH, got '%s'\n", spec);
        return -1;
    }
    char *local = strndup(spec, (size_t)(colon - spec));
    size_t len = 0;
    unsigned char *data = local ? read_local(local, &len) : NULL;
    if (!data) {
        fprintf(stderr, "eai: cannot read '%s': %s\n", local ? local : spec, strerror(errno));
        free(local);
        return -1;
    }
    free(local);
    json_t *f;
    if (utf8_valid(data, len)) {
        f = json_pack("{s:s, s:s%}", "path", colon + 1, "content", (const char *)data, len);
    } else {
        char *b = b64_encode(data, len);
        f = b ? json_pack("{s:s, s:s}", "path", colon + 1, "content_b64", b) : NULL;
        free(b);
    }
    free(data);
    if (!f || json_array_append_new(files, f) < 0)
        return -1;
    return 0;
}

static int need_arg(int argc, char **argv, int i)
{
    if (i + 1 >= argc) {
        fprintf(stderr, "eai: %s needs a value\n", argv[i]);
        return -1;
    }
    return 0;
}

static int cmd_exec(int argc, char **argv)
{
    json_t *body = json_object(), *limits = json_object(), *env = json_object();
    json_t *files = json_array(), *collect = json_array(), *command = json_array();
    const char *idem = NULL;
    int i, rc = 2;
    if (!body || !limits || !env || !files || !collect || !command)
        goto out;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            rc = 0;
            goto out;
        }
        if (a[0] != '-' || a[1] != '-')
            break; /* the command starts here */
        if (need_arg(argc, argv, i) < 0)
            goto out;
        const char *v = argv[++i];
        if (strcmp(a, "--profile") == 0)
            json_object_set_new(body, "profile", json_string(v));
        else if (strcmp(a, "--image") == 0)
            json_object_set_new(body, "image", json_string(v));
        else if (strcmp(a, "--tool") == 0)
            json_object_set_new(body, "tool", json_string(v));
        else if (strcmp(a, "--project-id") == 0)
            json_object_set_new(body, "project_id", json_string(v));
        else if (strcmp(a, "--agent-id") == 0)
            json_object_set_new(body, "agent_id", json_string(v));
        else if (strcmp(a, "--run-id") == 0)
            json_object_set_new(body, "run_id", json_string(v));
        else if (strcmp(a, "--idempotency-key") == 0)
            idem = v;
        else if (strcmp(a, "--timeout") == 0 || strcmp(a, "--pids") == 0) {
            char *end = NULL;
            long long n = strtoll(v, &end, 10);
            if (!*v || *end || n <= 0) {
                fprintf(stderr, "eai: %s wants a positive integer, got '%s'\n", a, v);
                goto out;
            }
            json_object_set_new(limits, strcmp(a, "--timeout") == 0 ? "timeout_s" : "pids", json_integer(n));
        } else if (strcmp(a, "--memory") == 0)
            json_object_set_new(limits, "memory", json_string(v));
        else if (strcmp(a, "--cpu") == 0)
            json_object_set_new(limits, "cpu", json_string(v));
        else if (strcmp(a, "--collect") == 0)
            json_array_append_new(collect, json_string(v));
        else if (strcmp(a, "--env") == 0) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v) {
                fprintf(stderr, "eai: --env wants K=V, got '%s'\n", v);
                goto out;
            }
            char *k = strndup(v, (size_t)(eq - v));
            if (!k)
                goto out;
            json_object_set_new(env, k, json_string(eq + 1));
            free(k);
        } else if (strcmp(a, "--file") == 0) {
            if (add_file(files, v) < 0)
                goto out;
        } else if (strcmp(a, "--stdin-file") == 0) {
            size_t len = 0;
            unsigned char *d = read_local(strcmp(v, "-") == 0 ? "/dev/stdin" : v, &len);
            if (!d) {
                fprintf(stderr, "eai: cannot read '%s': %s\n", v, strerror(errno));
                goto out;
            }
            if (!utf8_valid(d, len)) {
                fprintf(stderr, "eai: --stdin-file: the API takes text stdin (UTF-8 without NUL)\n");
                free(d);
                goto out;
            }
            json_object_set_new(body, "stdin", json_stringn((const char *)d, len));
            free(d);
        } else {
            fprintf(stderr, "eai: unknown option %s (see eai exec --help)\n", a);
            goto out;
        }
    }
    for (; i < argc; i++)
        json_array_append_new(command, json_string(argv[i]));
    if (json_array_size(command) == 0) {
        fprintf(stderr, "eai: no command given (eai exec [options] -- CMD ARGS...)\n");
        goto out;
    }
    json_object_set(body, "command", command);
    if (json_object_size(limits))
        json_object_set(body, "limits", limits);
    if (json_object_size(env))
        json_object_set(body, "env", env);
    if (json_array_size(files))
        json_object_set(body, "files", files);
    if (json_array_size(collect))
        json_object_set(body, "collect", collect);

    struct http h = {0};
    if (http_init(&h) < 0) {
        http_free(&h);
        rc = EXIT_PLATFORM;
        goto out;
    }
    char *text = json_dumps(body, JSON_COMPACT);
    char idem_h[320];
    if (idem)
        snprintf(idem_h, sizeof idem_h, "Idempotency-Key: %s", idem);
    long status;
    json_t *resp = NULL;
    rc = EXIT_PLATFORM;
    if (!text || http_call(&h, "POST", "/v1/sandbox/executions", text, idem ? idem_h : NULL,
                           &status, &resp, 0) < 0) {
        free(text);
        http_free(&h);
        goto out;
    }
    free(text);
    if ((status != 202 && status != 200) || !jstr(resp, "id")) {
        print_api_error("refused", status, resp);
        json_decref(resp);
        http_free(&h);
        goto out;
    }
    char id[128], path[256];
    snprintf(id, sizeof id, "%s", jstr(resp, "id"));
    json_decref(resp);
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    int cancel_sent = 0, failures = 0;
    for (;;) {
        if (failures >= 30) {
            fprintf(stderr, "eai: %s: giving up waiting (the server does not answer)\n", id);
            break;
        }
        if (interrupted && !cancel_sent) {
            snprintf(path, sizeof path, "/v1/sandbox/executions/%s/cancel", id);
            json_t *cr = NULL;
            http_call(&h, "POST", path, NULL, NULL, &status, &cr, 0);
            json_decref(cr);
            cancel_sent = 1;
        }
        snprintf(path, sizeof path, "/v1/sandbox/executions/%s?wait_s=%d", id, cancel_sent ? 5 : WAIT_S);
        resp = NULL;
        if (http_call(&h, "GET", path, NULL, NULL, &status, &resp, !cancel_sent) < 0) {
            if (interrupted && !cancel_sent)
                continue;
            failures++;
            sleep(1); /* transport error: the server may be restarting */
            continue;
        }
        if (status != 200) {
            print_api_error(id, status, resp);
            json_decref(resp);
            if (status >= 500 && status != 501) {
                failures++;
                sleep(1);
                continue;
            }
            break;
        }
        failures = 0;
        if (is_terminal(jstr(resp, "status"))) {
            print_stream(resp, "stdout", stdout);
            print_stream(resp, "stderr", stderr);
            if (json_is_true(json_object_get(resp, "stdout_truncated")))
                fprintf(stderr, "eai: %s: stdout was truncated at the output limit\n", id);
            if (json_is_true(json_object_get(resp, "stderr_truncated")))
                fprintf(stderr, "eai: %s: stderr was truncated at the output limit\n", id);
            rc = exit_for(resp);
            json_decref(resp);
            break;
        }
        json_decref(resp);
    }
    http_free(&h);
out:
    json_decref(body);
    json_decref(limits);
    json_decref(env);
    json_decref(files);
    json_decref(collect);
    json_decref(command);
    return rc;
}

static int cmd_simple(const char *cmd, const char *id)
{
    struct http h = {0};
    if (http_init(&h) < 0) {
        http_free(&h);
        return 1;
    }
    char path[512];
    long status;
    json_t *resp = NULL;
    int rc = 1;
    int cancel = strcmp(cmd, "cancel") == 0;
    if (cancel)
        snprintf(path, sizeof path, "/v1/sandbox/executions/%s/cancel", id);
    else
        snprintf(path, sizeof path, "/v1/sandbox/executions/%s", id);
    if (http_call(&h, cancel ? "POST" : "GET", path, NULL, NULL, &status, &resp, 0) == 0) {
        if ((status == 200 || status == 202) && resp) {
            if (strcmp(cmd, "logs") == 0) {
                print_stream(resp, "stdout", stdout);
                print_stream(resp, "stderr", stderr);
            } else {
                char *s = json_dumps(resp, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                if (s)
                    printf("%s\n", s);
                free(s);
            }
            rc = 0;
        } else {
            print_api_error(cmd, status, resp);
        }
    }
    json_decref(resp);
    http_free(&h);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc;
    if (strcmp(argv[1], "exec") == 0) {
        rc = cmd_exec(argc - 1, argv + 1);
    } else if (strcmp(argv[1], "get") == 0 || strcmp(argv[1], "logs") == 0 ||
               strcmp(argv[1], "cancel") == 0) {
        if (argc != 3) {
            fprintf(stderr, "usage: eai %s ID\n", argv[1]);
            rc = 2;
        } else {
            rc = cmd_simple(argv[1], argv[2]);
        }
    } else {
        fprintf(stderr, "eai: unknown command '%s'\n", argv[1]);
        usage(stderr);
        rc = 2;
    }
    curl_global_cleanup();
    return rc;
}
