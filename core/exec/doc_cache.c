/* Cache of finished executions' GET documents (exec/doc_cache.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/doc_cache.h"

#define BUCKETS 1024

struct doc {
    struct doc *hnext;          /* bucket chain */
    struct doc *older, *newer;  /* age list */
    unsigned hash;
    size_t len;
    int refs;                   /* 1 while cached, plus one per reply still sending it */
    char *key;                  /* "tenant\nid" */
    char body[];                /* len bytes */
};

struct eai_doc_cache {
    size_t budget, used;
    struct doc *bucket[BUCKETS];
    struct doc *oldest, *newest;
};

/* Eight bytes at a time (every cached GET hashes its tenant and id, 76
 * bytes: a byte loop was 400 instructions); the tail zero-padded. */
static uint64_t mix_bytes(uint64_t h, const char *p, size_t n)
{
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w ^ ((uint64_t)n << 56)) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

static unsigned key_hash(const char *tenant, const char *id)
{
    uint64_t h = mix_bytes(0x2545F4914F6CDD1Dull, tenant, strlen(tenant));
    h = mix_bytes(h, id, strlen(id));
    return (unsigned)h;
}

static int key_is(const struct doc *d, const char *tenant, const char *id)
{
    size_t tl = strlen(tenant);
    return strncmp(d->key, tenant, tl) == 0 && d->key[tl] == '\n' && strcmp(d->key + tl + 1, id) == 0;
}

struct eai_doc_cache *eai_doc_cache_new(size_t budget)
{
    struct eai_doc_cache *c = calloc(1, sizeof *c);
    if (c)
        c->budget = budget;
    return c;
}

static void doc_drop(struct eai_doc_cache *c, struct doc *d)
{
    struct doc **pp = &c->bucket[d->hash % BUCKETS];
    while (*pp && *pp != d)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = d->hnext;
    if (d->older)
        d->older->newer = d->newer;
    else
        c->oldest = d->newer;
    if (d->newer)
        d->newer->older = d->older;
    else
        c->newest = d->older;
    c->used -= d->len + strlen(d->key) + sizeof *d;
    free(d->key);
    d->key = NULL;
    if (--d->refs == 0)
        free(d);
}

void eai_doc_cache_release(const void *data, size_t len, void *hold)
{
    (void)data;
    (void)len;
    struct doc *d = hold;
    if (d && --d->refs == 0)
        free(d);
}

void eai_doc_cache_clear(struct eai_doc_cache *c)
{
    while (c && c->oldest)
        doc_drop(c, c->oldest);
}

void eai_doc_cache_free(struct eai_doc_cache *c)
{
    eai_doc_cache_clear(c);
    free(c);
}

static struct doc *doc_find(struct eai_doc_cache *c, const char *tenant, const char *id)
{
    if (!c || !c->budget || !tenant || !id)
        return NULL;
    unsigned h = key_hash(tenant, id);
    for (struct doc *d = c->bucket[h % BUCKETS]; d; d = d->hnext)
        if (d->hash == h && key_is(d, tenant, id))
            return d;
    return NULL;
}

const char *eai_doc_cache_get(struct eai_doc_cache *c, const char *tenant, const char *id, size_t *len)
{
    struct doc *d = doc_find(c, tenant, id);
    if (!d)
        return NULL;
    *len = d->len;
    return d->body;
}

const char *eai_doc_cache_hold(struct eai_doc_cache *c, const char *tenant, const char *id, size_t *len,
                               void **hold)
{
    struct doc *d = doc_find(c, tenant, id);
    if (!d)
        return NULL;
    d->refs++;
    *hold = d;
    *len = d->len;
    return d->body;
}

void eai_doc_cache_put(struct eai_doc_cache *c, const char *tenant, const char *id, const char *doc, size_t len)
{
    size_t dummy;
    if (!c || !c->budget || !tenant || !id || len > EAI_DOC_CACHE_MAX_DOC ||
        eai_doc_cache_get(c, tenant, id, &dummy))
        return;
    size_t kl = strlen(tenant) + 1 + strlen(id);
    size_t cost = len + kl + sizeof(struct doc);
    if (cost > c->budget)
        return;
    struct doc *d = malloc(sizeof *d + len);
    char *key = malloc(kl + 1);
    if (!d || !key) {
        free(d);
        free(key);
        return;
    }
    while (c->oldest && c->used + cost > c->budget)
        doc_drop(c, c->oldest);
    strcpy(key, tenant);
    strcat(key, "\n");
    strcat(key, id);
    d->key = key;
    d->len = len;
    d->refs = 1;
    memcpy(d->body, doc, len);
    d->hash = key_hash(tenant, id);
    d->hnext = c->bucket[d->hash % BUCKETS];
    c->bucket[d->hash % BUCKETS] = d;
    d->older = c->newest;
    d->newer = NULL;
    if (c->newest)
        c->newest->newer = d;
    else
        c->oldest = d;
    c->newest = d;
    c->used += cost;
}
