#!/usr/bin/env python3
"""Hostile programs as a corpus (issue 36 item 11), real eaid and real runsc.

Each program of the corpus runs as an execution and must end with the status
docs/gvisor.md "Hostile programs" gives it.  Then eaid runs plain executions
(its descriptors must not grow: no leak per execution) and stops, and the host
must be back where it was before eaid started: no process of its sandboxes
(found by the data directory on their command lines, so other tests running
meanwhile do not count), nothing mounted under its data directory, available
memory and free disk within bounds.  Every wait is for a condition, bounded."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eaid_env  # noqa: E402
from eaid_env import Env, Fail, check, ensure_image, run_cases  # noqa: E402

IMAGE = eaid_env.IMAGE
MiB = 1 << 20

# x86-64 system call numbers, called through libc's syscall() with ctypes
SYSCALLS = r'''
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *a):
    r = libc.syscall(nr, *[ctypes.c_long(x) for x in a])
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
m = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
for name, res in (("ptrace_attach_init", sc(101, 16, 1, 0, 0)), ("unshare_mount_ns", sc(272, 0x00020000)),
                  ("mount", "ok" if m >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")),
                  ("bpf", sc(321, 0, 0, 0)), ("perf_event_open", sc(298, 0, 0, -1, -1, 0)),
                  ("io_uring_setup", sc(425, 8, 0)), ("userfaultfd", sc(323, 0)), ("keyctl", sc(250, 0, 0)),
                  ("kexec_load", sc(246, 0, 0, 0, 0)), ("init_module", sc(175, 0, 0, 0))):
    print(name, res)
'''

# name -> (body fields, check(record) -> None)
CORPUS = []


def prog(name, body, expect):
    CORPUS.append((name, body, expect))


def py(code, **kw):
    b = {"command": ["python3", "-c", code]}
    b.update(kw)
    return b


def status(*ok):
    def f(d):
        check(d["status"] in ok, "status %s (want %s): %s" % (d["status"], "/".join(ok), short(d)))
    return f


def short(d):
    return "status=%s exit=%s signal=%s out=%r err=%r" % (d.get("status"), d.get("exit_code"), d.get("signal"),
                                                         (d.get("stdout") or "")[-200:], (d.get("stderr") or "")[-200:])


prog("fork bomb", py("import os\nwhile True:\n    try: os.fork()\n    except OSError: pass",
                     limits={"pids": 64, "timeout_s": 5}), status("timeout"))
prog("memory balloon", py("b = []\nwhile True: b.append(bytearray(16 << 20))", limits={"memory": "128Mi"}),
     status("oom_killed"))


def disk_full(d):
    status("succeeded")(d)
    check("ENOSPC" in d["stdout"], "no ENOSPC: " + short(d))


prog("disk fill of /tmp", py("import errno\nf = open('/tmp/fill', 'wb')\ntry:\n    while True: f.write(b'x' * (1 << 20)); f.flush()\n"
                             "except OSError as e: print(errno.errorcode[e.errno])", limits={"disk": "16Mi"}),
     disk_full)


def fds(d):
    status("succeeded")(d)
    check("EMFILE" in d["stdout"], "no EMFILE: " + short(d))


prog("fd exhaustion", py("import errno, os\nn = 0\ntry:\n    while True: os.open('/dev/null', os.O_RDONLY); n += 1\n"
                         "except OSError as e: print(errno.errorcode[e.errno], n)"), fds)


def many_files(d):
    check(d["status"] in ("succeeded", "failed"), short(d))
    check(d.get("files_truncated") is True and len(d.get("files") or []) <= 64, "collect caps: %s" % d.get("files"))


prog("10^5 tiny files in a collected path",
     py("import os\nos.makedirs('/tmp/outputs')\ntry:\n    for i in range(100000): open('/tmp/outputs/%d' % i, 'w').close()\n"
        "except OSError as e: print('stopped at', i, e.strerror)", collect=["/tmp/outputs"], limits={"timeout_s": 60}),
     many_files)


def deep(d):
    status("succeeded")(d)
    check(d.get("files_truncated") is True, "a tree deeper than the collect depth is said truncated: %s" % short(d))


prog("64-deep tree in a collected path",
     py("import os\np = '/tmp/outputs'\nfor i in range(64): p = os.path.join(p, 'd%d' % i)\nos.makedirs(p)\n"
        "open(p + '/leaf', 'w').write('x')\nopen('/tmp/outputs/top', 'w').write('y')", collect=["/tmp/outputs"]), deep)


def symloops(d):
    status("succeeded")(d)
    paths = sorted(f["path"] for f in d.get("files") or [])
    check(paths == ["/tmp/outputs/f"], "only the regular file is collected, links never followed: %s" % paths)


prog("symlink loops in a collected path",
     {"command": ["sh", "-c", "mkdir -p /tmp/outputs && ln -s a /tmp/outputs/b && ln -s b /tmp/outputs/a && "
                  "ln -s /tmp/outputs /tmp/outputs/self && ln -s /etc/passwd /tmp/outputs/pw && echo x > /tmp/outputs/f"],
      "collect": ["/tmp/outputs"]}, symloops)


def argv_limit(d):
    status("succeeded")(d)
    check(d["stdout"].strip() == str(15 * 65536), short(d))


prog("argv at the API's limit (15 x 64 KiB)",
     {"command": ["python3", "-c", "import sys; print(sum(map(len, sys.argv[1:])))"] + ["a" * 65536] * 15},
     argv_limit)


def env_limit(d):
    status("succeeded")(d)
    check(d["stdout"].strip() == str(15 * 65536), short(d))


prog("env at the API's limit (15 x 64 KiB)",
     py("import os; print(sum(len(v) for k, v in os.environ.items() if k.startswith('BIG')))",
        env={"BIG%d" % i: "e" * 65536 for i in range(15)}), env_limit)


def flood(d):
    status("succeeded")(d)
    check(d["stdout_truncated"] is True and d["stderr_truncated"] is True, short(d))


prog("output at full speed on both streams",
     py("import os\nb = b'z' * 65536\nfor _ in range(400):\n    os.write(1, b); os.write(2, b)",
        limits={"output_bytes": 1 << 20}), flood)


def kill_all(d):
    # SIGKILL to every pid it can see includes the sandbox's init: the sandbox
    # ends and the program with it
    check(d["status"] == "failed" and d["signal"] == 9, short(d))


prog("signals to every pid it can see",
     py("import os\nfor p in range(1, 70000):\n    if p != os.getpid():\n        try: os.kill(p, 9)\n"
        "        except OSError: pass\nprint('alive')"), kill_all)


def syscalls(d):
    status("succeeded")(d)
    got = dict(line.split(" ", 1) for line in d["stdout"].strip().splitlines())
    # what needs a privilege the sandbox's user does not have fails on every runsc
    for name in ("ptrace_attach_init", "mount", "bpf", "perf_event_open", "userfaultfd", "kexec_load",
                 "init_module"):
        check(got.get(name, "ok") != "ok", "%s succeeded inside the sandbox: %s" % (name, got))
    # the rest is gVisor's own kernel and differs by release (docs/gvisor.md "Hostile programs")
    print("    system calls: %s" % " ".join("%s=%s" % kv for kv in sorted(got.items())), flush=True)


prog("ptrace, unshare, mount, bpf, perf_event_open, io_uring, userfaultfd, keyctl",
     py(SYSCALLS), syscalls)


# ---------------------------------------------------------------- the host

def own_procs(data):
    """Processes whose command line names this eaid's data directory (runsc's
    --root, --bundle, ...): the sandboxes of this eaid, nothing of other tests."""
    n = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                if data.encode() in f.read():
                    n += 1
        except OSError:
            pass
    return n


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return sorted(line.split()[4] for line in f if line.split()[4].startswith(path))


def fds_of(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def wait_until(cond, timeout, what):
    deadline = time.time() + timeout
    while True:
        bad = cond()
        if not bad:
            return
        if time.time() > deadline:
            raise Fail("%s: %s" % (what, bad))
        time.sleep(0.5)


def run_plain(env, n):
    for _ in range(n):
        st, b = env.api("POST", "/v1/sandbox/executions", {"profile": "gvisor", "image": IMAGE,
                                                           "command": ["python3", "-c", "print(2 + 2)"]})
        check(st == 202, "plain execution: %s %s" % (st, b))
        d = env.wait_terminal(b["id"])
        check(d["status"] == "succeeded" and d["stdout"] == "4\n", "plain execution: " + short(d))


def case_corpus():
    ensure_image()
    env = Env()
    base = {"mem": mem_available(), "disk": free_bytes(env.data), "mounts": mounts_under(env.data)}
    stopped = False
    try:
        env.make_key("corpus")
        env.start()
        run_plain(env, 2)  # the warm pool of the plain shape is booted
        failures = []
        for name, body, expect in CORPUS:
            t0 = time.time()
            req = {"profile": "gvisor", "image": IMAGE}
            req.update(body)
            st, r = env.api("POST", "/v1/sandbox/executions", req, timeout=60)
            try:
                check(st == 202, "POST %s: %s %s" % (name, st, str(r)[:300]))
                d = env.wait_terminal(r["id"], 180)
                expect(d)
                print("  ok   %-60s %s (%.1f s)" % (name, d["status"], time.time() - t0), flush=True)
            except Fail as e:
                failures.append("%s: %s" % (name, e))
                print("  FAIL %-60s %s" % (name, e), flush=True)
        # eaid serves on, and leaks no descriptor per execution: ten plain ones
        # (the shape whose pool exists) leave its descriptor count where it was
        run_plain(env, 1)
        fds0 = fds_of(env.proc.pid)
        run_plain(env, 10)
        fds1 = fds_of(env.proc.pid)
        check(fds1 <= fds0 + 2, "eaid's descriptors grew from %d to %d over 10 executions" % (fds0, fds1))
        # then eaid stops: nothing of it stays on the host
        env.stop(clean=False)
        stopped = True
        wait_until(lambda: own_procs(env.data) and "%d processes of this eaid's sandboxes" % own_procs(env.data),
                   60, "sandbox processes left after eaid stopped")
        wait_until(lambda: mounts_under(env.data) != base["mounts"] and "mounts %s" % mounts_under(env.data), 30,
                   "mounts left under the data directory")
        wait_until(lambda: mem_available() < base["mem"] - 256 * MiB and "MemAvailable %d MiB, before %d MiB" % (
            mem_available() // MiB, base["mem"] // MiB), 60, "memory not given back")
        wait_until(lambda: free_bytes(env.data) < base["disk"] - 64 * MiB and "free %d MiB, before %d MiB" % (
            free_bytes(env.data) // MiB, base["disk"] // MiB), 30, "disk not given back")
        print("host after: no sandbox process, no mount, MemAvailable %d MiB (before %d), free disk %d MiB "
              "(before %d), eaid descriptors %d -> %d over 10 executions" % (
                  mem_available() // MiB, base["mem"] // MiB, free_bytes(env.data) // MiB, base["disk"] // MiB,
                  fds0, fds1), flush=True)
        check(not failures, "%d of %d programs: %s" % (len(failures), len(CORPUS), "; ".join(failures)))
    finally:
        if not stopped:
            env.stop(clean=False)
        import shutil
        shutil.rmtree(env.tmp, ignore_errors=True)


if __name__ == "__main__":
    run_cases([("hostile corpus", case_corpus)])
