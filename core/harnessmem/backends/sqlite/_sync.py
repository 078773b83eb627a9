"""The SQLite index's writes: applying file updates, removing files, emptying a workspace.

Each function runs on the DBAPI connection of a write transaction that
:class:`harnessmem.backends.sqlite.SQLiteIndex` has begun (``BEGIN IMMEDIATE``); the entry
rows themselves go through :class:`harnessmem.backends.sqlite._writer.BatchWriter`. Every
statement names the workspace (its number): no write of one reaches another's rows.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from harnessmem.backends.base import INDEX_SOURCES, FileUpdate, IndexEntry
from harnessmem.backends.sqlite._schema import (
    BLOCK_SHIFT,
    MAX_WORKSPACES,
    WORKSPACES_PER_TABLE,
    fts_group,
    fts_statements,
    fts_table,
    workspace_range,
)
from harnessmem.backends.sqlite._writer import BatchWriter

__all__ = [
    "all_current",
    "apply_updates",
    "attach_workspace",
    "clear_workspace",
    "find_workspace",
    "remove_file",
]


def find_workspace(db: sqlite3.Connection, key: str) -> int | None:
    """The number of workspace ``key``, None when the file holds nothing of it."""
    row = db.execute("SELECT workspace_no FROM workspaces WHERE key = ?", (key,)).fetchone()
    return None if row is None else int(row[0])


def attach_workspace(db: sqlite3.Connection, key: str) -> int:
    """The number of workspace ``key``, given one if it had none (in a write transaction)."""
    number = find_workspace(db, key)
    if number is not None:
        return number
    (last,) = db.execute("SELECT coalesce(max(workspace_no), 0) FROM workspaces").fetchone()
    if last >= MAX_WORKSPACES:
        raise OverflowError(f"the index file holds the most workspaces it can ({MAX_WORKSPACES:,})")
    number = int(last) + 1
    db.execute("INSERT INTO workspaces(workspace_no, key) VALUES (?, ?)", (number, key))
    for source in INDEX_SOURCES:
        table = fts_table(source, number)
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone() is None:
            for statement in fts_statements(table):
                db.execute(statement)
    return number


def _stored_files(
    db: sqlite3.Connection, workspace_no: int, paths: Sequence[str]
) -> dict[str, tuple[str, str, int]]:
    """``path -> (content_hash, source, file_no)`` of the indexed files among ``paths``."""
    found: dict[str, tuple[str, str, int]] = {}
    unique = list(dict.fromkeys(paths))
    for first in range(0, len(unique), 500):  # under 999, the parameter cap before 3.32
        part = unique[first : first + 500]
        for path, content_hash, source, file_no in db.execute(
            "SELECT path, content_hash, source, file_no FROM files "
            f"WHERE workspace_no = ? AND path IN ({', '.join('?' * len(part))})",
            [workspace_no, *part],
        ):
            found[path] = (content_hash, source, file_no)
    return found


def apply_updates(
    db: sqlite3.Connection, workspace_no: int, batch: Sequence[FileUpdate]
) -> list[bool]:
    """Write ``batch`` in the current transaction; for each update, whether it changed entries.

    A file already stored at the update's hash and source only takes the new change token.
    """
    changed: list[bool] = []
    # File rows are read and written once per batch, not once per file.
    file_rows: dict[str, tuple[Any, ...]] = {}
    tokens: dict[str, str | None] = {}
    now = time.time()
    stored = _stored_files(db, workspace_no, [update.path for update in batch])
    writer = BatchWriter(db, workspace_no)
    for update in batch:
        path = update.path
        row = stored.get(path)
        if row is not None and row[0] == update.content_hash and row[1] == update.source:
            if path in file_rows:  # synced earlier in this batch
                row_ = file_rows[path]
                file_rows[path] = (*row_[:4], update.change_token, *row_[5:])
            else:
                tokens[path] = update.change_token
            changed.append(False)
            continue
        old = (row[2], _fts(row[1], workspace_no)) if row is not None else None
        number = writer.replace(path, update.entries, old, fts_table(update.source, workspace_no))
        stored[path] = (update.content_hash, update.source, number)
        first, last = _date_range(update.entries)
        file_rows[path] = (
            workspace_no,
            path,
            update.source,
            update.content_hash,
            update.change_token,
            len(update.entries),
            number,
            now,
            first,
            last,
        )
        tokens.pop(path, None)
        changed.append(True)
    writer.finish()
    if file_rows:
        db.executemany(
            "INSERT OR REPLACE INTO files(workspace_no, path, source, content_hash, "
            "change_token, entries, file_no, indexed_at, first_date, last_date) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            file_rows.values(),
        )
    if tokens:
        db.executemany(
            "UPDATE files SET change_token = ? WHERE workspace_no = ? AND path = ?",
            [(token, workspace_no, path) for path, token in tokens.items()],
        )
    return changed


def _date_range(entries: Sequence[IndexEntry]) -> tuple[str | None, str | None]:
    """The first and last day among the entries' dates; (None, None) when none is dated."""
    dates = getattr(entries, "dates", None)  # EntryColumns keeps them as one column
    if dates is None:
        dates = [e.date for e in entries]
    # A daily log's dates are all set: no list is built then. The day of the least date
    # is the least day (cutting keeps the order), so only two dates are cut.
    dated = dates if all(dates) else [d for d in dates if d]
    return (min(dated)[:10], max(dated)[:10]) if dated else (None, None)


