/* Every route of API.md; the first match wins (method and pattern). */
#include "exec/exec.h"
#include "session/session.h"
#include "http/routes.h"
#include "mcp/mcp.h"
#include "vol/volume.h"

const struct eai_route eai_routes[] = {
    {"GET", "/healthz", EAI_AUTH_NONE, eai_misc_healthz, "healthz"},
    {"GET", "/readyz", EAI_AUTH_NONE, eai_misc_readyz, "readyz"},
    {"GET", "/metrics", EAI_AUTH_NONE, eai_misc_metrics, "metrics"},

    {"POST", "/v1/sandbox/executions", EAI_AUTH_TENANT, eai_exec_route_create, "executions.create"},
    {"GET", "/v1/sandbox/executions", EAI_AUTH_TENANT, eai_exec_route_list, "executions.list"},
    {"GET", "/v1/sandbox/executions/{id}", EAI_AUTH_TENANT, eai_exec_route_get, "executions.get"},
    {"POST", "/v1/sandbox/executions/{id}/cancel", EAI_AUTH_TENANT, eai_exec_route_cancel, "executions.cancel"},
    {"POST", "/v1/sandbox/executions/{id}/stdin", EAI_AUTH_TENANT, eai_exec_route_stdin, "executions.stdin"},
    {"GET", "/v1/sandbox/executions/{id}/events", EAI_AUTH_TENANT, eai_exec_route_events, "executions.events"},
    {"GET", "/v1/sandbox/executions/{id}/network", EAI_AUTH_TENANT, eai_exec_route_network, "executions.network"},
    {"GET", "/v1/sandbox/executions/{id}/files/{*path}", EAI_AUTH_TENANT, eai_exec_route_file, "executions.file"},
    {"POST", "/v1/mcp", EAI_AUTH_TENANT, eai_mcp_route_post, "mcp"},
    {"DELETE", "/v1/mcp", EAI_AUTH_TENANT, eai_mcp_route_delete, "mcp.delete"},
    {"POST", "/v1/sandbox/sessions", EAI_AUTH_TENANT, eai_session_route_create, "sessions.create"},
    {"GET", "/v1/sandbox/sessions", EAI_AUTH_TENANT, eai_session_route_list, "sessions.list"},
    {"GET", "/v1/sandbox/sessions/{id}", EAI_AUTH_TENANT, eai_session_route_get, "sessions.get"},
    {"DELETE", "/v1/sandbox/sessions/{id}", EAI_AUTH_TENANT, eai_session_route_delete, "sessions.delete"},
    {"POST", "/v1/sandbox/sessions/{id}/executions", EAI_AUTH_TENANT, eai_session_route_exec, "sessions.execute"},
    {"POST", "/v1/sandbox/sessions/{id}/pause", EAI_AUTH_TENANT, eai_session_route_pause, "sessions.pause"},
    {"POST", "/v1/sandbox/sessions/{id}/resume", EAI_AUTH_TENANT, eai_session_route_resume, "sessions.resume"},
    {"GET", "/v1/sandbox/sessions/{id}/files", EAI_AUTH_TENANT, eai_session_route_file_list, "sessions.files.list"},
    {"PUT", "/v1/sandbox/sessions/{id}/files/{*path}", EAI_AUTH_TENANT, eai_session_route_file_put, "sessions.files.put"},
    {"GET", "/v1/sandbox/sessions/{id}/files/{*path}", EAI_AUTH_TENANT, eai_session_route_file_get, "sessions.files.get"},
    {"DELETE", "/v1/sandbox/sessions/{id}/files/{*path}", EAI_AUTH_TENANT, eai_session_route_file_delete, "sessions.files.delete"},
    {"GET", "/v1/sandbox/sessions/{id}/network", EAI_AUTH_TENANT, eai_session_route_network_get, "sessions.network.get"},
    {"PUT", "/v1/sandbox/sessions/{id}/network", EAI_AUTH_TENANT, eai_session_route_network_put, "sessions.network.put"},
    {"POST", "/v1/sandbox/sessions/{id}/snapshots", EAI_AUTH_TENANT, eai_session_route_snapshot, "sessions.snapshot"},
    {"GET", "/v1/sandbox/snapshots", EAI_AUTH_TENANT, eai_snapshot_route_list, "snapshots.list"},
    {"GET", "/v1/sandbox/snapshots/{id}", EAI_AUTH_TENANT, eai_snapshot_route_get, "snapshots.get"},
    {"DELETE", "/v1/sandbox/snapshots/{id}", EAI_AUTH_TENANT, eai_snapshot_route_delete, "snapshots.delete"},
    {"POST", "/v1/volumes", EAI_AUTH_TENANT, eai_vol_route_create, "volumes.create"},
    {"GET", "/v1/volumes", EAI_AUTH_TENANT, eai_vol_route_list, "volumes.list"},
    {"GET", "/v1/volumes/{id}", EAI_AUTH_TENANT, eai_vol_route_get, "volumes.get"},
    {"DELETE", "/v1/volumes/{id}", EAI_AUTH_TENANT, eai_vol_route_delete, "volumes.delete"},
    {"GET", "/v1/volumes/{id}/files", EAI_AUTH_TENANT, eai_vol_route_file_list, "volumes.files.list"},
    {"PUT", "/v1/volumes/{id}/files/{*path}", EAI_AUTH_TENANT, eai_vol_route_file_put, "volumes.files.put"},
    {"GET", "/v1/volumes/{id}/files/{*path}", EAI_AUTH_TENANT, eai_vol_route_file_get, "volumes.files.get"},
    {"DELETE", "/v1/volumes/{id}/files/{*path}", EAI_AUTH_TENANT, eai_vol_route_file_delete, "volumes.files.delete"},
    {"GET", "/v1/sandbox/profiles", EAI_AUTH_TENANT, eai_misc_profiles, "profiles.list"},

    {"POST", "/v1/contracts/{name}/validate", EAI_AUTH_TENANT, eai_misc_contract_validate, "contracts.validate"},
    {"POST", "/v1/manifests/apply", EAI_AUTH_TENANT, eai_misc_manifest_apply, "manifests.apply"},
    {"GET", "/v1/manifests", EAI_AUTH_TENANT, eai_misc_manifest_list, "manifests.list"},
    {"GET", "/v1/manifests/{kind}/{name}", EAI_AUTH_TENANT, eai_misc_manifest_get, "manifests.get"},
    {"DELETE", "/v1/manifests/{kind}/{name}", EAI_AUTH_TENANT, eai_misc_manifest_delete, "manifests.delete"},

    {"GET", "/v1/runs", EAI_AUTH_TENANT, eai_agent_route_run_list, "runs.list"},
    {"GET", "/v1/runs/{run_id}", EAI_AUTH_TENANT, eai_agent_route_run_get, "runs.get"},
    {"GET", "/v1/agents", EAI_AUTH_TENANT, eai_agent_route_agent_list, "agents.list"},
    {"GET", "/v1/agents/{agent_id}", EAI_AUTH_TENANT, eai_agent_route_agent_get, "agents.get"},

    {"GET", "/v1/finops/usage", EAI_AUTH_TENANT, eai_misc_usage_get, "finops.usage.get"},
    {"POST", "/v1/finops/usage", EAI_AUTH_TENANT, eai_misc_usage_post, "finops.usage.post"},
};

const size_t eai_nroutes = sizeof(eai_routes) / sizeof(eai_routes[0]);
