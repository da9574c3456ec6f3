/*
 * Storage backend ops (kind EAI_KIND_STORAGE).
 *
 * Threading: every op is synchronous and thread-safe; core calls them from
 * worker threads only (host->work_submit), never on the loop thread.  The
 * CLI (eaid tenants/keys/audit) calls them directly.
 *
 * Records are jansson objects.  Ownership: an `json_t **out` receives a new
 * reference the caller must json_decref(); inputs are borrowed.
 *
 * Tenant scope: every op that takes `tenant` touches that tenant's rows
 * only (SQLite: WHERE tenant_id = ?; PostgreSQL: set_config('app.tenant_id')
 * plus row-level security).  Ops marked SYSTEM work across tenants (queue
 * claim, outbox, verification) and are documented as such.
 *
 * Execution record (json object): its shape is contracts/v1/
 * execution-record.schema.json, checked by the storage contract suite
 * (tests/storage) against every record a backend returns; core builds it,
 * and backends merge terminal patches and scrub with core/record/
 * exec_record.h (the static library eai-record, linked by the in-tree
 * backends: docs/storage.md, "The execution record").  Keys, as stored
 * and returned:
 *   id "sbx_<uuid>", tenant_id, status, profile, backend, image, command[],
 *   limits{cpu,memory,timeout_s,pids,output_bytes,disk}, env{} (scrubbed to
 *   {} when terminal), stdin (string or null; scrubbed when terminal),
 *   stdin_b64 (bool), files_in[] ({path, content_b64}; scrubbed when terminal),
 *   collect[], egress[], tool, project_id, agent_id, run_id, trace_id,
 *   span_id, traceparent, exit_code, signal, stdout, stderr, stdout_truncated,
 *   stderr_truncated, stdout_encoding/stderr_encoding ("utf-8"|"base64"),
 *   files[] ({path,size,sha256}), usage{cpu_seconds,memory_mb_seconds,
 *   duration_s}, error{code,message} or null, created_at, started_at,
 *   finished_at, updated_at (RFC 3339 UTC with milliseconds), seq (integer,
 *   assigned by storage, increasing: list order and cursor), lease_owner,
 *   lease_until (epoch ms), cancel_requested (bool), idempotency_key,
 *   request_hash.
 * Indexed columns a backend must keep queryable: id, tenant_id, status,
 * run_id, project_id, created_at, seq, lease_owner, lease_until,
 * idempotency_key.  The rest may live in one JSON document column.
 *
 * Audit event (json object): id (uuid), tenant_id, seq, time, actor,
 * action, target, decision ("allow"|"deny"), reason, request_id, trace_id,
 * prev_hash, hash.  Storage assigns seq per tenant and calls
 * host->audit_seal(event, prev_hash_of_last_event) under a per-tenant lock
 * in the same transaction as the insert.
 */
#ifndef EAI_STORAGE_H
#define EAI_STORAGE_H

#include "plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define EAI_SYSTEM_TENANT "00000000-0000-0000-0000-000000000000"

enum eai_store_result {
    EAI_STORE_CREATED = 1,     /* exec_create / manifest_put: new row */
    EAI_STORE_EXISTS = 2,      /* exec_create: same idempotency key and hash */
    EAI_STORE_UPDATED = 3,     /* manifest_put: replaced */
    EAI_STORE_CONFLICT = 4,    /* exec_create: same key, other hash */
    EAI_STORE_NOOP = 5,        /* exec_finish: already terminal */
};

/* outbox_fetch's share of one tenant's rows of one kind in a fetch of limit rows */
#define EAI_OUTBOX_FAIR_SHARE(limit) ((limit) / 8 > 16 ? (limit) / 8 : 16)

struct eai_storage_ops {
    size_t size;

    /* Schema: apply the embedded migrations/<backend>/ files (idempotent).
     * app_role: PostgreSQL role to grant to (NULL: none). */
    int (*migrate)(void *self, const char *app_role, struct eai_error **err);
    /* 0 when reachable (a cheap round trip). */
    int (*ping)(void *self, struct eai_error **err);