def all_current(db: sqlite3.Connection, workspace_no: int, batch: Sequence[FileUpdate]) -> bool:
    """Whether every update of ``batch`` is already stored (hash, source and token).

    Needs only a read transaction, so that the common no-op sync takes no write lock.
    """
    marks = ", ".join("?" * len(batch))
    stored = {
        row[0]: tuple(row[1:])
        for row in db.execute(
            "SELECT path, content_hash, source, change_token FROM files "
            f"WHERE workspace_no = ? AND path IN ({marks})",
            [workspace_no, *(u.path for u in batch)],
        )
    }
    return all(stored.get(u.path) == (u.content_hash, u.source, u.change_token) for u in batch)


def remove_file(db: sqlite3.Connection, workspace_no: int, path: str) -> bool:
    """Delete ``path`` and its entries in the current transaction; whether it was indexed."""
    row = db.execute(
        "SELECT source, file_no FROM files WHERE workspace_no = ? AND path = ?",
        (workspace_no, path),
    ).fetchone()
    if row is None:
        return False
    fts = _fts(row[0], workspace_no)
    BatchWriter(db, workspace_no).replace(path, (), (row[1], fts), fts)
    db.execute("DELETE FROM files WHERE workspace_no = ? AND path = ?", (workspace_no, path))
    return True


def clear_workspace(db: sqlite3.Connection, workspace_no: int) -> None:
    """Delete every file and entry of one workspace; its file numbers start afresh.

    When no other workspace of its group holds a file, the group's FTS5 tables are emptied
    at once (a rebuild of a file serving one workspace costs what it did before workspaces
    were kept apart); otherwise each entry is deleted from FTS5 with its text, as a
    contentless table needs.
    """
    group = fts_group(workspace_no)
    first = group * WORKSPACES_PER_TABLE + 1
    others = db.execute(
        "SELECT 1 FROM files WHERE workspace_no != ? AND workspace_no BETWEEN ? AND ? LIMIT 1",
        (workspace_no, first, first + WORKSPACES_PER_TABLE - 1),
    ).fetchone()
    low, high = workspace_range(workspace_no)
    if others is None:
        db.execute(
            "DELETE FROM entry_blocks WHERE id BETWEEN ? AND ?",
            (low >> BLOCK_SHIFT, high >> BLOCK_SHIFT),
        )
        db.execute("DELETE FROM files WHERE workspace_no = ?", (workspace_no,))
        for source in INDEX_SOURCES:
            table = fts_table(source, workspace_no)
            db.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
    else:
        paths = [
            row[0]
            for row in db.execute("SELECT path FROM files WHERE workspace_no = ?", (workspace_no,))
        ]
        for path in paths:
            remove_file(db, workspace_no, path)
        db.execute(
            "DELETE FROM entry_blocks WHERE id BETWEEN ? AND ?",
            (low >> BLOCK_SHIFT, high >> BLOCK_SHIFT),
        )
    db.execute("UPDATE workspaces SET last_file_no = 0 WHERE workspace_no = ?", (workspace_no,))


def _fts(source: str, workspace_no: int) -> str:
    """The FTS5 table of a stored file's source (an unknown one is read as memory)."""
    return fts_table(source if source in INDEX_SOURCES else "memory", workspace_no)
