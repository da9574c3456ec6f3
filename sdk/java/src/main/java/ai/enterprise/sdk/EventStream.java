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
 * A stream that ends before the terminal status throws {@link ConnectionException}
 * from {@code hasNext}; it is not resumed (the server would replay the output).
 */
public final class EventStream implements Iterator<Event>, Iterable<Event>, AutoCloseable {
    static final int MAX_EVENT_BYTES = 16 << 20;
    private final InputStream in;
    private final String path;
    private Event next;
    private boolean done;

    EventStream(InputStream in, String path) {
        this.in = new java.io.BufferedInputStream(in, 65536);
        this.path = path;
    }

    @Override
    public Iterator<Event> iterator() {
        return this;
    }

    @Override
    public boolean hasNext() {
        if (next != null) {
            return true;
        }
        if (done) {
            return false;
        }
        try {
            next = read();
        } catch (IOException e) {
            close();
            throw new ConnectionException("GET " + path + ": event stream broke: " + e.getMessage(), 1, e);
        }
        if (next == null) {
            close();
            throw new ConnectionException("GET " + path + ": event stream ended before the terminal status", 1, null);
        }
        if (next.isTerminal()) {
            done = true;
            close();
        }
        return true;
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
                case "id" -> id = value;
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
        try {
            in.close();
        } catch (IOException e) {
            // closing a broken stream: nothing to do
        }
    }
}
