/*
 * JSON Schema validator: draft 2020-12 subset, draft-7 compatible.  This
 * file loads: eai_schema_load() deep-copies the schema document and compiles
 * every reachable (sub)schema once into a struct eai_sch_node; $ref is resolved
 * at load time to the node of its target, memoised by JSON node, so reference
 * cycles compile to graph cycles.  Validation (jsonschema_validate.c) walks
 * that immutable graph with a per-call context, hence it is thread-safe.
 */
#include "schema/jsonschema_int.h"
#include "base/errors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ JSON pointer */

static int path_reserve(struct eai_sch_path *p, size_t extra)
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
size_t eai_sch_path_push(struct eai_sch_path *p, const char *tok, size_t n)
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

size_t eai_sch_path_push_str(struct eai_sch_path *p, const char *tok)
{
    return eai_sch_path_push(p, tok, strlen(tok));
}

size_t eai_sch_path_push_index(struct eai_sch_path *p, size_t i)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%zu", i);
    return eai_sch_path_push(p, tmp, (size_t)n);
}

void eai_sch_path_pop(struct eai_sch_path *p, size_t old)
{
    p->len = old;
    if (p->buf)
        p->buf[old] = '\0';
}

const char *eai_sch_path_str(const struct eai_sch_path *p)
{
    return p->buf && p->len ? p->buf : "";
}

/* ------------------------------------------------------------ compiler */

struct sch_compiler {
    struct eai_schema *s;
    struct eai_sch_path path;      /* schema location being compiled */
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
    const char *where = c->path.oom ? "?" : eai_sch_path_str(&c->path);
    eai_error_set(&c->err, EAI_E_VALIDATION_FAILED, "schema at '%s': %s", *where ? where : "/", msg);
    if (c->err) {
        json_t *d = json_pack("[{s:s,s:s}]", "path", where, "message", msg);
        c->err->details = d;
    }
}

static struct eai_sch_node *compile(struct sch_compiler *c, const json_t *js);

static struct eai_sch_node *memo_find(const struct eai_schema *s, const json_t *js)
{
    for (size_t i = 0; i < s->nmemo; i++)
        if (s->memo[i].json == js)
            return s->memo[i].node;
    return NULL;
}

static struct eai_sch_node *node_new(struct sch_compiler *c, const json_t *js)
{
    struct eai_schema *s = c->s;
    if (s->nmemo == s->capmemo) {
        size_t cap = s->capmemo ? 2 * s->capmemo : 32;
        struct eai_sch_memo *m = realloc(s->memo, cap * sizeof *m);
        if (!m) {
            cfail(c, "out of memory");
            return NULL;
        }
        s->memo = m;
        s->capmemo = cap;
    }
    struct eai_sch_node *n = calloc(1, sizeof *n);
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
static struct eai_sch_node *compile_at(struct sch_compiler *c, const char *kw, const json_t *js)
{
    size_t old = eai_sch_path_push_str(&c->path, kw);
    struct eai_sch_node *n = compile(c, js);
    eai_sch_path_pop(&c->path, old);
    return n;
}

static int compile_list(struct sch_compiler *c, const char *kw, const json_t *js,
                        struct eai_sch_list *out, int nonempty)
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
    size_t old = eai_sch_path_push_str(&c->path, kw);
    for (size_t i = 0; i < n; i++) {
        size_t o2 = eai_sch_path_push_index(&c->path, i);
        out->v[i] = compile(c, json_array_get(js, i));
        eai_sch_path_pop(&c->path, o2);
        if (!out->v[i]) {
            eai_sch_path_pop(&c->path, old);
            return -1;
        }
        out->n++;
    }
    eai_sch_path_pop(&c->path, old);
    return 0;
}

