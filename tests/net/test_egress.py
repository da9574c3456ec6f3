#!/usr/bin/env python3
"""Egress engine end to end (core/net/egress.c, docs/egress.md), as root.

  test_egress.py HARNESS [--no-splice]

(--no-splice: the gateway splices through bufferevents instead of splice(2),
the fallback path; ctest runs both.)

Builds a test internet of its own (testnet.py: network namespace "internet"
with peers.py: DNS, HTTP, HTTPS with a CA made here, a UDP sink) on
198.18.0.0/15 test addresses behind a veth.  HARNESS runs the real DNS responder and gateway and
does what eaid does per execution (core/net/netns.c): the sandbox's network
namespace and veth from a pool of 198.19.x.0/30 slots, and the nftables table
that redirects its DNS and TCP to them, under a prefix of this test's own.
client.py then runs inside that namespace for each case, and the decisions
are read from the harness's log.  Nothing talks
to any address but these test ranges; everything made is removed at the end,
and the test checks that.  Exit 0 only when every case passed; the last line
is "N passed, M failed".
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HARNESS = sys.argv[1]
COPY = ["--no-splice"] if "--no-splice" in sys.argv[2:] else []
CAP = 64 << 20  # the grant's byte cap (both ways)
FIRST_S = 2.0   # the harness's first-flight bound (eaid's is 10 s): a silent client is closed after it
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from testnet import TestNet, sh, stop, check, failed, passed  # noqa: E402

TAG = "%04x" % (os.getpid() & 0xffff)
PREFIX = "eat" + "abcdefghijklmnopqrstuvwxyz"[os.getpid() % 26]  # the harness's netns/nft prefix
POOL = "198.19.%d.0/24" % (os.getpid() % 250)


SBX = {}  # filled from the harness: path, sandbox_ip, host_ip


def client(work, *args):
    # the sandbox's own resolv.conf, in a private mount namespace
    cmd = ["nsenter", "--net=" + SBX["path"], "unshare", "-m", "--propagation", "private", "sh", "-c",
           'mount --bind "$0" /etc/resolv.conf && exec "$@"', os.path.join(work, "resolv.conf"),
           sys.executable, os.path.join(HERE, "client.py")] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "error": "client: " + r.stderr[-300:], "elapsed": 0}


def script(work, ip, port, *steps):
    """client.py's script case: timed sends and reads on one connection."""
    return client(work, "script", ip, str(port), json.dumps(list(steps)))


def req(host, close=False):
    """A GET request head, escaped as client.py's "send" takes it."""
    return r"GET / HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (host, r"Connection: close\r\n" if close else "")


def unescaped_len(text):
    return len(text.encode().decode("unicode_escape"))


