#!/usr/bin/env python3
"""Conformance runner of the Python SDK: runs sdk/conformance/scenarios.json
(format: sdk/conformance/README.md) against the eaid that EAI_URL names, with
EAI_API_KEY (tenant A) and EAI_API_KEY_B (tenant B).  Started by
sdk/conformance/run.sh.  Last line `N passed, M failed`; exit 1 on a failure."""
import base64
import json
import os
import re
import secrets
import sys
import time
import traceback
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import enterprise_ai  # noqa: E402
from enterprise_ai import EnterpriseAI  # noqa: E402

SCENARIOS = os.environ.get("EAI_CONFORMANCE_SCENARIOS") or os.path.join(
    os.path.dirname(os.path.dirname(HERE)), "conformance", "scenarios.json")
INVALID_KEY = "eai_0000000000000000_" + "0" * 64

ERROR_CLASS = {
    "auth": enterprise_ai.AuthenticationError,
    "not_found": enterprise_ai.NotFoundError,
    "validation": enterprise_ai.ValidationError,
    "conflict": enterprise_ai.ConflictError,
    "rate_limited": enterprise_ai.RateLimitError,
    "unavailable": enterprise_ai.UnavailableError,
    "server": enterprise_ai.ServerError,
    "timeout": enterprise_ai.WaitTimeoutError,
    "connection": enterprise_ai.APIConnectionError,
}


class Fail(Exception):
    pass


VAR = re.compile(r"\$\{([A-Za-z0-9_]+)\}")
MISSING = object()


def subst(v: Any, vars: Dict[str, Any]) -> Any:
    if isinstance(v, str):
        m = VAR.fullmatch(v)
        if m:
            if m.group(1) not in vars:
                raise Fail("unknown variable %s" % m.group(1))
            return vars[m.group(1)]

        def rep(m2: "re.Match[str]") -> str:
            if m2.group(1) not in vars:
                raise Fail("unknown variable %s" % m2.group(1))
            x = vars[m2.group(1)]
            return x if isinstance(x, str) else json.dumps(x)
        return VAR.sub(rep, v)
    if isinstance(v, list):
        return [subst(x, vars) for x in v]
    if isinstance(v, dict):
        return {k: subst(x, vars) for k, x in v.items()}
    return v


def at(raw: Any, path: str) -> Any:
    cur = raw
    for seg in path.split("."):
        if isinstance(cur, list) and seg.isdigit():
            i = int(seg)
            if i >= len(cur):
                return MISSING
            cur = cur[i]
        elif isinstance(cur, dict):
            if seg not in cur:
                return MISSING
            cur = cur[seg]
        else:
            return MISSING
    return cur


