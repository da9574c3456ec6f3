#!/usr/bin/env python3
"""The vendor path, end to end (docs/plugins.md "Building a backend out of tree").

1. `cmake --install` the build into a temporary prefix; check eaid, eai, the
   plugins, include/eai/*.h and eai-plugin.pc are there.
2. Copy examples/isolation-example/example.c OUT of the tree and build it with
   nothing but `pkg-config --cflags --libs eai-plugin` from that prefix.
3. Make a tiny image (a static helper alone in a rootfs) in a temporary image store.
4. Start the INSTALLED eaid on loopback with a plugin directory holding only the
   vendor's .so, a profile using backend "example"; make a tenant and key with its CLI.
5. Through the HTTP API: one execution succeeds (output, uid 65534, hostname
   "sandbox"), one network attempt to a listener of this test on the host's
   loopback fails inside the sandbox, and the listener never sees a connection.
Also: tests/fixtures/plugins/fixture_abi.c built out of tree against the installed
FROZEN 1.0 headers (`pkg-config eai-plugin-1.0`) loads into that eaid (ABI 1.2) and runs an
execution (and builds against eai-plugin-1.1 and eai-plugin-1.2); a plugin built with a wrong fingerprint or no descriptor symbol is refused
by that eaid at start, with the loader's message in its log.

Needs root (bwrap's user namespace as root), bubblewrap, cc, pkg-config.
Last line: `N passed, M failed`; exit 1 when anything failed, 77 when skipped.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("EAI_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("EAI_BUILD_DIR") or os.path.join(SRC, "build")
CC = os.environ.get("CC") or "cc"
passed = failed = 0

# A deliberately wrong plugin (named "example", replacing the good one).
BAD_PLUGIN = r"""
#include <eai/isolation.h>
static void *bad_create(const struct eai_host *h, const json_t *c, struct eai_error **e) { return (void *)h; }
static void bad_destroy(void *s) {}
static void bad_probe(void *s, struct eai_iso_probe *o) { o->ready = 0; }
static int bad_start(void *s, const struct eai_iso_job *j, const struct eai_iso_callbacks *cb, void *a,
                     void **hd, struct eai_error **e) { return -1; }
static void bad_cancel(void *s, void *h) {}
static const struct eai_isolation_ops bad_ops = {
    .size = sizeof(struct eai_isolation_ops), .probe = bad_probe, .start = bad_start, .cancel = bad_cancel};
static const struct eai_plugin_descriptor bad_desc = {
    .abi_major = EAI_ABI_MAJOR, .abi_minor = EAI_ABI_MINOR, .struct_size = sizeof(struct eai_plugin_descriptor),
    .build = %(fp)s,
    .name = "example", .kind = EAI_KIND_ISOLATION, .version = "bad",
    .create = bad_create, .destroy = bad_destroy, .ops = &bad_ops};
