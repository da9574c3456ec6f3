/*
 * TLS on the listener (server.tls): an OpenSSL server context made once at
 * start from the configured certificate chain, key and optional client CA
 * (then a client certificate signed by it is required), TLS 1.2 and newer
 * only; each accepted connection gets a bufferevent_openssl over it
 * (http/conn.c).  docs/configuration.md "TLS on the listener".
 */
#ifndef EAI_CORE_HTTP_TLS_H
#define EAI_CORE_HTTP_TLS_H

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "config/config.h"
#include "base/errors.h"

struct eai_tls;

/* NULL and 0 when TLS is not configured; -1 and *err when the files do not
 * load (start-up refuses then).  Reads files: call before the loop runs. */
int eai_tls_server_new(const struct eai_config *cfg, struct eai_tls **out, struct eai_error **err);
void eai_tls_free(struct eai_tls *t);
/* A server-side TLS bufferevent for a connection evhttp will set the fd of. */
struct bufferevent *eai_tls_bev_new(struct eai_tls *t, struct event_base *base);

#endif
