/*
 * The HTTP server on evhttp: listening, the connection guard (connection
 * limit, body cap with our own 413 envelope), routing to the handlers of
 * http/routes.c with request ids, language and trace context, bearer auth
 * (http/auth.c).  Handlers see only http/request.h.  Loop thread only.
 */
#ifndef EAI_CORE_SERVER_H
#define EAI_CORE_SERVER_H

#include <stdint.h>
#include <eai/plugin.h>

#include "app.h"

/* Start listening on cfg's listen address; 0 or -1 (+ *err). */
int eai_server_start(struct eai_app *app, struct eai_error **err);
void eai_server_stop(struct eai_app *app);
/* The port actually bound (listen "HOST:0" picks one), or -1. */
int eai_server_port(const struct eai_app *app);
/* Stop accepting connections; requests in flight go on. */
void eai_server_stop_accepting(struct eai_app *app);
/* Requests received and not answered yet, plus answers not yet flushed. */
int64_t eai_server_inflight(const struct eai_app *app);

#endif
