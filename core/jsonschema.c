/*
 * JSON Schema validator: draft 2020-12 subset, draft-7 compatible.
 *
 * eai_schema_load() deep-copies the schema document and compiles every
 * reachable (sub)schema once into a struct sch_node; $ref is resolved at load
 * time to the node of its target, memoised by JSON node, so reference cycles
 * compile to graph cycles.  Validation walks that immutable graph with a
 * per-call context (error list, instance path, PCRE2 match data), hence it is
 * thread-safe.  A depth bound stops $ref cycles that never consume instance.
 */
#include "jsonschema.h"
#include "errors.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    T_NULL = 1u << 0,
    T_BOOLEAN = 1u << 1,
    T_OBJECT = 1u << 2,
    T_ARRAY = 1u << 3,
    T_NUMBER = 1u << 4,
    T_STRING = 1u << 5,
    T_INTEGER = 1u << 6,
};

static const char *const sch_type_names[] = {
    "null", "boolean", "object", "array", "number", "string", "integer",
};
#define SCH_NTYPES (sizeof sch_type_names / sizeof sch_type_names[0])

#define SCH_REGEX_MATCH_LIMIT 1000000u
#define SCH_COMPILE_MAX_DEPTH 512

struct sch_node;

struct sch_named {
    const char *name;          /* points into the schema document */
    size_t len;
    struct sch_node *node;
};

struct sch_pattern {
    pcre2_code *re;
    const char *src;
    struct sch_node *node;
};

struct sch_list {
    struct sch_node **v;
    size_t n;
};

struct sch_node {
    int boolean;               /* -1 object schema; 0 false; 1 true */
    unsigned types;            /* 0: no "type" */
    const json_t *enum_values;
    const json_t *const_value;
    struct sch_node *ref;
    /* numbers */
    const json_t *minimum, *maximum, *xminimum, *xmaximum, *multiple_of;
    /* strings */
    long long min_len, max_len;
    pcre2_code *pattern;
    const char *pattern_src;
    /* arrays */
    struct sch_list prefix;
    struct sch_node *items;
    long long min_items, max_items;
    int unique;
    struct sch_node *contains;
    long long min_contains, max_contains;
    /* objects */
    struct sch_named *props;
    size_t nprops;
    struct sch_pattern *pprops;
    size_t npprops;
    struct sch_node *additional;
    const json_t *required;
    long long min_props, max_props;
    struct sch_node *property_names;
    const json_t *dep_required;       /* object: name -> array of names */
    const json_t *legacy_dep_required;/* draft-7 "dependencies" array parts */
    struct sch_named *dep_schemas;
    size_t ndep_schemas;
    /* applicators */
    struct sch_list all_of, any_of, one_of;
    struct sch_node *not_, *if_, *then_, *else_;
};

struct sch_memo {
    const json_t *json;
    struct sch_node *node;
};

struct eai_schema {
    json_t *doc;               /* owned deep copy */
    struct sch_node *top;
    struct sch_memo *memo;     /* every compiled node, for $ref and free */
    size_t nmemo, capmemo;
    pcre2_match_context *mctx;
    const char *base_id;       /* root "$id" without fragment, or NULL */
    size_t base_id_len;
};

/* ------------------------------------------------------------ JSON pointer */

struct sch_path {
    char *buf;
    size_t len, cap;
    int oom;
};

static int path_reserve(struct sch_path *p, size_t extra)
{
    if (p->oom)
        return -1;
    if (p->len + extra + 1 <= p->cap)
        return 0;
    size_t cap = p->cap ? p->cap : 64;
    while (cap < p->len + extra + 1)
        cap *= 2;
    char *nb = realloc(p->buf, cap);
    if (!nb) {
        p->oom = 1;
        return -1;
    }
    p->buf = nb;
    p->cap = cap;
    return 0;
}

/* Append "/" + token escaped (~ -> ~0, / -> ~1); returns the old length. */
static size_t path_push(struct sch_path *p, const char *tok, size_t n)
{
    size_t old = p->len;
    if (path_reserve(p, 2 * n + 1) < 0)
        return old;
    p->buf[p->len++] = '/';
    for (size_t i = 0; i < n; i++) {
        if (tok[i] == '~') {
            p->buf[p->len++] = '~';
            p->buf[p->len++] = '0';
        } else if (tok[i] == '/') {
            p->buf[p->len++] = '~';
            p->buf[p->len++] = '1';
        } else {
            p->buf[p->len++] = tok[i];
        }
    }
    p->buf[p->len] = '\0';
    return old;
}

static size_t path_push_str(struct sch_path *p, const char *tok)
{
    return path_push(p, tok, strlen(tok));
}

static size_t path_push_index(struct sch_path *p, size_t i)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%zu", i);
    return path_push(p, tmp, (size_t)n);
}

static void path_pop(struct sch_path *p, size_t old)
{
    p->len = old;
    if (p->buf)
        p->buf[old] = '\0';
}

static const char *path_str(const struct sch_path *p)
{
    return p->buf && p->len ? p->buf : "";
}

/* ------------------------------------------------------------ JSON helpers */

/* libm-free helpers (eaicore does not link libm). */
static double sch_fabs(double d)
{
    return d < 0 ? -d : d;
}

/* d rounded to the nearest integer; d must be finite. */
static double sch_round(double d)
{
    if (sch_fabs(d) >= 4503599627370496.0)     /* 2^52: already integral */
        return d;
    return (double)(long long)(d + (d >= 0 ? 0.5 : -0.5));
}

static int sch_is_whole(double d)
{
    return isfinite(d) && sch_round(d) == d;
}

static int json_is_integral(const json_t *v)
{
    if (json_is_integer(v))
        return 1;
    if (json_is_real(v)) {
        double d = json_real_value(v);
        return sch_is_whole(d);
    }
    return 0;
}

/* <0, 0, >0 like strcmp; both arguments are numbers. */
static int num_cmp(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b)) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return (x > y) - (x < y);
    }
    double x = json_number_value(a), y = json_number_value(b);
    return (x > y) - (x < y);
}

static void num_str(const json_t *v, char *buf, size_t n)
{
    if (json_is_integer(v))
        snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else
        snprintf(buf, n, "%.17g", json_real_value(v));
}

