package ai.enterprise.sdk;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * The conformance runner (sdk/conformance/README.md): every scenario of
 * scenarios.json through this SDK against the live eaid of
 * sdk/conformance/run.sh (EAI_SDK_LIVE=1).  Prints PASS/FAIL per scenario and
 * "N passed, M failed".
 */
@EnabledIfEnvironmentVariable(named = "EAI_SDK_LIVE", matches = "1")
class ConformanceTest {
    static final com.fasterxml.jackson.databind.ObjectMapper JSON = Transport.JSON;
    static final Pattern VAR = Pattern.compile("\\$\\{([A-Za-z0-9_]+)\\}");

    /** What a call produced. */
    static final class Result {
        JsonNode raw = JsonNodeFactory.instance.nullNode();
        byte[] stdout;
        byte[] stderr;
        byte[] bytes;
        List<Event> events;
    }

    @Test
    void scenarios() throws IOException {
        String file = System.getenv().getOrDefault("EAI_CONFORMANCE_SCENARIOS", "../conformance/scenarios.json");
        JsonNode suite = JSON.readTree(Files.readAllBytes(Path.of(file)));
        if (!"eai-sdk-conformance/1".equals(suite.path("format").asText())) {
            fail("bad format in " + file);
        }
        ObjectNode globals = (ObjectNode) suite.path("variables").deepCopy();
        String img = System.getenv("EAI_CONFORMANCE_IMAGE");
        if (img != null && !img.isEmpty()) {
            globals.put("image", img);
        }
        String prof = System.getenv("EAI_CONFORMANCE_PROFILE");
        if (prof != null && !prof.isEmpty()) {
            globals.put("profile", prof);
        }
        Set<String> only = Set.of(System.getenv().getOrDefault("EAI_CONFORMANCE_ONLY", "").split(",")).stream()
                .map(String::strip).filter(s -> !s.isEmpty()).collect(Collectors.toSet());
        int passed = 0;
        int failed = 0;
        for (JsonNode sc : suite.path("scenarios")) {
            String name = sc.path("name").asText();
            if (!only.isEmpty() && !only.contains(name)) {
                continue;
            }
            long t0 = System.nanoTime();
            try {
                runScenario(globals, sc);
                passed++;
                System.out.printf("PASS %s (%.1f s)%n", name, (System.nanoTime() - t0) / 1e9);
            } catch (Exception | AssertionError e) {
                failed++;
                System.out.println("FAIL " + name + ": " + e.getMessage());
            }
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.out.flush();
        assertTrue(failed == 0 && passed > 0, failed + " scenario(s) failed");
    }

    static void runScenario(ObjectNode globals, JsonNode sc) throws Exception {
        Map<String, JsonNode> vars = new HashMap<>();
        globals.fields().forEachRemaining(e -> vars.put(e.getKey(), e.getValue()));
        byte[] u = new byte[6];
        new SecureRandom().nextBytes(u);
        vars.put("unique", TextNode.valueOf(HexFormat.of().formatHex(u)));
        int i = 0;
        for (JsonNode st : sc.path("steps")) {
            i++;
            String call = st.path("call").asText();
            try {
                JsonNode args = subst(st.path("args"), vars);
                JsonNode exp = subst(st.path("expect"), vars);
                Result res = null;
                EaiException err = null;
                try {
                    res = call(call, st.path("client"), args);
                } catch (EaiException e) {
                    err = e;
                }
                check(exp, res, err);
                Iterator<Map.Entry<String, JsonNode>> it = st.path("save").fields();
                while (it.hasNext()) {
                    Map.Entry<String, JsonNode> e = it.next();
                    JsonNode v = lookup(res.raw, e.getValue().asText());
                    if (v == null) {
                        throw new IllegalStateException("save " + e.getKey() + ": no value at " + e.getValue());
                    }
                    vars.put(e.getKey(), v);
                }
            } catch (Exception | AssertionError e) {
                throw new IllegalStateException("step " + i + " (" + call + "): " + e.getMessage(), e);
            }
        }
    }

    static JsonNode subst(JsonNode v, Map<String, JsonNode> vars) {
        if (v.isTextual()) {
            String s = v.asText();
            Matcher m = VAR.matcher(s);
            if (m.matches()) {
                JsonNode val = vars.get(m.group(1));
                if (val == null) {
                    throw new IllegalArgumentException("unknown variable " + m.group(1));
                }
                return val;
            }
            StringBuilder sb = new StringBuilder();
            m.reset();
            while (m.find()) {
                JsonNode val = vars.get(m.group(1));
                if (val == null) {
                    throw new IllegalArgumentException("unknown variable " + m.group(1));
                }
                m.appendReplacement(sb, Matcher.quoteReplacement(val.isTextual() ? val.asText() : val.toString()));
            }
            m.appendTail(sb);
            return TextNode.valueOf(sb.toString());
        }
        if (v.isObject()) {
            ObjectNode o = JSON.createObjectNode();
            v.fields().forEachRemaining(e -> o.set(e.getKey(), subst(e.getValue(), vars)));
            return o;
        }
        if (v.isArray()) {
            ArrayNode a = JSON.createArrayNode();
            v.forEach(e -> a.add(subst(e, vars)));
            return a;
        }
        return v;
    }

    static EnterpriseAIClient client(JsonNode spec) {
        String key = System.getenv("EAI_API_KEY");
        switch (spec.path("key").asText("a")) {
            case "a" -> {
            }
            case "b" -> key = System.getenv("EAI_API_KEY_B");
            case "invalid" -> key = "eai_0000000000000000_" + "0".repeat(64);
            default -> throw new IllegalArgumentException("unknown client key " + spec.path("key"));
        }
        EnterpriseAIClient.Builder b = EnterpriseAIClient.builder().apiKey(key);
        if (spec.hasNonNull("language")) {
            b.language(spec.path("language").asText());
        }
        return b.build();
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> map(JsonNode n) {
        return JSON.convertValue(n, Map.class);
    }

    static Result exec(Execution ex) {
        Result r = new Result();
        r.raw = ex.raw();
        r.stdout = ex.stdout();
        r.stderr = ex.stderr();
        return r;
    }

    static Result call(String call, JsonNode clientSpec, JsonNode a) {
        EnterpriseAIClient c = client(clientSpec);
        Sandbox sb = c.sandbox();
        Duration timeout = a.hasNonNull("timeout_s") ? Duration.ofMillis((long) (a.path("timeout_s").asDouble() * 1000))
                : null;
        Result r = new Result();
        switch (call) {
            case "execute" -> {
                JsonNode n = timeout != null ? sb.execute(map(a.path("request")), timeout)
                        : sb.execute(map(a.path("request")));
                Execution ex = Execution.of(n);
                r.raw = n;
                r.stdout = ex.stdout();
                r.stderr = ex.stderr();
            }
            case "create" -> r.raw = a.hasNonNull("idempotency_key")
                    ? sb.create(map(a.path("request")), a.path("idempotency_key").asText())
                    : sb.create(map(a.path("request")));
            case "get" -> r = exec(sb.get(a.path("id").asText()));
            case "wait" -> r = exec(timeout != null ? sb.wait(a.path("id").asText(), timeout)
                    : sb.wait(a.path("id").asText()));
            case "list" -> {
                ArrayNode items = JSON.createArrayNode();
                Sandbox.ListParams p = new Sandbox.ListParams(text(a, "status"), text(a, "run_id"),
                        a.hasNonNull("limit") ? a.path("limit").asInt() : null, null);
                for (Execution ex : sb.list(p)) {
                    items.add(ex.raw());
                }
                r.raw = items;
            }
            case "cancel" -> r.raw = sb.cancel(a.path("id").asText()).raw();
            case "download_file" -> r.bytes = sb.downloadFile(a.path("id").asText(), a.path("path").asText());
            case "stream" -> {
                r.events = new ArrayList<>();
                ArrayNode raws = JSON.createArrayNode();
                try (EventStream st = sb.stream(a.path("id").asText())) {
                    for (Event ev : st) {
                        r.events.add(ev);
                        raws.addObject().put("event", ev.type()).set("data", ev.raw());
                    }
                }
                r.raw = raws;
            }
            case "contracts_validate" -> r.raw = c.contracts().validate(a.path("name").asText(), a.path("document"))
                    .raw();
            case "manifests_apply" -> r.raw = c.manifests().apply(a.path("manifest"));
            case "manifests_get" -> r.raw = c.manifests().get(a.path("kind").asText(), a.path("name").asText());
            case "manifests_delete" -> r.raw = c.manifests().delete(a.path("kind").asText(), a.path("name").asText());
            case "runs_get" -> r.raw = c.agent().runs().get(a.path("run_id").asText(),
                    a.hasNonNull("limit") ? a.path("limit").asInt() : null);
            case "runs_list" -> {
                ArrayNode items = JSON.createArrayNode();
                for (JsonNode it : c.agent().runs().list(text(a, "agent_id"), text(a, "project_id"),
                        a.hasNonNull("limit") ? a.path("limit").asInt() : null)) {
                    items.add(it);
                }
                r.raw = items;
            }
            case "agents_get" -> r.raw = c.agent().agents().get(a.path("agent_id").asText());
            case "agents_list" -> {
                ArrayNode items = JSON.createArrayNode();
                for (JsonNode it : c.agent().agents().list(a.hasNonNull("limit") ? a.path("limit").asInt() : null)) {
                    items.add(it);
                }
                r.raw = items;
            }
            default -> throw new IllegalArgumentException("unknown call " + call);
        }
        return r;
    }

    static String text(JsonNode a, String k) {
        return a.hasNonNull(k) ? a.path(k).asText() : null;
    }

    /** Null when absent. */
    static JsonNode lookup(JsonNode v, String path) {
        if (path.isEmpty()) {
            return v;
        }
        for (String seg : path.split("\\.")) {
            if (v == null) {
                return null;
            }
            if (v.isObject()) {
                v = v.get(seg);
            } else if (v.isArray() && seg.matches("\\d+")) {
                v = v.get(Integer.parseInt(seg));
            } else {
                return null;
            }
        }
        return v;
    }

    /** JSON equality after a round trip (a BinaryNode equals its base64 text; 2 equals 2.0). */
    static boolean jsonEqual(JsonNode a, JsonNode b) {
        try {
            JsonNode x = JSON.readTree(JSON.writeValueAsBytes(a));
            JsonNode y = JSON.readTree(JSON.writeValueAsBytes(b));
            if (x.isNumber() && y.isNumber()) {
                return x.decimalValue().compareTo(y.decimalValue()) == 0;
            }
            return x.equals(y);
        } catch (IOException e) {
            return false;
        }
    }

    static String errClass(EaiException e) {
        if (e instanceof AuthenticationException) {
            return "auth";
        } else if (e instanceof NotFoundException) {
            return "not_found";
        } else if (e instanceof ValidationException) {
            return "validation";
        } else if (e instanceof ConflictException) {
            return "conflict";
        } else if (e instanceof RateLimitException) {
            return "rate_limited";
        } else if (e instanceof UnavailableException) {
            return "unavailable";
        } else if (e instanceof ServerException) {
            return "server";
        } else if (e instanceof ExecutionTimeoutException) {
            return "timeout";
        } else if (e instanceof ConnectionException) {
            return "connection";
        }
        return "other";
    }

    static void checkError(JsonNode want, EaiException err) {
        if (err == null) {
            throw new AssertionError("expected a " + want.path("class").asText() + " error, the call succeeded");
        }
        if (!errClass(err).equals(want.path("class").asText())) {
            throw new AssertionError("error class " + errClass(err) + ", want " + want.path("class").asText() + " ("
                    + err + ")");
        }
        ApiException ae = err instanceof ApiException x ? x : null;
        Iterator<Map.Entry<String, JsonNode>> it = want.fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            String k = e.getKey();
            JsonNode v = e.getValue();
            if (k.equals("class")) {
                continue;
            }
            if (ae == null) {
                throw new AssertionError("expected " + k + " on an API error, got " + err);
            }
            switch (k) {
                case "code" -> same(k, v.asText(), ae.code());
                case "http_status" -> same(k, v.asInt(), ae.status());
                case "message" -> same(k, v.asText(), ae.serverMessage());
                case "message_i18n" -> v.fields().forEachRemaining(
                        m -> same("message_i18n." + m.getKey(), m.getValue().asText(), ae.messageI18n().get(m.getKey())));
                case "details_paths" -> v.forEach(p -> {
                    if (ae.details().stream().noneMatch(d -> d.path().equals(p.asText()))) {
                        throw new AssertionError("details " + ae.details() + " lack path " + p.asText());
                    }
                });
                case "request_id" -> {
                    if (v.asBoolean() && (ae.requestId() == null || ae.requestId().isEmpty())) {
                        throw new AssertionError("no request id");
                    }
                }
                default -> throw new AssertionError("unknown error expectation " + k);
            }
        }
    }

    static void same(String what, Object want, Object got) {
        if (!want.equals(got)) {
            throw new AssertionError(what + " = " + got + ", want " + want);
        }
    }

    static String utf8(byte[] b) {
        return b == null ? "" : new String(b, StandardCharsets.UTF_8);
    }

    static void check(JsonNode exp, Result r, EaiException err) throws IOException {
        if (exp.has("error")) {
            checkError(exp.path("error"), err);
            return;
        }
        if (err != null) {
            throw new AssertionError("call failed: " + err.getClass().getSimpleName() + ": " + err.getMessage());
        }
        byte[] stdout = r.stdout;
        byte[] stderr = r.stderr;
        if (r.events != null) {
            ByteArrayOutputStream o = new ByteArrayOutputStream();
            ByteArrayOutputStream e = new ByteArrayOutputStream();
            for (Event ev : r.events) {
                if (ev.data() != null && ev.type().equals("stdout")) {
                    o.write(ev.data());
                } else if (ev.data() != null && ev.type().equals("stderr")) {
                    e.write(ev.data());
                }
            }
            stdout = o.toByteArray();
            stderr = e.toByteArray();
        }
        Iterator<Map.Entry<String, JsonNode>> it = exp.fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            JsonNode v = e.getValue();
            switch (e.getKey()) {
                case "fields" -> v.fields().forEachRemaining(f -> {
                    JsonNode got = lookup(r.raw, f.getKey());
                    if ((got == null || got.isNull()) && f.getValue().isNull()) {
                        return;
                    }
                    if (got == null || !jsonEqual(got, f.getValue())) {
                        throw new AssertionError(f.getKey() + " = " + got + ", want " + f.getValue());
                    }
                });
                case "one_of" -> v.fields().forEachRemaining(f -> {
                    JsonNode got = lookup(r.raw, f.getKey());
                    boolean hit = false;
                    for (JsonNode w : f.getValue()) {
                        hit |= got != null && jsonEqual(got, w);
                    }
                    if (!hit) {
                        throw new AssertionError(f.getKey() + " = " + got + ", want one of " + f.getValue());
                    }
                });
                case "match" -> v.fields().forEachRemaining(f -> {
                    JsonNode got = lookup(r.raw, f.getKey());
                    if (got == null || !got.isTextual()
                            || !Pattern.compile(f.getValue().asText()).matcher(got.asText()).find()) {
                        throw new AssertionError(f.getKey() + " = " + got + " does not match " + f.getValue());
                    }
                });
                case "stdout" -> same("stdout", v.asText(), utf8(stdout));
                case "stderr" -> same("stderr", v.asText(), utf8(stderr));
                case "stdout_contains" -> {
                    if (!utf8(stdout).contains(v.asText())) {
                        throw new AssertionError("stdout " + utf8(stdout) + " lacks " + v.asText());
                    }
                }
                case "stdout_b64" -> same("stdout base64", v.asText(),
                        Base64.getEncoder().encodeToString(stdout == null ? new byte[0] : stdout));
                case "files_include" -> {
                    JsonNode files = lookup(r.raw, "files");
                    for (JsonNode want : v) {
                        boolean hit = false;
                        if (files != null) {
                            for (JsonNode f : files) {
                                hit |= f.path("path").asText().equals(want.asText());
                            }
                        }
                        if (!hit) {
                            throw new AssertionError("files " + files + " lack " + want);
                        }
                    }
                }
                case "ids" -> {
                    ArrayNode ids = JSON.createArrayNode();
                    r.raw.forEach(x -> ids.add(x.path("id")));
                    if (!jsonEqual(ids, v)) {
                        throw new AssertionError("ids " + ids + ", want " + v);
                    }
                }
                case "count" -> same("count", v.asInt(), r.raw.size());
                case "text" -> same("file text", v.asText(), utf8(r.bytes));
                case "bytes_b64" -> same("file bytes", v.asText(),
                        Base64.getEncoder().encodeToString(r.bytes == null ? new byte[0] : r.bytes));
                case "last_status" -> {
                    if (r.events == null || r.events.isEmpty()) {
                        throw new AssertionError("no events");
                    }
                    Event last = r.events.get(r.events.size() - 1);
                    if (!last.type().equals("status") || !v.asText().equals(last.status())) {
                        throw new AssertionError("last event " + last + ", want status " + v.asText());
                    }
                }
                default -> throw new AssertionError("unknown expectation " + e.getKey());
            }
        }
    }
}
