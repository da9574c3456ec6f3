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

    /** Ends a session; returns the ended view (its usage). */
    public JsonNode close(String id) {
        Transport.Req r = new Transport.Req("DELETE", path(id));
        r.extraTimeout = Duration.ofSeconds(30);
        return t.json(r);
    }
}
