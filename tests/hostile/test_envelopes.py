#!/usr/bin/env python3
"""Every answer an envelope (issue 19 item 2), over raw sockets.

libevent's evhttp answers malformed and oversized requests itself with an
HTML page; eaid checks the request head before evhttp (core/http/http_head.c)
so each of these gets the JSON envelope with the right status, both
languages and a request id, and the server keeps serving afterwards:
414 (64 KB request line), 431 (64 KB header, 3000 headers), 405 (unknown
and unserved methods), 400 (not HTTP/1.x, header without a colon, folded
header, NUL), 408 (a request not all in within server.read_timeout_s)."""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, run_cases  # noqa: E402

ENV = None


def raw(data, read_timeout=10, pause=None):
    """Send bytes, read the whole answer (the server closes after an error)."""
    s = socket.create_connection(("127.0.0.1", ENV.port), timeout=read_timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before we are done
        if pause:
            time.sleep(pause)
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            out += b
            if b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if cl and len(body) >= int(cl[0].split(b":")[1]):
                    break
        return out
    finally:
        s.close()


def parse(out):
    check(out.startswith(b"HTTP/1.1 "), "not an HTTP answer: %r" % out[:200])
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


def envelope(out, status, code, lang="en", rid=None):
    st, h, body = parse(out)
    check(st == status, "status %d, want %d: %r" % (st, status, out[:300]))
    check(h.get("content-type", "").startswith("application/json"), "content-type %r" % h.get("content-type"))
    try:
        env = json.loads(body)
    except ValueError:
        raise AssertionError("body is not JSON: %r" % body[:300])
    e = env.get("error") or {}
    check(e.get("code") == code, "code %r, want %r" % (e.get("code"), code))
    i18n = e.get("message_i18n") or {}
    check(i18n.get("en") and i18n.get("fr"), "both languages: %r" % env)
    check(e.get("request_id") and h.get("x-request-id") == e["request_id"], "request id: %r / %r" % (e, h))
    if rid:
        check(e["request_id"] == rid, "request id %r not echoed" % rid)
    check(e.get("message") == i18n.get(lang), "message in %s: %r" % (lang, e))
    return h, e


def still_serving():
    out = raw(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    st, _, _ = parse(out)
    check(st == 200, "healthz after the bad request: %r" % out[:200])


def case_414_request_line_64k():
    out = raw(b"GET /" + b"a" * 65536 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
    envelope(out, 414, "uri_too_long")
    still_serving()


def case_414_request_line_just_over():
    line = b"GET /" + b"a" * 8200 + b" HTTP/1.1"
    out = raw(line + b"\r\nHost: t\r\nConnection: close\r\n\r\n")
    envelope(out, 414, "uri_too_long")


def case_request_line_within_is_served():
    # 8000 bytes of path: not the request line's fault (404 from the router)
    out = raw(b"GET /" + b"a" * 8000 + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    envelope(out, 404, "not_found")


def case_431_header_64k():
    out = raw(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Request-Id: big-header-1\r\nX-Big: " + b"b" * 65536 + b"\r\n\r\n")
    envelope(out, 431, "headers_too_large", rid="big-header-1")
    still_serving()


def case_431_3000_headers():
    hs = b"".join(b"X-H%d: v\r\n" % i for i in range(3000))
    out = raw(b"GET /healthz HTTP/1.1\r\nHost: t\r\nAccept-Language: fr\r\n" + hs + b"\r\n")
    h, _ = envelope(out, 431, "headers_too_large", lang="fr")
    check(h.get("content-language") == "fr", "content-language %r" % h.get("content-language"))
    still_serving()


def case_100_headers_served_101_refused():
    hs = b"".join(b"X-H%d: v\r\n" % i for i in range(99))
    out = raw(b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + hs + b"Connection: close\r\n\r\n")  # 101 with Host
    envelope(out, 431, "headers_too_large")
    hs = b"".join(b"X-H%d: v\r\n" % i for i in range(98))
    out = raw(b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + hs + b"Connection: close\r\n\r\n")  # 100
    check(parse(out)[0] == 200, "100 headers: %r" % out[:200])


def case_405_unknown_method():
    out = raw(b"BREW /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    h, _ = envelope(out, 405, "method_not_allowed")
    check("GET" in h.get("allow", ""), "Allow header: %r" % h)
    out = raw(b"TRACE / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    envelope(out, 405, "method_not_allowed")
    out = raw(b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    st, _, _ = parse(out)
    check(st in (400, 405), "CONNECT: %r" % out[:200])
    envelope(out, st, "method_not_allowed" if st == 405 else "bad_request")


def case_405_method_not_served_by_route():
    out = raw(b"DELETE /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    envelope(out, 405, "method_not_allowed")


def case_400_malformed():
    for bad in (b"GET / HTTP/9.9\r\nHost: t\r\n\r\n",
                b"GET / HTTP/1.1 extra\r\nHost: t\r\n\r\n",
                b"GET\r\nHost: t\r\n\r\n",
                b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",  # a TLS hello on plain HTTP
                b"GET / HTTP/1.1\r\nNoColonHere\r\nHost: t\r\n\r\n",
                b"GET / HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n folded\r\n\r\n",
                b"GET / HTTP/1.1\r\nHost: t\r\nX-A: a\x00b\r\n\r\n",
                b"GET / HTTP/1.1\r\nBad Name: v\r\n\r\n",
                b"GET foo HTTP/1.1\r\nHost: t\r\n\r\n"):
        out = raw(bad)
        try:
            envelope(out, 400, "bad_request")
        except AssertionError as e:
            raise AssertionError("%r: %s" % (bad[:40], e))
    still_serving()


def case_408_slow_request_head():
    t0 = time.time()
    out = raw(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Request-Id: slow-loris-1\r\n", read_timeout=20)
    took = time.time() - t0
    envelope(out, 408, "request_timeout", rid="slow-loris-1")
    check(1.5 <= took <= 8, "408 after %.1f s (read_timeout_s is 2)" % took)


def case_408_slow_body():
    # the head arrives whole (checked where it lies in the input buffer):
    # the 408 still answers with the client's request id and language
    out = raw(b"POST /v1/sandbox/executions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              b"X-Request-Id: slow-body-1\r\nAccept-Language: fr\r\n"
              b"Content-Length: 100\r\n\r\n{\"a\":", read_timeout=20)
    envelope(out, 408, "request_timeout", lang="fr", rid="slow-body-1")
    still_serving()


def case_idle_connection_is_not_408():
    # a connection that never sent a byte is closed quietly, never answered
    s = socket.create_connection(("127.0.0.1", ENV.port), timeout=20)
    try:
        s.settimeout(4)
        try:
            b = s.recv(100)
        except socket.timeout:
            b = None
        check(not b, "an idle connection got %r" % b)
    finally:
        s.close()


def case_keepalive_closed_after_request_timeout():
    # evhttp's timeout (server.request_timeout_s, 3 here) is a common timeout
    # of the event base (core/http/server.c): an idle keep-alive connection
    # stays open well before it and is closed soon after it, not at once
    s = socket.create_connection(("127.0.0.1", ENV.port), timeout=20)
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        out = b""
        while b"\r\n\r\n" not in out:
            b = s.recv(65536)
            check(b, "closed before the answer: %r" % out)
            out += b
        check(out.startswith(b"HTTP/1.1 200"), "answer %r" % out[:100])
        t0 = time.monotonic()
        s.settimeout(1.5)
        try:
            early = s.recv(65536)  # b"": closed
        except socket.timeout:
            early = None
        check(early is None, "closed or sent %r %.1f s after the answer (request_timeout_s is 3)" %
              (early, time.monotonic() - t0))
        s.settimeout(10)
        rest = b""
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                b = b""
            if not b:
                break
            rest += b
        took = time.monotonic() - t0
        check(2.5 <= took <= 8, "idle keep-alive closed after %.1f s (request_timeout_s is 3)" % took)
    finally:
        s.close()


def main():
    global ENV
    cfg_dir = __import__("tempfile").mkdtemp(prefix="eai-env-cfg-")
    cfg = os.path.join(cfg_dir, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("server:\n  read_timeout_s: 2\n  request_timeout_s: 3\n")
    ENV = Env(config=cfg, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    try:
        ENV.start(ready_path="/healthz")
        run_cases([(n, f) for n, f in sorted(globals().items()) if n.startswith("case_")])
    finally:
        ENV.stop()
        __import__("shutil").rmtree(cfg_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
