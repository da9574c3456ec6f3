"""The Python side of bench/lib.sh, for bench/gvisor.sh and bench/perf.sh:
the raw `runsc` bundle identical to what eaid runs (same image, user,
limits, rlimits), percentiles, connections to eaid, one warm execution
(bench/warm_ab.sh, bench/warm_gap.sh)."""
import http.client
import json
import os
import subprocess
import time


def bundle(work, i, rootfs, args):
    """$work/raw-<i>/config.json running args in rootfs; the bundle dir."""
    d = os.path.join(work, "raw-%d" % i)
    os.makedirs(d, exist_ok=True)
    spec = {
        "ociVersion": "1.0.2",
        "process": {"terminal": False, "user": {"uid": 65534, "gid": 65534}, "args": args,
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
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(spec, f)
    return d


def platform(runsc):
    """The platform eaid's `platform: auto` takes with this runsc (docs/gvisor.md
    "Platform"): systrap when runsc has it, else ptrace; EAI_BENCH_PLATFORM
    says otherwise (for a host where systrap fails and auto fell back)."""
    if os.environ.get("EAI_BENCH_PLATFORM"):
        return os.environ["EAI_BENCH_PLATFORM"]
    out = subprocess.run([runsc, "flags"], capture_output=True, text=True, timeout=30).stdout
    return "systrap" if "systrap" in out else "ptrace"


def raw_argv(runsc, state):
    """runsc and the flags of every raw run: its own state dir, no network,
    the platform eaid's probe chooses."""
    return [runsc, "--root=" + state, "--network=none", "--platform=" + platform(runsc)]


def pct(v, p):
    v = sorted(v)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def connect(port):
    """A connection to eaid on loopback once /healthz answers (10 s at most)."""
    for _ in range(100):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", "/healthz")
            c.getresponse().read()
            return c
        except OSError:
            time.sleep(0.1)
    raise SystemExit("eaid on %d did not come up" % port)


def wait_ready(port):
    """Until /readyz answers 200 (the backend's probe; 30 s at most)."""
    c = connect(port)
    for _ in range(150):
        c.request("GET", "/readyz")
        r = c.getresponse()
        r.read()
        if r.status == 200:
            return
        time.sleep(0.2)
    raise SystemExit("eaid on %d not ready" % port)


WARM_BODY = json.dumps({"profile": "gvisor", "image": "python:3.11-slim", "command": ["python3", "-c", "print(2+2)"],
                        "limits": {"cpu": "1", "memory": "256Mi", "timeout_s": 30}})


def warm_once(c, h, body=WARM_BODY):
    """POST body then long-poll GET until terminal on connection c with
    headers h; (client seconds, the terminal document), which must be a
    success printing 4."""
    t0 = time.monotonic()
    c.request("POST", "/v1/sandbox/executions", body, h)
    r = c.getresponse()
    b = json.loads(r.read())
    assert r.status == 202, (r.status, b)
    for _ in range(20):
        c.request("GET", "/v1/sandbox/executions/%s?wait_s=30" % b["id"], headers=h)
        r = c.getresponse()
        d = json.loads(r.read())
        if d.get("status") not in ("queued", "running"):
            break
    dt = time.monotonic() - t0
    assert d["status"] == "succeeded" and d.get("stdout") == "4\n", d
    return dt, d
