#!/usr/bin/env bash
# Performance benchmark of issue 15 (not a CI test; run as root on an idle
# machine, ratios in one run are what count):
#
#   EAI_BUILD_DIR=build EAI_IMAGE_DIR=/path/to/images bench/perf.sh
#
# Prints, in one run, for `python3 -c 'print(2+2)'` in python:3.11-slim:
#   raw_cold   `runsc run` of an identical bundle (the cold floor)
#   raw_exec   `runsc exec` into an already booted sandbox (today's warm floor)
#   eaid_cold  POST + long-poll GET until terminal, eaid with `pool: 0`
#   eaid_warm  the same with the warm pool (`pool: 2`, the default)
# interleaved, PERF_SAMPLES (30) each; throughput at concurrency 4 (warm);
# `GET /v1/sandbox/executions/{id}` of one finished execution with wrk at 256
# connections beside bench/evhttp_min.c (a bare libevent evhttp server
# answering a fixed 1 KB JSON body); eaid's RSS idle and after that load; a
# burst of PERF_BURST (1000) submissions from 32 clients to the warm eaid,
# which lets one tenant use all 8 slots (every accepted one must end
# terminal; throughput against c4, queue wait p99, slot occupancy, RSS with
# the queue deepest and at its peak while 8 run); the last line is exactly
#   warm_vs_exec_floor=<warm p50 / raw exec p50> cold_vs_raw=<cold p50 / raw run p50>
#   overhead_ms_p50=<warm p50 - raw exec p50> get_vs_evhttp=<req/s ratio>
#   rss_after_load_mib=<VmRSS after wrk>
# Every loop is bounded in count and time.  PERF_ONLY=get runs only the API
# part (one execution, pool off); PERF_ONLY=burst only the steady c4
# throughput, the burst and c4 again (its last line: burst_vs_c4=<burst
# executions/s over the mean of the two c4 figures> queue_wait_p99_ms=...
# rss_queued_mib=... rss_peak_mib=... lost=...).  Needs `wrk` (Debian: apt-get install wrk; installed
# here when missing and apt-get exists) and a C compiler with libevent headers.
set -euo pipefail

BUILD=${EAI_BUILD_DIR:-build}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
SAMPLES=${PERF_SAMPLES:-30}
BURST=${PERF_BURST:-1000}
WRK_S=${PERF_WRK_S:-10}
ONLY=${PERF_ONLY:-all}
RUNSC=${EAI_SANDBOX_RUNSC:-$(command -v runsc || true)}
IMAGE=python:3.11-slim
IMAGES=${EAI_IMAGE_DIR:-$BUILD/images}
EAID=$BUILD/eaid
[ -x "$EAID" ] || { echo "bench: $EAID not built" >&2; exit 1; }
if ! command -v wrk >/dev/null; then
  command -v apt-get >/dev/null && { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk; } >&2
  command -v wrk >/dev/null || { echo "bench: wrk missing (apt-get install wrk)" >&2; exit 1; }
fi
if [ "$ONLY" != get ]; then
  [ -x "$RUNSC" ] || { echo "bench: runsc not found" >&2; exit 1; }
  ls "$IMAGES/python/3.11-slim/rootfs" >/dev/null 2>&1 ||
    { echo "bench: image $IMAGE missing in $IMAGES (eaid images build $IMAGE)" >&2; exit 1; }
fi

