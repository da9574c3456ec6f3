"""Sessions (docs/sessions.md): one sandbox kept across several executions.

    with client.sandbox.sessions.create("python:3.11-slim", profile="gvisor-small") as s:
        s.files.write("/tmp/a.py", "print(6*7)")
        ex = s.run(["python3", "/tmp/a.py"])      # waits like execute
        print(ex.stdout, s.files.read("/tmp/a.py"))
"""
from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

from .models import Execution, Session, SessionFile, Snapshot
from .volumes import mounts

if TYPE_CHECKING:
    from .client import FilesArg, Sandbox, _Transport
    from .volumes import VolumesArg


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _path(p: str) -> str:
    """/tmp/a b.txt -> tmp/a%20b.txt (the {*path} of the file routes)."""
    return "/".join(_q(s) for s in p.split("/") if s)


class SessionFiles:
    """``session.files``: files of the session's /tmp (raw bytes both ways).
    ``volume.files`` (volumes.py) is the same over ``/v1/volumes/{ref}/files``."""

    def __init__(self, t: "_Transport", sid: str, base: Optional[str] = None) -> None:
        self._t, self._sid = t, sid
        self._base = base if base is not None else "/v1/sandbox/sessions/" + _q(sid)

    def _url(self, path: str) -> str:
        return "%s/files/%s" % (self._base, _path(path))

    def write(self, path: str, data: Union[str, bytes]) -> Dict[str, Any]:
        """PUT the file (``str`` as UTF-8); returns ``{"path", "size"}``."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        d = self._t.request("PUT", self._url(path), raw_body=raw, content_type="application/octet-stream").json()
        return d if isinstance(d, dict) else {}

    def read(self, path: str) -> bytes:
        return self._t.request("GET", self._url(path), headers={"Accept": "application/octet-stream"}).body

    def list(self, path: Optional[str] = None) -> List[SessionFile]:
        """Every file under ``path`` (a session: default /tmp, at most 1000; a volume: its
        root, at most 10000), recursive."""
        q = "?" + urllib.parse.urlencode({"path": path}) if path else ""
        d = self._t.request("GET", "%s/files%s" % (self._base, q)).json()
        items = d.get("items") if isinstance(d, dict) else None
        return [SessionFile.from_dict(i) for i in items or [] if isinstance(i, dict)]

    def delete(self, path: str) -> None:
        """A file, a symlink or an empty directory."""
        self._t.request("DELETE", self._url(path))


class SessionHandle:
    """A live session: ``run``, ``files``, ``refresh``, ``pause``, ``resume``, ``close`` (also a context manager).
    ``info`` is the last :class:`Session` view; its fields read through (``s.status``)."""

    def __init__(self, t: "_Transport", sandbox: "Sandbox", info: Session) -> None:
        self._t, self._sandbox, self.info = t, sandbox, info
        self.id = info.id
        self.files = SessionFiles(t, info.id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["info"], name)

    def __repr__(self) -> str:
        return "SessionHandle(id=%r, status=%r)" % (self.id, self.info.status)

    def __enter__(self) -> "SessionHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.info.status not in ("ended", "failed"):
            self.close()

    def submit(self, command: Sequence[str], *, stdin: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
               timeout_s: Optional[int] = None, output_bytes: Optional[int] = None,
               files: "Optional[FilesArg]" = None, collect: Optional[Sequence[str]] = None,
               project_id: Optional[str] = None, agent_id: Optional[str] = None,
               run_id: Optional[str] = None, stdin_mode: Optional[str] = None) -> Execution:
        """POST an execution in the session (202 ``{id, status}``), not waiting.
        ``stdin_mode="stream"``: its input is sent while it runs, with
        ``ex.write_stdin(...)`` / ``ex.close_stdin()``."""
        from .client import _files
        body: Dict[str, Any] = {"command": list(command)}
        for k, v in (("stdin", stdin), ("stdin_mode", stdin_mode),
                     ("env", dict(env) if env is not None else None), ("timeout_s", timeout_s),
                     ("output_bytes", output_bytes), ("files", _files(files)),
                     ("collect", list(collect) if collect is not None else None),
                     ("project_id", project_id), ("agent_id", agent_id), ("run_id", run_id)):
            if v is not None:
                body[k] = v
        # no Idempotency-Key on this route: a lost answer is not retried (it could run twice)
        r = self._t.request("POST", "/v1/sandbox/sessions/%s/executions" % _q(self.id), body, idempotent=False)
        return self._sandbox._bind(Execution.from_dict(r.json()))

    def run(self, command: Sequence[str], *, timeout: Optional[float] = 600.0, **kw: Any) -> Execution:
        """An execution inside the session, waited for like ``sandbox.execute``
        (``timeout`` overall, seconds; the other arguments as :meth:`submit`)."""
        import time
        t0 = time.monotonic()
        ex = self.submit(command, **kw)
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - t0))
        return self._sandbox.wait(ex.id, left)

    def refresh(self) -> Session:
        self.info = Session.from_dict(self._t.request("GET", "/v1/sandbox/sessions/" + _q(self.id)).json())
        return self.info

    def pause(self) -> Session:
        """``runsc checkpoint`` of its sandbox to disk (files and processes kept)."""
        self.info = Session.from_dict(self._t.request("POST", "/v1/sandbox/sessions/%s/pause" % _q(self.id), {},
                                                      timeout=max(self._t.timeout, 60.0), idempotent=False).json())
        return self.info

    def resume(self) -> Session:
        """Bring a paused session back (``runsc restore``)."""
        self.info = Session.from_dict(self._t.request("POST", "/v1/sandbox/sessions/%s/resume" % _q(self.id), {},
                                                      timeout=max(self._t.timeout, 60.0), idempotent=False).json())
        return self.info

    def snapshot(self, *, ttl_s: Optional[int] = None) -> Snapshot:
        """POST .../snapshots: a snapshot of the running session (its processes, memory and /tmp),
        which keeps running; kept ``ttl_s`` seconds (default: the server's, 7 days). Fork it with
        ``client.sandbox.sessions.fork(snap.id)``."""
        body = {"ttl_s": ttl_s} if ttl_s is not None else None
        d = self._t.request("POST", "/v1/sandbox/sessions/%s/snapshots" % _q(self.id), body,
                            timeout=max(self._t.timeout, 120.0), idempotent=False).json()
        return Snapshot.from_dict(d)

    def network(self) -> Dict[str, Any]:
        """GET .../network: ``{"session_id", "egress", "log", "summary"}`` (its allow list and network log)."""
        d = self._t.request("GET", "/v1/sandbox/sessions/%s/network" % _q(self.id)).json()
        return dict(d) if isinstance(d, dict) else {}

    def set_egress(self, egress: Sequence[str]) -> List[str]:
        """PUT .../network: replace the allow list of the live session (checked against the
        profile's; effective for the next connection). Returns the new list."""
        d = self._t.request("PUT", "/v1/sandbox/sessions/%s/network" % _q(self.id), {"egress": list(egress)},
                            idempotent=True).json()
        self.refresh()
        return list(d.get("egress") or [])

    def close(self) -> Session:
        """DELETE: ends the session; returns the ended view (with its usage)."""
        self.info = Session.from_dict(self._t.request("DELETE", "/v1/sandbox/sessions/" + _q(self.id),
                                                      timeout=max(self._t.timeout, 60.0)).json())
        return self.info


class Sessions:
    """``client.sandbox.sessions``."""

    def __init__(self, t: "_Transport", sandbox: "Sandbox") -> None:
        self._t, self._sandbox = t, sandbox

    def create(self, image: Optional[str] = None, *, profile: Optional[str] = None,
               limits: Optional[Mapping[str, Any]] = None, env: Optional[Mapping[str, str]] = None,
               idle_timeout_s: Optional[int] = None, ttl_s: Optional[int] = None,
               max_concurrent_executions: Optional[int] = None, auto_resume: Optional[bool] = None,
               auto_pause: Optional[bool] = None, paused_ttl_s: Optional[int] = None,
               egress: Optional[Sequence[str]] = None, volumes: Optional["VolumesArg"] = None,
               project_id: Optional[str] = None, agent_id: Optional[str] = None, run_id: Optional[str] = None,
               request: Optional[Mapping[str, Any]] = None, timeout: float = 120.0) -> SessionHandle:
        """POST a session; answers once its sandbox is ready (``timeout`` seconds for that).
        ``volumes``: mounted for the session's life, ``{"data": "/mnt/data"}`` or
        ``[{"name", "path", "read_only"}]`` (docs/volumes.md).
        Sessions have no Idempotency-Key: a lost answer is not retried (429/503 are)."""
        body: Dict[str, Any] = dict(request) if request is not None else {}
        if request is None:
            for k, v in (("profile", profile), ("image", image), ("limits", dict(limits) if limits else None),
                         ("env", dict(env) if env is not None else None), ("idle_timeout_s", idle_timeout_s),
                         ("ttl_s", ttl_s), ("max_concurrent_executions", max_concurrent_executions),
                         ("auto_resume", auto_resume), ("auto_pause", auto_pause), ("paused_ttl_s", paused_ttl_s),
                         ("network", {"egress": list(egress)} if egress is not None else None),
                         ("volumes", mounts(volumes)),
                         ("project_id", project_id), ("agent_id", agent_id), ("run_id", run_id)):
                if v is not None:
                    body[k] = v
        r = self._t.request("POST", "/v1/sandbox/sessions", body, timeout=timeout, idempotent=False)
        return SessionHandle(self._t, self._sandbox, Session.from_dict(r.json()))

    def get(self, session_id: str) -> SessionHandle:
        d = self._t.request("GET", "/v1/sandbox/sessions/" + _q(session_id)).json()
        return SessionHandle(self._t, self._sandbox, Session.from_dict(d))

    def list(self, status: Optional[str] = None, *, limit: Optional[int] = None,
             before: Optional[str] = None) -> List[Session]:
        """This tenant's sessions, newest first, from storage (``status``: one status or ``live``;
        ``before``: the id of the last one of the previous page)."""
        params = {k: v for k, v in (("status", status), ("limit", limit), ("before", before)) if v is not None}
        q = "?" + urllib.parse.urlencode(params) if params else ""
        d = self._t.request("GET", "/v1/sandbox/sessions" + q).json()
        items = d.get("items") if isinstance(d, dict) else None
        return [Session.from_dict(i) for i in items or [] if isinstance(i, dict)]

    def close(self, session_id: str) -> Session:
        return SessionHandle(self._t, self._sandbox, Session(id=session_id, status="", raw={})).close()

    # ---- snapshots and forks (docs/sessions.md "Snapshots and forks")

    def fork(self, snapshot_id: str, count: Optional[int] = None, *, idle_timeout_s: Optional[int] = None,
             ttl_s: Optional[int] = None, timeout: float = 180.0) -> Union[SessionHandle, List[SessionHandle]]:
        """New sessions restored from a snapshot, each with its own id, sandbox and copy of /tmp.
        Without ``count``: one :class:`SessionHandle`; with ``count`` (1..10 by default): a list."""
        body: Dict[str, Any] = {"from_snapshot": snapshot_id}
        for k, v in (("count", count), ("idle_timeout_s", idle_timeout_s), ("ttl_s", ttl_s)):
            if v is not None:
                body[k] = v
        d = self._t.request("POST", "/v1/sandbox/sessions", body, timeout=timeout, idempotent=False).json()
        if count is None:
            return SessionHandle(self._t, self._sandbox, Session.from_dict(d))
        return [SessionHandle(self._t, self._sandbox, Session.from_dict(i)) for i in d.get("items") or []
                if isinstance(i, dict) and i.get("id")]

    def snapshots(self, session_id: Optional[str] = None) -> List[Snapshot]:
        """This tenant's snapshots on the node (``session_id``: of that session only)."""
        q = "?" + urllib.parse.urlencode({"session_id": session_id}) if session_id else ""
        d = self._t.request("GET", "/v1/sandbox/snapshots" + q).json()
        items = d.get("items") if isinstance(d, dict) else None
        return [Snapshot.from_dict(i) for i in items or [] if isinstance(i, dict)]

    def get_snapshot(self, snapshot_id: str) -> Snapshot:
        return Snapshot.from_dict(self._t.request("GET", "/v1/sandbox/snapshots/" + _q(snapshot_id)).json())

    def delete_snapshot(self, snapshot_id: str) -> Snapshot:
        """DELETE: its image and /tmp copy removed; the sessions forked from it live on."""
        return Snapshot.from_dict(self._t.request("DELETE", "/v1/sandbox/snapshots/" + _q(snapshot_id),
                                                  timeout=max(self._t.timeout, 60.0)).json())
