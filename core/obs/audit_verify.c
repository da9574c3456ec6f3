/*
 * Verification of the audit chains (docs/audit.md).  Each tenant has its
 * own chain: seq 1, 2, 3 ... with prev_hash of event n+1 equal to the hash
 * of event n (the zero hash for seq 1) and hash = SHA-256(prev_hash ||
 * canonical JSON).  A modified event fails its hash; a deleted one leaves
 * a gap in seq and a broken link; a reordered one shows seq out of order;
 * a deletion at the end of a chain is caught by the anchor the delivery
 * loop records in kv ("audit_anchor:<tenant>" = "<seq>:<hash>").
 */
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obs/audit.h"
#include "obs/audit_verify.h"
#include "base/errors.h"
#include "eaibase.h"

#define EAI_VERIFY_PAGE 1000

static int has_heads_op(const struct eai_storage_ops *ops)
{
    return ops->audit_heads != NULL; /* ABI 1.1, NULL-filled for 1.0 backends */
}


struct eai_chain {
    char tenant[64];
    int64_t next_seq;          /* expected seq of the next event */
    char last_hash[65];
};

static void chain_reset(struct eai_chain *c, const char *tenant)
{
    snprintf(c->tenant, sizeof(c->tenant), "%s", tenant);
    c->next_seq = 1;
    snprintf(c->last_hash, sizeof(c->last_hash), "%s", EAI_AUDIT_ZERO_HASH);
}

