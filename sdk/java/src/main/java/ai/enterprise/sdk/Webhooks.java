package ai.enterprise.sdk;

import java.nio.charset.StandardCharsets;
import java.security.InvalidKeyException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Completion callbacks (docs/executions.md "Completion callbacks"): eaid POSTs the summary of
 * a finished execution with {@code Eai-Event-Id} (the same on every retry: deduplicate on it)
 * and {@code Eai-Signature: t=<unix>,v1=<hex>}, HMAC-SHA-256(secret, {@code "<t>.<body>"}).
 */
public final class Webhooks {
    public static final String SIGNATURE_HEADER = "Eai-Signature";
    public static final String EVENT_ID_HEADER = "Eai-Event-Id";
    public static final Duration DEFAULT_TOLERANCE = Duration.ofSeconds(300);

    private Webhooks() {
    }

    private static byte[] mac(String secret, long t, byte[] body) {
        try {
            Mac m = Mac.getInstance("HmacSHA256");
            m.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
            m.update((t + ".").getBytes(StandardCharsets.US_ASCII));
            return m.doFinal(body);
        } catch (NoSuchAlgorithmException | InvalidKeyException e) {
            throw new EaiException("HMAC-SHA-256 unavailable", e);
        }
    }

    /** The header value eaid sends for {@code body} at {@code t} (for tests and tools). */
    public static String sign(String secret, long t, byte[] body) {
        return "t=" + t + ",v1=" + HexFormat.of().formatHex(mac(secret, t, body));
    }

    /** {@link #verifySignature(String, String, byte[], Duration)} with a 300 s tolerance. */
    public static boolean verifySignature(String secret, String header, byte[] body) {
        return verifySignature(secret, header, body, DEFAULT_TOLERANCE);
    }

    /**
     * True when {@code header} (the Eai-Signature value) signs {@code body} (the exact bytes
     * received) with {@code secret} and its {@code t} is within {@code tolerance} of the clock
     * (null or zero: no time check).  Constant-time; a malformed header is false.
     */
    public static boolean verifySignature(String secret, String header, byte[] body, Duration tolerance) {
        return verifyAt(secret, header, body, tolerance, Instant.now());
    }

    static boolean verifyAt(String secret, String header, byte[] body, Duration tolerance, Instant now) {
        if (secret == null || header == null || body == null) {
            return false;
        }
        long t = -1;
        List<byte[]> sigs = new ArrayList<>();
        for (String part : header.split(",")) {
            String p = part.strip();
            int i = p.indexOf('=');
            if (i < 0) {
                continue;
            }
            String k = p.substring(0, i);
            String v = p.substring(i + 1).strip();
            if (k.equals("t")) {
                if (!v.matches("[0-9]{1,18}")) {
                    return false;
                }
                t = Long.parseLong(v);
            } else if (k.equals("v1")) {
                try {
                    sigs.add(HexFormat.of().parseHex(v));
                } catch (IllegalArgumentException e) {
                    // not hex: ignored
                }
            }
        }
        if (t < 0 || sigs.isEmpty()) {
            return false;
        }
        if (tolerance != null && !tolerance.isZero() && !tolerance.isNegative()) {
            long d = Math.abs(now.getEpochSecond() - t);
            if (d > tolerance.getSeconds()) {
                return false;
            }
        }
        byte[] want = mac(secret, t, body);
        boolean ok = false;
        for (byte[] s : sigs) {
            ok |= MessageDigest.isEqual(want, s);
        }
        return ok;
    }
}