def tricks(work, net, allowed_ip, tls_ip):
    """Issue 36, item 1: every request and every TLS handshake on an allowed
    connection is checked whenever it comes; no upstream connection before
    the first flight is checked.  Each trick uses its own name, so the log
    check at the end can find its refusal, and a bypass would show as a
    "hello <that name>" answer from the test server."""
    ca = work + "/ca.pem"
    r = script(work, allowed_ip, 80, ["sleep", 0.6], ["send", req("late-host.test")], ["resp"])
    check(not r["ok"] and "late-host.test" not in r["body"],
          "a request after 600 ms of silence with another name's Host: refused: %s" % r)
    r = script(work, allowed_ip, 80, ["send", r"GET / HTTP/1.1\r\n"], ["sleep", 0.6],
               ["send", r"Host: late-header.test\r\n\r\n"], ["resp"])
    check(not r["ok"] and "late-header" not in r["body"],
          "a Host header 600 ms after its request line, another name: refused: %s" % r)
    r = script(work, allowed_ip, 80, ["send", r"GET / HTTP/1.1\r\n"], ["sleep", 0.6],
               ["send", r"Host: allowed.test\r\nConnection: close\r\n\r\n"], ["resp"])
    check(r["ok"] and r["responses"] == ["hello allowed.test"],
          "the same with the allowed name: answered (slow is not refused): %s" % r)
    r = script(work, allowed_ip, 80, ["send", "GET"], ["sleep", 0.05],
               ["send", r" / HTTP/1.1\r\nHost: split-get.test\r\n\r\n"], ["resp"])
    check(not r["ok"] and "split-get" not in r["body"], "`GET` alone, the rest 50 ms later with another Host: refused: %s" % r)
    r = script(work, allowed_ip, 80, ["send", r"\r\n" + req("crlf.test")], ["resp"])
    check(not r["ok"] and "crlf" not in r["body"], "a leading CRLF, then a request with another Host: refused: %s" % r)
    r = script(work, allowed_ip, 80, ["send", req("allowed.test") + req("pipelined.test")], ["resp"], ["resp"])
    check(not r["ok"] and "pipelined" not in r["body"],
          "a second pipelined request with another Host: never answered, the connection reset: %s" % r)
    r = script(work, allowed_ip, 80, ["send", req("allowed.test")], ["resp"], ["send", req("keepalive.test")], ["resp"])
    check(not r["ok"] and r["responses"] == ["hello allowed.test"],
          "keep-alive: the first request answered, a second with another Host refused: %s" % r)
    r = script(work, allowed_ip, 80, ["send", req("allowed.test")], ["resp"], ["send", req("allowed.test", True)],
               ["resp"])
    check(r["ok"] and r["responses"] == ["hello allowed.test"] * 2,
          "keep-alive: two requests to the allowed name, both answered: %s" % r)
    r = script(work, allowed_ip, 80, ["send", req("allowed.test") + req("allowed.test", True)], ["resp"], ["resp"])
    check(r["ok"] and r["responses"] == ["hello allowed.test"] * 2,
          "pipelined: two requests to the allowed name, both answered: %s" % r)
    inner = req("smuggled.test")  # a request inside a body is a body
    r = script(work, allowed_ip, 80,
               ["send", r"POST /up HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: %d\r\n\r\n" % unescaped_len(inner)
                + inner], ["resp"],
               ["send", r"POST /up HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n"
                + r"5\r\nhello\r\n0\r\n\r\n"], ["resp"],
               ["send", req("after-body.test")], ["resp"])
    check(not r["ok"] and r["responses"] == ["posted %d allowed.test" % unescaped_len(inner), "posted 5 allowed.test"],
          "bodies (Content-Length, chunked) pass unread; the request after them is checked and refused: %s" % r)
    before = len(net.accepts("198.18.2.10", 80))
    r = script(work, allowed_ip, 80, ["send", r"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"], ["eof", 5])
    check(r["ended"] == "reset" and len(net.accepts("198.18.2.10", 80)) == before,
          "HTTP/2 prior knowledge on port 80: refused, no upstream connection: %s" % r)
    r = script(work, allowed_ip, 80, ["eof", FIRST_S + 5])
    check(r["ended"] == "reset" and FIRST_S - 0.3 <= r["elapsed"] < FIRST_S + 3 and
          len(net.accepts("198.18.2.10", 80)) == before,
          "a silent client on 80: closed at the first-flight bound, the test server saw no connection: %s" % r)
    before443 = len(net.accepts("198.18.2.10", 443))
    r = script(work, tls_ip, 443, ["eof", FIRST_S + 5])
    check(r["ended"] == "reset" and FIRST_S - 0.3 <= r["elapsed"] < FIRST_S + 3 and
          len(net.accepts("198.18.2.10", 443)) == before443,
          "a silent client on 443: closed at the first-flight bound, the test server saw no connection: %s" % r)
    r = script(work, allowed_ip, 80, ["sleep", 1.0], ["send", req("allowed.test", True)], ["resp"])
    new = net.accepts("198.18.2.10", 80)[before:]
    check(r["ok"] and r["responses"] == ["hello allowed.test"] and len(new) == 1 and new[0] >= r["first_send"],
          "silent for 1 s, then a request: the upstream connection comes after the first bytes (%s >= %s): %s" %
          (new, r.get("first_send"), r))
    r = client(work, "tlsx", tls_ip, "443", "late-sni.test", ca, "0.6", "0", "0")
    check(not r["ok"] and "late-sni" not in r["body"], "a ClientHello for another name after 600 ms: refused: %s" % r)
    r = client(work, "tlsx", tls_ip, "443", "tls.test", ca, "0.6", "0", "0")
    check(r["ok"] and r["body"] == "hello tls.test", "the allowed name's ClientHello after 600 ms: works: %s" % r)
    r = client(work, "tlsx", tls_ip, "443", "split-sni.test", ca, "0", "40", "0.02")
    check(not r["ok"] and "split-sni" not in r["body"],
          "a ClientHello for another name in 40-byte records, a segment each: reassembled, refused: %s" % r)
    r = client(work, "tlsx", tls_ip, "443", "tls.test", ca, "0", "40", "0.02")
    check(r["ok"] and r["body"] == "hello tls.test",
          "the allowed name's ClientHello split the same way: reassembled, works: %s" % r)
    r = client(work, "tlsx", tls_ip, "443", "tls.test", ca, "0", "0", "0", "1.2")
    check(r["ok"] and r["body"] == "hello tls.test" and r.get("version") == "TLSv1.2",
          "TLS 1.2 to the allowed name (its encrypted Finished passes, the version read from the server's hello): "
          "%s" % r)
    r = client(work, "tlsx", tls_ip, "443", "split12.test", ca, "0", "40", "0", "1.2")
    check(not r["ok"] and "split12" not in r["body"], "TLS 1.2, a split ClientHello for another name: refused: %s" % r)
    r = script(work, tls_ip, 443, ["send", r"GET / HTTP/1.1\r\nHost: tls.test\r\n\r\n"], ["eof", 5])
    check(r["ended"] == "reset", "plain HTTP on 443: refused: %s" % r)
    r = script(work, allowed_ip, 7000, ["sleep", 0.6], ["send", req("port7000.test")], ["eof", 5])
    check(r["ended"] == "reset", "another port: silent past the server-first window, then HTTP with another Host: "
          "refused: %s" % r)


