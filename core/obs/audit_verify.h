/* `eaid audit verify`: walk the per-tenant hash chains (docs/audit.md). */
#ifndef EAI_CORE_AUDIT_VERIFY_H
#define EAI_CORE_AUDIT_VERIFY_H

#include <stdint.h>
#include <eai/storage.h>

struct eai_audit_verify_result {
    int64_t events;            /* events checked */
    int chains;                /* tenants seen */
    int broken;                /* 1 when a bad event was found */
    char tenant[64];           /* first bad event: tenant, seq, id, what */
    int64_t seq;
    char id[64];
    char what[256];
};

/* Walk every tenant's chain (tenant NULL) or one: hash, prev_hash link,
 * seq contiguous from 1, the stored anchor (audit_anchor:<tenant>, written
 * by the delivery loop) for deletions at the end.  Stops at the first bad
 * event.  0 intact, 1 broken (res says where), -1 storage error (*err). */
int eai_audit_verify(const struct eai_storage_ops *ops, void *store, const char *tenant,
                     struct eai_audit_verify_result *res, struct eai_error **err);

/* CLI wrapper: prints "ok: N events in M chains" on stdout and returns 0,
 * or names the first bad event on stderr and returns 1 (2 on a storage
 * error). */
int eai_audit_verify_cli(const struct eai_storage_ops *ops, void *store, const char *tenant);

/* Anchors: kv "audit_anchor:<tenant>" = "<seq>:<hash>" of the newest event
 * seen, so that deleting events at the end of a chain is caught. */
#define EAI_AUDIT_ANCHOR_PREFIX "audit_anchor:"

/* SYSTEM: the newest event of every tenant as [{tenant_id, seq, hash}],
 * through ops->audit_heads when the backend has it, else by listing every
 * event (slow: cap the calls).  0 or -1. */
int eai_audit_heads(const struct eai_storage_ops *ops, void *store, json_t **out,
                    struct eai_error **err);
/* Record the anchors of heads (as from eai_audit_heads) whose seq moved
 * forward over the event anchored before.  Returns the number of tenants
 * whose anchored event is gone or changed (anchor kept), or -1. */
int eai_audit_anchor_update(const struct eai_storage_ops *ops, void *store, const json_t *heads,
                            struct eai_error **err);

#endif
