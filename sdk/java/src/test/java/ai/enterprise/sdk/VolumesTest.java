package ai.enterprise.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** client.volumes() against the scripted local server: the requests on the wire, and the errors. */
class VolumesTest {
    static EnterpriseAIClient client(MockServer s) {
        return EnterpriseAIClient.builder().baseUrl(s.url()).apiKey(ClientTest.KEY).maxRetries(2)
                .logger(m -> { }).sleeper(d -> { }).build();
    }

    @Test
    void lifecycleFilesAndMounts() throws Exception {
        try (MockServer s = new MockServer(ResumeCallbackTest.script(null,
                MockServer.Response.json(201, "{\"id\":\"vol_1\",\"name\":\"notes\",\"size_bytes\":67108864,\"status\":\"ready\"}"),
                MockServer.Response.json(201, "{\"id\":\"ses_1\",\"status\":\"running\"}"),
                MockServer.Response.json(200, "{\"path\":\"a b.txt\",\"size\":5}"),
                new MockServer.Response(200, Map.of(), List.of("kept\n".getBytes(StandardCharsets.UTF_8)), 0),
                MockServer.Response.json(200, "{\"items\":[{\"path\":\"/a b.txt\",\"size\":5,\"type\":\"file\"}]}"),
                MockServer.Response.json(200, "{}"),
                MockServer.Response.json(200, "{\"items\":[{\"id\":\"vol_1\",\"name\":\"notes\"}]}"),
                MockServer.Response.json(200, "{\"id\":\"vol_1\",\"used_bytes\":1000,\"free_bytes\":2000}"),
                MockServer.Response.json(200, "{\"id\":\"vol_1\",\"status\":\"deleted\"}")))) {
            EnterpriseAIClient c = client(s);
            assertEquals("vol_1", c.volumes().create("notes", "64Mi").path("id").asText());
            c.sandbox().sessions().create(Map.of("image", "python:3.11-slim",
                    "volumes", List.of(Map.of("name", "notes", "path", "/mnt/in", "read_only", true))));
            c.volumes().writeFile("notes", "a b.txt", "kept\n".getBytes(StandardCharsets.UTF_8));
            assertEquals("kept\n", new String(c.volumes().readFile("notes", "a b.txt"), StandardCharsets.UTF_8));
            assertEquals("/a b.txt", c.volumes().listFiles("notes", null).get(0).path("path").asText());
            c.volumes().deleteFile("notes", "a b.txt");
            assertEquals("notes", c.volumes().list().get(0).path("name").asText());
            assertEquals(2000, c.volumes().get("notes").path("free_bytes").asLong());
            assertEquals("deleted", c.volumes().delete("vol_1").path("status").asText());
            List<String> seen = new ArrayList<>();
            s.requests.forEach(r -> seen.add(r.method() + " " + r.path()));
            assertEquals(List.of("POST /v1/volumes", "POST /v1/sandbox/sessions", "PUT /v1/volumes/notes/files/a%20b.txt",
                    "GET /v1/volumes/notes/files/a%20b.txt", "GET /v1/volumes/notes/files",
                    "DELETE /v1/volumes/notes/files/a%20b.txt", "GET /v1/volumes", "GET /v1/volumes/notes",
                    "DELETE /v1/volumes/vol_1"), seen);
            JsonNode create = Transport.JSON.readTree(s.requests.get(0).bodyText());
            assertEquals("notes", create.path("name").asText());
            assertEquals("64Mi", create.path("size_bytes").asText());
            JsonNode ses = Transport.JSON.readTree(s.requests.get(1).bodyText());
            assertEquals("/mnt/in", ses.path("volumes").get(0).path("path").asText());
            assertEquals(true, ses.path("volumes").get(0).path("read_only").asBoolean());
            assertEquals("kept\n", s.requests.get(2).bodyText());
        }
    }

    @Test
    void createIsNotRetriedAfterALostAnswerAndAHeldDeleteIsAConflict() throws Exception {
        try (MockServer s = new MockServer(r -> MockServer.DROP)) {
            assertThrows(ConnectionException.class, () -> client(s).volumes().create("n", 16L << 20));
            assertEquals(1, s.requests.size());
        }
        try (MockServer s = new MockServer(r -> MockServer.Response.json(409,
                "{\"error\":{\"code\":\"volume_in_use\",\"message\":\"held\",\"message_i18n\":{\"en\":\"held\",\"fr\":\"tenu\"}}}"))) {
            ConflictException e = assertThrows(ConflictException.class, () -> client(s).volumes().delete("n"));
            assertEquals("volume_in_use", e.code());
        }
    }
}
