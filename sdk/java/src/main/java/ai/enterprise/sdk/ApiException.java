package ai.enterprise.sdk;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * A non-2xx answer of the server: the error envelope plus the HTTP status.
 * The exception thrown is one subclass per class of error a caller handles
 * differently ({@link AuthenticationException}, {@link NotFoundException},
 * {@link ValidationException}, {@link ConflictException},
 * {@link RateLimitException}, {@link UnavailableException},
 * {@link ServerException}); catch {@code ApiException} for all of them.
 */
public class ApiException extends EaiException {
    private static final long serialVersionUID = 1L;

    /** One entry of {@code details}: a JSON pointer and what is wrong there. */
    public record ErrorDetail(String path, String message) {
    }

    private final int status;
    private final String code;
    private final String serverMessage;
    private final Map<String, String> messageI18n;
    private final String requestId;
    private final List<ErrorDetail> details;
    private final Duration retryAfter;

    public ApiException(int status, String code, String message, Map<String, String> messageI18n,
                        String requestId, List<ErrorDetail> details, Duration retryAfter) {
        super(describe(status, code, message, requestId, details));
        this.status = status;
        this.code = code;
        this.serverMessage = message;
        this.messageI18n = Map.copyOf(messageI18n);
        this.requestId = requestId;
        this.details = List.copyOf(details);
        this.retryAfter = retryAfter;
    }

    private static String describe(int status, String code, String message, String requestId,
                                   List<ErrorDetail> details) {
        StringBuilder sb = new StringBuilder();
        sb.append(status).append(' ').append(code).append(": ").append(message);
        int n = 0;
        for (ErrorDetail d : details) {
            if (n++ == 5) {
                sb.append(" (+").append(details.size() - 5).append(" more)");
                break;
            }
            sb.append("; ").append(d.path()).append(": ").append(d.message());
        }
        if (requestId != null && !requestId.isEmpty()) {
            sb.append(" (request ").append(requestId).append(')');
        }
        return sb.toString();
    }

    /** HTTP status. */
    public int status() {
        return status;
    }

    /** Stable error code (docs/errors.md), e.g. {@code not_found}. */
    public String code() {
        return code;
    }

    /** The server's message, in the language asked for ({@code Accept-Language}). */
    public String serverMessage() {
        return serverMessage;
    }

    /** The message in both languages ({@code en}, {@code fr}). */
    public Map<String, String> messageI18n() {
        return messageI18n;
    }

    public String requestId() {
        return requestId;
    }

    public List<ErrorDetail> details() {
        return details;
    }

    /** The server's {@code Retry-After}, {@link Duration#ZERO} when absent. */
    public Duration retryAfter() {
        return retryAfter;
    }

    static ApiException of(int status, String code, String message, Map<String, String> i18n,
                           String requestId, List<ErrorDetail> details, Duration retryAfter) {
        if (status == 401 || status == 403) {
            return new AuthenticationException(status, code, message, i18n, requestId, details, retryAfter);
        } else if (status == 404) {
            return new NotFoundException(status, code, message, i18n, requestId, details, retryAfter);
        } else if (status == 400 || status == 413 || status == 415 || status == 422) {
            return new ValidationException(status, code, message, i18n, requestId, details, retryAfter);
        } else if (status == 409) {
            return new ConflictException(status, code, message, i18n, requestId, details, retryAfter);
        } else if (status == 429) {
            return new RateLimitException(status, code, message, i18n, requestId, details, retryAfter);
        } else if (status == 503) {
            return new UnavailableException(status, code, message, i18n, requestId, details, retryAfter);
        } else if (status >= 500) {
            return new ServerException(status, code, message, i18n, requestId, details, retryAfter);
        }
        return new ApiException(status, code, message, i18n, requestId, details, retryAfter);
    }
}
