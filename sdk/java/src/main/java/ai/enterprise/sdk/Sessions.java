package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * {@code client.sandbox().sessions()}: a session is one sandbox kept across several
 * executions (docs/sessions.md).
 *
 * <pre>{@code
 * try (Session s = client.sandbox().sessions().create(Map.of("image", "python:3.11-slim", "profile", "gvisor-small"))) {
 *     s.writeFile("/tmp/a.py", "print(6*7)".getBytes(UTF_8));
 *     Execution ex = s.run(List.of("python3", "/tmp/a.py"));
 * }
 * }</pre>
 *
 * Session routes take no {@code Idempotency-Key}: a POST whose answer was lost is not
 * retried (it could be done twice); 429, 503 and a refused connection are.
 */
public final class Sessions {
    private final Transport t;
    private final Sandbox sandbox;

    Sessions(Transport t, Sandbox sandbox) {
        this.t = t;
        this.sandbox = sandbox;
    }

    static String path(String id) {
        if (id == null || id.isEmpty()) {
            throw new IllegalArgumentException("empty session id");
        }
        return "/v1/sandbox/sessions/" + Paths.segment(id);
    }

    /** Creates a session from the API body ({@code image}, {@code profile}, {@code limits}, ...); answers once ready. */
    public Session create(Map<String, ?> request) {
        Transport.Req r = new Transport.Req("POST", "/v1/sandbox/sessions");
        ObjectNode body = Transport.JSON.valueToTree(request);
        r.body = Transport.encode(body);
        r.noLostRetry = true;
        r.extraTimeout = Duration.ofSeconds(90);
        return new Session(t, sandbox, t.json(r));
    }

    public Session get(String id) {
        return new Session(t, sandbox, t.json(new Transport.Req("GET", path(id))));
    }

    /** This tenant's sessions, newest first ({@code status} null, {@code live} or a status). */
    public List<JsonNode> list(String status) {
        Transport.Req r = new Transport.Req("GET", "/v1/sandbox/sessions");
        if (status != null) {
            r.query.put("status", status);
        }
        List<JsonNode> out = new ArrayList<>();
        t.json(r).path("items").forEach(out::add);
        return out;
    }

    /**
     * Sessions restored from a snapshot ({@code POST /v1/sandbox/sessions} with {@code from_snapshot}), each with
     * its own id, sandbox and copy of /tmp: {@code count} of them (1..10 by default; 0: one); {@code extra} (may be
     * null): {@code network} (the forks' own allow list), {@code idle_timeout_s}, {@code ttl_s}, the ids.
     */
    public List<Session> fork(String snapshotId, int count, Map<String, ?> extra) {
        Transport.Req r = new Transport.Req("POST", "/v1/sandbox/sessions");
        ObjectNode body = extra != null ? Transport.JSON.valueToTree(extra) : Transport.JSON.createObjectNode();
        body.put("from_snapshot", snapshotId);
        if (count > 0) {
            body.put("count", count);
        }
        r.body = Transport.encode(body);
        r.noLostRetry = true;
        r.extraTimeout = Duration.ofSeconds(150);
        JsonNode d = t.json(r);
        List<Session> out = new ArrayList<>();
        if (count > 0) {
            d.path("items").forEach(i -> {
                if (i.hasNonNull("id")) {
                    out.add(new Session(t, sandbox, i));
                }
            });
        } else {
            out.add(new Session(t, sandbox, d));
        }
        return out;
    }

    static String snapshotPath(String id) {
        if (id == null || id.isEmpty()) {
            throw new IllegalArgumentException("empty snapshot id");
        }
        return "/v1/sandbox/snapshots/" + Paths.segment(id);
    }

    /** This tenant's snapshots on the node ({@code sessionId} null: all). */
    public List<JsonNode> snapshots(String sessionId) {
        Transport.Req r = new Transport.Req("GET", "/v1/sandbox/snapshots");
        if (sessionId != null) {
            r.query.put("session_id", sessionId);
        }
        List<JsonNode> out = new ArrayList<>();
        t.json(r).path("items").forEach(out::add);
        return out;
    }

    public JsonNode getSnapshot(String id) {
        return t.json(new Transport.Req("GET", snapshotPath(id)));
    }

    /** Deletes a snapshot (its image and /tmp copy); the sessions forked from it live on. */
    public JsonNode deleteSnapshot(String id) {
        Transport.Req r = new Transport.Req("DELETE", snapshotPath(id));
        r.extraTimeout = Duration.ofSeconds(30);
        return t.json(r);
    }

    /** Ends a session; returns the ended view (its usage). */
    public JsonNode close(String id) {
        Transport.Req r = new Transport.Req("DELETE", path(id));
        r.extraTimeout = Duration.ofSeconds(30);
        return t.json(r);
    }
}
