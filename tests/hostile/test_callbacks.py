#!/usr/bin/env python3
"""Completion callbacks (issue 17 item 4), real eaid and real runsc:

- a receiver on loopback (127.0.0.1:<port> allowed explicitly in
  callbacks.allow) verifies Eai-Signature (HMAC-SHA-256 of "<t>.<body>")
  on every POST and accepts an Eai-Event-Id once; it is down (503) for the
  first attempts, then up: exactly one accepted delivery per event id, the
  body is the execution summary, the attempts show on the execution
  (attempts >= 2, last_status 200, delivered_at) and the secret never does;
- admission: a loopback URL not in callbacks.allow, a private address, a
  name not in the allow list, a URL with user info, a short secret are
  refused with a detail at /callback...; a tool manifest's callback is
  checked too;
- a name is resolved before each delivery: loopback answers refused unless an
  address entry lists them, and the POST goes to the checked address;
- proxies (issue 36 item 5): http_proxy/https_proxy/ALL_PROXY in eaid's
  environment are ignored (the POST goes straight to the checked address, the
  proxy sees nothing); callbacks.proxy sends it through the configured proxy,
  whose address is what callbacks.allow must list (refused otherwise).
The receiver checks each POST twice: with its own HMAC and with the
verify() function of docs/executions.md ("Completion callbacks"), run as
written."""
import hashlib
import hmac
import http.server
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, ensure_image, free_port, run_cases  # noqa: E402

IMAGE = "python:3.11-slim"
SECRET = "s3cret-s3cret-s3cret"


