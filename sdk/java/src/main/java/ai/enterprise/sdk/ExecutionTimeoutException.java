package ai.enterprise.sdk;

import java.time.Duration;

/**
 * {@code execute} or {@code wait} passed its overall timeout before the
 * execution ended.  {@link #executionId()} names it (null when the create itself
 * did not finish in time); it is not cancelled: the caller decides.
 */
public class ExecutionTimeoutException extends EaiException {
    private static final long serialVersionUID = 1L;
    private final String executionId;
    private final Duration timeout;
    private final String lastStatus;

    public ExecutionTimeoutException(String executionId, Duration timeout, String lastStatus) {
        super("execution " + executionId + " not finished after " + timeout + " (last status " + lastStatus + ")");
        this.executionId = executionId;
        this.timeout = timeout;
        this.lastStatus = lastStatus;
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
}
