#!/usr/bin/env python3
"""Fault-injecting HTTP proxy for the SDK conformance suite (standard library only).

    fault_proxy.py UPSTREAM_PORT PORT_FILE STATS_FILE

Listens on a free loopback port (written to PORT_FILE once ready) and forwards
every request to 127.0.0.1:UPSTREAM_PORT, one upstream connection per request
(`Connection: close` both ways).  The first time it sees a request (keyed by
method, path, Idempotency-Key and body), it injects one fault instead of a clean
answer; the same request again passes:

- `POST /v1/sandbox/executions` (create): forwarded to eaid, which stores the
  execution, then the client connection is closed without a byte of the answer
  (a lost answer: only the Idempotency-Key keeps the retry from running twice);
- any other GET/DELETE: `503 sandbox_unavailable` with `Retry-After: 0`;
- any other POST: `429 rate_limited` without Retry-After (backoff of the SDK).

Each answer is the server's error envelope.  The SDK under test must still
pass every scenario.  On SIGTERM it writes {"faults": N, "requests": M} to
STATS_FILE and exits.
"""
import hashlib
import json
import signal
import socket
import sys
import threading

UP_PORT = int(sys.argv[1])
PORT_FILE, STATS_FILE = sys.argv[2], sys.argv[3]
MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024

seen = set()
lock = threading.Lock()
stats = {"faults": 0, "requests": 0}


def envelope(code, en, fr):
    return json.dumps({"error": {"code": code, "message": en, "message_i18n": {"en": en, "fr": fr},
                                 "request_id": "fault-proxy", "details": []}}).encode()


def read_head(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            return None, b""
        buf += chunk
        if len(buf) > MAX_HEAD:
            return None, b""
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def parse_headers(head):
    lines = head.split("\r\n")
    hdrs = []
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs.append((k.strip(), v.strip()))
    return lines[0], hdrs


def get(hdrs, name):
    for k, v in hdrs:
        if k.lower() == name:
            return v
    return None


def reply(sock, status, reason, body, extra=()):
    h = ["HTTP/1.1 %d %s" % (status, reason), "Content-Type: application/json",
         "Content-Length: %d" % len(body), "Connection: close", "X-Request-Id: fault-proxy"]
    h += ["%s: %s" % kv for kv in extra]
    sock.sendall(("\r\n".join(h) + "\r\n\r\n").encode() + body)


def forward(first, hdrs, body, client, deliver):
    """Send the request upstream; relay the answer to the client when deliver is true."""
    up = socket.create_connection(("127.0.0.1", UP_PORT), timeout=120)
    try:
        out = [first] + ["%s: %s" % (k, v) for k, v in hdrs if k.lower() not in ("connection", "keep-alive")]
        out.append("Connection: close")
        up.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + body)
        rhead, rest = read_head(up)
        if rhead is None:
            return
        _, rh = parse_headers(rhead)
        clen = get(rh, "content-length")
        remaining = int(clen) - len(rest) if clen is not None else None
        if not deliver:  # read the whole answer (the execution is stored), then drop the client
            while remaining is None or remaining > 0:
                chunk = up.recv(65536)
                if not chunk:
                    break
                if remaining is not None:
                    remaining -= len(chunk)
            return
        client.sendall((rhead + "\r\n\r\n").encode("latin-1") + rest)
        up.settimeout(None)  # event streams may be silent for long
        while remaining is None or remaining > 0:
            chunk = up.recv(65536)
            if not chunk:
                break
            client.sendall(chunk)
            if remaining is not None:
                remaining -= len(chunk)
    finally:
        up.close()


def handle(client):
    try:
        client.settimeout(120)
        head, rest = read_head(client)
        if head is None:
            return
        first, hdrs = parse_headers(head)
        parts = first.split(" ")
        method, path = parts[0], parts[1] if len(parts) > 1 else "/"
        clen = int(get(hdrs, "content-length") or 0)
        if clen > MAX_BODY:
            return
        body = rest
        while len(body) < clen:
            chunk = client.recv(65536)
            if not chunk:
                return
            body += chunk
        # the body is part of the key: an SDK that sent a create's retry with another
        # Idempotency-Key (or none) would run the code twice, and the scenarios see it
        key = (method, path, get(hdrs, "idempotency-key"), hashlib.sha256(body).hexdigest())
        with lock:
            stats["requests"] += 1
            fault = key not in seen
            seen.add(key)
            if fault:
                stats["faults"] += 1
        if not fault:
            forward(first, hdrs, body, client, True)
        elif method == "POST" and path.split("?")[0] == "/v1/sandbox/executions":
            forward(first, hdrs, body, client, False)
            client.shutdown(socket.SHUT_RDWR)
        elif method in ("GET", "HEAD", "DELETE"):
            reply(client, 503, "Service Unavailable", envelope(
                "sandbox_unavailable", "No sandbox runtime is available; the code was not run",
                "Aucun environnement d'isolation n'est disponible ; le code n'a pas été exécuté"),
                [("Retry-After", "0")])
        else:
            reply(client, 429, "Too Many Requests", envelope(
                "rate_limited", "Too many requests, retry later", "Trop de requêtes, réessayez plus tard"))
    except OSError:
        pass
    finally:
        try:
            client.close()
        except OSError:
            pass


def main():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)

    def stop(*_):
        with open(STATS_FILE, "w") as f:
            json.dump(stats, f)
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    with open(PORT_FILE + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    import os
    os.rename(PORT_FILE + ".tmp", PORT_FILE)
    while True:
        c, _ = srv.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
