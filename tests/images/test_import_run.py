#!/usr/bin/python3
"""A real execution in an imported image (issue 14, item 4).

Real parts only: the test writes an OCI image archive of two layers
(Debian's static busybox as /bin/busybox with its applet links, a file the
second layer whites out, an opaque directory, a setuid file), `eaid images
import`s it as `bb:1`, also imports the same layers as a `docker save`
archive (`bbd:1`), starts `eaid serve` (SQLite, its own data and image dirs,
loopback), creates a tenant and a key with the CLI, and runs
`/bin/sh -c ...` in each image through the HTTP API in gVisor (real runsc).
The sandbox's output proves the layers, the whiteouts and the dropped setuid
bit as the sandbox sees them.

Usage: test_import_run.py <build dir>.
"""
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def tar_bytes(entries):
    """entries: (name, kind, data_or_target, mode) -> uncompressed tar bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, data, mode in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1700000000
            ti.mode = mode
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                t.addfile(ti)
            elif kind == "sym":
                ti.type = tarfile.SYMTYPE
                ti.linkname = data
                t.addfile(ti)
            else:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def layers():
    with open("/bin/busybox", "rb") as f:
        bb = f.read()
    dirs = ["bin", "etc", "tmp", "proc", "sys", "dev", "opt", "opt/stale"]
    l1 = [(d, "dir", None, 0o755) for d in dirs]
    l1 += [("bin/busybox", "file", bb, 0o755)]
    l1 += [("bin/" + a, "sym", "busybox", 0o777) for a in ("sh", "cat", "echo", "test", "stat", "id")]
    l1 += [("etc/gone", "file", b"must not be seen\n", 0o644),
           ("opt/stale/old", "file", b"old\n", 0o644),
           ("etc/suid", "file", b"x\n", 0o4755)]
    l2 = [("etc/.wh.gone", "file", b"", 0o644),
          ("opt/stale/.wh..wh..opq", "file", b"", 0o644),
          ("opt/stale/new", "file", b"new\n", 0o644),
          ("etc/imported", "file", b"imported layers\n", 0o644)]
    return tar_bytes(l1), tar_bytes(l2)


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def oci_archive(path, raw_layers):
    d = tempfile.mkdtemp(dir=os.path.dirname(path))
    os.makedirs(os.path.join(d, "blobs", "sha256"))

    def blob(b):
        with open(os.path.join(d, "blobs", "sha256", hashlib.sha256(b).hexdigest()), "wb") as f:
            f.write(b)
        return sha(b)

    descs = []
    for raw in raw_layers:
        gz = gzip.compress(raw, mtime=0)
        descs.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": blob(gz),
                      "size": len(gz)})
    cfg = json.dumps({"architecture": "amd64", "os": "linux",
                      "rootfs": {"type": "layers", "diff_ids": [sha(r) for r in raw_layers]}}).encode()
    man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": blob(cfg),
                                 "size": len(cfg)}, "layers": descs}).encode()
    mdg = blob(man)
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": mdg, "size": len(man),
             "annotations": {"org.opencontainers.image.ref.name": "1"}}]}, f)
    with open(os.path.join(d, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    with tarfile.open(path, "w") as t:
        for n in sorted(os.listdir(d)):
            t.add(os.path.join(d, n), arcname=n)
    shutil.rmtree(d)
    return mdg


def docker_archive(path, raw_layers):
    cfg = json.dumps({"architecture": "amd64", "os": "linux",
                      "rootfs": {"type": "layers", "diff_ids": [sha(r) for r in raw_layers]}}).encode()
    cname = hashlib.sha256(cfg).hexdigest() + ".json"
    names = ["%064x/layer.tar" % (i + 1) for i in range(len(raw_layers))]
    with tarfile.open(path, "w") as t:
        def add(name, data):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
        add(cname, cfg)
        for n, raw in zip(names, raw_layers):
            add(n, raw)
        add("manifest.json", json.dumps([{"Config": cname, "RepoTags": ["bbd:1"], "Layers": names}]).encode())
    return sha(cfg)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(base, key, method, path, body=None, timeout=70):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Authorization", "Bearer " + key)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def run(base, key, image, script):
    st, body = api(base, key, "POST", "/v1/sandbox/executions",
                   {"profile": "gvisor-small", "image": image, "command": ["/bin/sh", "-c", script],
                    "limits": {"timeout_s": 60}})
    if st not in (200, 202):
        print("  POST -> %d %s" % (st, body))
        return None
    end = time.time() + 120
    while time.time() < end:
        st, rec = api(base, key, "GET", "/v1/sandbox/executions/%s?wait_s=20" % body["id"])
        if st == 200 and rec.get("status") not in ("queued", "running"):
            return rec
    return None


SCRIPT = ("cat /etc/imported; test -e /etc/gone && echo gone-visible; cat /opt/stale/new; "
          "test -e /opt/stale/old && echo opaque-broken; stat -c %a /etc/suid")
WANT = "imported layers\nnew\n755\n"


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("EAI_BUILD_DIR", "build")
    eaid = os.path.join(build, "eaid")
    runsc = os.environ.get("EAI_SANDBOX_RUNSC", "/usr/bin/runsc")
    for p, what in ((eaid, "eaid"), (runsc, "runsc"), ("/bin/busybox", "busybox (busybox-static)")):
        if not os.access(p, os.X_OK):
            print("FAIL: %s not found at %s" % (what, p))
            return 1
    work = tempfile.mkdtemp(prefix="eai-import-run-", dir=build)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EAI_TEST_")}
    env.update({"EAI_DATA_DIR": os.path.join(work, "data"), "EAI_IMAGE_DIR": os.path.join(work, "images"),
                "EAI_AUTH_PEPPER_FILE": os.path.join(work, "pepper"), "EAI_SANDBOX_RUNSC": runsc,
                "EAI_LOG_LEVEL": "info"})
    env.pop("EAI_DATABASE_URL", None)
    os.makedirs(env["EAI_DATA_DIR"], mode=0o700)  # eaid refuses a data dir open to others
    with open(env["EAI_AUTH_PEPPER_FILE"], "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(env["EAI_AUTH_PEPPER_FILE"], 0o600)
    proc = None
    log = None
    try:
        raw = layers()
        oci = os.path.join(work, "bb-oci.tar")
        mdg = oci_archive(oci, raw)
        r = subprocess.run([eaid, "images", "import", "bb:1", oci], env=env, capture_output=True, text=True)
        check(r.returncode == 0, "eaid images import bb:1 (OCI archive) rc=%d %s" % (r.returncode, r.stderr[-300:]))
        out = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
        check(out.get("digest") == mdg, "the recorded digest is the manifest's (%s)" % out.get("digest"))
        dock = os.path.join(work, "bb-docker.tar")
        cdg = docker_archive(dock, raw)
        r = subprocess.run([eaid, "images", "import", "bbd:1", dock], env=env, capture_output=True, text=True)
        check(r.returncode == 0, "eaid images import bbd:1 (docker save) rc=%d %s" % (r.returncode, r.stderr[-300:]))
        out = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
        check(out.get("digest") == cdg, "the recorded digest is the config's (%s)" % out.get("digest"))
        r = subprocess.run([eaid, "images", "list"], env=env, capture_output=True, text=True)
        check(r.returncode == 0 and '"image":"bb:1"' in r.stdout and '"image":"bbd:1"' in r.stdout,
              "eaid images list shows both")

        r = subprocess.run([eaid, "tenants", "create", "importer"], env=env, capture_output=True, text=True)
        if not check(r.returncode == 0, "tenant created"):
            return 1
        tenant = json.loads(r.stdout.strip().splitlines()[-1])["id"]
        r = subprocess.run([eaid, "keys", "create", "--tenant", tenant], env=env, capture_output=True, text=True)
        m = re.search(r"eai_[A-Za-z0-9]+_[A-Za-z0-9_\-]+", r.stdout)
        if not check(r.returncode == 0 and m, "key created"):
            return 1
        key = m.group(0)

        port = free_port()
        base = "http://127.0.0.1:%d" % port
        log = open(os.path.join(work, "eaid.log"), "w")
        proc = subprocess.Popen([eaid, "serve"], env=dict(env, EAI_LISTEN="127.0.0.1:%d" % port), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        ready = False
        end = time.time() + 90
        while time.time() < end and proc.poll() is None and not ready:
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=2) as resp:
                    ready = resp.status == 200
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.3)
        if not check(ready, "eaid serve ready (gVisor probe passed)"):
            return 1
        for image in ("bb:1", "bbd:1"):
            rec = run(base, key, image, SCRIPT)
            ok = rec is not None and rec.get("status") == "succeeded" and rec.get("stdout") == WANT
            check(ok, "real execution in imported %s: layers, whiteouts, opaque dir, no setuid (%s)"
                  % (image, json.dumps({k: (rec or {}).get(k) for k in ("status", "exit_code", "stdout", "stderr",
                                                                       "error")})))
        st, body = api(base, key, "POST", "/v1/sandbox/executions",
                       {"profile": "gvisor-small", "image": "nope:1", "command": ["/bin/sh", "-c", "true"]})
        check(st == 422, "an image never imported is refused (%d)" % st)
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if log:
            log.close()
        if failures and log:
            with open(log.name) as f:
                print("---- eaid log (tail) ----\n" + "".join(f.readlines()[-30:]))
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
