/* The one asynchronous HTTP client: libcurl's multi-socket API driven by
 * the libevent loop (see curl's docs/examples/hiperfifo.c).  Shared by the
 * audit sink, FinOps, OTLP and the Kubernetes backend through
 * host->http_request.  No policy, no globals beyond the client, no logging. */
#ifndef EAI_INTEGRATIONS_HTTP_CLIENT_H
#define EAI_INTEGRATIONS_HTTP_CLIENT_H

#include <eai/plugin.h>

struct event_base;
struct eai_http_client;

struct eai_http_client *eai_http_client_new(struct event_base *base);
/* Queue a request; done runs exactly once on the loop thread (also on
 * timeout and on eai_http_client_free, with status 0 and an error). */
int eai_http_client_request(struct eai_http_client *c, const struct eai_http_request *req,
                            eai_http_done_fn done, void *arg);
/* The same, connecting only to the addresses of `resolve` ("HOST:PORT:ADDR[,ADDR...]",
 * curl's CURLOPT_RESOLVE; IPv6 in brackets), which the caller resolved and
 * checked: no second DNS answer in between (completion callbacks). */
int eai_http_client_request_pinned(struct eai_http_client *c, const struct eai_http_request *req,
                                   const char *resolve, eai_http_done_fn done, void *arg);
/* The same through an HTTP proxy (a URL "http://host:port"; NULL: none):
 * resolve then pins the proxy's host, whose addresses the caller checked.
 * Without a proxy argument no proxy is used, whatever eaid's environment
 * says (http_proxy, https_proxy, ALL_PROXY are ignored by every request). */
int eai_http_client_request_via(struct eai_http_client *c, const struct eai_http_request *req,
                                const char *resolve, const char *proxy, eai_http_done_fn done, void *arg);
/* In-flight transfers. */
int eai_http_client_inflight(const struct eai_http_client *c);
void eai_http_client_free(struct eai_http_client *c);

#endif