/* An object of schemas: properties, $defs, dependentSchemas... */
static int compile_named(struct sch_compiler *c, const char *kw, const json_t *js,
                         struct eai_sch_named **out, size_t *nout)
{
    if (!json_is_object(js)) {
        cfail(c, "'%s' must be an object of schemas", kw);
        return -1;
    }
    size_t n = json_object_size(js);
    struct eai_sch_named *v = NULL;
    if (out) {
        v = calloc(n ? n : 1, sizeof *v);
        if (!v) {
            cfail(c, "out of memory");
            return -1;
        }
        *out = v;
        *nout = 0;
    }
    size_t old = eai_sch_path_push_str(&c->path, kw);
    const char *k;
    size_t kl;
    json_t *sub;
    int rc = 0;
    json_object_keylen_foreach((json_t *)js, k, kl, sub) {
        size_t o2 = eai_sch_path_push(&c->path, k, kl);
        struct eai_sch_node *node = compile(c, sub);
        eai_sch_path_pop(&c->path, o2);
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
    eai_sch_path_pop(&c->path, old);
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

static int compile_type(struct sch_compiler *c, struct eai_sch_node *n, const json_t *v)
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

static int compile_keyword(struct sch_compiler *c, struct eai_sch_node *n, const char *k,
                           const json_t *v, struct eai_sch_node **items_schema,
                           struct eai_sch_node **additional_items, int *items_array)
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
        size_t old = eai_sch_path_push_str(&c->path, "$ref");
        n->ref = compile(c, target);
        eai_sch_path_pop(&c->path, old);
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
    if (IS("x-message")) {
        /* our annotation: the expected form in words, said instead of the
         * regular expression when "pattern" fails */
        if (!json_is_string(v)) {
            cfail(c, "'x-message' must be a string");
            return -1;
        }
        n->x_message = json_string_value(v);
        return 0;
    }
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
        size_t old = eai_sch_path_push_str(&c->path, k);
        const char *pk;
        size_t pkl;
        json_t *sub;
        int rc = 0;
        json_object_keylen_foreach((json_t *)v, pk, pkl, sub) {
            size_t o2 = eai_sch_path_push(&c->path, pk, pkl);
            json_t *src = json_stringn(pk, pkl);
            struct eai_sch_pattern *p = &n->pprops[n->npprops];
            p->re = src ? compile_regex(c, "patternProperties", src) : NULL;
            json_decref(src);
            if (p->re) {
                p->src = pk;
                n->npprops++;
                p->node = compile(c, sub);
            }
            eai_sch_path_pop(&c->path, o2);
            if (!p->re || !p->node) {
                if (!src)
                    cfail(c, "out of memory");
                rc = -1;
                break;
            }
        }
        eai_sch_path_pop(&c->path, old);
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
        size_t old = eai_sch_path_push_str(&c->path, k);
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
            size_t o2 = eai_sch_path_push(&c->path, dk, dkl);
            struct eai_sch_node *sub = compile(c, dv);
            eai_sch_path_pop(&c->path, o2);
            if (!sub) {
                rc = -1;
                break;
            }
            n->dep_schemas[n->ndep_schemas].name = dk;
            n->dep_schemas[n->ndep_schemas].len = dkl;
            n->dep_schemas[n->ndep_schemas].node = sub;
            n->ndep_schemas++;
        }
        eai_sch_path_pop(&c->path, old);
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
    size_t old = eai_sch_path_push_str(&c->path, k);
    cfail(c, "unknown keyword '%s'", k);
    eai_sch_path_pop(&c->path, old);
    return -1;
}

static struct eai_sch_node *compile(struct sch_compiler *c, const json_t *js)
{
    if (c->err)
        return NULL;
    struct eai_sch_node *n = memo_find(c->s, js);
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
    struct eai_sch_node *items_schema = NULL, *additional_items = NULL;
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

static void node_free(struct eai_sch_node *n)
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
    if (!s || !schema || !(s->doc = json_deep_copy(schema)) ||
        !(s->mctx = pcre2_match_context_create(NULL))) {
        eai_schema_free(s);
        eai_error_set(err, schema ? EAI_E_INTERNAL : EAI_E_VALIDATION_FAILED, "%s",
                      schema ? "schema: out of memory" : "schema: no schema given");
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
        eai_error_set(err, EAI_E_INVALID_JSON, "%s:%d:%d: %s", path,
                      je.line, je.column, je.text);
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
