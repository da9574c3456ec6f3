#!/usr/bin/env python3
"""Streamed stdin round trip (issue 34 item 5), through a real `eaid serve` on
loopback with real runsc (not a CI test; the test is tests/e2e/test_stdin.py).

    EAI_BUILD_DIR=build EAI_IMAGE_DIR=/path/to/images python3 bench/stdin_rtt.py [lines] [cold]

One execution of python:3.11-slim started with "stdin_mode": "stream" runs a
`print('echo:' + input())` loop; each sample is the wall time from sending
one line (POST /v1/sandbox/executions/{id}/stdin, raw bytes) to its answer
arriving on the execution's event stream (GET .../events).  Lines go one at
a time (the next after the answer).  `cold`: eaid with isolation.gvisor.pool
0 (the program's stdin is runsc's pipe, not the warm launcher's socket).
The event stream gathers output for 25 ms per event (docs/executions.md),
which is most of the figure.  The last line is exactly:
  stdin_rtt_p50_ms=<> stdin_rtt_p90_ms=<> stdin_rtt_p99_ms=<> lines=<n> mode=<warm|cold>
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "e2e"))
import test_stdin as t  # noqa: E402


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    n = max(1, min(n, 5000))
    cold = len(sys.argv) > 2 and sys.argv[2] == "cold"
    env = t.Env(0 if cold else None)
    try:
        env.start()
        body = {"profile": t.PROFILE, "image": t.IMAGE, "command": ["python3", "-u", "-c", t.ECHO],
                "stdin_mode": "stream", "limits": {"timeout_s": 60}}
        st, j, _ = env.call("POST", "/v1/sandbox/executions", body)
        t.check(st == 202, "submit: %s %s" % (st, j))
        xid = j["id"]
        ev = t.Events(env, xid)
        # the first line waits for the start (stdin_busy retried): not a sample
        env.stdin(xid, b"warm\n")
        pos = ev.wait_for("echo:warm\n", 0, timeout=60)
        rtt = []
        deadline = time.time() + 50
        for i in range(n):
            if time.time() > deadline:
                break
            line = "l%d\n" % i
            t0 = time.monotonic()
            st, j, _ = env.stdin(xid, line.encode())
            t.check(st == 200, "write: %s %s" % (st, j))
            pos = ev.wait_for("echo:" + line, pos)
            rtt.append((time.monotonic() - t0) * 1000)
        env.stdin(xid, b"", eof=True)
        rec = env.wait(xid)
        ev.close()
        t.check(rec["status"] == "succeeded", "end: %s" % rec["status"])
        print("stdin_rtt_p50_ms=%.1f stdin_rtt_p90_ms=%.1f stdin_rtt_p99_ms=%.1f lines=%d mode=%s"
              % (t.pct(rtt, 50), t.pct(rtt, 90), t.pct(rtt, 99), len(rtt), "cold" if cold else "warm"))
    finally:
        env.stop()


if __name__ == "__main__":
    main()
