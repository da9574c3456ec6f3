#!/usr/bin/env python3
"""A real `pg_ctl restart -m fast` of the database during a steady load of
submissions (issue 19 item 4), real eaid on PostgreSQL, real runsc:

- every submission answers 202, or 503 storage_unavailable with Retry-After
  and the envelope while the database is down, never 500 (nor a dropped
  connection);
- every acknowledged (202) execution completes (`succeeded`) once the
  database is back, without restarting eaid.

Needs EAI_TEST_PG_OWNER_URL, EAI_TEST_PG_APP_URL, EAI_TEST_PG_SUPER_URL of
a cluster made by tests/support/pg_cluster.sh (its directory is read from
the socket path; the test restarts that cluster, so it runs serially)."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, ensure_image, pg_fresh_db, pg_urls, psql, run_cases, with_db, write_pepper  # noqa: E402

IMAGE = "python:3.11-slim"
DB = "eai_hostile_pgrestart"
PGBIN = os.environ.get("EAI_PG_BIN", "/usr/lib/postgresql/15/bin")
RATE_S = 0.25       # one submission every 250 ms
LOAD_S = 12         # for 12 s, the restart at 4 s


def cluster_dir(url):
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    return os.path.dirname(q["host"][0])


def pg_restart(d):
    argv = [PGBIN + "/pg_ctl", "-D", d + "/data", "-l", d + "/server.log", "-m", "fast", "-w", "-t", "60",
            "restart"]
    if os.geteuid() == 0:
        argv = ["runuser", "-u", "postgres", "--"] + argv
    return subprocess.run(argv, capture_output=True, text=True, timeout=90)


def post(e, body):
    req = urllib.request.Request(e.url + "/v1/sandbox/executions", method="POST", data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + e.key, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as x:
        return x.code, dict(x.headers), x.read()


def case_pg_restart_under_load():
    owner, app, sup = pg_urls()
    pg_fresh_db(sup, DB)
    tmp = tempfile.mkdtemp(prefix="eai-pgrestart-")
    pepper = write_pepper(tmp)
    cfg = os.path.join(tmp, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("isolation:\n  gvisor:\n    pool: 0\nscheduler:\n  lease_ms: 5000\n")
    e = Env(config=cfg, env={"EAI_AUTH_PEPPER_FILE": pepper}, tmp=tmp)
    e.own_tmp = True  # stop() removes it
    try:
        e.pg_migrate(with_db(owner, DB), with_db(app, DB))
        e.make_key("pgrestart")
        e.start(ready_path="/readyz", timeout=120)
        body = {"profile": "gvisor-small", "image": IMAGE, "command": ["sh", "-c", "echo ok"]}
        answers = []
        restarted = {}

        def restart():
            time.sleep(4)
            t0 = time.time()
            restarted["r"] = pg_restart(cluster_dir(sup))
            restarted["s"] = time.time() - t0

        t = threading.Thread(target=restart)
        t.start()
        end = time.time() + LOAD_S
        while time.time() < end:
            try:
                answers.append(post(e, body))
            except OSError as x:
                answers.append((None, {}, str(x).encode()))
            time.sleep(RATE_S)
        t.join(timeout=120)
        check(restarted.get("r") is not None and restarted["r"].returncode == 0,
              "pg_ctl restart: %s" % (restarted.get("r") and restarted["r"].stderr))
        codes = {}
        acked = []
        for st, hdr, raw in answers:
            codes[st] = codes.get(st, 0) + 1
            check(st in (202, 503), "answer %s %s" % (st, raw[:300]))
            if st == 202:
                acked.append(json.loads(raw)["id"])
            else:
                env = json.loads(raw)["error"]
                check(env["code"] == "storage_unavailable" and env["request_id"] and env["message_i18n"]["fr"],
                      "503 envelope: %s" % env)
                check(hdr.get("Retry-After"), "503 without Retry-After")
        print("  answers %s (restart took %.1f s)" % (codes, restarted["s"]), flush=True)
        for eid in acked:
            b = e.wait_terminal(eid, timeout=120)
            check(b["status"] == "succeeded", "%s: %s %s" % (eid, b["status"], b.get("error")))
        check(e.proc.poll() is None, "eaid died")
    finally:
        e.stop()
        try:
            psql(sup, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
        except subprocess.CalledProcessError:
            pass


if __name__ == "__main__":
    if not pg_urls():
        print("SKIP: no PostgreSQL (EAI_TEST_PG_*_URL unset)")
        sys.exit(77)
    if os.geteuid() != 0:
        print("SKIP: needs root (runsc)")
        sys.exit(77)
    ensure_image()
    run_cases([("pg_restart_under_load", case_pg_restart_under_load)])
