"""Bounds of the handoff directory (docs/sessions.md "Any replica"), with
real runsc, one `eaid serve` on loopback on its embedded SQLite, and a
handoff directory of its own.  Python 3 standard library only
(tests/hostile/eaid_env.py).

A parked session has left its node's memory, so the node's own count of
live sessions no longer sees it: without the bound, a tenant could park
sessions one after another and fill the directory every replica mounts.
Each case asserts what breaks when the bound breaks:

- parked sessions count against sessions.max_per_tenant: with a cap of 2
  and two sessions parked, a create and a fork are refused 429
  session_limit naming the parked two; a session resumed (claimed back)
  and deleted makes room again;
- the directory's free-space floor: with sessions.min_free_bytes above what
  a small handoff directory (a tmpfs of its own) has free, an idle session
  is paused but stays on its node, and still resumes with its state."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
import test_sessions as ts  # noqa: E402
from eaid_env import check, ensure_image, run_cases  # noqa: E402


def start(handoff, extra=""):
    config = ("sessions:\n  max_per_tenant: 2\n  handoff_dir: %s\n%s"
              "scheduler:\n  max_concurrent: 8\n  max_per_tenant: 8\n" % (handoff, extra))
    return ts.start_env(config=config, tenant="hob-a")


def wait_parked(e, sid, timeout=60):
    """The log line of the park (its record written owner "parked")."""
    line = "session %s parked for any replica" % sid
    end = time.time() + timeout
    while time.time() < end:
        if line in e.log_text():
            return
        time.sleep(0.25)
    raise AssertionError("%s not parked within %d s: %s" % (sid, timeout, e.log_tail()))


def case_parked_count_against_the_cap():
    tmp = tempfile.mkdtemp(prefix="eai-hob-")
    handoff = os.path.join(tmp, "handoff")
    e = start(handoff)
    try:
        # a snapshot to fork from, taken while there is room
        src = ts.create(e)
        ts.run(e, src, ["sh", "-c", "echo from-snapshot > /tmp/k"])
        st, snp = e.api("POST", "/v1/sandbox/sessions/%s/snapshots" % src, None, timeout=120)
        if st == 422 and snp["error"]["code"] == "snapshots_unsupported":
            print("this runsc takes no snapshot, so nothing is parked: skipped (%s)" % snp["error"]["message"])
            ts.delete(e, src)
            sys.exit(77)
        check(st == 201 and snp["status"] == "ready", "snapshot: %s %s" % (st, snp))
        ts.delete(e, src)
        a = ts.create(e, idle_timeout_s=1)
        b = ts.create(e, idle_timeout_s=1)
        ts.run(e, a, ["sh", "-c", "echo kept-a > /tmp/k"])
        wait_parked(e, a)
        wait_parked(e, b)
        check(os.path.isdir(os.path.join(handoff, a)) and os.path.isdir(os.path.join(handoff, b)),
              "both copied to the handoff directory: %s" % os.listdir(handoff))
        # the node holds none of them now; both still count
        st, r = e.api("POST", "/v1/sandbox/sessions", {"profile": ts.PROFILE, "image": ts.IMAGE}, timeout=60)
        check(st == 429 and r["error"]["code"] == "session_limit"
              and "2 of them parked" in r["error"]["details"][0]["message"],
              "a third create refused, the parked two named: %s %s" % (st, r))
        st, r = e.api("POST", "/v1/sandbox/sessions", {"from_snapshot": snp["id"]}, timeout=60)
        check(st == 429 and r["error"]["code"] == "session_limit"
              and "2 of them parked" in r["error"]["details"][0]["message"],
              "a fork refused too: %s %s" % (st, r))
        st, r = e.api("POST", "/v1/sandbox/sessions", {"profile": ts.PROFILE, "image": ts.IMAGE}, timeout=60,
                      headers={"Accept-Language": "fr"})
        check(st == 429 and r["error"]["code"] == "session_limit" and r["error"]["message"] != "",
              "refused in French as well: %s %s" % (st, r))
        # a call claims a back: it runs here again with its /tmp; deleted, it makes room
        out = ts.run(e, a, ["cat", "/tmp/k"])
        check(out["status"] == "succeeded" and out["stdout"] == "kept-a\n", "a resumed with its state: %s" % out)
        ts.delete(e, a)
        c = ts.create(e)  # 1 parked (b) + 0 live < 2
        st, r = e.api("POST", "/v1/sandbox/sessions", {"from_snapshot": snp["id"]}, timeout=60)
        check(st == 429 and "1 of them parked" in r["error"]["details"][0]["message"],
              "full again: b parked and c live: %s %s" % (st, r))
        ts.delete(e, c)
        ts.delete(e, b)  # claimed, then ended
        f = e.api("POST", "/v1/sandbox/sessions", {"from_snapshot": snp["id"]}, timeout=180)
        check(f[0] == 201, "a fork once there is room: %s %s" % f)
        ts.delete(e, f[1]["id"])
        st, r = e.api("DELETE", "/v1/sandbox/snapshots/" + snp["id"], timeout=60)
        check(st in (200, 204), "snapshot deleted: %s %s" % (st, r))
        end = time.time() + 30
        while time.time() < end and os.listdir(handoff):
            time.sleep(0.25)
        check(os.listdir(handoff) == [], "the handoff directory empty at the end: %s" % os.listdir(handoff))
    finally:
        e.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def case_free_space_floor():
    tmp = tempfile.mkdtemp(prefix="eai-hob-")
    handoff = os.path.join(tmp, "handoff")
    os.makedirs(handoff)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "eai-hob", handoff], check=True)
    e = None
    try:
        # 64 MiB free there, a floor of 256 MiB: no copy fits; the data disk
        # (the test's temp dir) is far larger, so the pause itself is admitted
        e = start(handoff, "  min_free_bytes: 268435456\n")
        s = ts.create(e, idle_timeout_s=1)
        ts.run(e, s, ["sh", "-c", "echo kept > /tmp/k"])
        line = "session %s: not parked (sessions.handoff_dir has" % s
        end = time.time() + 60
        while time.time() < end and line not in e.log_text():
            time.sleep(0.25)
        check(line in e.log_text(), "the floor said in the log: %s" % e.log_tail())
        st, b = ts.get(e, s)
        check(st == 200 and b["status"] == "paused" and b["paused_by"] == "idle",
              "paused on its node: %s %s" % (st, b))
        check(os.listdir(handoff) == [], "nothing copied: %s" % os.listdir(handoff))
        check("session %s parked for any replica" % s not in e.log_text(), "not parked")
        out = ts.run(e, s, ["cat", "/tmp/k"])
        check(out["status"] == "succeeded" and out["stdout"] == "kept\n", "resumed on its node: %s" % out)
        ts.delete(e, s)
    finally:
        if e:
            e.stop()
        subprocess.run(["umount", handoff], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if not ts.have_runsc():
        print("runsc not available: skipped")
        sys.exit(77)
    ensure_image()
    run_cases([
        ("parked sessions count against sessions.max_per_tenant", case_parked_count_against_the_cap),
        ("the handoff directory's free-space floor", case_free_space_floor),
    ])
