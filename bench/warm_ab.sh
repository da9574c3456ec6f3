#!/usr/bin/env bash
# Two builds of eaid side by side on the warm path (not a CI test; root, an
# idle machine helps, ratios in one run are what count):
#
#   EAI_IMAGE_DIR=/path/to/images bench/warm_ab.sh BUILD_A BUILD_B [N]
#
# One `eaid serve` per build (pool 2), the same client: `POST` of
# `python3 -c 'print(2+2)'` then `GET ?wait_s=30` until terminal, N (20) runs
# each, interleaved (A B, B A, ...) 1 s apart, so the two see the same load.
# Prints p50/p90 of each and a last line `warm_b_vs_a=<B p50 / A p50>
# delta_ms_p50=<B p50 - A p50>`.  Used for eaid's own overhead
# (docs/performance.md "eaid's own part of a warm execution").
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUILD_A BUILD_B [N]" >&2; exit 2; }
A=$(cd "$1" && pwd)
B=$(cd "$2" && pwd)
N=${3:-20}
RUNSC=${EAI_SANDBOX_RUNSC:-$(command -v runsc || true)}
IMAGES=${EAI_IMAGE_DIR:-$A/images}
for b in "$A" "$B"; do [ -x "$b/eaid" ] || { echo "bench: $b/eaid not built" >&2; exit 1; }; done
work=$(mktemp -d /tmp/eai-warmab-XXXXXX)
. "$(dirname "$0")/lib.sh"
trap 'bench_stop; rm -rf "$work"' EXIT
BUILD=$A EAID=$A/eaid start_eaid a 2
BUILD=$B EAID=$B/eaid start_eaid b 2
PYTHONPATH="$BENCH_DIR" python3 - "$N" "$port_a" "$key_a" "$port_b" "$key_b" <<'PY'
import sys, time
from benchlib import connect, pct, wait_ready, warm_once
n = int(sys.argv[1])
sides = []
for port, key in ((int(sys.argv[2]), sys.argv[3]), (int(sys.argv[4]), sys.argv[5])):
    wait_ready(port)
    sides.append({"c": connect(port), "h": {"Authorization": "Bearer " + key, "Content-Type": "application/json"},
                  "t": []})

for sd in sides:  # warm caches and the pool
    warm_once(sd["c"], sd["h"]); time.sleep(1)
for i in range(n):
    for sd in (sides if i % 2 == 0 else sides[::-1]):
        sd["t"].append(warm_once(sd["c"], sd["h"])[0])
        time.sleep(1)
p = []
for name, sd in zip("AB", sides):
    v = sd["t"]
    p.append(pct(v, 50))
    print("%s p50=%6.1fms p90=%6.1fms n=%d" % (name, 1000 * pct(v, 50), 1000 * pct(v, 90), len(v)))
print("warm_b_vs_a=%.3f delta_ms_p50=%.1f" % (p[1] / p[0], 1000 * (p[1] - p[0])))
PY
