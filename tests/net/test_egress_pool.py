#!/usr/bin/env python3
"""The warm pool for egress through real `eaid serve` and real runsc, as root
(docs/egress.md, "Warm pool for egress").

eaid with gvisor `pool: 1, egress_pool: true` and the test internet of
testnet.py (198.18.0.0/15, namespaces made here).  A first egress execution
misses the pool (cold) and makes eaid boot a pooled sandbox in a namespace
of core's; while it idles, that namespace has no grant (eaid's DNS refuses
it every name).  The next egress execution is served by it
(eai_pool_egress_takes_total{result="hit"} grows by one): its allowed name
works, another name gets NXDOMAIN (the test DNS never sees it), the network
log has both decisions; the namespace it ran in is gone afterwards.  Then
eaid stops: no namespace, veth, nftables table or runsc is left.
Exit 0 only when every check passed.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
import eaid_env  # noqa: E402
from testnet import TestNet, sh, check, failed, passed  # noqa: E402
from test_egress_runsc import b64  # noqa: E402

TAG = "%04x" % ((os.getpid() + 7) & 0xffff)
PREFIX = "eap" + "abcdefghijklmnopqrstuvwxyz"[os.getpid() % 26]
POOL = "198.19.%d.0/24" % ((os.getpid() + 101) % 250)
ALLOW = ["allowed.test:80", "tls.test:443"]
SPARE = 2


def metric(env, name, labels=""):
    """Sum of the samples of name whose labels contain `labels`."""
    with __import__("urllib.request").request.urlopen(env.url + "/metrics", timeout=10) as m:
        text = m.read().decode()
    tot = 0.0
    for line in text.splitlines():
        mm = re.match(r"^%s(\{[^}]*\})? ([0-9.e+-]+)$" % re.escape(name), line)
        if mm and labels in (mm.group(1) or ""):
            tot += float(mm.group(2))
    return tot


def leftovers():
    links = sh("ip", "-o", "link").stdout
    netns = sh("ip", "netns", "list").stdout
    tables = sh("nft", "list", "tables").stdout
    procs = sh("ps", "-eo", "args").stdout
    return {"links": [l for l in links.splitlines() if PREFIX in l],
            "netns": [n.split()[0] for n in netns.splitlines() if n.startswith(PREFIX + "-")],
            "table": ("inet " + PREFIX) in tables,
            "runsc": [p for p in procs.splitlines() if "runsc" in p and "eai-egress-pool-" in p]}


def ns_ids():
    out = set()
    for name in leftovers()["netns"]:
        try:
            out.add((name, os.stat("/var/run/netns/" + name).st_ino))
        except OSError:
            pass
    return out


def pooled_runsc():
    """runsc run processes of pooled sandboxes booted with --network=sandbox."""
    procs = sh("ps", "-eo", "args").stdout
    return [p for p in procs.splitlines() if "--network=sandbox" in p and " run " in p and "eai-pool-" in p
            and "eai-egress-pool-" in p and "unshare" not in p and "/bin/sh" not in p]


def post(env, work, cases, egress):
    with open(os.path.join(work, "cases.json"), "w") as f:
        json.dump(cases, f)
    body = {"profile": "net", "image": "python:3.11-slim",
            "command": ["python3", "/tmp/client.py", "batch", "/tmp/cases.json"],
            "files": [{"path": "/tmp/client.py", "content_b64": b64(os.path.join(HERE, "client.py"))},
                      {"path": "/tmp/cases.json", "content_b64": b64(os.path.join(work, "cases.json"))}]}
    if egress:
        body["network"] = {"egress": egress}
    t0 = time.monotonic()
    st, b = env.api("POST", "/v1/sandbox/executions", body)
    if st != 202:
        return {"status": "refused", "http": st}, [], 0
    rec = env.wait_terminal(b["id"], timeout=120)
    wall = time.monotonic() - t0
    out = []
    for line in (rec.get("stdout") or "").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return rec, out, wall


def wait_ready(env, n, secs=60):
    deadline = time.time() + secs
    while time.time() < deadline:
        if metric(env, "eai_pool_ready") >= n and len(pooled_runsc()) >= 1:
            return True
        time.sleep(0.2)
    return False


def main():
    if os.geteuid() != 0 or sh("sh", "-c", "command -v nft && command -v runsc", check=False).returncode != 0:
        print("test_egress_pool: needs root, nft and runsc")
        return 1
    eaid_env.ensure_image()
    work = tempfile.mkdtemp(prefix="eai-egress-pool-")
    net = TestNet(work, TAG)
    env = None
    try:
        check(net.up(), "test internet up")
        cfg = os.path.join(work, "eaid.yaml")
        with open(cfg, "w") as f:
            f.write("network:\n  resolver: \"198.18.2.53:53\"\n  pool: \"%s\"\n  prefix: %s\n"
                    "isolation:\n  gvisor: {pool: 1, egress_pool: true}\n"
                    "profiles:\n"
                    "  net:\n    backend: gvisor\n    runtime_class: gvisor\n"
                    "    defaults: {cpu: 1000m, memory: 256Mi, timeout_s: 60}\n"
                    "    egress_allow: %s\n" % (POOL, PREFIX, json.dumps(ALLOW)))
        env = eaid_env.Env(config=cfg, tmp=os.path.join(work, "eaid"))
        env.make_key()
        env.start(ready_path="/readyz", timeout=90)

        # 1. a miss: cold, and eaid boots a pooled sandbox in a namespace of its own
        rec, r, wall_cold = post(env, work, [["url", "http://allowed.test/"]], ["allowed.test:80"])
        check(rec.get("status") == "succeeded" and r and r[0]["ok"], "first egress execution (cold) works: %s %s" %
              (rec.get("status"), r))
        check(metric(env, "eai_pool_egress_takes_total", 'result="miss"') == 1 and
              metric(env, "eai_pool_egress_takes_total", 'result="hit"') == 0,
              "it missed the egress pool (it was empty)")
        check(wait_ready(env, 1), "a pooled egress sandbox booted: %s" % pooled_runsc())
        time.sleep(0.5)
        ids0 = ns_ids()
        check(len(ids0) == SPARE + 1, "its namespace is one of core's, beside the %d spares: %s" % (SPARE, ids0))

        # 2. while it idles, no namespace of ours has a grant: eaid's DNS
        # refuses every name.  Asked from the host kernel's stack in each
        # namespace; the pooled sandbox's own namespace has no address or
        # route left there (runsc --network=sandbox moved eth0's to gVisor's
        # netstack), so exactly one answers nothing.
        rcodes, routeless = [], 0
        for name, _ in sorted(ids0):
            via = sh("ip", "-n", name, "route", "show", "default", check=False).stdout.split()
            if len(via) < 3:
                routeless += 1
                continue
            d = subprocess.run(["ip", "netns", "exec", name, sys.executable, os.path.join(HERE, "client.py"),
                                "dnsraw", via[2], "allowed.test"], capture_output=True, text=True, timeout=30)
            try:
                rcodes.append(json.loads(d.stdout).get("body"))
            except ValueError:
                rcodes.append(d.stdout + d.stderr)
        check(routeless == 1 and len(rcodes) == SPARE and all(x == "rcode=5 an=0" for x in rcodes),
              "idle namespaces (no grant yet): DNS REFUSED for an allowed name: %s (%d taken by gVisor)" %
              (rcodes, routeless))

        # 3. a hit: served by the pooled sandbox, still under its own allow list
        hits = metric(env, "eai_pool_egress_takes_total", 'result="hit"')
        rec, r, wall_warm = post(env, work, [["url", "http://allowed.test/"], ["resolve", "not-listed.test"],
                                             ["url", "https://tls.test/"], ["ifaces"]], ["allowed.test:80"])
        check(metric(env, "eai_pool_egress_takes_total", 'result="hit"') == hits + 1,
              "the next egress execution was served warm (pool hit): cold %.0f ms, warm %.0f ms" %
              (wall_cold * 1000, wall_warm * 1000))
        check(rec.get("status") == "succeeded" and len(r) == 4, "it ran all its cases: %s %s" %
              (rec.get("status"), (rec.get("stderr") or "")[-300:]))
        r += [{"ok": None, "error": "missing", "body": ""}] * (4 - len(r))
        check(r[0]["ok"] and r[0]["body"] == "hello allowed.test", "warm: allowed name works: %s" % r[0])
        check(not r[1]["ok"] and "gaierror" in r[1]["error"], "warm: a name not in the list: NXDOMAIN: %s" % r[1])
        check(not r[2]["ok"], "warm: a name of the profile not granted to this execution: refused: %s" % r[2])
        check("eth0" in r[3]["body"], "warm: gVisor's netstack, eth0: %s" % r[3])
        check("not-listed.test" not in net.dns_asked(), "the test DNS never saw the refused name")
        st, nl = env.api("GET", "/v1/sandbox/executions/%s/network" % rec.get("id", "x"))
        reasons = [(e.get("kind"), e.get("name"), e.get("decision"), e.get("reason"))
                   for e in ((nl or {}).get("log") or {}).get("entries", [])]
        check(("connect", "allowed.test", "allowed", None) in reasons and
              ("dns", "not-listed.test", "refused", "not_allowed") in reasons,
              "the warm execution's network log has its decisions: %s" % reasons)

        # 4. single use: the namespace it ran in is gone; the pool refills
        check(wait_ready(env, 1), "the pool refilled")
        deadline = time.time() + 20
        while time.time() < deadline and len(ns_ids()) != SPARE + 1:
            time.sleep(0.2)
        ids1 = ns_ids()
        check(len(ids1) == SPARE + 1 and len(ids0 - ids1) >= 1,
              "the claimed namespace was removed, not reused (before %s, after %s)" % (sorted(ids0), sorted(ids1)))
        # without egress: still only loopback (the --network=none pool)
        rec, r, _ = post(env, work, [["ifaces"]], None)
        check(rec.get("status") == "succeeded" and r and r[0]["body"] == "lo",
              "an execution without egress has only loopback: %s" % r)
    finally:
        if env:
            env.stop(clean=False)
        net.down()
    time.sleep(0.5)
    left = leftovers()
    check(not any(left.values()) and not pooled_runsc(),
          "after eaid stopped: nothing left (netns, veth, nft table, runsc): %s %s" % (left, pooled_runsc()))
    if failed and env:
        print(env.log_tail(60))
    subprocess.run(["rm", "-rf", work])
    print("%d passed, %d failed" % (len(passed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
