"""Errors of the eai-sandbox SDK: one type per class a caller handles differently.

Every answer that is not 2xx becomes an :class:`APIError` subclass carrying the
server's error envelope (``code``, ``message``, ``message_i18n``,
``request_id``, ``details``) and the HTTP ``status``.  The API key is never part
of an error's text or ``repr``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Type


class EnterpriseAIError(Exception):
    """Base class of every error raised by the SDK."""


class APIConnectionError(EnterpriseAIError):
    """No usable answer from the server (refused, reset, dropped) after the retries."""


class WaitTimeoutError(EnterpriseAIError, TimeoutError):
    """The SDK's own overall timeout of ``execute``/``wait`` passed.

    The execution keeps running on the server; ``execution_id`` names it and
    ``last`` holds the last state read, when there was one.
    """

    def __init__(self, message: str, execution_id: Optional[str] = None, last: Any = None) -> None:
        super().__init__(message)
        self.execution_id = execution_id
        self.last = last


class APIError(EnterpriseAIError):
    """An error answer of the API (any non-2xx status)."""

    def __init__(self, status: int, code: str, message: str,
                 message_i18n: Optional[Mapping[str, str]] = None,
                 request_id: Optional[str] = None,
                 details: Optional[List[Dict[str, Any]]] = None,
                 body: Any = None, retry_after: Optional[float] = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.message_i18n: Dict[str, str] = dict(message_i18n or {})
        self.request_id = request_id
        self.details: List[Dict[str, Any]] = list(details or [])
        self.body = body
        self.retry_after = retry_after
        super().__init__(self._text())

    @property
    def http_status(self) -> int:
        return self.status

    def _text(self) -> str:
        s = "%d %s: %s" % (self.status, self.code, self.message)
        if self.details:
            s += " [" + "; ".join("%s: %s" % (d.get("path", ""), d.get("message", "")) for d in self.details[:5]) + "]"
        if self.request_id:
            s += " (request_id %s)" % self.request_id
        return s

    def __repr__(self) -> str:
        return "%s(status=%d, code=%r, message=%r, request_id=%r)" % (
            type(self).__name__, self.status, self.code, self.message, self.request_id)


class AuthenticationError(APIError):
    """401 unauthenticated or 403 forbidden."""


class NotFoundError(APIError):
    """404: missing, or belonging to another tenant (indistinguishable by design)."""


class ValidationError(APIError):
    """400, 413, 415, 422: the request is wrong; ``details`` names the fields."""


class ConflictError(APIError):
    """409: already_finished, idempotency_conflict, conflict."""


class RateLimitError(APIError):
    """429 rate_limited (retried by the SDK first, honouring Retry-After)."""


class UnavailableError(APIError):
    """503 sandbox_unavailable / storage_unavailable (retried by the SDK first)."""


class ServerError(APIError):
    """500 and any other 5xx."""


def error_class_for(status: int) -> Type[APIError]:
    if status in (401, 403):
        return AuthenticationError
    if status == 404:
        return NotFoundError
    if status in (400, 413, 415, 422):
        return ValidationError
    if status == 409:
        return ConflictError
    if status == 429:
        return RateLimitError
    if status == 503:
        return UnavailableError
    if status >= 500:
        return ServerError
    return APIError


def from_response(status: int, body: bytes, request_id_header: Optional[str],
                  retry_after: Optional[float]) -> APIError:
    """Build the error of one answer from its envelope (or what the answer holds)."""
    import json

    env: Any = None
    try:
        env = json.loads(body.decode("utf-8")) if body else None
    except (ValueError, UnicodeDecodeError):
        env = None
    err = env.get("error") if isinstance(env, dict) else None
    cls = error_class_for(status)
    if isinstance(err, dict):
        det = err.get("details")
        i18n = err.get("message_i18n")
        return cls(status, str(err.get("code") or "http_%d" % status), str(err.get("message") or ""),
                   i18n if isinstance(i18n, dict) else None,
                   err.get("request_id") or request_id_header,
                   det if isinstance(det, list) else None, env, retry_after)
    text = body[:200].decode("utf-8", "replace") if body else ""
    return cls(status, "http_%d" % status, text or "HTTP %d" % status, None, request_id_header, None, None,
               retry_after)
