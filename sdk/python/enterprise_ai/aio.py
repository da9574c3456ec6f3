"""``AsyncEnterpriseAI``: the client for asyncio code (agent frameworks that await).

    from enterprise_ai import AsyncEnterpriseAI
    async with AsyncEnterpriseAI(base_url=..., api_key=...) as client:
        ex = await client.sandbox.execute("python:3.11-slim", ["python3", "-c", "print(1)"],
                                          profile="gvisor-small")
        async for ev in client.sandbox.stream(ex.id):
            ...

Every call is the synchronous client's (same retries, idempotency keys, long-poll,
errors and models), run on a thread pool of the client's own so that the event
loop never blocks: ``max_concurrency`` (default 32) calls are in flight at once,
later ones wait for a thread.  The standard library only, as the rest of the SDK:
each request opens its own connection, so calls from several tasks never share one.
Cancelling the awaiting task stops the wait, not the request already sent (a
created execution keeps running: cancel it with ``sandbox.cancel``).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from typing import Any, AsyncIterator, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TypeVar, Union

from .client import EnterpriseAI
from .models import Event, Execution, ManifestResult, Session, SessionFile, ValidationResult, Volume
from .sessions import SessionHandle

T = TypeVar("T")

__all__ = ["AsyncEnterpriseAI", "AsyncSandbox", "AsyncSessions", "AsyncSessionHandle", "AsyncSessionFiles",
           "AsyncContracts", "AsyncManifests"]


class _Runner:
    def __init__(self, max_concurrency: int) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_concurrency,
                                                          thread_name_prefix="enterprise-ai")

    async def call(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kw))

    async def iterate(self, it: Iterator[T]) -> AsyncIterator[T]:
        done = object()

        def step() -> Any:
            return next(it, done)

        try:
            while True:
                x = await self.call(step)
                if x is done:
                    return
                yield x
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                await self.call(close)


class AsyncSandbox:
    """``client.sandbox``: executions, as :class:`enterprise_ai.Sandbox`, awaited."""

    def __init__(self, sync: Any, run: _Runner) -> None:
        self._s, self._run = sync, run
        self.sessions = AsyncSessions(sync.sessions, run)

    async def create(self, image: Optional[str] = None, command: Optional[Sequence[str]] = None,
                     **kw: Any) -> Execution:
        r: Execution = await self._run.call(self._s.create, image, command, **kw)
        return r

    async def execute(self, image: Optional[str] = None, command: Optional[Sequence[str]] = None,
                      **kw: Any) -> Execution:
        r: Execution = await self._run.call(self._s.execute, image, command, **kw)
        return r

    async def get(self, execution_id: str) -> Execution:
        r: Execution = await self._run.call(self._s.get, execution_id)
        return r

    async def wait(self, execution_id: str, timeout: Optional[float] = None) -> Execution:
        r: Execution = await self._run.call(self._s.wait, execution_id, timeout)
        return r

    async def cancel(self, execution_id: str) -> Execution:
        r: Execution = await self._run.call(self._s.cancel, execution_id)
        return r

    async def download_file(self, execution_id: str, path: str) -> bytes:
        r: bytes = await self._run.call(self._s.download_file, execution_id, path)
        return r

    async def write_stdin(self, execution_id: str, data: Union[str, bytes], *, eof: bool = False,
                          timeout: Optional[float] = 60.0) -> Dict[str, Any]:
        r: Dict[str, Any] = await self._run.call(self._s.write_stdin, execution_id, data, eof=eof, timeout=timeout)
        return r

    async def close_stdin(self, execution_id: str, *, timeout: Optional[float] = 60.0) -> Dict[str, Any]:
        r: Dict[str, Any] = await self._run.call(self._s.close_stdin, execution_id, timeout=timeout)
        return r

    async def profiles(self) -> List[Dict[str, Any]]:
        r: List[Dict[str, Any]] = await self._run.call(self._s.profiles)
        return r

    def list(self, *, status: Optional[str] = None, run_id: Optional[str] = None,
             limit: Optional[int] = None) -> AsyncIterator[Execution]:
        return self._run.iterate(self._s.list(status=status, run_id=run_id, limit=limit))

    def stream(self, execution_id: str, last_event_id: Optional[str] = None) -> AsyncIterator[Event]:
        return self._run.iterate(self._s.stream(execution_id, last_event_id))


class AsyncSessionFiles:
    def __init__(self, sync: Any, run: _Runner) -> None:
        self._f, self._run = sync, run

    async def write(self, path: str, data: Union[str, bytes]) -> Dict[str, Any]:
        r: Dict[str, Any] = await self._run.call(self._f.write, path, data)
        return r

    async def read(self, path: str) -> bytes:
        r: bytes = await self._run.call(self._f.read, path)
        return r

    async def list(self, path: Optional[str] = None) -> List[SessionFile]:
        r: List[SessionFile] = await self._run.call(self._f.list, path)
        return r

    async def delete(self, path: str) -> None:
        await self._run.call(self._f.delete, path)


class AsyncSessionHandle:
    """A live session, awaited (also ``async with``): ``run``, ``submit``, ``files``,
    ``refresh``, ``pause``, ``resume``, ``close``; ``info`` and its fields as the
    synchronous handle's."""

    def __init__(self, sync: SessionHandle, run: _Runner) -> None:
        self._h, self._run = sync, run
        self.id = sync.id
        self.files = AsyncSessionFiles(sync.files, run)

    @property
    def info(self) -> Session:
        return self._h.info

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_h"].info, name)

    def __repr__(self) -> str:
        return "AsyncSessionHandle(id=%r, status=%r)" % (self.id, self._h.info.status)

    async def __aenter__(self) -> "AsyncSessionHandle":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._h.info.status not in ("ended", "failed"):
            await self.close()

    async def submit(self, command: Sequence[str], **kw: Any) -> Execution:
        r: Execution = await self._run.call(self._h.submit, command, **kw)
        return r

    async def run(self, command: Sequence[str], *, timeout: Optional[float] = 600.0, **kw: Any) -> Execution:
        r: Execution = await self._run.call(self._h.run, command, timeout=timeout, **kw)
        return r

    async def refresh(self) -> Session:
        r: Session = await self._run.call(self._h.refresh)
        return r

    async def pause(self) -> Session:
        r: Session = await self._run.call(self._h.pause)
        return r

    async def resume(self) -> Session:
        r: Session = await self._run.call(self._h.resume)
        return r

    async def close(self) -> Session:
        r: Session = await self._run.call(self._h.close)
        return r


