"""The ``postgres`` index backend: PostgreSQL full-text search shared by every replica.

One database serves many workspaces (rows carry a workspace number; see ``_schema``) and
every replica of a workspace: a file changed by one replica is indexed once, at its
content hash, and the others find it at that hash and skip it. Search needs no rebuild
on any replica: the rows are the index.

Text: entries go to ``to_tsvector`` in the form :func:`harnessmem_postgres._text.document_text`
gives them (diacritics folded, punctuation as spaces, CJK as bigrams), content with
weight A and headings with weight B, under a GIN index. Queries come from harnessmem's
query builder and reach ``to_tsquery`` as quoted lexemes only (never a syntax error).

Ranking: each query term ``t`` contributes ``idf(t) * ts_rank_cd(tsv, t)`` (``ts_rank_cd``
with weights A 1.0, B 0.3; ``idf`` as bm25 computes it, from the number of this
workspace's entries holding the term, counted up to 1,000), so rare words outweigh common
ones as they do under bm25; in ``any`` mode the best ``candidates`` are then lifted by
their section neighbours as in the sqlite backend.

Writes: a batch of files is one transaction. A writer takes the workspace's advisory lock
in shared mode (``clear`` takes it exclusively) and one advisory lock per file path, in a
fixed order, so concurrent syncs of one file by several replicas run one after the other:
the second finds the content hash already stored and only records its change token.
Unchanged entries keep their rows (an append inserts only the new bullets).

The backend builds and migrates its tables itself (see ``_schema``); when they disappear
it builds them again, and when another replica empties the workspace (``clear``, or a
changed ``text_search_config``) it notices by the workspace's ``generation`` and
increments ``resets``, so that its harness hands every file again.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

from harnessmem.backends import (
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
from harnessmem.backends.fulltext import QueryTerm, select_terms
from harnessmem.errors import ConfigError, HarnessMemError
from harnessmem_postgres import _schema
from harnessmem_postgres._rows import StoredEntry, diff_entries, neighbour_scores
from harnessmem_postgres._schema import advisory_key, quote_ident
from harnessmem_postgres._sql import Statements
from harnessmem_postgres._text import clean, document_text, term_tsquery, tsquery_text
from harnessmem_postgres.options import (
    DEFAULT_URL,
    PostgresIndexOptions,
    mask_url,
    workspace_key,
    workspace_url,
)

__all__ = ["IndexUnavailable", "PostgresIndex", "PostgresIndexOptions"]

logger = logging.getLogger("harnessmem.index")

_T = TypeVar("_T")
_BATCH_ENTRIES = 20_000  # entries per write transaction of sync_files
_DF_CAP = 1_000  # entries counted per term for its idf; rarer terms are counted exactly
_DF_SECONDS = 60.0  # how long a counted document frequency is reused
_DF_CACHE_SIZE = 4_096
_WEIGHTS = [0.1, 0.1, 0.3, 1.0]  # ts_rank_cd weights of D, C, B (headings), A (content)
_FAST_CHECK = 500  # batches up to this size are first compared without a write lock
_ANALYZE_AFTER = 500  # entries written by one sync_files call that may warrant an ANALYZE
_ANALYZE_SHARE = 0.2  # ... when they are this share of the table (autovacuum's default: 0.1)
# SQLSTATEs meaning our tables or our workspace row are gone: rebuild them and retry.
_MISSING = {"42P01", "3F000", "23503"}
_QUERY_CANCELED = "57014"
_LOCK_NOT_AVAILABLE = "55P03"
_HINT = (
    "check index.options.url (or PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE) and that "
    "the server is running"
)


class IndexUnavailable(HarnessMemError, ConnectionError):
    """The PostgreSQL server could not be reached, or a lock could not be had in time."""


class _WorkspaceGone(Exception):
    """The workspace row was deleted under us (another process dropped the workspace)."""


class PostgresIndex(IndexBackend):
    """PostgreSQL full-text index shared by replicas; see the module docstring."""

    name: ClassVar[str] = "postgres"
    Options: ClassVar[type[BackendOptions]] = PostgresIndexOptions
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"stemming", "diacritics", "cjk", "phrase", "timeout", "persistent", "concurrent"}
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
        super().__init__(options, **context)
        assert isinstance(options, PostgresIndexOptions)
        self.opts = options
        key = workspace_key(options, context)
        if key is None:
            raise ConfigError(
                "the postgres index needs a workspace id: index.options.workspace_id is unset "
                "and no workspace was given",
                hint="set index.options.workspace_id, or open the index through MemoryHarness",
            )
        self.workspace_id = key
        self.url = mask_url(options.url)
        self.schema = options.db_schema
        self._quoted = quote_ident(self.schema)
        self._sql = Statements.build(self._quoted)
        self._lock = threading.RLock()
        self._closed = False
        self._workspace_no = 0
        self._generation = 0
        self._lock_timeout = f"{math.ceil(options.lock_timeout * 1000)}ms"
        # (source, tsquery text) -> (entries holding it, monotonic expiry); see _frequencies.
        self._df_cache: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()
        self._engine = self._create_engine()
        try:
            self._prepare()
        except BaseException:
            self._engine.dispose()
            raise

    # connection and schema ------------------------------------------------------------------

    def _create_engine(self) -> Any:
        from sqlalchemy import create_engine
        from sqlalchemy.engine import make_url

        url = make_url(self.opts.url or DEFAULT_URL)
        connect_args: dict[str, Any] = {"connect_timeout": self.opts.connect_timeout}
        if "application_name" not in url.query:
            connect_args["application_name"] = self.opts.application_name
        # NOTICEs (a query of stop words only, a word too long to index) are not problems.
        given = url.query.get("options")
        extra = "-c client_min_messages=warning"
        connect_args["options"] = f"{given} {extra}" if isinstance(given, str) else extra
        return create_engine(
            url,
            pool_size=self.opts.pool_size,
            max_overflow=self.opts.max_overflow,
            pool_timeout=self.opts.pool_timeout,
            pool_recycle=-1 if self.opts.pool_recycle is None else self.opts.pool_recycle,
            pool_pre_ping=self.opts.pool_pre_ping,
            connect_args=connect_args,
        )

    def _prepare(self) -> None:
        """Create or migrate the tables, check the text search config, attach the workspace."""
        config = self.opts.text_search_config
        try:
            with self._engine.begin() as conn:
                conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
                _schema.migrate(conn, self.schema, self.url)
                _schema.check_text_search_config(conn, config)
                attached = _schema.attach_workspace(
                    conn,
                    self.schema,
                    self.workspace_id,
                    workspace_url(self.context),
                    config,
                    self._lock_timeout,
                )
                stemming = _schema.stems(conn, config)
        except Exception as exc:
            error = self._error(exc, "cannot open")
            if error is exc:
                raise
            raise error from exc
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
        # The class declares what the default ('english') gives; a configuration without
        # a stemmer ('simple') takes 'stemming' away, so the suite skips that test.
        caps = type(self).capabilities
        self.capabilities = caps if stemming else caps - {"stemming"}  # type: ignore[misc]

    @contextmanager
    def _reading(self, timeout: float | None = None) -> Iterator[Any]:
        """A pooled connection in autocommit (no BEGIN/COMMIT round trips) for reads.

        Each statement is bounded by ``timeout`` (None: no bound) through the session's
        ``statement_timeout``, set only when the connection's current value differs.
        """
        wanted = 0 if timeout is None else max(1, math.ceil(timeout * 1000))
        with self._engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT")
            info = conn.connection.info
            if info.get("statement_timeout") != wanted:
                info.pop("statement_timeout", None)
                conn.exec_driver_sql(f"SET statement_timeout = {int(wanted)}")
                info["statement_timeout"] = wanted
            yield conn

    @contextmanager
    def _writing(self) -> Iterator[Any]:
        """A transaction; its first statement must be a lock statement (it also lifts the
        session's statement_timeout for the transaction and bounds lock waits)."""
        with self._engine.begin() as conn:
            yield conn

    def _workspace_lock(self, number: int | None = None) -> int:
        return advisory_key("workspace", self.schema, number or self._workspace_no)

    def _error(self, exc: BaseException, doing: str) -> BaseException:
        """``exc`` as what harnessmem raises: our own errors pass, connection failures map."""
        if isinstance(exc, HarnessMemError):
            return exc
        orig = getattr(exc, "orig", None)
        state = getattr(orig, "sqlstate", None)
        if state == _LOCK_NOT_AVAILABLE:
            return IndexUnavailable(
                f"postgres index {self.workspace_id!r} in {self.url}: {doing}: another writer "
                f"held the lock longer than index.options.lock_timeout "
                f"({self.opts.lock_timeout:g}s)",
                hint="raise index.options.lock_timeout, or look for a stuck transaction in "
                "pg_stat_activity",
            )
        from sqlalchemy.exc import InterfaceError, OperationalError

        if isinstance(exc, OperationalError | InterfaceError):
            first = str(orig or exc).strip().splitlines()[0] if str(orig or exc).strip() else ""
            return IndexUnavailable(
                f"postgres index in {self.url}: {doing}: {mask_url(first)}", hint=_HINT
            )
        return exc

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessMemError(f"the postgres index {self.workspace_id!r} is closed")

    def _guarded(self, work: Callable[[], _T], doing: str) -> _T:
        """Run ``work``, once more after a dropped connection or after rebuilding our tables.

        A connection the server dropped (a restart, an idle timeout of a proxy) is
        invalidated by SQLAlchemy with the rest of the pool; the retry gets a fresh one.
        When our tables or our workspace row are gone, they are built again (``resets``
        grows, so the harness hands every file again).
        """
        from sqlalchemy.exc import DBAPIError

        self._check_open()
        retried = rebuilt = False
        while True:
            try:
                return work()
            except _WorkspaceGone:
                missing = True
            except DBAPIError as exc:
                if exc.connection_invalidated and not retried:
                    retried = True
                    continue
                state = getattr(exc.orig, "sqlstate", None)
                missing = state in _MISSING
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
                self._df_cache.clear()
                self.resets += 1

    def _seen_generation(self, generation: int | None) -> None:
        """Another replica emptied the workspace since we last looked: count a reset."""
        if generation is None:
            raise _WorkspaceGone
        if generation != self._generation:
            with self._lock:
                if generation != self._generation:
                    self._generation = generation
                    self._df_cache.clear()
                    self.resets += 1

    # writing --------------------------------------------------------------------------------

    def files(self) -> dict[str, IndexedFile]:
        def work() -> dict[str, IndexedFile]:
            with self._reading() as conn:
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
            with self._reading() as conn:
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
        """Whether every update is stored already (hash, source, token): no lock needed."""
        with self._reading() as conn:
            rows = conn.execute(
                self._sql.current,
                {"ws": self._workspace_no, "paths": [u.path for u in batch]},
            ).all()
        stored = {row[0]: tuple(row[1:]) for row in rows}
        return all(stored.get(u.path) == (u.content_hash, u.source, u.change_token) for u in batch)

    def _write(self, batch: Sequence[FileUpdate]) -> list[bool]:
        changed: list[bool] = []
        with self._writing() as conn:
            conn.execute(
                self._sql.lock_workspace_shared,
                {"lock_timeout": self._lock_timeout, "key": self._workspace_lock()},
            )
            keys = sorted(
                {advisory_key("file", self.schema, self._workspace_no, u.path) for u in batch}
            )
            conn.execute(self._sql.lock_paths, {"keys": keys})
            # A path twice in one batch: apply in rounds, each path once per round.
            start = 0
            while start < len(batch):
                seen: set[str] = set()
                end = start
                while end < len(batch) and batch[end].path not in seen:
                    seen.add(batch[end].path)
                    end += 1
                changed += self._write_round(conn, batch[start:end])
                start = end
        if any(changed):
            with self._lock:
                self._df_cache.clear()
        return changed

    def _write_round(self, conn: Any, batch: Sequence[FileUpdate]) -> list[bool]:
        ws = self._workspace_no
        paths = [u.path for u in batch]
        stored = {
            row[0]: (row[1], row[2])
            for row in conn.execute(self._sql.stored_files, {"ws": ws, "paths": paths})
        }
        same = [u for u in batch if stored.get(u.path) == (u.content_hash, u.source)]
        todo = [u for u in batch if stored.get(u.path) != (u.content_hash, u.source)]
        if same:
            conn.execute(
                self._sql.set_tokens,
                {
                    "ws": ws,
                    "paths": [u.path for u in same],
                    "tokens": [u.change_token for u in same],
                },
            )
        if not todo:
            return [False] * len(batch)
        rows: dict[str, list[StoredEntry]] = {u.path: [] for u in todo}
        held = [u.path for u in todo if u.path in stored]
        if held:
            for row in conn.execute(self._sql.stored_entries, {"ws": ws, "paths": held}):
                rows[row[1]].append(StoredEntry(row[0], *row[2:]))
        gone: list[int] = []
        moved: list[tuple[int, int, int, int, int, str | None]] = []
        added: list[tuple[str, str, int, Any]] = []
        for update in todo:
            entries = [
                entry._replace(content=clean(entry.content), context=clean(entry.context))
                for entry in update.entries
            ]
            old_source = stored.get(update.path, (None, update.source))[1]
            if old_source != update.source:  # moved between sources: every row anew
                gone += [row.id for row in rows[update.path]]
                added += [(update.path, update.source, seq, e) for seq, e in enumerate(entries)]
                continue
            diff = diff_entries(rows[update.path], entries)
            gone += diff.gone
            moved += diff.moved
            added += [(update.path, update.source, seq, e) for seq, e in diff.added]
        conn.execute(
            self._sql.upsert_files,
            {
                "ws": ws,
                "paths": [u.path for u in todo],
                "sources": [u.source for u in todo],
                "hashes": [u.content_hash for u in todo],
                "tokens": [u.change_token for u in todo],
                "counts": [len(u.entries) for u in todo],
            },
        )
        if gone:
            conn.execute(self._sql.delete_entries, {"ids": gone})
        if moved:
            columns = list(zip(*moved, strict=True))
            conn.execute(
                self._sql.move_entries,
                dict(
                    zip(
                        ("ids", "seqs", "sections", "firsts", "lasts", "dates"),
                        map(list, columns),
                        strict=True,
                    )
                ),
            )
        if added:
            self._insert(conn, added)
        done = {u.path for u in todo}
        return [u.path in done for u in batch]

    def _insert(self, conn: Any, added: Sequence[tuple[str, str, int, Any]]) -> None:
        contexts: dict[str, str] = {}

        def context_text(context: str) -> str:
            found = contexts.get(context)
            if found is None:
                found = contexts[context] = document_text(context)
            return found

        conn.execute(
            self._sql.insert_entries,
            {
                "ws": self._workspace_no,
                "cfg": self.opts.text_search_config,
                "paths": [a[0] for a in added],
                "sources": [a[1] for a in added],
                "seqs": [a[2] for a in added],
                "sections": [a[3].section for a in added],
                "firsts": [a[3].start_line for a in added],
                "lasts": [a[3].end_line for a in added],
                "contents": [a[3].content for a in added],
                "contexts": [a[3].context for a in added],
                "dates": [a[3].date for a in added],
                "docs": [document_text(a[3].content) for a in added],
                "ctxs": [context_text(a[3].context) for a in added],
            },
        )

    def remove(self, path: str) -> bool:
        def work() -> bool:
            with self._writing() as conn:
                conn.execute(
                    self._sql.lock_workspace_shared,
                    {"lock_timeout": self._lock_timeout, "key": self._workspace_lock()},
                )
                key = advisory_key("file", self.schema, self._workspace_no, path)
                conn.execute(self._sql.lock_paths, {"keys": [key]})
                row = conn.execute(
                    self._sql.remove_file, {"ws": self._workspace_no, "path": path}
                ).first()
            with self._lock:
                self._df_cache.clear()
            return row is not None

        return self._guarded(work, "removing a file")

    def clear(self) -> None:
        """Forget every file of this workspace; other replicas notice and re-sync."""

        def work() -> None:
            with self._writing() as conn:
                conn.execute(
                    self._sql.lock_workspace,
                    {"lock_timeout": self._lock_timeout, "key": self._workspace_lock()},
                )
                conn.execute(self._sql.clear, {"ws": self._workspace_no})
                generation = conn.execute(
                    self._sql.bump_generation, {"ws": self._workspace_no}
                ).scalar_one_or_none()
            if generation is None:
                raise _WorkspaceGone
            with self._lock:
                self._generation = int(generation)
                self._df_cache.clear()

        self._guarded(work, "clearing the index")

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
        deadline = None if timeout is None else time.monotonic() + timeout
        return self._guarded(
            lambda: self._search(terms, limit, source, mode, path_prefix, deadline, timeout),
            "searching",
        )

    def _search(
        self,
        terms: list[QueryTerm],
        limit: int,
        source: str,
        mode: SearchMode,
        path_prefix: str | None,
        deadline: float | None,
        timeout: float | None,
    ) -> list[SearchHit]:
        from sqlalchemy.exc import OperationalError

        ws, cfg = self._workspace_no, self.opts.text_search_config
        spread = mode == "any" and self.opts.neighbor_weight > 0
        pool = max(limit, self.opts.candidates) if spread else limit
        try:
            with self._reading(timeout) as conn:
                if mode != "phrase" and len(terms) > self.opts.max_terms:
                    texts = [term_tsquery(t) or "" for t in terms]
                    counts = self._frequencies(conn, source, texts, deadline, timeout)
                    frequency = dict(zip(terms, counts, strict=True))
                    terms = select_terms(terms, self.opts.max_terms, frequency.__getitem__)
                expression = tsquery_text(terms, mode)
                if expression is None:
                    return []
                scored = (
                    [expression]
                    if mode == "phrase"
                    else [part for part in map(term_tsquery, terms) if part is not None]
                )
                params: dict[str, Any] = {
                    "ws": ws,
                    "source": source,
                    "cfg": cfg,
                    "terms": scored,
                    "dfs": self._frequencies(conn, source, scored, deadline, timeout),
                    "query": expression,
                    "weights": _WEIGHTS,
                    "pool": pool,
                }
                if deadline is not None and deadline <= time.monotonic():
                    raise self._timed_out(timeout)
                statement = self._sql.search
                if path_prefix:
                    statement, params["prefix"] = self._sql.search_prefix, path_prefix
                rows = conn.execute(statement, params).all()
        except OperationalError as exc:
            if getattr(exc.orig, "sqlstate", None) == _QUERY_CANCELED:
                raise self._timed_out(timeout) from None
            raise
        self._seen_generation(int(rows[0][0]) if rows else None)
        hits = [row for row in rows if row[1] is not None]
        if not hits:
            return []
        scores = {row[1]: float(row[10]) for row in hits}
        if spread:
            neighbour_scores(
                [(row[1], row[2], row[3], row[4]) for row in hits],
                scores,
                self.opts.neighbor_weight,
            )
        by_id = {row[1]: row for row in hits}
        best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
        return [
            SearchHit(row[2], row[5], row[6], row[7], round(score, 6), row[8], row[9])
            for entry_id, score in best
            for row in (by_id[entry_id],)
        ]

    def _frequencies(
        self,
        conn: Any,
        source: str,
        texts: Sequence[str],
        deadline: float | None,
        timeout: float | None,
    ) -> list[int]:
        """How many entries of ``source`` hold each tsquery text (up to ``_DF_CAP``).

        Cached for ``_DF_SECONDS`` and until this instance writes (another replica's
        writes show after the expiry): counting costs as much as the ranking itself, and
        an idf barely moves with a few new entries.
        """
        now = time.monotonic()
        found: dict[str, int] = {}
        with self._lock:
            for text in texts:
                cached = self._df_cache.get((source, text))
                if cached is not None and cached[1] > now:
                    found[text] = cached[0]
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            if deadline is not None and deadline <= time.monotonic():
                raise self._timed_out(timeout)
            counts = conn.execute(
                self._sql.frequencies,
                {
                    "ws": self._workspace_no,
                    "source": source,
                    "cfg": self.opts.text_search_config,
                    "terms": missing,
                    "df_cap": _DF_CAP,
                },
            ).scalars()
            expires = time.monotonic() + _DF_SECONDS
            with self._lock:
                for text, count in zip(missing, counts, strict=True):
                    found[text] = int(count)
                    self._df_cache[(source, text)] = (int(count), expires)
                while len(self._df_cache) > _DF_CACHE_SIZE:
                    self._df_cache.popitem(last=False)
        return [found[text] for text in texts]

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

            with self._reading() as conn:
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
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._engine.dispose()

    def __repr__(self) -> str:
        closed = " (closed)" if self._closed else ""
        return f"<PostgresIndex {self.workspace_id!r} in {self.url} schema {self.schema}{closed}>"
