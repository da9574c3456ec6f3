"""Typed results (dataclasses); each keeps the server's JSON in ``raw``."""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

TERMINAL_STATUSES = ("succeeded", "failed", "timeout", "oom_killed", "cancelled", "error")


def _decode_stream(raw: Dict[str, Any], name: str) -> bytes:
    v = raw.get(name)
    if not isinstance(v, str):
        return b""
    if raw.get(name + "_encoding") == "base64":
        try:
            return base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError):
            return v.encode("utf-8")
    return v.encode("utf-8")


@dataclass
class FileInfo:
    path: str
    size: Optional[int] = None
    sha256: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "FileInfo":
        return cls(path=str(d.get("path", "")), size=d.get("size"), sha256=d.get("sha256"))


@dataclass
class Usage:
    cpu_seconds: Optional[float] = None
    memory_mb_seconds: Optional[float] = None
    duration_s: Optional[float] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Usage":
        return cls(d.get("cpu_seconds"), d.get("memory_mb_seconds"), d.get("duration_s"))


@dataclass
class Execution:
    """One execution as the server describes it.

    ``stdout``/``stderr`` are text: when the server sent base64 (output that is
    not UTF-8) they are decoded, and ``stdout_bytes``/``stderr_bytes`` hold the
    exact bytes (the text then replaces invalid sequences).  ``ex["field"]``
    reads the raw JSON.
    """
    id: str
    status: str
    raw: Dict[str, Any] = field(repr=False)
    profile: Optional[str] = None
    backend: Optional[str] = None
    image: Optional[str] = None
    command: Optional[List[str]] = None
    tool: Optional[str] = None
    limits: Dict[str, Any] = field(default_factory=dict)
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: bytes = field(default=b"", repr=False)
    stderr_bytes: bytes = field(default=b"", repr=False)
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    files: List[FileInfo] = field(default_factory=list)
    usage: Optional[Usage] = None
    error: Optional[Dict[str, Any]] = None
    project_id: Optional[str] = None
    agent_id: Optional[str] = None
    run_id: Optional[str] = None
    trace_id: Optional[str] = None
    created_at: Optional[str] = None
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    callback: Optional[Dict[str, Any]] = None
    session_id: Optional[str] = None
    # the client.sandbox this object came from (write_stdin / close_stdin)
    _sandbox: Any = field(default=None, repr=False, compare=False)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def __getstate__(self) -> Dict[str, Any]:
        # pickled without its client (which holds the API key): write_stdin
        # then needs client.sandbox.write_stdin(id, ...)
        st = dict(self.__dict__)
        st["_sandbox"] = None
        return st

    def __setstate__(self, st: Dict[str, Any]) -> None:
        self.__dict__.update(st)

    def write_stdin(self, data: Any, *, eof: bool = False, timeout: Optional[float] = 60.0) -> Dict[str, Any]:
        """Send ``data`` (str or bytes) to the stdin of this running execution, which
        was created with ``stdin_mode="stream"``; ``eof=True`` closes it after them.
        Waits (up to ``timeout`` s) while the server answers ``stdin_busy`` (the
        program is not reading yet, or 1 MiB already waits for it).  Returns
        ``{id, written, eof, pending}``."""
        if self._sandbox is None:
            raise TypeError("this Execution is not bound to a client: use client.sandbox.write_stdin(id, ...)")
        r: Dict[str, Any] = self._sandbox.write_stdin(self.id, data, eof=eof, timeout=timeout)
        return r

    def close_stdin(self, *, timeout: Optional[float] = 60.0) -> Dict[str, Any]:
        """Close the stdin of this running execution (the program reads EOF)."""
        return self.write_stdin(b"", eof=True, timeout=timeout)

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Execution":
        so, se = _decode_stream(d, "stdout"), _decode_stream(d, "stderr")
        files = d.get("files")
        usage = d.get("usage")
        err = d.get("error")
        lim = d.get("limits")
        cmd = d.get("command")
        return cls(
            id=str(d.get("id", "")), status=str(d.get("status", "")), raw=d,
            profile=d.get("profile"), backend=d.get("backend"), image=d.get("image"),
            command=list(cmd) if isinstance(cmd, list) else None, tool=d.get("tool"),
            limits=dict(lim) if isinstance(lim, dict) else {},
            exit_code=d.get("exit_code"), signal=d.get("signal"),
            stdout=so.decode("utf-8", "replace"), stderr=se.decode("utf-8", "replace"),
            stdout_bytes=so, stderr_bytes=se,
            stdout_truncated=bool(d.get("stdout_truncated", False)),
            stderr_truncated=bool(d.get("stderr_truncated", False)),
            files=[FileInfo.from_dict(f) for f in files if isinstance(f, dict)] if isinstance(files, list) else [],
            usage=Usage.from_dict(usage) if isinstance(usage, dict) else None,
            error=err if isinstance(err, dict) else None,
            project_id=d.get("project_id"), agent_id=d.get("agent_id"), run_id=d.get("run_id"),
            trace_id=d.get("trace_id"), created_at=d.get("created_at"),
            started_at=d.get("started_at"), finished_at=d.get("finished_at"),
            callback=d.get("callback") if isinstance(d.get("callback"), dict) else None,
            session_id=d.get("session_id"))


