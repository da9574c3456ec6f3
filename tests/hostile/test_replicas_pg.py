#!/usr/bin/env python3
"""Replicas told the truth on PostgreSQL (issue 19 item 6): two real `eaid
serve` replicas on one database (its own: eai_hostile_replicas), one slot
each, real runsc.

- each logs its own node id at start, and the same pepper fingerprint;
- with both slots taken (no claim can happen), eai_sandbox_queued on BOTH
  replicas follows the queue as executions are submitted to either one
  and cancelled: it equals the list API's count within a few seconds (it
  read 1 and 7 while the list showed 18 when it was only set after a claim);
- a third replica with another pepper answers 401 to the shared key and
  logs the EAI_AUTH_PEPPER_FILE hint, with a different fingerprint.

Needs EAI_TEST_PG_OWNER_URL, EAI_TEST_PG_APP_URL, EAI_TEST_PG_SUPER_URL
(tests/support/pg_cluster.sh); exit 77 (skip) when unset."""
import os
import re
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, ensure_image, pg_fresh_db, pg_urls, psql, run_cases, with_db, write_pepper  # noqa: E402

DB = "eai_hostile_replicas"
IMAGE = "python:3.11-slim"
NODE = re.compile(r"node id ([0-9a-f-]{36})")
FP = re.compile(r"\(fingerprint ([0-9a-f]{12})\)")
R = []
KEY = None
TMP = None
APP_DB = None
PEPPER = None


