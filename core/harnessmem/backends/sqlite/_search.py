"""The SQLite index's search: bm25 ranking, the neighbour lift, the term cap, the timeout.

:class:`harnessmem.backends.sqlite.SQLiteIndex` checks the arguments
(:meth:`~harnessmem.backends.base.IndexBackend._search_terms`), takes a pooled DBAPI
connection and hands it to :class:`EntrySearcher` inside :func:`interrupt_after`.
"""

from __future__ import annotations

import sqlite3
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harnessmem.backends._fts import QueryTerm, fts5_expression, select_terms
from harnessmem.backends.base import SearchHit, SearchMode, SearchTimeout, dated_within
from harnessmem.backends.sqlite._blocks import load_hits, load_places
from harnessmem.backends.sqlite._schema import FILE_SHIFT, FILE_SPAN, workspace_range

__all__ = ["EntrySearcher", "interrupt_after", "neighbour_scores"]

#: bm25 weights of the columns: content, context (headings), before (the entry before).
#: ``before`` ranks but never matches alone: a query matches ``{content context}`` and
#: again every column, so the first two count twice (before's share is half its weight).
#: Tuned on LoCoMo dev (bench/bench_locomo.py), confirmed on conversations left out.
_WEIGHTS = "1.0, 0.3, 0.3"
_PROGRESS_STEPS = 10_000  # VM instructions between timeout checks (~10-50 µs)
_DF_SAMPLE = 1_000  # document frequencies above this are "common"; counting stops there
_DF_CACHE_SIZE = 4_096  # (table, term) document frequencies kept
# A search between dates grows its pool fourfold while the dated hits are too few; at most
# to this many candidates (the matches of files that also hold entries of other dates).
_DATED_POOL_MAX = 50_000


class EntrySearcher:
    """Ranks the entries of one FTS table for a query's terms; see ``backends.sqlite``.

    Holds the ranking options and a cache of term document frequencies, which the owner
    empties (:meth:`forget_frequencies`) after every write. Every statement is confined
    to one workspace's rowid range (:func:`~harnessmem.backends.sqlite._schema.workspace_range`),
    which FTS5 seeks to in each term's doclist: another workspace's entries are neither
    returned nor counted, and cost a search little however many there are. (bm25's corpus
    figures, the row count and average length FTS5 keeps per table, are the file's.)
    """

    def __init__(self, *, max_terms: int, neighbor_weight: float, candidates: int) -> None:
        self.max_terms = max_terms
        self.neighbor_weight = neighbor_weight
        self.candidates = candidates
        self._df_cache: OrderedDict[tuple[str, int, str], int] = OrderedDict()

    def forget_frequencies(self) -> None:
        """Drop the cached document frequencies (the index changed)."""
        self._df_cache.clear()

    def search(
        self,
        db: sqlite3.Connection,
        fts: str,
        workspace_no: int,
        terms: list[QueryTerm],
        limit: int,
        mode: SearchMode,
        path_prefix: str | None,
        dates: tuple[str | None, str | None] = (None, None),
        *,
        files: tuple[str, list[Any]] | None = None,
    ) -> list[SearchHit]:
        """The best ``limit`` hits of one workspace in ``fts`` for ``terms`` (not empty).

        Two statements, no transaction: each reads its own snapshot, and an entry deleted
        in between is left out. ``dates`` (since, until; checked ISO days) keeps the entries
        dated within them: only files whose dates overlap are searched, and the pool grows
        until ``limit`` such hits are found or the matches run out. ``files`` (a statement
        selecting file numbers, and its parameters) limits the search to those files.
        """
        if dates != (None, None):
            return self._search_dated(db, fts, workspace_no, terms, limit, mode, path_prefix, dates)
        if mode != "phrase" and len(terms) > self.max_terms:
            terms = select_terms(
                terms, self.max_terms, lambda t: self._frequency(db, fts, workspace_no, t)
            )
        expression = _ranked_expression(terms, mode)
        if expression is None:
            return []
        spread = mode == "any" and self.neighbor_weight > 0
        pool = max(limit, self.candidates) if spread else limit
        # bm25() ordered by SQLite's sorter beats FTS5's "ORDER BY rank" path.
        if files is not None:
            ranked = db.execute(
                f"SELECT rowid, bm25({fts}, {_WEIGHTS}) AS s FROM {fts} WHERE {fts} MATCH ? "
                f"AND rowid BETWEEN ? AND ? AND (rowid >> {FILE_SHIFT}) IN ({files[0]}) "
                "ORDER BY s LIMIT ?",
                (expression, *workspace_range(workspace_no), *files[1], pool),
            ).fetchall()
        elif path_prefix:
            ranked = self._ranked_in(db, fts, workspace_no, expression, path_prefix, pool)
        else:
            ranked = db.execute(
                f"SELECT rowid, bm25({fts}, {_WEIGHTS}) AS s FROM {fts} "
                f"WHERE {fts} MATCH ? AND rowid BETWEEN ? AND ? ORDER BY s LIMIT ?",
                (expression, *workspace_range(workspace_no), pool),
            ).fetchall()
        if not ranked:
            return []
        scores = {entry_id: -float(bm25) for entry_id, bm25 in ranked}
        if spread:
            places = load_places(db, scores)
            neighbour_scores(places, scores, self.neighbor_weight)
        best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
        by_id = load_hits(db, [entry_id for entry_id, _ in best])
        return [
            SearchHit(row[0], row[1], row[2], row[3], round(score, 6), row[4], row[5])
            for entry_id, score in best
            if (row := by_id.get(entry_id)) is not None
        ]

    def _search_dated(
        self,
        db: sqlite3.Connection,
        fts: str,
        workspace_no: int,
        terms: list[QueryTerm],
        limit: int,
        mode: SearchMode,
        path_prefix: str | None,
        dates: tuple[str | None, str | None],
    ) -> list[SearchHit]:
        since, until = dates
        files = "SELECT file_no FROM files WHERE workspace_no = ? AND last_date IS NOT NULL"
        params: list[Any] = [workspace_no]
        if since is not None:
            files += " AND last_date >= ?"
            params.append(since)
        if until is not None:
            files += " AND first_date <= ?"
            params.append(until)
        if path_prefix:
            files += " AND substr(path, 1, ?) = ?"
            params += [len(path_prefix), path_prefix]
        pool = max(limit, self.candidates)
        while True:
            hits = self.search(
                db, fts, workspace_no, terms, pool, mode, None, files=(files, params)
            )
            kept = [hit for hit in hits if dated_within(hit.date, since, until)]
            if len(kept) >= limit or len(hits) < pool or pool >= _DATED_POOL_MAX:
                return kept[:limit]
            pool *= 4

    def _ranked_in(
        self,
        db: sqlite3.Connection,
        fts: str,
        workspace_no: int,
        expression: str,
        prefix: str,
        pool: int,
    ) -> list[tuple[int, float]]:
        """The best ``pool`` (id, bm25) of files whose path starts with ``prefix``.

        A file's entries are one rowid range: one file (a session's log) is a range FTS5
        seeks to; for several, each match's file number is looked up in a set of them.
        """
        numbers = [
            row[0]
            for row in db.execute(
                "SELECT file_no FROM files WHERE workspace_no = ? AND substr(path, 1, ?) = ?",
                (workspace_no, len(prefix), prefix),
            )
        ]
        if not numbers:
            return []
        select = f"SELECT rowid, bm25({fts}, {_WEIGHTS}) AS s FROM {fts} WHERE {fts} MATCH ? "
        if len(numbers) == 1:
            low = numbers[0] << FILE_SHIFT
            return db.execute(
                select + "AND rowid BETWEEN ? AND ? ORDER BY s LIMIT ?",
                (expression, low, low + FILE_SPAN - 1, pool),
            ).fetchall()
        return db.execute(
            select + f"AND rowid BETWEEN ? AND ? AND (rowid >> {FILE_SHIFT}) IN "
            "(SELECT file_no FROM files WHERE workspace_no = ? AND substr(path, 1, ?) = ?) "
            "ORDER BY s LIMIT ?",
            (expression, *workspace_range(workspace_no), workspace_no, len(prefix), prefix, pool),
        ).fetchall()

    def _frequency(
        self, db: sqlite3.Connection, fts: str, workspace_no: int, term: QueryTerm
    ) -> int:
        """A workspace's documents holding ``term``, up to ``_DF_SAMPLE`` (cached until a write)."""
        key = (fts, workspace_no, term.text)
        cached = self._df_cache.get(key)
        if cached is not None:
            return cached
        count = int(
            db.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {fts} WHERE {fts} MATCH ? "
                "AND rowid BETWEEN ? AND ? LIMIT ?)",
                (_matched(fts5_expression([term])), *workspace_range(workspace_no), _DF_SAMPLE),
            ).fetchone()[0]
        )
        self._df_cache[key] = count
        if len(self._df_cache) > _DF_CACHE_SIZE:
            self._df_cache.popitem(last=False)
        return count


