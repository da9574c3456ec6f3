#!/usr/bin/env bash
# Soak test (not a CI test; run as root, ideally on an idle machine).
#
#   EAI_BUILD_DIR=build bench/soak.sh [seconds, default 600] [interval seconds, default 60]
#
# Starts its own `eaid serve` on a free loopback port with a temporary data
# dir, then drives a mixed load through the HTTP API for the given time from
# 4 client threads: short runs, long runs (3 s), failing runs (exit 3), OOM
# (200 MB in a 64Mi sandbox), timeouts (timeout_s 2), cancels, and files in
# and out.  Every execution's terminal status is checked against what its kind
# must end as.  Every interval it prints one line:
#
#   t=<s> done=<n> bad=<n> rss_kib=<n> fds=<n> threads=<n> db_kib=<n> wal_kib=<n> sandboxes=<n>
#
# (sandboxes: runsc containers in eaid's state dir, pooled ones included).  After the load it waits for the queue to
# drain and prints a last line `soak: ok ...` or `soak: FAILED <reasons>`, and
# exits non-zero when an execution ended wrongly, or when RSS, fds, threads or
# the WAL kept growing (the second half's maximum above the first half's by
# more than a fixed margin), or when sandboxes are left over
# beyond the warm pool (2 per shape, at most 4 shapes) once everything is terminal.  Every loop is bounded by
# the duration; nothing talks to anything but loopback.
set -euo pipefail

BUILD=${EAI_BUILD_DIR:-build}
BUILD=$(cd "$BUILD" && pwd)
DURATION=${1:-600}
INTERVAL=${2:-60}
RUNSC=${EAI_SANDBOX_RUNSC:-$(command -v runsc)}
IMAGES=${EAI_IMAGE_DIR:-$BUILD/images}
EAID=$BUILD/eaid
[ -x "$EAID" ] || { echo "soak: $EAID not built" >&2; exit 1; }
[ -x "$RUNSC" ] || { echo "soak: runsc not found" >&2; exit 1; }

work=$(mktemp -d /tmp/eai-soak-XXXXXX)
chmod 0700 "$work"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if ! ls "$IMAGES/python/3.11-slim/rootfs" >/dev/null 2>&1; then
  EAI_IMAGE_DIR=$IMAGES "$EAID" images build python:3.11-slim >&2
fi

export EAI_DATA_DIR=$work/data EAI_IMAGE_DIR=$IMAGES EAI_PLUGIN_DIR=$BUILD/plugins EAI_SANDBOX_RUNSC=$RUNSC
mkdir -m 0700 -p "$EAI_DATA_DIR"
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
export EAI_LISTEN=127.0.0.1:$port
"$EAID" migrate >/dev/null 2>&1 || true
tenant=$("$EAID" tenants create soak | python3 -c 'import json,sys;print(json.load(sys.stdin)["id"])')
key=$("$EAID" keys create --tenant "$tenant" --name soak | tail -n1 | grep -o 'eai_[A-Za-z0-9_]*' | head -n1)
"$EAID" serve >"$work/eaid.log" 2>&1 &
server_pid=$!

python3 - "$server_pid" "$EAI_DATA_DIR" "$RUNSC" "$port" "$key" "$DURATION" "$INTERVAL" <<'PY'
import base64, http.client, json, os, random, subprocess, sys, threading, time

pid, data, runsc, port, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
duration, interval = float(sys.argv[6]), float(sys.argv[7])
HDR = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
IMG, PROF = "python:3.11-slim", "gvisor-small"

def py(code, **kw):
    b = {"profile": PROF, "image": IMG, "command": ["python3", "-c", code]}
    b.update(kw)
    return b

# kind -> (request body, statuses it may end in)
KINDS = {
    "short": (py("print(2+2)"), ("succeeded",)),
    "long": (py("import time; time.sleep(3); print('done')"), ("succeeded",)),
    "failing": (py("import sys; print('x'); sys.exit(3)"), ("failed",)),
    "oom": (py("x = b'x' * (200 * 1024 * 1024)", limits={"memory": "64Mi"}), ("oom_killed",)),
    "timeout": (py("import time; time.sleep(30)", limits={"timeout_s": 2}), ("timeout",)),
    "cancel": (py("import time; print('up', flush=True); time.sleep(20)"), ("cancelled", "succeeded")),
    "files": (py("import os, shutil; os.makedirs('/tmp/outputs', exist_ok=True); "
                 "shutil.copy('/tmp/inputs/a.txt', '/tmp/outputs/b.txt')",
                 files=[{"path": "/tmp/inputs/a.txt", "content_b64": base64.b64encode(b"soak" * 1000).decode()}],
                 collect=["/tmp/outputs"]), ("succeeded",)),
}
WEIGHTS = {"short": 5, "long": 1, "failing": 2, "oom": 1, "timeout": 1, "cancel": 1, "files": 2}
deadline = time.monotonic() + duration
lock = threading.Lock()
done, bad, reasons = [0], [0], []

