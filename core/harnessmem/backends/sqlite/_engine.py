"""The SQLite index's connections: the engine and its pragmas, the schema check, file probes.

Used by :class:`harnessmem.backends.sqlite.SQLiteIndex`, which owns the engine and decides
when to rebuild; the functions here only build, inspect and probe.

Damage (:func:`index_damage`) is looked for at three levels, because SQLite's own
``PRAGMA quick_check`` sees only the b-trees: a torn page inside an FTS5 shadow table
(``*_fts_data``) passes it, while every search then fails or silently finds less. FTS5's
``integrity-check`` command walks the segments; and a structure record that reads as
"no segments" (a page of zeros, which that command accepts) is caught by comparing the
index's vocabulary with the entries stored beside it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from harnessmem.backends.sqlite._blocks import EntryBlock
from harnessmem.backends.sqlite._schema import (
    FTS_TABLES,
    SCHEMA_VERSION,
    TOKENIZER,
    file_blocks,
    fts_table,
    is_corrupt,
    schema_statements,
)

__all__ = [
    "IndexDamaged",
    "create_engine",
    "damage_of",
    "file_identity",
    "index_damage",
    "prepare_schema",
]

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
    # Our FTS5 tables first (their shadow tables go with them); "entries" is schema 1's.
    for name in _fts_tables(conn):
        conn.exec_driver_sql(f"DROP TABLE {name}")
    for name in ("meta", "workspaces", "files", "entries", "entry_blocks"):
        if name in tables:
            conn.exec_driver_sql(f"DROP TABLE {name}")
    for statement in schema_statements(list(FTS_TABLES.values())):
        conn.exec_driver_sql(statement)
    conn.exec_driver_sql(
        "INSERT INTO meta(key, value) VALUES ('schema_version', ?), ('tokenizer', ?)",
        (str(SCHEMA_VERSION), TOKENIZER),
    )
    return found


def _fts_tables(conn: Any) -> list[str]:
    """Our FTS5 tables in the database (``conn``: SQLAlchemy or DBAPI), by name."""
    run = getattr(conn, "exec_driver_sql", None) or conn.execute
    names = [
        row[0]
        for row in run(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'"
        )
    ]
    return sorted(n for n in names if n.startswith(tuple(FTS_TABLES.values())))


def file_identity(path: Path) -> tuple[int, int] | None:
    """``(device, inode)`` of ``path``, None when it is missing: tells a replaced file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class IndexDamaged(Exception):
    """Raised inside the backend when :func:`index_damage` found something; never escapes it."""


def index_damage(db: sqlite3.Connection) -> str | None:
    """What is damaged in the database of ``db``, None when it is sound.

    Runs inside a write transaction of the caller: FTS5 runs its ``integrity-check`` as
    an INSERT, so it takes the write lock (the schema check at open holds it anyway).
    Lock and busy errors propagate: a busy database is not a damaged one.
    """
    try:
        (result,) = db.execute("PRAGMA quick_check").fetchone()
        if result != "ok":
            return f"quick_check: {result}"
        for table in _fts_tables(db):
            source = "sessions" if table.startswith(FTS_TABLES["sessions"]) else "memory"
            step = "FTS5 integrity-check"
            try:
                db.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
                step = "terms against the stored entries"
                problem = _vocabulary_problem(db, source, table)
            except sqlite3.DatabaseError as exc:
                if is_corrupt(exc):
                    return f"{table}: {exc} ({step})"
                raise
            if problem is not None:
                return f"{table}: {problem}"
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            return str(exc)
        raise
    return None


def _vocabulary_problem(db: sqlite3.Connection, source: str, table: str) -> str | None:
    """What is wrong with the terms of ``table``, checked against an entry of ``source``.

    unicode61 makes a token of every run of letters and digits, so a stored entry with
    one alphanumeric character must have left a term, and a row found for a term must
    have a rank (with the statistics record gone, bm25 is NULL). Only the newest file's first block
    and one term are read: a few small reads whatever the size of the index.
    """
    found = [
        file_no
        for workspace_no, file_no in db.execute(
            "SELECT workspace_no, max(file_no) FROM files WHERE source = ? AND entries > 0 "
            "GROUP BY workspace_no",
            (source,),
        )
        if fts_table(source, workspace_no) == table
    ]
    row = (max(found),) if found else None
    if row is None:
        return None
    low, high = file_blocks(row[0])
    block = db.execute(
        "SELECT id, places, texts FROM entry_blocks WHERE id BETWEEN ? AND ? ORDER BY id LIMIT 1",
        (low, high),
    ).fetchone()
    if block is None:
        return None
    stored = EntryBlock(block[1], block[2]).stored(0)
    if not any(ch.isalnum() for entry in stored for ch in entry[1] + entry[2]):
        return None
    vocab = f"hm_vocab_{table}"
    db.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{vocab} USING fts5vocab(main, {table}, row)"
    )
    term = db.execute(f"SELECT term FROM temp.{vocab} WHERE doc > 0 LIMIT 1").fetchone()
    if term is None:
        return "its segments are gone while entries are stored"
    quoted = '"' + term[0].replace('"', '""') + '"'
    ranked = db.execute(
        f"SELECT bm25({table}) FROM {table} WHERE {table} MATCH ? LIMIT 1", (quoted,)
    ).fetchone()
    # No row proves nothing: the term is stemmed already and porter may stem it again.
    if ranked is not None and ranked[0] is None:
        return "its statistics are gone (bm25 is NULL)"
    return None


def damage_of(path: Path, *, busy_timeout: float) -> str | None:
    """:func:`index_damage` of the database at ``path`` on a connection of its own.

    A file that SQLite cannot open as a database is damaged; a lock held longer than
    ``busy_timeout`` raises ``sqlite3.OperationalError``.
    """
    probe = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        try:
            probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
            tables = {row[0] for row in probe.execute("SELECT name FROM sqlite_master")}
        except sqlite3.DatabaseError as exc:
            if is_corrupt(exc):
                return str(exc)
            raise
        if not set(FTS_TABLES.values()) | {"files", "entry_blocks"} <= tables:
            return None  # not (or not yet) our schema: opening it rebuilds that
        probe.execute("BEGIN IMMEDIATE")
        try:
            return index_damage(probe)
        finally:
            probe.execute("ROLLBACK")
    finally:
        probe.close()