static int fail(struct eai_audit_verify_result *res, const char *tenant, int64_t seq,
                const char *id, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(struct eai_audit_verify_result *res, const char *tenant, int64_t seq,
                const char *id, const char *fmt, ...)
{
    va_list ap;
    res->broken = 1;
    snprintf(res->tenant, sizeof(res->tenant), "%s", tenant ? tenant : "?");
    res->seq = seq;
    snprintf(res->id, sizeof(res->id), "%s", id ? id : "?");
    va_start(ap, fmt);
    vsnprintf(res->what, sizeof(res->what), fmt, ap);
    va_end(ap);
    return 1;
}

/* Check one event against its chain; 0 when good (and the chain moves on). */
static int check_event(struct eai_chain *c, const json_t *ev, struct eai_audit_verify_result *res)
{
    const char *id = eai_jstr(ev, "id");
    json_t *jseq = json_object_get(ev, "seq");
    int64_t seq = json_is_integer(jseq) ? (int64_t)json_integer_value(jseq) : -1;
    const char *prev = eai_jstr(ev, "prev_hash");
    const char *hash = eai_jstr(ev, "hash");
    json_t *mismatch = json_object_get(ev, "storage_mismatch");

    if (!json_is_object(ev))
        return fail(res, c->tenant, c->next_seq, NULL, "stored event is not a JSON object");
    if (mismatch) {
        char *m = json_dumps(mismatch, JSON_COMPACT | JSON_ENCODE_ANY);
        fail(res, c->tenant, seq, id,
             "stored columns %s disagree with the event document (modified in the database)",
             m ? m : "?");
        free(m);
        return 1;
    }
    if (!eai_jstr(ev, "tenant_id") || strcmp(eai_jstr(ev, "tenant_id"), c->tenant) != 0)
        return fail(res, c->tenant, seq, id, "event names tenant %s, not its chain's",
                    eai_jstr(ev, "tenant_id") ? eai_jstr(ev, "tenant_id") : "(none)");
    if (seq != c->next_seq) {
        if (seq > c->next_seq)
            return fail(res, c->tenant, seq, id,
                        "seq %lld where %lld was expected: event %lld is missing (deleted) or the "
                        "events were reordered", (long long)seq, (long long)c->next_seq,
                        (long long)c->next_seq);
        return fail(res, c->tenant, seq, id,
                    "seq %lld where %lld was expected: events reordered or seq rewritten",
                    (long long)seq, (long long)c->next_seq);
    }
    if (!prev || strcmp(prev, c->last_hash) != 0)
        return fail(res, c->tenant, seq, id,
                    "prev_hash %.16s... does not link to the hash of seq %lld (%.16s...): the chain "
                    "was cut or rewritten before this event", prev ? prev : "(none)",
                    (long long)(seq - 1), c->last_hash);
    if (!hash || !eai_audit_check(ev))
        return fail(res, c->tenant, seq, id,
                    "hash does not match the event's content: the event was modified");
    snprintf(c->last_hash, sizeof(c->last_hash), "%s", hash);
    c->next_seq = seq + 1;
    res->events++;
    return 0;
}

static int check_event(struct eai_chain *c, const json_t *ev, struct eai_audit_verify_result *res);

/* The anchor check at the end of a chain (nothing recorded: passes).  The
 * server may append (and move the anchor) while we walk: when the anchor
 * is beyond what we saw, read on from there before calling it a deletion. */
static int check_anchor(const struct eai_storage_ops *ops, void *store, struct eai_chain *c,
                        struct eai_audit_verify_result *res, struct eai_error **err)
{
    char key[128];
    snprintf(key, sizeof(key), "%s%s", EAI_AUDIT_ANCHOR_PREFIX, c->tenant);
    for (int round = 0; round < 1000; round++) {
        char *val = NULL;
        if (ops->kv_get(store, key, &val, err) < 0)
            return -1;
        if (!val)
            return 0;
        long long aseq = 0;
        char ahash[65] = "";
        int n = sscanf(val, "%lld:%64[0-9a-f]", &aseq, ahash);
        free(val);
        if (n != 2)
            return fail(res, c->tenant, c->next_seq - 1, NULL, "the stored chain anchor is malformed");
        int64_t last = c->next_seq - 1;
        if (aseq <= last)
            return 0;
        json_t *more = NULL;
        if (ops->audit_list(store, c->tenant, last, EAI_VERIFY_PAGE, &more, err) < 0)
            return -1;
        size_t i, got = json_array_size(more);
        json_t *ev;
        json_array_foreach(more, i, ev) {
            if (check_event(c, ev, res) != 0) {
                json_decref(more);
                return 1;
            }
            if ((long long)(c->next_seq - 1) == aseq &&
                strcmp(c->last_hash, ahash) != 0) {
                json_decref(more);
                return fail(res, c->tenant, aseq, NULL,
                            "hash differs from the one recorded for seq %lld: the chain was rewritten", aseq);
            }
        }
        json_decref(more);
        if (got == 0)
            return fail(res, c->tenant, last + 1, NULL,
                        "the chain ends at seq %lld but seq %lld was recorded earlier: events at the "
                        "end of the chain were deleted", (long long)last, aseq);
    }
    return 0;
}

/* Events with seq == aseq must carry the anchored hash: checked while walking. */
static int anchor_hash_check(const struct eai_storage_ops *ops, void *store, const char *tenant,
                             const json_t *ev, struct eai_audit_verify_result *res,
                             json_t *anchors)
{
    const char *a = eai_jstr(anchors, tenant);
    if (!a)
        return 0;
    long long aseq = 0;
    char ahash[65] = "";
    if (sscanf(a, "%lld:%64[0-9a-f]", &aseq, ahash) != 2)
        return 0;
    json_int_t seq = json_integer_value(json_object_get(ev, "seq"));
    if (seq == aseq && strcmp(ahash, eai_jstr(ev, "hash") ? eai_jstr(ev, "hash") : "") != 0)
        return fail(res, tenant, seq, eai_jstr(ev, "id"),
                    "hash differs from the one recorded for seq %lld: the chain was rewritten", aseq);
    return 0;
}

/* Load the anchor of tenant into the anchors cache (tenant -> "seq:hash"). */
static int load_anchor(const struct eai_storage_ops *ops, void *store, const char *tenant,
                       json_t *anchors, struct eai_error **err)
{
    if (json_object_get(anchors, tenant))
        return 0;
    char key[128], *val = NULL;
    snprintf(key, sizeof(key), "%s%s", EAI_AUDIT_ANCHOR_PREFIX, tenant);
    if (ops->kv_get(store, key, &val, err) < 0)
        return -1;
    json_object_set_new(anchors, tenant, val ? json_string(val) : json_string(""));
    free(val);
    return 0;
}

static int verify_events(const struct eai_storage_ops *ops, void *store, const json_t *events,
                         struct eai_chain *c, int *started, json_t *anchors,
                         struct eai_audit_verify_result *res, struct eai_error **err)
{
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        const char *t = eai_jstr(ev, "tenant_id");
        if (!t)
            return fail(res, c->tenant, c->next_seq, eai_jstr(ev, "id"), "event without tenant_id");
        if (!*started || strcmp(t, c->tenant) != 0) {
            if (*started) {
                int r = check_anchor(ops, store, c, res, err);
                if (r != 0)
                    return r;
            }
            chain_reset(c, t);
            res->chains++;
            *started = 1;
            if (load_anchor(ops, store, t, anchors, err) < 0)
                return -1;
        }
        if (check_event(c, ev, res) != 0)
            return 1;
        if (anchor_hash_check(ops, store, t, ev, res, anchors) != 0)
            return 1;
    }
    return 0;
}

