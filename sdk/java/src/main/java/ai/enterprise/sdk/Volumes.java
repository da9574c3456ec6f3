package ai.enterprise.sdk;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code client.volumes()}: disks of the tenant's, kept between executions and sessions on
 * the node that made them (docs/volumes.md).  A {@code ref} is a volume's id ({@code vol_...})
 * or its name.  Executions and sessions mount them with the API's {@code volumes} list in
 * their request map: {@code "volumes", List.of(Map.of("name", "notes", "path", "/mnt/notes"))}.
 *
 * <pre>{@code
 * client.volumes().create("notes", "64Mi");
 * client.volumes().writeFile("notes", "a.txt", "kept\n".getBytes(UTF_8));
 * byte[] b = client.volumes().readFile("notes", "a.txt");
 * client.volumes().delete("notes");
 * }</pre>
 */
public final class Volumes {
    private final Transport t;

    Volumes(Transport t) {
        this.t = t;
    }

    static String path(String ref) {
        if (ref == null || ref.isEmpty()) {
            throw new IllegalArgumentException("empty volume");
        }
        return "/v1/volumes/" + Paths.segment(ref);
    }

    private static String filePath(String ref, String p) {
        return Paths.files(path(ref), p);
    }

    /**
     * Makes a volume of {@code size} bytes (a {@code Long}/{@code Integer}) or a quantity ({@code "512Mi"});
     * answers once it is formatted and mounted.  A create whose answer was lost is not retried (a second one
     * answers 409 conflict).
     */
    public JsonNode create(String name, Object size) {
        Transport.Req r = new Transport.Req("POST", "/v1/volumes");
        ObjectNode body = Transport.JSON.createObjectNode();
        body.put("name", name);
        body.set("size_bytes", Transport.JSON.valueToTree(size));
        r.body = Transport.encode(body);
        r.noLostRetry = true;
        r.extraTimeout = Duration.ofSeconds(90);
        return t.json(r);
    }

    /** This tenant's volumes. */
    public List<JsonNode> list() {
        List<JsonNode> out = new ArrayList<>();
        t.json(new Transport.Req("GET", "/v1/volumes")).path("items").forEach(out::add);
        return out;
    }

    /** The volume with its {@code used_bytes} and {@code free_bytes}. */
    public JsonNode get(String ref) {
        return t.json(new Transport.Req("GET", path(ref)));
    }

    /** {@code {id, status: "deleted", usage}}; a {@link ConflictException} ({@code volume_in_use}) while held. */
    public JsonNode delete(String ref) {
        Transport.Req r = new Transport.Req("DELETE", path(ref));
        r.extraTimeout = Duration.ofSeconds(30);
        return t.json(r);
    }

    /** PUT a file (parents made), relative to the volume's root: {@code {path, size}}. */
    public JsonNode writeFile(String ref, String path, byte[] data) {
        Transport.Req r = new Transport.Req("PUT", filePath(ref, path));
        r.body = data;
        r.contentType = "application/octet-stream";
        return t.json(r);
    }

    public byte[] readFile(String ref, String path) {
        Transport.Req r = new Transport.Req("GET", filePath(ref, path));
        r.accept = "application/octet-stream";
        return t.send(r).body();
    }

    /** Files under {@code dir} (null: the whole volume), recursive: {@code {path, size, type}}. */
    public List<JsonNode> listFiles(String ref, String dir) {
        Transport.Req r = new Transport.Req("GET", path(ref) + "/files");
        if (dir != null) {
            r.query.put("path", dir);
        }
        List<JsonNode> out = new ArrayList<>();
        t.json(r).path("items").forEach(out::add);
        return out;
    }

    /** A file, a symlink or an empty directory. */
    public void deleteFile(String ref, String path) {
        t.send(new Transport.Req("DELETE", filePath(ref, path)));
    }
}
