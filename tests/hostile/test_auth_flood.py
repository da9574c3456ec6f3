#!/usr/bin/env python3
"""Unauthenticated writes (issue 16 item 4), a real eaid without runsc:

a flood of refused requests (no key, malformed keys, well-formed unknown
keys, 8 KiB paths) from 16 keep-alive connections while a client with a
valid key keeps listing its executions:

- every valid request answers 200 during the flood (real work admitted);
- the audit chain holds one auth.refused row per (source, reason) and
  10 s window, not one per request (before: one row each, ~3000 rows, with
  the raw 8 KiB path as target), and their counts add up to the refusals;
- targets are truncated (<= 131 bytes);
- eai_auth_refused_total counts every refusal;
- limits.max_connections_per_tenant bounds the connections one tenant holds
  (429 past it), another tenant unaffected;
- server.max_unauthenticated_connections: clients that connect and say
  nothing (or only fail to authenticate) cannot hold every connection slot:
  the oldest idle unauthenticated one is closed, tenants still get in;
- refusals of unknown ids (not_found) are audited at most 60 at once and
  1 a second per tenant: the rest counted, the next row says how many
  were left out (`suppressed`), the chain still verifies."""
import http.client
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, run_cases  # noqa: E402

FLOOD_PER_CONN = 200
CONNS = 16
DEADLINE_S = 60
LOCK = threading.Lock()


def flood(env, idx, counts, stop):
    c = http.client.HTTPConnection("127.0.0.1", env.port, timeout=10)
    keys = [None, "Bearer nope", "Bearer eai_%016x_%s" % (idx, "a" * 64), "Basic abc"]
    t0 = time.time()
    for i in range(FLOOD_PER_CONN):
        if stop.is_set() or time.time() - t0 > DEADLINE_S:
            break
        h = {}
        k = keys[i % len(keys)]
        if k:
            h["Authorization"] = k
        path = "/v1/sandbox/executions" if i % 5 else "/v1/sandbox/executions/" + "x" * 8000
        try:
            c.request("GET" if i % 2 else "POST", path, body=None if i % 2 else b"{}", headers=h)
            r = c.getresponse()
            r.read()
            with LOCK:
                counts[r.status] = counts.get(r.status, 0) + 1
        except (OSError, http.client.HTTPException):
            c.close()
            c = http.client.HTTPConnection("127.0.0.1", env.port, timeout=10)
    c.close()


