#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/errors.h"
#include "http/http_util.h"
#include "http/details_i18n.h"

/* One language range: returns its q (0..1000) and sets *lang to "en",
 * "fr", "*" or NULL (other languages). */
static int parse_range(const char *s, size_t n, const char **lang)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    size_t start = i;
    while (i < n && s[i] != ';' && s[i] != ' ' && s[i] != '\t')
        i++;
    size_t tag_len = i - start;
    const char *tag = s + start;
    size_t primary = 0;
    while (primary < tag_len && tag[primary] != '-')
        primary++;
    *lang = NULL;
    if (tag_len == 1 && tag[0] == '*')
        *lang = "*";
    else if (primary == 2 && strncasecmp(tag, "en", 2) == 0)
        *lang = "en";
    else if (primary == 2 && strncasecmp(tag, "fr", 2) == 0)
        *lang = "fr";
    int q = 1000;
    /* parameters: ;q=0.8 (others ignored) */
    while (i < n) {
        while (i < n && s[i] != ';')
            i++;
        if (i >= n)
            break;
        i++;
        while (i < n && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i + 1 < n && (s[i] == 'q' || s[i] == 'Q') && s[i + 1] == '=') {
            i += 2;
            int whole = 0, frac = 0, digits = 0, ok = 0;
            if (i < n && (s[i] == '0' || s[i] == '1')) {
                whole = s[i] - '0';
                i++;
                ok = 1;
                if (i < n && s[i] == '.') {
                    i++;
                    while (i < n && isdigit((unsigned char)s[i]) && digits < 3) {
                        frac = frac * 10 + (s[i] - '0');
                        digits++;
                        i++;
                    }
                }
                while (digits < 3) {
                    frac *= 10;
                    digits++;
                }
            }
            if (!ok)
                return 0; /* malformed q: ignore the range */
            q = whole * 1000 + frac;
            if (q > 1000)
                q = 1000;
        }
    }
    return q;
}

const char *eai_http_negotiate_lang(const char *h)
{
    if (!h || !*h)
        return "en";
    const char *best = NULL;
    int best_q = 0;
    const char *p = h;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *lang;
        int q = parse_range(p, n, &lang);
        if (lang && q > best_q) {
            best_q = q;
            best = lang;
        }
        if (!end)
            break;
        p = end + 1;
    }
    if (!best || strcmp(best, "*") == 0)
        return "en";
    return best;
}

int eai_http_request_id_ok(const char *id)
{
    if (!id)
        return 0;
    size_t n = strlen(id);
    if (n == 0 || n > 128)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!(isalnum((unsigned char)c) || c == '.' || c == '_' || c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

static int hexv(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decode n bytes (no '+' rule in paths); NULL on a bad escape or NUL. */
static char *pct_decode(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t o = 0, i = 0;
    for (;;) {
        /* the run up to the next '%' in one copy (an id has none) */
        const char *pct = memchr(s + i, '%', n - i);
        size_t run = pct ? (size_t)(pct - (s + i)) : n - i;
        memcpy(out + o, s + i, run);
        o += run;
        i += run;
        if (!pct)
            break;
        if (i + 2 >= n) {
            free(out);
            return NULL;
        }
        int a = hexv((unsigned char)s[i + 1]), b = hexv((unsigned char)s[i + 2]);
        if (a < 0 || b < 0 || (a == 0 && b == 0)) {
            free(out);
            return NULL;
        }
        out[o++] = (char)(a << 4 | b);
        i += 3;
    }
    out[o] = '\0';
    return out;
}

void eai_route_params_clear(struct eai_route_params *p)
{
    for (int i = 0; i < p->n; i++)
        free(p->value[i]);
    memset(p, 0, sizeof(*p));
}

static int add_param(struct eai_route_params *p, const char *name, size_t nlen, const char *val, size_t vlen)
{
    if (p->n >= EAI_ROUTE_MAX_PARAMS || nlen >= sizeof(p->name[0]))
        return -1;
    char *v = pct_decode(val, vlen);
    if (!v)
        return -1;
    memcpy(p->name[p->n], name, nlen);
    p->name[p->n][nlen] = '\0';
    p->value[p->n++] = v;
    return 0;
}

int eai_route_match(const char *pattern, const char *path, struct eai_route_params *params)
{
    struct eai_route_params tmp;
    memset(&tmp, 0, sizeof(tmp));
    const char *pp = pattern, *sp = path;
    if (*pp != '/' || *sp != '/')
        return 0;
    for (;;) {
        if (*pp == '\0' && *sp == '\0')
            break;
        if (*pp != '/' || *sp != '/')
            goto nomatch;
        pp++;
        sp++;
        const char *pend = strchr(pp, '/');
        size_t plen = pend ? (size_t)(pend - pp) : strlen(pp);
        const char *send = strchr(sp, '/');
        size_t slen = send ? (size_t)(send - sp) : strlen(sp);
        if (plen >= 3 && pp[0] == '{' && pp[1] == '*' && pp[plen - 1] == '}') {
            /* the rest of the path, at least one non-empty segment */
            size_t rest = strlen(sp);
            if (rest == 0 || slen == 0)
                goto nomatch;
            if (add_param(&tmp, pp + 2, plen - 3, sp, rest) < 0)
                goto bad;
            pp += plen;
            sp += rest;
            continue;
        }
        if (plen >= 2 && pp[0] == '{' && pp[plen - 1] == '}') {
            if (slen == 0)
                goto nomatch;
            if (add_param(&tmp, pp + 1, plen - 2, sp, slen) < 0)
                goto bad;
        } else if (plen != slen || strncmp(pp, sp, plen) != 0) {
            goto nomatch;
        }
        pp += plen;
        sp += slen;
    }
    *params = tmp;
    return 1;
nomatch:
    eai_route_params_clear(&tmp);
    return 0;
bad:
    eai_route_params_clear(&tmp);
    return -1;
}

json_t *eai_http_error_envelope(enum eai_code code, const char *lang, const char *request_id,
                                json_t *details)
{
    const struct eai_code_info *ci = eai_code_info(code);
    if (!details)
        details = json_array();
    eai_details_localize(details, lang);
    json_t *e = json_pack("{s:{s:s, s:s, s:{s:s, s:s}, s:s, s:o}}", "error",
                          "code", ci->name,
                          "message", (lang && strcmp(lang, "fr") == 0) ? ci->fr : ci->en,
                          "message_i18n", "en", ci->en, "fr", ci->fr,
                          "request_id", request_id ? request_id : "",
                          "details", details ? details : json_array());
    return e;
}

const char *eai_http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
    }
}
