/*
 * YAML -> JSON over libyaml's event API (see yamljson.h).
 *
 * Containers under construction live on an explicit stack, so nesting costs
 * no C stack.  Every JSON node created counts against two budgets: nodes
 * (2 * input length + 10000) and bytes of the expanded document, counted as
 * its compact JSON text would take (about: strings and keys + quotes and
 * separators; YJ_BYTES_FACTOR * input length + YJ_BYTES_SLACK).  A document
 * without aliases never reaches either.  An alias costs what its anchor
 * expanded to (recorded when the anchor is defined, O(1) per alias), so
 * alias bombs (billion laughs, or one long anchored string aliased a million
 * times) are refused at the first alias over the budget, before the copy.
 */
#include "schema/yamljson.h"
#include "base/errors.h"
#include "base/util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Expanded bytes allowed: factor * input + slack (docs/contracts.md). */
#define YJ_BYTES_FACTOR 4
#define YJ_BYTES_SLACK (64 * 1024)

#define YJ_TAG_STR "tag:yaml.org,2002:str"
#define YJ_TAG_INT "tag:yaml.org,2002:int"
#define YJ_TAG_FLOAT "tag:yaml.org,2002:float"
#define YJ_TAG_BOOL "tag:yaml.org,2002:bool"
#define YJ_TAG_NULL "tag:yaml.org,2002:null"
#define YJ_TAG_MAP "tag:yaml.org,2002:map"
#define YJ_TAG_SEQ "tag:yaml.org,2002:seq"

struct yj_frame {
    json_t *value;             /* object or array being filled */
    char *anchor;              /* registered when the collection ends */
    char *key;                 /* pending mapping key (object frames) */
    size_t key_len;
    int has_key;
    size_t nodes0, bytes0;     /* budget used when the collection started */
};

struct yj_anchor {
    char *name;
    json_t *value;
    size_t nodes, bytes;       /* what one use of it expands to */
};

struct yj_ctx {
    struct yj_frame stack[EAI_YAML_MAX_DEPTH];
    size_t depth;
    struct yj_anchor *anchors;
    size_t nanchors, capanchors;
    json_t *root;
    size_t nodes, budget;
    size_t bytes, byte_budget;
    struct eai_error *err;
};

static void yj_fail(struct yj_ctx *c, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void yj_fail(struct yj_ctx *c, yaml_mark_t mark, const char *fmt, ...)
{
    if (c->err)
        return;
    char msg[400], full[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    eai_utf8_scrub(msg);   /* "%.*s" of a long key or value may have split a character */
    snprintf(full, sizeof full, "line %zu, column %zu: %s", mark.line + 1, mark.column + 1, msg);
    eai_error_set(&c->err, EAI_E_INVALID_JSON, "YAML %s", full);
    if (c->err)
        c->err->details = json_pack("[{s:s,s:s}]", "path", "", "message", full);
}

static int yj_register_anchor(struct yj_ctx *c, yaml_mark_t mark, char *name, json_t *value,
                              size_t nodes, size_t bytes)
{
    if (!name)
        return 0;
    /* A later anchor of the same name overrides the earlier one (YAML). */
    for (size_t i = 0; i < c->nanchors; i++)
        if (strcmp(c->anchors[i].name, name) == 0) {
            json_decref(c->anchors[i].value);
            c->anchors[i].value = json_incref(value);
            c->anchors[i].nodes = nodes;
            c->anchors[i].bytes = bytes;
            free(name);
            return 0;
        }
    if (c->nanchors == c->capanchors) {
        size_t cap = c->capanchors ? 2 * c->capanchors : 8;
        struct yj_anchor *a = realloc(c->anchors, cap * sizeof *a);
        if (!a) {
            free(name);
            yj_fail(c, mark, "out of memory");
            return -1;
        }
        c->anchors = a;
        c->capanchors = cap;
    }
    c->anchors[c->nanchors].name = name;
    c->anchors[c->nanchors].value = json_incref(value);
    c->anchors[c->nanchors].nodes = nodes;
    c->anchors[c->nanchors].bytes = bytes;
    c->nanchors++;
    return 0;
}

static char *yj_strdup(struct yj_ctx *c, yaml_mark_t mark, const yaml_char_t *s)
{
    if (!s)
        return NULL;
    char *d = strdup((const char *)s);
    if (!d)
        yj_fail(c, mark, "out of memory");
    return d;
}

/* Place a finished value (steals the reference). */
static int yj_add(struct yj_ctx *c, yaml_mark_t mark, json_t *v)
{
    if (!v) {
        yj_fail(c, mark, "out of memory");
        return -1;
    }
    if (c->depth == 0) {
        c->root = v;
        return 0;
    }
    struct yj_frame *f = &c->stack[c->depth - 1];
    if (json_is_array(f->value)) {
        if (json_array_append_new(f->value, v) < 0) {
            yj_fail(c, mark, "out of memory");
            return -1;
        }
        return 0;
    }
    /* Object: a value for the pending key. */
    int rc = json_object_setn_new(f->value, f->key, f->key_len, v);
    free(f->key);
    f->key = NULL;
    f->has_key = 0;
    if (rc < 0) {
        yj_fail(c, mark, "out of memory");
        return -1;
    }
    return 0;
}

/* In an object frame awaiting a key, take this text as the key. */
static int yj_take_key(struct yj_ctx *c, yaml_mark_t mark, const char *s, size_t n)
{
    struct yj_frame *f = &c->stack[c->depth - 1];
    if (json_object_getn(f->value, s, n)) {
        yj_fail(c, mark, "duplicate mapping key '%.*s'", (int)(n > 100 ? 100 : n), s);
        return -1;
    }
    f->key = malloc(n + 1);
    if (!f->key) {
        yj_fail(c, mark, "out of memory");
        return -1;
    }
    memcpy(f->key, s, n);
    f->key[n] = '\0';
    f->key_len = n;
    f->has_key = 1;
    return 0;
}

static int yj_awaiting_key(const struct yj_ctx *c)
{
    return c->depth > 0 && json_is_object(c->stack[c->depth - 1].value) &&
           !c->stack[c->depth - 1].has_key;
}

/* Count n nodes and b bytes of expanded document; fail over either budget. */
static int yj_budget(struct yj_ctx *c, yaml_mark_t mark, size_t n, size_t b)
{
    c->nodes += n;
    c->bytes = b > SIZE_MAX - c->bytes ? SIZE_MAX : c->bytes + b;
    if (c->nodes > c->budget) {
        yj_fail(c, mark, "document expands to too many nodes (alias bomb?)");
        return -1;
    }
    if (c->bytes > c->byte_budget) {
        yj_fail(c, mark, "document expands to more than %zu bytes (alias bomb?)", c->byte_budget);
        return -1;
    }
    return 0;
}

/* --------------------------------------------------------- scalar resolution */

static int all_digits(const char *s, size_t n, int base)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = base == 8 ? (ch >= '0' && ch <= '7')
               : base == 16 ? ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
                               (ch >= 'A' && ch <= 'F'))
               : (ch >= '0' && ch <= '9');
        if (!ok)
            return 0;
    }
    return 1;
}

