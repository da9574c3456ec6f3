"""The eai-sandbox client: standard library only (http.client, json)."""
from __future__ import annotations

import email.utils
import http.client
import json
import logging
import os
import random
import socket
import time
import urllib.parse
import uuid
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union)

from . import errors
from .models import TERMINAL_STATUSES, Event, Execution, ManifestResult, ValidationResult
from .sessions import Sessions
from .volumes import Volumes, VolumesArg, mounts

__version__ = "0.1.0"

log = logging.getLogger("enterprise_ai")

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
RETRY_STATUSES = (429, 503)
MAX_WAIT_S = 60          # the server's long-poll bound (wait_s 0..60)
MAX_RETRY_AFTER_S = 60.0  # a Retry-After above this is cut to it (the time budget still applies)

FilesArg = Union[Sequence[Mapping[str, Any]], Mapping[str, Union[str, bytes]]]


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After as seconds (delta-seconds or an HTTP date), None when absent or malformed."""
    if not value:
        return None
    v = value.strip()
    if v.isdigit():
        return float(min(int(v), 86400))
    try:
        dt = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    if dt is None:
        return None
    return max(0.0, dt.timestamp() - time.time())


def _code_of(body: bytes) -> Optional[str]:
    try:
        e = json.loads(body).get("error")
        return str(e.get("code")) if isinstance(e, dict) else None
    except (ValueError, AttributeError):
        return None


class _Response:
    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        if not self.body:
            return {}
        try:
            return json.loads(self.body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise errors.APIConnectionError("the server answered %d with a body that is not JSON: %s"
                                            % (self.status, e)) from None


class _Transport:
    """HTTP with bounded retries.  Retried: connection errors (refused, reset,
    dropped before a complete answer), 429 and 503, with exponential backoff and
    full jitter, honouring Retry-After; at most ``max_retries`` retries and
    ``retry_max_elapsed`` seconds in all.  Every route the SDK calls is safe to
    repeat (GET/DELETE; ``create`` carries an Idempotency-Key; validate, apply
    and cancel converge), so a lost answer is retried too."""

    def __init__(self, base_url: str, api_key: str, language: Optional[str], timeout: float,
                 max_retries: int, retry_max_elapsed: float, backoff_base: float, backoff_max: float,
                 headers: Optional[Mapping[str, str]]) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise errors.EnterpriseAIError("base_url must be an http:// or https:// URL, got %r" % base_url)
        self.base_url = base_url
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self.__key = api_key
        self.language = language
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.retry_max_elapsed = max(0.0, float(retry_max_elapsed))
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.extra_headers = dict(headers or {})
        self.sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:
        return "_Transport(base_url=%r, api_key='***')" % self.base_url

    def copy(self, language: Optional[str]) -> "_Transport":
        t = _Transport(self.base_url, self.__key, language, self.timeout, self.max_retries,
                       self.retry_max_elapsed, self.backoff_base, self.backoff_max, self.extra_headers)
        t.sleep = self.sleep
        return t

    def _conn(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def headers(self, extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
        h = {"Authorization": "Bearer " + self.__key, "Accept": "application/json",
             "User-Agent": "enterprise-ai-python/" + __version__}
        if self.language:
            h["Accept-Language"] = self.language
        h.update(self.extra_headers)
        h.update(extra or {})
        return h

    def backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [cap/2, cap], cap = min(backoff_max, base * 2**attempt)."""
        cap = min(self.backoff_max, self.backoff_base * (2 ** attempt))
        return random.uniform(cap / 2.0, cap)

    def request(self, method: str, path: str, body: Any = None, headers: Optional[Mapping[str, str]] = None,
                timeout: Optional[float] = None, raw_body: Optional[bytes] = None,
                content_type: str = "application/json", idempotent: bool = True,
                caller_codes: Tuple[str, ...] = ()) -> _Response:
        """``idempotent=False`` (a POST without Idempotency-Key): a connection error
        is not retried once the request may have reached the server; 429/503 are.
        ``caller_codes``: error codes raised at once, not retried here (the caller
        retries them its own way, e.g. ``stdin_busy``)."""
        data: Optional[bytes] = raw_body
        h = self.headers(headers)
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        if data is not None:
            h["Content-Type"] = content_type
        t0 = time.monotonic()
        attempt = 0
        while True:
            err: Optional[BaseException] = None
            resp: Optional[_Response] = None
            try:
                resp = self._once(method, path, data, h, timeout if timeout is not None else self.timeout)
            except (OSError, http.client.HTTPException) as e:
                err = e
                if not idempotent and not isinstance(e, ConnectionRefusedError):
                    raise errors.APIConnectionError("%s %s: the connection to %s broke (%s: %s); not retried: "
                                                    "the request may have been done" % (
                                                        method, path.split("?")[0], self.base_url,
                                                        type(e).__name__, e)) from None
            if resp is not None and resp.status < 400:
                return resp
            retry_after: Optional[float] = None
            if resp is not None:
                retry_after = _retry_after(resp.headers.get("retry-after"))
                if resp.status not in RETRY_STATUSES or (caller_codes and _code_of(resp.body) in caller_codes):
                    raise errors.from_response(resp.status, resp.body, resp.headers.get("x-request-id"),
                                               retry_after)
            delay = self.backoff(attempt)
            if retry_after is not None:
                delay = min(retry_after, MAX_RETRY_AFTER_S)
            elapsed = time.monotonic() - t0
            if attempt >= self.max_retries or elapsed + delay > self.retry_max_elapsed:
                if resp is not None:
                    raise errors.from_response(resp.status, resp.body, resp.headers.get("x-request-id"),
                                               retry_after)
                raise errors.APIConnectionError("%s %s: no answer from %s after %d attempt(s): %s: %s" % (
                    method, path.split("?")[0], self.base_url, attempt + 1, type(err).__name__, err)) from None
            log.debug("%s %s: attempt %d %s, retrying in %.2f s", method, path.split("?")[0], attempt + 1,
                      "HTTP %d" % resp.status if resp is not None else type(err).__name__, delay)
            self.sleep(delay)
            attempt += 1

    def _once(self, method: str, path: str, data: Optional[bytes], h: Dict[str, str],
              timeout: Optional[float]) -> _Response:
        c = self._conn(timeout)
        try:
            c.request(method, self._prefix + path, body=data, headers=h)
            r = c.getresponse()
            body = r.read()
            return _Response(r.status, {k.lower(): v for k, v in r.getheaders()}, body)
        finally:
            c.close()

    def stream(self, path: str, last_event_id: Optional[str] = None,
               no_content: Optional[List[bool]] = None) -> Iterator[Tuple[Optional[str], str, str]]:
        """GET an event stream; yields (id, event, data) per event (``: ping``
        comments skipped).  ``last_event_id`` is sent as ``Last-Event-ID`` so the
        server sends only the events after it.  The connection itself is retried
        like any request until the 200 arrives; a ``204`` (nothing after that id)
        yields nothing and appends True to ``no_content``.  A break after the 200 raises APIConnectionError; the
        caller (Sandbox.stream) resumes from the last id it saw."""
        t0 = time.monotonic()
        attempt = 0
        extra = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            extra["Last-Event-ID"] = last_event_id
        h = self.headers(extra)
        while True:
            c = self._conn(self.timeout)
            err: Optional[BaseException] = None
            try:
                c.request("GET", self._prefix + path, headers=h)
                r = c.getresponse()
            except (OSError, http.client.HTTPException) as e:
                c.close()
                err, r = e, None
            if r is not None and r.status == 200:
                break
            if r is not None and r.status == 204:
                r.read()
                c.close()
                if no_content is not None:
                    no_content.append(True)
                return
            retry_after: Optional[float] = None
            body = b""
            if r is not None:
                body = r.read()
                c.close()
                retry_after = _retry_after(r.getheader("Retry-After"))
                if r.status not in RETRY_STATUSES:
                    raise errors.from_response(r.status, body, r.getheader("X-Request-Id"), retry_after)
            delay = min(retry_after, MAX_RETRY_AFTER_S) if retry_after is not None else self.backoff(attempt)
            if attempt >= self.max_retries or time.monotonic() - t0 + delay > self.retry_max_elapsed:
                if r is not None:
                    raise errors.from_response(r.status, body, r.getheader("X-Request-Id"), retry_after)
                raise errors.APIConnectionError("GET %s: no answer from %s after %d attempt(s): %s: %s" % (
                    path, self.base_url, attempt + 1, type(err).__name__, err)) from None
            self.sleep(delay)
            attempt += 1
        try:
            if c.sock is not None:
                c.sock.settimeout(None)  # an execution may be silent for long; the stream ends with it
            ev: Optional[str] = None
            eid: Optional[str] = None
            data: List[str] = []
            while True:
                try:
                    line_b = r.readline(1 << 20)  # decodes chunked transfer coding (eaid streams chunked)
                except (OSError, http.client.HTTPException) as e:
                    raise errors.APIConnectionError("event stream of %s broke: %s" % (path, e)) from None
                if not line_b:
                    return
                line = line_b.decode("utf-8", "replace").rstrip("\r\n")
                if line == "":
                    if ev is not None or data:
                        yield eid, ev or "message", "\n".join(data)
                    ev, eid, data = None, None, []
                elif line.startswith(":"):
                    continue  # ": ping" heartbeats and other comments
                else:
                    name, _, value = line.partition(":")
                    if value.startswith(" "):
                        value = value[1:]
                    if name == "event":
                        ev = value
                    elif name == "data":
                        data.append(value)
                    elif name == "id" and "\0" not in value:
                        eid = value
        finally:
            c.close()


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _files(files: Optional[FilesArg]) -> Optional[List[Dict[str, Any]]]:
    """files as the API's list; a mapping {path: str | bytes} is accepted too (bytes go as content_b64)."""
    if files is None:
        return None
    if isinstance(files, Mapping):
        import base64
        out: List[Dict[str, Any]] = []
        for p, v in files.items():
            if isinstance(v, (bytes, bytearray)):
                out.append({"path": p, "content_b64": base64.b64encode(bytes(v)).decode("ascii")})
            else:
                out.append({"path": p, "content": v})
        return out
    return [dict(f) for f in files]


