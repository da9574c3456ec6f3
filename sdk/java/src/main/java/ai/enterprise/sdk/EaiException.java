package ai.enterprise.sdk;

/**
 * Base of every exception of the SDK (unchecked).  Messages never contain the
 * API key.
 */
public class EaiException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public EaiException(String message) {
        super(message);
    }

    public EaiException(String message, Throwable cause) {
        super(message, cause);
    }
}
