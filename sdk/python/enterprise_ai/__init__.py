"""Python SDK of eai-sandbox (standard library only).

    from enterprise_ai import EnterpriseAI
    client = EnterpriseAI(base_url="http://127.0.0.1:8080", api_key="eai_...")
    ex = client.sandbox.execute("python:3.11-slim", ["python3", "-c", "print(1)"], profile="gvisor-small")
"""
from .client import EnterpriseAI, Sandbox, Session, SessionFiles, Sessions, Contracts, Manifests, __version__
from .errors import (APIConnectionError, APIError, AuthenticationError, ConflictError, EnterpriseAIError,
                     NotFoundError, RateLimitError, ServerError, UnavailableError, ValidationError,
                     WaitTimeoutError)
from .models import TERMINAL_STATUSES, Event, Execution, FileInfo, ManifestResult, Usage, ValidationResult

__all__ = [
    "EnterpriseAI", "Sandbox", "Session", "Sessions", "SessionFiles", "Contracts", "Manifests", "__version__",
    "EnterpriseAIError", "APIError", "APIConnectionError", "WaitTimeoutError", "AuthenticationError",
    "NotFoundError", "ValidationError", "ConflictError", "RateLimitError", "UnavailableError", "ServerError",
    "Execution", "Event", "FileInfo", "Usage", "ValidationResult", "ManifestResult", "TERMINAL_STATUSES",
]
