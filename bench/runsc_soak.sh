#!/usr/bin/env bash
# Soak of a runsc under exec load, before it becomes the default (issue 29,
# item 3; not a CI test: run as root, ideally on an idle machine).
#
#   EAI_BUILD_DIR=build EAI_IMAGE_DIR=/path/to/images EAI_SANDBOX_RUNSC=/path/to/runsc \
#     bench/runsc_soak.sh [warm, default 2000] [cold, default 200] [clients, default 2]
#
# Starts two `eaid serve` on loopback with that runsc and `platform: auto`
# (the probe's choice is printed): one with the warm pool (pool 2, the
# launcher), one with pool 0 (every run a cold `runsc run`).  Sends WARM
# then COLD executions of `python3 -c 'print(2+2)'` in python:3.11-slim from
# CLIENTS threads; every one must succeed and print 4.  runsc runs through a
# wrapper that adds `--panic-log=<work>/panic/%ID%...` (a sentry's Go panic
# and runtime messages land there) and every eaid log line is kept: at the
# end both are scanned for "panic" (the failure Debian's 0.0~20240729 runsc
# showed after 6 to 12 execs).  The last line is
#   soak: ok platform=<p> warm=<n> cold=<n> warm_p50_ms=... warm_p99_ms=... cold_p50_ms=... panics=0
# or `soak: FAILED ...`, and the exit status says the same.  Bounded: each
# execution has a 30 s limit, each wait at most 60 s, the whole run at most
# SOAK_MAX_S (3600) seconds.
set -euo pipefail

BUILD=${EAI_BUILD_DIR:-build}
BUILD=$(cd "$BUILD" && pwd)
WARM=${1:-2000}
COLD=${2:-200}
CLIENTS=${3:-2}
REAL_RUNSC=${EAI_SANDBOX_RUNSC:-$(command -v runsc || true)}
IMAGES=${EAI_IMAGE_DIR:-$BUILD/images}
EAID=$BUILD/eaid
[ -x "$EAID" ] || { echo "soak: $EAID not built" >&2; exit 1; }
[ -x "$REAL_RUNSC" ] || { echo "soak: runsc not found (EAI_SANDBOX_RUNSC)" >&2; exit 1; }
ls "$IMAGES/python/3.11-slim/rootfs" >/dev/null 2>&1 ||
  { echo "soak: image python:3.11-slim missing in $IMAGES (eaid images build python:3.11-slim)" >&2; exit 1; }

work=$(mktemp -d /tmp/eai-runsc-soak-XXXXXX)
chmod 0755 "$work"
mkdir -p "$work/panic"
# the wrapper: runsc's own flags first, eaid's after (runsc reads them all)
cat >"$work/runsc" <<EOF
#!/bin/sh
exec '$REAL_RUNSC' --panic-log='$work/panic/runsc-%ID%-%COMMAND%.log' "\$@"
EOF
chmod 0755 "$work/runsc"
RUNSC=$work/runsc
. "$(dirname "$0")/lib.sh"
cleanup() {
  bench_stop
  if [ -n "${SOAK_KEEP:-}" ]; then echo "soak: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

echo "soak: $("$REAL_RUNSC" --version | head -1), $WARM warm + $COLD cold, $CLIENTS clients" >&2
start_eaid warm 2 "$(printf 'scheduler:\n  max_concurrent: 8\n  max_per_tenant: 8\n')"
start_eaid cold 0 "$(printf 'scheduler:\n  max_concurrent: 8\n  max_per_tenant: 8\n')"

PYTHONPATH="$BENCH_DIR" timeout "${SOAK_MAX_S:-3600}" python3 - "$port_warm" "$key_warm" "$port_cold" "$key_cold" \
  "$WARM" "$COLD" "$CLIENTS" "$work" <<'PY'
import glob, json, os, sys, threading, time
from benchlib import connect, pct, wait_ready, WARM_BODY

pw, kw, pc, kc, nwarm, ncold, nclients, work = sys.argv[1:9]
nwarm, ncold, nclients = int(nwarm), int(ncold), int(nclients)


def platform(port):
    c = connect(port)
    c.request("GET", "/readyz")
    d = json.loads(c.getresponse().read())
    return d["checks"]["isolation"]["gvisor"]["version"]


def drive(port, key, n):
    """n executions from nclients threads; (client times, failures)."""
    h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    times, bad, lock = [], [], threading.Lock()
    left = [n]

    def client():
        c = connect(port)
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            t0 = time.monotonic()
            try:
                c.request("POST", "/v1/sandbox/executions", WARM_BODY, h)
                r = c.getresponse()
                b = json.loads(r.read())
                if r.status != 202:
                    raise AssertionError((r.status, b))
                d = {}
                for _ in range(3):  # wait_s 30: at most ~60 s for a 30 s limit
                    c.request("GET", "/v1/sandbox/executions/%s?wait_s=30" % b["id"], headers=h)
                    d = json.loads(c.getresponse().read())
                    if d.get("status") not in ("queued", "running"):
                        break
                if d.get("status") != "succeeded" or d.get("stdout") != "4\n":
                    raise AssertionError({k: d.get(k) for k in ("id", "status", "exit_code", "error", "stdout", "stderr")})
                with lock:
                    times.append(time.monotonic() - t0)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                with lock:
                    bad.append(repr(e)[:400])
                c = connect(port)

    ts = [threading.Thread(target=client) for _ in range(nclients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return times, bad


wait_ready(pw)
wait_ready(pc)
plat = platform(pw)
print("soak: backend: %s" % plat, file=sys.stderr)
t0 = time.monotonic()
wt, wbad = drive(pw, kw, nwarm)
print("soak: warm done in %.0f s, %d failed" % (time.monotonic() - t0, len(wbad)), file=sys.stderr)
t0 = time.monotonic()
ct, cbad = drive(pc, kc, ncold)
print("soak: cold done in %.0f s, %d failed" % (time.monotonic() - t0, len(cbad)), file=sys.stderr)
panics = []
for f in glob.glob(os.path.join(work, "panic", "*")) + glob.glob(os.path.join(work, "*.log")):
    with open(f, errors="replace") as fh:
        for line in fh:
            if "panic" in line.lower():
                panics.append("%s: %s" % (os.path.basename(f), line.strip()[:300]))
for b in (wbad + cbad)[:10]:
    print("soak: failed: " + b, file=sys.stderr)
for p in panics[:10]:
    print("soak: " + p, file=sys.stderr)
p = plat.rsplit("platform ", 1)[-1]
ms = lambda v, q: pct(v, q) * 1000 if v else float("nan")
fig = "platform=%s warm=%d cold=%d warm_p50_ms=%.1f warm_p99_ms=%.1f cold_p50_ms=%.1f panics=%d" % (
    p, len(wt), len(ct), ms(wt, 50), ms(wt, 99), ms(ct, 50), len(panics))
if wbad or cbad or panics:
    print("soak: FAILED %s failed_warm=%d failed_cold=%d" % (fig, len(wbad), len(cbad)))
    sys.exit(1)
print("soak: ok " + fig)
PY