@dataclass
class Event:
    """One Server-Sent Event of an execution: ``type`` is ``stdout``, ``stderr`` or ``status``.

    For output chunks ``bytes`` is the decoded chunk and ``text`` its text; for
    status events ``status`` is set (the last one is terminal).
    """
    type: str
    data: Dict[str, Any]
    bytes: bytes = b""
    text: str = ""
    status: Optional[str] = None
    id: Optional[str] = None

    @classmethod
    def from_sse(cls, event: str, data: Dict[str, Any], id: Optional[str] = None) -> "Event":
        if event in ("stdout", "stderr"):
            b = _decode_stream({"data": data.get("data"), "data_encoding": data.get("encoding")}, "data")
            return cls(type=event, data=data, bytes=b, text=b.decode("utf-8", "replace"), id=id)
        st = data.get("status")
        return cls(type=event, data=data, status=st if isinstance(st, str) else None, id=id)


@dataclass
class Session:
    """A session as the server describes it (docs/sessions.md); ``raw`` is the JSON."""
    id: str
    status: str
    raw: Dict[str, Any] = field(repr=False)
    profile: Optional[str] = None
    image: Optional[str] = None
    limits: Dict[str, Any] = field(default_factory=dict)
    idle_timeout_s: Optional[int] = None
    ttl_s: Optional[int] = None
    max_concurrent_executions: Optional[int] = None
    created_at: Optional[str] = None
    expires_at: Optional[str] = None
    last_used_at: Optional[str] = None
    ended_at: Optional[str] = None
    end_reason: Optional[str] = None
    executions: Optional[int] = None
    usage: Optional[Usage] = None
    #: ``user``, ``idle`` or ``drain`` while paused (a call resumes ``idle`` and ``drain`` ones)
    paused_by: Optional[str] = None
    paused_at: Optional[str] = None
    auto_pause: Optional[bool] = None
    paused_ttl_s: Optional[int] = None
    #: the session's allow list (``network.egress``), empty without network
    egress: List[str] = field(default_factory=list)
    #: a fork: the snapshot it was restored from
    from_snapshot: Optional[str] = None

    #: statuses after which nothing runs in it any more
    TERMINAL = ("ended", "failed", "interrupted")

    @property
    def live(self) -> bool:
        return self.status not in self.TERMINAL

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Session":
        lim, usage = d.get("limits"), d.get("usage")
        return cls(id=str(d.get("id", "")), status=str(d.get("status", "")), raw=d, profile=d.get("profile"),
                   image=d.get("image"), limits=dict(lim) if isinstance(lim, dict) else {},
                   idle_timeout_s=d.get("idle_timeout_s"), ttl_s=d.get("ttl_s"),
                   max_concurrent_executions=d.get("max_concurrent_executions"), created_at=d.get("created_at"),
                   expires_at=d.get("expires_at"), last_used_at=d.get("last_used_at"), ended_at=d.get("ended_at"),
                   end_reason=d.get("end_reason"), executions=d.get("executions"),
                   usage=Usage.from_dict(usage) if isinstance(usage, dict) else None,
                   paused_by=d.get("paused_by"), paused_at=d.get("paused_at"), auto_pause=d.get("auto_pause"),
                   paused_ttl_s=d.get("paused_ttl_s"),
                   egress=[str(e) for e in ((d.get("network") or {}).get("egress") or [])]
                   if isinstance(d.get("network"), dict) else [],
                   from_snapshot=d.get("from_snapshot"))


@dataclass
class Snapshot:
    """A snapshot of a session (docs/sessions.md "Snapshots and forks"); ``raw`` is the JSON."""
    id: str
    status: str
    raw: Dict[str, Any] = field(repr=False)
    session_id: Optional[str] = None
    size_bytes: Optional[int] = None
    created_at: Optional[str] = None
    expires_at: Optional[str] = None
    profile: Optional[str] = None
    image: Optional[str] = None
    forks: Optional[int] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Snapshot":
        return cls(id=str(d.get("id", "")), status=str(d.get("status", "")), raw=d, session_id=d.get("session_id"),
                   size_bytes=d.get("size_bytes"), created_at=d.get("created_at"), expires_at=d.get("expires_at"),
                   profile=d.get("profile"), image=d.get("image"), forks=d.get("forks"))


@dataclass
class Volume:
    """A volume (docs/volumes.md): a disk of the tenant's that executions and sessions
    mount; ``raw`` is the JSON.  ``used_bytes``/``free_bytes`` come with ``get`` only."""
    id: str
    status: str
    raw: Dict[str, Any] = field(repr=False)
    name: Optional[str] = None
    size_bytes: Optional[int] = None
    created_at: Optional[str] = None
    attached: Optional[Dict[str, Any]] = None
    usage: Optional[Dict[str, Any]] = None
    used_bytes: Optional[int] = None
    free_bytes: Optional[int] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Volume":
        return cls(id=str(d.get("id", "")), status=str(d.get("status", "")), raw=d, name=d.get("name"),
                   size_bytes=d.get("size_bytes"), created_at=d.get("created_at"), attached=d.get("attached"),
                   usage=d.get("usage"), used_bytes=d.get("used_bytes"), free_bytes=d.get("free_bytes"))


@dataclass
class SessionFile:
    path: str
    size: Optional[int] = None
    type: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "SessionFile":
        return cls(path=str(d.get("path", "")), size=d.get("size"), type=d.get("type"))


@dataclass
class ValidationResult:
    valid: bool
    errors: List[Dict[str, Any]]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ValidationResult":
        errs = d.get("errors")
        return cls(bool(d.get("valid")), list(errs) if isinstance(errs, list) else [], d)


@dataclass
class ManifestResult:
    kind: str
    name: str
    result: str
    manifest: Optional[Dict[str, Any]]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ManifestResult":
        m = d.get("manifest")
        return cls(str(d.get("kind", "")), str(d.get("name", "")), str(d.get("result", "")),
                   m if isinstance(m, dict) else None, d)
