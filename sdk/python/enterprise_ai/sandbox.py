"""``enterprise_ai.sandbox``: run untrusted tool code in a sandbox, in one call.

The seed's "sandbox.run_untrusted runs untrusted tool code" (its Kit L3 proof,
``tests/test_runtime_gvisor_sandbox.py``)::

    from enterprise_ai import sandbox
    ex = sandbox.run_untrusted("print(6 * 7)")          # EAI_URL, EAI_API_KEY
    assert ex.stdout == "42\\n"

It is :meth:`Sandbox.execute` with the code as the program: the service runs it
in a gVisor (or Kata) sandbox with no network unless the profile allows some,
within the limits given, and answers with the finished execution.  It fails
closed as the service does: when no sandbox runtime is ready, the service
refuses the code (``503 sandbox_unavailable``, raised here as
:class:`~enterprise_ai.errors.UnavailableError` once the client's retries are
spent) and it never runs anywhere else, the caller's machine included.
"""
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from .client import EnterpriseAI, FilesArg, Sandbox
from .errors import UnavailableError
from .models import Execution

__all__ = ["run_untrusted", "LANGUAGES", "Sandbox", "UnavailableError"]

# language -> the interpreter's argv before the code (the code is one argument)
LANGUAGES: Dict[str, Tuple[str, ...]] = {
    "python": ("python3", "-c"),
    "sh": ("sh", "-c"),
    "bash": ("bash", "-c"),
}


def run_untrusted(code: str, *, language: str = "python", client: Optional[EnterpriseAI] = None,
                  image: str = "python:3.11-slim", profile: Optional[str] = "gvisor",
                  timeout_s: int = 30, limits: Optional[Mapping[str, Any]] = None,
                  stdin: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                  files: Optional[FilesArg] = None, collect: Optional[Sequence[str]] = None,
                  network: Optional[Mapping[str, Any]] = None, wait_timeout: Optional[float] = 600.0,
                  **kw: Any) -> Execution:
    """Run ``code`` (Python by default; ``language="sh"`` or ``"bash"``) in a
    sandbox and return the finished :class:`Execution` (``status``, ``exit_code``,
    ``stdout``, ``stderr``, ``files``, ``usage``).  A program that fails is an
    execution with ``status == "failed"``, not an exception; a refusal
    (validation, quota, no sandbox runtime) raises the API's error.

    ``client`` defaults to ``EnterpriseAI()`` (``EAI_URL``, ``EAI_API_KEY``);
    ``timeout_s`` is the sandbox's limit (the program is killed and the status is
    ``timeout``), ``wait_timeout`` the caller's overall wait in seconds; the
    other arguments are those of :meth:`Sandbox.execute`."""
    if not isinstance(code, str):
        raise TypeError("code must be a str")
    argv0 = LANGUAGES.get(language)
    if argv0 is None:
        raise ValueError("language must be one of %s" % ", ".join(sorted(LANGUAGES)))
    lim: Dict[str, Any] = dict(limits or {})
    lim.setdefault("timeout_s", timeout_s)
    c = client if client is not None else EnterpriseAI()
    return c.sandbox.execute(image, list(argv0) + [code], profile=profile, limits=lim, stdin=stdin, env=env,
                             files=files, collect=collect, network=network, timeout=wait_timeout, **kw)
