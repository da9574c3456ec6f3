#!/usr/bin/env python3
"""Chaos with several faults at once (issue 36 item 10): a benchmark-style
script, not a CI test.  Real `eaid serve` replicas on one real PostgreSQL
(a cluster of its own, tests/support/pg_cluster.sh, so it may restart it),
real runsc sandboxes, real HTTP over loopback.

    EAI_BUILD_DIR=build EAI_IMAGE_DIR=build/images EAI_SANDBOX_RUNSC=... \\
        python3 bench/chaos.py [--replicas 5] [--executions 1000] [--clients 32] \\
            [--replica-kill-s 20] [--sandbox-kill-s 10] [--pg-restarts 2] [--max-s 1800]

While CLIENTS threads submit EXECUTIONS executions (each POST carries an
Idempotency-Key, and a POST that fails on a dying replica is retried on
another one with the same key) to random live replicas:
  - every REPLICA_KILL_S a random replica is killed with SIGKILL (its whole
    process group: eaid, runsc, the sandboxes), then restarted on the same
    data directory 2 s later;
  - every SANDBOX_KILL_S one running runsc sandbox (`runsc ... boot`) of any
    replica is killed with SIGKILL from outside;
  - PostgreSQL is restarted (`pg_ctl restart -m fast`) PG_RESTARTS times,
    evenly spread over the submission phase.
Then every id is polled until terminal and the database is read:
  lost        accepted ids without a terminal record (must be 0)
  twice       ids started more than once, from every replica's debug log
              line "execution <id> started on", killed instances' logs
              included (must be 0)
  finished    `sandbox.finish` audit events per execution (must be 1 each)
  usage       usage events (ledger + outbox) per terminal execution (must be 1
              each: exactly once, even for those ended by a fault)
  overrun     records whose finished_at - started_at exceeds timeout_s + 15 s
              (must be 0)
  orphans     processes naming a killed instance's data dir, alive 30 s after
              its successor was ready (the start-up sweep must get them; must
              be 0), and any process left after the graceful stop (must be 0)
The last line is exactly:
  executions=<n> lost=<n> twice=<n> finish_not_once=<n> usage_not_once=<n> overrun=<n> orphans=<n>
  statuses=<json> replica_kills=<n> sandbox_kills=<n> pg_restarts=<n> wall_s=<s> ok=<0|1>
Exit status 0 when ok.  Figures: docs/performance.md "Chaos".
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "hostile"))
from eaid_env import Env, check, ensure_image, pg_fresh_db, psql, with_db, write_pepper  # noqa: E402

DB = "eai_chaos"
IMAGE = "python:3.11-slim"
TIMEOUT_S = 60
PGBIN = "/usr/lib/postgresql/15/bin"
STARTED = re.compile(r"execution (sbx_[0-9a-f-]+) started on")
TERMINAL = ("succeeded", "failed", "timeout", "oom_killed", "cancelled", "error")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print("[%7.1f] %s" % (time.time() - T0, msg), flush=True)


T0 = time.time()


def boot_time():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    return 0


BTIME = boot_time()


def procs_naming(path):
    """[(pid, start epoch s, cmdline)] of processes whose command line names path."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            if path not in cmd:
                continue
            with open("/proc/%s/stat" % pid) as f:
                st = f.read()
            start = int(st.rsplit(")", 1)[1].split()[19]) / CLK_TCK + BTIME
        except (OSError, ValueError, IndexError):
            continue
        out.append((int(pid), start, cmd))
    return out


