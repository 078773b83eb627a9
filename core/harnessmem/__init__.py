"""harnessmem: memory that lasts across sessions for any LLM agent, with a bounded context.

The public names load on first use (PEP 562), so ``import harnessmem`` and the
``harnessmem`` command start fast; litellm, tiktoken, SQLAlchemy and s3fs load
only when a feature needs them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessmem.backends.base import (
        Completion,
        IndexBackend,
        ModelBackend,
        SearchHit,
        SearchRequest,
    )
    from harnessmem.compaction import CompactionResult
    from harnessmem.errors import (
        BackendNotFound,
        ConfigError,
        ContextOverflowError,
        ForgetError,
        HarnessMemError,
        LeaseError,
        MessageFormatError,
        ModelError,
        ModelResponseError,
        ModelUnavailableError,
        PathNotAllowed,
        PluginError,
        WorkspaceError,
        WorkspaceFileNotFound,
    )
    from harnessmem.events import TurnContext
    from harnessmem.harness import MemoryHarness, Session
    from harnessmem.memory.consolidation import ConsolidationResult, SaveResult
    from harnessmem.memory.erasure import ForgetResult
    from harnessmem.memory.flush import FlushResult
    from harnessmem.plugins import hookimpl
    from harnessmem.pool import HarnessPool
    from harnessmem.settings import HarnessSettings
    from harnessmem.workspace.store import WorkspaceStore

_EXPORTS = {
    "Completion": "harnessmem.backends.base",
    "IndexBackend": "harnessmem.backends.base",
    "ModelBackend": "harnessmem.backends.base",
    "SearchHit": "harnessmem.backends.base",
    "SearchRequest": "harnessmem.backends.base",
    "BackendNotFound": "harnessmem.errors",
    "ConfigError": "harnessmem.errors",
    "ContextOverflowError": "harnessmem.errors",
    "ForgetError": "harnessmem.errors",
    "HarnessMemError": "harnessmem.errors",
    "LeaseError": "harnessmem.errors",
    "MessageFormatError": "harnessmem.errors",
    "ModelError": "harnessmem.errors",
    "ModelResponseError": "harnessmem.errors",
    "ModelUnavailableError": "harnessmem.errors",
    "PathNotAllowed": "harnessmem.errors",
    "PluginError": "harnessmem.errors",
    "WorkspaceError": "harnessmem.errors",
    "WorkspaceFileNotFound": "harnessmem.errors",
    "TurnContext": "harnessmem.events",
    "CompactionResult": "harnessmem.compaction",
    "ConsolidationResult": "harnessmem.memory.consolidation",
    "SaveResult": "harnessmem.memory.consolidation",
    "FlushResult": "harnessmem.memory.flush",
    "ForgetResult": "harnessmem.memory.erasure",
    "MemoryHarness": "harnessmem.harness",
    "Session": "harnessmem.harness",
    "hookimpl": "harnessmem.plugins",
    "HarnessPool": "harnessmem.pool",
    "HarnessSettings": "harnessmem.settings",
    "WorkspaceStore": "harnessmem.workspace.store",
}

__all__ = [
    "BackendNotFound",
    "CompactionResult",
    "Completion",
    "ConfigError",
    "ConsolidationResult",
    "ContextOverflowError",
    "FlushResult",
    "ForgetError",
    "ForgetResult",
    "HarnessMemError",
    "HarnessPool",
    "HarnessSettings",
    "IndexBackend",
    "LeaseError",
    "MemoryHarness",
    "MessageFormatError",
    "ModelBackend",
    "ModelError",
    "ModelResponseError",
    "ModelUnavailableError",
    "PathNotAllowed",
    "PluginError",
    "SaveResult",
    "SearchHit",
    "SearchRequest",
    "Session",
    "TurnContext",
    "WorkspaceError",
    "WorkspaceFileNotFound",
    "WorkspaceStore",
    "__version__",
    "hookimpl",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(import_module(module), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if name == "__version__":
        from importlib.metadata import version

        return version("harnessmem")
    raise AttributeError(f"module 'harnessmem' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
