#!/usr/bin/env python3
"""Streamed stdin (issue 34 item 3) against a real `eaid serve` running real
gVisor sandboxes (python:3.11-slim).  Python 3 standard library only.

An execution started with "stdin_mode": "stream" gets its input from POST
/v1/sandbox/executions/{id}/stdin while its output comes back on the event
stream: a `print(input())` loop answers each line in order, `python3 -i`
evaluates statement after statement, eof ends the program, a program that does
not read pushes back (429 stdin_busy with Retry-After), and the refusals
(another tenant's id 404, not streamed / closed / finished 409, bad bodies
422 / 413 / 415) come in the envelope in English and French.

Environment: EAI_BUILD_DIR (default <source>/build), EAI_IMAGE_DIR (default
<build>/images; python:3.11-slim is built there once when absent),
EAI_SANDBOX_RUNSC (kept: the runsc to use).  Last line: `N passed, M failed`.
"""
import base64
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("EAI_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("EAI_BUILD_DIR") or os.path.join(SRC, "build")
EAID = os.path.join(BUILD, "eaid")
IMAGES = os.environ.get("EAI_IMAGE_DIR") or os.path.join(BUILD, "images")
IMAGE = "python:3.11-slim"
PROFILE = "gvisor-small"

ECHO = ("import sys\n"
        "while True:\n"
        "    try:\n"
        "        line = input()\n"
        "    except EOFError:\n"
        "        break\n"
        "    print('echo:' + line, flush=True)\n"
        "print('bye', flush=True)\n")


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Env:
    def __init__(self, pool=None):
        self.pool = pool  # isolation.gvisor.pool (0: every run a cold runsc run), None: the default warm pool
        self.tmp = tempfile.mkdtemp(prefix="eai-stdin-")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None
        self.keys = []

    def base_env(self):
        e = dict(os.environ)
        for k in ("EAI_DATABASE_URL", "EAI_FINOPS_URL", "EAI_AUDIT_URL", "OTEL_EXPORTER_OTLP_ENDPOINT",
                  "EAI_PLUGIN_DIR", "EAI_AUTH_PEPPER_FILE", "LANG", "LC_ALL", "LC_MESSAGES"):
            e.pop(k, None)
        e["EAI_DATA_DIR"] = os.path.join(self.tmp, "data")
        e["EAI_LISTEN"] = "127.0.0.1:%d" % self.port
        e["EAI_IMAGE_DIR"] = IMAGES
        return e

    def tenant_key(self, name):
        e = self.base_env()
        r = subprocess.run([EAID, "tenants", "create", name], env=e, capture_output=True, timeout=60)
        check(r.returncode == 0, "tenants create: %s" % r.stderr)
        tenant = json.loads(r.stdout)["id"]
        r = subprocess.run([EAID, "keys", "create", "--tenant", tenant], env=e, capture_output=True, timeout=60)
        check(r.returncode == 0, "keys create: %s" % r.stderr)
        return r.stdout.decode().strip()

    def start(self):
        self.keys = [self.tenant_key("stdin-a"), self.tenant_key("stdin-b")]
        self.log = open(os.path.join(self.tmp, "eaid.log"), "ab")
        argv = [EAID, "serve"]
        if self.pool is not None:
            cfg = os.path.join(self.tmp, "eaid.yaml")
            with open(cfg, "w") as f:
                f.write("isolation:\n  gvisor:\n    pool: %d\n" % self.pool)
            argv = [EAID, "--config", cfg, "serve"]
        self.proc = subprocess.Popen(argv, env=self.base_env(), stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            check(self.proc.poll() is None, "eaid serve exited: %s" % self.log_tail())
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise Fail("eaid not ready after 60 s: " + self.log_tail())

    def log_tail(self):
        try:
            with open(os.path.join(self.tmp, "eaid.log"), "rb") as f:
                return b"\n".join(f.read().splitlines()[-20:]).decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def call(self, method, path, body=None, ctype="application/json", key=0, lang=None, timeout=30):
        data = None
        headers = {"Authorization": "Bearer " + self.keys[key]}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = ctype
        if lang:
            headers["Accept-Language"] = lang
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read() or b"null"), dict(resp.headers)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                j = json.loads(raw)
            except ValueError:
                j = {"raw": raw.decode(errors="replace")}
            return e.code, j, dict(e.headers)

    def submit(self, command, mode="stream", key=0, **extra):
        body = {"profile": PROFILE, "image": IMAGE, "command": command, "limits": {"timeout_s": 60}}
        if mode:
            body["stdin_mode"] = mode
        body.update(extra)
        st, j, _ = self.call("POST", "/v1/sandbox/executions", body, key=key)
        check(st == 202, "submit: %s %s" % (st, j))
        return j["id"]

    def stdin(self, xid, data=b"", eof=False, key=0, lang=None, retry_s=20):
        """POST raw bytes; retries stdin_busy (429) within retry_s."""
        deadline = time.time() + retry_s
        while True:
            path = "/v1/sandbox/executions/%s/stdin%s" % (xid, "?eof=true" if eof else "")
            st, j, h = self.call("POST", path, data, ctype="application/octet-stream", key=key, lang=lang)
            if st == 429 and j.get("error", {}).get("code") == "stdin_busy" and time.time() < deadline:
                time.sleep(0.05)
                continue
            return st, j, h

    def wait(self, xid, key=0):
        deadline = time.time() + 90
        while time.time() < deadline:
            st, j, _ = self.call("GET", "/v1/sandbox/executions/%s?wait_s=30" % xid, key=key, timeout=40)
            check(st == 200, "get: %s %s" % (st, j))
            if j["status"] not in ("queued", "running"):
                return j
        raise Fail("execution %s did not end" % xid)


class Events:
    """Follows GET .../events in a thread; stdout text accumulates."""

    def __init__(self, env, xid):
        self.out = ""
        self.cond = threading.Condition()
        self.status = None
        req = urllib.request.Request(env.url + "/v1/sandbox/executions/%s/events" % xid,
                                     headers={"Authorization": "Bearer " + env.keys[0]})
        self.resp = urllib.request.urlopen(req, timeout=120)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        ev = None
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    ev = line[7:]
                elif line.startswith("data: ") and ev:
                    d = json.loads(line[6:])
                    with self.cond:
                        if ev == "stdout":
                            txt = d["data"]
                            if d.get("encoding") == "base64":
                                txt = base64.b64decode(txt).decode(errors="replace")
                            self.out += txt
                        elif ev == "status":
                            self.status = d["status"]
                        self.cond.notify_all()
        except Exception:
            pass
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, text, start=0, timeout=30):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                i = self.out.find(text, start)
                if i >= 0:
                    return i + len(text)
                left = deadline - time.time()
                check(left > 0, "no %r in stdout within %ss; stdout=%r" % (text, timeout, self.out[-300:]))
                self.cond.wait(left)

    def close(self):
        try:
            self.resp.close()
        except Exception:
            pass


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