static int verify_tenant(const struct eai_storage_ops *ops, void *store, const char *tenant,
                         json_t *anchors, struct eai_audit_verify_result *res, struct eai_error **err)
{
    struct eai_chain c;
    int started = 0;
    int64_t after = 0;
    chain_reset(&c, tenant);
    for (;;) {
        json_t *page = NULL;
        if (ops->audit_list(store, tenant, after, EAI_VERIFY_PAGE, &page, err) < 0)
            return -1;
        size_t n = json_array_size(page);
        int r = verify_events(ops, store, page, &c, &started, anchors, res, err);
        json_decref(page);
        if (r != 0)
            return r;
        if (n < EAI_VERIFY_PAGE)
            break;
        after = c.next_seq - 1;   /* every event so far is verified: seq == position */
    }
    if (!started) {
        res->chains++;          /* an empty chain; an anchor means it was emptied */
        chain_reset(&c, tenant);
    }
    return check_anchor(ops, store, &c, res, err);
}

int eai_audit_verify(const struct eai_storage_ops *ops, void *store, const char *tenant,
                     struct eai_audit_verify_result *res, struct eai_error **err)
{
    memset(res, 0, sizeof(*res));
    json_t *anchors = json_object();
    if (!anchors) {
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    }
    int r = 0;
    if (tenant) {
        r = verify_tenant(ops, store, tenant, anchors, res, err);
    } else if (has_heads_op(ops)) {
        json_t *heads = NULL;
        if (ops->audit_heads(store, &heads, err) < 0) {
            r = -1;
        } else {
            size_t i;
            json_t *h;
            json_array_foreach(heads, i, h) {
                const char *t = eai_jstr(h, "tenant_id");
                if (t && (r = verify_tenant(ops, store, t, anchors, res, err)) != 0)
                    break;
            }
            json_decref(heads);
        }
    } else {
        /* every event of every tenant in one list: ordered by tenant, seq */
        json_t *all = NULL;
        if (ops->audit_list(store, NULL, 0, INT_MAX, &all, err) < 0) {
            r = -1;
        } else {
            struct eai_chain c;
            int started = 0;
            memset(&c, 0, sizeof(c));
            r = verify_events(ops, store, all, &c, &started, anchors, res, err);
            if (r == 0 && started)
                r = check_anchor(ops, store, &c, res, err);
            json_decref(all);
        }
    }
    json_decref(anchors);
    return r;
}

