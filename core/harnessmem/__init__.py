"""harnessmem: memory that lasts across sessions for any LLM agent, with a bounded context.

Importing this package stays light: litellm, tiktoken, SQLAlchemy and s3fs are
imported only when a feature needs them.
"""

from __future__ import annotations

from harnessmem.backends.base import Completion, IndexBackend, ModelBackend, SearchHit
from harnessmem.errors import (
    BackendNotFound,
    ConfigError,
    ContextOverflowError,
    HarnessMemError,
    LeaseError,
    ModelError,
    ModelResponseError,
    ModelUnavailableError,
    PathNotAllowed,
    PluginError,
    WorkspaceError,
)
from harnessmem.events import TurnContext
from harnessmem.harness import MemoryHarness, Session
from harnessmem.plugins import hookimpl
from harnessmem.settings import HarnessSettings

__all__ = [
    "BackendNotFound",
    "Completion",
    "ConfigError",
    "ContextOverflowError",
    "HarnessMemError",
    "HarnessSettings",
    "IndexBackend",
    "LeaseError",
    "MemoryHarness",
    "ModelBackend",
    "ModelError",
    "ModelResponseError",
    "ModelUnavailableError",
    "PathNotAllowed",
    "PluginError",
    "SearchHit",
    "Session",
    "TurnContext",
    "WorkspaceError",
    "__version__",
    "hookimpl",
]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import version

        return version("harnessmem")
    raise AttributeError(f"module 'harnessmem' has no attribute {name!r}")