static int is_core_float(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && (s[i] == '-' || s[i] == '+'))
        i++;
    size_t int_digits = 0, frac_digits = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        i++;
        int_digits++;
    }
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
            frac_digits++;
        }
        /* "[0-9]+\.[0-9]*" or "\.[0-9]+" */
        if (int_digits == 0 && frac_digits == 0)
            return 0;
    } else if (int_digits == 0) {
        return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        size_t exp_digits = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
            exp_digits++;
        }
        if (exp_digits == 0)
            return 0;
    }
    return i == n;
}

static int is_one_of(const char *s, size_t n, const char *const *words)
{
    for (size_t i = 0; words[i]; i++)
        if (strlen(words[i]) == n && memcmp(s, words[i], n) == 0)
            return 1;
    return 0;
}

enum yj_kind { YJ_STR, YJ_NULL, YJ_BOOL, YJ_INT, YJ_FLOAT };

/* Resolve a plain scalar per the YAML 1.2 core schema.  *out is a new
 * value, or NULL with the failure written to *why. */
static enum yj_kind yj_resolve(const char *s, size_t n, json_t **out, const char **why)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    static const char *const specials[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
                                           "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN",
                                           NULL};
    *why = NULL;
    if (is_one_of(s, n, nulls)) {
        *out = json_null();
        return YJ_NULL;
    }
    if (is_one_of(s, n, trues) || is_one_of(s, n, falses)) {
        *out = json_boolean(is_one_of(s, n, trues));
        return YJ_BOOL;
    }
    int base = 0;
    size_t skip = 0, sign = 0;
    if (n > 2 && s[0] == '0' && s[1] == 'o' && all_digits(s + 2, n - 2, 8)) {
        base = 8;
        skip = 2;
    } else if (n > 2 && s[0] == '0' && s[1] == 'x' && all_digits(s + 2, n - 2, 16)) {
        base = 16;
        skip = 2;
    } else {
        sign = n > 0 && (s[0] == '-' || s[0] == '+');
        if (all_digits(s + sign, n - sign, 10))
            base = 10;
    }
    if (base) {
        char tmp[80];
        if (n >= sizeof tmp) {
            *out = NULL;
            *why = "integer out of range";
            return YJ_INT;
        }
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        errno = 0;
        char *end;
        long long v = base == 10 ? strtoll(tmp, &end, 10) : 0;
        if (base != 10) {
            unsigned long long u = strtoull(tmp + skip, &end, base);
            if (u > (unsigned long long)LLONG_MAX)
                errno = ERANGE;
            v = (long long)u;
        }
        if (errno == ERANGE || *end) {
            *out = NULL;
            *why = "integer out of range";
            return YJ_INT;
        }
        *out = json_integer((json_int_t)v);
        return YJ_INT;
    }
    if (is_one_of(s, n, specials)) {
        *out = NULL;
        *why = "infinity and NaN cannot be represented in JSON";
        return YJ_FLOAT;
    }
    if (is_core_float(s, n)) {
        char tmp[400];
        if (n >= sizeof tmp) {
            *out = NULL;
            *why = "number too long";
            return YJ_FLOAT;
        }
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        errno = 0;
        double d = strtod(tmp, NULL);
        if (!isfinite(d)) {
            *out = NULL;
            *why = "number out of range";
            return YJ_FLOAT;
        }
        *out = json_real(d);
        return YJ_FLOAT;
    }
    *out = json_stringn(s, n);
    return YJ_STR;
}

