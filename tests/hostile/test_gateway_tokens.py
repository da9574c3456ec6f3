#!/usr/bin/env python3
"""Gateway tokens against a real `eaid serve` (issue 35 item 4;
docs/auth.md "Gateway tokens").  Keys are made and tokens signed with the
`openssl` command (no Python crypto library): Ed25519, P-256 and RSA 2048.

- a token of each alg passes; the tenant named by the claim is created at
  first sight (create_tenants) and is the same on the next token; a tenant
  id made with the CLI is taken as is, an unknown one refused;
- the token's project claim: a body naming another project is refused 403;
- forged and wrong tokens (expired, not yet valid, wrong issuer, wrong
  audience, alg none, HS256 keyed with the public key, unknown kid, bad
  signature, oversized) answer 401 with the envelope in both languages, and
  eai_auth_jwt_refused_total counts them by reason;
- key rotation: a new key set file with a new kid is taken without restart,
  the removed key's tokens are refused;
- auth.api_keys: false refuses API keys; a key set file that cannot be read
  and an HMAC alg in auth.jwt.algorithms refuse the start."""
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, run_cases  # noqa: E402

ISS = "https://gateway.test"
AUD = "eai-sandbox"
TMP = tempfile.mkdtemp(prefix="eai-jwt-")
E = None


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def ossl(*args, data=None):
    return subprocess.run(["openssl", *args], input=data, capture_output=True, check=True, timeout=60).stdout


class Key:
    def __init__(self, kind, kid):
        self.kind, self.kid = kind, kid
        self.pem = os.path.join(TMP, kid + ".pem")
        if kind == "EdDSA":
            ossl("genpkey", "-algorithm", "ed25519", "-out", self.pem)
        elif kind == "ES256":
            ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", self.pem)
        else:
            ossl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", self.pem)
        self.pub_der = ossl("pkey", "-in", self.pem, "-pubout", "-outform", "DER")

    def jwk(self):
        if self.kind == "EdDSA":
            return {"kty": "OKP", "crv": "Ed25519", "kid": self.kid, "x": b64u(self.pub_der[-32:])}
        if self.kind == "ES256":
            pt = self.pub_der[-65:]
            return {"kty": "EC", "crv": "P-256", "kid": self.kid, "x": b64u(pt[1:33]), "y": b64u(pt[33:])}
        mod = ossl("pkey", "-in", self.pem, "-pubout", "-outform", "PEM")
        n = ossl("rsa", "-pubin", "-noout", "-modulus", data=mod).decode().strip().split("=", 1)[1]
        return {"kty": "RSA", "kid": self.kid, "n": b64u(bytes.fromhex(n)), "e": "AQAB"}

    def sign(self, msg):
        m = os.path.join(TMP, "msg")
        with open(m, "wb") as f:
            f.write(msg)
        if self.kind == "EdDSA":
            return ossl("pkeyutl", "-sign", "-inkey", self.pem, "-rawin", "-in", m)
        sig = ossl("dgst", "-sha256", "-sign", self.pem, m)
        if self.kind == "RS256":
            return sig
        return der_to_rs(sig)


def der_to_rs(der):
    """ECDSA DER (SEQUENCE of two INTEGERs) to the JWS R || S form."""
    i = 2 if der[1] < 0x80 else 3
    out = b""
    for _ in range(2):
        assert der[i] == 2
        n = der[i + 1]
        v = der[i + 2:i + 2 + n].lstrip(b"\0")
        out += v.rjust(32, b"\0")
        i += 2 + n
    return out


def token(key, claims=None, header=None, alg=None, now=None):
    now = int(time.time()) if now is None else now
    c = {"iss": ISS, "aud": AUD, "sub": "agent-1", "exp": now + 300, "iat": now, "tenant_id": "acme",
         "project_id": "proj-1"}
    c.update(claims or {})
    c = {k: v for k, v in c.items() if v is not None}
    h = {"alg": alg or key.kind, "kid": key.kid, "typ": "JWT"}
    h.update(header or {})
    si = b64u(json.dumps(h).encode()) + "." + b64u(json.dumps(c).encode())
    return si + "." + b64u(key.sign(si.encode()))


