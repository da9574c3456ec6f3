package ai.enterprise.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** Resumable event streams (Last-Event-ID) and completion-callback signatures. */
class ResumeCallbackTest {
    final List<Duration> slept = Collections.synchronizedList(new ArrayList<>());

    EnterpriseAIClient client(MockServer s, int retries) {
        return EnterpriseAIClient.builder().baseUrl(s.url()).apiKey(ClientTest.KEY).maxRetries(retries)
                .logger(m -> { }).sleeper(slept::add).build();
    }

    static String events(int first, int last, boolean terminal) {
        StringBuilder b = new StringBuilder();
        for (int i = first; i <= last; i++) {
            if (i == 0) {
                b.append("id: 0\nevent: status\ndata: {\"status\":\"queued\"}\n\n");
            } else if (i == 1) {
                b.append("id: 1\nevent: status\ndata: {\"status\":\"running\"}\n\n: ping\n\n");
            } else {
                b.append("id: ").append(i).append("\nevent: stdout\ndata: {\"data\":\"line").append(i)
                        .append("\\n\"}\n\n");
            }
        }
        if (terminal) {
            b.append("id: ").append(last + 1).append("\nevent: status\ndata: {\"status\":\"succeeded\",\"exit_code\":0}\n\n");
        }
        return b.toString();
    }

    /** Streamed (no Content-Length, Connection: close): the socket's close ends it, mid-stream here. */
    static MockServer.Response sse(String body) {
        return new MockServer.Response(200, Map.of("Content-Type", "text/event-stream"),
                List.of(body.getBytes(StandardCharsets.UTF_8), new byte[0]), 1);
    }

    static Function<MockServer.Request, MockServer.Response> script(MockServer.Response dflt, MockServer.Response... steps) {
        ConcurrentLinkedQueue<MockServer.Response> q = new ConcurrentLinkedQueue<>(List.of(steps));
        return r -> {
            MockServer.Response x = q.poll();
            return x != null ? x : dflt;
        };
    }

    static List<String> ids(EventStream st) {
        List<String> out = new ArrayList<>();
        for (Event e : st) {
            out.add(e.id());
        }
        return out;
    }

    @Test
    void droppedStreamResumesWithLastEventIdEachEventOnce() throws Exception {
        try (MockServer s = new MockServer(script(null, sse(events(0, 3, false)), sse(events(4, 6, true))))) {
            List<String> got;
            try (EventStream st = client(s, 4).sandbox().stream("sbx_1")) {
                got = ids(st);
            }
            assertEquals(List.of("0", "1", "2", "3", "4", "5", "6", "7"), got);
            assertEquals(2, s.requests.size());
            assertNull(s.requests.get(0).header("Last-Event-ID"));
            assertEquals("3", s.requests.get(1).header("Last-Event-ID"));
            assertEquals(1, slept.size());
        }
    }

    @Test
    void noContentEndsTheStream() throws Exception {
        MockServer.Response noContent = new MockServer.Response(204, Map.of(), List.of(), 0);
        try (MockServer s = new MockServer(script(noContent, sse(events(0, 1, false))))) {
            EnterpriseAIClient c = client(s, 4);
            assertEquals(List.of("0", "1"), ids(c.sandbox().stream("sbx_1")));     // resumed, then 204
            assertEquals("1", s.requests.get(1).header("Last-Event-ID"));
            assertEquals(List.of(), ids(c.sandbox().stream("sbx_1", "9")));
            assertEquals("9", s.requests.get(2).header("Last-Event-ID"));
        }
    }

    @Test
    void reconnectsAreBoundedWithoutProgress() throws Exception {
        try (MockServer s = new MockServer(script(sse(""), sse(events(0, 0, false))))) {
            EventStream st = client(s, 3).sandbox().stream("sbx_1");
            assertEquals("0", st.next().id());
            assertThrows(ConnectionException.class, st::hasNext);
            assertEquals(1 + 3, s.requests.size());
            assertEquals(3, slept.size());
            for (int i = 1; i < s.requests.size(); i++) {
                assertEquals("0", s.requests.get(i).header("Last-Event-ID"));
            }
        }
    }

    // computed by the server's code: core/obs/callback.c eai_cb_sign with core/base/util.c
    // eai_hmac_sha256_hex, compiled into a small C program.
    static final String SECRET = "whsec_0123456789abcdef";
    static final long T = 1764650000L;
    static final byte[] BODY = "{\"id\":\"evt_1\",\"type\":\"execution.finished\",\"execution\":{\"id\":\"sbx_1\",\"status\":\"succeeded\"}}"
            .getBytes(StandardCharsets.UTF_8);
    static final String SIG = "t=1764650000,v1=1fc37c80235f300c0066ef359feaa4b03278d5959b94192d0d77bea83aeb1841";