static int yj_scalar(struct yj_ctx *c, const yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    yaml_mark_t mark = ev->start_mark;
    /* a string, number or key: its text, quotes and a separator */
    size_t weight = n + 3;
    if (yj_budget(c, mark, 1, weight) < 0)
        return -1;
    if (yj_awaiting_key(c)) {
        if (tag && strcmp(tag, YJ_TAG_STR) != 0 && strcmp(tag, "!") != 0) {
            yj_fail(c, mark, "mapping keys are strings; tag '%s' is not supported here", tag);
            return -1;
        }
        if (yj_take_key(c, mark, s, n) < 0)
            return -1;
        if (ev->data.scalar.anchor) {
            char *a = yj_strdup(c, mark, ev->data.scalar.anchor);
            json_t *kv = a ? json_stringn(s, n) : NULL;
            int rc = kv ? yj_register_anchor(c, mark, a, kv, 1, weight) : -1;
            if (!kv) {
                free(a);
                yj_fail(c, mark, "out of memory");
            }
            json_decref(kv);
            return rc;
        }
        return 0;
    }
    json_t *v = NULL;
    const char *why = NULL;
    int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (!tag || strcmp(tag, "!") == 0) {
        if (plain && !tag)
            yj_resolve(s, n, &v, &why);
        else
            v = json_stringn(s, n);
    } else if (strcmp(tag, YJ_TAG_STR) == 0) {
        v = json_stringn(s, n);
    } else {
        enum yj_kind want = strcmp(tag, YJ_TAG_INT) == 0     ? YJ_INT
                          : strcmp(tag, YJ_TAG_FLOAT) == 0 ? YJ_FLOAT
                          : strcmp(tag, YJ_TAG_BOOL) == 0  ? YJ_BOOL
                          : strcmp(tag, YJ_TAG_NULL) == 0  ? YJ_NULL
                                                           : YJ_STR;
        if (want == YJ_STR) {
            yj_fail(c, mark, "unsupported tag '%s'", tag);
            return -1;
        }
        enum yj_kind got = yj_resolve(s, n, &v, &why);
        if (!why && got == YJ_INT && want == YJ_FLOAT) {
            json_t *r = json_real((double)json_integer_value(v));
            json_decref(v);
            v = r;
        } else if (!why && got != want) {
            json_decref(v);
            yj_fail(c, mark, "'%.*s' is not a valid value for tag '%s'", (int)(n > 60 ? 60 : n),
                    s, tag);
            return -1;
        }
    }
    if (why) {
        yj_fail(c, mark, "'%.*s': %s", (int)(n > 60 ? 60 : n), s, why);
        return -1;
    }
    if (!v) {
        yj_fail(c, mark, "out of memory");
        return -1;
    }
    if (ev->data.scalar.anchor) {
        char *a = yj_strdup(c, mark, ev->data.scalar.anchor);
        if (!a || yj_register_anchor(c, mark, a, v, 1, weight) < 0) {
            json_decref(v);
            return -1;
        }
    }
    return yj_add(c, mark, v);
}

static int yj_alias(struct yj_ctx *c, const yaml_event_t *ev)
{
    yaml_mark_t mark = ev->start_mark;
    const char *name = (const char *)ev->data.alias.anchor;
    const struct yj_anchor *anchor = NULL;
    for (size_t i = c->nanchors; i-- > 0;)
        if (strcmp(c->anchors[i].name, name) == 0) {
            anchor = &c->anchors[i];
            break;
        }
    if (!anchor) {
        yj_fail(c, mark, "unknown alias '*%s'", name);
        return -1;
    }
    const json_t *target = anchor->value;
    /* charged before the copy is made */
    if (yj_budget(c, mark, anchor->nodes, anchor->bytes) < 0)
        return -1;
    if (yj_awaiting_key(c)) {
        if (!json_is_string(target)) {
            yj_fail(c, mark, "alias '*%s' used as a mapping key is not a string", name);
            return -1;
        }
        return yj_take_key(c, mark, json_string_value(target), json_string_length(target));
    }
    json_t *copy = json_deep_copy(target);
    return yj_add(c, mark, copy);
}

