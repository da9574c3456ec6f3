package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Typed body of {@code POST /v1/sandbox/executions}.  {@code image} is
 * required, and {@code profile} unless {@code tool} names a tool manifest that
 * gives one; without {@code command} the image's own command runs (its
 * Entrypoint + Cmd, docs/images.md); null fields are left out.
 *
 * <pre>{@code
 * ExecuteRequest req = ExecuteRequest.builder("python:3.12-slim", "python", "-c", "print(1)")
 *     .profile("gvisor-small").limits(new ExecuteRequest.Limits("500m", "256Mi", 30, null, null, null))
 *     .build();
 * Execution ex = client.sandbox().execute(req);
 * }</pre>
 *
 * @param idempotencyKey sent as the {@code Idempotency-Key} header, not in the body (a fresh UUID when null)
 */
public record ExecuteRequest(String profile, String image, List<String> command, Limits limits,
                             Map<String, String> env, String stdin, List<InputFile> files, List<String> collect,
                             List<String> egress, String tool, String projectId, String agentId, String runId,
                             Callback callback, String idempotencyKey) {

    /**
     * A completion callback: eaid POSTs the summary to {@code url} once the execution is
     * terminal, signed with {@code secret} (check it with {@link Webhooks#verifySignature}).
     */
    public record Callback(String url, String secret) {
        @Override
        public String toString() {
            return "Callback[url=" + url + ", secret=[REDACTED]]";
        }
    }

    /** Limits; null values come from the profile's defaults. */
    public record Limits(String cpu, String memory, Integer timeoutS, Integer pids, Long outputBytes, String disk) {
    }

    /**
     * An input file written under /tmp before the command starts: text, or bytes (sent as
     * {@code content_b64} unless they are UTF-8 without NUL).
     */
    public record InputFile(String path, String content, byte[] data) {
        public static InputFile text(String path, String content) {
            return new InputFile(path, content, null);
        }

        public static InputFile bytes(String path, byte[] data) {
            return new InputFile(path, null, data.clone());
        }
    }

    public static Builder builder(String image, String... command) {
        return new Builder().image(image).command(command.length == 0 ? null : List.of(command));
    }

    /** The JSON body (without the idempotency key). */
    public ObjectNode toJson() {
        ObjectNode o = Transport.JSON.createObjectNode();
        put(o, "profile", profile);
        put(o, "image", image);
        if (command != null) {
            ArrayNode a = o.putArray("command");
            command.forEach(a::add);
        }
        if (limits != null) {
            ObjectNode l = o.putObject("limits");
            put(l, "cpu", limits.cpu());
            put(l, "memory", limits.memory());
            if (limits.timeoutS() != null) {
                l.put("timeout_s", limits.timeoutS());
            }
            if (limits.pids() != null) {
                l.put("pids", limits.pids());
            }
            if (limits.outputBytes() != null) {
                l.put("output_bytes", limits.outputBytes());
            }
            put(l, "disk", limits.disk());
        }
        if (env != null) {
            ObjectNode e = o.putObject("env");
            env.forEach(e::put);
        }
        put(o, "stdin", stdin);
        if (files != null) {
            ArrayNode a = o.putArray("files");
            for (InputFile f : files) {
                ObjectNode fo = a.addObject().put("path", f.path());
                if (f.data() != null) {
                    String text = utf8(f.data());
                    if (text != null) {
                        fo.put("content", text);
                    } else {
                        fo.put("content_b64", Base64.getEncoder().encodeToString(f.data()));
                    }
                } else {
                    fo.put("content", f.content() == null ? "" : f.content());
                }
            }
        }
        if (collect != null) {
            ArrayNode a = o.putArray("collect");
            collect.forEach(a::add);
        }
        if (egress != null) {
            ArrayNode a = o.putObject("network").putArray("egress");
            egress.forEach(a::add);
        }
        put(o, "tool", tool);
        put(o, "project_id", projectId);
        put(o, "agent_id", agentId);
        put(o, "run_id", runId);
        if (callback != null) {
            ObjectNode cb = o.putObject("callback");
            put(cb, "url", callback.url());
            put(cb, "secret", callback.secret());
        }
        return o;
    }

    private static void put(ObjectNode o, String k, String v) {
        if (v != null) {
            o.put(k, v);
        }
    }

    private static String utf8(byte[] b) {
        for (byte x : b) {
            if (x == 0) {
                return null;
            }
        }
        try {
            return StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    /** Builder of {@link ExecuteRequest}. */
    public static final class Builder {
        private String profile;
        private String image;
        private List<String> command;
        private Limits limits;
        private Map<String, String> env;
        private String stdin;
        private final List<InputFile> files = new ArrayList<>();
        private List<String> collect;
        private List<String> egress;
        private String tool;
        private String projectId;
        private String agentId;
        private String runId;
        private Callback callback;
        private String idempotencyKey;

        public Builder profile(String v) {
            profile = v;
            return this;
        }

        public Builder image(String v) {
            image = v;
            return this;
        }

        public Builder command(List<String> v) {
            command = v == null ? null : List.copyOf(v);
            return this;
        }

        public Builder limits(Limits v) {
            limits = v;
            return this;
        }

        public Builder env(Map<String, String> v) {
            env = v == null ? null : new LinkedHashMap<>(v);
            return this;
        }

        public Builder stdin(String v) {
            stdin = v;
            return this;
        }

        public Builder file(InputFile f) {
            files.add(f);
            return this;
        }

        public Builder collect(List<String> v) {
            collect = v == null ? null : List.copyOf(v);
            return this;
        }

        public Builder egress(List<String> v) {
            egress = v == null ? null : List.copyOf(v);
            return this;
        }

        public Builder tool(String v) {
            tool = v;
            return this;
        }

        public Builder projectId(String v) {
            projectId = v;
            return this;
        }

        public Builder agentId(String v) {
            agentId = v;
            return this;
        }

        public Builder runId(String v) {
            runId = v;
            return this;
        }

        public Builder callback(String url, String secret) {
            callback = new Callback(url, secret);
            return this;
        }

        public Builder idempotencyKey(String v) {
            idempotencyKey = v;
            return this;
        }

        public ExecuteRequest build() {
            return new ExecuteRequest(profile, image, command, limits, env, stdin,
                    files.isEmpty() ? null : List.copyOf(files), collect, egress, tool, projectId, agentId, runId,
                    callback, idempotencyKey);
        }
    }
}