%(declare)s
"""
FP_JANSSON_9 = ("{sizeof(struct eai_build_fingerprint), 9, JANSSON_MINOR_VERSION, EAI__LIBEVENT_MAJOR, "
                "EAI__LIBEVENT_MINOR, sizeof(void *), sizeof(size_t), sizeof(json_int_t), sizeof(enum eai_code)}")


def check(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what + ((": " + detail) if detail else ""))
    return cond


def run(cmd, env=None, timeout=300):
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                          universal_newlines=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def request(port, method, path, key=None, body=None, timeout=70):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"}
        if key:
            h["Authorization"] = "Bearer " + key
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data.decode()) if data else None
        except ValueError:
            return r.status, data
    finally:
        c.close()


def build_plugin(prefix, out_dir, src, name="eai-isolation-example.so", extra=(), pcname="eai-plugin"):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    pc = run(["pkg-config", "--cflags", "--libs", pcname], env=env)
    if not check(pc.returncode == 0, "pkg-config --cflags --libs " + pcname, pc.stderr):
        return None
    flags = pc.stdout.split()
    so = os.path.join(out_dir, name)
    r = run([CC, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden",
             "-o", so, src] + list(extra) + flags + ["-Wl,--no-undefined"], env=env)
    if not check(r.returncode == 0, "out-of-tree build of %s" % name, r.stderr[-2000:]):
        return None
    return so


def main():
    if os.geteuid() != 0:
        print("skipped: needs root")
        return 77
    if not shutil.which("bwrap"):
        print("FAIL bubblewrap is missing (apt-get install bubblewrap; scripts/lib.sh installs it)")
        return 1
    tmp = tempfile.mkdtemp(prefix="eai-vendor-")
    proc = None
    listener = None
    try:
        # 1. install
        prefix = os.path.join(tmp, "prefix")
        r = run(["cmake", "--install", BUILD, "--prefix", prefix])
        check(r.returncode == 0, "cmake --install into a temporary prefix", r.stderr[-2000:])
        eaid = os.path.join(prefix, "bin", "eaid")
        for rel in ("bin/eaid", "bin/eai", "include/eai/plugin.h", "include/eai/isolation.h",
                    "include/eai/storage.h", "include/eai/sinks.h", "include/eai/errcodes.h",
                    "include/eai-abi-1.0/eai/plugin.h", "include/eai-abi-1.1/eai/plugin.h",
                    "include/eai-abi-1.2/eai/plugin.h", "lib/pkgconfig/eai-plugin.pc",
                    "lib/pkgconfig/eai-plugin-1.0.pc", "lib/pkgconfig/eai-plugin-1.1.pc",
                    "lib/pkgconfig/eai-plugin-1.2.pc", "share/eai/contracts/v1"):
            check(os.path.exists(os.path.join(prefix, rel)), "installed: " + rel)
        plugdir = os.path.join(prefix, "lib", "eai", "plugins")
        check(os.path.isdir(plugdir) and any(f.endswith(".so") for f in os.listdir(plugdir)),
              "installed: the plugins under lib/eai/plugins")

        # 2. out of tree: the example's source alone, in a directory of its own
        vendor = os.path.join(tmp, "vendor")
        os.makedirs(vendor)
        src = os.path.join(vendor, "example.c")
        shutil.copy(os.path.join(SRC, "examples", "isolation-example", "example.c"), src)
        plugins = os.path.join(tmp, "plugins")
        os.makedirs(plugins)
        if not build_plugin(prefix, plugins, src):
            return 1
        # and a plugin built against the installed frozen 1.0 headers
        src10 = os.path.join(vendor, "old10.c")
        shutil.copy(os.path.join(SRC, "tests", "fixtures", "plugins", "fixture_abi.c"), src10)
        if not build_plugin(prefix, plugins, src10, name="eai-isolation-old10.so", pcname="eai-plugin-1.0"):
            return 1
        # the same source against the installed headers of the later minors (built, not run here:
        # tests/loader runs them)
        for minor in (1, 2):
            if not build_plugin(prefix, vendor, src10, name="eai-isolation-old1%d.so" % minor,
                                pcname="eai-plugin-1.%d" % minor):
                return 1
        nm = run(["nm", "-D", "--defined-only", os.path.join(plugins, "eai-isolation-example.so")])
        syms = [l.split()[-1] for l in nm.stdout.splitlines() if " T " in l]
        check(syms == ["eai_plugin_descriptor"], "the .so exports eai_plugin_descriptor only", repr(syms))

        # 3. a tiny image: a static helper alone
        images = os.path.join(tmp, "images")
        rootfs = os.path.join(images, "probe", "1", "rootfs")
        for d in ("bin", "proc", "dev", "tmp", "etc"):
            os.makedirs(os.path.join(rootfs, d))
        r = run([CC, "-static", "-O2", "-o", os.path.join(rootfs, "bin", "probe"), os.path.join(HERE, "probe.c")])
        if not check(r.returncode == 0, "static helper for the image", r.stderr[-2000:]):
            return 1

        # a listener on the host's loopback that the sandbox must not reach
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        lport = listener.getsockname()[1]
        accepted = []

        def accept_loop():
            try:
                while True:
                    c, _ = listener.accept()
                    accepted.append(1)
                    c.close()
            except OSError:
                pass
        threading.Thread(target=accept_loop, daemon=True).start()

        # 4. the installed eaid with the vendor's plugin directory
        data = os.path.join(tmp, "data")
        port = free_port()
        cfg = os.path.join(tmp, "eaid.yaml")
        with open(cfg, "w") as f:
            f.write("""server:
  listen: "127.0.0.1:%d"