    /* --- tenants and keys (admin CLI and auth) */
    int (*tenant_create)(void *self, const char *name, json_t **out, struct eai_error **err);
    /* SYSTEM: {id,name,created_at} or NULL in *out when unknown. */
    int (*tenant_get)(void *self, const char *id, json_t **out, struct eai_error **err);
    int (*key_create)(void *self, const char *tenant, const char *key_id,
                      const char *secret_hash_hex, const char *name, struct eai_error **err);
    /* SYSTEM: {key_id, tenant_id, hash, revoked(bool), name} or *out NULL;
     * plus expires_at (RFC 3339 or null) when key_create_expiring exists. */
    int (*key_get)(void *self, const char *key_id, json_t **out, struct eai_error **err);
    /* SYSTEM: 0 when revoked, -1 + EAI_E_NOT_FOUND when unknown. */
    int (*key_revoke)(void *self, const char *key_id, struct eai_error **err);

    /* --- executions */
    /* Insert exec (status queued) and append audit (may be NULL) in one
     * transaction.  With idempotency_key: if a row of this tenant has the
     * same key created within 24 h, returns EXISTS (same request_hash, the
     * row in *existing) or CONFLICT.  Returns an eai_store_result or -1. */
    int (*exec_create)(void *self, const char *tenant, const json_t *exec,
                       const json_t *audit, json_t **existing, struct eai_error **err);
    /* *out NULL when not found in this tenant. */
    int (*exec_get)(void *self, const char *tenant, const char *id,
                    json_t **out, struct eai_error **err);
    /* filter: {status?, run_id?, id?, limit (1..100), after? (seq,
     * exclusive)}.  *out = array newest first (seq descending).  Records
     * come WITHOUT stdout and stderr (their _truncated/_encoding flags
     * stay) and WITHOUT the inputs files_in, stdin and env, so a list never
     * holds up to 100 x (inputs + 2 x the output cap) in memory; {id, limit
     * 1} is the light read of one execution that long-polls repeat. */
    int (*exec_list)(void *self, const char *tenant, const json_t *filter,
                     json_t **out, struct eai_error **err);
    /* SYSTEM: claim up to max queued executions, oldest first, at most
     * per_tenant_max per tenant in this call (fairness), marking them
     * running with lease_owner = owner, lease_until = now + lease_ms,
     * started_at = now.  PostgreSQL: FOR UPDATE SKIP LOCKED.  *out array. */
    int (*exec_claim)(void *self, const char *owner, int64_t lease_ms, int max,
                      int per_tenant_max, json_t **out, struct eai_error **err);
    /* SYSTEM: extend every running lease of owner; *cancel_ids = array of
     * {id, tenant_id} of owner's running executions with cancel_requested. */
    int (*exec_renew)(void *self, const char *owner, int64_t lease_ms,
                      json_t **cancel_ids, struct eai_error **err);
    /* Set cancel_requested on a running execution; a queued one becomes
     * terminal (patch applied as in exec_finish).  Returns the row after
     * the change in *out, NULL when not found.  The result says whether
     * this very call changed the row (a client's X-Request-Id is no
     * one-time token): EAI_STORE_UPDATED (queued -> cancelled, or running
     * -> cancel_requested, audit appended), EAI_STORE_NOOP (already
     * terminal or already cancel_requested: nothing written, no audit),
     * 0 when not found, -1 on error. */
    int (*exec_cancel)(void *self, const char *tenant, const char *id,
                       const json_t *cancelled_patch, const json_t *audit,
                       json_t **out, struct eai_error **err);
    /* Make an execution terminal, in one transaction: merge patch (status,
     * exit_code, stdout, usage, error, finished_at, ...), scrub env/stdin/
     * files_in, insert files ([{path, size, sha256, content_b64}]), insert
     * usage_event into the outbox (may be NULL; an array: one row per
     * element, e.g. the usage event and a completion callback whose event
     * has "target": "callback") and append audit (may be
     * NULL).  Only when the row is queued or running; else EAI_STORE_NOOP.
     * Returns EAI_STORE_UPDATED, EAI_STORE_NOOP or -1. */
    int (*exec_finish)(void *self, const char *tenant, const char *id,
                       const json_t *patch, const json_t *files,
                       const json_t *usage_event, const json_t *audit,
                       struct eai_error **err);
    /* SYSTEM: running executions whose lease ended before now_ms. */
    int (*exec_stale)(void *self, int64_t now_ms, json_t **out, struct eai_error **err);
    /* SYSTEM: number of queued and running executions. */
    int (*exec_counts)(void *self, int64_t *queued, int64_t *running, struct eai_error **err);

    /* --- collected files: raw bytes (malloc'd) of one file, or *data NULL */
    int (*file_get)(void *self, const char *tenant, const char *exec_id,
                    const char *path, unsigned char **data, size_t *len,
                    struct eai_error **err);

