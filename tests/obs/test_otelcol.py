#!/usr/bin/env python3
"""eaid's OTLP plugin (eai-telemetry-otlp.so) against a real OpenTelemetry
Collector built from its Go modules (tests/obs/otelcol/build.sh):

  eaid --OTLP/HTTP JSON--> collector (otlp receiver) --otlphttp, JSON--> receiver.py

A real execution runs through eaid; the test then reads what the *collector*
exported (its own re-encoding of what it parsed and accepted) and checks:
  - metrics: every family /metrics shows with a sample arrives under the same
    name; eai_sandbox_executions_total{profile,status} as a monotonic
    cumulative sum equal to /metrics' value; eai_sandbox_duration_seconds as a
    histogram whose count and per-bucket counts match /metrics' cumulative
    buckets; a gauge; service.name;
  - spans: the execution's spans (POST and the sandbox run) with its trace id;
  - the collector logged no rejected data.
Labels obs;gvisor;e2e (real runsc and the python image)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
import eaid_env  # noqa: E402
from eaid_env import Env, check, free_port  # noqa: E402

COLLECTOR_CONFIG = """
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%(otlp_port)d
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:%(rx_port)d
    encoding: json
    compression: none
    retry_on_failure:
      enabled: false
  debug:
    verbosity: basic
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [otlphttp, debug]
    metrics:
      receivers: [otlp]
      exporters: [otlphttp, debug]
"""


def wait_for(cond, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.2)
    raise eaid_env.Fail("timed out waiting for " + what)


def records(path):
    out = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def prom_samples(text):
    """name -> [(labels dict, value)] of the exposition's samples."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)', line)
        if not m:
            continue
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out.setdefault(m.group(1), []).append((labels, float(m.group(4))))
    return out


def prom_types(text):
    return dict(re.findall(r'^# TYPE (\S+) (\S+)$', text, re.M))


def otlp_metrics(recs):
    """name -> the newest metric object the collector exported."""
    got = {}
    for r in recs:
        if r.get("path") != "/v1/metrics" or not isinstance(r.get("body"), dict):
            continue
        for rm in r["body"].get("resourceMetrics", []):
            svc = {a["key"]: a["value"].get("stringValue") for a in rm.get("resource", {}).get("attributes", [])}
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    got[m["name"]] = dict(m, _service=svc.get("service.name"))
    return got


def attrs(dp):
    return {a["key"]: a["value"].get("stringValue") for a in dp.get("attributes", [])}