/* JSON equality where numbers compare by value (1 == 1.0). */
static int sch_equal(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return num_cmp(a, b) == 0;
    if (json_typeof(a) != json_typeof(b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_ARRAY: {
        size_t n = json_array_size(a);
        if (n != json_array_size(b))
            return 0;
        for (size_t i = 0; i < n; i++)
            if (!sch_equal(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    }
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return 0;
        const char *k;
        size_t kl;
        json_t *va;
        json_object_keylen_foreach((json_t *)a, k, kl, va) {
            json_t *vb = json_object_getn(b, k, kl);
            if (!vb || !sch_equal(va, vb))
                return 0;
        }
        return 1;
    }
    default:
        return json_equal(a, b);
    }
}

static uint64_t hash_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Hash consistent with sch_equal (integral reals hash as integers). */
static uint64_t sch_hash(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        return hash_mix(1, (uint64_t)json_integer_value(v));
    case JSON_REAL: {
        double d = json_real_value(v);
        if (sch_is_whole(d) && d >= -9.2e18 && d <= 9.2e18)
            return hash_mix(1, (uint64_t)(long long)d);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return hash_mix(2, bits);
    }
    case JSON_STRING:
        return hash_mix(3, hash_bytes(json_string_value(v), json_string_length(v)));
    case JSON_ARRAY: {
        uint64_t h = 4;
        for (size_t i = 0; i < json_array_size(v); i++)
            h = hash_mix(h, sch_hash(json_array_get(v, i)));
        return h;
    }
    case JSON_OBJECT: {
        uint64_t sum = 0;      /* order-independent */
        const char *k;
        size_t kl;
        json_t *x;
        json_object_keylen_foreach((json_t *)v, k, kl, x)
            sum += hash_mix(hash_bytes(k, kl), sch_hash(x));
        return hash_mix(5, sum);
    }
    case JSON_TRUE:
        return 6;
    case JSON_FALSE:
        return 7;
    default:
        return 8;
    }
}

struct sch_hashed {
    uint64_t h;
    size_t i;
};

static int hashed_cmp(const void *a, const void *b)
{
    const struct sch_hashed *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* 1 when all items are distinct, 0 when not, -1 on allocation failure. */
static int items_unique(const json_t *arr)
{
    size_t n = json_array_size(arr);
    if (n < 2)
        return 1;
    struct sch_hashed *hv = calloc(n, sizeof *hv);
    if (!hv)
        return -1;
    for (size_t i = 0; i < n; i++) {
        hv[i].h = sch_hash(json_array_get(arr, i));
        hv[i].i = i;
    }
    qsort(hv, n, sizeof *hv, hashed_cmp);
    int unique = 1;
    for (size_t i = 0; i < n && unique; i++)
        for (size_t j = i + 1; j < n && hv[j].h == hv[i].h; j++)
            if (sch_equal(json_array_get(arr, hv[i].i), json_array_get(arr, hv[j].i))) {
                unique = 0;
                break;
            }
    free(hv);
    return unique;
}

static size_t utf8_codepoints(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return json_is_integral(v) ? "integer" : "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

/* ------------------------------------------------------------ compiler */

struct sch_compiler {
    struct eai_schema *s;
    struct sch_path path;      /* schema location being compiled */
    struct eai_error *err;
    int depth;
};

static void cfail(struct sch_compiler *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void cfail(struct sch_compiler *c, const char *fmt, ...)
{
    if (c->err)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *where = c->path.oom ? "?" : path_str(&c->path);
    c->err = eai_error_new(EAI_E_VALIDATION_FAILED, 0, "schema at '%s': %s",
                           *where ? where : "/", msg);
    if (c->err) {
        json_t *d = json_pack("[{s:s,s:s}]", "path", where, "message", msg);
        c->err->details = d;
    }
}

static struct sch_node *compile(struct sch_compiler *c, const json_t *js);

static struct sch_node *memo_find(const struct eai_schema *s, const json_t *js)
{
    for (size_t i = 0; i < s->nmemo; i++)
        if (s->memo[i].json == js)
            return s->memo[i].node;
    return NULL;
}

static struct sch_node *node_new(struct sch_compiler *c, const json_t *js)
{
    struct eai_schema *s = c->s;
    if (s->nmemo == s->capmemo) {
        size_t cap = s->capmemo ? 2 * s->capmemo : 32;
        struct sch_memo *m = realloc(s->memo, cap * sizeof *m);
        if (!m) {
            cfail(c, "out of memory");
            return NULL;
        }
        s->memo = m;
        s->capmemo = cap;
    }
    struct sch_node *n = calloc(1, sizeof *n);
    if (!n) {
        cfail(c, "out of memory");
        return NULL;
    }
    n->boolean = -1;
    n->min_len = n->max_len = -1;
    n->min_items = n->max_items = -1;
    n->min_props = n->max_props = -1;
    n->min_contains = -1;
    n->max_contains = -1;
    s->memo[s->nmemo].json = js;
    s->memo[s->nmemo].node = n;
    s->nmemo++;
    return n;
}

/* Compile the schema at key `kw` of the current object. */
static struct sch_node *compile_at(struct sch_compiler *c, const char *kw, const json_t *js)
{
    size_t old = path_push_str(&c->path, kw);
    struct sch_node *n = compile(c, js);
    path_pop(&c->path, old);
    return n;
}

static int compile_list(struct sch_compiler *c, const char *kw, const json_t *js,
                        struct sch_list *out, int nonempty)
{
    if (!json_is_array(js) || (nonempty && json_array_size(js) == 0)) {
        cfail(c, "'%s' must be a %sarray of schemas", kw, nonempty ? "non-empty " : "");
        return -1;
    }
    if (out->v) {              /* both prefixItems and an items array */
        cfail(c, "'items' as an array cannot be combined with 'prefixItems'");
        return -1;
    }
    size_t n = json_array_size(js);
    out->v = calloc(n ? n : 1, sizeof *out->v);
    if (!out->v) {
        cfail(c, "out of memory");
        return -1;
    }
    size_t old = path_push_str(&c->path, kw);
    for (size_t i = 0; i < n; i++) {
        size_t o2 = path_push_index(&c->path, i);
        out->v[i] = compile(c, json_array_get(js, i));
        path_pop(&c->path, o2);
        if (!out->v[i]) {
            path_pop(&c->path, old);
            return -1;
        }
        out->n++;
    }
    path_pop(&c->path, old);
    return 0;
}

/* An object of schemas: properties, $defs, dependentSchemas... */
static int compile_named(struct sch_compiler *c, const char *kw, const json_t *js,
                         struct sch_named **out, size_t *nout)
{
    if (!json_is_object(js)) {
        cfail(c, "'%s' must be an object of schemas", kw);
        return -1;
    }
    size_t n = json_object_size(js);
    struct sch_named *v = NULL;
    if (out) {
        v = calloc(n ? n : 1, sizeof *v);
        if (!v) {
            cfail(c, "out of memory");
            return -1;
        }
        *out = v;
        *nout = 0;
    }
    size_t old = path_push_str(&c->path, kw);
    const char *k;
    size_t kl;
    json_t *sub;
    int rc = 0;
    json_object_keylen_foreach((json_t *)js, k, kl, sub) {
        size_t o2 = path_push(&c->path, k, kl);
        struct sch_node *node = compile(c, sub);
        path_pop(&c->path, o2);
        if (!node) {
            rc = -1;
            break;
        }
        if (v) {
            v[*nout].name = k;
            v[*nout].len = kl;
            v[*nout].node = node;
            (*nout)++;
        }
    }
    path_pop(&c->path, old);
    return rc;
}

static int get_count(struct sch_compiler *c, const char *kw, const json_t *v, long long *out)
{
    if (!json_is_integral(v) || json_number_value(v) < 0 || json_number_value(v) > 9.0e18) {
        cfail(c, "'%s' must be a non-negative integer", kw);
        return -1;
    }
    *out = json_is_integer(v) ? (long long)json_integer_value(v) : (long long)json_real_value(v);
    return 0;
}

static int check_string_array(struct sch_compiler *c, const char *kw, const json_t *v)
{
    if (!json_is_array(v)) {
        cfail(c, "'%s' must be an array of strings", kw);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_string(json_array_get(v, i))) {
            cfail(c, "'%s' must be an array of strings", kw);
            return -1;
        }
    return 0;
}

static pcre2_code *compile_regex(struct sch_compiler *c, const char *kw, const json_t *v)
{
    if (!json_is_string(v)) {
        cfail(c, "'%s' must be a string (regular expression)", kw);
        return NULL;
    }
    int ecode;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)json_string_value(v), json_string_length(v),
                                   PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALT_BSUX |
                                   PCRE2_ALLOW_EMPTY_CLASS,
                                   &ecode, &eoff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        cfail(c, "'%s': invalid regular expression at offset %zu: %s", kw, (size_t)eoff,
              (const char *)msg);
    }
    return re;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Resolve a local $ref to the JSON node it designates. */
static const json_t *resolve_ref(struct sch_compiler *c, const char *ref)
{
    const struct eai_schema *s = c->s;
    if (s->base_id && strncmp(ref, s->base_id, s->base_id_len) == 0 &&
        (ref[s->base_id_len] == '#' || ref[s->base_id_len] == '\0'))
        ref += s->base_id_len;
    if (*ref == '\0')
        return s->doc;
    if (*ref != '#') {
        cfail(c, "'$ref' '%s': only local references ('#...') are supported", ref);
        return NULL;
    }
    ref++;
    /* Percent-decode the URI fragment. */
    size_t n = strlen(ref);
    char *frag = malloc(n + 1);
    if (!frag) {
        cfail(c, "out of memory");
        return NULL;
    }
    size_t fl = 0;
    for (size_t i = 0; i < n; i++) {
        if (ref[i] == '%') {
            int hi = i + 1 < n ? hexval(ref[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(ref[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                free(frag);
                cfail(c, "'$ref' '#%s': bad percent-encoding", ref);
                return NULL;
            }
            unsigned v = (unsigned)(hi * 16 + lo);
            frag[fl++] = (char)v;
            i += 2;
        } else {
            frag[fl++] = ref[i];
        }
    }
    frag[fl] = '\0';
    if (fl == 0) {
        free(frag);
        return s->doc;
    }
    if (frag[0] != '/') {
        cfail(c, "'$ref' '#%s': only JSON-pointer fragments are supported", ref);
        free(frag);
        return NULL;
    }
    const json_t *cur = s->doc;
    char *tok = malloc(fl + 1);
    if (!tok) {
        free(frag);
        cfail(c, "out of memory");
        return NULL;
    }
    size_t i = 1;
    for (;;) {
        size_t tl = 0;
        while (i < fl && frag[i] != '/') {
            if (frag[i] == '~') {
                if (i + 1 < fl && (frag[i + 1] == '0' || frag[i + 1] == '1')) {
                    tok[tl++] = frag[i + 1] == '0' ? '~' : '/';
                    i += 2;
                    continue;
                }
                cfail(c, "'$ref' '#%s': bad '~' escape in JSON pointer", ref);
                cur = NULL;
                goto out;
            }
            tok[tl++] = frag[i++];
        }
        tok[tl] = '\0';
        if (json_is_object(cur)) {
            cur = json_object_getn(cur, tok, tl);
        } else if (json_is_array(cur)) {
            char *end;
            errno = 0;
            unsigned long long idx = strtoull(tok, &end, 10);
            if (tl == 0 || *end || errno || (tl > 1 && tok[0] == '0') || tok[0] == '-' ||
                tok[0] == '+')
                cur = NULL;
            else
                cur = json_array_get(cur, (size_t)idx);
        } else {
            cur = NULL;
        }
        if (!cur) {
            cfail(c, "'$ref' '#%s': target not found", ref);
            goto out;
        }
        if (i >= fl)
            break;
        i++;                   /* skip '/' */
    }
out:
    free(tok);
    free(frag);
    return cur;
}

static int is_annotation(const char *k)
{
    static const char *const ann[] = {
        "$schema", "$id", "$comment", "title", "description", "default", "examples",
        "format", "deprecated", "readOnly", "writeOnly", NULL,
    };
    for (size_t i = 0; ann[i]; i++)
        if (strcmp(k, ann[i]) == 0)
            return 1;
    return 0;
}

static int compile_type(struct sch_compiler *c, struct sch_node *n, const json_t *v)
{
    size_t cnt = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_string(v) && (!json_is_array(v) || cnt == 0)) {
        cfail(c, "'type' must be a type name or a non-empty array of type names");
        return -1;
    }
    for (size_t i = 0; i < cnt; i++) {
        const json_t *t = json_is_array(v) ? json_array_get(v, i) : v;
        size_t k = 0;
        if (json_is_string(t))
            for (; k < SCH_NTYPES; k++)
                if (strcmp(json_string_value(t), sch_type_names[k]) == 0)
                    break;
        if (!json_is_string(t) || k == SCH_NTYPES) {
            cfail(c, "'type': unknown type name");
            return -1;
        }
        n->types |= 1u << k;
    }
    return 0;
}

static int compile_number(struct sch_compiler *c, const char *kw, const json_t *v,
                          const json_t **out)
{
    if (!json_is_number(v)) {
        cfail(c, "'%s' must be a number", kw);
        return -1;
    }
    *out = v;
    return 0;
}

static int compile_keyword(struct sch_compiler *c, struct sch_node *n, const char *k,
                           const json_t *v, struct sch_node **items_schema,
                           struct sch_node **additional_items, int *items_array)
{
#define IS(x) (strcmp(k, (x)) == 0)
#define SUB(field) return ((n->field = compile_at(c, k, v)) != NULL) ? 0 : -1
    if (is_annotation(k))
        return 0;
    if (IS("type"))
        return compile_type(c, n, v);
    if (IS("enum")) {
        if (!json_is_array(v)) {
            cfail(c, "'enum' must be an array");
            return -1;
        }
        n->enum_values = v;
        return 0;
    }
    if (IS("const")) {
        n->const_value = v;
        return 0;
    }
    if (IS("$ref")) {
        if (!json_is_string(v)) {
            cfail(c, "'$ref' must be a string");
            return -1;
        }
        const json_t *target = resolve_ref(c, json_string_value(v));
        if (!target)
            return -1;
        size_t old = path_push_str(&c->path, "$ref");
        n->ref = compile(c, target);
        path_pop(&c->path, old);
        return n->ref ? 0 : -1;
    }
    if (IS("$defs") || IS("definitions"))
        return compile_named(c, k, v, NULL, NULL);
    /* numbers */
    if (IS("minimum"))
        return compile_number(c, k, v, &n->minimum);
    if (IS("maximum"))
        return compile_number(c, k, v, &n->maximum);
    if (IS("exclusiveMinimum"))
        return compile_number(c, k, v, &n->xminimum);
    if (IS("exclusiveMaximum"))
        return compile_number(c, k, v, &n->xmaximum);
    if (IS("multipleOf")) {
        if (!json_is_number(v) || json_number_value(v) <= 0) {
            cfail(c, "'multipleOf' must be a number > 0");
            return -1;
        }
        n->multiple_of = v;
        return 0;
    }
    /* strings */
    if (IS("minLength"))
        return get_count(c, k, v, &n->min_len);
    if (IS("maxLength"))
        return get_count(c, k, v, &n->max_len);
    if (IS("pattern")) {
        n->pattern = compile_regex(c, k, v);
        n->pattern_src = n->pattern ? json_string_value(v) : NULL;
        return n->pattern ? 0 : -1;
    }
    /* arrays */
    if (IS("prefixItems"))
        return compile_list(c, k, v, &n->prefix, 1);
    if (IS("items")) {
        if (json_is_array(v)) {        /* draft-7 tuple form */
            *items_array = 1;
            return compile_list(c, k, v, &n->prefix, 0);
        }
        return (*items_schema = compile_at(c, k, v)) ? 0 : -1;
    }
    if (IS("additionalItems"))
        return (*additional_items = compile_at(c, k, v)) ? 0 : -1;
    if (IS("minItems"))
        return get_count(c, k, v, &n->min_items);
    if (IS("maxItems"))
        return get_count(c, k, v, &n->max_items);
    if (IS("uniqueItems")) {
        if (!json_is_boolean(v)) {
            cfail(c, "'uniqueItems' must be a boolean");
            return -1;
        }
        n->unique = json_is_true(v);
        return 0;
    }
    if (IS("contains"))
        SUB(contains);
    if (IS("minContains"))
        return get_count(c, k, v, &n->min_contains);
    if (IS("maxContains"))
        return get_count(c, k, v, &n->max_contains);
    /* objects */
    if (IS("properties"))
        return compile_named(c, k, v, &n->props, &n->nprops);
    if (IS("patternProperties")) {
        if (!json_is_object(v)) {
            cfail(c, "'patternProperties' must be an object of schemas");
            return -1;
        }
        n->pprops = calloc(json_object_size(v) + 1, sizeof *n->pprops);
        if (!n->pprops) {
            cfail(c, "out of memory");
            return -1;
        }
        size_t old = path_push_str(&c->path, k);
        const char *pk;
        size_t pkl;
        json_t *sub;
        int rc = 0;
        json_object_keylen_foreach((json_t *)v, pk, pkl, sub) {
            size_t o2 = path_push(&c->path, pk, pkl);
            json_t *src = json_stringn(pk, pkl);
            struct sch_pattern *p = &n->pprops[n->npprops];
            p->re = src ? compile_regex(c, "patternProperties", src) : NULL;
            json_decref(src);
            if (p->re) {
                p->src = pk;
                n->npprops++;
                p->node = compile(c, sub);
            }
            path_pop(&c->path, o2);
            if (!p->re || !p->node) {
                if (!src)
                    cfail(c, "out of memory");
                rc = -1;
                break;
            }
        }
        path_pop(&c->path, old);
        return rc;
    }
    if (IS("additionalProperties"))
        SUB(additional);
    if (IS("required")) {
        if (check_string_array(c, k, v) < 0)
            return -1;
        n->required = v;
        return 0;
    }
    if (IS("minProperties"))
        return get_count(c, k, v, &n->min_props);
    if (IS("maxProperties"))
        return get_count(c, k, v, &n->max_props);
    if (IS("propertyNames"))
        SUB(property_names);
    if (IS("dependentRequired")) {
        if (!json_is_object(v)) {
            cfail(c, "'dependentRequired' must be an object of string arrays");
            return -1;
        }
        const char *dk;
        json_t *dv;
        json_object_foreach((json_t *)v, dk, dv)
            if (check_string_array(c, k, dv) < 0)
                return -1;
        n->dep_required = v;
        return 0;
    }
    if (IS("dependentSchemas"))
        return compile_named(c, k, v, &n->dep_schemas, &n->ndep_schemas);
    if (IS("dependencies")) {  /* draft-7: arrays and schemas mixed */
        if (!json_is_object(v)) {
            cfail(c, "'dependencies' must be an object");
            return -1;
        }
        size_t cnt = json_object_size(v);
        n->dep_schemas = calloc(cnt + 1, sizeof *n->dep_schemas);
        if (!n->dep_schemas) {
            cfail(c, "out of memory");
            return -1;
        }
        n->legacy_dep_required = v;
        size_t old = path_push_str(&c->path, k);
        const char *dk;
        size_t dkl;
        json_t *dv;
        int rc = 0;
        json_object_keylen_foreach((json_t *)v, dk, dkl, dv) {
            if (json_is_array(dv)) {
                if (check_string_array(c, k, dv) < 0) {
                    rc = -1;
                    break;
                }
                continue;
            }
            size_t o2 = path_push(&c->path, dk, dkl);
            struct sch_node *sub = compile(c, dv);
            path_pop(&c->path, o2);
            if (!sub) {
                rc = -1;
                break;
            }
            n->dep_schemas[n->ndep_schemas].name = dk;
            n->dep_schemas[n->ndep_schemas].len = dkl;
            n->dep_schemas[n->ndep_schemas].node = sub;
            n->ndep_schemas++;
        }
        path_pop(&c->path, old);
        return rc;
    }
    /* applicators */
    if (IS("allOf"))
        return compile_list(c, k, v, &n->all_of, 1);
    if (IS("anyOf"))
        return compile_list(c, k, v, &n->any_of, 1);
    if (IS("oneOf"))
        return compile_list(c, k, v, &n->one_of, 1);
    if (IS("not"))
        SUB(not_);
    if (IS("if"))
        SUB(if_);
    if (IS("then"))
        SUB(then_);
    if (IS("else"))
        SUB(else_);
#undef IS
#undef SUB
    size_t old = path_push_str(&c->path, k);
    cfail(c, "unknown keyword '%s'", k);
    path_pop(&c->path, old);
    return -1;
}

static struct sch_node *compile(struct sch_compiler *c, const json_t *js)
{
    if (c->err)
        return NULL;
    struct sch_node *n = memo_find(c->s, js);
    if (n)
        return n;
    if (!json_is_object(js) && !json_is_boolean(js)) {
        cfail(c, "a schema must be an object or a boolean");
        return NULL;
    }
    if (c->depth >= SCH_COMPILE_MAX_DEPTH) {
        cfail(c, "schema nested too deeply");
        return NULL;
    }
    n = node_new(c, js);
    if (!n)
        return NULL;
    if (json_is_boolean(js)) {
        n->boolean = json_is_true(js);
        return n;
    }
    c->depth++;
    struct sch_node *items_schema = NULL, *additional_items = NULL;
    int items_array = 0;
    const char *k;
    json_t *v;
    int rc = 0;
    json_object_foreach((json_t *)js, k, v) {
        if (compile_keyword(c, n, k, v, &items_schema, &additional_items, &items_array) < 0) {
            rc = -1;
            break;
        }
    }
    c->depth--;
    if (rc < 0)
        return NULL;
    if (items_array && json_object_get(js, "prefixItems")) {
        cfail(c, "'items' as an array cannot be combined with 'prefixItems'");
        return NULL;
    }
    /* 2020-12: items applies after prefixItems; draft-7: additionalItems
     * applies after an items array and is ignored otherwise. */
    n->items = items_array ? additional_items : items_schema;
    if (n->contains && n->min_contains < 0)
        n->min_contains = 1;
    if (!n->contains)
        n->min_contains = n->max_contains = -1;
    return n;
}

static void node_free(struct sch_node *n)
{
    free(n->prefix.v);
    free(n->props);
    for (size_t i = 0; i < n->npprops; i++)
        pcre2_code_free(n->pprops[i].re);
    free(n->pprops);
    free(n->dep_schemas);
    free(n->all_of.v);
    free(n->any_of.v);
    free(n->one_of.v);
    pcre2_code_free(n->pattern);
    free(n);
}

void eai_schema_free(struct eai_schema *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nmemo; i++)
        node_free(s->memo[i].node);
    free(s->memo);
    pcre2_match_context_free(s->mctx);
    json_decref(s->doc);
    free(s);
}

struct eai_schema *eai_schema_load(const json_t *schema, struct eai_error **err)
{
    struct eai_schema *s = calloc(1, sizeof *s);
    struct eai_error *e = NULL;
    if (!s || !schema || !(s->doc = json_deep_copy(schema)) ||
        !(s->mctx = pcre2_match_context_create(NULL))) {
        e = eai_error_new(schema ? EAI_E_INTERNAL : EAI_E_VALIDATION_FAILED, schema ? ENOMEM : 0,
                          schema ? "schema: out of memory" : "schema: no schema given");
        eai_schema_free(s);
        eai_error_propagate(err, e);
        return NULL;
    }
    pcre2_set_match_limit(s->mctx, SCH_REGEX_MATCH_LIMIT);
    const json_t *id = json_is_object(s->doc) ? json_object_get(s->doc, "$id") : NULL;
    if (json_is_string(id)) {
        const char *v = json_string_value(id);
        const char *hash = strchr(v, '#');
        s->base_id = v;
        s->base_id_len = hash ? (size_t)(hash - v) : strlen(v);
        if (s->base_id_len == 0)
            s->base_id = NULL;
    }
    struct sch_compiler c = {.s = s};
    s->top = compile(&c, s->doc);
    if (!s->top && !c.err)
        cfail(&c, "out of memory");
    if (c.path.oom && !c.err)
        cfail(&c, "out of memory");
    free(c.path.buf);
    if (c.err) {
        eai_schema_free(s);
        eai_error_propagate(err, c.err);
        return NULL;
    }
    return s;
}

struct eai_schema *eai_schema_load_file(const char *path, struct eai_error **err)
{
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!doc) {
        eai_error_propagate(err, eai_error_new(EAI_E_INVALID_JSON, 0, "%s:%d:%d: %s", path,
                                               je.line, je.column, je.text));
        return NULL;
    }
    struct eai_error *e = NULL;
    struct eai_schema *s = eai_schema_load(doc, &e);
    json_decref(doc);
    if (!s) {
        if (e)
            eai_error_prefix(e, "%s: ", path);
        eai_error_propagate(err, e);
    }
    return s;
}

/* ------------------------------------------------------------ validator */

struct sch_validator {
    const struct eai_schema *s;
    json_t *errors;            /* NULL: stop at the first failure */
    size_t nerrors;
    int quiet;                 /* > 0 inside anyOf/oneOf/not/if/contains */
    int full;                  /* error cap reached */
    int aborted;               /* depth bound hit or out of memory */
    int depth;
    struct sch_path path;      /* instance location */
    pcre2_match_data *md;
};

static void verr(struct sch_validator *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void verr(struct sch_validator *v, const char *fmt, ...)
{
    if (v->quiet || !v->errors || v->full)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:s,s:s}", "path", v->path.oom ? "" : path_str(&v->path),
                          "message", msg);
    if (!e || json_array_append_new(v->errors, e) < 0)
        v->aborted = 1;
    if (++v->nerrors >= EAI_SCHEMA_MAX_ERRORS)
        v->full = 1;
}

/* Keep checking after a failure only when collecting errors loudly. */
static int vstop(const struct sch_validator *v)
{
    return v->quiet || !v->errors || v->full || v->aborted;
}

static int validate(struct sch_validator *v, const struct sch_node *n, const json_t *inst);

static int quiet_valid(struct sch_validator *v, const struct sch_node *n, const json_t *inst)
{
    v->quiet++;
    int ok = validate(v, n, inst);
    v->quiet--;
    return ok;
}

static int type_ok(unsigned types, const json_t *inst)
{
    switch (json_typeof(inst)) {
    case JSON_NULL: return types & T_NULL;
    case JSON_TRUE:
    case JSON_FALSE: return types & T_BOOLEAN;
    case JSON_OBJECT: return types & T_OBJECT;
    case JSON_ARRAY: return types & T_ARRAY;
    case JSON_STRING: return types & T_STRING;
    default:
        return (types & T_NUMBER) || ((types & T_INTEGER) && json_is_integral(inst));
    }
}

static void types_str(unsigned types, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < SCH_NTYPES; k++)
        if (types & (1u << k)) {
            int w = snprintf(buf + len, n - len, "%s%s", len ? " or " : "", sch_type_names[k]);
            if (w < 0 || (size_t)w >= n - len)
                return;
            len += (size_t)w;
        }
}

/* anyOf/oneOf with no match: when exactly one alternative accepts the
 * instance's type, its own errors are the useful ones. */
static void report_alternatives(struct sch_validator *v, const struct sch_list *l,
                                const json_t *inst, const char *kw)
{
    const struct sch_node *only = NULL;
    size_t admitting = 0;
    unsigned all_types = 0;
    for (size_t i = 0; i < l->n; i++) {
        const struct sch_node *a = l->v[i];
        if (a->boolean >= 0 || a->types == 0) {
            admitting = 2;     /* cannot tell: give the generic message */
            break;
        }
        all_types |= a->types;
        if (type_ok(a->types, inst)) {
            admitting++;
            only = a;
        }
    }
    if (admitting == 0) {
        char b[96];
        types_str(all_types, b, sizeof b);
        verr(v, "must be of type %s, not %s", b, json_type_name(inst));
        return;
    }
    if (admitting == 1) {
        size_t before = v->nerrors;
        validate(v, only, inst);
        if (v->nerrors > before)
            return;
    }
    verr(v, "does not match any of the allowed alternatives (%s)", kw);
}

static int validate_number(struct sch_validator *v, const struct sch_node *n, const json_t *inst)
{
    int ok = 1;
    char b[64];
    if (n->minimum && num_cmp(inst, n->minimum) < 0) {
        num_str(n->minimum, b, sizeof b);
        verr(v, "must be >= %s", b);
        ok = 0;
        if (vstop(v))
            return 0;
    }
    if (n->maximum && num_cmp(inst, n->maximum) > 0) {
        num_str(n->maximum, b, sizeof b);
        verr(v, "must be <= %s", b);
        ok = 0;
        if (vstop(v))
            return 0;
    }
    if (n->xminimum && num_cmp(inst, n->xminimum) <= 0) {
        num_str(n->xminimum, b, sizeof b);
        verr(v, "must be > %s", b);
        ok = 0;
        if (vstop(v))
            return 0;
    }
    if (n->xmaximum && num_cmp(inst, n->xmaximum) >= 0) {
        num_str(n->xmaximum, b, sizeof b);
        verr(v, "must be < %s", b);
        ok = 0;
        if (vstop(v))
            return 0;
    }
    if (n->multiple_of) {
        int mult;
        if (json_is_integer(inst) && json_is_integer(n->multiple_of)) {
            json_int_t m = json_integer_value(n->multiple_of);
            mult = json_integer_value(inst) % m == 0;
        } else {
            double q = json_number_value(inst) / json_number_value(n->multiple_of);
            mult = isfinite(q) && sch_fabs(q - sch_round(q)) <= 1e-9 * (sch_fabs(q) > 1.0 ? sch_fabs(q) : 1.0);
        }
        if (!mult) {
            num_str(n->multiple_of, b, sizeof b);
            verr(v, "must be a multiple of %s", b);
            ok = 0;
        }
    }
    return ok;
}

static int validate_string(struct sch_validator *v, const struct sch_node *n, const json_t *inst)
{
    int ok = 1;
    const char *str = json_string_value(inst);
    size_t len = json_string_length(inst);
    if (n->min_len >= 0 || n->max_len >= 0) {
        size_t cp = utf8_codepoints(str, len);
        if (n->min_len >= 0 && cp < (unsigned long long)n->min_len) {
            verr(v, "must be at least %lld characters long", n->min_len);
            ok = 0;
            if (vstop(v))
                return 0;
        }
        if (n->max_len >= 0 && cp > (unsigned long long)n->max_len) {
            verr(v, "must be at most %lld characters long", n->max_len);
            ok = 0;
            if (vstop(v))
                return 0;
        }
    }
    if (n->pattern) {
        if (!v->md && !(v->md = pcre2_match_data_create(1, NULL))) {
            v->aborted = 1;
            return 0;
        }
        int rc = pcre2_match(n->pattern, (PCRE2_SPTR)str, len, 0, 0, v->md, v->s->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) {
            verr(v, "does not match pattern '%s'", n->pattern_src);
            ok = 0;
        } else if (rc < 0) {
            verr(v, "could not be matched against pattern '%s' (regex limit)", n->pattern_src);
            ok = 0;
        }
    }
    return ok;
}

static int validate_array(struct sch_validator *v, const struct sch_node *n, const json_t *inst)
{
    int ok = 1;
    size_t size = json_array_size(inst);
    if (n->min_items >= 0 && size < (unsigned long long)n->min_items) {
        verr(v, "must have at least %lld item%s", n->min_items, n->min_items == 1 ? "" : "s");
        ok = 0;
        if (vstop(v))
            return 0;
    }
    if (n->max_items >= 0 && size > (unsigned long long)n->max_items) {
        verr(v, "must have at most %lld item%s", n->max_items, n->max_items == 1 ? "" : "s");
        ok = 0;
        if (vstop(v))
            return 0;
    }
    if (n->unique) {
        int u = items_unique(inst);
        if (u < 0) {
            v->aborted = 1;
            return 0;
        }
        if (!u) {
            verr(v, "items must be unique");
            ok = 0;
            if (vstop(v))
                return 0;
        }
    }
    for (size_t i = 0; i < size; i++) {
        const struct sch_node *sub = i < n->prefix.n ? n->prefix.v[i] : n->items;
        if (!sub)
            break;
        size_t old = path_push_index(&v->path, i);
        int r = validate(v, sub, json_array_get(inst, i));
        path_pop(&v->path, old);
        if (!r) {
            ok = 0;
            if (vstop(v))
                return 0;
        }
    }
    if (n->contains) {
        long long matches = 0;
        for (size_t i = 0; i < size && !v->aborted; i++)
            if (quiet_valid(v, n->contains, json_array_get(inst, i)))
                matches++;
        if (matches < n->min_contains) {
            if (n->min_contains <= 1)
                verr(v, "must contain an item matching the 'contains' schema");
            else
                verr(v, "must contain at least %lld items matching the 'contains' schema",
                     n->min_contains);
            ok = 0;
        } else if (n->max_contains >= 0 && matches > n->max_contains) {
            verr(v, "must contain at most %lld items matching the 'contains' schema",
                 n->max_contains);
            ok = 0;
        }
    }
    return ok;
}

static const struct sch_node *named_find(const struct sch_named *v, size_t n, const char *k,
                                         size_t kl)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].len == kl && memcmp(v[i].name, k, kl) == 0)
            return v[i].node;
    return NULL;
}

