"""The agent view (docs/api.md "Runs and agents"): what an agent platform reads.

    from enterprise_ai import EnterpriseAI
    from enterprise_ai.agent import AgentsClient, RunsClient, SessionsClient

    client = EnterpriseAI()
    run = client.agent.runs.get("run-42")            # or RunsClient(client).get("run-42")
    print(run.counts, run.usage.cpu_seconds, run.trace_ids)
    for a in client.agent.agents.list():            # every page
        print(a.agent_id, a.runs, a.last_seen)
    with client.agent.sessions.create("python:3.11-slim", profile="gvisor", run_id="run-42") as s:
        s.run(["python3", "-c", "print(1)"])          # the execution carries run-42 too

``AgentsClient``, ``RunsClient`` and ``SessionsClient`` take an ``EnterpriseAI``;
``client.agent`` holds one of each (``client.agent.agents``, ``.runs``, ``.sessions``).
"""
from __future__ import annotations

import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from .models import Session, Usage
from .sessions import SessionHandle, Sessions

if TYPE_CHECKING:
    from .client import EnterpriseAI, _Transport

__all__ = ["AgentsClient", "RunsClient", "SessionsClient", "AgentView", "Run", "RunExecution", "RunSummary",
           "Agent", "AgentSummary", "ProfileUsage"]


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _usage(d: Any) -> Usage:
    return Usage.from_dict(d) if isinstance(d, dict) else Usage()


