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
from eaid_env import Env, check, ensure_image, run_cases  # noqa: E402

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


# ---- every kind of published limit, with the eai-isolation-limits.so double
# (max_path_bytes 100, max_name_bytes 20, max_input_bytes 1000, max_files 3,
# max_env_name_bytes 16, portable env names: what k8s publishes, smaller)
LIM = None


def lim_body(**kw):
    b = {"profile": "lim", "image": "any:1", "command": ["true"]}
    b.update(kw)
    return b


def lim_post(b):
    return LIM.api("POST", "/v1/sandbox/executions", b)


def lim_ok(b):
    st, r = lim_post(b)
    check(st == 202, "within the limits: want 202, got %s %s" % (st, r))


def lim_refused(b, pointer, code="validation_failed"):
    st, r = lim_post(b)
    check(st == 422, "past the limit: want 422, got %s %s" % (st, r))
    e = r["error"]
    check(e["code"] == code, "code %s, want %s" % (e["code"], code))
    check(pointer in [d["path"] for d in e.get("details") or []], "pointer %s not in %s" % (pointer, e.get("details")))


def lim_path_of(total):
    p = path_of(total, seg=20)
    assert max(len(x) for x in p.split("/")) <= 20
    return p


def lcase_path_edge():
    lim_ok(lim_body(files=[{"path": lim_path_of(100), "content": "x"}]))
    lim_refused(lim_body(files=[{"path": lim_path_of(101), "content": "x"}]), "/files/0/path")
    lim_ok(lim_body(collect=[lim_path_of(100)]))
    lim_refused(lim_body(collect=[lim_path_of(101)]), "/collect/0")


def lcase_name_edge():
    lim_ok(lim_body(files=[{"path": "/tmp/" + "n" * 20, "content": "x"}]))
    lim_refused(lim_body(files=[{"path": "/tmp/" + "n" * 21, "content": "x"}]), "/files/0/path")
    lim_refused(lim_body(files=[{"path": "/tmp/" + "\u00e9" * 11, "content": "x"}]), "/files/0/path")  # 22 bytes
    lim_ok(lim_body(files=[{"path": "/tmp/" + "\u00e9" * 10, "content": "x"}]))  # 20 bytes
    lim_refused(lim_body(collect=["/tmp/" + "c" * 21]), "/collect/0")


def lcase_input_bytes_edge():
    lim_ok(lim_body(stdin="s" * 1000))
    lim_refused(lim_body(stdin="s" * 1001), "", code="limit_exceeded")
    mixed = dict(files=[{"path": "/tmp/a", "content": "f" * 400}], stdin="s" * 300, env={"E": "v" * 300})
    lim_ok(lim_body(**mixed))
    mixed["env"] = {"E": "v" * 301}
    lim_refused(lim_body(**mixed), "", code="limit_exceeded")
    b64 = __import__("base64").b64encode(b"\0" * 1001).decode()  # decoded bytes count
    lim_refused(lim_body(files=[{"path": "/tmp/b", "content_b64": b64}]), "", code="limit_exceeded")


def lcase_files_count_edge():
    f = [{"path": "/tmp/f%d" % i, "content": "x"} for i in range(4)]
    lim_ok(lim_body(files=f[:3]))
    lim_refused(lim_body(files=f), "/files")


def lcase_env_name_edges():
    lim_ok(lim_body(env={"A" * 16: "v"}))
    lim_refused(lim_body(env={"A" * 17: "v"}), "/env/" + "A" * 17)
    lim_ok(lim_body(env={"a_b_C9": "v"}))
    # (the request schema already allows only [A-Za-z_][A-Za-z0-9_]*, stricter
    # than Kubernetes' rule; the published flag also covers tool manifests)
    for bad in ("1ABC", "A B", "A:B", "\u00c9T\u00c9"):
        lim_refused(lim_body(env={bad: "v"}), "/env/" + bad)


def main():
    global ENV, LIM
    ensure_image()
    ENV = Env()
    cases = [(n, f) for n, f in sorted(globals().items()) if n.startswith("case_")]
    pdir = os.environ.get("EAI_HOSTILE_PLUGIN_DIR") or os.path.join(
        os.environ.get("EAI_BUILD_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../build"),
        "tests", "hostile-plugins")
    cfg_dir = __import__("tempfile").mkdtemp(prefix="eai-lim-cfg-")
    cfg = os.path.join(cfg_dir, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("plugins:\n  dir: %s\n"
                "isolation:\n  limits:\n    max_path_bytes: 100\n    max_name_bytes: 20\n"
                "    max_input_bytes: 1000\n    max_files: 3\n    max_env_name_bytes: 16\n"
                "    env_names_portable: true\n"
                "profiles:\n  lim:\n    backend: limits\n    runtime_class: none\n"
                "    defaults: {cpu: 250m, memory: 64Mi, timeout_s: 5}\n"
                "    max: {cpu: 500m, memory: 128Mi, timeout_s: 10}\n" % pdir)
    LIM = Env(config=cfg)
    try:
        ENV.make_key()
        ENV.start(ready_path="/readyz", timeout=120)
        LIM.make_key()
        LIM.start(ready_path="/readyz", timeout=60)
        cases += [(n, f) for n, f in sorted(globals().items()) if n.startswith("lcase_")]
        run_cases(cases)
    finally:
        ENV.stop()
        LIM.stop()
        __import__("shutil").rmtree(cfg_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
