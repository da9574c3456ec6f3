"""Volumes (docs/volumes.md): disks of the tenant's, kept between executions and
sessions on the node that made them.

    vol = client.volumes.create("notes", "64Mi")
    client.sandbox.execute("python:3.11-slim", ["sh", "-c", "echo kept > /mnt/notes/a.txt"],
                           profile="gvisor-small", volumes={"notes": "/mnt/notes"})
    print(client.volumes.files("notes").read("a.txt"))    # b"kept\\n"
    client.volumes.delete("notes")
"""
from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Union

from .models import Volume

if TYPE_CHECKING:
    from .client import _Transport
    from .sessions import SessionFiles

# {"name": "/mnt/path"} (read-write), or [{"name", "path", "read_only"}, ...] as the API takes them
VolumesArg = Union[Mapping[str, str], Sequence[Mapping[str, Any]]]


def mounts(v: Optional[VolumesArg]) -> Optional[List[Dict[str, Any]]]:
    """The request's ``volumes`` list from the SDK's shorthand (None stays None)."""
    if v is None:
        return None
    if isinstance(v, Mapping):
        return [{"name": str(k), "path": str(p)} for k, p in v.items()]
    return [dict(m) for m in v]


def _q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


class Volumes:
    """``client.volumes``.  ``ref`` is a volume's id (``vol_...``) or its name."""

    def __init__(self, t: "_Transport") -> None:
        self._t = t

    def create(self, name: str, size: Union[int, str], *, timeout: float = 120.0) -> Volume:
        """POST a volume of ``size`` bytes (or a quantity, ``"512Mi"``); answers once it is
        formatted and mounted on the node.  Not retried after a lost answer: a retry
        of a create that landed answers ``409 conflict`` (the name exists)."""
        body = {"name": name, "size_bytes": size}
        return Volume.from_dict(self._t.request("POST", "/v1/volumes", body, timeout=timeout,
                                                idempotent=False).json())

    def list(self) -> List[Volume]:
        d = self._t.request("GET", "/v1/volumes").json()
        items = d.get("items") if isinstance(d, dict) else None
        return [Volume.from_dict(i) for i in items or [] if isinstance(i, dict)]

    def get(self, ref: str) -> Volume:
        """The volume with its ``used_bytes`` and ``free_bytes``."""
        return Volume.from_dict(self._t.request("GET", "/v1/volumes/" + _q(ref)).json())

    def delete(self, ref: str) -> Dict[str, Any]:
        """``{"id", "status": "deleted", "usage"}``; ``ConflictError`` (volume_in_use) while
        a sandbox or a file call holds it."""
        d = self._t.request("DELETE", "/v1/volumes/" + _q(ref), timeout=max(self._t.timeout, 60.0)).json()
        return d if isinstance(d, dict) else {}

    def files(self, ref: str) -> "SessionFiles":
        """The volume's files: ``write``, ``read``, ``list``, ``delete`` as a session's
        (paths relative to the volume's root)."""
        from .sessions import SessionFiles
        return SessionFiles(self._t, ref, base="/v1/volumes/" + _q(ref))
