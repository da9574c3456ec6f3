package ai.enterprise.sdk;

/**
 * The server could not be reached, or the connection broke before a complete
 * answer, after the retries were used up.
 */
public class ConnectionException extends EaiException {
    private static final long serialVersionUID = 1L;
    private final int attempts;

    public ConnectionException(String message, int attempts, Throwable cause) {
        super(message, cause);
        this.attempts = attempts;
    }

    public int attempts() {
        return attempts;
    }
}
