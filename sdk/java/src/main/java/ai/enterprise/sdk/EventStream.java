package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * Server-Sent Events of one execution, ending after the terminal status event.
 *
 * <pre>{@code
 * try (EventStream events = client.sandbox().stream(id)) {
 *     for (Event ev : events) { ... }
 * }
 * }</pre>
 *
 Resumable: the stream remembers the last event {@code id} and, when the connection breaks
 * (or ends) before the terminal status, reconnects with {@code Last-Event-ID}, so each event
 * is seen exactly once.  Reconnects back off like retries, at most {@code maxRetries} in a
 * row without a new event (and {@code maxRetryTime}); then {@code hasNext} throws
 * {@link ConnectionException}.  A stream whose events carry no id is not resumed (a
 * reconnect would replay it).  {@code : ping} comments are skipped; a {@code 204} (nothing
 * after the given id) ends the stream.
 */
public final class EventStream implements Iterator<Event>, Iterable<Event>, AutoCloseable {
    static final int MAX_EVENT_BYTES = 16 << 20;
    private final Transport t;
    private final String path;
    private InputStream in;
    private String lastId;
    private Event next;
    private boolean done;
    private int fails;
    private long tFail;

    EventStream(Transport t, String path, String lastEventId) {
        this.t = t;
        this.path = path;
        this.lastId = lastEventId;
        open();
    }

    private void open() {
        Transport.Req r = new Transport.Req("GET", path);
        r.accept = "text/event-stream";
        r.stream = true;
        r.lastEventId = lastId;
        Transport.Resp resp = t.send(r);
        if (resp.status() == 204) {
            done = true;
            if (resp.stream() != null) {
                try {
                    resp.stream().close();
                } catch (IOException e) {
                    // nothing to read anyway
                }
            }
            return;
        }
        this.in = new java.io.BufferedInputStream(resp.stream(), 65536);
    }

    /** The id of the last event read (the resume point), or the one given, or null. */
    public String lastEventId() {
        return lastId;
    }

    @Override
    public Iterator<Event> iterator() {
        return this;
    }

    @Override
    public boolean hasNext() {
        while (true) {
            if (next != null) {
                return true;
            }
            if (done) {
                return false;
            }
            IOException broke = null;
            try {
                next = read();
            } catch (IOException e) {
                broke = e;
            }
            if (next != null) {
                if (next.id() != null) {
                    lastId = next.id();
                }
                fails = 0;
                if (next.isTerminal()) {
                    done = true;
                    close();
                }
                return true;
            }
            close();
            String why = broke != null ? "event stream broke: " + broke.getMessage()
                    : "event stream ended before the terminal status";
            ConnectionException ce = new ConnectionException("GET " + path + ": " + why, fails + 1, broke);
            if (lastId == null) {
                throw ce;
            }
            if (fails == 0) {
                tFail = System.nanoTime();
            }
            java.time.Duration delay = Transport.backoff(fails);
            java.time.Duration elapsed = java.time.Duration.ofNanos(System.nanoTime() - tFail);
            if (fails >= t.maxRetries || elapsed.plus(delay).compareTo(t.maxRetryTime) > 0) {
                throw ce;
            }
            t.logger.accept("eai: GET " + path + ": stream broke after id " + lastId + "; resuming in "
                    + delay.toMillis() + " ms");
            try {
                t.sleeper.sleep(delay);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new EaiException("GET " + path + ": interrupted", e);
            }
            fails++;
            open();
        }
    }

    @Override
    public Event next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        Event e = next;
        next = null;
        return e;
    }

    private String readLine() throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != -1) {
            if (c == '\n') {
                break;
            }
            if (b.size() >= MAX_EVENT_BYTES) {
                throw new IOException("event larger than 16 MiB");
            }
            b.write(c);
        }
        if (c == -1 && b.size() == 0) {
            return null;
        }
        String s = b.toString(StandardCharsets.UTF_8);
        return s.endsWith("\r") ? s.substring(0, s.length() - 1) : s;
    }

    private Event read() throws IOException {
        String type = null;
        String id = null;
        StringBuilder data = null;
        String line;
        while ((line = readLine()) != null) {
            if (line.isEmpty()) {
                if (type == null && data == null) {
                    continue;
                }
                return event(type, id, data == null ? "" : data.toString());
            }
            if (line.startsWith(":")) {
                continue;
            }
            int i = line.indexOf(':');
            String field = i < 0 ? line : line.substring(0, i);
            String value = i < 0 ? "" : line.substring(i + 1);
            if (value.startsWith(" ")) {
                value = value.substring(1);
            }
            switch (field) {
                case "event" -> type = value;
                case "id" -> {
                    if (value.indexOf('\0') < 0) {
                        id = value;
                    }
                }
                case "data" -> {
                    if (data == null) {
                        data = new StringBuilder();
                    } else {
                        data.append('\n');
                    }
                    data.append(value);
                    if (data.length() > MAX_EVENT_BYTES) {
                        throw new IOException("event larger than 16 MiB");
                    }
                }
                default -> {
                }
            }
        }
        return null;
    }

    private static Event event(String type, String id, String data) {
        if (type == null) {
            type = "message";
        }
        JsonNode raw;
        try {
            raw = Transport.JSON.readTree(data);
        } catch (IOException e) {
            return new Event(type, id, data.getBytes(StandardCharsets.UTF_8), null, null);
        }
        if (raw == null || !raw.isObject()) {
            return new Event(type, id, data.getBytes(StandardCharsets.UTF_8), null, raw);
        }
        String status = raw.path("status").isTextual() ? raw.path("status").asText() : null;
        byte[] bytes = null;
        if (raw.path("data").isTextual()) {
            String d = raw.path("data").asText();
            if ("base64".equals(raw.path("encoding").asText())) {
                try {
                    bytes = Base64.getDecoder().decode(d);
                } catch (IllegalArgumentException e) {
                    throw new EaiException("malformed base64 in event", e);
                }
            } else {
                bytes = d.getBytes(StandardCharsets.UTF_8);
            }
        }
        return new Event(type, id, bytes, status, raw);
    }

    @Override
    public void close() {
        if (in == null) {
            return;
        }
        try {
            in.close();
        } catch (IOException e) {
            // closing a broken stream: nothing to do
        }
    }
}
