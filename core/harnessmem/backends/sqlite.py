"""The default index backend: SQLite FTS5 through SQLAlchemy (entry point ``sqlite``).

One database file (``workspace.index_path``; by default ``memory_index.db`` beside a
local workspace); its schema is in :mod:`harnessmem.backends._sqlite_store`. Each source
has its own contentless FTS5 table (``porter unicode61 remove_diacritics 2``, CJK as
bigrams), so that long session logs never slow memory searches down nor skew their term
statistics; entry blocks (64 entries to a row) hold the text, line ranges and dates.

Writes take SQLite's write lock up front (``BEGIN IMMEDIATE``) and wait up to
``busy_timeout`` for it; the journal is WAL, so searches never wait for a writer and
several processes can share one file. ``sync_file`` changes only what differs, so an
append to a daily log costs the new bullets (and the block they land in), not the file.
``sync_files`` writes up to 20,000 entries in one transaction (what a rebuild costs
against raw FTS5 inserts: the performance section of ``docs/index.md``).

Ranking: bm25 (``content`` weighs 1, ``context`` 0.3); in ``any`` mode the best
``candidates`` are then re-ranked: each gains ``neighbor_weight`` times the scores of the
matching entries next to it in the same section (a question and its answer, a bullet
and its detail). Every hit still holds a query term.

The database rebuilds itself, with one log line, when it is missing, of another schema
version or corrupt (after which ``resets`` grows and the harness re-syncs every file).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import Field

from harnessmem.backends._fts import (
    QueryTerm,
    fts5_expression,
    parse_query,
    select_terms,
)
from harnessmem.backends._sqlite_store import (
    FILE_SHIFT,
    FILE_SPAN,
    FTS_TABLES,
    SCHEMA_VERSION,
    TOKENIZER,
    BatchWriter,
    is_corrupt,
    load_hits,
    load_places,
    neighbour_scores,
    schema_statements,
)
from harnessmem.backends.base import (
    INDEX_SOURCES,
    BackendOptions,
    FileUpdate,
    IndexBackend,
    IndexedFile,
    IndexEntry,
    IndexStats,
    SearchHit,
    SearchMode,
    SearchTimeout,
)
from harnessmem.errors import ConfigError, HarnessMemError

__all__ = ["FILE_SHIFT", "SCHEMA_VERSION", "TOKENIZER", "SQLiteIndex", "SQLiteIndexOptions"]

logger = logging.getLogger("harnessmem.index")

_PROGRESS_STEPS = 10_000  # VM instructions between timeout checks (~10-50 µs)
_DF_SAMPLE = 1_000  # document frequencies above this are "common"; counting stops there
_BATCH_ENTRIES = 20_000  # entries per write transaction of sync_files
_PAGE_SIZE = 16_384  # bytes; SQLite's default is 4,096
_T = TypeVar("_T")
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


class SQLiteIndexOptions(BackendOptions):
    """Options of the ``sqlite`` index backend (``[index.options]``)."""

    busy_timeout: float = Field(
        10.0, ge=0, description="Seconds a write waits for another writer's lock."
    )
    max_terms: int = Field(
        24, ge=1, le=256, description="Most query terms searched; the rarest are kept."
    )
    neighbor_weight: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Share of a candidate's score lent to its neighbours in 'any' searches.",
    )
    candidates: int = Field(
        50, ge=1, le=1_000, description="Candidates ranked before neighbour scoring."
    )
    wal: bool = Field(
        True, description="WAL journal (set false only for filesystems without shared memory)."
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
        self._df_cache: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._open()

    # connection management ------------------------------------------------------------------

    def _create_engine(self) -> Any:
        from sqlalchemy import create_engine, event
        from sqlalchemy.pool import QueuePool

        engine = create_engine(
            f"sqlite:///{self.path}",
            poolclass=QueuePool,
            pool_size=4,
            max_overflow=32,
            connect_args={"timeout": self.opts.busy_timeout, "check_same_thread": False},
        )
        busy_ms = int(self.opts.busy_timeout * 1000)
        journal = "WAL" if self.opts.wal else "DELETE"

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

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

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
            if is_corrupt(exc):
                self._replace_corrupt(exc)
                return
            self._engine.dispose()
            raise HarnessMemError(
                f"cannot open the index {self.path}: {getattr(exc, 'orig', exc)}", hint=hint
            ) from exc
        self._identity = self._file_identity()
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
        """Create or rebuild the schema; the version found (None when there was none)."""
        with self._write() as conn:
            tables = {
                row[0]
                for row in conn.exec_driver_sql(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                )
            }
            found: str | None = None
            if "meta" in tables:
                row = conn.exec_driver_sql(
                    "SELECT value FROM meta WHERE key = 'schema_version'"
                ).first()
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

    def _replace_corrupt(self, exc: BaseException) -> None:
        """Delete a corrupt database (it is derived data) and build an empty one."""
        from filelock import FileLock

        self._engine.dispose()
        with FileLock(f"{self.path}.lock"):
            # Another process may have replaced it already: only delete what is still bad.
            if self._still_corrupt():
                for suffix in ("", "-wal", "-shm", "-journal"):
                    with suppress(FileNotFoundError):
                        os.unlink(f"{self.path}{suffix}")
            self._engine = self._create_engine()
            self._prepare_schema()
        self._identity = self._file_identity()
        self._df_cache.clear()
        self.resets += 1
        logger.warning("index %s was corrupt (%s); deleted and rebuilt it", self.path, exc)

    def _still_corrupt(self) -> bool:
        probe = sqlite3.connect(self.path)
        try:
            probe.execute("SELECT count(*) FROM sqlite_master").fetchone()
            result = probe.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError:
            return True
        finally:
            probe.close()
        return bool(result and result[0] != "ok")

    def _check_file(self) -> None:
        """Reopen when the file was deleted or replaced under us (another process rebuilt it)."""
        if self._closed:
            raise HarnessMemError(f"the sqlite index {self.path} is closed")
        if self._file_identity() != self._identity:
            with self._lock:
                if self._file_identity() != self._identity:
                    self._engine.dispose()
                    self._df_cache.clear()
                    self._open()
                    self.resets += 1

    def _guarded(self, work: Callable[[], _T]) -> _T:
        """Run ``work``; on corruption rebuild the database and run it once more."""
        self._check_file()
        try:
            return work()
        except Exception as exc:
            if not is_corrupt(exc):
                raise
            with self._lock:
                self._replace_corrupt(exc)
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
            if update.source not in FTS_TABLES:
                raise ValueError(
                    f"unknown index source {update.source!r}; expected one of {INDEX_SOURCES}"
                )
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
        changed: list[bool] = []
        # File rows are read and written once per batch, not once per file.
        file_rows: dict[str, tuple[Any, ...]] = {}
        tokens: dict[str, str | None] = {}
        now = time.time()
        with self._write() as conn:
            db: sqlite3.Connection = conn.connection.driver_connection
            stored = _stored_files(db, [update.path for update in batch])
            writer = BatchWriter(db)
            for update in batch:
                path = update.path
                row = stored.get(path)
                if row is not None and row[0] == update.content_hash and row[1] == update.source:
                    if path in file_rows:  # synced earlier in this batch
                        file_rows[path] = (
                            *file_rows[path][:3],
                            update.change_token,
                            *file_rows[path][4:],
                        )
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
        if any(changed):
            self._df_cache.clear()
        return changed

    def _all_current(self, batch: Sequence[FileUpdate]) -> bool:
        """Whether every update is already stored (hash, source, token): no write lock then.

        Searches re-check recently written files; most of those checks change nothing
        and should not queue on SQLite's write lock behind other processes.
        """
        if len(batch) > 100:
            return False
        with self._read() as conn:
            db: sqlite3.Connection = conn.connection.driver_connection
            marks = ", ".join("?" * len(batch))
            stored = {
                row[0]: tuple(row[1:])
                for row in db.execute(
                    "SELECT path, content_hash, source, change_token FROM files "
                    f"WHERE path IN ({marks})",
                    [u.path for u in batch],
                )
            }
        return all(stored.get(u.path) == (u.content_hash, u.source, u.change_token) for u in batch)

    def remove(self, path: str) -> bool:
        def work() -> bool:
            with self._write() as conn:
                db: sqlite3.Connection = conn.connection.driver_connection
                row = db.execute(
                    "SELECT source, file_no FROM files WHERE path = ?", (path,)
                ).fetchone()
                if row is None:
                    return False
                fts = FTS_TABLES.get(row[0], _MEMORY_FTS)
                BatchWriter(db).replace(path, (), (row[1], fts), fts)
                db.execute("DELETE FROM files WHERE path = ?", (path,))
            self._df_cache.clear()
            return True

        return self._guarded(work)

    def clear(self) -> None:
        def work() -> None:
            with self._write() as conn:
                conn.exec_driver_sql("DELETE FROM entry_blocks")
                conn.exec_driver_sql("DELETE FROM files")
                for table in FTS_TABLES.values():
                    conn.exec_driver_sql(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
            self._df_cache.clear()

        self._guarded(work)

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
        if source not in FTS_TABLES:
            raise ValueError(f"unknown index source {source!r}; expected one of {INDEX_SOURCES}")
        if mode not in ("any", "all", "phrase"):
            raise ValueError(f"unknown search mode {mode!r}; expected 'any', 'all' or 'phrase'")
        if limit <= 0:
            return []
        terms = parse_query(query, keep_stop_words=mode == "phrase")
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
        fts = FTS_TABLES[source]
        # The hot path talks to the pooled DBAPI connection directly: two statements, no
        # transaction (each reads its own snapshot; rows deleted in between are skipped),
        # no SQLAlchemy result machinery. That keeps a search within a few dozen
        # microseconds of what the raw FTS5 query costs.
        pooled = self._engine.raw_connection()
        try:
            db: sqlite3.Connection = pooled.driver_connection
            with self._deadline(db, timeout):
                if mode != "phrase" and len(terms) > self.opts.max_terms:
                    terms = select_terms(
                        terms, self.opts.max_terms, lambda t: self._frequency(db, fts, t)
                    )
                expression = fts5_expression(terms, mode)
                if expression is None:
                    return []
                spread = mode == "any" and self.opts.neighbor_weight > 0
                pool = max(limit, self.opts.candidates) if spread else limit
                # bm25() ordered by SQLite's sorter beats FTS5's "ORDER BY rank" path.
                if path_prefix:
                    ranked = self._ranked_in(db, fts, expression, path_prefix, pool)
                else:
                    ranked = db.execute(
                        f"SELECT rowid, bm25({fts}, 1.0, 0.3) AS s FROM {fts} "
                        f"WHERE {fts} MATCH ? ORDER BY s LIMIT ?",
                        (expression, pool),
                    ).fetchall()
                if not ranked:
                    return []
                scores = {entry_id: -float(bm25) for entry_id, bm25 in ranked}
                if spread:
                    places = load_places(db, scores)
                    neighbour_scores(places, scores, self.opts.neighbor_weight)
                best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
                by_id = load_hits(db, [entry_id for entry_id, _ in best])
        finally:
            pooled.close()
        # An entry deleted between the statements is left out.
        return [
            SearchHit(row[0], row[1], row[2], row[3], round(score, 6), row[4], row[5])
            for entry_id, score in best
            if (row := by_id.get(entry_id)) is not None
        ]

    def _ranked_in(
        self, db: sqlite3.Connection, fts: str, expression: str, prefix: str, pool: int
    ) -> list[tuple[int, float]]:
        """The best ``pool`` (id, bm25) of files whose path starts with ``prefix``.

        A file's entries are one rowid range: one file (a session's log) is a range FTS5
        seeks to; for several, each match's file number is looked up in a set of them.
        """
        numbers = [
            row[0]
            for row in db.execute(
                "SELECT file_no FROM files WHERE substr(path, 1, ?) = ?", (len(prefix), prefix)
            )
        ]
        if not numbers:
            return []
        select = f"SELECT rowid, bm25({fts}, 1.0, 0.3) AS s FROM {fts} WHERE {fts} MATCH ? "
        if len(numbers) == 1:
            low = numbers[0] << FILE_SHIFT
            return db.execute(
                select + "AND rowid BETWEEN ? AND ? ORDER BY s LIMIT ?",
                (expression, low, low + FILE_SPAN - 1, pool),
            ).fetchall()
        return db.execute(
            select + f"AND (rowid >> {FILE_SHIFT}) IN "
            "(SELECT file_no FROM files WHERE substr(path, 1, ?) = ?) ORDER BY s LIMIT ?",
            (expression, len(prefix), prefix, pool),
        ).fetchall()

    def _frequency(self, db: sqlite3.Connection, fts: str, term: QueryTerm) -> int:
        """Documents holding ``term``, counted up to ``_DF_SAMPLE`` (cached until a write)."""
        key = (fts, term.text)
        cached = self._df_cache.get(key)
        if cached is not None:
            return cached
        count = int(
            db.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? LIMIT ?)",
                (fts5_expression([term]), _DF_SAMPLE),
            ).fetchone()[0]
        )
        self._df_cache[key] = count
        if len(self._df_cache) > 4_096:
            self._df_cache.popitem(last=False)
        return count

    @contextmanager
    def _deadline(self, db: sqlite3.Connection, timeout: float | None) -> Iterator[None]:
        """Interrupt the statements run inside after ``timeout`` seconds (SearchTimeout)."""
        if timeout is None:
            yield
            return
        deadline = time.monotonic() + timeout
        db.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "interrupt" not in str(exc).lower():
                raise
            raise SearchTimeout(
                f"search in {self.path} stopped after {timeout:g}s (index.search_timeout)",
                hint="use fewer or rarer words, or raise index.search_timeout",
            ) from None
        finally:
            db.set_progress_handler(None, 0)

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
