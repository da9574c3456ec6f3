#!/usr/bin/env python3
"""Every fenced example in docs/ says what it is (issue 17 item 11): the line
before its opening fence is

    <!-- example: tested by <path> -->   a test runs it as written; <path>
                                         exists and names this page
    <!-- example: illustrative -->       a shape, an output sample, a
                                         diagram, or a command for another
                                         machine (a registry, a cluster)

so a reader knows which examples are guaranteed to work, and a new example
cannot be added without deciding."""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("EAI_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
MARK = re.compile(r"^\s*<!-- example: (illustrative|tested by ([^ ]+)) -->\s*$")


def main():
    docs = os.path.join(SRC, "docs")
    bad, total, tested = [], 0, 0
    for name in sorted(os.listdir(docs)):
        if not name.endswith(".md"):
            continue
        lines = open(os.path.join(docs, name), encoding="utf-8").read().split("\n")
        inside = False
        for i, line in enumerate(lines):
            if not re.match(r"^\s*```", line):
                continue
            if inside:
                inside = False
                continue
            inside = True
            total += 1
            prev = lines[i - 1] if i > 0 else ""
            m = MARK.match(prev)
            where = "docs/%s:%d" % (name, i + 1)
            if not m:
                bad.append("%s: no <!-- example: ... --> line before the fence" % where)
                continue
            if m.group(2):
                path = os.path.join(SRC, m.group(2))
                if not os.path.isfile(path):
                    bad.append("%s: tested by %s, which does not exist" % (where, m.group(2)))
                elif ("docs/" + name) not in open(path, encoding="utf-8", errors="replace").read():
                    bad.append("%s: %s does not name docs/%s" % (where, m.group(2), name))
                else:
                    tested += 1
        if inside:
            bad.append("docs/%s: a fence is never closed" % name)
    for b in bad:
        print(b)
    print("%d fenced examples, %d tested, %d unmarked or wrong" % (total, tested, len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
