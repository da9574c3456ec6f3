package ai.enterprise.sdk;

import java.time.Duration;
import java.util.List;
import java.util.Map;

/** Any other 5xx. */
public class ServerException extends ApiException {
    private static final long serialVersionUID = 1L;

    public ServerException(int status, String code, String message, Map<String, String> messageI18n,
            String requestId, List<ErrorDetail> details, Duration retryAfter) {
        super(status, code, message, messageI18n, requestId, details, retryAfter);
    }
}
