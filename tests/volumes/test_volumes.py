"""Volumes that outlive sandboxes (issue 34 item 2, docs/volumes.md) with
real runsc: a volume written by one execution is read by a later session
and execution and survives a restart of eaid; one writer at a time; the
size holds inside the sandbox; the files API refuses path and symlink
attacks; another tenant sees 404 on every route; nothing is left after the
deletes.  Python 3 standard library only, against a real `eaid serve` on
loopback with its own temp data dir (tests/hostile/eaid_env.py)."""
import glob
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
import eaid_env  # noqa: E402
from eaid_env import Env, check, ensure_image, run_cases  # noqa: E402

PROFILE = "gvisor-small"
IMAGE = eaid_env.IMAGE
RUNSC = os.environ.get("EAI_SANDBOX_RUNSC") or "runsc"
MIB = 1 << 20

CONFIG = """volumes:
  max_per_tenant: 6
  max_bytes: 256Mi
  usage_period_s: 2
sessions:
  max_per_tenant: 8
scheduler:
  max_concurrent: 8
  max_per_tenant: 8
"""


def have_runsc():
    try:
        return subprocess.run([RUNSC, "--version"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class S:
    env = None
    key_b = None


def env():
    if not S.env:
        tmp = tempfile.mkdtemp(prefix="eai-volumes-")
        cfg = os.path.join(tmp, "eaid.yaml")
        with open(cfg, "w") as f:
            f.write(CONFIG)
        e = Env(config=cfg, tmp=tmp)
        e.own_tmp = True
        S.key_b = e.make_key("vol-b")
        e.make_key("vol-a")
        e.start()
        S.env = e
    return S.env


def as_b():
    return {"Authorization": "Bearer " + S.key_b}


def raw(e, method, path, data=None, key=None):
    h = {"Authorization": "Bearer " + (key or e.key)}
    req = urllib.request.Request(e.url + path, method=method, data=data, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as ex:
        return ex.code, ex.read()


def code_of(b):
    return (b or {}).get("error", {}).get("code") if isinstance(b, dict) else None


def vcreate(e, name, size=64 * MIB):
    st, b = e.api("POST", "/v1/volumes", {"name": name, "size_bytes": size}, timeout=60)
    check(st == 201 and b["id"].startswith("vol_") and b["status"] == "ready" and b["name"] == name,
          "create volume %s: %s %s" % (name, st, b))
    return b["id"]


def vdelete(e, ref):
    st, b = e.api("DELETE", "/v1/volumes/" + ref, timeout=60)
    check(st == 200 and b["status"] == "deleted", "delete volume %s: %s %s" % (ref, st, b))
    return b


def execute(e, command, volumes, expect=202):
    body = {"profile": PROFILE, "image": IMAGE, "command": command, "volumes": volumes}
    st, b = e.api("POST", "/v1/sandbox/executions", body)
    check(st == expect, "execution with volumes: %s %s" % (st, b))
    return e.wait_terminal(b["id"], timeout=120) if st == 202 else b


def session(e, volumes, expect=201):
    st, b = e.api("POST", "/v1/sandbox/sessions", {"profile": PROFILE, "image": IMAGE, "volumes": volumes},
                  timeout=90)
    check(st == expect, "session with volumes: %s %s" % (st, b))
    return b


def ses_run(e, sid, command):
    st, b = e.api("POST", "/v1/sandbox/sessions/%s/executions" % sid, {"command": command})
    check(st == 202, "session execution: %s %s" % (st, b))
    return e.wait_terminal(b["id"], timeout=120)


def ses_delete(e, sid):
    st, b = e.api("DELETE", "/v1/sandbox/sessions/" + sid, timeout=60)
    check(st == 200 and b["status"] == "ended", "delete session: %s %s" % (st, b))


# ---------------------------------------------------------------- cases


def case_lifecycle_and_validation():
    e = env()
    vid = vcreate(e, "scratch", 32 * MIB)
    st, b = e.api("POST", "/v1/volumes", {"name": "scratch", "size_bytes": 32 * MIB})
    check(st == 409 and code_of(b) == "conflict", "same name twice: %s %s" % (st, b))
    for body, what in (({"name": "Bad Name", "size_bytes": 32 * MIB}, "name"),
                       ({"name": "vol_x", "size_bytes": 32 * MIB}, "id-like name"),
                       ({"name": "tiny", "size_bytes": 1024}, "too small"),
                       ({"name": "huge", "size_bytes": 1 << 40}, "over volumes max_bytes"),
                       ({"name": "x", "size_bytes": "lots"}, "size not a quantity"),
                       ({"name": "x", "size_bytes": -5}, "negative size"),
                       ({"name": "x", "size_bytes": 32 * MIB, "extra": 1}, "unknown field")):
        st, b = e.api("POST", "/v1/volumes", body)
        check(st == 422 and code_of(b) == "validation_failed", "%s refused: %s %s" % (what, st, b))
    # the French envelope of a refusal
    st, b = e.api("POST", "/v1/volumes", {"name": "scratch", "size_bytes": 32 * MIB},
                  headers={"Accept-Language": "fr"})
    check(st == 409 and "existe" in str(b), "French detail: %s" % b)
    st, b = e.api("POST", "/v1/volumes", {"name": "quantity", "size": "20Mi"}, timeout=60)
    check(st == 201 and b["size_bytes"] == 20 * MIB, "size as a quantity: %s %s" % (st, b))
    vdelete(e, b["id"])
    st, b = e.api("GET", "/v1/volumes/scratch")
    check(st == 200 and b["id"] == vid and b["size_bytes"] == 32 * MIB, "get by name: %s %s" % (st, b))
    st, b = e.api("GET", "/v1/volumes/" + vid)
    check(st == 200 and b["name"] == "scratch" and b["attached"]["writer"] is None, "get by id: %s" % b)
    check(0 <= b["used_bytes"] < 8 * MIB and 24 * MIB < b["free_bytes"] <= 32 * MIB, "empty by its figures: %s" % b)
    st, b = e.api("GET", "/v1/volumes")
    check(st == 200 and vid in [i["id"] for i in b["items"]], "list: %s" % b)
    # quotas: 6 volumes per tenant (volumes.max_per_tenant)
    made = []
    for i in range(8):
        st, b = e.api("POST", "/v1/volumes", {"name": "q%d" % i, "size_bytes": 16 * MIB}, timeout=60)
        if st != 201:
            check(st == 409 and code_of(b) == "volume_quota_exceeded", "quota refusal: %s %s" % (st, b))
            break
        made.append(b["id"])
    st, b = e.api("GET", "/v1/volumes")
    check(len(b["items"]) <= 6 and st == 200, "at most 6 volumes: %d" % len(b["items"]))
    for v in made:
        vdelete(e, v)
    # request shapes
    for vols, what in (([{"name": "scratch", "path": "/etc"}], "path outside /mnt"),
                       ([{"name": "scratch", "path": "/mnt/../etc"}], "dot-dot"),
                       ([{"name": "scratch", "path": "/mnt/a/"}], "trailing slash"),
                       ([{"name": "scratch", "path": "/mnt/a"}, {"name": "scratch", "path": "/mnt/b"}], "twice"),
                       ([{"name": "scratch", "path": "/mnt/a", "read_only": "yes"}], "read_only not bool"),
                       ([{"name": "scratch", "path": "/mnt/%d" % i} for i in range(5)], "five")):
        st, b = e.api("POST", "/v1/sandbox/executions",
                      {"profile": PROFILE, "image": IMAGE, "command": ["true"], "volumes": vols})
        check(st == 422 and code_of(b) == "validation_failed", "%s refused: %s %s" % (what, st, b))
    st, b = e.api("POST", "/v1/sandbox/executions", {"profile": PROFILE, "image": IMAGE, "command": ["true"],
                                                     "volumes": [{"name": "nope", "path": "/mnt/a"}]})
    check(st == 404, "unknown volume: %s %s" % (st, b))
    vdelete(e, "scratch")
    st, b = e.api("GET", "/v1/volumes/" + vid)
    check(st == 404 and code_of(b) == "not_found", "gone after delete: %s %s" % (st, b))


def case_outlives_sandboxes():
    """Written by an execution, read by a later session (read-only) and
    execution, and by the files API; still there after eaid restarts."""
    e = env()
    vid = vcreate(e, "shared")
    r = execute(e, ["sh", "-c", "mkdir -p /mnt/data/d && echo written-by-exec > /mnt/data/d/note.txt && "
                                "id -u > /mnt/data/uid"], [{"name": "shared", "path": "/mnt/data"}])
    check(r["status"] == "succeeded", "writer execution: %s" % r)
    s = session(e, [{"name": "shared", "path": "/mnt/in", "read_only": True}])
    check(s["volumes"][0]["id"] == vid and s["volumes"][0]["read_only"] is True, "session view: %s" % s)
    r = ses_run(e, s["id"], ["cat", "/mnt/in/d/note.txt"])
    check(r["status"] == "succeeded" and r["stdout"] == "written-by-exec\n", "session reads it: %s" % r)
    r = ses_run(e, s["id"], ["sh", "-c", "echo x > /mnt/in/nope"])
    check(r["status"] == "failed", "read-only mount refuses writes: %s" % r)
    st, b = e.api("GET", "/v1/volumes/shared")
    check(b["attached"]["readers"] == 1, "one reader: %s" % b)
    # files API: reads while only readers hold it, writes refused
    st, body = raw(e, "GET", "/v1/volumes/shared/files/d/note.txt")
    check(st == 200 and body == b"written-by-exec\n", "files API GET: %s %r" % (st, body))
    st, body = raw(e, "PUT", "/v1/volumes/shared/files/d/x", data=b"x")
    check(st == 409, "PUT while mounted: %s %r" % (st, body))
    # a reader execution beside the session's reader
    r = execute(e, ["cat", "/mnt/ro/d/note.txt"], [{"name": "shared", "path": "/mnt/ro", "read_only": True}])
    check(r["status"] == "succeeded" and r["stdout"] == "written-by-exec\n", "reader execution: %s" % r)
    check(r.get("volumes") == [{"id": vid, "name": "shared", "path": "/mnt/ro", "read_only": True}],
          "the execution shows its volumes: %s" % r.get("volumes"))
    ses_delete(e, s["id"])
    st, b = e.api("GET", "/v1/volumes/shared")
    check(b["attached"]["readers"] == 0 and b["attached"]["writer"] is None, "released: %s" % b)
    st, body = raw(e, "PUT", "/v1/volumes/shared/files/d/put.txt", data=b"from-the-api")
    check(st == 200, "PUT when free: %s %r" % (st, body))
    r = execute(e, ["cat", "/mnt/v/d/put.txt"], [{"name": "shared", "path": "/mnt/v"}])
    check(r["status"] == "succeeded" and r["stdout"] == "from-the-api", "sandbox reads the API's file: %s" % r)
    st, b = e.api("GET", "/v1/volumes/shared/files?path=/d")
    paths = sorted(i["path"] for i in (b or {}).get("items", []))
    check(st == 200 and paths == ["/d/note.txt", "/d/put.txt"], "listing: %s %s" % (st, b))
    # eaid restarts while a session writes to it: the stop ends the session
    # and unmounts the volume; the start mounts it again, free, files there
    s = session(e, [{"name": "shared", "path": "/mnt/w"}])
    r = ses_run(e, s["id"], ["sh", "-c", "echo by-the-session > /mnt/w/s.txt"])
    check(r["status"] == "succeeded", "session write before the stop: %s" % r)
    e.stop(clean=False)
    vdir = os.path.join(e.data, "volumes")
    with open("/proc/self/mountinfo") as f:
        check(vdir not in f.read(), "stopped eaid leaves no mount under %s" % vdir)
    e.start()
    st, b = e.api("GET", "/v1/volumes/shared")
    check(st == 200 and b["id"] == vid and b["attached"]["writer"] is None, "after restart: %s %s" % (st, b))
    st, body = raw(e, "GET", "/v1/volumes/shared/files/s.txt")
    check(st == 200 and body == b"by-the-session\n", "the session's write survived: %s %r" % (st, body))
    r = execute(e, ["cat", "/mnt/v/d/note.txt"], [{"name": "shared", "path": "/mnt/v", "read_only": True}])
    check(r["status"] == "succeeded" and r["stdout"] == "written-by-exec\n", "read after restart: %s" % r)
    vdelete(e, vid)


def case_one_writer():
    e = env()
    vcreate(e, "single")
    s = session(e, [{"name": "single", "path": "/mnt/w"}])
    st, b = e.api("GET", "/v1/volumes/single")
    check(b["attached"]["writer"] == s["id"], "the session writes: %s" % b)
    r = ses_run(e, s["id"], ["sh", "-c", "echo one > /mnt/w/f && cat /mnt/w/f"])
    check(r["status"] == "succeeded" and r["stdout"] == "one\n", "session writes: %s" % r)
    b = execute(e, ["true"], [{"name": "single", "path": "/mnt/w"}], expect=409)
    check(code_of(b) == "volume_in_use", "second writer execution refused: %s" % b)
    b = session(e, [{"name": "single", "path": "/mnt/w"}], expect=409)
    check(code_of(b) == "volume_in_use", "second writer session refused: %s" % b)
    # with an Idempotency-Key admission leaves the writer to the start, which refuses it
    st, b = e.api("POST", "/v1/sandbox/executions",
                  {"profile": PROFILE, "image": IMAGE, "command": ["true"],
                   "volumes": [{"name": "single", "path": "/mnt/w"}]}, headers={"Idempotency-Key": "vol-idem-1"})
    check(st == 202, "idempotent request admitted: %s %s" % (st, b))
    r = e.wait_terminal(b["id"], timeout=60)
    check(r["status"] == "error" and (r.get("error") or {}).get("code") == "volume_in_use",
          "refused at its start: %s" % r)
    st, b = e.api("POST", "/v1/sandbox/sessions/%s/executions" % s["id"],
                  {"command": ["true"], "volumes": [{"name": "single", "path": "/mnt/x"}]})
    check(st == 422, "volumes on an execution in a session: %s %s" % (st, b))
    st, body = raw(e, "GET", "/v1/volumes/single/files/f")
    check(st == 409, "files API while written: %s %r" % (st, body))
    st, b = e.api("DELETE", "/v1/volumes/single")
    check(st == 409 and code_of(b) == "volume_in_use", "delete while held: %s %s" % (st, b))
    ses_delete(e, s["id"])
    # written by that session: read by a later session and by an execution
    s2 = session(e, [{"name": "single", "path": "/mnt/r", "read_only": True}])
    r = ses_run(e, s2["id"], ["cat", "/mnt/r/f"])
    check(r["status"] == "succeeded" and r["stdout"] == "one\n", "a later session reads it: %s" % r)
    ses_delete(e, s2["id"])
    r = execute(e, ["cat", "/mnt/w/f"], [{"name": "single", "path": "/mnt/w"}])
    check(r["status"] == "succeeded" and r["stdout"] == "one\n", "writer after the session: %s" % r)
    vdelete(e, "single")


def case_size_enforced():
    e = env()
    vcreate(e, "small", 32 * MIB)
    prog = ("import errno\n"
            "f=open('/mnt/s/big','wb')\n"
            "n=0\n"
            "try:\n"
            "  for i in range(128):\n"
            "    f.write(b'\\1'*(1<<20)); f.flush(); n+=1\n"
            "  f.close(); print('wrote', n)\n"
            "except OSError as e:\n"
            "  print('stopped', n, e.errno == errno.ENOSPC)\n")
    r = execute(e, ["python3", "-c", prog], [{"name": "small", "path": "/mnt/s"}])
    out = r.get("stdout", "")
    check(r["status"] == "succeeded" and out.startswith("stopped") and out.strip().endswith("True"),
          "ENOSPC inside the sandbox: %s" % r)
    check(int(out.split()[1]) <= 32, "not more than the volume's size: %s" % out)
    st, b = e.api("GET", "/v1/volumes/small")
    check(st == 200 and b["used_bytes"] > 16 * MIB and b["free_bytes"] < MIB, "full by its figures: %s" % b)
    st, body = raw(e, "PUT", "/v1/volumes/small/files/more.bin", data=b"\0" * (8 * MIB))
    check(st == 413, "PUT into a full volume: %s %r" % (st, body[:200]))
    vdelete(e, "small")


def case_files_attacks():
    """Links the sandbox made are never followed on the host; traversal is refused."""
    e = env()
    vcreate(e, "attack")
    r = execute(e, ["sh", "-c", "ln -s /etc /mnt/a/etc && ln -s /etc/passwd /mnt/a/pw && mkdir /mnt/a/d && "
                                "ln -s ../../.. /mnt/a/d/up && echo ok > /mnt/a/d/real"],
                [{"name": "attack", "path": "/mnt/a"}])
    check(r["status"] == "succeeded", "links made: %s" % r)
    for path in ("pw", "etc/passwd", "d/up/etc/passwd", "d/up", "etc"):
        st, body = raw(e, "GET", "/v1/volumes/attack/files/" + path)
        check(st in (404, 422) and b"root:" not in body, "GET %s not followed: %s %r" % (path, st, body[:100]))
    for path in ("etc/eai-pwned", "d/up/tmp/eai-pwned"):
        st, body = raw(e, "PUT", "/v1/volumes/attack/files/" + path, data=b"pwned")
        check(st in (404, 409, 422), "PUT %s refused: %s %r" % (path, st, body[:100]))
    # a PUT onto a link replaces the link (never writes through it)
    st, body = raw(e, "PUT", "/v1/volumes/attack/files/pw", data=b"pwned")
    check(st == 200, "PUT over a link: %s %r" % (st, body[:100]))
    st, body = raw(e, "GET", "/v1/volumes/attack/files/pw")
    check(st == 200 and body == b"pwned", "the link became a file: %s %r" % (st, body[:100]))
    check(not os.path.exists("/etc/eai-pwned") and not os.path.exists("/tmp/eai-pwned"), "nothing on the host")
    with open("/etc/passwd", "rb") as f:
        check(b"pwned" not in f.read(), "/etc/passwd untouched")
    for path in ("../../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "d/../../x", "./d/real", "d//real"):
        st, body = raw(e, "GET", "/v1/volumes/attack/files/" + path)
        check(st in (400, 404, 422) and b"root:" not in body, "traversal %s refused: %s %r" % (path, st, body[:100]))
    st, body = raw(e, "GET", "/v1/volumes/attack/files/d/real")
    check(st == 200 and body == b"ok\n", "the real file: %s %r" % (st, body))
    st, b = e.api("GET", "/v1/volumes/attack/files")
    kinds = {i["path"]: i["type"] for i in b.get("items", [])}
    check(st == 200 and kinds.get("/pw") == "file" and kinds.get("/etc") == "symlink" and
          kinds.get("/d/up") == "symlink" and kinds.get("/d/real") == "file", "listing: %s" % kinds)
    st, body = raw(e, "DELETE", "/v1/volumes/attack/files/etc")
    check(st == 200 and os.path.isdir("/etc"), "deleting the link removes the link only: %s %r" % (st, body))
    vdelete(e, "attack")


def case_cross_tenant():
    e = env()
    vid = vcreate(e, "mine")
    h = as_b()
    for method, path in (("GET", "/v1/volumes/" + vid), ("GET", "/v1/volumes/mine"),
                         ("DELETE", "/v1/volumes/" + vid), ("GET", "/v1/volumes/%s/files" % vid),
                         ("GET", "/v1/volumes/%s/files/x" % vid), ("PUT", "/v1/volumes/%s/files/x" % vid),
                         ("DELETE", "/v1/volumes/%s/files/x" % vid)):
        st, body = raw(e, method, path, data=b"x" if method == "PUT" else None, key=S.key_b)
        check(st == 404, "tenant b %s %s: %s %r" % (method, path, st, body[:120]))
    st, b = e.api("GET", "/v1/volumes", headers=h)
    check(st == 200 and b["items"] == [], "tenant b lists none: %s" % b)
    st, b = e.api("POST", "/v1/sandbox/executions", {"profile": PROFILE, "image": IMAGE, "command": ["true"],
                                                     "volumes": [{"name": vid, "path": "/mnt/a"}]}, headers=h)
    check(st == 404, "tenant b cannot mount it: %s %s" % (st, b))
    st, b = e.api("POST", "/v1/volumes", {"name": "mine", "size_bytes": 16 * MIB}, headers=h, timeout=60)
    check(st == 201, "names are per tenant: %s %s" % (st, b))
    st, b2 = e.api("DELETE", "/v1/volumes/" + b["id"], headers=h, timeout=60)
    check(st == 200, "tenant b deletes its own: %s %s" % (st, b2))
    vdelete(e, vid)


def usage_of(e, vid):
    st, u = e.api("GET", "/v1/finops/usage")
    check(st == 200, "usage ledger: %s %s" % (st, u))
    return [x for x in u.get("usage", []) if x.get("volume_id") == vid]


def case_usage_and_nothing_left():
    """GB-hours of the provisioned size: a usage event per period
    (volumes.usage_period_s: 2 here) and a last one at the delete, contiguous,
    adding up to the volume's life."""
    e = env()
    vid = vcreate(e, "billed", 128 * MIB)
    st, v = e.api("GET", "/v1/volumes/" + vid)
    periodic = []
    deadline = time.time() + 20
    while time.time() < deadline and not periodic:
        periodic = [x for x in usage_of(e, vid) if not x.get("final")]
        time.sleep(0.3)
    check(periodic and periodic[0]["kind"] == "volume" and periodic[0]["gb_hours"] > 0,
          "a periodic usage event: %s" % periodic)
    b = vdelete(e, vid)
    check(b["usage"]["size_bytes"] == 128 * MIB and b["usage"]["gb_hours"] > 0, "usage in the answer: %s" % b)
    events = []
    deadline = time.time() + 10
    while time.time() < deadline:
        events = usage_of(e, vid)
        if any(x.get("final") for x in events):
            break
        time.sleep(0.2)
    events.sort(key=lambda x: x["started_at"])
    check(len([x for x in events if x.get("final")]) == 1 and events[-1].get("final"), "one final event: %s" % events)
    check(len({x["id"] for x in events}) == len(events), "distinct ids: %s" % events)
    check(events[0]["started_at"] == v["created_at"], "billed from the create: %s %s" % (events[0], v))
    for a, c in zip(events, events[1:]):
        check(a["finished_at"] == c["started_at"], "contiguous periods: %s %s" % (a, c))
    total = sum(x["gb_hours"] for x in events)
    check(abs(total - b["usage"]["gb_hours"]) <= 1e-6 + 0.01 * b["usage"]["gb_hours"],
          "periods add up to the life: %s vs %s" % (total, b["usage"]))
    st, b = e.api("GET", "/v1/volumes")
    check(st == 200 and b["items"] == [], "no volume left: %s" % b)
    with urllib.request.urlopen(e.url + "/metrics", timeout=10) as resp:
        metrics = resp.read().decode()
    for name in ("eai_volumes", "eai_volume_bytes", "eai_volume_mounts"):
        check(("\n%s 0\n" % name) in metrics, "%s is 0: %s" % (name, [l for l in metrics.splitlines()
                                                                     if l.startswith(name)]))
    vdir = os.path.join(e.data, "volumes")
    check(os.listdir(vdir) == [], "no directory left: %s" % os.listdir(vdir))
    with open("/proc/self/mountinfo") as f:
        check(vdir not in f.read(), "no mount left under %s" % vdir)
    r = subprocess.run(["losetup", "-a"], capture_output=True, text=True)
    check(vdir not in r.stdout, "no loop device left: %s" % r.stdout)


def case_no_disk_space():
    """A volume is made only when the data disk keeps sessions.min_free_bytes free."""
    tmp = tempfile.mkdtemp(prefix="eai-volumes-")
    cfg = os.path.join(tmp, "eaid.yaml")
    with open(cfg, "w") as f:
        f.write("sessions:\n  min_free_bytes: 1000Ti\n")
    e = Env(config=cfg, tmp=tmp)
    e.own_tmp = True
    e.make_key("vol-disk")
    e.start()
    try:
        st, b = e.api("POST", "/v1/volumes", {"name": "nope", "size_bytes": 16 * MIB}, timeout=60)
        check(st == 507 and code_of(b) == "insufficient_storage", "no room: %s %s" % (st, b))
        st, b = e.api("GET", "/v1/volumes")
        check(st == 200 and b["items"] == [], "nothing made: %s" % b)
        check(os.listdir(os.path.join(e.data, "volumes")) == [], "nothing on disk")
    finally:
        e.stop()


def case_cli():
    """eai volume create|ls|put|cat|files|rm|delete and exec --volume."""
    e = env()
    eai = os.path.join(eaid_env.BUILD, "eai")
    ce = dict(os.environ, EAI_URL=e.url, EAI_API_KEY=e.key)

    def cli(*args, stdin=None):
        return subprocess.run([eai] + list(args), env=ce, capture_output=True, timeout=120, input=stdin)

    r = cli("volume", "create", "clivol", "20Mi")
    check(r.returncode == 0 and r.stdout.decode().startswith("vol_"), "create: %s %s" % (r.stdout, r.stderr))
    r = cli("volume", "put", "clivol", "-", "dir/in.txt", stdin=b"from-the-cli\n")
    check(r.returncode == 0, "put: %s" % r.stderr)
    r = cli("exec", "--profile", PROFILE, "--image", IMAGE, "--volume", "clivol:/mnt/c",
            "--", "sh", "-c", "cat /mnt/c/dir/in.txt; echo out > /mnt/c/out.txt")
    check(r.returncode == 0 and r.stdout == b"from-the-cli\n", "exec --volume: %s %s" % (r.stdout, r.stderr))
    r = cli("exec", "--profile", PROFILE, "--image", IMAGE, "--volume", "clivol:/mnt/c:ro",
            "--", "sh", "-c", "echo x > /mnt/c/y")
    check(r.returncode != 0, "read-only through the CLI: %s" % r.stdout)
    r = cli("volume", "cat", "clivol", "out.txt")
    check(r.returncode == 0 and r.stdout == b"out\n", "cat: %s %s" % (r.stdout, r.stderr))
    r = cli("volume", "files", "clivol")
    check(r.returncode == 0 and b"/dir/in.txt" in r.stdout and b"/out.txt" in r.stdout, "files: %s" % r.stdout)
    r = cli("volume", "rm", "clivol", "out.txt")
    check(r.returncode == 0, "rm: %s" % r.stderr)
    r = cli("volume", "cat", "clivol", "out.txt")
    check(r.returncode != 0 and b"not found" in r.stderr.lower(), "gone: %s %s" % (r.stdout, r.stderr))
    r = cli("volume", "ls")
    check(r.returncode == 0 and b"clivol" in r.stdout, "ls: %s" % r.stdout)
    r = cli("--lang", "fr", "volume", "create", "clivol", "20Mi")
    check(r.returncode != 0 and b"existe" in r.stderr, "French refusal: %s" % r.stderr)
    r = cli("volume", "delete", "clivol")
    check(r.returncode == 0 and b"deleted" in r.stdout, "delete: %s %s" % (r.stdout, r.stderr))


def case_python_sdk():
    """client.volumes (sdk/python) against the real eaid: create, mount in an
    execution (shorthand) and read-only in a session (the API's list), files
    write/read/list/delete, get with its figures, a delete refused while held
    (ConflictError volume_in_use), then deleted."""
    e = env()
    sys.path.insert(0, os.path.join(eaid_env.SRC, "sdk", "python"))
    from enterprise_ai import ConflictError, EnterpriseAI
    c = EnterpriseAI(e.url, e.key)
    v = c.volumes.create("sdkvol", "20Mi")
    check(v.id.startswith("vol_") and v.name == "sdkvol" and v.size_bytes == 20 * MIB and v.status == "ready",
          "sdk create: %s" % v.raw)
    ex = c.sandbox.execute(IMAGE, ["sh", "-c", "echo from-exec > /mnt/s/e.txt"], profile=PROFILE,
                           volumes={"sdkvol": "/mnt/s"}, timeout=120)
    check(ex.status == "succeeded", "sdk execute with volumes: %s" % ex.raw)
    f = c.volumes.files("sdkvol")
    check(f.read("e.txt") == b"from-exec\n", "sdk files.read")
    f.write("dir/in.txt", "from-sdk\n")
    check(sorted(x.path for x in f.list() if x.type == "file") == ["/dir/in.txt", "/e.txt"],
          "sdk files.list: %s" % [x.path for x in f.list()])
    with c.sandbox.sessions.create(IMAGE, profile=PROFILE,
                                   volumes=[{"name": v.id, "path": "/mnt/in", "read_only": True}]) as s:
        r = s.run(["cat", "/mnt/in/dir/in.txt"])
        check(r.status == "succeeded" and r.stdout == "from-sdk\n", "sdk session with a volume: %s" % r.raw)
        try:
            c.volumes.delete("sdkvol")
            check(False, "a delete while a session holds it")
        except ConflictError as ex2:
            check(ex2.code == "volume_in_use", "sdk delete while held: %s" % ex2)
    g = c.volumes.get("sdkvol")
    check(g.used_bytes is not None and g.free_bytes is not None and g.free_bytes > 0, "sdk get: %s" % g.raw)
    check("sdkvol" in [x.name for x in c.volumes.list()], "sdk list")
    f.delete("e.txt")
    check("/e.txt" not in [x.path for x in f.list()], "sdk files.delete")
    check(c.volumes.delete("sdkvol")["status"] == "deleted", "sdk delete")


CASES = [
    ("no_disk_space", case_no_disk_space),
    ("lifecycle_and_validation", case_lifecycle_and_validation),
    ("outlives_sandboxes", case_outlives_sandboxes),
    ("one_writer", case_one_writer),
    ("size_enforced", case_size_enforced),
    ("files_attacks", case_files_attacks),
    ("cross_tenant", case_cross_tenant),
    ("cli", case_cli),
    ("python_sdk", case_python_sdk),
    ("usage_and_nothing_left", case_usage_and_nothing_left),
]

if __name__ == "__main__":
    if os.geteuid() != 0:
        print("volumes need root (loop mounts): skipped")
        sys.exit(77)
    if not have_runsc():
        print("runsc not available: skipped")
        sys.exit(77)
    ensure_image()
    try:
        run_cases(CASES, only_env="EAI_VOLUMES_ONLY")
    finally:
        if S.env:
            S.env.stop()
        left = glob.glob("/tmp/eai-volumes-*/data/volumes/vol_*")
        if left:
            print("left behind: %s" % left)
