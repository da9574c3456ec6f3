package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.BinaryNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;

/** {@code client.sandbox()}: executions. */
public final class Sandbox {
    private static final int WAIT_S = 30;
    private final Transport t;
    private final Sessions sessions;

    Sandbox(Transport t) {
        this.t = t;
        this.sessions = new Sessions(t, this);
    }

    /** Sessions: one sandbox kept across several executions (docs/sessions.md). */
    public Sessions sessions() {
        return sessions;
    }

    /** Filter and page size of {@link #list}; null values are left out. */
    public record ListParams(String status, String runId, Integer limit, String after) {
        public static ListParams all() {
            return new ListParams(null, null, null, null);
        }
    }

    /** One page of {@link #listPage}; {@code next} is the cursor of the following page, or null. */
    public record Page(List<Execution> items, String next, JsonNode raw) {
    }

    // ---- execute: create, then wait with the long-poll, bounded by an overall timeout

    /**
     * The seed's call: creates the execution from the API body ({@code image}, {@code profile},
     * {@code command}, {@code limits}, ...) and waits for its end, within the client's execute
     * timeout.  Returns the finished execution's JSON whatever its status (check {@code status},
     * {@code exit_code}); {@code stdout}/{@code stderr} that came as base64 are
     * {@link BinaryNode}s ({@code binaryValue()} gives the bytes; {@link Execution#of} decodes both kinds).
     *
     * @throws ExecutionTimeoutException the timeout passed; it carries the execution id and the
     *     execution is not cancelled (the caller decides: {@link #cancel}, or {@link #wait} again)
     * @throws ApiException the server refused (e.g. {@link ValidationException})
     */
    public JsonNode execute(Map<String, ?> request) {
        return execute(request, t.executeTimeout);
    }

    /** {@link #execute(Map)} with its own overall timeout. */
    public JsonNode execute(Map<String, ?> request, Duration timeout) {
        return withBinary(run(body(request), null, timeout));
    }

    /** {@link #execute(Map, Duration)} with a given {@code Idempotency-Key} for its create. */
    public JsonNode execute(Map<String, ?> request, Duration timeout, String idempotencyKey) {
        return withBinary(run(body(request), idempotencyKey, timeout));
    }

    /** Typed form of {@link #execute(Map)}. */
    public Execution execute(ExecuteRequest request) {
        return execute(request, t.executeTimeout);
    }

    public Execution execute(ExecuteRequest request, Duration timeout) {
        return Execution.of(run(request.toJson(), request.idempotencyKey(), timeout));
    }

    private JsonNode run(ObjectNode body, String key, Duration timeout) {
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be > 0");
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        JsonNode created;
        try {
            created = createRaw(body, key, deadline);
        } catch (Transport.DeadlineException e) {
            throw new ExecutionTimeoutException(null, timeout, null);
        }
        String id = created.path("id").asText();
        String[] last = {created.path("status").asText()};
        JsonNode done = waitUntil(id, deadline, last);
        if (done != null) {
            return done;
        }
        throw new ExecutionTimeoutException(id, timeout, last[0]);
    }

    // ---- create / get / wait

    /**
     * Submits an execution and returns at once ({@code {id, status}}).  Always sends an
     * {@code Idempotency-Key} (a fresh UUID), reused by its retries.
     */
    public JsonNode create(Map<String, ?> request) {
        return createRaw(body(request), null, Long.MAX_VALUE);
    }

    /** {@link #create(Map)} with a given {@code Idempotency-Key}: repeating it returns the first execution. */
    public JsonNode create(Map<String, ?> request, String idempotencyKey) {
        return createRaw(body(request), idempotencyKey, Long.MAX_VALUE);
    }

    public Execution create(ExecuteRequest request) {
        return Execution.of(createRaw(request.toJson(), request.idempotencyKey(), Long.MAX_VALUE));
    }

    private JsonNode createRaw(ObjectNode body, String key, long deadline) {
        Transport.Req r = new Transport.Req("POST", "/v1/sandbox/executions");
        r.deadline = deadline;
        r.body = Transport.encode(body);
        r.idempotencyKey = key != null && !key.isEmpty() ? key : Transport.newIdempotencyKey();
        return t.json(r);
    }

