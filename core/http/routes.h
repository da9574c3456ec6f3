/* The route table of eaid (core/http/routes.c) and the handlers of
 * core/http/routes_misc.c, routes_manifests.c and routes_finops.c.  Execution handlers live in core/exec/exec.h. */
#ifndef EAI_CORE_ROUTES_H
#define EAI_CORE_ROUTES_H

#include <stddef.h>
#include "http/request.h"

extern const struct eai_route eai_routes[];
extern const size_t eai_nroutes;

void eai_misc_healthz(struct eai_app *app, struct eai_req *r);
void eai_misc_readyz(struct eai_app *app, struct eai_req *r);
void eai_misc_metrics(struct eai_app *app, struct eai_req *r);
void eai_misc_profiles(struct eai_app *app, struct eai_req *r);
void eai_misc_contract_validate(struct eai_app *app, struct eai_req *r);
void eai_misc_manifest_apply(struct eai_app *app, struct eai_req *r);
void eai_misc_manifest_get(struct eai_app *app, struct eai_req *r);
void eai_misc_manifest_list(struct eai_app *app, struct eai_req *r);   /* GET /v1/manifests?kind=Tool */
/* the agent view (routes_agent.c) */
void eai_agent_route_run_get(struct eai_app *app, struct eai_req *r);    /* GET /v1/runs/{run_id} */
void eai_agent_route_run_list(struct eai_app *app, struct eai_req *r);   /* GET /v1/runs */
void eai_agent_route_agent_list(struct eai_app *app, struct eai_req *r); /* GET /v1/agents */
void eai_agent_route_agent_get(struct eai_app *app, struct eai_req *r);  /* GET /v1/agents/{agent_id} */
void eai_misc_manifest_delete(struct eai_app *app, struct eai_req *r);
void eai_misc_usage_get(struct eai_app *app, struct eai_req *r);
void eai_misc_usage_post(struct eai_app *app, struct eai_req *r);

struct eai_schema;
/* The contract schema called name ("tool-manifest", "sandbox-execution"). */
const struct eai_schema *eai_contract_schema(struct eai_app *app, const char *name);
/* Schema errors of doc plus the server-side checks a schema cannot express
 * (is_tool: the sandbox profile exists); *code the envelope's code. */
json_t *eai_manifest_errors(struct eai_app *app, const struct eai_schema *s, const json_t *doc,
                            int is_tool, enum eai_code *code);

/* Manifest kind as stored and used in /v1/manifests/{kind}/{name}: the
 * document's "kind" lowercased with '-' between words ("Tool" -> "tool",
 * "ToolManifest" -> "tool-manifest"); NULL when malformed. */
char *eai_manifest_kind_slug(const char *kind);

#endif
