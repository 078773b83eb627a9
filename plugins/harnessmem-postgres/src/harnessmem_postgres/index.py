"""The ``postgres`` index backend: PostgreSQL full-text search shared by every replica.

One database serves many workspaces (rows carry a workspace number; see ``_schema``) and
every replica of a workspace: a file changed by one replica is indexed once, at its
content hash, and the others find it at that hash and skip it. Search needs no rebuild
on any replica: the rows are the index.

Text: entries go to ``to_tsvector`` in the form :func:`harnessmem_postgres._text.document_text`
gives them (diacritics folded, punctuation as spaces, CJK as bigrams), content with
weight A and headings with weight B, under a GIN index. Queries come from harnessmem's
query builder and reach ``to_tsquery`` as quoted lexemes only (never a syntax error).

The class here holds the backend's state and its recovery rules; the work is done by
private modules, one concern each:

- ``_schema``: tables, migrations (under an advisory lock), the workspace row;
- ``_sql``: every statement, for one schema;
- ``_engine``: the engine and its pooled read sessions;
- ``_writes``: batches of files in one transaction, removals, ``clear``;
- ``_search`` (and ``_rows``): idf-weighted ranking, neighbour lifting;
- ``_errors``: what server errors become.

Workspaces: an instance serves one workspace (``workspace_id``); :meth:`PostgresIndex.scoped`
gives another workspace's instance on the same engine (connection pool), which is how a
``HarnessPool`` serves thousands of tenants with one pool of connections. Every statement
names the workspace's number; searches count term frequencies over that workspace only.
An instance made without any workspace id serves none (it exists to be scoped).

The backend builds and migrates its tables itself; when they disappear it builds them
again, and when another replica empties the workspace (``clear``, or a changed
``text_search_config``) it notices by the workspace's ``generation`` and increments
``resets``, so that its harness hands every file again.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Self, TypeVar

from harnessmem.backends import (
    BackendOptions,
    FileUpdate,
    IndexBackend,
    IndexedFile,
    IndexEntry,
    IndexStats,
    SearchHit,
    SearchMode,
    SearchRequest,
    SearchTimeout,
)
from harnessmem.backends.fulltext import QueryTerm
from harnessmem.errors import ConfigError, HarnessMemError
from harnessmem_postgres import _schema
from harnessmem_postgres._engine import create_engine, reading
from harnessmem_postgres._errors import (
    MISSING,
    QUERY_CANCELED,
    IndexUnavailable,
    WorkspaceGone,
    sqlstate,
    translate,
)
from harnessmem_postgres._schema import quote_ident
from harnessmem_postgres._search import DocumentFrequencies, candidates, rank
from harnessmem_postgres._sql import Statements
from harnessmem_postgres._writes import (
    Target,
    all_current,
    clear_workspace,
    remove_file,
    write_batch,
)
from harnessmem_postgres.options import (
    PostgresIndexOptions,
    mask_url,
    workspace_key,
    workspace_url,
)

__all__ = ["IndexUnavailable", "PostgresIndex", "PostgresIndexOptions"]

logger = logging.getLogger("harnessmem.index")

_T = TypeVar("_T")
_BATCH_ENTRIES = 20_000  # entries per write transaction of sync_files
_FAST_CHECK = 500  # batches up to this size are first compared without a write lock
_ANALYZE_AFTER = 500  # entries written by one sync_files call that may warrant an ANALYZE
_ANALYZE_SHARE = 0.2  # ... when they are this share of the table (autovacuum's default: 0.1)


class PostgresIndex(IndexBackend):
    """PostgreSQL full-text index shared by replicas; see the module docstring."""

    name: ClassVar[str] = "postgres"
    Options: ClassVar[type[BackendOptions]] = PostgresIndexOptions
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"stemming", "diacritics", "cjk", "phrase", "timeout", "persistent", "concurrent", "dates"}
    )

    @classmethod
    def parse_options(cls, raw: Any, *, where: str) -> Any:
        """As the base does, with passwords in a rejected URL masked in the message."""
        try:
            return super().parse_options(raw, where=where)
        except ConfigError as exc:
            problems = [mask_url(line) for line in exc.problems]
            raise ConfigError(
                mask_url(exc.message),
                hint=mask_url(exc.hint) if exc.hint else None,
                problems=problems,
            ) from None

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        shared = context.pop("_shared_engine", None)
        super().__init__(options, **context)
        assert isinstance(options, PostgresIndexOptions)
        self.opts = options
        self.workspace_id = workspace_key(options, context) or ""
        self.url = mask_url(options.url)
        self.schema = options.db_schema
        self._quoted = quote_ident(self.schema)
        self._sql = Statements.build(self._quoted)
        self._lock = threading.RLock()
        self._closed = False
        self._workspace_no = 0
        self._generation = 0
        self._staging = True
        self._lock_timeout = f"{math.ceil(options.lock_timeout * 1000)}ms"
        self._frequencies = DocumentFrequencies(self._sql)
        self._owner = shared is None
        self._engine = create_engine(options) if shared is None else shared
        try:
            self._prepare(migrate=self._owner)
        except BaseException:
            if self._owner:
                self._engine.dispose()
            raise

    def scoped(self, workspace_id: str, **context: Any) -> Self:
        """Workspace ``workspace_id``'s instance on this one's engine (its connection pool).

        Closing it leaves the engine open; closing the instance it came from disposes it.
        """
        if not isinstance(workspace_id, str) or not workspace_id:
            return super().scoped(workspace_id, **context)  # raises the usual error
        self._check_open()
        merged = {**self.context, **context, "workspace_id": workspace_id}
        return type(self)(self.opts, _shared_engine=self._engine, **merged)

    # connection and schema ------------------------------------------------------------------

    def _prepare(self, *, migrate: bool = True) -> None:
        """Create or migrate the tables, check the text search config, attach the workspace.

        ``migrate`` False (a scoped instance: the one it came from did that) only attaches.
        """
        config = self.opts.text_search_config
        try:
            with self._engine.begin() as conn:
                conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
                if migrate:
                    _schema.migrate(conn, self.schema, self.url)
                    _schema.check_text_search_config(conn, config)
                stemming = _schema.stems(conn, config)
                staging = _schema.can_stage(conn)
                if not self.workspace_id:
                    attached = None
                else:
                    attached = _schema.attach_workspace(
                        conn,
                        self.schema,
                        self.workspace_id,
                        workspace_url(self.context),
                        config,
                        self._lock_timeout,
                    )
        except Exception as exc:
            error = self._error(exc, "cannot open")
            if error is exc:
                raise
            raise error from exc
        self._staging = staging
        # The class declares what the default ('english') gives; a configuration without
        # a stemmer ('simple') takes 'stemming' away, so the suite skips that test.
        caps = type(self).capabilities
        self.capabilities = caps if stemming else caps - {"stemming"}  # type: ignore[misc]
        if attached is None:
            return
        if attached.emptied_from is not None:
            logger.warning(
                "index workspace %r in %s was built with text search configuration %r, not "
                "%r; emptied it to rebuild",
                self.workspace_id,
                self.url,
                attached.emptied_from,
                config,
            )
            self.resets += 1
        self._workspace_no, self._generation = attached.number, attached.generation

    def _target(self) -> Target:
        """Where writes go now (the workspace number changes when the tables are rebuilt)."""
        return Target(
            self._sql,
            self.schema,
            self._workspace_no,
            self.opts.text_search_config,
            self._lock_timeout,
            self._staging,
        )

    def _error(self, exc: BaseException, doing: str) -> BaseException:
        """``exc`` as what harnessmem raises: our own errors pass, connection failures map."""
        return translate(
            exc,
            doing,
            workspace_id=self.workspace_id,
            url=self.url,
            lock_timeout=self.opts.lock_timeout,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessMemError(f"the postgres index {self.workspace_id!r} is closed")

    def _check_workspace(self) -> None:
        self._check_open()
        if not self.workspace_id:
            raise ConfigError(
                "the postgres index needs a workspace id: index.options.workspace_id is unset "
                "and no workspace was given",
                hint="set index.options.workspace_id, open the index through MemoryHarness, "
                "or use index.scoped(workspace_id)",
            )

    def _guarded(self, work: Callable[[], _T], doing: str) -> _T:
        """Run ``work``, once more after a dropped connection or after rebuilding our tables.

        A connection the server dropped (a restart, an idle timeout of a proxy) is
        invalidated by SQLAlchemy with the rest of the pool; the retry gets a fresh one.
        When our tables or our workspace row are gone, they are built again (``resets``
        grows, so the harness hands every file again).
        """
        from sqlalchemy.exc import DBAPIError

        self._check_workspace()
        retried = rebuilt = False
        while True:
            try:
                return work()
            except WorkspaceGone:
                missing = True
            except DBAPIError as exc:
                if exc.connection_invalidated and not retried:
                    retried = True
                    continue
                missing = sqlstate(exc) in MISSING
                if not missing or rebuilt:
                    error = self._error(exc, doing)
                    if error is exc:
                        raise
                    raise error from exc
            if rebuilt:
                raise HarnessMemError(
                    f"postgres index {self.workspace_id!r}: {doing}: the workspace vanished "
                    "again right after it was rebuilt",
                    hint="something is deleting the index tables or workspace rows",
                )
            rebuilt = True
            with self._lock:
                logger.warning(
                    "index tables of workspace %r in schema %s of %s were missing; rebuilt them",
                    self.workspace_id,
                    self.schema,
                    self.url,
                )
                self._prepare()
                self._frequencies.forget()
                self.resets += 1

    def _seen_generation(self, generation: int | None) -> None:
        """Another replica emptied the workspace since we last looked: count a reset."""
        if generation is None:
            raise WorkspaceGone
        if generation != self._generation:
            with self._lock:
                if generation != self._generation:
                    self._generation = generation
                    self._frequencies.forget()
                    self.resets += 1

    # writing --------------------------------------------------------------------------------

    def files(self) -> dict[str, IndexedFile]:
        def work() -> dict[str, IndexedFile]:
            with reading(self._engine) as conn:
                rows = conn.execute(self._sql.files, {"ws": self._workspace_no}).all()
            return {row[0]: IndexedFile(*row) for row in rows}

        return self._guarded(work, "listing files")

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
        """Apply ``updates`` in transactions of up to ``_BATCH_ENTRIES`` entries."""
        results: list[bool] = []
        batch: list[FileUpdate] = []
        size = written = 0
        for update in updates:
            self._check_source(update.source)
            batch.append(update)
            size += len(update.entries) + 1
            if size >= _BATCH_ENTRIES:
                done = self._apply_batch(batch)
                written += sum(len(u.entries) for u, c in zip(batch, done, strict=True) if c)
                results += done
                batch, size = [], 0
        if batch:
            done = self._apply_batch(batch)
            written += sum(len(u.entries) for u, c in zip(batch, done, strict=True) if c)
            results += done
        if written >= _ANALYZE_AFTER:
            self._analyze(written)
        return results

    def _analyze(self, written: int) -> None:
        """Refresh the planner's statistics when ``written`` entries grew the table by a fifth.

        Until autovacuum gets to it (up to a minute later), the planner would still think
        the table small and scan a workspace's rows instead of the GIN index: searches
        after a first sync or a rebuild would be several times slower.
        """
        try:
            with reading(self._engine) as conn:
                rows = conn.exec_driver_sql(
                    f"SELECT reltuples FROM pg_class WHERE oid = '{self._quoted}.entries'::regclass"
                ).scalar_one()
                if rows < 0 or written > _ANALYZE_SHARE * rows:
                    conn.exec_driver_sql(f"ANALYZE {self._quoted}.entries, {self._quoted}.files")
        except Exception as exc:  # statistics are an optimisation; never fail a sync on them
            logger.debug("ANALYZE of the postgres index failed: %s", exc)

    def _apply_batch(self, batch: list[FileUpdate]) -> list[bool]:
        if len(batch) <= _FAST_CHECK and self._guarded(
            lambda: self._all_current(batch), "checking files"
        ):
            return [False] * len(batch)
        return self._guarded(lambda: self._write(batch), "writing files")

    def _all_current(self, batch: Sequence[FileUpdate]) -> bool:
        with reading(self._engine) as conn:
            return all_current(conn, self._target(), batch)

    def _write(self, batch: Sequence[FileUpdate]) -> list[bool]:
        with self._engine.begin() as conn:
            changed = write_batch(conn, self._target(), batch)
        if any(changed):
            self._frequencies.forget()
        return changed

    def remove(self, path: str) -> bool:
        def work() -> bool:
            with self._engine.begin() as conn:
                removed = remove_file(conn, self._target(), path)
            self._frequencies.forget()
            return removed

        return self._guarded(work, "removing a file")

    def clear(self) -> None:
        """Forget every file of this workspace; other replicas notice and re-sync."""

        def work() -> None:
            with self._engine.begin() as conn:
                generation = clear_workspace(conn, self._target())
            if generation is None:
                raise WorkspaceGone
            with self._lock:
                self._generation = generation
            self._frequencies.forget()

        self._guarded(work, "clearing the index")

    def scrub(self) -> bool:
        """Rewrite the tables so removed entries' text leaves their files (see the base).

        ``VACUUM (FULL)`` writes ``entries`` and ``files`` anew from their live rows, with
        their TOAST tables and indexes (the GIN index held every lexeme), and deletes the
        old files. It holds an exclusive lock on each table meanwhile, so every
        workspace's searches and writes wait for it (waiting itself at most
        ``lock_timeout`` for running ones). False, rewriting nothing, when
        ``scrub_on_forget`` is off or the role does not own the tables (VACUUM would skip
        them with a warning). The server's write-ahead log, and any archive or replica of
        it, keep the old bytes until they are recycled: no client can reach those.
        """
        if not self.opts.scrub_on_forget:
            return False
        tables = f"{self._quoted}.entries, {self._quoted}.files"

        def work() -> bool:
            with reading(self._engine) as conn:
                owned = conn.exec_driver_sql(
                    "SELECT bool_and(pg_has_role(current_user, relowner, 'USAGE')) "
                    f"FROM pg_class WHERE oid IN ('{self._quoted}.entries'::regclass, "
                    f"'{self._quoted}.files'::regclass)"
                ).scalar_one()
                if not owned:
                    logger.warning(
                        "cannot scrub the postgres index in %s: role does not own %s",
                        self.url,
                        tables,
                    )
                    return False
                conn.exec_driver_sql(f"SET lock_timeout = '{self._lock_timeout}'")
                try:
                    conn.exec_driver_sql(f"VACUUM (FULL) {tables}")
                finally:
                    conn.exec_driver_sql("RESET lock_timeout")
            self._frequencies.forget()
            return True

        return self._guarded(work, "scrubbing the index")

    # searching ------------------------------------------------------------------------------

    def _search(self, request: SearchRequest) -> list[SearchHit]:
        timeout = request.timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        dates = (request.since, request.until)
        return self._guarded(
            lambda: self._query(
                request.terms,
                request.limit,
                request.source,
                request.mode,
                request.path_prefix,
                deadline,
                timeout,
                dates,
            ),
            "searching",
        )

    def _query(
        self,
        terms: list[QueryTerm],
        limit: int,
        source: str,
        mode: SearchMode,
        path_prefix: str | None,
        deadline: float | None,
        timeout: float | None,
        dates: tuple[str | None, str | None] = (None, None),
    ) -> list[SearchHit]:
        from sqlalchemy.exc import OperationalError

        def check() -> None:
            if deadline is not None and deadline <= time.monotonic():
                raise self._timed_out(timeout)

        spread = mode == "any" and self.opts.neighbor_weight > 0
        try:
            with reading(self._engine, timeout) as conn:
                rows = candidates(
                    conn,
                    self._sql,
                    self._frequencies,
                    workspace_no=self._workspace_no,
                    config=self.opts.text_search_config,
                    terms=terms,
                    source=source,
                    mode=mode,
                    path_prefix=path_prefix,
                    pool=max(limit, self.opts.candidates) if spread else limit,
                    max_terms=self.opts.max_terms,
                    check=check,
                    since=dates[0],
                    until=dates[1],
                )
        except OperationalError as exc:
            if sqlstate(exc) == QUERY_CANCELED:
                raise self._timed_out(timeout) from None
            raise
        if rows is None:
            return []
        self._seen_generation(int(rows[0][0]) if rows else None)
        return rank(rows, limit, self.opts.neighbor_weight if spread else 0.0)

    def _timed_out(self, timeout: float | None) -> SearchTimeout:
        return SearchTimeout(
            f"search of postgres index {self.workspace_id!r} stopped after {timeout or 0:g}s "
            "(index.search_timeout)",
            hint="use fewer or rarer words, or raise index.search_timeout",
        )

    # state ----------------------------------------------------------------------------------

    def stats(self) -> IndexStats:
        def work() -> IndexStats:
            from sqlalchemy import text

            with reading(self._engine) as conn:
                per_source = {
                    row[0]: (int(row[1]), int(row[2]))
                    for row in conn.execute(self._sql.stats, {"ws": self._workspace_no})
                }
                size = conn.execute(
                    text(
                        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = :schema AND c.relkind = 'r'"
                    ),
                    {"schema": self.schema},
                ).scalar_one()
            details = {
                "url": self.url,
                "schema": self.schema,
                "schema_version": _schema.LATEST_VERSION,
                "workspace_id": self.workspace_id,
                "text_search_config": self.opts.text_search_config,
                "stemming": "stemming" in self.capabilities,
                "cjk": "bigrams",
                "generation": self._generation,
                "bytes_all_workspaces": int(size),
                "sources": {
                    source: {"files": count, "entries": n}
                    for source, (count, n) in sorted(per_source.items())
                },
            }
            return IndexStats(
                files=sum(count for count, _ in per_source.values()),
                entries=sum(n for _, n in per_source.values()),
                details=details,
            )

        return self._guarded(work, "reading stats")

    def close(self) -> None:
        """Close this instance; the one the others were scoped from disposes the engine."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._owner:
                self._engine.dispose()

    def __repr__(self) -> str:
        closed = " (closed)" if self._closed else ""
        return f"<PostgresIndex {self.workspace_id!r} in {self.url} schema {self.schema}{closed}>"