work=$(mktemp -d /tmp/eai-perf-XXXXXX)
# the warm eaid lets one tenant use every slot (the default is 4 of 8): the
# burst has 8 running beside its queue (the c4 and latency figures use fewer)
BURST_YAML=$(printf 'scheduler:\n  max_concurrent: 8\n  max_per_tenant: 8\n')
. "$SRC/bench/lib.sh"
cleanup() {
  bench_stop
  if [ -n "${PERF_KEEP:-}" ]; then echo "bench: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

cc -O2 -o "$work/evhttp_min" "$SRC/bench/evhttp_min.c" -levent

if [ "$ONLY" = get ]; then
  start_eaid warm 0
  start_eaid cold 0
elif [ "$ONLY" = burst ]; then
  start_eaid warm 2 "$BURST_YAML"
  port_cold=0 key_cold=none
else
  start_eaid warm 2 "$BURST_YAML"
  start_eaid cold 0
fi
evport=$(free_port)
"$work/evhttp_min" "$evport" &
pids+=($!)

PYTHONPATH="$BENCH_DIR" python3 - "$RUNSC" "$IMAGES/python/3.11-slim/rootfs" "$work" "$SAMPLES" "$BURST" "$WRK_S" "$ONLY" \
  "$port_warm" "$key_warm" "$pid_warm" "$port_cold" "$key_cold" "$evport" <<'PY'
import json, os, re, statistics, subprocess, sys, threading, time
from benchlib import bundle as raw_bundle, connect, pct, raw_argv, wait_ready
(runsc, rootfs, work, samples, burst, wrk_s, only, port_w, key_w, pid_w, port_c, key_c, evport) = sys.argv[1:]
samples, burst, wrk_s = int(samples), int(burst), int(wrk_s)
port_w, port_c, pid_w, evport = int(port_w), int(port_c), int(pid_w), int(evport)
CMD = ["python3", "-c", "print(2+2)"]
state = os.path.join(work, "raw-state")
os.makedirs(state, exist_ok=True)
DEADLINE = time.monotonic() + 1800  # the whole bench: 30 min at most

def rss_mib(pid, field="VmRSS"):
    for line in open("/proc/%d/status" % pid):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    return 0.0

def bundle(i, args):
    return raw_bundle(work, i, rootfs, args)

RS = raw_argv(runsc, state)
seq = [0]
lock = threading.Lock()
def raw_run(b):
    with lock:
        seq[0] += 1
        cid = "perf-%d-%d" % (os.getpid(), seq[0])
    t = time.monotonic()
    out = subprocess.run(RS + ["run", "--bundle", b, cid], stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    dt = time.monotonic() - t
    assert out.returncode == 0 and out.stdout == b"4\n", out
    return dt

def raw_exec(cid):
    t = time.monotonic()
    out = subprocess.run(RS + ["exec", "--user", "65534:65534", "--cwd", "/tmp", cid] + CMD,
                         stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    dt = time.monotonic() - t
    assert out.returncode == 0 and out.stdout == b"4\n", out
    return dt

BODY = json.dumps({"profile": "gvisor", "image": "python:3.11-slim", "command": CMD,
                   "limits": {"cpu": "1", "memory": "256Mi", "timeout_s": 30}})
def hdr(key):
    return {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

refused = [0]
def pool_takes():
    """(hits, misses) of the warm eaid's pool so far (eai_pool_takes_total)."""
    c = connect(port_w); c.request("GET", "/metrics"); txt = c.getresponse().read().decode(); c.close()
    return tuple(int(float(m.group(1))) if m else 0 for m in
                 (re.search(r'^eai_pool_takes_total\{[^}]*result="%s"[^}]*\} ([\d.e+]+)$' % k, txt, re.M)
                  for k in ("hit", "miss")))

def submit(conn, key, body=BODY):
    for _ in range(200):  # bounded retry of 429/503 (admission back-pressure)
        conn.request("POST", "/v1/sandbox/executions", body, hdr(key))
        r = conn.getresponse(); b = json.loads(r.read())
        if r.status in (429, 503):
            with lock: refused[0] += 1
            time.sleep(float(r.getheader("Retry-After") or 0.2) or 0.2)
            continue
        assert r.status in (200, 201, 202), (r.status, b)
        return b["id"]
    raise SystemExit("submission refused 200 times")

def wait_terminal(conn, key, eid):
    for _ in range(20):
        conn.request("GET", "/v1/sandbox/executions/%s?wait_s=30" % eid, headers=hdr(key))
        r = conn.getresponse(); b = json.loads(r.read())
        if b.get("status") not in ("queued", "running"):
            return b
    raise SystemExit("execution %s not terminal after 10 min" % eid)

def eaid_once(conn, key):
    t = time.monotonic()
    b = wait_terminal(conn, key, submit(conn, key))
    dt = time.monotonic() - t
    assert b["status"] == "succeeded" and b.get("stdout") == "4\n", b
    return dt, b

out = {}
rss_idle = rss_mib(pid_w)
print("RSS eaid idle: %.1f MiB (anon %.1f, file %.1f)" % (rss_idle, rss_mib(pid_w, "RssAnon"), rss_mib(pid_w, "RssFile")))
if only == "all":
    wait_ready(port_w); wait_ready(port_c)
    cw, cc = connect(port_w), connect(port_c)
    b0 = bundle(0, CMD)
    boot = bundle(99, ["sleep", "3600"])
    bootcid = "perf-boot-%d" % os.getpid()
    # the detached sandbox keeps its stdio: never a pipe we would wait on
    subprocess.run(RS + ["run", "--detach", "--bundle", boot, bootcid], stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=True)
    raw_run(b0); raw_exec(bootcid); eaid_once(cc, key_c); eaid_once(cw, key_w)  # warm caches
    raw, rex, ecold, ewarm = [], [], [], []
    for i in range(samples):  # interleaved
        if time.monotonic() > DEADLINE: raise SystemExit("bench: deadline")
        raw.append(raw_run(b0))
        rex.append(raw_exec(bootcid))
        ecold.append(eaid_once(cc, key_c)[0])
        time.sleep(0.3)  # the pool refills (what a steady warm client sees)
        ewarm.append(eaid_once(cw, key_w)[0])
    subprocess.run(RS + ["delete", "--force", bootcid], capture_output=True, timeout=60)
    for name, v in (("raw_cold(runsc run)", raw), ("raw_exec(runsc exec)", rex),
                    ("eaid_cold(pool 0)", ecold), ("eaid_warm(pool 2)", ewarm)):
        print("%-22s p50=%6.1fms p90=%6.1fms p99=%6.1fms n=%d" % (name, 1000 * pct(v, 50), 1000 * pct(v, 90),
                                                                1000 * pct(v, 99), len(v)))
    out.update(raw=raw, rex=rex, ecold=ecold, ewarm=ewarm)
    cw.close(); cc.close()

if only in ("all", "burst"):
    if only == "burst":
        wait_ready(port_w)
        eaid_once(connect(port_w), key_w)  # warm caches
    # steady throughput at concurrency 4 (warm eaid)
    def tput(conc, n):
        done = [0]; errs = []
        def worker():
            c = connect(port_w)
            while True:
                with lock:
                    if done[0] >= n: return
                    done[0] += 1
                try: eaid_once(c, key_w)
                except BaseException as e: errs.append(e)
        t = time.monotonic()
        th = [threading.Thread(target=worker) for _ in range(conc)]
        [x.start() for x in th]; [x.join() for x in th]
        if errs: raise SystemExit("errors: %r" % errs[:3])
        return n / (time.monotonic() - t)
    tk0 = pool_takes()
    out["c4"] = tput(4, 32)
    tk1 = pool_takes()
    print("throughput c4 (eaid warm): %.2f executions/s (warm pool hits=%d misses=%d)" % (
          out["c4"], tk1[0] - tk0[0], tk1[1] - tk0[1]))

# ---- API: GET of one finished execution, wrk at 256 connections, beside evhttp
rss_load = rss_mib(pid_w)
if only != "burst":
    c = connect(port_w)
    if only == "get":
        wait_ready(port_w)
    eid = submit(c, key_w); wait_terminal(c, key_w, eid)
    url = "http://127.0.0.1:%d/v1/sandbox/executions/%s" % (port_w, eid)

    def wrk(url, headers):
        argv = ["wrk", "-t2", "-c256", "-d%ds" % wrk_s, "--latency", "--timeout", "5s"]
        for h in headers: argv += ["-H", h]
        res = subprocess.run(argv + [url], capture_output=True, text=True, timeout=wrk_s + 60)
        txt = res.stdout
        rps = float(re.search(r"Requests/sec:\s*([\d.]+)", txt).group(1))
        def lat(p):
            m = re.search(r"^\s*%s%%\s+([\d.]+)(us|ms|s)" % p, txt, re.M)
            v = float(m.group(1)); return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v
        non2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", txt)
        errs = re.search(r"Socket errors:.*", txt)
        return rps, lat(50), lat(99), int(non2xx.group(1)) if non2xx else 0, errs.group(0) if errs else ""

    # the body sizes, for the record
    c.request("GET", "/v1/sandbox/executions/" + eid, headers=hdr(key_w)); r = c.getresponse(); gb = r.read()
    assert r.status == 200, (r.status, gb)
    c.close()  # the load is wrk's 256 connections alone (limits.max_connections_per_tenant is 256)
    # evhttp first, then eaid, then evhttp again (the mean of the two is the baseline)
    ev1 = wrk("http://127.0.0.1:%d/" % evport, [])
    eg = wrk(url, ["Authorization: Bearer " + key_w])
    ev2 = wrk("http://127.0.0.1:%d/" % evport, [])
    ev_rps = (ev1[0] + ev2[0]) / 2
    time.sleep(2.5)  # settled: the load's connections are closed and swept
    rss_load = rss_mib(pid_w)
    print("GET wrk c256 %ds: evhttp %.0f/%.0f req/s p99=%.1f/%.1fms (1024 B body); eaid %.0f req/s p50=%.1fms p99=%.1fms "
          "(%d B body, non-2xx=%d %s)" % (wrk_s, ev1[0], ev2[0], ev1[2], ev2[2], eg[0], eg[1], eg[2], len(gb), eg[3], eg[4]))
    print("RSS eaid: idle %.1f MiB, after GET load %.1f MiB" % (rss_idle, rss_load))
    if eg[3]:
        raise SystemExit("bench: %d non-2xx answers to GET" % eg[3])

# ---- burst: BURST submissions from 32 clients, every accepted one terminal
if only != "get" and burst > 0:
    ids, errs = [], []
    nxt = [0]
    stop = threading.Event()
    # (seconds since t0, RSS MiB, queued, running) every 0.25 s: the queue
    # gauge and this node's slots from /metrics (read on a worker each second)
    samples_q = []
    def metric(txt, name):
        m = re.search(r"^%s(?:\{[^}]*\})? ([\d.e+]+)$" % name, txt, re.M)
        return int(float(m.group(1))) if m else -1
    def sampler():
        c = connect(port_w)
        while not stop.wait(0.25):
            try:
                c.request("GET", "/metrics"); txt = c.getresponse().read().decode()
            except OSError:
                c = connect(port_w); continue
            samples_q.append((time.monotonic() - t0, rss_mib(pid_w), metric(txt, "eai_sandbox_queued"),
                              metric(txt, "eai_sandbox_running"), rss_mib(pid_w, "RssAnon"), rss_mib(pid_w, "RssFile")))
    def client():
        c = connect(port_w)
        while True:
            with lock:
                if nxt[0] >= burst: return
                nxt[0] += 1
            try:
                eid = submit(c, key_w)
                with lock: ids.append(eid)
            except BaseException as e:
                errs.append(e)
    refused0 = refused[0]
    takes0 = pool_takes()
    t0 = time.monotonic()
    sth = threading.Thread(target=sampler); sth.start()
    th = [threading.Thread(target=client) for _ in range(32)]
    [x.start() for x in th]; [x.join() for x in th]
    t_sub = time.monotonic() - t0
    rss_queued = rss_mib(pid_w)
    # every accepted one terminal
    recs = [None] * len(ids)
    def waiter(k):
        c = connect(port_w)
        for i in range(k, len(ids), 8):
            try: recs[i] = wait_terminal(c, key_w, ids[i])
            except BaseException as e: errs.append(e)
    th = [threading.Thread(target=waiter, args=(k,)) for k in range(8)]
    [x.start() for x in th]; [x.join() for x in th]
    t_all = time.monotonic() - t0
    stop.set(); sth.join()
    takes1 = pool_takes()
    with open(os.path.join(work, "burst-samples.tsv"), "w") as f:  # PERF_KEEP=1 keeps it
        f.write("t_s\trss_mib\tqueued\trunning\tanon_mib\tfile_mib\n")
        for x in samples_q: f.write("%.2f\t%.2f\t%d\t%d\t%.2f\t%.2f\n" % x)
    ok = sum(1 for b in recs if b and b.get("status") == "succeeded")
    term = sum(1 for b in recs if b and b.get("status") not in ("queued", "running"))
    bad = {}
    for b in recs:
        if b and b.get("status") != "succeeded":
            k = "%s/%s" % (b.get("status"), (b.get("error") or {}).get("code") if isinstance(b.get("error"), dict) else b.get("error"))
            bad[k] = bad.get(k, 0) + 1
    def ms(s):
        import datetime
        return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() * 1000
    qw = [ms(b["started_at"]) - ms(b["created_at"]) for b in recs if b and b.get("started_at") and b.get("created_at")]
    # slot occupancy: the time the 8 slots held a run over the burst's span
    runs = [(ms(b["started_at"]), ms(b["finished_at"])) for b in recs if b and b.get("started_at") and b.get("finished_at")]
    span = (max(f for _, f in runs) - min(st for st, _ in runs)) if runs else 0
    occ = sum(f - st for st, f in runs) / (8 * span) if span > 0 else -1
    # the RSS while the queue is deepest (most queued, then most running)
    deep = max(samples_q, key=lambda x: (x[2], x[3])) if samples_q else (0, rss_queued, -1, -1, 0, 0)
    peak_rss = max([x[1] for x in samples_q] + [rss_queued])
    peak_run = max([x[3] for x in samples_q] or [-1])
    tput_b = len(ids) / t_all
    print("burst %d from 32 clients: accepted=%d terminal=%d succeeded=%d lost=%d errors=%d refused(429/503)=%d %s; "
          "submit %.1fs, all terminal %.1fs -> %.2f executions/s (steady c4 %.2f/s, ratio %.2f); "
          "queue wait p50=%.0fms p99=%.0fms max=%.0fms; run p50=%.0fms; slot occupancy %.2f; warm pool hits=%d misses=%d" % (
          burst, len(ids), term, ok, len(ids) - term, len(errs), refused[0] - refused0,
          json.dumps(bad) if bad else "", t_sub, t_all, tput_b, out["c4"], tput_b / out["c4"],
          pct(qw, 50) if qw else -1, pct(qw, 99) if qw else -1, max(qw) if qw else -1,
          pct([f - st for st, f in runs], 50) if runs else -1, occ, takes1[0] - takes0[0], takes1[1] - takes0[1]))
    print("burst RSS: idle %.1f MiB; %.1f MiB (anon %.1f, file %.1f) with %d queued and %d running (t=%.1fs); "
          "after submissions %.1f MiB; peak %.1f MiB; most running at once %d" % (
          rss_idle, deep[1], deep[4], deep[5], deep[2], deep[3], deep[0], rss_queued, peak_rss, peak_run))
    if errs: print("burst errors: %r" % errs[:3])
    # the first executions after the burst, one at a time 0.3 s apart (as the
    # warm series): the pool is empty after a saturation and refills only
    # when an execution takes from it
    tk0, after = pool_takes(), []
    c = connect(port_w)
    for _ in range(4):
        time.sleep(0.3)
        after.append(1000 * eaid_once(c, key_w)[0])
    tk1 = pool_takes()
    print("after the burst, one at a time: %s ms (warm pool hits=%d misses=%d)" % (
          " ".join("%.0f" % x for x in after), tk1[0] - tk0[0], tk1[1] - tk0[1]))
    # c4 again (the machine may be shared: the baseline is the mean of the
    # c4 figures before and after the burst)
    tk0 = pool_takes()
    c4b = tput(4, 32)
    tk1 = pool_takes()
    c4m = (out["c4"] + c4b) / 2
    print("throughput c4 after the burst: %.2f executions/s (warm pool hits=%d misses=%d); "
          "burst %.2f/s vs c4 mean %.2f/s: %.2f" % (c4b, tk1[0] - tk0[0], tk1[1] - tk0[1], tput_b, c4m, tput_b / c4m))
    out.update(burst=tput_b, c4m=c4m, qw99=pct(qw, 99) if qw else -1, rss_deep=deep[1], rss_peak=peak_rss,
               lost=len(ids) - term)

if only == "burst":
    print("burst_vs_c4=%.3f queue_wait_p99_ms=%.0f rss_queued_mib=%.1f rss_peak_mib=%.1f lost=%d" % (
          out["burst"] / out["c4m"], out["qw99"], out["rss_deep"], out["rss_peak"], out["lost"]))
elif only == "get":
    print("warm_vs_exec_floor=NA cold_vs_raw=NA overhead_ms_p50=NA get_vs_evhttp=%.3f rss_after_load_mib=%.1f" % (
          eg[0] / ev_rps, rss_load))
else:
    print("warm_vs_exec_floor=%.3f cold_vs_raw=%.3f overhead_ms_p50=%.1f get_vs_evhttp=%.3f rss_after_load_mib=%.1f" % (
          pct(out["ewarm"], 50) / pct(out["rex"], 50), pct(out["ecold"], 50) / pct(out["raw"], 50),
          1000 * (pct(out["ewarm"], 50) - pct(out["rex"], 50)), eg[0] / ev_rps, rss_load))
PY