def _ranked_expression(terms: list[QueryTerm], mode: SearchMode) -> str | None:
    """The MATCH expression of ``terms``: entries whose content or headings hold them,
    ranked by every column (the entry before's words too; see ``_WEIGHTS``)."""
    expression = fts5_expression(terms, mode)
    if expression is None:
        return None
    return f"{_matched(expression)} AND ({expression})"


def _matched(expression: str | None) -> str:
    """``expression`` matched in the content and headings only."""
    return f"{{content context}} : ({expression})"


@contextmanager
def interrupt_after(db: sqlite3.Connection, timeout: float | None, path: Path) -> Iterator[None]:
    """Interrupt the statements run inside after ``timeout`` seconds (SearchTimeout).

    ``path`` (the index file) names the index in the error.
    """
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
            f"search in {path} stopped after {timeout:g}s (index.search_timeout)",
            hint="use fewer or rarer words, or raise index.search_timeout",
        ) from None
    finally:
        db.set_progress_handler(None, 0)


def neighbour_scores(places: Sequence[Any], scores: dict[int, float], weight: float) -> None:
    """Add ``weight`` times the scores of matching section neighbours, in place.

    ``places`` holds ``(id, seq, section)`` of the candidates in ``scores``; the file is
    ``id >> FILE_SHIFT``. Only candidates gain, from their original scores: a match next
    to other matches is likelier the passage wanted than an isolated one with the same
    bm25.
    """
    at = {
        (entry_id >> FILE_SHIFT, seq): (section, scores[entry_id])
        for entry_id, seq, section in places
    }
    lent_to: dict[int, float] = {}
    for entry_id, seq, section in places:
        lent = 0.0
        for near in (seq - 1, seq + 1):
            neighbour = at.get((entry_id >> FILE_SHIFT, near))
            if neighbour is not None and neighbour[0] == section:
                lent += neighbour[1]
        if lent:
            lent_to[entry_id] = lent
    for entry_id, lent in lent_to.items():
        scores[entry_id] += weight * lent
