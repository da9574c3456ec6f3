/*
 * The request line and header block checked before evhttp parses them, so
 * every malformed or oversized request gets our JSON envelope (libevent
 * 2.1 answers these itself with an HTML page and has no error hook):
 * 414 for a request line over EAI_HTTP_MAX_REQUEST_LINE, 431 for headers
 * over server.max_header_bytes or more than EAI_HTTP_MAX_HEADERS lines,
 * 405 for a method no route serves, 400 for anything that is not HTTP/1.x.
 * Pure function, loop thread (called by http/conn.c); docs/api.md.
 */
#ifndef EAI_CORE_HTTP_HEAD_H
#define EAI_CORE_HTTP_HEAD_H

#include <stddef.h>
#include <eai/errcodes.h>

#define EAI_HTTP_MAX_REQUEST_LINE 8192
#define EAI_HTTP_MAX_HEADERS      100

/* The bytes of one request's head received so far (acc, len); done: the
 * blank line ending it is at acc[len - 1].  EAI_OK: nothing wrong yet
 * (evhttp goes on); else the code to answer with, and the connection is
 * closed after it. */
enum eai_code eai_http_head_check(const char *acc, size_t len, int done, size_t max_header_bytes);

/* The methods some route serves, for 405's Allow header. */
#define EAI_HTTP_ALLOWED_METHODS "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

#endif