class Sandbox:
    """``client.sandbox``: executions; ``client.sandbox.sessions``: sessions."""

    def __init__(self, t: _Transport) -> None:
        self._t = t
        self.sessions = Sessions(t, self)

    def __repr__(self) -> str:
        return "Sandbox(base_url=%r)" % self._t.base_url

    @staticmethod
    def build_request(image: Optional[str] = None, command: Optional[Sequence[str]] = None, *,
                      profile: Optional[str] = None, limits: Optional[Mapping[str, Any]] = None,
                      files: Optional[FilesArg] = None, env: Optional[Mapping[str, str]] = None,
                      stdin: Optional[str] = None, collect: Optional[Sequence[str]] = None,
                      network: Optional[Mapping[str, Any]] = None, tool: Optional[str] = None,
                      project_id: Optional[str] = None, agent_id: Optional[str] = None,
                      run_id: Optional[str] = None, callback: Optional[Mapping[str, str]] = None,
                      extra: Optional[Mapping[str, Any]] = None, stdin_mode: Optional[str] = None,
                      volumes: Optional[VolumesArg] = None) -> Dict[str, Any]:
        body: Dict[str, Any] = {}
        for k, v in (("profile", profile), ("image", image),
                     ("command", list(command) if command is not None else None),
                     ("limits", dict(limits) if limits is not None else None), ("env", dict(env) if env is not None else None),
                     ("stdin", stdin), ("files", _files(files)),
                     ("collect", list(collect) if collect is not None else None),
                     ("network", dict(network) if network is not None else None), ("tool", tool),
                     ("project_id", project_id), ("agent_id", agent_id), ("run_id", run_id),
                     ("callback", dict(callback) if callback is not None else None),
                     ("stdin_mode", stdin_mode), ("volumes", mounts(volumes))):
            if v is not None:
                body[k] = v
        if extra:
            body.update(extra)
        return body

    def create(self, image: Optional[str] = None, command: Optional[Sequence[str]] = None, *,
               profile: Optional[str] = None, limits: Optional[Mapping[str, Any]] = None,
               files: Optional[FilesArg] = None, env: Optional[Mapping[str, str]] = None,
               stdin: Optional[str] = None, collect: Optional[Sequence[str]] = None,
               network: Optional[Mapping[str, Any]] = None, tool: Optional[str] = None,
               project_id: Optional[str] = None, agent_id: Optional[str] = None, run_id: Optional[str] = None,
               callback: Optional[Mapping[str, str]] = None,
               idempotency_key: Optional[str] = None, request: Optional[Mapping[str, Any]] = None,
               stdin_mode: Optional[str] = None, volumes: Optional[VolumesArg] = None) -> Execution:
        """Submit an execution (202); returns ``{id, status}`` as an Execution.

        ``stdin_mode="stream"`` keeps the program's stdin open: feed it with
        ``ex.write_stdin(...)`` and end it with ``ex.close_stdin()`` while reading
        the answers with :meth:`stream` (``stdin`` must then be None).

        Always sends an ``Idempotency-Key`` (a fresh UUID unless given) that stays
        the same across the retries of this call, so a retry after a lost answer
        returns the first execution instead of running the code twice.
        ``request`` (a full API body) may be given instead of the arguments.
        ``callback={"url": ..., "secret": ...}`` asks eaid to POST the summary there
        once terminal (check it with :func:`enterprise_ai.verify_signature`).
        ``volumes={"data": "/mnt/data"}`` (or the API's ``[{"name", "path", "read_only"}]``)
        mounts the tenant's volumes (docs/volumes.md, :class:`Volumes`).
        """
        body = dict(request) if request is not None else self.build_request(
            image, command, profile=profile, limits=limits, files=files, env=env, stdin=stdin,
            collect=collect, network=network, tool=tool, project_id=project_id, agent_id=agent_id, run_id=run_id,
            callback=callback, stdin_mode=stdin_mode, volumes=volumes)
        key = idempotency_key if idempotency_key is not None else str(uuid.uuid4())
        r = self._t.request("POST", "/v1/sandbox/executions", body, {"Idempotency-Key": key})
        return self._bind(Execution.from_dict(r.json()))

    def _bind(self, ex: Execution) -> Execution:
        ex._sandbox = self
        return ex

    def get(self, execution_id: str) -> Execution:
        return self._bind(Execution.from_dict(self._t.request("GET", "/v1/sandbox/executions/" + _q(execution_id)).json()))

    def write_stdin(self, execution_id: str, data: Union[str, bytes], *, eof: bool = False,
                    timeout: Optional[float] = 60.0) -> Dict[str, Any]:
        """POST ``data`` (str: UTF-8) to the stdin of a running execution created with
        ``stdin_mode="stream"`` (``eof=True``: close it after them; at most 1 MiB a
        call).  A ``stdin_busy`` answer (429: the program is not reading yet, or
        its 1 MiB buffer is full; nothing was taken) is retried until ``timeout``
        seconds have passed (None: no bound), then raised as RateLimitError.  A
        broken connection is not retried (the bytes may have reached the program).
        Returns ``{id, written, eof, pending}``."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        path = "/v1/sandbox/executions/%s/stdin%s" % (_q(execution_id), "?eof=true" if eof else "")
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.02
        while True:
            try:
                r = self._t.request("POST", path, raw_body=raw, content_type="application/octet-stream",
                                    idempotent=False, caller_codes=("stdin_busy",))
                out: Dict[str, Any] = r.json()
                return out
            except errors.RateLimitError as e:
                if e.code != "stdin_busy" or (deadline is not None and time.monotonic() + delay > deadline):
                    raise
            self._t.sleep(delay)
            delay = min(delay * 2, 0.5)

    def close_stdin(self, execution_id: str, *, timeout: Optional[float] = 60.0) -> Dict[str, Any]:
        """Close the stdin of a running execution created with ``stdin_mode="stream"``."""
        return self.write_stdin(execution_id, b"", eof=True, timeout=timeout)

    def wait(self, execution_id: str, timeout: Optional[float] = None) -> Execution:
        """Wait for the terminal status with the server's long-poll (``wait_s`` up to 60 s
        per request, never a tight loop).  ``timeout`` (seconds, None = no bound) raises
        :class:`WaitTimeoutError` when it passes first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last: Optional[Execution] = None
        while True:
            if deadline is None:
                wait_s = MAX_WAIT_S
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.WaitTimeoutError("execution %s not finished within %.0f s (last status %s)"
                                                  % (execution_id, timeout or 0, last.status if last else "?"),
                                                  execution_id, last)
                wait_s = max(1, min(MAX_WAIT_S, int(left + 0.999)))
            r = self._t.request("GET", "/v1/sandbox/executions/%s?wait_s=%d" % (_q(execution_id), wait_s),
                                timeout=wait_s + self._t.timeout)
            last = self._bind(Execution.from_dict(r.json()))
            if last.terminal:
                return last

    def execute(self, image: Optional[str] = None, command: Optional[Sequence[str]] = None, *,
                profile: Optional[str] = None, limits: Optional[Mapping[str, Any]] = None,
                files: Optional[FilesArg] = None, env: Optional[Mapping[str, str]] = None,
                stdin: Optional[str] = None, collect: Optional[Sequence[str]] = None,
                network: Optional[Mapping[str, Any]] = None, tool: Optional[str] = None,
                timeout: Optional[float] = 600.0, project_id: Optional[str] = None,
                agent_id: Optional[str] = None, run_id: Optional[str] = None,
                callback: Optional[Mapping[str, str]] = None,
                idempotency_key: Optional[str] = None, request: Optional[Mapping[str, Any]] = None,
                volumes: Optional[VolumesArg] = None) -> Execution:
        """Create an execution and wait for its end; returns the finished execution
        (a non-zero exit is ``status == "failed"``, not an exception).  ``timeout`` is
        the overall bound in seconds (default 600; None = none): when it passes,
        :class:`WaitTimeoutError` is raised and the execution keeps running."""
        t0 = time.monotonic()
        ex = self.create(image, command, profile=profile, limits=limits, files=files, env=env, stdin=stdin,
                         collect=collect, network=network, tool=tool, project_id=project_id,
                         agent_id=agent_id, run_id=run_id, callback=callback, idempotency_key=idempotency_key,
                         request=request, volumes=volumes)
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - t0))
        return self.wait(ex.id, left)

    def list(self, *, status: Optional[str] = None, run_id: Optional[str] = None,
             limit: Optional[int] = None) -> Iterator[Execution]:
        """Every execution (newest first), following the ``next`` cursor page by page;
        ``limit`` is the page size (1..100).  Items carry no stdout/stderr."""
        after: Optional[str] = None
        while True:
            q: Dict[str, str] = {}
            if status is not None:
                q["status"] = status
            if run_id is not None:
                q["run_id"] = run_id
            if limit is not None:
                q["limit"] = str(limit)
            if after is not None:
                q["after"] = after
            path = "/v1/sandbox/executions" + ("?" + urllib.parse.urlencode(q) if q else "")
            page = self._t.request("GET", path).json()
            items = page.get("items") if isinstance(page, dict) else None
            for it in items or []:
                yield Execution.from_dict(it)
            nxt = page.get("next") if isinstance(page, dict) else None
            if not nxt or not items:
                return
            after = str(nxt)

    def cancel(self, execution_id: str) -> Execution:
        """Cancel (202 with the current status); a finished one raises ConflictError (already_finished)."""
        return Execution.from_dict(
            self._t.request("POST", "/v1/sandbox/executions/%s/cancel" % _q(execution_id)).json())

    def download_file(self, execution_id: str, path: str) -> bytes:
        """The bytes of one collected file, by its path inside the sandbox (``/tmp/outputs/x``)."""
        p = "/".join(_q(s) for s in path.split("/") if s)
        return self._t.request("GET", "/v1/sandbox/executions/%s/files/%s" % (_q(execution_id), p)).body

    def stream(self, execution_id: str, last_event_id: Optional[str] = None) -> Iterator[Event]:
        """The execution's events (stdout/stderr chunks, status changes) as they come;
        ends after the terminal status (or at once when there is nothing after
        ``last_event_id``).

        Resumable: the iterator remembers the last ``id:`` and, when the connection
        breaks before the terminal status, reconnects with ``Last-Event-ID`` so each
        event is seen exactly once.  Reconnects back off like retries and are
        bounded by ``max_retries`` in a row without a new event (and
        ``retry_max_elapsed``); past that the break raises APIConnectionError."""
        path = "/v1/sandbox/executions/%s/events" % _q(execution_id)
        last = last_event_id
        fails = 0
        t_fail: Optional[float] = None
        while True:
            broke: Optional[BaseException] = None
            progressed = False
            no_content: List[bool] = []
            try:
                for eid, ev, data in self._t.stream(path, last, no_content):
                    try:
                        d = json.loads(data) if data else {}
                    except ValueError:
                        d = {"data": data}
                    e = Event.from_sse(ev, d if isinstance(d, dict) else {"data": d}, eid)
                    if eid is not None:
                        last = eid
                    progressed = True
                    yield e
                    if e.type == "status" and e.status in TERMINAL_STATUSES:
                        return
                if no_content:
                    return  # 204: nothing after the last id (the terminal status is behind us)
            except errors.APIConnectionError as e:
                broke = e
            if last is None:  # no id seen: resuming would replay from the start
                if broke is not None:
                    raise broke
                if progressed:
                    raise errors.APIConnectionError("event stream of %s ended before the terminal status"
                                                    % execution_id)
                return
            if progressed:
                fails, t_fail = 0, None
            if t_fail is None:
                t_fail = time.monotonic()
            delay = self._t.backoff(fails)
            if fails >= self._t.max_retries or time.monotonic() - t_fail + delay > self._t.retry_max_elapsed:
                if broke is not None:
                    raise broke
                raise errors.APIConnectionError("event stream of %s ended before the terminal status" % execution_id)
            log.debug("GET %s: stream broke after id %s, resuming in %.2f s", path, last, delay)
            self._t.sleep(delay)
            fails += 1

    def profiles(self) -> List[Dict[str, Any]]:
        p = self._t.request("GET", "/v1/sandbox/profiles").json()
        return list(p.get("profiles") or []) if isinstance(p, dict) else []


