#!/usr/bin/env bash
# A syscall-heavy program through eaid against the same program on the host
# (issue 29, item 5; not a CI test: run as root on an idle machine).
#
#   EAI_BUILD_DIR=build EAI_IMAGE_DIR=/path/to/images EAI_SANDBOX_RUNSC=/path/to/runsc \
#     bench/syscall_heavy.sh [samples, default 5]
#
# The program: 100,000 os.getpid() calls and a million multiplications in
# Python, timed inside the program (time.perf_counter around the loop, so a
# sandbox's start is not counted).  "host" runs the image's own python3
# under chroot (the same binary and libraries as in the sandbox); "eaid"
# sends it to an `eaid serve` with the given runsc (platform auto: the probe's
# choice is printed) and the warm pool.  Interleaved, SAMPLES each; the last
# line is
#   syscall_vs_host=<eaid p50 / host p50> platform=<p> host_p50_s=... eaid_p50_s=...
# Bounded: each execution has a 120 s limit.
set -euo pipefail

BUILD=${EAI_BUILD_DIR:-build}
BUILD=$(cd "$BUILD" && pwd)
SAMPLES=${1:-5}
RUNSC=${EAI_SANDBOX_RUNSC:-$(command -v runsc || true)}
IMAGES=${EAI_IMAGE_DIR:-$BUILD/images}
EAID=$BUILD/eaid
ROOTFS=$IMAGES/python/3.11-slim/rootfs
[ -x "$EAID" ] || { echo "bench: $EAID not built" >&2; exit 1; }
[ -x "$RUNSC" ] || { echo "bench: runsc not found" >&2; exit 1; }
[ -x "$ROOTFS/usr/bin/python3" ] || { echo "bench: $ROOTFS/usr/bin/python3 missing" >&2; exit 1; }

work=$(mktemp -d /tmp/eai-syscall-XXXXXX)
. "$(dirname "$0")/lib.sh"
cleanup() { bench_stop; rm -rf "$work"; }
trap cleanup EXIT
start_eaid sys 2

PYTHONPATH="$BENCH_DIR" python3 - "$port_sys" "$key_sys" "$ROOTFS" "$SAMPLES" <<'PY'
import json, subprocess, sys
from benchlib import connect, pct, wait_ready

port, key, rootfs, samples = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
PROG = ("import os, time\n"
        "t = time.perf_counter()\n"
        "for i in range(100000): os.getpid()\n"
        "x = 1\n"
        "for i in range(1000000): x = (x * 3) % 1000003\n"
        "print('%.4f' % (time.perf_counter() - t))\n")
h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
body = json.dumps({"profile": "gvisor", "image": "python:3.11-slim", "command": ["python3", "-c", PROG],
                   "limits": {"cpu": "1", "memory": "256Mi", "timeout_s": 120}})
wait_ready(port)
c = connect(port)
c.request("GET", "/readyz")
plat = json.loads(c.getresponse().read())["checks"]["isolation"]["gvisor"]["version"]


def eaid_once():
    c.request("POST", "/v1/sandbox/executions", body, h)
    r = c.getresponse()
    b = json.loads(r.read())
    assert r.status == 202, b
    for _ in range(8):
        c.request("GET", "/v1/sandbox/executions/%s?wait_s=30" % b["id"], headers=h)
        d = json.loads(c.getresponse().read())
        if d.get("status") not in ("queued", "running"):
            break
    assert d["status"] == "succeeded", d
    return float(d["stdout"])


def host_once():
    out = subprocess.run(["chroot", rootfs, "/usr/bin/python3", "-c", PROG], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    return float(out)


host, eaid = [], []
eaid_once()  # the pool's first shape
for _ in range(samples):
    host.append(host_once())
    eaid.append(eaid_once())
print("host: %s" % " ".join("%.3f" % v for v in host), file=sys.stderr)
print("eaid: %s (%s)" % (" ".join("%.3f" % v for v in eaid), plat), file=sys.stderr)
hp, ep = pct(host, 50), pct(eaid, 50)
print("syscall_vs_host=%.2f platform=%s host_p50_s=%.3f eaid_p50_s=%.3f" % (
    ep / hp, plat.rsplit("platform ", 1)[-1], hp, ep))
PY
