"""Unit tests of AsyncEnterpriseAI (enterprise_ai.aio) against the scripted local
server of test_client.py: the event loop is never blocked by a call in flight,
calls from several tasks run at once, errors and streams come through, and
enterprise_ai.sandbox.run_untrusted sends the code as the program."""
import asyncio
import json
import os
import sys
import threading
import time
import unittest
from typing import Any, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import enterprise_ai  # noqa: E402
from enterprise_ai import AsyncEnterpriseAI, sandbox  # noqa: E402
from test_client import DONE, EID, KEY, Handler, Mock, envelope  # noqa: E402


class TestAsync(unittest.TestCase):
    def setUp(self) -> None:
        self.m = Mock()

    def tearDown(self) -> None:
        self.m.close()

    def test_loop_not_blocked_and_calls_concurrent(self) -> None:
        gate = threading.Event()

        def slow(h: Handler) -> None:  # each answer waits until the loop proved it was free
            gate.wait(10)
            h.reply(200, DONE)
        self.m.default = slow
        ticks: List[float] = []

        async def main() -> List[Any]:
            async with AsyncEnterpriseAI(base_url=self.m.url, api_key=KEY, max_retries=0) as c:
                calls = [asyncio.ensure_future(c.sandbox.get(EID)) for _ in range(4)]
                deadline = time.monotonic() + 10
                # the loop keeps turning while the 4 requests reach the server and are held there
                while len(self.m.requests) < 4 and time.monotonic() < deadline:
                    ticks.append(time.monotonic())
                    await asyncio.sleep(0.02)
                self.assertEqual(len(self.m.requests), 4, "4 requests in flight at once")
                self.assertFalse(any(f.done() for f in calls), "answered before the server let them go")
                gate.set()
                return list(await asyncio.gather(*calls))
        res = asyncio.run(main())
        self.assertEqual([r.status for r in res], ["succeeded"] * 4)
        self.assertGreater(len(ticks), 0)

    def test_errors_and_stream(self) -> None:
        sse = (b"id: 1\nevent: stdout\ndata: {\"data\": \"hi\\n\"}\n\n"
               b"id: 2\nevent: status\ndata: {\"status\": \"succeeded\", \"exit_code\": 0}\n\n")

        def stream(h: Handler) -> None:
            h.reply(200, sse, ctype="text/event-stream")
        self.m.script = [(404, envelope("not_found", "Execution not found", "Exécution introuvable")), stream]

        async def main() -> List[str]:
            c = AsyncEnterpriseAI(base_url=self.m.url, api_key=KEY, max_retries=0)
            try:
                with self.assertRaises(enterprise_ai.NotFoundError):
                    await c.sandbox.get(EID)
                return [e.type async for e in c.sandbox.stream(EID)]
            finally:
                await c.aclose()
        self.assertEqual(asyncio.run(main()), ["stdout", "status"])

    def test_volumes_awaited(self) -> None:
        vol = {"id": "vol_1", "name": "notes", "size_bytes": 16777216, "status": "ready"}
        self.m.script = [(201, vol), (200, b"kept\n", {}), (200, {"id": "vol_1", "status": "deleted"})]

        async def main() -> List[Any]:
            async with AsyncEnterpriseAI(base_url=self.m.url, api_key=KEY, max_retries=0) as c:
                v = await c.volumes.create("notes", 16 << 20)
                data = await c.volumes.files("notes").read("a.txt")
                d = await c.volumes.delete(v.id)
                return [v.name, data, d["status"]]
        self.assertEqual(asyncio.run(main()), ["notes", b"kept\n", "deleted"])
        self.assertEqual([(r["method"], r["path"]) for r in self.m.requests],
                         [("POST", "/v1/volumes"), ("GET", "/v1/volumes/notes/files/a.txt"),
                          ("DELETE", "/v1/volumes/vol_1")])

    def test_run_untrusted_sends_the_code(self) -> None:
        self.m.script = [(202, {"id": EID, "status": "queued"}), (200, DONE)]
        c = enterprise_ai.EnterpriseAI(base_url=self.m.url, api_key=KEY, max_retries=0)
        ex = sandbox.run_untrusted("print(2 + 2)", client=c, timeout_s=7)
        self.assertEqual(ex.status, "succeeded")
        body = json.loads(self.m.requests[0]["body"])
        self.assertEqual(body["command"], ["python3", "-c", "print(2 + 2)"])
        self.assertEqual(body["limits"]["timeout_s"], 7)
        self.assertEqual(body["profile"], "gvisor")
        with self.assertRaises(ValueError):
            sandbox.run_untrusted("x", client=c, language="cobol")
        # refused (no runtime): the API's error, nothing run
        self.m.script = [(503, envelope("sandbox_unavailable", "No sandbox runtime", "Aucun"))]
        with self.assertRaises(enterprise_ai.UnavailableError):
            sandbox.run_untrusted("print(1)", client=c)


if __name__ == "__main__":
    unittest.main()