def _doc_body(document: Union[Mapping[str, Any], str, bytes]) -> Tuple[Optional[Any], Optional[bytes], str]:
    """A JSON object is sent as JSON; a str/bytes document as YAML (JSON is valid YAML)."""
    if isinstance(document, (str, bytes)):
        raw = document.encode("utf-8") if isinstance(document, str) else document
        return None, raw, "application/yaml"
    return dict(document), None, "application/json"


class Contracts:
    def __init__(self, t: _Transport) -> None:
        self._t = t

    def validate(self, name: str, document: Union[Mapping[str, Any], str, bytes]) -> ValidationResult:
        body, raw, ct = _doc_body(document)
        r = self._t.request("POST", "/v1/contracts/%s/validate" % _q(name), body, raw_body=raw, content_type=ct)
        return ValidationResult.from_dict(r.json())


class Manifests:
    def __init__(self, t: _Transport) -> None:
        self._t = t

    def apply(self, manifest: Union[Mapping[str, Any], str, bytes]) -> ManifestResult:
        body, raw, ct = _doc_body(manifest)
        r = self._t.request("POST", "/v1/manifests/apply", body, raw_body=raw, content_type=ct)
        return ManifestResult.from_dict(r.json())

    def get(self, kind: str, name: str) -> Dict[str, Any]:
        d = self._t.request("GET", "/v1/manifests/%s/%s" % (_q(kind), _q(name))).json()
        return d if isinstance(d, dict) else {"manifest": d}

    def delete(self, kind: str, name: str) -> Dict[str, Any]:
        d = self._t.request("DELETE", "/v1/manifests/%s/%s" % (_q(kind), _q(name))).json()
        return d if isinstance(d, dict) else {}


