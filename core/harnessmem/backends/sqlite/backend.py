"""The default index backend: SQLite FTS5 through SQLAlchemy (entry point ``sqlite``).

One database file (``workspace.index_path``; by default ``memory_index.db`` beside a
local workspace); its schema is in :mod:`harnessmem.backends.sqlite._schema`. Each source
has its own contentless FTS5 table (``porter unicode61 remove_diacritics 2``, CJK as
bigrams), so that long session logs never slow memory searches down nor skew their term
statistics; entry blocks (64 entries to a row) hold the text, line ranges and dates.

Writes take SQLite's write lock up front (``BEGIN IMMEDIATE``) and wait up to
``busy_timeout`` for it; the journal is WAL, so searches never wait for a writer and
several processes can share one file. ``sync_file`` changes only what differs, so an
append to a daily log costs the new bullets (and the block they land in), not the file.
``sync_files`` writes up to ``_BATCH_ENTRIES`` entries in one transaction (what a rebuild
costs against raw FTS5 inserts: the performance section of ``docs/index.md``).

Ranking: bm25 (``content`` weighs 1, ``context`` 0.3, and ``before``, the text of the entry
before in the section, half of 0.3: it ranks an entry whose content or headings hold a
query term, never matches one alone); in ``any`` mode the best
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

Workspaces: one file serves every workspace that shares it (sibling folders under one
parent, the tenants of a ``HarnessPool``). Each instance serves one, its ``workspace_id``;
:meth:`SQLiteIndex.scoped` gives another workspace's instance on the same connections.
Rows carry the workspace's number, a workspace's entry ids are one range, which every
search is confined to, and each group of 16 workspaces has FTS5 tables of its own (bm25
counts a term over its whole table), so a tenant's search among 1,000 costs about what it
costs in a file of its own (``bench/bench_tenants.py``); writes, ``clear`` (a full
reindex) and ``stats`` name the workspace too. A rebuild of a damaged file rebuilds it
for all of them: every instance on it counts the reset, so each harness hands its own
files again.

This module holds the options and the lifecycle (open, rebuild, reopen, close); the
connections are built in ``_engine``, writes run in ``_sync`` and searches in ``_search``.
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
from typing import Any, ClassVar, Self, TypeVar

from pydantic import Field

from harnessmem.backends._fts import QueryTerm
from harnessmem.backends.base import (
    BackendOptions,
    FileUpdate,
    IndexBackend,
    IndexedFile,
    IndexStats,
    RankingOptions,
    SearchHit,
    SearchMode,
    SearchRequest,
)
from harnessmem.backends.sqlite._engine import (
    IndexDamaged,
    create_engine,
    damage_of,
    file_identity,
    index_damage,
    prepare_schema,
)
from harnessmem.backends.sqlite._schema import SCHEMA_VERSION, TOKENIZER, fts_table, is_corrupt
from harnessmem.backends.sqlite._search import EntrySearcher, interrupt_after
from harnessmem.backends.sqlite._sync import (
    all_current,
    apply_updates,
    attach_workspace,
    clear_workspace,
    find_workspace,
    remove_file,
)
from harnessmem.backends.sqlite._writer import WorkspaceFull
from harnessmem.errors import ConfigError, HarnessMemError

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


class _IndexFile:
    """The database file and its connections, shared by the instances of every workspace.

    Owns the engine and the recovery rules: open, rebuild a damaged or replaced file,
    reopen one another process rebuilt, close. ``resets`` counts the times the file
    started empty; every instance on it reports that count.
    """

    def __init__(self, path: Path, opts: SQLiteIndexOptions) -> None:
        self.path = path
        self.opts = opts
        self.lock = threading.RLock()
        self.closed = False
        self.resets = 0
        self.engine: Any = None
        self.identity: tuple[int, int] | None = None
        self.searcher = EntrySearcher(
            max_terms=opts.max_terms,
            neighbor_weight=opts.neighbor_weight,
            candidates=opts.candidates,
        )
        self.open()

    def create_engine(self) -> Any:
        return create_engine(self.path, busy_timeout=self.opts.busy_timeout, wal=self.opts.wal)

    def open(self) -> None:
        """Connect and make sure the schema is ours; rebuild when missing, stale or corrupt."""
        hint = "set workspace.index_path to a file in a writable local folder"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HarnessMemError(f"cannot create the index folder: {exc}", hint=hint) from exc
        existed = self.path.exists() and self.path.stat().st_size > 0
        self.engine = self.create_engine()
        try:
            version = self.prepare_schema()
        except Exception as exc:
            if isinstance(exc, IndexDamaged) or is_corrupt(exc):
                self.replace_damaged(exc)
                return
            self.engine.dispose()
            raise HarnessMemError(
                f"cannot open the index {self.path}: {getattr(exc, 'orig', exc)}", hint=hint
            ) from exc
        self.identity = file_identity(self.path)
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

    def prepare_schema(self) -> str | None:
        """Create or rebuild the schema; the version found (None when there was none).

        A current schema is checked for damage in the same write transaction, which
        holds the write lock anyway (IndexDamaged; ``check_on_open``): ~60-80 ms at
        20,000 entries, ~270 ms at 100,000, most of it FTS5's integrity check.
        """
        with self.write() as conn:
            version = prepare_schema(conn)
            if version == str(SCHEMA_VERSION) and self.opts.check_on_open:
                problem = index_damage(conn.connection.driver_connection)
                if problem is not None:
                    raise IndexDamaged(problem)
            return version

    def replace_damaged(self, exc: BaseException) -> bool:
        """Delete the database if a check confirms the damage ``exc`` suggests; build it anew.

        It is derived data: the harness re-syncs every file once ``resets`` has grown.
        False (nothing done) when ``exc`` is only a hint of damage (a constraint failure)
        and the file checks sound.
        """
        from filelock import FileLock

        self.engine.dispose()
        with FileLock(f"{self.path}.lock"):
            # Another process may have replaced it already: only delete what is still bad.
            problem = damage_of(self.path, busy_timeout=self.opts.busy_timeout)
            if problem is None and not (isinstance(exc, IndexDamaged) or is_corrupt(exc)):
                self.engine = self.create_engine()
                return False
            if problem is not None:
                for suffix in ("", "-wal", "-shm", "-journal"):
                    with suppress(FileNotFoundError):
                        os.unlink(f"{self.path}{suffix}")
            self.engine = self.create_engine()
            self.prepare_schema()
        self.identity = file_identity(self.path)
        self.searcher.forget_frequencies()
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

    def check_file(self) -> None:
        """Reopen when the file was deleted or replaced under us (another process rebuilt it)."""
        if self.closed:
            raise HarnessMemError(f"the sqlite index {self.path} is closed")
        if file_identity(self.path) != self.identity:
            with self.lock:
                if file_identity(self.path) != self.identity:
                    self.engine.dispose()
                    self.searcher.forget_frequencies()
                    self.open()
                    self.resets += 1

    def guarded(self, work: Callable[[], _T]) -> _T:
        """Run ``work``; on confirmed damage rebuild the database and run it once more."""
        self.check_file()
        try:
            return work()
        except Exception as exc:
            if not (is_corrupt(exc) or _may_be_damage(exc)):
                raise
            with self.lock:
                if not self.replace_damaged(exc):
                    raise
            return work()

    @contextmanager
    def write(self) -> Iterator[Any]:
        with self.engine.connect() as conn:
            conn.execution_options(harnessmem_write=True)
            with conn.begin():
                yield conn

    @contextmanager
    def read(self) -> Iterator[Any]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            if self.engine is not None:
                self.engine.dispose()


class SQLiteIndex(IndexBackend):
    """SQLite FTS5 index in one local file; see the module docstring."""

    name: ClassVar[str] = "sqlite"
    Options: ClassVar[type[BackendOptions]] = SQLiteIndexOptions
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"stemming", "diacritics", "cjk", "phrase", "timeout", "persistent", "concurrent", "dates"}
    )

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        assert isinstance(options, SQLiteIndexOptions)
        shared = context.pop("_shared_file", None)
        super().__init__(options, **context)
        self.opts = options
        self._closed = False
        # (the file's resets when it was looked up, the workspace's number or None)
        self._number: tuple[int, int | None] = (-1, None)
        if isinstance(shared, _IndexFile):
            self._file, self._owner = shared, False
        else:
            raw_path = context.get("index_path")
            if raw_path is None:
                raise ConfigError(
                    "the sqlite index needs a file: no index_path was given",
                    hint="set workspace.index_path, or open it through MemoryHarness",
                )
            self._file, self._owner = _IndexFile(Path(raw_path).expanduser(), options), True
        self.path = self._file.path

    @property
    def resets(self) -> int:
        """Times the file started empty (every workspace's instance counts each one)."""
        return self._file.resets

    @resets.setter
    def resets(self, value: int) -> None:
        # IndexBackend.__init__ starts the count; an instance on a shared file keeps its.
        if value:
            self._file.resets = value

    def scoped(self, workspace_id: str, **context: Any) -> Self:
        """An instance for another workspace on this file's connections; see the module doc."""
        if not isinstance(workspace_id, str) or not workspace_id:
            return super().scoped(workspace_id, **context)  # raises the usual error
        self._check_open()
        merged = {**self.context, **context, "workspace_id": workspace_id}
        return type(self)(self.opts, _shared_file=self._file, **merged)

    # workspace ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessMemError(
                f"the sqlite index {self.path} is closed for workspace {self.workspace_id!r}"
            )

    def _guarded(self, work: Callable[[], _T]) -> _T:
        self._check_open()
        return self._file.guarded(work)

    def _workspace_no(self, conn: Any, *, create: bool) -> int | None:
        """This workspace's number in the file (given one on first write); cached per file."""
        resets, number = self._number
        if resets == self._file.resets and number is not None:
            return number
        db = conn.connection.driver_connection
        if create:
            try:
                number = attach_workspace(db, self.workspace_id)
            except OverflowError as exc:
                raise HarnessMemError(
                    f"the sqlite index {self.path} cannot take workspace {self.workspace_id!r}: "
                    f"{exc}",
                    hint="give some workspaces another workspace.index_path, or use the "
                    "postgres index",
                ) from exc
        else:
            number = find_workspace(db, self.workspace_id)
        if number is not None:
            self._number = (self._file.resets, number)
        return number

    # writing --------------------------------------------------------------------------------

    def files(self) -> dict[str, IndexedFile]:
        def work() -> dict[str, IndexedFile]:
            with self._file.read() as conn:
                number = self._workspace_no(conn, create=False)
                if number is None:
                    return {}
                rows = conn.exec_driver_sql(
                    "SELECT path, source, content_hash, change_token, entries FROM files "
                    "WHERE workspace_no = ?",
                    (number,),
                ).all()
            return {row[0]: IndexedFile(*row) for row in rows}

        return self._guarded(work)

    def _sync_files(self, updates: Iterable[FileUpdate]) -> list[bool]:
        """Apply ``updates`` in transactions of up to ``_BATCH_ENTRIES`` entries.

        One transaction per batch rather than per file: FTS5 then builds one segment
        per batch instead of merging hundreds of tiny ones, which is most of what a
        rebuild costs beyond the raw inserts.
        """
        results: list[bool] = []
        batch: list[FileUpdate] = []
        size = 0
        for update in updates:
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
        try:
            with self._file.write() as conn:
                number = self._workspace_no(conn, create=True)
                assert number is not None
                changed = apply_updates(conn.connection.driver_connection, number, batch)
        except WorkspaceFull as exc:
            raise HarnessMemError(
                f"the sqlite index {self.path}, workspace {self.workspace_id!r}: {exc}",
                hint="rebuild its index (harnessmem index rebuild, or harness.reindex(full=True))",
            ) from exc
        if any(changed):
            self._file.searcher.forget_frequencies()
        return changed

    def _all_current(self, batch: Sequence[FileUpdate]) -> bool:
        """Whether every update is already stored (hash, source, token): no write lock then.

        Searches re-check recently written files; most of those checks change nothing
        and should not queue on SQLite's write lock behind other processes.
        """
        if len(batch) > 100:
            return False
        with self._file.read() as conn:
            number = self._workspace_no(conn, create=False)
            if number is None:
                return False
            return all_current(conn.connection.driver_connection, number, batch)

    def remove(self, path: str) -> bool:
        def work() -> bool:
            with self._file.write() as conn:
                number = self._workspace_no(conn, create=False)
                if number is None or not remove_file(
                    conn.connection.driver_connection, number, path
                ):
                    return False
            self._file.searcher.forget_frequencies()
            return True

        return self._guarded(work)

    def clear(self) -> None:
        """Forget every file of this workspace (other workspaces in the file keep theirs)."""

        def work() -> None:
            with self._file.write() as conn:
                number = self._workspace_no(conn, create=False)
                if number is not None:
                    clear_workspace(conn.connection.driver_connection, number)
            self._file.searcher.forget_frequencies()

        self._guarded(work)

    def scrub(self) -> bool:
        """Rewrite the database so removed text is gone from its bytes (see the base).

        Each FTS5 table is merged into one segment (``optimize`` drops deleted entries'
        terms), ``VACUUM`` rebuilds every page from the live rows (with secure delete on,
        freed pages are zeroed too), and a ``TRUNCATE`` checkpoint empties the WAL, which
        held the old page images.
        """

        def work() -> bool:
            raw = self._file.engine.raw_connection()
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

    def _search(self, request: SearchRequest) -> list[SearchHit]:
        dates = (request.since, request.until)
        return self._guarded(
            lambda: self._query(
                request.terms,
                request.limit,
                request.source,
                request.mode,
                request.path_prefix,
                request.timeout,
                dates,
            )
        )

    def _query(
        self,
        terms: list[QueryTerm],
        limit: int,
        source: str,
        mode: SearchMode,
        path_prefix: str | None,
        timeout: float | None,
        dates: tuple[str | None, str | None] = (None, None),
    ) -> list[SearchHit]:
        # The hot path talks to the pooled DBAPI connection directly: no transaction, no
        # SQLAlchemy result machinery. That keeps a search within a few dozen microseconds
        # of what the raw FTS5 query costs.
        resets, number = self._number
        pooled = self._file.engine.raw_connection()
        try:
            db: sqlite3.Connection = pooled.driver_connection
            if resets != self._file.resets or number is None:
                number = find_workspace(db, self.workspace_id)
                if number is None:
                    return []
                self._number = (self._file.resets, number)
            with interrupt_after(db, timeout, self.path):
                return self._file.searcher.search(
                    db, fts_table(source, number), number, terms, limit, mode, path_prefix, dates
                )
        finally:
            pooled.close()

    # state ----------------------------------------------------------------------------------

    def stats(self) -> IndexStats:
        """This workspace's files and entries; ``bytes`` is the whole file's (all workspaces)."""

        def work() -> IndexStats:
            with self._file.read() as conn:
                number = self._workspace_no(conn, create=False)
                per_source = {
                    row[0]: (row[1], row[2] or 0)
                    for row in conn.exec_driver_sql(
                        "SELECT source, count(*), sum(entries) FROM files "
                        "WHERE workspace_no = ? GROUP BY source",
                        (number if number is not None else -1,),
                    )
                }
            files = sum(count for count, _ in per_source.values())
            entries = sum(count for _, count in per_source.values())
            details = {
                "path": str(self.path),
                "workspace_id": self.workspace_id,
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
        """Close this instance; the one the others were scoped from closes the file too."""
        self._closed = True
        if self._owner:
            self._file.close()

    def __repr__(self) -> str:
        closed = " (closed)" if self._closed or self._file.closed else ""
        return f"<SQLiteIndex {self.path} workspace {self.workspace_id!r}{closed}>"
