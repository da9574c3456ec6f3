/*
 * eaid admin listings and key expiry: `eaid tenants list`, `eaid keys list
 * --tenant ID`, and the `--expires` value of `eaid keys create`
 * (docs/api.md, "Admin CLI").  Storage ops tenant_list, key_list and
 * key_create_expiring are optional ABI additions: a backend built without
 * them gets a clear refusal, never a crash.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <eai/storage.h>

#include "base/errors.h"
#include "base/util.h"
#include "cli.h"

#define EAI_CLI_MAX_EXPIRY_MS (100LL * 366 * 24 * 3600 * 1000) /* 100 years */
#define EAI_CLI_TENANT_PAGE 500

int eai_cli_parse_expires(const char *s, int64_t now_ms, int64_t *out)
{
    if (!s || !*s)
        return -1;
    int64_t at = 0;
    if (strchr(s, 'T') || strchr(s, 't')) {
        if (eai_time_parse_rfc3339(s, &at) < 0)
            return -1;
    } else {
        /* <n><unit>... with units w d h m s, e.g. 90d, 1h30m, 3600s */
        int64_t total = 0;
        const char *p = s;
        while (*p) {
            if (*p < '0' || *p > '9')
                return -1;
            int64_t n = 0;
            while (*p >= '0' && *p <= '9') {
                n = n * 10 + (*p - '0');
                if (n > EAI_CLI_MAX_EXPIRY_MS / 1000)
                    return -1;
                p++;
            }
            int64_t unit;
            switch (*p) {
            case 'w': unit = 7LL * 24 * 3600; break;
            case 'd': unit = 24LL * 3600; break;
            case 'h': unit = 3600; break;
            case 'm': unit = 60; break;
            case 's': unit = 1; break;
            default: return -1; /* a unit is required: "30" could mean anything */
            }
            p++;
            if (n > EAI_CLI_MAX_EXPIRY_MS / 1000 / unit)
                return -1;
            total += n * unit * 1000;
            if (total > EAI_CLI_MAX_EXPIRY_MS)
                return -1;
        }
        if (total <= 0)
            return -1;
        at = now_ms + total;
    }
    if (at <= now_ms || at - now_ms > EAI_CLI_MAX_EXPIRY_MS)
        return -1;
    *out = at;
    return 0;
}

int eai_cli_has_admin_ops(const struct eai_storage_ops *ops)
{
    return ops->size >= EAI_STORAGE_OPS_SIZE_1_1 &&
           ops->tenant_list && ops->key_list && ops->key_create_expiring;
}

/* A field for the tab-separated table: control characters become '?'. */
static void put_field(const char *s)
{
    if (!s) {
        fputs("-", stdout);
        return;
    }
    for (; *s; s++)
        putchar((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

static int print_json_line(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!s)
        return -1;
    printf("%s\n", s);
    free(s);
    return 0;
}

int eai_cli_tenants_list(const struct eai_storage_ops *ops, void *store, int as_json)
{
    if (!eai_cli_has_admin_ops(ops)) {
        fprintf(stderr, "eaid: tenants list: this storage backend has no tenant_list op (too old)\n");
        return 1;
    }
    char after[64] = "";
    if (!as_json)
        printf("ID\tNAME\tCREATED_AT\n");
    for (;;) {
        json_t *page = NULL;
        struct eai_error *err = NULL;
        if (ops->tenant_list(store, after[0] ? after : NULL, EAI_CLI_TENANT_PAGE, &page, &err) < 0) {
            fprintf(stderr, "eaid: tenants list: %s\n", err && err->message ? err->message : "failed");
            eai_error_free(err);
            return 1;
        }
        size_t i, n = json_array_size(page);
        json_t *t;
        json_array_foreach(page, i, t) {
            const char *id = json_string_value(json_object_get(t, "id"));
            if (as_json) {
                json_t *o = json_pack("{s:O, s:O, s:O}", "id", json_object_get(t, "id"), "name",
                                      json_object_get(t, "name"), "created_at", json_object_get(t, "created_at"));
                int rc = o ? print_json_line(o) : -1;
                json_decref(o);
                if (rc < 0) {
                    json_decref(page);
                    fprintf(stderr, "eaid: tenants list: out of memory\n");
                    return 1;
                }
            } else {
                put_field(id);
                putchar('\t');
                put_field(json_string_value(json_object_get(t, "name")));
                putchar('\t');
                put_field(json_string_value(json_object_get(t, "created_at")));
                putchar('\n');
            }
            if (id)
                snprintf(after, sizeof after, "%s", id);
        }
        json_decref(page);
        if (n < EAI_CLI_TENANT_PAGE)
            break;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

int eai_cli_keys_list(const struct eai_storage_ops *ops, void *store, const char *tenant, int as_json)
{
    if (!eai_cli_has_admin_ops(ops)) {
        fprintf(stderr, "eaid: keys list: this storage backend has no key_list op (too old)\n");
        return 1;
    }
    json_t *t = NULL, *keys = NULL;
    struct eai_error *err = NULL;
    if (ops->tenant_get(store, tenant, &t, &err) < 0 || !t) {
        fprintf(stderr, "eaid: keys list: %s\n", err && err->message ? err->message : "unknown tenant");
        eai_error_free(err);
        return 1;
    }
    json_decref(t);
    if (ops->key_list(store, tenant, &keys, &err) < 0) {
        fprintf(stderr, "eaid: keys list: %s\n", err && err->message ? err->message : "failed");
        eai_error_free(err);
        return 1;
    }
    int64_t now = eai_now_ms();
    if (!as_json)
        printf("KEY_ID\tNAME\tSTATUS\tCREATED_AT\tEXPIRES_AT\n");
    size_t i;
    json_t *k;
    int rc = 0;
    json_array_foreach(keys, i, k) {
        const char *exp = json_string_value(json_object_get(k, "expires_at"));
        int64_t at = 0;
        const char *status = json_is_true(json_object_get(k, "revoked")) ? "revoked"
                             : exp && (eai_time_parse_rfc3339(exp, &at) < 0 || at <= now) ? "expired"
                                                                                           : "active";
        if (as_json) {
            /* Only the listed fields: never a hash or a secret. */
            json_t *o = json_pack("{s:O, s:O, s:s, s:O, s:O, s:O}", "key_id", json_object_get(k, "key_id"), "name",
                                  json_object_get(k, "name"), "status", status, "revoked",
                                  json_object_get(k, "revoked"), "created_at", json_object_get(k, "created_at"),
                                  "expires_at", exp ? json_object_get(k, "expires_at") : json_null());
            if (!o || print_json_line(o) < 0)
                rc = 1;
            json_decref(o);
        } else {
            put_field(json_string_value(json_object_get(k, "key_id")));
            putchar('\t');
            put_field(json_string_value(json_object_get(k, "name")));
            printf("\t%s\t", status);
            put_field(json_string_value(json_object_get(k, "created_at")));
            putchar('\t');
            put_field(exp ? exp : "never");
            putchar('\n');
        }
    }
    json_decref(keys);
    if (rc)
        fprintf(stderr, "eaid: keys list: out of memory\n");
    return fflush(stdout) == 0 ? rc : 1;
}