static int yj_start(struct yj_ctx *c, const yaml_event_t *ev, int is_map)
{
    yaml_mark_t mark = ev->start_mark;
    const yaml_char_t *tag = is_map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag;
    const yaml_char_t *anchor = is_map ? ev->data.mapping_start.anchor
                                       : ev->data.sequence_start.anchor;
    if (yj_awaiting_key(c)) {
        yj_fail(c, mark, "mapping keys must be scalars");
        return -1;
    }
    if (tag && strcmp((const char *)tag, "!") != 0 &&
        strcmp((const char *)tag, is_map ? YJ_TAG_MAP : YJ_TAG_SEQ) != 0) {
        yj_fail(c, mark, "unsupported tag '%s'", (const char *)tag);
        return -1;
    }
    if (c->depth >= EAI_YAML_MAX_DEPTH) {
        yj_fail(c, mark, "nesting deeper than %d", EAI_YAML_MAX_DEPTH);
        return -1;
    }
    if (yj_budget(c, mark, 1, 3) < 0)   /* brackets and a separator */
        return -1;
    struct yj_frame *f = &c->stack[c->depth];
    memset(f, 0, sizeof *f);
    f->nodes0 = c->nodes - 1;
    f->bytes0 = c->bytes - 3;
    f->value = is_map ? json_object() : json_array();
    if (!f->value) {
        yj_fail(c, mark, "out of memory");
        return -1;
    }
    if (anchor && !(f->anchor = yj_strdup(c, mark, anchor))) {
        json_decref(f->value);
        return -1;
    }
    c->depth++;
    return 0;
}

static int yj_end(struct yj_ctx *c, const yaml_event_t *ev)
{
    struct yj_frame *f = &c->stack[--c->depth];
    json_t *v = f->value;
    char *anchor = f->anchor;
    size_t nodes = c->nodes - f->nodes0, bytes = c->bytes - f->bytes0;
    free(f->key);
    memset(f, 0, sizeof *f);
    if (anchor && yj_register_anchor(c, ev->start_mark, anchor, v, nodes, bytes) < 0) {
        json_decref(v);
        return -1;
    }
    return yj_add(c, ev->start_mark, v);
}

json_t *eai_yaml_to_json(const char *buf, size_t len, struct eai_error **err)
{
    struct yj_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        eai_error_set(err, EAI_E_INTERNAL, "YAML: out of memory");
        return NULL;
    }
    c->budget = 2 * len + 10000;
    c->byte_budget = len > (SIZE_MAX - YJ_BYTES_SLACK) / YJ_BYTES_FACTOR
                         ? SIZE_MAX
                         : YJ_BYTES_FACTOR * len + YJ_BYTES_SLACK;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        free(c);
        eai_error_set(err, EAI_E_INTERNAL, "YAML: out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)(buf ? buf : ""), buf ? len : 0);
    int documents = 0, done = 0;
    while (!done && !c->err) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            yaml_mark_t m = parser.problem_mark;
            if (parser.context)
                yj_fail(c, m, "%s %s", parser.problem ? parser.problem : "syntax error",
                        parser.context);
            else
                yj_fail(c, m, "%s", parser.problem ? parser.problem : "syntax error");
            break;
        }
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1)
                yj_fail(c, ev.start_mark, "only one YAML document is allowed");
            break;
        case YAML_SCALAR_EVENT:
            yj_scalar(c, &ev);
            break;
        case YAML_ALIAS_EVENT:
            yj_alias(c, &ev);
            break;
        case YAML_SEQUENCE_START_EVENT:
            yj_start(c, &ev, 0);
            break;
        case YAML_MAPPING_START_EVENT:
            yj_start(c, &ev, 1);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            yj_end(c, &ev);
            break;
        case YAML_STREAM_END_EVENT:
            done = 1;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    for (size_t i = 0; i < c->depth; i++) {
        json_decref(c->stack[i].value);
        free(c->stack[i].anchor);
        free(c->stack[i].key);
    }
    for (size_t i = 0; i < c->nanchors; i++) {
        free(c->anchors[i].name);
        json_decref(c->anchors[i].value);
    }
    free(c->anchors);
    json_t *root = c->root;
    struct eai_error *e = c->err;
    free(c);
    if (e) {
        json_decref(root);
        eai_error_propagate(err, e);
        return NULL;
    }
    return root ? root : json_null();
}
