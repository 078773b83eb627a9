"""Backend base classes (index, model) and the built-in backends."""

from harnessmem.backends.base import (
    BackendOptions,
    Completion,
    IndexBackend,
    IndexEntry,
    IndexStats,
    ModelBackend,
    SearchHit,
)

__all__ = [
    "BackendOptions",
    "Completion",
    "IndexBackend",
    "IndexEntry",
    "IndexStats",
    "ModelBackend",
    "SearchHit",
]
