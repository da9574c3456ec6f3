#!/usr/bin/env bash
# Warm runs a fixed pause apart, one eaid (not a CI test; root, an idle
# machine helps):
#
#   EAI_IMAGE_DIR=/path/to/images bench/warm_gap.sh BUILD GAP_S [N] [POOL]
#
# One `eaid serve` of BUILD with the warm pool (POOL, default 2), one shape:
# `POST` of `python3 -c 'print(2+2)'` then `GET ?wait_s=30` until terminal,
# N (15) runs GAP_S seconds apart after three to fill the pool.  A short
# pause makes each run meet the refill boot of the one before
# (docs/performance.md "Which sandbox a take gets").  Prints client time
# p50/p90 and `usage.duration_s` p50 (the sandbox's part).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BUILD GAP_S [N] [POOL]" >&2; exit 2; }
BUILD=$(cd "$1" && pwd)
GAP=$2
N=${3:-15}
POOL=${4:-2}
EAID=$BUILD/eaid
RUNSC=${EAI_SANDBOX_RUNSC:-$(command -v runsc || true)}
IMAGES=${EAI_IMAGE_DIR:-$BUILD/images}
[ -x "$EAID" ] || { echo "bench: $EAID not built" >&2; exit 1; }
work=$(mktemp -d /tmp/eai-warmgap-XXXXXX)
. "$(dirname "$0")/lib.sh"
trap 'bench_stop; rm -rf "$work"' EXIT
start_eaid a "$POOL" >/dev/null
PYTHONPATH="$BENCH_DIR" python3 - "$N" "$GAP" "$port_a" "$key_a" <<'PY'
import sys, time
from benchlib import connect, pct, wait_ready, warm_once
n, gap, port, key = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
wait_ready(port)
c = connect(port)
h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
for _ in range(3):
    warm_once(c, h); time.sleep(max(gap, 1.0))
t, d = [], []
for _ in range(n):
    a, doc = warm_once(c, h)
    b = doc["usage"]["duration_s"]
    t.append(a); d.append(b)
    time.sleep(gap)
print("gap=%.2fs client p50=%.1fms p90=%.1fms duration_s p50=%.1fms n=%d" % (
      gap, 1000 * pct(t, 50), 1000 * pct(t, 90), 1000 * pct(d, 50), n))
PY
