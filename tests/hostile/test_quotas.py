#!/usr/bin/env python3
"""Per-tenant quotas and retention (issue 16 item 6), real eaid on SQLite,
real runsc, one server with

    quotas:    executions_per_window 3 (window 3600 s), stored_bytes 120000,
               manifests 2
    retention: executions_days 1, interval_s 1

and one tenant per case (quotas are per tenant):

- executions: the 4th in the window answers 429 quota_exceeded (envelope,
  both languages, details /quota/executions_per_window); another tenant is
  not affected;
- stored bytes: a large request past the tenant's stored bytes answers 507
  storage_quota_exceeded (details /quota/stored_bytes);
- manifests: a 3rd new manifest answers 507; re-applying an existing one is
  still 200;
- retention: an execution aged past the retention (its created_ms moved 2
  days back in the database) disappears with its files within seconds, a
  fresh one stays, its usage event stays in the ledger, and
  `eaid audit verify` still passes with a `retention.pruned` event in the
  chain."""
import json
import os
import sqlite3
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, ensure_image, pg_fresh_db, pg_urls, psql, run_cases, with_db, write_pepper  # noqa: E402
from test_crash_sandboxes import write  # noqa: E402

IMAGE = "python:3.11-slim"
E = None
KEYS = {}


def key(name):
    if name not in KEYS:
        KEYS[name] = E.make_key(name)
    E.key = KEYS[name]


def submit(cmd, **extra):
    body = dict({"profile": "gvisor-small", "image": IMAGE, "command": cmd, "project_id": "quota"}, **extra)
    return E.api("POST", "/v1/sandbox/executions", body, headers={"Accept-Language": "fr"})


def envelope(st, b, status, code, path):
    check(st == status, "want %d %s, got %s %s" % (status, code, st, b))
    err = b["error"]
    check(err["code"] == code and err["request_id"] and err["message_i18n"]["en"] and err["message_i18n"]["fr"],
          "envelope: %s" % err)
    check(err["details"] and err["details"][0]["path"] == path, "details: %s" % err.get("details"))


def case_executions_per_window():
    key("quota-exec")
    for i in range(3):
        st, b = submit(["true"])
        check(st == 202, "submit %d: %s %s" % (i, st, b))
    st, b = submit(["true"])
    envelope(st, b, 429, "quota_exceeded", "/quota/executions_per_window")
    key("quota-other")
    st, b = submit(["true"])
    check(st == 202, "another tenant: %s %s" % (st, b))


def case_stored_bytes():
    key("quota-bytes")
    big = "x" * 70000
    st, b = submit(["cat"], stdin=big)
    check(st == 202, "first: %s %s" % (st, b))
    st, b = submit(["cat"], stdin=big)
    envelope(st, b, 507, "storage_quota_exceeded", "/quota/stored_bytes")


def manifest(name):
    return {"apiVersion": "eai.dev/v1", "kind": "Tool", "metadata": {"name": name},
            "spec": {"sandbox_profile": "gvisor-small", "image": IMAGE, "command": ["true"]}}


def case_manifests():
    key("quota-manifests")
    for n in ("m1", "m2"):
        st, b = E.api("POST", "/v1/manifests/apply", manifest(n))
        check(st == 201, "apply %s: %s %s" % (n, st, b))
    st, b = E.api("POST", "/v1/manifests/apply", manifest("m3"), headers={"Accept-Language": "fr"})
    envelope(st, b, 507, "storage_quota_exceeded", "/quota/manifests")
    st, b = E.api("POST", "/v1/manifests/apply", manifest("m1"))
    check(st == 200, "re-apply: %s %s" % (st, b))


def status_of(path):
    req = urllib.request.Request(E.url + path, headers={"Authorization": "Bearer " + E.key})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as x:
        return x.code


def case_retention():
    key("retention")
    ids = []
    for _ in range(2):
        st, b = submit(["sh", "-c", "mkdir -p /tmp/outputs; echo r > /tmp/outputs/r.txt"],
                       collect=["/tmp/outputs"])
        check(st == 202, "submit: %s %s" % (st, b))
        ids.append(b["id"])
    for i in ids:
        b = E.wait_terminal(i, timeout=90)
        check(b["status"] == "succeeded", "%s: %s %s" % (i, b["status"], b.get("error")))
    old, fresh = ids
    files_before = status_of("/v1/sandbox/executions/%s/files/tmp/outputs/r.txt" % old)
    check(files_before == 200, "file before: %s" % files_before)
    db = sqlite3.connect(os.path.join(E.data, "eai.db"), timeout=10)
    db.execute("UPDATE sandbox_executions SET created_ms = created_ms - 2 * 86400000 WHERE id = ?", (old,))
    db.commit()
    db.close()
    deadline = time.time() + 15
    st = 200
    while time.time() < deadline:
        st, _ = E.api("GET", "/v1/sandbox/executions/" + old)
        if st == 404:
            break
        time.sleep(0.5)
    check(st == 404, "aged execution still there: %s" % st)
    st = status_of("/v1/sandbox/executions/%s/files/tmp/outputs/r.txt" % old)
    check(st == 404, "its file still there: %s" % st)
    db = sqlite3.connect(os.path.join(E.data, "eai.db"), timeout=10)
    left = db.execute("SELECT count(*) FROM execution_files WHERE execution_id = ?", (old,)).fetchone()[0]
    db.close()
    check(left == 0, "%d file rows left" % left)
    st, b = E.api("GET", "/v1/sandbox/executions/" + fresh)
    check(st == 200, "the fresh one went too: %s" % st)
    st, b = E.api("GET", "/v1/finops/usage?project_id=quota")
    check(st == 200 and old in [u.get("execution_id") for u in b["usage"]], "usage event of the pruned one lost")
    r = E.cmd("audit", "verify")
    check(r.returncode == 0, "audit verify: %s %s" % (r.stdout, r.stderr))
    db = sqlite3.connect(os.path.join(E.data, "eai.db"), timeout=10)
    n = db.execute("SELECT count(*) FROM audit_events WHERE action = 'retention.pruned'").fetchone()[0]
    db.close()
    check(n >= 1, "no retention.pruned audit event")
    print("  audit verify: %s" % r.stdout.decode().strip(), flush=True)


