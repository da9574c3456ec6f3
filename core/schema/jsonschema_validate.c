/*
 * JSON Schema validation over the graph compiled by jsonschema.c.  Each call
 * has its own context (error list, instance path, PCRE2 match data); the
 * schema is only read, so calls may run on several threads at once.  A depth
 * bound stops $ref cycles that never consume instance.
 */
#include "schema/jsonschema_int.h"
#include "base/errors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ JSON helpers */

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

/* ------------------------------------------------------------ validator */

struct sch_validator {
    const struct eai_schema *s;
    json_t *errors;            /* NULL: stop at the first failure */
    size_t nerrors;
    int quiet;                 /* > 0 inside anyOf/oneOf/not/if/contains */
    int full;                  /* error cap reached */
    int aborted;               /* depth bound hit or out of memory */
    int depth;
    struct eai_sch_path path;      /* instance location */
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
    json_t *e = json_pack("{s:s,s:s}", "path", v->path.oom ? "" : eai_sch_path_str(&v->path),
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

static int validate(struct sch_validator *v, const struct eai_sch_node *n, const json_t *inst);

static int quiet_valid(struct sch_validator *v, const struct eai_sch_node *n, const json_t *inst)
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
static void report_alternatives(struct sch_validator *v, const struct eai_sch_list *l,
                                const json_t *inst, const char *kw)
{
    const struct eai_sch_node *only = NULL;
    size_t admitting = 0;
    unsigned all_types = 0;
    for (size_t i = 0; i < l->n; i++) {
        const struct eai_sch_node *a = l->v[i];
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

static int validate_number(struct sch_validator *v, const struct eai_sch_node *n, const json_t *inst)
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
            double tol = 1e-9 * (sch_fabs(q) > 1.0 ? sch_fabs(q) : 1.0);
            mult = isfinite(q) && sch_fabs(q - sch_round(q)) <= tol;
        }
        if (!mult) {
            num_str(n->multiple_of, b, sizeof b);
            verr(v, "must be a multiple of %s", b);
            ok = 0;
        }
    }
    return ok;
}

static int validate_string(struct sch_validator *v, const struct eai_sch_node *n, const json_t *inst)
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
            if (n->x_message)
                verr(v, "%s", n->x_message);
            else
                verr(v, "does not match pattern '%s'", n->pattern_src);
            ok = 0;
        } else if (rc < 0) {
            verr(v, "could not be matched against pattern '%s' (regex limit)", n->pattern_src);
            ok = 0;
        }
    }
    return ok;
}

static int validate_array(struct sch_validator *v, const struct eai_sch_node *n, const json_t *inst)
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
        const struct eai_sch_node *sub = i < n->prefix.n ? n->prefix.v[i] : n->items;
        if (!sub)
            break;
        size_t old = eai_sch_path_push_index(&v->path, i);
        int r = validate(v, sub, json_array_get(inst, i));
        eai_sch_path_pop(&v->path, old);
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

static const struct eai_sch_node *named_find(const struct eai_sch_named *v, size_t n, const char *k,
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
        size_t old = eai_sch_path_push(&v->path, s, sl);
        if (because)
            verr(v, "is required when '%s' is present", because);
        else
            verr(v, "is required");
        eai_sch_path_pop(&v->path, old);
        ok = 0;
        if (vstop(v))
            return 0;
    }
    return ok;
}

static int validate_object(struct sch_validator *v, const struct eai_sch_node *n, const json_t *inst)
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
        size_t old = eai_sch_path_push(&v->path, k, kl);
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
        const struct eai_sch_node *p = named_find(n->props, n->nprops, k, kl);
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
        eai_sch_path_pop(&v->path, old);
        if (!r) {
            ok = 0;
            if (vstop(v))
                return 0;
        }
    }
    return ok;
}

static int validate_applicators(struct sch_validator *v, const struct eai_sch_node *n,
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
        const struct eai_sch_node *branch = quiet_valid(v, n->if_, inst) ? n->then_ : n->else_;
        if (branch && !validate(v, branch, inst))
            ok = 0;
    }
    return ok;
}

static int validate(struct sch_validator *v, const struct eai_sch_node *n, const json_t *inst)
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
