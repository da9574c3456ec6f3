#!/usr/bin/env python3
"""Memory exhaustion through reads (issue 16 item 3), real eaid + real runsc:

- slow readers: 12 event streams of one execution that writes 1 MiB of
  control bytes to stdout (6 MiB as JSON escapes) are opened and never
  read; eaid's RSS grows by less than 24 MiB (before: every subscriber got
  its own escaped copy in its connection buffer, ~70 MiB for 12), and a
  stream that then reads gets all of the output and the terminal status;
- per-tenant caps: past limits.max_streams_per_tenant event streams and
  limits.max_polls_per_tenant long-polls the answer is 429 with the
  envelope; another tenant is not affected;
- the stored output of control bytes is base64 (4/3), not \\u0001 escapes."""
import base64
import json
import os
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, ensure_image, run_cases  # noqa: E402

IMAGE = "python:3.11-slim"
MIB = 1 << 20
PROG = ("import sys, time\ntime.sleep(%s)\nsys.stdout.buffer.write(b'\\x01' * %d)\nsys.stdout.flush()\n"
        "time.sleep(%s)\n")


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_stream(env, eid, key=None, rcvbuf=4096):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(30)
    s.connect(("127.0.0.1", env.port))
    s.sendall(("GET /v1/sandbox/executions/%s/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
               % (eid, key or env.key)).encode())
    return s


def read_all(s, timeout=60):
    s.settimeout(timeout)
    data = b""
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            b = s.recv(1 << 16)
        except socket.timeout:
            break
        if not b:
            break
        data += b
        if b"\r\n0\r\n\r\n" in data[-16:]:
            break
    return data


def submit(env, prog, key=None):
    st, r = env.api("POST", "/v1/sandbox/executions", {"profile": "gvisor-small", "image": IMAGE,
                                                        "command": ["python3", "-c", prog]},
                    headers={"Authorization": "Bearer " + key} if key else None)
    check(st == 202, "submit: %s %s" % (st, r))
    return r["id"]


def start_env(cfg_text=None):
    ensure_image()
    tmp = tempfile.mkdtemp(prefix="eai-slow-")
    cfg = None
    if cfg_text:
        cfg = os.path.join(tmp, "eaid.yaml")
        with open(cfg, "w") as f:
            f.write(cfg_text)
    e = Env(config=cfg, tmp=tmp)
    e.own_tmp = True
    e.make_key()
    e.start(ready_path="/readyz", timeout=120)
    return e


def case_slow_readers_rss_bounded():
    e = start_env()
    socks = []
    try:
        eid = submit(e, PROG % (3, MIB, 6))
        time.sleep(0.5)
        base = rss_kb(e.proc.pid)
        socks = [open_stream(e, eid) for _ in range(12)]
        time.sleep(6)  # the 1 MiB was written at ~3 s; every stream had its chance to take it all
        grown = (rss_kb(e.proc.pid) - base) / 1024.0
        print("eaid RSS grew by %.1f MiB with 12 unread streams of 1 MiB of control bytes" % grown, flush=True)
        # one slow reader now reads everything: all the output, then the terminal status
        data = read_all(socks[0])
        events = [ln for ln in data.split(b"\n") if ln.startswith(b"data: ")]
        got = 0
        terminal = None
        for ln in events:
            try:
                d = json.loads(ln[6:])
            except ValueError:
                continue
            if "data" in d and d.get("stream", "stdout") == "stdout":
                got += len(base64.b64decode(d["data"])) if d.get("encoding") == "base64" else len(d["data"])
            if d.get("status") in ("succeeded", "failed", "error"):
                terminal = d["status"]
        print("slow reader: %d bytes of output, terminal %s" % (got, terminal), flush=True)
        check(grown < 24, "eaid RSS grew by %.1f MiB" % grown)
        check(got == MIB, "slow reader got %d of %d bytes" % (got, MIB))
        check(terminal == "succeeded", "no terminal status for the slow reader: %r" % data[-300:])
        b = e.wait_terminal(eid)
        check(b["stdout_encoding"] == "base64" and len(b["stdout"]) <= MIB * 4 // 3 + 4,
              "stored control bytes: %s, %d bytes" % (b["stdout_encoding"], len(b["stdout"])))
    finally:
        for s in socks:
            s.close()
        e.stop()


def case_per_tenant_caps():
    e = start_env("limits:\n  max_streams_per_tenant: 3\n  max_polls_per_tenant: 2\n")
    socks = []
    try:
        other = e.make_key("other")
        mine = e.make_key("mine")
        eid = submit(e, PROG % (0, 10, 20), key=mine)
        time.sleep(1.0)
        socks = [open_stream(e, eid, key=mine) for _ in range(3)]
        time.sleep(1.0)
        s4 = open_stream(e, eid, key=mine)
        head = read_all(s4, timeout=10)
        s4.close()
        check(head.startswith(b"HTTP/1.1 429"), "4th stream: %r" % head[:200])
        body = json.loads(head.split(b"\r\n\r\n", 1)[1].split(b"\r\n", 1)[1].rsplit(b"\r\n0", 1)[0]
                          if b"chunked" in head.split(b"\r\n\r\n")[0].lower() else head.split(b"\r\n\r\n", 1)[1])
        check(body["error"]["code"] == "rate_limited" and "fr" in body["error"]["message_i18n"], "envelope %r" % body)
        # long-polls: two held, the third refused
        polls = []
        for _ in range(2):
            p = socket.socket()
            p.settimeout(30)
            p.connect(("127.0.0.1", e.port))
            p.sendall(("GET /v1/sandbox/executions/%s?wait_s=30 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s"
                       "\r\n\r\n" % (eid, mine)).encode())
            polls.append(p)
        time.sleep(1.0)
        st, r = e.api("GET", "/v1/sandbox/executions/%s?wait_s=30" % eid,
                      headers={"Authorization": "Bearer " + mine}, timeout=10)
        check(st == 429 and r["error"]["code"] == "rate_limited", "3rd long-poll: %s %r" % (st, r))
        # another tenant is not limited by these
        oid = submit(e, PROG % (0, 10, 5), key=other)
        so = open_stream(e, oid, key=other)
        first = so.recv(200)
        so.close()
        check(first.startswith(b"HTTP/1.1 200"), "other tenant's stream: %r" % first[:100])
        for p in polls:
            p.close()
    finally:
        for s in socks:
            s.close()
        e.stop()


if __name__ == "__main__":
    run_cases([
        ("slow_readers_rss_bounded", case_slow_readers_rss_bounded),
        ("per_tenant_caps", case_per_tenant_caps),
    ])
