"""The index's view of the workspace: which files changed, and their entries.

See :mod:`harnessmem.index.sync`.
"""

from harnessmem.index.sync import (
    MAX_ENTRY_CHARS,
    MAX_STORED_CHARS,
    IndexSync,
    ReindexResult,
    chunk_markdown,
    chunk_session_log,
    content_hash,
    session_log_path,
    source_of,
)

__all__ = [
    "MAX_ENTRY_CHARS",
    "MAX_STORED_CHARS",
    "IndexSync",
    "ReindexResult",
    "chunk_markdown",
    "chunk_session_log",
    "content_hash",
    "session_log_path",
    "source_of",
]
