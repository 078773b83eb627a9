"""The ``vectors`` index backend: SQLite FTS5 candidates and dense similarity, fused.

Full text is the ``sqlite`` backend itself (same file, same options, same ranking);
vectors live in a second SQLite file beside it (``memory_index.vectors.db``; see
:mod:`harnessmem_vectors._store`). A search in ``any`` mode takes the sqlite ranking's
best ``text_pool`` entries (each holds a query word) and the cosine of each to the query
(a NumPy product over the workspace's vectors), adding the nearest entries outside the
pool (at most ``dense_candidates``) that reach ``min_similarity``, so a query about
nothing in the workspace still finds nothing. Each candidate's text score and cosine
become z-scores over the candidates, and the order is ``z(text) + dense_weight *
z(cosine)`` (an entry from outside the pool has the pool's lowest text score). On LoCoMo
dev this weighted sum beat reciprocal rank fusion, which throws the scores' gaps away
(``docs/index.md``). ``all`` and ``phrase`` searches, and sources not in
``embed_sources``, are the sqlite ranking alone.

The text embedded for a query leaves out its words found in more than ``common_share``
of the source's entries: a speaker's name that prefixes half the turns of a chat log
tells turns apart for bm25 (rarely) but pulls a sentence vector towards every turn of
that speaker.

Isolation is the sqlite backend's for the text, and rows keyed by ``workspace_id`` for
the vectors; :meth:`VectorIndex.scoped` shares both files' connections.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np

from harnessmem.backends.base import (
    BackendOptions,
    FileUpdate,
    IndexBackend,
    IndexedFile,
    IndexEntry,
    IndexStats,
    SearchHit,
    SearchRequest,
    dated_within,
)
from harnessmem.backends.sqlite import SQLiteIndex, SQLiteIndexOptions
from harnessmem.errors import ConfigError, HarnessMemError
from harnessmem_vectors._store import WORD, Matrix, VectorStore
from harnessmem_vectors.embedders import Embedder, build_embedder
from harnessmem_vectors.options import VectorIndexOptions

__all__ = ["VectorIndex", "vector_path"]


def _scored(hit: SearchHit, score: float) -> SearchHit:
    return SearchHit(
        hit.path, hit.start_line, hit.end_line, hit.content, round(score, 6), hit.context, hit.date
    )


logger = logging.getLogger("harnessmem.index")

#: Sources with fewer entries keep every query word in the text embedded (a word in 3
#: of 5 notes is a topic, not a speaker's name).
_COMMON_MIN_ENTRIES = 50


def _z(values: Any) -> Any:
    """z-scores; all 0 when the values hardly differ (bm25 of a term in most entries is
    ~1e-6 for every one of them, and hits carry 6 decimals: no opinion to scale up)."""
    spread = float(values.std())
    return (values - values.mean()) / spread if spread > 1e-4 else np.zeros_like(values)


def _place(hit: SearchHit) -> tuple[str, int, int]:
    """A hit's place, the key of its entry in both halves (and of ``Matrix.row``)."""
    return (hit.path, hit.start_line, hit.end_line)


def _fused(
    text_hits: list[SearchHit], near: list[tuple[SearchHit, float]], weight: float
) -> list[SearchHit]:
    """The candidates of both sides by ``z(text score) + weight * z(cosine)``, best first.

    An entry only the dense side found has the text side's lowest score; one without a
    vector (not embedded yet) the candidates' mean cosine.
    """
    hits = {_place(hit): hit for hit, _ in near}
    hits.update((_place(hit), hit) for hit in text_hits)
    if not hits:
        return []
    order = list(hits)
    text = {_place(hit): hit.score for hit in text_hits}
    cosine = {_place(hit): similarity for hit, similarity in near}
    lowest = min(text.values(), default=0.0)
    mean = sum(cosine.values()) / len(cosine) if cosine else 0.0
    fused = _z(np.array([text.get(k, lowest) for k in order], dtype=np.float64)) + weight * _z(
        np.array([cosine.get(k, mean) for k in order], dtype=np.float64)
    )
    ranked = sorted(range(len(order)), key=lambda n: (-float(fused[n]), n))
    return [_scored(hits[order[n]], float(fused[n])) for n in ranked]


