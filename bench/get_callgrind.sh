#!/usr/bin/env bash
# User-space instructions per `GET /v1/sandbox/executions/{id}` of one
# finished execution (docs/performance.md "The API path of a finished
# execution"): counts that another load on the machine does not distort.
#
#   EAI_BUILD_DIR=build EAI_IMAGE_DIR=/path/to/images bench/get_callgrind.sh [OUT]
#
# A plain eaid (pool off) runs one execution to its end and stops; the same
# data dir is served again under `valgrind --tool=callgrind`; after a warm-up
# the counters are zeroed (callgrind_control -z), `wrk -t1 -c16` runs for
# PERF_CG_S (4) seconds and the counters are dumped (callgrind_control -d).
# The last line: requests=<n> instructions=<Ir> per_get=<Ir / n>.  OUT (or
# $work/get.callgrind, kept with PERF_KEEP) is the dump, for callgrind_annotate
# --inclusive=yes.  Needs runsc (the execution), valgrind and wrk.
set -euo pipefail

BUILD=${EAI_BUILD_DIR:-build}
BUILD=$(cd "$BUILD" && pwd)
EAID=$BUILD/eaid
IMAGES=${EAI_IMAGE_DIR:-$BUILD/images}
RUNSC=${EAI_SANDBOX_RUNSC:-$(command -v runsc || true)}
CG_S=${PERF_CG_S:-4}
for t in valgrind callgrind_control wrk; do
  command -v $t >/dev/null || { echo "bench: $t missing" >&2; exit 1; }
done
[ -x "$EAID" ] || { echo "bench: $EAID not built" >&2; exit 1; }
work=$(mktemp -d /tmp/eai-getcg-XXXXXX)
OUT=${1:-$work/get.callgrind}
. "$(dirname "$0")/lib.sh"
cleanup() {
  bench_stop
  if [ -n "${PERF_KEEP:-}" ]; then echo "bench: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

start_eaid cg 0
eid=$(PYTHONPATH="$BENCH_DIR" python3 - "$port_cg" "$key_cg" <<'PY'
import json, sys
from benchlib import connect, wait_ready
port, key = int(sys.argv[1]), sys.argv[2]
wait_ready(port)
c = connect(port)
h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
c.request("POST", "/v1/sandbox/executions", json.dumps(
    {"profile": "gvisor", "image": "python:3.11-slim", "command": ["python3", "-c", "print(2+2)"],
     "limits": {"cpu": "1", "memory": "256Mi", "timeout_s": 30}}), h)
r = c.getresponse(); b = json.loads(r.read())
assert r.status in (200, 201, 202), (r.status, b)
for _ in range(20):  # bounded: 20 long-polls of 30 s
    c.request("GET", "/v1/sandbox/executions/%s?wait_s=30" % b["id"], headers=h)
    d = json.loads(c.getresponse().read())
    if d.get("status") not in ("queued", "running"):
        break
assert d.get("status") not in ("queued", "running"), d
print(b["id"])
PY
)
kill "$pid_cg"; wait "$pid_cg" 2>/dev/null || true
pids=()

env EAI_DATA_DIR="$work/cg" EAI_IMAGE_DIR="$IMAGES" EAI_PLUGIN_DIR="$BUILD/plugins" \
    EAI_SANDBOX_RUNSC="${RUNSC:-runsc}" EAI_LISTEN="127.0.0.1:$port_cg" \
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" "$EAID" serve --config "$work/cg.yaml" \
    >"$work/cg-valgrind.log" 2>&1 &
vg=$!
pids+=($vg)
url="http://127.0.0.1:$port_cg/v1/sandbox/executions/$eid"
for _ in $(seq 120); do  # bounded: 60 s for eaid to come up under valgrind
  curl -sf -o /dev/null -H "Authorization: Bearer $key_cg" "$url" && break
  sleep 0.5
done
wrk -t1 -c16 -d1s -H "Authorization: Bearer $key_cg" "$url" >/dev/null  # warm-up: key cached, document kept
callgrind_control -z "$vg" >/dev/null
wrk -t1 -c16 -d"${CG_S}s" -H "Authorization: Bearer $key_cg" "$url" >"$work/wrk.txt"
callgrind_control -d "$vg" >/dev/null
grep -q 'Non-2xx' "$work/wrk.txt" && { echo "bench: non-2xx answers: $(cat "$work/wrk.txt")" >&2; exit 1; }
n=$(awk '/requests in/{print $1}' "$work/wrk.txt")
cp "$work/cg.$vg.1" "$OUT"
ir=$(callgrind_annotate "$OUT" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",","",$1); print $1}')
echo "requests=$n instructions=$ir per_get=$((ir / n))"
