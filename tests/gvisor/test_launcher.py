"""The launcher (plugins/gvisor/launcher/eai_launcher.c) on the host, as the
init of a PID namespace of its own (unshare, root only), the way runsc runs
it: it says ready, takes one launch line, runs the program, and kills and
reaps every other process of its namespace before it answers, so that
nothing the program left running writes into /tmp while the host collects
its files.  usage: test_launcher.py LAUNCHER"""
import os
import secrets
import select
import socket
import subprocess
import sys
import time

launcher = sys.argv[1]
if os.geteuid() != 0:
    print("skip: needs root (unshare --pid)")
    sys.exit(77)
failed = 0


def check(cond, what):
    global failed
    print(("ok   " if cond else "FAIL ") + what)
    failed += not cond


def launch(argv, env=("PATH=/usr/bin:/bin",)):
    """Start the launcher in a new PID namespace and send it argv; returns
    (the launcher's process, its control socket, the launch file)."""
    host, child = socket.socketpair()
    p = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", launcher], stdin=child,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    child.close()
    check(p.stdout.readline() == b"ready\n", "ready before a command")
    name = "/tmp/.eai-launch-" + secrets.token_hex(8)
    body = [b"EAI-LAUNCH-1", b"/", str(len(argv)).encode()] + [a.encode() for a in argv]
    body += [str(len(env)).encode()] + [e.encode() for e in env] + [b"0"]
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"\0".join(body) + b"\0")
    os.close(fd)
    host.sendall((name + "\n").encode())
    host.settimeout(20)
    return p, host, name


def answer_of(host):
    got = b""
    while not got.endswith(b"\n"):
        b = host.recv(64)
        if not b:
            break
        got += b
    return got


def pids_of(marker):
    out = []
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if f.read().replace(b"\0", b" ").startswith(marker.encode()):
                    out.append(int(d))
        except (OSError, ValueError):
            pass
    return out


def alive(marker):
    return pids_of(marker)


# Detached children of the program: exited (killed and reaped) by the time
# the answer comes.  Their pidfds, taken while the program still runs, are
# polled the moment the answer is read: the launcher has not ended yet (its
# end would take them down too, a moment later).
marker = "sleep 3%d.25" % secrets.randbelow(1000000)
p, host, name = launch(["sh", "-c", marker + " & " + marker + " & echo started; sleep 0.3; exit 4"])
check(p.stdout.readline() == b"started\n", "the program runs")
fds = []
for _ in range(100):
    pids = pids_of(marker)
    if len(pids) == 2:
        fds = [os.pidfd_open(pid) for pid in pids]
        break
    time.sleep(0.01)
check(len(fds) == 2, "found the two detached children")
answer = answer_of(host)
ready, _, _ = select.select(fds, [], [], 0)
check(answer == b"exit 4\n", "the program's exit code (%r)" % answer)
check(len(ready) == len(fds), "no process of the program left when it answers (%d of %d gone)" % (len(ready), len(fds)))
check(not os.path.exists(name), "launch file unlinked")
for fd in fds:
    os.close(fd)
p.wait(timeout=20)
host.close()

# A program that forks on and on after its main process has gone: still
# ended within the launcher's bounded passes.
marker = "eai-spawner-%d" % secrets.randbelow(1000000)
loop = "exec -a %s sh -c 'while :; do sleep 60 & done'" % marker
t = time.monotonic()
p, host, name = launch(["sh", "-c", "(%s) & sleep 0.2; exit 0" % loop])
answer = answer_of(host)
dt = time.monotonic() - t
check(answer == b"exit 0\n", "answer after a forking leftover (%r)" % answer)
check(dt < 10, "bounded (%.2f s)" % dt)
p.wait(timeout=20)
host.close()
time.sleep(0.2)
check(alive(marker) == [], "the namespace ended with the launcher")

print("%d failed" % failed)
sys.exit(1 if failed else 0)
