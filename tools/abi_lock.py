#!/usr/bin/env python3
"""Check the plugin ABI headers against include/eai/abi.lock.

The lock records, per released minor (1.0, 1.1, ...), the layout of every
struct of the public headers (sizeof, and each field's offset and size, as
the C compiler lays them out), the value of every enum constant and of the
EAI_ISO_CAP_* / EAI_ISO_LIMIT_* bits.  The same role errcodes.lock plays for
error codes (PostgreSQL's magic block, Redis' versioned type methods): once
a minor is released nothing of it may change, and nothing may grow without
a new minor.

  abi_lock.py --check        (build step and ctest abi_lock) exit 1 when:
      - the frozen headers of a locked minor (include/eai-abi-<M>/eai/)
        do not lay out exactly as the lock's section [M];
      - include/eai/ does not lay out exactly as the last section (a field
        appended, inserted, moved, resized or removed, a struct or enum
        constant added: "needs a new minor");
      - EAI_ABI_MINOR is not the last section's minor;
      - a section does not extend the one before it (a versioned struct,
        one starting with `size_t size`, only gains fields at its end; any
        other struct and every enum constant never change; a new field in
        the tail padding of the previous minor's struct must be listed on a
        `padding` line, since a size test cannot tell it from padding);
      - a versioned struct lacks its EAI_<NAME>_SIZE_<major>_<minor>
        constant for a minor that has it, or the constant does not cover
        exactly that minor's fields (or one exists for a minor without it).
  abi_lock.py --show DIR      print the layout of the header set in DIR
                              (DIR/eai/plugin.h ...): include, include/eai-abi-1.1
  abi_lock.py --add-minor     release the minor include/eai/ declares
                              (EAI_ABI_MINOR = last section + 1): append its
                              section to the lock and freeze the headers into
                              include/eai-abi-<major>.<minor>/eai/.  With
                              --force, redo the last section and its frozen
                              copy (only before that minor was ever merged).

docs/plugins.md, "Adding to the ABI", says when and how.  The layout comes
from the compiler (--cc, default cc): the struct and field names are read
from the headers, a small C program prints offsetof/sizeof of each, which
needs jansson's headers (--cflags).  The lock describes LP64 (x86_64,
aarch64); on another data model the check says so and passes.
Python 3 standard library only.
"""

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

LOCK = "include/eai/abi.lock"
HEADERS = ("plugin.h", "isolation.h", "storage.h", "sinks.h")
SKIP_ENUMS = {"eai_code"}          # error codes: tests/unit/errcodes.lock
CONST_RE = re.compile(r"^\s*#\s*define\s+(EAI_ISO_(?:CAP|LIMIT)_[A-Z0-9_]+)\b", re.M)
SIZE_MACRO_RE = re.compile(r"^\s*#\s*define\s+(EAI_[A-Z0-9_]+_SIZE_(\d+)_(\d+))\b", re.M)


class Problem(Exception):
    pass


# ---------------------------------------------------------------- headers

