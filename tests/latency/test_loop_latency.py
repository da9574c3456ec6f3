#!/usr/bin/env python3
"""The event loop keeps answering while a run with large collected files ends.

Starts its own `eaid serve` (helpers of tests/e2e/test_acceptance.py), runs one
execution in gVisor that writes three 9.5 MiB files of random bytes into
/tmp/outputs (28.5 MiB, inside the default collect caps: 10 MiB per file,
32 MiB in all), and meanwhile asks GET /healthz back to back on a kept-alive
connection.  Hashing and base64 of the collected files happen on a worker
(core/exec/sched_finish.c finish_work), so every /healthz answer during the
run's end must come within 50 ms.  The files' sizes and sha256 are checked
so the heavy work really happened.  "Meanwhile" is from the program's exit
(started_at + usage.duration_s) less 200 ms to the terminal answer.  On a
noisy shared machine a spike can come from elsewhere (CPU starvation): the
measurement is taken up to ATTEMPTS times and passes when one attempt stays
under the bound, and the loop thread and the prober thread run at nice -10
(per thread: the workers and the sandboxes keep their priority), so other
processes of a loaded machine do not starve them, while a loop blocked by
its own work still shows.  EAI_LATENCY_LOG=1 prints the worst samples and the log.

Until the backend hands its collected buffers over (isolation.h
files_movable), core copies them once on the loop (about 17 ms of CPU for
28.5 MiB here); with the hand-over nothing proportional to the files' size
runs on the loop.

Label gvisor;e2e: needs root, runsc and the python:3.11-slim image.
Last line: `N passed, M failed`.
"""
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "e2e"))
import test_acceptance as ta  # noqa: E402

BOUND_MS = 50.0
FILE_BYTES = 9 * 1024 * 1024 + 512 * 1024
NFILES = 3
ATTEMPTS = 5
PRIORITY = -10   # nice of the prober thread and of eaid's loop thread

CODE = ("import hashlib, os, json\n"
        "os.makedirs('/tmp/outputs', exist_ok=True)\n"
        "h = {}\n"
        "for i in range(%d):\n"
        "    b = os.urandom(%d)\n"
        "    open('/tmp/outputs/big%%d.bin' %% i, 'wb').write(b)\n"
        "    h['/tmp/outputs/big%%d.bin' %% i] = hashlib.sha256(b).hexdigest()\n"
        "print(json.dumps(h))\n") % (NFILES, FILE_BYTES)


class Prober(threading.Thread):
    """GET /healthz back to back; keeps (start time, latency ms, status)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.samples = []
        self.stop = threading.Event()
        self.errors = 0

    def run(self):
        # this thread only (Linux nice is per thread): the client's own
        # starvation is not the loop's latency
        try:
            os.setpriority(os.PRIO_PROCESS, 0, PRIORITY)
        except OSError:
            pass
        c = None
        while not self.stop.is_set():
            try:
                if c is None:
                    c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                w0 = time.time()
                t0 = time.monotonic()
                c.request("GET", "/healthz")
                r = c.getresponse()
                r.read()
                dt = (time.monotonic() - t0) * 1000.0
                self.samples.append((t0, dt, r.status, w0))
            except (OSError, http.client.HTTPException):
                self.errors += 1
                if c is not None:
                    c.close()
                c = None
            time.sleep(0.002)
        if c is not None:
            c.close()


def attempt(cli, srv):
    p = Prober(srv.port)
    p.start()
    time.sleep(0.3)
    t_post = time.monotonic()
    d = cli.py(CODE, limit=180)
    t_end = time.monotonic()
    time.sleep(0.3)
    p.stop.set()
    p.join(10)
    ta.check(d["status"] == "succeeded", "run: %s" % ta.short(d))
    want = json.loads(ta.out(d).decode())
    files = {f["path"]: f for f in d.get("files") or []}
    ta.check(not d.get("files_truncated"), "files_truncated set: %r" % list(files))
    for path, sha in want.items():
        f = files.get(path)
        ta.check(f and f["size"] == FILE_BYTES and f["sha256"] == sha, "%s: %r" % (path, f))
    r = cli.req("GET", "/v1/sandbox/executions/%s/files/tmp/outputs/big0.bin" % d["id"], timeout=60)
    ta.check(r.status == 200 and len(r.body) == FILE_BYTES, "GET big0.bin: HTTP %d, %d bytes" % (r.status, len(r.body)))
    # "meanwhile": from the program's exit (started_at + duration, server
    # clock = this machine's clock) less 200 ms, to the terminal answer:
    # collection, hashing, base64, storage.  The sandbox's start is the
    # backend's business, not measured here.
    exit_wall = ta.parse_ts(d["started_at"]) + float(d["usage"]["duration_s"])
    window = [s for s in p.samples if s[3] >= exit_wall - 0.2 and t_post <= s[0] <= t_end]
    ta.check(len(window) >= 10, "only %d /healthz samples while the end was recorded" % len(window))
    ta.check(all(s[2] == 200 for s in window), "a /healthz answer was not 200")
    if os.environ.get("EAI_LATENCY_LOG"):
        top = sorted(window, key=lambda s: -s[1])[:6]
        print("  spikes (ms after POST, ms before end, latency):",
              ", ".join("%.0f/%.0f/%.0f" % ((s[0] - t_post) * 1e3, (t_end - s[0]) * 1e3, s[1]) for s in top),
              "window %.0f ms" % ((t_end - min(s[0] for s in window)) * 1e3) if window else "")
    lat = sorted(s[1] for s in window)
    worst = lat[-1]
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return worst, p99, len(window), p.errors


def main():
    if os.geteuid() != 0:
        print("needs root (gVisor backend)\n0 passed, 1 failed")
        return 1
    try:
        ta.ensure_image()
    except ta.Fail as e:
        print("image: %s\n0 passed, 1 failed" % e)
        return 1
    srv = ta.Server()
    ok = False
    try:
        srv.start()
        # eaid's main thread is the loop; its pid is its thread id, so this
        # raises the loop alone, not the workers or the sandboxes: CPU
        # starvation by the other tenants of a shared machine is taken out,
        # a loop blocked by its own work is not.
        os.setpriority(os.PRIO_PROCESS, srv.proc.pid, PRIORITY)
        t = json.loads(srv.cli("tenants", "create", "latency").stdout)
        key = srv.cli("keys", "create", "--tenant", t["id"]).stdout.decode().strip()
        cli = ta.Client(srv, key)
        for i in range(ATTEMPTS):
            worst, p99, n, errs = attempt(cli, srv)
            print("attempt %d: %d /healthz answers while the end was recorded, max %.1f ms, p99 %.1f ms, %d errors"
                  % (i + 1, n, worst, p99, errs), flush=True)
            if worst < BOUND_MS and errs == 0:
                ok = True
                break
    except ta.Fail as e:
        print("FAIL: %s\n--- eaid log tail\n%s" % (e, srv.log_tail(30)))
    finally:
        try:
            srv.stop()
        except ta.Fail as e:
            print("stop: %s" % e)
    print("loop latency under %.0f ms while 28.5 MiB of collected files are recorded: %s"
          % (BOUND_MS, "yes" if ok else "NO"))
    if os.environ.get("EAI_LATENCY_LOG"):
        print(srv.log_tail(400))
    print("%d passed, %d failed" % (1 if ok else 0, 0 if ok else 1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
