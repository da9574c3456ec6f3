/*
 * The execution record: its one owner (docs/storage.md, "The execution
 * record").
 *
 * Core builds a record from the validated request (eai_exec_record_init),
 * each storage backend completes its storage-owned keys on insert
 * (eai_exec_record_stored) and, inside the transaction that makes it
 * terminal, merges the terminal patch and scrubs the inputs
 * (eai_exec_record_terminal).  The shape is contracts/v1/
 * execution-record.schema.json, checked by tests/storage against every
 * record either backend returns.
 *
 * This file and exec_record.c form the static library `eai-record`
 * (core/record/CMakeLists.txt): jansson and libc only, position-independent,
 * hidden visibility, so core and the postgres plugin link the same code
 * (like plugins/common) and the plugin still links nothing of core.  No
 * plugin ABI change: these are not host calls.
 *
 * Library-like: nothing here logs, allocates a global, or reads the clock;
 * the caller passes "now".
 */
#ifndef EAI_EXEC_RECORD_H
#define EAI_EXEC_RECORD_H

#include <jansson.h>

/* The identity and context a new record carries besides the validated
 * request.  trace_id, span_id, traceparent: NULL or "" is stored as null;
 * idempotency_key: NULL as null; request_id, request_hash: NULL as "";
 * session_id: left out when NULL or "". */
struct eai_exec_record_ids {
    const char *id;              /* "sbx_<uuid>" */
    const char *tenant_id;
    const char *created_at;      /* RFC 3339 UTC, milliseconds */
    const char *request_id;
    const char *request_hash;
    const char *idempotency_key;
    const char *trace_id, *span_id, *traceparent;
    const char *session_id;
};

/* Complete rec (the validated request, eai_exec_validate's output) into a
 * queued record: identity, status "queued", every result key null or empty.
 * 0, or -1 out of memory (rec then partly filled: drop it). */
int eai_exec_record_init(json_t *rec, const struct eai_exec_record_ids *ids);

/* The keys an exec_list item leaves out (storage.h): the output and the
 * inputs, so a list never holds up to 100 x (inputs + 2 x the output cap).
 * An X-macro, so each backend spells it in its SQL at compile time:
 *   #define OMIT(k) ", '$." #k "'"   ->  json_remove(doc OMITS(OMIT)) */
#define EAI_EXEC_RECORD_LIST_OMITS(X) X(stdout) X(stderr) X(output_events) X(files_in) X(stdin) X(env)

/* 1 when k is a key storage assigns or keeps (id, tenant_id, seq,
 * created_at, updated_at, lease_owner, lease_until, cancel_requested,
 * idempotency_key, request_hash): never taken from a terminal patch. */
int eai_exec_record_storage_key(const char *k);

/* 1 for the six terminal statuses, 0 for queued, running and anything else. */
int eai_exec_record_is_terminal(const char *status);

/* The record as a backend inserts it: a copy of exec with the storage-owned
 * keys of a queued row (tenant_id, status queued, no lease, not cancelled,
 * created_at when absent, updated_at now, no seq).  NULL out of memory or
 * when exec is not an object. */
json_t *eai_exec_record_stored(const json_t *exec, const char *tenant, const char *now_s);

/* The public list of collected files [{path, size, sha256[, name_encoding]}]
 * of an exec_finish `files` argument ([{path, size, sha256, content_b64
 * [, name_encoding]}]): no content.  NULL out of memory. */
json_t *eai_exec_record_files_public(const json_t *files);

/* Clear the inputs (env {}, stdin null, files_in []): what a terminal
 * record never keeps (storage.h).  0 or -1 out of memory. */
int eai_exec_record_scrub(json_t *rec);

/* Make rec (a stored, non-terminal record) terminal, in place:
 * - every key of patch but the storage keys is merged in;
 * - status: the patch's when terminal, else default_status (cancel of a
 *   queued row: "cancelled"), else refused;
 * - finished_at: the patch's, else now_s; updated_at: now_s;
 * - files: the public list of `files` when it holds any, else the patch's
 *   or the record's, else [];
 * - the inputs scrubbed.
 * Backends call this inside the transaction that checked the row is still
 * queued or running (compare-and-set on status).  0; -1 with *why set (a
 * static string) for a refused patch; -2 out of memory. */
int eai_exec_record_terminal(json_t *rec, const json_t *patch, const json_t *files,
                             const char *default_status, const char *now_s, const char **why);

#endif