def strip_comments(text):
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(text, i, open_c, close_c):
    """Index just past the bracket matching the one at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_c:
            depth += 1
        elif text[j] == close_c:
            depth -= 1
            if depth == 0:
                return j + 1
    raise Problem("unbalanced %s%s" % (open_c, close_c))


def drop_attributes(decl):
    while True:
        m = re.search(r"__attribute__\s*\(", decl)
        if not m:
            return decl
        end = matching(decl, m.end() - 1, "(", ")")
        decl = decl[:m.start()] + decl[end:]


def split_top(body, sep):
    parts, depth, cur = [], 0, []
    for c in body:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def field_names(decl, where):
    decl = " ".join(drop_attributes(decl).split())
    if "{" in decl:
        raise Problem("%s: nested struct or union definitions are not supported: %s" % (where, decl))
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
    if m:                                   # function pointer
        return [m.group(1)]
    decl = re.sub(r"\[[^\]]*\]", "", decl)
    parts = split_top(decl, ",")
    names = []
    for p in parts:
        ids = re.findall(r"[A-Za-z_]\w*", p)
        if not ids:
            raise Problem("%s: cannot read a field name in '%s'" % (where, decl))
        names.append(ids[-1])
    return names


def parse_headers(incdir):
    """Structs (name -> [field, ...]), enums (name -> [constant, ...]),
    capability constants and SIZE macros declared in incdir/eai/*.h."""
    structs, enums, consts, macros = {}, {}, [], []
    for h in HEADERS:
        path = os.path.join(incdir, "eai", h)
        with open(path, encoding="utf-8") as f:
            raw = f.read()
        consts += CONST_RE.findall(raw)
        macros += [(m.group(1), int(m.group(2)), int(m.group(3))) for m in SIZE_MACRO_RE.finditer(raw)]
        text = strip_comments(raw)
        text = re.sub(r"^\s*#.*?(?<!\\)$", "", text, flags=re.M | re.S)   # preprocessor lines
        for m in re.finditer(r"\b(struct|enum)\s+(eai_\w+)\s*\{", text):
            kind, name = m.group(1), m.group(2)
            end = matching(text, m.end() - 1, "{", "}")
            body = text[m.end():end - 1]
            where = "%s: %s %s" % (path, kind, name)
            if kind == "struct":
                if name in structs:
                    raise Problem("%s: defined twice" % where)
                fields = []
                for decl in split_top(body, ";"):
                    fields += field_names(decl, where)
                structs[name] = fields
            elif name not in SKIP_ENUMS:
                enums[name] = [re.match(r"\s*(\w+)", e).group(1) for e in split_top(body, ",")]
    return structs, enums, consts, macros


# ---------------------------------------------------------------- layouts

def c_program(structs, enums, consts, macros_wanted):
    out = ["#include <stddef.h>", "#include <stdio.h>"]
    out += ["#include <eai/%s>" % h for h in HEADERS]
    out += ["#define F(S, f) printf(\"  %s %zu %zu\\n\", #f, offsetof(struct S, f), sizeof(((struct S *)0)->f))",
            "int main(void)", "{",
            "    printf(\"abi %d.%d\\n\", (int)EAI_ABI_MAJOR, (int)EAI_ABI_MINOR);",
            "    printf(\"lp64 %d\\n\", (int)(sizeof(void *) == 8 && sizeof(long) == 8 && sizeof(int) == 4));"]
    for s in sorted(structs):
        out.append("    printf(\"struct %s %%zu\\n\", sizeof(struct %s));" % (s, s))
        out += ["    F(%s, %s);" % (s, f) for f in structs[s]]
    for e in sorted(enums):
        out += ["    printf(\"enum %s %s %%lld\\n\", (long long)%s);" % (e, c, c) for c in enums[e]]
    for c in sorted(set(consts)):
        out.append("    printf(\"const %s %%lld\\n\", (long long)(%s));" % (c, c))
    for m in sorted(macros_wanted):
        out += ["#ifdef %s" % m, "    printf(\"macro %s %%zu\\n\", (size_t)(%s));" % (m, m), "#endif"]
    out += ["    return 0;", "}", ""]
    return "\n".join(out)


def layout(incdir, cc, cflags, workdir, macros_wanted=()):
    """The layout of the header set in incdir, as the compiler sees it:
    {"abi": (major, minor), "lp64": bool, "structs": {name: (sizeof, [(field, off, size)])},
     "enums": {(enum, const): value}, "consts": {name: value}, "macros": {name: value},
     "declared_macros": [(name, major, minor)]}."""
    structs, enums, consts, macros = parse_headers(incdir)
    wanted = set(macros_wanted) | {m[0] for m in macros}
    os.makedirs(workdir, exist_ok=True)
    tag = re.sub(r"[^A-Za-z0-9]+", "_", os.path.abspath(incdir)).strip("_")[-60:]
    src = os.path.join(workdir, "abi_layout_%s.c" % tag)
    exe = os.path.join(workdir, "abi_layout_%s" % tag)
    with open(src, "w", encoding="utf-8") as f:
        f.write(c_program(structs, enums, consts, wanted))
    cmd = shlex.split(cc) + ["-std=c11", "-D_GNU_SOURCE", "-w", "-I", incdir] + cflags + [src, "-o", exe]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise Problem("compiling the layout of %s failed (%s):\n%s" % (incdir, " ".join(cmd), p.stderr[-3000:]))
    p = subprocess.run([exe], capture_output=True, text=True)
    if p.returncode != 0:
        raise Problem("running %s failed: %s" % (exe, p.stderr))
    lay = {"structs": {}, "enums": {}, "consts": {}, "macros": {}, "declared_macros": macros}
    cur = None
    for line in p.stdout.splitlines():
        w = line.split()
        if w[0] == "abi":
            lay["abi"] = tuple(int(x) for x in w[1].split("."))
        elif w[0] == "lp64":
            lay["lp64"] = w[1] == "1"
        elif w[0] == "struct":
            cur = lay["structs"][w[1]] = (int(w[2]), [])
        elif w[0] == "enum":
            lay["enums"][(w[1], w[2])] = int(w[3])
        elif w[0] == "const":
            lay["consts"][w[1]] = int(w[2])
        elif w[0] == "macro":
            lay["macros"][w[1]] = int(w[2])
        else:
            cur[1].append((w[0], int(w[1]), int(w[2])))
    return lay


# ---------------------------------------------------------------- the lock

def section_text(minor, lay, padding=()):
    out = ["[%d.%d]" % minor]
    for name in sorted(lay["structs"]):
        size, fields = lay["structs"][name]
        out.append("struct %s %d" % (name, size))
        out += ["    %s %d %d" % f for f in fields]
    for (e, c) in sorted(lay["enums"], key=lambda k: (k[0], lay["enums"][k], k[1])):
        out.append("enum %s %s %d" % (e, c, lay["enums"][(e, c)]))
    for c in sorted(lay["consts"], key=lambda k: (lay["consts"][k], k)):
        out.append("const %s %d" % (c, lay["consts"][c]))
    out += ["padding %s" % p for p in padding]
    return "\n".join(out) + "\n"


HEAD = """\
# The plugin ABI's layout per released minor: GENERATED by tools/abi_lock.py
# from the frozen headers include/eai-abi-<minor>/eai/, and checked at every
# build (and by the ctest abi_lock): the frozen headers must lay out as their
# section, include/eai/ as the last one.  Never edit a section by hand; a
# `padding STRUCT.FIELD` line acknowledges a field placed in the previous
# minor's tail padding (a size test cannot tell it from padding: the host
# also checks the plugin's minor).  To add to the ABI: docs/plugins.md,
# "Adding to the ABI".  LP64 (x86_64, aarch64) values.
#
# struct NAME sizeof / FIELD offset size (declaration order)
# enum ENUM CONSTANT value / const MACRO value
"""


def read_lock(path):
    """[(minor, {"structs", "enums", "consts"}, [padding...])] in file order."""
    sections = []
    cur = None
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            where = "%s:%d" % (path, lineno)
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            w = line.split()
            m = re.match(r"^\[(\d+)\.(\d+)\]$", line)
            if m:
                cur = {"structs": {}, "enums": {}, "consts": {}}
                sections.append(((int(m.group(1)), int(m.group(2))), cur, []))
                last = None
                continue
            if cur is None:
                raise Problem("%s: a line before the first [major.minor] section" % where)
            try:
                if w[0] == "struct" and len(w) == 3:
                    last = cur["structs"][w[1]] = (int(w[2]), [])
                elif w[0] == "enum" and len(w) == 4:
                    cur["enums"][(w[1], w[2])] = int(w[3])
                elif w[0] == "const" and len(w) == 3:
                    cur["consts"][w[1]] = int(w[2])
                elif w[0] == "padding" and len(w) == 2:
                    sections[-1][2].append(w[1])
                elif raw.startswith("    ") and len(w) == 3 and last is not None:
                    last[1].append((w[0], int(w[1]), int(w[2])))
                else:
                    raise ValueError
            except ValueError:
                raise Problem("%s: cannot read '%s'" % (where, line))
    if not sections:
        raise Problem("%s: no section" % path)
    return sections


# ---------------------------------------------------------------- checks

def fmt_minor(m):
    return "%d.%d" % m


def versioned(name, fields):
    """Versioned structs start with size_t size (the descriptor with its
    fixed head): they may grow at their end in a new minor."""
    return name == "eai_plugin_descriptor" or (fields and fields[0][0] == "size" and fields[0][2] == 8)


def size_macro(name, minor):
    return "EAI_%s_SIZE_%d_%d" % (name[len("eai_"):].upper(), minor[0], minor[1])


def diff_layout(have, want, what, hint):
    """Differences between two layouts (have: headers, want: lock), in words."""
    probs = []
    for s in sorted(set(have["structs"]) | set(want["structs"])):
        if s not in want["structs"]:
            probs.append("%s: struct %s is not in %s%s" % (what, s, hint[0], hint[1]))
            continue
        if s not in have["structs"]:
            probs.append("%s: struct %s was removed (it is in %s)" % (what, s, hint[0]))
            continue
        hs, hf = have["structs"][s]
        ws, wf = want["structs"][s]
        wmap = {f[0]: f for f in wf}
        hnames = [f[0] for f in hf]
        for i, f in enumerate(hf):
            if f[0] not in wmap:
                if i >= len(wf) and hnames[:len(wf)] == [x[0] for x in wf]:
                    probs.append("%s: struct %s: field %s appended at offset %d (not in %s)%s"
                                 % (what, s, f[0], f[1], hint[0], hint[1]))
                else:
                    probs.append("%s: struct %s: field %s inserted at offset %d, before fields %s has: "
                                 "fields are only ever appended at a struct's end" % (what, s, f[0], f[1], hint[0]))
            elif f != wmap[f[0]]:
                probs.append("%s: struct %s: field %s is at offset %d size %d, %s has offset %d size %d "
                             "(a released field never moves or changes)" % (what, s, f[0], f[1], f[2], hint[0],
                                                                             wmap[f[0]][1], wmap[f[0]][2]))
        for f in wf:
            if f[0] not in hnames:
                probs.append("%s: struct %s: field %s was removed or renamed (it is in %s)" % (what, s, f[0], hint[0]))
        if hs != ws:
            probs.append("%s: struct %s: sizeof is %d, %s has %d%s" % (what, s, hs, hint[0], ws, hint[1]))
        elif [x[0] for x in hf] != [x[0] for x in wf] and set(hnames) == set(wmap):
            probs.append("%s: struct %s: fields reordered (%s has them as %s)"
                         % (what, s, hint[0], " ".join(x[0] for x in wf)))
    for kind in ("enums", "consts"):
        for k in sorted(set(have[kind]) | set(want[kind])):
            name = " ".join(k) if kind == "enums" else k
            if k not in want[kind]:
                probs.append("%s: %s %s = %d is not in %s%s" % (what, kind[:-1], name, have[kind][k], hint[0], hint[1]))
            elif k not in have[kind]:
                probs.append("%s: %s %s was removed (it is in %s)" % (what, kind[:-1], name, hint[0]))
            elif have[kind][k] != want[kind][k]:
                probs.append("%s: %s %s is %d, %s has %d (a released value never changes)"
                             % (what, kind[:-1], name, have[kind][k], hint[0], want[kind][k]))
    return probs


def check_extends(prev, cur):
    """Section cur (a later minor) extends prev: append only."""
    (pm, p, _), (cm, c, padding) = prev, cur
    probs = []
    for s, (psize, pf) in sorted(p["structs"].items()):
        if s not in c["structs"]:
            probs.append("[%s]: struct %s of %s is missing" % (fmt_minor(cm), s, fmt_minor(pm)))
            continue
        csize, cf = c["structs"][s]
        if cf[:len(pf)] != pf:
            probs.append("[%s]: struct %s does not start with its %s fields (append only)"
                         % (fmt_minor(cm), s, fmt_minor(pm)))
            continue
        added = cf[len(pf):]
        if added and not versioned(s, pf):
            probs.append("[%s]: struct %s has no size field: it can never grow (fields %s)"
                         % (fmt_minor(cm), s, " ".join(f[0] for f in added)))
        if not added and csize != psize:
            probs.append("[%s]: struct %s changed size without new fields" % (fmt_minor(cm), s))
        for f in added:
            if f[1] < psize and "%s.%s" % (s, f[0]) not in padding:
                probs.append("[%s]: struct %s: field %s at offset %d lies in the tail padding of %s's struct "
                             "(sizeof %d): a size test cannot tell it from padding; place it at %d or later, "
                             "or acknowledge it with `padding %s.%s` and have the reader check the minor too"
                             % (fmt_minor(cm), s, f[0], f[1], fmt_minor(pm), psize, psize, s, f[0]))
    for kind in ("enums", "consts"):
        for k, v in sorted(p[kind].items()):
            if c[kind].get(k) != v:
                probs.append("[%s]: %s %s of %s changed or removed" % (fmt_minor(cm), kind[:-1],
                                                                     " ".join(k) if kind == "enums" else k,
                                                                     fmt_minor(pm)))
    return probs


def check_size_macros(sections, lay):
    """Every versioned struct has EAI_<NAME>_SIZE_<minor> for each minor
    that has it, covering exactly that minor's fields."""
    probs = []
    have = lay["macros"]
    declared = {m[0]: (m[1], m[2]) for m in lay["declared_macros"]}
    known = set()
    for minor, sec, _ in sections:
        for s, (size, fields) in sorted(sec["structs"].items()):
            if not versioned(s, fields):
                continue
            name = size_macro(s, minor)
            known.add(name)
            if name not in have:
                probs.append("include/eai: %s is missing (struct %s exists in %s)" % (name, s, fmt_minor(minor)))
                continue
            end = max(off + sz for _, off, sz in fields)
            cur_fields = lay["structs"].get(s, (0, []))[1]
            later = [off for f, off, _ in cur_fields if f not in {x[0] for x in fields}]
            limit = min(later) if later else size
            if not end <= have[name] <= limit:
                probs.append("include/eai: %s is %d; %s's fields of %s end at %d%s"
                             % (name, have[name], s, fmt_minor(minor), end,
                                " and the next minor's start at %d" % limit if later else
                                " (sizeof %d)" % size))
    for name, minor in sorted(declared.items()):
        if name not in known and re.match(r"EAI_[A-Z0-9_]+_SIZE_1_\d+$", name):
            probs.append("include/eai: %s names no struct of ABI %d.%d in the lock" % (name, *minor))
    return probs


def check(a):
    src = lambda rel: os.path.join(a.source, rel)
    sections = read_lock(src(LOCK))
    probs = []
    for i, (minor, _, _) in enumerate(sections):
        want = (sections[0][0][0], i)
        if minor != want:
            probs.append("%s: sections must be %d.0, %d.1, ... in order: found [%s] where [%s] belongs"
                         % (LOCK, want[0], want[0], fmt_minor(minor), fmt_minor(want)))
    if probs:
        return probs
    for prev, cur in zip(sections, sections[1:]):
        probs += check_extends(prev, cur)
    last = sections[-1][0]
    wanted = {size_macro(s, m) for m, sec, _ in sections for s in sec["structs"]}
    cur = layout(src("include"), a.cc, a.cflags, a.workdir, wanted)
    if not cur["lp64"]:
        print("abi_lock: %s describes LP64; this compiler's data model differs: not checked" % LOCK)
        return []
    for minor, sec, _ in sections:
        rel = "include/eai-abi-%s" % fmt_minor(minor)
        if not os.path.isfile(src(os.path.join(rel, "eai", "plugin.h"))):
            probs.append("%s: the frozen headers of ABI %s are missing (%s/eai/*.h)" % (rel, fmt_minor(minor), rel))
            continue
        frozen = layout(src(rel), a.cc, a.cflags, a.workdir)
        if frozen["abi"] != minor:
            probs.append("%s: declares ABI %s, the lock's section says %s" % (rel, fmt_minor(frozen["abi"]),
                                                                            fmt_minor(minor)))
        probs += diff_layout(frozen, sec, rel, ("%s [%s]" % (LOCK, fmt_minor(minor)),
                                                ": the headers of a released minor are frozen; restore them "
                                                "(git checkout %s)" % rel))
    if cur["abi"] != last:
        if cur["abi"][0] == last[0] and cur["abi"][1] == last[1] + 1:
            probs.append("include/eai: EAI_ABI_MINOR is %d, %s ends at %s: release the new minor with "
                         "`python3 tools/abi_lock.py --add-minor` (docs/plugins.md, \"Adding to the ABI\")"
                         % (cur["abi"][1], LOCK, fmt_minor(last)))
        else:
            probs.append("include/eai: declares ABI %s, %s ends at %s (the headers declare the last locked "
                         "minor, or the next one while it is being added)" % (fmt_minor(cur["abi"]), LOCK,
                                                                             fmt_minor(last)))
        return probs
    probs += diff_layout(cur, sections[-1][1], "include/eai", (
        "ABI %s as locked (%s)" % (fmt_minor(last), LOCK),
        ": a released minor never grows; to add to the ABI, bump EAI_ABI_MINOR to %d, append there, "
        "add the EAI_*_SIZE_%d_%d constants and run `python3 tools/abi_lock.py --add-minor` "
        "(docs/plugins.md, \"Adding to the ABI\")" % (last[1] + 1, last[0], last[1] + 1)))
    if not probs:   # the SIZE constants are read against a layout that matches the lock
        probs += check_size_macros(sections, cur)
    return probs


def add_minor(a):
    src = lambda rel: os.path.join(a.source, rel)
    sections = read_lock(src(LOCK))
    cur = layout(src("include"), a.cc, a.cflags, a.workdir)
    last = sections[-1][0]
    if a.force and cur["abi"] == last and len(sections) > 1:
        sections.pop()
        last = sections[-1][0]
    if cur["abi"] != (last[0], last[1] + 1):
        raise Problem("include/eai declares ABI %s; --add-minor adds %d.%d only (bump EAI_ABI_MINOR first%s)"
                      % (fmt_minor(cur["abi"]), last[0], last[1] + 1,
                         "" if a.force else "; --force redoes the last section"))
    minor = cur["abi"]
    new = (minor, {k: cur[k] for k in ("structs", "enums", "consts")}, a.padding or [])
    probs = check_extends(sections[-1], new)
    if probs:
        raise Problem("\n".join(probs))
    frozen = src("include/eai-abi-%s/eai" % fmt_minor(minor))
    os.makedirs(frozen, exist_ok=True)
    for h in HEADERS + ("errcodes.h",):
        shutil.copy(src(os.path.join("include", "eai", h)), os.path.join(frozen, h))
    text = HEAD
    for m, sec, pad in sections + [new]:
        text += "\n" + section_text(m, sec, pad)
    with open(src(LOCK), "w", encoding="utf-8") as f:
        f.write(text)
    print("abi_lock: ABI %s added to %s; headers frozen in include/eai-abi-%s/eai/"
          % (fmt_minor(minor), LOCK, fmt_minor(minor)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--cc", default=os.environ.get("CC") or "cc")
    ap.add_argument("--cflags", default="", help="flags to find jansson's headers (one string)")
    ap.add_argument("--workdir", help="where the layout programs are built (default: a temporary dir)")
    ap.add_argument("--stamp", help="with --check: touch this file on success")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--padding", action="append", metavar="STRUCT.FIELD",
                    help="with --add-minor: acknowledge a new field in the previous minor's tail padding")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true")
    g.add_argument("--show", metavar="DIR")
    g.add_argument("--add-minor", action="store_true")
    a = ap.parse_args()
    a.cflags = shlex.split(a.cflags)
    tmp = None
    if not a.workdir:
        tmp = a.workdir = tempfile.mkdtemp(prefix="abi-lock-")
    try:
        if a.show:
            lay = layout(a.show, a.cc, a.cflags, a.workdir)
            sys.stdout.write(section_text(lay["abi"], lay))
            return 0
        if a.add_minor:
            add_minor(a)
            return 0
        probs = check(a)
    except (Problem, OSError, UnicodeDecodeError) as e:
        print("abi_lock: %s" % e, file=sys.stderr)
        return 1
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    for p in probs:
        print("abi_lock: %s" % p, file=sys.stderr)
    if probs:
        print("abi_lock: FAILED: the plugin ABI headers differ from %s (%d problem%s above)"
              % (LOCK, len(probs), "" if len(probs) == 1 else "s"), file=sys.stderr)
        return 1
    sections = read_lock(os.path.join(a.source, LOCK))
    print("abi_lock: include/eai lays out as ABI %s in %s; the frozen headers of %s are intact"
          % (fmt_minor(sections[-1][0]), LOCK, ", ".join(fmt_minor(m) for m, _, _ in sections)))
    if a.stamp:
        with open(a.stamp, "w", encoding="utf-8") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
