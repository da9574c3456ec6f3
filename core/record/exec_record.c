/* The execution record: build, store, merge, scrub (exec_record.h). */
#include "exec_record.h"
#include "eaibase.h"

#include <string.h>

/* ------------------------------------------------------------ keys */

/* Keys storage assigns or keeps; a terminal patch never sets them. */
static const char *const storage_keys[] = {
    "id", "tenant_id", "seq", "created_at", "updated_at", "lease_owner", "lease_until",
    "cancel_requested", "idempotency_key", "request_hash",
};

static const char *const terminal_statuses[] = {
    "succeeded", "failed", "timeout", "oom_killed", "cancelled", "error",
};

int eai_exec_record_storage_key(const char *k)
{
    for (size_t i = 0; k && i < sizeof storage_keys / sizeof storage_keys[0]; i++)
        if (strcmp(k, storage_keys[i]) == 0)
            return 1;
    return 0;
}

int eai_exec_record_is_terminal(const char *status)
{
    for (size_t i = 0; status && i < sizeof terminal_statuses / sizeof terminal_statuses[0]; i++)
        if (strcmp(status, terminal_statuses[i]) == 0)
            return 1;
    return 0;
}

/* json_object_set_new that reports failure (a NULL value included). */
static int set(json_t *o, const char *k, json_t *v)
{
    return v && json_object_set_new(o, k, v) == 0 ? 0 : -1;
}

/* NULL or "" -> null */
static json_t *str_or_null(const char *s)
{
    return s && *s ? json_string(s) : json_null();
}

/* ------------------------------------------------------------ build */

int eai_exec_record_init(json_t *rec, const struct eai_exec_record_ids *ids)
{
    if (!json_is_object(rec) || !ids || !ids->id || !ids->tenant_id || !ids->created_at)
        return -1;

    int bad = 0;
    bad |= set(rec, "id", json_string(ids->id));
    bad |= set(rec, "tenant_id", json_string(ids->tenant_id));
    bad |= set(rec, "status", json_string("queued"));
    bad |= set(rec, "created_at", json_string(ids->created_at));

    /* results: none yet */
    static const char *const nulls[] = {"started_at", "finished_at", "exit_code", "signal",
                                        "error", "usage"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        bad |= set(rec, nulls[i], json_null());
    bad |= set(rec, "files", json_array());

    bad |= set(rec, "trace_id", str_or_null(ids->trace_id));
    bad |= set(rec, "span_id", str_or_null(ids->span_id));
    bad |= set(rec, "traceparent", str_or_null(ids->traceparent));
    bad |= set(rec, "request_id", json_string(ids->request_id ? ids->request_id : ""));
    bad |= set(rec, "idempotency_key", ids->idempotency_key ? json_string(ids->idempotency_key) : json_null());
    bad |= set(rec, "request_hash", json_string(ids->request_hash ? ids->request_hash : ""));
    bad |= set(rec, "cancel_requested", json_false());
    if (ids->session_id && *ids->session_id)
        bad |= set(rec, "session_id", json_string(ids->session_id));
    return bad ? -1 : 0;
}

json_t *eai_exec_record_stored(const json_t *exec, const char *tenant, const char *now_s)
{
    if (!json_is_object(exec) || !tenant || !now_s)
        return NULL;
    json_t *e = json_deep_copy(exec);
    if (!e)
        return NULL;

    json_object_del(e, "seq");
    int bad = 0;
    bad |= set(e, "tenant_id", json_string(tenant));
    bad |= set(e, "status", json_string("queued"));
    bad |= set(e, "lease_owner", json_null());
    bad |= set(e, "lease_until", json_null());
    bad |= set(e, "cancel_requested", json_false());
    if (!eai_jstr(e, "created_at"))
        bad |= set(e, "created_at", json_string(now_s));
    bad |= set(e, "updated_at", json_string(now_s));
    if (bad) {
        json_decref(e);
        return NULL;
    }
    return e;
}

/* ------------------------------------------------------------ terminal */

json_t *eai_exec_record_files_public(const json_t *files)
{
    json_t *pub = json_array();
    size_t i;
    const json_t *f;
    json_array_foreach(files, i, f) {
        if (!pub)
            break;
        json_t *e = json_pack("{s:O?, s:O?, s:O?}", "path", json_object_get(f, "path"),
                              "size", json_object_get(f, "size"), "sha256", json_object_get(f, "sha256"));
        /* a name that was not UTF-8, percent-encoded by core (docs/executions.md) */
        const json_t *enc = json_object_get(f, "name_encoding");
        if (e && json_is_string(enc) && json_object_set(e, "name_encoding", (json_t *)enc) < 0) {
            json_decref(e);
            e = NULL;
        }
        if (!e || json_array_append_new(pub, e) < 0) {
            json_decref(pub);
            pub = NULL;
        }
    }
    return pub;
}

int eai_exec_record_scrub(json_t *rec)
{
    int bad = 0;
    bad |= set(rec, "env", json_object());
    bad |= set(rec, "stdin", json_null());
    bad |= set(rec, "files_in", json_array());
    return bad ? -1 : 0;
}

int eai_exec_record_terminal(json_t *rec, const json_t *patch, const json_t *files,
                             const char *default_status, const char *now_s, const char **why)
{
    static const char *no_why;
    if (!why)
        why = &no_why;
    if (!json_is_object(rec) || !now_s) {
        *why = "no record to make terminal";
        return -1;
    }
    if (patch && !json_is_object(patch)) {
        *why = "terminal patch is not an object";
        return -1;
    }
    const char *status = eai_jstr(patch, "status");
    if (!eai_exec_record_is_terminal(status))
        status = default_status;
    if (!eai_exec_record_is_terminal(status)) {
        *why = "terminal patch without a terminal status";
        return -1;
    }

    /* the patch, but never what storage owns */
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v) {
        if (eai_exec_record_storage_key(k))
            continue;
        json_t *copy = json_deep_copy(v);
        if (set(rec, k, copy) < 0)
            return -2;
    }

    int bad = 0;
    bad |= set(rec, "status", json_string(status));
    if (!eai_jstr(patch, "finished_at"))
        bad |= set(rec, "finished_at", json_string(now_s));
    bad |= set(rec, "updated_at", json_string(now_s));
    if (json_array_size(files) > 0)
        bad |= set(rec, "files", eai_exec_record_files_public(files));
    else if (!json_is_array(json_object_get(rec, "files")))
        bad |= set(rec, "files", json_array());
    bad |= eai_exec_record_scrub(rec);
    return bad ? -2 : 0;
}