def check_tricks_log(log):
    """The refusals of tricks() in the network log, each with its name."""
    ents = log["entries"]

    def refused(reason, key=None, val=None):
        return [e for e in ents if e.get("kind") == "connect" and e.get("decision") == "refused" and
                e.get("reason") == reason and (key is None or e.get(key) == val)]
    for host in ("late-host.test", "late-header.test", "split-get.test", "crlf.test", "pipelined.test",
                 "keepalive.test", "after-body.test", "port7000.test"):
        check(len(refused("host_mismatch", "host", host)) == 1, "network log: host_mismatch with host %s" % host)
    for sni in ("late-sni.test", "split-sni.test", "split12.test"):
        check(len(refused("sni_mismatch", "sni", sni)) == 1, "network log: sni_mismatch with sni %s" % sni)
    check(len(refused("http2_refused")) == 1, "network log: http2_refused")
    check(len([e for e in refused("sniff_timeout") if e.get("name") in ("allowed.test", "tls.test")]) >= 2,
          "network log: sniff_timeout for the silent clients")
    check(len(refused("tls_malformed", "name", "tls.test")) >= 1, "network log: tls_malformed for plain HTTP on 443")
    check(not any("smuggled" in json.dumps(e) for e in ents), "the request inside a body was never read as one")
    late = [e for h in ("pipelined.test", "keepalive.test", "after-body.test") for e in refused("host_mismatch", "host", h)]
    check(len(late) == 3 and all(e.get("checked", 0) >= 1 and e.get("address") == "198.18.2.10" for e in late),
          "refusals after the upstream connection: its address, and how many requests passed before: %s" % late)
    ends = [e.get("end") for e in ents if e.get("decision") == "allowed" and e.get("kind") == "connect"]
    check(ends.count("host_mismatch") >= 4, "their allowed entries end with host_mismatch: %s" % ends)