class Node:
    """One replica slot: a data dir that successive eaid instances reuse."""

    def __init__(self, i, work, cfg, common):
        self.name = "r%d" % i
        self.tmp = os.path.join(work, self.name)
        os.makedirs(self.tmp, exist_ok=True)
        self.cfg, self.common = cfg, common
        self.env = None
        self.logs = []
        self.killed_at = None    # last SIGKILL (epoch s)
        self.ready_at = None     # its successor's readiness (epoch s)
        self.lock = threading.Lock()

    @property
    def data(self):
        return os.path.join(self.tmp, "data")

    def start(self, key):
        e = Env(config=self.cfg, env=dict(self.common), tmp=self.tmp, data=self.data)
        e.key = key
        e.start(ready_path="/readyz", timeout=180)
        self.logs.append(e.log_path)
        with self.lock:
            self.env = e
            self.ready_at = time.time()

    def kill(self):
        with self.lock:
            e, self.env = self.env, None
        if e is None:
            return False
        try:
            os.killpg(e.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        e.proc.wait()
        with self.lock:  # one consistent pair for orphan_watch
            self.ready_at = None
            self.killed_at = time.time()
        return True

    def kill_window(self):
        """(killed_at, ready_at) of the last kill and the successor's start."""
        with self.lock:
            return self.killed_at, self.ready_at

    def live(self):
        with self.lock:
            return self.env


def api(url, key, method, path, body=None, headers=None, timeout=30):
    h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    h.update(headers or {})
    req = urllib.request.Request(url + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"null")
        except ValueError:
            return e.code, raw


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=5)
    ap.add_argument("--executions", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--replica-kill-s", type=float, default=20)
    ap.add_argument("--sandbox-kill-s", type=float, default=10)
    ap.add_argument("--pg-restarts", type=int, default=2)
    ap.add_argument("--max-s", type=float, default=1800, help="bound on the whole run")
    ap.add_argument("--max-concurrent", type=int, default=2, help="scheduler.max_concurrent per replica")
    a = ap.parse_args()
    deadline = time.time() + a.max_s

    ensure_image()
    work = tempfile.mkdtemp(prefix="eai-chaos-")
    os.chmod(work, 0o755)  # the postgres user reaches its cluster under it
    pgdir = os.path.join(work, "pg")
    r = subprocess.run([os.path.join(ROOT, "tests", "support", "pg_cluster.sh"), "start", pgdir],
                       capture_output=True, text=True)
    check(r.returncode == 0, "pg_cluster.sh start: %s" % r.stderr)
    urls = dict(re.findall(r"(EAI_TEST_PG_\w+_URL)='([^']+)'", r.stdout))
    owner, app, sup = (urls["EAI_TEST_PG_%s_URL" % k] for k in ("OWNER", "APP", "SUPER"))
    pg_fresh_db(sup, DB)
    app_db, sup_db = with_db(app, DB), with_db(sup, DB)
    cfg = os.path.join(work, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("scheduler:\n  lease_ms: 3000\n  max_concurrent: %d\n  max_per_tenant: %d\n"
                "storage:\n  workers: 4\n" % (a.max_concurrent, a.max_concurrent))
    common = {"EAI_DATABASE_URL": app_db, "EAI_AUTH_PEPPER_FILE": write_pepper(work), "EAI_LOG_LEVEL": "debug"}
    if os.environ.get("EAI_SANDBOX_RUNSC"):
        common["EAI_SANDBOX_RUNSC"] = os.environ["EAI_SANDBOX_RUNSC"]
    nodes = []
    stop = threading.Event()
    counts = collections.Counter()
    orphans = []
    ids = {}                 # index -> execution id
    ids_lock = threading.Lock()
    try:
        cli = Env(config=cfg, env=dict(common), tmp=os.path.join(work, "cli"))
        cli.pg_migrate(with_db(owner, DB), app_db)
        key = cli.make_key("chaos")
        nodes = [Node(i, work, cfg, common) for i in range(a.replicas)]
        for n in nodes:
            n.start(key)
        log("%d replicas ready" % len(nodes))

        def live_url():
            while not stop.is_set():
                up = [e for e in (n.live() for n in nodes) if e is not None]
                if up:
                    return random.choice(up).url
                time.sleep(0.2)
            return None

        todo = list(range(a.executions))
        todo_lock = threading.Lock()

        def client():
            while not stop.is_set() and time.time() < deadline:
                with todo_lock:
                    if not todo:
                        return
                    i = todo.pop(0)
                body = {"profile": "gvisor-small", "image": IMAGE,
                        "command": ["python3", "-c", "import time; time.sleep(%.2f); print(%d)" % (random.random(), i)],
                        "limits": {"timeout_s": TIMEOUT_S}}
                idem = "chaos-%s-%d" % (RUN, i)
                for attempt in range(60):
                    url = live_url()
                    if url is None:
                        return
                    try:
                        st, b = api(url, key, "POST", "/v1/sandbox/executions", body, {"Idempotency-Key": idem})
                    except (urllib.error.URLError, OSError):
                        st, b = None, None
                    if st in (200, 201, 202):
                        with ids_lock:
                            ids[i] = b["id"]
                        break
                    counts["post_retry_%s" % st] += 1
                    time.sleep(0.5 + attempt * 0.1)

        def replica_killer():
            while not stop.wait(a.replica_kill_s):
                n = random.choice(nodes)
                if n.kill():
                    counts["replica_kills"] += 1
                    log("SIGKILL %s" % n.name)
                    if stop.wait(2):
                        return
                    try:
                        n.start(key)
                        log("%s restarted" % n.name)
                    except Exception as e:  # noqa: BLE001 - reported, the run goes on
                        counts["restart_failed"] += 1
                        log("%s restart failed: %s" % (n.name, e))

        def sandbox_killer():
            while not stop.wait(a.sandbox_kill_s):
                boots = [p for p in procs_naming(work) if " boot " in p[2] and "runsc" in p[2]]
                if boots:
                    pid = random.choice(boots)[0]
                    try:
                        os.kill(pid, signal.SIGKILL)
                        counts["sandbox_kills"] += 1
                    except OSError:
                        pass

        def orphan_watch():
            while not stop.wait(1):
                now = time.time()
                for n in nodes:
                    killed_at, ready_at = n.kill_window()
                    if killed_at is None or ready_at is None or now < ready_at + 30:
                        continue
                    for pid, start, cmd in procs_naming(n.data):
                        if start < killed_at and pid not in [o[0] for o in orphans]:
                            orphans.append((pid, n.name, cmd[:160]))
                            log("orphan of a killed %s: pid %d %s" % (n.name, pid, cmd[:120]))

        def pg_restarter(n_restarts, span):
            for k in range(n_restarts):
                if stop.wait(span / (n_restarts + 1)):
                    return
                t = time.time()
                subprocess.run(["runuser", "-u", "postgres", "--", PGBIN + "/pg_ctl", "-D", pgdir + "/data",
                                "-l", pgdir + "/server.log", "-m", "fast", "-w", "-t", "60", "restart"],
                               capture_output=True, timeout=120)
                counts["pg_restarts"] += 1
                log("PostgreSQL restarted (%.1f s)" % (time.time() - t))

        t_start = time.time()
        clients = [threading.Thread(target=client, daemon=True) for _ in range(a.clients)]
        chaos = [threading.Thread(target=f, daemon=True) for f in (replica_killer, sandbox_killer, orphan_watch)]
        # PostgreSQL restarts spread over the expected submission phase (~1 s an execution per slot)
        expect_s = max(60.0, a.executions / max(1, a.replicas * a.max_concurrent) * 1.5)
        chaos.append(threading.Thread(target=pg_restarter, args=(a.pg_restarts, expect_s), daemon=True))
        for t in clients + chaos:
            t.start()
        for t in clients:
            t.join(max(1, deadline - time.time()))
        log("%d of %d submitted (%s)" % (len(ids), a.executions, dict(counts)))

        # every accepted id until terminal, the faults still going on
        done = {}
        while time.time() < deadline and len(done) < len(ids):
            url = live_url()
            for i, x in list(ids.items()):
                if x in done:
                    continue
                try:
                    st, b = api(url, key, "GET", "/v1/sandbox/executions/" + x, timeout=10)
                except (urllib.error.URLError, OSError):
                    break
                if st == 200 and b.get("status") in TERMINAL:
                    done[x] = b
            time.sleep(1)
        stop.set()
        for t in chaos:
            t.join(130)
        wall = time.time() - t_start
        log("%d of %d terminal after %.0f s" % (len(done), len(ids), wall))

        # the books
        lost = len(ids) - len(done) + (a.executions - len(ids))
        starts = collections.Counter()
        for n in nodes:
            for p in n.logs:
                with open(p, errors="replace") as f:
                    for m in STARTED.finditer(f.read()):
                        starts[m.group(1)] += 1
        twice = sum(1 for x in ids.values() if starts[x] > 1)
        log("start lines in the replicas' logs: %d for %d executions" % (sum(starts.values()), len(ids)))
        fin = dict(l.split("|") for l in psql(sup_db, "SELECT event->>'target', count(*) FROM "
                                              "eai.audit_events WHERE action = 'sandbox.finish' GROUP BY 1").split())
        finish_not_once = sum(1 for x in done if fin.get(x, fin.get(x[4:], "0")) != "1")
        usage = collections.Counter()
        for q in ("SELECT event->>'execution_id' FROM eai.usage_ledger",
                  "SELECT event->>'execution_id' FROM eai.usage_outbox WHERE event->>'execution_id' IS NOT NULL"
                  " AND event->>'kind' IS DISTINCT FROM 'callback'"):
            for line in psql(sup_db, q).split():
                usage[line] += 1
        usage_not_once = sum(1 for x in done if usage.get(x, usage.get(x[4:], 0)) != 1)
        overrun = 0
        for x, b in done.items():
            s, e = b.get("started_at"), b.get("finished_at")
            if s and e:
                d = iso(e) - iso(s)
                if d > TIMEOUT_S + 15:
                    overrun += 1
                    log("overrun %s: %.1f s" % (x, d))
        statuses = collections.Counter(b["status"] for b in done.values())
        errors = collections.Counter((b.get("error") or {}).get("code") for b in done.values() if b["status"] == "error")
        for n in nodes:
            e = n.live()
            if e is not None:
                e.stop(clean=False)
        time.sleep(1)
        left = [p for p in procs_naming(work) if "postgres" not in p[2]]  # its cluster runs on until the end
        for pid, _, cmd in left:
            log("left after the graceful stop: pid %d %s" % (pid, cmd[:120]))
        n_orphans = len(orphans) + len(left)
        ok = not (lost or twice or finish_not_once or usage_not_once or overrun or n_orphans)
        log("errors by code: %s; retries: %s" % (dict(errors), {k: v for k, v in counts.items() if "retry" in k}))
        print("executions=%d lost=%d twice=%d finish_not_once=%d usage_not_once=%d overrun=%d orphans=%d"
              % (a.executions, lost, twice, finish_not_once, usage_not_once, overrun, n_orphans))
        print("statuses=%s replica_kills=%d sandbox_kills=%d pg_restarts=%d wall_s=%.0f ok=%d"
              % (json.dumps(dict(statuses), sort_keys=True), counts["replica_kills"], counts["sandbox_kills"],
                 counts["pg_restarts"], wall, ok), flush=True)
        return 0 if ok else 1
    finally:
        stop.set()
        for n in nodes:
            n.kill()
        for pid, _, cmd in procs_naming(work):
            if "postgres" not in cmd:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        subprocess.run([os.path.join(ROOT, "tests", "support", "pg_cluster.sh"), "stop", pgdir], capture_output=True)
        with open("/proc/self/mountinfo") as f:
            mps = [l.split()[4] for l in f if l.split()[4].startswith(work + "/")]
        for mp in sorted(mps, key=len, reverse=True):
            subprocess.run(["umount", "-l", mp], capture_output=True)
        if os.environ.get("EAI_CHAOS_KEEP") != "1":
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("kept %s" % work)


def iso(s):
    import datetime
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


RUN = uuid.uuid4().hex[:8]

if __name__ == "__main__":
    sys.exit(main())
