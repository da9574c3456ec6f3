package ai.enterprise.sdk;

import java.time.Duration;

/**
 * {@code execute} or {@code wait} passed its overall timeout before the
 * execution ended.  {@code execute} has then asked the server to cancel it
 * ({@link #cancelled()} says whether that was accepted).
 */
public class ExecutionTimeoutException extends EaiException {
    private static final long serialVersionUID = 1L;
    private final String executionId;
    private final Duration timeout;
    private final String lastStatus;
    private final boolean cancelled;

    public ExecutionTimeoutException(String executionId, Duration timeout, String lastStatus, boolean cancelled) {
        super("execution " + executionId + " not finished after " + timeout + " (last status " + lastStatus + ")");
        this.executionId = executionId;
        this.timeout = timeout;
        this.lastStatus = lastStatus;
        this.cancelled = cancelled;
    }

    public String executionId() {
        return executionId;
    }

    public Duration timeout() {
        return timeout;
    }

    public String lastStatus() {
        return lastStatus;
    }

    public boolean cancelled() {
        return cancelled;
    }
}
