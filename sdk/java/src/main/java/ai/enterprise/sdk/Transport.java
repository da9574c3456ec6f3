package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Consumer;

/** HTTP engine: one logical call, retried as a whole.  Package-private. */
final class Transport {
    static final ObjectMapper JSON = new ObjectMapper();
    static final Duration BACKOFF_BASE = Duration.ofMillis(250);
    static final Duration BACKOFF_CAP = Duration.ofSeconds(8);
    static final Duration MAX_RETRY_AFTER = Duration.ofSeconds(60);

    interface Sleeper {
        void sleep(Duration d) throws InterruptedException;
    }

    final String base;
    final String key;
    final String language;
    final int maxRetries;
    final Duration maxRetryTime;
    final Duration requestTimeout;
    final Duration executeTimeout;
    final long maxResponseBytes;
    final HttpClient http;
    final Consumer<String> logger;
    final Sleeper sleeper;

    Transport(EnterpriseAIClient.Builder b, String base, String key) {
        this.base = base;
        this.key = key;
        this.language = b.language;
        this.maxRetries = b.maxRetries;
        this.maxRetryTime = b.maxRetryTime;
        this.requestTimeout = b.requestTimeout;
        this.executeTimeout = b.executeTimeout;
        this.maxResponseBytes = b.maxResponseBytes;
        this.http = b.httpClient != null ? b.httpClient
                : HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                        .connectTimeout(b.connectTimeout).followRedirects(HttpClient.Redirect.NEVER).build();
        if (b.logger != null) {
            this.logger = b.logger;
        } else {
            System.Logger sys = System.getLogger("ai.enterprise.sdk");
            this.logger = m -> sys.log(System.Logger.Level.DEBUG, m);
        }
        this.sleeper = b.sleeper != null ? b.sleeper : d -> Thread.sleep(d.toMillis());
    }

    /** Keeps the public key id ({@code eai_<key_id>_...}), hides the secret. */
    static String redact(String k) {
        if (k == null || k.isEmpty()) {
            return "(none)";
        }
        if (k.startsWith("eai_")) {
            int i = k.indexOf('_', 4);
            if (i > 4) {
                return k.substring(0, i) + "_[REDACTED]";
            }
        }
        return "[REDACTED]";
    }

    static String newIdempotencyKey() {
        return UUID.randomUUID().toString();
    }

    /** One logical request. */
    static final class Req {
        String method = "GET";
        String path;
        Map<String, String> query = new LinkedHashMap<>();
        byte[] body;
        String contentType = "application/json";
        String idempotencyKey;
        String accept = "application/json";
        Duration extraTimeout = Duration.ZERO;
        boolean stream;
        /** Last-Event-ID header (event streams), or null. */
        String lastEventId;
        /** A POST without Idempotency-Key: a connection error is not retried (the request may have
         * been done); 429 and 503 still are. */
        boolean noLostRetry;
        /** Error codes thrown at once, not retried here (the caller retries them its own way,
         * e.g. stdin_busy). */
        java.util.Set<String> callerCodes = java.util.Set.of();
        /** System.nanoTime() after which no attempt starts and a running one is cut (Long.MAX_VALUE: none). */
        long deadline = Long.MAX_VALUE;

        Req(String method, String path) {
            this.method = method;
            this.path = path;
        }
    }

    /** A 2xx answer: body bytes, or an open stream for stream requests. */
    record Resp(int status, HttpHeaders headers, byte[] body, InputStream stream) {
    }

    URI uri(Req r) {
        StringBuilder sb = new StringBuilder(base).append(r.path);
        char sep = '?';
        for (Map.Entry<String, String> e : r.query.entrySet()) {
            sb.append(sep).append(Paths.query(e.getKey())).append('=').append(Paths.query(e.getValue()));
            sep = '&';
        }
        return URI.create(sb.toString());
    }

