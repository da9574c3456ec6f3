package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;

/** {@code client.agent().runs()}: {@code GET /v1/runs/{run_id}} and {@code GET /v1/runs}. */
public final class RunsClient {
    private final Transport t;

    RunsClient(Transport t) {
        this.t = t;
    }

    /**
     * The run: {@code executions} (oldest first, at most 100), {@code truncated}, {@code total},
     * {@code counts}, {@code usage}, {@code trace_ids}, {@code first_at}, {@code last_at}, this
     * node's {@code sessions}.  {@link NotFoundException} when the tenant has no such run.
     */
    public JsonNode get(String runId) {
        return get(runId, null);
    }

    /** The same with {@code limit} (1..1000) executions listed at most. */
    public JsonNode get(String runId, Integer limit) {
        Transport.Req r = new Transport.Req("GET", "/v1/runs/" + Paths.segment(runId));
        if (limit != null) {
            r.query.put("limit", limit.toString());
        }
        return t.json(r);
    }

    /** One page of runs (by run_id); every argument may be null. */
    public ViewPage page(String agentId, String projectId, Integer limit, String after) {
        Transport.Req r = new Transport.Req("GET", "/v1/runs");
        if (agentId != null) {
            r.query.put("agent_id", agentId);
        }
        if (projectId != null) {
            r.query.put("project_id", projectId);
        }
        if (limit != null) {
            r.query.put("limit", limit.toString());
        }
        if (after != null) {
            r.query.put("after", after);
        }
        return ViewPage.of(t.json(r));
    }

    /** Every run matching the filters (null: any), page after page. */
    public Iterable<JsonNode> list(String agentId, String projectId, Integer limit) {
        return ViewPage.all(after -> page(agentId, projectId, limit, after));
    }
}