# ---------------------------------------------------------------- cases

def case_echo_in_order(env):
    xid = env.submit(["python3", "-u", "-c", ECHO])
    ev = Events(env, xid)
    pos, rtt = 0, []
    for i in range(30):
        t0 = time.monotonic()
        st, j, _ = env.stdin(xid, ("line %d\n" % i).encode())
        check(st == 200 and j["written"] == len("line %d\n" % i), "write %d: %s %s" % (i, st, j))
        pos = ev.wait_for("echo:line %d\n" % i, pos)
        rtt.append((time.monotonic() - t0) * 1000)
    # several lines in one call, answered in order
    st, j, _ = env.stdin(xid, b"a\nb\nc\n")
    check(st == 200, "multi: %s %s" % (st, j))
    pos = ev.wait_for("echo:a\necho:b\necho:c\n", pos)
    st, j, _ = env.stdin(xid, b"", eof=True)
    check(st == 200 and j["eof"] is True, "eof: %s %s" % (st, j))
    rec = env.wait(xid)
    ev.close()
    check(rec["status"] == "succeeded" and rec["exit_code"] == 0, "end: %s" % rec)
    want = "".join("echo:line %d\n" % i for i in range(30)) + "echo:a\necho:b\necho:c\nbye\n"
    check(rec["stdout"] == want, "stdout in order: %r" % rec["stdout"][:400])
    # after eof, and after the end
    st, j, _ = env.stdin(xid, b"x\n")
    check(st == 409 and j["error"]["code"] == "already_finished", "after end: %s %s" % (st, j))
    print("  stdin round trip (write -> answer on the event stream), 30 lines: p50 %.1f ms, p90 %.1f ms, max %.1f ms"
          % (pct(rtt, 50), pct(rtt, 90), max(rtt)), flush=True)


