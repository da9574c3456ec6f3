package ai.enterprise.sdk;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;

/** Escaping of path segments and query values.  Package-private. */
final class Paths {
    private Paths() {
    }

    /** One path segment, RFC 3986 unreserved kept, everything else %-escaped. */
    static String segment(String s) {
        if (s == null || s.isEmpty()) {
            throw new IllegalArgumentException("empty path segment");
        }
        StringBuilder sb = new StringBuilder();
        for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
            int c = b & 0xff;
            if (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
                    || c == '-' || c == '.' || c == '_' || c == '~') {
                sb.append((char) c);
            } else {
                sb.append('%').append(Character.toUpperCase(Character.forDigit(c >> 4, 16)))
                        .append(Character.toUpperCase(Character.forDigit(c & 15, 16)));
            }
        }
        return sb.toString();
    }

    /** {@code base/files/a/b}: a file of a session's /tmp or of a volume, each segment escaped. */
    static String files(String base, String p) {
        StringBuilder sb = new StringBuilder(base).append("/files");
        for (String seg : p.split("/")) {
            if (!seg.isEmpty()) {
                sb.append('/').append(segment(seg));
            }
        }
        return sb.toString();
    }

    static String query(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
    }
}
