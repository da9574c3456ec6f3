#!/usr/bin/env python3
"""The k8s backend against the real cluster (ctest test_k8s_backend_real, label
k8s-real; docs/kubernetes.md "Tests").

Owns the cluster for its run: `cluster.sh up` at the start, `cluster.sh down`
at the end whatever happened.  Pushes python:3.11-slim from eaid's image store
(EAI_IMAGE_DIR; built there with `eaid images build` when absent) to the
cluster's registry, starts a real `eaid serve` whose profile `k8s-gvisor` runs
on the k8s backend (eaid's own kubeconfig from `cluster.sh env`: the
ServiceAccount and roles the Helm chart grants, RuntimeClass gvisor, images
only from the local registry) and checks, against the real API server,
kubelet, containerd and runsc:

  the seed's four acceptance tests (network refused inside the pod; timeout_s:
  the kubelet kills the pod, the execution is `timeout`; another tenant's id
  answers 404 like a missing one; errors in French), exit codes, stdout and
  stderr (one stream through the log API), stdin, the egress policy and input
  Secret owned by the pod and removed by the garbage collector, OOM from the
  kubelet's own `OOMKilled`, cancel deleting the pod, an image the registry
  lacks, an unschedulable pod ended by eaid's watchdog, the tenant namespace /
  RoleBinding / default-deny NetworkPolicy as the API server keeps them (and
  Pod Security enforced there), eaid's RBAC (the API server answers 403 to
  verbs eaid was not granted), the poll surviving an API server crash and
  restart, the namespace watch getting a real 410 Gone after an etcd compaction
  and an API server restart and ending the execution after its relist,
  NetworkPolicy not enforced on this cluster (a peer in the test's own netns on
  the pod bridge is reached), usage measured from the kubelet's summary, eaid
  killed -9 and reattaching to its pod, token rotation (the old token revoked
  by the API server), the sweep at start-up.

Every wait is for a condition, bounded.  Everything listens on 127.0.0.1; pods
live in 198.18.0.0/24 (the cluster's own range) and reach nothing else.

Environment: EAI_BUILD_DIR (eaid), EAI_PLUGIN_DIR (eai-isolation-k8s.so),
EAI_IMAGE_DIR, EAI_K8S_REAL_ONLY (comma-separated substrings of case names).
Exit 77 (skipped) when not root or the cluster cannot be built here.
"""
import calendar
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
import eaid_env  # noqa: E402
from eaid_env import Fail, check  # noqa: E402

CLUSTER = os.path.join(HERE, "cluster.sh")
PLUGIN_DIR = os.environ.get("EAI_PLUGIN_DIR") or os.path.join(eaid_env.BUILD, "plugins")
PROFILE = "k8s-gvisor"
PY_REF = "eai/python:3.11-slim"
EXEC = "eai-sandbox.dev/execution-id"
MANAGED = "app.kubernetes.io/managed-by"
TERMINAL = ("succeeded", "failed", "timeout", "oom_killed", "cancelled", "error")
SWEEP_MIN_AGE_S = 2
EGRESS = "192.0.2.10:443"  # TEST-NET-1: never routed; the cluster enforces no policy anyway (docs)


class Ctx:
    pass


C = Ctx()
C.notes = []


def wait_for(cond, timeout, what, every=0.2):
    """cond() until truthy (returned), at most timeout seconds."""
    deadline = time.time() + timeout
    last = None
    while True:
        last = cond()
        if last:
            return last
        if time.time() > deadline:
            raise Fail("timed out after %d s waiting for %s" % (timeout, what))
        time.sleep(every)


