/*
 * Internals of the JSON Schema validator shared by core/schema/jsonschema.c (load,
 * compile) and core/schema/jsonschema_validate.c (validation).  Not an API.
 */
#ifndef EAI_JSONSCHEMA_INT_H
#define EAI_JSONSCHEMA_INT_H

#include "schema/jsonschema.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <math.h>
#include <stddef.h>

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

struct eai_sch_node;

struct eai_sch_named {
    const char *name;          /* points into the schema document */
    size_t len;
    struct eai_sch_node *node;
};

struct eai_sch_pattern {
    pcre2_code *re;
    const char *src;
    struct eai_sch_node *node;
};

struct eai_sch_list {
    struct eai_sch_node **v;
    size_t n;
};

struct eai_sch_node {
    int boolean;               /* -1 object schema; 0 false; 1 true */
    unsigned types;            /* 0: no "type" */
    const json_t *enum_values;
    const json_t *const_value;
    struct eai_sch_node *ref;
    /* numbers */
    const json_t *minimum, *maximum, *xminimum, *xmaximum, *multiple_of;
    /* strings */
    long long min_len, max_len;
    pcre2_code *pattern;
    const char *pattern_src;
    const char *x_message;     /* "x-message": the words said when pattern fails */
    /* arrays */
    struct eai_sch_list prefix;
    struct eai_sch_node *items;
    long long min_items, max_items;
    int unique;
    struct eai_sch_node *contains;
    long long min_contains, max_contains;
    /* objects */
    struct eai_sch_named *props;
    size_t nprops;
    struct eai_sch_pattern *pprops;
    size_t npprops;
    struct eai_sch_node *additional;
    const json_t *required;
    long long min_props, max_props;
    struct eai_sch_node *property_names;
    const json_t *dep_required;       /* object: name -> array of names */
    const json_t *legacy_dep_required;/* draft-7 "dependencies" array parts */
    struct eai_sch_named *dep_schemas;
    size_t ndep_schemas;
    /* applicators */
    struct eai_sch_list all_of, any_of, one_of;
    struct eai_sch_node *not_, *if_, *then_, *else_;
};

struct eai_sch_memo {
    const json_t *json;
    struct eai_sch_node *node;
};

struct eai_schema {
    json_t *doc;               /* owned deep copy */
    struct eai_sch_node *top;
    struct eai_sch_memo *memo;     /* every compiled node, for $ref and free */
    size_t nmemo, capmemo;
    pcre2_match_context *mctx;
    const char *base_id;       /* root "$id" without fragment, or NULL */
    size_t base_id_len;
};


struct eai_sch_path {
    char *buf;
    size_t len, cap;
    int oom;
};


/* JSON pointer building (RFC 6901 escapes); push returns the old length. */
size_t eai_sch_path_push(struct eai_sch_path *p, const char *tok, size_t n);
size_t eai_sch_path_push_str(struct eai_sch_path *p, const char *tok);
size_t eai_sch_path_push_index(struct eai_sch_path *p, size_t i);
void eai_sch_path_pop(struct eai_sch_path *p, size_t old);
const char *eai_sch_path_str(const struct eai_sch_path *p);

/* libm-free helpers (eaicore does not link libm). */
static inline double sch_fabs(double d)
{
    return d < 0 ? -d : d;
}

/* d rounded to the nearest integer; d must be finite. */
static inline double sch_round(double d)
{
    if (sch_fabs(d) >= 4503599627370496.0)     /* 2^52: already integral */
        return d;
    return (double)(long long)(d + (d >= 0 ? 0.5 : -0.5));
}

static inline int sch_is_whole(double d)
{
    return isfinite(d) && sch_round(d) == d;
}

static inline int json_is_integral(const json_t *v)
{
    if (json_is_integer(v))
        return 1;
    if (json_is_real(v)) {
        double d = json_real_value(v);
        return sch_is_whole(d);
    }
    return 0;
}

#endif
