"""The test internet shared by the egress tests (tests/net): network
namespace "eai-ti-TAG" with peers.py (DNS 198.18.2.53, HTTP/HTTPS on
198.18.2.10 and .20, a UDP sink) behind a veth whose host side is
198.18.1.1, a route to 198.18.2.0/24 through it, and a CA made here with a
certificate for tls.test and allowed.test.  Test addresses only
(198.18.0.0/15); down() removes all of it.

Its addresses and route are fixed, so one test internet at a time on a host
(LOCK, taken in up(), released in down(); other runs wait up to 15 min), and
while it is up an unreachable route for 198.18.0.0/15 (less specific than
its own) makes sure test traffic never leaves by the default route, whatever
another process does to the routing table."""
import fcntl
import os
import subprocess
import sys
import time

LOCK = "/run/lock/eai-testnet.lock"
LOCK_WAIT_S = 900
GUARD = ["unreachable", "198.18.0.0/15", "metric", "4000"]

HERE = os.path.dirname(os.path.abspath(__file__))


# The checks of a test file: each printed "ok" or "FAIL" with the time
# since start; the file ends with "N passed, M failed" and exits 1 on any.
passed, failed = [], []
T0 = time.monotonic()


def check(cond, what):
    what = "[%.1fs] %s" % (time.monotonic() - T0, what)
    (passed if cond else failed).append(what)
    print(("ok   " if cond else "FAIL ") + what, flush=True)


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def stop(p):
    """Terminate p (a Popen, may be None) if it still runs; killed after 5 s."""
    if p and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()


class TestNet:
    def __init__(self, work, tag):
        self.work, self.tag = work, tag
        self.ns = "eai-ti-" + tag
        self.host_if, self.ns_if = "eai-i%sh" % tag, "eai-i%sn" % tag
        self.peers = None
        self.lock = None

    def _lock(self):
        os.makedirs(os.path.dirname(LOCK), exist_ok=True)
        self.lock = open(LOCK, "w")
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError("another test internet has been up for %d s (%s)" % (LOCK_WAIT_S, LOCK))
                time.sleep(0.2)

    def owns_route(self):
        """Traffic to the test internet goes through this run's veth."""
        out = sh("ip", "-o", "route", "get", "198.18.2.10", check=False).stdout
        return (" dev %s " % self.host_if) in out

    def up(self):
        w = self.work
        self._lock()
        sh("ip", "route", "replace", *GUARD)
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
        sh("ip", "link", "set", self.ns_if, "netns", self.ns)
        sh("ip", "addr", "add", "198.18.1.1/30", "dev", self.host_if)
        sh("ip", "link", "set", self.host_if, "up")
        for a in ("198.18.1.2/30 dev " + self.ns_if, "198.18.2.10/32 dev lo", "198.18.2.20/32 dev lo",
                  "198.18.2.53/32 dev lo"):
            sh("ip", "-n", self.ns, "addr", "add", *a.split())
        sh("ip", "-n", self.ns, "link", "set", "lo", "up")
        sh("ip", "-n", self.ns, "link", "set", self.ns_if, "up")
        sh("ip", "-n", self.ns, "route", "add", "default", "via", "198.18.1.1")
        sh("ip", "route", "add", "198.18.2.0/24", "via", "198.18.1.2", "dev", self.host_if)
        if not self.owns_route():
            raise RuntimeError("the route to the test internet is not this run's: %s" %
                               sh("ip", "route", "get", "198.18.2.10", check=False).stdout)
        sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-days", "2", "-subj", "/CN=eai test CA", "-keyout", w + "/ca.key", "-out", w + "/ca.pem",
           "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
        sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-subj", "/CN=tls.test", "-keyout", w + "/srv.key", "-out", w + "/srv.csr")
        with open(w + "/ext.cnf", "w") as f:
            f.write("subjectAltName=DNS:tls.test,DNS:allowed.test\n")
        sh("openssl", "x509", "-req", "-in", w + "/srv.csr", "-CA", w + "/ca.pem", "-CAkey", w + "/ca.key",
           "-CAcreateserial", "-days", "2", "-out", w + "/srv.pem", "-extfile", w + "/ext.cnf")
        self.peers = subprocess.Popen(["nsenter", "--net=/var/run/netns/" + self.ns, sys.executable,
                                       os.path.join(HERE, "peers.py"), w, w + "/srv.pem", w + "/srv.key"],
                                      stdout=subprocess.PIPE, text=True)
        return self.peers.stdout.readline().strip() == "ready"

    def dns_asked(self):
        try:
            with open(os.path.join(self.work, "dns.log")) as f:
                return f.read().split()
        except OSError:
            return []

    def accepts(self, addr, port):
        """Unix times at which peers.py accepted a connection on addr:port."""
        try:
            with open(os.path.join(self.work, "accept.log")) as f:
                rows = [line.split() for line in f]
        except OSError:
            return []
        return [float(r[2]) for r in rows if len(r) == 3 and r[0] == addr and r[1] == str(port)]

    def udp_seen(self):
        return os.path.exists(os.path.join(self.work, "udp.log"))

    def down(self):
        stop(self.peers)
        sh("ip", "route", "del", "198.18.2.0/24", "dev", self.host_if, check=False)  # ours only
        sh("ip", "link", "del", self.host_if, check=False)
        sh("ip", "netns", "del", self.ns, check=False)
        if self.lock:
            sh("ip", "route", "del", *GUARD, check=False)
            self.lock.close()  # releases the lock
            self.lock = None
