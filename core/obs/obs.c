/* The service's metric families, described once at start (docs/observability.md).
 * Core's only: a plugin describes its own through its host handle (ABI 1.4,
 * eai_host.metric_describe; the gVisor pool's are in plugins/gvisor/gvisor.c). */
#include "obs/metrics.h"
#include "obs/telemetry.h"

void eai_obs_describe_metrics(void)
{
    static const double duration_bounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
    static const double http_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60};

    eai_metrics_describe("eai_auth_refused_total", EAI_METRIC_COUNTER,
                         "Requests refused for a missing or bad API key (audited per source and window).");
    eai_metrics_describe("eai_audit_suppressed_total", EAI_METRIC_COUNTER,
                         "Refusals not written to the audit chain past a tenant's rate (reason not_found; docs/audit.md).");
    eai_metrics_describe("eai_sandbox_executions_total", EAI_METRIC_COUNTER,
                         "Executions that reached a terminal status, by profile and status.");
    eai_metrics_describe("eai_sandbox_cpu_seconds_total", EAI_METRIC_COUNTER,
                         "CPU seconds used by finished executions, by profile (the seed's eai_sandbox_cpu_seconds).");
    eai_metrics_describe_histogram("eai_sandbox_duration_seconds",
                                   "Wall-clock duration of finished executions, by profile.",
                                   duration_bounds, (int)(sizeof duration_bounds / sizeof duration_bounds[0]));
    eai_metrics_describe("eai_sandbox_memory_megabyte_seconds_total", EAI_METRIC_COUNTER,
                         "Memory MB-seconds used by finished executions, by profile.");
    eai_metrics_describe("eai_sandbox_queued", EAI_METRIC_GAUGE, "Executions waiting in the queue.");
    eai_metrics_describe("eai_sandbox_running", EAI_METRIC_GAUGE, "Executions running on this node.");
    eai_metrics_describe("eai_node_budget_memory_bytes", EAI_METRIC_GAUGE,
                         "The node budget's memory: kind=total, and kind=reserved by executions and sessions.");
    eai_metrics_describe("eai_node_budget_cpu_millicores", EAI_METRIC_GAUGE,
                         "The node budget's CPU in millicores: kind=total, and kind=reserved by executions and sessions.");
    eai_metrics_describe("eai_node_budget_tenants", EAI_METRIC_GAUGE,
                         "Tenants holding part of the node budget.");
    eai_metrics_describe("eai_sandbox_budget_waiting", EAI_METRIC_GAUGE,
                         "Claimed executions waiting on this node for the node budget or their tenant's share.");
    eai_metrics_describe("eai_sessions_live", EAI_METRIC_GAUGE, "Sessions starting, running or ending on this node.");
    eai_metrics_describe("eai_volumes", EAI_METRIC_GAUGE, "Tenant volumes on this node (volumes.md).");
    eai_metrics_describe("eai_volume_bytes", EAI_METRIC_GAUGE, "Provisioned bytes of the volumes on this node.");
    eai_metrics_describe("eai_volume_mounts", EAI_METRIC_GAUGE,
                         "Volume mounts held by sandboxes on this node (read-write and read-only).");
    eai_metrics_describe("eai_sessions_created_total", EAI_METRIC_COUNTER, "Sessions created on this node.");
    eai_metrics_describe("eai_sessions_ended_total", EAI_METRIC_COUNTER, "Sessions ended on this node.");
    eai_metrics_describe("eai_http_requests_total", EAI_METRIC_COUNTER,
                         "HTTP requests answered, by route and status code.");
    eai_metrics_describe_histogram("eai_http_request_duration_seconds",
                                   "Time from request to reply, by route.",
                                   http_bounds, (int)(sizeof http_bounds / sizeof http_bounds[0]));
    eai_metrics_describe("eai_outbox_backlog", EAI_METRIC_GAUGE,
                         "Usage events in the outbox not yet delivered.");
    eai_metrics_describe("eai_outbox_delivered_total", EAI_METRIC_COUNTER,
                         "Usage events delivered, by target (finops plugin or ledger).");
    eai_metrics_describe("eai_outbox_delivery_failures_total", EAI_METRIC_COUNTER,
                         "Failed usage event delivery attempts.");
    eai_metrics_describe("eai_audit_sink_backlog", EAI_METRIC_GAUGE,
                         "Audit events not yet shipped to the audit sink.");
    eai_metrics_describe("eai_audit_sink_delivered_total", EAI_METRIC_COUNTER,
                         "Audit events shipped to the audit sink.");
    eai_metrics_describe("eai_audit_sink_failures_total", EAI_METRIC_COUNTER,
                         "Failed audit sink delivery attempts.");
    eai_metrics_describe("eai_trace_spans_dropped_total", EAI_METRIC_COUNTER,
                         "Finished spans dropped: export queue full or export failed.");

    static const double wait_bounds[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
    eai_metrics_describe_histogram("eai_sandbox_queue_wait_seconds",
                                   "Time from the POST to the claim that starts the run, by profile.",
                                   wait_bounds, (int)(sizeof wait_bounds / sizeof wait_bounds[0]));
    eai_metrics_describe("eai_sandbox_refusals_total", EAI_METRIC_COUNTER,
                         "POST /v1/sandbox/executions refused, by error code.");
    eai_metrics_describe("eai_backend_ready", EAI_METRIC_GAUGE,
                         "1 when the isolation backend is ready to run executions, else 0.");
    eai_metrics_describe("eai_build_info", EAI_METRIC_GAUGE, "Always 1; the labels say which eaid this is.");
    eai_metrics_describe("eai_backend_info", EAI_METRIC_GAUGE,
                         "1 for the runtime version a ready isolation backend reports (gVisor: with its platform).");
    eai_metrics_describe("eai_callback_backlog", EAI_METRIC_GAUGE,
                         "Completion callbacks in the outbox not yet delivered (in the batch last read).");
    eai_metrics_describe("eai_callback_attempts_total", EAI_METRIC_COUNTER,
                         "Completion callback POST attempts, by result (delivered or failed).");
    eai_metrics_describe("process_cpu_seconds_total", EAI_METRIC_COUNTER, "User and system CPU time spent in seconds.");
    eai_metrics_describe("process_open_fds", EAI_METRIC_GAUGE, "Number of open file descriptors.");
    eai_metrics_describe("process_max_fds", EAI_METRIC_GAUGE, "Maximum number of open file descriptors.");
    eai_metrics_describe("process_virtual_memory_bytes", EAI_METRIC_GAUGE, "Virtual memory size in bytes.");
    eai_metrics_describe("process_resident_memory_bytes", EAI_METRIC_GAUGE, "Resident memory size in bytes.");
    eai_metrics_describe("process_start_time_seconds", EAI_METRIC_GAUGE,
                         "Start time of the process since unix epoch in seconds.");
}
