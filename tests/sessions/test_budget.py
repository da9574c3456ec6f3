"""The node budget (issue 36 item 6, docs/admission.md) with real runsc:
executions and sessions share one memory/CPU budget per node, each tenant
at most its share.  Python 3 standard library only, against a real `eaid
serve` on loopback (tests/hostile/eaid_env.py), with a small budget so it
is fast:

  node.memory_budget 1Gi, node.cpu_budget 4, node.tenant_share 0.5
  (a tenant: at most 512Mi and 2000m); every sandbox here is 256Mi, 500m.

Cases:
  share_and_429     a tenant's sessions fill its share: its next create
                    gets 429 tenant_share_exhausted with Retry-After, in
                    English and French, while another tenant still creates
                    one; the gauges say what is reserved.
  never_fits        limits above a tenant's whole share: 422
                    budget_exceeds_share at once (execution and session).
  exec_waits        the node is full: a plain execution waits (claimed,
                    not run; eai_sandbox_budget_waiting 1) and starts once
                    a session ends; it succeeds, started after that end.
  wait_bounded      with the node full, an execution waiting past its
                    timeout ends timeout, never run; one cancelled while
                    waiting ends cancelled at once.
  pause_releases    a paused session gives its share back (another create
                    fits); its resume is then refused 429 with Retry-After
                    and succeeds once there is room again.
  nothing_left      every session ended: nothing reserved.
  own_share         node.tenant_shares gives one tenant the whole node:
                    four sessions, then 429 (its share, the node, is all
                    held; another tenant: node_budget_exhausted).
  pg_waiting_lease_renewed  (only with EAI_TEST_PG_*_URL) on PostgreSQL with
                    lease_ms 3000, an execution waiting 8 s for the budget
                    keeps its lease renewed, then runs.
  queued_before_pause  (issue 36 item 8; its own eaid, scheduler.max_concurrent
                    1) a session execution queued while the one slot is
                    busy, its session paused meanwhile: once claimed it
                    waits in the backend for the resume no longer than its
                    timeout (ends timeout, never run) and the slot is
                    released: the next execution runs.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
import eaid_env  # noqa: E402
from eaid_env import Env, check, ensure_image, run_cases  # noqa: E402

IMAGE = eaid_env.IMAGE
RUNSC = os.environ.get("EAI_SANDBOX_RUNSC") or "runsc"
PROFILE = "gvisor-small"  # 500m, 256Mi by default
MI = 1 << 20

CONFIG = """node:
  memory_budget: 1Gi
  cpu_budget: 4
  tenant_share: 0.5
sessions:
  max_per_tenant: 10
scheduler:
  max_concurrent: 8
  max_per_tenant: 8
