#!/usr/bin/env python3
"""The seed's Kit L3 proof, at the path the seed names: untrusted tool code run
with ``enterprise_ai.sandbox.run_untrusted`` (the Python SDK) through a real
``eaid serve`` on loopback into real runsc sandboxes.

  1. host write invisible: the code writes where the host's files are (a file
     this test made, the test's own directory, /etc) and its own /tmp; the
     host sees none of it;
  2. network refused: the code tries a TCP listener this test runs on the
     host's loopback, eaid's own port, an address of the test range
     198.18.0.0/15 and DNS; every try fails and the listener accepts nothing;
  3. refusal when the sandbox is unavailable: eaid with a runsc that is
     missing, then one that cannot start, refuses the code (503
     sandbox_unavailable) and the code never runs on the host (the file it
     would write does not appear).

Runs as a plain script (ctest test_runtime_gvisor_sandbox_py, labels gvisor;e2e)
or under pytest (``python3 -m pytest tests/test_runtime_gvisor_sandbox.py``).
The C suite of the same name (tests/sandbox) holds the backend to the same
proofs without eaid in between.
"""
import os
import socket
import stat
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "hostile"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "sdk", "python"))

import eaid_env  # noqa: E402
from eaid_env import Env, check  # noqa: E402

from enterprise_ai import EnterpriseAI, UnavailableError  # noqa: E402
from enterprise_ai import sandbox  # noqa: E402

_ENV = None


def live():
    """One eaid with the real runsc, shared by the proofs that run code."""
    global _ENV
    if _ENV is None:
        eaid_env.ensure_image()
        env = Env()
        env.make_key("l3-proof")
        env.start()
        _ENV = env
    return _ENV


def client_of(env, retries=5):
    return EnterpriseAI(base_url=env.url, api_key=env.key, max_retries=retries, retry_max_elapsed=5.0)


def teardown_module(module=None):
    global _ENV
    if _ENV is not None:
        _ENV.stop()
        _ENV = None


def test_host_write_invisible():
    env = live()
    host_dir = tempfile.mkdtemp(prefix="eai-l3-host-")
    os.chmod(host_dir, 0o777)  # writable by anyone on the host: the sandbox still cannot reach it
    victim = os.path.join(host_dir, "victim.txt")
    with open(victim, "w") as f:
        f.write("host data\n")
    os.chmod(victim, 0o666)
    code = r'''
import os
tries = {}
for p in (%r, %r, "/etc/eai-l3-proof", "/eai-l3-proof"):
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write("written by the sandbox\n")
        tries[p] = "written"
    except OSError as e:
        tries[p] = "refused: %%s" %% e.strerror
with open("/tmp/inside.txt", "w") as f:
    f.write("mine")
print(sorted(tries.items()))
print("own-tmp", open("/tmp/inside.txt").read())
''' % (victim, os.path.join(host_dir, "new.txt"))
    ex = sandbox.run_untrusted(code, client=client_of(env))
    check(ex.status == "succeeded", "status %s: %s" % (ex.status, ex.stderr))
    check("own-tmp mine" in ex.stdout, "the sandbox's own /tmp works: %r" % ex.stdout)
    with open(victim) as f:
        check(f.read() == "host data\n", "the host file was changed")
    check(sorted(os.listdir(host_dir)) == ["victim.txt"], "new host files: %r" % os.listdir(host_dir))
    for p in ("/etc/eai-l3-proof", "/eai-l3-proof"):
        check(not os.path.exists(p), "%s appeared on the host" % p)
    check("'/etc/eai-l3-proof', 'refused" in ex.stdout, "/etc is read-only inside: %r" % ex.stdout)
    os.unlink(victim)
    os.rmdir(host_dir)


def test_network_refused():
    env = live()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    srv.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
                accepted.append(c)
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    code = r'''
import socket
out = []
for host, port in (("127.0.0.1", %d), ("127.0.0.1", %d), ("198.18.0.1", 80)):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        out.append("%%s:%%d connected" %% (host, port))
    except OSError as e:
        out.append("%%s:%%d refused" %% (host, port))
    finally:
        s.close()
try:
    socket.getaddrinfo("example.org", 443)
    out.append("dns answered")
except OSError:
    out.append("dns refused")
print("\n".join(out))
''' % (srv.getsockname()[1], env.port)
    try:
        ex = sandbox.run_untrusted(code, client=client_of(env))
    finally:
        stop.set()
        t.join(5)
        srv.close()
    check(ex.status == "succeeded", "status %s: %s" % (ex.status, ex.stderr))
    check("connected" not in ex.stdout and "dns answered" not in ex.stdout, "network reached: %r" % ex.stdout)
    check(ex.stdout.count("refused") == 4, "every try refused: %r" % ex.stdout)
    check(not accepted, "the host listener accepted %d connections" % len(accepted))


def _refused_with(runsc_path, tmp):
    env = Env(env={"EAI_SANDBOX_RUNSC": runsc_path})
    try:
        env.make_key("l3-refusal")
        env.start()
        marker = os.path.join(tmp, "ran-on-host-%s" % os.path.basename(runsc_path))
        code = "open(%r, 'w').write('the code ran outside a sandbox')" % marker
        try:
            ex = sandbox.run_untrusted(code, client=client_of(env, retries=0))
            raise eaid_env.Fail("runsc %s: the code was accepted: %s %s" % (runsc_path, ex.status, ex.error))
        except UnavailableError as e:
            check(e.status == 503 and e.code == "sandbox_unavailable", "refusal %s %s" % (e.status, e.code))
        check(not os.path.exists(marker), "the code ran on the host (%s)" % marker)
    finally:
        env.stop()


def test_refused_when_sandbox_unavailable():
    tmp = tempfile.mkdtemp(prefix="eai-l3-refuse-")
    try:
        _refused_with(os.path.join(tmp, "no-such-runsc"), tmp)  # missing
        broken = os.path.join(tmp, "broken-runsc")              # present, cannot start a sandbox
        with open(broken, "w") as f:
            f.write("#!/bin/sh\necho 'runsc: cannot start' >&2\nexit 1\n")
        os.chmod(broken, stat.S_IRWXU)
        _refused_with(broken, tmp)
    finally:
        for n in os.listdir(tmp):
            os.unlink(os.path.join(tmp, n))
        os.rmdir(tmp)


if __name__ == "__main__":
    cases = [("L3: host write invisible", test_host_write_invisible),
             ("L3: network refused", test_network_refused),
             ("L3: refused when the sandbox is unavailable", test_refused_when_sandbox_unavailable)]
    try:
        eaid_env.run_cases(cases)
    finally:
        teardown_module()
