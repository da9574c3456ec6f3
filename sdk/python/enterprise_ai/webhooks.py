"""Checking the signature of a completion callback (docs/executions.md "Completion callbacks").

eaid POSTs the summary of a finished execution to the ``callback.url`` given on
create, with ``Eai-Signature: t=<unix seconds>,v1=<hex>`` where ``<hex>`` is
HMAC-SHA-256(secret, ``"<t>.<body>"``) over the exact body bytes.
"""
from __future__ import annotations

import hashlib
import hmac
import time
from typing import List, Optional, Union

SIGNATURE_HEADER = "Eai-Signature"
EVENT_ID_HEADER = "Eai-Event-Id"


def sign(secret: Union[str, bytes], timestamp: int, body: Union[str, bytes]) -> str:
    """The header value eaid sends for ``body`` at ``timestamp`` (for tests and tools)."""
    s = secret.encode("utf-8") if isinstance(secret, str) else secret
    b = body.encode("utf-8") if isinstance(body, str) else body
    mac = hmac.new(s, str(int(timestamp)).encode("ascii") + b"." + b, hashlib.sha256).hexdigest()
    return "t=%d,v1=%s" % (int(timestamp), mac)


def verify_signature(secret: Union[str, bytes], header: Optional[str], body: Union[str, bytes],
                     tolerance_s: float = 300, now: Optional[float] = None) -> bool:
    """True when ``header`` (the ``Eai-Signature`` value) signs ``body`` (the exact
    bytes received) with ``secret`` and its ``t`` is within ``tolerance_s`` seconds
    of ``now`` (default: the clock; ``tolerance_s <= 0`` turns the check off).
    The comparison is constant-time; a malformed header is False, never an error.
    Keep the ``Eai-Event-Id`` values accepted: a callback may come twice."""
    if not header or not isinstance(header, str):
        return False
    t: Optional[int] = None
    sigs: List[str] = []
    for part in header.split(","):
        k, sep, v = part.strip().partition("=")
        if not sep:
            continue
        if k == "t":
            if not v.isdigit() or len(v) > 19:
                return False
            t = int(v)
        elif k == "v1":
            sigs.append(v.strip().lower())
    if t is None or not sigs:
        return False
    if tolerance_s > 0 and abs((time.time() if now is None else now) - t) > tolerance_s:
        return False
    want = sign(secret, t, body).split("v1=", 1)[1]
    ok = False
    for s in sigs:
        ok |= hmac.compare_digest(want.encode("ascii"), s.encode("ascii", "replace"))
    return ok
