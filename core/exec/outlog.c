/* The output events of a local run (outlog.h). */
#include <stdlib.h>
#include <string.h>

#include "exec/outlog.h"
#include "exec/sse.h"

void eai_outlog_reset(struct eai_outlog *g)
{
    g->n = g->nsent = 0;
    g->logged[0] = g->logged[1] = 0;
    g->unlogged[0] = g->unlogged[1] = 0;
}

void eai_outlog_free(struct eai_outlog *g)
{
    free(g->evs);
    memset(g, 0, sizeof *g);
}

void eai_outlog_add(struct eai_outlog *g, int k, size_t kept)
{
    while (kept && !g->unlogged[k]) {
        struct eai_outlog_ev *last = g->n > g->nsent ? &g->evs[g->n - 1] : NULL;
        if (last && last->stream == k && last->len < EAI_SSE_MAX_EVENT_BYTES) {
            /* still gathering: the same event grows, up to its size bound */
            size_t take = EAI_SSE_MAX_EVENT_BYTES - last->len;
            if (take > kept)
                take = kept;
            last->len += take;
            g->logged[k] += take;
            kept -= take;
            continue;
        }
        if (g->n >= EAI_SSE_MAX_EVENTS) {
            g->unlogged[k] = 1;
            return;
        }
        if (g->n == g->cap) {
            size_t nc = g->cap ? g->cap * 2 : 16;
            struct eai_outlog_ev *ne = realloc(g->evs, nc * sizeof *ne);
            if (!ne) {
                g->unlogged[k] = 1;
                return;
            }
            g->evs = ne;
            g->cap = nc;
        }
        size_t take = kept < EAI_SSE_MAX_EVENT_BYTES ? kept : EAI_SSE_MAX_EVENT_BYTES;
        g->evs[g->n++] = (struct eai_outlog_ev){.off = g->logged[k], .len = take, .stream = k};
        g->logged[k] += take;
        kept -= take;
    }
}

json_t *eai_outlog_json(const struct eai_outlog *g, size_t out_len, size_t err_len)
{
    json_t *a = json_array();
    if (!a)
        return NULL;
    for (size_t i = 0; i < g->n; i++)
        json_array_append_new(a, json_integer(g->evs[i].stream ? -(json_int_t)g->evs[i].len
                                                               : (json_int_t)g->evs[i].len));
    if (out_len > g->logged[0])
        json_array_append_new(a, json_integer((json_int_t)(out_len - g->logged[0])));
    if (err_len > g->logged[1])
        json_array_append_new(a, json_integer(-(json_int_t)(err_len - g->logged[1])));
    return a;
}
