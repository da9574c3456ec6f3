#!/usr/bin/env python3
"""The test internet of tests/net/test_egress.py: run inside a network
namespace the test made (198.18.0.0/15 test addresses only).

  peers.py LOGDIR CERT KEY

- DNS on 198.18.2.53:53 (UDP): answers from TABLE; every question is
  appended to LOGDIR/dns.log (so a test can prove a name was never asked);
- HTTP on 198.18.2.10:80, 198.18.2.20:80 and 198.18.2.20:8080: "hello <Host>",
  /big?n=BYTES, /redir -> 302 to http://other.test/; POST (Content-Length
  or chunked): "posted <body bytes> <Host>"; keep-alive (HTTP/1.1);
- HTTPS on 198.18.2.10:443 with CERT/KEY (the handshake in the connection's
  own thread, so a silent client never holds the others up);
- every connection these HTTP(S) servers accept is appended to
  LOGDIR/accept.log as "ADDR PORT UNIXTIME" (so a test can prove the gateway
  made no upstream connection, or made it only after the client spoke);
- UDP on 198.18.2.20:9999: every datagram is logged to LOGDIR/udp.log;
- TCP on 198.18.2.10:7000 ("count"): reads until the client's FIN, then
  answers "<bytes> <sha256 hex>" and closes (a half close must pass the
  gateway both ways).
Prints "ready" when every socket listens.  Stops on SIGTERM.
"""
import hashlib
import http.server
import os
import signal
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time

TABLE = {
    "allowed.test": "198.18.2.10",
    "tls.test": "198.18.2.10",
    "a.wild.test": "198.18.2.10",
    "other.test": "198.18.2.20",
    "rebind.test": "10.0.0.1",          # private: the gateway must refuse it
    "meta.test": "169.254.169.254",     # the metadata address
}
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])  # for sigwait, in every thread
logdir, cert, key = sys.argv[1], sys.argv[2], sys.argv[3]
lock = threading.Lock()


def log(name, line):
    with lock, open(os.path.join(logdir, name), "a") as f:
        f.write(line + "\n")


def dns_loop(sock):
    while True:
        data, peer = sock.recvfrom(2048)
        if len(data) < 12:
            continue
        qid, flags, qd = struct.unpack("!HHH", data[:6])
        i, labels = 12, []
        while i < len(data) and data[i]:
            n = data[i]
            labels.append(data[i + 1:i + 1 + n].decode("ascii", "replace"))
            i += 1 + n
        qtype, _ = struct.unpack("!HH", data[i + 1:i + 5])
        question = data[12:i + 5]
        name = ".".join(labels).lower()
        log("dns.log", name)
        addr = TABLE.get(name)
        rcode = 0 if addr else 3
        answers = b""
        if addr and qtype == 1:
            answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + socket.inet_aton(addr)
        header = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, 1 if answers else 0, 0, 0)
        sock.sendto(header + question + answers, peer)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                n += len(self.rfile.read(size))
                self.rfile.readline()
        else:
            n = len(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        body = ("posted %d %s" % (n, self.headers.get("Host", ""))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.startswith("/big"):
            n = int(self.path.split("n=")[1]) if "n=" in self.path else 1 << 20
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[:min(n, len(chunk))])
                n -= len(chunk)
            return
        if self.path == "/redir":
            self.send_response(302)
            self.send_header("Location", "http://other.test/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = ("hello %s" % self.headers.get("Host", "")).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    tls = None  # an SSLContext: wrap each accepted connection

    def get_request(self):
        sock, peer = self.socket.accept()
        log("accept.log", "%s %d %.6f" % (self.server_address[0], self.server_address[1], time.time()))
        if self.tls:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, peer

    def handle_error(self, request, client_address):
        pass  # refused and reset connections are what the tests make

    def server_bind(self):
        # HTTPServer's own asks getfqdn(), a reverse DNS lookup that only
        # times out in this namespace
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


servers = []
for addr, port in (("198.18.2.10", 80), ("198.18.2.20", 80), ("198.18.2.20", 8080), ("198.18.2.10", 443)):
    s = Server((addr, port), Handler)
    if port == 443:
        s.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        s.tls.load_cert_chain(cert, key)
    servers.append(s)
    threading.Thread(target=s.serve_forever, daemon=True).start()
dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
dns.bind(("198.18.2.53", 53))
threading.Thread(target=dns_loop, args=(dns,), daemon=True).start()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("198.18.2.20", 9999))


def udp_loop():
    while True:
        data, peer = udp.recvfrom(2048)
        log("udp.log", "%s %r" % (peer[0], data[:32]))


threading.Thread(target=udp_loop, daemon=True).start()
count = socket.socket()
count.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
count.bind(("198.18.2.10", 7000))
count.listen(8)


def count_one(c):
    h, n = hashlib.sha256(), 0
    try:
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            h.update(b)
            n += len(b)
        c.sendall(b"%d %s" % (n, h.hexdigest().encode()))
    except OSError:
        pass
    c.close()


def count_loop():
    while True:
        c, _ = count.accept()
        threading.Thread(target=count_one, args=(c,), daemon=True).start()


threading.Thread(target=count_loop, daemon=True).start()
print("ready", flush=True)
signal.sigwait([signal.SIGTERM, signal.SIGINT])
