package ai.enterprise.sdk;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * The seed's Java snippet (section 7) against the live eaid of
 * sdk/conformance/run.sh (EAI_SDK_LIVE=1): verbatim but for the URL and the
 * image (python:3.12-slim is not built here; EAI_CONFORMANCE_IMAGE, default
 * python:3.11-slim, is).
 */
@EnabledIfEnvironmentVariable(named = "EAI_SDK_LIVE", matches = "1")
class SeedSnippetTest {
    static String env(String k, String dflt) {
        String v = System.getenv(k);
        return v == null || v.isEmpty() ? dflt : v;
    }

    @Test
    void seedSnippet() throws Exception {
        String image = env("EAI_CONFORMANCE_IMAGE", "python:3.11-slim");
        String profile = env("EAI_CONFORMANCE_PROFILE", "gvisor-small");
        String baseUrl = System.getenv("EAI_URL");

        // --- the seed
        EnterpriseAIClient client = EnterpriseAIClient.builder()
            .baseUrl(baseUrl)
            .apiKey(System.getenv("EAI_API_KEY"))
            .build();
        JsonNode ex = client.sandbox().execute(Map.of("image", image, "command", List.of("python", "-c", "print(1)"), "profile", "gvisor"));
        // ---

        assertEquals("succeeded", ex.path("status").asText(), ex.toString());
        assertEquals(0, ex.path("exit_code").asInt());
        assertEquals("gvisor", ex.path("profile").asText());
        assertEquals("1\n", ex.path("stdout").asText());

        // the typed form, with output that is not UTF-8
        Execution typed = client.sandbox().execute(ExecuteRequest.builder(image, "python3", "-c",
                "import sys; sys.stdout.buffer.write(bytes([0, 255]))").profile(profile).build());
        assertEquals("succeeded", typed.status());
        assertArrayEquals(new byte[] {0, (byte) 0xff}, typed.stdout());
        assertEquals("base64", typed.stdoutEncoding());
    }
}
