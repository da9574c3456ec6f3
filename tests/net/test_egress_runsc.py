#!/usr/bin/env python3
"""Egress through real `eaid serve` and real runsc (issue 11 items 2-7), as root.

A test internet of this test's own (testnet.py: DNS, HTTP, HTTPS with a CA
made here, a UDP sink, all on 198.18.0.0/15 in a network namespace made
here); eaid with a gVisor profile whose egress_allow lists names of that
internet, its resolver pointed at the test DNS, its namespace pool, prefix
and nftables table of this test's own.  Each execution runs client.py in
python:3.11-slim under runsc: its cases are the attacks of the issue.  Then
the network log (GET .../network), the view's summary, the audit chain and
/metrics are checked, and that nothing is left (namespaces, veths, the
nftables table, runsc processes).  Exit 0 only when every check passed.
"""
import base64
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
import eaid_env  # noqa: E402
from testnet import TestNet, sh, check, failed, passed  # noqa: E402

TAG = "%04x" % (os.getpid() & 0xffff)
PREFIX = "ear" + "abcdefghijklmnopqrstuvwxyz"[os.getpid() % 26]
POOL = "198.19.%d.0/24" % (os.getpid() % 250)
ALLOW = ["allowed.test:80", "tls.test:443", "*.wild.test:80", "198.18.2.20:8080", "rebind.test:80",
         "meta.test:80"]
# what an execution asks for (a subset of ALLOW: names, not patterns)
GRANT = ["allowed.test:80", "tls.test:443", "a.wild.test:80", "198.18.2.20:8080", "rebind.test:80", "meta.test:80"]


def req(host, close=False):
    """A GET request head, escaped as client.py's "send" takes it."""
    return r"GET / HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (host, r"Connection: close\r\n" if close else "")


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def run_cases(env, work, cases, egress=GRANT, timeout_s=120):
    """One execution running client.py over cases; (record, [results])."""
    with open(os.path.join(work, "cases.json"), "w") as f:
        json.dump(cases, f)
    body = {"profile": "net", "image": "python:3.11-slim",
            "command": ["python3", "/tmp/client.py", "batch", "/tmp/cases.json"],
            "limits": {"timeout_s": timeout_s},
            "files": [{"path": "/tmp/client.py", "content_b64": b64(os.path.join(HERE, "client.py"))},
                      {"path": "/tmp/cases.json", "content_b64": b64(os.path.join(work, "cases.json"))},
                      {"path": "/tmp/ca.pem", "content_b64": b64(os.path.join(work, "ca.pem"))}]}
    if egress is not None:
        body["network"] = {"egress": egress}
    st, b = env.api("POST", "/v1/sandbox/executions", body)
    if st != 202:
        return {"status": "refused", "http": st, "body": b}, []
    rec = env.wait_terminal(b["id"], timeout=timeout_s + 60)
    out = []
    for line in (rec.get("stdout") or "").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return rec, out


SPARE = 2  # network.spare: namespaces eaid keeps made ahead while it runs


def ns_ids():
    """{(name, namespace inode)} of this test's prefix: a name made again is another namespace."""
    out = set()
    for n in leftovers()["netns"]:
        name = n.split()[0]
        try:
            out.add((name, os.stat("/var/run/netns/" + name).st_ino))
        except OSError:
            pass
    return out


def leftovers():
    links = sh("ip", "-o", "link").stdout
    netns = sh("ip", "netns", "list").stdout
    tables = sh("nft", "list", "tables").stdout
    procs = sh("ps", "-eo", "args").stdout
    return {"links": [l for l in links.splitlines() if PREFIX in l],
            "netns": [n for n in netns.splitlines() if n.startswith(PREFIX + "-")],
            "table": ("inet " + PREFIX) in tables,
            "runsc": [p for p in procs.splitlines() if "runsc" in p and "--network=sandbox" in p]}


