"""Unit tests (scripted local server): resumable event streams (Last-Event-ID),
completion-callback signatures, sessions."""
import json
import os
import sys
import unittest
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import enterprise_ai  # noqa: E402
from test_client import DONE, EID, Base, Handler, envelope  # noqa: E402

SES = "ses_11111111-2222-3333-4444-555555555555"


def sse_events(first: int, last: int, terminal: bool) -> bytes:
    out = b""
    for i in range(first, last + 1):
        if i == 0:
            out += b"id: 0\nevent: status\ndata: {\"status\":\"queued\"}\n\n"
        elif i == 1:
            out += b"id: 1\nevent: status\ndata: {\"status\":\"running\"}\n\n: ping\n\n"
        else:
            out += b"id: %d\nevent: stdout\ndata: {\"data\":\"line%d\\n\"}\n\n" % (i, i)
    if terminal:
        out += b"id: %d\nevent: status\ndata: {\"status\":\"succeeded\",\"exit_code\":0}\n\n" % (last + 1)
    return out


def streamer(payload: bytes, end: bool) -> Any:
    """Sends payload chunked; end=False cuts the connection without the last chunk (a dropped stream)."""
    def act(h: Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        if payload:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
        if end:
            h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
        h.close_connection = True
    return act


def no_content(h: Handler) -> None:
    h.send_response(204)
    h.end_headers()


class TestResumableStream(Base):
    def test_dropped_stream_resumes_with_last_event_id_each_event_once(self) -> None:
        # first connection: ids 0..3 then the connection drops mid-stream (no terminal chunk)
        self.m.script = [streamer(sse_events(0, 3, False), False),
                         streamer(sse_events(4, 6, True), True)]
        evs = list(self.c.sandbox.stream(EID))
        self.assertEqual([e.id for e in evs], [str(i) for i in range(0, 8)])   # 0..7, each exactly once
        self.assertEqual(evs[-1].status, "succeeded")
        self.assertEqual([e.text for e in evs if e.type == "stdout"], ["line%d\n" % i for i in range(2, 7)])
        self.assertEqual(len(self.m.requests), 2)
        self.assertNotIn("Last-Event-ID", self.m.requests[0]["headers"])
        self.assertEqual(self.m.requests[1]["headers"]["Last-Event-ID"], "3")
        self.assertEqual(len(self.sleeps), 1)                                   # backed off once

    def test_clean_eof_before_terminal_also_resumes(self) -> None:
        self.m.script = [streamer(sse_events(0, 2, False), True), streamer(sse_events(3, 3, True), True)]
        evs = list(self.c.sandbox.stream(EID))
        self.assertEqual([e.id for e in evs], ["0", "1", "2", "3", "4"])
        self.assertEqual(self.m.requests[1]["headers"]["Last-Event-ID"], "2")

    def test_204_ends_the_stream(self) -> None:
        self.m.script = [no_content]
        self.assertEqual(list(self.c.sandbox.stream(EID, last_event_id="9")), [])
        self.assertEqual(self.m.requests[0]["headers"]["Last-Event-ID"], "9")
        # resumed then 204: ends quietly too
        self.m.script = [streamer(sse_events(0, 1, False), False), no_content]
        self.assertEqual([e.id for e in self.c.sandbox.stream(EID)], ["0", "1"])

    def test_resume_bounded_without_progress(self) -> None:
        self.m.script = [streamer(sse_events(0, 0, False), False)]
        self.m.default = streamer(b"", False)                                   # every reconnect breaks at once
        with self.assertRaises(enterprise_ai.APIConnectionError):
            list(self.c.sandbox.stream(EID))
        self.assertEqual(len(self.m.requests), 1 + 4)                           # max_retries=4 reconnects
        self.assertEqual(len(self.sleeps), 4)
        self.assertTrue(all(r["headers"].get("Last-Event-ID") == "0" for r in self.m.requests[1:]))

    def test_no_id_no_resume(self) -> None:
        self.m.script = [streamer(b"event: status\ndata: {\"status\":\"running\"}\n\n", False)]
        with self.assertRaises(enterprise_ai.APIConnectionError):
            list(self.c.sandbox.stream(EID))
        self.assertEqual(len(self.m.requests), 1)


# A vector computed by the server's own code: core/obs/callback.c eai_cb_sign (with
# core/base/util.c eai_hmac_sha256_hex) compiled into a small C program.
VEC_SECRET = "whsec_0123456789abcdef"
VEC_T = 1764650000
VEC_BODY = b'{"id":"evt_1","type":"execution.finished","execution":{"id":"sbx_1","status":"succeeded"}}'
VEC_SIG = "t=1764650000,v1=1fc37c80235f300c0066ef359feaa4b03278d5959b94192d0d77bea83aeb1841"


class TestCallbacks(Base):
    def test_known_vector(self) -> None:
        self.assertEqual(enterprise_ai.sign(VEC_SECRET, VEC_T, VEC_BODY), VEC_SIG)
        self.assertTrue(enterprise_ai.verify_signature(VEC_SECRET, VEC_SIG, VEC_BODY, now=VEC_T + 10))
        self.assertTrue(enterprise_ai.verify_signature(VEC_SECRET.encode(), VEC_SIG, VEC_BODY.decode(), now=VEC_T))

    def test_refusals(self) -> None:
        v = enterprise_ai.verify_signature
        self.assertFalse(v(VEC_SECRET, VEC_SIG, VEC_BODY + b" ", now=VEC_T))         # body changed
        self.assertFalse(v(VEC_SECRET + "x", VEC_SIG, VEC_BODY, now=VEC_T))          # other secret
        self.assertFalse(v(VEC_SECRET, VEC_SIG, VEC_BODY, now=VEC_T + 301))          # too old (replay)
        self.assertFalse(v(VEC_SECRET, VEC_SIG, VEC_BODY, now=VEC_T - 301))          # too far ahead
        self.assertTrue(v(VEC_SECRET, VEC_SIG, VEC_BODY, tolerance_s=600, now=VEC_T + 500))
        self.assertFalse(v(VEC_SECRET, VEC_SIG.replace("t=1764650000", "t=1764650001"), VEC_BODY, now=VEC_T))
        for bad in ("", "garbage", "t=abc,v1=00", "v1=" + "0" * 64, "t=1764650000", None):
            self.assertFalse(v(VEC_SECRET, bad, VEC_BODY, now=VEC_T))
        self.assertTrue(v(VEC_SECRET, "t=1764650000, v1=%s,v0=zz" % VEC_SIG.split("v1=")[1], VEC_BODY, now=VEC_T))

    def test_create_sends_callback_and_view_has_it(self) -> None:
        cb = {"url": "https://hooks.example.com/eai", "secret": "s" * 20}
        view = dict(DONE, callback={"url": cb["url"], "attempts": 1, "last_status": 200, "delivered_at": "x"})
        self.m.script = [(202, {"id": EID, "status": "queued"}), (200, view)]
        ex = self.c.sandbox.execute("img", ["true"], callback=cb)
        self.assertEqual(json.loads(self.m.requests[0]["body"])["callback"], cb)
        self.assertEqual(ex.callback, view["callback"])


class TestSessions(Base):
    def test_session_lifecycle(self) -> None:
        s0 = {"id": SES, "status": "running", "profile": "gvisor-small", "image": "python:3.11-slim",
              "limits": {"memory": "256Mi"}, "executions": 0, "usage": None}
        ended = dict(s0, status="ended", end_reason="deleted", usage={"cpu_seconds": 0.5, "duration_s": 3})
        self.m.script = [
            (201, s0, {"Location": "/v1/sandbox/sessions/" + SES}),
            (200, {"path": "/tmp/a b.py", "size": 10}),
            (200, b"print(6*7)", {}),
            (200, {"path": "/tmp", "items": [{"path": "/tmp/a b.py", "size": 10, "type": "file"}]}),
            (202, {"id": EID, "status": "queued"}),
            (200, dict(DONE, session_id=SES, stdout="42\n")),
            (200, {}),
            (200, ended),
        ]
        with self.c.sandbox.sessions.create("python:3.11-slim", profile="gvisor-small", idle_timeout_s=60) as s:
            self.assertEqual((s.id, s.status, s.profile), (SES, "running", "gvisor-small"))
            s.files.write("/tmp/a b.py", "print(6*7)")
            self.assertEqual(s.files.read("/tmp/a b.py"), b"print(6*7)")
            self.assertEqual([(f.path, f.size, f.type) for f in s.files.list()], [("/tmp/a b.py", 10, "file")])
            ex = s.run(["python3", "/tmp/a b.py"], stdin="x", timeout=30)
            self.assertEqual((ex.status, ex.stdout, ex.session_id), ("succeeded", "42\n", SES))
            s.files.delete("/tmp/a b.py")
        self.assertEqual((s.status, s.end_reason, s.usage.cpu_seconds), ("ended", "deleted", 0.5))
        r = self.m.requests
        self.assertEqual([(x["method"], x["path"].split("?")[0]) for x in r], [
            ("POST", "/v1/sandbox/sessions"),
            ("PUT", "/v1/sandbox/sessions/%s/files/tmp/a%%20b.py" % SES),
            ("GET", "/v1/sandbox/sessions/%s/files/tmp/a%%20b.py" % SES),
            ("GET", "/v1/sandbox/sessions/%s/files" % SES),
            ("POST", "/v1/sandbox/sessions/%s/executions" % SES),
            ("GET", "/v1/sandbox/executions/" + EID),
            ("DELETE", "/v1/sandbox/sessions/%s/files/tmp/a%%20b.py" % SES),
            ("DELETE", "/v1/sandbox/sessions/" + SES)])
        self.assertEqual(json.loads(r[0]["body"]), {"profile": "gvisor-small", "image": "python:3.11-slim",
                                                    "idle_timeout_s": 60})
        self.assertEqual(r[1]["body"], b"print(6*7)")
        self.assertEqual(r[1]["headers"]["Content-Type"], "application/octet-stream")
        self.assertEqual(json.loads(r[4]["body"]), {"command": ["python3", "/tmp/a b.py"], "stdin": "x"})
        self.assertIn("wait_s=", r[5]["path"])

    def test_create_not_retried_after_a_lost_answer_but_503_is(self) -> None:
        self.m.script = ["drop"]
        with self.assertRaises(enterprise_ai.APIConnectionError):
            self.c.sandbox.sessions.create("img")
        self.assertEqual(len(self.m.requests), 1)
        self.m.script = [(503, envelope("sandbox_unavailable", "x", "y"), {"Retry-After": "1"}),
                         (201, {"id": SES, "status": "running"})]
        self.assertEqual(self.c.sandbox.sessions.create("img").id, SES)
        self.assertEqual(len(self.m.requests), 3)

    def test_list_get_and_ended_session_error(self) -> None:
        self.m.script = [(200, {"items": [{"id": SES, "status": "running"}]}), (200, {"id": SES, "status": "ended"}),
                         (409, envelope("session_ended", "Session ended", "Session terminée"))]
        self.assertEqual([s.id for s in self.c.sandbox.sessions.list(status="live")], [SES])
        self.assertEqual(self.m.requests[0]["path"], "/v1/sandbox/sessions?status=live")
        s = self.c.sandbox.sessions.get(SES)
        with self.assertRaises(enterprise_ai.ConflictError) as cm:
            s.run(["true"])
        self.assertEqual(cm.exception.code, "session_ended")

    def test_stored_states_and_network(self) -> None:
        """Issue 31: paused_by / interrupted, the egress list, PUT and GET .../network, list paging."""
        view = {"id": SES, "status": "paused", "paused_by": "drain", "paused_at": "t", "auto_pause": True,
                "paused_ttl_s": 86400, "network": {"egress": ["pypi.org:443"]}, "usage": None}
        self.m.script = [
            (201, dict(view, status="running", paused_by=None)),
            (200, {"session_id": SES, "egress": []}),
            (200, dict(view, status="running", paused_by=None, network={"egress": []})),
            (200, {"session_id": SES, "egress": [], "log": {"entries": []}, "summary": None}),
            (200, {"items": [view], "next_before": SES}),
            (200, dict(view, status="interrupted", end_reason="interrupted",
                       usage={"cpu_seconds": 0, "duration_s": 5, "partial": True})),
        ]
        s = self.c.sandbox.sessions.create("img", egress=["pypi.org:443"], auto_pause=True, paused_ttl_s=600)
        self.assertEqual(s.info.egress, ["pypi.org:443"])
        self.assertEqual(s.set_egress([]), [])
        self.assertEqual(s.info.egress, [])
        self.assertEqual(s.network()["egress"], [])
        items = self.c.sandbox.sessions.list(status="paused", limit=10, before=SES)
        self.assertEqual((items[0].status, items[0].paused_by, items[0].live), ("paused", "drain", True))
        gone = self.c.sandbox.sessions.get(SES)
        self.assertEqual((gone.status, gone.info.live), ("interrupted", False))
        r = self.m.requests
        self.assertEqual(json.loads(r[0]["body"]), {"image": "img", "auto_pause": True, "paused_ttl_s": 600,
                                                    "network": {"egress": ["pypi.org:443"]}})
        self.assertEqual((r[1]["method"], r[1]["path"]), ("PUT", "/v1/sandbox/sessions/%s/network" % SES))
        self.assertEqual(json.loads(r[1]["body"]), {"egress": []})
        self.assertEqual((r[3]["method"], r[3]["path"]), ("GET", "/v1/sandbox/sessions/%s/network" % SES))
        self.assertEqual(r[4]["path"], "/v1/sandbox/sessions?status=paused&limit=10&before=" + SES)

    def test_snapshots_and_forks(self) -> None:
        """Issue 34: snapshot(), fork() (one, a count), snapshots(), get/delete_snapshot()."""
        snp = "snp_0b8e2c4e-9a7e-4d2e-8f3a-3c1f2a7b9d10"
        view = {"id": SES, "status": "running", "usage": None}
        sv = {"id": snp, "session_id": SES, "status": "ready", "size_bytes": 8300000, "forks": 0}
        fork = dict(view, id="ses_f", from_snapshot=snp)
        self.m.script = [
            (201, view), (201, sv), (201, fork),
            (201, {"items": [fork, dict(fork, id="ses_g")], "from_snapshot": snp}),
            (200, {"items": [sv]}), (200, dict(sv, forks=3)), (200, dict(sv, status="deleted")),
        ]
        s = self.c.sandbox.sessions.create("img")
        got = s.snapshot(ttl_s=600)
        self.assertEqual((got.id, got.size_bytes, got.status), (snp, 8300000, "ready"))
        one = self.c.sandbox.sessions.fork(snp)
        self.assertEqual((one.id, one.from_snapshot), ("ses_f", snp))
        two = self.c.sandbox.sessions.fork(snp, count=2, ttl_s=60)
        self.assertEqual([h.id for h in two], ["ses_f", "ses_g"])
        self.assertEqual([x.id for x in self.c.sandbox.sessions.snapshots(SES)], [snp])
        self.assertEqual(self.c.sandbox.sessions.get_snapshot(snp).forks, 3)
        self.assertEqual(self.c.sandbox.sessions.delete_snapshot(snp).status, "deleted")
        r = self.m.requests
        self.assertEqual((r[1]["method"], r[1]["path"]), ("POST", "/v1/sandbox/sessions/%s/snapshots" % SES))
        self.assertEqual(json.loads(r[1]["body"]), {"ttl_s": 600})
        self.assertEqual(json.loads(r[2]["body"]), {"from_snapshot": snp})
        self.assertEqual(json.loads(r[3]["body"]), {"from_snapshot": snp, "count": 2, "ttl_s": 60})
        self.assertEqual(r[4]["path"], "/v1/sandbox/snapshots?session_id=" + SES)
        self.assertEqual((r[6]["method"], r[6]["path"]), ("DELETE", "/v1/sandbox/snapshots/" + snp))


VOL = "vol_11111111-2222-3333-4444-555555555555"


class TestVolumes(Base):
    def test_volume_lifecycle_and_mounts(self) -> None:
        v0 = {"id": VOL, "name": "notes", "size_bytes": 67108864, "status": "ready",
              "created_at": "2026-12-06T10:03:43.109Z", "attached": {"writer": None, "readers": 0},
              "usage": {"gb_hours": 0.0}}
        self.m.script = [
            (201, v0),
            (202, {"id": EID, "status": "queued"}),
            (200, dict(DONE, stdout="written\n")),
            (201, {"id": SES, "status": "running"}),
            (200, {"path": "a b.txt", "size": 5}),
            (200, b"kept\n", {}),
            (200, {"path": "/", "items": [{"path": "/a b.txt", "size": 5, "type": "file"}]}),
            (200, {}),
            (200, {"items": [v0]}),
            (200, dict(v0, used_bytes=1000, free_bytes=2000)),
            (200, {"id": VOL, "status": "deleted", "usage": {"gb_hours": 0.001}}),
        ]
        v = self.c.volumes.create("notes", "64Mi")
        self.assertEqual((v.id, v.name, v.size_bytes, v.status), (VOL, "notes", 67108864, "ready"))
        ex = self.c.sandbox.execute("python:3.11-slim", ["sh", "-c", "echo kept > /mnt/notes/a.txt"],
                                    profile="gvisor-small", volumes={"notes": "/mnt/notes"}, timeout=30)
        self.assertEqual(ex.status, "succeeded")
        self.c.sandbox.sessions.create("python:3.11-slim", profile="gvisor-small",
                                       volumes=[{"name": "notes", "path": "/mnt/in", "read_only": True}])
        f = self.c.volumes.files("notes")
        self.assertEqual(f.write("a b.txt", "kept\n"), {"path": "a b.txt", "size": 5})
        self.assertEqual(f.read("a b.txt"), b"kept\n")
        self.assertEqual([(x.path, x.size, x.type) for x in f.list()], [("/a b.txt", 5, "file")])
        f.delete("a b.txt")
        self.assertEqual([x.id for x in self.c.volumes.list()], [VOL])
        g = self.c.volumes.get("notes")
        self.assertEqual((g.used_bytes, g.free_bytes, g.attached), (1000, 2000, {"writer": None, "readers": 0}))
        self.assertEqual(self.c.volumes.delete(VOL)["status"], "deleted")
        r = self.m.requests
        self.assertEqual([(x["method"], x["path"].split("?")[0]) for x in r], [
            ("POST", "/v1/volumes"),
            ("POST", "/v1/sandbox/executions"),
            ("GET", "/v1/sandbox/executions/" + EID),
            ("POST", "/v1/sandbox/sessions"),
            ("PUT", "/v1/volumes/notes/files/a%20b.txt"),
            ("GET", "/v1/volumes/notes/files/a%20b.txt"),
            ("GET", "/v1/volumes/notes/files"),
            ("DELETE", "/v1/volumes/notes/files/a%20b.txt"),
            ("GET", "/v1/volumes"),
            ("GET", "/v1/volumes/notes"),
            ("DELETE", "/v1/volumes/" + VOL)])
        self.assertEqual(json.loads(r[0]["body"]), {"name": "notes", "size_bytes": "64Mi"})
        self.assertEqual(json.loads(r[1]["body"])["volumes"], [{"name": "notes", "path": "/mnt/notes"}])
        self.assertEqual(json.loads(r[3]["body"])["volumes"],
                         [{"name": "notes", "path": "/mnt/in", "read_only": True}])
        self.assertEqual(r[4]["body"], b"kept\n")

    def test_volume_create_is_not_retried_after_a_lost_answer(self) -> None:
        def drop(h: Handler) -> None:
            h.close_connection = True
            h.wfile.flush()
            h.connection.shutdown(2)
        self.m.script = [drop, (201, {"id": VOL, "name": "n", "status": "ready"})]
        with self.assertRaises(enterprise_ai.APIConnectionError):
            self.c.volumes.create("n", 16 << 20)
        self.assertEqual(len(self.m.requests), 1, "a create that may have landed is not sent twice")

    def test_volume_errors_are_typed(self) -> None:
        self.m.script = [(409, envelope("volume_in_use", "held", "tenu"))]
        with self.assertRaises(enterprise_ai.ConflictError) as cm:
            self.c.volumes.delete("notes")
        self.assertEqual(cm.exception.code, "volume_in_use")

if __name__ == "__main__":
    unittest.main()
