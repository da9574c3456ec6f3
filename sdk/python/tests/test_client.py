"""Unit tests of the Python SDK against a scripted local HTTP server (http.server):
retries, 429/503 with Retry-After, dropped connections and idempotency, errors,
language, base64 output, long-poll, SSE, paging, and the key never showing."""
import base64
import http.server
import io
import json
import logging
import os
import socket
import sys
import threading
import time
import unittest
from typing import Any, Callable, Dict, List, Optional, Tuple, Union
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import enterprise_ai  # noqa: E402
from enterprise_ai import EnterpriseAI  # noqa: E402

KEY = "eai_0123456789abcdef_" + "5ec7e7" * 10 + "abcd"
SECRET = KEY.split("_")[2]
EID = "sbx_11111111-2222-3333-4444-555555555555"

Action = Union[str, Tuple[Any, ...], Callable[["Handler"], None]]


def envelope(code: str, en: str, fr: str, lang: str = "en", details: Optional[list] = None) -> Dict[str, Any]:
    return {"error": {"code": code, "message": fr if lang == "fr" else en,
                      "message_i18n": {"en": en, "fr": fr}, "request_id": "req-1", "details": details or []}}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a: Any) -> None:
        pass

    def _do(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        srv: "Mock" = self.server.mock  # type: ignore[attr-defined]
        srv.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                             "body": body, "t": time.monotonic()})
        with srv.lock:
            act: Action = srv.script.pop(0) if srv.script else srv.default
        if callable(act):
            act(self)
            return
        if act == "drop":  # read the request, then close without a byte of answer
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        status, payload = act[0], act[1]
        headers = act[2] if len(act) > 2 else {}
        self.reply(status, payload, headers)

    def reply(self, status: int, payload: Any, headers: Optional[Dict[str, str]] = None,
              ctype: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Request-Id", "req-1")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PUT = _do


class Mock:
    def __init__(self) -> None:
        self.requests: List[Dict[str, Any]] = []
        self.script: List[Action] = []
        self.default: Action = (500, envelope("internal", "Internal error", "Erreur interne"))
        self.lock = threading.Lock()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.mock = self  # type: ignore[attr-defined]
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        self.th = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.th.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Base(unittest.TestCase):
    def setUp(self) -> None:
        self.m = Mock()
        self.sleeps: List[float] = []
        self.c = self.client()

    def client(self, **kw: Any) -> EnterpriseAI:
        kw.setdefault("max_retries", 4)
        c = EnterpriseAI(base_url=self.m.url, api_key=KEY, **kw)
        c._t.sleep = self.sleeps.append  # record the backoff instead of sleeping
        return c

    def tearDown(self) -> None:
        self.m.close()


RUNNING = {"id": EID, "status": "running"}
DONE = {"id": EID, "status": "succeeded", "exit_code": 0, "signal": None, "stdout": "4\n", "stderr": "",
        "stdout_encoding": "utf-8", "files": [{"path": "/tmp/outputs/r.json", "size": 2, "sha256": "x"}],
        "usage": {"cpu_seconds": 0.1, "memory_mb_seconds": 1.0, "duration_s": 0.2}, "limits": {"timeout_s": 30}}


class TestRetries(Base):
    def test_503_retry_after_honoured_then_success(self) -> None:
        busy = (503, envelope("sandbox_unavailable", "No sandbox", "Aucun"), {"Retry-After": "2"})
        self.m.script = [busy, busy, (202, {"id": EID, "status": "queued"})]
        ex = self.c.sandbox.create("img", ["true"], profile="p")
        self.assertEqual(ex.id, EID)
        self.assertEqual(len(self.m.requests), 3)
        self.assertEqual(self.sleeps, [2.0, 2.0])
        keys = {r["headers"]["Idempotency-Key"] for r in self.m.requests}
        self.assertEqual(len(keys), 1, "every retry of one create carries the same Idempotency-Key")

    def test_429_retried_with_jittered_exponential_backoff(self) -> None:
        rl = (429, envelope("rate_limited", "Too many", "Trop"))
        self.m.script = [rl, rl, rl, (200, DONE)]
        c = self.client(backoff_base=0.5, backoff_max=100)
        self.assertEqual(c.sandbox.get(EID).status, "succeeded")
        self.assertEqual(len(self.sleeps), 3)
        for i, s in enumerate(self.sleeps):
            cap = 0.5 * 2 ** i
            self.assertTrue(cap / 2 <= s <= cap, "sleep %d = %r outside [%r, %r]" % (i, s, cap / 2, cap))

    def test_retries_bounded_in_count(self) -> None:
        self.m.default = (503, envelope("storage_unavailable", "Storage down", "Stockage indisponible"))
        with self.assertRaises(enterprise_ai.UnavailableError) as cm:
            self.client(max_retries=3).sandbox.get(EID)
        self.assertEqual(len(self.m.requests), 4)
        e = cm.exception
        self.assertEqual((e.status, e.code, e.request_id), (503, "storage_unavailable", "req-1"))

    def test_retries_bounded_in_time(self) -> None:
        self.m.default = (503, envelope("sandbox_unavailable", "x", "y"), {"Retry-After": "30"})
        with self.assertRaises(enterprise_ai.UnavailableError) as cm:
            self.client(retry_max_elapsed=5).sandbox.get(EID)
        self.assertEqual(len(self.m.requests), 1, "a Retry-After beyond the time budget is not waited for")
        self.assertEqual(self.sleeps, [])
        self.assertEqual(cm.exception.retry_after, 30.0)

    def test_retry_after_http_date(self) -> None:
        import email.utils
        when = email.utils.formatdate(time.time() + 3, usegmt=True)
        self.m.script = [(429, envelope("rate_limited", "a", "b"), {"Retry-After": when}), (200, DONE)]
        self.c.sandbox.get(EID)
        self.assertEqual(len(self.sleeps), 1)
        self.assertTrue(1.0 <= self.sleeps[0] <= 3.5, self.sleeps)

    def test_no_retry_on_4xx_and_500(self) -> None:
        self.m.script = [(500, envelope("internal", "Internal error", "Erreur interne"))]
        with self.assertRaises(enterprise_ai.ServerError):
            self.c.sandbox.get(EID)
        self.m.script = [(422, envelope("validation_failed", "bad", "mauvais",
                                        details=[{"path": "/limits/memory", "message": "bad quantity"}]))]
        with self.assertRaises(enterprise_ai.ValidationError) as cm:
            self.c.sandbox.create("i", ["x"], profile="p", limits={"memory": "12Qi"})
        self.assertEqual(len(self.m.requests), 2)
        self.assertEqual(cm.exception.details[0]["path"], "/limits/memory")
        self.assertIn("/limits/memory", str(cm.exception))

    def test_dropped_connection_retried_same_idempotency_key_runs_once(self) -> None:
        """The server takes the create, then the answer is lost: the retry gets the first execution."""
        created: Dict[str, str] = {}

        def create(h: Handler) -> None:
            k = h.headers["Idempotency-Key"]
            first = k not in created
            created.setdefault(k, "sbx_%08d-0000-0000-0000-000000000000" % len(created))
            if first:  # stored, answer lost
                h.close_connection = True
                h.connection.shutdown(socket.SHUT_RDWR)
                return
            h.reply(200, {"id": created[k], "status": "queued"})
        self.m.default = create
        ex = self.c.sandbox.create("img", ["python3", "-c", "print(1)"], profile="p")
        self.assertEqual(len(created), 1, "the code would have run twice")
        self.assertEqual(ex.id, list(created.values())[0])
        self.assertEqual(len(self.m.requests), 2)
        self.assertEqual(len(self.sleeps), 1)

    def test_given_idempotency_key_is_sent(self) -> None:
        self.m.script = [(202, {"id": EID, "status": "queued"})]
        self.c.sandbox.create("i", ["x"], profile="p", idempotency_key="my-key-1")
        self.assertEqual(self.m.requests[0]["headers"]["Idempotency-Key"], "my-key-1")
        self.m.script = [(202, {"id": EID, "status": "queued"}), (202, {"id": EID, "status": "queued"})]
        self.c.sandbox.create("i", ["x"], profile="p")
        self.c.sandbox.create("i", ["x"], profile="p")
        k1, k2 = (r["headers"]["Idempotency-Key"] for r in self.m.requests[1:])
        self.assertNotEqual(k1, k2, "a new create gets a new key")
        self.assertRegex(k1, r"^[0-9a-f-]{36}$")

    def test_connection_refused_becomes_connection_error(self) -> None:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        c = EnterpriseAI(base_url="http://127.0.0.1:%d" % port, api_key=KEY, max_retries=2)
        c._t.sleep = self.sleeps.append
        with self.assertRaises(enterprise_ai.APIConnectionError) as cm:
            c.sandbox.get(EID)
        self.assertEqual(len(self.sleeps), 2)
        self.assertNotIn(SECRET, str(cm.exception))


class TestErrorsAndLanguage(Base):
    def test_error_classes(self) -> None:
        cases = [(401, enterprise_ai.AuthenticationError), (403, enterprise_ai.AuthenticationError),
                 (404, enterprise_ai.NotFoundError), (400, enterprise_ai.ValidationError),
                 (413, enterprise_ai.ValidationError), (415, enterprise_ai.ValidationError),
                 (409, enterprise_ai.ConflictError), (500, enterprise_ai.ServerError),
                 (502, enterprise_ai.ServerError)]
        for st, cls in cases:
            self.m.script = [(st, envelope("c%d" % st, "m", "n"))]
            with self.assertRaises(cls):
                self.c.sandbox.get(EID)
            self.assertTrue(issubclass(cls, enterprise_ai.APIError))

    def test_french_via_accept_language(self) -> None:
        def nf(h: Handler) -> None:
            lang = "fr" if (h.headers.get("Accept-Language") or "").startswith("fr") else "en"
            h.reply(404, envelope("not_found", "Execution not found", "Exécution introuvable", lang))
        self.m.default = nf
        with self.assertRaises(enterprise_ai.NotFoundError) as cm:
            self.client(language="fr").sandbox.get(EID)
        e = cm.exception
        self.assertEqual(e.message, "Exécution introuvable")
        self.assertEqual(e.message_i18n, {"en": "Execution not found", "fr": "Exécution introuvable"})
        self.assertEqual((e.status, e.code, e.request_id), (404, "not_found", "req-1"))
        self.assertEqual(self.m.requests[0]["headers"]["Accept-Language"], "fr")
        with self.assertRaises(enterprise_ai.NotFoundError) as cm:
            self.c.sandbox.get(EID)
        self.assertEqual(cm.exception.message, "Execution not found")
        self.assertNotIn("Accept-Language", self.m.requests[1]["headers"])
        with self.assertRaises(enterprise_ai.NotFoundError) as cm:
            self.c.with_language("fr").sandbox.get(EID)
        self.assertEqual(cm.exception.message, "Exécution introuvable")

    def test_non_json_error_body(self) -> None:
        self.m.script = [(502, b"<html>bad gateway</html>")]
        with self.assertRaises(enterprise_ai.ServerError) as cm:
            self.c.sandbox.get(EID)
        self.assertEqual(cm.exception.code, "http_502")

    def test_key_never_in_repr_errors_or_logs(self) -> None:
        for text in (repr(self.c), str(self.c), repr(self.c.sandbox), repr(self.c._t)):
            self.assertNotIn(SECRET, text)
            self.assertNotIn(KEY, text)
        self.m.script = [(503, envelope("sandbox_unavailable", "x", "y")), (401, envelope(
            "unauthenticated", "Missing or invalid API key", "Clé d'API absente ou invalide"))]
        with self.assertLogs("enterprise_ai", level="DEBUG") as logs:
            with self.assertRaises(enterprise_ai.AuthenticationError) as cm:
                self.c.sandbox.get(EID)
        for text in [str(cm.exception), repr(cm.exception)] + logs.output:
            self.assertNotIn(SECRET, text)
        self.assertEqual(self.m.requests[0]["headers"]["Authorization"], "Bearer " + KEY)
        with self.assertRaises(TypeError):
            import pickle
            pickle.dumps(self.c)

    def test_constructor_defaults_from_env(self) -> None:
        with mock.patch.dict(os.environ, {"EAI_URL": self.m.url, "EAI_API_KEY": KEY}):
            c = EnterpriseAI()
            self.assertEqual(c.base_url, self.m.url)
            self.m.script = [(200, DONE)]
            c.sandbox.get(EID)
            self.assertEqual(self.m.requests[0]["headers"]["Authorization"], "Bearer " + KEY)
        with mock.patch.dict(os.environ, {}, clear=True):
            with self.assertRaises(enterprise_ai.EnterpriseAIError):
                EnterpriseAI(base_url=self.m.url)
        with self.assertRaises(enterprise_ai.EnterpriseAIError) as cm:
            EnterpriseAI(base_url=self.m.url, api_key=KEY + "\r\nX: y")
        self.assertNotIn(SECRET, str(cm.exception))


class TestExecutions(Base):
    def test_base64_output_decoded(self) -> None:
        raw = b"ok\xff\xfe\x80end\n"
        d = dict(DONE, stdout=base64.b64encode(raw).decode(), stdout_encoding="base64")
        self.m.script = [(200, d)]
        ex = self.c.sandbox.get(EID)
        self.assertEqual(ex.stdout_bytes, raw)
        self.assertEqual(ex.stdout, raw.decode("utf-8", "replace"))
        self.assertEqual(ex["stdout_encoding"], "base64")
        self.assertEqual(ex.files[0].path, "/tmp/outputs/r.json")
        self.assertEqual(ex.usage.cpu_seconds if ex.usage else None, 0.1)

    def test_wait_uses_long_poll(self) -> None:
        self.m.script = [(200, RUNNING), (200, RUNNING), (200, DONE)]
        ex = self.c.sandbox.wait(EID)
        self.assertEqual(ex.status, "succeeded")
        self.assertEqual(len(self.m.requests), 3)
        for r in self.m.requests:
            self.assertTrue(r["path"].endswith("?wait_s=60"), r["path"])
        self.m.requests.clear()
        self.m.script = [(200, RUNNING), (200, DONE)]
        self.c.sandbox.wait(EID, timeout=7.2)
        self.assertTrue(self.m.requests[0]["path"].endswith("?wait_s=8"), self.m.requests[0]["path"])

    def test_wait_timeout(self) -> None:
        def slow(h: Handler) -> None:
            time.sleep(0.3)
            h.reply(200, RUNNING)
        self.m.default = slow
        t0 = time.monotonic()
        with self.assertRaises(enterprise_ai.WaitTimeoutError) as cm:
            self.c.sandbox.wait(EID, timeout=0.5)
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual(cm.exception.execution_id, EID)
        self.assertLessEqual(len(self.m.requests), 3, "no tight loop")
        self.assertIsInstance(cm.exception, TimeoutError)

    def test_execute_creates_then_waits(self) -> None:
        self.m.script = [(202, {"id": EID, "status": "queued"}), (200, DONE)]
        ex = self.c.sandbox.execute("python:3.11-slim", ["python3", "-c", "print(2+2)"], profile="gvisor-small",
                                    limits={"timeout_s": 30}, env={"A": "b"}, stdin="in",
                                    files={"/tmp/in/a.txt": "text", "/tmp/in/b.bin": b"\x00\x01"},
                                    collect=["/tmp/outputs"], network={"egress": ["example.org:443"]},
                                    run_id="r1")
        self.assertEqual((ex.status, ex.stdout, ex.exit_code), ("succeeded", "4\n", 0))
        body = json.loads(self.m.requests[0]["body"])
        self.assertEqual(body, {"profile": "gvisor-small", "image": "python:3.11-slim",
                                "command": ["python3", "-c", "print(2+2)"], "limits": {"timeout_s": 30},
                                "env": {"A": "b"}, "stdin": "in",
                                "files": [{"path": "/tmp/in/a.txt", "content": "text"},
                                          {"path": "/tmp/in/b.bin", "content_b64": "AAE="}],
                                "collect": ["/tmp/outputs"], "network": {"egress": ["example.org:443"]},
                                "run_id": "r1"})
        self.assertEqual(self.m.requests[0]["headers"]["Content-Type"], "application/json")
        self.assertIn("wait_s=", self.m.requests[1]["path"])

    def test_list_follows_cursor(self) -> None:
        self.m.script = [(200, {"items": [{"id": "a", "status": "succeeded"}, {"id": "b", "status": "failed"}],
                                "next": "CUR1"}),
                         (200, {"items": [{"id": "c", "status": "succeeded"}], "next": None})]
        ids = [e.id for e in self.c.sandbox.list(run_id="r 1", limit=2)]
        self.assertEqual(ids, ["a", "b", "c"])
        self.assertEqual(self.m.requests[0]["path"], "/v1/sandbox/executions?run_id=r+1&limit=2")
        self.assertEqual(self.m.requests[1]["path"], "/v1/sandbox/executions?run_id=r+1&limit=2&after=CUR1")

    def test_download_file_bytes_and_cancel(self) -> None:
        self.m.script = [(200, b"\x00\xffdata"), (202, {"id": EID, "status": "running"}),
                         (409, envelope("already_finished", "done", "fini"))]
        self.assertEqual(self.c.sandbox.download_file(EID, "/tmp/outputs/a b.bin"), b"\x00\xffdata")
        self.assertEqual(self.m.requests[0]["path"], "/v1/sandbox/executions/%s/files/tmp/outputs/a%%20b.bin" % EID)
        self.assertEqual(self.c.sandbox.cancel(EID).status, "running")
        with self.assertRaises(enterprise_ai.ConflictError):
            self.c.sandbox.cancel(EID)

    def test_stream_events_until_terminal(self) -> None:
        sse = (b": hello\n\nevent: status\ndata: {\"status\": \"running\"}\n\n"
               b"event: stdout\ndata: {\"data\": \"one\\n\"}\n\n"
               b"event: stdout\r\ndata: {\"data\": \"/w==\", \"encoding\": \"base64\"}\r\n\r\n"
               b"event: stderr\ndata: {\"data\": \"e\"}\n\n"
               b"event: status\ndata: {\"status\": \"succeeded\", \"exit_code\": 0}\n\n")

        def stream(h: Handler) -> None:
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Transfer-Encoding", "chunked")  # as eaid sends it
            h.end_headers()
            for i in range(0, len(sse), 7):  # chunks of 7 bytes: lines split across chunks
                piece = sse[i:i + 7]
                h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                h.wfile.flush()
            time.sleep(3)  # the SDK stops at the terminal status, not at the end of the body
            h.wfile.write(b"0\r\n\r\n")
            h.close_connection = True
        self.m.script = [(503, envelope("storage_unavailable", "x", "y")), stream]
        t0 = time.monotonic()
        evs = list(self.c.sandbox.stream(EID))
        self.assertLess(time.monotonic() - t0, 2.5)
        self.assertEqual([e.type for e in evs], ["status", "stdout", "stdout", "stderr", "status"])
        self.assertEqual(b"".join(e.bytes for e in evs if e.type == "stdout"), b"one\n\xff")
        self.assertEqual(evs[-1].status, "succeeded")
        self.assertEqual(evs[-1].data["exit_code"], 0)
        self.assertEqual(self.m.requests[1]["headers"]["Accept"], "text/event-stream")

    def test_contracts_and_manifests(self) -> None:
        self.m.script = [(200, {"valid": False, "errors": [{"path": "/spec/x", "message": "m"}]}),
                         (201, {"kind": "tool", "name": "t", "result": "created", "manifest": {"a": 1}}),
                         (200, {"kind": "tool", "name": "t", "result": "updated", "manifest": {"a": 1}}),
                         (200, {"apiVersion": "eai.dev/v1"}), (200, {"kind": "tool", "name": "t", "result": "deleted"})]
        v = self.c.contracts.validate("tool-manifest", {"kind": "Tool"})
        self.assertEqual((v.valid, v.errors[0]["path"]), (False, "/spec/x"))
        self.assertEqual(self.c.manifests.apply({"kind": "Tool"}).result, "created")
        self.assertEqual(self.c.manifests.apply("kind: Tool\n").result, "updated")
        self.assertEqual(self.m.requests[2]["headers"]["Content-Type"], "application/yaml")
        self.assertEqual(self.m.requests[2]["body"], b"kind: Tool\n")
        self.assertEqual(self.c.manifests.get("tool", "t"), {"apiVersion": "eai.dev/v1"})
        self.assertEqual(self.c.manifests.delete("tool", "t")["result"], "deleted")
        self.assertEqual(self.m.requests[4]["method"], "DELETE")



class TestStdin(Base):
    """write_stdin / close_stdin (POST .../stdin, executions.md "Input to a running program")."""

    def test_create_stream_then_write_and_close(self) -> None:
        ok = {"id": EID, "written": 6, "eof": False, "pending": 0}
        self.m.script = [(202, {"id": EID, "status": "queued"}), (200, ok),
                         (200, {"id": EID, "written": 0, "eof": True, "pending": 0})]
        ex = self.c.sandbox.create("img", ["python3", "-i"], profile="p", stdin_mode="stream")
        self.assertEqual(json.loads(self.m.requests[0]["body"])["stdin_mode"], "stream")
        self.assertEqual(ex.write_stdin("x = 1\n"), ok)
        self.assertEqual(ex.close_stdin()["eof"], True)
        w, c = self.m.requests[1], self.m.requests[2]
        self.assertEqual((w["method"], w["path"]), ("POST", "/v1/sandbox/executions/%s/stdin" % EID))
        self.assertEqual(w["headers"]["Content-Type"], "application/octet-stream")
        self.assertEqual(w["body"], b"x = 1\n")
        self.assertEqual((c["path"], c["body"]), ("/v1/sandbox/executions/%s/stdin?eof=true" % EID, b""))

    def test_bytes_sent_as_is(self) -> None:
        self.m.script = [(200, {"id": EID, "written": 3, "eof": False, "pending": 3})]
        self.c.sandbox.write_stdin(EID, b"\x00\xff\n")
        self.assertEqual(self.m.requests[0]["body"], b"\x00\xff\n")

    def test_stdin_busy_retried_until_taken(self) -> None:
        busy = (429, envelope("stdin_busy", "busy", "occupé"), {"Retry-After": "1"})
        self.m.script = [busy, busy, busy, busy, busy, busy, (200, {"id": EID, "written": 1, "eof": False, "pending": 1})]
        r = self.c.sandbox.write_stdin(EID, "a", timeout=60)
        self.assertEqual(r["written"], 1)
        self.assertEqual(len(self.m.requests), 7)
        self.assertTrue(all(rq["body"] == b"a" for rq in self.m.requests), "the same bytes on every retry")
        self.assertTrue(self.sleeps and max(self.sleeps) <= 0.5,
                        "stdin_busy polled with short sleeps, not Retry-After: %r" % self.sleeps)

    def test_stdin_busy_bounded_by_timeout(self) -> None:
        self.m.default = (429, envelope("stdin_busy", "busy", "occupé"), {"Retry-After": "1"})
        with self.assertRaises(enterprise_ai.RateLimitError) as cm:
            self.client(max_retries=0).sandbox.write_stdin(EID, "a", timeout=0)
        self.assertEqual(cm.exception.code, "stdin_busy")

    def test_closed_is_a_conflict_not_retried(self) -> None:
        self.m.script = [(409, envelope("stdin_closed", "closed", "fermée"))]
        with self.assertRaises(enterprise_ai.ConflictError) as cm:
            self.c.sandbox.write_stdin(EID, "a")
        self.assertEqual(cm.exception.code, "stdin_closed")
        self.assertEqual(len(self.m.requests), 1)

    def test_unbound_execution_says_so(self) -> None:
        ex = enterprise_ai.Execution.from_dict({"id": EID, "status": "running"})
        with self.assertRaises(TypeError):
            ex.write_stdin("a")

    def test_pickled_execution_leaves_its_client_behind(self) -> None:
        import pickle
        self.m.script = [(200, RUNNING)]
        ex = self.c.sandbox.get(EID)
        blob = pickle.dumps(ex)
        self.assertNotIn(SECRET.encode(), blob)
        back = pickle.loads(blob)
        self.assertEqual(back.id, EID)
        with self.assertRaises(TypeError):
            back.write_stdin("a")

    def test_get_and_wait_bind(self) -> None:
        self.m.script = [(200, RUNNING), (200, {"id": EID, "written": 1, "eof": False, "pending": 0})]
        ex = self.c.sandbox.get(EID)
        ex.write_stdin("a")
        self.assertEqual(self.m.requests[1]["path"], "/v1/sandbox/executions/%s/stdin" % EID)

if __name__ == "__main__":
    unittest.main()
