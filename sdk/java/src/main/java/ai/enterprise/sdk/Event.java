package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;

/**
 * One Server-Sent Event of {@code Sandbox.stream}: {@code type} is {@code status},
 * {@code stdout} or {@code stderr}; {@code data} the chunk's bytes (base64 chunks
 * decoded); {@code status} the status of a status event; {@code raw} its JSON data.
 */
public record Event(String type, String id, byte[] data, String status, JsonNode raw) {
    public boolean isTerminal() {
        return "status".equals(type) && Execution.isTerminal(status);
    }

    public String text() {
        return data == null ? "" : new String(data, StandardCharsets.UTF_8);
    }

    @Override
    public String toString() {
        return "Event{" + type + (status != null ? " " + status : "") + (data != null ? " " + data.length + " bytes" : "")
                + "}";
    }
}
