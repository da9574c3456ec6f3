#!/usr/bin/env python3
"""Every backend kind chosen by name from the config (docs/configuration.md).
An unknown isolation backend name stops start-up too.

Black box against build/eaid: audit.backend, finops.backend and
telemetry.backend load eai-<kind>-<name>.so from plugins.dir (the fixtures
in build/tests/backends) through their own host handle, with the section's
other keys checked against the plugin's; an unknown name, an unknown key or
keys given to an in-process fallback stop start-up naming file, path and key.
Last line: `N passed, M failed`.
"""
import http.client
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("EAI_BUILD_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
EAID = os.path.join(BUILD, "eaid")
BACKENDS = os.environ.get("EAI_BACKEND_DIR") or os.path.join(BUILD, "tests", "backends")
passed = failed = 0


def check(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok   " + what)
    else:
        failed += 1
        print("FAIL " + what + ((": " + detail[-2500:]) if detail else ""))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def env():
    e = dict(os.environ)
    for k in ("EAI_PLUGIN_DIR", "EAI_DATA_DIR", "EAI_LISTEN", "EAI_DATABASE_URL", "EAI_FINOPS_URL", "EAI_AUDIT_URL",
              "OTEL_EXPORTER_OTLP_ENDPOINT", "EAI_AUDIT_BACKEND", "EAI_FINOPS_BACKEND", "EAI_TELEMETRY_BACKEND"):
        e.pop(k, None)
    return e


def serve(tmp, body, extra_env=None, plugins=None):
    """Start eaid with body appended to a base config; returns (proc or None, port, log text, config path)."""
    port = free_port()
    data = tempfile.mkdtemp(dir=tmp)
    cfg = os.path.join(data, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write('server:\n  listen: "127.0.0.1:%d"\ndata_dir: "%s"\nplugins:\n  dir: "%s"\n%s%s'
                % (port, data, plugins or BACKENDS, "" if "isolation:" in body else "isolation: {}\n", body))
    log_path = os.path.join(data, "eaid.log")
    log = open(log_path, "wb")
    e = env()
    e.update(extra_env or {})
    p = subprocess.Popen([EAID, "--config", cfg, "serve"], env=e, stdout=log, stderr=log,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        if p.poll() is not None:
            return None, port, open(log_path, errors="replace").read(), cfg, p.returncode
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                c.close()
                break
            c.close()
        except OSError:
            pass
        time.sleep(0.1)
    time.sleep(0.3)
    return p, port, open(log_path, errors="replace").read(), cfg, None


def stop(p):
    if p and p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def config_check(cfg, extra_env=None):
    e = env()
    e.update(extra_env or {})
    r = subprocess.run([EAID, "--config", cfg, "config", "check"], env=e, capture_output=True, text=True,
                       timeout=30)
    return r.returncode, r.stdout + r.stderr


def refused(tmp, what, body, needles, extra_env=None, plugins=None):
    p, _, log, cfg, rc = serve(tmp, body, extra_env, plugins)
    stop(p)
    needles = [n.replace("{cfg}", cfg) for n in needles]
    check(p is None and rc not in (None, 0) and all(n in log for n in needles),
          what, "rc=%s, wanted %s in:\n%s" % (rc, needles, log))
    # `eaid config check` says the same without starting anything
    crc, out = config_check(cfg, extra_env)
    check(crc == 2 and all(n in out for n in needles), "config check: " + what,
          "rc=%s, wanted %s in:\n%s" % (crc, needles, out))


def main():
    tmp = tempfile.mkdtemp(prefix="eai-backends-")
    try:
        for kind in ("audit", "finops", "telemetry"):
            refused(tmp, "unknown %s.backend stops start-up naming file, path and key" % kind,
                    "%s:\n  backend: nope\n" % kind,
                    ["config {cfg}: /%s: key 'backend': %s backend 'nope' cannot be loaded" % (kind, kind),
                     "eai-%s-nope.so" % kind])
        refused(tmp, "unknown isolation backend stops start-up naming file, path and key",
                "isolation:\n  gvsior: {}\n",
                ["config {cfg}: /isolation: key 'gvsior': unknown isolation backend", "eai-isolation-gvsior.so"])
        refused(tmp, "a key the isolation plugin does not declare stops start-up (docs/configuration.md)",
                "isolation:\n  gvisor: {platfrom: ptrace}\n",
                ["config {cfg}: /isolation/gvisor: key 'platfrom': unknown key"],
                plugins=os.path.join(BUILD, "plugins"))
        refused(tmp, "a storage key the storage plugin does not declare stops start-up",
                "storage:\n  colour: red\n",
                ["config {cfg}: /storage: key 'colour': unknown key"])
        refused(tmp, "a storage key of the wrong type stops start-up",
                "storage:\n  pool_size: many\n",
                ["config {cfg}: /storage: key 'pool_size'"])
        refused(tmp, "unknown name from the environment (EAI_FINOPS_BACKEND) stops start-up", "",
                ["/finops: key 'backend': finops backend 'vendor-x' cannot be loaded"],
                {"EAI_FINOPS_BACKEND": "vendor-x"})
        refused(tmp, "keys under an in-process fallback are refused",
                "audit:\n  label: x\n",
                ["config {cfg}: /audit: key 'label': unknown key (backend 'storage' is in-process"])
        refused(tmp, "a URL with the in-process fallback named explicitly is refused",
                "finops:\n  backend: ledger\n  url: http://127.0.0.1:9/\n",
                ["/finops: key 'url': set, but backend 'ledger' (in-process) takes no URL"])
        refused(tmp, "a key the chosen plugin does not declare is refused",
                "audit:\n  backend: fixture\n  colour: red\n",
                ["config {cfg}: /audit: key 'colour': unknown key"])
        p, port, log, cfg, rc = serve(tmp, "audit:\n  backend: fixture\n  label: A1\n"
                                           "finops:\n  backend: fixture\n  label: F1\n"
                                           "telemetry:\n  backend: fixture\n  label: T1\n")
        try:
            check(p is not None, "eaid starts with audit, finops and telemetry backends chosen by name", log)
            for label in ("A1", "F1", "T1"):
                check("fixture %s backend created" % label in log, "backend %s created from its section" % label,
                      log)
            check("usage events: fixture (FinOps backend); audit events: fixture (audit backend)" in log,
                  "delivery uses the named FinOps and audit backends", log)
            check("exporting spans and metrics with telemetry plugin 'fixture'" in log,
                  "traces and metrics go to the named telemetry backend", log)
            deadline = time.time() + 10
            while time.time() < deadline and "exported metrics:" not in log:
                time.sleep(0.2)
                log = open(os.path.join(os.path.dirname(cfg), "eaid.log"), errors="replace").read()
            m = re.search(r"exported metrics: (\d+) bytes", log)
            check(m is not None and int(m.group(1)) > 200, "export_metrics (ABI 1.1) receives the Prometheus "
                  "exposition", log)
            check('"component":"fixture"' in log.replace(" ", ""), "the plugins' log lines carry their name", log)
        finally:
            stop(p)
        p, port, log, cfg, rc = serve(tmp, "storage:\n  pool_size: 3\n")
        stop(p)
        crc, out = config_check(cfg)
        check(p is not None and crc == 0 and "/storage: storage backend 'sqlite'" in out and out.endswith(": ok\n"),
              "a storage key the plugin declares is taken, and config check says ok", log + out)
        p, port, log, cfg, rc = serve(tmp, "")
        try:
            check(p is not None and "usage events: in-process ledger" in log and "kept in storage only" in log
                  and "telemetry backend 'log'" in log, "no section: the in-process fallbacks", log)
        finally:
            stop(p)
        return 0
    finally:
        if failed == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept " + tmp)


if __name__ == "__main__":
    main()
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
