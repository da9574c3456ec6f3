"""Python SDK of eai-sandbox (standard library only).

    from enterprise_ai import EnterpriseAI
    client = EnterpriseAI(base_url="http://127.0.0.1:8080", api_key="eai_...")
    ex = client.sandbox.execute("python:3.11-slim", ["python3", "-c", "print(1)"], profile="gvisor-small")

``AsyncEnterpriseAI`` (enterprise_ai.aio) is the same client for asyncio code;
``enterprise_ai.sandbox.run_untrusted(code)`` runs untrusted code in one call.
"""
from .client import EnterpriseAI, Sandbox, Contracts, Manifests, __version__
from .aio import AsyncEnterpriseAI
from .errors import (APIConnectionError, APIError, AuthenticationError, ConflictError, EnterpriseAIError,
                     NotFoundError, RateLimitError, ServerError, UnavailableError, ValidationError,
                     WaitTimeoutError)
from .models import (TERMINAL_STATUSES, Event, Execution, FileInfo, ManifestResult, Session, SessionFile, Snapshot,
                     Usage, ValidationResult, Volume)
from .sessions import SessionFiles, SessionHandle, Sessions
from .volumes import Volumes
from . import agent, sandbox
from .agent import AgentsClient, RunsClient, SessionsClient
from .webhooks import EVENT_ID_HEADER, SIGNATURE_HEADER, sign, verify_signature

__all__ = [
    "EnterpriseAI", "AsyncEnterpriseAI", "Sandbox", "Contracts", "Manifests", "__version__",
    "EnterpriseAIError", "APIError", "APIConnectionError", "WaitTimeoutError", "AuthenticationError",
    "NotFoundError", "ValidationError", "ConflictError", "RateLimitError", "UnavailableError", "ServerError",
    "Execution", "Event", "FileInfo", "Usage", "ValidationResult", "ManifestResult", "TERMINAL_STATUSES",
    "Session", "SessionFile", "Snapshot", "Sessions", "SessionHandle", "SessionFiles", "Volume", "Volumes",
    "verify_signature", "sign", "SIGNATURE_HEADER", "EVENT_ID_HEADER",
    "agent", "sandbox", "AgentsClient", "RunsClient", "SessionsClient",
]