class AsyncSessions:
    """``client.sandbox.sessions``, awaited."""

    def __init__(self, sync: Any, run: _Runner) -> None:
        self._s, self._run = sync, run

    async def create(self, image: Optional[str] = None, **kw: Any) -> AsyncSessionHandle:
        h: SessionHandle = await self._run.call(self._s.create, image, **kw)
        return AsyncSessionHandle(h, self._run)

    async def get(self, session_id: str) -> AsyncSessionHandle:
        h: SessionHandle = await self._run.call(self._s.get, session_id)
        return AsyncSessionHandle(h, self._run)

    async def list(self, status: Optional[str] = None) -> List[Session]:
        r: List[Session] = await self._run.call(self._s.list, status)
        return r

    async def close(self, session_id: str) -> Session:
        r: Session = await self._run.call(self._s.close, session_id)
        return r


class AsyncContracts:
    def __init__(self, sync: Any, run: _Runner) -> None:
        self._c, self._run = sync, run

    async def validate(self, name: str, document: Union[Mapping[str, Any], str, bytes]) -> ValidationResult:
        r: ValidationResult = await self._run.call(self._c.validate, name, document)
        return r


class AsyncManifests:
    def __init__(self, sync: Any, run: _Runner) -> None:
        self._m, self._run = sync, run

    async def apply(self, manifest: Union[Mapping[str, Any], str, bytes]) -> ManifestResult:
        r: ManifestResult = await self._run.call(self._m.apply, manifest)
        return r

    async def get(self, kind: str, name: str) -> Dict[str, Any]:
        r: Dict[str, Any] = await self._run.call(self._m.get, kind, name)
        return r

    async def delete(self, kind: str, name: str) -> Dict[str, Any]:
        r: Dict[str, Any] = await self._run.call(self._m.delete, kind, name)
        return r


