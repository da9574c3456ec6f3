#!/usr/bin/env python3
"""Fail on any include circle among core modules.

A module is a .c file and its own header (core/exec/watch.c + core/exec/watch.h
is the module exec/watch); a private header named <module>_int.h belongs to its
module (http/request_int.h is part of http/request); any other header without
a .c is a module of its own.  Its
edges are the quoted #includes of both files, resolved against the include root
core/ (then the including file's folder).  Includes that name no file of core/
(system and <eai/...> headers) are not edges.  Any strongly connected component
of more than one module is a circle: it is printed and the exit status is 1.

    python3 tools/check_includes.py [core-dir]      (ctest: test_include_graph)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(path):
    m = os.path.splitext(path)[0]
    return m[:-4] if m.endswith("_int") and path.endswith(".h") else m


def modules(root):
    mods = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith((".c", ".h")):
                p = os.path.relpath(os.path.join(d, f), root)
                mods.setdefault(module_of(p), []).append(p)
    return mods


def graph(root):
    mods = modules(root)
    edges = {m: set() for m in mods}
    for m, files in mods.items():
        for f in files:
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            for inc in INCLUDE.findall(text):
                for cand in (inc, os.path.join(os.path.dirname(f), inc)):
                    cand = os.path.normpath(cand)
                    if os.path.isfile(os.path.join(root, cand)):
                        t = module_of(cand)
                        if t != m:
                            edges[m].add(t)
                        break
    return edges


def cycles(edges):
    """Tarjan's strongly connected components, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def path_in(comp, edges):
    """One concrete loop through the component, for the message."""
    comp_set = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges[v]):
            if w == start:
                loop = [v]
                while prev[loop[-1]] is not None:
                    loop.append(prev[loop[-1]])
                return list(reversed(loop)) + [start]
            if w in comp_set and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def selftest():
    """The checker itself can fail: a made-up tree with a circle a -> b -> a
    (through b's private header) and a clean one."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "x"))
        files = {"x/a.c": '#include "x/a.h"\n#include "x/b.h"\n', "x/a.h": "",
                 "x/b.c": '#include "x/b_int.h"\n', "x/b.h": "",
                 "x/b_int.h": '#include "x/b.h"\n#include "x/a.h"\n',
                 "x/c.c": '#include "x/c.h"\n#include "c_int.h"\n', "x/c.h": "", "x/c_int.h": ""}
        for p, t in files.items():
            with open(os.path.join(d, p), "w") as f:
                f.write(t)
        found = cycles(graph(d))
        if found != [["x/a", "x/b"]]:
            print("selftest: expected one circle x/a x/b, found %r" % found)
            return 1
        os.remove(os.path.join(d, "x/b_int.h"))
        with open(os.path.join(d, "x/b_int.h"), "w") as f:
            f.write('#include "x/b.h"\n')
        found = cycles(graph(d))
        if found:
            print("selftest: expected no circle, found %r" % found)
            return 1
    print("selftest: ok")
    return 0


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "core")
    edges = graph(root)
    found = cycles(edges)
    for comp in found:
        print("include circle among %d modules: %s" % (len(comp), " ".join(comp)))
        print("  for example: " + " -> ".join(path_in(comp, edges)))
    if found:
        return 1
    print("no include circle among %d core modules" % len(edges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
