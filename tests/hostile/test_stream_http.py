#!/usr/bin/env python3
"""The event stream of an execution (issue 17 items 2 and 3) on the script
test double (eai-isolation-script.so, no sandbox runtime): every event has an
increasing id; one write arriving in one-byte chunks is one event (25 ms
coalescing); the stdout/stderr order is kept live and after the end; a
reconnect with Last-Event-ID resumes exactly after it (live and after the
end); 204 once every event was seen; GET of a running execution shows its
output so far; a quiet stream gets `: ping` and outlives
server.request_timeout_s."""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, run_cases  # noqa: E402
from test_streams import Stream, out_bytes, raw_get, read_all  # noqa: E402

PDIR = os.environ.get("EAI_HOSTILE_PLUGIN_DIR") or os.path.join(
    os.environ.get("EAI_BUILD_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../build"),
    "tests", "hostile-plugins")


def started(extra=""):
    tmp = tempfile.mkdtemp(prefix="eai-sse-")
    cfg = os.path.join(tmp, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("plugins:\n  dir: %s\n"
                "isolation:\n  script: {}\n"
                "profiles:\n  sc:\n    backend: script\n    runtime_class: none\n"
                "    defaults: {cpu: 250m, memory: 64Mi, timeout_s: 60}\n"
                "    max: {cpu: 500m, memory: 128Mi, timeout_s: 60}\n%s" % (PDIR, extra))
    e = Env(config=cfg, tmp=tmp)
    e.own_tmp = True
    e.make_key()
    e.start(ready_path="/readyz", timeout=60)
    return e


def submit(e, script):
    st, r = e.api("POST", "/v1/sandbox/executions", {"profile": "sc", "image": "any:1", "command": script})
    check(st == 202, "submit: %s %s" % (st, r))
    return r["id"]


SCRIPT = []
for i in range(6):
    SCRIPT += ["o:out%d" % i, "s:60", "e:err%d" % i, "s:60"]
SCRIPT += ["O:coalesced", "s:1500", "o:last", "x:3"]
WANT = [x for i in range(6) for x in ("out%d\n" % i, "err%d\n" % i)] + ["coalesced", "last\n"]


def case_ids_order_resume():
    e = started()
    try:
        eid = submit(e, SCRIPT)
        s1 = Stream(e, eid)
        first = []
        while sum(1 for x in first if x["event"] != "status") < 5:
            ev = s1.next()
            check(ev is not None, "ended early: %s" % first)
            first.append(ev)
        s1.close()
        last = int(first[-1]["id"])
        rest = read_all(Stream(e, eid, last_id=last))
        check(rest and int(rest[0]["id"]) == last + 1, "resumed at %s, not after %d" % (rest[:1], last))
        live = first + rest
        ids = [int(x["id"]) for x in live]
        check(ids == sorted(set(ids)), "ids not increasing: %s" % ids)
        outs = [x for x in live if x["event"] != "status"]
        got = [out_bytes(x).decode() for x in outs]
        check(got == WANT, "events (order, coalescing): %s" % got)
        check([x["event"] for x in outs[:4]] == ["stdout", "stderr", "stdout", "stderr"], "streams: %s" % outs[:4])
        end = live[-1]
        check(end["event"] == "status" and end["data"]["status"] == "failed" and end["data"]["exit_code"] == 3,
              "end: %s" % end)
        check(int(end["id"]) == int(outs[-1]["id"]) + 1 and int(outs[0]["id"]) == 2, "ids: %s" % ids)
        replay = read_all(Stream(e, eid))
        check([(x["id"], x["event"], x["data"]) for x in replay] ==
              [(x["id"], x["event"], x["data"]) for x in outs + [end]], "replay:\n%s\n%s" % (replay, outs))
        tail = read_all(Stream(e, eid, last_id=outs[3]["id"]))
        check([x["id"] for x in tail] == [x["id"] for x in outs[4:] + [end]], "resume after the end: %s" % tail)
        st, body = raw_get(e, "/v1/sandbox/executions/%s/events?last_event_id=%s" % (eid, end["id"]))
        check(st == 204 and body == b"", "all seen (query): %s %r" % (st, body))
        st, body = raw_get(e, "/v1/sandbox/executions/%s/events" % eid, {"Last-Event-ID": "junk"})
        check(st == 200 and body.count(b"\nid: ") + body.startswith(b"id: ") == len(replay),
              "malformed id = from the start: %s %r" % (st, body[:200]))
    finally:
        e.stop()


def case_get_running_shows_output():
    e = started()
    try:
        eid = submit(e, ["o:hello", "e:oops", "s:3000", "o:bye"])
        deadline = time.time() + 5
        b = {}
        while time.time() < deadline:
            st, b = e.api("GET", "/v1/sandbox/executions/" + eid)
            if b.get("stdout") and b.get("stderr"):
                break
            time.sleep(0.05)
        check(b.get("status") == "running" and b["stdout"] == "hello\n" and b["stderr"] == "oops\n",
              "GET while running: %s" % b)
        st, b = e.api("GET", "/v1/sandbox/executions/%s?wait_s=10" % eid)
        check(b["status"] == "succeeded" and b["stdout"] == "hello\nbye\n", "end: %s" % b)
    finally:
        e.stop()


def case_quiet_stream_pings_past_request_timeout():
    e = started("server:\n  request_timeout_s: 2\n")
    try:
        eid = submit(e, ["s:16000", "o:done"])
        st = Stream(e, eid, timeout=40)
        evs = read_all(st)
        check(st.comments >= 1, "no heartbeat")
        check(evs and evs[-1]["data"]["status"] == "succeeded", "cut before the end: %s" % evs)
        check(evs[-2]["event"] == "stdout" and evs[-2]["data"]["data"] == "done\n", "output: %s" % evs)
    finally:
        e.stop()


if __name__ == "__main__":
    run_cases([(n, f) for n, f in sorted(globals().items()) if n.startswith("case_")])
