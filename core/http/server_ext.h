/* Server functions beyond core/http/server.h used by core/app.c and the misc
 * routes (additive; owned by the platform work). */
#ifndef EAI_CORE_SERVER_EXT_H
#define EAI_CORE_SERVER_EXT_H

#include <stdint.h>

struct eai_app;

/* The port actually bound (listen "HOST:0" picks one), or -1. */
int eai_server_port(const struct eai_app *app);
/* Stop accepting connections; requests in flight go on. */
void eai_server_stop_accepting(struct eai_app *app);
/* Requests received and not answered yet, plus answers not yet flushed. */
int64_t eai_server_inflight(const struct eai_app *app);

#endif
