#!/usr/bin/env python3
"""Docs that run (issue 17 item 11): every fenced block in docs/*.md says
what it is in its info string, and what can be run is run here.

Classes (the second word of the info string, or the only word):
  run           executed by this test against a real `eaid serve` (real runsc):
                `sh` blocks with bash -euo pipefail (EAI_URL, EAI_API_KEY and the
                build's eaid and eai on PATH, in one working directory per page);
                a `# => TEXT` comment on a line of the block means TEXT must be in
                the block's standard output. A block of another language with
                `file=NAME` is written to NAME in that directory first, for the
                blocks after it.
  config        a configuration file: `eaid config check` must accept it.
  refused       a configuration file that `eaid config check` must refuse with
                the first line of the `output` block that follows it.
  output        what a command prints, a diagram, a listing: nothing to run.
  illustrative  a command or code that is not run here (a cluster, an install,
                a long build: the fence names why in a comment or the text).
A block with no class fails the test, so a new example cannot slip in unrun.
Labels gvisor;docs.  Last line: `N passed, M failed`.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hostile"))
import eaid_env  # noqa: E402

DOCS = os.path.join(eaid_env.SRC, "docs")
CLASSES = ("run", "config", "refused", "output", "illustrative")
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)

passed = failed = 0


def check(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok   " + what, flush=True)
    else:
        failed += 1
        print("FAIL " + what + ((": " + detail[-3000:]) if detail else ""), flush=True)


def blocks():
    """(page, line, lang, cls, attrs, text) for every fenced block of docs/*.md."""
    out = []
    for name in sorted(os.listdir(DOCS)):
        if not name.endswith(".md"):
            continue
        text = open(os.path.join(DOCS, name), encoding="utf-8").read()
        for m in FENCE.finditer(text):
            words = m.group(1).split()
            lang = words[0] if words and words[0] not in CLASSES else ""
            rest = words[1:] if lang else words
            cls = next((w for w in rest if w in CLASSES), None)
            attrs = dict(w.split("=", 1) for w in rest if "=" in w)
            out.append((name, text[:m.start()].count("\n") + 1, lang, cls, attrs, m.group(2)))
    return out


def config_check(env, body, tmp):
    path = os.path.join(tmp, "eaid.yaml")
    with open(path, "w") as f:
        f.write(body)
    e = env.base_env()
    e["EAI_PLUGIN_DIR"] = os.path.join(eaid_env.BUILD, "plugins")
    r = subprocess.run([eaid_env.EAID, "--config", path, "config", "check"], env=e, capture_output=True,
                       text=True, timeout=60)
    # the docs name /etc/eai/eaid.yaml and the packaged plugin dir
    text = (r.stdout + r.stderr).replace(path, "/etc/eai/eaid.yaml").replace(e["EAI_PLUGIN_DIR"],
                                                                                "/usr/lib/eai/plugins")
    return r.returncode, text


def run_sh(env, body, cwd):
    e = env.base_env()
    e["EAI_URL"] = env.url
    e["EAI_API_KEY"] = env.key
    e["PATH"] = eaid_env.BUILD + os.pathsep + e.get("PATH", "")
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=cwd, env=e, capture_output=True, text=True,
                       timeout=240)
    return r.returncode, r.stdout, r.stderr


def main():
    eaid_env.ensure_image()
    all_blocks = blocks()
    unclassified = ["%s:%d" % (p, ln) for p, ln, _, cls, _, _ in all_blocks if cls is None]
    check(not unclassified, "every fenced block in docs/ says what it is (%d blocks)" % len(all_blocks),
          "no class: " + ", ".join(unclassified))
    env = eaid_env.Env()
    tmp = tempfile.mkdtemp(prefix="eai-docs-", dir=env.tmp)
    try:
        env.make_key("docs")
        env.start()
        workdirs = {}
        for i, (page, line, lang, cls, attrs, body) in enumerate(all_blocks):
            where = "%s:%d" % (page, line)
            if cls == "config":
                rc, text = config_check(env, body, tmp)
                check(rc == 0, "%s: eaid config check accepts the example" % where, text)
            elif cls == "refused":
                nxt = all_blocks[i + 1] if i + 1 < len(all_blocks) else None
                want = nxt[5].strip() if nxt and nxt[0] == page and nxt[3] == "output" else ""
                rc, text = config_check(env, body, tmp)
                norm = " ".join(text.split())
                check(want and rc == 2 and " ".join(want.split()) in norm,
                      "%s: eaid config check refuses the example with the message shown" % where,
                      "rc=%s, wanted %r in %r" % (rc, want, text))
            elif cls == "run":
                cwd = workdirs.setdefault(page, tempfile.mkdtemp(prefix=page[:-3] + "-", dir=tmp))
                if lang != "sh":
                    check("file" in attrs, "%s: a run block that is not sh names its file=" % where)
                    if "file" in attrs:
                        with open(os.path.join(cwd, attrs["file"]), "w") as f:
                            f.write(body)
                    continue
                rc, out, err = run_sh(env, body, cwd)
                wants = re.findall(r"#\s*=>\s*(.+?)\s*$", body, re.M)
                missing = [w for w in wants if w not in out]
                check(rc == 0 and not missing, "%s: runs as written%s" % (where, (" (prints %s)" % ", ".join(
                      wants)) if wants else ""), "rc=%s missing=%s\nstdout:\n%s\nstderr:\n%s" % (rc, missing, out, err))
    finally:
        env.stop(clean=failed == 0)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