    @Test
    void callbackSignatureKnownVectorAndRefusals() {
        Instant at = Instant.ofEpochSecond(T);
        Duration tol = Webhooks.DEFAULT_TOLERANCE;
        assertEquals(SIG, Webhooks.sign(SECRET, T, BODY));
        assertTrue(Webhooks.verifyAt(SECRET, SIG, BODY, tol, at.plusSeconds(10)));
        byte[] other = (new String(BODY, StandardCharsets.UTF_8) + " ").getBytes(StandardCharsets.UTF_8);
        assertFalse(Webhooks.verifyAt(SECRET, SIG, other, tol, at));
        assertFalse(Webhooks.verifyAt(SECRET + "x", SIG, BODY, tol, at));
        assertFalse(Webhooks.verifyAt(SECRET, SIG, BODY, tol, at.plusSeconds(301)));
        assertFalse(Webhooks.verifyAt(SECRET, SIG, BODY, tol, at.minusSeconds(301)));
        assertTrue(Webhooks.verifyAt(SECRET, SIG, BODY, Duration.ofSeconds(600), at.plusSeconds(500)));
        assertFalse(Webhooks.verifyAt(SECRET, SIG.replace("t=1764650000", "t=1764650001"), BODY, tol, at));
        for (String bad : new String[] {"", "garbage", "t=abc,v1=00", "v1=" + "0".repeat(64), "t=1764650000", null}) {
            assertFalse(Webhooks.verifyAt(SECRET, bad, BODY, tol, at), String.valueOf(bad));
        }
        assertFalse(Webhooks.verifySignature(SECRET, SIG, BODY));   // 2025's timestamp, today's clock
    }

    @Test
    void createSendsCallbackAndTheViewHasIt() throws Exception {
        try (MockServer s = new MockServer(script(null,
                MockServer.Response.json(202, "{\"id\":\"sbx_1\",\"status\":\"queued\"}"),
                MockServer.Response.json(200, "{\"id\":\"sbx_1\",\"status\":\"succeeded\",\"exit_code\":0,"
                        + "\"callback\":{\"url\":\"https://h.example.com/x\",\"attempts\":1,\"last_status\":200,\"delivered_at\":null}}")))) {
            ExecuteRequest req = ExecuteRequest.builder("img", "true").profile("p")
                    .callback("https://h.example.com/x", "s".repeat(20)).build();
            assertFalse(req.toString().contains("s".repeat(20)), req.toString());
            Execution ex = client(s, 2).sandbox().execute(req);
            assertEquals("s".repeat(20), Transport.JSON.readTree(s.requests.get(0).body()).path("callback").path("secret").asText());
            assertEquals(1, ex.callback().path("attempts").asInt());
        }
    }

    @Test
    void sessionLifecycle() throws Exception {
        String ses = "ses_1";
        try (MockServer s = new MockServer(script(null,
                MockServer.Response.json(201, "{\"id\":\"ses_1\",\"status\":\"running\"}"),
                MockServer.Response.json(200, "{\"path\":\"/tmp/a b.py\",\"size\":10}"),
                new MockServer.Response(200, Map.of(), List.of("print(6*7)".getBytes(StandardCharsets.UTF_8)), 0),
                MockServer.Response.json(200, "{\"items\":[{\"path\":\"/tmp/a b.py\",\"size\":10,\"type\":\"file\"}]}"),
                MockServer.Response.json(202, "{\"id\":\"sbx_1\",\"status\":\"queued\"}"),
                MockServer.Response.json(200, "{\"id\":\"sbx_1\",\"status\":\"succeeded\",\"stdout\":\"42\\n\",\"session_id\":\"ses_1\"}"),
                MockServer.Response.json(200, "{}"),
                MockServer.Response.json(200, "{\"id\":\"ses_1\",\"status\":\"ended\",\"end_reason\":\"deleted\"}")))) {
            Session x = client(s, 2).sandbox().sessions().create(Map.of("image", "python:3.11-slim"));
            try (x) {
                assertEquals(ses, x.id());
                x.writeFile("/tmp/a b.py", "print(6*7)".getBytes(StandardCharsets.UTF_8));
                assertEquals("print(6*7)", new String(x.readFile("/tmp/a b.py"), StandardCharsets.UTF_8));
                assertEquals("file", x.listFiles(null).get(0).path("type").asText());
                Execution ex = x.run(List.of("python3", "/tmp/a b.py"));
                assertEquals("42\n", ex.stdoutText());
                assertEquals(ses, ex.sessionId());
                x.deleteFile("/tmp/a b.py");
            }
            assertEquals("deleted", x.info().path("end_reason").asText());
            List<String> seen = new ArrayList<>();
            s.requests.forEach(r -> seen.add(r.method() + " " + r.path()));
            assertEquals(List.of("POST /v1/sandbox/sessions", "PUT /v1/sandbox/sessions/ses_1/files/tmp/a%20b.py",
                    "GET /v1/sandbox/sessions/ses_1/files/tmp/a%20b.py", "GET /v1/sandbox/sessions/ses_1/files",
                    "POST /v1/sandbox/sessions/ses_1/executions", "GET /v1/sandbox/executions/sbx_1",
                    "DELETE /v1/sandbox/sessions/ses_1/files/tmp/a%20b.py", "DELETE /v1/sandbox/sessions/ses_1"), seen);
            assertEquals("print(6*7)", s.requests.get(1).bodyText());
            assertEquals("application/octet-stream", s.requests.get(1).header("Content-Type"));
        }
    }

    @Test
    void sessionCreateIsNotRetriedAfterALostAnswer() throws Exception {
        try (MockServer s = new MockServer(r -> MockServer.DROP)) {
            assertThrows(ConnectionException.class,
                    () -> client(s, 3).sandbox().sessions().create(Map.of("image", "i")));
            assertEquals(1, s.requests.size());
        }
    }
}
