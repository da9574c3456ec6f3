// The seed's Java snippet as a program, compiled outside Maven against the
// SDK jar and Debian's Jackson (sdk/java/run-conformance.sh runs it):
//   java -cp eai-sdk-0.1.0.jar:/usr/share/java/jackson-databind.jar:/usr/share/java/jackson-core.jar:\
//        /usr/share/java/jackson-annotations.jar sdk/java/examples/Seed.java
// EAI_URL and EAI_API_KEY name the server and key; the image is the one that
// exists there (EAI_CONFORMANCE_IMAGE, default python:3.11-slim) in place of
// python:3.12-slim; everything else is the seed's.
import ai.enterprise.sdk.EnterpriseAIClient;
import com.fasterxml.jackson.databind.JsonNode;
import java.util.List;
import java.util.Map;

public class Seed {
    public static void main(String[] args) {
        String image = System.getenv().getOrDefault("EAI_CONFORMANCE_IMAGE", "python:3.11-slim");

        EnterpriseAIClient client = EnterpriseAIClient.builder()
            .baseUrl(System.getenv("EAI_URL"))
            .apiKey(System.getenv("EAI_API_KEY"))
            .build();
        JsonNode ex = client.sandbox().execute(Map.of("image", image, "command", List.of("python", "-c", "print(1)"), "profile", "gvisor"));

        System.out.println(ex.path("status").asText() + " " + ex.path("exit_code").asInt() + " " + ex.path("stdout").asText().strip());
        if (!"succeeded".equals(ex.path("status").asText()) || !"1\n".equals(ex.path("stdout").asText())) {
            System.exit(1);
        }
    }
}
