#!/usr/bin/env python3
"""tools/abi_lock.py --check catches each way the plugin ABI can drift;
--add-minor releases a new minor the way docs/plugins.md says.

Works on a copy of include/ in a temporary tree; the real tree is only read.
Usage: test_abi_lock.py SOURCE_DIR [CC [CFLAGS]]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC = os.path.abspath(sys.argv[1])
CC = sys.argv[2] if len(sys.argv) > 2 else "cc"
CFLAGS = sys.argv[3] if len(sys.argv) > 3 else ""
TOOL = os.path.join(SRC, "tools", "abi_lock.py")
failures = []


def tree():
    d = tempfile.mkdtemp(prefix="abi-lock-")
    shutil.copytree(os.path.join(SRC, "include"), os.path.join(d, "include"))
    return d


def run(d, *args):
    p = subprocess.run([sys.executable, TOOL, "--source", d, "--cc", CC, "--cflags=" + CFLAGS] + list(args),
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def edit(d, rel, old, new, count=1):
    path = os.path.join(d, rel)
    with open(path, encoding="utf-8") as f:
        s = f.read()
    if old not in s:
        raise SystemExit("test setup: %r not in %s" % (old, rel))
    with open(path, "w", encoding="utf-8") as f:
        f.write(s.replace(old, new, count))


def expect(name, d, want_ok, needles=(), args=("--check",)):
    rc, out = run(d, *args)
    ok = (rc == 0) == want_ok and all(n in out for n in needles)
    print("%s %s (rc %d)" % ("ok  " if ok else "FAIL", name, rc))
    if not ok:
        failures.append(name)
        print(out)
    return ok


def case(name, want_ok, needles, *edits, args=("--check",), keep=False):
    d = tree()
    for e in edits:
        edit(d, *e)
    expect(name, d, want_ok, needles, args)
    if keep:
        return d
    shutil.rmtree(d)
    return None


PLUGIN = "include/eai/plugin.h"
ISO = "include/eai/isolation.h"
STORAGE = "include/eai/storage.h"
# the last op of struct eai_host (1.4: metric_update)
LAST_HOST_OP = "    void (*metric_update)(const struct eai_host *h, struct eai_metric *m, const char *const *values, double v);\n"
ABI_MINOR = re.search(r"#define EAI_ABI_MINOR (\d+)", open(os.path.join(SRC, PLUGIN)).read()).group(1)
NEXT = int(ABI_MINOR) + 1

# the tree as committed passes
case("the committed headers match the lock", True, ["lays out as ABI 1.%s" % ABI_MINOR])

# a field appended to a released struct without a new minor
case("a field appended to eai_host is refused", False,
     ["struct eai_host: field extra appended at offset", "a released minor never grows",
      "bump EAI_ABI_MINOR to %d" % NEXT, "--add-minor"],
     (PLUGIN, LAST_HOST_OP, LAST_HOST_OP + "    void (*extra)(void);\n"))

# a field that fits the padding after max_concurrent (its tail padding until
# 1.4 appended netns_path): sizeof does not change, the field list does
case("a field in a struct's padding is refused", False,
     ["struct eai_iso_session: field oops inserted at offset 84", "only ever appended"],
     (ISO, "    int max_concurrent; ", "    int max_concurrent; int oops; "))

# a field inserted before released ones: every later one moves
case("a field inserted in the middle is refused", False,
     ["struct eai_storage_ops: field inserted inserted at offset 8", "only ever appended",
      "field migrate is at offset 16 size 8"],
     (STORAGE, "    size_t size;\n", "    size_t size;\n    void *inserted;\n"))

# a field renamed (same layout, another name)
case("a released field renamed is refused", False,
     ["struct eai_iso_job: field dns_server was removed or renamed"],
     (ISO, "    const char *dns_server;\n", "    const char *dns_resolver;\n"))

# a struct without a size field can never grow
case("a new struct not in the lock is refused", False, ["struct eai_new_thing is not in ABI 1.%s" % ABI_MINOR],
     (ISO, "enum eai_iso_stream {", "struct eai_new_thing { size_t size; };\nenum eai_iso_stream {"))

# an enum constant or a capability bit added or renumbered
case("an enum constant appended is refused", False, ["enum eai_iso_outcome EAI_OUT_LATE = 5 is not in ABI"],
     (ISO, "    EAI_OUT_ERROR,", "    EAI_OUT_ERROR,\n    EAI_OUT_LATE,"))
case("a capability bit added is refused", False, ["const EAI_ISO_CAP_TELEPATHY = 128 is not in ABI"],
     (ISO, "#define EAI_ISO_CAP_EGRESS_POOL", "#define EAI_ISO_CAP_TELEPATHY (1u << 7)\n#define EAI_ISO_CAP_EGRESS_POOL"))

# a size constant that lies about its minor
case("a SIZE constant not covering its minor is refused", False,
     ["EAI_ISO_RESULT_SIZE_1_1 is 84; eai_iso_result's fields of 1.1 end at 88"],
     (ISO, "#define EAI_ISO_RESULT_SIZE_1_1 (offsetof(struct eai_iso_result, files_movable) + sizeof(int))",
      "#define EAI_ISO_RESULT_SIZE_1_1 EAI_ISO_RESULT_SIZE_1_0"))
case("a SIZE constant covering the next minor is refused", False,
     ["EAI_ISO_JOB_SIZE_1_1 is 208; eai_iso_job's fields of 1.1 end at 192 and the next minor's start at 192"],
     (ISO, "#define EAI_ISO_JOB_SIZE_1_1 EAI_ISO_JOB_SIZE_1_0",
      "#define EAI_ISO_JOB_SIZE_1_1 (offsetof(struct eai_iso_job, dns_server) + sizeof(const char *))"))
case("a missing SIZE constant is refused", False, ["EAI_STORAGE_OPS_SIZE_1_2 is missing"],
     (STORAGE, "#define EAI_STORAGE_OPS_SIZE_1_2 ", "#define EAI_STORAGE_OPS_SIZE_OLD_1_2 "))
case("a SIZE constant for a minor without the struct is refused", False,
     ["EAI_ISO_SESSION_SIZE_1_1 names no struct of ABI 1.1"],
     (ISO, "#define EAI_ISO_SESSION_SIZE_1_2 ", "#define EAI_ISO_SESSION_SIZE_1_1 sizeof(struct eai_iso_session)\n"
      "#define EAI_ISO_SESSION_SIZE_1_2 "))

# the frozen headers of a released minor are never edited
case("an edited frozen 1.1 header is refused", False,
     ["include/eai-abi-1.1: struct eai_iso_probe: field x appended", "restore them"],
     ("include/eai-abi-1.1/eai/isolation.h", "    int64_t limit_flags;", "    int64_t limit_flags;\n    int x;"))
case("an edited frozen 1.0 header is refused", False,
     ["include/eai-abi-1.0: struct eai_host: field base is at offset"],
     ("include/eai-abi-1.0/eai/plugin.h", "    unsigned abi_major, abi_minor;", "    unsigned abi_major, abi_minor, pad[2];"))

# the minor declared and the lock agree
case("a new minor without its lock section is refused", False,
     ["EAI_ABI_MINOR is %d" % NEXT, "ends at 1.%s" % ABI_MINOR, "--add-minor"],
     (PLUGIN, "#define EAI_ABI_MINOR %s" % ABI_MINOR, "#define EAI_ABI_MINOR %d" % NEXT))

# releasing the next minor, as docs/plugins.md says: bump, append, constants, --add-minor
sizes = re.findall(r"#define (EAI_\w+_SIZE_)1_%s\b" % ABI_MINOR,
                   "".join(open(os.path.join(SRC, "include", "eai", h)).read()
                           for h in ("plugin.h", "isolation.h", "storage.h", "sinks.h")))
consts = "".join("#define %s1_%d %s1_%s\n" % (s, NEXT, s, ABI_MINOR) for s in sizes if s != "EAI_HOST_SIZE_")
d = case("--add-minor refuses an undeclared minor", False, ["--add-minor adds 1.%d only" % NEXT],
         args=("--add-minor",), keep=True)
edit(d, PLUGIN, "#define EAI_ABI_MINOR %s" % ABI_MINOR, "#define EAI_ABI_MINOR %d" % NEXT)
edit(d, PLUGIN, LAST_HOST_OP, LAST_HOST_OP + "    void (*op_of_next)(const struct eai_host *h);\n")
edit(d, PLUGIN, "#ifdef __cplusplus\n}\n#endif\n#endif",
     "#define EAI_HOST_SIZE_1_%d (offsetof(struct eai_host, op_of_next) + sizeof(void (*)(void)))\n%s"
     "#ifdef __cplusplus\n}\n#endif\n#endif" % (NEXT, consts))
expect("--add-minor releases the next minor", d, True, ["ABI 1.%d added" % NEXT], ("--add-minor",))
ok = os.path.isfile(os.path.join(d, "include", "eai-abi-1.%d" % NEXT, "eai", "plugin.h"))
print("%s --add-minor froze the headers in include/eai-abi-1.%d" % ("ok  " if ok else "FAIL", NEXT))
if not ok:
    failures.append("frozen copy")
expect("the released minor then checks clean", d, True, ["lays out as ABI 1.%d" % NEXT])
edit(d, PLUGIN, "    void (*op_of_next)(const struct eai_host *h);\n",
     "    void (*op_of_next)(const struct eai_host *h);\n    int late;\n")
expect("and a field appended after that release is refused", d, False,
       ["field late appended", "bump EAI_ABI_MINOR to %d" % (NEXT + 1)])
shutil.rmtree(d)

print("%d failed" % len(failures))
sys.exit(1 if failures else 0)