static int require_names(struct sch_validator *v, const json_t *inst, const json_t *names,
                         const char *because)
{
    int ok = 1;
    for (size_t i = 0; i < json_array_size(names); i++) {
        const json_t *nm = json_array_get(names, i);
        const char *s = json_string_value(nm);
        size_t sl = json_string_length(nm);
        if (json_object_getn(inst, s, sl))
            continue;
        size_t old = path_push(&v->path, s, sl);
        if (because)
            verr(v, "is required when '%s' is present", because);
        else
            verr(v, "is required");
        path_pop(&v->path, old);
        ok = 0;
        if (vstop(v))
            return 0;
    }
    return ok;
}

static int validate_object(struct sch_validator *v, const struct sch_node *n, const json_t *inst)
{
    int ok = 1;
    size_t size = json_object_size(inst);
    if (n->required && !require_names(v, inst, n->required, NULL)) {
        ok = 0;
        if (vstop(v))
            return 0;
    }
    if (n->min_props >= 0 && size < (unsigned long long)n->min_props) {
        verr(v, "must have at least %lld propert%s", n->min_props, n->min_props == 1 ? "y" : "ies");
        ok = 0;
        if (vstop(v))
            return 0;
    }
    if (n->max_props >= 0 && size > (unsigned long long)n->max_props) {
        verr(v, "must have at most %lld propert%s", n->max_props, n->max_props == 1 ? "y" : "ies");
        ok = 0;
        if (vstop(v))
            return 0;
    }
    const json_t *deps[2] = {n->dep_required, n->legacy_dep_required};
    for (size_t d = 0; d < 2; d++) {
        const char *dk;
        size_t dkl;
        json_t *dv;
        if (!deps[d])
            continue;
        json_object_keylen_foreach((json_t *)deps[d], dk, dkl, dv) {
            if (!json_is_array(dv) || !json_object_getn(inst, dk, dkl))
                continue;
            if (!require_names(v, inst, dv, dk)) {
                ok = 0;
                if (vstop(v))
                    return 0;
            }
        }
    }
    for (size_t i = 0; i < n->ndep_schemas; i++) {
        if (!json_object_getn(inst, n->dep_schemas[i].name, n->dep_schemas[i].len))
            continue;
        if (!validate(v, n->dep_schemas[i].node, inst)) {
            ok = 0;
            if (vstop(v))
                return 0;
        }
    }
    const char *k;
    size_t kl;
    json_t *val;
    json_object_keylen_foreach((json_t *)inst, k, kl, val) {
        size_t old = path_push(&v->path, k, kl);
        int r = 1;
        if (n->property_names) {
            json_t *name = json_stringn(k, kl);
            if (!name) {
                v->aborted = 1;
                r = 0;
            } else {
                size_t before = v->nerrors;
                r = validate(v, n->property_names, name);
                json_decref(name);
                if (!r && v->nerrors == before)
                    verr(v, "property name is not allowed");
            }
        }
        int matched = 0;
        const struct sch_node *p = named_find(n->props, n->nprops, k, kl);
        if (p && (r || !vstop(v))) {
            matched = 1;
            r &= validate(v, p, val);
        }
        if (n->npprops && !v->md && !(v->md = pcre2_match_data_create(1, NULL))) {
            v->aborted = 1;
            r = 0;
        }
        for (size_t i = 0; i < n->npprops && (r || !vstop(v)); i++) {
            int rc = pcre2_match(n->pprops[i].re, (PCRE2_SPTR)k, kl, 0, 0, v->md, v->s->mctx);
            if (rc >= 0) {
                matched = 1;
                r &= validate(v, n->pprops[i].node, val);
            } else if (rc != PCRE2_ERROR_NOMATCH) {
                verr(v, "property name could not be matched against pattern '%s'",
                     n->pprops[i].src);
                r = 0;
            }
        }
        if (!matched && n->additional && (r || !vstop(v))) {
            if (n->additional->boolean == 0) {
                verr(v, "is not allowed (unknown property)");
                r = 0;
            } else {
                r &= validate(v, n->additional, val);
            }
        }
        path_pop(&v->path, old);
        if (!r) {
            ok = 0;
            if (vstop(v))
                return 0;
        }
    }
    return ok;
}

