#!/usr/bin/env python3
"""Check that core's include graph is acyclic and reads in layers.

Every C file of core/, lib/eaibase/ and integrations/ belongs to one layer
(RULES below, first matching pattern wins), lowest first:

  0 base          lib/eaibase, core/base, core/record, core/schema and the
                  metric registry everything reports through (obs/metrics)
  1 host          storage, configuration, images, the plugin host, the
                  observability services (audit, delivery, telemetry,
                  callbacks), the shared HTTP client, app.h
  2 net           egress (core/net)
  3 http server   the HTTP transport: connections, requests, parking,
                  authentication, error envelopes (core/http, not routes)
  4 exec/session  executions, the scheduler, sessions, volumes (core/vol)
  5 routes        the HTTP routes, the daemon, the CLI, main

A file may include files of its own layer or of lower ones.  The check
fails (exit 1) when:
  - the include graph between files has a cycle (a header that, through
    others, includes itself);
  - a file includes one of a higher layer, unless the pair is listed in
    EXCEPTIONS with its reason (each exception must still occur: a stale
    one fails too, so the list only shrinks);
  - a plugin (plugins/) includes a core header (plugins link nothing of
    core: include/eai, plugins/common, lib/eaibase and core/record only).

  include_layers.py [--source DIR] [--stats]
--stats also prints, per layer, the files and the deepest include chain.
The ctest include_layers (label unit) runs it.  docs/architecture.md,
"Layers", says the same in prose.  Python 3 standard library only.
"""
import argparse
import fnmatch
import functools
import os
import re
import sys

# (layer, name, patterns); a file's layer is that of the first rule whose
# pattern matches, in this order: the routes before the rest of core/http/.
RULES = [
    (5, "routes", ["core/http/routes*", "core/session/session_routes.c", "core/mcp/*", "core/daemon.*", "core/cli*",
                   "core/main.c"]),
    (0, "base", ["lib/eaibase/*", "core/base/*", "core/record/*", "core/schema/*", "core/obs/metrics.*"]),
    (1, "host", ["core/store/*", "core/config/*", "core/images/*", "core/plugin/*", "core/obs/*",
                 "integrations/*", "core/app.h"]),
    (2, "net", ["core/net/*"]),
    (3, "http server", ["core/http/*"]),
    (4, "exec/session", ["core/exec/*", "core/session/*", "core/vol/*"]),
]
LAYERS = sorted((num, name) for num, name, _ in RULES)

# (including file, included file): why the upward include is there.  The
# list only shrinks: an entry that no longer occurs fails the check.
EXCEPTIONS = {
    ("core/http/server.c", "core/http/routes.h"):
        "the server indexes the route table (eai_routes, eai_nroutes) at start to match requests",
    ("core/config/sections.c", "core/http/ops_access.h"):
        "the ops section is parsed into the HTTP server's ops access rule",
    ("core/config/sections.c", "core/net/egress_policy.h"):
        "profiles' egress_allow is parsed into net's policy type",
    ("core/obs/callback.h", "core/net/egress_policy.h"):
        "completion callbacks go out under the callbacks.allow policy, net's type",
    ("core/plugin/host.c", "core/net/egress_host.h"):
        "the host API's netns_take/netns_release (ABI 1.2) are net's warm namespaces",
}

PLUGIN_ALLOWED = ("include/", "plugins/", "lib/eaibase/", "core/record/")


def layer_of(rel):
    for num, name, pats in RULES:
        if any(fnmatch.fnmatch(rel, p) for p in pats):
            return num, name
    return None


def sources(src, tops):
    out = []
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(os.path.join(src, top)):
            dirnames[:] = [d for d in dirnames if d not in ("build", "node_modules")]
            for f in filenames:
                if f.endswith((".c", ".h")):
                    out.append(os.path.relpath(os.path.join(dirpath, f), src))
    return sorted(out)


INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def resolve(src, rel, inc, search):
    for base in [os.path.dirname(rel)] + search:
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(src, cand)):
            return cand
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--stats", action="store_true")
    a = ap.parse_args()
    src = a.source
    problems = []

    core_files = sources(src, ["core", "lib/eaibase", "integrations"])
    search = ["core", "lib/eaibase", "core/record", "integrations"]
    graph = {}
    for rel in core_files:
        text = open(os.path.join(src, rel), encoding="utf-8", errors="replace").read()
        graph[rel] = [r for inc in INC.findall(text) if (r := resolve(src, rel, inc, search))]

    # 1. no cycle
    color, stack = {}, []

    def dfs(u):
        color[u] = 1
        stack.append(u)
        for v in graph.get(u, []):
            if color.get(v) == 1:
                problems.append("cycle: " + " -> ".join(stack[stack.index(v):] + [v]))
            elif not color.get(v):
                dfs(v)
        stack.pop()
        color[u] = 2

    sys.setrecursionlimit(20000)
    for f in core_files:
        if not color.get(f):
            dfs(f)

    # 2. layers
    seen_exc = set()
    for rel in core_files:
        lf = layer_of(rel)
        if not lf:
            problems.append(f"{rel}: in no layer (add its pattern to RULES in tools/include_layers.py)")
            continue
        for dep in graph[rel]:
            ld = layer_of(dep)
            if not ld or ld[0] <= lf[0]:
                continue
            if (rel, dep) in EXCEPTIONS:
                seen_exc.add((rel, dep))
                continue
            problems.append(f"{rel} (layer {lf[0]} {lf[1]}) includes {dep} (layer {ld[0]} {ld[1]}): a layer "
                            "includes only its own and lower ones (move the type down, or pass it in)")
    for pair in sorted(set(EXCEPTIONS) - seen_exc):
        problems.append(f"exception {pair[0]} -> {pair[1]} no longer occurs: remove it from EXCEPTIONS")

    # 3. plugins include nothing of core
    for rel in sources(src, ["plugins"]):
        text = open(os.path.join(src, rel), encoding="utf-8", errors="replace").read()
        for inc in INC.findall(text):
            r = resolve(src, rel, inc, ["include", "plugins/common", "lib/eaibase", "core/record"])
            if r and not r.startswith(PLUGIN_ALLOWED):
                problems.append(f"{rel} includes {r}: a plugin links nothing of core")
            if r is None and inc.split("/")[0] in ("base", "exec", "http", "store", "plugin", "obs"):
                problems.append(f"{rel} includes \"{inc}\": a core header, which a plugin cannot use")

    @functools.lru_cache(None)
    def depth(u):
        return 1 + max((depth(v) for v in graph.get(u, [])), default=0)

    if a.stats:
        for num, name in LAYERS:
            members = [f for f in core_files if layer_of(f) and layer_of(f)[0] == num]
            print(f"layer {num} {name}: {len(members)} files")
        deep = max(core_files, key=depth)
        print(f"deepest include chain: {depth(deep)} files, from {deep}")
        print(f"upward includes allowed by EXCEPTIONS: {len(EXCEPTIONS)}")
    for p in problems:
        print("include_layers: " + p, file=sys.stderr)
    if problems:
        print(f"include_layers: FAILED ({len(problems)} problems)", file=sys.stderr)
        return 1
    print(f"include_layers: {len(core_files)} files in 6 layers, acyclic, no upward include but the "
          f"{len(EXCEPTIONS)} listed; plugins include nothing of core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
