#!/usr/bin/env python3
"""The egress gateway's connection budgets (issue 36 item 7) and where its
sockets answer (item 8), with the real engine (egress_harness) and the test
internet of testnet.py, as root:

  - three grants: a1 and a2 of tenant a, b1 of tenant b; a tenant may hold 4
    connections at once, the node 6, each execution 16;
  - a1 holds 4 (answered); a2's first is refused (connection_budget: the
    tenant's), while b1 holds 2 (answered: 6 in all); b1's third is refused
    (the node's); when a1 lets go, a2 is served again;
  - the DNS and gateway ports answer the sandboxes' veths only: from the
    host's loopback the gateway port resets and the DNS port is unreachable;
  - every refusal is in the grant's network log as connection_budget.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from testnet import TestNet, check, failed, passed, sh, stop  # noqa: E402

HARNESS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("EAI_BUILD_DIR", "build"), "tests",
                                                              "egress_harness")
TAG = "%04x" % ((os.getpid() + 7) & 0xffff)
PREFIX = "eab" + "abcdefghijklmnopqrstuvwxyz"[os.getpid() % 26]
POOL = "198.19.%d.0/24" % ((os.getpid() + 3) % 250)
NS = {}  # exec id -> (netns path, host ip)


def client_cmd(work, exec_id, *args):
    path, host_ip = NS[exec_id]
    return ["nsenter", "--net=" + path, "unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$@"', os.path.join(work, "resolv-%s.conf" % exec_id),
            sys.executable, os.path.join(HERE, "client.py")] + list(args)


def hold(work, exec_id, ip, n, seconds):
    """Start holding n connections from exec_id's namespace; returns (Popen, held count) once they are up."""
    p = subprocess.Popen(client_cmd(work, exec_id, "hold", ip, "80", "allowed.test", str(n), str(seconds)),
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    held = json.loads(line)["held"] if line.strip().startswith("{") else -1
    return p, held


def finish(p):
    p.wait(timeout=60)
    out = p.stdout.read().strip().splitlines()  # (communicate() would skip what readline buffered)
    return json.loads(out[-1]) if out else {"ok": False, "error": "no output"}


def main():
    if os.geteuid() != 0 or not shutil.which("nft"):
        print("test_egress_budget: needs root and nft")
        return 1
    work = tempfile.mkdtemp(prefix="eai-egress-budget-")
    net = TestNet(work, TAG)
    harness = None
    procs = []
    try:
        check(net.up(), "test internet up")
        harness = subprocess.Popen([HARNESS, "--resolver", "198.18.2.53:53", "--synthetic", "198.51.100.0/24",
                                    "--netns", PREFIX, "--pool", POOL, "--max-connections", "16",
                                    "--max-connections-tenant", "4", "--max-connections-node", "6",
                                    "--tenant", "a", "--grant", "a1", "allowed.test:80",
                                    "--grant", "a2", "allowed.test:80",
                                    "--tenant", "b", "--grant", "b1", "allowed.test:80"],
                                   stdout=subprocess.PIPE, stderr=open(work + "/decisions.log", "w"), text=True)
        ports = {}
        for line in iter(harness.stdout.readline, ""):
            w = line.split()
            if w and w[0] == "grant":
                NS[w[1]] = (w[2], w[4])
            elif w and w[0].startswith("dns_port="):
                ports = dict(x.split("=") for x in w)
            if line.strip() == "ready":
                break
        check(set(NS) == {"a1", "a2", "b1"}, "three grants in their namespaces: %s" % sorted(NS))
        for e, (_, host_ip) in NS.items():
            with open(os.path.join(work, "resolv-%s.conf" % e), "w") as f:
                f.write("nameserver %s\noptions timeout:2 attempts:1\n" % host_ip)
        # each sandbox resolves the name through its own grant (its synthetic answer)
        ips = {e: json.loads(subprocess.run(client_cmd(work, e, "resolve", "allowed.test"), capture_output=True,
                                            text=True, timeout=30).stdout.strip().splitlines()[-1])["body"]
               for e in NS}

        pa1, held = hold(work, "a1", ips["a1"], 4, 20)
        procs.append(pa1)
        check(held == 4, "a1 holds the tenant's 4 connections: %d" % held)
        pa2, held = hold(work, "a2", ips["a2"], 1, 0)
        r = finish(pa2)
        check(held == 0 and not r["ok"], "a2 (same tenant) refused while a holds 4: %s" % r)
        pb1, held = hold(work, "b1", ips["b1"], 2, 20)
        procs.append(pb1)
        check(held == 2, "b1 (another tenant) is served beside a: %d" % held)
        pb1x, held = hold(work, "b1", ips["b1"], 1, 0)
        r = finish(pb1x)
        check(held == 0 and not r["ok"], "b1's seventh connection on the node refused: %s" % r)
        stop(pa1)
        deadline = time.time() + 15  # the gateway sees a1's connections close
        while True:
            pa2, held = hold(work, "a2", ips["a2"], 1, 0)
            r = finish(pa2)
            if held == 1 or time.time() > deadline:
                break
            time.sleep(0.2)
        check(held == 1 and r["ok"], "once a1 let go, a2 is served: %s" % r)

        # the sockets answer the veths only
        gw, dns = int(ports.get("gateway_port", "0")), int(ports.get("dns_port", "0"))
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect(("127.0.0.1", gw))
            s.sendall(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
            got = s.recv(10)
            reached = bool(got)
        except OSError as e:
            reached = False
            why = str(e)
        finally:
            s.close()
        check(not reached, "the gateway port from the host's loopback: refused (%s)" % (why if not reached else "reached"))
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(2)
        try:
            u.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07allowed\x04test\x00\x00\x01\x00\x01",
                     ("127.0.0.1", dns))
            u.recvfrom(512)
            answered = True
        except OSError:
            answered = False
        finally:
            u.close()
        check(not answered, "the DNS port from the host's loopback: no answer")

        harness.send_signal(signal.SIGTERM)
        out, _ = harness.communicate(timeout=15)
        logs = {}
        for line in out.strip().splitlines():
            if line.startswith("{"):
                d = json.loads(line)
                logs[d["exec_id"]] = d["log"]
        for e in ("a2", "b1"):
            reasons = [x.get("reason") for x in logs.get(e, {}).get("entries", []) if x.get("decision") == "refused"]
            check("connection_budget" in reasons, "%s's network log says connection_budget: %s" % (e, reasons))
    finally:
        for p in procs:
            stop(p)
        stop(harness)
        net.down()
        shutil.rmtree(work, ignore_errors=True)
    check(("inet " + PREFIX) not in sh("nft", "list", "tables").stdout, "no nft table left")
    print("%d passed, %d failed" % (len(passed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
