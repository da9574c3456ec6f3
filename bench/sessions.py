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
until answered).  Then (issue 31 item 8), on a second eaid:
  resume-on-call: a session with idle_timeout_s 1 paused by its idle timer
          (auto_pause), then the same execution posted to it: the wall time
          of POST + long-poll, restore included (10 samples, or samples/3);
  checkpoint: the size of its checkpoint image on disk while paused (du),
          with a python3 left running in it holding a list of 10^6 ints;
  50 in turn: N sessions (argv[2], default 50) created and paused one
          after the other, then each resumed (POST .../resume until
          answered), its program run and paused again: the resumes'
          p50/p99 and the whole round's time.
The last line is exactly:
  single_p50_ms=<> single_p90_ms=<> session_p50_ms=<> session_p90_ms=<> speedup_p50=<single/session>
  pause_p50_ms=<> resume_p50_ms=<> resume_on_call_p50_ms=<> resume_on_call_p99_ms=<> checkpoint_mb=<>
  turn_n=<> turn_resume_p50_ms=<> turn_resume_p99_ms=<> turn_total_s=<>
"""
import glob
import subprocess
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
    on_call, ckpt_mb, turn, turn_s = idle_and_turns(max(samples // 3, 10),
                                                    int(sys.argv[2]) if len(sys.argv) > 2 else 50)
    for name, v in (("single", single), ("session", session), ("pause", pauses), ("resume", resumes),
                    ("on_call", on_call), ("turn", turn)):
        print("%-8s n=%d p50=%.1f ms p90=%.1f ms mean=%.1f ms min=%.1f ms max=%.1f ms"
              % (name, len(v), pct(v, 50), pct(v, 90), statistics.mean(v), min(v), max(v)))
    print("single_p50_ms=%.1f single_p90_ms=%.1f session_p50_ms=%.1f session_p90_ms=%.1f speedup_p50=%.2f"
          " pause_p50_ms=%.1f resume_p50_ms=%.1f"
          " resume_on_call_p50_ms=%.1f resume_on_call_p99_ms=%.1f checkpoint_mb=%.1f"
          " turn_n=%d turn_resume_p50_ms=%.1f turn_resume_p99_ms=%.1f turn_total_s=%.1f"
          % (pct(single, 50), pct(single, 90), pct(session, 50), pct(session, 90),
             pct(single, 50) / pct(session, 50), pct(pauses, 50), pct(resumes, 50),
             pct(on_call, 50), pct(on_call, 99), ckpt_mb, len(turn), pct(turn, 50), pct(turn, 99), turn_s))


def wait_status(e, sid, want, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        st, b = e.api("GET", "/v1/sandbox/sessions/" + sid)
        check(st == 200, "GET session: %s %s" % (st, b))
        if b["status"] == want:
            return b
        time.sleep(0.1)
    check(False, "session %s not %s in %d s" % (sid, want, timeout))


def idle_and_turns(n_on_call, n_turn):
    """Resume-on-call of an idle-paused session, its checkpoint size, and
    n_turn sessions paused and resumed in turn (a second eaid)."""
    tmp = tempfile.mkdtemp(prefix="eai-bench-sessions2-")
    cfg = os.path.join(tmp, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("sessions:\n  max_per_tenant: %d\n  checkpoint_quota_bytes: 64Gi\n  pause_per_minute: 1000\n"
                "  tenant_pause_per_minute: 100000\n" % (n_turn + 2))
    e = Env(config=cfg, tmp=tmp)
    e.own_tmp = True
    e.make_key("bench2")
    e.start()
    on_call, turn, ckpt_mb, total = [], [], 0.0, 0.0
    made = []
    try:
        st, s = e.api("POST", "/v1/sandbox/sessions", {"profile": PROFILE, "image": IMAGE, "idle_timeout_s": 1},
                      timeout=60)
        check(st == 201, "create: %s %s" % (st, s))
        made.append(s["id"])
        spath = "/v1/sandbox/sessions/%s/executions" % s["id"]
        timed(e, spath, {"command": CMD})
        # a small Python session: an interpreter left running with some state
        st, b = e.api("POST", spath, {"command": ["sh", "-c", "nohup python3 -c 'import time; x = list(range(10**6));"
                                                         " time.sleep(10**6)' >/dev/null 2>&1 &"]})
        check(st == 202, "background python: %s %s" % (st, b))
        e.wait_terminal(b["id"], timeout=60)
        for i in range(n_on_call):
            b = wait_status(e, s["id"], "paused")
            check(b["paused_by"] == "idle", "paused by its idle timer: %s" % b)
            if i == 0:
                out = subprocess.run(["du", "-sk"] + glob.glob(os.path.join(e.data, "gvisor", "work", "eai-ses-*",
                                                                             "ckpt")),
                                     capture_output=True, text=True).stdout.split()
                ckpt_mb = sum(int(x) for x in out[0::2]) / 1024.0 if out else 0.0
            on_call.append(timed(e, spath, {"command": CMD}))
        # n_turn sessions, one after the other, each paused at once
        for i in range(n_turn):
            st, b = e.api("POST", "/v1/sandbox/sessions", {"profile": PROFILE, "image": IMAGE, "idle_timeout_s": 3600,
                                                           "limits": {"memory": "128Mi"}}, timeout=90)
            check(st == 201, "create %d: %s %s" % (i, st, b))
            made.append(b["id"])
            st, b = e.api("POST", "/v1/sandbox/sessions/%s/pause" % made[-1], timeout=90)
            check(st == 200, "pause %d: %s %s" % (i, st, b))
        t0 = time.monotonic()
        for sid in made[1:]:
            t1 = time.monotonic()
            st, b = e.api("POST", "/v1/sandbox/sessions/%s/resume" % sid, timeout=90)
            check(st == 200 and b["status"] == "running", "resume: %s %s" % (st, b))
            turn.append((time.monotonic() - t1) * 1000)
            timed(e, "/v1/sandbox/sessions/%s/executions" % sid, {"command": CMD})
            st, b = e.api("POST", "/v1/sandbox/sessions/%s/pause" % sid, timeout=90)
            check(st == 200, "pause again: %s %s" % (st, b))
        total = time.monotonic() - t0
        for sid in made:
            e.api("DELETE", "/v1/sandbox/sessions/" + sid, timeout=90)
    finally:
        e.stop()
    return on_call, ckpt_mb, turn, total


if __name__ == "__main__":
    main()