class Runner:
    def __init__(self) -> None:
        with open(SCENARIOS, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.base_vars = dict(self.doc.get("variables", {}))
        if os.environ.get("EAI_CONFORMANCE_IMAGE"):
            self.base_vars["image"] = os.environ["EAI_CONFORMANCE_IMAGE"]
        if os.environ.get("EAI_CONFORMANCE_PROFILE"):
            self.base_vars["profile"] = os.environ["EAI_CONFORMANCE_PROFILE"]
        self.keys = {"a": os.environ["EAI_API_KEY"], "b": os.environ.get("EAI_API_KEY_B", ""),
                     "invalid": INVALID_KEY}
        self.clients: Dict[Any, EnterpriseAI] = {}

    def client(self, spec: Optional[Dict[str, Any]]) -> EnterpriseAI:
        spec = spec or {}
        k = (spec.get("key", "a"), spec.get("language"))
        if k not in self.clients:
            self.clients[k] = EnterpriseAI(base_url=os.environ["EAI_URL"], api_key=self.keys[k[0]],
                                           language=k[1])
        return self.clients[k]

    # each call returns (raw JSON-like result, extra) where extra holds decoded outputs
    def call(self, c: EnterpriseAI, name: str, a: Dict[str, Any]) -> Dict[str, Any]:
        sb = c.sandbox
        if name == "execute":
            ex = sb.execute(request=a["request"], timeout=a.get("timeout_s", 600))
            return {"raw": ex.raw, "exec": ex}
        if name == "create":
            ex = sb.create(request=a["request"], idempotency_key=a.get("idempotency_key"))
            return {"raw": ex.raw, "exec": ex}
        if name == "get":
            ex = sb.get(a["id"])
            return {"raw": ex.raw, "exec": ex}
        if name == "wait":
            ex = sb.wait(a["id"], timeout=a.get("timeout_s"))
            return {"raw": ex.raw, "exec": ex}
        if name == "cancel":
            ex = sb.cancel(a["id"])
            return {"raw": ex.raw, "exec": ex}
        if name == "list":
            items = list(sb.list(status=a.get("status"), run_id=a.get("run_id"), limit=a.get("limit")))
            return {"raw": [i.raw for i in items], "items": items}
        if name == "download_file":
            b = sb.download_file(a["id"], a["path"])
            return {"raw": None, "bytes": b}
        if name == "stream":
            evs = list(sb.stream(a["id"]))
            return {"raw": [e.data for e in evs], "events": evs}
        if name == "contracts_validate":
            r = c.contracts.validate(a["name"], a["document"])
            return {"raw": r.raw}
        if name == "manifests_apply":
            m = c.manifests.apply(a["manifest"])
            return {"raw": m.raw}
        if name == "manifests_get":
            return {"raw": c.manifests.get(a["kind"], a["name"])}
        if name == "manifests_delete":
            return {"raw": c.manifests.delete(a["kind"], a["name"])}
        if name == "runs_get":
            return {"raw": c.agent.runs.get(a["run_id"], limit=a.get("limit")).raw}
        if name == "runs_list":
            return {"raw": [r.raw for r in c.agent.runs.list(agent_id=a.get("agent_id"),
                                                             project_id=a.get("project_id"), limit=a.get("limit"))]}
        if name == "agents_get":
            return {"raw": c.agent.agents.get(a["agent_id"]).raw}
        if name == "agents_list":
            return {"raw": [x.raw for x in c.agent.agents.list(limit=a.get("limit"))]}
        raise Fail("unknown call %r" % name)

    def check_error(self, exp: Dict[str, Any], err: BaseException) -> None:
        cls = ERROR_CLASS.get(exp["class"])
        if cls is None:
            raise Fail("unknown error class %r" % exp["class"])
        if not isinstance(err, cls):
            raise Fail("want %s error, got %s: %s" % (exp["class"], type(err).__name__, err))
        if isinstance(err, enterprise_ai.APIError):
            for k, attr in (("code", "code"), ("http_status", "status"), ("message", "message")):
                if k in exp and getattr(err, attr) != exp[k]:
                    raise Fail("error %s %r, want %r" % (k, getattr(err, attr), exp[k]))
            for lang, msg in (exp.get("message_i18n") or {}).items():
                if err.message_i18n.get(lang) != msg:
                    raise Fail("message_i18n.%s %r, want %r" % (lang, err.message_i18n.get(lang), msg))
            paths = [d.get("path") for d in err.details]
            for p in exp.get("details_paths", []):
                if p not in paths:
                    raise Fail("details paths %r lack %s" % (paths, p))
            if exp.get("request_id") and not err.request_id:
                raise Fail("no request_id on the error")
            if self.keys["a"] in str(err) or self.keys["a"] in repr(err):
                raise Fail("the API key appears in the error text")
        elif any(k in exp for k in ("code", "http_status", "message")):
            raise Fail("error %s carries no envelope" % type(err).__name__)

    def check(self, exp: Dict[str, Any], res: Dict[str, Any]) -> None:
        raw = res["raw"]
        for p, want in (exp.get("fields") or {}).items():
            got = at(raw, p)
            if want is None and got is MISSING:
                continue
            if got is MISSING or got != want or type(got) is bool and type(want) is not bool:
                raise Fail("%s = %r, want %r" % (p, None if got is MISSING else got, want))
        for p, wants in (exp.get("one_of") or {}).items():
            got = at(raw, p)
            if got is MISSING or got not in wants:
                raise Fail("%s = %r, want one of %r" % (p, got, wants))
        for p, rx in (exp.get("match") or {}).items():
            got = at(raw, p)
            if not isinstance(got, str) or not re.search(rx, got):
                raise Fail("%s = %r does not match %s" % (p, got, rx))
        ex = res.get("exec")
        evs = res.get("events")
        out_b: Optional[bytes] = None
        err_b: Optional[bytes] = None
        if ex is not None:
            out_b, err_b = ex.stdout_bytes, ex.stderr_bytes
        elif evs is not None:
            out_b = b"".join(e.bytes for e in evs if e.type == "stdout")
            err_b = b"".join(e.bytes for e in evs if e.type == "stderr")
        for key, val in (("stdout", out_b), ("stderr", err_b)):
            if key in exp:
                if val is None:
                    raise Fail("%s expected on a result without output" % key)
                if val != exp[key].encode("utf-8"):
                    raise Fail("%s %r, want %r" % (key, val[:300], exp[key]))
        if "stdout_contains" in exp and (out_b is None or exp["stdout_contains"].encode() not in out_b):
            raise Fail("stdout %r lacks %r" % ((out_b or b"")[:300], exp["stdout_contains"]))
        if "stdout_b64" in exp and base64.b64encode(out_b or b"").decode() != exp["stdout_b64"]:
            raise Fail("stdout bytes %r, want base64 %s" % (out_b, exp["stdout_b64"]))
        if "files_include" in exp:
            have = [f.path for f in ex.files] if ex is not None else []
            for p in exp["files_include"]:
                if p not in have:
                    raise Fail("files %r lack %s" % (have, p))
        if "ids" in exp or "count" in exp:
            ids = [i.id for i in res.get("items", [])]
            if "ids" in exp and ids != exp["ids"]:
                raise Fail("ids %r, want %r" % (ids, exp["ids"]))
            if "count" in exp and len(ids) != exp["count"]:
                raise Fail("%d items, want %d" % (len(ids), exp["count"]))
        if "text" in exp and res.get("bytes") != exp["text"].encode("utf-8"):
            raise Fail("file %r, want %r" % (res.get("bytes"), exp["text"]))
        if "bytes_b64" in exp and base64.b64encode(res.get("bytes") or b"").decode() != exp["bytes_b64"]:
            raise Fail("file %r, want base64 %s" % (res.get("bytes"), exp["bytes_b64"]))
        if "last_status" in exp:
            if not evs or evs[-1].type != "status" or evs[-1].status != exp["last_status"]:
                raise Fail("last event %r, want status %s" % (evs[-1] if evs else None, exp["last_status"]))

    def scenario(self, sc: Dict[str, Any]) -> None:
        vars = dict(self.base_vars)
        vars["unique"] = secrets.token_hex(6)
        for i, step in enumerate(sc["steps"]):
            try:
                self.step(step, vars)
            except Fail as e:
                raise Fail("step %d (%s): %s" % (i + 1, step.get("call"), e)) from None

    def step(self, step: Dict[str, Any], vars: Dict[str, Any]) -> None:
        args = subst(step.get("args") or {}, vars)
        exp = subst(step.get("expect") or {}, vars)
        c = self.client(step.get("client"))
        try:
            res = self.call(c, step["call"], args)
        except enterprise_ai.EnterpriseAIError as e:
            if "error" not in exp:
                raise Fail("unexpected %s: %s" % (type(e).__name__, e))
            self.check_error(exp["error"], e)
            return
        if "error" in exp:
            raise Fail("want a %s error, the call succeeded: %r" % (exp["error"].get("class"), res["raw"]))
        self.check(exp, res)
        for var, path in (step.get("save") or {}).items():
            v = at(res["raw"], path)
            if v is MISSING:
                raise Fail("cannot save %s: no %s in %r" % (var, path, res["raw"]))
            vars[var] = v

    def run(self) -> int:
        only = [s for s in os.environ.get("EAI_CONFORMANCE_ONLY", "").split(",") if s]
        npass = nfail = 0
        for sc in self.doc["scenarios"]:
            if only and sc["name"] not in only:
                continue
            t0 = time.time()
            try:
                self.scenario(sc)
                npass += 1
                print("PASS %6.2fs %s" % (time.time() - t0, sc["name"]), flush=True)
            except Fail as e:
                nfail += 1
                print("FAIL %6.2fs %s: %s" % (time.time() - t0, sc["name"], e), flush=True)
            except Exception as e:  # a runner or SDK bug: report it as a failure, keep going
                nfail += 1
                print("FAIL %6.2fs %s: %s: %s\n%s" % (time.time() - t0, sc["name"], type(e).__name__, e,
                                                     traceback.format_exc(limit=4)), flush=True)
        print("python: %d passed, %d failed" % (npass, nfail))
        return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(Runner().run())
