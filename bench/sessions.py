#!/usr/bin/env python3
"""Session call against warm single-use execution (issue 18 item 8), in one
run, through a real `eaid serve` on loopback with real runsc (not a CI test).

    EAI_BUILD_DIR=build EAI_IMAGE_DIR=/path/to/images python3 bench/sessions.py [samples]

For `python3 -c 'print(2+2)'` in python:3.11-slim, interleaved samples of
  single: POST /v1/sandbox/executions (the gVisor warm pool on: a pre-booted
          sandbox when one is ready) until terminal (long-poll ?wait_s=)
  session: POST /v1/sandbox/sessions/{id}/executions in one live session
          until terminal, same long-poll
each sample the wall time of POST + long-poll; a pause between samples lets
the warm pool refill (so `single` is the warm case, not a cold boot).
then 10 pause / resume cycles of the session (POST .../pause, .../resume
until answered).  The last line is exactly:
  single_p50_ms=<> single_p90_ms=<> session_p50_ms=<> session_p90_ms=<> speedup_p50=<single/session>
  pause_p50_ms=<> resume_p50_ms=<>
"""
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "hostile"))
from eaid_env import Env, check, ensure_image  # noqa: E402

PROFILE = "gvisor-small"
IMAGE = "python:3.11-slim"
CMD = ["python3", "-c", "print(2+2)"]


def timed(e, path, body):
    t0 = time.monotonic()
    st, b = e.api("POST", path, body)
    check(st == 202, "POST %s: %s %s" % (path, st, b))
    while True:
        st, r = e.api("GET", "/v1/sandbox/executions/%s?wait_s=30" % b["id"], timeout=40)
        check(st == 200, "GET: %s %s" % (st, r))
        if r["status"] not in ("queued", "running"):
            break
    ms = (time.monotonic() - t0) * 1000
    check(r["status"] == "succeeded" and r["stdout"] == "4\n", "result: %s" % r)
    return ms


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def main():
    samples = max(int(sys.argv[1]) if len(sys.argv) > 1 else 30, 10)
    ensure_image()
    tmp = tempfile.mkdtemp(prefix="eai-bench-sessions-")
    e = Env(tmp=tmp)
    e.own_tmp = True
    e.make_key("bench")
    e.start()
    try:
        st, s = e.api("POST", "/v1/sandbox/sessions", {"profile": PROFILE, "image": IMAGE, "idle_timeout_s": 600},
                      timeout=60)
        check(st == 201, "create session: %s %s" % (st, s))
        spath = "/v1/sandbox/sessions/%s/executions" % s["id"]
        single_body = {"profile": PROFILE, "image": IMAGE, "command": CMD}
        # warm-up: fill the pool for this shape, first session call
        timed(e, "/v1/sandbox/executions", single_body)
        timed(e, spath, {"command": CMD})
        time.sleep(2)
        single, session = [], []
        for i in range(samples):
            session.append(timed(e, spath, {"command": CMD}))
            single.append(timed(e, "/v1/sandbox/executions", single_body))
            time.sleep(1.0)  # the pool boots its replacement with spare CPU
        # pause (runsc checkpoint) and resume (runsc restore) of the live session
        pauses, resumes = [], []
        for i in range(10):
            t0 = time.monotonic()
            st, b = e.api("POST", "/v1/sandbox/sessions/%s/pause" % s["id"], timeout=60)
            check(st == 200 and b["status"] == "paused", "pause: %s %s" % (st, b))
            pauses.append((time.monotonic() - t0) * 1000)
            t0 = time.monotonic()
            st, b = e.api("POST", "/v1/sandbox/sessions/%s/resume" % s["id"], timeout=60)
            check(st == 200 and b["status"] == "running", "resume: %s %s" % (st, b))
            resumes.append((time.monotonic() - t0) * 1000)
        timed(e, spath, {"command": CMD})
        e.api("DELETE", "/v1/sandbox/sessions/" + s["id"], timeout=60)
    finally:
        e.stop()
    for name, v in (("single", single), ("session", session), ("pause", pauses), ("resume", resumes)):
        print("%-8s n=%d p50=%.1f ms p90=%.1f ms mean=%.1f ms min=%.1f ms max=%.1f ms"
              % (name, len(v), pct(v, 50), pct(v, 90), statistics.mean(v), min(v), max(v)))
    print("single_p50_ms=%.1f single_p90_ms=%.1f session_p50_ms=%.1f session_p90_ms=%.1f speedup_p50=%.2f"
          " pause_p50_ms=%.1f resume_p50_ms=%.1f"
          % (pct(single, 50), pct(single, 90), pct(session, 50), pct(session, 90),
             pct(single, 50) / pct(session, 50), pct(pauses, 50), pct(resumes, 50)))


if __name__ == "__main__":
    main()
