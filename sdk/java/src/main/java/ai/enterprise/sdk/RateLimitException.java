package ai.enterprise.sdk;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/** 429, after the retries were used up; {@link #retryAfter()} says when to come back. */
public class RateLimitException extends ApiException {
    private static final long serialVersionUID = 1L;

    public RateLimitException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, List<ErrorDetail> details, Duration retryAfter) {
        super(status, code, message, messageI18n, requestId, details, retryAfter);
    }
}