    /* --- manifests */
    int (*manifest_put)(void *self, const char *tenant, const char *kind,
                        const char *name, const json_t *doc, const json_t *audit,
                        struct eai_error **err);       /* CREATED / UPDATED / -1 */
    int (*manifest_get)(void *self, const char *tenant, const char *kind,
                        const char *name, json_t **out, struct eai_error **err);
    /* 0 deleted, -1 + EAI_E_NOT_FOUND when absent. */
    int (*manifest_delete)(void *self, const char *tenant, const char *kind,
                           const char *name, const json_t *audit, struct eai_error **err);

    /* --- audit */
    int (*audit_append)(void *self, const char *tenant, const json_t *event,
                        struct eai_error **err);
    /* SYSTEM when tenant is NULL: events with seq > after_seq in chain
     * order, per tenant (ordered by tenant_id, seq), at most limit. */
    int (*audit_list)(void *self, const char *tenant, int64_t after_seq, int limit,
                      json_t **out, struct eai_error **err);

    /* --- usage outbox and in-process ledger */
    /* SYSTEM: undelivered outbox rows, oldest first:
     * [{id, tenant_id, event{...}, attempts}], at most
     * EAI_OUTBOX_FAIR_SHARE(limit) of one tenant's usage events and as many
     * of its callbacks (event.target "callback"), so that one tenant's
     * backlog never holds back another tenant's deliveries. */
    int (*outbox_fetch)(void *self, int limit, json_t **out, struct eai_error **err);
    /* SYSTEM: delivered (delete or mark); attempts++ with error otherwise. */
    int (*outbox_ack)(void *self, const char *id, int delivered, struct eai_error **err);
    /* Insert into the ledger (id is the event id: duplicates are ignored).
     * Returns CREATED or EXISTS. */
    int (*ledger_insert)(void *self, const char *tenant, const json_t *event,
                         struct eai_error **err);
    /* filter: {project_id?, run_id?, agent_id?, from? (inclusive), to?
     * (exclusive), after_ms? + after_id? (keyset cursor: rows after that
     * (time, event id)), limit}; *out: events ordered by (time, event id). */
    int (*ledger_query)(void *self, const char *tenant, const json_t *filter,
                        json_t **out, struct eai_error **err);

    /* --- small durable key/value for cursors (audit sink position ...) */
    int (*kv_get)(void *self, const char *key, char **value, struct eai_error **err);
    int (*kv_set)(void *self, const char *key, const char *value, struct eai_error **err);

    /* ---- Added in 1.1.  Core copies every plugin's table into one of
     * today's size at load (NULL past a 1.0 plugin's end): test for NULL. */
    /* SYSTEM: the newest audit event of every tenant, ordered by tenant:
     * [{tenant_id, seq, hash}].  Lets the audit sink and `eaid audit
     * verify` find tenants without listing every event.  May be NULL. */
    int (*audit_heads)(void *self, json_t **out, struct eai_error **err);
    /* SYSTEM: exec_claim that takes no row of the tenants listed in
     * exclude (a JSON array of tenant ids: those at their per-tenant bound
     * on this node), so a busy tenant never holds claimed-but-waiting rows
     * and a newcomer is claimed as soon as a slot frees.  May be NULL:
     * core then calls exec_claim and the per-tenant bound holds per claim
     * only (docs/executions.md). */
    int (*exec_claim_excluding)(void *self, const char *owner, int64_t lease_ms, int max,
                                int per_tenant_max, const json_t *exclude, json_t **out,
                                struct eai_error **err);

    /* --- admin listings and key expiry (`eaid tenants list`, `eaid keys
     * list|create --expires`); each may be NULL: check size and pointer. */
    /* SYSTEM: at most limit (1..1000) tenants with id > after (NULL: from
     * the start), ordered by id: [{id, name, created_at}]. */
    int (*tenant_list)(void *self, const char *after, int limit, json_t **out,
                       struct eai_error **err);
    /* The keys of one tenant, oldest first: [{key_id, name, revoked,
     * created_at, expires_at}] (expires_at RFC 3339 or null).  Never the
     * hash.  An unknown tenant gives an empty array. */
    int (*key_list)(void *self, const char *tenant, json_t **out, struct eai_error **err);
    /* key_create with an expiry time (epoch ms; 0 = never).  A backend with
     * this op also returns expires_at (RFC 3339 or null) from key_get, and
     * core refuses the key from that instant on. */
    int (*key_create_expiring)(void *self, const char *tenant, const char *key_id,
                               const char *secret_hash_hex, const char *name,
                               int64_t expires_ms, struct eai_error **err);