def write_jwks(keys):
    path = os.path.join(TMP, "jwks.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"keys": [k.jwk() for k in keys]}, f)
    os.replace(path + ".tmp", path)
    return path


def get(tok, path="/v1/sandbox/executions?limit=1", method="GET", body=None):
    E.key = tok
    return E.api(method, path, body, headers={"Accept-Language": "fr"})


def metric(name, label):
    with urllib.request.urlopen(E.url + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") and label in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


K = {}


def case_each_alg_and_tenant():
    for kid in ("ed1", "ec1", "rs1"):
        st, b = get(token(K[kid]))
        check(st == 200, "%s token: %s %s" % (kid, st, b))
    # the same tenant for the three: what one lists, the others list
    st, b = get(token(K["ed1"]), "/v1/sandbox/executions?limit=100")
    check(st == 200, "list: %s" % st)


def case_tenant_by_id():
    cli = Env(config=E.config, tmp=os.path.join(TMP, "cli"), data=E.data)
    r = cli.cmd("tenants", "create", "by-id")
    check(r.returncode == 0, "tenants create: %s" % r.stderr)
    tid = json.loads(r.stdout)["id"]
    st, b = get(token(K["ed1"], {"tenant_id": tid}))
    check(st == 200, "an existing tenant id: %s %s" % (st, b))
    st, b = get(token(K["ed1"], {"tenant_id": "00000000-0000-4000-8000-00000000abcd"}))
    check(st == 401, "an unknown tenant id: %s" % st)


def case_project_claim():
    body = {"profile": "gvisor-small", "image": "python:3.11-slim", "command": ["true"], "project_id": "other"}
    st, b = get(token(K["ed1"]), "/v1/sandbox/executions", "POST", body)
    check(st == 403 and b["error"]["code"] == "forbidden", "another project: %s %s" % (st, b))
    check("project_id" in json.dumps(b["error"].get("details")), "details name project_id: %s" % b)
    check("passerelle" in json.dumps(b["error"].get("details"), ensure_ascii=False), "details in French: %s" % b)
    st, b = get(token(K["ed1"], {"agent_id": "a1"}), "/v1/sandbox/sessions", "POST", {"image": "python:3.11-slim", "agent_id": "not-a1",
                                                                 "profile": "gvisor-small"})
    check(st == 403 and b["error"]["code"] == "forbidden", "a session for another agent: %s %s" % (st, b))
    st, b = get(token(K["ed1"]), "/v1/sandbox/executions?limit=1")
    check(st == 200, "eaid still answers after the refusals: %s" % st)


def case_refusals():
    now = int(time.time())
    hs_secret = json.dumps(K["rs1"].jwk()).encode()
    import hashlib
    import hmac
    h = b64u(json.dumps({"alg": "HS256", "kid": "rs1"}).encode()) + "." + b64u(json.dumps(
        {"iss": ISS, "aud": AUD, "exp": now + 300, "tenant_id": "acme"}).encode())
    hs = h + "." + b64u(hmac.new(hs_secret, h.encode(), hashlib.sha256).digest())
    none = b64u(b'{"alg":"none"}') + "." + b64u(json.dumps({"iss": ISS, "aud": AUD, "exp": now + 300,
                                                              "tenant_id": "acme"}).encode()) + "."
    good = token(K["ed1"])
    bad_sig = good[:-6] + ("AAAAAA" if not good.endswith("AAAAAA") else "BBBBBB")
    cases = {
        "expired": token(K["ed1"], {"exp": now - 3600}),
        "not yet valid": token(K["ed1"], {"nbf": now + 3600}),
        "wrong issuer": token(K["ec1"], {"iss": "https://evil.test"}),
        "wrong audience": token(K["rs1"], {"aud": "someone-else"}),
        "unsupported alg": none,
        "unknown kid": token(K["ed1"], header={"kid": "nope"}),
        "bad signature": bad_sig,
        "oversized": token(K["ed1"], {"pad": "x" * 9000}),
    }
    before = {r: metric("eai_auth_jwt_refused_total", 'reason="%s"' % r) for r in cases}
    for reason, tok in list(cases.items()) + [("unsupported alg", hs)]:
        st, b = get(tok)
        check(st == 401, "%s: %s %s" % (reason, st, b))
        check(b["error"]["code"] == "unauthenticated" and b["error"]["message_i18n"].get("fr"),
              "%s: envelope %s" % (reason, b))
    for reason in cases:
        after = metric("eai_auth_jwt_refused_total", 'reason="%s"' % reason)
        want = 2 if reason == "unsupported alg" else 1
        check(after - before[reason] == want, "%s counted %s -> %s" % (reason, before[reason], after))


def case_rotation():
    new = Key("EdDSA", "ed2")
    write_jwks([new, K["ec1"], K["rs1"]])  # ed1 rotated out
    deadline = time.time() + 40
    st = None
    while time.time() < deadline:  # an unknown kid asks for the set again (at most every 10 s)
        st, _ = get(token(new))
        if st == 200:
            break
        time.sleep(1)
    check(st == 200, "the new key's token after rotation: %s" % st)
    st, _ = get(token(K["ed1"], {"sub": "fresh"}))  # not in the cache: a new token
    check(st == 401, "the rotated-out key's token: %s" % st)


def case_jwks_url():
    """auth.jwt.jwks_url: the key set fetched from a server on loopback (the
    test's own): a token passes; the server failing (500, then garbage)
    keeps the last good set; a rotation published there is taken on the
    next unknown kid, without a restart."""
    import http.server
    import threading
    state = {"doc": json.dumps({"keys": [K["ec1"].jwk()]}).encode(), "status": 200, "hits": 0}

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            state["hits"] += 1
            self.send_response(state["status"])
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(state["doc"])

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    d = tempfile.mkdtemp(dir=TMP)
    cfg = os.path.join(d, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("auth:\n  jwt:\n    jwks_url: http://127.0.0.1:%d/jwks\n    issuer: %s\n    audience: %s\n"
                "    create_tenants: true\n    refresh_s: 10\n" % (srv.server_address[1], ISS, AUD))
    e = Env(config=cfg, tmp=d, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    try:
        e.start()
        deadline = time.time() + 15
        st = None
        while time.time() < deadline and st != 200:  # the first fetch is in the background
            e.key = token(K["ec1"], {"sub": "url-%f" % time.time()})
            st, _ = e.api("GET", "/v1/sandbox/executions")
            time.sleep(0.2)
        check(st == 200, "a token with the key set from jwks_url: %s" % st)
        state["status"], state["doc"] = 500, b"oops"
        hits = state["hits"]
        deadline = time.time() + 30
        while time.time() < deadline and state["hits"] == hits:  # the next refresh (refresh_s 10)
            time.sleep(0.5)
        check(state["hits"] > hits, "the key set was not fetched again")
        time.sleep(0.5)
        e.key = token(K["ec1"], {"sub": "after-500"})
        st, _ = e.api("GET", "/v1/sandbox/executions")
        check(st == 200, "the last good key set after a failed fetch: %s" % st)
        new = Key("ES256", "ec-url-2")
        state["status"], state["doc"] = 200, json.dumps({"keys": [new.jwk()]}).encode()
        deadline = time.time() + 40
        st = None
        while time.time() < deadline and st != 200:
            e.key = token(new, {"sub": "rot-%f" % time.time()})
            st, _ = e.api("GET", "/v1/sandbox/executions")
            time.sleep(1)
        check(st == 200, "the rotated key published at jwks_url: %s" % st)
        with urllib.request.urlopen(e.url + "/metrics", timeout=5) as m:
            text = m.read().decode()
        fails = [float(l.split()[-1]) for l in text.splitlines() if l.startswith("eai_auth_jwks_refresh_failures_total")]
        check(fails and fails[0] >= 1, "refresh failures counted: %s" % fails)
    finally:
        e.stop()
        srv.shutdown()


def case_python_sdk_with_a_token():
    """The Python SDK takes a gateway token where it takes an API key
    (Authorization: Bearer, issue 35 item 5): listing works, a forged token
    raises the SDK's authentication error."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "sdk", "python"))
    from enterprise_ai import EnterpriseAI
    from enterprise_ai import errors
    c = EnterpriseAI(E.url, token(K["ec1"], {"sub": "sdk"}))
    items = list(c.sandbox.list(limit=5))
    check(isinstance(items, list), "the SDK listed with a token")
    bad = EnterpriseAI(E.url, token(K["ec1"], {"exp": int(time.time()) - 3600}))
    try:
        list(bad.sandbox.list(limit=5))
        raised = None
    except errors.AuthenticationError as e:
        raised = e
    check(raised is not None, "an expired token passed through the SDK")


def start_refused(cfg_text):
    d = tempfile.mkdtemp(dir=TMP)
    cfg = os.path.join(d, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write(cfg_text)
    e = Env(config=cfg, tmp=d, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    p = e.spawn()
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    return rc, e.log_text()


def case_bad_configs():
    rc, log = start_refused("auth:\n  jwt:\n    jwks_file: %s/missing.json\n    issuer: x\n    audience: y\n" % TMP)
    check(rc not in (0, None) and "jwks_file" in log, "a missing key set must refuse the start: %s %s" % (rc, log[-300:]))
    rc, log = start_refused("auth:\n  jwt:\n    jwks_file: %s/jwks.json\n    issuer: x\n    audience: y\n"
                            "    algorithms: [RS256, HS256]\n" % TMP)
    check(rc not in (0, None) and "HS256" in log, "HS256 must refuse the start: %s %s" % (rc, log[-300:]))


def case_tokens_only():
    d = tempfile.mkdtemp(dir=TMP)
    cfg = os.path.join(d, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("auth:\n  api_keys: false\n  jwt:\n    jwks_file: %s\n    issuer: %s\n    audience: %s\n"
                "    create_tenants: true\n" % (os.path.join(TMP, "jwks.json"), ISS, AUD))
    e = Env(config=cfg, tmp=d, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    try:
        key = e.make_key("keys-off")
        e.start()
        e.key = key
        st, _ = e.api("GET", "/v1/sandbox/executions")
        check(st == 401, "an API key with auth.api_keys false: %s" % st)
        e.key = token(K["ec1"])
        st, _ = e.api("GET", "/v1/sandbox/executions")
        check(st == 200, "a token with auth.api_keys false: %s" % st)
    finally:
        e.stop()


def main():
    global E
    for kind, kid in (("EdDSA", "ed1"), ("ES256", "ec1"), ("RS256", "rs1")):
        K[kid] = Key(kind, kid)
    jwks = write_jwks(K.values())
    cfg = os.path.join(TMP, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("auth:\n  jwt:\n    jwks_file: %s\n    issuer: %s\n    audience: [%s, other]\n"
                "    create_tenants: true\n    refresh_s: 10\n" % (jwks, ISS, AUD))
    E = Env(config=cfg, tmp=os.path.join(TMP, "main"), env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    try:
        E.start()
        run_cases([("each_alg_and_tenant", case_each_alg_and_tenant), ("tenant_by_id", case_tenant_by_id),
                   ("project_claim", case_project_claim), ("refusals", case_refusals),
                   ("rotation", case_rotation), ("bad_configs", case_bad_configs),
                   ("tokens_only", case_tokens_only), ("python_sdk_with_a_token", case_python_sdk_with_a_token),
                   ("jwks_url", case_jwks_url)])
    finally:
        E.stop()
        __import__("shutil").rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    main()
