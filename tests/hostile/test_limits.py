#!/usr/bin/env python3
"""Every backend limit checked at admission (issue 19 item 1).

A real eaid with the gvisor backend (real runsc, python:3.11-slim).  The
backend publishes its limits in its probe (ABI 1.1: max_path_bytes 4095,
max_name_bytes 255); admission applies them, so each limit is walked on
both sides of its edge through HTTP: the side within runs to `succeeded`
(the program finds its file), the side past it is `422` with a JSON pointer
at admission, never `202` then `sandbox_failed`."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eaid_env import Env, check, run_cases  # noqa: E402

IMAGE = "python:3.11-slim"
PROFILE = "gvisor-small"
ENV = None


def path_of(total, seg=200):
    """A path under /tmp/ of exactly `total` bytes, segments <= seg."""
    p = "/tmp"
    while len(p) < total:
        left = total - len(p) - 1
        n = min(seg, left)
        if left - n == 1:  # never leave room for an empty last segment
            n -= 1
        p += "/" + "a" * n
    assert len(p.encode()) == total, (len(p), total)
    return p


def body(path, collect=None):
    prog = ("import os,sys; p=sys.argv[1]; "
            "sys.exit(0 if open(p).read()=='edge' else 3)")
    b = {"profile": PROFILE, "image": IMAGE, "command": ["python3", "-c", prog, path],
         "files": [{"path": path, "content": "edge"}]}
    if collect is not None:
        b["collect"] = collect
    return b


def refused(b, pointer):
    st, r = ENV.api("POST", "/v1/sandbox/executions", b)
    check(st == 422, "want 422, got %s %s" % (st, r))
    err = r.get("error") or {}
    check(err.get("code") in ("validation_failed", "limit_exceeded"), "code %r" % err.get("code"))
    ptrs = [d.get("path") for d in err.get("details") or []]
    check(pointer in ptrs, "pointer %s not in %s" % (pointer, ptrs))
    i18n = err.get("message_i18n") or {}
    check(i18n.get("en") and i18n.get("fr") and err.get("request_id"), "both languages, request id: %s" % r)


def runs(b):
    st, r = ENV.api("POST", "/v1/sandbox/executions", b)
    check(st == 202, "want 202, got %s %s" % (st, r))
    done = ENV.wait_terminal(r["id"])
    check(done["status"] == "succeeded", "ran to %s (exit %s, error %s, stderr %r)" % (
        done["status"], done.get("exit_code"), done.get("error"), (done.get("stderr") or "")[:300]))


def case_segment_255_runs():
    runs(body("/tmp/" + "n" * 255))


def case_segment_256_refused():
    refused(body("/tmp/" + "n" * 256), "/files/0/path")


def case_segment_300_refused():
    refused(body("/tmp/d/" + "n" * 300), "/files/0/path")


def case_utf8_127_e_runs():
    runs(body("/tmp/" + "\u00e9" * 127))  # 254 bytes


def case_utf8_128_e_refused():
    refused(body("/tmp/" + "\u00e9" * 128), "/files/0/path")  # 256 bytes


def case_path_4095_runs():
    runs(body(path_of(4095)))


def case_path_4096_refused():
    refused(body(path_of(4096)), "/files/0/path")


def case_path_5000_refused():
    refused(body(path_of(5000)), "/files/0/path")


def case_collect_segment_edges():
    refused(body("/tmp/in", collect=["/tmp/" + "c" * 256]), "/collect/0")
    refused(body("/tmp/in", collect=["/tmp/ok", path_of(4096)]), "/collect/1")
    runs(body("/tmp/in", collect=["/tmp/" + "c" * 255, path_of(4095)]))


def case_utf8_path_bytes_not_chars():
    # 2500 x "é" in segments of 100: 2529 characters, 5029 bytes:
    # the byte length is what counts, not characters
    p = "/tmp/" + "/".join(["\u00e9" * 100] * 25)
    check(len(p.encode()) > 4096 and len(p) < 4096, "fixture")
    refused(body(p), "/files/0/path")


def case_second_file_pointer():
    b = body("/tmp/in")
    b["files"].append({"path": "/tmp/x/" + "z" * 256, "content": "y"})
    refused(b, "/files/1/path")


def main():
    global ENV
    ENV = Env()
    try:
        ENV.make_key()
        ENV.start(ready_path="/readyz", timeout=120)
        run_cases([(n, f) for n, f in sorted(globals().items()) if n.startswith("case_")])
    finally:
        ENV.stop()


if __name__ == "__main__":
    main()
