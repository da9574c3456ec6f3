#!/usr/bin/env python3
"""Snapshots and forks of a session (issue 34 item 1, item 5's numbers),
through a real `eaid serve` on loopback with real runsc (not a CI test).

    EAI_BUILD_DIR=build EAI_IMAGE_DIR=/path/to/images python3 bench/snapshots.py [rounds]

A small python session: a python3 left running in it holding a list of
10^5 ints and a 1 MiB file in /tmp.  Each round (default 5), in the same
eaid process, interleaved so that the load of the machine weighs on both:
  create:   POST /v1/sandbox/sessions of a plain session (boot) until 201,
            the baseline;
  snapshot: POST .../snapshots of the small session until 201 (the
            session keeps running), and the snapshot's size_bytes;
  fork1:    POST /v1/sandbox/sessions {from_snapshot} until 201 (one fork
            restored and running);
  fork10:   the same with count 10 (ten forks, each running) until 201;
  create10: ten plain creates posted at once until all answered 201.
Everything created is deleted between rounds.  The ratios are against the
baseline measured in the same process: fork1/create, fork10/create10.
The last line is exactly:
  rounds=<> create_p50_ms=<> snapshot_p50_ms=<> snapshot_mb=<> fork1_p50_ms=<> fork10_p50_ms=<>
  create10_p50_ms=<> fork1_vs_create=<> fork10_vs_create10=<>
"""
import concurrent.futures
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "hostile"))
from eaid_env import Env, check, ensure_image  # noqa: E402

PROFILE = "gvisor-small"
IMAGE = "python:3.11-slim"
CONFIG = """sessions:
  max_per_tenant: 40
  snapshots_max_per_tenant: 40
scheduler:
  max_concurrent: 16
  max_per_tenant: 16
"""
STATE = ("import os\n"
         "if os.fork(): os._exit(0)\n"
         "os.setsid(); x=list(range(10**5)); open('/tmp/blob','wb').write(os.urandom(1<<20))\n"
         "import time\n"
         "while True: time.sleep(1)\n")


def create(e, body=None):
    t0 = time.monotonic()
    st, b = e.api("POST", "/v1/sandbox/sessions", body or {"profile": PROFILE, "image": IMAGE}, timeout=180)
    ms = (time.monotonic() - t0) * 1000
    check(st == 201, "create: %s %s" % (st, b))
    return ms, b


def delete(e, sid):
    st, b = e.api("DELETE", "/v1/sandbox/sessions/" + sid, timeout=60)
    check(st == 200, "delete: %s %s" % (st, b))


def run(e, sid, command):
    st, b = e.api("POST", "/v1/sandbox/sessions/%s/executions" % sid, {"command": command})
    check(st == 202, "exec: %s %s" % (st, b))
    r = e.wait_terminal(b["id"], timeout=120)
    check(r["status"] == "succeeded", "exec result: %s" % r)
    return r


def p50(v):
    return statistics.median(v)


def main():
    rounds = max(int(sys.argv[1]) if len(sys.argv) > 1 else 5, 1)
    ensure_image()
    tmp = tempfile.mkdtemp(prefix="eai-bench-snapshots-")
    cfg = os.path.join(tmp, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    e = Env(config=cfg, tmp=tmp)
    e.own_tmp = True
    e.make_key("bench")
    e.start()
    res = {k: [] for k in ("create", "snapshot", "mb", "fork1", "fork10", "create10")}
    try:
        _, src = create(e)
        run(e, src["id"], ["sh", "-c", "python3 -c \"$0\" </dev/null >/dev/null 2>&1", STATE])
        run(e, src["id"], ["true"])
        # warm-up (first restore reads the image from disk)
        _, w = create(e)
        delete(e, w["id"])
        for i in range(rounds):
            ms, b = create(e)
            res["create"].append(ms)
            delete(e, b["id"])
            t0 = time.monotonic()
            st, snp = e.api("POST", "/v1/sandbox/sessions/%s/snapshots" % src["id"], None, timeout=120)
            res["snapshot"].append((time.monotonic() - t0) * 1000)
            check(st == 201, "snapshot: %s %s" % (st, snp))
            res["mb"].append(snp["size_bytes"] / 1e6)
            ms, b = create(e, {"from_snapshot": snp["id"]})
            res["fork1"].append(ms)
            delete(e, b["id"])
            ms, b = create(e, {"from_snapshot": snp["id"], "count": 10})
            check(len(b["items"]) == 10 and all(x["status"] == "running" for x in b["items"]), "fork10: %s" % b)
            res["fork10"].append(ms)
            for x in b["items"]:
                delete(e, x["id"])
            t0 = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(10) as ex:
                outs = list(ex.map(lambda _: create(e)[1], range(10)))
            res["create10"].append((time.monotonic() - t0) * 1000)
            for x in outs:
                delete(e, x["id"])
            st, _ = e.api("DELETE", "/v1/sandbox/snapshots/" + snp["id"])
            check(st == 200, "delete snapshot: %s" % st)
            print("round %d: create %.0f ms, snapshot %.0f ms (%.1f MB), fork1 %.0f ms, fork10 %.0f ms,"
                  " create10 %.0f ms" % (i + 1, res["create"][-1], res["snapshot"][-1], res["mb"][-1],
                                         res["fork1"][-1], res["fork10"][-1], res["create10"][-1]), flush=True)
        delete(e, src["id"])
    finally:
        e.stop()
    c, c10 = p50(res["create"]), p50(res["create10"])
    print("rounds=%d create_p50_ms=%.1f snapshot_p50_ms=%.1f snapshot_mb=%.1f fork1_p50_ms=%.1f fork10_p50_ms=%.1f"
          " create10_p50_ms=%.1f fork1_vs_create=%.2f fork10_vs_create10=%.2f"
          % (rounds, c, p50(res["snapshot"]), p50(res["mb"]), p50(res["fork1"]), p50(res["fork10"]), c10,
             p50(res["fork1"]) / c, p50(res["fork10"]) / c10))


if __name__ == "__main__":
    main()
