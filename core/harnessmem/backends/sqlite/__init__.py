"""The default index: SQLite FTS5, one file beside the workspace.

See :mod:`harnessmem.backends.sqlite.backend`.
"""

from harnessmem.backends.sqlite._schema import FILE_SHIFT, SCHEMA_VERSION, TOKENIZER
from harnessmem.backends.sqlite.backend import (
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
