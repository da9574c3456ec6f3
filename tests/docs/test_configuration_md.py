#!/usr/bin/env python3
"""docs/configuration.md, "Strict checking", run as written: each line of its
fenced blocks is produced by a config with that mistake.  The first block's
lines stop start-up (exit status 2, the line on stderr); the second's leaves
the gvisor backend out: eaid starts and /readyz answers 503 with the line."""
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
from eaid_env import EAID, SRC, Env, check, run_cases  # noqa: E402

CONFIGS = {  # the mistake each documented line names
    "/server: key 'colour'": "server:\n  colour: red\n",
    "/profiles/p1: key 'backend'": "profiles:\n  p1:\n    runtime_class: gvisor\n",
    "/isolation/gvisor: key 'platfrom'": "isolation:\n  gvisor:\n    platfrom: ptrace\n",
}


def blocks():
    text = open(os.path.join(SRC, "docs", "configuration.md")).read()
    sec = text.split("## Strict checking", 1)[1].split("\n## ", 1)[0]
    return [b.strip().splitlines() for b in re.findall(r"```\n(.*?)```", sec, re.S)]


def config_for(line, tmp):
    for k, yaml in CONFIGS.items():
        if k in line:
            path = os.path.join(tmp, "eaid.yaml")
            with open(path, "w") as f:
                f.write(yaml)
            return path, line.replace("/etc/eai/eaid.yaml", path)
    raise AssertionError("no config for the documented line %r" % line)


def case_stop():
    b = blocks()
    check(len(b) >= 2, "two fenced blocks in Strict checking, got %d" % len(b))
    for line in b[0]:
        tmp = tempfile.mkdtemp(prefix="eai-docs-")
        cfg, want = config_for(line, tmp)
        data = os.path.join(tmp, "data")
        os.makedirs(data, mode=0o700)
        env = dict(os.environ, EAI_DATA_DIR=data, EAI_LISTEN="127.0.0.1:0")
        r = subprocess.run([EAID, "serve", "--config", cfg], env=env, capture_output=True, timeout=30)
        err = r.stderr.decode()
        check(r.returncode == 2, "%s: exit %d, want 2 (%s)" % (line, r.returncode, err))
        check(want in err, "stderr lacks the documented line %r: %s" % (want, err))


def case_fail_closed():
    line = blocks()[1][0]
    tmp = tempfile.mkdtemp(prefix="eai-docs-")
    cfg, want = config_for(line, tmp)
    e = Env(config=cfg, tmp=tmp)
    try:
        e.start()
        try:
            urllib.request.urlopen(e.url + "/readyz", timeout=10)
            raise AssertionError("/readyz answered 200 with the backend left out")
        except urllib.error.HTTPError as err:
            body = err.read().decode()
            check(err.code == 503, "/readyz %d" % err.code)
            check(want.split(": config ", 1)[1] in body, "/readyz lacks %r: %s" % (want, body))
        check(want in e.log_text(), "the log lacks the documented line %r" % want)
    finally:
        e.stop()


if __name__ == "__main__":
    run_cases([("strict lines stop start-up", case_stop), ("isolation mistake: fail closed", case_fail_closed)])