    /* ---- Added in 1.2; each may be NULL (and is, for a backend of an
     * older minor: its table is NULL-filled at load): check the pointer. */
    /* --- manifest listing (GET /v1/manifests): at most limit (1..1000)
     * manifests of one tenant and kind whose name is > after (NULL: from
     * the start), ordered by name: [doc, ...]. */
    int (*manifest_list)(void *self, const char *tenant, const char *kind, const char *after, int limit,
                         json_t **out, struct eai_error **err);
    /* --- sessions (docs/sessions.md): insert one usage event into the
     * outbox (delivered like an execution's) and append audit (may be
     * NULL), in one transaction: a session's lifetime usage at its end.
     * 0 or -1. */
    int (*outbox_append)(void *self, const char *tenant, const json_t *usage_event,
                         const json_t *audit, struct eai_error **err);
    /* ---- quotas and retention (docs/configuration.md, "Quotas and
     * retention"); each may be NULL: core then enforces neither. */
    /* A tenant's footprint: {"executions_since": executions created at or
     * after since_ms, "stored_bytes": bytes of its execution documents,
     * collected files and manifests, "manifests": how many}. */
    int (*tenant_usage)(void *self, const char *tenant, int64_t since_ms, json_t **out,
                        struct eai_error **err);
    /* SYSTEM: delete at most limit terminal executions created before
     * before_ms, with their collected files (never the usage ledger, the
     * outbox or the audit chain), and append to each tenant concerned one
     * audit event (action "retention.pruned", the count and the ids' range)
     * in the same transaction: the chain keeps verifying and records the
     * deletion.  *deleted: executions removed.  A backend with the
     * session ops (1.4) also deletes at most limit ended, failed or
     * interrupted session records created before before_ms. */
    int (*exec_prune)(void *self, int64_t before_ms, int limit, int64_t *deleted, struct eai_error **err);

    /* ---- Added in 1.3: the agent view (GET /v1/runs, /v1/agents;
     * docs/api.md "Runs and agents", docs/storage.md "The agent view").
     * Each may be NULL: core then answers those routes 503.  Every one
     * reads through an index (tenant_id, run_id | agent_id | project_id):
     * never a scan of the executions.  Times are RFC 3339 strings. */
    /* One run of one tenant: *out = {"run_id", "executions": [{id, status,
     * profile, session_id, trace_id, created_at, started_at, finished_at,
     * usage}] oldest first (seq order), at most limit (1..1000),
     * "truncated" (bool: the run has more), "total", "counts" {status: n},
     * "usage" {cpu_seconds, memory_mb_seconds, duration_s} (sums over the
     * whole run), "first_at" (oldest created_at), "last_at" (newest
     * updated_at), "agent_id", "project_id"}; *out NULL when the tenant has
     * no execution with that run_id. */
    int (*run_get)(void *self, const char *tenant, const char *run_id, int limit, json_t **out,
                   struct eai_error **err);
    /* filter {agent_id?, project_id?, after? (a run_id: exclusive), limit
     * (1..1000)}: the tenant's runs by run_id ascending: [{run_id,
     * agent_id, project_id, executions, first_at, last_at}]. */
    int (*run_list)(void *self, const char *tenant, const json_t *filter, json_t **out,
                    struct eai_error **err);
    /* At most limit (1..1000) agents of the tenant whose agent_id > after
     * (NULL: from the start), ascending: [{agent_id, executions, runs,
     * last_seen}]. */
    int (*agent_list)(void *self, const char *tenant, const char *after, int limit, json_t **out,
                      struct eai_error **err);
    /* One agent: *out = {agent_id, executions, runs, newest_run (run_id of
     * its newest execution carrying one, or null), last_seen, "usage":
     * [{profile, executions, cpu_seconds, memory_mb_seconds, duration_s}]
     * by profile}, NULL when the tenant has no execution of that agent. */
    int (*agent_get)(void *self, const char *tenant, const char *agent_id, json_t **out,
                     struct eai_error **err);