class EnterpriseAI:
    """Client of the eai-sandbox API.

    ``base_url`` and ``api_key`` default to ``EAI_URL`` and ``EAI_API_KEY``.
    ``language`` (``"en"``/``"fr"``) is sent as ``Accept-Language``.  ``timeout`` is
    the socket timeout of one request (a long-poll adds its ``wait_s``);
    ``max_retries`` and ``retry_max_elapsed`` bound the retries of connection
    errors, 429 and 503.
    """

    def __init__(self, base_url: Optional[str] = None, api_key: Optional[str] = None, *,
                 language: Optional[str] = None, timeout: float = 30.0, max_retries: int = 5,
                 retry_max_elapsed: float = 60.0, backoff_base: float = 0.25, backoff_max: float = 8.0,
                 headers: Optional[Mapping[str, str]] = None) -> None:
        base = base_url or os.environ.get("EAI_URL") or DEFAULT_BASE_URL
        key = api_key if api_key is not None else os.environ.get("EAI_API_KEY")
        if not key:
            raise errors.EnterpriseAIError("no API key: pass api_key= or set EAI_API_KEY")
        if any(c in key for c in "\r\n\0") or not key.isprintable():
            raise errors.EnterpriseAIError("the API key holds characters a header cannot carry")
        if language is not None and any(c in language for c in "\r\n\0"):
            raise errors.EnterpriseAIError("bad language %r" % language)
        self._t = _Transport(base.rstrip("/"), key, language, timeout, max_retries, retry_max_elapsed,
                             backoff_base, backoff_max, headers)
        self.sandbox = Sandbox(self._t)
        self.contracts = Contracts(self._t)
        self.manifests = Manifests(self._t)
        self.volumes = Volumes(self._t)
        from .agent import AgentView
        self.agent = AgentView(self)

    @property
    def base_url(self) -> str:
        return self._t.base_url

    @property
    def language(self) -> Optional[str]:
        return self._t.language

    def with_language(self, language: Optional[str]) -> "EnterpriseAI":
        """A client sharing this one's settings with another ``Accept-Language``."""
        c = object.__new__(EnterpriseAI)
        c._t = self._t.copy(language)
        c.sandbox, c.contracts, c.manifests = Sandbox(c._t), Contracts(c._t), Manifests(c._t)
        c.volumes = Volumes(c._t)
        from .agent import AgentView
        c.agent = AgentView(c)
        return c

    def __repr__(self) -> str:
        return "EnterpriseAI(base_url=%r, api_key='***', language=%r)" % (self._t.base_url, self._t.language)

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("EnterpriseAI is not picklable (it holds an API key)")
