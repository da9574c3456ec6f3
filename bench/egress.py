#!/usr/bin/env python3
"""Usage: EAI_BUILD_DIR=build EAI_IMAGE_DIR=... python3 bench/egress.py [N] [MB]   (root, runsc, nft)

Egress cost (issue 11 item 8), against real eaid + gVisor and the test
internet of tests/net/testnet.py (198.18.0.0/15, namespaces made here):

1. added latency: wall time from POST to the terminal record (long poll) of
   `python3 -c pass`, N runs each, without egress and with one granted name;
   once with the warm pool off (both cold: the namespace's own cost) and
   once with the default warm pool (2; egress executions always boot cold);
2. throughput: a MB-megabyte download (default 100) of http://allowed.test/big
   by python urllib inside the sandbox through eaid's gateway, against the
   same download by the same client straight from the host to the test
   server's namespace (no gateway, no gVisor).
Every loop is bounded (N <= 50, MB <= 500); everything made is removed."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "net"))
sys.path.insert(0, os.path.join(ROOT, "tests", "hostile"))
import eaid_env  # noqa: E402
from testnet import TestNet  # noqa: E402

N = min(int(sys.argv[1]) if len(sys.argv) > 1 else 10, 50)
MB = min(int(sys.argv[2]) if len(sys.argv) > 2 else 100, 500)
PREFIX = "eabz"
POOL = "198.19.251.0/24"
DL = ("import time,urllib.request as u; t=time.monotonic(); r=u.urlopen('http://%s/big?n=%d', timeout=120);"
      " n=0\nwhile True:\n b=r.read(1<<20)\n if not b: break\n n+=len(b)\nprint(n, time.monotonic()-t)")


def start(work, pool):
    cfg = os.path.join(work, "eaid-%d.yaml" % pool)
    with open(cfg, "w") as f:
        f.write("network:\n  resolver: \"198.18.2.53:53\"\n  pool: \"%s\"\n  prefix: %s\n"
                "isolation:\n  gvisor: {pool: %d}\n"
                "profiles:\n  net:\n    backend: gvisor\n    runtime_class: gvisor\n"
                "    defaults: {cpu: 1000m, memory: 256Mi, timeout_s: 120}\n"
                "    max: {cpu: 1000m, memory: 512Mi, timeout_s: 300}\n"
                "    egress_allow: [\"allowed.test:80\"]\n" % (POOL, PREFIX, pool))
    env = eaid_env.Env(config=cfg, tmp=os.path.join(work, "eaid-%d" % pool))
    env.make_key()
    env.start(ready_path="/readyz", timeout=90)
    return env


def run(env, command, egress):
    body = {"profile": "net", "image": "python:3.11-slim", "command": command}
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


def latency(env, label):
    res = {}
    for egress in (False, True, False, True):  # interleaved, the first of each discarded as warm-up
        walls = []
        for _ in range(N):
            w, rec = run(env, ["python3", "-c", "pass"], egress)
            assert rec["status"] == "succeeded", rec
            walls.append(w)
        res[egress] = walls
    p50 = {k: statistics.median(v) for k, v in res.items()}
    print("%s: p50 without egress %.0f ms, with egress %.0f ms, added %.0f ms (n=%d each; p95 %.0f / %.0f ms)" %
          (label, p50[False] * 1000, p50[True] * 1000, (p50[True] - p50[False]) * 1000, N,
           sorted(res[False])[int(0.95 * (N - 1))] * 1000, sorted(res[True])[int(0.95 * (N - 1))] * 1000),
          flush=True)


def main():
    if os.geteuid() != 0:
        print("bench/egress.py: needs root")
        return 1
    eaid_env.ensure_image()
    work = tempfile.mkdtemp(prefix="eai-bench-egress-")
    net = TestNet(work, "bz%02x" % (os.getpid() & 0xff))
    envs = []
    try:
        assert net.up(), "test internet"
        env = start(work, 0)
        envs.append(env)
        latency(env, "warm pool off (both cold)")
        w, rec = run(env, ["python3", "-c", DL % ("allowed.test", MB << 20)], True)
        n, secs = rec["stdout"].split()
        assert int(n) == MB << 20, rec["stdout"]
        gw = int(n) / float(secs) / 1e6
        t0 = time.monotonic()
        d = subprocess.run([sys.executable, "-c", DL % ("198.18.2.10", MB << 20)], capture_output=True, text=True, timeout=300)
        n2, secs2 = d.stdout.split()
        direct = int(n2) / float(secs2) / 1e6
        print("download %d MB: through the gateway from the sandbox %.0f MB/s; direct from the host %.0f MB/s;"
              " ratio %.2f" % (MB, gw, direct, gw / direct), flush=True)
        env.stop(clean=False)
        # the gateway alone: the same client on the host kernel's stack in a
        # sandbox namespace (tests/net/egress_harness: eaid's engine, netns, nft)
        harness = subprocess.Popen([os.path.join(os.environ.get("EAI_BUILD_DIR", "build"), "tests", "egress_harness"),
                                    "--resolver", "198.18.2.53:53", "--netns", "eaby", "--pool", "198.19.252.0/24",
                                    "--grant", "sbx_bench", "allowed.test:80"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ns = host_ip = None
        for line in iter(harness.stdout.readline, ""):
            w = line.split()
            if w and w[0] == "grant":
                ns, host_ip = w[2], w[4]
            if line.strip() == "ready":
                break
        with open(os.path.join(work, "resolv.conf"), "w") as f:
            f.write("nameserver %s\n" % host_ip)
        d = subprocess.run(["nsenter", "--net=" + ns, "unshare", "-m", "--propagation", "private", "sh", "-c",
                            'mount --bind "$0" /etc/resolv.conf && exec "$@"', os.path.join(work, "resolv.conf"),
                            sys.executable, "-c", DL % ("allowed.test", MB << 20)],
                           capture_output=True, text=True, timeout=300)
        harness.terminate()
        harness.wait(timeout=10)
        n3, secs3 = d.stdout.split()
        alone = int(n3) / float(secs3) / 1e6
        print("download %d MB through the gateway from a host-kernel client in a sandbox namespace: %.0f MB/s;"
              " ratio to direct %.2f (so the sandbox's own stack costs %.2fx)" % (MB, alone, alone / direct,
                                                                                  gw / alone), flush=True)
        env = start(work, 2)
        envs.append(env)
        latency(env, "warm pool 2 (without egress warm, with egress cold)")
    finally:
        for e in envs:
            e.stop(clean=False)
        net.down()
        subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    sys.exit(main())
