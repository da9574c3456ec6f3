package ai.enterprise.sdk;

import java.net.URI;
import java.net.http.HttpClient;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * Client of the eai-sandbox API (docs/api.md), as in the seed:
 *
 * <pre>{@code
 * EnterpriseAIClient client = EnterpriseAIClient.builder()
 *     .baseUrl("http://127.0.0.1:8080")
 *     .apiKey(System.getenv("EAI_API_KEY"))
 *     .build();
 * JsonNode ex = client.sandbox().execute(Map.of("image", "python:3.12-slim",
 *     "command", List.of("python", "-c", "print(1)"), "profile", "gvisor"));
 * }</pre>
 *
 * Thread-safe.  Requests are retried with exponential backoff and jitter on
 * connection errors, 429 and 503 (honouring {@code Retry-After}), bounded in
 * count and time; creates always carry an {@code Idempotency-Key}.  The API key
 * never appears in {@link #toString()}, exceptions or logs.
 */
public final class EnterpriseAIClient {
    public static final String VERSION = "0.1.0";
    public static final String DEFAULT_BASE_URL = "http://127.0.0.1:8080";

    private final Transport transport;
    private final Sandbox sandbox;
    private final Contracts contracts;
    private final Manifests manifests;
    private final Volumes volumes;
    private final Agent agent;

    private EnterpriseAIClient(Transport t) {
        this.transport = t;
        this.sandbox = new Sandbox(t);
        this.contracts = new Contracts(t);
        this.manifests = new Manifests(t);
        this.volumes = new Volumes(t);
        this.agent = new Agent(t, sandbox);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Executions. */
    public Sandbox sandbox() {
        return sandbox;
    }

    /** Contract validation. */
    public Contracts contracts() {
        return contracts;
    }

    /** Tool manifests. */
    public Manifests manifests() {
        return manifests;
    }

    /** The tenant's volumes (docs/volumes.md). */
    public Volumes volumes() {
        return volumes;
    }

    /** The agent view: {@code agent().agents()}, {@code agent().runs()}, {@code agent().sessions()}. */
    public Agent agent() {
        return agent;
    }

    public String baseUrl() {
        return transport.base;
    }

    /** Never shows the secret part of the key. */
    @Override
    public String toString() {
        return "EnterpriseAIClient{baseUrl=" + transport.base + ", apiKey=" + Transport.redact(transport.key)
                + ", language=" + transport.language + "}";
    }

    /** Builder; {@code baseUrl} defaults to {@code $EAI_URL}, {@code apiKey} to {@code $EAI_API_KEY}. */
    public static final class Builder {
        String baseUrl;
        String apiKey;
        String language;
        int maxRetries = 5;
        Duration maxRetryTime = Duration.ofSeconds(60);
        Duration requestTimeout = Duration.ofSeconds(30);
        Duration connectTimeout = Duration.ofSeconds(10);
        Duration executeTimeout = Duration.ofMinutes(10);
        long maxResponseBytes = 256L << 20;
        HttpClient httpClient;
        Consumer<String> logger;
        Transport.Sleeper sleeper;

        private Builder() {
        }

        /** Control plane URL, {@code http(s)://host[:port][/prefix]}. */
        public Builder baseUrl(String v) {
            this.baseUrl = v;
            return this;
        }

        public Builder apiKey(String v) {
            this.apiKey = v;
            return this;
        }

        /** {@code en} or {@code fr}, sent as {@code Accept-Language}: error messages come back in it. */
        public Builder language(String v) {
            this.language = v;
            return this;
        }

        /** At most {@code n} retries after the first attempt (0..100, default 5). */
        public Builder maxRetries(int n) {
            if (n < 0 || n > 100) {
                throw new IllegalArgumentException("maxRetries must be 0..100");
            }
            this.maxRetries = n;
            return this;
        }

        /** No retry starts whose wait would end later than this after the first attempt (default 60 s). */
        public Builder maxRetryTime(Duration d) {
            this.maxRetryTime = nonNegative(d, "maxRetryTime");
            return this;
        }

        /** Bound of each HTTP attempt (default 30 s; long-polls get their wait on top). */
        public Builder requestTimeout(Duration d) {
            this.requestTimeout = positive(d, "requestTimeout");
            return this;
        }

        /** Default overall timeout of {@code execute} (default 10 min). */
        public Builder executeTimeout(Duration d) {
            this.executeTimeout = positive(d, "executeTimeout");
            return this;
        }

        /** Cap of one answer read into memory (default 256 MiB). */
        public Builder maxResponseBytes(long n) {
            if (n <= 0) {
                throw new IllegalArgumentException("maxResponseBytes must be > 0");
            }
            this.maxResponseBytes = n;
            return this;
        }

        /** Replace the HTTP client (HTTP/1.1 recommended). */
        public Builder httpClient(HttpClient c) {
            this.httpClient = Objects.requireNonNull(c);
            return this;
        }

        /**
         * Where retry notes go (method, path, status, delay: never headers, bodies or the key);
         * default: {@link System.Logger} {@code ai.enterprise.sdk} at DEBUG.
         */
        public Builder logger(Consumer<String> l) {
            this.logger = l;
            return this;
        }

        Builder sleeper(Transport.Sleeper s) {
            this.sleeper = s;
            return this;
        }

        private static Duration positive(Duration d, String what) {
            if (d == null || d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException(what + " must be > 0");
            }
            return d;
        }

        private static Duration nonNegative(Duration d, String what) {
            if (d == null || d.isNegative()) {
                throw new IllegalArgumentException(what + " must be >= 0");
            }
            return d;
        }

        /**
         * Builds the client.
         *
         * @throws IllegalArgumentException on a malformed base URL or a missing key
         */
        public EnterpriseAIClient build() {
            String url = baseUrl != null ? baseUrl : System.getenv("EAI_URL");
            if (url == null || url.isBlank()) {
                url = DEFAULT_BASE_URL;
            }
            String key = apiKey != null ? apiKey : System.getenv("EAI_API_KEY");
            key = key == null ? "" : key.strip();
            if (key.isEmpty()) {
                throw new IllegalArgumentException("no API key (apiKey(...) or EAI_API_KEY)");
            }
            if (!key.chars().allMatch(ch -> ch > 0x20 && ch < 0x7f)) {
                throw new IllegalArgumentException("malformed API key");
            }
            if (language != null && !language.chars().allMatch(ch -> ch >= 0x20 && ch < 0x7f)) {
                throw new IllegalArgumentException("malformed language");
            }
            return new EnterpriseAIClient(new Transport(this, normalise(url), key));
        }

        private static String normalise(String url) {
            URI u;
            try {
                u = new URI(url.strip());
            } catch (Exception e) {
                throw new IllegalArgumentException("invalid base URL");
            }
            String scheme = u.getScheme();
            if (!"http".equals(scheme) && !"https".equals(scheme) || u.getHost() == null) {
                throw new IllegalArgumentException("base URL must be http(s)://host[:port][/prefix]");
            }
            if (u.getRawUserInfo() != null) {
                throw new IllegalArgumentException("base URL must not carry credentials");
            }
            String path = u.getRawPath() == null ? "" : u.getRawPath().replaceAll("/+$", "");
            return scheme + "://" + u.getRawAuthority() + path;
        }

        @Override
        public String toString() {
            return "EnterpriseAIClient.Builder{baseUrl=" + baseUrl + ", apiKey=" + Transport.redact(apiKey) + "}";
        }
    }
}