    private static ObjectNode body(Map<String, ?> request) {
        if (request == null) {
            throw new IllegalArgumentException("null execution request");
        }
        return Transport.JSON.valueToTree(request);
    }

    /** Reads one execution. */
    public Execution get(String id) {
        return Execution.of(t.json(new Transport.Req("GET", execPath(id))));
    }

    /** Waits (long-poll) until the execution is terminal, without a time bound of its own. */
    public Execution wait(String id) {
        JsonNode n = waitUntil(id, Long.MAX_VALUE, new String[1]);
        return Execution.of(n);
    }

    /**
     * Waits until the execution is terminal, with the server's long-poll ({@code ?wait_s=30}
     * repeatedly, never a tight loop).
     *
     * @throws ExecutionTimeoutException when {@code timeout} passes first (nothing is cancelled)
     */
    public Execution wait(String id, Duration timeout) {
        String[] last = new String[1];
        JsonNode n = waitUntil(id, System.nanoTime() + timeout.toNanos(), last);
        if (n == null) {
            throw new ExecutionTimeoutException(id, timeout, last[0]);
        }
        return Execution.of(n);
    }

    /** Null when the deadline passed first. */
    private JsonNode waitUntil(String id, long deadline, String[] last) {
        String path = execPath(id);
        while (true) {
            long left = deadline == Long.MAX_VALUE ? Long.MAX_VALUE : deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            int w = (int) Math.max(1, Math.min(WAIT_S, left / 1_000_000_000L));
            Transport.Req r = new Transport.Req("GET", path);
            r.query.put("wait_s", Integer.toString(w));
            r.extraTimeout = Duration.ofSeconds(w);
            r.deadline = deadline;
            long began = System.nanoTime();
            JsonNode n;
            try {
                n = t.json(r);
            } catch (Transport.DeadlineException e) {
                return null; // our own deadline cut the long-poll short
            }
            String st = n.path("status").asText();
            last[0] = st;
            if (Execution.isTerminal(st)) {
                return n;
            }
            if (System.nanoTime() - began < 200_000_000L) { // answered at once: do not spin
                try {
                    long ms = deadline == Long.MAX_VALUE ? 500
                            : Math.max(0, Math.min(500, (deadline - System.nanoTime()) / 1_000_000L));
                    t.sleeper.sleep(Duration.ofMillis(ms));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new EaiException("wait interrupted", e);
                }
            }
        }
    }

    // ---- cancel / list / files / stream / profiles

    /**
     * Asks the server to stop an execution ({@code {id, status}}): queued ones are cancelled at once,
     * running ones soon after.  A finished one throws {@link ConflictException} ({@code already_finished}).
     */
    public Execution cancel(String id) {
        Transport.Req r = new Transport.Req("POST", execPath(id) + "/cancel");
        return Execution.of(t.json(r));
    }

    /**
     * Sends bytes to the stdin of a running execution created with {@code "stdin_mode": "stream"}
     * (a request map with that key); {@code eof} closes it after them (at most 1 MiB a call).
     * Answers {@code {id, written, eof, pending}}.  {@code stdin_busy} (429: the program is not
     * reading yet, or 1 MiB waits; nothing was taken) is retried until {@code timeout} has passed,
     * then thrown as {@link RateLimitException}; a broken connection is not retried (the bytes may
     * have reached the program).  See docs/executions.md "Input to a running program".
     */
    public JsonNode writeStdin(String id, byte[] data, boolean eof, Duration timeout) {
        long deadline = System.nanoTime() + (timeout == null ? Duration.ofSeconds(60) : timeout).toNanos();
        long delayMs = 20;
        for (;;) {
            Transport.Req r = new Transport.Req("POST", execPath(id) + "/stdin");
            r.body = data == null ? new byte[0] : data.clone();
            r.contentType = "application/octet-stream";
            r.noLostRetry = true;
            r.callerCodes = java.util.Set.of("stdin_busy");
            if (eof) {
                r.query.put("eof", "true");
            }
            try {
                return t.json(r);
            } catch (RateLimitException e) {
                if (!"stdin_busy".equals(e.code()) || System.nanoTime() + delayMs * 1_000_000L > deadline) {
                    throw e;
                }
            }
            try {
                t.sleeper.sleep(Duration.ofMillis(delayMs));
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new ConnectionException("interrupted while waiting for stdin room", 0, ie);
            }
            delayMs = Math.min(delayMs * 2, 500);
        }
    }