def doc_verify():
    """verify(secret, header, body) from the python block of docs/executions.md."""
    src = os.environ.get("EAI_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    text = open(os.path.join(src, "docs", "executions.md")).read()
    sec = text.split("### Completion callbacks", 1)[1]
    code = re.search(r"```python\n(.*?)```", sec, re.S).group(1)
    code = "\n".join(line[2:] if line.startswith("  ") else line for line in code.split("\n"))
    ns = {}
    exec(code, ns)  # noqa: S102 - the documented example, run as written
    return ns["verify"]


DOC_VERIFY = doc_verify()


class Receiver:
    """POST /hook: 503 while down, else verifies the signature and counts
    each event id once (a duplicate answers 200 too, as a receiver should)."""

    def __init__(self, down_for):
        self.port = free_port()
        self.down_until = time.time() + down_for
        self.posts = []        # (event id, signature ok, accepted)
        self.accepted = {}     # event id -> body
        self.bad_sig = 0
        rx = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                eid = self.headers.get("Eai-Event-Id", "")
                sig = self.headers.get("Eai-Signature", "")
                parts = dict(p.split("=", 1) for p in sig.split(",") if "=" in p)
                want = hmac.new(SECRET.encode(), parts.get("t", "").encode() + b"." + body,
                                hashlib.sha256).hexdigest()
                ok = hmac.compare_digest(want, parts.get("v1", "")) and \
                    abs(time.time() - int(parts.get("t", "0"))) < 300
                ok = ok and DOC_VERIFY(SECRET.encode(), sig, body)
                if not ok:
                    rx.bad_sig += 1
                    self.send_response(400)
                    self.end_headers()
                    return
                if time.time() < rx.down_until:
                    rx.posts.append((eid, True, False, False))
                    self.send_response(503)
                    self.end_headers()
                    return
                rx.posts.append((eid, True, eid not in rx.accepted, True))
                rx.accepted.setdefault(eid, json.loads(body))
                self.send_response(200)
                self.end_headers()

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def stop(self):
        self.srv.shutdown()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def with_env(allow, fn, backoff_cap_s=2, proxy=None, env=None):
    tmp = tempfile.mkdtemp(prefix="eai-cb-")
    lines = "callbacks:\n  backoff_cap_s: %d\n  timeout_ms: 3000\n" % backoff_cap_s
    if proxy:
        lines += "  proxy: \"%s\"\n" % proxy
    if allow:
        lines += "  allow:\n" + "".join("    - \"%s\"\n" % a for a in allow)
    cfg = write(os.path.join(tmp, "eaid.yaml"), lines)
    e = Env(config=cfg, tmp=tmp, env=env)
    try:
        e.make_key()
        e.start()
        fn(e)
    finally:
        e.stop(clean=False)
    shutil.rmtree(tmp, ignore_errors=True)  # kept, with eaid's log, only when fn failed


def case_delivery():
    ensure_image()
    rx = Receiver(down_for=4.0)
    try:
        def body(e):
            url = "http://127.0.0.1:%d/hook" % rx.port
            ids = []
            for i in range(2):
                st, b = e.api("POST", "/v1/sandbox/executions", {
                    "profile": "gvisor-small", "image": IMAGE,
                    "command": ["python3", "-c", "print(%d)" % i],
                    "callback": {"url": url, "secret": SECRET}})
                check(st == 202, "create: %s %s" % (st, b))
                ids.append(b["id"])
            for eid in ids:
                e.wait_terminal(eid)
            deadline = time.time() + 60
            while time.time() < deadline and len(rx.accepted) < 2:
                time.sleep(0.3)
            time.sleep(3)  # a duplicate would come now
            check(rx.bad_sig == 0, "%d POSTs with a bad signature" % rx.bad_sig)
            check(len(rx.accepted) == 2, "accepted %d events: %s" % (len(rx.accepted), rx.posts))
            acc = [p for p in rx.posts if p[2]]
            check(len(acc) == 2, "accepted deliveries %s" % acc)
            up = [p for p in rx.posts if p[3]]
            check(len(up) == 2, "POSTs once the receiver was up (a duplicate?): %s" % up)
            down = [p for p in rx.posts if not p[2] and p[0] in rx.accepted]
            check(len(down) >= 2, "the receiver was down at first: retried posts %s" % rx.posts)
            by_exec = {v["execution"]["id"]: v for v in rx.accepted.values()}
            check(set(by_exec) == set(ids), "summaries of %s, want %s" % (list(by_exec), ids))
            for eid in ids:
                s = by_exec[eid]
                check(s["type"] == "execution.finished" and s["execution"]["status"] == "succeeded",
                      "summary %s" % s)
                check("stdout" not in s["execution"], "summary carries the output")
                # attempts visible on the execution, secret never
                deadline = time.time() + 10
                while True:
                    st, v = e.api("GET", "/v1/sandbox/executions/" + eid)
                    cb = v.get("callback") or {}
                    if cb.get("delivered_at") or time.time() > deadline:
                        break
                    time.sleep(0.3)
                check(cb.get("url") == url, "callback view %s" % cb)
                check(cb.get("attempts", 0) >= 2 and cb.get("last_status") == 200 and cb.get("delivered_at"),
                      "callback view %s" % cb)
                check(SECRET not in json.dumps(v), "the secret is echoed by GET")
                st, lst = e.api("GET", "/v1/sandbox/executions?limit=10")
                check(SECRET not in json.dumps(lst), "the secret is echoed by the list")
        with_env(["127.0.0.1:%d" % rx.port], body)
    finally:
        rx.stop()


def case_refusals():
    def body(e):
        def refused(cb, path, words):
            st, b = e.api("POST", "/v1/sandbox/executions", {
                "profile": "gvisor-small", "image": IMAGE, "command": ["true"], "callback": cb})
            check(st == 422, "%s: %s %s" % (cb, st, b))
            d = [x for x in b["error"].get("details", []) if x["path"].startswith(path)]
            check(d and words in d[0]["message"], "%s: details %s" % (cb, b["error"].get("details")))
        refused({"url": "http://127.0.0.1:9/x", "secret": SECRET}, "/callback/url", "loopback")
        refused({"url": "http://10.1.2.3/x", "secret": SECRET}, "/callback/url", "private")
        refused({"url": "http://169.254.169.254/latest", "secret": SECRET}, "/callback/url", "link")
        refused({"url": "http://localhost:8080/x", "secret": SECRET}, "/callback/url", "loopback")
        refused({"url": "https://hooks.example.com/x", "secret": SECRET}, "/callback/url", "callbacks.allow")
        refused({"url": "http://u:p@198.18.0.1/x", "secret": SECRET}, "/callback/url", "user name")
        refused({"url": "http://198.18.0.1/x", "secret": "short"}, "/callback", "")
        # the allowed name passes admission
        st, b = e.api("POST", "/v1/sandbox/executions", {
            "profile": "gvisor-small", "image": IMAGE, "command": ["true"],
            "callback": {"url": "https://ok.example.net/hook", "secret": SECRET}})
        check(st in (202, 503), "allowed name: %s %s" % (st, b))
        # a tool manifest's callback is checked at run
        man = {"apiVersion": "eai.dev/v1", "kind": "Tool", "metadata": {"name": "cbtool"},
               "spec": {"sandbox_profile": "gvisor-small", "image": IMAGE, "command": ["true"],
                        "callback": {"url": "http://192.168.1.1/x", "secret": SECRET}}}
        st, b = e.api("POST", "/v1/manifests/apply", man)
        if st in (200, 201):
            st, b = e.api("POST", "/v1/sandbox/executions", {"tool": "cbtool"})
            check(st == 422 and "private" in json.dumps(b), "tool callback: %s %s" % (st, b))
        else:
            check(st in (400, 422) and "callback" in json.dumps(b), "manifest apply: %s %s" % (st, b))
    with_env(["ok.example.net:443"], body)


def case_names_at_delivery():
    """A name is resolved before each delivery: a loopback answer is refused unless an
    address entry lists it (a name entry never opens it), and the POST goes to the
    address that was checked (curl pinned to it).  Uses this machine's host name when it
    resolves to 127.0.0.1 only; else prints SKIP."""
    import socket
    ensure_image()
    hn = socket.gethostname().lower()
    try:
        addrs = {a[4][0] for a in socket.getaddrinfo(hn, 80, type=socket.SOCK_STREAM)}
    except OSError:
        addrs = set()
    if addrs != {"127.0.0.1"} or not re.match(r"^[a-z0-9-]{1,63}$", hn):
        print("SKIP names_at_delivery: host name %r resolves to %s" % (hn, sorted(addrs)), flush=True)
        return
    rx = Receiver(down_for=0)
    url = "http://%s:%d/hook" % (hn, rx.port)

    def run_one(e):
        st, b = e.api("POST", "/v1/sandbox/executions", {
            "profile": "gvisor-small", "image": IMAGE, "command": ["true"],
            "callback": {"url": url, "secret": SECRET}})
        check(st == 202, "create: %s %s" % (st, b))
        e.wait_terminal(b["id"])
        deadline = time.time() + 30
        while time.time() < deadline:
            st, v = e.api("GET", "/v1/sandbox/executions/" + b["id"])
            cb = v.get("callback") or {}
            if cb.get("attempts", 0) >= 1:
                return cb
            time.sleep(0.3)
        raise AssertionError("no attempt recorded: %s" % v)

    try:
        # the name alone is allowed: its loopback address is not
        def refused(e):
            cb = run_one(e)
            check(str(cb.get("last_status", "")).startswith("refused:") and "loopback" in cb["last_status"],
                  "a name opened a loopback address: %s" % cb)
            check(not rx.posts, "the receiver got %s" % rx.posts)
        with_env(["%s:%d" % (hn, rx.port)], refused)
        # the name and the address: delivered, to the checked address
        def delivered(e):
            deadline = time.time() + 30
            run_one(e)
            while time.time() < deadline and not rx.accepted:
                time.sleep(0.3)
            check(len(rx.accepted) == 1 and rx.bad_sig == 0, "posts %s" % rx.posts)
        with_env(["%s:%d" % (hn, rx.port), "127.0.0.1:%d" % rx.port], delivered)
    finally:
        rx.stop()


class ForwardProxy:
    """A plain HTTP forward proxy for the test: "POST http://NAME:PORT/path"
    (absolute form) is forwarded to 127.0.0.1:PORT whatever NAME is (the proxy,
    not eaid, resolves names).  Counts every connection and request."""

    def __init__(self):
        import http.client
        import urllib.parse
        self.port = free_port()
        self.requests = []
        px = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                px.requests.append((self.command, self.path))
                u = urllib.parse.urlsplit(self.path)
                if u.scheme != "http" or not u.port:
                    self.send_response(400)
                    self.end_headers()
                    return
                c = http.client.HTTPConnection("127.0.0.1", u.port, timeout=5)
                hdrs = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "host")}
                c.request("POST", u.path, body=body, headers=hdrs)
                r = c.getresponse()
                data = r.read()
                self.send_response(r.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_CONNECT = do_GET = do_POST

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def stop(self):
        self.srv.shutdown()


def case_proxies():
    ensure_image()
    rx, px = Receiver(down_for=0), ForwardProxy()

    def submit(e, url):
        st, b = e.api("POST", "/v1/sandbox/executions", {
            "profile": "gvisor-small", "image": IMAGE, "command": ["true"],
            "callback": {"url": url, "secret": SECRET}})
        check(st == 202, "create: %s %s" % (st, b))
        e.wait_terminal(b["id"])
        deadline = time.time() + 30
        while time.time() < deadline:
            st, v = e.api("GET", "/v1/sandbox/executions/" + b["id"])
            cb = v.get("callback") or {}
            if cb.get("attempts", 0) >= 1:
                return cb
            time.sleep(0.3)
        raise AssertionError("no attempt recorded")

    try:
        # 1. the environment's proxies are ignored: straight to the checked address
        purl = "http://127.0.0.1:%d" % px.port
        envp = {k: purl for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                  "all_proxy")}

        def direct(e):
            cb = submit(e, "http://127.0.0.1:%d/hook" % rx.port)
            check(cb.get("last_status") == 200, "not delivered straight: %s" % cb)
            check(not px.requests, "the environment's proxy was used: %s" % px.requests)
            check(len(rx.accepted) == 1, "receiver %s" % rx.posts)
        with_env(["127.0.0.1:%d" % rx.port], direct, env=envp)
        # 2. callbacks.proxy: the proxy resolves the name; its address is what is checked
        name_url = "http://hooks.eai-test.invalid:%d/hook" % rx.port

        def via(e):
            cb = submit(e, name_url)
            check(cb.get("last_status") == 200, "not delivered through the proxy: %s" % cb)
            check(px.requests and px.requests[-1] == ("POST", name_url), "proxy saw %s" % px.requests)
            check(len(rx.accepted) == 2, "receiver %s" % rx.posts)
        with_env(["hooks.eai-test.invalid:%d" % rx.port, "127.0.0.1:%d" % px.port], via, proxy=purl)
        # 3. a proxy whose (loopback) address callbacks.allow does not list: refused, nothing sent
        n = len(px.requests)

        def refused(e):
            cb = submit(e, name_url)
            check(str(cb.get("last_status", "")).startswith("refused:") and "callbacks.proxy" in cb["last_status"],
                  "a proxy outside callbacks.allow: %s" % cb)
            check(len(px.requests) == n, "the proxy got %s" % px.requests[n:])
        with_env(["hooks.eai-test.invalid:%d" % rx.port], refused, proxy=purl)
    finally:
        rx.stop()
        px.stop()


if __name__ == "__main__":
    run_cases([("delivery", case_delivery), ("refusals", case_refusals),
               ("names at delivery", case_names_at_delivery), ("proxies", case_proxies)])
