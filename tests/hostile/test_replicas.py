#!/usr/bin/env python3
"""Replicas told the truth (issue 19 item 6), real eaid processes on SQLite
(real runsc for the queue gauge):

- eai_sandbox_queued is fresh on a busy replica: with every slot taken (no
  claim happens), the gauge follows the storage's queued count within ~2 s
  as executions are added and cancelled;
- a key that exists but fails the HMAC (the key made with another pepper)
  answers 401 and the log names EAI_AUTH_PEPPER_FILE; start-up logs the
  pepper fingerprint, equal for equal peppers and different otherwise;
- each replica logs its node id at start (two starts, two ids);
- scheduler.lease_ms below 3000 stops start-up (3000 starts);
- a second eaid on a data dir in use is refused; after kill -9 of the
  first, a new one starts on it."""
import json
import os
import re
import signal
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, ensure_image, run_cases  # noqa: E402

IMAGE = "python:3.11-slim"
NODE = re.compile(r"node id ([0-9a-f-]{36})")
FP = re.compile(r"\(fingerprint ([0-9a-f]{12})\)")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def no_runsc():
    return {"EAI_SANDBOX_RUNSC": "/nonexistent"}


def metric(env, name):
    with urllib.request.urlopen(env.url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^%s(?:\{\})? ([0-9.e+]+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def queued_by_api(env):
    st, b = env.api("GET", "/v1/sandbox/executions?status=queued&limit=100")
    check(st == 200, "list: %s %s" % (st, b))
    items = b.get("items", b.get("data", b)) if isinstance(b, dict) else b
    return len(items)


def wait_for(fn, want, timeout=6.0):
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        got = fn()
        if got == want:
            return got
        time.sleep(0.2)
    return got


def case_queued_gauge_fresh_on_busy_replica():
    tmp = tempfile.mkdtemp(prefix="eai-gauge-")
    cfg = write(os.path.join(tmp, "eaid.yaml"), "scheduler:\n  max_concurrent: 1\n  max_per_tenant: 1\n")
    e = Env(config=cfg, tmp=tmp)
    e.own_tmp = True
    try:
        e.make_key()
        e.start(ready_path="/readyz", timeout=120)
        body = {"profile": "gvisor-small", "image": IMAGE, "command": ["sleep", "60"]}
        ids = []
        st, r = e.api("POST", "/v1/sandbox/executions", body)
        check(st == 202, "submit: %s %s" % (st, r))
        ids.append(r["id"])
        # the one slot taken
        deadline = time.time() + 60
        while time.time() < deadline:
            st, b = e.api("GET", "/v1/sandbox/executions/" + ids[0])
            if b.get("status") == "running":
                break
            time.sleep(0.3)
        check(b.get("status") == "running", "first never ran: %s" % b)
        for n in (3, 7):
            while len(ids) - 1 < n:
                st, r = e.api("POST", "/v1/sandbox/executions", body)
                check(st == 202, "submit: %s %s" % (st, r))
                ids.append(r["id"])
            got = wait_for(lambda: metric(e, "eai_sandbox_queued"), float(n), timeout=4)
            check(got == float(n), "gauge %s, %d queued (list API %d)" % (got, n, queued_by_api(e)))
            check(queued_by_api(e) == n, "list API")
        # cancel two queued ones: the gauge follows down too
        for eid in ids[-2:]:
            e.api("POST", "/v1/sandbox/executions/%s/cancel" % eid)
        got = wait_for(lambda: metric(e, "eai_sandbox_queued"), 5.0, timeout=4)
        check(got == 5.0, "gauge %s after cancelling 2 of 7" % got)
        check(metric(e, "eai_sandbox_running") == 1.0, "running gauge")
        for eid in ids:
            e.api("POST", "/v1/sandbox/executions/%s/cancel" % eid)
        check(wait_for(lambda: metric(e, "eai_sandbox_queued"), 0.0, timeout=6) == 0.0, "gauge back to 0")
    finally:
        e.stop()


def case_pepper_mismatch_hint():
    e = Env(env=no_runsc())
    try:
        other = write(os.path.join(e.tmp, "other-pepper"), "ab" * 32 + "\n")
        os.chmod(other, 0o600)
        e.extra_env["EAI_AUTH_PEPPER_FILE"] = other
        e.make_key()  # made with the other pepper
        good_key = e.key
        del e.extra_env["EAI_AUTH_PEPPER_FILE"]
        e.start()  # the server's own pepper (<data_dir>/pepper)
        st, b = e.api("GET", "/v1/sandbox/executions")
        check(st == 401, "a key of another pepper: %s %s" % (st, b))
        time.sleep(0.3)
        log = e.log_text()
        check("EAI_AUTH_PEPPER_FILE" in log and good_key.split("_")[1] in log,
              "no pepper hint naming the key id: %s" % e.log_tail())
        fp_server = FP.search(log)
        check(fp_server, "no pepper fingerprint at start")
        e.stop(clean=False)
        # the same pepper on both sides: 200, same fingerprint as... the other file
        e.extra_env["EAI_AUTH_PEPPER_FILE"] = other
        open(e.log_path, "w").close()
        e.start()
        st, b = e.api("GET", "/v1/sandbox/executions")
        check(st == 200, "the key with its own pepper: %s %s" % (st, b))
        fp_other = FP.search(e.log_text())
        check(fp_other and fp_other.group(1) != fp_server.group(1), "fingerprints must differ for other peppers")
        check("fails the HMAC" not in e.log_text(), "hint logged for a good key")
        # a wrong secret logs the hint too (once a minute at most)
        bad = good_key[:-4] + ("0000" if not good_key.endswith("0000") else "1111")
        e.key = bad
        st, _ = e.api("GET", "/v1/sandbox/executions")
        check(st == 401, "wrong secret")
        e.key = good_key
    finally:
        e.stop()


def case_node_id_logged():
    ids = []
    for _ in range(2):
        e = Env(env=no_runsc())
        try:
            e.start()
            m = NODE.search(e.log_text())
            check(m, "no node id in the start log: %s" % e.log_tail())
            ids.append(m.group(1))
        finally:
            e.stop()
    check(ids[0] != ids[1], "two starts, one node id: %s" % ids)


def case_lease_below_3000_refused():
    tmp = tempfile.mkdtemp(prefix="eai-lease-")
    for lease, ok in ((2999, False), (1000, False), (3000, True)):
        cfg = write(os.path.join(tmp, "l%d.yaml" % lease), "scheduler:\n  lease_ms: %d\n" % lease)
        e = Env(config=cfg, env=no_runsc())
        try:
            if ok:
                e.start()
            else:
                p = e.spawn()
                p.wait(timeout=30)
                check(p.returncode != 0, "lease_ms %d: started" % lease)
                check("lease_ms" in e.log_text(), "lease_ms %d: no reason: %s" % (lease, e.log_tail()))
        finally:
            e.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def case_one_eaid_per_data_dir():
    a = Env(env=no_runsc())
    try:
        a.start()
        b = Env(env=no_runsc(), tmp=a.tmp, data=a.data)
        p = b.spawn()
        try:
            p.wait(timeout=30)
        except Exception:
            raise AssertionError("a second eaid started on a data dir in use")
        check(p.returncode != 0, "second eaid exit status 0")
        check("in use by another eaid (pid %d" % a.proc.pid in b.log_text(), "reason: %s" % b.log_tail())
        # the first still serves
        with urllib.request.urlopen(a.url + "/healthz", timeout=5) as r:
            check(r.status == 200, "first replica")
        # kill -9: the kernel drops the lock; a new eaid starts on the dir
        os.killpg(a.proc.pid, signal.SIGKILL)
        a.proc.wait()
        c = Env(env=no_runsc(), tmp=a.tmp, data=a.data)
        try:
            c.start()
        finally:
            c.stop(clean=False)
    finally:
        a.stop()


def main():
    ensure_image()
    run_cases([(n, f) for n, f in sorted(globals().items()) if n.startswith("case_")])


if __name__ == "__main__":
    main()
