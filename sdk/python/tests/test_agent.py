"""Unit tests of enterprise_ai.agent (AgentsClient, RunsClient, SessionsClient,
client.agent) against the scripted local server of test_client."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import enterprise_ai  # noqa: E402
import enterprise_ai.agent  # noqa: E402
import enterprise_ai.sandbox  # noqa: E402
from enterprise_ai.agent import AgentsClient, RunsClient, SessionsClient  # noqa: E402
from test_client import EID, KEY, Base, envelope  # noqa: E402

RUN = {"run_id": "r 1", "agent_id": "a1", "project_id": "p1",
       "executions": [{"id": EID, "status": "succeeded", "profile": "gvisor", "session_id": None,
                       "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "created_at": "2026-12-06T04:00:00.000Z",
                       "started_at": None, "finished_at": None,
                       "usage": {"cpu_seconds": 0.5, "memory_mb_seconds": 1.0, "duration_s": 0.7}}],
       "truncated": True, "total": 3, "counts": {"succeeded": 2, "failed": 1},
       "usage": {"cpu_seconds": 1.5, "memory_mb_seconds": 3.0, "duration_s": 2.1},
       "trace_ids": ["4bf92f3577b34da6a3ce929d0e0e4736"], "first_at": "2026-12-06T04:00:00.000Z",
       "last_at": "2026-12-06T04:00:02.000Z",
       "sessions": [{"id": "ses_1", "status": "running", "run_id": "r 1"}], "sessions_truncated": False,
       "sessions_scope": "node"}
AGENT = {"agent_id": "a1", "executions": 4, "runs": 2, "newest_run": "r2", "last_seen": "2026-12-06T04:00:02.000Z",
         "usage": [{"profile": "gvisor", "executions": 4, "cpu_seconds": 2.0, "memory_mb_seconds": 4.0,
                    "duration_s": 3.0, "last_seen": "2026-12-06T04:00:02.000Z"}]}
NF = (404, envelope("not_found", "Run not found", "Run introuvable"))


class TestImports(unittest.TestCase):
    def test_modules_and_names(self) -> None:
        self.assertIs(enterprise_ai.AgentsClient, AgentsClient)
        self.assertIs(enterprise_ai.agent.RunsClient, RunsClient)
        self.assertTrue(callable(enterprise_ai.sandbox.run_untrusted))


class TestRuns(Base):
    def test_get_quotes_the_id_and_parses(self) -> None:
        self.m.script = [(200, RUN)]
        run = self.c.agent.runs.get("r 1", limit=1)
        self.assertEqual(self.m.requests[0]["path"], "/v1/runs/r%201?limit=1")
        self.assertEqual(run.run_id, "r 1")
        self.assertTrue(run.truncated)
        self.assertEqual(run.total, 3)
        self.assertEqual(run.counts, {"succeeded": 2, "failed": 1})
        self.assertEqual(run.usage.cpu_seconds, 1.5)
        self.assertEqual(run.executions[0].id, EID)
        self.assertEqual(run.executions[0].usage.duration_s, 0.7)  # type: ignore[union-attr]
        self.assertEqual(run.trace_ids, ["4bf92f3577b34da6a3ce929d0e0e4736"])
        self.assertEqual(run.sessions[0].id, "ses_1")

    def test_missing_run_raises_not_found(self) -> None:
        self.m.script = [NF]
        with self.assertRaises(enterprise_ai.NotFoundError) as cm:
            RunsClient(self.c).get("nope")
        self.assertEqual(cm.exception.code, "not_found")

    def test_list_follows_next(self) -> None:
        self.m.script = [(200, {"items": [{"run_id": "r1", "executions": 2}], "next": "r1"}),
                         (200, {"items": [{"run_id": "r2", "executions": 1}], "next": None})]
        runs = list(self.c.agent.runs.list(agent_id="a1", limit=1))
        self.assertEqual([r.run_id for r in runs], ["r1", "r2"])
        self.assertEqual(runs[0].executions, 2)
        self.assertEqual(self.m.requests[0]["path"], "/v1/runs?agent_id=a1&limit=1")
        self.assertEqual(self.m.requests[1]["path"], "/v1/runs?agent_id=a1&limit=1&after=r1")

    def test_page(self) -> None:
        self.m.script = [(200, {"items": [{"run_id": "r1"}], "next": "r1"})]
        items, nxt = self.c.agent.runs.page(project_id="p1", limit=1)
        self.assertEqual(nxt, "r1")
        self.assertEqual(self.m.requests[0]["path"], "/v1/runs?project_id=p1&limit=1")


class TestAgents(Base):
    def test_get_and_list(self) -> None:
        self.m.script = [(200, AGENT), (200, {"items": [{"agent_id": "a1", "executions": 4, "runs": 2}],
                                              "next": None})]
        a = AgentsClient(self.c).get("a1")
        self.assertEqual((a.runs, a.executions, a.newest_run), (2, 4, "r2"))
        self.assertEqual(a.usage[0].profile, "gvisor")
        self.assertEqual(a.usage[0].cpu_seconds, 2.0)
        agents = list(self.c.agent.agents.list())
        self.assertEqual([x.agent_id for x in agents], ["a1"])
        self.assertEqual(self.m.requests[1]["path"], "/v1/agents")

    def test_runs_of_an_agent(self) -> None:
        self.m.script = [(200, {"items": [{"run_id": "r1"}], "next": None})]
        self.assertEqual([r.run_id for r in self.c.agent.agents.runs("a b")], ["r1"])
        self.assertEqual(self.m.requests[0]["path"], "/v1/runs?agent_id=a+b")

    def test_french_message(self) -> None:
        self.m.script = [(404, envelope("not_found", "Agent not found", "Agent introuvable", "fr"))]
        with self.assertRaises(enterprise_ai.NotFoundError) as cm:
            self.c.with_language("fr").agent.agents.get("x")
        self.assertEqual(cm.exception.message, "Agent introuvable")
        self.assertEqual(self.m.requests[0]["headers"].get("Accept-Language"), "fr")


class TestAsync(Base):
    def test_async_agent_view(self) -> None:
        import asyncio
        self.m.script = [(200, RUN), (200, {"items": [{"agent_id": "a1"}], "next": None})]

        async def go() -> None:
            async with enterprise_ai.AsyncEnterpriseAI(base_url=self.m.url, api_key=KEY) as ac:
                run = await ac.agent.runs.get("r 1")
                self.assertEqual(run.total, 3)
                self.assertEqual([a.agent_id async for a in ac.agent.agents.list()], ["a1"])
        asyncio.run(go())


class TestSessions(Base):
    def test_create_carries_the_ids(self) -> None:
        self.m.script = [(201, {"id": "ses_1", "status": "running", "run_id": "r1"})]
        s = SessionsClient(self.c).create("img", profile="gvisor", agent_id="a1", run_id="r1", project_id="p1")
        self.assertEqual(s.id, "ses_1")
        body = json.loads(self.m.requests[0]["body"])
        self.assertEqual((body["agent_id"], body["run_id"], body["project_id"]), ("a1", "r1", "p1"))

    def test_for_run(self) -> None:
        self.m.script = [(200, RUN), NF]
        self.assertEqual([s.id for s in self.c.agent.sessions.for_run("r 1")], ["ses_1"])
        self.assertEqual(self.c.agent.sessions.for_run("none"), [])


if __name__ == "__main__":
    unittest.main()