    private HttpRequest build(Req r) {
        HttpRequest.Builder b = HttpRequest.newBuilder(uri(r))
                .header("Authorization", "Bearer " + key)
                .header("Accept", r.accept)
                .header("User-Agent", "eai-sdk-java/" + EnterpriseAIClient.VERSION);
        if (!r.stream) {
            Duration to = requestTimeout.plus(r.extraTimeout);
            if (r.deadline != Long.MAX_VALUE) {
                Duration left = Duration.ofNanos(Math.max(1_000_000L, r.deadline - System.nanoTime()));
                if (left.compareTo(to) < 0) {
                    to = left;
                }
            }
            b.timeout(to);
        }
        if (language != null && !language.isEmpty()) {
            b.header("Accept-Language", language);
        }
        if (r.idempotencyKey != null) {
            b.header("Idempotency-Key", r.idempotencyKey);
        }
        if (r.lastEventId != null) {
            b.header("Last-Event-ID", r.lastEventId);
        }
        if (r.body != null) {
            b.header("Content-Type", r.contentType);
            b.method(r.method, HttpRequest.BodyPublishers.ofByteArray(r.body));
        } else {
            b.method(r.method, HttpRequest.BodyPublishers.noBody());
        }
        return b.build();
    }

    /** Sends r, retrying on connection errors, 429 and 503; non-2xx answers throw the classified ApiException. */
    Resp send(Req r) {
        long start = System.nanoTime();
        EaiException last;
        for (int attempt = 0; ; attempt++) {
            if (r.deadline != Long.MAX_VALUE && System.nanoTime() >= r.deadline) {
                throw new DeadlineException(r.method + " " + r.path + ": deadline passed");
            }
            Duration retryAfter = Duration.ZERO;
            boolean retryable;
            try {
                Resp resp = once(r);
                if (resp.status() >= 200 && resp.status() < 300) {
                    return resp;
                }
                ApiException ae = envelope(resp);
                last = ae;
                retryAfter = ae.retryAfter();
                retryable = (resp.status() == 429 || resp.status() == 503) && !r.callerCodes.contains(ae.code());
            } catch (IOException e) {
                if (r.deadline != Long.MAX_VALUE && System.nanoTime() >= r.deadline) {
                    throw new DeadlineException(r.method + " " + r.path + ": deadline passed");
                }
                last = new ConnectionException(r.method + " " + r.path + ": connection failed after "
                        + (attempt + 1) + " attempt(s): " + describe(e), attempt + 1, e);
                retryable = !r.noLostRetry || e instanceof java.net.ConnectException;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new EaiException(r.method + " " + r.path + ": interrupted", e);
            }
            if (!retryable || attempt >= maxRetries) {
                throw last;
            }
            Duration delay = backoff(attempt);
            if (retryAfter.compareTo(delay) > 0) {
                delay = retryAfter;
            }
            Duration elapsed = Duration.ofNanos(System.nanoTime() - start);
            boolean pastDeadline = r.deadline != Long.MAX_VALUE
                    && System.nanoTime() + delay.toNanos() >= r.deadline;
            if (pastDeadline || elapsed.plus(delay).compareTo(maxRetryTime) > 0) {
                logger.accept("eai: " + r.method + " " + r.path + ": not retrying (" + shortText(last)
                        + "), retry budget " + maxRetryTime + " spent");
                throw last;
            }
            logger.accept("eai: " + r.method + " " + r.path + ": attempt " + (attempt + 1) + " failed ("
                    + shortText(last) + "); retrying in " + delay.toMillis() + " ms");
            try {
                sleeper.sleep(delay);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new EaiException(r.method + " " + r.path + ": interrupted", e);
            }
        }
    }

    /** The caller's own deadline (execute/wait timeout) passed: not a server or network failure. */
    static final class DeadlineException extends EaiException {
        private static final long serialVersionUID = 1L;

        DeadlineException(String m) {
            super(m);
        }
    }

    private static String describe(IOException e) {
        String m = e.getMessage();
        return e.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }

    private static String shortText(EaiException e) {
        if (e instanceof ApiException ae) {
            return ae.status() + " " + ae.code();
        }
        return e.getCause() != null ? e.getCause().getClass().getSimpleName() : e.getMessage();
    }

