"""Backend base classes (index, model) and the built-in backends."""

from harnessmem.backends.base import (
    INDEX_CAPABILITIES,
    INDEX_SOURCES,
    BackendOptions,
    Completion,
    FileUpdate,
    IndexBackend,
    IndexedFile,
    IndexEntry,
    IndexStats,
    ModelBackend,
    RankingOptions,
    SearchHit,
    SearchMode,
    SearchRequest,
    SearchTimeout,
)

__all__ = [
    "INDEX_CAPABILITIES",
    "INDEX_SOURCES",
    "BackendOptions",
    "Completion",
    "FileUpdate",
    "IndexBackend",
    "IndexEntry",
    "IndexStats",
    "IndexedFile",
    "ModelBackend",
    "RankingOptions",
    "SearchHit",
    "SearchMode",
    "SearchRequest",
    "SearchTimeout",
]
