package ai.enterprise.sdk;

/**
 * {@code client.agent()}: the agent view (docs/api.md "Runs and agents"), what an agent
 * platform reads to see an agent's work.
 *
 * <pre>{@code
 * JsonNode run = client.agent().runs().get("run-42");        // executions, sessions, counts, usage, trace ids
 * for (JsonNode a : client.agent().agents().list(null)) { ... }
 * Session s = client.agent().sessions().create(Map.of("image", "python:3.12-slim", "run_id", "run-42"));
 * }</pre>
 *
 * {@link AgentsClient}, {@link RunsClient} and {@link SessionsClient} carry the names of the
 * Python module {@code enterprise_ai.agent}.
 */
public final class Agent {
    private final AgentsClient agents;
    private final RunsClient runs;
    private final SessionsClient sessions;

    Agent(Transport t, Sandbox sandbox) {
        this.runs = new RunsClient(t);
        this.agents = new AgentsClient(t, runs);
        this.sessions = new SessionsClient(sandbox.sessions(), runs);
    }

    /** Agents of the tenant. */
    public AgentsClient agents() {
        return agents;
    }

    /** Runs of the tenant. */
    public RunsClient runs() {
        return runs;
    }

    /** Sessions carrying the agent's ids. */
    public SessionsClient sessions() {
        return sessions;
    }
}
