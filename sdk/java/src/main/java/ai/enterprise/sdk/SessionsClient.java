package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * {@code client.agent().sessions()}: {@code client.sandbox().sessions()} for an agent's run:
 * {@code create} takes {@code project_id}, {@code agent_id}, {@code run_id} in its body (the
 * session's executions inherit them); {@link #forRun} lists this node's sessions of a run.
 */
public final class SessionsClient {
    private final Sessions sessions;
    private final RunsClient runs;

    SessionsClient(Sessions sessions, RunsClient runs) {
        this.sessions = sessions;
        this.runs = runs;
    }

    public Session create(Map<String, ?> request) {
        return sessions.create(request);
    }

    public Session get(String id) {
        return sessions.get(id);
    }

    public List<JsonNode> list(String status) {
        return sessions.list(status);
    }

    public JsonNode close(String id) {
        return sessions.close(id);
    }

    /** This node's sessions created with {@code runId} (empty when the run has none). */
    public List<JsonNode> forRun(String runId) {
        JsonNode run;
        try {
            run = runs.get(runId, 1);
        } catch (NotFoundException e) {
            return List.of();
        }
        List<JsonNode> out = new ArrayList<>();
        for (JsonNode s : run.path("sessions")) {
            out.add(s);
        }
        return out;
    }
}
