package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;

/** {@code client.manifests()}: tool manifests of the tenant. */
public final class Manifests {
    private final Transport t;

    Manifests(Transport t) {
        this.t = t;
    }

    /**
     * Validates and stores a manifest (Map/JsonNode as JSON, or YAML/JSON text); returns
     * {@code {kind, name, result: created|updated, manifest}}.  Schema errors throw
     * {@link ValidationException} with the error list in {@code details()}.
     */
    public JsonNode apply(Object manifest) {
        Transport.Req r = new Transport.Req("POST", "/v1/manifests/apply");
        Contracts.document(r, manifest);
        return t.json(r);
    }

    /** The manifest as applied ({@link NotFoundException} when absent). */
    public JsonNode get(String kind, String name) {
        return t.json(new Transport.Req("GET", path(kind, name)));
    }

    /** Deletes it: {@code {kind, name, result: deleted}} ({@link NotFoundException} when absent). */
    public JsonNode delete(String kind, String name) {
        return t.json(new Transport.Req("DELETE", path(kind, name)));
    }

    private static String path(String kind, String name) {
        return "/v1/manifests/" + Paths.segment(kind) + "/" + Paths.segment(name);
    }
}
