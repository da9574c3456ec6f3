/*
 * From a backend's output and exit report to the stored terminal record:
 * per-stream output buffers with a cap, text-or-base64 encoding, and the
 * mapping of struct eai_iso_result to the API's status values.  Pure
 * functions (docs/executions.md, "Results").
 */
#ifndef EAI_CORE_EXEC_RESULT_H
#define EAI_CORE_EXEC_RESULT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <eai/isolation.h>

/* One output stream: keeps the first `limit` bytes, counts the rest. */
struct eai_outbuf {
    char *data;
    size_t len, cap;
    size_t limit;
    uint64_t seen;             /* every byte the program wrote */
    int truncated;
};

void eai_outbuf_init(struct eai_outbuf *b, size_t limit);
/* Append what still fits; *kept receives how many bytes of d were kept
 * (a prefix of d).  0, or -1 when memory ran out (then truncated is set). */
int eai_outbuf_append(struct eai_outbuf *b, const char *d, size_t n, size_t *kept);
void eai_outbuf_free(struct eai_outbuf *b);

/* Set rec[key] to the bytes as a JSON string and rec[key "_encoding"] to
 * "utf-8" when they are valid UTF-8 without NUL and their JSON escaping is
 * at most twice their size, else base64 text and
 * "base64".  cut_partial: when the bytes were truncated, an incomplete
 * UTF-8 sequence at the very end (a character split by the cap) is dropped
 * rather than forcing base64.  0 or -1 (out of memory). */
int eai_output_encode(json_t *rec, const char *key, const char *d, size_t n, int cut_partial);

/* A collected file's name that is not valid UTF-8 cannot be a JSON string:
 * it is kept percent-encoded (every byte outside 0x21..0x7e, and '%'
 * itself, as %XX in upper-case hex; '/' kept), and the file entry carries
 * name_encoding "percent" (docs/executions.md "Collected files").  New
 * string, or NULL (out of memory). */
char *eai_name_percent_encode(const char *name);

/* The API status of a result: succeeded, failed, timeout, oom_killed,
 * cancelled or error. */
const char *eai_exec_outcome_status(const struct eai_iso_result *res);

/* New patch {status, exit_code, signal, error, usage{...}} of a result.
 * error is {code, message} for EAI_OUT_ERROR (code from the error table;
 * message the backend's or the table's English text), else null. */
json_t *eai_exec_result_patch(const struct eai_iso_result *res);

/* New patch for an execution that ended without running (or whose run is
 * lost): status "error", error {code, message}. */
json_t *eai_exec_error_patch(enum eai_code code, const char *message);

/* Turn a result patch into an error (status "error", error {code,
 * message}) keeping what was measured and written: usage, stdout/stderr,
 * exit code.  The usage of a run is billed whatever else fails.  0 or -1. */
int eai_exec_patch_fail(json_t *patch, enum eai_code code, const char *message);

/* 1 for succeeded, failed, timeout, oom_killed, cancelled, error. */
int eai_exec_status_terminal(const char *status);

/* The public view of a stored execution record (API.md "GET"): internal
 * fields (tenant_id, lease_*, request_hash, idempotency_key, env, stdin,
 * files_in, seq, ...) are left out.  New object or NULL. */
json_t *eai_exec_view(const json_t *rec);

#endif
