package ai.enterprise.sdk;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/** 409: already_finished, idempotency_conflict, conflict. */
public class ConflictException extends ApiException {
    private static final long serialVersionUID = 1L;

    public ConflictException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, List<ErrorDetail> details, Duration retryAfter) {
        super(status, code, message, messageI18n, requestId, details, retryAfter);
    }
}
