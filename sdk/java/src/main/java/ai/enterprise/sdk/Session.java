package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** A live session ({@link Sessions}); {@link #info()} is its last view.  {@code close()} ends it. */
public final class Session implements AutoCloseable {
    private final Transport t;
    private final Sandbox sandbox;
    private final String id;
    private JsonNode info;

    Session(Transport t, Sandbox sandbox, JsonNode info) {
        this.t = t;
        this.sandbox = sandbox;
        this.info = info;
        this.id = info.path("id").asText();
    }

    public String id() {
        return id;
    }

    public JsonNode info() {
        return info;
    }

    public String status() {
        return info.path("status").asText();
    }

    private String filePath(String p) {
        return Paths.files(Sessions.path(id), p);
    }

    /** Posts an execution in the session ({@code command} required; {@code stdin} or {@code "stdin_mode": "stream"}
     * (then {@link Sandbox#writeStdin}), {@code env}, ...), not waiting. */
    public JsonNode submit(Map<String, ?> request) {
        Transport.Req r = new Transport.Req("POST", Sessions.path(id) + "/executions");
        ObjectNode body = Transport.JSON.valueToTree(request);
        r.body = Transport.encode(body);
        r.noLostRetry = true;
        return t.json(r);
    }

    /** An execution inside the session, waited for like {@code execute} (the client's execute timeout). */
    public Execution run(List<String> command) {
        return run(Map.of("command", command), t.executeTimeout);
    }

    /** {@link #run(List)} with a full body and an overall timeout. */
    public Execution run(Map<String, ?> request, Duration timeout) {
        long t0 = System.nanoTime();
        String eid = submit(request).path("id").asText();
        Duration left = timeout.minusNanos(System.nanoTime() - t0);
        return sandbox.wait(eid, left.isNegative() || left.isZero() ? Duration.ofMillis(1) : left);
    }

    public JsonNode writeFile(String path, byte[] data) {
        Transport.Req r = new Transport.Req("PUT", filePath(path));
        r.body = data;
        r.contentType = "application/octet-stream";
        return t.json(r);
    }

    public byte[] readFile(String path) {
        Transport.Req r = new Transport.Req("GET", filePath(path));
        r.accept = "application/octet-stream";
        return t.send(r).body();
    }

    /** Files under {@code dir} (null: /tmp), recursive, at most 1000: {@code {path, size, type}}. */
    public List<JsonNode> listFiles(String dir) {
        Transport.Req r = new Transport.Req("GET", Sessions.path(id) + "/files");
        if (dir != null) {
            r.query.put("path", dir);
        }
        List<JsonNode> out = new ArrayList<>();
        t.json(r).path("items").forEach(out::add);
        return out;
    }

    public void deleteFile(String path) {
        t.send(new Transport.Req("DELETE", filePath(path)));
    }

    public JsonNode refresh() {
        info = t.json(new Transport.Req("GET", Sessions.path(id)));
        return info;
    }

    /** Checkpoints the session's sandbox to disk ({@code runsc checkpoint}); files and processes are kept. */
    public JsonNode pause() {
        return state("/pause");
    }

    /** Brings a paused session back ({@code runsc restore}). */
    public JsonNode resume() {
        return state("/resume");
    }

    private JsonNode state(String what) {
        Transport.Req r = new Transport.Req("POST", Sessions.path(id) + what);
        r.body = Transport.encode(Transport.JSON.createObjectNode());
        r.noLostRetry = true;
        r.extraTimeout = Duration.ofSeconds(30);
        info = t.json(r);
        return info;
    }

    /**
     * A snapshot of the running session (its processes, memory and /tmp), which keeps running
     * ({@code POST .../snapshots}); kept {@code ttlS} seconds (0: the server's default, 7 days).
     * Fork it with {@code sessions().fork(snapshot.path("id").asText(), ...)}.
     */
    public JsonNode snapshot(long ttlS) {
        Transport.Req r = new Transport.Req("POST", Sessions.path(id) + "/snapshots");
        ObjectNode body = Transport.JSON.createObjectNode();
        if (ttlS > 0) {
            body.put("ttl_s", ttlS);
        }
        r.body = Transport.encode(body);
        r.noLostRetry = true;
        r.extraTimeout = Duration.ofSeconds(90);
        return t.json(r);
    }

    /** A fork: the snapshot it was restored from; else null. */
    public String fromSnapshot() {
        JsonNode v = info.path("from_snapshot");
        return v.isTextual() ? v.asText() : null;
    }

    /** While paused: {@code user}, {@code idle} or {@code drain} (a call resumes the last two); else null. */
    public String pausedBy() {
        JsonNode v = info.path("paused_by");
        return v.isTextual() ? v.asText() : null;
    }

    /** False once ended, failed or interrupted (its eaid died without a drain). */
    public boolean live() {
        String st = status();
        return !"ended".equals(st) && !"failed".equals(st) && !"interrupted".equals(st);
    }

    /** Its allow list and network log ({@code GET .../network}). */
    public JsonNode network() {
        return t.json(new Transport.Req("GET", Sessions.path(id) + "/network"));
    }

    /** Replaces the allow list of the live session ({@code PUT .../network}); the new list. */
    public List<String> setEgress(List<String> egress) {
        Transport.Req r = new Transport.Req("PUT", Sessions.path(id) + "/network");
        ObjectNode body = Transport.JSON.createObjectNode();
        body.set("egress", Transport.JSON.valueToTree(egress));
        r.body = Transport.encode(body);
        List<String> out = new ArrayList<>();
        t.json(r).path("egress").forEach(e -> out.add(e.asText()));
        refresh();
        return out;
    }

    /** Ends the session (DELETE); the ended view, with its usage.  Once ended, a second close does nothing. */
    @Override
    public void close() {
        if (live()) {
            info = new Sessions(t, sandbox).close(id);
        }
    }

    @Override
    public String toString() {
        return "Session{" + id + " " + status() + "}";
    }
}
