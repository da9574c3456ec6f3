#!/usr/bin/env python3
"""Operator endpoints (issue 16 item 10), a real eaid without runsc:

- default (ops.access loopback): /metrics and /readyz details to a loopback
  client (the tests' own), /healthz open;
- ops.access token: /metrics answers 403 (envelope) without the token or
  with a wrong one, 200 with it; /readyz without the token has no runtime
  versions or reasons (before: "version"/"reason" of every backend, to
  anyone), with it the details; /healthz stays open;
- start-up refuses ops.access token without a token file, and a token file
  readable by others."""
import json
import os
import sys
import tempfile
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, run_cases  # noqa: E402

TOKEN = "ops-token-0123456789abcdef"


def get(env, path, token=None):
    h = {"Authorization": "Bearer " + token} if token else {}
    req = urllib.request.Request(env.url + path, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def make(tmp, cfg_text, token_mode=0o600):
    tok = os.path.join(tmp, "ops.token")
    with open(tok, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(tok, token_mode)
    cfg = os.path.join(tmp, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write(cfg_text.replace("@TOKEN@", tok))
    e = Env(config=cfg, tmp=tmp, env={"EAI_SANDBOX_RUNSC": "/nonexistent"})
    e.own_tmp = True
    return e


def case_default_loopback_open():
    e = make(tempfile.mkdtemp(prefix="eai-ops-"), "log:\n  level: info\n")
    try:
        e.start()
        st, body = get(e, "/metrics")
        check(st == 200 and b"eai_" in body, "loopback /metrics: %s" % st)
        st, body = get(e, "/readyz")
        check(b"isolation" in body, "loopback /readyz details: %r" % body[:200])
    finally:
        e.stop()


def case_token_mode():
    e = make(tempfile.mkdtemp(prefix="eai-ops-"), "ops:\n  access: token\n  token_file: @TOKEN@\n")
    try:
        e.start()
        check(get(e, "/healthz")[0] == 200, "healthz open")
        for tok in (None, "wrong-token-0123456789", TOKEN + "x"):
            st, body = get(e, "/metrics", tok)
            check(st == 403, "/metrics with %r: %s" % (tok, st))
            env = json.loads(body)
            check(env["error"]["code"] == "forbidden" and "fr" in env["error"]["message_i18n"], "envelope %r" % env)
        st, body = get(e, "/metrics", TOKEN)
        check(st == 200 and b"eai_" in body, "/metrics with the token: %s" % st)
        st, body = get(e, "/readyz")
        doc = json.loads(body)
        text = body.decode()
        check("version" not in text and "runsc" not in text and "reason" not in text and
              doc.get("checks") == {"restricted": True},
              "/readyz without the token shows details: %s" % text[:300])
        check(doc.get("status") in ("ready", "not_ready") or "error" in doc, "/readyz status: %s" % text[:200])
        st, body = get(e, "/readyz", TOKEN)
        check(b"runsc" in body and b"reason" in body, "/readyz with the token: %r" % body[:300])
    finally:
        e.stop()


def case_start_refusals():
    for text, mode, why in (("ops:\n  access: token\n", 0o600, "token without a token file"),
                            ("ops:\n  access: token\n  token_file: @TOKEN@\n", 0o644, "token file readable by others"),
                            ("ops:\n  access: sometimes\n", 0o600, "unknown access")):
        e = make(tempfile.mkdtemp(prefix="eai-ops-"), text, mode)
        try:
            p = e.spawn()
            try:
                rc = p.wait(timeout=30)
            except Exception:  # noqa: BLE001
                rc = None
            check(rc not in (None, 0), "%s: eaid started (rc %s)" % (why, rc))
        finally:
            e.stop()


if __name__ == "__main__":
    run_cases([
        ("default_loopback_open", case_default_loopback_open),
        ("token_mode", case_token_mode),
        ("start_refusals", case_start_refusals),
    ])