class Outage:
    """The embedder's failures, shared by the instances of every workspace on one file.

    After a failure the embedder is left alone for ``pause`` seconds (``clock`` tells the
    time): searches rank by full text alone and the files synced meanwhile wait, in
    ``pending``, for their vectors, embedded at the first sync or search after the pause.
    """

    def __init__(self, pause: float, clock: Callable[[], float]) -> None:
        self.pause = pause
        self.clock = clock
        self.until = float("-inf")
        self.pending: dict[tuple[str, str], FileUpdate] = {}
        self.lock = threading.Lock()

    def down(self) -> bool:
        """Whether the embedder failed less than ``pause`` seconds ago."""
        return self.clock() < self.until

    def failed(self, exc: BaseException, doing: str) -> None:
        """Note a failure (``doing``: what it was embedding); the first one of an outage logs."""
        with self.lock:
            first = not self.down()
            self.until = self.clock() + self.pause
        if first:
            logger.warning(
                "the vectors index could not embed %s (%s); searching by full text alone, "
                "trying again in %.0f s",
                doing,
                exc,
                self.pause,
            )


def vector_path(index_path: Path) -> Path:
    """The vector file beside a full-text index file (``x.db`` -> ``x.vectors.db``)."""
    return index_path.with_name(f"{index_path.stem}.vectors{index_path.suffix or '.db'}")


