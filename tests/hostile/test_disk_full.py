#!/usr/bin/env python3
"""The data directory's filesystem full (issue 19 item 4), real eaid on
SQLite in an 8 MiB tmpfs (the gVisor state and bundles elsewhere), real
runsc:

- filled to the last byte, every submission answers 202 or 503/507 with the
  JSON envelope (both languages, request id, Retry-After on 503), never 500;
- nothing acknowledged is lost: every execution that got 202 (before, during
  or after) ends terminal once space returns;
- service resumes by itself: with the filler removed, a new submission runs
  to `succeeded` (no restart)."""
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, ensure_image, run_cases  # noqa: E402
from test_crash_sandboxes import write  # noqa: E402

IMAGE = "python:3.11-slim"


def post(e, body):
    req = urllib.request.Request(e.url + "/v1/sandbox/executions", method="POST", data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + e.key, "Content-Type": "application/json",
                                          "Accept-Language": "fr"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as x:
        return x.code, dict(x.headers), x.read()


def fill(path):
    """Write zeros into path until the filesystem is full."""
    with open(path, "wb", buffering=0) as f:
        chunk = b"\0" * 65536
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass


def case_disk_full_then_space_returns():
    tmp = tempfile.mkdtemp(prefix="eai-full-")
    mnt = os.path.join(tmp, "fs")
    os.makedirs(mnt)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", mnt], capture_output=True)
    if r.returncode != 0:
        print("SKIP: cannot mount a tmpfs: %s" % r.stderr.decode().strip())
        sys.exit(77)
    e = None
    try:
        data = os.path.join(mnt, "data")
        os.makedirs(data, mode=0o700)
        gv = os.path.join(tmp, "gv")
        os.makedirs(gv, mode=0o700)
        cfg = write(os.path.join(tmp, "eaid.yaml"),
                    "isolation:\n  gvisor:\n    pool: 0\n    state_dir: %s/state\n    work_dir: %s/work\n" % (gv, gv))
        e = Env(config=cfg, tmp=tmp, data=data)
        e.make_key()
        e.start(ready_path="/readyz", timeout=120)
        body = {"profile": "gvisor-small", "image": IMAGE, "command": ["sh", "-c", "echo ok"]}
        acked = []
        for i in range(3):  # these end while the disk is full
            st, _, raw = post(e, dict(body, command=["sh", "-c", "sleep 2; echo ok"]))
            check(st == 202, "before: %s %s" % (st, raw[:200]))
            acked.append(json.loads(raw)["id"])

        fill(os.path.join(mnt, "filler"))
        codes = {}
        for i in range(20):
            st, hdr, raw = post(e, dict(body, command=["sh", "-c", "echo full-%d" % i]))
            codes[st] = codes.get(st, 0) + 1
            check(st in (202, 503, 507), "while full: %s %s" % (st, raw[:300]))
            if st == 202:
                acked.append(json.loads(raw)["id"])
                continue
            env = json.loads(raw)["error"]
            check(env["code"] in ("storage_unavailable", "insufficient_storage") and env["message_i18n"]["en"] and
                  env["message_i18n"]["fr"] and env["request_id"], "envelope: %s" % env)
            if st == 503:
                check(hdr.get("Retry-After"), "503 without Retry-After: %s" % hdr)
        print("  while full: %s" % codes, flush=True)
        check(codes.get(503, 0) + codes.get(507, 0) > 0, "the full disk was never noticed: %s" % codes)
        check(urllib.request.urlopen(e.url + "/healthz", timeout=5).status == 200, "healthz while full")
        time.sleep(6)  # the executions acknowledged before try to finish on a full disk
        os.unlink(os.path.join(mnt, "filler"))

        deadline = time.time() + 30
        st = None
        while time.time() < deadline:
            st, _, raw = post(e, body)
            if st == 202:
                break
            time.sleep(0.5)
        check(st == 202, "service did not resume: %s %s" % (st, raw[:200]))
        acked.append(json.loads(raw)["id"])
        for eid in acked:
            b = e.wait_terminal(eid, timeout=90)
            check(b["status"] == "succeeded", "%s: %s %s" % (eid, b["status"], b.get("error")))
        b = e.wait_terminal(acked[-1], timeout=60)
        check(b["status"] == "succeeded" and b["stdout"] == "ok\n", "after: %s %s" % (b["status"], b.get("error")))
        check(e.proc.poll() is None, "eaid died")
    finally:
        if e:
            e.stop(clean=False)
        subprocess.run(["umount", "-l", mnt])
        subprocess.run(["rm", "-rf", "--one-file-system", tmp])


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: needs root (mount, runsc)")
        sys.exit(77)
    ensure_image()
    run_cases([("disk_full_then_space_returns", case_disk_full_then_space_returns)])
