/* Cache of finished executions' GET documents (exec/doc_cache.c).
 *
 * A terminal execution record is never written again (docs/executions.md),
 * so its GET body (eai_exec_view, serialised) is kept once made (once its
 * completion callback, whose attempts the view shows, is delivered or given
 * up: exec_read.c view_final) and served
 * on the loop thread: no worker hop, no storage read, no JSON.  Keyed by
 * tenant and id (a tenant never sees another's entry); bounded in bytes,
 * oldest out first; big documents (> EAI_DOC_CACHE_MAX_DOC) are not kept.
 * Loop thread only. */
#ifndef EAI_EXEC_DOC_CACHE_H
#define EAI_EXEC_DOC_CACHE_H

#include <stddef.h>

#define EAI_DOC_CACHE_MAX_DOC (64 * 1024)

struct eai_doc_cache;

/* budget: bytes of documents kept (0: off). */
struct eai_doc_cache *eai_doc_cache_new(size_t budget);
void eai_doc_cache_free(struct eai_doc_cache *c);
/* Forget every document (executions were deleted: retention). */
void eai_doc_cache_clear(struct eai_doc_cache *c);

/* The document, or NULL; *len its length.  Valid until the next put. */
const char *eai_doc_cache_get(struct eai_doc_cache *c, const char *tenant, const char *id, size_t *len);

/* The same, the document held (past a put, a clear or the cache's free)
 * until eai_doc_cache_release(.., *hold): an answer can reference it
 * instead of copying it (evbuffer_add_reference's cleanup signature). */
const char *eai_doc_cache_hold(struct eai_doc_cache *c, const char *tenant, const char *id, size_t *len,
                               void **hold);
void eai_doc_cache_release(const void *data, size_t len, void *hold);

/* Keep a copy of doc (len bytes) for tenant/id; replaces nothing (an entry
 * already there stays). */
void eai_doc_cache_put(struct eai_doc_cache *c, const char *tenant, const char *id, const char *doc, size_t len);

#endif