def cluster(*args, timeout=600):
    r = subprocess.run([CLUSTER] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def kubectl(*args, kubeconfig=None, timeout=60, stdin=None):
    argv = [C.kubectl, "--kubeconfig", kubeconfig or C.admin_kc, "--request-timeout=20s"] + list(args)
    r = subprocess.run(argv, input=stdin.encode() if stdin else None, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def kget(*args):
    """kubectl get ... -o json as the admin: the object, or None when it does not exist."""
    rc, out, err = kubectl("get", *args, "-o", "json")
    if rc != 0:
        check("NotFound" in err, "kubectl get %s: %s" % (" ".join(args), err.strip()))
        return None
    return json.loads(out)


# ---------------------------------------------------------------- the API server, directly

def api_server(method, path, token, body=None):
    """One request to the API server with a bearer token: (status, parsed body)."""
    ctx = ssl.create_default_context(cafile=C.env["EAI_CLUSTER_CA"])
    req = urllib.request.Request(C.env["EAI_CLUSTER_API_URL"] + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": "Bearer " + token, "Accept": "application/json",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20, context=ctx) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


# ---------------------------------------------------------------- pod events

class PodWatch:
    """`kubectl get pods -A --watch` as the admin, every event kept: what the
    kubelet reported (OOMKilled, DeadlineExceeded) is seen even though eaid
    deletes each pod right after.  Restarted when the watch breaks (the API
    server restart)."""

    def __init__(self):
        self.events = []
        self.lock = threading.Lock()
        self.stopping = False
        self.proc = None
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        dec = json.JSONDecoder()
        while not self.stopping:
            self.proc = subprocess.Popen([C.kubectl, "--kubeconfig", C.admin_kc, "get", "pods", "-A", "--watch",
                                          "--output-watch-events", "-o", "json"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            buf = ""
            for chunk in iter(lambda: self.proc.stdout.read1(65536), b""):
                buf += chunk.decode(errors="replace")
                while True:
                    s = buf.lstrip()
                    try:
                        obj, end = dec.raw_decode(s)
                    except ValueError:
                        break
                    buf = s[end:]
                    with self.lock:
                        self.events.append((time.time(), obj.get("type"), obj.get("object") or {}))
            self.proc.wait()
            if not self.stopping:
                time.sleep(0.5)

    def stop(self):
        self.stopping = True
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
        self.thread.join(10)

    def of(self, eid):
        """Every (type, pod) event of the pod of execution eid."""
        with self.lock:
            return [(t, o) for _, t, o in self.events
                    if ((o.get("metadata") or {}).get("labels") or {}).get(EXEC) == eid]


def container_state(pod):
    cs = ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]
    return cs.get("state") or {}


def terminated(pod):
    return container_state(pod).get("terminated") or {}


def pods_of(eid, ns):
    rc, out, err = kubectl("get", "pods", "-n", ns, "-l", "%s=%s" % (EXEC, eid), "-o", "name")
    check(rc == 0, "kubectl get pods: %s" % err)
    return out.split()


# ---------------------------------------------------------------- eaid

class Client:
    def __init__(self, key):
        self.key = key

    def req(self, method, path, body=None, headers=None, timeout=30):
        """(status, headers lower-cased, parsed body)"""
        h = {"Authorization": "Bearer " + self.key, "Content-Type": "application/json"}
        h.update(headers or {})
        r = urllib.request.Request(C.eaid.url + path, method=method,
                                   data=json.dumps(body).encode() if body is not None else None, headers=h)
        try:
            with urllib.request.urlopen(r, timeout=timeout) as resp:
                return resp.status, {k.lower(): v for k, v in resp.getheaders()}, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                b = json.loads(raw or b"null")
            except ValueError:
                b = raw
            return e.code, {k.lower(): v for k, v in e.headers.items()}, b

    def submit(self, command, limits=None, image=None, stdin=None, egress=None):
        body = {"profile": PROFILE, "image": image or C.py_image, "command": command}
        if egress:
            body["network"] = {"egress": egress}
        if limits:
            body["limits"] = limits
        if stdin is not None:
            body["stdin"] = stdin
        st, _, b = self.req("POST", "/v1/sandbox/executions", body)
        check(st == 202, "POST execution: %s %s" % (st, b))
        return b["id"]

    def get(self, eid):
        st, _, b = self.req("GET", "/v1/sandbox/executions/" + eid)
        check(st == 200, "GET %s: %s %s" % (eid, st, b))
        return b

    def wait(self, eid, timeout=180):
        return wait_for(lambda: (lambda d: d if d["status"] in TERMINAL else None)(self.get(eid)), timeout,
                        "execution %s to end" % eid, every=0.3)

    def wait_running(self, eid, timeout=120):
        d = wait_for(lambda: (lambda d: d if d["status"] != "queued" else None)(self.get(eid)), timeout,
                     "execution %s to start" % eid, every=0.2)
        check(d["status"] == "running", "execution %s: %s" % (eid, short(d)))
        return d

    def py(self, code, **kw):
        return self.wait(self.submit(["python3", "-c", code], **kw))


def short(d):
    return "status=%s exit=%s error=%s stdout=%r stderr=%r" % (
        d.get("status"), d.get("exit_code"), d.get("error"), (d.get("stdout") or "")[:300],
        (d.get("stderr") or "")[:300])


def write_config(auth, top=None, **extra):
    """eaid's config: the k8s backend with `auth` (kubeconfig or api_url + token_file);
    top: more top-level sections (e.g. collect caps)."""
    k8s = dict(auth)
    k8s.update({
        "runtime_class": C.env["EAI_CLUSTER_RUNTIME_CLASS"],
        "tenant_role": C.env["EAI_CLUSTER_TENANT_ROLE"],
        "service_account": C.env["EAI_CLUSTER_SERVICE_ACCOUNT"],
        "images": {"registries": [C.env["EAI_CLUSTER_REGISTRY"]]},
        "poll_ms": 250,
        "image_pull_grace_ms": 5000,
        "sweep_min_age_s": SWEEP_MIN_AGE_S,
        "token_reload_s": 3600,
    })
    k8s.update(extra)
    cfg = {
        "isolation": {"k8s": k8s},
        "profiles": {PROFILE: {
            "backend": "k8s", "runtime_class": "gvisor", "egress_allow": [EGRESS],
            "defaults": {"cpu": "500m", "memory": "256Mi", "timeout_s": 60},
            "max": {"cpu": "1", "memory": "512Mi", "timeout_s": 120}}},
    }
    cfg.update(top or {})
    # JSON is YAML: eaid reads it as its config file
    with open(C.config, "w") as f:
        json.dump(cfg, f, indent=1)


def eaid_ready():
    try:
        with urllib.request.urlopen(C.eaid.url + "/readyz", timeout=5) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def eaid_restart():
    C.eaid.stop(clean=False)
    C.eaid.start(ready_path="/readyz", timeout=90)


# ---------------------------------------------------------------- cases

CASES = []


def case(name):
    def deco(fn):
        CASES.append((name, fn))
        return fn
    return deco


@case("basic: print under gVisor in a pod -> succeeded, stdout, exit 0, backend k8s; the pod is deleted")
def t_basic():
    code = "import platform; print(2 + 2); print(platform.release())"
    eid = C.a.submit(["python3", "-c", code])
    d = C.a.wait(eid)
    check(d["status"] == "succeeded", short(d))
    lines = d["stdout"].splitlines()
    check(lines[:1] == ["4"] and len(lines) == 2 and lines[1].endswith("-gvisor"), "stdout %r" % d["stdout"])
    check(d["exit_code"] == 0 and d["backend"] == "k8s" and d["profile"] == PROFILE, short(d))
    check(d.get("error") is None, "error %r" % d.get("error"))
    evs = C.watch.of(eid)
    check(evs, "no pod event for %s" % eid)
    pod = evs[0][1]
    check(pod["metadata"]["namespace"] == C.ns_a, "namespace %s" % pod["metadata"]["namespace"])
    check(pod["spec"].get("runtimeClassName") == "gvisor", "runtimeClassName %r" % pod["spec"].get("runtimeClassName"))
    check(pod["spec"]["containers"][0]["image"] == C.py_image, "image %r" % pod["spec"]["containers"][0]["image"])
    wait_for(lambda: not pods_of(eid, C.ns_a), 30, "the pod of %s to be deleted" % eid)
    check(any(t == "DELETED" for t, _ in C.watch.of(eid)), "no DELETED event")
    C.basic_id = eid
    C.notes.append("basic: %s, kernel %s" % (d["usage"], lines[1]))


@case("exit codes: 0 -> succeeded, 3 -> failed with exit_code 3 (the kubelet's terminated.exitCode)")
def t_exit_codes():
    d = C.a.py("import sys; print('bye'); sys.exit(3)")
    check(d["status"] == "failed" and d["exit_code"] == 3 and d["stdout"] == "bye\n", short(d))
    check(d["signal"] is None, "signal %r" % d["signal"])
    d = C.a.py("import sys; sys.exit(0)")
    check(d["status"] == "succeeded" and d["exit_code"] == 0 and d["stdout"] == "", short(d))


@case("egress NetworkPolicy and input Secret accepted by the API server, owned by the pod; the garbage collector "
      "deletes them with it")
def t_owned_objects():
    eid = C.a.submit(["python3", "-c", "import sys, time\nprint(sys.stdin.read(), flush=True)\ntime.sleep(4)"],
                     stdin="secret input", egress=[EGRESS])
    wait_for(lambda: any(container_state(o).get("running") for _, o in C.watch.of(eid)), 120,
             "the container of %s to run" % eid)
    pod = C.watch.of(eid)[-1][1]
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    owner = [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}]
    np = kget("networkpolicy", name + "-egress", "-n", C.ns_a)
    check(np, "no egress policy %s-egress" % name)
    owned = [{k: o.get(k) for k in ("apiVersion", "kind", "name", "uid")} for o in np["metadata"].get("ownerReferences", [])]
    check(owned == owner, "policy owners %r" % np["metadata"].get("ownerReferences"))
    check(np["spec"]["policyTypes"] == ["Egress"] and
          np["spec"]["podSelector"] == {"matchLabels": {EXEC: eid}}, "policy spec %r" % np["spec"])
    rules = np["spec"]["egress"]
    check(any(t.get("ipBlock", {}).get("cidr") == "192.0.2.10/32" for r in rules for t in r.get("to", [])) and
          any(p.get("port") == 443 and p.get("protocol") == "TCP" for r in rules for p in r.get("ports", [])),
          "egress rules %r" % rules)
    sec = kget("secret", name, "-n", C.ns_a)
    check(sec and sec.get("immutable") is True, "input Secret %r" % (sec and sec.get("immutable")))
    owned = [{k: o.get(k) for k in ("apiVersion", "kind", "name", "uid")} for o in sec["metadata"].get("ownerReferences", [])]
    check(owned == owner, "secret owners %r" % sec["metadata"].get("ownerReferences"))
    d = C.a.wait(eid, 120)
    check(d["status"] == "succeeded" and d["stdout"] == "secret input\n", short(d))
    wait_for(lambda: not pods_of(eid, C.ns_a), 30, "the pod of %s to be deleted" % eid)
    t0 = time.time()
    wait_for(lambda: kget("networkpolicy", name + "-egress", "-n", C.ns_a) is None and
             kget("secret", name, "-n", C.ns_a) is None, 60, "the garbage collector to delete the policy and the Secret")
    C.notes.append("garbage collector: policy and Secret gone %.1f s after the pod" % (time.time() - t0))


@case("stdout and stderr: both arrive, merged by the log API into stdout (stderr empty: documented)")
def t_streams():
    d = C.a.py("import sys\nprint('to-out', flush=True)\nprint('to-err', file=sys.stderr, flush=True)\n"
               "print('out-again', flush=True)")
    check(d["status"] == "succeeded", short(d))
    lines = d["stdout"].splitlines()
    # each stream keeps its own order; between the two streams the log has no order to keep
    check(sorted(lines) == ["out-again", "to-err", "to-out"] and lines.index("to-out") < lines.index("out-again"),
          "stdout %r" % d["stdout"])
    check(d["stderr"] == "", "stderr %r" % d["stderr"])
    C.notes.append("stdout+stderr through the log API: %r" % d["stdout"])


@case("stdin delivered through the input Secret")
def t_stdin():
    d = C.a.wait(C.a.submit(["python3", "-c", "import sys; print(sys.stdin.read().upper(), end='')"],
                            stdin="hello from stdin\n"))
    check(d["status"] == "succeeded" and d["stdout"] == "HELLO FROM STDIN\n", short(d))


@case("seed 1, network refused: an outside address, eaid's port, a host listener, the bridge, DNS")
def t_network():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(8)
    lst.settimeout(0.3)
    lport = lst.getsockname()[1]
    got = []
    stop = threading.Event()

    def acceptor():
        while not stop.is_set():
            try:
                c, _ = lst.accept()
                got.append(1)
                c.close()
            except OSError:
                pass
    th = threading.Thread(target=acceptor, daemon=True)
    th.start()
    code = ("import socket, json\nres = {}\n"
            "def t(name, host, port):\n"
            "    s = socket.socket(); s.settimeout(3)\n"
            "    try:\n        s.connect((host, port)); res[name] = 'connected'\n"
            "    except Exception as e:\n        res[name] = 'error:' + type(e).__name__\n"
            "    finally:\n        s.close()\n"
            "t('outside', '192.0.2.1', 80)\n"
            "t('eaid', '127.0.0.1', %d)\n"
            "t('listener', '127.0.0.1', %d)\n"
            "t('bridge', '198.18.0.1', 80)\n"
            "try:\n    socket.getaddrinfo('example.com', 80); res['dns'] = 'resolved'\n"
            "except Exception as e:\n    res['dns'] = 'error:' + type(e).__name__\n"
            "print(json.dumps(res))\n") % (C.eaid.port, lport)
    try:
        d = C.a.py(code)
    finally:
        stop.set()
        th.join()
        lst.close()
    check(d["status"] == "succeeded", short(d))
    res = json.loads(d["stdout"])
    for k in ("outside", "eaid", "listener", "bridge", "dns"):
        check(res.get(k, "").startswith("error"), "%s reachable: %r" % (k, res))
    check(not got, "the host listener received a connection")
    C.notes.append("network from the pod: %s" % res)


NP_PEER = "198.18.0.250"  # on the pod bridge, above what host-local hands out here
NP_BRIDGE = "eaicni0"     # cluster.sh's BRIDGE


def ip(*args, check_rc=True):
    r = subprocess.run(["ip"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    if check_rc:
        check(r.returncode == 0, "ip %s: %s" % (" ".join(args), r.stderr.decode(errors="replace")))
    return r


@case("NetworkPolicy not enforced here (docs): default-deny in place, a peer the test starts in its own netns "
      "on the pod bridge (198.18.0.250) is reached from the pod; without that peer nothing else is")
def t_netpol_not_enforced():
    pol = kget("networkpolicy", "eai-default-deny", "-n", C.ns_a)
    check(pol and pol["spec"].get("policyTypes") == ["Ingress", "Egress"] and not pol["spec"].get("egress"),
          "eai-default-deny: %r" % pol)
    tag = "%d" % (os.getpid() % 100000)
    ns, host_if, peer_if = "eai-np-" + tag, "eainph" + tag, "eainpp" + tag
    ip("netns", "add", ns)
    server = None
    try:
        ip("link", "add", host_if, "type", "veth", "peer", "name", peer_if)
        ip("link", "set", peer_if, "netns", ns)
        ip("link", "set", host_if, "master", NP_BRIDGE)
        ip("link", "set", host_if, "up")
        ip("-n", ns, "link", "set", "lo", "up")
        ip("-n", ns, "addr", "add", NP_PEER + "/24", "dev", peer_if)
        ip("-n", ns, "link", "set", peer_if, "up")
        # the peer: accepts one connection at a time, answers "peer", counts them; bounded by its own timeout
        srv = ("import socket, sys\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
               "s.bind(('%s', 8080)); s.listen(4); s.settimeout(120)\nprint('listening', flush=True)\n"
               "while True:\n    c, a = s.accept(); c.sendall(b'peer'); c.close(); print('conn', a[0], flush=True)\n"
               % NP_PEER)
        server = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", srv], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        check(server.stdout.readline().strip() == b"listening", "the peer did not start")
        code = ("import socket\ns = socket.create_connection(('%s', 8080), timeout=5)\n"
                "print(s.recv(16).decode())\n" % NP_PEER)
        d = C.a.py(code)
        check(d["status"] == "succeeded" and d["stdout"] == "peer\n",
              "the pod did not reach the peer although no policy engine runs: " + short(d))
        line = server.stdout.readline().decode().strip()
        check(line.startswith("conn 198.18.0."), "the peer saw %r" % line)
        C.notes.append("NetworkPolicy: eai-default-deny in %s, yet the pod reached %s:8080 on the bridge "
                       "(peer saw %s): not enforced, as docs/kubernetes.md says" % (C.ns_a, NP_PEER, line))
    finally:
        if server:
            server.kill()
            server.wait(10)
        ip("link", "del", host_if, check_rc=False)
        ip("netns", "del", ns, check_rc=False)


@case("seed 2, timeout: timeout_s 4 busy loop -> the kubelet ends the pod (DeadlineExceeded), status timeout")
def t_timeout():
    eid = C.a.submit(["python3", "-c", "print('before-loop', flush=True)\nwhile True:\n    pass\n"],
                     limits={"timeout_s": 4})
    d = C.a.wait(eid, 120)
    check(d["status"] == "timeout", short(d))
    check("before-loop" in (d.get("stdout") or ""), "output so far lost: %r" % d.get("stdout"))
    ev = [o for _, o in C.watch.of(eid) if (o.get("status") or {}).get("reason") == "DeadlineExceeded"]
    check(ev and ev[-1]["status"]["phase"] == "Failed", "the API never showed the pod Failed/DeadlineExceeded: %r" %
          [((o.get("status") or {}).get("phase"), (o.get("status") or {}).get("reason")) for _, o in C.watch.of(eid)])
    check(ev[-1]["spec"].get("activeDeadlineSeconds") == 4, "activeDeadlineSeconds %r" % ev[-1]["spec"])
    wait_for(lambda: not pods_of(eid, C.ns_a), 30, "the pod of %s to be deleted" % eid)
    C.notes.append("timeout 4 s: created->finished %s -> %s" % (d["created_at"], d["finished_at"]))


@case("seed 3, cross-tenant: tenant B gets 404 for A's execution, exactly like a missing id")
def t_cross_tenant():
    eid = C.basic_id
    missing = "sbx_" + str(uuid.uuid4())
    for method, suffix in (("GET", ""), ("POST", "/cancel"), ("GET", "/events"), ("GET", "?wait_s=1")):
        sa, _, ba = C.b.req(method, "/v1/sandbox/executions/" + eid + suffix)
        sm, _, bm = C.b.req(method, "/v1/sandbox/executions/" + missing + suffix)
        check(sa == 404 and ba["error"]["code"] == "not_found", "%s %s: %s %r" % (method, suffix, sa, ba))
        ba["error"].pop("request_id", None)
        bm["error"].pop("request_id", None)
        check((sa, ba) == (sm, bm), "%s %s differs from a missing id: %r vs %r" % (method, suffix, ba, bm))
    st, _, b = C.b.req("GET", "/v1/sandbox/executions?limit=100")
    check(st == 200 and all(i["id"] != eid for i in b["items"]), "A's execution listed for B")
    check(C.a.get(eid)["status"] == "succeeded", "B's cancel touched A's execution")


@case("seed 4, French: Accept-Language fr -> message in French, Content-Language fr")
def t_french():
    st, h, b = C.a.req("GET", "/v1/sandbox/executions/sbx_" + str(uuid.uuid4()), headers={"Accept-Language": "fr"})
    check(st == 404 and b["error"]["code"] == "not_found", "%s %r" % (st, b))
    e = b["error"]
    check(e["message"] == e["message_i18n"]["fr"] != e["message_i18n"]["en"], "not French: %r" % e)
    check(h.get("content-language") == "fr", "Content-Language %r" % h.get("content-language"))
    # and an error of the backend itself: a refused image, in French
    st, h, b = C.a.req("POST", "/v1/sandbox/executions",
                       {"profile": PROFILE, "image": C.py_image, "command": ["true"], "limits": {"timeout_s": 100000}},
                       headers={"Accept-Language": "fr"})
    check(st == 422 and b["error"]["message"] == b["error"]["message_i18n"]["fr"], "422 in French: %s %r" % (st, b))
    C.notes.append("French: %s" % e["message"])


@case("OOM: 64Mi limit, 200 MB allocation -> oom_killed, from the kubelet's terminated.reason OOMKilled")
def t_oom():
    eid = C.a.submit(["python3", "-c", "x = b'x' * (200 * 1024 * 1024)\nprint(len(x))"], limits={"memory": "64Mi"})
    d = C.a.wait(eid, 120)
    reasons = [(o.get("status") or {}).get("phase", "") + "/" + str(terminated(o).get("reason"))
               for _, o in C.watch.of(eid)]
    check(d["status"] == "oom_killed", "%s; pod states seen: %r" % (short(d), reasons))
    check(any(terminated(o).get("reason") == "OOMKilled" for _, o in C.watch.of(eid)),
          "the API never said OOMKilled: %r" % reasons)
    pod = C.watch.of(eid)[0][1]
    lim = pod["spec"]["containers"][0]["resources"]["limits"]["memory"]
    check(lim in ("64Mi", "67108864"), "pod memory limit %r" % lim)
    C.notes.append("OOM: pod states %s" % reasons)


@case("cancel: a running execution -> 202, cancelled, its pod deleted")
def t_cancel():
    eid = C.a.submit(["python3", "-c", "import time\nprint('started', flush=True)\ntime.sleep(60)"])
    C.a.wait_running(eid)
    wait_for(lambda: pods_of(eid, C.ns_a), 30, "the pod of %s" % eid)
    t0 = time.time()
    st, _, b = C.a.req("POST", "/v1/sandbox/executions/%s/cancel" % eid)
    check(st == 202, "cancel: %s %r" % (st, b))
    d = C.a.wait(eid, 60)
    check(d["status"] == "cancelled", short(d))
    wait_for(lambda: not pods_of(eid, C.ns_a), 30, "the pod of %s to be deleted" % eid)
    check(any(t == "DELETED" for t, _ in C.watch.of(eid)), "no DELETED event")
    st, _, b = C.a.req("POST", "/v1/sandbox/executions/%s/cancel" % eid)
    check(st == 409 and b["error"]["code"] == "already_finished", "second cancel %s %r" % (st, b))
    C.notes.append("cancel: cancelled and pod gone %.1f s after the request" % (time.time() - t0))


@case("an image the registry does not have -> error image_missing (the kubelet's ErrImagePull)")
def t_image_missing():
    ref = "%s/eai/no-such-image:%s" % (C.env["EAI_CLUSTER_REGISTRY"], uuid.uuid4().hex[:8])
    eid = C.a.submit(["true"], image=ref)
    d = C.a.wait(eid, 120)
    check(d["status"] == "error" and (d.get("error") or {}).get("code") == "image_missing", short(d))
    waits = {(((o.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {})
             .get("waiting", {}).get("reason") for _, o in C.watch.of(eid)}
    check(waits & {"ErrImagePull", "ImagePullBackOff"}, "kubelet reasons seen: %r" % waits)
    wait_for(lambda: not pods_of(eid, C.ns_a), 30, "the pod of %s to be deleted" % eid)


@case("a pod the scheduler cannot place: eaid's own watchdog (timeout + deadline_grace_ms) ends it, sandbox_unavailable")
def t_unschedulable():
    kc = {"kubeconfig": C.env["EAI_CLUSTER_EAID_KUBECONFIG"]}
    write_config(kc, node_selector={"eai-sandbox.dev/test-nowhere": "true"}, deadline_grace_ms=3000)
    eaid_restart()
    try:
        t0 = time.time()
        eid = C.a.submit(["true"], limits={"timeout_s": 3})
        d = C.a.wait(eid, 60)
        took = time.time() - t0
        check(d["status"] == "error" and (d.get("error") or {}).get("code") == "sandbox_unavailable" and
              "did not start within" in d["error"]["message"], short(d))
        check(5.5 < took < 30, "ended after %.1f s (watchdog at 3 + 3 s)" % took)
        conds = [c for _, o in C.watch.of(eid) for c in (o.get("status") or {}).get("conditions") or []
                 if c.get("type") == "PodScheduled"]
        check(any(c.get("reason") == "Unschedulable" for c in conds), "the scheduler never said Unschedulable: %r" % conds)
        wait_for(lambda: not pods_of(eid, C.ns_a), 30, "the pod of %s to be deleted" % eid)
        C.notes.append("unschedulable: error after %.1f s: %s" % (took, d["error"]["message"]))
    finally:
        write_config(kc)
        eaid_restart()


@case("tenant namespace, RoleBinding, default-deny NetworkPolicy as the API server keeps them; Pod Security enforced")
def t_namespace():
    ns = kget("namespace", C.ns_a)
    check(ns, "namespace %s missing" % C.ns_a)
    lab = ns["metadata"]["labels"]
    check(lab.get(MANAGED) == "eai-sandbox" and lab.get("eai-sandbox.dev/tenant") == C.tenant_a, "labels %r" % lab)
    for m in ("enforce", "warn", "audit"):
        check(lab.get("pod-security.kubernetes.io/" + m) == "restricted", "pod-security %s: %r" % (m, lab))
    rb = kget("rolebinding", "eai-sandbox", "-n", C.ns_a)
    check(rb, "RoleBinding eai-sandbox missing")
    check(rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": C.env["EAI_CLUSTER_TENANT_ROLE"]}, "roleRef %r" % rb["roleRef"])
    sa_ns, sa = C.env["EAI_CLUSTER_SERVICE_ACCOUNT"].split("/")
    check(rb["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}], "subjects %r" % rb["subjects"])
    np = kget("networkpolicy", "eai-default-deny", "-n", C.ns_a)
    check(np, "NetworkPolicy eai-default-deny missing")
    spec = np["spec"]
    check(spec.get("podSelector") == {} and sorted(spec.get("policyTypes", [])) == ["Egress", "Ingress"] and
          not spec.get("ingress") and not spec.get("egress"), "default-deny spec %r" % spec)
    # the other tenant's namespace was made the same way
    check(kget("networkpolicy", "eai-default-deny", "-n", C.ns_b), "no default-deny in %s" % C.ns_b)
    # the API server itself refuses a pod below the restricted standard there
    rc, out, err = kubectl("run", "privileged-probe", "-n", C.ns_a, "--image", C.env["EAI_CLUSTER_BUSYBOX_IMAGE"],
                           "--restart=Never", "--overrides",
                           json.dumps({"spec": {"containers": [{"name": "privileged-probe",
                                                                "image": C.env["EAI_CLUSTER_BUSYBOX_IMAGE"],
                                                                "securityContext": {"runAsUser": 0}}]}}),
                           "--", "true")
    check(rc != 0 and 'violates PodSecurity "restricted:latest"' in err, "a root pod was admitted: %s %s" % (out, err))
    C.notes.append("Pod Security: %s" % err.strip().splitlines()[0][:160])


@case("RBAC minimal: the API server answers 403 to what eaid was not granted; executions still work")
def t_rbac():
    token = open(C.eaid_token_file).read().strip()
    refused = [
        ("DELETE", "/api/v1/namespaces/" + C.ns_a, None),
        ("GET", "/api/v1/namespaces/%s/secrets" % C.ns_a, None),
        ("GET", "/api/v1/pods", None),
        ("GET", "/api/v1/secrets", None),
        ("POST", "/api/v1/namespaces/kube-system/pods",
         {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "eai-probe"},
          "spec": {"containers": [{"name": "c", "image": C.env["EAI_CLUSTER_BUSYBOX_IMAGE"]}]}}),
        ("PATCH", "/api/v1/namespaces/kube-system", None),
        ("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
         {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "eai-probe"},
          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
          "subjects": [{"kind": "ServiceAccount", "name": "eai-sandbox", "namespace": "eai-system"}]}),
        # a RoleBinding to a role other than the tenant role: `bind` is on that one only
        ("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings" % C.ns_a,
         {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "eai-probe"},
          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
          "subjects": [{"kind": "ServiceAccount", "name": "eai-sandbox", "namespace": "eai-system"}]}),
    ]
    for method, path, body in refused:
        st, b = api_server(method, path, token, body)
        check(st == 403 and isinstance(b, dict) and b.get("reason") == "Forbidden",
              "%s %s as eaid: %s %r" % (method, path, st, b))
        if method == "DELETE":
            example = b.get("message")
    # kubectl's view of the same
    for verb in (("delete", "namespaces"), ("get", "secrets", "-n", C.ns_a), ("list", "pods", "-A"),
                 ("update", "namespaces"), ("create", "pods", "-n", "kube-system")):
        rc, out, err = kubectl("auth", "can-i", *verb, kubeconfig=C.env["EAI_CLUSTER_EAID_KUBECONFIG"])
        check(out.strip() == "no", "can-i %s: %r %r" % (" ".join(verb), out, err))
    # and what it was granted is enough
    st, b = api_server("GET", "/api/v1/namespaces/%s/pods" % C.ns_a, token)
    check(st == 200, "list pods in the tenant namespace: %s" % st)
    d = C.a.py("print('still works')")
    check(d["status"] == "succeeded" and d["stdout"] == "still works\n", short(d))
    C.notes.append("RBAC: %d requests refused 403, e.g. %s" % (len(refused), example))


@case("API server killed mid-execution and restarted: the poll recovers, the execution ends succeeded")
def t_apiserver_restart():
    eid = C.a.submit(["python3", "-c", "import time\nprint('before', flush=True)\ntime.sleep(20)\nprint('after')"],
                     limits={"timeout_s": 120})
    # the container itself running (eaid's `running` is earlier: the kubelet may still be mounting the
    # input Secret, and a kubelet cut off from the API server then backs off for tens of seconds)
    wait_for(lambda: any(container_state(o).get("running") for _, o in C.watch.of(eid)), 120,
             "the container of %s to run" % eid)
    t0 = time.time()
    rc, out, err = cluster("restart-apiserver", "8", timeout=300)
    check(rc == 0, "restart-apiserver: %s %s" % (rc, err[-2000:]))
    back = time.time() - t0
    d = C.a.wait(eid, 180)
    check(d["status"] == "succeeded" and d["stdout"] == "before\nafter\n", short(d))
    wait_for(lambda: not pods_of(eid, C.ns_a), 30, "the pod of %s to be deleted" % eid)
    check("the API server answers again after" in C.eaid.log_text(), "no outage seen in eaid's log")
    # eaid's probe may have seen the API down (not ready: 503 to new executions) until its next round
    t1 = time.time()
    wait_for(lambda: eaid_ready(), 60, "eaid ready again")
    ready_s = time.time() - t1
    d = C.a.py("print('after the restart')")
    check(d["status"] == "succeeded", short(d))
    C.notes.append("API server restart: back after %.1f s (8 s down; %s); eaid ready %.1f s after the execution"
                   % (back, err.strip().splitlines()[-1], ready_s))


@case("watch: the pod finishes while the API server is down after an etcd compaction -> a real 410 Gone, "
      "relist, re-watch; the watch ends the execution (the poll slowed to minutes)")
def t_watch_gone():
    # the poll as a far fallback: after the outage it waits poll_ms (10 min) before its next read
    write_config({"kubeconfig": C.env["EAI_CLUSTER_EAID_KUBECONFIG"]}, poll_ms=600000)
    eaid_restart()
    try:
        mark = len(C.eaid.log_text())
        eid = C.a.submit(["python3", "-c", "import time\nprint('before', flush=True)\ntime.sleep(4)\nprint('after')"],
                         limits={"timeout_s": 120})
        wait_for(lambda: any(container_state(o).get("running") for _, o in C.watch.of(eid)), 120,
                 "the container of %s to run" % eid)
        listed = "watch of pods in %s: listed " % C.ns_a
        check(listed in C.eaid.log_text()[mark:], "eaid's watch never listed %s" % C.ns_a)
        # etcd forgets every revision before now; then the API server dies while the program runs
        rc, out, err = cluster("compact-etcd", timeout=60)
        check(rc == 0 and out.strip().isdigit(), "compact-etcd: %s %s" % (rc, err))
        t_kill = time.time()
        rc, out2, err2 = cluster("restart-apiserver", "10", timeout=300)
        check(rc == 0, "restart-apiserver: %s %s" % (rc, err2[-2000:]))
        t_back = time.time()
        d = C.a.wait(eid, 60)
        t_end = time.time()
        check(d["status"] == "succeeded" and d["stdout"] == "before\nafter\n", short(d))
        fin = [terminated(o).get("finishedAt") for _, o in C.watch.of(eid) if terminated(o).get("finishedAt")]
        check(fin, "the pod's end was never seen")
        fin_t = calendar.timegm(time.strptime(fin[0], "%Y-%m-%dT%H:%M:%SZ"))
        check(fin_t <= t_back, "the program did not end while the API server was away (%s, back %.0f)" % (fin[0], t_back))
        log = C.eaid.log_text()[mark:]
        gone = [ln for ln in log.splitlines() if "watch of pods in %s: 410 Gone from resourceVersion" % C.ns_a in ln]
        check(gone, "no 410 Gone in eaid's log")
        check(log.count(listed) >= 2, "no relist after the 410")
        check("%s: terminal state seen by the watch" % eid in log, "the watch did not end the execution")
        wait_for(lambda: not pods_of(eid, C.ns_a), 30, "the pod of %s to be deleted" % eid)
        C.notes.append("watch: etcd compacted at %s, pod finished %s while the API server was down, back %.1f s after "
                       "the kill, execution ended %.1f s after that; eaid: %s" % (
                           out.strip(), fin[0], t_back - t_kill, t_end - t_back, gone[0].split("410 Gone", 1)[1][:300]))
        d = C.a.py("print('after the 410')")
        check(d["status"] == "succeeded", short(d))
    finally:
        write_config({"kubeconfig": C.env["EAI_CLUSTER_EAID_KUBECONFIG"]})
        eaid_restart()


@case("usage measured by the kubelet (kubelet_stats): an idle program holding 150 MB for 5 s -> cpu_seconds far "
      "below 0.5 CPU x duration, memory_mb_seconds / duration near its working set (not the 256Mi limit)")
def t_usage():
    write_config({"kubeconfig": C.env["EAI_CLUSTER_EAID_KUBECONFIG"]}, kubelet_stats=True, usage_interval_ms=500)
    eaid_restart()
    try:
        mark = len(C.eaid.log_text())
        code = ("import time\nb = bytearray(150 * 1024 * 1024)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\n"
                "time.sleep(5)\nprint('held')")
        eid = C.a.submit(["python3", "-c", code])
        d = C.a.wait(eid)
        check(d["status"] == "succeeded" and d["stdout"] == "held\n", short(d))
        u = d["usage"]
        dur = u["duration_s"]
        check(dur >= 4, "duration %r" % u)
        line = [ln for ln in C.eaid.log_text()[mark:].splitlines() if eid in ln and "usage from the kubelet" in ln]
        check(line, "no kubelet usage line for %s in eaid's log" % eid)
        check(u["cpu_seconds"] < 0.5 * dur * 0.5, "cpu_seconds %r is not measured (reserved: %.2f)" % (u, 0.5 * dur))
        mean = u["memory_mb_seconds"] / dur
        check(80 <= mean <= 300, "mean working set %.1f MiB (reserved would be 256): %r" % (mean, u))
        C.notes.append("usage from the kubelet: %s; API usage %r (reserved figures would be cpu %.2f s, %.0f MB.s)"
                       % (line[0].split("usage from the kubelet: ", 1)[1], u, 0.5 * dur, 256 * dur))
    finally:
        write_config({"kubeconfig": C.env["EAI_CLUSTER_EAID_KUBECONFIG"]})
        eaid_restart()


COLLECTOR = os.path.join(eaid_env.BUILD, "plugins", "eai-k8s-collector")


def collector_image():
    """The collect sidecar's image: the build's static eai-k8s-collector alone, pushed once."""
    if getattr(C, "collector_image", None):
        return C.collector_image
    check(os.path.exists(COLLECTOR), "%s missing (build first)" % COLLECTOR)
    root = os.path.join(C.tmp, "collector-rootfs")
    os.makedirs(root, exist_ok=True)
    import shutil
    shutil.copy2(COLLECTOR, os.path.join(root, "eai-k8s-collector"))
    rc, out, err = cluster("push", root, "eai/collector:test", "/eai-k8s-collector", timeout=300)
    check(rc == 0 and out.strip(), "push collector: %s" % err[-2000:])
    C.collector_image = out.strip().splitlines()[-1]
    return C.collector_image


def collect_run(body):
    st, _, b = C.a.req("POST", "/v1/sandbox/executions", dict({"profile": PROFILE, "image": C.py_image}, **body))
    check(st == 202, "POST: %s %s" % (st, b))
    d = C.a.wait(b["id"])
    return d, {f["path"]: f for f in d.get("files") or []}


def file_bytes(eid, path):
    h = {"Authorization": "Bearer " + C.a.key}
    r = urllib.request.Request(C.eaid.url + "/v1/sandbox/executions/%s/files%s" % (eid, path), headers=h)
    with urllib.request.urlopen(r, timeout=30) as resp:
        return resp.read()


@case("collect (collector_image): plugins/common's shared cases (tests/sandbox/sandbox_cases.c test_files) through "
      "eaid on the cluster: same files, order, symlinks and FIFOs left out, per-file and file-count caps -> "
      "files_truncated, refusals of bad paths")
def t_collect():
    import hashlib
    img = collector_image()
    kc = {"kubeconfig": C.env["EAI_CLUSTER_EAID_KUBECONFIG"]}
    try:
        write_config(kc, top={"collect": {"max_file_bytes": 4096}}, collector_image=img)
        eaid_restart()
        # sandbox_cases.c's script, minus `echo more >> /tmp/in/data.csv`: input files are mounted
        # read-only in a pod (docs/kubernetes.md, "Limits")
        script = ("set -e; mkdir -p /tmp/outputs/sub; wc -c < /tmp/in/deep/blob.bin; "
                  "tr a-z A-Z < /tmp/in/data.csv > /tmp/outputs/result.csv; "
                  "echo nested > /tmp/outputs/sub/n.txt; echo one > /tmp/single.txt; "
                  "ln -s /etc/passwd /tmp/outputs/link; ln -s / /tmp/outputs/rootdir; "
                  "mkfifo /tmp/outputs/fifo; yes | head -c 5000 > /tmp/outputs/zbig.bin")
        d, files = collect_run({"command": ["sh", "-c", script],
                                "files": [{"path": "/tmp/in/data.csv", "content": "a,b\n1,2\n"},
                                          {"path": "/tmp/in/deep/blob.bin", "content_b64": "AAEC"}],
                                "collect": ["/tmp/outputs", "/tmp/single.txt", "/tmp/missing"]})
        check(d["status"] == "succeeded" and d["stdout"].strip() == "3", short(d))
        paths = [f["path"] for f in d.get("files") or []]
        check(paths == ["/tmp/outputs/result.csv", "/tmp/outputs/sub/n.txt", "/tmp/single.txt"],
              "collected %r" % paths)
        want = {"/tmp/outputs/result.csv": b"A,B\n1,2\n", "/tmp/outputs/sub/n.txt": b"nested\n",
                "/tmp/single.txt": b"one\n"}
        for f in d["files"]:
            check(f["size"] == len(want[f["path"]]) and f["sha256"] == hashlib.sha256(want[f["path"]]).hexdigest(),
                  "%r" % f)
            check(file_bytes(d["id"], f["path"]) == want[f["path"]], "content of %s" % f["path"])
        check(d.get("files_truncated") is True, "zbig.bin (5000 > 4096) did not set files_truncated: %r" % d)
        # /tmp: every regular file, the input files included, binary exact
        d, _ = collect_run({"command": ["sh", "-c", "printf '\\000\\377x' > /tmp/b.bin"],
                            "files": [{"path": "/tmp/in/x.txt", "content": "x"}], "collect": ["/tmp"]})
        paths = [f["path"] for f in d.get("files") or []]
        check(d["status"] == "succeeded" and paths == ["/tmp/b.bin", "/tmp/in/x.txt"], "%r %s" % (paths, short(d)))
        check(file_bytes(d["id"], "/tmp/b.bin") == b"\x00\xffx", "binary content")
        check(not d.get("files_truncated"), "truncated without a cap hit: %r" % d)
        # refusals: the same 422 whatever the backend (core and the backend's published limits)
        for bad, where in ((["/etc/passwd"], "/collect/0"), (["/tmp/../etc"], "/collect/0"),
                           (["/tmp/" + "x" * 256], "/collect/0")):
            st, _, b = C.a.req("POST", "/v1/sandbox/executions",
                               {"profile": PROFILE, "image": C.py_image, "command": ["true"], "collect": bad})
            check(st == 422 and any(x.get("path") == where for x in (b.get("error", {}).get("details") or [])),
                  "collect %r: %s %s" % (bad[0][:40], st, json.dumps(b)[:300]))
        # the file-count cap
        write_config(kc, top={"collect": {"max_files": 2}}, collector_image=img)
        eaid_restart()
        d, _ = collect_run({"command": ["sh", "-c", "mkdir /tmp/o; for i in 1 2 3 4 5; do echo $i > /tmp/o/f$i; done"],
                            "collect": ["/tmp/o"]})
        paths = [f["path"] for f in d.get("files") or []]
        check(paths == ["/tmp/o/f1", "/tmp/o/f2"] and d.get("files_truncated") is True, "%r %r" % (paths, d))
        # a collector image the registry lacks: the operator's error, said as such (not image_missing)
        write_config(kc, collector_image=img.rsplit(":", 1)[0] + ":absent")
        eaid_restart()
        d, _ = collect_run({"command": ["true"]})
        check(d["status"] == "error" and d["error"]["code"] == "sandbox_failed"
              and "collect sidecar" in d["error"]["message"], short(d))
        C.notes.append("missing collector image: %s" % d["error"]["message"][:200])
        C.notes.append("collect through the sidecar: shared cases hold (3 files in order, caps -> files_truncated)")
    finally:
        write_config(kc)
        eaid_restart()


@case("eaid killed (-9) mid-execution and restarted: it finds the pod by label, the execution ends succeeded")
def t_eaid_recover():
    eid = C.a.submit(["python3", "-c", "import time\nprint('before', flush=True)\ntime.sleep(12)\nprint('after')"],
                     limits={"timeout_s": 120})
    wait_for(lambda: any(container_state(o).get("running") for _, o in C.watch.of(eid)), 120,
             "the container of %s to run" % eid)
    C.eaid.proc.send_signal(signal.SIGKILL)
    C.eaid.proc.wait(30)
    check(pods_of(eid, C.ns_a), "the pod went with eaid")
    C.eaid.start(ready_path="/readyz", timeout=90)
    d = C.a.wait(eid, 120)
    check(d["status"] == "succeeded" and d["stdout"] == "before\nafter\n", short(d))
    check("reattached to pod sbx-" in C.eaid.log_text(), "no reattach in eaid's log")
    wait_for(lambda: not pods_of(eid, C.ns_a), 30, "the pod of %s to be deleted" % eid)


@case("token rotation: eaid's token file rewritten, the old token revoked by the API server -> eaid follows")
def t_token_rotation():
    sa_ns, sa = C.env["EAI_CLUSTER_SERVICE_ACCOUNT"].split("/")
    tokens = []
    for i in (1, 2):
        name = "eai-test-token-%d" % i
        rc, out, err = kubectl("-n", sa_ns, "create", "secret", "generic", name, "--from-literal=k=v")
        check(rc == 0 or "AlreadyExists" in err, "secret %s: %s" % (name, err))
        rc, out, err = kubectl("-n", sa_ns, "create", "token", sa, "--duration", "1h", "--bound-object-kind",
                               "Secret", "--bound-object-name", name)
        check(rc == 0 and out.strip(), "create token: %s" % err)
        tokens.append(out.strip())
    tfile = os.path.join(C.tmp, "rotating.token")

    def put(tok):
        with open(tfile + ".new", "w") as f:
            f.write(tok + "\n")
        os.chmod(tfile + ".new", 0o600)
        os.rename(tfile + ".new", tfile)
    put(tokens[0])
    write_config({"api_url": C.env["EAI_CLUSTER_API_URL"], "ca_file": C.env["EAI_CLUSTER_CA"], "token_file": tfile})
    eaid_restart()
    d = C.a.py("print('token one')")
    check(d["status"] == "succeeded", "with the first token: " + short(d))
    # rotate: the new token in the file, the old one revoked (its bound Secret deleted)
    put(tokens[1])
    rc, out, err = kubectl("-n", sa_ns, "delete", "secret", "eai-test-token-1")
    check(rc == 0, "delete secret: %s" % err)
    t0 = time.time()
    wait_for(lambda: api_server("GET", "/version", tokens[0])[0] == 401, 60, "the API server to refuse the old token")
    C.notes.append("token rotation: the API server refused the revoked token %.1f s after its Secret was deleted"
                   % (time.time() - t0))
    check(api_server("GET", "/version", tokens[1])[0] == 200, "the new token is refused")
    d = C.a.py("print('token two')")
    check(d["status"] == "succeeded" and d["stdout"] == "token two\n",
          "after the rotation (token_reload_s 3600, so through a 401 and a re-read): " + short(d))
    write_config({"kubeconfig": C.env["EAI_CLUSTER_EAID_KUBECONFIG"]})
    eaid_restart()
    kubectl("-n", sa_ns, "delete", "secret", "eai-test-token-2")


def sweep_pod(name, ns, command, labels):
    img = C.env["EAI_CLUSTER_BUSYBOX_IMAGE"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"runtimeClassName": "gvisor", "restartPolicy": "Never", "automountServiceAccountToken": False,
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "sandbox", "image": img, "command": command,
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}}}]}}


@case("sweep at start-up: our finished pods older than sweep_min_age_s deleted; running and foreign pods kept")
def t_sweep():
    ns = C.ns_b
    ours = {MANAGED: "eai-sandbox", "app.kubernetes.io/component": "sandbox"}
    pods = {"sweep-done": (["true"], dict(ours, **{EXEC: "sbx_sweep-done"})),
            "sweep-running": (["sleep", "600"], dict(ours, **{EXEC: "sbx_sweep-running"})),
            "foreign-done": (["true"], {"app": "not-eai"})}
    for name, (cmd, labels) in pods.items():
        rc, out, err = kubectl("apply", "-f", "-", stdin=json.dumps(sweep_pod(name, ns, cmd, labels)))
        check(rc == 0, "apply %s: %s" % (name, err))

    def phase(name):
        p = kget("pod", name, "-n", ns)
        return (p or {}).get("status", {}).get("phase")

    def finished_long_enough(name):
        p = kget("pod", name, "-n", ns)
        t = terminated(p or {}).get("finishedAt")
        if phase(name) != "Succeeded" or not t:
            return False
        fin = calendar.timegm(time.strptime(t, "%Y-%m-%dT%H:%M:%SZ"))
        return time.time() - fin > SWEEP_MIN_AGE_S + 1
    wait_for(lambda: finished_long_enough("sweep-done") and finished_long_enough("foreign-done"), 120,
             "the two short pods to finish more than %d s ago" % SWEEP_MIN_AGE_S)
    wait_for(lambda: phase("sweep-running") == "Running", 120, "sweep-running to run")
    eaid_restart()
    wait_for(lambda: kget("pod", "sweep-done", "-n", ns) is None, 60, "the sweep to delete sweep-done")
    check(phase("sweep-running") == "Running", "the running pod was touched: %s" % phase("sweep-running"))
    check(phase("foreign-done") == "Succeeded", "a pod not ours was touched")
    check("sweep: deleting 1 leftover pods" in C.eaid.log_text(), "no sweep line in eaid's log")
    kubectl("delete", "pod", "sweep-running", "foreign-done", "-n", ns, "--grace-period=0", "--force")


# ---------------------------------------------------------------- main

def cluster_env():
    rc, out, err = cluster("env", timeout=30)
    check(rc == 0, "cluster.sh env: %s" % err)
    env = {}
    for line in out.splitlines():
        if line.startswith("export ") and "=" in line:
            k, v = line[len("export "):].split("=", 1)
            if k != "PATH":
                env[k] = v
    return env


def setup():
    t0 = time.time()
    rc, out, err = cluster("up", timeout=900)
    check(rc == 0, "cluster.sh up: %s" % err[-3000:])
    C.notes.append("cluster up: %.1f s" % (time.time() - t0))
    C.env = cluster_env()
    C.kubectl = C.env["EAI_CLUSTER_KUBECTL"]
    C.admin_kc = C.env["KUBECONFIG"]
    # eaid's own token file, named by its kubeconfig (user.tokenFile)
    with open(C.env["EAI_CLUSTER_EAID_KUBECONFIG"]) as f:
        tf = [ln.split("tokenFile:", 1)[1] for ln in f if "tokenFile:" in ln]
    check(tf, "no tokenFile in eaid's kubeconfig")
    C.eaid_token_file = tf[0].strip().strip("{}").strip().strip('"')
    C.watch = PodWatch()
    t0 = time.time()
    rootfs = os.path.join(eaid_env.IMAGES, "python", "3.11-slim", "rootfs")
    rc, out, err = cluster("push", rootfs, PY_REF, "/usr/bin/python3", timeout=600)
    check(rc == 0 and out.strip(), "cluster.sh push: %s" % err[-2000:])
    C.py_image = out.strip().splitlines()[-1]
    C.notes.append("push %s: %.1f s" % (C.py_image, time.time() - t0))
    C.tmp = tempfile.mkdtemp(prefix="eai-k8s-real-")
    os.chmod(C.tmp, 0o700)
    C.config = os.path.join(C.tmp, "eaid.yaml")
    write_config({"kubeconfig": C.env["EAI_CLUSTER_EAID_KUBECONFIG"]})
    C.eaid = eaid_env.Env(config=C.config, tmp=C.tmp, env={"EAI_PLUGIN_DIR": PLUGIN_DIR})
    keys = {}
    for name in ("k8s-a", "k8s-b"):
        r = C.eaid.cmd("tenants", "create", name)
        check(r.returncode == 0, "tenants create: %s" % r.stderr)
        tid = json.loads(r.stdout)["id"]
        r = C.eaid.cmd("keys", "create", "--tenant", tid)
        check(r.returncode == 0, "keys create: %s" % r.stderr)
        keys[name] = (tid, r.stdout.decode().strip())
    C.tenant_a, C.tenant_b = keys["k8s-a"][0], keys["k8s-b"][0]
    C.ns_a, C.ns_b = "eai-" + C.tenant_a, "eai-" + C.tenant_b
    C.a, C.b = Client(keys["k8s-a"][1]), Client(keys["k8s-b"][1])
    t0 = time.time()
    C.eaid.start(ready_path="/readyz", timeout=90)
    C.notes.append("eaid ready: %.1f s" % (time.time() - t0))
    # tenant B's namespace exists from its first execution on
    d = C.b.py("print('b')")
    check(d["status"] == "succeeded", "tenant B: " + short(d))


def main():
    if os.geteuid() != 0:
        print("SKIP: the real cluster needs root")
        return 77
    for f in (eaid_env.EAID, os.path.join(PLUGIN_DIR, "eai-isolation-k8s.so")):
        if not os.path.exists(f):
            print("FAIL: %s missing (build first)" % f)
            return 1
    rc, out, err = cluster("build", timeout=7200)
    if rc != 0:
        print("SKIP: the cluster's binaries cannot be built on this machine:\n" + err[-2000:])
        return 77
    only = [s for s in os.environ.get("EAI_K8S_REAL_ONLY", "").split(",") if s]
    results = []
    t_all = time.time()

    def run(name, fn):
        t0 = time.time()
        try:
            fn()
            ok, why = True, ""
        except Exception as e:  # noqa: BLE001 - a test harness reports everything
            ok, why = False, "%s%s" % ("" if isinstance(e, Fail) else type(e).__name__ + ": ", e)
        results.append((name, ok))
        print("%s %6.1fs  %s%s" % ("PASS" if ok else "FAIL", time.time() - t0, name,
                                   "" if ok else "\n      -> " + why), flush=True)
        return ok

    C.eaid = C.watch = None
    try:
        if run("image python:3.11-slim in eaid's store (built if absent)", eaid_env.ensure_image) and \
                run("cluster up, image pushed, eaid ready with the k8s backend", setup):
            for name, fn in CASES:
                if only and not any(s in name for s in only) and fn is not t_basic:
                    continue
                run(name, fn)
    finally:
        if C.eaid is not None:
            if any(not ok for _, ok in results):
                print("--- eaid log tail\n" + C.eaid.log_tail(40))
            C.eaid.stop(clean=False)
        if C.watch is not None:
            C.watch.stop()

        def down():
            rc, out, err = cluster("down", timeout=300)
            check(rc == 0, "cluster.sh down: %s" % err[-2000:])
            rc, out, err = cluster("status", timeout=60)
            check(rc != 0 and "running" not in out, "status after down: %s" % out)
        run("cluster down; status says every daemon stopped", down)
    npass = sum(1 for _, ok in results if ok)
    print("--- notes")
    for n in C.notes:
        print("  " + n)
    print("total %.1f s" % (time.time() - t_all))
    print("%d passed, %d failed" % (npass, len(results) - npass))
    if npass == len(results) and getattr(C, "tmp", None):
        import shutil
        shutil.rmtree(C.tmp, ignore_errors=True)
    return 0 if npass == len(results) else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
