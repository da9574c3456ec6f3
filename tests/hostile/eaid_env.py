"""A real `eaid serve` on loopback with a private temp data dir, for the
hostile-world tests (Python 3 standard library only).  Each test file makes
an Env, starts it, talks HTTP (urllib or raw sockets) and stops it."""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("EAI_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("EAI_BUILD_DIR") or os.path.join(SRC, "build")
EAID = os.path.join(BUILD, "eaid")
IMAGES = os.environ.get("EAI_IMAGE_DIR") or os.path.join(BUILD, "images")


IMAGE = "python:3.11-slim"
IMAGE_PACKAGES = "python3-minimal,libpython3.11-stdlib"


class Fail(Exception):
    pass


def ensure_image():
    """Build python:3.11-slim into IMAGES once when it is not there (a fresh
    clone's CI); the tests that need it run serially, so two never race."""
    if os.path.isdir(os.path.join(IMAGES, "python", "3.11-slim", "rootfs")):
        return
    print("building image %s into %s (once)" % (IMAGE, IMAGES), flush=True)
    os.makedirs(IMAGES, exist_ok=True)
    e = dict(os.environ)
    e["EAI_IMAGE_DIR"] = IMAGES
    r = subprocess.run([EAID, "images", "build", IMAGE, "--packages", IMAGE_PACKAGES], env=e, timeout=900)
    if r.returncode != 0:
        raise Fail("eaid images build failed (%d)" % r.returncode)


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Env:
    def __init__(self, config=None, env=None, tmp=None, data=None):
        self.tmp = tmp or tempfile.mkdtemp(prefix="eai-hostile-")
        self.own_tmp = tmp is None
        self.port = free_port()
        self.scheme = "http"
        self.config = config
        self.extra_env = env or {}
        self.data = data or os.path.join(self.tmp, "data")
        self.proc = None
        self.key = None
        self.log_path = os.path.join(self.tmp, "eaid-%d.log" % self.port)
        if not os.path.isdir(self.data):
            os.makedirs(self.data, mode=0o700)
        os.chmod(self.data, 0o700)

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.port)

    def base_env(self):
        e = dict(os.environ)
        for k in ("EAI_DATABASE_URL", "EAI_FINOPS_URL", "EAI_AUDIT_URL", "OTEL_EXPORTER_OTLP_ENDPOINT",
                  "EAI_PLUGIN_DIR", "EAI_SANDBOX_RUNSC", "EAI_AUTH_PEPPER_FILE", "LANG", "LC_ALL",
                  "LC_MESSAGES", "EAI_URL", "EAI_API_KEY", "EAI_LOG_LEVEL"):
            e.pop(k, None)
        e["EAI_DATA_DIR"] = self.data
        e["EAI_LISTEN"] = "127.0.0.1:%d" % self.port
        e["EAI_IMAGE_DIR"] = IMAGES
        e.update(self.extra_env)
        return e

    def cmd(self, *args, timeout=60):
        argv = [EAID] + list(args)
        if self.config:
            argv += ["--config", self.config]
        return subprocess.run(argv, env=self.base_env(), capture_output=True, timeout=timeout)

    def pg_migrate(self, owner_url, app_url):
        """`eaid migrate --app-role eai_app` as the owner; eaid then connects as app_url."""
        self.extra_env["EAI_DATABASE_URL"] = owner_url
        r = self.cmd("migrate", "--app-role", "eai_app")
        check(r.returncode == 0, "migrate: %s" % r.stderr)
        self.extra_env["EAI_DATABASE_URL"] = app_url

    def make_key(self, tenant_name="hostile"):
        r = self.cmd("tenants", "create", tenant_name)
        check(r.returncode == 0, "tenants create: %s" % r.stderr)
        tenant = json.loads(r.stdout)["id"]
        r = self.cmd("keys", "create", "--tenant", tenant)
        check(r.returncode == 0, "keys create: %s" % r.stderr)
        self.key = r.stdout.decode().strip()
        return self.key

    def spawn(self):
        argv = [EAID, "serve"] + (["--config", self.config] if self.config else [])
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, env=self.base_env(), stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        return self.proc

    def start(self, ready_path="/healthz", timeout=60, ssl_ctx=None):
        self.spawn()
        deadline = time.time() + timeout
        while time.time() < deadline:
            check(self.proc.poll() is None, "eaid serve exited: %s" % self.log_tail())
            try:
                with urllib.request.urlopen(self.url + ready_path, timeout=5, context=ssl_ctx) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError, ssl.SSLError):
                pass
            time.sleep(0.2)
        raise Fail("eaid not ready after %d s: %s" % (timeout, self.log_tail()))

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n=20):
        return "\n".join(self.log_text().splitlines()[-n:])

    def stop(self, clean=True):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if clean and self.own_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def api(self, method, path, body=None, headers=None, timeout=30):
        h = {"Authorization": "Bearer " + (self.key or ""), "Content-Type": "application/json"}
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw or b"null")
            except ValueError:
                return e.code, raw

    def wait_terminal(self, eid, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            st, b = self.api("GET", "/v1/sandbox/executions/" + eid)
            check(st == 200, "GET execution: %s %s" % (st, b))
            if b["status"] not in ("queued", "running"):
                return b
            time.sleep(0.5)
        raise Fail("execution %s not terminal after %d s" % (eid, timeout))


# ---- PostgreSQL (tests/support/pg_cluster.sh's EAI_TEST_PG_*_URL)

def with_db(url, db):
    p = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, "/" + db, p.query, p.fragment))


def psql(url, sql):
    return subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()


def pg_urls():
    """(owner, app, super) URLs of the test cluster, or None when one is unset."""
    urls = tuple(os.environ.get("EAI_TEST_PG_%s_URL" % k) for k in ("OWNER", "APP", "SUPER"))
    return urls if all(urls) else None


def pg_fresh_db(sup, db):
    """db made anew, owned by eai_owner, eai_app may connect."""
    psql(sup, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % db)
    psql(sup, "CREATE DATABASE %s OWNER eai_owner" % db)
    psql(sup, "GRANT CONNECT ON DATABASE %s TO eai_app" % db)


def write_pepper(tmp):
    """A fresh pepper file (mode 0600) in tmp, for EAI_AUTH_PEPPER_FILE: two
    replicas on one database must share it."""
    pepper = os.path.join(tmp, "pepper")
    with open(pepper, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    os.chmod(pepper, 0o600)
    return pepper


def run_cases(cases, only_env="EAI_HOSTILE_ONLY"):
    """Run (name, fn) cases; print one line each and a summary; exit code."""
    import sys
    import traceback
    only = [s for s in os.environ.get(only_env, "").split(",") if s]
    passed = failed = 0
    for name, fn in cases:
        if only and not any(o in name for o in only):
            continue
        t0 = time.time()
        try:
            fn()
            passed += 1
            print("PASS %s (%.1f s)" % (name, time.time() - t0), flush=True)
        except Exception as e:  # noqa: BLE001 - a test harness reports everything
            failed += 1
            print("FAIL %s: %s" % (name, e), flush=True)
            if not isinstance(e, Fail):
                traceback.print_exc()
    print("%d passed, %d failed" % (passed, failed), flush=True)
    sys.exit(1 if failed else 0)
