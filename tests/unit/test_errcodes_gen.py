#!/usr/bin/env python3
"""tools/gen_errcodes.py --check catches each kind of drift; --write refuses a bad list.

Works on a copy of the four files in a temporary tree; the real tree is only read.
Usage: test_errcodes_gen.py SOURCE_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.path.abspath(sys.argv[1])
GEN = os.path.join(SRC, "tools", "gen_errcodes.py")
FILES = ["include/eai/errcodes.txt", "include/eai/errcodes.h", "docs/errors.md", "tests/unit/errcodes.lock"]
failures = []


def tree():
    d = tempfile.mkdtemp(prefix="errcodes-")
    for rel in FILES:
        os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
        shutil.copy(os.path.join(SRC, rel), os.path.join(d, rel))
    return d


def run(d, *args):
    p = subprocess.run([sys.executable, GEN, "--source", d] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def edit(d, rel, fn):
    path = os.path.join(d, rel)
    with open(path, encoding="utf-8") as f:
        s = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(fn(s))


def expect(name, d, want_rc, args=("--check",), needle=None):
    rc, out = run(d, *args)
    ok = (rc == 0) == (want_rc == 0) and (needle is None or needle in out)
    print("%s %s (rc %d)" % ("ok  " if ok else "FAIL", name, rc))
    if not ok:
        failures.append(name)
        print(out)
    shutil.rmtree(d)


def lines_of(s):
    return s.splitlines(True)


def replace_line(s, prefix, new):
    out = [new + "\n" if l.startswith(prefix) else l for l in lines_of(s)]
    assert out != lines_of(s), prefix
    return "".join(out)


LIST = "include/eai/errcodes.txt"
# the list grows (append only): the cases below work from its last value
with open(os.path.join(SRC, LIST)) as f:
    LAST = max(int(l.split()[0]) for l in f if l.split() and l.split()[0].isdigit())
NEXT = LAST + 1

expect("the committed tree is clean", tree(), 0)

d = tree()
edit(d, "docs/errors.md", lambda s: s.replace("Exécution introuvable", "Execution introuvable"))
expect("a hand edit of docs/errors.md is caught", d, 1, needle="docs/errors.md differs")

d = tree()
edit(d, "include/eai/errcodes.h", lambda s: s.replace("EAI_E_CONFLICT = 22", "EAI_E_CONFLICT = 23"))
expect("a hand edit of include/eai/errcodes.h is caught", d, 1, needle="errcodes.h differs")

d = tree()
edit(d, LIST, lambda s: s.replace("Execution not found", "No such execution"))
expect("a list edit without regeneration is caught", d, 1, needle="differs")


def insert_middle(s):
    """A new code inserted as value 9, every later value shifted: a renumbering."""
    out = []
    for l in lines_of(s):
        f = l.split(None, 1)
        if f and f[0].isdigit() and int(f[0]) >= 9:
            if int(f[0]) == 9:
                out.append("9   EAI_E_GONE  gone  410  no   Gone | Disparu\n")
            l = "%d %s" % (int(f[0]) + 1, f[1])
        out.append(l)
    return "".join(out)


d = tree()
edit(d, LIST, insert_middle)
rc, out = run(d, "--write")
assert rc == 0, out
expect("a renumbering is caught even after --write", d, 1, needle="append only")

d = tree()
edit(d, LIST, lambda s: replace_line(s, "9   EAI_E_NOT_FOUND",
                                     "9   EAI_E_NOT_FOUND  not_found  410  no   Execution not found | Exécution introuvable"))
run(d, "--write")
expect("a changed status of a released code is caught", d, 1, needle="append only")

d = tree()
edit(d, LIST, lambda s: "".join(l for l in lines_of(s) if not l.startswith("%d " % LAST)))
run(d, "--write")
expect("a removed code is caught", d, 1, needle="was removed")

d = tree()
edit(d, LIST, lambda s: s + "%d  EAI_E_GONE  gone  410  no   Gone | Disparu\n" % NEXT)
rc, out = run(d, "--write")
assert rc == 0, out
with open(os.path.join(d, "include/eai/errcodes.h")) as f:
    assert "EAI_E_GONE = %d," % NEXT in f.read()
with open(os.path.join(d, "docs/errors.md")) as f:
    assert "| `gone` | 410 | no | Gone | Disparu |" in f.read()
expect("an appended code regenerates cleanly", d, 0)

for name, line, needle in [
    ("a value out of order", "%d  EAI_E_GONE" % (NEXT + 1) + "  gone  410  no   Gone | Disparu", "out of order"),
    ("a duplicate code string", "%d  EAI_E_GONE  conflict  410  no   Gone | Disparu", "already used"),
    ("a missing French text", "%d  EAI_E_GONE  gone  410  no   Gone", "English | French"),
    ("a copied French text", "%d  EAI_E_GONE  gone  410  no   Gone | Gone", "copy"),
    ("a bad status", "%d  EAI_E_GONE  gone  200  no   Gone | Disparu", "status"),
    ("a bad retryable flag", "%d  EAI_E_GONE  gone  410  maybe   Gone | Disparu", "retryable"),
    ("a quote in a text", '%d  EAI_E_GONE  gone  410  no   Gone "now" | Disparu', "text has"),
    ("a bad enum name", "%d  GONE  gone  410  no   Gone | Disparu", "enum name"),
]:
    d = tree()
    edit(d, LIST, lambda s, line=line: s + (line % NEXT if "%d" in line else line) + "\n")
    expect("--write refuses " + name, d, 1, args=("--write",), needle=needle)

sys.exit(1 if failures else 0)
