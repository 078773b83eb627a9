"""The index's view of the workspace: which files changed, and their entries.

See :mod:`harnessmem.index.sync`.
"""

from harnessmem.encoding import content_hash
from harnessmem.index.chunking import (
    MAX_ENTRY_CHARS,
    MAX_STORED_CHARS,
    chunk_markdown,
    chunk_session_log,
)
from harnessmem.index.sync import (
    IndexSync,
    ReindexResult,
)
from harnessmem.layout import session_log_path, source_of

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