    /** Exponential (250 ms doubling, capped at 8 s) with equal jitter: half fixed, half random. */
    static Duration backoff(int attempt) {
        double d = BACKOFF_BASE.toNanos() * Math.pow(2, Math.min(attempt, 30));
        d = Math.min(d, BACKOFF_CAP.toNanos());
        double j = ThreadLocalRandom.current().nextDouble();
        return Duration.ofNanos((long) (d / 2 + j * d / 2));
    }

    private Resp once(Req r) throws IOException, InterruptedException {
        HttpResponse<InputStream> resp = http.send(build(r), HttpResponse.BodyHandlers.ofInputStream());
        int st = resp.statusCode();
        if (r.stream && st >= 200 && st < 300) {
            return new Resp(st, resp.headers(), null, resp.body());
        }
        try (InputStream in = resp.body()) {
            return new Resp(st, resp.headers(), readCapped(in, maxResponseBytes), null);
        }
    }

    static byte[] readCapped(InputStream in, long cap) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        byte[] buf = new byte[65536];
        long total = 0;
        int n;
        while ((n = in.read(buf)) > 0) {
            total += n;
            if (total > cap) { // not an IOException: the same answer again would not be smaller
                throw new EaiException("answer larger than " + cap + " bytes (maxResponseBytes)");
            }
            out.write(buf, 0, n);
        }
        return out.toByteArray();
    }

    static ApiException envelope(Resp resp) {
        int status = resp.status();
        String code = null;
        String message = null;
        Map<String, String> i18n = new LinkedHashMap<>();
        String requestId = null;
        List<ApiException.ErrorDetail> details = new ArrayList<>();
        try {
            JsonNode err = JSON.readTree(resp.body()).path("error");
            if (err.path("code").isTextual()) {
                code = err.path("code").asText();
                message = err.path("message").asText("");
                err.path("message_i18n").fields().forEachRemaining(e -> i18n.put(e.getKey(), e.getValue().asText()));
                requestId = err.path("request_id").isTextual() ? err.path("request_id").asText() : null;
                for (JsonNode d : err.path("details")) {
                    details.add(new ApiException.ErrorDetail(d.path("path").asText(""), d.path("message").asText("")));
                }
            }
        } catch (IOException | RuntimeException e) {
            code = null;
        }
        if (code == null) { // not our envelope: a proxy in between
            code = "http_" + status;
            message = "HTTP " + status;
        }
        if (requestId == null) {
            requestId = resp.headers().firstValue("X-Request-Id").orElse("");
        }
        return ApiException.of(status, code, message, i18n, requestId, details,
                retryAfter(resp.headers().firstValue("Retry-After").orElse("")));
    }

    /** Delta-seconds or an HTTP date, capped at 60 s. */
    static Duration retryAfter(String v) {
        v = v.strip();
        if (v.isEmpty()) {
            return Duration.ZERO;
        }
        Duration d;
        try {
            double s = Double.parseDouble(v);
            if (!(s >= 0)) {
                return Duration.ZERO;
            }
            d = Duration.ofMillis((long) (Math.min(s, MAX_RETRY_AFTER.toSeconds()) * 1000));
        } catch (NumberFormatException e) {
            try {
                ZonedDateTime t = ZonedDateTime.parse(v, DateTimeFormatter.RFC_1123_DATE_TIME);
                d = Duration.between(ZonedDateTime.now(t.getZone()), t);
            } catch (RuntimeException e2) {
                return Duration.ZERO;
            }
        }
        if (d.isNegative()) {
            return Duration.ZERO;
        }
        return d.compareTo(MAX_RETRY_AFTER) > 0 ? MAX_RETRY_AFTER : d;
    }

    JsonNode json(Req r) {
        Resp resp = send(r);
        try {
            return JSON.readTree(resp.body());
        } catch (IOException e) {
            throw new EaiException(r.method + " " + r.path + ": malformed answer", e);
        }
    }

    static byte[] encode(Object v) {
        try {
            return JSON.writeValueAsBytes(v);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot encode the request as JSON: " + e.getMessage(), e);
        }
    }
}