static int validate_applicators(struct sch_validator *v, const struct sch_node *n,
                                const json_t *inst)
{
    int ok = 1;
    for (size_t i = 0; i < n->all_of.n; i++)
        if (!validate(v, n->all_of.v[i], inst)) {
            ok = 0;
            if (vstop(v))
                return 0;
        }
    if (n->any_of.n) {
        int any = 0;
        for (size_t i = 0; i < n->any_of.n && !any && !v->aborted; i++)
            any = quiet_valid(v, n->any_of.v[i], inst);
        if (!any) {
            report_alternatives(v, &n->any_of, inst, "anyOf");
            ok = 0;
            if (vstop(v))
                return 0;
        }
    }
    if (n->one_of.n) {
        size_t matches = 0;
        for (size_t i = 0; i < n->one_of.n && matches < 2 && !v->aborted; i++)
            matches += (size_t)quiet_valid(v, n->one_of.v[i], inst);
        if (matches != 1) {
            if (matches == 0)
                report_alternatives(v, &n->one_of, inst, "oneOf");
            else
                verr(v, "matches more than one of the exclusive alternatives (oneOf)");
            ok = 0;
            if (vstop(v))
                return 0;
        }
    }
    if (n->not_ && quiet_valid(v, n->not_, inst)) {
        verr(v, "must not match the schema in 'not'");
        ok = 0;
        if (vstop(v))
            return 0;
    }
    if (n->if_ && (n->then_ || n->else_)) {
        const struct sch_node *branch = quiet_valid(v, n->if_, inst) ? n->then_ : n->else_;
        if (branch && !validate(v, branch, inst))
            ok = 0;
    }
    return ok;
}

