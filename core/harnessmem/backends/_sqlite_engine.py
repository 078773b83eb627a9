"""The SQLite index's connections: the engine and its pragmas, the schema check, file probes.

Used by :class:`harnessmem.backends.sqlite.SQLiteIndex`, which owns the engine and decides
when to rebuild; the functions here only build, inspect and probe.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from harnessmem.backends._sqlite_store import (
    FTS_TABLES,
    SCHEMA_VERSION,
    TOKENIZER,
    schema_statements,
)

__all__ = ["create_engine", "file_identity", "prepare_schema", "still_corrupt"]

_PAGE_SIZE = 16_384  # bytes; SQLite's default is 4,096


def create_engine(path: Path, *, busy_timeout: float, wal: bool) -> Any:
    """A pooled SQLAlchemy engine on ``path``; writes begin with ``BEGIN IMMEDIATE``.

    A connection run with the execution option ``harnessmem_write=True`` takes the write
    lock when its transaction begins (waiting up to ``busy_timeout`` seconds for it).
    """
    from sqlalchemy import create_engine as sqlalchemy_engine
    from sqlalchemy import event
    from sqlalchemy.pool import QueuePool

    engine = sqlalchemy_engine(
        f"sqlite:///{path}",
        poolclass=QueuePool,
        pool_size=4,
        max_overflow=32,
        connect_args={"timeout": busy_timeout, "check_same_thread": False},
    )
    busy_ms = int(busy_timeout * 1000)
    journal = "WAL" if wal else "DELETE"

    @event.listens_for(engine, "connect")
    def _connect(dbapi: sqlite3.Connection, _record: Any) -> None:
        # Autocommit at the driver; transactions are begun explicitly below, as
        # SQLAlchemy's SQLite documentation recommends, so BEGIN IMMEDIATE is possible.
        dbapi.isolation_level = None
        dbapi.execute(f"PRAGMA busy_timeout = {busy_ms}")
        # Only a new file takes it (before WAL is on). Entry blocks (~8 KB) then fit
        # a page without overflow chains: a rebuild is ~6% faster, searches the same.
        dbapi.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
        dbapi.execute(f"PRAGMA journal_mode = {journal}").fetchall()
        # Checkpoint every 4 MB of WAL, SQLite's default in bytes (1,000 pages of 4 KB):
        # bigger pages must not leave more of a build to be copied after it returns.
        (page,) = dbapi.execute("PRAGMA page_size").fetchone()
        dbapi.execute(f"PRAGMA wal_autocheckpoint = {max(1, 4 * 1024 * 1024 // page)}")
        # The index is derived data: losing the last commit on power loss is fine.
        dbapi.execute("PRAGMA synchronous = NORMAL")
        dbapi.execute("PRAGMA temp_store = MEMORY")

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        write = conn.get_execution_options().get("harnessmem_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def prepare_schema(conn: Any) -> str | None:
    """Create or rebuild the schema on ``conn`` (in a write transaction).

    Returns the schema version found, None when there was none; anything but the
    current version is dropped and built anew.
    """
    tables = {
        row[0]
        for row in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    found: str | None = None
    if "meta" in tables:
        row = conn.exec_driver_sql("SELECT value FROM meta WHERE key = 'schema_version'").first()
        found = row[0] if row else "unknown"
    if found == str(SCHEMA_VERSION):
        return found
    # "entries" is schema 1's table of entries.
    for name in ("meta", "files", "entries", "entry_blocks", *FTS_TABLES.values()):
        if name in tables:
            conn.exec_driver_sql(f"DROP TABLE {name}")
    for statement in schema_statements(list(FTS_TABLES.values())):
        conn.exec_driver_sql(statement)
    conn.exec_driver_sql(
        "INSERT INTO meta(key, value) VALUES ('schema_version', ?), ('tokenizer', ?)",
        (str(SCHEMA_VERSION), TOKENIZER),
    )
    return found


def file_identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of ``path``, None when it is missing: tells a replaced file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def still_corrupt(path: Path) -> bool:
    """Whether the database at ``path`` fails to open or fails SQLite's quick check."""
    probe = sqlite3.connect(path)
    try:
        probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
        result = probe.execute("PRAGMA quick_check").fetchone()
    except sqlite3.DatabaseError:
        return True
    finally:
        probe.close()
    return bool(result and result[0] != "ok")