def main():
    build = os.path.join(HERE, "otelcol", "build.sh")
    r = subprocess.run([build], capture_output=True, text=True, timeout=1800)
    check(r.returncode == 0, "building the collector failed:\n" + r.stderr[-3000:])
    collector = r.stdout.strip().splitlines()[-1]
    eaid_env.ensure_image()
    tmp = tempfile.mkdtemp(prefix="eai-otelcol-")
    passed = False
    rx_out = os.path.join(tmp, "rx.jsonl")
    rx_port_file = os.path.join(tmp, "rx.port")
    rx = subprocess.Popen([sys.executable, os.path.join(HERE, "receiver.py"), "--mode", "otlp", "--out", rx_out,
                           "--port-file", rx_port_file], start_new_session=True)
    col = env = None
    col_log = os.path.join(tmp, "collector.log")
    try:
        rx_port = int(wait_for(lambda: os.path.exists(rx_port_file) and open(rx_port_file).read(), 10, "receiver"))
        otlp_port = free_port()
        cfg = os.path.join(tmp, "collector.yaml")
        with open(cfg, "w") as f:
            f.write(COLLECTOR_CONFIG % {"otlp_port": otlp_port, "rx_port": rx_port})
        with open(col_log, "wb") as lf:
            col = subprocess.Popen([collector, "--config", cfg], stdout=lf, stderr=lf, start_new_session=True)

        def col_ready():
            check(col.poll() is None, "collector exited: " + open(col_log).read()[-2000:])
            return "Everything is ready" in open(col_log).read()
        wait_for(col_ready, 60, "the collector")

        env = Env(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:%d" % otlp_port,
                       "OTEL_METRIC_EXPORT_INTERVAL": "1000"})
        env.make_key("otelcol")
        env.start()
        st, b = env.api("POST", "/v1/sandbox/executions",
                        {"profile": "gvisor", "image": eaid_env.IMAGE, "command": ["python3", "-c", "print(6*7)"]},
                        headers={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
        check(st == 202, "POST: %s %s" % (st, b))
        ex = env.wait_terminal(b["id"], 120)
        check(ex["status"] == "succeeded" and ex["stdout"] == "42\n", "execution: %s" % ex)

        # metrics: wait until the collector has passed on a round that counts the execution
        def counted():
            m = otlp_metrics(records(rx_out)).get("eai_sandbox_executions_total")
            for dp in (m or {}).get("sum", {}).get("dataPoints", []):
                a = attrs(dp)
                if a.get("profile") == "gvisor" and a.get("status") == "succeeded" and dp.get("asDouble", 0) >= 1:
                    return True
            return False
        wait_for(counted, 30, "eai_sandbox_executions_total through the collector")
        # one more round after /metrics is read, so both describe the same state
        with eaid_env.urllib.request.urlopen(env.url + "/metrics", timeout=10) as resp:
            prom = resp.read().decode()
        n0 = len(records(rx_out))
        wait_for(lambda: sum(1 for r in records(rx_out)[n0:] if r.get("path") == "/v1/metrics") >= 1, 15,
                 "another metrics round")
        got = otlp_metrics(records(rx_out))
        samples, types = prom_samples(prom), prom_types(prom)

        fams = set()
        for name in samples:
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            fams.add(base if types.get(base) == "histogram" else name)
        missing = sorted(f for f in fams if f not in got)
        check(not missing, "families of /metrics missing at the collector: %s" % missing)
        check(got["eai_sandbox_executions_total"]["_service"] == "eaid", "service.name")

        c = got["eai_sandbox_executions_total"]["sum"]
        check(c.get("isMonotonic") is True and c.get("aggregationTemporality") in (2, "AGGREGATION_TEMPORALITY_CUMULATIVE"),
              "counter as a cumulative monotonic sum: %s" % c)
        want = {(l.get("profile"), l.get("status")): v for l, v in samples["eai_sandbox_executions_total"]}
        have = {(attrs(dp).get("profile"), attrs(dp).get("status")): dp["asDouble"] for dp in c["dataPoints"]}
        check(have == want, "executions_total: collector %s, /metrics %s" % (have, want))

        h = got["eai_sandbox_duration_seconds"]["histogram"]["dataPoints"]
        hp = [dp for dp in h if attrs(dp).get("profile") == "gvisor"]
        check(len(hp) == 1, "one gvisor duration histogram: %s" % h)
        hp = hp[0]
        buckets = sorted(((float("inf") if l["le"] == "+Inf" else float(l["le"])), v)
                         for l, v in samples["eai_sandbox_duration_seconds_bucket"] if l.get("profile") == "gvisor")
        per, prev = [], 0
        for _, cum in buckets:
            per.append(int(cum - prev))
            prev = cum
        check([int(x) for x in hp["bucketCounts"]] == per, "bucketCounts %s, /metrics cumulative %s" %
              (hp["bucketCounts"], buckets))
        check([float(x) for x in hp["explicitBounds"]] == [le for le, _ in buckets[:-1]], "explicitBounds")
        count = [v for l, v in samples["eai_sandbox_duration_seconds_count"] if l.get("profile") == "gvisor"][0]
        check(int(hp["count"]) == int(count) >= 1, "histogram count %s vs %s" % (hp["count"], count))

        gauges = [n for n, m in got.items() if "gauge" in m]
        check(gauges, "no gauge arrived")

        # spans of the execution's trace
        def trace_spans():
            names = set()
            for r in records(rx_out):
                if r.get("path") != "/v1/traces" or not isinstance(r.get("body"), dict):
                    continue
                for rs in r["body"].get("resourceSpans", []):
                    for ss in rs.get("scopeSpans", []):
                        for sp in ss.get("spans", []):
                            if sp.get("traceId") == "4bf92f3577b34da6a3ce929d0e0e4736":
                                names.add(sp.get("name"))
            return names if len(names) >= 2 else None
        names = wait_for(trace_spans, 30, "the execution's spans through the collector")
        print("spans of the trace at the collector: %s" % sorted(names))
        log = open(col_log).read()
        check("rejected" not in log.lower() and "error" not in log.lower().replace("errors", ""),
              "the collector logged errors:\n" + log[-3000:])
        print("PASS otelcol: %d metric families, executions_total %s, histogram %s, spans %s" %
              (len(got), have, hp["bucketCounts"], sorted(names)))
        passed = True
        return 0
    finally:
        if env:
            env.stop()
        for p in (col, rx):
            if p and p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        if passed:  # kept, with the collector's log, when something failed
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except eaid_env.Fail as e:
        print("FAIL otelcol: %s" % e)
        sys.exit(1)
