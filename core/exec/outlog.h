/*
 * The output events of a local run (sse.h "Event ids"): which stream and
 * how many bytes each event carries, in the order the program wrote them.
 * The last events gather bytes until they are sent (eai_outlog_sent), a
 * new event starts when the stream changes.  Past EAI_SSE_MAX_EVENTS a
 * stream's later bytes are left to the end (eai_outlog_json adds them).
 * Pure bookkeeping: offsets into the run's capped output buffers.
 */
#ifndef EAI_CORE_OUTLOG_H
#define EAI_CORE_OUTLOG_H

#include <stddef.h>
#include <jansson.h>

struct eai_outlog_ev {
    size_t off, len;                /* bytes [off, off+len) of the stream */
    int stream;                     /* 0 stdout, 1 stderr */
};

struct eai_outlog {
    struct eai_outlog_ev *evs;
    size_t n, cap;
    size_t nsent;                   /* events from nsent on are still gathering */
    size_t logged[2];               /* bytes of each stream in evs */
    int unlogged[2];                /* a stream's later bytes come at the end */
};

void eai_outlog_reset(struct eai_outlog *g);
void eai_outlog_free(struct eai_outlog *g);
/* kept more bytes of stream k (0 stdout, 1 stderr) were kept. */
void eai_outlog_add(struct eai_outlog *g, int k, size_t kept);
/* Every event so far is sent: the next bytes start a new one. */
static inline void eai_outlog_sent(struct eai_outlog *g) { g->nsent = g->n; }
/* "output_events" of the terminal record: n for n bytes of stdout, -n for
 * stderr, then the bytes left out of the log (stdout, stderr), given the
 * kept lengths of both streams.  New array or NULL. */
json_t *eai_outlog_json(const struct eai_outlog *g, size_t out_len, size_t err_len);

#endif
