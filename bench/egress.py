#!/usr/bin/env python3
"""Usage: EAI_BUILD_DIR=build EAI_IMAGE_DIR=... python3 bench/egress.py [N] [MB] [R]   (root, runsc, nft)

Egress cost (issue 11 item 8), against real eaid + gVisor and the test
internet of tests/net/testnet.py (198.18.0.0/15, namespaces made here):

1. added latency: wall time from POST to the terminal record (long poll) of
   `python3 -c pass`, N runs each, without egress and with one granted name;
   once with the warm pool off (both cold: the namespace's own cost) and
   once with the default warm pool (2; egress executions boot cold), and
   once with pool 1 and gvisor `egress_pool: true`, each run waiting for
   the pool to be full first (both warm; the pool hits are printed);
2. throughput: R downloads (default 5, medians printed) of MB megabytes
   (default 100) by python urllib, 1 MiB reads, in five set-ups measured in
   the same run, so that the ratio blames the right component:
   D  direct: host client -> test server's namespace (no gateway, no gVisor);
   G  the goal: client in a sandbox (eaid execution, cpu 2000m) -> eaid's
      gateway -> test server (G/D is the issue's ratio, goal >= 0.8);
   H  a host-kernel client in a sandbox namespace -> the same gateway
      (tests/net/egress_harness): G without gVisor, so H/D is the gateway's
      own cost;
   HC H with the gateway's fallback (bufferevent copies, not splice(2));
   V, VH  gVisor alone: runsc --network=sandbox (same flags and platform as
      eaid, a bench-made namespace with the same veth MTU) downloading from a
      server on the veth's host side, no gateway; VH the same download by a
      host-kernel client in that namespace: V/VH is gVisor's netstack cost.
EAI_BENCH_ONLY=latency or =throughput runs one half; =pool only the both-warm
latency line; =warm only measures
`runsc exec` into a warm sandbox booted with --network=none against one
booted with --network=sandbox in a namespace (the warm pool for egress,
docs/egress.md), N each, twice.
Every loop is bounded (N <= 50, MB <= 500, R <= 20); everything made is removed."""
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "net"))
sys.path.insert(0, os.path.join(ROOT, "tests", "hostile"))
import eaid_env  # noqa: E402
import benchlib  # noqa: E402
from testnet import TestNet  # noqa: E402

N = min(int(sys.argv[1]) if len(sys.argv) > 1 else 10, 50)
MB = min(int(sys.argv[2]) if len(sys.argv) > 2 else 100, 500)
ONLY = os.environ.get("EAI_BENCH_ONLY", "")
R = max(1, min(int(sys.argv[3]) if len(sys.argv) > 3 else 5, 20))
PREFIX = "eabz"
POOL = "198.19.251.0/24"
VNS, VHOST, VSBX = "eabv-bench", "198.19.250.1", "198.19.250.2"  # gVisor-alone set-up
VMTU = 65520  # core/net/netns.h EAI_NETNS_MTU
# R downloads, one "bytes seconds" line each
DL = ("import time,urllib.request as u\nfor i in range(%d):\n t=time.monotonic()\n"
      " r=u.urlopen('http://%%s/big?n=%%d', timeout=120)\n n=0\n while True:\n  b=r.read(1<<20)\n"
      "  if not b: break\n  n+=len(b)\n print(n, time.monotonic()-t)" % R)


def start(work, pool, egress_pool=False):
    cfg = os.path.join(work, "eaid-%d%s.yaml" % (pool, "e" if egress_pool else ""))
    with open(cfg, "w") as f:
        f.write("network:\n  resolver: \"198.18.2.53:53\"\n  pool: \"%s\"\n  prefix: %s\n"
                "  max_bytes: 16Gi\n"
                "isolation:\n  gvisor: {pool: %d, egress_pool: %s}\n"
                "profiles:\n  net:\n    backend: gvisor\n    runtime_class: gvisor\n"
                "    defaults: {cpu: 1000m, memory: 256Mi, timeout_s: 120}\n"
                "    max: {cpu: 2000m, memory: 512Mi, timeout_s: 300}\n"
                "    egress_allow: [\"allowed.test:80\"]\n" % (POOL, PREFIX, pool, "true" if egress_pool else "false"))
    env = eaid_env.Env(config=cfg, tmp=os.path.join(work, "eaid-%d%s" % (pool, "e" if egress_pool else "")))
    env.make_key()
    env.start(ready_path="/readyz", timeout=90)
    return env


