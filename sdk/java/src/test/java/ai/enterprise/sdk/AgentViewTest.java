package ai.enterprise.sdk;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The agent view (client.agent().agents()/runs()/sessions()) against the mock server. */
class AgentViewTest {
    static final String RUN = "{\"run_id\":\"r 1\",\"agent_id\":\"a1\",\"truncated\":true,\"total\":3,"
            + "\"executions\":[{\"id\":\"sbx_1\",\"status\":\"succeeded\",\"trace_id\":\"t1\"}],"
            + "\"counts\":{\"succeeded\":2,\"failed\":1},\"usage\":{\"cpu_seconds\":1.5},\"trace_ids\":[\"t1\"],"
            + "\"sessions\":[{\"id\":\"ses_1\",\"status\":\"running\"}],\"sessions_scope\":\"node\"}";

    static MockServer.Response handle(MockServer.Request r) {
        String p = r.path();
        if (p.equals("/v1/runs/r%201")) {
            return MockServer.Response.json(200, RUN);
        }
        if (p.equals("/v1/runs") && !r.query().contains("after=")) {
            return MockServer.Response.json(200, "{\"items\":[{\"run_id\":\"r1\",\"executions\":2}],\"next\":\"r1\"}");
        }
        if (p.equals("/v1/runs")) {
            return MockServer.Response.json(200, "{\"items\":[{\"run_id\":\"r2\"}],\"next\":null}");
        }
        if (p.equals("/v1/agents/a1")) {
            return MockServer.Response.json(200, "{\"agent_id\":\"a1\",\"runs\":2,\"executions\":4,\"newest_run\":\"r2\","
                    + "\"usage\":[{\"profile\":\"gvisor\",\"cpu_seconds\":2.0}]}");
        }
        if (p.equals("/v1/agents")) {
            return MockServer.Response.json(200, "{\"items\":[{\"agent_id\":\"a1\"}],\"next\":null}");
        }
        if (p.equals("/v1/sandbox/sessions")) {
            return MockServer.Response.json(201, "{\"id\":\"ses_1\",\"status\":\"running\",\"run_id\":\"r1\"}");
        }
        return MockServer.Response.error(404, "not_found", "Run not found", "Run not found", "Run introuvable", null);
    }

    static EnterpriseAIClient client(MockServer s) {
        return EnterpriseAIClient.builder().baseUrl(s.url()).apiKey(ClientTest.KEY).build();
    }

    @Test
    void runsGetListAndPage() throws Exception {
        try (MockServer s = new MockServer(AgentViewTest::handle)) {
            EnterpriseAIClient c = client(s);
            JsonNode run = c.agent().runs().get("r 1", 1);
            assertEquals("/v1/runs/r%201?limit=1", s.requests.get(0).target());
            assertEquals(3, run.path("total").asInt());
            assertTrue(run.path("truncated").asBoolean());
            assertEquals("ses_1", run.path("sessions").get(0).path("id").asText());
            List<String> ids = new ArrayList<>();
            for (JsonNode r : c.agent().runs().list("a1", null, 1)) {
                ids.add(r.path("run_id").asText());
            }
            assertEquals(List.of("r1", "r2"), ids);
            assertEquals("/v1/runs?agent_id=a1&limit=1", s.requests.get(1).target());
            assertEquals("/v1/runs?agent_id=a1&limit=1&after=r1", s.requests.get(2).target());
            ViewPage page = c.agent().runs().page(null, "p1", null, null);
            assertEquals("r1", page.next());
        }
    }

    @Test
    void missingRunIsNotFound() throws Exception {
        try (MockServer s = new MockServer(AgentViewTest::handle)) {
            EnterpriseAIClient c = client(s);
            NotFoundException e = assertThrows(NotFoundException.class, () -> c.agent().runs().get("nope"));
            assertEquals("not_found", e.code());
            assertEquals(List.of(), c.agent().sessions().forRun("nope"));
        }
    }

    @Test
    void agentsAndSessions() throws Exception {
        try (MockServer s = new MockServer(AgentViewTest::handle)) {
            EnterpriseAIClient c = client(s);
            JsonNode a = c.agent().agents().get("a1");
            assertEquals(2, a.path("runs").asInt());
            assertEquals("gvisor", a.path("usage").get(0).path("profile").asText());
            List<String> agents = new ArrayList<>();
            for (JsonNode x : c.agent().agents().list(null)) {
                agents.add(x.path("agent_id").asText());
            }
            assertEquals(List.of("a1"), agents);
            Session ses = c.agent().sessions().create(Map.of("image", "img", "agent_id", "a1", "run_id", "r1"));
            assertEquals("ses_1", ses.id());
            String body = s.requests.get(s.requests.size() - 1).bodyText();
            assertTrue(body.contains("\"run_id\":\"r1\"") && body.contains("\"agent_id\":\"a1\""), body);
            assertEquals("ses_1", c.agent().sessions().forRun("r 1").get(0).path("id").asText());
        }
    }
}
