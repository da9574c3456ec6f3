#!/usr/bin/env python3
"""Generate every error-code artefact from include/eai/errcodes.txt.

The model is PostgreSQL's src/backend/utils/errcodes.txt with
generate-errcodes.pl: one list, several generated views of it.

  gen_errcodes.py --table OUT.c   core table + Markdown page as C (build step)
  gen_errcodes.py --write         rewrite the committed outputs:
                                  include/eai/errcodes.h and docs/errors.md
  gen_errcodes.py --check         exit 1 when a committed output differs from
                                  what the list generates, or when the list
                                  does not start with tests/unit/errcodes.lock
                                  (a released code renumbered, renamed,
                                  removed or given another status)

Python 3 standard library only.  --source DIR names the source tree (default:
the parent of this script's folder).
"""

import argparse
import difflib
import os
import re
import sys

LIST = "include/eai/errcodes.txt"
HEADER = "include/eai/errcodes.h"
DOCS = "docs/errors.md"
LOCK = "tests/unit/errcodes.lock"

ENUM_RE = re.compile(r"^EAI_(OK|E_[A-Z0-9_]+)$")
CODE_RE = re.compile(r"^[a-z][a-z0-9_]*$")
BAD_TEXT_RE = re.compile(r'[|"\\\x00-\x1f\x7f]')


class ListError(Exception):
    pass


def parse(path):
    """Entries of the list, in file order, each checked."""
    codes = []
    enums, names = set(), set()
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            where = "%s:%d" % (path, lineno)
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            head = line.split(None, 5)
            if len(head) != 6:
                raise ListError("%s: expected 'value ENUM code status retryable English | French'" % where)
            value, enum, name, status, retry, texts = head
            parts = texts.split(" | ")
            if len(parts) != 2:
                raise ListError("%s: the texts must be 'English | French' (exactly one ' | ')" % where)
            en, fr = parts[0].strip(), parts[1].strip()
            if not value.isdigit() or int(value) != len(codes):
                raise ListError("%s: value %s out of order: expected %d (values are 0, 1, 2, ... "
                                "in file order; append only)" % (where, value, len(codes)))
            if not ENUM_RE.match(enum):
                raise ListError("%s: enum name %r must match EAI_OK or EAI_E_[A-Z0-9_]+" % (where, enum))
            if not CODE_RE.match(name):
                raise ListError("%s: code string %r must match [a-z][a-z0-9_]*" % (where, name))
            if enum in enums or name in names:
                raise ListError("%s: %s / %s is already used" % (where, enum, name))
            if (len(codes) == 0) != (enum == "EAI_OK"):
                raise ListError("%s: EAI_OK must be the first line (value 0) and only there" % where)
            if not status.isdigit() or not (int(status) == 200 if enum == "EAI_OK" else 400 <= int(status) <= 599):
                raise ListError("%s: HTTP status %s must be 400..599 (200 for EAI_OK)" % (where, status))
            if retry not in ("yes", "no"):
                raise ListError("%s: retryable must be yes or no, not %r" % (where, retry))
            for lang, text in (("English", en), ("French", fr)):
                if not text:
                    raise ListError("%s: %s text is empty" % (where, lang))
                if BAD_TEXT_RE.search(text):
                    raise ListError("%s: %s text has '|', '\"', '\\' or a control character" % (where, lang))
            if enum != "EAI_OK" and en == fr:
                raise ListError("%s: the French text is a copy of the English one" % where)
            enums.add(enum)
            names.add(name)
            codes.append({"value": len(codes), "enum": enum, "name": name, "status": int(status),
                          "retryable": retry == "yes", "en": en, "fr": fr})
    if not codes:
        raise ListError("%s: no codes" % path)
    return codes


def check_lock(codes, path):
    """Problems with the released codes: each lock entry must be the list's entry of the same rank."""
    problems = []
    rank = 0
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            want = line.split()
            if rank >= len(codes):
                problems.append("%s:%d: released code %s was removed" % (path, lineno, " ".join(want)))
            else:
                c = codes[rank]
                got = [str(c["value"]), c["enum"], c["name"], str(c["status"])]
                if got != want:
                    problems.append("%s:%d: released code '%s' became '%s' in %s (codes are append only)"
                                    % (path, lineno, " ".join(want), " ".join(got), LIST))
            rank += 1
    return problems


