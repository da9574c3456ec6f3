/*
 * The frames of GET /v1/sandbox/executions/{id}/events (docs/executions.md
 * "Reading"): `event: status|stdout|stderr` with a JSON `data:` line.
 */
#ifndef EAI_CORE_SSE_H
#define EAI_CORE_SSE_H

#include <stddef.h>
#include <jansson.h>
#include <eai/isolation.h>

#include "http/request.h"

/* One event; data is stolen (NULL: nothing is sent). */
void eai_sse_event(struct eai_req *r, const char *event, json_t *data);
/* An output chunk: text, or base64 with "encoding" when not UTF-8. */
void eai_sse_chunk(struct eai_req *r, enum eai_iso_stream s, const char *data, size_t len);
/* {status} of rec, with exit_code, signal and error when terminal. */
json_t *eai_sse_status_data(const json_t *rec);
/* The stored output of a terminal rec (with_output), its status, then the
 * stream ends. */
void eai_sse_replay_end(struct eai_req *r, const json_t *rec, int with_output);

#endif
