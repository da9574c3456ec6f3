#!/usr/bin/env python3
"""Faults injected, nothing lost (issue 19 item 4), real eaid and real runsc
on SQLite:

- kill -9 of eaid with 30 executions queued and running (4 at a time):
  restarted, every one is terminal within the lease plus a minute, each has
  exactly one usage event (none ran twice, none lost), no sandbox, cgroup
  leaf or bundle is left;
- a sandbox's runsc-sandbox (then another's gofer) SIGKILLed from outside
  mid-run: that execution ends error/sandbox_failed, the others exit 0,
  nothing leaks;
- with EAI_TEST_PG_*_URL: two replicas on one PostgreSQL database, 24
  executions in flight, kill -9 of one: all terminal within the lease plus a
  minute (the survivor recovers the dead one's), usage exactly once, the
  dead one's sandboxes gone before its restart (watchdog)."""
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, Fail, check, ensure_image, pg_fresh_db, pg_urls, psql, run_cases, with_db, write_pepper  # noqa: E402
from test_crash_sandboxes import cleanup, leftovers, procs_of, write  # noqa: E402

IMAGE = "python:3.11-slim"
LEASE_MS = 5000


def start(tmp=None, extra=""):
    tmp = tmp or tempfile.mkdtemp(prefix="eai-faults-")
    cfg = write(os.path.join(tmp, "eaid.yaml"),
                "isolation:\n  gvisor:\n    pool: 0\n"
                "scheduler:\n  max_concurrent: 4\n  max_per_tenant: 4\n  lease_ms: %d\n%s" % (LEASE_MS, extra))
    e = Env(config=cfg, tmp=tmp)
    e.own_tmp = True  # stop() removes it
    e.make_key()
    e.start(ready_path="/readyz", timeout=120)
    return e


def submit(e, command, project="faults", timeout_s=30):
    body = {"profile": "gvisor-small", "image": IMAGE, "command": command, "project_id": project,
            "limits": {"timeout_s": timeout_s}}
    st, r = e.api("POST", "/v1/sandbox/executions", body)
    check(st == 202, "submit: %s %s" % (st, r))
    return r["id"]


def status(e, eid):
    st, b = e.api("GET", "/v1/sandbox/executions/" + eid)
    check(st == 200, "GET: %s %s" % (st, b))
    return b


def usage_by_execution(e, project):
    st, b = e.api("GET", "/v1/finops/usage?project_id=%s&limit=1000" % project)
    check(st == 200, "usage: %s %s" % (st, b))
    n = {}
    for ev in b["usage"]:
        n[ev.get("execution_id")] = n.get(ev.get("execution_id"), 0) + 1
    return n


def wait_gone(e, timeout, what):
    deadline = time.time() + timeout
    left = leftovers(e)
    while left and time.time() < deadline:
        time.sleep(0.5)
        left = leftovers(e)
    check(not left, "%s: left: %s" % (what, "; ".join(left[:6])))


def case_kill9_with_30_in_flight():
    e = start()
    try:
        ids = [submit(e, ["sh", "-c", "echo run-%d; sleep 1" % i]) for i in range(30)]
        deadline = time.time() + 60
        while time.time() < deadline:
            running = sum(1 for i in ids[:8] if status(e, i)["status"] == "running")
            if running >= 3:
                break
            time.sleep(0.2)
        before = {i: status(e, i)["status"] for i in ids}
        check(list(before.values()).count("queued") >= 10, "not enough queued: %s" % before)
        os.kill(e.proc.pid, signal.SIGKILL)
        e.proc.wait(timeout=10)
        t_kill = time.time()
        e.start(ready_path="/readyz", timeout=120)
        limit = t_kill + LEASE_MS / 1000 + 60
        final = {}
        for i in ids:
            b = e.wait_terminal(i, timeout=max(1, limit - time.time()))
            final[i] = b
        for i, b in final.items():
            if before[i] == "queued":
                # queued when eaid died: it runs (once) after the restart
                check(b["status"] == "succeeded", "%s queued then %s %s" % (i, b["status"], b.get("error")))
            else:
                # running when eaid died: its run is lost and said so (or it had just finished)
                check(b["status"] == "succeeded" or (b.get("error") or {}).get("code") == "interrupted",
                      "%s running then %s %s" % (i, b["status"], b.get("error")))
        interrupted = [i for i, b in final.items() if (b.get("error") or {}).get("code") == "interrupted"]
        check(all(before[i] == "running" for i in interrupted),
              "interrupted but was queued: %s" % [i for i in interrupted if before[i] != "running"])
        # usage events exactly once per execution (none twice, none lost)
        deadline = time.time() + 20
        n = {}
        while time.time() < deadline:
            n = usage_by_execution(e, "faults")
            if all(n.get(i) == 1 for i in ids):
                break
            time.sleep(0.5)
        bad = {i: n.get(i, 0) for i in ids if n.get(i, 0) != 1}
        check(not bad, "usage events not exactly once: %s" % bad)
        wait_gone(e, 20, "after recovery")
        print("  %d interrupted, %d ran after the restart, all terminal %.1f s after kill -9" %
              (len(interrupted), len(ids) - len(interrupted), time.time() - t_kill), flush=True)
    finally:
        cleanup(e)