def _int(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


@dataclass
class RunExecution:
    """One execution of a run (no output: read it with ``client.sandbox.get(id)``)."""
    id: str
    status: str
    raw: Dict[str, Any] = field(repr=False)
    profile: Optional[str] = None
    session_id: Optional[str] = None
    trace_id: Optional[str] = None
    created_at: Optional[str] = None
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    usage: Optional[Usage] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "RunExecution":
        u = d.get("usage")
        return cls(id=str(d.get("id", "")), status=str(d.get("status", "")), raw=d, profile=d.get("profile"),
                   session_id=d.get("session_id"), trace_id=d.get("trace_id"), created_at=d.get("created_at"),
                   started_at=d.get("started_at"), finished_at=d.get("finished_at"),
                   usage=Usage.from_dict(u) if isinstance(u, dict) else None)


@dataclass
class Run:
    """``GET /v1/runs/{run_id}``: executions (oldest first, at most the asked limit;
    ``truncated`` when the run has more), this node's sessions of the run, and the
    counts, usage sums and times of the whole run."""
    run_id: str
    raw: Dict[str, Any] = field(repr=False)
    agent_id: Optional[str] = None
    project_id: Optional[str] = None
    executions: List[RunExecution] = field(default_factory=list)
    sessions: List[Session] = field(default_factory=list)
    truncated: bool = False
    sessions_truncated: bool = False
    total: int = 0
    counts: Dict[str, int] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    trace_ids: List[str] = field(default_factory=list)
    first_at: Optional[str] = None
    last_at: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Run":
        ex, ses, c, t = d.get("executions"), d.get("sessions"), d.get("counts"), d.get("trace_ids")
        return cls(run_id=str(d.get("run_id", "")), raw=d, agent_id=d.get("agent_id"),
                   project_id=d.get("project_id"),
                   executions=[RunExecution.from_dict(e) for e in ex or [] if isinstance(e, dict)],
                   sessions=[Session.from_dict(s) for s in ses or [] if isinstance(s, dict)],
                   truncated=d.get("truncated") is True, sessions_truncated=d.get("sessions_truncated") is True,
                   total=_int(d.get("total")),
                   counts={str(k): _int(v) for k, v in (c.items() if isinstance(c, dict) else [])},
                   usage=_usage(d.get("usage")), trace_ids=[str(x) for x in t or [] if isinstance(x, str)],
                   first_at=d.get("first_at"), last_at=d.get("last_at"))


@dataclass
class RunSummary:
    """One item of ``GET /v1/runs``."""
    run_id: str
    raw: Dict[str, Any] = field(repr=False)
    agent_id: Optional[str] = None
    project_id: Optional[str] = None
    executions: int = 0
    first_at: Optional[str] = None
    last_at: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "RunSummary":
        return cls(run_id=str(d.get("run_id", "")), raw=d, agent_id=d.get("agent_id"),
                   project_id=d.get("project_id"), executions=_int(d.get("executions")),
                   first_at=d.get("first_at"), last_at=d.get("last_at"))


@dataclass
class ProfileUsage:
    """An agent's usage on one profile."""
    profile: Optional[str]
    executions: int = 0
    cpu_seconds: float = 0.0
    memory_mb_seconds: float = 0.0
    duration_s: float = 0.0
    last_seen: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ProfileUsage":
        return cls(profile=d.get("profile"), executions=_int(d.get("executions")),
                   cpu_seconds=float(d.get("cpu_seconds") or 0), memory_mb_seconds=float(d.get("memory_mb_seconds") or 0),
                   duration_s=float(d.get("duration_s") or 0), last_seen=d.get("last_seen"))


@dataclass
class AgentSummary:
    """One item of ``GET /v1/agents``."""
    agent_id: str
    raw: Dict[str, Any] = field(repr=False)
    executions: int = 0
    runs: int = 0
    last_seen: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "AgentSummary":
        return cls(agent_id=str(d.get("agent_id", "")), raw=d, executions=_int(d.get("executions")),
                   runs=_int(d.get("runs")), last_seen=d.get("last_seen"))


@dataclass
class Agent:
    """``GET /v1/agents/{agent_id}``: its runs, usage per profile, last seen."""
    agent_id: str
    raw: Dict[str, Any] = field(repr=False)
    executions: int = 0
    runs: int = 0
    newest_run: Optional[str] = None
    last_seen: Optional[str] = None
    usage: List[ProfileUsage] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Agent":
        u = d.get("usage")
        return cls(agent_id=str(d.get("agent_id", "")), raw=d, executions=_int(d.get("executions")),
                   runs=_int(d.get("runs")), newest_run=d.get("newest_run"), last_seen=d.get("last_seen"),
                   usage=[ProfileUsage.from_dict(x) for x in u or [] if isinstance(x, dict)])


def _transport(client: Any) -> "_Transport":
    t = getattr(client, "_t", client)
    if not hasattr(t, "request"):
        raise TypeError("expected an EnterpriseAI client")
    return t  # type: ignore[no-any-return]


def _pages(t: "_Transport", path: str, q: Dict[str, str], limit: Optional[int]) -> Iterator[Dict[str, Any]]:
    """Every item of a cursor-paged list (``limit`` is the page size, 1..100)."""
    after: Optional[str] = None
    while True:
        qq = dict(q)
        if limit is not None:
            qq["limit"] = str(limit)
        if after is not None:
            qq["after"] = after
        page = t.request("GET", path + ("?" + urllib.parse.urlencode(qq) if qq else "")).json()
        items = page.get("items") if isinstance(page, dict) else None
        for it in items or []:
            if isinstance(it, dict):
                yield it
        nxt = page.get("next") if isinstance(page, dict) else None
        if not nxt or not items:
            return
        after = str(nxt)


class RunsClient:
    """Runs: ``get(run_id)``, ``list(agent_id=, project_id=)``, ``page(...)``."""

    def __init__(self, client: "EnterpriseAI") -> None:
        self._t = _transport(client)

    def get(self, run_id: str, *, limit: Optional[int] = None) -> Run:
        """The run; ``limit`` (1..1000, server default 100) caps the executions listed.
        A run this tenant does not have raises ``NotFoundError``."""
        q = "?limit=%d" % limit if limit is not None else ""
        return Run.from_dict(self._t.request("GET", "/v1/runs/" + _q(run_id) + q).json())

    def list(self, *, agent_id: Optional[str] = None, project_id: Optional[str] = None,
             limit: Optional[int] = None) -> Iterator[RunSummary]:
        """Every run (by run_id), following ``next`` page by page."""
        q = {k: v for k, v in (("agent_id", agent_id), ("project_id", project_id)) if v is not None}
        for it in _pages(self._t, "/v1/runs", q, limit):
            yield RunSummary.from_dict(it)

    def page(self, *, agent_id: Optional[str] = None, project_id: Optional[str] = None,
             limit: Optional[int] = None, after: Optional[str] = None) -> Tuple[List[RunSummary], Optional[str]]:
        """One page and its ``next`` cursor (None on the last page)."""
        q = {k: v for k, v in (("agent_id", agent_id), ("project_id", project_id), ("after", after))
             if v is not None}
        if limit is not None:
            q["limit"] = str(limit)
        d = self._t.request("GET", "/v1/runs" + ("?" + urllib.parse.urlencode(q) if q else "")).json()
        items = d.get("items") if isinstance(d, dict) else None
        nxt = d.get("next") if isinstance(d, dict) else None
        return [RunSummary.from_dict(i) for i in items or [] if isinstance(i, dict)], (str(nxt) if nxt else None)


class AgentsClient:
    """Agents: ``list()``, ``get(agent_id)``, ``runs(agent_id)``."""

    def __init__(self, client: "EnterpriseAI") -> None:
        self._t = _transport(client)

    def list(self, *, limit: Optional[int] = None) -> Iterator[AgentSummary]:
        """Every agent of the tenant (by agent_id), page by page."""
        for it in _pages(self._t, "/v1/agents", {}, limit):
            yield AgentSummary.from_dict(it)

    def get(self, agent_id: str) -> Agent:
        """The agent; one this tenant has no execution of raises ``NotFoundError``."""
        return Agent.from_dict(self._t.request("GET", "/v1/agents/" + _q(agent_id)).json())

    def runs(self, agent_id: str, *, project_id: Optional[str] = None,
             limit: Optional[int] = None) -> Iterator[RunSummary]:
        """The agent's runs (``GET /v1/runs?agent_id=``)."""
        q = {"agent_id": agent_id}
        if project_id is not None:
            q["project_id"] = project_id
        for it in _pages(self._t, "/v1/runs", q, limit):
            yield RunSummary.from_dict(it)


class SessionsClient:
    """Sessions of an agent's run: ``client.sandbox.sessions`` with ``project_id``,
    ``agent_id``, ``run_id`` on ``create`` (its executions inherit them) and
    ``for_run(run_id)``.  Sessions live on the node that runs them (docs/sessions.md)."""

    def __init__(self, client: "EnterpriseAI") -> None:
        self._t = _transport(client)
        sandbox = getattr(client, "sandbox", None)
        self._sessions: Sessions = sandbox.sessions if sandbox is not None else Sessions(self._t, None)  # type: ignore[arg-type]

    def create(self, image: Optional[str] = None, *, profile: Optional[str] = None,
               project_id: Optional[str] = None, agent_id: Optional[str] = None, run_id: Optional[str] = None,
               limits: Optional[Mapping[str, Any]] = None, env: Optional[Mapping[str, str]] = None,
               idle_timeout_s: Optional[int] = None, ttl_s: Optional[int] = None,
               max_concurrent_executions: Optional[int] = None, auto_resume: Optional[bool] = None,
               timeout: float = 120.0) -> SessionHandle:
        return self._sessions.create(image, profile=profile, limits=limits, env=env, idle_timeout_s=idle_timeout_s,
                                     ttl_s=ttl_s, max_concurrent_executions=max_concurrent_executions,
                                     auto_resume=auto_resume, project_id=project_id, agent_id=agent_id,
                                     run_id=run_id, timeout=timeout)

    def get(self, session_id: str) -> SessionHandle:
        return self._sessions.get(session_id)

    def list(self, status: Optional[str] = None) -> List[Session]:
        return self._sessions.list(status)

    def for_run(self, run_id: str) -> List[Session]:
        """This node's sessions created with ``run_id`` (from ``GET /v1/runs/{run_id}``;
        an empty list when the run has none)."""
        from .errors import NotFoundError
        try:
            return RunsClient(self._t).get(run_id, limit=1).sessions  # type: ignore[arg-type]
        except NotFoundError:
            return []

    def close(self, session_id: str) -> Session:
        return self._sessions.close(session_id)


class AgentView:
    """``client.agent``: ``agents`` (AgentsClient), ``runs`` (RunsClient),
    ``sessions`` (SessionsClient)."""

    def __init__(self, client: "EnterpriseAI") -> None:
        self.agents = AgentsClient(client)
        self.runs = RunsClient(client)
        self.sessions = SessionsClient(client)
