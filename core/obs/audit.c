/*
 * Canonical JSON for the audit chain (written down in docs/audit.md):
 *  - objects: members sorted by key, compared as bytes of their UTF-8
 *    encoding (the same order as by code point), no whitespace;
 *  - strings: UTF-8 as is, escaping only '"', '\\' and control characters
 *    (\b \f \n \r \t, others as \u00xx with lowercase hex);
 *  - integers: decimal, no leading zeros or plus sign; true/false/null;
 *  - real numbers are not allowed in audit events (refused).
 * The member "hash" is left out; "prev_hash" is included.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obs/audit.h"
#include "base/util.h"

struct eai_sbuf {
    char *p;
    size_t len, cap;
    int bad;
};

static void sb_put(struct eai_sbuf *b, const char *s, size_t n)
{
    if (b->bad)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->bad = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(struct eai_sbuf *b, const char *s, size_t n)
{
    if (!eai_utf8_valid(s, n)) {
        b->bad = 1;
        return;
    }
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"': sb_put(b, "\\\"", 2); break;
        case '\\': sb_put(b, "\\\\", 2); break;
        case '\b': sb_put(b, "\\b", 2); break;
        case '\f': sb_put(b, "\\f", 2); break;
        case '\n': sb_put(b, "\\n", 2); break;
        case '\r': sb_put(b, "\\r", 2); break;
        case '\t': sb_put(b, "\\t", 2); break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof(esc), "\\u%04x", c);
                sb_put(b, esc, 6);
            } else {
                sb_put(b, (const char *)&s[i], 1);
            }
        }
    }
    sb_put(b, "\"", 1);
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void sb_value(struct eai_sbuf *b, const json_t *v, int top)
{
    char num[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        size_t n = json_object_size(v), i = 0;
        const char **keys = calloc(n ? n : 1, sizeof(*keys));
        if (!keys) {
            b->bad = 1;
            return;
        }
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) keys[i++] = k;
        qsort(keys, n, sizeof(*keys), key_cmp);
        sb_put(b, "{", 1);
        int first = 1;
        for (i = 0; i < n; i++) {
            if (top && strcmp(keys[i], "hash") == 0)
                continue;
            if (!first)
                sb_put(b, ",", 1);
            first = 0;
            sb_str(b, keys[i], strlen(keys[i]));
            sb_put(b, ":", 1);
            sb_value(b, json_object_get(v, keys[i]), 0);
        }
        sb_put(b, "}", 1);
        free(keys);
        break;
    }
    case JSON_ARRAY:
        sb_put(b, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                sb_put(b, ",", 1);
            sb_value(b, json_array_get(v, i), 0);
        }
        sb_put(b, "]", 1);
        break;
    case JSON_STRING:
        sb_str(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        sb_put(b, num, strlen(num));
        break;
    case JSON_TRUE: sb_put(b, "true", 4); break;
    case JSON_FALSE: sb_put(b, "false", 5); break;
    case JSON_NULL: sb_put(b, "null", 4); break;
    case JSON_REAL:
    default:
        b->bad = 1;
    }
}

char *eai_audit_canonical(const json_t *event)
{
    struct eai_sbuf b = {0};
    if (!json_is_object(event))
        return NULL;
    sb_value(&b, event, 1);
    if (b.bad) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

static int eai_audit_compute(const json_t *event, const char *prev, char out[65])
{
    char *canon = eai_audit_canonical(event);
    if (!canon)
        return -1;
    size_t pl = strlen(prev), cl = strlen(canon);
    char *msg = malloc(pl + cl + 1);
    if (!msg) {
        free(canon);
        return -1;
    }
    memcpy(msg, prev, pl);
    memcpy(msg + pl, canon, cl + 1);
    eai_sha256_hex(msg, pl + cl, out);
    free(msg);
    free(canon);
    return 0;
}

int eai_audit_seal(json_t *event, const char *prev_hash)
{
    const char *prev = prev_hash && *prev_hash ? prev_hash : EAI_AUDIT_ZERO_HASH;
    char h[65];
    if (json_object_set_new(event, "prev_hash", json_string(prev)) < 0)
        return -1;
    if (eai_audit_compute(event, prev, h) < 0)
        return -1;
    return json_object_set_new(event, "hash", json_string(h));
}

int eai_audit_check(const json_t *event)
{
    const char *prev = json_string_value(json_object_get(event, "prev_hash"));
    const char *hash = json_string_value(json_object_get(event, "hash"));
    char h[65];
    if (!prev || !hash || eai_audit_compute(event, prev, h) < 0)
        return 0;
    return strcmp(h, hash) == 0;
}
