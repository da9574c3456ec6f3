package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/** {@code client.contracts()}: validate documents against the server's contracts. */
public final class Contracts {
    private final Transport t;

    Contracts(Transport t) {
        this.t = t;
    }

    /** Answer of {@link #validate}. */
    public record ValidationResult(boolean valid, List<ApiException.ErrorDetail> errors, JsonNode raw) {
    }

    /**
     * Validates {@code document} (a Map/JsonNode/record as JSON, or a String of YAML or JSON) against
     * the contract {@code name} ({@code tool-manifest}, {@code sandbox-execution}).  An invalid document
     * is a result, not an exception.
     */
    public ValidationResult validate(String name, Object document) {
        Transport.Req r = new Transport.Req("POST", "/v1/contracts/" + Paths.segment(name) + "/validate");
        document(r, document);
        JsonNode n = t.json(r);
        List<ApiException.ErrorDetail> errors = new ArrayList<>();
        for (JsonNode e : n.path("errors")) {
            errors.add(new ApiException.ErrorDetail(e.path("path").asText(""), e.path("message").asText("")));
        }
        return new ValidationResult(n.path("valid").asBoolean(false), List.copyOf(errors), n);
    }

    /** Sets the body: a String is sent as is (YAML unless it starts with '{'), anything else as JSON. */
    static void document(Transport.Req r, Object document) {
        if (document == null) {
            throw new IllegalArgumentException("null document");
        }
        if (document instanceof String s) {
            r.body = s.getBytes(StandardCharsets.UTF_8);
            r.contentType = s.strip().startsWith("{") ? "application/json" : "application/yaml";
        } else {
            r.body = Transport.encode(document);
        }
    }
}
