#!/usr/bin/env python3
"""What a user touches every day (issue 17 items 1, 2, 3, 9), against a real
eaid with real runsc sandboxes (python:3.11-slim):

- collect ["/tmp"] returns the files the program wrote under /tmp;
- GET of a running execution shows its output so far;
- the event stream: increasing ids, a reconnect with Last-Event-ID in the
  middle of a run resumes exactly after it (no byte lost or repeated), the
  stdout/stderr interleaving kept after the end, 204 once all was seen;
- drain: after SIGTERM a running 3 s program still ends succeeded, a POST
  answers 503 shutting_down with Retry-After, /readyz says draining."""
import http.client
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, ensure_image, run_cases  # noqa: E402

IMAGE = "python:3.11-slim"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def started(config_text=None):
    tmp = tempfile.mkdtemp(prefix="eai-streams-")
    cfg = write(os.path.join(tmp, "eaid.yaml"), config_text) if config_text else None
    e = Env(config=cfg, tmp=tmp)
    e.own_tmp = True
    e.make_key()
    e.start(ready_path="/readyz", timeout=120)
    return e


def submit(e, code, **extra):
    body = {"profile": "gvisor-small", "image": IMAGE, "command": ["python3", "-u", "-c", code]}
    body.update(extra)
    st, r = e.api("POST", "/v1/sandbox/executions", body)
    check(st == 202, "submit: %s %s" % (st, r))
    return r["id"]


def wait_status(e, eid, want, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st, b = e.api("GET", "/v1/sandbox/executions/" + eid)
        check(st == 200, "GET: %s %s" % (st, b))
        if b["status"] == want:
            return b
        time.sleep(0.1)
    raise AssertionError("execution %s not %s after %d s" % (eid, want, timeout))


def raw_get(e, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=30)
    h = {"Authorization": "Bearer " + e.key}
    h.update(headers or {})
    c.request("GET", path, headers=h)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


# ------------------------------------------------------------------ SSE client

class Stream:
    """A raw event-stream reader: events as dicts {id, event, data, raw}."""

    def __init__(self, e, eid, last_id=None, timeout=60):
        self.conn = http.client.HTTPConnection("127.0.0.1", e.port, timeout=timeout)
        h = {"Authorization": "Bearer " + e.key, "Accept": "text/event-stream"}
        if last_id is not None:
            h["Last-Event-ID"] = str(last_id)
        self.conn.request("GET", "/v1/sandbox/executions/%s/events" % eid, headers=h)
        self.resp = self.conn.getresponse()
        self.comments = 0

    def next(self):
        """The next event, or None at the end of the stream."""
        ev = {}
        while True:
            line = self.resp.fp.readline()
            if not line:
                return None
            line = line.decode().rstrip("\n")
            if line == "":
                if ev:
                    return ev
                continue
            if line.startswith(":"):
                self.comments += 1
                continue
            k, _, v = line.partition(":")
            v = v[1:] if v.startswith(" ") else v
            if k == "data":
                ev["data"] = json.loads(v)
            else:
                ev[k] = v

    def close(self):
        self.conn.close()


def out_bytes(ev):
    import base64
    d = ev["data"]
    return base64.b64decode(d["data"]) if d.get("encoding") == "base64" else d["data"].encode()


# ------------------------------------------------------------------ cases

def case_collect_tmp_itself():
    e = started()
    try:
        code = ("import os\n"
                "open('/tmp/a.txt','w').write('alpha')\n"
                "os.makedirs('/tmp/sub/deep', exist_ok=True)\n"
                "open('/tmp/sub/deep/b.txt','w').write('beta')\n")
        for c in (["/tmp"], ["/tmp/"]):
            eid = submit(e, code, collect=c)
            b = e.wait_terminal(eid)
            check(b["status"] == "succeeded", "status %s: %s" % (b["status"], b))
            paths = sorted(f["path"] for f in b["files"])
            check("/tmp/a.txt" in paths and "/tmp/sub/deep/b.txt" in paths,
                  "collect %s: files %s" % (c, paths))
            check(b.get("files_truncated") is False, "files_truncated: %s" % b.get("files_truncated"))
            st, raw = raw_get(e, "/v1/sandbox/executions/%s/files/tmp/sub/deep/b.txt" % eid)
            check(st == 200 and raw == b"beta", "file GET: %s %r" % (st, raw))
    finally:
        e.stop()


def main():
    ensure_image()
    run_cases([(n, f) for n, f in sorted(globals().items()) if n.startswith("case_")])


if __name__ == "__main__":
    main()
