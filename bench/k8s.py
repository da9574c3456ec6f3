#!/usr/bin/env python3
"""eaid's k8s backend against the same pod made directly (issue 28, item 4).

On the real single-node cluster of tests/cluster/cluster.sh (this script runs
`up` and, at its end, `down`), with the same image (python:3.11-slim pushed to
the cluster's registry), command, runtime class (gvisor), resources (500m,
256Mi, Guaranteed), security context and `imagePullPolicy: Always`:

  eaid    POST /v1/sandbox/executions -> GET ...?wait_s=60 (long-poll) answers
          terminal.  eaid: namespace (once), pod, input Secret, poll + watch,
          log, delete.
  direct  what `kubectl run --restart=Never` + `kubectl wait` + `kubectl logs`
          do, without kubectl's own start-up: POST the pod, a streaming watch
          of that pod until Succeeded/Failed, GET its log.  The pod is deleted
          afterwards, outside the timing.

Runs ROUNDS alternating pairs (eaid first, then direct, then the other way
round) and prints the medians and their ratio (issue goal: eaid <= 1.10 x
direct), then CONCURRENT executions at once each way: wall time to the last
terminal state and per-execution percentiles.  Not a CI test: numbers depend
on the machine (docs/performance.md keeps measured ones).

Usage: bench/k8s.py [--rounds N] [--concurrent N] [--poll-ms 500,100] [--collector]
       (root; build first)
Environment as tests/cluster/test_k8s_backend.py (EAI_BUILD_DIR, ...).
"""
import argparse
import json
import os
import ssl
import statistics
import sys
import threading
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "cluster"))
import test_k8s_backend as T  # noqa: E402  (cluster, eaid and tenants, as the real suite sets them up)

C = T.C
COMMAND = ["python3", "-c", "print('hi')"]
DIRECT_NS = "eai-bench-direct"