int eai_audit_verify_cli(const struct eai_storage_ops *ops, void *store, const char *tenant)
{
    struct eai_audit_verify_result res;
    struct eai_error *err = NULL;
    int r = eai_audit_verify(ops, store, tenant, &res, &err);
    if (r < 0) {
        fprintf(stderr, "audit verify: storage error: %s\n", err && err->message ? err->message : "unknown");
        eai_error_free(err);
        return 2;
    }
    if (r == 1) {
        fprintf(stderr, "audit chain broken: tenant %s, seq %lld, event %s: %s\n", res.tenant,
                (long long)res.seq, res.id, res.what);
        printf("broken: tenant %s seq %lld id %s\n", res.tenant, (long long)res.seq, res.id);
        return 1;
    }
    printf("ok: %lld events in %d chains\n", (long long)res.events, res.chains);
    return 0;
}

/* ------------------------------------------------------------ heads and anchors */

int eai_audit_heads(const struct eai_storage_ops *ops, void *store, json_t **out,
                    struct eai_error **err)
{
    if (has_heads_op(ops))
        return ops->audit_heads(store, out, err);
    json_t *all = NULL;
    if (ops->audit_list(store, NULL, 0, INT_MAX, &all, err) < 0)
        return -1;
    json_t *heads = json_array();
    if (!heads) {
        json_decref(all);
        return eai_error_set(err, EAI_E_INTERNAL, "out of memory");
    }
    size_t i, n = json_array_size(all);
    for (i = 0; i < n; i++) {
        json_t *ev = json_array_get(all, i);
        json_t *nx = i + 1 < n ? json_array_get(all, i + 1) : NULL;
        const char *t = eai_jstr(ev, "tenant_id");
        if (!t || (nx && eai_jstr(nx, "tenant_id") && strcmp(eai_jstr(nx, "tenant_id"), t) == 0))
            continue;
        json_array_append_new(heads, json_pack("{s:s, s:O, s:s}", "tenant_id", t, "seq",
                                               json_object_get(ev, "seq"), "hash",
                                               eai_jstr(ev, "hash") ? eai_jstr(ev, "hash") : ""));
    }
    json_decref(all);
    *out = heads;
    return 0;
}

int eai_audit_anchor_update(const struct eai_storage_ops *ops, void *store, const json_t *heads,
                            struct eai_error **err)
{
    size_t i;
    json_t *h;
    int mismatches = 0;
    json_array_foreach(heads, i, h) {
        const char *t = eai_jstr(h, "tenant_id"), *hash = eai_jstr(h, "hash");
        json_int_t seq = json_integer_value(json_object_get(h, "seq"));
        if (!t || !hash || seq <= 0)
            continue;
        char key[128], val[96], *old = NULL;
        snprintf(key, sizeof(key), "%s%s", EAI_AUDIT_ANCHOR_PREFIX, t);
        if (ops->kv_get(store, key, &old, err) < 0)
            return -1;
        long long oseq = 0;
        char ohash[65] = "";
        if (old && sscanf(old, "%lld:%64[0-9a-f]", &oseq, ohash) != 2)
            oseq = 0;
        free(old);
        if (seq <= oseq)
            continue;  /* never move an anchor backwards */
        if (oseq > 0) {
            /* move forward only over the event anchored before: a chain cut
             * and regrown past the anchor keeps the old anchor (verify fails) */
            json_t *ev = NULL;
            if (ops->audit_list(store, t, oseq - 1, 1, &ev, err) < 0)
                return -1;
            const char *eh = eai_jstr(json_array_get(ev, 0), "hash");
            int same = eh && strcmp(eh, ohash) == 0;
            json_decref(ev);
            if (!same) {
                mismatches++;
                continue;
            }
        }
        snprintf(val, sizeof(val), "%lld:%s", (long long)seq, hash);
        if (ops->kv_set(store, key, val, err) < 0)
            return -1;
    }
    return mismatches;
}
