package ai.enterprise.sdk;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/** 503 (sandbox_unavailable, storage_unavailable), after the retries were used up. */
public class UnavailableException extends ApiException {
    private static final long serialVersionUID = 1L;

    public UnavailableException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, List<ErrorDetail> details, Duration retryAfter) {
        super(status, code, message, messageI18n, requestId, details, retryAfter);
    }
}