data_dir: "%s"
images:
  dir: "%s"
plugins:
  dir: "%s"
isolation:
  example: {}
  old10: {}
profiles:
  old:
    backend: old10
    runtime_class: old10
    defaults: {cpu: "1", memory: "256Mi", timeout_s: 20, pids: 64, output_bytes: "64Ki", disk: "16Mi"}
    max: {cpu: "1", memory: "512Mi", timeout_s: 60, pids: 128, output_bytes: "1Mi", disk: "64Mi"}
    egress_allow: []
  bwrap:
    backend: example
    runtime_class: bwrap
    defaults: {cpu: "1", memory: "256Mi", timeout_s: 20, pids: 64, output_bytes: "64Ki", disk: "16Mi"}
    max: {cpu: "1", memory: "512Mi", timeout_s: 60, pids: 128, output_bytes: "1Mi", disk: "64Mi"}
    egress_allow: []
""" % (port, data, images, plugins))
        env = dict(os.environ)
        for k in ("EAI_PLUGIN_DIR", "EAI_IMAGE_DIR", "EAI_DATA_DIR", "EAI_LISTEN", "EAI_DATABASE_URL",
                  "EAI_FINOPS_URL", "EAI_AUDIT_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "EAI_CONTRACTS_DIR",
                  "EAI_AUDIT_BACKEND", "EAI_FINOPS_BACKEND", "EAI_TELEMETRY_BACKEND"):
            env.pop(k, None)
        r = run([eaid, "--config", cfg, "tenants", "create", "vendor"], env=env)
        if not check(r.returncode == 0, "installed eaid tenants create", r.stderr):
            return 1
        tenant = json.loads(r.stdout.strip().splitlines()[-1])["id"]
        r = run([eaid, "--config", cfg, "keys", "create", "--tenant", tenant, "--name", "vendor"], env=env)
        key = next((w for w in r.stdout.split() if w.startswith("eai_")), None)
        if not check(r.returncode == 0 and key, "installed eaid keys create", r.stdout + r.stderr):
            return 1
        log_path = os.path.join(tmp, "eaid.log")
        log = open(log_path, "wb")
        proc = subprocess.Popen([eaid, "--config", cfg, "serve"], env=env, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        ready = False
        deadline = time.time() + 30
        while time.time() < deadline and proc.poll() is None:
            try:
                st, _ = request(port, "GET", "/readyz", timeout=5)
                if st == 200:
                    ready = True
                    break
            except OSError:
                pass
            time.sleep(0.2)
        logtxt = open(log_path, errors="replace").read()
        if not check(ready, "installed eaid ready with the vendor plugin", logtxt[-3000:]):
            return 1
        check("bubblewrap backend created" in logtxt and '"example/bwrap"' in logtxt,
              "the plugin's log line is named by the host (component example/bwrap)", logtxt[-2000:])

        # 5. executions through the HTTP API
        check("isolation backend 'old10' ready (fixture-abi-1.0)" in logtxt,
              "the plugin built against the 1.0 headers is loaded by today's eaid", logtxt[-2000:])

        def execute(cmd, profile="bwrap", limits=None):
            req = {"profile": profile, "image": "probe:1", "command": cmd}
            if limits:
                req["limits"] = limits
            st, body = request(port, "POST", "/v1/sandbox/executions", key, req)
            if not check(st == 202, "POST %s accepted" % cmd, repr(body)):
                return None
            xid = body["id"]
            deadline = time.time() + 60
            while time.time() < deadline:
                st, body = request(port, "GET", "/v1/sandbox/executions/%s?wait_s=10" % xid, key)
                if st == 200 and body.get("status") not in ("queued", "running"):
                    return body
            check(False, "execution %s terminal within 60 s" % xid, repr(body))
            return None

        t0 = time.time()
        ok = execute(["/bin/probe", "echo", "hello", "from", "bwrap"])
        print("info echo through bwrap: %.0f ms from POST to terminal (sandbox duration_s %s)"
              % ((time.time() - t0) * 1000, (ok or {}).get("usage", {}).get("duration_s")))
        if ok:
            check(ok["status"] == "succeeded" and ok.get("exit_code") == 0, "echo execution succeeded",
                  json.dumps(ok)[:1500])
            out = ok.get("stdout") or ""
            check("hello from bwrap" in out, "its stdout came back", repr(out))
            check("uid=65534" in out and "host=sandbox" in out, "it ran as uid 65534 in its own uts namespace",
                  repr(out))
        net = execute(["/bin/probe", "net", "127.0.0.1", str(lport)])
        if net:
            out = net.get("stdout") or ""
            check(net["status"] == "failed" and net.get("exit_code") == 3, "network attempt failed (exit 3)",
                  json.dumps(net)[:1500])
            check("connect failed" in out, "inside: connect failed", repr(out))
            time.sleep(0.5)
            check(not accepted, "the host's loopback listener saw no connection")
        t0 = time.time()
        slow = execute(["/bin/probe", "sleep", "30"], limits={"timeout_s": 1})
        if slow:
            check(slow["status"] == "timeout" and time.time() - t0 < 15, "the timeout kills the sandbox (status "
                  "timeout, well before the 30 s sleep)", json.dumps(slow)[:1500])
        old = execute(["hello", "-abi-", "1.0"], profile="old")
        if old:
            check(old["status"] == "succeeded" and (old.get("stdout") or "") == "hello-abi-1.0",
                  "an execution through the ABI 1.0 plugin succeeded", json.dumps(old)[:1500])
        st, body = request(port, "POST", "/v1/sandbox/executions", key,
                           {"profile": "bwrap", "image": "nope:1", "command": ["/bin/probe"]})
        check(st == 422 and body["error"]["code"] == "unknown_image", "unknown image refused (422 unknown_image)",
              repr(body))

        # wrong plugins, same eaid: refused at start with the loader's message
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        proc = None
        bad = os.path.join(tmp, "bad")
        os.makedirs(bad)
        for variant, fp, declare, needles in (
                ("nosymbol", "EAI_BUILD_FINGERPRINT", False,
                 ["missing symbol eai_plugin_descriptor()", "EAI_PLUGIN_DECLARE(my_descriptor)"]),
                ("jansson9", FP_JANSSON_9, True,
                 ["incompatible build", "plugin was built against jansson 9.", "eaid against jansson 2."])):
            c = os.path.join(bad, variant + ".c")
            with open(c, "w") as f:
                f.write(BAD_PLUGIN % {"fp": fp, "declare": "EAI_PLUGIN_DECLARE(bad_desc)" if declare else
                                      "const struct eai_plugin_descriptor *bad_unexported(void) "
                                      "{ return &bad_desc; }"})
            if not build_plugin(prefix, plugins, c, extra=["-Wno-missing-prototypes"]):
                continue
            log = open(log_path, "wb")
            proc = subprocess.Popen([eaid, "--config", cfg, "serve"], env=env, stdout=log, stderr=log,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            log.close()
            seen = ""
            deadline = time.time() + 20
            while time.time() < deadline:
                seen = open(log_path, errors="replace").read()
                if all(n in seen for n in needles):
                    break
                time.sleep(0.2)
            check(all(n in seen for n in needles), "%s plugin refused: %s" % (variant, needles), seen[-2000:])
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            proc = None
        return 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if listener is not None:
            listener.close()
        if failed == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept " + tmp)


if __name__ == "__main__":
    rc = main()
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed or rc == 1 else rc)
