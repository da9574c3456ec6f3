#!/usr/bin/env python3
"""The `eai` CLI against a real `eaid serve` (loopback, temp data dir) running
real gVisor sandboxes (python:3.11-slim).  Python 3 standard library only.

Files go in with --file and come back with --download (bytes compared), the
execution id is read from stderr, `eai files` lists and fetches, `eai cancel`
stops a running program, `eai ls --json` pages, `eai logs`, `eai exec
--tool`, errors in French from the envelope, exit codes.

Environment: EAI_BUILD_DIR (default <source>/build), EAI_IMAGE_DIR (default
<build>/images; python:3.11-slim is built there once when absent),
EAI_CLI_ONLY (comma-separated substrings of case names: run only those).
Last line: `N passed, M failed`; exit status 1 when anything failed.
"""
import json
import os
import re
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
EAI = os.path.join(BUILD, "eai")
IMAGES = os.environ.get("EAI_IMAGE_DIR") or os.path.join(BUILD, "images")
IMAGE = "python:3.11-slim"
PROFILE = "gvisor-small"
ID_LINE = re.compile(r"^eai: execution (sbx_[0-9a-f-]{36}) \((queued|running)\)$", re.M)


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
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="eai-cli-")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None
        self.key = None

    def base_env(self):
        e = dict(os.environ)
        for k in ("EAI_DATABASE_URL", "EAI_FINOPS_URL", "EAI_AUDIT_URL", "OTEL_EXPORTER_OTLP_ENDPOINT",
                  "EAI_PLUGIN_DIR", "EAI_SANDBOX_RUNSC", "EAI_AUTH_PEPPER_FILE", "LANG", "LC_ALL",
                  "LC_MESSAGES", "EAI_URL", "EAI_API_KEY"):
            e.pop(k, None)
        e["EAI_DATA_DIR"] = os.path.join(self.tmp, "data")
        e["EAI_LISTEN"] = "127.0.0.1:%d" % self.port
        e["EAI_IMAGE_DIR"] = IMAGES
        return e

    def start(self):
        e = self.base_env()
        r = subprocess.run([EAID, "tenants", "create", "cli-test"], env=e, capture_output=True, timeout=60)
        check(r.returncode == 0, "tenants create: %s" % r.stderr)
        tenant = json.loads(r.stdout)["id"]
        r = subprocess.run([EAID, "keys", "create", "--tenant", tenant], env=e, capture_output=True, timeout=60)
        check(r.returncode == 0, "keys create: %s" % r.stderr)
        self.key = r.stdout.decode().strip()
        self.log = open(os.path.join(self.tmp, "eaid.log"), "ab")
        self.proc = subprocess.Popen([EAID, "serve"], env=e, stdout=self.log, stderr=self.log,
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
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cli_env(self, lang=None):
        e = self.base_env()
        e["EAI_URL"] = self.url
        e["EAI_API_KEY"] = self.key
        if lang:
            e["LANG"] = lang
        return e

    def eai(self, *args, lang=None, timeout=120, cwd=None):
        return subprocess.run([EAI] + list(args), env=self.cli_env(lang), capture_output=True, timeout=timeout,
                              cwd=cwd or self.tmp)

    def api(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Authorization": "Bearer " + self.key,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


def exec_id(stderr):
    m = ID_LINE.search(stderr.decode(errors="replace"))
    check(m, "no 'eai: execution sbx_... (queued)' line on stderr: %r" % stderr[-500:])
    return m.group(1)


# ---------------------------------------------------------------- cases

def case_upload_download(env, st):
    src = os.path.join(env.tmp, "in")
    os.makedirs(src)
    blob = bytes(range(256)) * 40 + os.urandom(5000)  # not UTF-8: goes as content_b64
    text = "a,b\n1,é\n".encode()
    with open(os.path.join(src, "blob.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(src, "data.csv"), "wb") as f:
        f.write(text)
    prog = ("import os, shutil; os.makedirs('/tmp/out/sub', exist_ok=True);"
            "shutil.copy('/tmp/in/blob.bin', '/tmp/out/sub/blob.bin');"
            "shutil.copy('/tmp/in/data.csv', '/tmp/out/data.csv'); print('copied')")
    dl = os.path.join(env.tmp, "dl")
    r = env.eai("exec", "--profile", PROFILE, "--image", IMAGE,
                "--file", os.path.join(src, "blob.bin") + ":/tmp/in/blob.bin",
                "--file", os.path.join(src, "data.csv") + ":/tmp/in/data.csv",
                "--collect", "/tmp/out", "--download", dl, "--", "python3", "-c", prog)
    check(r.returncode == 0, "exec exit %d: %r" % (r.returncode, r.stderr))
    check(r.stdout == b"copied\n", "stdout %r" % r.stdout)
    st["id"] = exec_id(r.stderr)
    with open(os.path.join(dl, "out", "sub", "blob.bin"), "rb") as f:
        check(f.read() == blob, "downloaded blob.bin differs from the uploaded bytes")
    with open(os.path.join(dl, "out", "data.csv"), "rb") as f:
        check(f.read() == text, "downloaded data.csv differs")
    leftovers = [n for _, _, fs in os.walk(dl) for n in fs if n.startswith(".eai-download")]
    check(not leftovers, "temporary files left: %r" % leftovers)
    st["blob"] = blob


def case_files(env, st):
    i = st["id"]
    r = env.eai("files", i, "--json")
    check(r.returncode == 0, "files --json: %r" % r.stderr)
    doc = json.loads(r.stdout)
    paths = sorted(f["path"] for f in doc["files"])
    check(paths == ["/tmp/out/data.csv", "/tmp/out/sub/blob.bin"], "files %r" % paths)
    check(doc["files_truncated"] is False, "files_truncated %r" % doc)
    r = env.eai("files", i)
    check(r.returncode == 0 and b"/tmp/out/sub/blob.bin\t%d\t" % len(st["blob"]) in r.stdout,
          "files table %r" % r.stdout)
    r = env.eai("files", i, "/tmp/out/sub/blob.bin")
    check(r.returncode == 0 and r.stdout == st["blob"], "files ID PATH to stdout: rc %d, %d bytes"
          % (r.returncode, len(r.stdout)))
    out = os.path.join(env.tmp, "one.bin")
    r = env.eai("files", i, "tmp/out/sub/blob.bin", "-o", out)
    check(r.returncode == 0, "files -o: %r" % r.stderr)
    with open(out, "rb") as f:
        check(f.read() == st["blob"], "files -o content differs")
    dl = os.path.join(env.tmp, "dl-files")
    r = env.eai("files", i, "--download", dl)
    check(r.returncode == 0, "files --download: %r" % r.stderr)
    with open(os.path.join(dl, "out", "sub", "blob.bin"), "rb") as f:
        check(f.read() == st["blob"], "files --download content differs")
    r = env.eai("files", i, "/tmp/out/missing.txt")
    check(r.returncode == 1 and b"not_found" in r.stderr, "missing file: rc %d %r" % (r.returncode, r.stderr))


def case_exit_codes_json(env, st):
    r = env.eai("exec", "--profile", PROFILE, "--image", IMAGE, "--", "python3", "-c",
                "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)")
    check(r.returncode == 3, "exit code %d, want 3" % r.returncode)
    check(r.stdout == b"out\n" and b"err\n" in r.stderr, "streams %r %r" % (r.stdout, r.stderr))
    st["failed_id"] = exec_id(r.stderr)
    r = env.eai("--json", "exec", "--profile", PROFILE, "--image", IMAGE, "--", "python3", "-c", "print(6*7)")
    check(r.returncode == 0, "exec --json: %r" % r.stderr)
    rec = json.loads(r.stdout)
    check(rec["status"] == "succeeded" and rec["stdout"] == "42\n" and rec["id"] == exec_id(r.stderr),
          "exec --json record %r" % rec)
    r = env.eai("logs", st["failed_id"])
    check(r.returncode == 0 and r.stdout == b"out\n" and r.stderr == b"err\n", "logs %r %r" % (r.stdout, r.stderr))
    r = env.eai("logs", st["failed_id"], "--json")
    doc = json.loads(r.stdout)
    check(doc["stdout"] == "out\n" and doc["status"] == "failed", "logs --json %r" % doc)
    r = env.eai("get", st["failed_id"])
    check(r.returncode == 0 and json.loads(r.stdout)["exit_code"] == 3, "get %r" % r.stdout[:200])


def case_live_output(env, st):
    # the first line reaches our stdout while the program still runs
    prog = ("import sys, time; print('first', flush=True); print('err1', file=sys.stderr, flush=True);"
            "time.sleep(4); print('second'); print('x' * 70000)")
    p = subprocess.Popen([EAI, "exec", "--profile", PROFILE, "--image", IMAGE, "--", "python3", "-c", prog],
                         env=env.cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = p.stdout.readline()
        t_first = time.time()
        rest, err = p.communicate(timeout=90)
        t_end = time.time()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(first == b"first\n", "first line %r" % first)
    check(t_end - t_first >= 2.0, "the first line came only %.2f s before the end: not live" % (t_end - t_first))
    # exactly once: live chunks plus what the record holds beyond them
    check(rest == b"second\n" + b"x" * 70000 + b"\n", "rest of stdout: %d bytes %r..." % (len(rest), rest[:40]))
    check(err.count(b"err1\n") == 1, "stderr %r" % err)
    check(p.returncode == 0, "exit %d" % p.returncode)
    # many small writes: nothing lost, nothing twice
    r = env.eai("exec", "--profile", PROFILE, "--image", IMAGE, "--", "python3", "-c",
                "import time\nfor i in range(3000):\n    print(i, flush=True)\n    i % 500 or time.sleep(0.2)")
    want = "".join("%d\n" % i for i in range(3000)).encode()
    check(r.returncode == 0 and r.stdout == want, "3000 lines: rc %d, %d bytes (want %d)"
          % (r.returncode, len(r.stdout), len(want)))


def case_logs_follow(env, st):
    status, body = env.api("POST", "/v1/sandbox/executions", {
        "profile": PROFILE, "image": IMAGE,
        "command": ["python3", "-c", "import time; print('a', flush=True); time.sleep(4); print('b')"]})
    check(status == 202, "create %d %r" % (status, body))
    i = body["id"]
    deadline = time.time() + 30
    while time.time() < deadline:  # started, so `a` may already be out
        _, rec = env.api("GET", "/v1/sandbox/executions/" + i)
        if rec["status"] != "queued":
            break
        time.sleep(0.1)
    p = subprocess.Popen([EAI, "logs", "--follow", i], env=env.cli_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        first = p.stdout.readline()
        t_first = time.time()
        rest, err = p.communicate(timeout=60)
        took = time.time() - t_first
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(first == b"a\n" and rest == b"b\n", "logs -f output %r %r (%r)" % (first, rest, err))
    check(took >= 1.5, "logs -f: the first line came only %.2f s before the end" % took)
    check(p.returncode == 0, "logs -f exit %d" % p.returncode)
    r = env.eai("logs", "-f", i)  # already finished: the whole output once
    check(r.returncode == 0 and r.stdout == b"a\nb\n", "logs -f after the end %r" % r.stdout)


class CuttingProxy:
    """Loopback TCP proxy to eaid that cuts the first `cuts` event streams
    after `after` bytes of their response (a proxy or a network dropping a
    long-lived connection)."""

    def __init__(self, port, cuts=2, after=1200):
        self.target = port
        self.cuts = cuts
        self.after = after
        self.events_conns = 0
        self.lock = threading.Lock()
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(16)
        self.port = self.srv.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        u = socket.create_connection(("127.0.0.1", self.target))
        state = {"sent": 0, "cut_at": None}

        def look(d):  # one request per chunk head (curl reuses connections)
            if d[:4] == b"GET " and b"/events" in d.split(b"\r\n", 1)[0]:
                with self.lock:
                    self.events_conns += 1
                    if self.events_conns <= self.cuts:
                        state["cut_at"] = state["sent"] + self.after

        def up():
            try:
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    look(d)
                    u.sendall(d)
            except OSError:
                pass
        threading.Thread(target=up, daemon=True).start()
        try:
            while True:
                d = u.recv(65536)
                if not d:
                    break
                cut = state["cut_at"]
                if cut is not None and state["sent"] + len(d) >= cut:
                    c.sendall(d[:cut - state["sent"]])
                    break
                c.sendall(d)
                state["sent"] += len(d)
        except OSError:
            pass
        for s_ in (c, u):
            try:
                s_.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s_.close()

    def close(self):
        self.srv.close()


def case_stream_cut(env, st):
    proxy = CuttingProxy(env.port)
    try:
        e = env.cli_env()
        e["EAI_URL"] = "http://127.0.0.1:%d" % proxy.port
        prog = "import time\nfor i in range(40):\n    print('line', i, flush=True)\n    time.sleep(0.1)"
        r = subprocess.run([EAI, "exec", "--profile", PROFILE, "--image", IMAGE, "--", "python3", "-c", prog],
                           env=e, capture_output=True, timeout=120)
        want = "".join("line %d\n" % i for i in range(40)).encode()
        check(r.returncode == 0, "exec through the cutting proxy: exit %d %r" % (r.returncode, r.stderr[-300:]))
        check(r.stdout == want, "output through cut streams: %d bytes, want %d: %r"
              % (len(r.stdout), len(want), r.stdout[:120]))
        check(proxy.events_conns >= 3, "the stream was followed %d times, want a reconnect after each cut %r"
              % (proxy.events_conns, r.stderr))
    finally:
        proxy.close()


def case_cancel(env, st):
    p = subprocess.Popen([EAI, "exec", "--profile", PROFILE, "--image", IMAGE, "--timeout", "60", "--",
                          "python3", "-c", "import time; print('started', flush=True); time.sleep(50)"],
                         env=env.cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stderr.readline()  # the id comes first, before the run ends
        m = ID_LINE.search(line.decode())
        check(m, "first stderr line of exec: %r" % line)
        i = m.group(1)
        deadline = time.time() + 30
        while time.time() < deadline:
            _, rec = env.api("GET", "/v1/sandbox/executions/" + i)
            if rec.get("status") == "running":
                break
            time.sleep(0.2)
        t0 = time.time()
        r = env.eai("cancel", i)
        check(r.returncode == 0, "cancel: rc %d %r" % (r.returncode, r.stderr))
        check(r.stdout.startswith(i.encode() + b"\t"), "cancel output %r" % r.stdout)
        out, err = p.communicate(timeout=60)
        took = time.time() - t0
        check(p.returncode == 125, "exec of a cancelled run exits %d, want 125" % p.returncode)
        check(b"cancelled" in err, "exec stderr %r" % err)
        check(took < 30, "cancel took %.1f s" % took)
        _, rec = env.api("GET", "/v1/sandbox/executions/" + i)
        check(rec["status"] == "cancelled", "status after cancel %r" % rec["status"])
        r = env.eai("cancel", i)
        check(r.returncode == 1 and b"already_finished" in r.stderr, "second cancel %r" % r.stderr)
        r = env.eai("cancel", i, lang="fr_FR.UTF-8")
        check(r.returncode == 1 and "déjà terminée".encode() in r.stderr, "French envelope %r" % r.stderr)
        r = env.eai("--json", "cancel", "sbx_00000000-0000-4000-8000-000000000000")
        check(r.returncode == 1 and b"not_found" in r.stderr, "cancel unknown %r" % r.stderr)
        st["cancelled_id"] = i
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def case_ctrl_c(env, st):
    p = subprocess.Popen([EAI, "exec", "--profile", PROFILE, "--image", IMAGE, "--", "python3", "-c",
                          "import time; print('up', flush=True); time.sleep(50)"],
                         env=env.cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        m = ID_LINE.search(p.stderr.readline().decode())
        check(m, "no id line")
        check(p.stdout.readline() == b"up\n", "no live output before Ctrl-C")
        t0 = time.time()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        check(p.returncode == 125 and b"cancelled" in err, "after SIGINT: exit %d %r" % (p.returncode, err))
        check(time.time() - t0 < 30, "Ctrl-C took %.1f s" % (time.time() - t0))
        _, rec = env.api("GET", "/v1/sandbox/executions/" + m.group(1))
        check(rec["status"] == "cancelled" and rec["stdout"] == "up\n", "record after Ctrl-C %r" % rec["status"])
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def case_ls(env, st):
    r = env.eai("ls", "--json")
    check(r.returncode == 0, "ls --json %r" % r.stderr)
    page = json.loads(r.stdout)
    ids = [x["id"] for x in page["items"]]
    for k in ("id", "failed_id", "cancelled_id"):
        check(st[k] in ids, "ls misses %s %s" % (k, st[k]))
    check(all("stdout" not in x for x in page["items"]), "ls items carry stdout")
    check(ids.index(st["cancelled_id"]) < ids.index(st["id"]), "ls is not newest first")
    r = env.eai("ls", "--json", "--limit", "1")
    p1 = json.loads(r.stdout)
    check(len(p1["items"]) == 1 and isinstance(p1["next"], str), "page 1 %r" % p1)
    r = env.eai("ls", "--json", "--limit", "1", "--after", p1["next"])
    p2 = json.loads(r.stdout)
    check(len(p2["items"]) == 1 and p2["items"][0]["id"] != p1["items"][0]["id"], "page 2 %r" % p2)
    r = env.eai("ls", "--json", "--limit", "2", "--all")
    every = json.loads(r.stdout)
    check([x["id"] for x in every["items"]] == ids and every["next"] is None, "ls --all %r" % every)
    r = env.eai("ls", "--status", "cancelled")
    lines = r.stdout.decode().splitlines()
    check(lines[0].startswith("ID\tSTATUS") and len(lines) == 3 and st["cancelled_id"] in r.stdout.decode()
          and all(x.split("\t")[1] == "cancelled" for x in lines[1:]), "ls --status table %r" % lines)
    r = env.eai("ls", "--limit", "0")
    check(r.returncode == 2, "ls --limit 0 exit %d" % r.returncode)
    r = env.eai("ls", "--status", "bogus", lang="fr_FR.UTF-8")
    check(r.returncode == 1 and b"validation_failed" in r.stderr and b"/status" in r.stderr,
          "ls bad status %r" % r.stderr)


def case_tool(env, st):
    prog = ("import os; os.makedirs('/tmp/outputs', exist_ok=True);"
            "open('/tmp/outputs/tool.txt', 'w').write('made by the tool'); print('tool ran')")
    status, body = env.api("POST", "/v1/manifests/apply", {
        "apiVersion": "eai.dev/v1", "kind": "Tool", "metadata": {"name": "cli-tool"},
        "spec": {"sandbox_profile": PROFILE, "image": IMAGE, "command": ["python3", "-c", prog]}})
    check(status in (200, 201), "apply %d %r" % (status, body))
    dl = os.path.join(env.tmp, "dl-tool")
    r = env.eai("exec", "--tool", "cli-tool", "--download", dl)
    check(r.returncode == 0 and r.stdout == b"tool ran\n", "exec --tool: rc %d %r %r"
          % (r.returncode, r.stdout, r.stderr))
    with open(os.path.join(dl, "outputs", "tool.txt"), "rb") as f:
        check(f.read() == b"made by the tool", "tool file")
    r = env.eai("exec", "--tool", "no-such-tool")
    check(r.returncode == 125 and b"/tool" in r.stderr, "unknown tool %r" % r.stderr)


def case_errors_help(env, st):
    r = env.eai("exec", "--profile", PROFILE, "--image", "nope:1", "--", "true", lang="fr_FR.UTF-8")
    check(r.returncode == 125 and b"unknown_image" in r.stderr and "Image inconnue".encode() in r.stderr,
          "French refusal %r" % r.stderr)
    r = env.eai("--lang", "fr", "exec", "--profile", PROFILE, "--image", "nope:1", "--", "true")
    check(r.returncode == 125 and "Image inconnue".encode() in r.stderr, "--lang fr %r" % r.stderr)
    r = env.eai("exec", "--profile", PROFILE, "--image", "nope:1", "--", "true", lang="en_US.UTF-8")
    check(r.returncode == 125 and b"Image inconnue" not in r.stderr, "English refusal %r" % r.stderr)
    r = env.eai("--help")
    check(r.returncode == 0 and all(c in r.stdout for c in (b"exec", b"files", b"cancel", b"ls", b"logs",
                                                            b"--download", b"--json")), "help %r" % r.stdout)
    r = env.eai("frobnicate")
    check(r.returncode == 2, "unknown command exit %d" % r.returncode)
    e = env.cli_env()
    e.pop("EAI_API_KEY")
    r = subprocess.run([EAI, "ls"], env=e, capture_output=True, timeout=30)
    check(r.returncode == 1 and b"EAI_API_KEY" in r.stderr, "no key %r" % r.stderr)
    e["EAI_API_KEY"] = "eai_0123456789abcdef_" + "0" * 64
    r = subprocess.run([EAI, "ls"], env=e, capture_output=True, timeout=30)
    check(r.returncode == 1 and b"unauthenticated" in r.stderr, "bad key %r" % r.stderr)


def case_session(env, st):
    r = env.eai("session", "create", "--image", IMAGE, "--profile", PROFILE, "--memory", "256Mi",
                "--idle-timeout", "120", "--env", "MODE=cli")
    check(r.returncode == 0, "session create: rc %d %r" % (r.returncode, r.stderr))
    sid = r.stdout.decode().strip()
    check(re.fullmatch(r"ses_[0-9a-f-]{36}", sid), "session id %r" % r.stdout)
    try:
        blob = bytes(range(256)) * 8                     # not UTF-8: the raw PUT body
        local = os.path.join(env.tmp, "s.bin")
        with open(local, "wb") as f:
            f.write(blob)
        r = env.eai("session", "put", sid, local, "/tmp/w/s.bin", "--json")
        check(r.returncode == 0 and json.loads(r.stdout)["size"] == len(blob), "put: %r %r" % (r.stdout, r.stderr))
        prog = "import os,sys; d=open('/tmp/w/s.bin','rb').read(); open('/tmp/w/out.txt','w').write(str(len(d))); " \
               "print(os.environ['MODE']); sys.exit(3)"
        r = env.eai("session", "exec", sid, "--", "python3", "-c", prog)
        check(r.returncode == 3 and r.stdout == b"cli\n", "exec: rc %d %r %r" % (r.returncode, r.stdout, r.stderr))
        r = env.eai("session", "cat", sid, "/tmp/w/out.txt")
        check(r.returncode == 0 and r.stdout == str(len(blob)).encode(), "cat: %r %r" % (r.stdout, r.stderr))
        r = env.eai("session", "cat", sid, "/tmp/w/s.bin")
        check(r.stdout == blob, "cat of the binary file differs (%d bytes)" % len(r.stdout))
        r = env.eai("session", "files", sid, "--json")
        paths = sorted(i["path"] for i in json.loads(r.stdout)["items"] if i["type"] == "file")
        check(paths == ["/tmp/w/out.txt", "/tmp/w/s.bin"], "files %r" % paths)
        r = env.eai("session", "rm", sid, "/tmp/w/out.txt")
        check(r.returncode == 0, "rm: %r" % r.stderr)
        r = env.eai("session", "cat", sid, "/tmp/w/out.txt")
        check(r.returncode == 1 and b"not_found" in r.stderr, "cat after rm: %d %r" % (r.returncode, r.stderr))
        r = env.eai("session", "ls", "--json")
        check(any(i["id"] == sid for i in json.loads(r.stdout)["items"]), "ls: %r" % r.stdout[:300])
        r = env.eai("session", "get", sid)
        check(json.loads(r.stdout)["executions"] == 1, "get: %r" % r.stdout[:300])
    finally:
        r = env.eai("session", "close", sid, "--json")
    doc = json.loads(r.stdout or b"{}")
    check(r.returncode == 0 and doc.get("status") == "ended" and doc.get("end_reason") == "deleted",
          "close: %r %r" % (r.stdout, r.stderr))
    r = env.eai("session", "exec", sid, "--", "true")
    check(r.returncode == 125 and b"session_ended" in r.stderr, "exec after close: %d %r" % (r.returncode, r.stderr))
    r = env.eai("session", "put", sid)
    check(r.returncode == 2, "usage error: %d" % r.returncode)


def ensure_image():
    if os.path.isdir(os.path.join(IMAGES, "python", "3.11-slim", "rootfs")):
        return
    print("building image %s into %s (once)" % (IMAGE, IMAGES), flush=True)
    os.makedirs(IMAGES, exist_ok=True)
    e = dict(os.environ)
    e["EAI_IMAGE_DIR"] = IMAGES
    r = subprocess.run([EAID, "images", "build", IMAGE, "--packages", "python3-minimal,libpython3.11-stdlib"],
                       env=e, timeout=900)
    check(r.returncode == 0, "eaid images build failed")


def main():
    if not shutil.which("runsc") or os.geteuid() != 0:
        print("SKIP: needs root and runsc")
        return 77
    ensure_image()
    env = Env()
    passed = failed = 0
    try:
        env.start()
        st = {}
        for name, fn in [("upload, run, --download, compare bytes", case_upload_download),
                         ("files: list, one, -o, --download, missing", case_files),
                         ("exit codes, --json, logs, get", case_exit_codes_json),
                         ("live output while it runs, exactly once", case_live_output),
                         ("logs --follow while it runs", case_logs_follow),
                         ("a cut event stream is followed again", case_stream_cut),
                         ("cancel a running execution", case_cancel),
                         ("Ctrl-C during a live exec cancels it", case_ctrl_c),
                         ("ls: --json, paging, --all, --status", case_ls),
                         ("exec --tool runs the manifest's command", case_tool),
                         ("errors in French, --help, usage", case_errors_help),
                         ("session: create, put, exec, cat, files, rm, close", case_session)]:
            only = [x for x in os.environ.get("EAI_CLI_ONLY", "").split(",") if x]
            if only and not any(x in name for x in only):
                continue
            t0 = time.time()
            try:
                fn(env, st)
                passed += 1
                print("PASS %-45s %.2fs" % (name, time.time() - t0), flush=True)
            except Exception as e:  # report and go on
                failed += 1
                print("FAIL %-45s %s" % (name, e), flush=True)
                if not isinstance(e, Fail):
                    traceback.print_exc()
    except Fail as e:
        failed += 1
        print("FAIL server start: %s" % e)
    finally:
        if failed:
            print("eaid log tail:\n" + env.log_tail())
        env.stop()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