    /* ---- Added in 1.4: stored sessions (docs/sessions.md "Stored
     * sessions").  Each may be NULL (a backend of an older minor): core
     * then keeps sessions in memory only, as before.  A session's record
     * is a JSON document {id ("ses_<uuid>"), status, owner (the node that
     * runs it), created_at, ...}; the backend keeps id, status, owner and
     * the times in columns and the rest as the document, under the
     * tenant's isolation (row-level security on PostgreSQL).  doc.claim_owner
     * (optional): the exec_claim owner of the process that runs the
     * session; a backend shared by several processes lets only it claim
     * the session's executions (and anyone those of an ended session). */
    /* Insert or replace the record doc of tenant's session doc.id.
     * doc.rev (an integer, 0 when absent) orders the writes of one
     * session: a doc whose rev is lower than the stored one is not
     * written (0 returned), so writes queued on several threads land in
     * order.  When expect_owner is not NULL the record is written only if
     * it does not exist or its stored owner is expect_owner (an ownership
     * move in one statement): otherwise -1 with EAI_E_CONFLICT and nothing
     * written. */
    int (*session_put)(void *self, const char *tenant, const json_t *doc, const char *expect_owner,
                       struct eai_error **err);
    /* *out = the record of tenant's session id, NULL when there is none
     * (another tenant's: NULL too). */
    int (*session_get)(void *self, const char *tenant, const char *id, json_t **out,
                       struct eai_error **err);
    /* filter {status? (one status), live? (true: not ended or failed),
     * before? (an id: the cursor, exclusive), limit (1..1000)}: tenant's
     * sessions newest first (created_at, then id, descending): [doc, ...]. */
    int (*session_list)(void *self, const char *tenant, const json_t *filter, json_t **out,
                        struct eai_error **err);
    /* SYSTEM: at most limit (1..1000) records whose owner is owner and
     * whose status is not ended or failed, of every tenant, oldest first:
     * [{"tenant_id", "doc"}] (the start-up sweep of a node). */
    int (*session_owned)(void *self, const char *owner, int limit, json_t **out,
                         struct eai_error **err);

    /* ---- Added in 1.5: snapshot records (docs/sessions.md "Snapshots and
     * forks").  Each may be NULL (the five together or none): core then
     * keeps a snapshot's record in a file beside its image.  A record is a
     * JSON document {id ("snp_<uuid>"), owner (the node that holds its
     * image), session_id, created_at, expires_at, size_bytes, spec, ...};
     * the backend keeps id, owner, session_id and the times in columns
     * and the rest as the document, under the tenant's isolation
     * (row-level security on PostgreSQL). */
    /* Insert or replace tenant's record doc.id (another tenant's id: -1,
     * EAI_E_CONFLICT, nothing written). */
    int (*snapshot_put)(void *self, const char *tenant, const json_t *doc, struct eai_error **err);
    /* *out = tenant's record id, NULL when there is none (another
     * tenant's: NULL too). */
    int (*snapshot_get)(void *self, const char *tenant, const char *id, json_t **out, struct eai_error **err);
    /* filter {session_id? (of that session only), limit (1..1000)}:
     * tenant's records newest first: [doc, ...]. */
    int (*snapshot_list)(void *self, const char *tenant, const json_t *filter, json_t **out,
                         struct eai_error **err);
    /* Remove tenant's record id (none: 0). */
    int (*snapshot_delete)(void *self, const char *tenant, const char *id, struct eai_error **err);
    /* SYSTEM: at most limit (1..1000) records whose owner is owner, of
     * every tenant, oldest first: [{"tenant_id", "doc"}] (a node's
     * start). */
    int (*snapshot_owned)(void *self, const char *owner, int limit, json_t **out, struct eai_error **err);
};
/* Frozen sizes per minor: the loader accepts [SIZE_1_0, sizeof]. */
#define EAI_STORAGE_OPS_SIZE_1_0 offsetof(struct eai_storage_ops, audit_heads)
#define EAI_STORAGE_OPS_SIZE_1_1 (offsetof(struct eai_storage_ops, key_create_expiring) + sizeof(void (*)(void)))
#define EAI_STORAGE_OPS_SIZE_1_2 (offsetof(struct eai_storage_ops, exec_prune) + sizeof(void (*)(void)))
#define EAI_STORAGE_OPS_SIZE_1_3 (offsetof(struct eai_storage_ops, agent_get) + sizeof(void (*)(void)))
#define EAI_STORAGE_OPS_SIZE_1_4 (offsetof(struct eai_storage_ops, session_owned) + sizeof(void (*)(void)))
#define EAI_STORAGE_OPS_SIZE_1_5 (offsetof(struct eai_storage_ops, snapshot_owned) + sizeof(void (*)(void)))

#ifdef __cplusplus
}
#endif
#endif