    /** {@link #writeStdin(String, byte[], boolean, Duration)} of UTF-8 text, waiting up to 60 s. */
    public JsonNode writeStdin(String id, String text) {
        return writeStdin(id, text.getBytes(java.nio.charset.StandardCharsets.UTF_8), false, null);
    }

    /** Closes the stdin of a running execution created with {@code "stdin_mode": "stream"}. */
    public JsonNode closeStdin(String id) {
        return writeStdin(id, new byte[0], true, null);
    }

    /** One page, newest first. */
    public Page listPage(ListParams p) {
        Transport.Req r = new Transport.Req("GET", "/v1/sandbox/executions");
        if (p.status() != null) {
            r.query.put("status", p.status());
        }
        if (p.runId() != null) {
            r.query.put("run_id", p.runId());
        }
        if (p.limit() != null) {
            r.query.put("limit", p.limit().toString());
        }
        if (p.after() != null) {
            r.query.put("after", p.after());
        }
        JsonNode n = t.json(r);
        List<Execution> items = new ArrayList<>();
        for (JsonNode it : n.path("items")) {
            items.add(Execution.of(it));
        }
        String next = n.path("next").isTextual() ? n.path("next").asText() : null;
        return new Page(List.copyOf(items), next, n);
    }

    /** Every execution matching {@code p}, fetched page after page as the iteration goes. */
    public Iterable<Execution> list(ListParams p) {
        return () -> new Iterator<>() {
            private Iterator<Execution> cur = List.<Execution>of().iterator();
            private String after = p.after();
            private boolean done;

            @Override
            public boolean hasNext() {
                while (!cur.hasNext() && !done) {
                    Page page = listPage(new ListParams(p.status(), p.runId(), p.limit(), after));
                    cur = page.items().iterator();
                    if (page.next() == null || page.next().isEmpty() || page.next().equals(after)) {
                        done = true;
                    }
                    after = page.next();
                }
                return cur.hasNext();
            }

            @Override
            public Execution next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                return cur.next();
            }
        };
    }

    /** The bytes of one collected file, by its path in the sandbox (e.g. {@code /tmp/outputs/result.json}). */
    public byte[] downloadFile(String id, String path) {
        StringBuilder p = new StringBuilder(execPath(id)).append("/files");
        int n = 0;
        for (String seg : path.split("/")) {
            if (!seg.isEmpty()) {
                p.append('/').append(Paths.segment(seg));
                n++;
            }
        }
        if (n == 0) {
            throw new IllegalArgumentException("empty file path");
        }
        Transport.Req r = new Transport.Req("GET", p.toString());
        r.accept = "*/*";
        return t.send(r).body();
    }

    /**
     * The execution's Server-Sent Events (output chunks and status changes) until the terminal
     * status.  Close it (try-with-resources) when leaving early.
     */
    public EventStream stream(String id) {
        return stream(id, null);
    }

    /**
     * The events after {@code lastEventId} (sent as {@code Last-Event-ID}; null: from the start).
     * The stream resumes by itself after a break (see {@link EventStream}).
     */
    public EventStream stream(String id, String lastEventId) {
        return new EventStream(t, execPath(id) + "/events", lastEventId);
    }

    /** The profiles this tenant may use ({@code {"profiles": [...]}}). */
    public JsonNode profiles() {
        return t.json(new Transport.Req("GET", "/v1/sandbox/profiles"));
    }

    static String execPath(String id) {
        if (id == null || id.isEmpty()) {
            throw new IllegalArgumentException("empty execution id");
        }
        return "/v1/sandbox/executions/" + Paths.segment(id);
    }

    /** Base64 streams as BinaryNode, so that {@code binaryValue()} gives the bytes. */
    static JsonNode withBinary(JsonNode n) {
        if (!(n instanceof ObjectNode o)) {
            return n;
        }
        for (String s : new String[] {"stdout", "stderr"}) {
            if ("base64".equals(Execution.text(o, s + "_encoding")) && o.path(s).isTextual()) {
                try {
                    o.set(s, BinaryNode.valueOf(Base64.getDecoder().decode(o.path(s).asText())));
                } catch (IllegalArgumentException e) {
                    throw new EaiException("malformed base64 in " + s, e);
                }
            }
        }
        return o;
    }
}