class VectorIndex(IndexBackend):
    """Hybrid full-text and dense index; see the module docstring."""

    name: ClassVar[str] = "vectors"
    Options: ClassVar[type[BackendOptions]] = VectorIndexOptions
    capabilities: ClassVar[frozenset[str]] = SQLiteIndex.capabilities

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        assert isinstance(options, VectorIndexOptions)
        shared = context.pop("_shared", None)
        super().__init__(options, **context)
        self.opts = options
        self.text: SQLiteIndex
        self.store: VectorStore
        self.embedder: Embedder
        self.outage: Outage
        if shared is not None:
            self.text, self.store, self.embedder, self.outage = shared
            self._owner = False
            return
        self.outage = Outage(options.retry_after, context.get("clock") or time.monotonic)
        raw_path = context.get("index_path")
        if raw_path is None:
            raise ConfigError(
                "the vectors index needs a file: no index_path was given",
                hint="set workspace.index_path, or open it through MemoryHarness",
            )
        self.embedder = build_embedder(options)
        text_options = SQLiteIndexOptions(
            **options.model_dump(include=set(SQLiteIndexOptions.model_fields))
        )
        self.text = SQLiteIndex(text_options, **context)
        where = (
            Path(options.vector_path).expanduser()
            if options.vector_path
            else vector_path(Path(raw_path).expanduser())
        )
        try:
            self.store = VectorStore(where, busy_timeout=options.busy_timeout)
        except BaseException:
            self.text.close()
            raise
        attach = getattr(self.embedder, "attach", None)
        if attach is not None:
            attach(self.store)
        self._owner = True

    @property
    def _identity(self) -> str:
        """The vectors' identity: the embedder's, and the context embedded with an entry."""
        context = self.opts.dense_context
        return f"{self.embedder.identity}/context{context}" if context else self.embedder.identity

    @property
    def resets(self) -> int:
        """Times either file started empty."""
        return self.text.resets + self.store.resets

    @resets.setter
    def resets(self, value: int) -> None:
        pass  # IndexBackend.__init__ starts the count at 0; the files keep theirs

    def scoped(self, workspace_id: str, **context: Any) -> Self:
        """Another workspace's instance on the same two files."""
        text = self.text.scoped(workspace_id, **context)
        merged = {**self.context, **context, "workspace_id": text.workspace_id}
        shared = (text, self.store, self.embedder, self.outage)
        return type(self)(self.opts, _shared=shared, **merged)

    # writing --------------------------------------------------------------------------------

    def files(self) -> dict[str, IndexedFile]:
        """The files both halves hold at the same hash (others are handed again)."""
        held = self.text.files()
        embedded = self.store.current(self.workspace_id, self._identity)
        return {
            path: f
            for path, f in held.items()
            if f.source not in self.opts.embed_sources or embedded.get(path) == f.content_hash
        }

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
        """The text half first, then the vectors of the files whose hash changed.

        An embedder that fails (an API down) fails no sync: the text is written, the
        file waits in :class:`Outage` for its vectors (and ``files()`` leaves it out, so a
        rebuild hands it again too).
        """
        batch = list(updates)
        changed = self.text.sync_files(batch)
        embedded = self.store.current(self.workspace_id, self._identity)
        waiting = [
            (position, update)
            for position, update in enumerate(batch)
            if update.source in self.opts.embed_sources
            and embedded.get(update.path) != update.content_hash
        ]
        for position, _ in waiting:
            changed[position] = True
        self._embed_files([update for _, update in waiting])
        return changed

    def _embed_files(self, updates: list[FileUpdate]) -> None:
        """Embed ``updates`` and the files still waiting, unless the embedder is paused."""
        outage = self.outage
        with outage.lock:
            for update in updates:
                outage.pending[(self.workspace_id, update.path)] = update
            mine = [u for (ws, _), u in outage.pending.items() if ws == self.workspace_id]
        if not mine or outage.down():
            return
        for update in mine:
            try:
                self.store.write_file(
                    self.workspace_id,
                    update.path,
                    update.source,
                    update.content_hash,
                    update.entries,
                    self._identity,
                    self.embedder.embed,
                    self.opts.dense_context,
                )
            except HarnessMemError as exc:
                outage.failed(exc, f"{update.path}'s entries")
                return
            with outage.lock:
                key = (self.workspace_id, update.path)
                if outage.pending.get(key) is update:
                    del outage.pending[key]

    def remove(self, path: str) -> bool:
        with self.outage.lock:
            self.outage.pending.pop((self.workspace_id, path), None)
        removed = self.text.remove(path)
        self.store.remove(self.workspace_id, path)
        return removed

    def clear(self) -> None:
        with self.outage.lock:
            for key in [k for k in self.outage.pending if k[0] == self.workspace_id]:
                del self.outage.pending[key]
        self.text.clear()
        self.store.remove(self.workspace_id)

    def scrub(self) -> bool:
        """Scrub both files (``forget`` calls it): the full-text half as the sqlite backend
        does, the vector file by dropping unused vectors and rewriting its pages."""
        text = self.text.scrub()
        return self.store.scrub() and text

    # searching ------------------------------------------------------------------------------

    def _search(self, request: SearchRequest) -> list[SearchHit]:
        query, limit, source, mode = request.text, request.limit, request.source, request.mode
        path_prefix, timeout, since, until = (
            request.path_prefix,
            request.timeout,
            request.since,
            request.until,
        )
        opts = self.opts
        dense = mode == "any" and source in opts.embed_sources and opts.ranking != "text"
        if dense:
            if self.outage.pending:  # files an outage left without vectors, if it is over
                self._embed_files([])
            dense = not self.outage.down()

        def text_search(count: int) -> list[SearchHit]:
            return self.text.search(
                query,
                count,
                source=source,
                mode=mode,
                path_prefix=path_prefix,
                timeout=timeout,
                since=since,
                until=until,
            )

        if not dense:
            return text_search(limit)
        text_hits = [] if opts.ranking == "dense" else text_search(max(limit, opts.text_pool))
        near = self._dense(query, source, path_prefix, text_hits, limit, (since, until))
        if near is None:  # the embedder failed: the full text alone
            return text_hits[:limit] if opts.ranking != "dense" else text_search(limit)
        if opts.ranking == "dense":
            return [_scored(hit, similarity) for hit, similarity in near[:limit]]
        return _fused(text_hits, near, opts.dense_weight)[:limit]

    def _dense(
        self,
        query: str,
        source: str,
        path_prefix: str | None,
        text_hits: list[SearchHit],
        limit: int,
        dates: tuple[str | None, str | None],
    ) -> list[tuple[SearchHit, float]] | None:
        """The dense ranking: the text pool by cosine to ``query``, with the nearest other
        entries that reach ``min_similarity`` (at most ``dense_candidates``), best first;
        None when the query could not be embedded.
        (With ``ranking = "dense"`` the text pool is empty: every entry needs the bar.)
        """
        matrix = self.store.matrix(self.workspace_id, source, self._identity)
        if matrix is None:
            return []
        try:
            embedded = self.embedder.embed([self._query_text(query, matrix)])
        except HarnessMemError as exc:
            self.outage.failed(exc, "the query")
            return None
        vector = np.asarray(embedded, dtype=np.float32)[0]
        if vector.shape[0] != matrix.vectors.shape[1]:
            logger.warning("the vectors index holds vectors of another size; reindex it")
            return []
        similarity = matrix.similarity(vector)
        if dates != (None, None):
            keep = np.fromiter(
                (dated_within(p[5], *dates) for p in matrix.places), bool, len(matrix.places)
            )
            similarity = np.where(keep, similarity, -np.inf)
        found: dict[int, SearchHit | None] = {}
        for hit in text_hits:
            row = matrix.row(*_place(hit))
            if row is not None:
                found[row] = hit
        extra = max(self.opts.dense_candidates, limit if not text_hits else 0)
        count = min(extra + len(found), len(similarity))
        if count:
            nearest = np.argpartition(-similarity, count - 1)[:count]
            bar = self.opts.min_similarity
            if bar is None:
                bar = 0.85 if self.opts.embedder == "static" else 0.6
            if self.opts.ranking == "dense":
                bar = -1.0
            for row in nearest.tolist():
                place = matrix.places[row]
                if row in found or similarity[row] < bar or similarity[row] == -np.inf:
                    continue
                if path_prefix and not place[0].startswith(path_prefix):
                    continue
                found[row] = None
        # Ties by place, not row: rows follow the order of writes, not of the files.
        ranked = sorted(found, key=lambda row: (-float(similarity[row]), matrix.places[row][:3]))
        out = []
        for row in ranked:
            held = found[row]
            if held is None:
                path, start, end, content, context, date = matrix.places[row]
                held = SearchHit(path, start, end, content, 0.0, context, date)
            out.append((held, float(similarity[row])))
        return out

    def _query_text(self, query: str, matrix: Matrix) -> str:
        """``query`` without its words common in ``matrix`` (see the module docstring);
        the whole query when every word is common or the source is small."""
        share = self.opts.common_share
        if share >= 1 or matrix.entries < _COMMON_MIN_ENTRIES:
            return query
        kept = []
        for token in query.split():
            words = WORD.findall(token.lower())
            if not words or any(matrix.word_share(word) <= share for word in words):
                kept.append(token)
        return " ".join(kept) or query

    # state ----------------------------------------------------------------------------------

    def stats(self) -> IndexStats:
        text = self.text.stats()
        entries, vectors = self.store.counts(self.workspace_id)
        details = {
            **text.details,
            "vectors": {
                "path": str(self.store.path),
                "embedder": self._identity,
                "embedded_entries": entries,
                "cached_vectors": vectors,
                "ranking": self.opts.ranking,
            },
        }
        return IndexStats(files=text.files, entries=text.entries, details=details)

    def close(self) -> None:
        """Close this instance; the one the others were scoped from closes the files too."""
        self.text.close()
        if self._owner:
            self.store.close()

    def __repr__(self) -> str:
        return f"<VectorIndex {self.store.path} workspace {self.workspace_id!r}>"
