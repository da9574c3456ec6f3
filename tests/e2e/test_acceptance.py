#!/usr/bin/env python3
"""Black-box acceptance suite against `eaid serve` on its defaults.

Starts its own eaid on a free loopback port with a temporary data dir, makes
tenants and keys with the CLI, runs real executions in gVisor with the
python:3.11-slim image and checks the behaviour promised by API.md and the
issues' "How it will be checked" sections.  Python 3 standard library only.

Environment:
  EAI_BUILD_DIR   build dir holding eaid (default: <source>/build)
  EAI_SOURCE_DIR  source tree (default: two levels above this file)
  EAI_IMAGE_DIR   image store (default: <build>/images; python:3.11-slim is
                  built there with `eaid images build` when absent)
  EAI_ACCEPT_ONLY comma-separated substrings: run only the matching cases
                  (the server start, the restart and the final stop always run)

Last line: `N passed, M failed`; exit status 1 when anything failed.
"""
import base64
import hashlib
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

IMAGE = "python:3.11-slim"
IMAGE_PACKAGES = "python3-minimal,libpython3.11-stdlib"
PROFILE = "gvisor-small"
TERMINAL = ("succeeded", "failed", "timeout", "oom_killed", "cancelled", "error")
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
HOST_MARKER_VAR = "EAI_ACCEPT_HOST_MARKER"

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("EAI_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("EAI_BUILD_DIR") or os.path.join(SRC, "build")
EAID = os.path.join(BUILD, "eaid")
IMAGES = os.environ.get("EAI_IMAGE_DIR") or os.path.join(BUILD, "images")


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def parse_ts(s):
    """RFC 3339 with milliseconds -> seconds since the epoch (float)."""
    check(isinstance(s, str) and RFC3339.match(s), "bad timestamp %r" % (s,))
    import datetime
    t = s.replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(t).timestamp()


# ---------------------------------------------------------------- server ---

class Server:
    def __init__(self, extra_env=None):
        self.extra_env = extra_env or {}
        self.tmp = tempfile.mkdtemp(prefix="eai-accept-")
        self.data = os.path.join(self.tmp, "data")
        os.makedirs(self.data, mode=0o700)
        self.port = free_port()
        self.proc = None
        self.log_path = os.path.join(self.tmp, "eaid.log")
        self.marker = "host-secret-" + uuid.uuid4().hex

    def env(self):
        e = dict(os.environ)
        for k in ("EAI_FINOPS_URL", "EAI_AUDIT_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "EAI_DATABASE_URL",
                  "EAI_PLUGIN_DIR", "EAI_SANDBOX_RUNSC", "EAI_AUTH_PEPPER_FILE", "EAI_LOG_LEVEL"):
            e.pop(k, None)
        e["EAI_DATA_DIR"] = self.data
        e["EAI_LISTEN"] = "127.0.0.1:%d" % self.port
        e["EAI_IMAGE_DIR"] = IMAGES
        e.update(self.extra_env)
        return e

    def cli(self, *args, check_rc=True):
        r = subprocess.run([EAID] + list(args), env=self.env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=120)
        if check_rc and r.returncode != 0:
            raise Fail("eaid %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.decode(errors="replace")))
        return r

    def start(self, want_ready=True):
        e = self.env()
        e[HOST_MARKER_VAR] = self.marker
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([EAID, "serve"], env=e, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise Fail("eaid serve exited with %s; log tail:\n%s" % (self.proc.returncode, self.log_tail()))
            try:
                st, _, body = raw_request(self.port, "GET", "/readyz" if want_ready else "/healthz", timeout=5)
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise Fail("eaid not ready after 60 s; log tail:\n" + self.log_tail())

    def log_tail(self, n=30):
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def rss_kb(self, field="VmRSS"):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return -1

    def stop(self, timeout=30):
        """SIGTERM, then wait; returns (exit code, seconds) or raises."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None, 0.0
        t0 = time.time()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise Fail("eaid did not exit within %d s of SIGTERM" % timeout)
        return rc, time.time() - t0

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


def raw_request(port, method, path, body=None, headers=None, timeout=70):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body
        self.json = None
        if body:
            try:
                self.json = json.loads(body.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                self.json = None

    def code(self):
        try:
            return self.json["error"]["code"]
        except (TypeError, KeyError):
            return None

    def __repr__(self):
        return "HTTP %d %s" % (self.status, self.body[:400].decode(errors="replace"))


class Client:
    def __init__(self, srv, key):
        self.srv, self.key = srv, key

    def req(self, method, path, body=None, headers=None, key="default", timeout=70):
        h = {}
        k = self.key if key == "default" else key
        if k is not None:
            h["Authorization"] = "Bearer " + k
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        st, hd, data = raw_request(self.srv.port, method, path, body, h, timeout)
        return Resp(st, hd, data)

    def submit(self, body, headers=None):
        r = self.req("POST", "/v1/sandbox/executions", body, headers)
        check(r.status == 202, "POST expected 202, got %r" % r)
        return r.json["id"]

    def get(self, eid, wait=None):
        p = "/v1/sandbox/executions/" + eid + ("?wait_s=%d" % wait if wait is not None else "")
        r = self.req("GET", p)
        check(r.status == 200, "GET %s: %r" % (eid, r))
        return r.json

    def wait(self, eid, limit=90):
        deadline = time.time() + limit
        while True:
            left = int(deadline - time.time())
            d = self.get(eid, wait=max(0, min(30, left)))
            if d["status"] in TERMINAL:
                return d
            if time.time() >= deadline:
                raise Fail("%s not terminal after %d s (status %s)" % (eid, limit, d["status"]))

    def run(self, command, limit=90, **kw):
        body = {"profile": PROFILE, "image": IMAGE, "command": command}
        body.update(kw)
        return self.wait(self.submit(body), limit)

    def py(self, code, **kw):
        return self.run(["python3", "-c", code], **kw)


def out(d, stream="stdout"):
    """Decoded stream of an execution record (bytes)."""
    v = d.get(stream) or ""
    if d.get(stream + "_encoding") == "base64":
        return base64.b64decode(v)
    return v.encode("utf-8")


def short(d):
    keys = ("id", "status", "exit_code", "signal", "error", "stdout", "stderr", "stdout_truncated")
    r = {k: d.get(k) for k in keys}
    for s in ("stdout", "stderr"):
        if isinstance(r[s], str) and len(r[s]) > 300:
            r[s] = r[s][:300] + "...(%d)" % len(r[s])
    return json.dumps(r)


# ----------------------------------------------------------------- cases ---

CASES = []


def case(name):
    def deco(fn):
        CASES.append((name, fn))
        return fn
    return deco


class Ctx:
    pass


C = Ctx()


@case("basic: print(2+2) succeeds with output, usage, echo and timestamps")
def t_basic():
    body = {"profile": PROFILE, "image": IMAGE, "command": ["python3", "-c", "print(2+2)"]}
    r = C.a.req("POST", "/v1/sandbox/executions", body)
    check(r.status == 202, "POST: %r" % r)
    eid = r.json["id"]
    check(re.match(r"^sbx_[0-9a-f-]{36}$", eid), "id %r" % eid)
    check(r.json.get("status") in ("queued", "running"), "POST status %r" % r.json)
    check(r.headers.get("location") == "/v1/sandbox/executions/" + eid, "Location %r" % r.headers.get("location"))
    d = C.a.wait(eid)
    check(d["status"] == "succeeded", "status: " + short(d))
    check(d["stdout"] == "4\n", "stdout %r" % d["stdout"])
    check(d["stderr"] == "", "stderr %r" % d["stderr"])
    check(d["exit_code"] == 0 and d["signal"] is None, "exit %r signal %r" % (d["exit_code"], d["signal"]))
    check(d["stdout_truncated"] is False and d["stderr_truncated"] is False, "truncated flags")
    u = d.get("usage") or {}
    for k in ("cpu_seconds", "memory_mb_seconds", "duration_s"):
        check(isinstance(u.get(k), (int, float)) and u[k] > 0, "usage.%s = %r" % (k, u.get(k)))
    check(d["profile"] == PROFILE and d["backend"] == "gvisor" and d["image"] == IMAGE,
          "echo profile/backend/image: %r %r %r" % (d["profile"], d["backend"], d["image"]))
    check(d["command"] == body["command"], "command echo %r" % d["command"])
    lim = d.get("limits") or {}
    for k in ("cpu", "memory", "timeout_s", "pids", "output_bytes"):
        check(k in lim, "limits lacks %s: %r" % (k, lim))
    check(d.get("error") is None, "error %r" % d.get("error"))
    c, s, f = parse_ts(d["created_at"]), parse_ts(d["started_at"]), parse_ts(d["finished_at"])
    check(c <= s <= f, "timestamps out of order %s %s %s" % (d["created_at"], d["started_at"], d["finished_at"]))
    check(abs(time.time() - f) < 120, "finished_at far from now: %s" % d["finished_at"])
    C.basic_id = eid


@case("no command: the image's own runs (python3, as its Docker image's Cmd), recorded")
def t_image_command():
    eid = C.a.submit({"profile": PROFILE, "image": IMAGE, "stdin": "print(6 * 7)"})
    d = C.a.wait(eid)
    check(d["status"] == "succeeded" and d["stdout"] == "42\n", short(d))
    check(d["command"] == ["python3"], "command recorded %r" % d["command"])


@case("exit 3 -> failed with exit_code 3")
def t_exit3():
    d = C.a.py("import sys; print('bye'); sys.exit(3)")
    check(d["status"] == "failed", short(d))
    check(d["exit_code"] == 3, "exit_code %r" % d["exit_code"])
    check(d["signal"] is None, "signal %r" % d["signal"])
    check(d["stdout"] == "bye\n", "stdout %r" % d["stdout"])


@case("killed by its own signal -> failed with signal")
def t_own_signal():
    d = C.a.py("import os, signal; os.kill(os.getpid(), signal.SIGTERM); print('alive')")
    check(d["status"] == "failed", short(d))
    check(d["signal"] == 15, "signal %r (want 15)" % d["signal"])
    check("alive" not in d["stdout"], "program survived its signal")


@case("timeout: timeout_s 2 busy loop -> timeout within 2 s of the limit, output kept")
def t_timeout():
    code = "print('before-loop', flush=True)\nwhile True:\n    pass\n"
    t0 = time.time()
    d = C.a.py(code, limits={"timeout_s": 2})
    wall = time.time() - t0
    check(d["status"] == "timeout", short(d))
    check("before-loop" in d["stdout"], "output so far lost: %r" % d["stdout"])
    run_s = parse_ts(d["finished_at"]) - parse_ts(d["started_at"])
    check(2.0 - 0.1 <= run_s <= 4.0, "started->finished %.2f s, want 2..4" % run_s)
    C.notes.append("timeout: started->finished %.2f s, client wall %.2f s" % (run_s, wall))


@case("OOM: 64Mi limit, 200 MB allocation -> oom_killed")
def t_oom():
    d = C.a.py("x = b'x' * (200 * 1024 * 1024)\nprint(len(x))", limits={"memory": "64Mi"})
    check(d["status"] == "oom_killed", short(d))
    check(d["limits"]["memory"] in ("64Mi", 67108864), "limits.memory %r" % d["limits"]["memory"])


@case("fork bomb contained, the next execution succeeds")
def t_forkbomb():
    code = ("import os\n"
            "print('bomb', flush=True)\n"
            "while True:\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        pass\n")
    t0 = time.time()
    d = C.a.py(code, limits={"timeout_s": 5}, limit=60)
    check(d["status"] in ("failed", "timeout", "oom_killed"), short(d))
    check(time.time() - t0 < 40, "fork bomb took %.1f s to end" % (time.time() - t0))
    C.notes.append("fork bomb: status %s after %.1f s" % (d["status"], time.time() - t0))
    st, _, _ = raw_request(C.srv.port, "GET", "/healthz", timeout=10)
    check(st == 200, "healthz after fork bomb: %d" % st)
    d2 = C.a.py("print('after')")
    check(d2["status"] == "succeeded" and d2["stdout"] == "after\n", "next execution: " + short(d2))


@case("output flood 50 MB -> truncated at output_bytes, eaid RSS bounded")
def t_flood():
    before = C.srv.rss_kb("VmRSS")
    code = ("import sys\nb = b'a' * (1 << 20)\n"
            "for _ in range(50):\n    sys.stdout.buffer.write(b)\n"
            "sys.stdout.flush()\nsys.stderr.write('done')\n")
    d = C.a.py(code, limits={"timeout_s": 60})
    after = C.srv.rss_kb("VmRSS")
    hwm = C.srv.rss_kb("VmHWM")
    check(d["status"] == "succeeded", short(d))
    cap = d["limits"]["output_bytes"]
    check(d["stdout_truncated"] is True, "stdout_truncated %r" % d["stdout_truncated"])
    check(len(out(d)) == cap, "stdout length %d, cap %d" % (len(out(d)), cap))
    check(d["stderr"] == "done" and d["stderr_truncated"] is False, "stderr %r" % d["stderr"][:100])
    grow = (after - before) / 1024.0
    check(grow < 100, "VmRSS grew %.1f MB (%d -> %d kB)" % (grow, before, after))
    check((hwm - before) / 1024.0 < 100, "VmHWM %d kB vs VmRSS before %d kB" % (hwm, before))
    C.notes.append("flood: eaid VmRSS %d -> %d kB, VmHWM %d kB" % (before, after, hwm))


@case("non-UTF-8 output -> valid JSON, documented base64 encoding")
def t_non_utf8():
    raw = b"ok\xff\xfe\x80\x00end\n"
    eid = C.a.submit({"profile": PROFILE, "image": IMAGE,
                      "command": ["python3", "-c", "import sys; sys.stdout.buffer.write(%r)" % raw]})
    C.a.wait(eid)
    r = C.a.req("GET", "/v1/sandbox/executions/" + eid)
    text = r.body.decode("utf-8")  # raises when the body is not UTF-8
    d = json.loads(text)
    check(d["status"] == "succeeded", short(d))
    check(d.get("stdout_encoding") == "base64", "stdout_encoding %r" % d.get("stdout_encoding"))
    check(base64.b64decode(d["stdout"]) == raw, "decoded stdout %r" % d["stdout"])
    check(d.get("stderr_encoding") == "utf-8", "stderr_encoding %r" % d.get("stderr_encoding"))


@case("stdin is delivered to the program")
def t_stdin():
    d = C.a.py("import sys; data = sys.stdin.read(); sys.stdout.write(data.upper())",
               stdin="hello\nstdin wörld\n")
    check(d["status"] == "succeeded", short(d))
    check(d["stdout"] == "HELLO\nSTDIN WÖRLD\n", "stdout %r" % d["stdout"])


@case("env visible; host environment not visible")
def t_env():
    d = C.a.py("import os, json; print(json.dumps(dict(os.environ)))", env={"FOO": "bar", "ANSWER": "42"})
    check(d["status"] == "succeeded", short(d))
    env = json.loads(d["stdout"])
    check(env.get("FOO") == "bar" and env.get("ANSWER") == "42", "request env missing: %r" % env)
    check(HOST_MARKER_VAR not in env, "host env var leaked into the sandbox")
    check(C.srv.marker not in d["stdout"], "host marker value leaked")
    hosthome = os.environ.get("HOME", "/root")
    check(env.get("HOME") != hosthome or hosthome == "/tmp", "HOME is the host's %r" % env.get("HOME"))
    for k in env:
        check(not k.startswith("EAI_"), "server env %s visible" % k)


@case("input files (content and content_b64) are readable")
def t_files_in():
    blob = bytes(range(256)) * 4
    code = ("import hashlib\n"
            "print(open('/tmp/in/data.csv').read(), end='')\n"
            "b = open('/tmp/in/blob.bin','rb').read()\n"
            "print(len(b), hashlib.sha256(b).hexdigest())\n")
    d = C.a.py(code, files=[{"path": "/tmp/in/data.csv", "content": "a,b\n1,2\n"},
                            {"path": "/tmp/in/blob.bin", "content_b64": base64.b64encode(blob).decode()}])
    check(d["status"] == "succeeded", short(d))
    check(d["stdout"] == "a,b\n1,2\n%d %s\n" % (len(blob), hashlib.sha256(blob).hexdigest()),
          "stdout %r" % d["stdout"])


@case("collect /tmp/outputs: files[] size+sha256, GET files returns the bytes; symlink not followed")
def t_collect():
    payload = json.dumps({"answer": 42, "text": "héllo"}) + "\n"
    pb = payload.encode()
    code = ("import os\n"
            "os.makedirs('/tmp/outputs/sub', exist_ok=True)\n"
            "open('/tmp/outputs/result.json','w', encoding='utf-8').write(%r)\n"
            "open('/tmp/outputs/sub/bin.dat','wb').write(bytes(range(256)))\n"
            "os.symlink('/etc/passwd', '/tmp/outputs/passwd')\n"
            "os.symlink('/etc', '/tmp/outputs/etcdir')\n"
            "print('ok')\n") % payload
    d = C.a.py(code)
    check(d["status"] == "succeeded", short(d))
    files = {f["path"]: f for f in d.get("files") or []}
    check("/tmp/outputs/result.json" in files, "files[] %r" % list(files))
    f = files["/tmp/outputs/result.json"]
    check(f["size"] == len(pb) and f["sha256"] == hashlib.sha256(pb).hexdigest(), "result.json entry %r" % f)
    b = bytes(range(256))
    g = files.get("/tmp/outputs/sub/bin.dat")
    check(g and g["size"] == 256 and g["sha256"] == hashlib.sha256(b).hexdigest(), "sub/bin.dat entry %r" % g)
    r = C.a.req("GET", "/v1/sandbox/executions/%s/files/tmp/outputs/result.json" % d["id"])
    check(r.status == 200 and r.body == pb, "GET file: %r" % r)
    r = C.a.req("GET", "/v1/sandbox/executions/%s/files/tmp/outputs/sub/bin.dat" % d["id"])
    check(r.status == 200 and r.body == b, "GET binary file: %r" % r)
    with open("/etc/passwd", "rb") as fh:
        host_passwd = fh.read()
    for p, e in files.items():
        check(not p.startswith("/tmp/outputs/etcdir"), "symlinked dir followed: %s" % p)
        if p == "/tmp/outputs/passwd":
            r = C.a.req("GET", "/v1/sandbox/executions/%s/files%s" % (d["id"], p))
            check(b"root:" not in r.body and r.body != host_passwd, "symlink content returned")
    r = C.a.req("GET", "/v1/sandbox/executions/%s/files/tmp/outputs/passwd" % d["id"])
    check(r.status == 404 or b"root:" not in r.body, "GET symlink gave passwd: %r" % r)
    r = C.a.req("GET", "/v1/sandbox/executions/%s/files/tmp/outputs/missing.txt" % d["id"])
    check(r.status == 404 and r.code() == "not_found", "missing file: %r" % r)


@case("host writes invisible: / read-only, sandbox /tmp not the host's")
def t_host_write():
    marker = "eai-accept-marker-" + uuid.uuid4().hex
    code = ("import json\nres = {}\n"
            "for p in ['/%s', '/tmp/%s', '/root/%s', '/etc/%s']:\n"
            "    try:\n        open(p, 'w').write('x')\n        res[p] = 'written'\n"
            "    except OSError as e:\n        res[p] = 'error'\n"
            "print(json.dumps(res))\n") % (marker, marker, marker, marker)
    d = C.a.py(code)
    check(d["status"] == "succeeded", short(d))
    res = json.loads(d["stdout"])
    check(res["/" + marker] == "error", "write to / succeeded")
    check(res["/tmp/" + marker] == "written", "write to sandbox /tmp failed: %r" % res)
    for p in ("/" + marker, "/tmp/" + marker, "/root/" + marker, "/etc/" + marker):
        check(not os.path.exists(p), "sandbox write visible on the host at %s" % p)
    check(res["/etc/" + marker] == "error", "write to /etc succeeded inside the sandbox")


@case("network refused: outside address, eaid's port, a host loopback listener, DNS")
def t_network():
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)
    lport = lst.getsockname()[1]
    got = []

    def acceptor():
        lst.settimeout(0.5)
        while not stop.is_set():
            try:
                c, _ = lst.accept()
                got.append(1)
                c.close()
            except OSError:
                pass
    stop = threading.Event()
    th = threading.Thread(target=acceptor, daemon=True)
    th.start()
    code = ("import socket, json\nres = {}\n"
            "def t(name, host, port):\n"
            "    s = socket.socket(); s.settimeout(3)\n"
            "    try:\n        s.connect((host, port)); res[name] = 'connected'\n"
            "    except Exception as e:\n        res[name] = 'error:' + type(e).__name__\n"
            "    finally:\n        s.close()\n"
            "t('outside', '192.0.2.1', 80)\n"
            "t('eaid', '127.0.0.1', %d)\n"
            "t('listener', '127.0.0.1', %d)\n"
            "try:\n    socket.getaddrinfo('example.com', 80); res['dns'] = 'resolved'\n"
            "except Exception as e:\n    res['dns'] = 'error:' + type(e).__name__\n"
            "print(json.dumps(res))\n") % (C.srv.port, lport)
    try:
        d = C.a.py(code)
    finally:
        time.sleep(0.3)
        stop.set()
        th.join()
        lst.close()
    check(d["status"] == "succeeded", short(d))
    res = json.loads(d["stdout"])
    for k in ("outside", "eaid", "listener", "dns"):
        check(res[k].startswith("error"), "%s reachable: %r" % (k, res))
    check(not got, "the host listener received a connection")
    C.notes.append("network: %s" % res)


@case("root filesystem read-only: write to /usr fails")
def t_rootfs_ro():
    d = C.a.py("import os\ntry:\n    open('/usr/x','w').write('x'); print('written')\n"
               "except OSError as e:\n    print('error', e.errno)\n"
               "try:\n    os.mkdir('/usr/lib/eai-x'); print('mkdir')\nexcept OSError as e:\n    print('error', e.errno)\n")
    check(d["status"] == "succeeded", short(d))
    lines = d["stdout"].split("\n")
    check(lines[0].startswith("error") and lines[1].startswith("error"), "stdout %r" % d["stdout"])


@case("ls / works (statx shim)")
def t_ls():
    d = C.a.run(["ls", "-la", "/"])
    check(d["status"] == "succeeded", short(d))
    for n in ("usr", "tmp", "etc", "bin"):
        check(re.search(r"\b%s\b" % n, d["stdout"]), "ls / lacks %s: %r" % (n, d["stdout"]))
    d = C.a.run(["stat", "/etc/passwd"])
    check(d["status"] == "succeeded", "stat: " + short(d))


@case("languages: python3, python alias, sh -c")
def t_languages():
    d = C.a.run(["sh", "-c", "echo hi; echo err >&2"])
    check(d["status"] == "succeeded" and d["stdout"] == "hi\n" and d["stderr"] == "err\n", "sh: " + short(d))
    d = C.a.run(["python", "-c", "import sys; print(sys.version_info[:2])"])
    check(d["status"] == "succeeded" and d["stdout"] == "(3, 11)\n", "python alias: " + short(d))
    d = C.a.run(["/usr/bin/python3", "-c", "print('abs')"])
    check(d["status"] == "succeeded" and d["stdout"] == "abs\n", "absolute path: " + short(d))
    d = C.a.run(["no-such-binary-xyz"])
    check(d["status"] in ("failed", "error"), "missing binary: " + short(d))
    C.notes.append("missing binary: status %s exit %r error %r" % (d["status"], d["exit_code"], d["error"]))


def expect_err(r, status, code, path=None):
    check(r.status == status and r.code() == code, "want %d %s, got %r" % (status, code, r))
    e = r.json["error"]
    check(e.get("request_id") and e.get("message") and isinstance(e.get("message_i18n"), dict),
          "envelope incomplete %r" % e)
    check(r.headers.get("x-request-id") == e["request_id"], "X-Request-Id %r vs %r" %
          (r.headers.get("x-request-id"), e["request_id"]))
    if path is not None:
        paths = [x.get("path") for x in e.get("details") or []]
        check(path in paths, "details paths %r lack %s" % (paths, path))


def base_body(**kw):
    b = {"profile": PROFILE, "image": IMAGE, "command": ["true"]}
    b.update(kw)
    return b


@case("validation: 422 paths, unknown profile/image, limit_exceeded, egress")
def t_validation():
    P = "/v1/sandbox/executions"
    expect_err(C.a.req("POST", P, base_body(bogus=1)), 422, "validation_failed", "/bogus")
    expect_err(C.a.req("POST", P, base_body(command=[])), 422, "validation_failed", "/command")
    expect_err(C.a.req("POST", P, base_body(command="echo hi")), 422, "validation_failed", "/command")
    expect_err(C.a.req("POST", P, base_body(limits={"cpu": "abc"})), 422, "validation_failed", "/limits/cpu")
    expect_err(C.a.req("POST", P, base_body(limits={"memory": "12Qi"})), 422, "validation_failed", "/limits/memory")
    expect_err(C.a.req("POST", P, base_body(limits={"timeout_s": "ten"})), 422, "validation_failed", "/limits/timeout_s")
    expect_err(C.a.req("POST", P, base_body(limits={"memory": "1Gi"})), 422, "limit_exceeded", "/limits/memory")
    expect_err(C.a.req("POST", P, base_body(limits={"timeout_s": 3600})), 422, "limit_exceeded", "/limits/timeout_s")
    expect_err(C.a.req("POST", P, base_body(profile="no-such-profile")), 422, "unknown_profile", "/profile")
    expect_err(C.a.req("POST", P, base_body(image="nosuchimage:1.0")), 422, "unknown_image", "/image")
    b = base_body()
    del b["image"]
    expect_err(C.a.req("POST", P, b), 422, "validation_failed", "/image")
    expect_err(C.a.req("POST", P, base_body(network={"egress": ["example.org:443"]})), 422,
               "egress_not_allowed", "/network/egress/0")
    expect_err(C.a.req("POST", P, base_body(files=[{"path": "/etc/x", "content": "a"}])), 422, "validation_failed")
    expect_err(C.a.req("POST", P, '{"profile": "gvisor-small", '), 400, "invalid_json")
    expect_err(C.a.req("POST", P, "[1, 2"), 400, "invalid_json")
    # refused requests never create executions
    r = C.a.req("GET", "/v1/sandbox/executions?limit=100")
    check(r.status == 200, "list %r" % r)


@case("70 MB body -> 413 payload_too_large")
def t_413():
    size = 70 * 1024 * 1024
    s = socket.create_connection(("127.0.0.1", C.srv.port), timeout=30)
    try:
        s.sendall(("POST /v1/sandbox/executions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                   "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n" % (C.key_a, size)).encode())
        chunk = b" " * (1 << 20)
        sent = 0
        got = b""
        while sent < size:
            r, _, _ = select.select([s], [], [], 0)
            if r:
                break  # the answer came early
            try:
                s.sendall(chunk)
            except OSError:
                break
            sent += len(chunk)
        s.settimeout(30)
        while True:
            try:
                b = s.recv(65536)
            except OSError:
                break
            if not b:
                break
            got += b
            if b"\r\n\r\n" in got:
                head, _, rest = got.partition(b"\r\n\r\n")
                m = re.search(rb"(?i)content-length:\s*(\d+)", head)
                if m and len(rest) >= int(m.group(1)):
                    break
    finally:
        s.close()
    check(got.startswith(b"HTTP/1.1 413"), "response %r" % got[:200])
    body = got.partition(b"\r\n\r\n")[2]
    j = json.loads(body.decode())
    check(j["error"]["code"] == "payload_too_large", "body %r" % body[:200])
    C.notes.append("413 after %d MB sent" % (sent >> 20))


@case("auth: missing, malformed, bad and revoked keys -> 401")
def t_auth():
    P = "/v1/sandbox/executions"
    expect_err(C.a.req("GET", P, key=None), 401, "unauthenticated")
    expect_err(C.a.req("GET", P, key="nonsense"), 401, "unauthenticated")
    kid = C.key_a.split("_")[1]
    expect_err(C.a.req("GET", P, key="eai_%s_%s" % (kid, "0" * 64)), 401, "unauthenticated")
    expect_err(C.a.req("GET", P, key="eai_%s_%s" % ("0123456789abcdef", "0" * 64)), 401, "unauthenticated")
    expect_err(C.a.req("POST", P, base_body(), key=None), 401, "unauthenticated")
    k = C.srv.cli("keys", "create", "--tenant", C.tenant_a, "--name", "to-revoke").stdout.decode().strip()
    check(re.match(r"^eai_[0-9a-f]{16}_[0-9a-f]{64}$", k), "key format %r" % k)
    r = C.a.req("GET", P, key=k)
    check(r.status == 200, "new key refused: %r" % r)
    C.srv.cli("keys", "revoke", k.split("_")[1])
    expect_err(C.a.req("GET", P, key=k), 401, "unauthenticated")
    r = C.a.req("GET", P, key=None, headers={"Accept-Language": "fr"})
    check(r.status == 401 and r.headers.get("content-language") == "fr", "401 fr: %r %r" % (r, r.headers))


@case("French errors: message in French, message_i18n both, Content-Language, Vary")
def t_french():
    missing = "sbx_" + str(uuid.uuid4())
    r = C.a.req("GET", "/v1/sandbox/executions/" + missing, headers={"Accept-Language": "fr-CA, en;q=0.5"})
    expect_err(r, 404, "not_found")
    e = r.json["error"]
    i18n = e["message_i18n"]
    check(set(i18n) >= {"en", "fr"} and i18n["en"] != i18n["fr"], "message_i18n %r" % i18n)
    check(e["message"] == i18n["fr"], "message not French: %r" % e["message"])
    check(r.headers.get("content-language") == "fr", "Content-Language %r" % r.headers.get("content-language"))
    check("accept-language" in r.headers.get("vary", "").lower(), "Vary %r" % r.headers.get("vary"))
    r2 = C.a.req("GET", "/v1/sandbox/executions/" + missing)
    check(r2.json["error"]["message"] == i18n["en"] and r2.headers.get("content-language") == "en",
          "default language: %r %r" % (r2, r2.headers.get("content-language")))
    r3 = C.a.req("POST", "/v1/sandbox/executions", base_body(bogus=1), headers={"Accept-Language": "fr"})
    check(r3.status == 422 and r3.json["error"]["message"] == r3.json["error"]["message_i18n"]["fr"],
          "422 in French: %r" % r3)


@case("cross-tenant: B sees A's execution exactly like a missing one (GET, cancel, files, events)")
def t_cross_tenant():
    eid = C.basic_id
    missing = "sbx_" + str(uuid.uuid4())

    def norm(r):
        e = dict(r.json["error"])
        e.pop("request_id", None)
        return r.status, e, r.headers.get("content-type")
    for method, suffix in (("GET", ""), ("POST", "/cancel"), ("GET", "/files/tmp/outputs/x"),
                           ("GET", "/events"), ("GET", "?wait_s=1")):
        ra = C.b.req(method, "/v1/sandbox/executions/" + eid + suffix)
        rm = C.b.req(method, "/v1/sandbox/executions/" + missing + suffix)
        check(ra.status == 404 and ra.code() == "not_found", "%s %s: %r" % (method, suffix, ra))
        check(norm(ra) == norm(rm), "%s %s differs from a missing id: %r vs %r" % (method, suffix, ra, rm))
    r = C.b.req("GET", "/v1/sandbox/executions?limit=100")
    check(all(i["id"] != eid for i in r.json["items"]), "A's execution listed for B")
    d = C.a.get(eid)
    check(d["status"] == "succeeded", "B's cancel changed A's execution: " + short(d))


@case("idempotency: same key+body -> same id 200; other body -> 409")
def t_idempotency():
    key = "acc-" + uuid.uuid4().hex
    body = base_body(command=["python3", "-c", "print('idem')"])
    r1 = C.a.req("POST", "/v1/sandbox/executions", body, headers={"Idempotency-Key": key})
    check(r1.status == 202, "first %r" % r1)
    r2 = C.a.req("POST", "/v1/sandbox/executions", body, headers={"Idempotency-Key": key})
    check(r2.status == 200 and r2.json["id"] == r1.json["id"], "replay %r vs %r" % (r2, r1))
    r3 = C.a.req("POST", "/v1/sandbox/executions", base_body(command=["python3", "-c", "print('other')"]),
                 headers={"Idempotency-Key": key})
    expect_err(r3, 409, "idempotency_conflict")
    # another tenant with the same key gets its own execution
    r4 = C.b.req("POST", "/v1/sandbox/executions", body, headers={"Idempotency-Key": key})
    check(r4.status == 202 and r4.json["id"] != r1.json["id"], "other tenant same key: %r" % r4)
    d = C.a.wait(r1.json["id"])
    check(d["stdout"] == "idem\n", short(d))
    C.b.wait(r4.json["id"])


@case("long-poll: wait_s=10 returns when a 2 s job ends; wait_s=61 -> 422")
def t_longpoll():
    eid = C.a.submit(base_body(command=["python3", "-c", "import time; time.sleep(2); print('slept')"]))
    t0 = time.time()
    d = C.a.get(eid, wait=10)
    el = time.time() - t0
    check(d["status"] == "succeeded", "after wait_s=10: " + short(d))
    check(el < 5.0, "long-poll took %.2f s" % el)
    C.notes.append("long-poll answered after %.2f s" % el)
    expect_err(C.a.req("GET", "/v1/sandbox/executions/%s?wait_s=61" % eid), 422, "validation_failed", "/query/wait_s")
    t0 = time.time()
    C.a.get(eid, wait=30)
    check(time.time() - t0 < 1.0, "wait_s on a terminal execution waited")


@case("cancel: running job -> 202, ends cancelled with output so far; again -> 409")
def t_cancel():
    eid = C.a.submit(base_body(command=["python3", "-c",
                                        "import time\nprint('started', flush=True)\ntime.sleep(30)\nprint('end')"]))
    # follow the event stream until the program has printed, cancel, read on to the end
    seen = {}

    def on_event(ev, data):
        if ev == "stdout" and "started" in data.get("data", "") and "t0" not in seen:
            seen["t0"] = time.time()
            seen["cancel"] = C.a.req("POST", "/v1/sandbox/executions/%s/cancel" % eid)
    evs = read_sse(C.a, eid, on_event=on_event)
    check("cancel" in seen, "never saw 'started' on the event stream: %r" % evs)
    r = seen["cancel"]
    check(r.status == 202 and r.json.get("id") == eid, "cancel %r" % r)
    check(r.json.get("status") in ("running", "cancelled"), "cancel answer status %r" % r.json)
    check(evs[-1][0] == "status" and evs[-1][1]["status"] == "cancelled", "stream end %r" % evs[-1:])
    d = C.a.wait(eid, 30)
    check(d["status"] == "cancelled", short(d))
    check(time.time() - seen["t0"] < 10, "cancel took %.1f s" % (time.time() - seen["t0"]))
    check(d["stdout"] == "started\n", "output so far %r" % d["stdout"])
    expect_err(C.a.req("POST", "/v1/sandbox/executions/%s/cancel" % eid), 409, "already_finished")
    expect_err(C.a.req("POST", "/v1/sandbox/executions/%s/cancel" % C.basic_id), 409, "already_finished")
    # a queued execution cancelled before it runs
    r = C.a.req("POST", "/v1/sandbox/executions", base_body(command=["sleep", "5"]))
    eid2 = r.json["id"]
    r = C.a.req("POST", "/v1/sandbox/executions/%s/cancel" % eid2)
    check(r.status == 202, "cancel fresh %r" % r)
    d = C.a.wait(eid2, 30)
    check(d["status"] == "cancelled", "fresh cancel: " + short(d))


@case("list: newest first, cursor paging, status and run_id filters")
def t_list():
    run = "run-" + uuid.uuid4().hex[:12]
    ids = []
    for code in ("print(1)", "import sys; sys.exit(1)", "print(3)"):
        ids.append(C.a.submit(base_body(command=["python3", "-c", code], run_id=run)))
        time.sleep(0.01)
    for i in ids:
        C.a.wait(i)
    r = C.a.req("GET", "/v1/sandbox/executions?run_id=%s&limit=2" % run)
    check(r.status == 200, "list %r" % r)
    got = [i["id"] for i in r.json["items"]]
    check(got == [ids[2], ids[1]], "page 1 %r, want %r" % (got, ids[2:0:-1]))
    nxt = r.json.get("next")
    check(nxt, "no cursor on a full page")
    r = C.a.req("GET", "/v1/sandbox/executions?run_id=%s&limit=2&after=%s" % (run, nxt))
    got = [i["id"] for i in r.json["items"]]
    check(got == [ids[0]], "page 2 %r" % got)
    check(r.json.get("next") is None, "next on the last page %r" % r.json.get("next"))
    r = C.a.req("GET", "/v1/sandbox/executions?run_id=%s&status=failed" % run)
    got = [i["id"] for i in r.json["items"]]
    check(got == [ids[1]], "status=failed %r" % got)
    r = C.a.req("GET", "/v1/sandbox/executions?run_id=%s&status=succeeded" % run)
    got = [i["id"] for i in r.json["items"]]
    check(got == [ids[2], ids[0]], "status=succeeded %r" % got)
    r = C.a.req("GET", "/v1/sandbox/executions?limit=100")
    all_ids = [i["id"] for i in r.json["items"]]
    check(all_ids.index(ids[2]) < all_ids.index(ids[0]), "unfiltered list not newest first")
    # summary items: no output in a list (bounded), output through GET of one
    item = [i for i in r.json["items"] if i["id"] == ids[2]][0]
    check("stdout" not in item and "stderr" not in item, "list item carries output %r" % item)
    check(item.get("exit_code") == 0 and item.get("stdout_truncated") is False, "list item %r" % item)
    check(C.a.req("GET", "/v1/sandbox/executions/" + ids[2]).json.get("stdout") == "3\n", "GET lost stdout")
    expect_err(C.a.req("GET", "/v1/sandbox/executions?status=bogus"), 422, "validation_failed", "/query/status")
    expect_err(C.a.req("GET", "/v1/sandbox/executions?limit=0"), 422, "validation_failed", "/query/limit")


def read_sse(client, eid, timeout=40, on_event=None):
    c = http.client.HTTPConnection("127.0.0.1", C.srv.port, timeout=timeout)
    c.request("GET", "/v1/sandbox/executions/%s/events" % eid, headers={"Authorization": "Bearer " + client.key})
    r = c.getresponse()
    check(r.status == 200, "events status %d" % r.status)
    check(r.getheader("Content-Type", "").startswith("text/event-stream"), "events type %r" % r.getheader("Content-Type"))
    events, ev, data = [], None, []
    t0 = time.time()
    while time.time() - t0 < timeout:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode("utf-8").rstrip("\r\n")
        if line == "":
            if ev or data:
                events.append((ev or "message", json.loads("\n".join(data)) if data else None))
                if on_event:
                    on_event(*events[-1])
                if ev == "status" and events[-1][1].get("status") in TERMINAL:
                    break
            ev, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            ev = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
    c.close()
    return events


@case("SSE events: stdout chunks, then the terminal status")
def t_sse():
    eid = C.a.submit(base_body(command=["python3", "-c",
                                        "import time, sys\nprint('one', flush=True)\ntime.sleep(1)\n"
                                        "print('two', flush=True)\nsys.stderr.write('e\\n')"]))
    evs = read_sse(C.a, eid)
    check(evs and evs[-1][0] == "status" and evs[-1][1]["status"] == "succeeded", "last event %r" % evs[-1:])
    so = "".join(e[1]["data"] for e in evs if e[0] == "stdout")
    se = "".join(e[1]["data"] for e in evs if e[0] == "stderr")
    check(so == "one\ntwo\n", "stdout chunks %r" % so)
    check(se == "e\n", "stderr chunks %r" % se)
    # a finished execution replays
    evs2 = read_sse(C.a, eid)
    check("".join(e[1]["data"] for e in evs2 if e[0] == "stdout") == "one\ntwo\n", "replay %r" % evs2)
    check(evs2[-1][1]["status"] == "succeeded", "replay end %r" % evs2[-1:])


@case("12 parallel executions, no cross-talk")
def t_parallel():
    tokens = [uuid.uuid4().hex for _ in range(12)]
    ids = [None] * 12
    errs = []

    def sub(i):
        try:
            ids[i] = C.a.submit(base_body(command=["python3", "-c",
                                                   "import sys; print(sys.argv[1]); open('/tmp/t','w').write(sys.argv[1])",
                                                   tokens[i]]))
        except Exception as e:
            errs.append(repr(e))
    ths = [threading.Thread(target=sub, args=(i,)) for i in range(12)]
    t0 = time.time()
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    check(not errs, "submit errors %r" % errs)
    for i, eid in enumerate(ids):
        d = C.a.wait(eid, 120)
        check(d["status"] == "succeeded", "#%d %s" % (i, short(d)))
        check(d["stdout"] == tokens[i] + "\n", "#%d stdout %r, token %s" % (i, d["stdout"], tokens[i]))
    C.notes.append("12 parallel: %.1f s" % (time.time() - t0))


@case("profiles: gvisor and gvisor-small with defaults and maxima")
def t_profiles():
    r = C.a.req("GET", "/v1/sandbox/profiles")
    check(r.status == 200, "%r" % r)
    ps = {p["name"]: p for p in r.json["profiles"]}
    for n in ("gvisor", "gvisor-small"):
        check(n in ps, "profile %s missing: %r" % (n, list(ps)))
        p = ps[n]
        check(p["backend"] == "gvisor", "%s backend %r" % (n, p.get("backend")))
        for k in ("cpu", "memory", "timeout_s"):
            check(k in p["defaults"] and k in p["max"], "%s lacks %s: %r" % (n, k, p))
        check(isinstance(p.get("egress_allow"), list), "egress_allow %r" % p.get("egress_allow"))
    check(ps["gvisor-small"]["max"]["memory"] == "512Mi", "gvisor-small max %r" % ps["gvisor-small"]["max"])
    expect_err(C.a.req("GET", "/v1/sandbox/profiles", key=None), 401, "unauthenticated")


MANIFEST = {
    "apiVersion": "eai.dev/v1", "kind": "Tool",
    "metadata": {"name": "calc"},
    "spec": {"sandbox_profile": "gvisor", "image": IMAGE,
             "command": ["python3", "-c", "import os; print(6*7, os.environ.get('TOOLV'))"],
             "limits": {"timeout_s": 17, "memory": "300Mi"}, "env": {"TOOLV": "v1"},
             "description": "acceptance calculator"},
}

YAML_MANIFEST = """apiVersion: eai.dev/v1
kind: Tool
metadata:
  name: yaml-tool
spec:
  sandbox_profile: gvisor-small
  command: [python3, -c, "print('from yaml')"]
  image: python:3.11-slim
  limits: {timeout_s: 12}
"""


@case("contracts: validate valid/invalid, unknown contract 404, YAML validate")
def t_contracts():
    r = C.a.req("POST", "/v1/contracts/tool-manifest/validate", MANIFEST)
    check(r.status == 200 and r.json == {"valid": True} or (r.status == 200 and r.json.get("valid") is True),
          "valid manifest: %r" % r)
    bad = json.loads(json.dumps(MANIFEST))
    bad["spec"]["sandbox_profile"] = 42
    r = C.a.req("POST", "/v1/contracts/tool-manifest/validate", bad)
    check(r.status == 200 and r.json.get("valid") is False, "invalid manifest: %r" % r)
    paths = [e.get("path", "") for e in r.json.get("errors", [])]
    check(any("sandbox_profile" in p for p in paths), "error paths %r" % paths)
    bad2 = json.loads(json.dumps(MANIFEST))
    bad2["spec"]["sandboxProfile"] = "x"
    r = C.a.req("POST", "/v1/contracts/tool-manifest/validate", bad2)
    check(r.json.get("valid") is False and any("sandboxProfile" in e["path"] for e in r.json["errors"]),
          "typo not caught: %r" % r)
    expect_err(C.a.req("POST", "/v1/contracts/no-such-contract/validate", MANIFEST), 404, "not_found")
    r = C.a.req("POST", "/v1/contracts/tool-manifest/validate", YAML_MANIFEST,
                headers={"Content-Type": "application/yaml"})
    check(r.status == 200 and r.json.get("valid") is True, "YAML validate: %r" % r)
    r = C.a.req("POST", "/v1/contracts/sandbox-execution/validate", base_body())
    check(r.status == 200 and r.json.get("valid") is True, "sandbox-execution validate: %r" % r)
    expect_err(C.a.req("POST", "/v1/contracts/tool-manifest/validate", "{bad"), 400, "invalid_json")


@case("manifests: apply 201 then 200, unknown profile 422, YAML apply, GET/DELETE, tenant isolation")
def t_manifests():
    r = C.a.req("POST", "/v1/manifests/apply", MANIFEST)
    check(r.status == 201, "first apply %r" % r)
    r = C.a.req("POST", "/v1/manifests/apply", MANIFEST)
    check(r.status == 200, "second apply %r" % r)
    bad = json.loads(json.dumps(MANIFEST))
    bad["metadata"]["name"] = "badprof"
    bad["spec"]["sandbox_profile"] = "no-such-profile"
    r = C.a.req("POST", "/v1/manifests/apply", bad)
    check(r.status == 422 and r.code() in ("unknown_profile", "validation_failed"), "unknown profile %r" % r)
    bad3 = json.loads(json.dumps(MANIFEST))
    bad3["spec"]["sandbox_profile"] = 42
    r = C.a.req("POST", "/v1/manifests/apply", bad3)
    expect_err(r, 422, "validation_failed", "/spec/sandbox_profile")
    r = C.a.req("POST", "/v1/manifests/apply", YAML_MANIFEST, headers={"Content-Type": "application/yaml"})
    check(r.status == 201, "YAML apply %r" % r)
    r = C.a.req("GET", "/v1/manifests/tool/yaml-tool")
    check(r.status == 200 and "yaml-tool" in r.body.decode(), "GET yaml-tool %r" % r)
    r = C.a.req("GET", "/v1/manifests/tool/calc")
    check(r.status == 200 and "acceptance calculator" in r.body.decode(), "GET calc %r" % r)
    rb = C.b.req("GET", "/v1/manifests/tool/calc")
    rm = C.b.req("GET", "/v1/manifests/tool/no-such-tool-xyz")
    check(rb.status == 404 and rb.code() == "not_found", "tenant B GET %r" % rb)
    check(rb.json["error"]["message"] == rm.json["error"]["message"], "B's 404 differs from missing")
    r = C.b.req("DELETE", "/v1/manifests/tool/calc")
    check(r.status == 404, "tenant B DELETE %r" % r)
    r = C.b.req("POST", "/v1/sandbox/executions", {"tool": "calc"})
    check(r.status == 422, "tenant B uses A's tool: %r" % r)
    r = C.a.req("DELETE", "/v1/manifests/tool/yaml-tool")
    check(r.status == 200, "DELETE %r" % r)
    r = C.a.req("GET", "/v1/manifests/tool/yaml-tool")
    check(r.status == 404, "GET after DELETE %r" % r)


@case("execution with tool calc runs with the manifest's profile and defaults")
def t_tool_exec():
    r = C.a.req("POST", "/v1/sandbox/executions", {"tool": "calc"})
    check(r.status == 202, "POST tool %r" % r)
    d = C.a.wait(r.json["id"])
    check(d["status"] == "succeeded", short(d))
    check(d["profile"] == "gvisor", "profile %r (manifest says gvisor)" % d["profile"])
    check(d.get("tool") == "calc", "tool %r" % d.get("tool"))
    check(d["stdout"] == "42 v1\n", "stdout %r" % d["stdout"])
    check(d["limits"]["timeout_s"] == 17, "limits %r" % d["limits"])
    # request fields override the tool's defaults
    r = C.a.req("POST", "/v1/sandbox/executions", {"tool": "calc", "command": ["python3", "-c", "print('own')"],
                                                   "limits": {"timeout_s": 9}})
    check(r.status == 202, "POST tool override %r" % r)
    d = C.a.wait(r.json["id"])
    check(d["stdout"] == "own\n" and d["limits"]["timeout_s"] == 9 and d["profile"] == "gvisor", short(d))


def metric_values(text, name):
    vals = []
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            m = re.match(r"^(\S+?)(\{[^}]*\})?\s+(\S+)", line)
            if m and m.group(1) == name:
                vals.append((m.group(2) or "", float(m.group(3))))
    return vals


@case("metrics: executions_total{profile,status}, cpu seconds counter, duration histogram; promtool")
def t_metrics():
    st, hd, body = raw_request(C.srv.port, "GET", "/metrics")
    check(st == 200, "metrics %d" % st)
    text = body.decode()
    ex = metric_values(text, "eai_sandbox_executions_total")
    check(any('profile="gvisor-small"' in l and 'status="succeeded"' in l and v >= 1 for l, v in ex),
          "executions_total succeeded: %r" % ex)
    check(any('status="timeout"' in l and v >= 1 for l, v in ex), "executions_total timeout: %r" % ex)
    check(any('status="oom_killed"' in l and v >= 1 for l, v in ex), "executions_total oom_killed: %r" % ex)
    cpu = metric_values(text, "eai_sandbox_cpu_seconds_total") or metric_values(text, "eai_sandbox_cpu_seconds")
    check(any('profile="gvisor-small"' in l and v > 0 for l, v in cpu), "cpu seconds: %r" % cpu)
    check(re.search(r"^# TYPE eai_sandbox_cpu_seconds(_total)? counter", text, re.M), "cpu seconds not a counter")
    check(re.search(r"^# TYPE eai_sandbox_duration_seconds histogram", text, re.M), "duration not a histogram")
    cnt = metric_values(text, "eai_sandbox_duration_seconds_count")
    check(any('profile="gvisor-small"' in l and v >= 1 for l, v in cnt), "duration count %r" % cnt)
    check(metric_values(text, "eai_sandbox_duration_seconds_bucket"), "no duration buckets")
    check(metric_values(text, "eai_http_requests_total"), "no http requests metric")
    try:
        pt = subprocess.run(["sh", os.path.join(SRC, "tests/support/promtool.sh")], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, timeout=120).stdout.decode().strip()
    except Exception:
        pt = ""
    if pt and os.access(pt, os.X_OK):
        r = subprocess.run([pt, "check", "metrics"], input=body, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60)
        check(r.returncode == 0, "promtool: %s" % r.stdout.decode()[:800])
    else:
        C.notes.append("promtool not available: skipped its check")


@case("finops: execution with project_id appears in GET /v1/finops/usage")
def t_finops():
    proj = "proj-" + uuid.uuid4().hex[:10]
    d = C.a.py("print('billable')", project_id=proj, agent_id="agent-1", run_id="run-fin")
    check(d["status"] == "succeeded" and d["project_id"] == proj, short(d))
    deadline = time.time() + 20
    ev = None
    while time.time() < deadline:
        r = C.a.req("GET", "/v1/finops/usage?project_id=" + proj)
        check(r.status == 200, "finops %r" % r)
        evs = [e for e in r.json.get("usage", []) if e.get("execution_id") == d["id"]]
        if evs:
            ev = evs[0]
            break
        time.sleep(0.5)
    check(ev is not None, "no usage event for %s after 20 s" % d["id"])
    check(len(evs) == 1, "duplicate usage events %r" % evs)
    for k in ("cpu_seconds", "memory_mb_seconds", "duration_s"):
        check(isinstance(ev.get(k), (int, float)) and ev[k] > 0, "usage %s %r" % (k, ev.get(k)))
    check(ev.get("project_id") == proj and ev.get("agent_id") == "agent-1" and ev.get("run_id") == "run-fin"
          and ev.get("profile") == PROFILE, "event fields %r" % ev)
    check(r.json["totals"]["executions"] == 1, "totals %r" % r.json["totals"])
    rb = C.b.req("GET", "/v1/finops/usage?project_id=" + proj)
    check(rb.status == 200 and not rb.json.get("usage"), "tenant B sees A's usage: %r" % rb)


@case("traceparent on POST -> trace_id in GET, in the sandbox and in the usage event")
def t_trace():
    tid = uuid.uuid4().hex
    sid = uuid.uuid4().hex[:16]
    run = "trace-" + tid[:10]
    r = C.a.req("POST", "/v1/sandbox/executions",
                base_body(command=["python3", "-c", "import os; print(os.environ.get('TRACEPARENT',''))"],
                          run_id=run),
                headers={"traceparent": "00-%s-%s-01" % (tid, sid)})
    check(r.status == 202, "%r" % r)
    d = C.a.wait(r.json["id"])
    check(d.get("trace_id") == tid, "trace_id %r, want %s" % (d.get("trace_id"), tid))
    check(tid in d["stdout"], "TRACEPARENT in sandbox %r" % d["stdout"])
    check(r.headers.get("traceparent", "").startswith("00-%s-" % tid), "response traceparent %r"
          % r.headers.get("traceparent"))
    eid = d["id"]
    deadline = time.time() + 20
    evs = []
    while time.time() < deadline and not evs:
        u = C.a.req("GET", "/v1/finops/usage?run_id=" + run)
        evs = [e for e in u.json.get("usage", []) if e.get("execution_id") == eid]
        if not evs:
            time.sleep(0.5)
    check(evs and evs[0].get("trace_id") == tid, "usage event trace_id %r" % (evs[0].get("trace_id") if evs else None))
    r = C.a.req("POST", "/v1/sandbox/executions", base_body(),
                headers={"traceparent": "00-%s-%s-01" % ("0" * 32, sid)})
    check(r.status == 202, "%r" % r)
    d = C.a.wait(r.json["id"])
    check(re.match(r"^[0-9a-f]{32}$", d.get("trace_id") or "") and d["trace_id"] != "0" * 32,
          "invalid traceparent accepted: %r" % d.get("trace_id"))


@case("audit verify exits 0 on the live data dir")
def t_audit_live():
    r = C.srv.cli("audit", "verify", check_rc=False)
    check(r.returncode == 0, "audit verify exit %d: %s %s" % (r.returncode, r.stdout.decode(), r.stderr.decode()))
    r = C.srv.cli("audit", "verify", "--tenant", C.tenant_a, check_rc=False)
    check(r.returncode == 0, "audit verify --tenant exit %d: %s" % (r.returncode, r.stderr.decode()))


@case("edge: no stdin means EOF at once; stdin not read does not hang; big stdin")
def t_stdin_edges():
    d = C.a.py("import sys; print(len(sys.stdin.read()))", limits={"timeout_s": 10})
    check(d["status"] == "succeeded" and d["stdout"] == "0\n", "no stdin: " + short(d))
    big = "x" * (3 * 1024 * 1024)
    d = C.a.py("print('ignored stdin')", stdin=big, limits={"timeout_s": 10})
    check(d["status"] == "succeeded" and d["stdout"] == "ignored stdin\n", "unread stdin: " + short(d))
    d = C.a.py("import sys; print(len(sys.stdin.read()))", stdin=big, limits={"timeout_s": 10})
    check(d["status"] == "succeeded" and d["stdout"] == "%d\n" % len(big), "big stdin: " + short(d))


@case("edge: background child holding stdout does not keep the execution alive")
def t_background():
    t0 = time.time()
    d = C.a.run(["sh", "-c", "sleep 100 & echo hi"], limits={"timeout_s": 20})
    el = time.time() - t0
    check(d["status"] == "succeeded" and d["stdout"] == "hi\n", short(d))
    check(el < 10, "took %.1f s" % el)


@case("edge: exit 137 is failed (not oom_killed); SIGSEGV -> signal 11")
def t_exit137():
    d = C.a.run(["sh", "-c", "exit 137"])
    check(d["status"] == "failed" and d["exit_code"] == 137, short(d))
    if d["signal"] is not None:
        C.notes.append("exit 137 reported with signal %r (runsc cannot tell it from SIGKILL)" % d["signal"])
    d = C.a.py("import ctypes; ctypes.string_at(0)")
    check(d["status"] == "failed" and d["signal"] == 11, "segv: " + short(d))


@case("edge: sandbox identity: uid 65534, no capabilities, own /proc, own /etc/passwd")
def t_identity():
    code = ("import os\n"
            "print(os.getuid(), os.getgid())\n"
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])\n"
            "print(len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
            "print(open('/etc/passwd').read() == %r)\n") % open("/etc/passwd").read()
    d = C.a.py(code)
    check(d["status"] == "succeeded", short(d))
    lines = d["stdout"].split("\n")
    check(lines[0] == "65534 65534", "uid/gid %r" % lines[0])
    check(int(lines[1], 16) == 0, "CapEff %r" % lines[1])
    check(int(lines[2]) < 10, "sees %s processes" % lines[2])
    check(lines[3] == "False", "host /etc/passwd visible")


@case("edge: unicode output, multi-byte char split by the cap stays utf-8")
def t_unicode():
    d = C.a.py("print('h\u00e9llo \u2713 \U0001F600')")
    check(d["status"] == "succeeded" and d["stdout"] == "h\u00e9llo \u2713 \U0001F600\n" and
          d.get("stdout_encoding") == "utf-8", short(d))
    d = C.a.py("import sys; sys.stdout.write('a' + '\u00e9' * 600000)", limits={"output_bytes": 1000})
    check(d["stdout_truncated"] is True and d.get("stdout_encoding") == "utf-8", short(d))
    check(len(d["stdout"].encode()) in (999, 1000), "len %d" % len(d["stdout"].encode()))


@case("edge: limits applied: pids, disk (/tmp size), memory within limit succeeds")
def t_limits_applied():
    code = ("import subprocess\nok = 0\nps = []\n"
            "for i in range(40):\n"
            "    try:\n        ps.append(subprocess.Popen(['sleep', '5'])); ok += 1\n"
            "    except OSError:\n        pass\n"
            "print(ok)\n"
            "for p in ps: p.kill()\n")
    d = C.a.py(code, limits={"pids": 16, "timeout_s": 20})
    check(d["status"] == "succeeded", "pids: " + short(d))
    check(int(d["stdout"]) < 16, "started %s processes with pids 16" % d["stdout"].strip())
    code = ("try:\n    f = open('/tmp/big', 'wb')\n    for i in range(100):\n        f.write(b'x' * (1 << 20))\n"
            "    f.close(); print('wrote 100 MB')\nexcept OSError as e:\n    print('errno', e.errno)\n")
    d = C.a.py(code, limits={"disk": "32Mi"})
    check(d["status"] == "succeeded" and d["stdout"].startswith("errno 28"), "disk: " + short(d))
    d = C.a.py("x = b'x' * (100 * 1024 * 1024); print(len(x))", limits={"memory": "256Mi"})
    check(d["status"] == "succeeded", "100 MB in 256Mi: " + short(d))


@case("edge: cpu limit throttles (250m: cpu_seconds / duration_s about 0.25)")
def t_cpu_limit():
    code = "import time\nt = time.time()\nwhile time.time() - t < 3:\n    pass\n"
    d = C.a.run(["python3", "-c", code], limits={"cpu": "250m"})
    check(d["status"] == "succeeded", short(d))
    u = d["usage"]
    ratio = u["cpu_seconds"] / u["duration_s"]
    C.notes.append("cpu 250m: %.2f cpu s over %.2f s (%.2f)" % (u["cpu_seconds"], u["duration_s"], ratio))
    check(ratio < 0.40, "250m used %.2f cpu s in %.2f s" % (u["cpu_seconds"], u["duration_s"]))
    check(u["cpu_seconds"] > 0.3, "busy loop used only %.2f cpu s" % u["cpu_seconds"])


@case("edge: more validation (timeout 0, 257 args, env name, bad base64, path traversal, numbers)")
def t_validation_more():
    P = "/v1/sandbox/executions"
    expect_err(C.a.req("POST", P, base_body(limits={"timeout_s": 0})), 422, "validation_failed", "/limits/timeout_s")
    expect_err(C.a.req("POST", P, base_body(command=["echo"] + ["a"] * 256)), 422, "validation_failed", "/command")
    expect_err(C.a.req("POST", P, base_body(command=["echo", 1])), 422, "validation_failed", "/command/1")
    expect_err(C.a.req("POST", P, base_body(env={"1BAD": "x"})), 422, "validation_failed")
    expect_err(C.a.req("POST", P, base_body(env={"K": 1})), 422, "validation_failed", "/env/K")
    expect_err(C.a.req("POST", P, base_body(files=[{"path": "/tmp/a", "content_b64": "!!!"}])), 422, "validation_failed")
    expect_err(C.a.req("POST", P, base_body(files=[{"path": "/tmp/a", "content_b64": "QQ"}])), 422, "validation_failed")
    expect_err(C.a.req("POST", P, base_body(files=[{"path": "/tmp/../etc/passwd", "content": "x"}])), 422,
               "validation_failed")
    expect_err(C.a.req("POST", P, base_body(files=[{"path": "/tmp/a", "content": "x", "content_b64": "eA=="}])),
               422, "validation_failed")
    expect_err(C.a.req("POST", P, base_body(collect=["/etc"])), 422, "validation_failed")
    expect_err(C.a.req("POST", P, base_body(limits={"cpu": "1.5"})), 422, "limit_exceeded", "/limits/cpu")
    expect_err(C.a.req("POST", P, base_body(limits={"cpu": "0"})), 422, "validation_failed", "/limits/cpu")
    expect_err(C.a.req("POST", P, base_body(limits={"memory": -5})), 422, "validation_failed", "/limits/memory")
    expect_err(C.a.req("POST", P, base_body(network={"egress": ["*:*"]})), 422, "validation_failed")
    expect_err(C.a.req("POST", P, base_body(), headers={"Content-Type": "application/xml"}), 415,
               "unsupported_media_type")
    expect_err(C.a.req("POST", P, "[]"), 422, "validation_failed")
    expect_err(C.a.req("POST", P, ""), 400, "invalid_json")
    expect_err(C.a.req("POST", P, '{"image": "a", "image": "b", "command": ["x"], "profile": "gvisor"}'), 400,
               "invalid_json")
    expect_err(C.a.req("GET", "/v1/sandbox/executions?limit=101"), 422, "validation_failed", "/query/limit")
    expect_err(C.a.req("GET", "/v1/sandbox/executions?after=%%%%"), 422, "validation_failed")
    expect_err(C.a.req("GET", "/v1/sandbox/executions/not-an-id"), 404, "not_found")
    expect_err(C.a.req("GET", "/v1/sandbox/executions/%s?wait_s=abc" % C.basic_id), 422, "validation_failed",
               "/query/wait_s")
    # numbers and plain bytes are accepted
    for lim in ({"cpu": 0.5, "memory": 268435456}, {"cpu": "500m", "memory": "256M"}, {"memory": "0.25Gi"},
                {"timeout_s": 30.0, "pids": 64.0}):
        r = C.a.req("POST", P, base_body(limits=lim))
        check(r.status == 202, "limits %r refused: %r" % (lim, r))
        C.a.wait(r.json["id"])
    r = C.a.req("POST", P, base_body(network={"egress": []}))
    check(r.status == 202, "empty egress refused: %r" % r)
    C.a.wait(r.json["id"])


@case("edge: collect a single file path and a missing dir; collect caps")
def t_collect_more():
    d = C.a.py("open('/tmp/res.txt','w').write('R')", collect=["/tmp/res.txt", "/tmp/nodir"])
    check(d["status"] == "succeeded", short(d))
    check([f["path"] for f in d["files"]] == ["/tmp/res.txt"], "files %r" % d["files"])
    d = C.a.py("print('no outputs')")
    check(d["files"] == [], "files without outputs %r" % d["files"])
    d = C.a.py("import os\nos.makedirs('/tmp/outputs')\n"
               "open('/tmp/outputs/big.bin','wb').write(os.urandom(12 << 20))\n"
               "for i in range(120):\n    open('/tmp/outputs/f%03d' % i, 'w').write(str(i))\n",
               limits={"disk": "64Mi"})
    check(d["status"] == "succeeded", short(d))
    n = len(d["files"])
    check(n <= 100, "%d files collected" % n)
    big = [f for f in d["files"] if f["path"] == "/tmp/outputs/big.bin"]
    check(not big or big[0]["size"] <= 10 << 20, "big file %r" % big)
    C.notes.append("collect caps: %d files, files_truncated=%r, big %r" % (n, d.get("files_truncated"), big))
    check(d.get("files_truncated") is True, "files_truncated %r with %d files written" % (d.get("files_truncated"), 121))
    d = C.a.py("import os\np = '/tmp/outputs'\nfor i in range(30):\n    p += '/d'\nos.makedirs(p)\n"
               "open(p + '/deep.txt', 'w').write('deep')\nopen('/tmp/outputs/top.txt', 'w').write('top')\n")
    check(d["status"] == "succeeded", short(d))
    check([f["path"] for f in d["files"]] == ["/tmp/outputs/top.txt"], "deep files %r" % d["files"])
    check(d.get("files_truncated") is True, "a directory past the depth cap left out silently")


@case("edge: idempotent replay after the first finished; wait_s=0; Accept-Language q-values")
def t_misc_more():
    key = "acc2-" + uuid.uuid4().hex
    body = base_body(command=["python3", "-c", "print(1)"])
    r1 = C.a.req("POST", "/v1/sandbox/executions", body, headers={"Idempotency-Key": key})
    d = C.a.wait(r1.json["id"])
    r2 = C.a.req("POST", "/v1/sandbox/executions", body, headers={"Idempotency-Key": key})
    check(r2.status == 200 and r2.json["id"] == r1.json["id"] and r2.json.get("status") == d["status"],
          "replay after finish %r" % r2)
    check(r2.headers.get("location") == "/v1/sandbox/executions/" + r1.json["id"], "replay Location")
    # same body with keys in another order is the same body
    body2 = dict(reversed(list(body.items())))
    r3 = C.a.req("POST", "/v1/sandbox/executions", body2, headers={"Idempotency-Key": key})
    check(r3.status == 200 and r3.json["id"] == r1.json["id"], "reordered body %r" % r3)
    t0 = time.time()
    eid = C.a.submit(base_body(command=["sleep", "3"]))
    d = C.a.get(eid, wait=0)
    check(time.time() - t0 < 1.5 and d["status"] in ("queued", "running"), "wait_s=0 %r" % d["status"])
    missing = "/v1/sandbox/executions/sbx_" + str(uuid.uuid4())
    for al, want in (("en;q=0.2, fr;q=0.9", "fr"), ("fr;q=0, en", "en"), ("de, fr-FR;q=0.5", "fr"), ("*", "en")):
        r = C.a.req("GET", missing, headers={"Accept-Language": al})
        check(r.headers.get("content-language") == want, "Accept-Language %r -> %r" % (al, r.headers.get("content-language")))
    C.a.wait(eid)


@case("fairness: a tenant flooding the node holds at most max_per_tenant (4) slots; another starts at once")
def t_fairness():
    ids = [C.a.submit(base_body(command=["sleep", "4"])) for _ in range(10)]
    time.sleep(1.0)
    t0 = time.time()
    d = C.b.py("print('b')")
    el = time.time() - t0
    sts = [C.a.get(i)["status"] for i in ids]
    running = sts.count("running") + sum(1 for x in sts if x in TERMINAL)
    wait = parse_ts(d["started_at"]) - parse_ts(d["created_at"])
    C.notes.append("fairness: B queued %.2f s (total %.2f s) while A had %d of 10 started" % (wait, el, running))
    check(d["status"] == "succeeded", short(d))
    check(wait < 1.5, "B waited %.2f s for a slot" % wait)
    check(sts.count("running") <= 4, "A runs %d at once (max_per_tenant 4): %r" % (sts.count("running"), sts))
    for i in ids:
        r = C.a.req("POST", "/v1/sandbox/executions/%s/cancel" % i)
        check(r.status in (202, 409), "cancel %r" % r)
    for i in ids:
        check(C.a.wait(i, 60)["status"] in ("cancelled", "succeeded"), "flood job not cancelled")


@case("healthz, readyz, unknown route 404 envelope, 405")
def t_misc():
    st, _, b = raw_request(C.srv.port, "GET", "/healthz")
    check(st == 200, "healthz %d" % st)
    st, _, b = raw_request(C.srv.port, "GET", "/readyz")
    check(st == 200 and json.loads(b)["status"] == "ready", "readyz %d %r" % (st, b))
    expect_err(C.a.req("GET", "/v1/nope"), 404, "not_found")
    r = C.a.req("DELETE", "/v1/sandbox/executions")
    check(r.status == 405, "405: %r" % r)
    r = C.a.req("GET", "/v1/sandbox/executions", headers={"X-Request-Id": "acc-req-1"})
    check(r.headers.get("x-request-id") == "acc-req-1", "X-Request-Id echo %r" % r.headers.get("x-request-id"))


# -------------------------------------------------------------- restart ---

def t_graceful():
    """SIGTERM with a running execution and a parked long-poll: the drain (EAI_DRAIN_S=3) lets the run go
    on, at its end both are answered, the run ends error/interrupted with its output so far, and the next
    start serves requests again."""
    eid = C.r.submit(base_body(command=["python3", "-c", "import time\nprint('partial', flush=True)\ntime.sleep(60)"]))
    deadline = time.time() + 30
    while time.time() < deadline and C.r.get(eid)["status"] != "running":
        time.sleep(0.2)
    time.sleep(1.5)
    answer = {}

    def poll():
        try:
            answer["r"] = C.r.req("GET", "/v1/sandbox/executions/%s?wait_s=50" % eid, timeout=60)
        except Exception as e:
            answer["r"] = e
    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.5)
    rc, secs = C.srv.stop(timeout=40)
    th.join(30)
    C.notes.append("graceful stop with a running execution: exit %s after %.1f s" % (rc, secs))
    check(rc == 0, "exit code %s" % rc)
    check(2.5 < secs < 20, "stop took %.1f s (drain 3 s)" % secs)
    r = answer.get("r")
    check(isinstance(r, Resp) and (r.status == 503 or (r.status == 200 and r.json["status"] in TERMINAL)),
          "parked long-poll got %r" % (r,))
    C.srv.start()
    d = C.r.wait(eid, 30)
    check(d["status"] == "error" and (d.get("error") or {}).get("code") == "interrupted", short(d))
    check("partial" in (d.get("stdout") or ""), "output so far lost: %r" % d.get("stdout"))


def t_restart():
    """kill -9 during 8 running `sleep 30` (two tenants, 4 each); a 9th waits queued; restart."""
    ids = []
    for cl in (C.r, C.r2):
        ids += [cl.submit(base_body(command=["sleep", "30"])) for _ in range(4)]
    owners = [C.r] * 4 + [C.r2] * 4
    deadline = time.time() + 40
    while time.time() < deadline:
        sts = [o.get(i)["status"] for o, i in zip(owners, ids)]
        if all(s == "running" for s in sts):
            break
        time.sleep(0.3)
    check(all(s == "running" for s in sts), "not all running before the kill: %r" % sts)
    q = C.r.submit(base_body(command=["python3", "-c", "print('queued ran')"]))
    time.sleep(0.5)
    qs = C.r.get(q)["status"]
    C.srv.kill9()
    C.notes.append("restart: 9th execution was %s at the kill" % qs)
    t0 = time.time()
    C.srv.start()
    C.notes.append("restart: ready %.1f s after start" % (time.time() - t0))
    for o, i in zip(owners, ids):
        d = o.wait(i, 30)
        check(d["status"] == "error", "after restart %s" % short(d))
        check((d.get("error") or {}).get("code") == "interrupted", "error %r" % d.get("error"))
    d = C.r.wait(q, 60)
    check(d["status"] == "succeeded" and d["stdout"] == "queued ran\n", "queued one: " + short(d))
    C.notes.append("restart: queued one ran %.1f s after the restart" % (parse_ts(d["finished_at"]) - t0))
    if qs != "queued":
        C.notes.append("restart: the queued part was not exercised (it was %s)" % qs)
    d = C.r.py("print('after restart')")
    check(d["status"] == "succeeded", "after restart: " + short(d))


def t_fail_closed():
    """A second eaid whose runsc does not exist: not ready, POST 503, nothing runs on the host."""
    srv = Server({"EAI_SANDBOX_RUNSC": "/nonexistent/eai-accept/runsc"})
    marker = "/tmp/eai-accept-failclosed-" + uuid.uuid4().hex
    try:
        srv.start(want_ready=False)
        t = json.loads(srv.cli("tenants", "create", "fc").stdout)
        key = srv.cli("keys", "create", "--tenant", t["id"]).stdout.decode().strip()
        cl = Client(srv, key)
        time.sleep(1.0)
        st, hd, body = raw_request(srv.port, "GET", "/readyz")
        check(st == 503, "readyz %d %r" % (st, body[:300]))
        r = cl.req("POST", "/v1/sandbox/executions",
                   base_body(command=["sh", "-c", "touch %s; echo ran" % marker]))
        expect_err(r, 503, "sandbox_unavailable")
        check(r.headers.get("retry-after"), "no Retry-After on 503")
        r = cl.req("POST", "/v1/sandbox/executions", base_body(profile="gvisor", image="nosuch:1"))
        check(r.status == 503 or r.code() == "unknown_image", "unknown image on a down backend %r" % r)
        r = cl.req("GET", "/v1/sandbox/executions?limit=100")
        check(r.status == 200 and r.json["items"] == [], "refused executions recorded: %r" % r)
        r = cl.req("GET", "/v1/sandbox/profiles")
        check(r.status == 200 and all(p.get("available") is False for p in r.json["profiles"]),
              "profiles say available: %r" % r)
        time.sleep(0.5)
        check(not os.path.exists(marker), "the command ran on the host")
    finally:
        try:
            srv.stop()
        finally:
            shutil.rmtree(srv.tmp, ignore_errors=True)


def leftovers(srv):
    state = os.path.join(srv.data, "gvisor", "state")
    lst = ""
    if os.path.isdir(state):
        r = subprocess.run(["runsc", "--root=" + state, "list", "-quiet"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        lst = r.stdout.decode().strip()
    procs = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                cl = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if srv.data in cl:
            procs.append("%s: %s" % (p, cl[:150]))
    work = os.path.join(srv.data, "gvisor", "work")
    bundles = [b for b in os.listdir(work) if b.startswith("eai-")] if os.path.isdir(work) else []
    # cgroup leaves of this server: eai/<hash of the state dir>/eai-* (plugins/gvisor/gvisor.c, fnv1a)
    h = 1469598103934665603
    for c in state.encode():
        h = ((h ^ c) * 1099511628211) & 0xffffffffffffffff
    sub = "eai/%016x" % h
    for base in ("/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup"):
        d = os.path.join(base, sub)
        if os.path.isdir(d):
            bundles += ["cgroup " + os.path.join(d, x) for x in os.listdir(d) if x.startswith("eai-")]
    return lst, procs, bundles


def t_final_stop():
    rc, secs = C.srv.stop()
    C.notes.append("SIGTERM: exit %s after %.1f s" % (rc, secs))
    check(rc == 0, "eaid exit code %s after SIGTERM" % rc)
    deadline = time.time() + 20
    while True:
        lst, procs, bundles = leftovers(C.srv)
        if (not lst and not procs and not bundles) or time.time() > deadline:
            break
        time.sleep(0.5)
    check(not lst, "runsc containers left: %r" % lst)
    check(not procs, "processes left: %r" % procs)
    check(not bundles, "bundles or cgroup leaves left: %r" % bundles)


def t_audit_tamper():
    """audit verify: 0 on the stopped data dir, non-zero after one row is altered (on a copy)."""
    r = C.srv.cli("audit", "verify", check_rc=False)
    check(r.returncode == 0, "verify on stopped data dir: %d %s" % (r.returncode, r.stderr.decode()))
    copy = os.path.join(C.srv.tmp, "copy")
    os.makedirs(copy, mode=0o700)
    for n in os.listdir(C.srv.data):
        if n.startswith("eai.db") or n == "pepper":
            shutil.copy2(os.path.join(C.srv.data, n), copy)
    db = sqlite3.connect(os.path.join(copy, "eai.db"))
    row = db.execute("SELECT id, doc FROM audit_events WHERE action='sandbox.execute' ORDER BY seq LIMIT 1 OFFSET 2").fetchone()
    check(row, "no audit rows")
    doc = json.loads(row[1])
    doc["target"] = "sbx_tampered"
    db.execute("UPDATE audit_events SET doc=?, target=? WHERE id=?", (json.dumps(doc), "sbx_tampered", row[0]))
    db.commit()
    db.close()
    e = C.srv.env()
    e["EAI_DATA_DIR"] = copy
    r = subprocess.run([EAID, "audit", "verify"], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    check(r.returncode == 1, "verify after tampering: exit %d %s" % (r.returncode, r.stdout.decode()))
    check(row[0] in (r.stdout + r.stderr).decode(), "verify does not name the event: %s" % (r.stdout + r.stderr))


# ----------------------------------------------------------------- main ---

def ensure_image():
    rootfs = os.path.join(IMAGES, "python", "3.11-slim", "rootfs")
    if os.path.isdir(rootfs):
        return
    print("building image %s into %s (once)" % (IMAGE, IMAGES), flush=True)
    os.makedirs(IMAGES, exist_ok=True)
    e = dict(os.environ)
    e["EAI_IMAGE_DIR"] = IMAGES
    r = subprocess.run([EAID, "images", "build", IMAGE, "--packages", IMAGE_PACKAGES], env=e, timeout=900)
    if r.returncode != 0:
        raise Fail("eaid images build failed (%d)" % r.returncode)


def main():
    results = []
    C.notes = []
    only = [s for s in os.environ.get("EAI_ACCEPT_ONLY", "").split(",") if s]
    t_all = time.time()

    def run_case(name, fn):
        t0 = time.time()
        try:
            fn()
            ok, why = True, ""
        except Fail as e:
            ok, why = False, str(e)
        except Exception as e:
            ok, why = False, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc(limit=3))
        dt = time.time() - t0
        results.append((name, ok, dt, why))
        print("%s  %6.2fs  %s%s" % ("PASS" if ok else "FAIL", dt, name, "" if ok else "\n      -> " + why), flush=True)
        return ok

    if os.geteuid() != 0:
        print("needs root (gVisor backend)\n0 passed, 1 failed")
        return 1
    if not os.access(EAID, os.X_OK):
        print("no eaid at %s\n0 passed, 1 failed" % EAID)
        return 1
    if not run_case("image python:3.11-slim present (built if absent)", ensure_image):
        print("0 passed, 1 failed")
        return 1
    # a short drain (server.drain_s, default 30): the graceful stop below ends a 60 s run
    C.srv = Server({"EAI_DRAIN_S": "3"})

    def setup():
        C.srv.start()
        ta = json.loads(C.srv.cli("tenants", "create", "acme").stdout)
        tb = json.loads(C.srv.cli("tenants", "create", "globex").stdout)
        tr = json.loads(C.srv.cli("tenants", "create", "restart").stdout)
        tr2 = json.loads(C.srv.cli("tenants", "create", "restart2").stdout)
        check(re.match(r"^[0-9a-f-]{36}$", ta["id"]) and ta["name"] == "acme", "tenant json %r" % ta)
        C.tenant_a, C.tenant_b = ta["id"], tb["id"]
        C.key_a = C.srv.cli("keys", "create", "--tenant", ta["id"]).stdout.decode().strip()
        C.key_b = C.srv.cli("keys", "create", "--tenant", tb["id"], "--name", "b").stdout.decode().strip()
        C.key_r = C.srv.cli("keys", "create", "--tenant", tr["id"]).stdout.decode().strip()
        C.key_r2 = C.srv.cli("keys", "create", "--tenant", tr2["id"]).stdout.decode().strip()
        C.a, C.b, C.r = Client(C.srv, C.key_a), Client(C.srv, C.key_b), Client(C.srv, C.key_r)
        C.r2 = Client(C.srv, C.key_r2)
    try:
        if not run_case("eaid serve starts; tenants and keys from the CLI", setup):
            raise Fail("no server")
        for name, fn in CASES:
            if only and not any(s in name for s in only) and fn is not t_basic:
                continue
            run_case(name, fn)
        run_case("fail closed: runsc missing -> readyz 503, POST 503 sandbox_unavailable, nothing runs", t_fail_closed)
        run_case("graceful SIGTERM: running execution ends error/interrupted with output; parked long-poll answered",
                 t_graceful)
        run_case("restart: kill -9 mid-run -> error/interrupted; queued one still runs", t_restart)
        run_case("audit verify exits 0 after the restart (server running)", t_audit_live)
    except Fail:
        pass
    finally:
        if C.srv.proc is not None:
            run_case("SIGTERM stops eaid; no runsc container, process or bundle left", t_final_stop)
            run_case("audit verify 0 when stopped; 1 naming the event after one row is altered", t_audit_tamper)
    npass = sum(1 for r in results if r[1])
    nfail = len(results) - npass
    print("\n--- notes")
    for n in C.notes:
        print("  " + n)
    if nfail:
        print("--- failures")
        for name, ok, dt, why in results:
            if not ok:
                print("  %s: %s" % (name, why.splitlines()[0] if why else ""))
        print("--- eaid log tail\n" + C.srv.log_tail(40))
    else:
        shutil.rmtree(C.srv.tmp, ignore_errors=True)
    print("total %.1f s, data dir %s" % (time.time() - t_all, C.srv.tmp if nfail else "(removed)"))
    print("%d passed, %d failed" % (npass, nfail))
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
