"""The SQLite index's writes: applying file updates, removing files, emptying the index.

Each function runs on the DBAPI connection of a write transaction that
:class:`harnessmem.backends.sqlite.SQLiteIndex` has begun (``BEGIN IMMEDIATE``); the entry
rows themselves go through :class:`harnessmem.backends.sqlite._store.BatchWriter`.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from harnessmem.backends.base import FileUpdate
from harnessmem.backends.sqlite._store import FTS_TABLES, BatchWriter

__all__ = ["all_current", "apply_updates", "clear_all", "remove_file"]

_MEMORY_FTS = FTS_TABLES["memory"]


def _stored_files(db: sqlite3.Connection, paths: Sequence[str]) -> dict[str, tuple[str, str, int]]:
    """``path -> (content_hash, source, file_no)`` of the indexed files among ``paths``."""
    found: dict[str, tuple[str, str, int]] = {}
    unique = list(dict.fromkeys(paths))
    for first in range(0, len(unique), 500):  # under 999, the parameter cap before 3.32
        part = unique[first : first + 500]
        for path, content_hash, source, file_no in db.execute(
            "SELECT path, content_hash, source, file_no FROM files "
            f"WHERE path IN ({', '.join('?' * len(part))})",
            part,
        ):
            found[path] = (content_hash, source, file_no)
    return found


def apply_updates(db: sqlite3.Connection, batch: Sequence[FileUpdate]) -> list[bool]:
    """Write ``batch`` in the current transaction; for each update, whether it changed entries.

    A file already stored at the update's hash and source only takes the new change token.
    """
    changed: list[bool] = []
    # File rows are read and written once per batch, not once per file.
    file_rows: dict[str, tuple[Any, ...]] = {}
    tokens: dict[str, str | None] = {}
    now = time.time()
    stored = _stored_files(db, [update.path for update in batch])
    writer = BatchWriter(db)
    for update in batch:
        path = update.path
        row = stored.get(path)
        if row is not None and row[0] == update.content_hash and row[1] == update.source:
            if path in file_rows:  # synced earlier in this batch
                file_rows[path] = (*file_rows[path][:3], update.change_token, *file_rows[path][4:])
            else:
                tokens[path] = update.change_token
            changed.append(False)
            continue
        old = (row[2], FTS_TABLES.get(row[1], _MEMORY_FTS)) if row is not None else None
        number = writer.replace(path, update.entries, old, FTS_TABLES[update.source])
        stored[path] = (update.content_hash, update.source, number)
        file_rows[path] = (
            path,
            update.source,
            update.content_hash,
            update.change_token,
            len(update.entries),
            number,
            now,
        )
        tokens.pop(path, None)
        changed.append(True)
    writer.finish()
    if file_rows:
        db.executemany(
            "INSERT OR REPLACE INTO files(path, source, content_hash, change_token, "
            "entries, file_no, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            file_rows.values(),
        )
    if tokens:
        db.executemany(
            "UPDATE files SET change_token = ? WHERE path = ?",
            [(token, path) for path, token in tokens.items()],
        )
    return changed


def all_current(db: sqlite3.Connection, batch: Sequence[FileUpdate]) -> bool:
    """Whether every update of ``batch`` is already stored (hash, source and token).

    Needs only a read transaction, so that the common no-op sync takes no write lock.
    """
    marks = ", ".join("?" * len(batch))
    stored = {
        row[0]: tuple(row[1:])
        for row in db.execute(
            f"SELECT path, content_hash, source, change_token FROM files WHERE path IN ({marks})",
            [u.path for u in batch],
        )
    }
    return all(stored.get(u.path) == (u.content_hash, u.source, u.change_token) for u in batch)


def remove_file(db: sqlite3.Connection, path: str) -> bool:
    """Delete ``path`` and its entries in the current transaction; whether it was indexed."""
    row = db.execute("SELECT source, file_no FROM files WHERE path = ?", (path,)).fetchone()
    if row is None:
        return False
    fts = FTS_TABLES.get(row[0], _MEMORY_FTS)
    BatchWriter(db).replace(path, (), (row[1], fts), fts)
    db.execute("DELETE FROM files WHERE path = ?", (path,))
    return True


def clear_all(conn: Any) -> None:
    """Delete every file and entry (``conn``: a SQLAlchemy connection in a write transaction)."""
    conn.exec_driver_sql("DELETE FROM entry_blocks")
    conn.exec_driver_sql("DELETE FROM files")
    for table in FTS_TABLES.values():
        conn.exec_driver_sql(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
