/* eai: HTTP requests, language, error envelopes, downloads (libcurl easy API:
 * a command-line client blocks by design). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "eai.h"

const char *eai_lang(const struct eai_opts *o)
{
    const char *v = o && o->lang && *o->lang ? o->lang : NULL;
    /* POSIX precedence: LC_ALL, then LC_MESSAGES, then LANG */
    const char *vars[] = {"LC_ALL", "LC_MESSAGES", "LANG"};
    for (size_t i = 0; !v && i < sizeof vars / sizeof vars[0]; i++) {
        const char *e = getenv(vars[i]);
        if (e && *e)
            v = e;
    }
    if (v && (v[0] == 'f' || v[0] == 'F') && (v[1] == 'r' || v[1] == 'R') &&
        (v[2] == '\0' || v[2] == '_' || v[2] == '-' || v[2] == '.' || v[2] == '@'))
        return "fr";
    return "en";
}

int eai_http_init(struct eai_http *h, const struct eai_opts *o)
{
    memset(h, 0, sizeof *h);
    const char *url = o && o->url && *o->url ? o->url : getenv("EAI_URL");
    const char *key = getenv("EAI_API_KEY");
    if (!key || !*key) {
        fprintf(stderr, "eai: EAI_API_KEY is not set (create a key with `eaid keys create --tenant ID`)\n");
        return -1;
    }
    if (!url || !*url)
        url = "http://127.0.0.1:8080";
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) {
        fprintf(stderr, "eai: the server URL must start with http:// or https://, got '%s'\n", url);
        return -1;
    }
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
    snprintf(h->lang_hdr, sizeof h->lang_hdr, "Accept-Language: %s", eai_lang(o));
    return 0;
}

void eai_http_free(struct eai_http *h)
{
    if (h->curl)
        curl_easy_cleanup(h->curl);
    free(h->base);
    if (h->auth)
        memset(h->auth, 0, strlen(h->auth));
    free(h->auth);
    memset(h, 0, sizeof *h);
}

struct buf {
    char *data;
    size_t len;
};

static size_t write_mem(char *p, size_t size, size_t nmemb, void *arg)
{
    struct buf *b = arg;
    size_t n = size * nmemb;
    if (b->len + n > EAI_MAX_RESPONSE)
        return 0;
    char *nd = realloc(b->data, b->len + n + 1);
    if (!nd)
        return 0;
    memcpy(nd + b->len, p, n);
    b->data = nd;
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

int eai_http_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)arg;
    (void)a;
    (void)b;
    (void)c;
    (void)d;
    return eai_interrupted ? 1 : 0;
}

struct curl_slist *eai_http_headers(struct eai_http *h, const char *accept, const char *extra, int has_body)
{
    struct curl_slist *hdrs = NULL, *t;
    const char *list[] = {h->auth, accept, h->lang_hdr,
                          has_body ? "Content-Type: application/json" : NULL, extra};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        if (!list[i])
            continue;
        t = curl_slist_append(hdrs, list[i]);
        if (!t) {
            curl_slist_free_all(hdrs);
            return NULL;
        }
        hdrs = t;
    }
    return hdrs;
}

void eai_http_setup(struct eai_http *h, const char *url, struct curl_slist *hdrs, long timeout_s)
{
    curl_easy_reset(h->curl);
    curl_easy_setopt(h->curl, CURLOPT_URL, url);
    curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(h->curl, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h->curl, CURLOPT_PROTOCOLS_STR, "http,https");
}

int eai_http_call(struct eai_http *h, const char *method, const char *path, const char *body,
                  const char *extra_header, long *status, json_t **out, int abortable)
{
    return eai_http_call_len(h, method, path, body, body ? strlen(body) : 0, extra_header, status, out, abortable);
}

int eai_http_call_len(struct eai_http *h, const char *method, const char *path, const char *body, size_t len,
                      const char *extra_header, long *status, json_t **out, int abortable)
{
    char url[8192];
    *status = 0;
    *out = NULL;
    if ((size_t)snprintf(url, sizeof url, "%s%s", h->base, path) >= sizeof url) {
        fprintf(stderr, "eai: URL too long\n");
        return -1;
    }
    struct buf b = {0};
    struct curl_slist *hdrs = eai_http_headers(h, "Accept: application/json", extra_header, body != NULL);
    if (!hdrs) {
        fprintf(stderr, "eai: out of memory\n");
        return -1;
    }
    eai_http_setup(h, url, hdrs, (long)EAI_WAIT_S + 45);
    curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, write_mem);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &b);
    if (abortable) {
        curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, eai_http_progress);
    }
    if (body) {
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, "");
    }
    CURLcode rc = curl_easy_perform(h->curl);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        if (!(abortable && eai_interrupted))
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