def api(method, path, body=None, stream=False, timeout=60):
    """The admin's request to the API server (client certificate)."""
    pki = os.path.join(os.environ.get("EAI_CLUSTER_DIR", "/var/lib/eai-cluster"), "pki")
    ctx = ssl.create_default_context(cafile=C.env["EAI_CLUSTER_CA"])
    ctx.load_cert_chain(os.path.join(pki, "admin.crt"), os.path.join(pki, "admin.key"))
    req = urllib.request.Request(C.env["EAI_CLUSTER_API_URL"] + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    resp = urllib.request.urlopen(req, timeout=timeout, context=ctx)
    if stream:
        return resp
    with resp:
        return json.loads(resp.read() or b"null") if resp.headers.get("Content-Type", "").startswith(
            "application/json") else resp.read().decode(errors="replace")


def direct_pod(name):
    """The pod eaid would make, minus what only eaid needs (Secret, labels)."""
    sc = {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534, "readOnlyRootFilesystem": True,
          "allowPrivilegeEscalation": False, "privileged": False, "capabilities": {"drop": ["ALL"]},
          "seccompProfile": {"type": "RuntimeDefault"}}
    res = {"cpu": "500m", "memory": "256Mi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": DIRECT_NS},
            "spec": {"runtimeClassName": "gvisor", "restartPolicy": "Never", "automountServiceAccountToken": False,
                     "enableServiceLinks": False, "terminationGracePeriodSeconds": 1, "activeDeadlineSeconds": 60,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                         "fsGroup": 65534, "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "sandbox", "image": C.py_image, "imagePullPolicy": "Always",
                                     "command": COMMAND, "workingDir": "/tmp", "securityContext": sc,
                                     "env": [{"name": "HOME", "value": "/tmp"}],
                                     "resources": {"limits": res, "requests": res},
                                     "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}],
                     "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]}}


def run_direct():
    """Seconds from POST to the log read of a finished pod, and its log."""
    name = "bench-" + uuid.uuid4().hex[:12]
    base = "/api/v1/namespaces/%s/pods" % DIRECT_NS
    t0 = time.monotonic()
    created = api("POST", base, direct_pod(name))
    rv = created["metadata"]["resourceVersion"]
    phase = None
    with api("GET", "%s?watch=1&fieldSelector=metadata.name%%3D%s&resourceVersion=%s&timeoutSeconds=60"
             % (base, name, rv), stream=True, timeout=70) as w:
        for line in w:
            ev = json.loads(line)
            phase = ev.get("object", {}).get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                break
    log = api("GET", "%s/%s/log?container=sandbox" % (base, name))
    dt = time.monotonic() - t0
    api("DELETE", "%s/%s" % (base, name), {"gracePeriodSeconds": 0})
    if phase != "Succeeded" or log != "hi\n":
        raise T.Fail("direct pod %s: %s %r" % (name, phase, log))
    return dt


def run_eaid():
    t0 = time.monotonic()
    eid = C.a.submit(COMMAND)
    while True:
        st, _, d = C.a.req("GET", "/v1/sandbox/executions/%s?wait_s=60" % eid, timeout=70)
        if st == 200 and d["status"] in T.TERMINAL:
            break
    dt = time.monotonic() - t0
    if d["status"] != "succeeded" or d["stdout"] != "hi\n":
        raise T.Fail("eaid %s: %s" % (eid, T.short(d)))
    return dt


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def concurrent(fn, n):
    times, errors = [], []

    def one():
        try:
            times.append(fn())
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
    t0 = time.monotonic()
    ths = [threading.Thread(target=one) for _ in range(n)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(600)
    wall = time.monotonic() - t0
    return wall, times, errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--concurrent", type=int, default=20)
    ap.add_argument("--poll-ms", default="500,100",
                    help="the backend's poll_ms values to measure, comma-separated (the first also runs the "
                         "concurrent part; 500 is the default)")
    ap.add_argument("--collector", action="store_true",
                    help="eaid with collector_image (the build's eai-k8s-collector pushed): every execution "
                         "then has the collect sidecar (core's default collect is /tmp/outputs)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (the cluster)")
        return 2
    C.eaid = C.watch = None
    try:
        T.eaid_env.ensure_image()
        T.setup()  # cluster up, image pushed, eaid with the k8s backend, tenants A and B
        st = api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": DIRECT_NS}})
        assert st
        polls = [int(x) for x in a.poll_ms.split(",") if x]
        for poll in reversed(polls):  # the first listed last: the concurrent part runs with it
            extra = {"collector_image": T.collector_image()} if a.collector else {}
            T.write_config({"kubeconfig": C.env["EAI_CLUSTER_EAID_KUBECONFIG"]}, poll_ms=poll, **extra)
            T.eaid_restart()
            run_eaid(), run_direct()  # warm: the node has the image's layers, the tenant namespace exists
            e, d = [], []
            for i in range(a.rounds):
                order = (run_eaid, run_direct) if i % 2 == 0 else (run_direct, run_eaid)
                for fn in order:
                    (e if fn is run_eaid else d).append(fn())
            me, md = statistics.median(e), statistics.median(d)
            print("one execution, POST to terminal, poll_ms %d%s, %d rounds (median, min..max):"
                  % (poll, ", with the collect sidecar" if a.collector else "", a.rounds))
            print("  eaid k8s backend  %.3f s  (%.3f..%.3f)" % (me, min(e), max(e)))
            print("  direct pod        %.3f s  (%.3f..%.3f)" % (md, min(d), max(d)))
            print("  ratio eaid/direct %.3f  (goal <= 1.10)" % (me / md), flush=True)
        print("concurrent part with poll_ms %d" % polls[0])
        for name, fn in (("eaid", run_eaid), ("direct", run_direct)):
            wall, times, errors = concurrent(fn, a.concurrent)
            print("%d at once, %s: wall %.2f s to the last; per execution p50 %.2f p90 %.2f max %.2f s; %d errors%s"
                  % (a.concurrent, name, wall, pct(times, 50) if times else 0, pct(times, 90) if times else 0,
                     max(times) if times else 0, len(errors), (": " + errors[0][:300]) if errors else ""))
    finally:
        if C.eaid is not None:
            C.eaid.stop(clean=False)
        if C.watch is not None:
            C.watch.stop()
        T.cluster("down", timeout=300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