def main():
    if os.geteuid() != 0 or not shutil.which("nft"):
        print("test_egress: needs root and nft (apt-get install nftables)")
        return 1
    work = tempfile.mkdtemp(prefix="eai-egress-")
    net = TestNet(work, TAG)
    harness = None
    log = {}
    try:
        check(net.up(), "test internet up")
        entries = ",".join(["allowed.test:80", "tls.test:443", "*.wild.test:80", "198.18.2.20:8080",
                            "rebind.test:80", "meta.test:80", "allowed.test:7000"])
        harness = subprocess.Popen([HARNESS, "--resolver", "198.18.2.53:53", "--synthetic", "198.51.100.0/24",
                                    "--netns", PREFIX, "--pool", POOL, "--max-bytes", str(CAP),
                                    "--first-flight-ms", str(int(FIRST_S * 1000))] + COPY +
                                   ["--grant", "sbx_test", entries],
                                   stdout=subprocess.PIPE, stderr=open(work + "/decisions.log", "w"), text=True)
        for line in iter(harness.stdout.readline, ""):
            w = line.split()
            if w and w[0] == "grant":
                SBX.update(path=w[2], sandbox_ip=w[3], host_ip=w[4])
            if line.strip() == "ready":
                break
        check(os.path.exists(SBX.get("path", "/nonexistent")), "harness made the sandbox namespace: %s" % SBX)
        nft = sh("nft", "list", "table", "inet", PREFIX, check=False).stdout
        check('iifname "%s*"' % PREFIX in nft and "redirect to" in nft, "harness installed its nftables table")
        with open(os.path.join(work, "resolv.conf"), "w") as f:
            f.write("nameserver %s\noptions timeout:2 attempts:1\n" % SBX["host_ip"])

        r = client(work, "url", "http://allowed.test/")
        check(r["ok"] and r["body"] == "hello allowed.test", "allowed name over HTTP: %s" % r)
        r = client(work, "url", "https://tls.test/", work + "/ca.pem")
        check(r["ok"] and r["body"] == "hello tls.test", "allowed name over HTTPS, SNI checked: %s" % r)
        r = client(work, "url", "http://a.wild.test/")
        check(r["ok"] and r["body"] == "hello a.wild.test", "*.suffix entry: %s" % r)
        r = client(work, "resolve", "not-listed.test")
        check(not r["ok"] and "gaierror" in r["error"], "a name not in the list: NXDOMAIN: %s" % r)
        r = client(work, "resolve", "wild.test")
        check(not r["ok"], "*.suffix does not cover the suffix itself: %s" % r)
        r = client(work, "url", "http://allowed.test:8081/")
        check(not r["ok"] and r["elapsed"] < 3, "allowed name, other port: refused fast: %s" % r)
        r = client(work, "url", "http://198.18.2.20/")
        check(not r["ok"] and r["elapsed"] < 3, "IP literal not in the list: refused: %s" % r)
        r = client(work, "url", "http://198.18.2.10/")
        check(not r["ok"] and r["elapsed"] < 3, "an allowed name's real address used as a literal: refused: %s" % r)
        r = client(work, "url", "http://3323068948/")
        check(not r["ok"] and r["elapsed"] < 3, "IP literal in decimal form: refused: %s" % r)
        r = client(work, "url", "http://0xc6.0x12.0x2.0x14/")
        check(not r["ok"] and r["elapsed"] < 3, "IP literal in hex form: refused: %s" % r)
        r = client(work, "url", "http://198.18.2.20:8080/")
        check(r["ok"] and r["body"].startswith("hello"), "IP literal entry with its port: allowed: %s" % r)
        tls_ip = client(work, "resolve", "tls.test")["body"]
        r = client(work, "tls", tls_ip, "443", "other.test", work + "/ca.pem")
        check(not r["ok"], "SNI of another name sent to an allowed name's address: refused: %s" % r)
        allowed_ip = client(work, "resolve", "allowed.test")["body"]
        r = client(work, "raw", allowed_ip, "80", r"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n")
        check(not r["ok"], "Host of another name (domain fronting over HTTP): refused: %s" % r)
        r = client(work, "raw", allowed_ip, "80", r"GET http://other.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        check(not r["ok"], "absolute-form request naming another host: refused: %s" % r)
        r = client(work, "url", "http://rebind.test/")
        check(not r["ok"] and r["elapsed"] < 3, "allowed name answering a private address: refused: %s" % r)
        r = client(work, "url", "http://meta.test/")
        check(not r["ok"] and r["elapsed"] < 3, "allowed name answering the metadata address: refused: %s" % r)
        r = client(work, "url", "http://allowed.test/redir")
        check(not r["ok"], "redirect to a name not in the list fails on the second hop: %s" % r)
        client(work, "udp", "198.18.2.20", "9999")
        r = client(work, "url", "http://allowed.test/big?n=%d" % (8 << 20))
        check(r["ok"] and r["n"] == 8 << 20, "8 MiB download through the gateway: %s" % {k: r[k] for k in ("ok", "n", "error")})
        r = client(work, "count", allowed_ip, "7000", str(6 << 20))
        check(r["ok"], "6 MiB up, half close, the server's count and hash back to EOF: %s" % r)
        tricks(work, net, allowed_ip, tls_ip)  # before the byte cap is spent
        r = client(work, "url", "http://allowed.test/big?n=%d" % (CAP + (16 << 20)))
        check(not r["ok"] and "IncompleteRead" in r["error"], "a download past the byte cap is cut: %s" % r)
        check(net.owns_route(), "the route to the test internet stayed this run's throughout")
        time.sleep(0.5)
        check(not net.udp_seen(), "UDP other than DNS goes nowhere")
        asked = net.dns_asked()
        check("not-listed.test" not in asked and "other.test" not in asked and "wild.test" not in asked,
              "the upstream DNS never saw a refused name: %s" % sorted(set(asked)))
        harness.send_signal(signal.SIGTERM)
        out, _ = harness.communicate(timeout=10)
        log = json.loads(out.strip().splitlines()[-1])["log"]
        reasons = [(e.get("kind"), e.get("name"), e.get("decision"), e.get("reason")) for e in log["entries"]]
        want = [("dns", "not-listed.test", "refused", "not_allowed"),
                ("connect", "allowed.test", "refused", "port_not_allowed"),
                ("connect", "", "refused", "not_allowed"),
                ("connect", "", "refused", "port_not_allowed"),
                ("connect", "tls.test", "refused", "sni_mismatch"),
                ("connect", "allowed.test", "refused", "host_mismatch"),
                ("connect", "allowed.test", "refused", "http_malformed"),
                ("connect", "rebind.test", "refused", "private_address"),
                ("connect", "meta.test", "refused", "private_address"),
                ("connect", "allowed.test", "allowed", None),
                ("connect", "tls.test", "allowed", None)]
        for w in want:
            check(w in reasons, "network log has %s" % (w,))
        meta = [e for e in log["entries"] if e.get("name") == "meta.test" and e.get("reason") == "private_address"]
        check(bool(meta) and meta[0].get("address") == "169.254.169.254" and
              meta[0].get("address_class") == "link_local", "refusal names the address and its class: %s" % meta[:1])
        check(log["bytes_in"] >= 8 << 20 and log["bytes_out"] >= 6 << 20,
              "bytes counted: %s in, %s out" % (log["bytes_in"], log["bytes_out"]))
        ends = [e.get("end") for e in log["entries"] if e.get("decision") == "allowed" and e.get("kind") == "connect"]
        check("byte_cap" in ends and "closed" in ends, "connections ended closed and byte_cap: %s" % ends)
        check_tricks_log(log)
    finally:
        stop(harness)
        net.down()
        shutil.rmtree(work, ignore_errors=True)
    links = sh("ip", "-o", "link").stdout
    netns = sh("ip", "netns", "list").stdout
    check(TAG not in links and PREFIX not in links and net.ns not in netns and PREFIX + "-" not in netns and
          ("inet " + PREFIX) not in sh("nft", "list", "tables").stdout, "no netns, veth or nft table left")
    print("%d passed, %d failed" % (len(passed), len(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
