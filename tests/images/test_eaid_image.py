#!/usr/bin/python3
"""The eaid container image (scripts/image.sh) booted with runsc (issue 14, item 2).

Real parts: the OCI archive scripts/image.sh writes (built here once when
absent: ~2 min), unpacked with `eaid images import` (every blob digest
checked), turned into an OCI bundle from the image's own config (User,
Entrypoint, Env) and run with real runsc (--network=host: the sandbox
reaches the test PostgreSQL cluster and the test reaches eaid over loopback):

  1. the index names the chart's default reference (repository:version) and
     the digest printed by image.sh is the manifest's;
  2. `eaid version` in the image prints the project version;
  3. `eaid migrate --app-role eai_app` in the image, as the owner, against a
     fresh database of the test cluster (eai_image): the schema appears;
  4. `eaid serve` in the image, as the application role: GET /healthz = 200;
  5. the process runs as uid 10001 (the image's User), never root.

Usage: test_eaid_image.py <build dir>.  Needs EAI_TEST_PG_OWNER_URL,
EAI_TEST_PG_APP_URL and EAI_TEST_PG_SUPER_URL (exit 77 = skip when unset).
"""
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
import urllib.parse
import urllib.request

SKIP = 77
DB = "eai_image"
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def psql(url, sql):
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                         check=True, capture_output=True, text=True)
    return out.stdout.strip()


def with_db(url, db):
    p = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, "/" + db, p.query, p.fragment))


def tcp_url(url, db):
    """postgresql://user@/db?host=SOCK&port=P -> postgresql://user@127.0.0.1:P/db (loopback, trust)."""
    p = urllib.parse.urlsplit(url)
    port = urllib.parse.parse_qs(p.query)["port"][0]
    return "postgresql://%s@127.0.0.1:%s/%s" % (p.username, port, db)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def image_config(archive):
    with tarfile.open(archive) as t:
        def read(name):
            return json.load(t.extractfile(t.getmember(name)))
        index = read("./index.json")
        desc = index["manifests"][0]
        man = read("./blobs/sha256/" + desc["digest"].split(":")[1])
        cfg = read("./blobs/sha256/" + man["config"]["digest"].split(":")[1])
        return index, desc, cfg