def main():
    if os.geteuid() != 0 or sh("sh", "-c", "command -v nft && command -v runsc", check=False).returncode != 0:
        print("test_egress_runsc: needs root, nft and runsc")
        return 1
    eaid_env.ensure_image()
    work = tempfile.mkdtemp(prefix="eai-egress-runsc-")
    net = TestNet(work, TAG)
    env = None
    try:
        check(net.up(), "test internet up")
        cfg = os.path.join(work, "eaid.yaml")
        with open(cfg, "w") as f:
            f.write("network:\n  resolver: \"198.18.2.53:53\"\n  pool: \"%s\"\n  prefix: %s\n"
                    "  synthetic: \"198.51.100.0/24\"\n"
                    # the cold egress path, whose leftovers are counted here
                    # (the warm one is test_egress_pool.py's)
                    "isolation:\n  gvisor: {egress_pool: false}\n"
                    "profiles:\n"
                    "  net:\n    backend: gvisor\n    runtime_class: gvisor\n"
                    "    defaults: {cpu: 1000m, memory: 256Mi, timeout_s: 60}\n"
                    "    max: {cpu: 1000m, memory: 512Mi, timeout_s: 180}\n"
                    "    egress_allow: %s\n" % (POOL, PREFIX, json.dumps(ALLOW)))
        env = eaid_env.Env(config=cfg, tmp=os.path.join(work, "eaid"))
        env.make_key()
        env.start(ready_path="/readyz", timeout=90)
        nft = sh("nft", "list", "table", "inet", PREFIX, check=False).stdout
        check('iifname "%s*"' % PREFIX in nft, "eaid installed its nftables table at start")
        st, b = env.api("GET", "/v1/sandbox/profiles")
        prof = [p for p in b.get("profiles", []) if p["name"] == "net"]
        check(st == 200 and prof and prof[0].get("egress") is True, "profile says egress: true: %s" % prof)

        if os.environ.get("EGRESS_DEBUG"):
            rec, r = run_cases(env, work, [["cat", "/etc/resolv.conf"], ["dnsraw", POOL.replace("0/24", "1"), "allowed.test"],
                                           ["resolve", "allowed.test"]])
            print(rec.get("status"), r, rec.get("stderr"))
        cases = [
            ["url", "http://allowed.test/"],
            ["url", "https://tls.test/", "/tmp/ca.pem"],
            ["url", "http://a.wild.test/"],
            ["resolve", "not-listed.test"],
            ["url", "http://allowed.test:8081/"],
            ["url", "http://198.18.2.20/"],
            ["url", "http://3323068948/"],
            ["url", "http://0xc6.0x12.0x2.0x14/"],
            ["url", "http://198.18.2.20:8080/"],
            ["resolve", "tls.test"],
            ["resolve", "allowed.test"],
            ["url", "http://rebind.test/"],
            ["url", "http://meta.test/"],
            ["url", "http://allowed.test/redir"],
            ["udp", "198.18.2.20", "9999"],
            ["tcp6", "::ffff:198.18.2.20", "80"],
            ["url", "http://allowed.test/big?n=%d" % (4 << 20)],
            ["url", "http://198.18.2.10/"],
            ["tcp6", "2001:db8::1", "80"],
            ["udpconn", "198.18.2.20", "443"],
            ["tls", "tls.test", "443", "other.test", "/tmp/ca.pem"],
            ["raw", "allowed.test", "80", r"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n"],
            # issue 36 item 1 through gVisor's own netstack (test_egress.py has them all)
            ["script", "allowed.test", "80", json.dumps([["send", req("allowed.test") + req("pipelined-gv.test")],
                                                         ["resp"], ["resp"]])],
            ["script", "allowed.test", "80", json.dumps([["sleep", 0.6], ["send", req("late-gv.test")], ["resp"]])],
            ["script", "allowed.test", "80", json.dumps([["send", "GET"], ["sleep", 0.05],
                                                         ["send", r" / HTTP/1.1\r\nHost: split-gv.test\r\n\r\n"],
                                                         ["resp"]])],
            ["tlsx", "tls.test", "443", "late-sni-gv.test", "/tmp/ca.pem", "0.6", "0", "0"],
            ["tlsx", "tls.test", "443", "tls.test", "/tmp/ca.pem", "0", "40", "0.02"],
            ["script", "allowed.test", "80", json.dumps([["send", req("allowed.test")], ["resp"],
                                                         ["send", req("allowed.test", True)], ["resp"]])],
        ]
        rec, r = run_cases(env, work, cases)
        check(rec.get("status") == "succeeded" and len(r) == len(cases),
              "the egress execution ran all its cases: %s %s %s" % (rec.get("status"), rec.get("body") or rec.get("error"),
                                                                    (rec.get("stderr") or "")[-400:]))
        r += [{"ok": None, "error": "missing", "elapsed": 99, "body": "", "n": 0}] * (len(cases) - len(r))
        check(r[0]["ok"] and r[0]["body"] == "hello allowed.test", "allowed name over HTTP: %s" % r[0])
        check(r[1]["ok"] and r[1]["body"] == "hello tls.test", "allowed name over HTTPS (SNI checked): %s" % r[1])
        check(r[2]["ok"] and r[2]["body"] == "hello a.wild.test", "*.suffix entry: %s" % r[2])
        check(not r[3]["ok"] and "gaierror" in r[3]["error"], "a name not in the list: NXDOMAIN: %s" % r[3])
        check(not r[4]["ok"] and r[4]["elapsed"] < 3, "allowed name on another port: refused fast: %s" % r[4])
        check(not r[5]["ok"] and r[5]["elapsed"] < 3, "IP literal not in the list: refused: %s" % r[5])
        check(not r[6]["ok"] and r[6]["elapsed"] < 3, "IP literal, decimal form: refused: %s" % r[6])
        check(not r[7]["ok"] and r[7]["elapsed"] < 3, "IP literal, hex form: refused: %s" % r[7])
        check(r[8]["ok"] and r[8]["body"].startswith("hello"), "IP literal entry with its port: allowed: %s" % r[8])
        check(r[9]["ok"] and r[9]["body"].startswith("198.51.100."), "allowed names get synthetic addresses: %s" % r[9])
        check(not r[11]["ok"] and r[11]["elapsed"] < 3, "rebinding to a private address: refused: %s" % r[11])
        check(not r[12]["ok"] and r[12]["elapsed"] < 3, "rebinding to the metadata address: refused: %s" % r[12])
        check(not r[13]["ok"], "redirect to a name not in the list fails on the second hop: %s" % r[13])
        check(not r[15]["ok"], "IPv4-mapped IPv6 literal of a listed address, other port: refused: %s" % r[15])
        check(not r[17]["ok"] and r[17]["elapsed"] < 3, "an allowed name's real address as a literal: refused: %s" % r[17])
        check(not r[18]["ok"], "IPv6 goes nowhere: %s" % r[18])
        check(not r[19]["ok"] and r[19]["elapsed"] < 3, "UDP/QUIC elsewhere: refused fast (ICMP), never answered: %s" % r[19])
        check(not r[20]["ok"], "SNI of another name to an allowed name's address: refused: %s" % r[20])
        check(not r[21]["ok"], "Host of another name (domain fronting over HTTP): refused: %s" % r[21])
        check(r[16]["ok"] and r[16]["n"] == 4 << 20, "4 MiB download through the gateway: %s" %
              {k: r[16].get(k) for k in ("ok", "n", "error")})
        check(not r[22]["ok"] and "pipelined-gv" not in r[22]["body"],
              "a second pipelined request with another Host: refused: %s" % r[22])
        check(not r[23]["ok"] and "late-gv" not in r[23]["body"], "a request after 600 ms of silence, another Host: "
              "refused: %s" % r[23])
        check(not r[24]["ok"] and "split-gv" not in r[24]["body"], "`GET` alone, the rest 50 ms later: refused: %s" % r[24])
        check(not r[25]["ok"] and "late-sni-gv" not in r[25]["body"],
              "a ClientHello for another name after 600 ms: refused: %s" % r[25])
        check(r[26]["ok"] and r[26]["body"] == "hello tls.test",
              "the allowed name's ClientHello in 40-byte records: works: %s" % r[26])
        check(r[27]["ok"] and r[27]["responses"] == ["hello allowed.test"] * 2,
              "keep-alive: two requests to the allowed name: %s" % r[27])

        time.sleep(0.5)
        check(not net.udp_seen(), "UDP other than DNS goes nowhere")
        asked = net.dns_asked()
        check("not-listed.test" not in asked and "other.test" not in asked,
              "the upstream DNS never saw a refused name: %s" % sorted(set(asked)))

        # the network log, its summary in the view, the audit, the metrics
        st, nl = env.api("GET", "/v1/sandbox/executions/%s/network" % rec["id"])
        log = (nl or {}).get("log") or {}
        reasons = [(e.get("kind"), e.get("name"), e.get("decision"), e.get("reason")) for e in log.get("entries", [])]
        for w in [("dns", "not-listed.test", "refused", "not_allowed"),
                  ("connect", "allowed.test", "refused", "port_not_allowed"),
                  ("connect", "", "refused", "not_allowed"),
                  ("connect", "rebind.test", "refused", "private_address"),
                  ("connect", "meta.test", "refused", "private_address"),
                  ("connect", "allowed.test", "allowed", None),
                  ("connect", "tls.test", "allowed", None),
                  ("connect", "tls.test", "refused", "sni_mismatch"),
                  ("connect", "allowed.test", "refused", "host_mismatch")]:
            check(st == 200 and w in reasons, "network log has %s" % (w,))
        named = [(e.get("reason"), e.get("host") or e.get("sni")) for e in log.get("entries", [])]
        for w in [("host_mismatch", "pipelined-gv.test"), ("host_mismatch", "late-gv.test"),
                  ("host_mismatch", "split-gv.test"), ("sni_mismatch", "late-sni-gv.test")]:
            check(w in named, "network log has %s" % (w,))
        check(log.get("bytes_in", 0) >= 4 << 20, "bytes counted: %s in" % log.get("bytes_in"))
        summ = (rec.get("network") or {}).get("summary") or {}
        check(summ.get("refused", 0) >= 8 and summ.get("allowed", 0) >= 5, "summary in the execution view: %s" % summ)
        other = eaid_env.Env(config=cfg, tmp=env.tmp, data=env.data)
        other.port, other.proc = env.port, env.proc
        other.make_key("other-tenant")
        st, _ = other.api("GET", "/v1/sandbox/executions/%s/network" % rec["id"])
        check(st == 404, "another tenant cannot read the network log: %s" % st)
        db = sqlite3.connect(os.path.join(env.data, "eai.db"))
        docs = [json.loads(d) for (d,) in db.execute(
            "SELECT doc FROM audit_events WHERE action = 'sandbox.finish' AND target = ?", (rec["id"],))]
        db.close()
        eg = docs[0].get("egress") if docs else None
        check(bool(eg) and eg.get("refused", 0) >= 8 and
              any(x.get("reason") == "private_address" for x in eg.get("refusals", [])),
              "audit (hash-chained) records the egress decisions: %s" % (json.dumps(eg)[:300] if eg else docs))
        res = env.cmd("audit", "verify")
        check(res.returncode == 0, "audit chain verifies: %s" % res.stdout[-200:])
        with __import__("urllib.request").request.urlopen(env.url + "/metrics", timeout=10) as m:
            metrics = m.read().decode()
        check('eai_sandbox_egress_connections_total{profile="net",decision="refused"}' in metrics and
              'eai_sandbox_egress_connections_total{profile="net",decision="allowed"}' in metrics and
              'eai_sandbox_egress_bytes_total{profile="net",direction="in"}' in metrics,
              "metrics count decisions and bytes")

        # two executions at once, each with its own grant: neither reaches the other's names
        def post_cases(cases, egress):
            with open(os.path.join(work, "cases2.json"), "w") as f:
                json.dump(cases, f)
            st, b = env.api("POST", "/v1/sandbox/executions", {
                "profile": "net", "image": "python:3.11-slim",
                "command": ["python3", "/tmp/client.py", "batch", "/tmp/cases.json"],
                "files": [{"path": "/tmp/client.py", "content_b64": b64(os.path.join(HERE, "client.py"))},
                          {"path": "/tmp/cases.json", "content_b64": b64(os.path.join(work, "cases2.json"))}],
                "network": {"egress": egress}})
            return b.get("id", "x")
        ea = post_cases([["sleep", "1.5"], ["url", "http://allowed.test/"], ["url", "http://a.wild.test/"]],
                        ["allowed.test:80"])
        eb = post_cases([["sleep", "1.5"], ["url", "http://a.wild.test/"], ["url", "http://allowed.test/"]],
                        ["a.wild.test:80"])
        ra = [json.loads(x) for x in (env.wait_terminal(ea).get("stdout") or "").splitlines() if x.startswith("{")]
        rb = [json.loads(x) for x in (env.wait_terminal(eb).get("stdout") or "").splitlines() if x.startswith("{")]
        check(len(ra) == 3 and ra[1]["ok"] and not ra[2]["ok"] and len(rb) == 3 and rb[1]["ok"] and not rb[2]["ok"],
              "two concurrent grants stay apart (each its own names only): %s / %s" % (ra[1:], rb[1:]))

        # without egress: today's --network=none, only loopback
        rec3, r3 = run_cases(env, work, [["ifaces"], ["url", "http://allowed.test/"]], egress=None)
        check(len(r3) == 2 and r3[0]["body"] == "lo", "an execution without egress has only loopback: %s" % r3[:1])
        check(len(r3) == 2 and not r3[1]["ok"], "and reaches nothing: %s" % r3[1:])
        check("network" not in rec3 or rec3.get("network") is None, "no network in its view")
        rec4, r4 = run_cases(env, work, [["ifaces"]])
        check(len(r4) == 1 and "eth0" in r4[0]["body"], "an execution with egress has eth0 (gVisor netstack): %s" % r4)
        # a grant outside the profile's list is still refused at admission
        st, b = env.api("POST", "/v1/sandbox/executions", {"profile": "net", "image": "python:3.11-slim",
                                                             "command": ["true"],
                                                             "network": {"egress": ["other.test:80"]}})
        check(st == 422 and (b.get("error") or {}).get("code") == "egress_not_allowed", "grant outside the list: 422")
        time.sleep(0.5)
        left = leftovers()
        check(len(left["links"]) == SPARE and len(left["netns"]) == SPARE and not left["runsc"],
              "after the executions: only the %d spare namespaces, no runsc left: %s" % (SPARE, left))

        # every end removes the namespace: timeout, cancel, failure
        def sleeper(timeout_s, argv=("python3", "-c", "import time; time.sleep(60)")):
            st, b = env.api("POST", "/v1/sandbox/executions", {
                "profile": "net", "image": "python:3.11-slim", "command": list(argv),
                "limits": {"timeout_s": timeout_s}, "network": {"egress": ["allowed.test:80"]}})
            check(st == 202, "egress execution accepted: %s" % st)
            return b.get("id", "x")

        def wait_netns(present, before=frozenset(), secs=20):
            # present: the spares and one running execution's namespace; else
            # the spares only, and one of `before` (the spare the execution
            # took; namespaces are never used twice) is gone
            deadline = time.time() + secs
            while time.time() < deadline:
                ids = ns_ids()
                if len(ids) == SPARE + (1 if present else 0) and (present or not before or before - ids):
                    return True
                time.sleep(0.1)
            return False

        before = ns_ids()
        rec5 = env.wait_terminal(sleeper(2))
        check(rec5["status"] == "timeout" and wait_netns(False, before), "timeout: ended, namespace removed: %s %s" %
              (rec5["status"], leftovers()))
        eid = sleeper(60)
        before = ns_ids()
        check(wait_netns(True), "a running egress execution has its namespace")
        st, nl = env.api("GET", "/v1/sandbox/executions/%s/network" % eid)
        check(st == 200 and isinstance((nl or {}).get("log"), dict) and nl.get("status") == "running",
              "while it runs, the live network log: %s" % nl)
        env.api("POST", "/v1/sandbox/executions/%s/cancel" % eid, {})
        rec6 = env.wait_terminal(eid)
        check(rec6["status"] == "cancelled" and wait_netns(False, before), "cancel: ended, namespace removed: %s %s" %
              (rec6["status"], leftovers()))
        before = ns_ids()
        rec7 = env.wait_terminal(sleeper(10, ("/nonexistent",)))
        check(rec7["status"] in ("failed", "error") and wait_netns(False, before), "failure: namespace removed: %s %s" %
              (rec7["status"], leftovers()))
        # eaid killed with an egress execution running: the next start sweeps
        eid = sleeper(60)
        check(wait_netns(True), "running again before the kill")
        os.kill(env.proc.pid, 9)
        env.proc.wait()
        before = ns_ids()
        check(len(before) == SPARE + 1, "kill -9 leaves the namespaces (the sweep's job): %s" % leftovers())
        env.start(ready_path="/readyz", timeout=90)
        check(wait_netns(False) and not (ns_ids() & before) and len(leftovers()["links"]) == SPARE,
              "restart: the start-up sweep removed them all (fresh spares only): %s" % leftovers())
        rec8 = env.wait_terminal(eid, timeout=120)
        check(rec8["status"] in ("error", "failed"), "the killed run is ended after the restart: %s" % rec8["status"])
    finally:
        if env:
            env.stop(clean=False)
        net.down()
    left = leftovers()
    check(not any(left.values()), "after eaid stopped: nothing left (netns, veth, nft table, runsc): %s" % left)
    if failed and env:
        print(env.log_tail(40))
    subprocess.run(["rm", "-rf", work])
    print("%d passed, %d failed" % (len(passed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
