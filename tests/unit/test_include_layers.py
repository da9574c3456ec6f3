#!/usr/bin/env python3
"""tools/include_layers.py catches what it is for: on a copy of the tree, an
upward include, a header cycle, a plugin including core and a stale
exception each fail the check; the tree as committed passes."""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
TOOL = os.path.join(SRC, "tools", "include_layers.py")
failures = []


def run(d):
    p = subprocess.run([sys.executable, TOOL, "--source", d], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def copy():
    d = tempfile.mkdtemp(prefix="eai-layers-")
    for top in ("core", "lib", "integrations", "plugins", "include", "tools"):
        shutil.copytree(os.path.join(SRC, top), os.path.join(d, top),
                        ignore=shutil.ignore_patterns("node_modules", "build"))
    return d


def append(d, rel, text):
    with open(os.path.join(d, rel), "a") as f:
        f.write(text)


def case(name, want_ok, needle, edit):
    d = copy()
    try:
        edit(d)
        rc, out = run(d)
        ok = (rc == 0) == want_ok and needle in out
        print(("ok   " if ok else "FAIL ") + name)
        if not ok:
            print(out)
            failures.append(name)
    finally:
        shutil.rmtree(d)


case("the tree as committed passes", True, "acyclic", lambda d: None)
case("an upward include is refused", False, "core/base/util.c (layer 0 base) includes core/exec/exec.h",
     lambda d: append(d, "core/base/util.c", '\n#include "exec/exec.h"\n'))
case("a header cycle is refused", False, "cycle:",
     lambda d: append(d, "core/base/log.h", '\n#include "base/errors.h"\n') or
     append(d, "core/base/errors.h", '\n#include "base/log.h"\n'))
case("a plugin including core is refused", False, "a plugin links nothing of core",
     lambda d: append(d, "plugins/gvisor/gvisor.c", '\n#include "../../core/base/util.h"\n'))


def drop_netns(d):
    p = os.path.join(d, "core/plugin/host.c")
    s = open(p).read().replace('#include "net/egress_host.h"\n', "")
    open(p, "w").write(s)


case("a stale exception is refused", False, "no longer occurs", drop_netns)
sys.exit(1 if failures else 0)
