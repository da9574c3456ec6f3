#!/usr/bin/env python3
"""TLS on the listener (issue 19 item 8), with certificates the test makes
with openssl: a CA, a server certificate for 127.0.0.1, a client
certificate from that CA and one from another CA.  Checked with curl and
`openssl s_client`: TLS 1.2 and 1.3 served, TLS 1.1 refused by the server,
client certificates required with server.tls.client_ca (a wrong one, or
none, fails the handshake), plain HTTP on the TLS port gets no answer,
envelopes and the head checks work over TLS, and bad configurations stop
start-up."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, run_cases  # noqa: E402

D = None
ENV = None


def sh(*argv, **kw):
    return subprocess.run(list(argv), capture_output=True, timeout=kw.pop("timeout", 30), **kw)


def mkcerts(d):
    def ossl(*a):
        r = sh("openssl", *a, cwd=d)
        check(r.returncode == 0, "openssl %s: %s" % (a[0], r.stderr.decode()[-500:]))

    for ca in ("ca", "otherca"):
        ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=eai test %s" % ca,
             "-keyout", ca + ".key", "-out", ca + ".crt")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "cli.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for name, ca, ext in (("server", "ca", "san.ext"), ("client", "ca", "cli.ext"), ("wrong", "otherca", "cli.ext")):
        ossl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=%s" % name, "-keyout", name + ".key",
             "-out", name + ".csr")
        ossl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key", "-CAcreateserial",
             "-days", "2", "-extfile", ext, "-out", name + ".crt")
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o600)


def p(name):
    return os.path.join(D, name)


def curl(path="/healthz", cert="client", extra=()):
    argv = ["curl", "-sS", "--max-time", "10", "--cacert", p("ca.crt"), "-o", "-", "-w", "\n%{http_code}"]
    if cert:
        argv += ["--cert", p(cert + ".crt"), "--key", p(cert + ".key")]
    argv += list(extra) + [ENV.url + path]
    return sh(*argv)


def s_client(*opts, cert="client", send=b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"):
    argv = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % ENV.port, "-CAfile", p("ca.crt"),
            "-servername", "localhost", "-ign_eof"] + list(opts)
    if cert:
        argv += ["-cert", p(cert + ".crt"), "-key", p(cert + ".key")]
    return sh(*argv, input=send, timeout=20)


def case_curl_with_client_cert():
    r = curl()
    check(r.returncode == 0 and r.stdout.endswith(b"\n200"), "curl: rc %d %r %r" % (r.returncode, r.stdout, r.stderr))


def case_envelope_over_tls():
    r = curl("/v1/no/such/route", extra=("-H", "Accept-Language: fr"))
    check(r.stdout.endswith(b"\n404") and b'"not_found"' in r.stdout and b'"fr"' in r.stdout, "404: %r" % r.stdout)
    r = curl("/healthz", extra=("-H", "X-Big: " + "b" * 20000))
    check(r.stdout.endswith(b"\n431") and b'"headers_too_large"' in r.stdout, "431 over TLS: %r %r" % (r.stdout, r.stderr))


def case_tls12_served():
    r = s_client("-tls1_2")
    out = r.stdout.decode(errors="replace")
    check("Protocol  : TLSv1.2" in out or "TLSv1.2" in out, "TLS 1.2 handshake: %s" % out[-800:])
    check("HTTP/1.1 200" in out, "HTTP over TLS 1.2: %s" % out[-800:])


def case_tls13_served():
    r = s_client("-tls1_3")
    out = r.stdout.decode(errors="replace")
    check("TLSv1.3" in out and "HTTP/1.1 200" in out, "TLS 1.3: %s" % out[-800:])


def case_tls11_refused():
    # the client offers only TLS 1.1 (its security level lowered so that it
    # does offer it): the server must answer with a protocol_version alert
    r = s_client("-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0")
    out = (r.stdout + r.stderr).decode(errors="replace")
    check("HTTP/1.1" not in out, "TLS 1.1 got an HTTP answer: %s" % out[-800:])
    check("protocol version" in out or "unsupported protocol" in out, "no protocol refusal: %s" % out[-800:])
    r = curl(extra=("--tlsv1.1", "--tls-max", "1.1", "--ciphers", "DEFAULT:@SECLEVEL=0"))
    check(r.returncode != 0 and not r.stdout.strip().endswith(b"200"), "curl TLS 1.1: %r" % r.stdout)


def case_wrong_client_cert_refused():
    r = curl(cert="wrong")
    check(r.returncode != 0 and not r.stdout.strip().endswith(b"200"), "wrong cert: rc %d %r" % (r.returncode, r.stdout))
    r = s_client(cert="wrong")
    out = (r.stdout + r.stderr).decode(errors="replace")
    check("HTTP/1.1" not in out, "wrong cert got HTTP: %s" % out[-600:])


def case_no_client_cert_refused():
    r = curl(cert=None)
    check(r.returncode != 0 and not r.stdout.strip().endswith(b"200"), "no cert: rc %d %r" % (r.returncode, r.stdout))


def case_plain_http_on_tls_port():
    r = sh("curl", "-sS", "--max-time", "5", "-o", "-", "-w", "\n%{http_code}",
           "http://127.0.0.1:%d/healthz" % ENV.port)
    check(not r.stdout.strip().endswith(b"200"), "plain HTTP answered: %r" % r.stdout)


def case_server_still_serves():
    case_curl_with_client_cert()


def bad_start(tls_yaml, needle):
    cfg = p("bad.yaml")
    with open(cfg, "w") as f:
        f.write("server:\n  tls:\n" + tls_yaml)
    e = Env(config=cfg, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    try:
        proc = e.spawn()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError("eaid started with %r" % tls_yaml)
        check(proc.returncode != 0, "exit status 0 with %r" % tls_yaml)
        check(needle in e.log_text(), "no %r in the log: %s" % (needle, e.log_tail()))
    finally:
        e.stop()


def case_bad_configs_stop_startup():
    bad_start("    cert: %s\n" % p("server.crt"), "key")
    bad_start("    cert: %s\n    key: %s\n" % (p("server.crt"), p("client.key")), "mismatch")
    bad_start("    cert: %s\n    key: %s\n" % (p("nonexistent.crt"), p("server.key")), "server.tls.cert")
    bad_start("    cert: %s\n    key: %s\n    client_ca: %s\n" % (p("server.crt"), p("server.key"), p("none.pem")),
              "client_ca")


def case_tls_without_client_ca():
    cfg = p("noca.yaml")
    with open(cfg, "w") as f:
        f.write("server:\n  tls:\n    cert: %s\n    key: %s\n" % (p("server.crt"), p("server.key")))
    global ENV
    saved, ENV = ENV, Env(config=cfg, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    ENV.scheme = "https"
    try:
        import ssl
        ctx = ssl.create_default_context(cafile=p("ca.crt"))
        ENV.start(ssl_ctx=ctx)
        r = curl(cert=None)
        check(r.returncode == 0 and r.stdout.endswith(b"\n200"), "no client_ca, no cert: %r %r" % (r.stdout, r.stderr))
    finally:
        ENV.stop()
        ENV = saved


def main():
    global D, ENV
    if not shutil.which("openssl") or not shutil.which("curl"):
        print("openssl and curl needed")
        sys.exit(77)
    D = tempfile.mkdtemp(prefix="eai-tls-")
    try:
        mkcerts(D)
        cfg = p("eaid.yaml")
        with open(cfg, "w") as f:
            f.write("server:\n  tls:\n    cert: %s\n    key: %s\n    client_ca: %s\n" % (
                p("server.crt"), p("server.key"), p("ca.crt")))
        ENV = Env(config=cfg, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
        ENV.scheme = "https"
        import ssl
        ctx = ssl.create_default_context(cafile=p("ca.crt"))
        ctx.load_cert_chain(p("client.crt"), p("client.key"))
        try:
            ENV.start(ssl_ctx=ctx)
            check("listening on https://" in ENV.log_text(), "log: %s" % ENV.log_tail())
            run_cases([(n, f) for n, f in sorted(globals().items()) if n.startswith("case_")])
        finally:
            ENV.stop()
    finally:
        shutil.rmtree(D, ignore_errors=True)


if __name__ == "__main__":
    main()