def case_flood_of_bad_keys():
    tmp = tempfile.mkdtemp(prefix="eai-flood-")
    e = Env(tmp=tmp, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    e.own_tmp = True
    try:
        e.make_key()
        e.start()
        counts = {}
        stop = threading.Event()
        th = [threading.Thread(target=flood, args=(e, i, counts, stop)) for i in range(CONNS)]
        for t in th:
            t.start()
        good, worst = [], 0.0
        while any(t.is_alive() for t in th):
            t0 = time.time()
            st, b = e.api("GET", "/v1/sandbox/executions?limit=5", timeout=10)
            worst = max(worst, time.time() - t0)
            good.append(st)
            time.sleep(0.05)
        for t in th:
            t.join()
        refused = counts.get(401, 0)
        print("refused %d (statuses %r), valid requests %d, slowest %.3f s" % (refused, counts, len(good), worst))
        check(refused >= CONNS * FLOOD_PER_CONN * 0.75, "flood too small: %r" % counts)
        check(good and all(s == 200 for s in good), "valid requests refused during the flood: %r" %
              sorted(set(good)))
        with urllib.request.urlopen(e.url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        line = [x for x in text.splitlines() if x.startswith("eai_auth_refused_total")]
        check(line and float(line[0].split()[-1]) >= refused, "metric: %r" % line)
        counted = int(float(line[0].split()[-1]))
        e.stop(clean=False)  # the last window is written at stop
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(e.data, "eai.db"), uri=True)
        rows = db.execute("SELECT target, doc FROM audit_events WHERE action = 'auth.refused'").fetchall()
        db.close()
        total = sum(json.loads(d)["details"]["count"] for _, d in rows)
        print("auth.refused rows: %d, counted refusals: %d" % (len(rows), total))
        check(len(rows) <= 40, "%d audit rows for %d refusals" % (len(rows), refused))
        check(total == counted, "counts in the audit %d != refusals counted by eaid %d" % (total, counted))
        check(all(len(t.encode()) <= 131 for t, _ in rows), "untruncated target: %d bytes" %
              max(len(t.encode()) for t, _ in rows))
    finally:
        e.stop()


def case_connections_per_tenant():
    """limits.max_connections_per_tenant: a connection counts for the tenant
    of its authenticated requests until it closes; past the cap 429 with the
    envelope, another tenant unaffected, a closed connection frees its slot."""
    tmp = tempfile.mkdtemp(prefix="eai-conns-")
    cfg = os.path.join(tmp, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("limits:\n  max_connections_per_tenant: 3\n")
    e = Env(config=cfg, tmp=tmp, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    e.own_tmp = True
    try:
        other = e.make_key("other")
        mine = e.make_key("mine")
        e.start()

        def get(conn, key):
            conn.request("GET", "/v1/sandbox/executions?limit=1", headers={"Authorization": "Bearer " + key})
            r = conn.getresponse()
            return r.status, r.read()

        held = [http.client.HTTPConnection("127.0.0.1", e.port, timeout=10) for _ in range(3)]
        for c in held:
            check(get(c, mine)[0] == 200, "one of the 3 allowed connections refused")
        check(get(held[0], mine)[0] == 200, "a held connection refused on its 2nd request")
        extra = http.client.HTTPConnection("127.0.0.1", e.port, timeout=10)
        st, body = get(extra, mine)
        check(st == 429, "4th connection of the tenant: %s" % st)
        env = json.loads(body)
        check(env["error"]["code"] == "rate_limited" and "fr" in env["error"]["message_i18n"], "envelope %r" % env)
        extra.close()
        o = http.client.HTTPConnection("127.0.0.1", e.port, timeout=10)
        check(get(o, other)[0] == 200, "another tenant refused")
        o.close()
        held[0].close()
        ok = False
        for _ in range(20):  # the server sees the close
            time.sleep(0.1)
            c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=10)
            ok = get(c, mine)[0] == 200
            c.close()
            if ok:
                break
        check(ok, "a closed connection did not free its slot")
        for c in held[1:]:
            c.close()
    finally:
        e.stop()


def case_unauthenticated_connections():
    """server.max_connections 8, max_unauthenticated_connections 4: 12 silent
    connections and 4 that got a 401 cannot lock a tenant out (before, the
    listener paused at 8 until request_timeout_s, 75 s, for everyone); the
    evicted ones are the oldest, counted in eai_http_connections_evicted_total;
    a connection carrying a tenant's request is never evicted."""
    import socket
    tmp = tempfile.mkdtemp(prefix="eai-unauth-")
    cfg = os.path.join(tmp, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("server:\n  max_connections: 8\n  max_unauthenticated_connections: 4\n")
    e = Env(config=cfg, tmp=tmp, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    e.own_tmp = True
    silent = []
    try:
        key = e.make_key("tenant")
        e.start()
        kept = http.client.HTTPConnection("127.0.0.1", e.port, timeout=10)
        kept.request("GET", "/v1/sandbox/executions?limit=1", headers={"Authorization": "Bearer " + key})
        r = kept.getresponse()
        check(r.status == 200, "the tenant's first connection: %s" % r.status)
        r.read()
        for i in range(16):
            s = socket.create_connection(("127.0.0.1", e.port), timeout=10)
            if i % 4 == 0:  # one in four asks without a key: a 401, still unauthenticated
                s.sendall(b"GET /v1/sandbox/executions HTTP/1.1\r\nHost: x\r\n\r\n")
                check(b" 401 " in s.recv(4096), "no 401 for a request without a key")
            silent.append(s)
            time.sleep(0.02)
        t0 = time.time()
        c = http.client.HTTPConnection("127.0.0.1", e.port, timeout=10)
        c.request("GET", "/v1/sandbox/executions?limit=1", headers={"Authorization": "Bearer " + key})
        r = c.getresponse()
        check(r.status == 200, "a tenant's new connection after 16 unauthenticated ones: %s" % r.status)
        r.read()
        check(time.time() - t0 < 5, "the tenant waited %.1f s for a slot" % (time.time() - t0))
        kept.request("GET", "/v1/sandbox/executions?limit=1", headers={"Authorization": "Bearer " + key})
        r = kept.getresponse()
        check(r.status == 200, "the tenant's first connection was evicted: %s" % r.status)
        r.read()
        closed = 0
        for s in silent[:8]:  # the oldest were closed by the server
            s.settimeout(5)
            try:
                data = s.recv(4096)
                while data and b" 401 " in data and not data.endswith(b"}"):
                    data = s.recv(4096)
                closed += data == b"" or s.recv(4096) == b""
            except (ConnectionResetError, socket.timeout):
                closed += 1
        check(closed >= 8, "the 8 oldest unauthenticated connections closed: %d" % closed)
        with urllib.request.urlopen(e.url + "/metrics", timeout=5) as m:
            text = m.read().decode()
        n = [float(l.split()[-1]) for l in text.splitlines() if l.startswith("eai_http_connections_evicted_total")]
        check(n and n[0] >= 8, "eai_http_connections_evicted_total: %s" % n)
        c.close()
        kept.close()
    finally:
        for s in silent:
            s.close()
        e.stop()


def case_not_found_probes():
    """300 GETs of ids that do not exist: at most 60 + 1/s audit rows with
    reason not_found (not 300), eai_audit_suppressed_total counts the rest,
    the next one written after a pause carries `suppressed`, and the chain
    verifies (`eaid audit verify`)."""
    tmp = tempfile.mkdtemp(prefix="eai-probes-")
    e = Env(tmp=tmp, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    e.own_tmp = True
    try:
        e.make_key("prober")
        e.start()
        t0 = time.time()
        for i in range(300):
            st, _ = e.api("GET", "/v1/sandbox/executions/sbx_%08d-0000-4000-8000-000000000000" % i)
            check(st == 404, "unknown id: %s" % st)
        took = time.time() - t0
        time.sleep(2.2)  # two tokens back
        st, _ = e.api("GET", "/v1/sandbox/executions/sbx_99999999-0000-4000-8000-000000000000")
        check(st == 404, "unknown id: %s" % st)
        with urllib.request.urlopen(e.url + "/metrics", timeout=5) as m:
            text = m.read().decode()
        sup = [float(l.split()[-1]) for l in text.splitlines() if l.startswith("eai_audit_suppressed_total")]
        e.stop(clean=False)
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(e.data, "eai.db"), uri=True)
        rows = [json.loads(d) for (d,) in db.execute("SELECT doc FROM audit_events WHERE action = 'sandbox.read'"
                                                        " ORDER BY seq").fetchall()]
        db.close()
        nf = [r for r in rows if r.get("reason") == "not_found"]
        print("not_found rows: %d for 301 probes in %.1f s; suppressed metric %s" % (len(nf), took, sup))
        check(len(nf) <= 60 + int(took + 2.2) + 2, "%d not_found audit rows for 301 probes" % len(nf))
        check(len(nf) >= 60, "fewer rows than the burst: %d" % len(nf))
        check(sup and sup[0] + len(nf) == 301, "suppressed %s + written %d != 301" % (sup, len(nf)))
        check(nf[-1].get("suppressed", 0) > 0, "the last row does not say how many were left out: %r" % nf[-1])
        check(sum(r.get("suppressed", 0) for r in nf) == int(sup[0]), "suppressed members do not add up")
        r = e.cmd("audit", "verify")
        check(r.returncode == 0, "audit verify: %s %s" % (r.stdout, r.stderr))
    finally:
        e.stop()


if __name__ == "__main__":
    run_cases([("not_found_probes", case_not_found_probes),
               ("flood_of_bad_keys", case_flood_of_bad_keys),
               ("connections_per_tenant", case_connections_per_tenant),
               ("unauthenticated_connections", case_unauthenticated_connections)])
