/* Audit events of a request: a new event for this request (tenant, actor,
 * request and trace ids filled), appended on a worker when it is not part
 * of a storage transaction (docs/audit.md). */
#ifndef EAI_CORE_REQ_AUDIT_H
#define EAI_CORE_REQ_AUDIT_H

#include <jansson.h>

#include "app.h"
#include "http/request.h"

json_t *eai_req_audit_event(const struct eai_req *r, const char *action,
                            const char *target, const char *decision, const char *reason);
void eai_req_audit_async(struct eai_app *app, const char *tenant, json_t *event /* stolen */);

#endif