static int validate(struct sch_validator *v, const struct sch_node *n, const json_t *inst)
{
    if (v->aborted)
        return 0;
    if (n->boolean == 1)
        return 1;
    if (n->boolean == 0) {
        verr(v, "no value is allowed here");
        return 0;
    }
    if (v->depth >= EAI_SCHEMA_MAX_DEPTH) {
        int q = v->quiet;
        v->quiet = 0;
        verr(v, "schema nesting too deep (recursive $ref?)");
        v->quiet = q;
        v->aborted = 1;
        return 0;
    }
    v->depth++;
    int ok = 1;
    if (n->types && !type_ok(n->types, inst)) {
        char b[96];
        types_str(n->types, b, sizeof b);
        verr(v, "must be of type %s, not %s", b, json_type_name(inst));
        ok = 0;
        /* Further keywords on a value of the wrong type only add noise. */
        goto out;
    }
    if (n->const_value && !sch_equal(n->const_value, inst)) {
        char *want = json_dumps(n->const_value, JSON_ENCODE_ANY | JSON_COMPACT);
        verr(v, "must be %s", want ? want : "the constant value");
        free(want);
        ok = 0;
        if (vstop(v))
            goto out;
    }
    if (n->enum_values) {
        int found = 0;
        for (size_t i = 0; i < json_array_size(n->enum_values) && !found; i++)
            found = sch_equal(json_array_get(n->enum_values, i), inst);
        if (!found) {
            char *allowed = json_dumps(n->enum_values, JSON_ENCODE_ANY | JSON_COMPACT);
            if (allowed && strlen(allowed) > 200)
                strcpy(allowed + 196, "...]");
            verr(v, "must be one of %s", allowed ? allowed : "the allowed values");
            free(allowed);
            ok = 0;
            if (vstop(v))
                goto out;
        }
    }
    int r = 1;
    switch (json_typeof(inst)) {
    case JSON_INTEGER:
    case JSON_REAL: r = validate_number(v, n, inst); break;
    case JSON_STRING: r = validate_string(v, n, inst); break;
    case JSON_ARRAY: r = validate_array(v, n, inst); break;
    case JSON_OBJECT: r = validate_object(v, n, inst); break;
    default: break;
    }
    if (!r) {
        ok = 0;
        if (vstop(v))
            goto out;
    }
    if (n->ref && !validate(v, n->ref, inst)) {
        ok = 0;
        if (vstop(v))
            goto out;
    }
    if (!validate_applicators(v, n, inst))
        ok = 0;
out:
    v->depth--;
    return ok && !v->aborted;
}

int eai_schema_validate(const struct eai_schema *s, const json_t *instance, json_t **errors)
{
    struct sch_validator v = {.s = s};
    if (errors) {
        v.errors = json_array();
        if (!v.errors)
            v.aborted = 1;
    }
    int ok = 0;
    if (!s || !instance) {
        if (v.errors)
            json_array_append_new(v.errors, json_pack("{s:s,s:s}", "path", "", "message",
                                                      "no schema or no instance"));
    } else if (!v.aborted) {
        ok = validate(&v, s->top, instance);
        if (v.path.oom && v.errors && json_array_size(v.errors) == 0)
            json_array_append_new(v.errors, json_pack("{s:s,s:s}", "path", "", "message",
                                                      "validation ran out of memory"));
        if (v.path.oom)
            ok = 0;
    }
    if (!ok && v.aborted && v.errors && json_array_size(v.errors) == 0)
        json_array_append_new(v.errors, json_pack("{s:s,s:s}", "path", "", "message",
                                                  "validation could not complete"));
    pcre2_match_data_free(v.md);
    free(v.path.buf);
    if (errors)
        *errors = v.errors;
    return ok ? 1 : 0;
}