def run(env, command, egress, cpu=None):
    body = {"profile": "net", "image": "python:3.11-slim", "command": command}
    if cpu:
        body["limits"] = {"cpu": cpu}
    if egress:
        body["network"] = {"egress": ["allowed.test:80"]}
    t0 = time.monotonic()
    st, b = env.api("POST", "/v1/sandbox/executions", body)
    assert st == 202, (st, b)
    while True:
        st, rec = env.api("GET", "/v1/sandbox/executions/%s?wait_s=30" % b["id"], timeout=40)
        if rec["status"] not in ("queued", "running"):
            return time.monotonic() - t0, rec
        assert time.monotonic() - t0 < 300, "execution did not end"


def metric(env, name, labels=""):
    """Sum of the samples of name whose labels contain `labels`."""
    with __import__("urllib.request").request.urlopen(env.url + "/metrics", timeout=10) as m:
        text = m.read().decode()
    tot = 0.0
    for line in text.splitlines():
        w = line.split()
        if len(w) == 2 and (w[0] == name or w[0].startswith(name + "{")) and labels in w[0]:
            tot += float(w[1])
    return tot


def latency(env, label, ready=0):
    """ready: before each run, wait (up to 20 s) until the warm pool has that
    many sandboxes ready, so that every run is served warm."""
    res = {}
    takes = {}
    for egress in (False, True, False, True):  # interleaved, the first of each discarded as warm-up
        walls = []
        name = "eai_pool_egress_takes_total" if egress else "eai_pool_takes_total"
        hit0 = metric(env, name, 'result="hit"') if ready else 0
        for _ in range(N):
            deadline = time.monotonic() + 20
            while ready and metric(env, "eai_pool_ready") < ready and time.monotonic() < deadline:
                time.sleep(0.05)
            w, rec = run(env, ["python3", "-c", "pass"], egress)
            assert rec["status"] == "succeeded", rec
            walls.append(w)
        res[egress] = walls
        if ready:
            takes[egress] = metric(env, name, 'result="hit"') - hit0
    p50 = {k: statistics.median(v) for k, v in res.items()}
    if ready:
        print("  (pool hits in the measured rounds: without egress %d/%d, with egress %d/%d)" %
              (takes[False], N, takes[True], N), flush=True)
    print("%s: p50 without egress %.0f ms, with egress %.0f ms, added %.0f ms (n=%d each; p95 %.0f / %.0f ms)" %
          (label, p50[False] * 1000, p50[True] * 1000, (p50[True] - p50[False]) * 1000, N,
           sorted(res[False])[int(0.95 * (N - 1))] * 1000, sorted(res[True])[int(0.95 * (N - 1))] * 1000),
          flush=True)