def case_postgres_quotas():
    """The same executions and stored-bytes quotas on PostgreSQL (its own
    database), when EAI_TEST_PG_*_URL are set; retention is SQLite only."""
    global E
    if not pg_urls():
        print("  (no PostgreSQL: EAI_TEST_PG_*_URL unset)")
        return
    owner, app, sup = pg_urls()
    db = "eai_hostile_quotas"
    pg_fresh_db(sup, db)
    tmp = tempfile.mkdtemp(prefix="eai-quota-pg-")
    pepper = write_pepper(tmp)
    cfg = write(os.path.join(tmp, "eaid.yaml"),
                "isolation:\n  gvisor:\n    pool: 0\n"
                "quotas:\n  executions_per_window: 3\n  stored_bytes: 120000\n"
                "retention:\n  executions_days: 1\n  interval_s: 1\n")
    saved, saved_keys = E, dict(KEYS)
    E = Env(config=cfg, tmp=tmp, env={"EAI_AUTH_PEPPER_FILE": pepper})
    E.own_tmp = True  # stop() removes it
    KEYS.clear()
    try:
        E.pg_migrate(with_db(owner, db), with_db(app, db))
        E.start(ready_path="/readyz", timeout=120)
        case_executions_per_window()
        case_stored_bytes()
        # retention: age one execution in the database, it goes with an audit anchor
        key("retention-pg")
        ids = []
        for _ in range(2):
            st, b = submit(["true"])
            check(st == 202, "submit: %s %s" % (st, b))
            ids.append(b["id"])
        for i in ids:
            E.wait_terminal(i, timeout=90)
        psql(sup.replace("/postgres?", "/%s?" % db),
             "UPDATE eai.sandbox_executions SET created_at = created_at - interval '2 days' WHERE id = '%s'"
             % ids[0][4:])
        deadline = time.time() + 15
        st = 200
        while time.time() < deadline and st != 404:
            time.sleep(0.5)
            st, _ = E.api("GET", "/v1/sandbox/executions/" + ids[0])
        check(st == 404, "aged execution still there on PostgreSQL: %s" % st)
        st, _ = E.api("GET", "/v1/sandbox/executions/" + ids[1])
        check(st == 200, "the fresh one went too: %s" % st)
        n = psql(sup.replace("/postgres?", "/%s?" % db),
                 "SELECT count(*) FROM eai.audit_events WHERE action = 'retention.pruned'")
        check(int(n) >= 1, "no retention.pruned audit event on PostgreSQL")
        r = E.cmd("audit", "verify")
        check(r.returncode == 0, "audit verify on PostgreSQL: %s %s" % (r.stdout, r.stderr))
    finally:
        E.stop()
        E = saved
        KEYS.clear()
        KEYS.update(saved_keys)
        psql(sup, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % db)


def main():
    global E
    tmp = tempfile.mkdtemp(prefix="eai-quota-")
    cfg = write(os.path.join(tmp, "eaid.yaml"),
                "isolation:\n  gvisor:\n    pool: 0\n"
                "quotas:\n  executions_per_window: 3\n  window_s: 3600\n  stored_bytes: 120000\n  manifests: 2\n"
                "retention:\n  executions_days: 1\n  interval_s: 1\n")
    E = Env(config=cfg, tmp=tmp)
    E.own_tmp = True  # stop() removes it
    try:
        E.make_key("bootstrap")
        E.start(ready_path="/readyz", timeout=120)
        run_cases([("executions_per_window", case_executions_per_window), ("stored_bytes", case_stored_bytes),
                   ("manifests", case_manifests), ("retention", case_retention),
                   ("postgres_quotas", case_postgres_quotas)])
    finally:
        E.stop()


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIP: needs root (runsc)")
        sys.exit(77)
    ensure_image()
    main()
