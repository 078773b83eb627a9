"""The default index: SQLite FTS5, one file beside the workspace.

See :mod:`harnessmem.backends.sqlite.backend`.
"""

from harnessmem.backends.sqlite.backend import (
    FILE_SHIFT,
    SCHEMA_VERSION,
    TOKENIZER,
    SQLiteIndex,
    SQLiteIndexOptions,
)

__all__ = [
    "FILE_SHIFT",
    "SCHEMA_VERSION",
    "TOKENIZER",
    "SQLiteIndex",
    "SQLiteIndexOptions",
]
