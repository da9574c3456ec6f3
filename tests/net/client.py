#!/usr/bin/env python3
"""A sandbox's client for tests/net/test_egress.py, run inside the sandbox
network namespace: `client.py CASE ARGS...` prints one JSON object
{"ok": bool, "error": str, "body": str, "n": int, "elapsed": s}."""
import json
import socket
import ssl
import sys
import time
import urllib.request



def unescape(text):
    return text.encode().decode("unicode_escape").encode("latin-1")


def read_response(s, pending):
    """One HTTP/1.1 response (head, then a Content-Length body): its body.
    pending: bytes read past the previous response (pipelining), kept."""
    data = pending.pop() if pending else b""
    while b"\r\n\r\n" not in data:
        b = s.recv(4096)
        if not b:
            raise ConnectionError("closed before a response")
        data += b
    head, _, rest = data.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v)
    while len(rest) < n:
        b = s.recv(65536)
        if not b:
            raise ConnectionError("closed inside a body")
        rest += b
    pending.append(rest[n:])
    return rest[:n].decode("latin-1")


def reframe(hello, per):
    """A ClientHello of one TLS record re-framed into records of per bytes."""
    body, out = hello[5:], b""
    for i in range(0, len(body), per):
        k = body[i:i + per]
        out += b"\x16\x03\x01" + len(k).to_bytes(2, "big") + k
    return out


def script(s, steps, out):
    """Timed steps on one connection (the tricks of issue 36):
    ["send", TEXT] (escapes decoded), ["sleep", S], ["resp"] (one response's
    body into out["responses"]), ["eof", S] (wait up to S for the peer to
    end the connection: out["ended"] "eof", "reset" or "open")."""
    pending = []
    for st in steps:
        if st[0] == "send":
            if "first_send" not in out:
                out["first_send"] = time.time()
            s.sendall(unescape(st[1]))
        elif st[0] == "sleep":
            time.sleep(st[1])
        elif st[0] == "resp":
            out["responses"].append(read_response(s, pending))
        elif st[0] == "eof":
            s.settimeout(st[1])
            try:
                while s.recv(4096):
                    pass
                out["ended"] = "eof"
            except ConnectionResetError:
                out["ended"] = "reset"
            except socket.timeout:
                out["ended"] = "open"


