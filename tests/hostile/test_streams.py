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
            line = self.resp.readline()
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


INTERLEAVED = ("import sys, time\n"
               "for i in range(8):\n"
               "    sys.stdout.write('out%d\\n' % i); sys.stdout.flush(); time.sleep(0.1)\n"
               "    sys.stderr.write('err%d\\n' % i); sys.stderr.flush(); time.sleep(0.4)\n")
WANT_OUT = "".join("out%d\n" % i for i in range(8))
WANT_ERR = "".join("err%d\n" % i for i in range(8))
WANT_ORDER = [x for i in range(8) for x in ("out%d\n" % i, "err%d\n" % i)]


def read_all(st):
    evs = []
    while True:
        ev = st.next()
        if ev is None:
            return evs
        evs.append(ev)


def case_live_get_and_resumed_stream():
    e = started()
    try:
        eid = submit(e, INTERLEAVED)
        wait_status(e, eid, "running")
        # 17.2: GET of a running execution shows the output so far
        deadline = time.time() + 20
        b = None
        while time.time() < deadline:
            st, b = e.api("GET", "/v1/sandbox/executions/" + eid)
            if b["status"] == "running" and b["stdout"].startswith("out0\nout1\n") and "err0\n" in b["stderr"]:
                break
            time.sleep(0.1)
        check(b["status"] == "running" and b["stdout"].startswith("out0\nout1\n"),
              "GET while running: %s" % b)
        # 17.3: a stream cut in the middle and resumed with Last-Event-ID
        s1 = Stream(e, eid)
        check(s1.resp.status == 200, "events: %s" % s1.resp.status)
        first = []
        while sum(1 for x in first if x.get("event") in ("stdout", "stderr")) < 5:
            ev = s1.next()
            check(ev is not None, "stream ended early: %s" % first)
            first.append(ev)
        s1.close()
        check(all("id" in x for x in first), "an event without id: %s" % first)
        last = int(first[-1]["id"])
        s2 = Stream(e, eid, last_id=last)
        rest = read_all(s2)
        s2.close()
        live = first + rest
        ids = [int(x["id"]) for x in live]
        check(ids == sorted(set(ids)), "ids not increasing: %s" % ids)
        check(int(rest[0]["id"]) == last + 1, "resumed at %s after %d" % (rest[0]["id"], last))
        out = b"".join(out_bytes(x) for x in live if x["event"] == "stdout").decode()
        err = b"".join(out_bytes(x) for x in live if x["event"] == "stderr").decode()
        check(out == WANT_OUT, "stdout over the reconnect: %r" % out)
        check(err == WANT_ERR, "stderr over the reconnect: %r" % err)
        # coalesced: one write, one event; interleaving kept live
        order = [out_bytes(x).decode() for x in live if x["event"] in ("stdout", "stderr")]
        check(order == WANT_ORDER, "live order: %s" % order)
        end = live[-1]
        check(end["event"] == "status" and end["data"]["status"] == "succeeded", "end: %s" % end)
        # after the end: the same events, same ids, same order
        replay = read_all(Stream(e, eid))
        outs = [x for x in live if x["event"] != "status" or x is end]
        check([(x["id"], x["event"], x["data"]) for x in replay] ==
              [(x["id"], x["event"], x["data"]) for x in outs],
              "replay differs:\n%s\n%s" % (replay, outs))
        mid = int(outs[6]["id"])
        tail = read_all(Stream(e, eid, last_id=mid))
        check([x["id"] for x in tail] == [x["id"] for x in outs[7:]], "resume after the end: %s" % tail)
        st, body = raw_get(e, "/v1/sandbox/executions/%s/events" % eid, {"Last-Event-ID": end["id"]})
        check(st == 204 and body == b"", "all seen: %s %r" % (st, body))
        # the stored record: same output as streamed
        st, b = e.api("GET", "/v1/sandbox/executions/" + eid)
        check(b["stdout"] == WANT_OUT and b["stderr"] == WANT_ERR, "record: %s" % b)
        check("output_events" not in b, "internal field in the view")
    finally:
        e.stop()


