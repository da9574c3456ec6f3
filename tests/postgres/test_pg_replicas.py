#!/usr/bin/python3
"""Two `eaid serve` replicas sharing one PostgreSQL database.

Real processes, real HTTP over loopback, real runsc sandboxes, real
PostgreSQL (the cluster of tests/support/pg_cluster.sh, in a database of its
own: eai_replicas).  Steps, all through the binary's own CLI and API:

  1. `eaid migrate --app-role eai_app` as the owner, twice (idempotent);
     tenant and key created with `eaid tenants create` / `eaid keys create`
     with EAI_DATABASE_URL set to the application role.
  2. shared queue: 2 replicas, 50 executions posted alternately to both:
     every one ends `succeeded` (0 lost) and the replicas ran 50 in total
     (0 double runs: each execution is counted once by the replica that ran
     it, from /metrics), and the claims are spread over both.
  3. a replica dies mid-run (SIGKILL of its whole process group, runsc
     included): its running executions are ended `error` / `interrupted`
     (or taken over) once their lease expires; none is left running, none
     runs twice, and the queued ones still run on the surviving replica.

Usage: test_pg_replicas.py <build dir>.  Needs EAI_TEST_PG_OWNER_URL,
EAI_TEST_PG_APP_URL and EAI_TEST_PG_SUPER_URL (exit 77 = skip when unset).
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
DB = "eai_replicas"
IMAGE = "python:3.11-slim"
IMAGE_PACKAGES = "python3-minimal,libpython3.11-stdlib"
LEASE_MS = 3000

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def with_db(url, db):
    """Same server/user, other database."""
    p = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, "/" + db, p.query, p.fragment))


def psql(url, sql):
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    def __init__(self, name, eaid, env, workdir, config, data_name=None):
        self.name = name
        self.port = free_port()
        self.data = os.path.join(workdir, data_name or name)
        os.makedirs(self.data, mode=0o700, exist_ok=True)
        self.logpath = os.path.join(workdir, name + ".log")
        self.log = open(self.logpath, "w")
        e = dict(env)
        e["EAI_LISTEN"] = "127.0.0.1:%d" % self.port
        e["EAI_DATA_DIR"] = self.data
        # where the other replicas forward calls on this one's sessions
        e["EAI_ADVERTISE_URL"] = "http://127.0.0.1:%d" % self.port
        # Own process group: killing the group kills its runsc children too,
        # as when a machine dies.
        self.proc = subprocess.Popen([eaid, "serve", "--config", config], env=e, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.base = "http://127.0.0.1:%d" % self.port

    def wait_ready(self, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.2)
        return False

    def kill(self):
        """SIGKILL the whole process group at once (eaid, runsc, sandboxes)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def sweep(self):
        """Kill what is left of this replica's sandboxes (processes whose
        command line names its own data directory)."""
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cmd = f.read().decode(errors="replace")
            except OSError:
                continue
            if self.data in cmd:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass

    def stop(self):
        if self.log.closed:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.sweep()
        self.log.close()

    def executions_total(self):
        with urllib.request.urlopen(self.base + "/metrics", timeout=5) as r:
            text = r.read().decode()
        n = 0.0
        for line in text.splitlines():
            if line.startswith("eai_sandbox_executions_total{") or line.startswith("eai_sandbox_executions_total "):
                n += float(line.rsplit(" ", 1)[1])
        return n


def api(base, key, method, path, body=None, timeout=70):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + key)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def post_exec(base, key, code):
    body = {"profile": "gvisor-small", "image": IMAGE, "command": ["python3", "-c", code],
            "limits": {"timeout_s": 60}}
    return api(base, key, "POST", "/v1/sandbox/executions", body)


def wait_terminal(bases, key, ids, timeout):
    """Poll until every id is terminal; returns {id: record}."""
    done = {}
    end = time.time() + timeout
    i = 0
    while time.time() < end and len(done) < len(ids):
        for x in ids:
            if x in done:
                continue
            st, rec = api(bases[i % len(bases)], key, "GET", "/v1/sandbox/executions/%s?wait_s=1" % x)
            i += 1
            if st == 200 and rec.get("status") not in ("queued", "running"):
                done[x] = rec
        time.sleep(0.2)
    return done


