package ai.enterprise.sdk;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/** The request itself is wrong (400, 413, 415, 422); {@link #details()} says where. */
public class ValidationException extends ApiException {
    private static final long serialVersionUID = 1L;

    public ValidationException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, List<ErrorDetail> details, Duration retryAfter) {
        super(status, code, message, messageI18n, requestId, details, retryAfter);
    }
}
