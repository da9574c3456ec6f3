#!/usr/bin/env python3
"""Tiny HTTP receiver for the observability tests (stdlib only, loopback only).

modes:
  otlp    POST /v1/traces, /v1/metrics -> 200 {}      (records each body)
  finops  POST /v1/finops/usage  -> 201, or 409 when the Idempotency-Key was seen
  audit   POST /<anything>       -> 200               (records each batch)
Every request is appended as one JSON line to --out:
  {"path", "status", "key", "body"}   (body parsed as JSON when it is JSON)
--port 0 picks a free port; the port is written to --port-file once listening.
"""
import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SEEN = set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def reply(self, status, body=b"{}"):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n > 0 else b""
        try:
            body = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, ValueError):
            body = {"_raw": raw.decode("latin-1")}
        key = self.headers.get("Idempotency-Key")
        mode = self.server.mode
        status = 200
        if mode == "otlp":
            status = 200 if self.path in ("/v1/traces", "/v1/metrics") else 404
        elif mode == "finops":
            if self.path != "/v1/finops/usage":
                status = 404
            elif not key:
                status = 400
            else:
                with LOCK:
                    status = 409 if key in SEEN else 201
                    SEEN.add(key)
        rec = {"path": self.path, "status": status, "key": key, "body": body,
               "content_type": self.headers.get("Content-Type"),
               "authorization": self.headers.get("Authorization"), "x_team": self.headers.get("X-Team")}
        with LOCK:
            with open(self.server.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
        self.reply(status)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["otlp", "finops", "audit"], required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    srv.mode = a.mode
    srv.out = a.out
    # FinOps dedup survives a restart of this process (a real service keeps its keys)
    if a.mode == "finops" and os.path.exists(a.out):
        with open(a.out, encoding="utf-8") as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("key") and r.get("status") in (201, 409):
                    SEEN.add(r["key"])
    signal.signal(signal.SIGTERM, lambda *_: (srv.server_close(), sys.exit(0)))
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(srv.server_address[1]))
        os.rename(tmp, a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
