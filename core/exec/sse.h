/*
 * The frames of GET /v1/sandbox/executions/{id}/events (docs/executions.md
 * "Event stream"): `id: N`, `event: status|stdout|stderr` and a JSON
 * `data:` line; `: ping` comments in between.
 *
 * Event ids are one sequence per execution, the same on every connection
 * and after the end: 0 the status queued, 1 the status running, 2..N+1 the
 * N output events in the order the program wrote them (stdout and stderr
 * interleaved), N+2 the terminal status.  The order of the output events is
 * kept with the terminal record ("output_events": one integer an event, n
 * bytes of stdout as n, of stderr as -n), so a replay after the end gives
 * the same events with the same ids.
 */
#ifndef EAI_CORE_SSE_H
#define EAI_CORE_SSE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <eai/isolation.h>

#include "http/request.h"

#define EAI_SSE_ID_QUEUED 0
#define EAI_SSE_ID_RUNNING 1
#define EAI_SSE_ID_FIRST_OUTPUT 2
#define EAI_SSE_PING_MS 15000      /* `: ping` comment while the stream is open */
#define EAI_SSE_COALESCE_MS 25     /* output chunks gathered this long into one event */
#define EAI_SSE_MAX_EVENTS 16384   /* output events kept in order; the rest comes at the end */
#define EAI_SSE_MAX_EVENT_BYTES 16384 /* bytes of one output event: a slow reader's buffer is
                                       * bounded by limits.sse_buffer_bytes plus one event */

/* One event; id < 0: no id line; data is stolen (NULL: nothing is sent). */
void eai_sse_event(struct eai_req *r, const char *event, int64_t id, json_t *data);
/* An output event: text, or base64 with "encoding" when not UTF-8. */
void eai_sse_chunk(struct eai_req *r, enum eai_iso_stream s, int64_t id, const char *data, size_t len);
/* The heartbeat comment. */
void eai_sse_ping(struct eai_req *r);
/* {status} of rec, with exit_code, signal and error when terminal. */
json_t *eai_sse_status_data(const json_t *rec);
/* Id of the status event of rec (queued 0, running 1, terminal N+2). */
int64_t eai_sse_status_id(const json_t *rec);
/* The client's Last-Event-ID (header, or ?last_event_id=): -1 when absent
 * or not a number (everything is sent). */
int64_t eai_sse_last_id(const struct eai_req *r);
/* The output events of a terminal rec with an id above after, its status
 * (when above after), then the stream ends. */
void eai_sse_replay_end(struct eai_req *r, const json_t *rec, int64_t after);

#endif
