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
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  "$RUNSC" --root="$work/raw-state" list -quiet 2>/dev/null | while read -r id; do
    "$RUNSC" --root="$work/raw-state" delete --force "$id" >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

if ! ls "$IMAGES/python/3.11-slim/rootfs" >/dev/null 2>&1; then
  EAI_IMAGE_DIR=$IMAGES "$EAID" images build "$IMAGE" --packages python3-minimal,libpython3.11-stdlib >&2
fi

export EAI_DATA_DIR=$work/data EAI_IMAGE_DIR=$IMAGES EAI_PLUGIN_DIR=$BUILD/plugins EAI_SANDBOX_RUNSC=$RUNSC
mkdir -p "$EAI_DATA_DIR" && chmod 700 "$EAI_DATA_DIR"   # eaid refuses a data dir others can read
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
export EAI_LISTEN=127.0.0.1:$port
"$EAID" migrate >/dev/null 2>&1 || true
tenant=$("$EAID" tenants create bench | python3 -c 'import json,sys;print(json.load(sys.stdin)["id"])')
key=$("$EAID" keys create --tenant "$tenant" --name bench | tail -n1 | grep -o 'eai_[A-Za-z0-9_]*' | head -n1)
"$EAID" serve >"$work/eaid.log" 2>&1 &
server_pid=$!

python3 - "$RUNSC" "$IMAGES/python/3.11-slim/rootfs" "$work" "$port" "$key" "$SAMPLES" <<'PY'
import http.client, json, os, statistics, subprocess, sys, threading, time
runsc, rootfs, work, port, key, samples = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
CMD = ["python3", "-c", "print(2+2)"]
state = os.path.join(work, "raw-state")
os.makedirs(state, exist_ok=True)

def bundle(i):
    d = os.path.join(work, "raw-%d" % i)
    os.makedirs(d, exist_ok=True)
    spec = {
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 65534, "gid": 65534}, "args": CMD,
                    "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "LANG=C.UTF-8"],
                    "cwd": "/tmp", "capabilities": {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")},
                    "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}, {"type": "RLIMIT_NPROC", "hard": 128, "soft": 128}],
                    "noNewPrivileges": True},
        "root": {"path": rootfs, "readonly": True}, "hostname": "sandbox",
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                   {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "size=65536k", "mode=1777"]},
                   {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "nodev", "noexec", "mode=1777", "size=32768k"]},
                   {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["ro", "nosuid", "nodev", "noexec"]}],
        "linux": {"namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")],
                  "resources": {"memory": {"limit": 268435456}, "cpu": {"quota": 100000, "period": 100000}}},
    }
    json.dump(spec, open(os.path.join(d, "config.json"), "w"))
    return d

seq = [0]
lock = threading.Lock()
def raw_once(b):
    with lock:
        seq[0] += 1
        cid = "bench-%d-%d" % (os.getpid(), seq[0])
    t = time.monotonic()
    out = subprocess.run([runsc, "--root=" + state, "--network=none", "--platform=ptrace", "run", "--bundle", b, cid],
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
    for _ in range(100):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", "/healthz"); c.getresponse().read()
            return c
        except OSError:
            time.sleep(0.1)
    raise SystemExit("eaid did not come up")

conn = connect()
for _ in range(100):  # wait for the backend's probe
    conn.request("GET", "/readyz"); r = conn.getresponse(); r.read()
    if r.status == 200:
        break
    time.sleep(0.2)
b0 = bundle(0)
raw_once(b0); eaid_once(conn)  # warm caches
raw, eai = [], []
for i in range(samples):  # interleaved
    raw.append(raw_once(b0))
    eai.append(eaid_once(conn))

def pct(v, p):
    v = sorted(v); k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1)); return v[k]

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