def gen_header(codes):
    out = ["/* GENERATED by tools/gen_errcodes.py from include/eai/errcodes.txt: do not edit.",
           " * Regenerate with `python3 tools/gen_errcodes.py --write`; the ctest",
           " * errcodes_drift fails when this file differs from the list. */",
           "#ifndef EAI_ERRCODES_H",
           "#define EAI_ERRCODES_H",
           "",
           "/* Stable error codes of the public API (docs/errors.md).  Append only, never",
           " * reuse or renumber: plugins compiled against older headers keep the numbers. */",
           "enum eai_code {"]
    for c in codes:
        out.append("    %s = %d, /* %s (%d) */" % (c["enum"], c["value"], c["name"], c["status"]))
    out += ["    EAI_CODE_MAX = %d" % len(codes), "};", "", "#endif", ""]
    return "\n".join(out)


def gen_markdown(codes):
    out = ["# Error codes",
           "",
           "Generated by `tools/gen_errcodes.py` from the one list `include/eai/errcodes.txt`",
           "(do not edit this page; `eaid errors --markdown` prints it too).",
           "Every non-2xx answer carries the envelope of docs/api.md with one of these codes;",
           "`message` is in the negotiated language and `message_i18n` holds both.",
           "",
           "To add a code: append one line to `include/eai/errcodes.txt` with the next value,",
           "run `python3 tools/gen_errcodes.py --write` (rewrites `include/eai/errcodes.h` and",
           "this page), append the line's first four fields to `tests/unit/errcodes.lock`, and",
           "commit the four files.  Codes are append only: the ctest `errcodes_drift` fails when",
           "a released code is renumbered, renamed, removed or changes status, or when a",
           "generated file is stale.",
           "",
           "| code | HTTP status | retryable | English | Français |",
           "|---|---|---|---|---|"]
    for c in codes[1:]:
        out.append("| `%s` | %d | %s | %s | %s |" % (c["name"], c["status"], "yes" if c["retryable"] else "no",
                                                     c["en"], c["fr"]))
    return "\n".join(out) + "\n"


def c_string(s):
    """A C string literal; '?' escaped (no trigraphs in -std=c11)."""
    esc = s.replace("\\", "\\\\").replace('"', '\\"').replace("?", "\\?").replace("\n", "\\n")
    return '"' + esc + '"'


def gen_table(codes):
    out = ["/* GENERATED by tools/gen_errcodes.py from include/eai/errcodes.txt: do not edit. */",
           "#include \"base/errors.h\"",
           "",
           "_Static_assert(EAI_CODE_MAX == %d, \"include/eai/errcodes.h is stale: "
           "run python3 tools/gen_errcodes.py --write\");" % len(codes)]
    for c in codes:
        out.append("_Static_assert(%s == %d, \"include/eai/errcodes.h is stale\");" % (c["enum"], c["value"]))
    out += ["", "const struct eai_code_info eai_code_table[EAI_CODE_MAX] = {"]
    for c in codes:
        out.append("    [%s] = {%s, %s, %d, %d, %s, %s}," % (c["enum"], c["enum"], c_string(c["name"]), c["status"],
                                                          1 if c["retryable"] else 0, c_string(c["en"]),
                                                          c_string(c["fr"])))
    out += ["};", "", "const char eai_errors_markdown[] ="]
    for line in gen_markdown(codes).splitlines(True):
        out.append("    " + c_string(line))
    out[-1] += ";"
    out.append("")
    return "\n".join(out)


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--table", metavar="OUT.c")
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    a = ap.parse_args()
    src = lambda rel: os.path.join(a.source, rel)
    try:
        codes = parse(src(LIST))
    except (ListError, OSError, UnicodeDecodeError) as e:
        print("gen_errcodes: %s" % e, file=sys.stderr)
        return 1
    committed = {HEADER: gen_header(codes), DOCS: gen_markdown(codes)}
    if a.table:
        write_if_changed(a.table, gen_table(codes))
        return 0
    if a.write:
        for rel, text in committed.items():
            write_if_changed(src(rel), text)
        return 0
    problems = check_lock(codes, src(LOCK))
    for rel, text in committed.items():
        try:
            with open(src(rel), encoding="utf-8") as f:
                have = f.read()
        except OSError as e:
            problems.append("%s: %s" % (rel, e))
            continue
        if have != text:
            diff = "".join(difflib.unified_diff(have.splitlines(True), text.splitlines(True),
                                                "committed " + rel, "generated " + rel))
            problems.append("%s differs from what %s generates (run python3 tools/gen_errcodes.py --write):\n%s"
                            % (rel, LIST, diff))
    for p in problems:
        print("gen_errcodes: %s" % p, file=sys.stderr)
    if not problems:
        print("gen_errcodes: %d codes; %s and %s match %s; released codes intact"
              % (len(codes), HEADER, DOCS, LIST))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