struct dl {
    CURL *curl;
    FILE *f;
    struct buf err;
    uint64_t bytes;
    int is_error;
    int checked;
};

static size_t write_dl(char *p, size_t size, size_t nmemb, void *arg)
{
    struct dl *d = arg;
    size_t n = size * nmemb;
    if (!d->checked) {
        long st = 0;
        curl_easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, &st);
        d->is_error = st < 200 || st > 299;
        d->checked = 1;
    }
    if (d->is_error)
        return d->err.len + n > (1 << 20) ? 0 : write_mem(p, size, nmemb, &d->err);
    if (d->bytes + n > (uint64_t)EAI_MAX_DOWNLOAD)
        return 0;
    if (fwrite(p, 1, n, d->f) != n)
        return 0;
    d->bytes += n;
    return n;
}

int eai_http_download(struct eai_http *h, const char *path, FILE *f, long *status, json_t **err_body,
                      uint64_t *bytes)
{
    char url[8192];
    *status = 0;
    *err_body = NULL;
    if ((size_t)snprintf(url, sizeof url, "%s%s", h->base, path) >= sizeof url) {
        fprintf(stderr, "eai: URL too long\n");
        return -1;
    }
    struct curl_slist *hdrs = eai_http_headers(h, "Accept: application/json", NULL, 0);
    if (!hdrs)
        return -1;
    struct dl d = {.curl = h->curl, .f = f};
    eai_http_setup(h, url, hdrs, 600L);
    curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, write_dl);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &d);
    curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, eai_http_progress);
    CURLcode rc = curl_easy_perform(h->curl);
    curl_slist_free_all(hdrs);
    if (rc != CURLE_OK) {
        fprintf(stderr, "eai: GET %s: %s\n", url, curl_easy_strerror(rc));
        free(d.err.data);
        return -1;
    }
    curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, status);
    if (d.err.data)
        *err_body = json_loadb(d.err.data, d.err.len, 0, NULL);
    free(d.err.data);
    *bytes = d.bytes;
    return 0;
}

void eai_print_api_error(const char *what, long status, const json_t *body)
{
    const json_t *e = json_object_get(body, "error");
    const char *code = eai_jstr(e, "code");
    const char *msg = eai_jstr(e, "message");
    fprintf(stderr, "eai: %s: %s%s%s (HTTP %ld", what, code ? code : "error", msg ? ": " : "",
            msg ? msg : "", status);
    if (eai_jstr(e, "request_id"))
        fprintf(stderr, ", request %s", eai_jstr(e, "request_id"));
    fputc(')', stderr);
    const json_t *details = json_object_get(e, "details");
    size_t i;
    const json_t *d;
    json_array_foreach(details, i, d) {
        if (i >= 5) {
            fprintf(stderr, "; ... (%zu more)", json_array_size(details) - i);
            break;
        }
        const char *p = eai_jstr(d, "path"), *m = eai_jstr(d, "message");
        fprintf(stderr, "%s %s%s%s", i ? ";" : ":", p && *p ? p : "", p && *p ? ": " : "", m ? m : "");
    }
    fputc('\n', stderr);
}

static int append(char *out, size_t n, size_t *len, const char *s, size_t k)
{
    if (*len + k >= n)
        return -1;
    memcpy(out + *len, s, k);
    *len += k;
    out[*len] = '\0';
    return 0;
}

static int append_enc(char *out, size_t n, size_t *len, const char *raw, int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
        int ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                 *p == '-' || *p == '.' || *p == '_' || *p == '~' || (keep_slash && *p == '/');
        char t[3] = {(char)*p, 0, 0};
        if (!ok) {
            t[0] = '%';
            t[1] = hex[*p >> 4];
            t[2] = hex[*p & 15];
        }
        if (append(out, n, len, t, ok ? 1 : 3) < 0)
            return -1;
    }
    return 0;
}

int eai_url_path_append(char *out, size_t n, const char *raw)
{
    size_t len = strlen(out);
    return append_enc(out, n, &len, raw, 1);
}

int eai_url_query_append(char *out, size_t n, const char *k, const char *v)
{
    size_t len = strlen(out);
    if (append(out, n, &len, strchr(out, '?') ? "&" : "?", 1) < 0 || append_enc(out, n, &len, k, 0) < 0 ||
        append(out, n, &len, "=", 1) < 0)
        return -1;
    return append_enc(out, n, &len, v, 0);
}