def mounts_under(path):
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            if mp.startswith(path.rstrip("/") + "/"):
                out.append(mp)
    return out


def run_cli(eaid, env, *args):
    out = subprocess.run([eaid, *args], env=env, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        print("  eaid %s: rc=%d\n%s%s" % (" ".join(args), out.returncode, out.stdout, out.stderr))
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("EAI_BUILD_DIR", "build")
    owner_url = os.environ.get("EAI_TEST_PG_OWNER_URL")
    app_url = os.environ.get("EAI_TEST_PG_APP_URL")
    super_url = os.environ.get("EAI_TEST_PG_SUPER_URL")
    if not (owner_url and app_url and super_url):
        print("SKIP: no PostgreSQL (EAI_TEST_PG_OWNER_URL / EAI_TEST_PG_APP_URL / EAI_TEST_PG_SUPER_URL unset)")
        return SKIP
    eaid = os.path.join(build, "eaid")
    if not os.access(eaid, os.X_OK):
        print("FAIL: %s not built" % eaid)
        return 1
    runsc = os.environ.get("EAI_SANDBOX_RUNSC", "/usr/bin/runsc")
    if not os.access(runsc, os.X_OK):
        print("FAIL: runsc not found at %s (the replica test runs real sandboxes)" % runsc)
        return 1

    owner_db, app_db = with_db(owner_url, DB), with_db(app_url, DB)
    psql(super_url, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
    psql(super_url, "CREATE DATABASE %s OWNER eai_owner" % DB)
    psql(super_url, "GRANT CONNECT ON DATABASE %s TO eai_app" % DB)
    super_db = with_db(super_url, DB)

    workdir = tempfile.mkdtemp(prefix="eai-replicas-", dir=build)
    image_dir = os.environ.get("EAI_IMAGE_DIR") or os.path.join(build, "images")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("EAI_TEST_")}
    base_env.update({
        "EAI_IMAGE_DIR": image_dir,
        "EAI_AUTH_PEPPER_FILE": os.path.join(workdir, "pepper"),
        "EAI_SANDBOX_RUNSC": runsc,
        "EAI_LOG_LEVEL": "info",
    })
    with open(base_env["EAI_AUTH_PEPPER_FILE"], "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(base_env["EAI_AUTH_PEPPER_FILE"], 0o600)
    config = os.path.join(workdir, "eaid.yaml")
    handoff = os.path.join(workdir, "handoff")   # the directory every replica mounts (here: one disk)
    with open(config, "w") as f:
        f.write("scheduler:\n  lease_ms: %d\n  max_concurrent: 4\n  max_per_tenant: 4\n"
                "sessions:\n  handoff_dir: %s\n" % (LEASE_MS, handoff))

    replicas = []
    try:
        # The image, once (shared with the gVisor tests when EAI_IMAGE_DIR is set).
        env = dict(base_env, EAI_DATA_DIR=os.path.join(workdir, "cli"))
        os.makedirs(env["EAI_DATA_DIR"], mode=0o700, exist_ok=True)
        if not os.path.isdir(os.path.join(image_dir, "python", "3.11-slim", "rootfs")):
            print("building image %s into %s (once)" % (IMAGE, image_dir), flush=True)
            r = run_cli(eaid, env, "images", "build", IMAGE, "--packages", IMAGE_PACKAGES)
            if not check(r.returncode == 0, "image %s built" % IMAGE):
                return 1

        # 1. migrate as the owner, twice; tenant and key as the app role.
        for i in range(2):
            r = run_cli(eaid, dict(env, EAI_DATABASE_URL=owner_db), "migrate", "--app-role", "eai_app")
            check(r.returncode == 0, "eaid migrate --app-role eai_app as the owner (run %d)" % (i + 1))
        check(psql(super_db, "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                             " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id'"
                             " WHERE n.nspname = 'eai' AND c.relkind = 'r'"
                             " AND NOT (c.relrowsecurity AND c.relforcerowsecurity)") == "0",
              "every eai table with tenant_id: RLS enabled and forced")
        app_env = dict(env, EAI_DATABASE_URL=app_db)
        r = run_cli(eaid, app_env, "tenants", "create", "replicas")
        if not check(r.returncode == 0, "eaid tenants create (app role URL)"):
            return 1
        tenant = json.loads(r.stdout.strip().splitlines()[-1])["id"]
        r = run_cli(eaid, app_env, "keys", "create", "--tenant", tenant, "--name", "replicas")
        m = re.search(r"eai_[A-Za-z0-9]+_[A-Za-z0-9_\-]+", r.stdout)
        if not check(r.returncode == 0 and m is not None, "eaid keys create (app role URL)"):
            return 1
        key = m.group(0)
        check(psql(app_db, "SELECT count(*) FROM eai.sandbox_executions") == "0" and
              psql(app_db, "SELECT count(*) FROM eai.tenants") == "0",
              "the app role with no tenant set sees 0 rows")

        # 2. two replicas share the queue.
        serve_env = dict(base_env, EAI_DATABASE_URL=app_db)
        replicas = [Replica("r1", eaid, serve_env, workdir, config), Replica("r2", eaid, serve_env, workdir, config)]
        for rp in replicas:
            if not check(rp.wait_ready(), "%s ready on port %d" % (rp.name, rp.port)):
                return 1
        ids = []
        for i in range(50):
            st, body = post_exec(replicas[i % 2].base, key, "print(%d)" % i)
            if st in (200, 202):
                ids.append(body["id"])
            else:
                print("  POST %d -> %d %s" % (i, st, body))
        check(len(ids) == 50, "50 executions accepted (%d)" % len(ids))
        done = wait_terminal([rp.base for rp in replicas], key, ids, 240)
        statuses = {}
        for rec in done.values():
            statuses[rec["status"]] = statuses.get(rec["status"], 0) + 1
        check(len(done) == 50, "all 50 terminal, 0 lost (%d terminal)" % len(done))
        check(statuses.get("succeeded", 0) == 50, "all 50 succeeded (%s)" % statuses)
        check(all(rec.get("stdout") == "%d\n" % i for i, rec in
                  ((i, done.get(x, {})) for i, x in enumerate(ids))), "each one's own output")
        runs = [rp.executions_total() for rp in replicas]
        check(sum(runs) == 50, "50 runs in total across replicas, 0 double runs (%s)" % runs)
        owners = psql(super_db, "SELECT count(DISTINCT lease_owner) FROM eai.sandbox_executions")
        print("  claims per replica: %s, distinct lease owners: %s" % (runs, owners))
        check(min(runs) > 0, "both replicas ran executions")
        check(psql(super_db, "SELECT count(*) FROM eai.sandbox_executions WHERE status IN ('queued','running')") == "0",
              "nothing left queued or running")

        # 2b. sessions are stored (issue 31 item 1): one made on r1 is known
        # to r2 (its stored view; a call on it answers 409 with the reason),
        # listed there, and its end is seen there.
        st, ses = api(replicas[0].base, key, "POST", "/v1/sandbox/sessions",
                      {"profile": "gvisor-small", "image": IMAGE}, timeout=90)
        if check(st == 201, "a session on r1 (%s %s)" % (st, ses)):
            sid = ses["id"]
            # (its records are written on a worker: "running" lands a moment after the 201)
            end = time.time() + 10
            while time.time() < end:
                st, b = api(replicas[1].base, key, "GET", "/v1/sandbox/sessions/" + sid)
                if st != 200 or b.get("status") == "running":
                    break
                time.sleep(0.1)
            check(st == 200 and b.get("status") == "running" and "owner" not in b,
                  "r2 reads r1's session from storage (%s %s)" % (st, b))
            # a call on r2 is forwarded to r1 (its advertise_url), once
            st, b = api(replicas[1].base, key, "POST", "/v1/sandbox/sessions/%s/executions" % sid,
                        {"command": ["python3", "-c", "open('/tmp/via-r2', 'w').write('r2')"]})
            check(st == 202, "an execution posted to r2 is forwarded to r1 (%s %s)" % (st, b))
            if st == 202:
                done = wait_terminal([rp.base for rp in replicas], key, [b["id"]], 60)
                check(done.get(b["id"], {}).get("status") == "succeeded", "it ran in r1's session (%s)" % done)
            req = urllib.request.Request(replicas[1].base + "/v1/sandbox/sessions/%s/files/tmp/via-r2" % sid)
            req.add_header("Authorization", "Bearer " + key)
            with urllib.request.urlopen(req, timeout=30) as resp:
                check(resp.status == 200 and resp.read() == b"r2", "a file read through r2")
            req = urllib.request.Request(replicas[1].base + "/v1/sandbox/sessions/%s/executions" % sid,
                                         data=b'{"command": ["true"]}', method="POST")
            req.add_header("Authorization", "Bearer " + key)
            req.add_header("Content-Type", "application/json")
            req.add_header("X-EAI-Forwarded", "elsewhere")
            try:
                urllib.request.urlopen(req, timeout=30)
                check(False, "a request already forwarded is not forwarded again")
            except urllib.error.HTTPError as e:
                b = json.loads(e.read() or b"null")
                check(e.code == 409 and b["error"]["code"] == "conflict",
                      "a request already forwarded answers 409 conflict (%s %s)" % (e.code, b))
            # its executions go through the shared queue, but only r1 (the
            # process that runs it) claims them: none fails on r2
            sx = []
            for i in range(6):
                st, b = api(replicas[0].base, key, "POST", "/v1/sandbox/sessions/%s/executions" % sid,
                            {"command": ["python3", "-c", "print(%d)" % i]})
                if st == 202:
                    sx.append(b["id"])
            done = wait_terminal([rp.base for rp in replicas], key, sx, 120)
            check(len(sx) == 6 and all(done.get(x, {}).get("status") == "succeeded" and
                                       done[x].get("stdout") == "%d\n" % i for i, x in enumerate(sx)),
                  "6 executions of r1's session all run on r1 (%s)" %
                  [(done.get(x, {}).get("status"), done.get(x, {}).get("stdout")) for x in sx])
            st, b = api(replicas[1].base, key, "GET", "/v1/sandbox/sessions?status=live")
            check(st == 200 and [i["id"] for i in b.get("items", [])] == [sid], "r2 lists it (%s %s)" % (st, b))
            st, b = api(replicas[0].base, key, "DELETE", "/v1/sandbox/sessions/" + sid)
            check(st == 200 and b.get("status") == "ended", "r1 ends it (%s %s)" % (st, b))
            end = time.time() + 10
            while time.time() < end:
                st, b = api(replicas[1].base, key, "GET", "/v1/sandbox/sessions/" + sid)
                if b.get("status") == "ended":
                    break
                time.sleep(0.2)
            check(st == 200 and b.get("status") == "ended" and b.get("end_reason") == "deleted",
                  "r2 sees its end (%s %s)" % (st, b))
            check(psql(app_db, "SELECT count(*) FROM eai.sandbox_sessions") == "0",
                  "the app role with no tenant set sees no session")

        # 2c. three replicas, one session, concurrent calls through all three
        # (issue 31 item 3): every call runs once, in the one sandbox of its
        # owner (r2); never a second live copy on another replica.
        r2b = Replica("r2b", eaid, serve_env, workdir, config)
        replicas.append(r2b)
        if check(r2b.wait_ready(), "a third replica r2b ready on port %d" % r2b.port):
            st, ses = api(replicas[1].base, key, "POST", "/v1/sandbox/sessions",
                          {"profile": "gvisor-small", "image": IMAGE, "max_concurrent_executions": 2}, timeout=90)
            if check(st == 201, "a session on r2 (%s %s)" % (st, ses)):
                sid = ses["id"]
                end = time.time() + 10
                while time.time() < end:   # its record lands a moment after the 201
                    if api(r2b.base, key, "GET", "/v1/sandbox/sessions/" + sid)[1].get("status") == "running":
                        break
                    time.sleep(0.1)
                import concurrent.futures
                trio = [replicas[0], replicas[1], r2b]

                def call(i):
                    return api(trio[i % 3].base, key, "POST", "/v1/sandbox/sessions/%s/executions" % sid,
                               {"command": ["sh", "-c", "echo %d >> /tmp/calls" % i]})
                with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
                    answers = list(pool.map(call, range(30)))
                ids = [b["id"] for st, b in answers if st == 202]
                check(len(ids) == 30, "30 concurrent calls through 3 replicas accepted (%s)" %
                      [st for st, b in answers if st != 202][:5])
                done = wait_terminal([rp.base for rp in trio], key, ids, 180)
                check(len(done) == len(ids) and all(x.get("status") == "succeeded" for x in done.values()),
                      "all ran (%s)" % sorted({x.get("status") for x in done.values()}))
                req = urllib.request.Request(r2b.base + "/v1/sandbox/sessions/%s/files/tmp/calls" % sid)
                req.add_header("Authorization", "Bearer " + key)
                with urllib.request.urlopen(req, timeout=30) as resp:
                    lines = resp.read().decode().split()
                check(sorted(int(x) for x in lines) == list(range(30)), "each call ran exactly once, in one /tmp (%d lines)"
                      % len(lines))
                st, b = api(replicas[0].base, key, "GET", "/v1/sandbox/sessions/" + sid)
                copies = [rp.name for rp in trio
                          if os.path.isdir(os.path.join(rp.data, "gvisor", "work", "eai-ses-" + sid[4:]))]
                check(copies == ["r2"], "one live copy, on its owner: %s" % copies)
                st, b = api(r2b.base, key, "DELETE", "/v1/sandbox/sessions/" + sid)
                check(st == 200 and b.get("status") == "ended" and b.get("executions") == 30,
                      "ended through r2b, 30 executions counted (%s %s)" % (st, b.get("executions")))
        r2b.stop()

        # 2d. parked for any replica (issue 31 items 2 and 3): a session idle
        # on hA is paused and parked in the handoff directory; hA dies
        # (kill -9 of its whole group); two calls at once through r2 and hB:
        # exactly one replica claims it and restores it, the other call is
        # forwarded there, both see its /tmp; one live copy; billed once
        # with the cpu hA used.
        hA = Replica("hA", eaid, serve_env, workdir, config)
        hB = Replica("hB", eaid, serve_env, workdir, config)
        replicas += [hA, hB]
        if check(hA.wait_ready() and hB.wait_ready(), "replicas hA and hB ready"):
            st, ses = api(hA.base, key, "POST", "/v1/sandbox/sessions",
                          {"profile": "gvisor-small", "image": IMAGE, "idle_timeout_s": 2}, timeout=90)
            if check(st == 201, "a session on hA, idle_timeout_s 2 (%s %s)" % (st, ses)):
                sid = ses["id"]
                cid = "eai-ses-" + sid[4:]
                st, b = api(hA.base, key, "POST", "/v1/sandbox/sessions/%s/executions" % sid,
                            {"command": ["python3", "-c", "open('/tmp/state', 'w').write('kept-%s')\n"
                                         "x = sum(range(4 * 10**6))" % sid[4:12]]})
                done = wait_terminal([hA.base], key, [b.get("id")], 60) if st == 202 else {}
                check(done.get(b.get("id"), {}).get("status") == "succeeded", "its state written on hA (%s)" % done)
                row = ""
                end = time.time() + 30
                while time.time() < end:
                    row = psql(super_db, "SELECT owner || '|' || status || '|' || coalesce(doc->'x'->>'cpu_seconds', '')"
                                         " FROM eai.sandbox_sessions WHERE id = '%s'" % sid)
                    if row.startswith("parked|"):
                        break
                    time.sleep(0.2)
                parked_cpu = float(row.split("|")[2] or 0) if row.startswith("parked|") else 0.0
                check(row.startswith("parked|paused|") and parked_cpu > 0,
                      "idle: paused and parked, its record owned by no node, the cpu it used kept (%s)" % row)
                check(os.path.isdir(os.path.join(handoff, sid, "ckpt")) and
                      os.path.isfile(os.path.join(handoff, sid, "tmp", "state")),
                      "its checkpoint and /tmp in the handoff directory")
                check(not os.path.isdir(os.path.join(hA.data, "gvisor", "work", cid)), "nothing of it left on hA")
                hA.kill()
                hA.sweep()
                import concurrent.futures

                def call(rp):
                    return api(rp.base, key, "POST", "/v1/sandbox/sessions/%s/executions" % sid,
                               {"command": ["cat", "/tmp/state"]}, timeout=120)
                with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                    answers = list(pool.map(call, [replicas[1], hB]))
                ids = [b["id"] for st, b in answers if st == 202]
                check(len(ids) == 2, "two calls at once through r2 and hB accepted (%s)" % answers)
                done = wait_terminal([replicas[1].base, hB.base], key, ids, 120)
                check(len(done) == 2 and all(x.get("status") == "succeeded" and x.get("stdout") == "kept-" + sid[4:12]
                                             for x in done.values()),
                      "both ran in the restored session and read its /tmp (%s)" %
                      [(x.get("status"), x.get("stdout")) for x in done.values()])
                claimers = [rp.name for rp in (replicas[1], hB)
                            if "claimed from the handoff directory" in open(rp.logpath).read()]
                check(len(claimers) == 1, "exactly one replica claimed it: %s" % claimers)
                copies = [rp.name for rp in (replicas[1], hB)
                          if os.path.isdir(os.path.join(rp.data, "gvisor", "work", cid))]
                check(copies == claimers, "one live copy, on the claimer: %s" % copies)
                end = time.time() + 10
                while time.time() < end and os.path.exists(os.path.join(handoff, sid)):
                    time.sleep(0.1)
                check(not os.path.exists(os.path.join(handoff, sid)), "the handoff directory removed once it runs")
                other = hB if claimers == ["r2"] else replicas[1]
                st, b = api(other.base, key, "DELETE", "/v1/sandbox/sessions/" + sid)
                usage = (b or {}).get("usage") or {}
                check(st == 200 and b.get("status") == "ended" and usage.get("cpu_seconds", 0) >= parked_cpu,
                      "ended through the other replica (forwarded), billed with hA's cpu too (%s %s, parked at %.3f)"
                      % (st, usage, parked_cpu))
            # a parked session whose paused TTL ran out is ended by the claim, never restored
            st, ses = api(hB.base, key, "POST", "/v1/sandbox/sessions",
                          {"profile": "gvisor-small", "image": IMAGE, "idle_timeout_s": 1, "paused_ttl_s": 2},
                          timeout=90)
            if check(st == 201, "a session on hB, paused_ttl_s 2 (%s)" % st):
                sid = ses["id"]
                end = time.time() + 30
                while time.time() < end and not psql(super_db, "SELECT owner FROM eai.sandbox_sessions"
                                                               " WHERE id = '%s'" % sid).startswith("parked"):
                    time.sleep(0.2)
                time.sleep(2.5)
                st, b = api(replicas[1].base, key, "POST", "/v1/sandbox/sessions/%s/executions" % sid,
                            {"command": ["true"]})
                check(st == 409 and b["error"]["code"] == "session_ended", "a call after its paused TTL: %s %s" % (st, b))
                st, b = api(hB.base, key, "GET", "/v1/sandbox/sessions/" + sid)
                check(b.get("status") == "ended" and b.get("end_reason") == "paused_ttl" and b.get("usage"),
                      "ended paused_ttl, billed (%s %s)" % (b.get("status"), b.get("end_reason")))
                check(not os.path.exists(os.path.join(handoff, sid)), "its handoff directory removed")
            # a deploy: hB stops (SIGTERM) with a running session; it is parked,
            # not kept for hB's restart, and the next call on r2 resumes it
            st, ses = api(hB.base, key, "POST", "/v1/sandbox/sessions",
                          {"profile": "gvisor-small", "image": IMAGE}, timeout=90)
            if check(st == 201, "a session on hB (%s)" % st):
                sid = ses["id"]
                st, b = api(hB.base, key, "POST", "/v1/sandbox/sessions/%s/executions" % sid,
                            {"command": ["sh", "-c", "echo deployed > /tmp/d"]})
                done = wait_terminal([hB.base], key, [b.get("id")], 60) if st == 202 else {}
                check(done.get(b.get("id"), {}).get("status") == "succeeded", "its state written on hB")
                hB.stop()
                row = psql(super_db, "SELECT owner || '|' || status FROM eai.sandbox_sessions WHERE id = '%s'" % sid)
                check(row == "parked|paused", "parked by hB's stop (%s)" % row)
                st, b = api(replicas[1].base, key, "POST", "/v1/sandbox/sessions/%s/executions" % sid,
                            {"command": ["cat", "/tmp/d"]})
                done = wait_terminal([replicas[1].base], key, [b.get("id")], 60) if st == 202 else {}
                check(done.get(b.get("id"), {}).get("stdout") == "deployed\n",
                      "resumed on r2 after hB's stop (%s %s)" % (st, done))
                st, b = api(replicas[1].base, key, "DELETE", "/v1/sandbox/sessions/" + sid)
                check(st == 200 and b.get("status") == "ended", "ended on r2 (%s)" % st)
        hB.stop()

        # 3. a replica dies mid-run.  r2 leaves (gracefully) so that only r1
        # claims the slow batch; a fresh replica r3 joins, then r1 dies.
        replicas[1].stop()
        r1 = replicas[0]
        slow = []
        for i in range(10):
            st, body = post_exec(r1.base, key, "import time; time.sleep(6); print('slow')")
            if st in (200, 202):
                slow.append(body["id"])
        check(len(slow) == 10, "10 slow executions accepted")
        victim_running, owner = [], None
        end = time.time() + 60
        while time.time() < end and not victim_running:
            rows = psql(super_db, "SELECT lease_owner, 'sbx_' || id FROM eai.sandbox_executions"
                                  " WHERE status = 'running'")
            for line in rows.splitlines():
                owner, x = line.split("|")
                victim_running.append(x)
            time.sleep(0.2)
        check(bool(victim_running), "r1 runs executions before it dies (%d)" % len(victim_running))
        r3 = Replica("r3", eaid, serve_env, workdir, config)
        replicas.append(r3)
        check(r3.wait_ready(), "r3 ready on port %d" % r3.port)
        time.sleep(0.5)
        rows = psql(super_db, "SELECT 'sbx_' || id FROM eai.sandbox_executions WHERE status = 'running'"
                              " AND lease_owner = '%s'" % owner)
        victim_running = rows.split()
        print("  killing r1 (lease owner %s, %d running)" % (owner, len(victim_running)), flush=True)
        r1.kill()
        t_kill = time.time()
        done = wait_terminal([r3.base], key, slow, 120)
        check(len(done) == len(slow), "every slow execution terminal after the kill (%d/%d, %.1f s)"
              % (len(done), len(slow), time.time() - t_kill))
        check(psql(super_db, "SELECT count(*) FROM eai.sandbox_executions WHERE status IN ('queued','running')") == "0",
              "none left running or queued")
        for x in victim_running:
            rec = done.get(x, {})
            ok = (rec.get("status") == "error" and (rec.get("error") or {}).get("code") == "interrupted") or \
                rec.get("status") == "succeeded"
            check(ok, "%s (running on the dead replica) ended error/interrupted or was taken over: %s %s"
                  % (x, rec.get("status"), rec.get("error")))
        others = [x for x in slow if x not in victim_running]
        check(all(done.get(x, {}).get("status") == "succeeded" and done[x].get("stdout") == "slow\n"
                  for x in others), "the %d queued ones ran on r3" % len(others))
        ran = r3.executions_total()
        check(ran <= len(slow), "each execution ended once on r3 (%d for %d)" % (ran, len(slow)))

        # The dead machine comes back: a replica on r1's data dir sweeps what
        # r1 left (sandbox bundles, tmpfs mounts, cgroup leaves) at start.
        r1b = Replica("r1-restarted", eaid, serve_env, workdir, config, data_name="r1")
        replicas.append(r1b)
        check(r1b.wait_ready(), "r1 restarted on its data dir")
        r1b.stop()
        # (Mounts of sandboxes still booting when r1b stopped may remain;
        # that is the gVisor backend's business, not this test's: report,
        # and clean up below.)
        left = mounts_under(workdir)
        print("  mounts left under the test dir after the restart: %d" % len(left))
    finally:
        for rp in replicas:
            rp.stop()
        if failures:
            for rp in replicas:
                print("---- %s log (tail) ----" % rp.name)
                with open(rp.logpath) as f:
                    print("".join(f.readlines()[-40:]))
        for mp in sorted(mounts_under(workdir), key=len, reverse=True):
            subprocess.run(["umount", "-l", mp], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)
        try:
            psql(super_url, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
        except subprocess.CalledProcessError:
            pass
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