def case_python_i(env):
    xid = env.submit(["python3", "-u", "-i", "-q"])
    ev = Events(env, xid)
    pos = 0
    st, j, _ = env.stdin(xid, b"x = 41\n")
    check(st == 200, "x: %s %s" % (st, j))
    env.stdin(xid, b"print(x + 1)\n")
    pos = ev.wait_for("42\n", pos)
    # JSON form, text then base64
    st, j, _ = env.call("POST", "/v1/sandbox/executions/%s/stdin" % xid, {"data": "x = x * 2\n"})
    check(st == 200, "json data: %s %s" % (st, j))
    st, j, _ = env.call("POST", "/v1/sandbox/executions/%s/stdin" % xid,
                        {"data_b64": base64.b64encode(b"print(x)\n").decode()})
    check(st == 200, "json data_b64: %s %s" % (st, j))
    pos = ev.wait_for("82\n", pos)
    st, j, _ = env.call("POST", "/v1/sandbox/executions/%s/stdin" % xid, {"eof": True})
    check(st == 200 and j["eof"], "json eof: %s %s" % (st, j))
    st, j, _ = env.stdin(xid, b"print(1)\n", retry_s=0)
    check(st == 409 and j["error"]["code"] in ("stdin_closed", "already_finished"), "after eof: %s %s" % (st, j))
    rec = env.wait(xid)
    ev.close()
    check(rec["status"] == "succeeded", "python -i end: %s" % rec)
    check(rec["stdout"] == "42\n82\n", "python -i stdout: %r" % rec["stdout"])


