#!/usr/bin/env python3
"""The launcher against `runsc exec`, without eaid (not a CI test; root, an
idle machine helps, ratios within one run are what count):

    python3 bench/launcher.py [--samples N] [--runsc PATH] [--launcher PATH]
                              [--rootfs DIR]

Times `python3 -c 'print(2+2)'` inside gVisor four ways, interleaved, in
bundles like a pooled sandbox's (bench/benchlib.py's bundle with /tmp a host
directory bound in, the launcher bound at /.eai/launcher):
  launcher, no warm-up   a fresh sandbox whose init is the launcher: from the
                         launch line to the launcher's answer
  launcher, warm-up      the same after the launcher's warm-up (the plugin's
                         default, `python3 -c pass`, which it runs twice at once)
  exec, 2nd in fresh     `runsc exec` into a sandbox booted for it, the second
                         exec there (the first one warms it up)
  exec, reused           `runsc exec` into one sandbox that every sample reuses
                         (bench/perf.sh's `raw_exec` floor)
and `runsc exec` of /bin/true into the reused one (what runsc exec costs
before the program).  Docs: docs/gvisor.md "The launcher".  Defaults: runsc on
PATH, build/eai-launcher, the image store's python:3.11-slim (EAI_IMAGE_DIR
or build/images)."""
import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import bundle, raw_argv  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--samples", type=int, default=10)
ap.add_argument("--runsc", default=shutil.which("runsc") or "runsc")
ap.add_argument("--launcher", default=os.path.join(ROOT, "build", "eai-launcher"))
ap.add_argument("--rootfs", default=os.path.join(os.environ.get("EAI_IMAGE_DIR", os.path.join(ROOT, "build", "images")),
                                                 "python", "3.11-slim", "rootfs"))
a = ap.parse_args()
for p in (a.launcher, a.rootfs):
    if not os.path.exists(p):
        sys.exit("bench: %s missing" % p)
CMD = ["python3", "-c", "print(2+2)"]
DEADLINE = time.monotonic() + 900  # the whole bench: 15 min at most
work = tempfile.mkdtemp(prefix="eai-launcher-bench-")
state = os.path.join(work, "state")
os.makedirs(state)
RS = raw_argv(a.runsc, state)
lbin = os.path.join(work, "launcher.bin")
shutil.copy(a.launcher, lbin)
os.chmod(lbin, 0o555)
seq = [0]
live = []


def mk(args):
    """A bundle running args, /tmp a host directory, the launcher bound in;
    (its directory, a container id)."""
    seq[0] += 1
    d = bundle(work, seq[0], a.rootfs, args)
    tmp = os.path.join(d, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.chmod(tmp, 0o1777)
    with open(os.path.join(d, "config.json")) as f:
        spec = json.load(f)
    spec["mounts"] = [m for m in spec["mounts"] if m["destination"] != "/tmp"] + [
        {"destination": "/tmp", "type": "bind", "source": tmp, "options": ["rbind", "rw", "nosuid", "nodev"]},
        {"destination": "/.eai/launcher", "type": "bind", "source": lbin, "options": ["bind", "ro"]}]
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(spec, f)
    return d, "eai-lbench-%d-%d" % (os.getpid(), seq[0])


def launched(warmup):
    d, cid = mk(["/.eai/launcher"] + warmup)
    host, child = socket.socketpair()
    p = subprocess.Popen(RS + ["run", "--bundle", d, cid], stdin=child, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    child.close()
    try:
        if p.stdout.readline() != b"ready\n":
            sys.exit("bench: the launcher did not say ready")
        time.sleep(0.5)  # as a pooled sandbox waits for its execution
        name = "/tmp/.eai-launch-" + secrets.token_hex(8)
        env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp", "LANG=C.UTF-8"]
        body = [b"EAI-LAUNCH-1", b"/tmp", str(len(CMD)).encode()] + [x.encode() for x in CMD]
        body += [str(len(env)).encode()] + [e.encode() for e in env] + [b"0"]
        fd = os.open(os.path.join(d, name.lstrip("/")), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"\0".join(body) + b"\0")
        os.close(fd)
        host.settimeout(60)
        t = time.monotonic()
        host.sendall((name + "\n").encode())
        answer = host.recv(64)
        dt = time.monotonic() - t
        out = p.stdout.read()
        p.wait(timeout=60)
    finally:
        host.close()
        if p.poll() is None:
            p.kill()
            p.wait()
        subprocess.run(RS[:2] + ["delete", "--force", cid], capture_output=True, timeout=60)
    if answer != b"exit 0\n" or out != b"4\n":
        sys.exit("bench: launched run: %r %r" % (answer, out))
    return dt


def boot(cid, d):
    subprocess.run(RS + ["run", "--detach", "--bundle", d, cid], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60, check=True)
    live.append(cid)


def execd(cid, args=CMD, want=b"4\n"):
    t = time.monotonic()
    o = subprocess.run(RS + ["exec", "--user", "65534:65534", "--cwd", "/tmp", cid] + args,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    dt = time.monotonic() - t
    if o.returncode != 0 or o.stdout != want:
        sys.exit("bench: runsc exec: %r" % o)
    return dt


def exec_fresh():
    d, cid = mk(["sleep", "3600"])
    boot(cid, d)
    execd(cid)
    time.sleep(0.3)
    dt = execd(cid)
    subprocess.run(RS[:2] + ["delete", "--force", cid], capture_output=True, timeout=60)
    live.remove(cid)
    return dt


try:
    d, reused = mk(["sleep", "3600"])
    boot(reused, d)
    execd(reused)
    series = [("launcher, no warm-up", lambda: launched([])),
              ("launcher, warm-up", lambda: launched(["python3", "-c", "pass"])),
              ("exec, 2nd in fresh", exec_fresh),
              ("exec, reused", lambda: execd(reused)),
              ("exec /bin/true", lambda: execd(reused, ["/bin/true"], b""))]
    res = {name: [] for name, _ in series}
    for i in range(a.samples):
        for name, fn in series:
            if time.monotonic() > DEADLINE:
                sys.exit("bench: deadline")
            res[name].append(fn())
            time.sleep(0.3)
    for name, v in res.items():
        print("%-22s p50 %6.1f ms  min %6.1f ms  n=%d" % (name, 1000 * statistics.median(v), 1000 * min(v), len(v)))
    m = {k: statistics.median(v) for k, v in res.items()}
    print("launched_vs_exec_reused=%.3f launched_vs_exec_fresh=%.3f warmup_gain_ms=%.1f" % (
        m["launcher, warm-up"] / m["exec, reused"], m["launcher, warm-up"] / m["exec, 2nd in fresh"],
        1000 * (m["launcher, no warm-up"] - m["launcher, warm-up"])))
finally:
    for cid in live:
        subprocess.run(RS[:2] + ["delete", "--force", cid], capture_output=True, timeout=60)
    shutil.rmtree(work, ignore_errors=True)