def conn():
    return http.client.HTTPConnection("127.0.0.1", port, timeout=90)

def req(c, method, path, body=None):
    c.request(method, path, json.dumps(body) if body is not None else None, HDR)
    r = c.getresponse()
    raw = r.read()
    return r.status, (json.loads(raw) if raw else {})

def one(c, kind):
    body, ok = KINDS[kind]
    st, d = req(c, "POST", "/v1/sandbox/executions", body)
    if st == 429 or st == 503:  # back-pressure is a valid answer; slow down
        time.sleep(1)
        return None
    if st != 202:
        return "POST %s -> %d %s" % (kind, st, d.get("code"))
    eid = d["id"]
    if kind == "cancel":
        time.sleep(1.5)
        st, _ = req(c, "POST", "/v1/sandbox/executions/%s/cancel" % eid)
        if st not in (202, 409):
            return "cancel -> %d" % st
    for _ in range(40):  # at most 40 x 30 s long-polls
        st, d = req(c, "GET", "/v1/sandbox/executions/%s?wait_s=30" % eid)
        if d.get("status") not in ("queued", "running"):
            break
    if d.get("status") not in ok:
        return "%s %s ended %s (%s) %r" % (kind, eid, d.get("status"), (d.get("error") or {}).get("code"),
                                           (d.get("stderr") or "")[-200:])
    if kind == "files" and not any(f.get("path") == "/tmp/outputs/b.txt" for f in d.get("files", [])):
        return "files %s: b.txt not collected" % eid
    return None

def client(seed):
    rnd = random.Random(seed)
    kinds = [k for k, w in WEIGHTS.items() for _ in range(w)]
    c = conn()
    while time.monotonic() < deadline:
        try:
            err = one(c, rnd.choice(kinds))
        except (OSError, http.client.HTTPException, ValueError) as e:
            err = "client: %r" % e
            c.close()
            c = conn()
        with lock:
            done[0] += 1
            if err:
                bad[0] += 1
                if len(reasons) < 20:
                    reasons.append(err)

def status_of(name):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return -1

def size_kib(p):
    try:
        return os.path.getsize(p) // 1024
    except OSError:
        return 0

def sample(t0):
    sandboxes = subprocess.run([runsc, "--root=" + os.path.join(data, "gvisor", "state"), "list", "-quiet"],
                               capture_output=True, text=True).stdout.split()
    s = {"t": int(time.monotonic() - t0), "done": done[0], "bad": bad[0],
         "rss_kib": status_of("VmRSS"), "fds": len(os.listdir("/proc/%d/fd" % pid)),
         "threads": status_of("Threads"), "db_kib": size_kib(os.path.join(data, "eai.db")),
         "wal_kib": size_kib(os.path.join(data, "eai.db-wal")), "sandboxes": len(sandboxes)}
    print(" ".join("%s=%s" % kv for kv in s.items()), flush=True)
    return s

c = conn()
for _ in range(300):  # wait for the backend's probe (at most 60 s)
    try:
        st, _ = req(c, "GET", "/readyz")
        if st == 200:
            break
    except OSError:
        c = conn()
    time.sleep(0.2)
t0 = time.monotonic()
threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(4)]
for th in threads:
    th.start()
samples = []
while time.monotonic() < deadline:
    time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
    samples.append(sample(t0))
for th in threads:
    th.join(timeout=1300)
time.sleep(5)  # the pool refills, leaves are removed
end = sample(t0)

fail = list(reasons[:5]) if bad[0] else []
half = len(samples) // 2
if half >= 1:
    first, second = samples[:half], samples[half:]
    for k, margin in (("rss_kib", 8192), ("fds", 16), ("threads", 4), ("wal_kib", 16384)):
        a, b = max(s[k] for s in first), max(s[k] for s in second)
        if b > a + margin:
            fail.append("%s grew %d -> %d" % (k, a, b))
pool = 8  # the warm pool: `pool` (2) per shape, 4 shapes at most (docs/gvisor.md)
if end["sandboxes"] > pool:
    fail.append("%d sandboxes left after the load" % end["sandboxes"])
if done[0] == 0:
    fail.append("no execution finished")
if fail:
    print("soak: FAILED " + "; ".join(fail))
    sys.exit(1)
print("soak: ok executions=%d bad=0 rss_kib=%d fds=%d threads=%d wal_kib=%d sandboxes=%d" %
      (done[0], end["rss_kib"], end["fds"], end["threads"], end["wal_kib"], end["sandboxes"]))
PY
