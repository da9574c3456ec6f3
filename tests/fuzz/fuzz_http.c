/* HTTP request helpers (core/http/http_util.h, core/http/server.c's query step):
 * the input is split on newlines into an Accept-Language value, an
 * X-Request-Id, a path and a query string.
 * Invariants: language is "en" or "fr"; a request id accepted is 1..128
 * safe characters; route matching against the real route table gives at
 * most EAI_ROUTE_MAX_PARAMS non-NULL captures, a capture-free pattern
 * matches only its exact text, and a match of the path re-encoded from
 * the captures gives the same captures back. */
#include <sys/queue.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "fuzz_util.h"
#include "http/http_util.h"
#include "http/routes.h"

static char *next_line(char **p)
{
    char *s = *p;
    if (!s)
        return "";
    char *nl = strchr(s, '\n');
    if (nl) {
        *nl = '\0';
        *p = nl + 1;
    } else {
        *p = NULL;
    }
    return s;
}

/* Percent-encode every byte outside [A-Za-z0-9._~-] (malloc'd). */
static char *pct_encode(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(3 * n + 1), *q = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
            c == '_' || c == '~' || c == '-') {
            *q++ = (char)c;
        } else {
            snprintf(q, 4, "%%%02X", c);
            q += 3;
        }
    }
    *q = '\0';
    return o;
}

/* Rebuild a path from a pattern and captures ({*x} captures keep their
 * '/' separators, except a leading one, which would make an empty segment). */
static char *rebuild(const char *pattern, const struct eai_route_params *p)
{
    size_t cap = strlen(pattern) + 1;
    for (int i = 0; i < p->n; i++)
        cap += 3 * strlen(p->value[i]);
    char *out = malloc(cap), *o = out;
    if (!out)
        return NULL;
    int k = 0;
    for (const char *s = pattern; *s;) {
        if (*s == '{') {
            const char *e = strchr(s, '}');
            FZ_ASSERT(e && k < p->n);
            int rest = s[1] == '*';
            char *enc = pct_encode(p->value[k++]);
            FZ_ASSERT(enc);
            if (rest) /* keep the separators of a multi-segment capture */
                for (char *t = strstr(enc + 1, "%2F"); t; t = strstr(t + 1, "%2F"))
                    memmove(t + 1, t + 3, strlen(t + 3) + 1), *t = '/';
            o += sprintf(o, "%s", enc);
            free(enc);
            s = e + 1;
        } else {
            *o++ = *s++;
        }
    }
    *o = '\0';
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = fz_cstr(data, size);
    if (!buf)
        return 0;
    char *p = buf;
    const char *lang_h = next_line(&p), *rid = next_line(&p), *path = next_line(&p);
    const char *query = next_line(&p);

    const char *lang = eai_http_negotiate_lang(lang_h);
    FZ_ASSERT(lang && (strcmp(lang, "en") == 0 || strcmp(lang, "fr") == 0));

    if (eai_http_request_id_ok(rid)) {
        size_t n = strlen(rid);
        FZ_ASSERT(n >= 1 && n <= 128);
        FZ_ASSERT(strspn(rid, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") == n);
    }

    for (size_t i = 0; i < eai_nroutes; i++) {
        const char *pat = eai_routes[i].pattern;
        struct eai_route_params rp;
        int rc = eai_route_match(pat, path, &rp);
        FZ_ASSERT(rc == -1 || rc == 0 || rc == 1);
        if (rc != 1)
            continue;
        FZ_ASSERT(rp.n >= 0 && rp.n <= EAI_ROUTE_MAX_PARAMS);
        if (!strchr(pat, '{'))
            FZ_ASSERT(strcmp(pat, path) == 0 && rp.n == 0);
        for (int k = 0; k < rp.n; k++)
            FZ_ASSERT(rp.value[k] != NULL && rp.value[k][0] != '\0' && rp.name[k][0] != '\0');
        char *again = rebuild(pat, &rp);
        FZ_ASSERT(again);
        struct eai_route_params rp2;
        FZ_ASSERT(eai_route_match(pat, again, &rp2) == 1);
        FZ_ASSERT(rp2.n == rp.n);
        for (int k = 0; k < rp.n; k++)
            FZ_ASSERT(strcmp(rp.value[k], rp2.value[k]) == 0 && strcmp(rp.name[k], rp2.name[k]) == 0);
        eai_route_params_clear(&rp2);
        free(again);
        eai_route_params_clear(&rp);
    }

    /* the query step of core/http/server.c (libevent's decoder) */
    struct evkeyvalq q;
    TAILQ_INIT(&q);
    if (evhttp_parse_query_str(query, &q) == 0) {
        for (struct evkeyval *kv = TAILQ_FIRST(&q); kv; kv = TAILQ_NEXT(kv, next))
            FZ_ASSERT(kv->key != NULL && kv->value != NULL);
    }
    evhttp_clear_headers(&q);

    free(buf);
    return 0;
}
