/*
 * Semantic validation of POST /v1/sandbox/executions bodies, after the
 * JSON Schema (contracts/v1/sandbox-execution.schema.json) accepted their
 * structure: tool manifest merge, profile resolution, exact quantities,
 * limits against the profile's maxima (never clamped), egress allow list,
 * input files and collect paths, defaults.  Pure functions: no storage, no
 * I/O except the optional image callback, safe on worker threads.
 * docs/executions.md describes every rule.
 */
#ifndef EAI_CORE_EXEC_VALIDATE_H
#define EAI_CORE_EXEC_VALIDATE_H

#include <stdint.h>
#include <jansson.h>
#include <eai/plugin.h>

#include "app.h"

/* Caps applied on top of the schema. */
#define EAI_EXEC_MAX_ARGV_BYTES   (1 << 20)  /* total command bytes */
#define EAI_EXEC_MAX_ENV_BYTES    (1 << 20)  /* total env bytes */
#define EAI_EXEC_IDEMPOTENCY_MAX  255

/* Limits a backend enforces on what a request carries (its probe's
 * max_* fields, ABI 1.1); 0 = none of its own. */
struct eai_exec_blimits {
    int64_t max_path_bytes, max_name_bytes, max_input_bytes, max_files, max_env_name_bytes, flags;
    /* set when the backend (with core's egress engine) cannot carry a
     * granted egress: such executions are refused (egress_unsupported) */
    int egress_unsupported;
    /* set when the backend has no stdin_write op (ABI 1.4): stdin_mode
     * "stream" is refused at /stdin_mode */
    int stdin_stream_unsupported;
};

/* Core's own bounds, applied whatever the backend says. */
#define EAI_EXEC_MAX_PATH_BYTES   4096
#define EAI_EXEC_MAX_NAME_BYTES   255

struct eai_cb_policy;

struct eai_exec_vopts {
    int64_t files_max_total_bytes;   /* decoded input files, all together */
    /* Image check for backends with EAI_ISO_CAP_LOCAL_IMAGES: 1 known,
     * 0 unknown.  NULL: images are not checked. */
    int (*image_known)(void *arg, const struct eai_profile *p, const char *image);
    void *image_arg;
    /* The image's own command, asked when neither the body nor the tool
     * gives one (arg = image_arg): 0 with *argv a new array of strings, or
     * NULL with why (the image has none, or the backend cannot tell); -1
     * with why on failure.  NULL: `command` is required. */
    int (*image_command)(void *arg, const struct eai_profile *p, const char *image, json_t **argv, char *why,
                         size_t whylen);
    /* The limits of the profile's backend (arg = image_arg).  NULL: core's
     * own bounds only.  The strictest of both applies at admission. */
    void (*backend_limits)(void *arg, const struct eai_profile *p, struct eai_exec_blimits *out);
    /* callbacks.allow (NULL: none, any public address) */
    const struct eai_cb_policy *callbacks;
};

/* A schema error list filtered for a body that names a tool: "is required"
 * errors at /image and /command are dropped because the tool manifest may
 * supply them (checked again by eai_exec_validate).  Modifies errors. */
void eai_exec_schema_filter(const json_t *body, json_t *errors);

/* Validate `body` (a JSON object that passed the schema) with the tool's
 * manifest document (full manifest with "spec", or NULL when body has no
 * "tool"; when body names a tool and tool_doc is NULL the tool is unknown).
 * On success: 0, *out = a new partial execution record (profile, backend,
 * image, command, limits{cpu,memory,timeout_s,pids,output_bytes,disk},
 * env, stdin, stdin_b64, files_in, collect, egress, tool, project_id,
 * agent_id, run_id) and *profile.  On refusal: -1 and *err with the code
 * (validation_failed, unknown_profile, limit_exceeded, egress_not_allowed,
 * unknown_image) and details [{path, message}]. */
int eai_exec_validate(const json_t *body, const json_t *tool_doc,
                      const struct eai_profile *profiles, int nprofiles,
                      const struct eai_exec_vopts *opts, json_t **out,
                      const struct eai_profile **profile, struct eai_error **err);

/* Resolved limits of a stored record (canonical strings parsed back). */
struct eai_exec_limits {
    int64_t cpu_millis, memory_bytes, timeout_s, pids, output_bytes, disk_bytes;
};
int eai_exec_limits_parse(const json_t *limits, struct eai_exec_limits *out);

/* sha256 hex of the canonical body (sorted keys, compact). 0 or -1. */
int eai_exec_request_hash(const json_t *body, char out[65]);

/* A path under /tmp: absolute, "/tmp" or "/tmp/...", no empty, "." or
 * ".." segment, no NUL, at most 4096 bytes.  allow_root: "/tmp" itself. */
int eai_exec_tmp_path_ok(const char *p, size_t len, int allow_root);

/* The longest segment of p, in bytes. */
size_t eai_exec_path_max_segment(const char *p);

#endif