class Runsc:
    def __init__(self, runsc, work):
        self.runsc = runsc
        self.state = os.path.join(work, "runsc-state")
        os.makedirs(self.state)
        self.work = work
        self.n = 0

    def argv(self, *args):
        return [self.runsc, "--root=" + self.state, "--network=host", "--platform=ptrace", *args]

    def bundle(self, rootfs, process):
        self.n += 1
        d = os.path.join(self.work, "bundle%d" % self.n)
        os.makedirs(d)
        spec = {
            "ociVersion": "1.0.2",
            "process": process,
            "root": {"path": rootfs, "readonly": True},
            "hostname": "eaid",
            "mounts": [
                {"destination": "/proc", "type": "proc", "source": "proc"},
                {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]},
                {"destination": "/var/lib/eai", "type": "tmpfs", "source": "tmpfs",
                 "options": ["nosuid", "nodev", "mode=1777"]},
            ],
            "linux": {"namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]},
        }
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(spec, f)
        return d, "eai-image-test-%d-%d" % (os.getpid(), self.n)

    def run(self, rootfs, process, timeout=120):
        d, cid = self.bundle(rootfs, process)
        try:
            return subprocess.run(self.argv("run", "--bundle", d, cid), capture_output=True, text=True,
                                  timeout=timeout)
        finally:
            subprocess.run(self.argv("delete", "--force", cid), capture_output=True)

    def start(self, rootfs, process, log):
        d, cid = self.bundle(rootfs, process)
        p = subprocess.Popen(self.argv("run", "--bundle", d, cid), stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        return p, cid

    def stop(self, p, cid):
        subprocess.run(self.argv("kill", cid, "KILL"), capture_output=True)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
        subprocess.run(self.argv("delete", "--force", cid), capture_output=True)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("EAI_BUILD_DIR", "build")
    src = os.environ.get("EAI_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    owner_url = os.environ.get("EAI_TEST_PG_OWNER_URL")
    app_url = os.environ.get("EAI_TEST_PG_APP_URL")
    super_url = os.environ.get("EAI_TEST_PG_SUPER_URL")
    if not (owner_url and app_url and super_url):
        print("SKIP: no PostgreSQL (EAI_TEST_PG_OWNER_URL / EAI_TEST_PG_APP_URL / EAI_TEST_PG_SUPER_URL unset)")
        return SKIP
    eaid = os.path.join(build, "eaid")
    runsc = os.environ.get("EAI_SANDBOX_RUNSC", "/usr/bin/runsc")
    archive = os.environ.get("EAI_EAID_IMAGE") or os.path.join(build, "eaid-image.tar")
    if not os.path.exists(archive):
        print("building the eaid image with scripts/image.sh (once)", flush=True)
        r = subprocess.run([os.path.join(src, "scripts", "image.sh"), archive], capture_output=True, text=True)
        if not check(r.returncode == 0, "scripts/image.sh built %s" % archive):
            print(r.stdout[-2000:], r.stderr[-2000:])
            return 1
    with open(os.path.join(src, "CMakeLists.txt")) as f:
        version = re.search(r"project\([^)]*VERSION ([0-9.]+)", f.read()).group(1)

    # 1. the archive: reference, digest, config
    index, desc, cfg = image_config(archive)
    ref = desc.get("annotations", {})
    check(ref.get("org.opencontainers.image.ref.name") == version, "index names the tag %s" % version)
    check(ref.get("io.containerd.image.name") == "ghcr.io/eai-sandbox/eaid:" + version,
          "the chart's default reference ghcr.io/eai-sandbox/eaid:%s" % version)
    digest_file = archive + ".digest"
    if os.path.exists(digest_file):
        with open(digest_file) as f:
            check(f.read().strip() == desc["digest"], "image.sh's printed digest is the manifest's")
    c = cfg["config"]
    check(c.get("User") == "10001:10001", "the image runs as 10001:10001 (%s)" % c.get("User"))
    check(c.get("Entrypoint") == ["/usr/bin/eaid"] and c.get("Cmd") == ["serve"], "Entrypoint eaid, Cmd serve")

    work = tempfile.mkdtemp(prefix="eai-image-test-", dir=build)
    rs = Runsc(runsc, work)
    proc = cid = log = None
    try:
        env = dict(os.environ, EAI_IMAGE_DIR=os.path.join(work, "images"), EAI_DATA_DIR=os.path.join(work, "cli"))
        r = subprocess.run([eaid, "images", "import", "eaid:test", archive, "--no-shim"], env=env,
                           capture_output=True, text=True)
        if not check(r.returncode == 0, "eaid images import of the image (digests verified)"):
            print(r.stderr[-2000:])
            return 1
        out = json.loads(r.stdout.strip().splitlines()[-1])
        check(out["digest"] == desc["digest"], "imported digest = manifest digest")
        rootfs = os.path.join(out["path"], "rootfs")
        st = os.stat(os.path.join(rootfs, "var/lib/eai"))
        check(st.st_uid == 10001 and st.st_gid == 10001, "/var/lib/eai owned by 10001")
        with open(os.path.join(rootfs, "etc/passwd")) as f:
            check("eaid:x:10001:10001:" in f.read(), "user eaid (10001) in /etc/passwd")
        uid, gid = (int(x) for x in c["User"].split(":"))
        base_env = list(c.get("Env", []))

        def process(args, extra=()):
            return {"terminal": False, "user": {"uid": uid, "gid": gid}, "args": c["Entrypoint"] + args,
                    "env": base_env + ["EAI_DATA_DIR=/var/lib/eai/data", *extra], "cwd": c.get("WorkingDir", "/"),
                    "noNewPrivileges": True}

        # 2. eaid version
        r = rs.run(rootfs, process(["version"]))
        check(r.returncode == 0 and version in r.stdout, "eaid version in the image: %r" % r.stdout.strip()[:200])
        if r.returncode != 0:
            print(r.stderr[-2000:])

        # 3. eaid migrate as the owner, fresh database
        psql(super_url, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
        psql(super_url, "CREATE DATABASE %s OWNER eai_owner" % DB)
        psql(super_url, "GRANT CONNECT ON DATABASE %s TO eai_app" % DB)
        r = rs.run(rootfs, process(["migrate", "--app-role", "eai_app"],
                                   ["EAI_DATABASE_URL=" + tcp_url(owner_url, DB)]))
        check(r.returncode == 0, "eaid migrate --app-role eai_app in the image (rc %d)" % r.returncode)
        if r.returncode != 0:
            print(r.stdout[-2000:], r.stderr[-2000:])
        n = psql(with_db(super_url, DB), "SELECT count(*) FROM pg_tables WHERE schemaname = 'eai'")
        check(int(n) > 0, "schema eai created by the image's eaid (%s tables)" % n)

        # 4. eaid serve as the application role: /healthz; 5. as uid 10001
        port = free_port()
        log = open(os.path.join(work, "serve.log"), "w")
        proc, cid = rs.start(rootfs, process(["serve"], ["EAI_LISTEN=127.0.0.1:%d" % port,
                                                          "EAI_DATABASE_URL=" + tcp_url(app_url, DB)]), log)
        ok = False
        end = time.time() + 60
        while time.time() < end and proc.poll() is None and not ok:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=2) as resp:
                    ok = resp.status == 200
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.3)
        check(ok, "GET /healthz = 200 from eaid serve in the image")
        r = subprocess.run(rs.argv("exec", cid, "/bin/cat", "/proc/1/status"), capture_output=True, text=True)
        m = re.search(r"^Uid:\s+(\d+)\s+(\d+)", r.stdout, re.M)
        check(m is not None and m.group(1) == "10001" and m.group(2) == "10001",
              "eaid runs as uid 10001, not root (%s)" % (m.group(0) if m else r.stderr.strip()[:200]))
    finally:
        if proc is not None:
            rs.stop(proc, cid)
        if log:
            log.close()
            if failures:
                with open(log.name) as f:
                    print("---- serve log (tail) ----\n" + "".join(f.readlines()[-30:]))
        try:
            psql(super_url, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
        except subprocess.CalledProcessError:
            pass
        # the empty netns a runsc of 2026 bind-mounts into its root (docs/gvisor.md)
        for _ in range(4):
            if subprocess.run(["umount", "-l", os.path.join(work, "runsc-state", "null-netns")],
                              capture_output=True).returncode != 0:
                break
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
