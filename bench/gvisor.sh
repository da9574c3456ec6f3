#!/usr/bin/env bash
# gVisor overhead benchmark (not a CI test; run as root on an idle machine).
#
#   EAI_BUILD_DIR=build bench/gvisor.sh [samples]
#
# Compares, for `python3 -c 'print(2+2)'` in the python:3.11-slim image:
#   raw:  `runsc run` of an identical bundle (same image, user, limits, rlimits)
#   eaid: POST /v1/sandbox/executions until the execution is terminal
#         (long-poll GET ?wait_s=), through a real `eaid serve` on loopback,
# with 30+ interleaved samples each, then throughput (executions/s) of both at
# concurrency 1 and 4.  The last line is exactly:
#   overhead_p50=<eaid p50 / raw p50> overhead_p90=<...> throughput_ratio_c4=<eaid/raw at c4>
set -euo pipefail

BUILD=${EAI_BUILD_DIR:-build}
BUILD=$(cd "$BUILD" && pwd)
SAMPLES=${1:-30}
[ "$SAMPLES" -ge 30 ] || SAMPLES=30
RUNSC=${EAI_SANDBOX_RUNSC:-$(command -v runsc)}
IMAGE=python:3.11-slim
IMAGES=${EAI_IMAGE_DIR:-$BUILD/images}
EAID=$BUILD/eaid
[ -x "$EAID" ] || { echo "bench: $EAID not built" >&2; exit 1; }
[ -x "$RUNSC" ] || { echo "bench: runsc not found" >&2; exit 1; }

work=$(mktemp -d /tmp/eai-bench-XXXXXX)
. "$(dirname "$0")/lib.sh"
cleanup() {
  bench_stop
  rm -rf "$work"
}
trap cleanup EXIT

if ! ls "$IMAGES/python/3.11-slim/rootfs" >/dev/null 2>&1; then
  EAI_IMAGE_DIR=$IMAGES "$EAID" images build "$IMAGE" --packages python3-minimal,libpython3.11-stdlib >&2
fi

start_eaid main   # eaid's defaults (warm pool included)

PYTHONPATH="$BENCH_DIR" python3 - "$RUNSC" "$IMAGES/python/3.11-slim/rootfs" "$work" "$port_main" "$key_main" "$SAMPLES" <<'PY'
import json, os, statistics, subprocess, sys, threading, time
from benchlib import bundle as raw_bundle, connect as connect_to, pct, raw_argv, wait_ready
runsc, rootfs, work, port, key, samples = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
CMD = ["python3", "-c", "print(2+2)"]
state = os.path.join(work, "raw-state")
os.makedirs(state, exist_ok=True)

def bundle(i):
    return raw_bundle(work, i, rootfs, CMD)

seq = [0]
lock = threading.Lock()
def raw_once(b):
    with lock:
        seq[0] += 1
        cid = "bench-%d-%d" % (os.getpid(), seq[0])
    t = time.monotonic()
    out = subprocess.run(raw_argv(runsc, state) + ["run", "--bundle", b, cid],
                         stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    dt = time.monotonic() - t
    assert out.returncode == 0 and out.stdout == b"4\n", out
    return dt

HDR = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
BODY = json.dumps({"profile": "gvisor", "image": "python:3.11-slim", "command": CMD,
                   "limits": {"cpu": "1", "memory": "256Mi", "timeout_s": 30}})
def eaid_once(conn):
    t = time.monotonic()
    conn.request("POST", "/v1/sandbox/executions", BODY, HDR)
    r = conn.getresponse(); body = json.loads(r.read())
    assert r.status in (200, 201, 202), (r.status, body)
    eid = body["id"]
    while True:
        conn.request("GET", "/v1/sandbox/executions/%s?wait_s=30" % eid, headers=HDR)
        r = conn.getresponse(); body = json.loads(r.read())
        if body.get("status") not in ("queued", "running"):
            break
    dt = time.monotonic() - t
    assert body["status"] == "succeeded" and body.get("stdout") == "4\n", body
    return dt

def connect():
    return connect_to(port)

wait_ready(port)
conn = connect()
b0 = bundle(0)
raw_once(b0); eaid_once(conn)  # warm caches
raw, eai = [], []
for i in range(samples):  # interleaved
    raw.append(raw_once(b0))
    eai.append(eaid_once(conn))

def throughput(fn, conc, n):
    done = [0]; errs = []
    def worker(k):
        arg = bundle(k + 1) if fn is raw_once else connect()
        while True:
            with lock:
                if done[0] >= n: return
                done[0] += 1
            try: fn(arg)
            except Exception as e: errs.append(e)
    t = time.monotonic()
    th = [threading.Thread(target=worker, args=(k,)) for k in range(conc)]
    [x.start() for x in th]; [x.join() for x in th]
    if errs: raise SystemExit("errors: %r" % errs[:3])
    return n / (time.monotonic() - t)

res = {}
for c in (1, 4):
    res[("raw", c)] = throughput(raw_once, c, 8 * c)
    res[("eaid", c)] = throughput(eaid_once, c, 8 * c)
print("raw  p50=%.1fms p90=%.1fms" % (1000 * pct(raw, 50), 1000 * pct(raw, 90)))
print("eaid p50=%.1fms p90=%.1fms" % (1000 * pct(eai, 50), 1000 * pct(eai, 90)))
for c in (1, 4):
    print("throughput c%d: raw=%.2f/s eaid=%.2f/s" % (c, res[("raw", c)], res[("eaid", c)]))
print("overhead_p50=%.3f overhead_p90=%.3f throughput_ratio_c4=%.3f" % (
    pct(eai, 50) / pct(raw, 50), pct(eai, 90) / pct(raw, 90), res[("eaid", 4)] / res[("raw", 4)]))
PY