class AsyncVolumes:
    """``client.volumes`` (enterprise_ai.volumes.Volumes), awaited."""

    def __init__(self, sync: Any, run: _Runner) -> None:
        self._v, self._run = sync, run

    async def create(self, name: str, size: Union[int, str], *, timeout: float = 120.0) -> Volume:
        r: Volume = await self._run.call(self._v.create, name, size, timeout=timeout)
        return r

    async def list(self) -> List[Volume]:
        r: List[Volume] = await self._run.call(self._v.list)
        return r

    async def get(self, ref: str) -> Volume:
        r: Volume = await self._run.call(self._v.get, ref)
        return r

    async def delete(self, ref: str) -> Dict[str, Any]:
        r: Dict[str, Any] = await self._run.call(self._v.delete, ref)
        return r

    def files(self, ref: str) -> AsyncSessionFiles:
        return AsyncSessionFiles(self._v.files(ref), self._run)


class AsyncRunsClient:
    """``client.agent.runs`` (enterprise_ai.agent.RunsClient), awaited."""

    def __init__(self, sync: Any, run: _Runner) -> None:
        self._r, self._run = sync, run

    async def get(self, run_id: str, *, limit: Optional[int] = None) -> Any:
        return await self._run.call(self._r.get, run_id, limit=limit)

    def list(self, **kw: Any) -> AsyncIterator[Any]:
        return self._run.iterate(self._r.list(**kw))

    async def page(self, **kw: Any) -> Any:
        return await self._run.call(self._r.page, **kw)


class AsyncAgentsClient:
    """``client.agent.agents`` (enterprise_ai.agent.AgentsClient), awaited."""

    def __init__(self, sync: Any, run: _Runner) -> None:
        self._a, self._run = sync, run

    async def get(self, agent_id: str) -> Any:
        return await self._run.call(self._a.get, agent_id)

    def list(self, **kw: Any) -> AsyncIterator[Any]:
        return self._run.iterate(self._a.list(**kw))

    def runs(self, agent_id: str, **kw: Any) -> AsyncIterator[Any]:
        return self._run.iterate(self._a.runs(agent_id, **kw))


class AsyncSessionsClient(AsyncSessions):
    """``client.agent.sessions`` (enterprise_ai.agent.SessionsClient), awaited."""

    async def for_run(self, run_id: str) -> List[Session]:
        r: List[Session] = await self._run.call(self._s.for_run, run_id)
        return r


class AsyncAgentView:
    """``client.agent``: ``agents``, ``runs``, ``sessions``, awaited."""

    def __init__(self, sync: Any, run: _Runner) -> None:
        self.agents = AsyncAgentsClient(sync.agents, run)
        self.runs = AsyncRunsClient(sync.runs, run)
        self.sessions = AsyncSessionsClient(sync.sessions, run)


class AsyncEnterpriseAI:
    """The asyncio client: the arguments of :class:`EnterpriseAI`, plus
    ``max_concurrency`` (calls in flight at once, default 32).  ``aclose()`` (or
    ``async with``) releases its threads."""

    def __init__(self, base_url: Optional[str] = None, api_key: Optional[str] = None, *,
                 max_concurrency: int = 32, **kw: Any) -> None:
        self._sync = EnterpriseAI(base_url, api_key, **kw)
        self._run = _Runner(max_concurrency)
        self.sandbox = AsyncSandbox(self._sync.sandbox, self._run)
        self.contracts = AsyncContracts(self._sync.contracts, self._run)
        self.manifests = AsyncManifests(self._sync.manifests, self._run)
        self.volumes = AsyncVolumes(self._sync.volumes, self._run)
        self.agent = AsyncAgentView(self._sync.agent, self._run)

    @property
    def base_url(self) -> str:
        return self._sync.base_url

    @property
    def sync(self) -> EnterpriseAI:
        """The synchronous client underneath (same settings)."""
        return self._sync

    def __repr__(self) -> str:
        return "AsyncEnterpriseAI(base_url=%r, api_key='***')" % self._sync.base_url

    async def __aenter__(self) -> "AsyncEnterpriseAI":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._run.pool.shutdown(wait=False)