def run(case, args):
    t0 = time.monotonic()
    out = {"ok": False, "error": "", "body": "", "n": 0}
    try:
        if case == "url":                       # url URL [CAFILE]
            ctx = ssl.create_default_context(cafile=args[1]) if len(args) > 1 else None
            with urllib.request.urlopen(args[0], timeout=10, context=ctx) as r:
                data = r.read()
            out.update(ok=True, body=data[:200].decode("latin-1"), n=len(data))
        elif case == "resolve":                 # resolve NAME
            out.update(ok=True, body=socket.gethostbyname(args[0]))
        elif case == "raw":                     # raw HOST PORT PAYLOAD: send, read the answer
            s = socket.create_connection((args[0], int(args[1])), timeout=10)
            s.sendall(args[2].encode().decode("unicode_escape").encode("latin-1"))
            data = s.recv(4096)
            out.update(ok=bool(data), body=data[:200].decode("latin-1"), n=len(data))
        elif case == "script":                  # script HOST PORT STEPS_JSON (see script())
            out.update(responses=[], ended="")
            s = socket.create_connection((args[0], int(args[1])), timeout=10)
            try:
                script(s, json.loads(args[2]), out)
            except ConnectionResetError:
                out["ended"] = "reset"
                raise
            out.update(ok=True, body="|".join(out["responses"]))
        elif case == "tlsx":                    # tlsx HOST PORT SNI CAFILE DELAY PER GAP [1.2]
            # a TLS client that keeps silent DELAY s, then sends its
            # ClientHello re-framed into records of PER bytes (0: as is), one
            # TCP segment per record GAP s apart; then GET / with Host SNI
            delay, per, gap = float(args[4]), int(args[5]), float(args[6])
            ctx = ssl.create_default_context(cafile=args[3])
            ctx.check_hostname = False
            if len(args) > 7 and args[7] == "1.2":  # at most TLS 1.2
                ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            s = socket.create_connection((args[0], int(args[1])), timeout=10)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
            t = ctx.wrap_bio(inc, outg, server_hostname=args[2])
            time.sleep(delay)
            first = True

            def flush():
                data = outg.read()
                if first and per:  # the ClientHello: one record as OpenSSL writes it
                    recs = reframe(data, per)
                    for i in range(0, len(recs), 5 + per):
                        s.sendall(recs[i:i + 5 + per])
                        time.sleep(gap)
                elif data:
                    s.sendall(data)

            for _ in range(50):
                try:
                    t.do_handshake()
                    flush()
                    break
                except ssl.SSLWantReadError:
                    flush()
                    first = False
                    b = s.recv(65536)
                    if not b:
                        raise ConnectionError("closed during the handshake")
                    inc.write(b)
            t.write(b"GET / HTTP/1.1\r\nHost: " + args[2].encode() + b"\r\nConnection: close\r\n\r\n")
            flush()
            data = b""
            while True:  # to the end: the server closes after its answer
                try:
                    b = t.read(65536)
                    if not b:
                        break
                    data += b
                except ssl.SSLWantReadError:
                    b = s.recv(65536)
                    if not b:
                        break
                    inc.write(b)
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    break
            body = data.partition(b"\r\n\r\n")[2]
            out.update(ok=bool(body), body=body[:200].decode("latin-1"), n=len(body), version=t.version())
        elif case == "tls":                     # tls HOST PORT SNI CAFILE: handshake with that SNI
            ctx = ssl.create_default_context(cafile=args[3])
            ctx.check_hostname = False
            s = socket.create_connection((args[0], int(args[1])), timeout=10)
            t = ctx.wrap_socket(s, server_hostname=args[2])
            t.sendall(b"GET / HTTP/1.1\r\nHost: " + args[2].encode() + b"\r\nConnection: close\r\n\r\n")
            data = t.recv(4096)
            out.update(ok=bool(data), body=data[:200].decode("latin-1"), n=len(data))
        elif case == "count":                   # count HOST PORT BYTES: send BYTES, FIN, read the answer to EOF
            import hashlib
            n, h = int(args[2]), hashlib.sha256()
            s = socket.create_connection((args[0], int(args[1])), timeout=20)
            block = bytes(range(256)) * 256  # not HTTP, not TLS: the gateway sniffs and passes it on
            left = n
            while left > 0:
                b = block[:min(left, len(block))]
                s.sendall(b)
                h.update(b)
                left -= len(b)
            s.shutdown(socket.SHUT_WR)
            data = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                data += b
            want = "%d %s" % (n, h.hexdigest())
            out.update(ok=data.decode() == want, body=data[:200].decode("latin-1"), n=len(data))
        elif case == "udp":                     # udp HOST PORT
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            for _ in range(3):
                s.sendto(b"exfil", (args[0], int(args[1])))
            out.update(ok=True)
        elif case == "cat":                     # cat PATH
            with open(args[0]) as f:
                out.update(ok=True, body=f.read()[:200])
        elif case == "dnsraw":                  # dnsraw SERVER NAME: one A question over UDP, the rcode
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(3)
            q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
            q += b"".join(bytes([len(p)]) + p.encode() for p in args[1].split(".")) + b"\x00\x00\x01\x00\x01"
            s.sendto(q, (args[0], 53))
            data = s.recv(512)
            out.update(ok=True, body="rcode=%d an=%d" % (data[3] & 15, data[7]), n=len(data))
        elif case == "udpconn":                 # udpconn HOST PORT: a connected UDP socket (QUIC-like), the answer
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(5)
            s.connect((args[0], int(args[1])))
            s.send(b"\xc0quic-initial")
            data = s.recv(2048)
            out.update(ok=bool(data), n=len(data))
        elif case == "sleep":                   # sleep SECONDS
            time.sleep(float(args[0]))
            out.update(ok=True)
        elif case == "ifaces":                  # ifaces: the network interfaces the sandbox sees
            out.update(ok=True, body=",".join(sorted(n for _, n in socket.if_nameindex())))
        elif case == "tcp6":                    # tcp6 HOST PORT: an IPv6 connection, a request, the answer
            s = socket.create_connection((args[0], int(args[1])), timeout=5)
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            data = s.recv(4096)
            out.update(ok=bool(data), body=data[:200].decode("latin-1"), n=len(data))
        elif case == "hold":                    # hold HOST PORT NAME N SECONDS: N keep-alive connections, a
            socks, errs = [], []                 # request and its answer on each, all held SECONDS; n answered
            for _ in range(int(args[3])):
                try:
                    s = socket.create_connection((args[0], int(args[1])), timeout=5)
                    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % args[2]).encode())
                    read_response(s, [])
                    socks.append(s)
                except Exception as e:  # noqa: BLE001 - a refusal is a result
                    errs.append("%s: %s" % (type(e).__name__, e))
            out.update(ok=not errs, n=len(socks), error="; ".join(errs[:3]))
            print(json.dumps({"held": len(socks)}), flush=True)
            time.sleep(float(args[4]))
            for s in socks:
                s.close()
        else:
            out["error"] = "unknown case"
    except Exception as e:  # the refusal is what most cases expect
        out["error"] = "%s: %s" % (type(e).__name__, e)
    out["elapsed"] = round(time.monotonic() - t0, 3)
    return out


if __name__ == "__main__":
    if sys.argv[1] == "batch":              # batch CASES.json: one JSON line per case
        with open(sys.argv[2]) as f:
            for c in json.load(f):
                print(json.dumps(run(c[0], c[1:])), flush=True)
    else:
        print(json.dumps(run(sys.argv[1], sys.argv[2:])))