"""


def have_runsc():
    try:
        return subprocess.run([RUNSC, "--version"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class S:
    env = None
    keys = {}
    sessions = {}  # tenant -> [session ids]


def call(method, path, key, body=None, lang=None, timeout=60):
    """(status, json body, headers) of one request with key."""
    e = S.env
    h = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    if lang:
        h["Accept-Language"] = lang
    req = urllib.request.Request(e.url + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null"), resp.headers
    except urllib.error.HTTPError as ex:
        raw = ex.read()
        return ex.code, json.loads(raw or b"null"), ex.headers


def metric(name, labels=""):
    with urllib.request.urlopen(S.env.url + "/metrics", timeout=10) as m:
        text = m.read().decode()
    pat = re.compile(r"^%s%s (\S+)$" % (re.escape(name), re.escape("{%s}" % labels) if labels else ""), re.M)
    found = pat.search(text)
    return float(found.group(1)) if found else None


def wait_for(what, cond, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise eaid_env.Fail("timed out waiting for " + what)


def create(tenant, expect=201, lang=None):
    st, b, h = call("POST", "/v1/sandbox/sessions", S.keys[tenant], {"profile": PROFILE, "image": IMAGE}, lang=lang)
    check(st == expect, "create session for %s: want %d, got %s %s" % (tenant, expect, st, b))
    if st == 201:
        check(b["status"] == "running", "create answer: %s" % b)
        S.sessions.setdefault(tenant, []).append(b["id"])
    return st, b, h


def delete(tenant, sid):
    st, b, _ = call("DELETE", "/v1/sandbox/sessions/" + sid, S.keys[tenant])
    check(st == 200 and b["status"] == "ended", "delete %s: %s %s" % (sid, st, b))
    S.sessions[tenant].remove(sid)


def reserved():
    return (metric("eai_node_budget_memory_bytes", 'kind="reserved"'),
            metric("eai_node_budget_cpu_millicores", 'kind="reserved"'))


def start():
    tmp = tempfile.mkdtemp(prefix="eai-budget-")
    path = os.path.join(tmp, "eaid.yaml")
    with open(path, "w") as f:
        f.write(CONFIG)
    e = Env(config=path, tmp=tmp)
    e.own_tmp = True
    S.env = e
    for t in ("bud-a", "bud-b", "bud-c"):
        S.keys[t] = e.make_key(t)
    # bud-big's own share: the whole node (node.tenant_shares)
    r = e.cmd("tenants", "create", "bud-big")
    check(r.returncode == 0, "tenants create: %s" % r.stderr)
    big = json.loads(r.stdout)["id"]
    r = e.cmd("keys", "create", "--tenant", big)
    check(r.returncode == 0, "keys create: %s" % r.stderr)
    S.keys["bud-big"] = r.stdout.decode().strip()
    with open(path, "w") as f:  # its id is known now: the config again, with its share
        f.write(CONFIG.replace("  tenant_share: 0.5\n", "  tenant_share: 0.5\n  tenant_shares:\n    %s: 1\n" % big, 1))
    e.start()


def stop_clean(e, keys=None):
    """Stop e after deleting the live sessions of every key's tenant: a stop
    keeps idle sessions on the host for the next start (sessions.md), and a
    failed case must leave nothing behind either."""
    for key in keys or [e.key]:
        try:
            if e.proc and e.proc.poll() is None:
                h = {"Authorization": "Bearer " + key}
                st, b = e.api("GET", "/v1/sandbox/sessions?status=live", headers=h)
                for i in (b.get("items") or []) if st == 200 else []:
                    e.api("DELETE", "/v1/sandbox/sessions/" + i["id"], headers=h, timeout=60)
        except (OSError, ValueError):
            pass
    e.stop()


def case_share_and_429():
    check(metric("eai_node_budget_memory_bytes", 'kind="total"') == 1024 * MI, "total memory gauge")
    check(metric("eai_node_budget_cpu_millicores", 'kind="total"') == 4000, "total cpu gauge")
    create("bud-a")
    create("bud-a")
    check(reserved() == (512 * MI, 1000), "two sessions reserved: %s" % (reserved(),))
    st, b, h = create("bud-a", expect=429)
    check(b["error"]["code"] == "tenant_share_exhausted", "the code: %s" % b)
    check(h.get("Retry-After") == "5", "Retry-After: %s" % h.get("Retry-After"))
    check("tenant_share" in json.dumps(b["error"].get("details")), "details name the key: %s" % b)
    st, b, h = create("bud-a", expect=429, lang="fr")
    check("locataire" in b["error"]["message"] and "Mio" in json.dumps(b["error"].get("details")),
          "French message and details: %s" % b)
    # another tenant still gets in
    create("bud-b")
    check(reserved() == (768 * MI, 1500), "three sessions reserved: %s" % (reserved(),))
    check(metric("eai_node_budget_tenants") == 2, "two tenants hold some")


def case_never_fits():
    # more than a tenant's whole share (512Mi): refused at once, 422, not retryable
    st, b, h = call("POST", "/v1/sandbox/executions", S.keys["bud-c"],
                    {"profile": "gvisor", "image": IMAGE, "command": ["true"], "limits": {"memory": "1Gi"}})
    check(st == 422 and b["error"]["code"] == "budget_exceeds_share", "execution too large: %s %s" % (st, b))
    st, b, h = call("POST", "/v1/sandbox/sessions", S.keys["bud-c"],
                    {"profile": "gvisor", "image": IMAGE, "limits": {"memory": "1Gi"}})
    check(st == 422 and b["error"]["code"] == "budget_exceeds_share" and "Retry-After" not in h,
          "session too large: %s %s" % (st, b))


def case_exec_waits():
    # fill the node: b's second session (a: 512Mi, b: 512Mi)
    create("bud-b")
    check(reserved()[0] == 1024 * MI, "node full: %s" % (reserved(),))
    # c holds nothing: its session is refused for the node, not its share
    st, b, h = create("bud-c", expect=429)
    check(b["error"]["code"] == "node_budget_exhausted" and h.get("Retry-After") == "5",
          "node full refusal: %s %s" % (b, dict(h)))
    # c's plain execution waits on the node
    st, b, _ = call("POST", "/v1/sandbox/executions", S.keys["bud-c"],
                    {"profile": PROFILE, "image": IMAGE, "command": ["python3", "-c", "print(6*7)"],
                     "limits": {"timeout_s": 60}})
    check(st == 202, "execution accepted: %s %s" % (st, b))
    eid = b["id"]
    wait_for("the execution to wait for the budget", lambda: metric("eai_sandbox_budget_waiting") == 1)
    time.sleep(1.0)
    st, r, _ = call("GET", "/v1/sandbox/executions/" + eid, S.keys["bud-c"])
    check(r["status"] in ("queued", "running") and not r.get("finished_at"), "still waiting: %s" % r)
    # a session ends: the execution starts and succeeds
    t_end = time.time()
    delete("bud-a", S.sessions["bud-a"][0])

    def done():
        st, r, _ = call("GET", "/v1/sandbox/executions/" + eid, S.keys["bud-c"])
        return r if r["status"] not in ("queued", "running") else None
    r = wait_for("the execution to end", done, timeout=90)
    check(r["status"] == "succeeded" and r["stdout"] == "42\n", "ran once room came: %s" % r)
    check(metric("eai_sandbox_budget_waiting") == 0, "nothing waits any more")
    started = r.get("started_at")
    check(started is not None, "started_at: %s" % r)
    import datetime
    ts = datetime.datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp()
    check(ts >= t_end - 1.0, "started after the session's end: %s vs %.3f" % (started, t_end))


def case_wait_bounded():
    # node full again (a 256Mi, b 512Mi, c 256Mi)
    create("bud-c")
    check(reserved()[0] == 1024 * MI, "node full: %s" % (reserved(),))
    body = {"profile": PROFILE, "image": IMAGE, "command": ["echo", "never"], "limits": {"timeout_s": 2}}
    st, b, _ = call("POST", "/v1/sandbox/executions", S.keys["bud-c"], body)
    check(st == 202, "accepted: %s %s" % (st, b))
    late = b["id"]
    body["limits"] = {"timeout_s": 60}
    st, b, _ = call("POST", "/v1/sandbox/executions", S.keys["bud-c"], body)
    check(st == 202, "accepted: %s %s" % (st, b))
    cancelled = b["id"]
    wait_for("both to wait", lambda: metric("eai_sandbox_budget_waiting") == 2)
    st, b, _ = call("POST", "/v1/sandbox/executions/%s/cancel" % cancelled, S.keys["bud-c"])
    check(st in (200, 202), "cancel: %s %s" % (st, b))

    def end_of(eid):
        def f():
            st, r, _ = call("GET", "/v1/sandbox/executions/" + eid, S.keys["bud-c"])
            return r if r["status"] not in ("queued", "running") else None
        return f
    r = wait_for("the cancelled one", end_of(cancelled), timeout=20)
    check(r["status"] == "cancelled" and r.get("stdout", "") == "", "cancelled while waiting: %s" % r)
    t0 = time.time()
    r = wait_for("the late one", end_of(late), timeout=20)
    check(r["status"] == "timeout" and r.get("stdout", "") == "", "its wait counted against its timeout: %s" % r)
    check(metric("eai_sandbox_budget_waiting") == 0, "nothing waits")
    check(time.time() - t0 < 10, "ended near its timeout")
    delete("bud-c", S.sessions["bud-c"][0])


def case_pause_resume_releases():
    # a holds one session (256Mi); b two (512Mi): node 768Mi
    sid = S.sessions["bud-a"][0]
    st, b, _ = call("POST", "/v1/sandbox/sessions/%s/pause" % sid, S.keys["bud-a"])
    check(st == 200 and b["status"] == "paused", "pause: %s %s" % (st, b))
    check(reserved()[0] == 512 * MI, "a paused session holds nothing: %s" % (reserved(),))
    # its room is taken by c, then by a's new session
    create("bud-c")
    create("bud-a")
    check(reserved()[0] == 1024 * MI, "node full again: %s" % (reserved(),))
    st, b, h = call("POST", "/v1/sandbox/sessions/%s/resume" % sid, S.keys["bud-a"])
    check(st == 429 and b["error"]["code"] in ("node_budget_exhausted", "tenant_share_exhausted")
          and h.get("Retry-After") == "5", "resume refused: %s %s" % (st, b))
    st, b, _ = call("GET", "/v1/sandbox/sessions/" + sid, S.keys["bud-a"])
    check(b["status"] == "paused", "still paused: %s" % b)
    # room again (c's ends): the resume goes through
    delete("bud-c", S.sessions["bud-c"][0])
    st, b, _ = call("POST", "/v1/sandbox/sessions/%s/resume" % sid, S.keys["bud-a"])
    check(st == 200 and b["status"] == "running", "resume once there is room: %s %s" % (st, b))
    check(reserved()[0] == 1024 * MI, "resumed: reserved again: %s" % (reserved(),))


def case_nothing_left():
    for t, ids in list(S.sessions.items()):
        for sid in list(ids):
            delete(t, sid)
    check(reserved() == (0, 0), "nothing reserved at the end: %s" % (reserved(),))
    check(metric("eai_node_budget_tenants") == 0, "no tenant holds any")


def case_own_share():
    # bud-big may hold the whole node: four 256Mi sessions, then the node is full
    for _ in range(4):
        create("bud-big")
    check(reserved()[0] == 1024 * MI, "the whole node to one tenant: %s" % (reserved(),))
    st, b, h = create("bud-big", expect=429)
    check(b["error"]["code"] == "tenant_share_exhausted", "its share is the node, all held: %s" % b)
    # and another tenant holds nothing: refused for the node too
    st, b, h = create("bud-a", expect=429)
    check(b["error"]["code"] == "node_budget_exhausted", "another tenant: %s" % b)
    for sid in list(S.sessions["bud-big"]):
        delete("bud-big", sid)
    check(reserved() == (0, 0), "nothing reserved: %s" % (reserved(),))


def case_queued_before_pause():
    tmp = tempfile.mkdtemp(prefix="eai-budget8-")
    path = os.path.join(tmp, "eaid.yaml")
    with open(path, "w") as f:
        f.write("scheduler:\n  max_concurrent: 1\n  max_per_tenant: 1\n")
    e = Env(config=path, tmp=tmp)
    e.own_tmp = True
    e.make_key("bud-8")
    e.start()
    try:
        st, b = e.api("POST", "/v1/sandbox/sessions", {"profile": PROFILE, "image": IMAGE}, timeout=60)
        check(st == 201, "create: %s %s" % (st, b))
        sid = b["id"]
        # the one slot: a plain execution that runs until cancelled
        st, b = e.api("POST", "/v1/sandbox/executions",
                      {"profile": PROFILE, "image": IMAGE, "command": ["sleep", "50"], "limits": {"timeout_s": 60}})
        check(st == 202, "long execution: %s %s" % (st, b))
        long_id = b["id"]

        def running():
            st, r = e.api("GET", "/v1/sandbox/executions/" + long_id)
            return r["status"] == "running"
        wait_for("the long execution to run", running)
        # queued behind it: the session's execution, 3 s timeout
        st, b = e.api("POST", "/v1/sandbox/sessions/%s/executions" % sid,
                      {"command": ["echo", "never"], "timeout_s": 3})
        check(st == 202, "session execution: %s %s" % (st, b))
        xid = b["id"]
        st, b = e.api("POST", "/v1/sandbox/sessions/%s/pause" % sid, timeout=60)
        check(st == 200 and b["status"] == "paused", "pause: %s %s" % (st, b))
        st, r = e.api("GET", "/v1/sandbox/executions/" + xid)
        check(r["status"] == "queued", "still queued at the pause: %s" % r)
        st, b = e.api("POST", "/v1/sandbox/executions/%s/cancel" % long_id)
        check(st in (200, 202), "cancel: %s %s" % (st, b))
        t0 = time.time()
        r = e.wait_terminal(xid, timeout=60)
        waited = time.time() - t0
        check(r["status"] == "timeout" and r.get("stdout", "") == "",
              "the held execution ends as timeout, never run: %s" % r)
        check(waited < 20, "bounded by its timeout: %.1f s" % waited)
        st, b = e.api("GET", "/v1/sandbox/sessions/" + sid)
        check(b["status"] == "paused", "the session is still paused: %s" % b)
        # the slot is free again
        st, b = e.api("POST", "/v1/sandbox/executions",
                      {"profile": PROFILE, "image": IMAGE, "command": ["echo", "next"]})
        check(st == 202, "next execution: %s %s" % (st, b))
        r = e.wait_terminal(b["id"], timeout=60)
        check(r["status"] == "succeeded" and r["stdout"] == "next\n", "the slot was released: %s" % r)
        st, b = e.api("DELETE", "/v1/sandbox/sessions/" + sid, timeout=60)
        check(st == 200, "delete: %s %s" % (st, b))
    finally:
        stop_clean(e)


def case_pg_waiting_lease_renewed():
    """PostgreSQL (when EAI_TEST_PG_*_URL are set): an execution waiting on
    the node keeps its lease renewed (lease_ms 3000, it waits 8 s: the
    stale scan of any replica would otherwise take it) and runs once room
    comes."""
    urls = eaid_env.pg_urls()
    if not urls:
        print("  (no EAI_TEST_PG_*_URL: skipped)")
        return
    owner, app, sup = urls
    eaid_env.pg_fresh_db(sup, "eai_budget")
    tmp = tempfile.mkdtemp(prefix="eai-budgetpg-")
    path = os.path.join(tmp, "eaid.yaml")
    with open(path, "w") as f:
        f.write("node:\n  memory_budget: 512Mi\n  tenant_share: 1\nscheduler:\n  lease_ms: 3000\n")
    e = Env(config=path, tmp=tmp, env={"EAI_AUTH_PEPPER_FILE": eaid_env.write_pepper(tmp)})
    e.own_tmp = True
    e.pg_migrate(eaid_env.with_db(owner, "eai_budget"), eaid_env.with_db(app, "eai_budget"))
    e.make_key("bud-pg")
    e.start()
    try:
        st, b = e.api("POST", "/v1/sandbox/sessions",
                      {"profile": PROFILE, "image": IMAGE, "limits": {"memory": "512Mi"}}, timeout=60)
        check(st == 201, "the session that fills the node: %s %s" % (st, b))
        sid = b["id"]
        st, b = e.api("POST", "/v1/sandbox/executions",
                      {"profile": PROFILE, "image": IMAGE, "command": ["echo", "late"], "limits": {"timeout_s": 60}})
        check(st == 202, "execution: %s %s" % (st, b))
        eid = b["id"]
        time.sleep(8)
        lease = eaid_env.psql(eaid_env.with_db(sup, "eai_budget"),
                              "SELECT status || ' ' || (lease_until - (extract(epoch from now()) * 1000)::bigint)"
                              " FROM eai.sandbox_executions WHERE id = '%s'" % eid[4:])
        status, left = lease.split()
        check(status == "running" and int(left) > 0, "claimed, waiting, its lease renewed: %s" % lease)
        st, r = e.api("GET", "/v1/sandbox/executions/" + eid)
        check(r["status"] == "running" and not r.get("finished_at"), "still waiting: %s" % r)
        st, b = e.api("DELETE", "/v1/sandbox/sessions/" + sid, timeout=60)
        check(st == 200, "delete: %s %s" % (st, b))
        r = e.wait_terminal(eid, timeout=60)
        check(r["status"] == "succeeded" and r["stdout"] == "late\n", "ran once room came: %s" % r)
    finally:
        stop_clean(e)
        eaid_env.psql(sup, "DROP DATABASE IF EXISTS eai_budget WITH (FORCE)")


CASES = [
    ("share_and_429", case_share_and_429),
    ("never_fits", case_never_fits),
    ("exec_waits", case_exec_waits),
    ("wait_bounded", case_wait_bounded),
    ("pause_resume_releases", case_pause_resume_releases),
    ("nothing_left", case_nothing_left),
    ("own_share", case_own_share),
    ("queued_before_pause", case_queued_before_pause),
    ("pg_waiting_lease_renewed", case_pg_waiting_lease_renewed),
]

if __name__ == "__main__":
    if not have_runsc():
        print("runsc not available: skipped")
        sys.exit(77)
    ensure_image()
    start()
    try:
        run_cases(CASES, only_env="EAI_BUDGET_ONLY")
    finally:
        stop_clean(S.env, list(S.keys.values()))
