package ai.enterprise.sdk;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class ClientTest {
    static final String SECRET = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7";
    static final String KEY = "eai_0123456789abcdef_" + SECRET;

    final List<Duration> slept = Collections.synchronizedList(new ArrayList<>());
    final List<String> logs = Collections.synchronizedList(new ArrayList<>());

    EnterpriseAIClient.Builder builder(MockServer s) {
        return EnterpriseAIClient.builder().baseUrl(s.url()).apiKey(KEY).logger(logs::add).sleeper(slept::add);
    }

    static MockServer.Response json(int status, String body) {
        return MockServer.Response.json(status, body);
    }

    @Test
    void retries503HonouringRetryAfterWithTheSameIdempotencyKey() throws Exception {
        AtomicInteger n = new AtomicInteger();
        try (MockServer s = new MockServer(r -> n.incrementAndGet() <= 2
                ? MockServer.Response.error(503, "sandbox_unavailable", "No sandbox", "No sandbox", "Aucun",
                        "Retry-After: 3")
                : json(202, "{\"id\":\"sbx_1\",\"status\":\"queued\"}"))) {
            JsonNode ex = builder(s).build().sandbox().create(Map.of("image", "i", "command", List.of("true")));
            assertEquals("sbx_1", ex.path("id").asText());
            assertEquals(3, s.requests.size());
            String k = s.requests.get(0).header("Idempotency-Key");
            assertNotNull(k);
            assertEquals(36, k.length());
            for (MockServer.Request r : s.requests) {
                assertEquals(k, r.header("Idempotency-Key"));
                assertEquals("Bearer " + KEY, r.header("Authorization"));
                assertEquals("{\"image\":\"i\",\"command\":[\"true\"]}".length(), r.body().length);
            }
            assertEquals(2, slept.size());
            for (Duration d : slept) {
                assertTrue(d.compareTo(Duration.ofSeconds(3)) >= 0, "Retry-After not honoured: " + slept);
            }
        }
    }

    @Test
    void realSleepHonoursRetryAfterOneSecond() throws Exception {
        AtomicInteger n = new AtomicInteger();
        try (MockServer s = new MockServer(r -> n.incrementAndGet() == 1
                ? MockServer.Response.error(429, "rate_limited", "Too many", "Too many", "Trop", "Retry-After: 1")
                : json(200, "{\"id\":\"sbx_1\",\"status\":\"running\"}"))) {
            EnterpriseAIClient c = EnterpriseAIClient.builder().baseUrl(s.url()).apiKey(KEY).build();
            long t0 = System.nanoTime();
            assertEquals("running", c.sandbox().get("sbx_1").status());
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms >= 1000 && ms < 5000, "took " + ms + " ms");
        }
    }

    @Test
    void retriesAreBoundedInCount() throws Exception {
        try (MockServer s = new MockServer(r -> MockServer.Response.error(429, "rate_limited", "Too many", "Too many",
                "Trop", "Retry-After: 1"))) {
            EnterpriseAIClient c = builder(s).maxRetries(3).build();
            RateLimitException e = assertThrows(RateLimitException.class, () -> c.sandbox().get("sbx_1"));
            assertEquals(429, e.status());
            assertEquals(Duration.ofSeconds(1), e.retryAfter());
            assertEquals(4, s.requests.size());
            assertEquals(3, slept.size());
            assertTrue(logs.stream().anyMatch(l -> l.contains("retrying")), logs.toString());
        }
    }

    @Test
    void retriesAreBoundedInTime() throws Exception {
        try (MockServer s = new MockServer(r -> MockServer.Response.error(503, "storage_unavailable", "down", "down",
                "en panne", "Retry-After: 30"))) {
            EnterpriseAIClient c = builder(s).maxRetryTime(Duration.ofSeconds(10)).build();
            assertThrows(UnavailableException.class, () -> c.sandbox().get("sbx_1"));
            assertEquals(1, s.requests.size());
            assertTrue(slept.isEmpty());
        }
    }

    @Test
    void backoffIsExponentialWithJitter() {
        Set<Duration> seen = new HashSet<>();
        for (int a = 0; a < 8; a++) {
            long full = Math.min(250L << a, 8000);
            for (int i = 0; i < 50; i++) {
                Duration d = Transport.backoff(a);
                assertTrue(d.toMillis() >= full / 2 && d.toMillis() <= full, a + ": " + d);
                seen.add(d);
            }
        }
        assertTrue(seen.size() > 100, "no jitter");
    }

    /** The server reads the first create and drops the connection; the retry's same key returns the first run. */
    @Test
    void droppedConnectionThenIdempotentRetryRunsOnce() throws Exception {
        Map<String, String> runs = new ConcurrentHashMap<>();
        AtomicInteger attempts = new AtomicInteger();
        try (MockServer s = new MockServer(r -> {
            String key = r.header("Idempotency-Key");
            boolean seen = runs.containsKey(key);
            String id = runs.computeIfAbsent(key, k -> "sbx_" + (runs.size() + 1));
            if (attempts.incrementAndGet() == 1) {
                return MockServer.DROP;
            }
            return json(seen ? 200 : 202, "{\"id\":\"" + id + "\",\"status\":\"queued\"}");
        })) {
            Execution ex = builder(s).build().sandbox().create(
                    ExecuteRequest.builder("i", "echo", "hi").profile("p").build());
            assertEquals("sbx_1", ex.id());
            assertEquals(1, runs.size());
            assertEquals(2, s.requests.size());
            assertEquals(1, slept.size());
            assertEquals(s.requests.get(0).bodyText(), s.requests.get(1).bodyText());
            assertTrue(s.requests.get(0).bodyText().contains("\"command\":[\"echo\",\"hi\"]"));
        }
    }

    @Test
    void givenIdempotencyKeyIsSent() throws Exception {
        try (MockServer s = new MockServer(r -> json(202, "{\"id\":\"sbx_1\",\"status\":\"queued\"}"))) {
            EnterpriseAIClient c = builder(s).build();
            c.sandbox().create(Map.of("image", "i"), "k-map");
            c.sandbox().create(ExecuteRequest.builder("i", "x").idempotencyKey("k-typed").build());
            assertEquals("k-map", s.requests.get(0).header("Idempotency-Key"));
            assertEquals("k-typed", s.requests.get(1).header("Idempotency-Key"));
            c.sandbox().create(Map.of("image", "i"));
            c.sandbox().create(Map.of("image", "i"));
            String k1 = s.requests.get(2).header("Idempotency-Key");
            String k2 = s.requests.get(3).header("Idempotency-Key");
            assertNotNull(k1);
            assertFalse(k1.equals(k2), "two creates shared a generated key");
        }
    }

    @Test
    void frenchErrorEnvelope() throws Exception {
        try (MockServer s = new MockServer(r -> "fr".equals(r.header("Accept-Language"))
                ? MockServer.Response.error(404, "not_found", "Exécution introuvable", "Execution not found",
                        "Exécution introuvable", null)
                : MockServer.Response.error(404, "not_found", "Execution not found", "Execution not found",
                        "Exécution introuvable", null))) {
            EnterpriseAIClient c = builder(s).language("fr").build();
            NotFoundException e = assertThrows(NotFoundException.class, () -> c.sandbox().get("sbx_missing"));
            assertEquals(404, e.status());
            assertEquals("not_found", e.code());
            assertEquals("Exécution introuvable", e.serverMessage());
            assertEquals("Execution not found", e.messageI18n().get("en"));
            assertEquals("Exécution introuvable", e.messageI18n().get("fr"));
            assertEquals("rid-7", e.requestId());
            assertEquals("/limits/memory", e.details().get(0).path());
            assertTrue(e.getMessage().contains("Exécution introuvable"));
            assertEquals(1, s.requests.size());
        }
    }

    @Test
    void oneExceptionTypePerClassAndNoRetry() throws Exception {
        Object[][] cases = {
            {401, "unauthenticated", AuthenticationException.class},
            {403, "forbidden", AuthenticationException.class},
            {404, "not_found", NotFoundException.class},
            {400, "invalid_json", ValidationException.class},
            {413, "payload_too_large", ValidationException.class},
            {422, "validation_failed", ValidationException.class},
            {409, "already_finished", ConflictException.class},
            {500, "internal", ServerException.class},
        };
        for (Object[] tc : cases) {
            int status = (Integer) tc[0];
            try (MockServer s = new MockServer(r -> MockServer.Response.error(status, (String) tc[1], "m", "m", "m",
                    null))) {
                ApiException e = assertThrows(ApiException.class, () -> builder(s).build().sandbox().get("x"));
                assertInstanceOf((Class<?>) tc[2], e);
                assertEquals(status, e.status());
                assertEquals(tc[1], e.code());
                assertEquals(1, s.requests.size(), status + " was retried");
            }
        }
    }

    @Test
    void nonEnvelopeAnswerKeepsTheStatus() throws Exception {
        try (MockServer s = new MockServer(r -> new MockServer.Response(502, Map.of(),
                List.of("<html>bad gateway</html>".getBytes(StandardCharsets.UTF_8)), 0))) {
            ServerException e = assertThrows(ServerException.class, () -> builder(s).build().sandbox().get("x"));
            assertEquals("http_502", e.code());
            assertEquals(502, e.status());
        }
    }

    @Test
    void keyNeverInToStringExceptionsOrLogs() throws Exception {
        int port;
        try (ServerSocket ss = new ServerSocket(0)) {
            port = ss.getLocalPort();
        }
        EnterpriseAIClient.Builder b = EnterpriseAIClient.builder().baseUrl("http://127.0.0.1:" + port).apiKey(KEY)
                .maxRetries(2).logger(logs::add).sleeper(slept::add);
        EnterpriseAIClient c = b.build();
        ConnectionException e = assertThrows(ConnectionException.class, () -> c.sandbox().get("sbx_1"));
        assertEquals(3, e.attempts());
        assertEquals(2, logs.size());
        List<String> texts = new ArrayList<>(logs);
        texts.add(c.toString());
        texts.add(b.toString());
        texts.add(e.toString());
        for (Throwable t = e; t != null; t = t.getCause()) {
            texts.add(String.valueOf(t.getMessage()));
        }
        try (MockServer s = new MockServer(r -> MockServer.Response.error(401, "unauthenticated", "nope", "nope",
                "non", null))) {
            AuthenticationException ae = assertThrows(AuthenticationException.class,
                    () -> builder(s).build().sandbox().get("x"));
            texts.add(ae.toString());
        }
        for (String t : texts) {
            assertFalse(t.contains(SECRET), "secret leaked: " + t);
        }
        assertTrue(c.toString().contains("eai_0123456789abcdef_[REDACTED]"), c.toString());
    }

    @Test
    void base64OutputIsDecoded() throws Exception {
        String done = "{\"id\":\"sbx_1\",\"status\":\"succeeded\",\"exit_code\":0,\"stdout\":\"AP8BAg==\","
                + "\"stdout_encoding\":\"base64\",\"stderr\":\"é\\n\",\"stderr_encoding\":\"utf-8\"}";
        try (MockServer s = new MockServer(r -> r.method().equals("POST")
                ? json(202, "{\"id\":\"sbx_1\",\"status\":\"queued\"}") : json(200, done))) {
            EnterpriseAIClient c = builder(s).build();
            JsonNode ex = c.sandbox().execute(Map.of("image", "python:3.12-slim", "command",
                    List.of("python", "-c", "print(1)"), "profile", "gvisor"));
            assertArrayEquals(new byte[] {0, (byte) 0xff, 1, 2}, ex.get("stdout").binaryValue());
            assertEquals("AP8BAg==", ex.get("stdout").asText());
            assertEquals("é\n", ex.get("stderr").asText());
            Execution typed = Execution.of(ex);
            assertArrayEquals(new byte[] {0, (byte) 0xff, 1, 2}, typed.stdout());
            assertEquals("é\n", typed.stderrText());
            assertEquals(0, typed.exitCode());
            assertArrayEquals(new byte[] {0, (byte) 0xff, 1, 2}, c.sandbox().get("sbx_1").stdout());
        }
    }

    @Test
    void waitLongPollsWithWaitS() throws Exception {
        AtomicInteger n = new AtomicInteger();
        try (MockServer s = new MockServer(r -> {
            assertTrue(r.query().contains("wait_s=30"), r.target());
            if (n.incrementAndGet() < 3) {
                sleep(300);
                return json(200, "{\"id\":\"sbx_1\",\"status\":\"running\"}");
            }
            return json(200, "{\"id\":\"sbx_1\",\"status\":\"failed\",\"exit_code\":3}");
        })) {
            Execution ex = builder(s).build().sandbox().wait("sbx_1");
            assertEquals("failed", ex.status());
            assertEquals(3, ex.exitCode());
            assertEquals(3, s.requests.size());
        }
    }

    @Test
    void waitDoesNotSpinOnImmediateAnswers() throws Exception {
        try (MockServer s = new MockServer(r -> json(200, "{\"id\":\"sbx_1\",\"status\":\"running\"}"))) {
            EnterpriseAIClient c = EnterpriseAIClient.builder().baseUrl(s.url()).apiKey(KEY).build();
            ExecutionTimeoutException e = assertThrows(ExecutionTimeoutException.class,
                    () -> c.sandbox().wait("sbx_1", Duration.ofMillis(1500)));
            assertEquals("running", e.lastStatus());
            assertTrue(s.requests.size() <= 5, s.requests.size() + " polls in 1.5 s: tight loop");
        }
    }

    @Test
    void executeOverallTimeoutLeavesTheExecutionAlone() throws Exception {
        AtomicInteger cancels = new AtomicInteger();
        try (MockServer s = new MockServer(r -> {
            if (r.method().equals("POST") && r.path().equals("/v1/sandbox/executions")) {
                return json(202, "{\"id\":\"sbx_9\",\"status\":\"queued\"}");
            }
            if (r.path().endsWith("/cancel")) {
                cancels.incrementAndGet();
                return json(202, "{\"id\":\"sbx_9\",\"status\":\"cancelled\"}");
            }
            sleep(10_000); // a long-poll that outlives the caller's patience
            return json(200, "{\"id\":\"sbx_9\",\"status\":\"running\"}");
        })) {
            EnterpriseAIClient c = builder(s).build();
            long t0 = System.nanoTime();
            ExecutionTimeoutException e = assertThrows(ExecutionTimeoutException.class, () -> c.sandbox().execute(
                    Map.of("image", "i", "command", List.of("sleep", "99")), Duration.ofSeconds(1)));
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertEquals("sbx_9", e.executionId());
            assertEquals("queued", e.lastStatus());
            assertEquals(0, cancels.get(), "execute cancelled the execution; the caller decides");
            assertTrue(ms < 4000, "1 s timeout took " + ms + " ms");
        }
    }

    @Test
    void interruptStopsAWait() throws Exception {
        try (MockServer s = new MockServer(r -> {
            sleep(10_000);
            return json(200, "{\"id\":\"sbx_1\",\"status\":\"running\"}");
        })) {
            EnterpriseAIClient c = builder(s).build();
            AtomicReference<Throwable> got = new AtomicReference<>();
            Thread th = new Thread(() -> {
                try {
                    c.sandbox().wait("sbx_1");
                } catch (Throwable t) {
                    got.set(t);
                }
            });
            th.start();
            Thread.sleep(300);
            th.interrupt();
            th.join(3000);
            assertFalse(th.isAlive(), "wait ignored the interrupt");
            assertInstanceOf(EaiException.class, got.get());
        }
    }

    @Test
    void streamsServerSentEvents() throws Exception {
        List<byte[]> chunks = List.of(
                ": hello\n\nevent: status\ndata: {\"status\":\"running\"}\n\n".getBytes(StandardCharsets.UTF_8),
                ("event: stdout\ndata: {\"data\":\"a\\n\"}\n\nevent: stderr\ndata: {\"data\":\"/w==\","
                        + "\"encoding\":\"base64\"}\n\n").getBytes(StandardCharsets.UTF_8),
                "event: status\r\ndata: {\"status\":\"succeeded\",\"exit_code\":0}\r\n\r\n"
                        .getBytes(StandardCharsets.UTF_8));
        try (MockServer s = new MockServer(r -> {
            assertEquals("text/event-stream", r.header("Accept"));
            return new MockServer.Response(200, Map.of("Content-Type", "text/event-stream"), chunks, 50);
        })) {
            List<String> got = new ArrayList<>();
            try (EventStream st = builder(s).build().sandbox().stream("sbx_1")) {
                for (Event ev : st) {
                    got.add(ev.type() + ":" + ev.status() + ":" + (ev.data() == null ? "" : hex(ev.data())));
                }
            }
            assertEquals(List.of("status:running:", "stdout:null:610a", "stderr:null:ff", "status:succeeded:"), got);
        }
    }

    @Test
    void streamCutBeforeTheTerminalStatusIsAnError() throws Exception {
        try (MockServer s = new MockServer(r -> new MockServer.Response(200, Map.of(), List.of(
                "event: status\ndata: {\"status\":\"running\"}\n\n".getBytes(StandardCharsets.UTF_8)), 10))) {
            EventStream st = builder(s).build().sandbox().stream("sbx_1");
            assertEquals("running", st.next().status());
            assertThrows(ConnectionException.class, st::hasNext);
        }
    }

    @Test
    void listIteratesEveryPage() throws Exception {
        try (MockServer s = new MockServer(r -> {
            assertTrue(r.query().contains("limit=2") && r.query().contains("run_id=r%201"), r.query());
            if (!r.query().contains("after=")) {
                return json(200, "{\"items\":[{\"id\":\"e5\"},{\"id\":\"e4\"}],\"next\":\"c2\"}");
            } else if (r.query().contains("after=c2")) {
                return json(200, "{\"items\":[{\"id\":\"e3\"},{\"id\":\"e2\"}],\"next\":\"c4\"}");
            }
            return json(200, "{\"items\":[{\"id\":\"e1\"}],\"next\":null}");
        })) {
            List<String> ids = new ArrayList<>();
            for (Execution ex : builder(s).build().sandbox().list(new Sandbox.ListParams(null, "r 1", 2, null))) {
                ids.add(ex.id());
            }
            assertEquals(List.of("e5", "e4", "e3", "e2", "e1"), ids);
            assertEquals(3, s.requests.size());
        }
    }

    @Test
    void filesGoInAsTextOrBase64AndComeOutAsBytes() throws Exception {
        try (MockServer s = new MockServer(r -> {
            if (r.method().equals("POST")) {
                return json(202, "{\"id\":\"sbx_1\",\"status\":\"queued\"}");
            }
            return new MockServer.Response(200, Map.of(), List.of(new byte[] {0, 1, (byte) 0xfe}), 0);
        })) {
            Sandbox sb = builder(s).build().sandbox();
            sb.create(ExecuteRequest.builder("i", "x")
                    .file(ExecuteRequest.InputFile.bytes("/tmp/in/a.csv", "a,b\n".getBytes(StandardCharsets.UTF_8)))
                    .file(ExecuteRequest.InputFile.bytes("/tmp/in/b.bin", new byte[] {0, (byte) 0xff})).build());
            assertTrue(s.requests.get(0).bodyText().contains("\"files\":[{\"path\":\"/tmp/in/a.csv\",\"content\":"
                    + "\"a,b\\n\"},{\"path\":\"/tmp/in/b.bin\",\"content_b64\":\"AP8=\"}]"), s.requests.get(0).bodyText());
            assertArrayEquals(new byte[] {0, 1, (byte) 0xfe}, sb.downloadFile("sbx_1", "/tmp/outputs/r s.bin"));
            assertEquals("/v1/sandbox/executions/sbx_1/files/tmp/outputs/r%20s.bin", s.requests.get(1).path());
        }
    }

    @Test
    void oversizedAnswerIsNotRetried() throws Exception {
        try (MockServer s = new MockServer(r -> json(200, "{\"id\":\"sbx_1\",\"pad\":\"" + "x".repeat(4096) + "\"}"))) {
            EnterpriseAIClient c = builder(s).maxResponseBytes(1024).build();
            EaiException e = assertThrows(EaiException.class, () -> c.sandbox().get("sbx_1"));
            assertTrue(e.getMessage().contains("larger than 1024"), e.getMessage());
            assertEquals(1, s.requests.size());
        }
    }

    @Test
    void builderValidates() {
        assertThrows(IllegalArgumentException.class,
                () -> EnterpriseAIClient.builder().baseUrl("http://x").apiKey("").build());
        assertThrows(IllegalArgumentException.class,
                () -> EnterpriseAIClient.builder().baseUrl("ftp://x").apiKey(KEY).build());
        assertThrows(IllegalArgumentException.class,
                () -> EnterpriseAIClient.builder().baseUrl("http://u:p@x").apiKey(KEY).build());
        assertThrows(IllegalArgumentException.class,
                () -> EnterpriseAIClient.builder().baseUrl("http://x").apiKey("eai_a\nb").build());
        assertEquals("http://127.0.0.1:9/prefix",
                EnterpriseAIClient.builder().baseUrl("http://127.0.0.1:9/prefix/").apiKey(KEY).build().baseUrl());
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }


    @Test
    void writeStdinSendsRawBytesRetriesStdinBusyAndCloses() throws Exception {
        AtomicInteger n = new AtomicInteger();
        try (MockServer s = new MockServer(r -> {
            int k = n.incrementAndGet();
            if (k <= 3) {
                return MockServer.Response.error(429, "stdin_busy", "busy", "busy", "occupé", "Retry-After: 1");
            }
            if (k == 6) {
                return MockServer.Response.error(409, "stdin_closed", "closed", "closed", "fermée", null);
            }
            return json(200, "{\"id\":\"sbx_1\",\"written\":" + r.body().length + ",\"eof\":"
                    + r.target().contains("eof=true") + ",\"pending\":0}");
        })) {
            Sandbox sb = builder(s).maxRetries(0).build().sandbox();
            JsonNode w = sb.writeStdin("sbx_1", "x = 1\n");
            assertEquals(6, w.path("written").asInt());
            assertEquals(4, s.requests.size());
            for (MockServer.Request r : s.requests) {
                assertEquals("/v1/sandbox/executions/sbx_1/stdin", r.target());
                assertEquals("application/octet-stream", r.header("Content-Type"));
                assertArrayEquals("x = 1\n".getBytes(StandardCharsets.UTF_8), r.body());
            }
            JsonNode c = sb.closeStdin("sbx_1");
            assertTrue(c.path("eof").asBoolean());
            assertEquals("/v1/sandbox/executions/sbx_1/stdin?eof=true", s.requests.get(4).target());
            ConflictException e = assertThrows(ConflictException.class, () -> sb.writeStdin("sbx_1", "y"));
            assertEquals("stdin_closed", e.code());
        }
    }
}