def case_back_pressure(env):
    # a program that never reads: the buffer fills, then 429 stdin_busy
    xid = env.submit(["python3", "-c", "import time; time.sleep(60)"])
    chunk = b"y" * (256 * 1024)
    busy = None
    total = 0
    for _ in range(64):  # at most 16 MiB
        st, j, h = env.stdin(xid, chunk, retry_s=0 if total else 20)
        if st == 429:
            busy = (j, h)
            break
        check(st == 200, "fill: %s %s" % (st, j))
        total += len(chunk)
    check(busy is not None, "no back-pressure after %d bytes" % total)
    j, h = busy
    check(j["error"]["code"] == "stdin_busy" and j["error"].get("retryable") in (True, None),
          "busy envelope: %s" % j)
    check(h.get("Retry-After") == "1", "Retry-After: %s" % h)
    print("  back-pressure after %d KiB accepted" % (total // 1024), flush=True)
    # French envelope
    st, j, _ = env.stdin(xid, chunk, lang="fr", retry_s=0)
    check(st == 429 and "réessayez" in j["error"]["message"], "busy fr: %s %s" % (st, j))
    st, _, _ = env.call("POST", "/v1/sandbox/executions/%s/cancel" % xid, {})
    check(st == 202, "cancel: %s" % st)
    rec = env.wait(xid)
    check(rec["status"] == "cancelled", "cancelled: %s" % rec["status"])
    st, j, _ = env.stdin(xid, b"z", retry_s=0)
    check(st == 409, "after cancel: %s %s" % (st, j))


def case_refusals(env):
    # not started with stream
    xid = env.submit(["python3", "-c", "import time; time.sleep(3)"], mode=None)
    st, j, _ = env.stdin(xid, b"x", retry_s=0)
    check(st == 409 and j["error"]["code"] == "stdin_not_streamed", "not streamed: %s %s" % (st, j))
    st, j, _ = env.stdin(xid, b"x", lang="fr", retry_s=0)
    check(st == 409 and "stdin_mode stream" in j["error"]["message"] and "exécution" in j["error"]["message"],
          "not streamed fr: %s" % j)
    # another tenant's execution, an unknown one
    sid = env.submit(["python3", "-u", "-c", ECHO])
    st, j, _ = env.stdin(sid, b"x\n", key=1, retry_s=0)
    check(st == 404 and j["error"]["code"] == "not_found", "other tenant: %s %s" % (st, j))
    st, j, _ = env.stdin("sbx_00000000-0000-4000-8000-000000000000", b"x", retry_s=0)
    check(st == 404, "unknown id: %s %s" % (st, j))
    # bodies
    st, j, _ = env.call("POST", "/v1/sandbox/executions/%s/stdin" % sid, {"data": "a", "data_b64": "YQ=="})
    check(st == 422 and j["error"]["details"][0]["path"] == "/data_b64", "both: %s %s" % (st, j))
    st, j, _ = env.call("POST", "/v1/sandbox/executions/%s/stdin" % sid, {"bogus": 1}, lang="fr")
    check(st == 422 and "permis" in j["error"]["details"][0]["message"], "unknown field fr: %s %s" % (st, j))
    st, j, _ = env.call("POST", "/v1/sandbox/executions/%s/stdin" % sid, b"x", ctype="text/plain")
    check(st == 415, "text/plain: %s %s" % (st, j))
    st, j, _ = env.call("POST", "/v1/sandbox/executions/%s/stdin" % sid, b"y" * (1024 * 1024 + 1),
                        ctype="application/octet-stream")
    check(st == 413, "too large: %s %s" % (st, j))
    env.stdin(sid, b"", eof=True)
    rec = env.wait(sid)
    check(rec["status"] == "succeeded" and rec["stdout"] == "bye\n", "refusals run: %s" % rec)
    # admission
    body = {"profile": PROFILE, "image": IMAGE, "command": ["true"], "stdin_mode": "stream", "stdin": "x"}
    st, j, _ = env.call("POST", "/v1/sandbox/executions", body)
    check(st == 422 and any(d["path"] == "/stdin" for d in j["error"]["details"]), "stream+stdin: %s %s" % (st, j))
    body = {"profile": PROFILE, "image": IMAGE, "command": ["true"], "stdin_mode": "pipe"}
    st, j, _ = env.call("POST", "/v1/sandbox/executions", body)
    check(st == 422, "bad mode: %s %s" % (st, j))
    env.wait(xid)


def case_audit(env):
    # one sandbox.stdin audit event per call: allow with the byte count, deny
    # with the code (read from the embedded SQLite; async appends: wait)
    import sqlite3
    deadline = time.time() + 20
    while True:
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(env.tmp, "data", "eai.db"), uri=True, timeout=10)
        try:
            rows = db.execute("SELECT decision, doc FROM audit_events WHERE action = 'sandbox.stdin'").fetchall()
        finally:
            db.close()
        allow = [json.loads(d) for dec, d in rows if dec == "allow"]
        deny = [json.loads(d) for dec, d in rows if dec == "deny"]
        reasons = {d.get("reason") for d in deny}
        if (len(allow) >= 30 and {"stdin_not_streamed", "not_found", "stdin_busy"} <= reasons) or time.time() > deadline:
            break
        time.sleep(0.2)
    check(len(allow) >= 30, "allow events: %d" % len(allow))
    check(any(a.get("reason") == "bytes=7 eof=false" for a in allow), "allow reason: %s" % allow[:2])
    check({"stdin_not_streamed", "not_found", "stdin_busy"} <= reasons, "deny reasons: %s" % reasons)
    r = subprocess.run([EAID, "audit", "verify"], env=env.base_env(), capture_output=True, timeout=60)
    check(r.returncode == 0, "audit verify: %s %s" % (r.stdout, r.stderr))


def case_session_stream(env):
    # streamed stdin inside a session: python3 -i reads a file an earlier
    # execution of the session wrote, answers each statement in order, and
    # the session lives on after eof (its next execution sees what it wrote)
    st, j, _ = env.call("POST", "/v1/sandbox/sessions", {"profile": PROFILE, "image": IMAGE}, timeout=120)
    check(st == 201, "session: %s %s" % (st, j))
    sid = j["id"]
    try:
        st, j, _ = env.call("POST", "/v1/sandbox/sessions/%s/executions" % sid,
                            {"command": ["sh", "-c", "echo 20 > /tmp/base"]})
        check(st == 202, "first: %s %s" % (st, j))
        check(env.wait(j["id"])["status"] == "succeeded", "first execution")
        st, j, _ = env.call("POST", "/v1/sandbox/sessions/%s/executions" % sid,
                            {"command": ["python3", "-u", "-i", "-q"], "stdin_mode": "stream"})
        check(st == 202, "session stream: %s %s" % (st, j))
        xid = j["id"]
        ev = Events(env, xid)
        pos = 0
        env.stdin(xid, b"b = int(open('/tmp/base').read())\n")
        for i in range(5):
            st, j, _ = env.stdin(xid, ("print('r%d', b + %d)\n" % (i, i)).encode())
            check(st == 200, "write %d: %s %s" % (i, st, j))
            pos = ev.wait_for("r%d %d\n" % (i, 20 + i), pos)
        env.stdin(xid, b"_ = open('/tmp/after', 'w').write(str(b * 2))\n")
        st, j, _ = env.stdin(xid, b"", eof=True)
        check(st == 200 and j["eof"] is True, "eof: %s %s" % (st, j))
        rec = env.wait(xid)
        ev.close()
        check(rec["status"] == "succeeded", "session python -i end: %s" % rec)
        check(rec["stdout"] == "".join("r%d %d\n" % (i, 20 + i) for i in range(5)), "stdout: %r" % rec["stdout"])
        check(rec.get("session_id") in (None, sid), "session id of the execution: %s" % rec.get("session_id"))
        # another tenant cannot write to it
        st, j, _ = env.stdin(xid, b"x\n", key=1, retry_s=0)
        check(st == 404, "other tenant: %s %s" % (st, j))
        st, j, _ = env.call("POST", "/v1/sandbox/sessions/%s/executions" % sid, {"command": ["cat", "/tmp/after"]})
        check(st == 202, "after: %s %s" % (st, j))
        rec = env.wait(j["id"])
        check(rec["status"] == "succeeded" and rec["stdout"] == "40", "the session after eof: %s" % rec)
        # the Python SDK: session.submit(stdin_mode="stream") -> ex.write_stdin / close_stdin
        sys.path.insert(0, os.path.join(SRC, "sdk", "python"))
        from enterprise_ai import EnterpriseAI
        c = EnterpriseAI(base_url=env.url, api_key=env.keys[0])
        h = c.sandbox.sessions.get(sid)
        ex = h.submit(["python3", "-u", "-c", "import sys\nfor l in sys.stdin: print(int(l) * 3)"],
                      stdin_mode="stream")
        ex.write_stdin("5\n")
        ex.write_stdin("7\n")
        ex.close_stdin()
        done = c.sandbox.wait(ex.id, timeout=60)
        check(done.status == "succeeded" and done.stdout == "15\n21\n", "sdk in session: %s %r" % (done.status,
                                                                                                     done.stdout))
    finally:
        env.call("DELETE", "/v1/sandbox/sessions/%s" % sid, timeout=60)


def case_python_sdk(env):
    # the Python SDK: create(stdin_mode="stream"), ex.write_stdin / close_stdin, stream()
    sys.path.insert(0, os.path.join(SRC, "sdk", "python"))
    from enterprise_ai import EnterpriseAI
    c = EnterpriseAI(base_url=env.url, api_key=env.keys[0])
    ex = c.sandbox.create(IMAGE, ["python3", "-u", "-i", "-q"], profile=PROFILE, stdin_mode="stream",
                          limits={"timeout_s": 60})
    got = queue.Queue()

    def follow():
        for e in c.sandbox.stream(ex.id):
            if e.type == "stdout":
                got.put(e.text)
            elif e.type == "status" and e.status not in ("queued", "running"):
                got.put(None)
                return
    th = threading.Thread(target=follow, daemon=True)
    th.start()
    out = ""
    for i, (stmt, want) in enumerate((("n = 6", None), ("print(n * 7)", "42\n"), ("print([n] * 2)", "[6, 6]\n"))):
        ex.write_stdin(stmt + "\n")
        if want:
            deadline = time.time() + 30
            while want not in out:
                check(time.time() < deadline, "sdk: no %r; stdout %r" % (want, out))
                try:
                    x = got.get(timeout=max(0.1, deadline - time.time()))
                except queue.Empty:
                    continue
                check(x is not None, "sdk: ended early; stdout %r" % out)
                out += x
    ex.close_stdin()
    done = c.sandbox.wait(ex.id, timeout=60)
    check(done.status == "succeeded" and done.stdout == "42\n[6, 6]\n", "sdk end: %s %r" % (done.status, done.stdout))
    th.join(10)


CASES = [case_echo_in_order, case_python_i, case_back_pressure, case_refusals, case_audit, case_session_stream,
         case_python_sdk]
# the same through a cold `runsc run` (the program's stdin is runsc's pipe,
# not the warm launcher's control socket)
COLD_CASES = [case_echo_in_order, case_python_i, case_back_pressure]


def main():
    if os.geteuid() != 0:
        print("skipped: needs root for runsc")
        return 77
    if not os.path.isdir(os.path.join(IMAGES, "python", "3.11-slim", "rootfs")):
        print("building image %s into %s (once)" % (IMAGE, IMAGES), flush=True)
        os.makedirs(IMAGES, exist_ok=True)
        e = dict(os.environ, EAI_IMAGE_DIR=IMAGES)
        r = subprocess.run([EAID, "images", "build", IMAGE, "--packages", "python3-minimal,libpython3.11-stdlib"],
                           env=e, timeout=1200)
        if r.returncode != 0:
            print("eaid images build failed")
            return 1
    only = [s for s in os.environ.get("EAI_STDIN_ONLY", "").split(",") if s]
    passed = failed = 0
    for label, pool, cases in (("warm", None, CASES), ("cold", 0, COLD_CASES)):
        env = Env(pool)
        try:
            env.start()
            for c in cases:
                if only and not any(o in c.__name__ for o in only):
                    continue
                t0 = time.time()
                try:
                    c(env)
                    passed += 1
                    print("ok   %s %s (%.1fs)" % (label, c.__name__, time.time() - t0), flush=True)
                except Exception as e:
                    failed += 1
                    print("FAIL %s %s: %s" % (label, c.__name__, e), flush=True)
                    if not isinstance(e, Fail):
                        traceback.print_exc()
                    print(env.log_tail(), flush=True)
        except Fail as e:
            failed += 1
            print("FAIL %s: %s" % (label, e), flush=True)
        finally:
            env.stop()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
