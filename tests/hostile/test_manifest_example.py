#!/usr/bin/env python3
"""The tool manifest example of docs/contracts.md runs as written (issue 17
items 6 and 11), real eaid and real runsc: the YAML block is applied as
is, listed by GET /v1/manifests?kind=Tool, and an execution naming the tool
with the documented stdin prints "2 rows, sum of n = 3" for its two-row CSV.  The same manifest
with an image that does not exist, a limit above the profile's maximum or
egress outside the profile's allow list is refused at apply with the codes
and details an execution would get."""
import json
import os
import re
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import SRC, Env, check, ensure_image, run_cases  # noqa: E402


def doc_yaml():
    text = open(os.path.join(SRC, "docs", "contracts.md")).read()
    sec = text.split("### `contracts/v1/tool-manifest.schema.json`", 1)[1]
    m = re.search(r"```yaml[^\n]*\n(.*?)```", sec, re.S)
    check(m, "no yaml block in docs/contracts.md")
    return m.group(1)


def apply_yaml(e, text):
    req = urllib.request.Request(e.url + "/v1/manifests/apply", method="POST", data=text.encode(),
                                 headers={"Authorization": "Bearer " + e.key,
                                          "Content-Type": "application/yaml"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def case_example():
    ensure_image()
    e = Env()
    try:
        e.make_key()
        e.start()
        y = doc_yaml()
        st, b = apply_yaml(e, y)
        check(st in (200, 201), "apply of the documented example: %s %s" % (st, b))
        st, b = e.api("GET", "/v1/manifests?kind=Tool")
        check(st == 200 and [m["metadata"]["name"] for m in b["items"]] == ["csv-stats"], "list: %s %s" % (st, b))
        st, b = e.api("POST", "/v1/sandbox/executions", {"tool": "csv-stats", "stdin": "name,n\na,1\nb,2\n"})
        check(st == 202, "run: %s %s" % (st, b))
        v = e.wait_terminal(b["id"])
        check(v["status"] == "succeeded" and v["stdout"].strip() == "2 rows, sum of n = 3", "result: %s" % v)
        # refused at apply with an execution's codes and details
        for old, new, code, path in [
                ("image: python:3.11-slim", "image: nosuch:1.0", "unknown_image", "/spec/image"),
                ("timeout_s: 30}", "timeout_s: 3000}", "limit_exceeded", "/spec/limits/timeout_s"),
                ("  egress: []", "  egress: [\"api.example.com:443\"]", "egress_not_allowed", "/spec/egress/0")]:
            check(old in y, "the example changed: %r" % old)
            st, b = apply_yaml(e, y.replace(old, new).replace("name: csv-stats", "name: bad"))
            check(st == 422 and b["error"]["code"] == code and
                  any(d["path"] == path for d in b["error"].get("details", [])),
                  "%s: %s %s" % (new, st, b))
            if code == "unknown_image":
                msg = [d["message"] for d in b["error"]["details"] if d["path"] == path][0]
                check("python:3.11-slim" in msg and "eaid images list" in msg, "unknown_image lists none: %s" % msg)
        st, b = e.api("GET", "/v1/manifests/tool/bad")
        check(st == 404, "a refused manifest was stored: %s" % st)
    finally:
        e.stop()


if __name__ == "__main__":
    run_cases([("contracts.md example", case_example)])
