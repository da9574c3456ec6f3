#!/usr/bin/env python3
"""Usage: EAI_BUILD_DIR=build python3 bench/cli_bench.py [N]  (root, runsc, python:3.11-slim in build/images)

Measure the eai CLI against a real eaid + gVisor: wall time of
`eai exec -- python3 -c 'print(2+2)'` (N runs), latency of the first live
line (program prints, then sleeps 2 s), and a --download round trip."""
import os, statistics, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "e2e"))
import test_cli as T
env = T.Env(); env.start()
try:
    N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    walls = []
    for _ in range(N):
        t0 = time.time()
        r = env.eai("exec", "--profile", T.PROFILE, "--image", T.IMAGE, "--", "python3", "-c", "print(2+2)")
        walls.append(time.time() - t0)
        assert r.returncode == 0 and r.stdout == b"4\n"
    walls.sort()
    print("exec print(2+2): n=%d p50=%.3fs p95=%.3fs max=%.3fs" % (N, statistics.median(walls),
          walls[int(0.95 * (N - 1))], walls[-1]))
    lat = []
    for _ in range(5):
        p = subprocess.Popen([T.EAI, "exec", "--profile", T.PROFILE, "--image", T.IMAGE, "--", "python3", "-c",
                              "import time,sys; print(time.time(), flush=True); time.sleep(2)"],
                             env=env.cli_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = p.stdout.readline(); got = time.time(); p.wait()
        lat.append(got - float(line))
    print("live line latency (print in sandbox -> eai stdout): p50=%.3fs max=%.3fs" % (statistics.median(lat), max(lat)))
    blob = os.urandom(4 << 20)
    src = os.path.join(env.tmp, "b.bin"); open(src, "wb").write(blob)
    t0 = time.time()
    r = env.eai("exec", "--profile", T.PROFILE, "--image", T.IMAGE, "--file", src + ":/tmp/in/b.bin",
                "--collect", "/tmp/out", "--download", os.path.join(env.tmp, "dl"), "--", "python3", "-c",
                "import os,shutil; os.makedirs('/tmp/out'); shutil.copy('/tmp/in/b.bin','/tmp/out/b.bin')")
    dt = time.time() - t0
    same = open(os.path.join(env.tmp, "dl", "out", "b.bin"), "rb").read() == blob
    print("4 MiB up (--file) and back (--download), exit %d, identical=%s: %.3fs" % (r.returncode, same, dt))
finally:
    env.stop()
