/*
 * Who may read the operator endpoints (docs/configuration.md "ops"):
 * /metrics (cross-tenant volume) and the details of /readyz (runtime
 * versions, failure reasons).  /healthz is always open.
 *
 *   ops.access: loopback (default)  loopback peers, or any peer with the token
 *               token                only requests with the token
 *               open                 everyone (the behaviour before 16.10)
 *   ops.token_file / EAI_OPS_TOKEN_FILE: the token (one line, private file),
 *               sent as "Authorization: Bearer <token>"
 */
#ifndef EAI_CORE_HTTP_OPS_ACCESS_H
#define EAI_CORE_HTTP_OPS_ACCESS_H

#include "app.h"

struct eai_req;
struct eai_config;
struct eai_error;
struct sockaddr;

enum eai_ops_access { EAI_OPS_LOOPBACK = 0, EAI_OPS_TOKEN, EAI_OPS_OPEN };

/* "loopback", "token", "open" -> the value, or -1. */
int eai_ops_access_parse(const char *s);
/* Start-up: read cfg->ops_token_file (when set) into app->ops_token after
 * checking it is private; refuse ops.access token without one.  0 or -1. */
int eai_ops_token_load(struct eai_app *app, const struct eai_config *cfg, struct eai_error **err);
/* 1 when sa is 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104. */
int eai_sockaddr_loopback(const struct sockaddr *sa);
/* 1 when r may read operator details. */
int eai_ops_allowed(const struct eai_app *app, struct eai_req *r);

#endif