def sandbox_pids(e, eid, kind):
    """pids of runsc-<kind> (sandbox or gofer) of the execution eid (its
    bundle path, in the full command line, names the execution)."""
    out = []
    for p, _ in procs_of(e.data):
        try:
            with open("/proc/%d/cmdline" % p, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if cmd.startswith(b"runsc-" + kind.encode()) and eid.encode() in cmd:
            out.append(p)
    return out


def case_sandbox_process_killed_from_outside():
    e = start()
    try:
        victims = {}
        ids = [submit(e, ["sleep", "6"]) for _ in range(4)]
        deadline = time.time() + 60
        while time.time() < deadline and len(victims) < 2:
            for kind, eid in (("sandbox", ids[0]), ("gofer", ids[1])):
                if kind not in victims:
                    # the full cmdline has the bundle path, which names the execution
                    pids = sandbox_pids(e, eid, kind)
                    if pids and status(e, eid)["status"] == "running":
                        time.sleep(0.5)
                        for p in pids:
                            os.kill(p, signal.SIGKILL)
                        victims[kind] = eid
            time.sleep(0.1)
        check(len(victims) == 2, "could not find the sandbox processes: %s" % victims)
        for kind, eid in victims.items():
            b = e.wait_terminal(eid, timeout=60)
            check(b["status"] == "error" and (b.get("error") or {}).get("code") == "sandbox_failed",
                  "runsc-%s killed: %s %s exit %s" % (kind, b["status"], b.get("error"), b.get("exit_code")))
        for eid in ids[2:]:
            b = e.wait_terminal(eid, timeout=60)
            check(b["status"] == "succeeded",
                  "bystander: %s %s %s" % (b["status"], b.get("exit_code"), b.get("error")))
        wait_gone(e, 20, "after the kills")
    finally:
        cleanup(e)


def case_kill9_one_of_two_replicas_on_postgres():
    """Two replicas on one PostgreSQL database, 24 executions in flight, kill
    -9 of one: every execution terminal within the lease plus a minute, usage
    events exactly once, nothing left on either data dir.  Skipped without
    EAI_TEST_PG_*_URL."""
    if not pg_urls():
        print("  (no PostgreSQL: EAI_TEST_PG_*_URL unset)")
        return
    owner, app, sup = pg_urls()
    db = "eai_hostile_faults"
    pg_fresh_db(sup, db)
    tmp = tempfile.mkdtemp(prefix="eai-faults-pg-")
    pepper = write_pepper(tmp)
    cfg = write(os.path.join(tmp, "eaid.yaml"),
                "isolation:\n  gvisor:\n    pool: 0\n"
                "scheduler:\n  max_concurrent: 2\n  max_per_tenant: 2\n  lease_ms: %d\n" % LEASE_MS)
    common = {"EAI_DATABASE_URL": with_db(app, db), "EAI_AUTH_PEPPER_FILE": pepper}
    reps = []
    try:
        cli = Env(config=cfg, env=common)
        cli.pg_migrate(with_db(owner, db), with_db(app, db))
        key = cli.make_key("faults-pg")
        cli.stop()
        for _ in range(2):
            e = Env(config=cfg, env=common)
            e.key = key
            reps.append(e)
            e.start(ready_path="/readyz", timeout=120)
        ids = [submit(reps[i % 2], ["sh", "-c", "echo r; sleep 1"], project="faults-pg") for i in range(24)]
        deadline = time.time() + 60
        while time.time() < deadline and not any(status(reps[1], i)["status"] == "running" for i in ids[:6]):
            time.sleep(0.2)
        time.sleep(1)
        victim = reps[0]
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(timeout=10)
        t_kill = time.time()
        limit = t_kill + LEASE_MS / 1000 + 60
        final = {}
        for i in ids:
            final[i] = reps[1].wait_terminal(i, timeout=max(1, limit - time.time()))
        bad = {i: (b["status"], (b.get("error") or {}).get("code")) for i, b in final.items()
               if not (b["status"] == "succeeded" or (b.get("error") or {}).get("code") == "interrupted")}
        check(not bad, "unexpected ends: %s" % bad)
        interrupted = sum(1 for b in final.values() if (b.get("error") or {}).get("code") == "interrupted")
        deadline = time.time() + 20
        n = {}
        while time.time() < deadline:
            n = usage_by_execution(reps[1], "faults-pg")
            if all(n.get(i) == 1 for i in ids):
                break
            time.sleep(0.5)
        bad = {i: n.get(i, 0) for i in ids if n.get(i, 0) != 1}
        check(not bad, "usage events not exactly once: %s" % bad)
        # the killed replica's sandboxes died with it (watchdog); its restart sweeps the rest
        wait_gone(victim, 20, "killed replica")
        victim.start(ready_path="/readyz", timeout=120)
        wait_gone(victim, 20, "killed replica after restart")
        wait_gone(reps[1], 20, "surviving replica")
        print("  %d interrupted (the killed replica's), %d succeeded, all terminal %.1f s after kill -9" %
              (interrupted, len(ids) - interrupted, time.time() - t_kill), flush=True)
    finally:
        for e in reps:
            cleanup(e)
        __import__("shutil").rmtree(tmp, ignore_errors=True)
        try:
            psql(sup, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % db)
        except Exception:  # noqa: BLE001
            pass


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: needs root (runsc, cgroups)")
        sys.exit(77)
    ensure_image()
    run_cases([
        ("kill9_with_30_in_flight", case_kill9_with_30_in_flight),
        ("sandbox_process_killed_from_outside", case_sandbox_process_killed_from_outside),
        ("kill9_one_of_two_replicas_on_postgres", case_kill9_one_of_two_replicas_on_postgres),
    ])
