package ai.enterprise.sdk;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * A real HTTP/1.1 server on loopback, one request per connection, written on a
 * raw socket so a test can also drop the connection without an answer.
 */
final class MockServer implements AutoCloseable {
    record Request(String method, String target, Map<String, String> headers, byte[] body) {
        String header(String name) {
            return headers.get(name.toLowerCase(Locale.ROOT));
        }

        String path() {
            int q = target.indexOf('?');
            return q < 0 ? target : target.substring(0, q);
        }

        String query() {
            int q = target.indexOf('?');
            return q < 0 ? "" : target.substring(q + 1);
        }

        String bodyText() {
            return new String(body, StandardCharsets.UTF_8);
        }
    }

    /** An answer; {@link #DROP} closes the connection without one; {@code chunks} are flushed with a pause. */
    record Response(int status, Map<String, String> headers, List<byte[]> chunks, long pauseMs) {
        static Response json(int status, String body) {
            return new Response(status, Map.of("Content-Type", "application/json"),
                    List.of(body.getBytes(StandardCharsets.UTF_8)), 0);
        }

        static Response error(int status, String code, String message, String en, String fr, String extraHeader) {
            Map<String, String> h = new LinkedHashMap<>();
            h.put("Content-Type", "application/json");
            if (extraHeader != null) {
                h.put(extraHeader.substring(0, extraHeader.indexOf(':')),
                        extraHeader.substring(extraHeader.indexOf(':') + 1).strip());
            }
            String body = "{\"error\":{\"code\":\"" + code + "\",\"message\":\"" + message
                    + "\",\"message_i18n\":{\"en\":\"" + en + "\",\"fr\":\"" + fr
                    + "\"},\"request_id\":\"rid-7\",\"details\":[{\"path\":\"/limits/memory\",\"message\":\"bad\"}]}}";
            return new Response(status, h, List.of(body.getBytes(StandardCharsets.UTF_8)), 0);
        }
    }

    static final Response DROP = new Response(-1, Map.of(), List.of(), 0);

    private final ServerSocket server;
    private final Function<Request, Response> handler;
    final List<Request> requests = Collections.synchronizedList(new ArrayList<>());
    private final Thread acceptor;

    MockServer(Function<Request, Response> handler) throws IOException {
        this.server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        this.handler = handler;
        this.acceptor = new Thread(this::acceptLoop, "mock-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    String url() {
        return "http://127.0.0.1:" + server.getLocalPort();
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket s = server.accept();
                Thread th = new Thread(() -> serve(s), "mock-conn");
                th.setDaemon(true);
                th.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    private static String line(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != -1 && c != '\n') {
            b.write(c);
        }
        if (c == -1 && b.size() == 0) {
            return null;
        }
        return b.toString(StandardCharsets.ISO_8859_1).replaceAll("\r$", "");
    }

    private void serve(Socket s) {
        try (s) {
            InputStream in = s.getInputStream();
            String start = line(in);
            if (start == null || start.isEmpty()) {
                return;
            }
            String[] parts = start.split(" ");
            Map<String, String> headers = new LinkedHashMap<>();
            String l;
            while ((l = line(in)) != null && !l.isEmpty()) {
                int i = l.indexOf(':');
                headers.put(l.substring(0, i).strip().toLowerCase(Locale.ROOT), l.substring(i + 1).strip());
            }
            int len = Integer.parseInt(headers.getOrDefault("content-length", "0"));
            byte[] body = in.readNBytes(len);
            Request req = new Request(parts[0], parts[1], headers, body);
            requests.add(req);
            Response resp = handler.apply(req);
            if (resp == DROP) {
                return; // closed without an answer: a lost response
            }
            OutputStream out = s.getOutputStream();
            StringBuilder h = new StringBuilder("HTTP/1.1 " + resp.status() + " X\r\nConnection: close\r\n");
            resp.headers().forEach((k, v) -> h.append(k).append(": ").append(v).append("\r\n"));
            boolean streaming = resp.chunks().size() > 1 || resp.pauseMs() > 0;
            if (!streaming) {
                int n = resp.chunks().isEmpty() ? 0 : resp.chunks().get(0).length;
                h.append("Content-Length: ").append(n).append("\r\n");
            }
            h.append("\r\n");
            out.write(h.toString().getBytes(StandardCharsets.ISO_8859_1));
            out.flush();
            for (byte[] c : resp.chunks()) {
                if (resp.pauseMs() > 0) {
                    Thread.sleep(resp.pauseMs());
                }
                out.write(c);
                out.flush();
            }
        } catch (IOException | InterruptedException | RuntimeException e) {
            // the client went away: fine for a mock
        }
    }

    @Override
    public void close() throws IOException {
        server.close();
    }
}
