package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;

/** {@code client.agent().agents()}: {@code GET /v1/agents} and {@code GET /v1/agents/{agent_id}}. */
public final class AgentsClient {
    private final Transport t;
    private final RunsClient runs;

    AgentsClient(Transport t, RunsClient runs) {
        this.t = t;
        this.runs = runs;
    }

    /**
     * The agent: {@code runs}, {@code executions}, {@code newest_run}, {@code last_seen} and
     * {@code usage} per profile.  {@link NotFoundException} when the tenant has no execution of it.
     */
    public JsonNode get(String agentId) {
        return t.json(new Transport.Req("GET", "/v1/agents/" + Paths.segment(agentId)));
    }

    /** One page of agents (by agent_id); limit and after may be null. */
    public ViewPage page(Integer limit, String after) {
        Transport.Req r = new Transport.Req("GET", "/v1/agents");
        if (limit != null) {
            r.query.put("limit", limit.toString());
        }
        if (after != null) {
            r.query.put("after", after);
        }
        return ViewPage.of(t.json(r));
    }

    /** Every agent of the tenant, page after page ({@code limit}: page size or null). */
    public Iterable<JsonNode> list(Integer limit) {
        return ViewPage.all(after -> page(limit, after));
    }

    /** The agent's runs ({@code GET /v1/runs?agent_id=}). */
    public Iterable<JsonNode> runs(String agentId) {
        return runs.list(agentId, null, null);
    }
}