def rates(text):
    """Median MB/s and all of them from DL's "bytes seconds" lines."""
    w = text.split()
    assert len(w) == 2 * R and all(int(w[i]) == MB << 20 for i in range(0, len(w), 2)), text[-400:]
    r = sorted(int(w[i]) / float(w[i + 1]) / 1e6 for i in range(0, len(w), 2))
    return r[len(r) // 2], r


def fmt(r):
    return "%.0f MB/s (%s)" % (r[0], " ".join("%.0f" % x for x in r[1]))


def in_netns(ns_path, resolv, work, code):
    """python code on the host kernel's stack inside a network namespace."""
    cmd = ["nsenter", "--net=" + ns_path]
    if resolv:
        with open(os.path.join(work, "resolv.conf"), "w") as f:
            f.write("nameserver %s\n" % resolv)
        cmd += ["unshare", "-m", "--propagation", "private", "sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"',
                os.path.join(work, "resolv.conf")]
    d = subprocess.run(cmd + [sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    return d.stdout


def serve_big(ip, port):
    """A host-side HTTP server for /big?n=BYTES (1 MiB sends), on threads."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((ip, port))
    s.listen(8)

    def one(c):
        try:
            n = int(c.recv(4096).split(b"n=")[1].split()[0])
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % n)
            chunk = memoryview(b"x" * (1 << 20))
            while n > 0:
                c.sendall(chunk[:min(n, len(chunk))])
                n -= len(chunk)
        except (OSError, ValueError, IndexError):
            pass
        finally:
            c.close()

    def loop():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
    return s


def vnet_up():
    sh = lambda *a: subprocess.run(a, capture_output=True, text=True)  # noqa: E731
    sh("ip", "netns", "add", VNS)
    for c in (["link", "add", "eabvh", "mtu", str(VMTU), "type", "veth", "peer", "name", "eabvs", "mtu", str(VMTU)],
              ["link", "set", "eabvs", "netns", VNS], ["addr", "add", VHOST + "/30", "dev", "eabvh"],
              ["link", "set", "eabvh", "up"]):
        sh("ip", *c)
    for c in (["link", "set", "eabvs", "name", "eth0"], ["addr", "add", VSBX + "/30", "dev", "eth0"],
              ["link", "set", "eth0", "up"], ["link", "set", "lo", "up"], ["route", "add", "default", "via", VHOST]):
        sh("ip", "-n", VNS, *c)


def vnet_down():
    subprocess.run(["ip", "link", "del", "eabvh"], capture_output=True)
    subprocess.run(["ip", "netns", "del", VNS], capture_output=True)


def vbundle(work, name, args, netns):
    b = os.path.join(work, name)
    os.makedirs(b + "/tmp")
    os.chmod(b + "/tmp", 0o1777)
    nss = [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]
    if netns:
        nss[1]["path"] = "/var/run/netns/" + VNS
    spec = {"ociVersion": "1.0.2", "hostname": "sandbox",
            "process": {"terminal": False, "user": {"uid": 65534, "gid": 65534}, "args": args,
                        "env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "cwd": "/tmp", "noNewPrivileges": True},
            "root": {"path": os.path.join(eaid_env.IMAGES, "python", "3.11-slim", "rootfs"), "readonly": True},
            "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
                       {"destination": "/tmp", "type": "bind", "source": b + "/tmp", "options": ["rbind", "rw"]}],
            "linux": {"namespaces": nss}}
    with open(b + "/config.json", "w") as f:
        json.dump(spec, f)
    return b


def runsc_bin():
    return os.environ.get("EAI_SANDBOX_RUNSC") or "runsc"


def vrunsc(work, net, *args):
    """runsc as eaid's gvisor backend runs it (the platform its probe
    chooses; for --network=sandbox the /proc/sys/net workaround where that
    runsc needs it, docs/gvisor.md)."""
    runsc = runsc_bin()
    cmd = [runsc, "--root=" + os.path.join(work, "vstate"), "--network=" + net,
           "--platform=" + benchlib.platform(runsc)] + list(args)
    if net == "sandbox" and "0.0~2022" in subprocess.run([runsc, "--version"], capture_output=True,
                                                         text=True).stdout:
        cmd = ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
               'mount -t tmpfs -o ro,size=4k,mode=0555 eai-nonet /proc/sys/net && exec "$@"', "sh"] + cmd
    return cmd


def gvisor_alone(work):
    """V and VH: runsc --network=sandbox in a namespace of the bench's own
    (veth MTU as eaid's), downloading from serve_big on the veth's host side;
    no gateway, no nftables."""
    vnet_up()
    try:
        srv = serve_big(VHOST, 8080)
        code = DL % ("%s:8080" % VHOST, MB << 20)
        vh = rates(in_netns("/var/run/netns/" + VNS, None, work, code))
        b = vbundle(work, "vbundle", ["python3", "-c", code], True)
        d = subprocess.run(vrunsc(work, "sandbox", "run", "--bundle", b, "eabench%d" % os.getpid()),
                           capture_output=True, text=True, timeout=600)
        srv.close()
        return rates(d.stdout), vh
    finally:
        vnet_down()


def warm_exec(work):
    """The warm pool for egress (docs/egress.md, design): `runsc exec python3
    -c pass` into a pre-booted sandbox with --network=none, and into one
    booted with --network=sandbox inside a namespace; N each, twice."""
    vnet_up()
    res = {"none": [], "sandbox": []}
    try:
        for rnd in range(2):
            for net in ("none", "sandbox"):
                b = vbundle(work, "warm-%s-%d" % (net, rnd), ["sh", "-c", "echo ready; exec sleep infinity"],
                            net == "sandbox")
                cid = "eabwarm%s%d%d" % (net, rnd, os.getpid())
                p = subprocess.Popen(vrunsc(work, net, "run", "--bundle", b, cid), stdout=subprocess.PIPE, text=True)
                try:
                    assert p.stdout.readline().strip() == "ready", "warm sandbox did not boot"
                    with open(b + "/process.json", "w") as f:
                        json.dump({"terminal": False, "user": {"uid": 65534, "gid": 65534},
                                   "args": ["python3", "-c", "pass"], "env": ["PATH=/usr/local/bin:/usr/bin:/bin"],
                                   "cwd": "/tmp"}, f)
                    for _ in range(N):
                        t0 = time.monotonic()
                        subprocess.run([runsc_bin(), "--root=" + os.path.join(work, "vstate"), "exec", "--process",
                                        b + "/process.json", cid], check=True, timeout=60)
                        res[net].append(time.monotonic() - t0)
                finally:
                    subprocess.run([runsc_bin(), "--root=" + os.path.join(work, "vstate"), "delete", "--force", cid],
                                   capture_output=True)
                    p.kill()
                    p.wait()
    finally:
        vnet_down()
    p50 = {k: statistics.median(v) * 1000 for k, v in res.items()}
    print("warm exec of python3 -c pass: p50 %.0f ms --network=none, %.0f ms --network=sandbox in a namespace;"
          " added %.0f ms (n=%d each)" % (p50["none"], p50["sandbox"], p50["sandbox"] - p50["none"], 2 * N), flush=True)


def gateway_alone(work, code, extra):
    harness = subprocess.Popen([os.path.join(os.environ.get("EAI_BUILD_DIR", "build"), "tests", "egress_harness"),
                                "--resolver", "198.18.2.53:53", "--netns", "eaby", "--pool", "198.19.252.0/24",
                                "--max-bytes", str(16 << 30)] + extra + ["--grant", "sbx_bench", "allowed.test:80"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ns = host_ip = None
    for line in iter(harness.stdout.readline, ""):
        w = line.split()
        if w and w[0] == "grant":
            ns, host_ip = w[2], w[4]
        if line.strip() == "ready":
            break
    try:
        return rates(in_netns(ns, host_ip, work, code))
    finally:
        harness.terminate()
        harness.wait(timeout=10)


def throughput(env, work):
    code = DL % ("allowed.test", MB << 20)
    direct = rates(subprocess.run([sys.executable, "-c", DL % ("198.18.2.10", MB << 20)], capture_output=True,
                                  text=True, timeout=600).stdout)
    w, rec = run(env, ["python3", "-c", code], True, cpu="2000m")
    gw = rates(rec["stdout"])
    env.stop(clean=False)
    # H: the gateway alone, the same client on the host kernel's stack in a
    # sandbox namespace (tests/net/egress_harness: eaid's engine, netns, nft);
    # HC: the same with the gateway's fallback copies (--no-splice)
    host, copy = gateway_alone(work, code, []), gateway_alone(work, code, ["--no-splice"])
    v, vh = gvisor_alone(work)
    print("download %d MB x %d (medians, all in MB/s):" % (MB, R), flush=True)
    print("  D  direct, host -> test server:                     " + fmt(direct))
    print("  G  sandbox -> eaid's gateway -> test server:        " + fmt(gw))
    print("  H  host-kernel client -> eaid's gateway -> server:  " + fmt(host))
    print("  HC the same, gateway copying (no splice(2)):         " + fmt(copy))
    print("  V  sandbox -> server on its veth, no gateway:       " + fmt(v))
    print("  VH host-kernel client -> that server, no gateway:   " + fmt(vh))
    print("ratio G/D %.2f (goal >= 0.8); gateway's own H/D %.2f; gVisor's own V/VH %.2f; G/H %.2f" %
          (gw[0] / direct[0], host[0] / direct[0], v[0] / vh[0], gw[0] / host[0]), flush=True)


def main():
    if os.geteuid() != 0:
        print("bench/egress.py: needs root")
        return 1
    eaid_env.ensure_image()
    work = tempfile.mkdtemp(prefix="eai-bench-egress-")
    if ONLY == "pool":  # only the both-warm latency (gvisor egress_pool)
        net = TestNet(work, "bz%02x" % (os.getpid() & 0xff))
        env = None
        try:
            assert net.up(), "test internet"
            env = start(work, 1, egress_pool=True)
            latency(env, "warm pool 1 + egress_pool (both warm)", ready=2)
        finally:
            if env:
                env.stop(clean=False)
            net.down()
            subprocess.run(["rm", "-rf", work])
        return 0
    if ONLY == "warm":  # no eaid, no test internet
        try:
            warm_exec(work)
        finally:
            subprocess.run(["rm", "-rf", work])
        return 0
    net = TestNet(work, "bz%02x" % (os.getpid() & 0xff))
    envs = []
    try:
        assert net.up(), "test internet"
        env = start(work, 0)
        envs.append(env)
        if ONLY != "throughput":
            latency(env, "warm pool off (both cold)")
        if ONLY != "latency":
            throughput(env, work)
        if ONLY != "throughput":
            env = start(work, 2)
            envs.append(env)
            latency(env, "warm pool 2 (without egress warm, with egress cold)")
            env.stop(clean=False)
            env = start(work, 1, egress_pool=True)
            envs.append(env)
            latency(env, "warm pool 1 + egress_pool (both warm)", ready=2)
    finally:
        for e in envs:
            e.stop(clean=False)
        net.down()
        # the empty netns a runsc of 2026 bind-mounts into its root (docs/gvisor.md)
        for _ in range(4):
            if subprocess.run(["umount", "-l", os.path.join(work, "vstate", "null-netns")],
                              capture_output=True).returncode != 0:
                break
        subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    sys.exit(main())
