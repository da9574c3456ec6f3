"""The launcher's session modes (plugins/gvisor/launcher/eai_launcher_session.c)
on the host: the supervisor as the init of a PID namespace of its own
(unshare, root only), the way runsc runs it as a session sandbox's init, and
its clients (`--run`, as `runsc exec` runs them).  Output, input, cwd, env
and exit codes reach the client's own descriptors; two programs run at once;
a client killed takes its program along but not what the program left in
the background; orphans are reaped, never killed; bad requests are refused
and the supervisor serves on.  usage: test_launcher_session.py LAUNCHER"""
import os
import secrets
import signal
import socket
import struct
import subprocess
import sys
import time

launcher = sys.argv[1]
if os.geteuid() != 0:
    print("skip: needs root (unshare --pid)")
    sys.exit(77)
failed = 0
NAME = "eai-test-" + secrets.token_hex(6)
ENV = {"PATH": "/usr/bin:/bin", "MODE": "x y"}


def check(cond, what):
    global failed
    print(("ok   " if cond else "FAIL ") + what)
    failed += not cond


def client(argv, stdin=b"", cwd="/tmp", env=ENV, timeout=20):
    """One execution: (exit code, stdout, stderr)."""
    p = subprocess.run([launcher, "--run", NAME] + argv, input=stdin, capture_output=True, cwd=cwd, env=env,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def pids_of(cmdline):
    out = []
    for d in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if f.read() == cmdline:
                    out.append(int(d))
        except (OSError, ValueError):
            pass
    return out


def ppid_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1


def state_of(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def alive(pid):
    """Running or sleeping, neither gone nor a zombie.  (A process just
    started may still be 'R' where a test read 'S' under load: the
    sanitizer stage of CI run 4, 2026-12-06.)"""
    return state_of(pid) not in ("", "Z", "X")


def kill(pid):
    """SIGKILL one process of this test, never a pid <= 1: os.kill(-1, ...)
    as root would signal every process of the machine."""
    if pid > 1:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def first_pid(cmdline, s=5.0):
    """The pid of the process with this cmdline, waited for; -1 if none."""
    wait_for(lambda: pids_of(cmdline), s)
    return (pids_of(cmdline) or [-1])[0]


def wait_for(cond, s=5.0):
    end = time.time() + s
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def request(body, fds=(0, 1, 2), extra=b"", length=None):
    """A raw request on a connection of our own: the supervisor's answer."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("\0" + NAME)
    s.settimeout(15)
    hdr = struct.pack(">I", len(body) if length is None else length)
    null = os.open("/dev/null", os.O_RDWR)
    try:
        if fds:
            socket.send_fds(s, [hdr], [null] * len(fds))
        else:
            s.sendall(hdr)
        s.sendall(body + extra)
    except OSError:
        pass
    os.close(null)
    got = b""
    try:
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except OSError:
        pass
    s.close()
    return got


def good_body(argv, env=("PATH=/usr/bin:/bin",), cwd="/"):
    parts = [b"EAI-RUN-1", cwd.encode(), str(len(argv)).encode()] + [a.encode() for a in argv]
    parts += [str(len(env)).encode()] + [e.encode() for e in env]
    return b"\0".join(parts) + b"\0"


sup = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", launcher, "--session", NAME],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
try:
    check(sup.stdout.readline() == b"ready\n", "supervisor: ready")
    # the supervisor is the namespace's pid 1, the child of unshare
    init = [p for p in pids_of(launcher.encode() + b"\0--session\0" + NAME.encode() + b"\0") if p != sup.pid]
    check(len(init) == 1, "supervisor found: %s" % init)
    init = init[0] if init else -1

    # one execution: stdin, stdout, stderr, cwd, env, exit code
    code, out, err = client(["sh", "-c", "cat; echo \"$MODE\"; pwd; echo oops >&2; exit 3"], stdin=b"in\n")
    check((code, out, err) == (3, b"in\nx y\n/tmp\n", b"oops\n"), "io, env, cwd, exit code: %r" % ((code, out, err),))
    # a large output, whole and in order; input larger than a pipe
    big = bytes(range(256)) * 4096
    code, out, err = client(["sh", "-c", "cat; head -c 3000000 /dev/zero | tr '\\0' e >&2"], stdin=big)
    check(code == 0 and out == big and err == b"e" * 3000000, "1 MiB in and out, 3 MB on stderr: %d %d %d"
          % (code, len(out), len(err)))
    # a background process holding the program's stdout does not hold the client
    t0 = time.time()
    code, out, err = client(["sh", "-c", "sleep 1005 & echo done"], timeout=10)
    check((code, out) == (0, b"done\n") and time.time() - t0 < 3,
          "answer while a background process holds stdout: %r %.1f s" % ((code, out), time.time() - t0))
    code, out, err = client(["sh", "-c", "kill -9 $$"])
    check(code == 137, "killed by a signal: 128 + 9: %d" % code)
    code, out, err = client(["no-such-program"])
    check(code == 127 and b"no-such-program" in err, "not found: 127 and a line: %d %r" % (code, err))
    code, out, err = client(["/etc/hostname"])
    check(code == 126, "not executable: 126: %d" % code)

    # the program holds its three descriptors and nothing of the supervisor
    p = subprocess.Popen([launcher, "--run", NAME, "sleep", "1003"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    check(wait_for(lambda: pids_of(b"sleep\x001003\x00")), "program started")
    prog = first_pid(b"sleep\x001003\x00")
    check(ppid_of(prog) == init, "the program is the supervisor's child, not the client's: %d" % ppid_of(prog))
    fds = sorted(int(f) for f in os.listdir("/proc/%d/fd" % prog)) if prog > 0 else None
    check(fds == [0, 1, 2], "the program holds only 0, 1, 2: %s" % fds)
    links = [os.readlink("/proc/%d/fd/%d" % (prog, f)) for f in (fds or [])]
    check(all(l.startswith("pipe:") for l in links), "pipes of the client's, not its stdio: %s" % links)
    check(os.getsid(prog) == prog, "the program leads a session of its own")
    # its client killed (the host's timeout: runsc kill --pid of the client)
    p.send_signal(signal.SIGKILL)
    p.wait()
    check(wait_for(lambda: not pids_of(b"sleep\x001003\x00")), "client killed: its program killed and reaped")

    # two at once; one killed; what it left in the background stays
    t0 = time.time()
    a = subprocess.Popen([launcher, "--run", NAME, "sh", "-c", "sleep 1; echo A"], stdout=subprocess.PIPE, env=ENV)
    b = subprocess.Popen([launcher, "--run", NAME, "sh", "-c", "sleep 1001 >/dev/null 2>&1 & exec sleep 1000"],
                         stdout=subprocess.DEVNULL, env=ENV)
    check(wait_for(lambda: pids_of(b"sleep\x001000\x00") and pids_of(b"sleep\x001001\x00")), "second program running")
    bg = first_pid(b"sleep\x001001\x00")
    b.send_signal(signal.SIGKILL)
    b.wait()
    check(wait_for(lambda: not pids_of(b"sleep\x001000\x00")), "the killed client's program is gone")
    check(alive(bg), "its background child lives on: %r" % state_of(bg))
    outa, _ = a.communicate(timeout=20)
    check(a.returncode == 0 and outa == b"A\n", "the other program ran to its end: %s %r" % (a.returncode, outa))
    check(time.time() - t0 < 1.9, "both at once: %.2f s" % (time.time() - t0))

    # an orphan: kept, reparented to the supervisor; reaped when it ends
    code, out, _ = client(["sh", "-c", "sleep 1002 >/dev/null 2>&1 &"])
    orphan = first_pid(b"sleep\x001002\x00")
    check(code == 0 and alive(orphan), "orphan alive after its parent's end: %d %r" % (code, state_of(orphan)))
    check(wait_for(lambda: ppid_of(orphan) == init), "orphan reparented to the supervisor: %d" % ppid_of(orphan))
    time.sleep(0.3)
    check(alive(orphan), "the supervisor kills no orphan: %r" % state_of(orphan))
    kill(orphan)
    check(wait_for(lambda: state_of(orphan) == ""), "orphan reaped once it ended (no zombie): %r" % state_of(orphan))
    kill(bg)

    # bad requests: refused, the connection closed, the supervisor serves on
    got = request(good_body(["true"]), length=0xFFFFFFF0)
    check(got.startswith(b"fail "), "request too large refused: %r" % got)
    got = request(good_body(["true"]), fds=())
    check(got.startswith(b"fail "), "request without descriptors refused: %r" % got)
    got = request(good_body(["true"]), fds=(0, 1))
    check(got.startswith(b"fail "), "two descriptors refused: %r" % got)
    got = request(b"EAI-RUN-2\0/\0" + b"1\0true\0" + b"0\0")
    check(got.startswith(b"fail bad request"), "bad magic refused: %r" % got)
    got = request(b"EAI-RUN-1\0/\0" + b"5\0true\0" + b"0\0")
    check(got.startswith(b"fail bad request"), "argc past the request refused: %r" % got)
    got = request(good_body(["true"]) + b"junk")
    check(got.startswith(b"fail bad request"), "trailing bytes inside the request refused: %r" % got)
    got = request(good_body(["sleep", "1004"]), extra=b"x")
    check(got.startswith(b"started ") and b"fail " in got, "bytes after the request refused: %r" % got)
    check(wait_for(lambda: not pids_of(b"sleep\x001004\x00")), "and its program killed")
    got = request(good_body(["true"]))
    check(got.startswith(b"started ") and got.endswith(b"exit 0\n"), "raw good request: %r" % got)
    # a connection that never completes its request does not stop the others
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle.connect("\0" + NAME)
    idle.sendall(b"\0\0")
    code, out, _ = client(["echo", "still"])
    check((code, out) == (0, b"still\n"), "served on after bad requests: %r" % ((code, out),))
    # ... and is refused once its 10 s are over
    idle.settimeout(15)
    try:
        got = idle.recv(200)
    except OSError as ex:
        got = repr(ex).encode()
    check(got.startswith(b"fail request not complete in time"), "an incomplete request times out: %r" % got)
    idle.close()
    check(sup.poll() is None, "supervisor still running")
finally:
    sup.kill()
    sup.wait()
    for pid in pids_of(b"sleep\x001001\x00") + pids_of(b"sleep\x001002\x00") + pids_of(b"sleep\x001005\x00"):
        kill(pid)
print("%d failed" % failed)
sys.exit(1 if failed else 0)
