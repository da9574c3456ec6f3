package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Set;

/**
 * One execution as the server reports it, typed.  {@code stdout}/{@code stderr}
 * are the program's bytes: base64 answers ({@code stdout_encoding: "base64"},
 * output that is not UTF-8) are decoded.  {@link #raw()} is the JSON as sent.
 */
public record Execution(String id, String status, String profile, String backend, String image,
                        List<String> command, JsonNode limits, Integer exitCode, Integer signal,
                        byte[] stdout, byte[] stderr, String stdoutEncoding, String stderrEncoding,
                        boolean stdoutTruncated, boolean stderrTruncated, List<FileInfo> files,
                        boolean filesTruncated, JsonNode usage, ExecError error, String tool, String projectId,
                        String agentId, String runId, String traceId, String createdAt, String startedAt,
                        String finishedAt, JsonNode raw) {

    /** The terminal statuses: a status among them never changes again. */
    public static final Set<String> TERMINAL = Set.of("succeeded", "failed", "timeout", "oom_killed", "cancelled",
            "error");

    /** A collected output file ({@code Sandbox.downloadFile} fetches its bytes). */
    public record FileInfo(String path, long size, String sha256) {
    }

    /** Set when status is {@code error}: the platform could not run it. */
    public record ExecError(String code, String message) {
    }

    public static boolean isTerminal(String status) {
        return status != null && TERMINAL.contains(status);
    }

    public boolean isTerminal() {
        return isTerminal(status);
    }

    /** The callback view ({@code url, attempts, last_status, delivered_at}; never the secret), or null. */
    public JsonNode callback() {
        JsonNode c = raw == null ? null : raw.get("callback");
        return c == null || c.isNull() ? null : c;
    }

    /** The session this execution ran in, or null. */
    public String sessionId() {
        return raw == null ? null : text(raw, "session_id");
    }

    public String stdoutText() {
        return stdout == null ? "" : new String(stdout, StandardCharsets.UTF_8);
    }

    public String stderrText() {
        return stderr == null ? "" : new String(stderr, StandardCharsets.UTF_8);
    }

    /** Reads the server's JSON (as returned by {@code get}, {@code wait}, {@code execute(Map)}). */
    public static Execution of(JsonNode n) {
        List<String> cmd = null;
        if (n.path("command").isArray()) {
            cmd = new ArrayList<>();
            for (JsonNode c : n.path("command")) {
                cmd.add(c.asText());
            }
        }
        List<FileInfo> files = new ArrayList<>();
        for (JsonNode f : n.path("files")) {
            files.add(new FileInfo(f.path("path").asText(), f.path("size").asLong(), text(f, "sha256")));
        }
        ExecError err = null;
        if (n.path("error").isObject()) {
            err = new ExecError(text(n.path("error"), "code"), text(n.path("error"), "message"));
        }
        return new Execution(text(n, "id"), text(n, "status"), text(n, "profile"), text(n, "backend"),
                text(n, "image"), cmd, n.get("limits"), integer(n, "exit_code"), integer(n, "signal"),
                decode(n, "stdout"), decode(n, "stderr"), text(n, "stdout_encoding"), text(n, "stderr_encoding"),
                n.path("stdout_truncated").asBoolean(false), n.path("stderr_truncated").asBoolean(false),
                List.copyOf(files), n.path("files_truncated").asBoolean(false), n.get("usage"), err,
                text(n, "tool"), text(n, "project_id"), text(n, "agent_id"), text(n, "run_id"), text(n, "trace_id"),
                text(n, "created_at"), text(n, "started_at"), text(n, "finished_at"), n);
    }

    static String text(JsonNode n, String k) {
        JsonNode v = n.get(k);
        return v == null || v.isNull() ? null : v.asText();
    }

    private static Integer integer(JsonNode n, String k) {
        JsonNode v = n.get(k);
        return v == null || !v.isNumber() ? null : v.asInt();
    }

    /** The decoded bytes of stdout/stderr (null when absent). */
    static byte[] decode(JsonNode n, String stream) {
        JsonNode v = n.get(stream);
        if (v == null || v.isNull()) {
            return null;
        }
        if (v.isBinary()) {
            try {
                return v.binaryValue();
            } catch (java.io.IOException e) {
                throw new EaiException("malformed " + stream, e);
            }
        }
        if ("base64".equals(text(n, stream + "_encoding"))) {
            try {
                return Base64.getDecoder().decode(v.asText());
            } catch (IllegalArgumentException e) {
                throw new EaiException("malformed base64 in " + stream, e);
            }
        }
        return v.asText().getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public String toString() {
        return "Execution{id=" + id + ", status=" + status + ", exitCode=" + exitCode + ", stdout="
                + (stdout == null ? 0 : stdout.length) + " bytes, stderr=" + (stderr == null ? 0 : stderr.length)
                + " bytes}";
    }
}