def metric(env, name):
    with urllib.request.urlopen(env.url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^%s(?:\{\})? ([0-9.e+]+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


def count(env, status):
    st, b = env.api("GET", "/v1/sandbox/executions?status=%s&limit=100" % status)
    check(st == 200, "list: %s %s" % (st, b))
    return len(b.get("items", b.get("data", [])))


def gauges_equal(n, timeout=5.0):
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        got = [metric(r, "eai_sandbox_queued") for r in R]
        if all(g == float(n) for g in got):
            return got
        time.sleep(0.2)
    raise AssertionError("queued gauges %s on the two replicas, %d queued (list API %d)" % (got, n, count(R[0], "queued")))


def case_node_ids_and_fingerprints():
    ids = [NODE.search(r.log_text()).group(1) for r in R]
    check(ids[0] != ids[1], "two replicas, one node id: %s" % ids)
    fps = [FP.search(r.log_text()).group(1) for r in R]
    check(fps[0] == fps[1], "one pepper, two fingerprints: %s" % fps)


def case_queued_gauge_on_busy_replicas():
    body = {"profile": "gvisor-small", "image": IMAGE, "command": ["sleep", "90"]}
    ids = []
    for r in R:
        st, b = r.api("POST", "/v1/sandbox/executions", body)
        check(st == 202, "submit: %s %s" % (st, b))
        ids.append(b["id"])
    deadline = time.time() + 90
    while time.time() < deadline and count(R[0], "running") < 2:
        time.sleep(0.5)
    check(count(R[0], "running") == 2, "both slots taken")
    n = 0
    for target, more in ((R[0], 6), (R[1], 4), (R[0], 8)):
        for _ in range(more):
            st, b = target.api("POST", "/v1/sandbox/executions", body)
            check(st == 202, "submit: %s %s" % (st, b))
            ids.append(b["id"])
        n += more
        check(count(R[0], "queued") == n, "list API")
        gauges_equal(n)
    for eid in ids[-5:]:
        R[1].api("POST", "/v1/sandbox/executions/%s/cancel" % eid)
    gauges_equal(n - 5)
    for eid in ids:
        R[0].api("POST", "/v1/sandbox/executions/%s/cancel" % eid)
    gauges_equal(0, timeout=10)


def case_other_pepper_replica_hint():
    other = os.path.join(TMP, "other-pepper")
    with open(other, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(other, 0o600)
    r3 = Env(env={"EAI_DATABASE_URL": APP_DB, "EAI_AUTH_PEPPER_FILE": other, "EAI_SANDBOX_RUNSC": "/nonexistent"})
    try:
        r3.key = KEY
        r3.start()
        st, b = r3.api("GET", "/v1/sandbox/executions")
        check(st == 401, "other pepper: %s" % st)
        time.sleep(0.3)
        log = r3.log_text()
        check("EAI_AUTH_PEPPER_FILE" in log and KEY.split("_")[1] in log, "no hint: %s" % r3.log_tail())
        check(FP.search(log).group(1) != FP.search(R[0].log_text()).group(1), "fingerprints must differ")
    finally:
        r3.stop()


def case_replica_without_runtime_claims_nothing():
    """A third replica on the same queue whose runtime is gone (runsc
    missing: its backend not ready) claims nothing: every execution is run
    by the two healthy replicas; before, it took its share of claims and
    failed them closed as sandbox_unavailable (docs/executions.md)."""
    r3 = Env(config=R[0].config, env={"EAI_DATABASE_URL": APP_DB, "EAI_AUTH_PEPPER_FILE": PEPPER,
                                     "EAI_SANDBOX_RUNSC": "/nonexistent"})
    try:
        r3.key = KEY
        r3.start()
        st, b = r3.api("POST", "/v1/sandbox/executions",
                       {"profile": "gvisor-small", "image": IMAGE, "command": ["true"]})
        check(st == 503 and b["error"]["code"] == "sandbox_unavailable", "the down replica accepted: %s %s" % (st, b))
        ids = []
        for i in range(8):
            st, b = R[i % 2].api("POST", "/v1/sandbox/executions",
                                 {"profile": "gvisor-small", "image": IMAGE, "command": ["sh", "-c", "sleep 0.5"]})
            check(st == 202, "submit: %s %s" % (st, b))
            ids.append(b["id"])
        ends = {}
        deadline = time.time() + 120
        while time.time() < deadline and len(ends) < len(ids):
            for eid in ids:
                if eid not in ends:
                    st, b = R[0].api("GET", "/v1/sandbox/executions/%s" % eid)
                    if b.get("status") not in ("queued", "running"):
                        ends[eid] = (b.get("status"), (b.get("error") or {}).get("code"))
            time.sleep(0.3)
        check(len(ends) == len(ids), "not all ended: %s" % ends)
        bad = {k: v for k, v in ends.items() if v[0] != "succeeded"}
        check(not bad, "the down replica failed some: %s" % bad)
        deadline = time.time() + 5
        while time.time() < deadline and "claiming nothing" not in r3.log_text():
            time.sleep(0.2)
        check("claiming nothing" in r3.log_text(), "no warning in the down replica's log: %s" % r3.log_tail())
    finally:
        r3.stop()


def main():
    global KEY, TMP, APP_DB, PEPPER
    if not pg_urls():
        print("SKIP: no PostgreSQL (EAI_TEST_PG_*_URL unset)")
        sys.exit(77)
    owner, app, sup = pg_urls()
    ensure_image()
    pg_fresh_db(sup, DB)
    APP_DB = with_db(app, DB)
    TMP = tempfile.mkdtemp(prefix="eai-hostile-pg-")
    pepper = PEPPER = write_pepper(TMP)
    cfg = os.path.join(TMP, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("scheduler:\n  lease_ms: 3000\n  max_concurrent: 1\n  max_per_tenant: 1\n")
    common = {"EAI_DATABASE_URL": APP_DB, "EAI_AUTH_PEPPER_FILE": pepper}
    try:
        cli = Env(config=cfg, env=common)
        cli.pg_migrate(with_db(owner, DB), APP_DB)
        KEY = cli.make_key("replicas")
        cli.stop()
        for _ in range(2):
            e = Env(config=cfg, env=common)
            e.key = KEY
            R.append(e)
            e.start(ready_path="/readyz", timeout=120)
        run_cases([(n, f) for n, f in sorted(globals().items()) if n.startswith("case_")])
    finally:
        for e in R:
            e.stop()
        psql(sup, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
        __import__("shutil").rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
