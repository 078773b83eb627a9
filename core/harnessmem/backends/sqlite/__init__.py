"""The default index backend: SQLite FTS5 through SQLAlchemy (entry point ``sqlite``).

One database file (``workspace.index_path``; by default ``memory_index.db`` beside a
local workspace); its schema is in :mod:`harnessmem.backends.sqlite._store`. Each source
has its own contentless FTS5 table (``porter unicode61 remove_diacritics 2``, CJK as
bigrams), so that long session logs never slow memory searches down nor skew their term
statistics; entry blocks (64 entries to a row) hold the text, line ranges and dates.

Writes take SQLite's write lock up front (``BEGIN IMMEDIATE``) and wait up to
``busy_timeout`` for it; the journal is WAL, so searches never wait for a writer and
several processes can share one file. ``sync_file`` changes only what differs, so an
append to a daily log costs the new bullets (and the block they land in), not the file.
``sync_files`` writes up to ``_BATCH_ENTRIES`` entries in one transaction (what a rebuild
costs against raw FTS5 inserts: the performance section of ``docs/index.md``).

Ranking: bm25 (``content`` weighs 1, ``context`` 0.3); in ``any`` mode the best
``candidates`` are then re-ranked: each gains ``neighbor_weight`` times the scores of the
matching entries next to it in the same section (a question and its answer, a bullet
and its detail). Every hit still holds a query term.

The database rebuilds itself, with one log line, when it is missing, of another schema
version or damaged (after which ``resets`` grows and the harness re-syncs every file).
Damage is looked for when the index is opened (``_sqlite_engine.index_damage``: SQLite's
quick check, FTS5's integrity check, the vocabulary against the stored entries) and
whenever SQLite reports it (a corrupt-database error, or a constraint failure, which a
damaged FTS5 structure record causes on the next write): the file is checked again under
a file lock, deleted only when the check confirms it, and the one process that deletes
it says so.

This module holds the options and the lifecycle (open, rebuild, reopen, close); the
connections are built in ``_sqlite_engine``, writes run in ``_sqlite_sync`` and searches
in ``_sqlite_search``.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import Field

from harnessmem.backends._fts import QueryTerm
from harnessmem.backends.base import (
    BackendOptions,
    FileUpdate,
    IndexBackend,
    IndexedFile,
    IndexEntry,
    IndexStats,
    RankingOptions,
    SearchHit,
    SearchMode,
)
from harnessmem.backends.sqlite._engine import (
    IndexDamaged,
    create_engine,
    damage_of,
    file_identity,
    index_damage,
    prepare_schema,
)
from harnessmem.backends.sqlite._search import EntrySearcher, interrupt_after
from harnessmem.backends.sqlite._store import (
    FILE_SHIFT,
    FTS_TABLES,
    SCHEMA_VERSION,
    TOKENIZER,
    is_corrupt,
)
from harnessmem.backends.sqlite._sync import all_current, apply_updates, clear_all, remove_file
from harnessmem.errors import ConfigError, HarnessMemError

__all__ = ["FILE_SHIFT", "SCHEMA_VERSION", "TOKENIZER", "SQLiteIndex", "SQLiteIndexOptions"]

logger = logging.getLogger("harnessmem.index")

_BATCH_ENTRIES = 32_768  # entries per write transaction of sync_files
_T = TypeVar("_T")
_FTS5_TABLE = re.compile(r"\busing\s+fts5\s*\(", re.IGNORECASE)


def _may_be_damage(exc: BaseException) -> bool:
    """Whether ``exc`` may come from a damaged FTS5 index rather than from the statement.

    A structure record that lost its segments makes FTS5 reuse their block ids on the
    next write: a UNIQUE failure in ``*_fts_data``. Our own inserts never conflict.
    """
    return isinstance(getattr(exc, "orig", exc), sqlite3.IntegrityError)


class SQLiteIndexOptions(RankingOptions):
    """Options of the ``sqlite`` index backend (``[index.options]``)."""

    busy_timeout: float = Field(
        10.0, ge=0, description="Seconds a write waits for another writer's lock."
    )
    wal: bool = Field(
        True, description="WAL journal (set false only for filesystems without shared memory)."
    )
    check_on_open: bool = Field(
        True,
        description="Look for damage SQLite's quick check misses (FTS5 segments) when the "
        "index is opened: ~3 ms per 1,000 entries. Damage SQLite reports is healed either way.",
    )


class SQLiteIndex(IndexBackend):
    """SQLite FTS5 index in one local file; see the module docstring."""

    name: ClassVar[str] = "sqlite"
    Options: ClassVar[type[BackendOptions]] = SQLiteIndexOptions
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"stemming", "diacritics", "cjk", "phrase", "timeout", "persistent", "concurrent"}
    )

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        super().__init__(options, **context)
        assert isinstance(options, SQLiteIndexOptions)
        self.opts = options
        raw_path = context.get("index_path")
        if raw_path is None:
            raise ConfigError(
                "the sqlite index needs a file: no index_path was given",
                hint="set workspace.index_path, or open it through MemoryHarness",
            )
        self.path = Path(raw_path).expanduser()
        self._lock = threading.RLock()
        self._closed = False
        self._engine: Any = None
        self._identity: tuple[int, int] | None = None
        self._searcher = EntrySearcher(
            max_terms=options.max_terms,
            neighbor_weight=options.neighbor_weight,
            candidates=options.candidates,
        )
        self._open()

    # connection management ------------------------------------------------------------------

    def _create_engine(self) -> Any:
        return create_engine(self.path, busy_timeout=self.opts.busy_timeout, wal=self.opts.wal)

    def _open(self) -> None:
        """Connect and make sure the schema is ours; rebuild when missing, stale or corrupt."""
        hint = "set workspace.index_path to a file in a writable local folder"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HarnessMemError(f"cannot create the index folder: {exc}", hint=hint) from exc
        existed = self.path.exists() and self.path.stat().st_size > 0
        self._engine = self._create_engine()
        try:
            version = self._prepare_schema()
        except Exception as exc:
            if isinstance(exc, IndexDamaged) or is_corrupt(exc):
                self._replace_damaged(exc)
                return
            self._engine.dispose()
            raise HarnessMemError(
                f"cannot open the index {self.path}: {getattr(exc, 'orig', exc)}", hint=hint
            ) from exc
        self._identity = file_identity(self.path)
        if version is None:
            if existed:
                logger.warning("index %s had no harnessmem schema; built a new one", self.path)
                self.resets += 1
            else:
                logger.info("index %s was missing; building it", self.path)
        elif version != str(SCHEMA_VERSION):
            logger.warning(
                "index %s had schema version %s, expected %s; rebuilt it",
                self.path,
                version,
                SCHEMA_VERSION,
            )
            self.resets += 1

    def _prepare_schema(self) -> str | None:
        """Create or rebuild the schema; the version found (None when there was none).

        A current schema is checked for damage in the same write transaction, which
        holds the write lock anyway (IndexDamaged; ``check_on_open``): ~60-80 ms at
        20,000 entries, ~270 ms at 100,000, most of it FTS5's integrity check.
        """
        with self._write() as conn:
            version = prepare_schema(conn)
            if version == str(SCHEMA_VERSION) and self.opts.check_on_open:
                problem = index_damage(conn.connection.driver_connection)
                if problem is not None:
                    raise IndexDamaged(problem)
            return version

    def _replace_damaged(self, exc: BaseException) -> bool:
        """Delete the database if a check confirms the damage ``exc`` suggests; build it anew.

        It is derived data: the harness re-syncs every file once ``resets`` has grown.
        False (nothing done) when ``exc`` is only a hint of damage (a constraint failure)
        and the file checks sound.
        """
        from filelock import FileLock

        self._engine.dispose()
        with FileLock(f"{self.path}.lock"):
            # Another process may have replaced it already: only delete what is still bad.
            problem = damage_of(self.path, busy_timeout=self.opts.busy_timeout)
            if problem is None and not (isinstance(exc, IndexDamaged) or is_corrupt(exc)):
                self._engine = self._create_engine()
                return False
            if problem is not None:
                for suffix in ("", "-wal", "-shm", "-journal"):
                    with suppress(FileNotFoundError):
                        os.unlink(f"{self.path}{suffix}")
            self._engine = self._create_engine()
            self._prepare_schema()
        self._identity = file_identity(self.path)
        self._searcher.forget_frequencies()
        self.resets += 1
        if problem is not None:
            logger.warning(
                "index %s was corrupt (%s); deleted it, it is rebuilt from the workspace files",
                self.path,
                problem,
            )
        else:
            logger.info("index %s was replaced meanwhile (%s); reopened it", self.path, exc)
        return True

    def _check_file(self) -> None:
        """Reopen when the file was deleted or replaced under us (another process rebuilt it)."""
        if self._closed:
            raise HarnessMemError(f"the sqlite index {self.path} is closed")
        if file_identity(self.path) != self._identity:
            with self._lock:
                if file_identity(self.path) != self._identity:
                    self._engine.dispose()
                    self._searcher.forget_frequencies()
                    self._open()
                    self.resets += 1

    def _guarded(self, work: Callable[[], _T]) -> _T:
        """Run ``work``; on confirmed damage rebuild the database and run it once more."""
        self._check_file()
        try:
            return work()
        except Exception as exc:
            if not (is_corrupt(exc) or _may_be_damage(exc)):
                raise
            with self._lock:
                if not self._replace_damaged(exc):
                    raise
            return work()

    @contextmanager
    def _write(self) -> Iterator[Any]:
        with self._engine.connect() as conn:
            conn.execution_options(harnessmem_write=True)
            with conn.begin():
                yield conn

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    # writing --------------------------------------------------------------------------------

    def files(self) -> dict[str, IndexedFile]:
        def work() -> dict[str, IndexedFile]:
            with self._read() as conn:
                rows = conn.exec_driver_sql(
                    "SELECT path, source, content_hash, change_token, entries FROM files"
                ).all()
            return {row[0]: IndexedFile(*row) for row in rows}

        return self._guarded(work)

    def sync_file(
        self,
        path: str,
        content_hash: str,
        entries: Sequence[IndexEntry],
        *,
        source: str = "memory",
        change_token: str | None = None,
    ) -> bool:
        return self.sync_files([FileUpdate(path, content_hash, entries, source, change_token)])[0]

    def sync_files(self, updates: Iterable[FileUpdate]) -> list[bool]:
        """Apply ``updates`` in transactions of up to ``_BATCH_ENTRIES`` entries.

        One transaction per batch rather than per file: FTS5 then builds one segment
        per batch instead of merging hundreds of tiny ones, which is most of what a
        rebuild costs beyond the raw inserts.
        """
        results: list[bool] = []
        batch: list[FileUpdate] = []
        size = 0
        for update in updates:
            self._check_source(update.source)
            batch.append(update)
            size += len(update.entries) + 1
            if size >= _BATCH_ENTRIES:
                results += self._apply_guarded(batch)
                batch, size = [], 0
        if batch:
            results += self._apply_guarded(batch)
        return results

    def _apply_guarded(self, batch: Sequence[FileUpdate]) -> list[bool]:
        return self._guarded(lambda: self._apply(batch))

    def _apply(self, batch: Sequence[FileUpdate]) -> list[bool]:
        if self._all_current(batch):
            return [False] * len(batch)
        with self._write() as conn:
            changed = apply_updates(conn.connection.driver_connection, batch)
        if any(changed):
            self._searcher.forget_frequencies()
        return changed

    def _all_current(self, batch: Sequence[FileUpdate]) -> bool:
        """Whether every update is already stored (hash, source, token): no write lock then.

        Searches re-check recently written files; most of those checks change nothing
        and should not queue on SQLite's write lock behind other processes.
        """
        if len(batch) > 100:
            return False
        with self._read() as conn:
            return all_current(conn.connection.driver_connection, batch)

    def remove(self, path: str) -> bool:
        def work() -> bool:
            with self._write() as conn:
                if not remove_file(conn.connection.driver_connection, path):
                    return False
            self._searcher.forget_frequencies()
            return True

        return self._guarded(work)

    def clear(self) -> None:
        def work() -> None:
            with self._write() as conn:
                clear_all(conn)
            self._searcher.forget_frequencies()

        self._guarded(work)

    def scrub(self) -> bool:
        """Rewrite the database so removed text is gone from its bytes (see the base).

        Each FTS5 table is merged into one segment (``optimize`` drops deleted entries'
        terms), ``VACUUM`` rebuilds every page from the live rows (with secure delete on,
        freed pages are zeroed too), and a ``TRUNCATE`` checkpoint empties the WAL, which
        held the old page images.
        """

        def work() -> bool:
            raw = self._engine.raw_connection()
            try:
                db = raw.driver_connection
                db.execute("PRAGMA secure_delete = ON")
                tables = [
                    name
                    for (name, sql) in db.execute(
                        "SELECT name, sql FROM sqlite_master WHERE type = 'table'"
                    )
                    if sql and _FTS5_TABLE.search(sql)
                ]
                for table in tables:
                    db.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'optimize\')')
                db.execute("VACUUM")
                busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            finally:
                raw.close()
            return not busy

        return self._guarded(work)

    # searching ------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        source: str = "memory",
        mode: SearchMode = "any",
        path_prefix: str | None = None,
        timeout: float | None = None,
    ) -> list[SearchHit]:
        terms = self._search_terms(query, limit, source=source, mode=mode)
        if not terms:
            return []
        return self._guarded(lambda: self._search(terms, limit, source, mode, path_prefix, timeout))

    def _search(
        self,
        terms: list[QueryTerm],
        limit: int,
        source: str,
        mode: SearchMode,
        path_prefix: str | None,
        timeout: float | None,
    ) -> list[SearchHit]:
        # The hot path talks to the pooled DBAPI connection directly: no transaction, no
        # SQLAlchemy result machinery. That keeps a search within a few dozen microseconds
        # of what the raw FTS5 query costs.
        pooled = self._engine.raw_connection()
        try:
            db: sqlite3.Connection = pooled.driver_connection
            with interrupt_after(db, timeout, self.path):
                return self._searcher.search(
                    db, FTS_TABLES[source], terms, limit, mode, path_prefix
                )
        finally:
            pooled.close()

    # state ----------------------------------------------------------------------------------

    def stats(self) -> IndexStats:
        def work() -> IndexStats:
            with self._read() as conn:
                per_source = {
                    row[0]: (row[1], row[2] or 0)
                    for row in conn.exec_driver_sql(
                        "SELECT source, count(*), sum(entries) FROM files GROUP BY source"
                    )
                }
            files = sum(count for count, _ in per_source.values())
            entries = sum(count for _, count in per_source.values())
            details = {
                "path": str(self.path),
                "schema_version": SCHEMA_VERSION,
                "tokenizer": TOKENIZER,
                "bytes": sum(
                    os.path.getsize(f"{self.path}{s}")
                    for s in ("", "-wal")
                    if os.path.exists(f"{self.path}{s}")
                ),
                "sources": {
                    source: {"files": count, "entries": n}
                    for source, (count, n) in sorted(per_source.items())
                },
            }
            return IndexStats(files=files, entries=entries, details=details)

        return self._guarded(work)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._engine is not None:
                self._engine.dispose()

    def __repr__(self) -> str:
        return f"<SQLiteIndex {self.path}{' (closed)' if self._closed else ''}>"