def case_quiet_stream_heartbeat_outlives_request_timeout():
    e = started("server:\n  request_timeout_s: 5\n")
    try:
        eid = submit(e, "import time\ntime.sleep(17)\nprint('done')\n")
        st = Stream(e, eid, timeout=60)
        t0 = time.time()
        evs = read_all(st)
        st.close()
        check(st.comments >= 1, "no heartbeat in %.1f s" % (time.time() - t0))
        check(evs and evs[-1]["event"] == "status" and evs[-1]["data"]["status"] == "succeeded",
              "stream cut before the end: %s" % evs)
        check(any(x["event"] == "stdout" and x["data"]["data"] == "done\n" for x in evs), "output: %s" % evs)
    finally:
        e.stop()



def post_raw(e, body):
    c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=30)
    c.request("POST", "/v1/sandbox/executions", body=json.dumps(body),
              headers={"Authorization": "Bearer " + e.key, "Content-Type": "application/json",
                       "Accept-Language": "fr"})
    r = c.getresponse()
    raw = r.read()
    c.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), json.loads(raw or b"null")


def restart_and_get(e, eid):
    e.start(ready_path="/healthz", timeout=60)
    st, b = e.api("GET", "/v1/sandbox/executions/" + eid)
    check(st == 200, "GET after restart: %s %s" % (st, b))
    return b


def case_drain_lets_running_execution_end():
    e = started()
    try:
        eid = submit(e, "import time\nprint('start')\ntime.sleep(3)\nprint('end')\n")
        wait_status(e, eid, "running")
        stream = Stream(e, eid, timeout=60)
        first = stream.next()
        check(first and first["event"] == "status", "stream start: %s" % first)
        t0 = time.time()
        os.kill(e.proc.pid, signal.SIGTERM)
        time.sleep(0.3)
        check(e.proc.poll() is None, "eaid exited at once: %s" % e.log_tail())
        st, hdr, b = post_raw(e, {"profile": "gvisor-small", "image": IMAGE, "command": ["true"]})
        check(st == 503 and b["error"]["code"] == "shutting_down", "POST during drain: %s %s" % (st, b))
        check("retry-after" in hdr, "no Retry-After: %s" % hdr)
        check(hdr.get("content-language") == "fr" and b["error"]["message"] == b["error"]["message_i18n"]["fr"],
              "French message: %s" % b)
        st, raw = raw_get(e, "/readyz")
        ready = json.loads(raw)
        check(st == 503 and ready.get("status") == "draining", "readyz during drain: %s %s" % (st, ready))
        evs = read_all(stream)
        check(evs and evs[-1]["event"] == "status" and evs[-1]["data"]["status"] == "succeeded",
              "stream during drain: %s" % evs)
        e.proc.wait(timeout=30)
        took = time.time() - t0
        check(took < 20, "eaid took %.1f s to stop after the run ended" % took)
        check("drain: no execution running here any more" in e.log_text(), "log: %s" % e.log_tail())
        b = restart_and_get(e, eid)
        check(b["status"] == "succeeded" and b["stdout"] == "start\nend\n", "after the drain: %s" % b)
    finally:
        e.stop()


def case_drain_deadline_ends_the_rest():
    e = started("server:\n  drain_s: 2\n")
    try:
        eid = submit(e, "import time\nprint('start')\ntime.sleep(60)\n")
        wait_status(e, eid, "running")
        t0 = time.time()
        os.kill(e.proc.pid, signal.SIGTERM)
        e.proc.wait(timeout=30)
        took = time.time() - t0
        check(1.5 < took < 15, "stopped after %.1f s (drain_s 2)" % took)
        b = restart_and_get(e, eid)
        check(b["status"] == "error" and b["error"]["code"] == "interrupted", "after the deadline: %s" % b)
    finally:
        e.stop()


def main():
    ensure_image()
    run_cases([(n, f) for n, f in sorted(globals().items()) if n.startswith("case_")])


if __name__ == "__main__":
    main()
