"""Searching the PostgreSQL index: term frequencies, the ranking statement, neighbours.

Each query term ``t`` contributes ``idf(t) * ts_rank_cd(tsv, t)`` (``ts_rank_cd`` with
weights A 1.0, B 0.3; ``idf`` as bm25 computes it, from the number of this workspace's
entries holding the term, counted up to :data:`DF_CAP`), so rare words outweigh common
ones as they do under bm25; in ``any`` mode the best ``candidates`` are then lifted by
their section neighbours as in the sqlite backend.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from harnessmem.backends import SearchHit, SearchMode
from harnessmem.backends.fulltext import QueryTerm, select_terms
from harnessmem_postgres._rows import neighbour_scores
from harnessmem_postgres._sql import Statements
from harnessmem_postgres._text import term_tsquery, tsquery_text

__all__ = ["DF_CAP", "WEIGHTS", "DocumentFrequencies", "candidates", "rank"]

WEIGHTS = [0.1, 0.1, 0.3, 1.0]  # ts_rank_cd weights of D, C, B (headings), A (content)
DF_CAP = 1_000  # entries counted per term for its idf; rarer terms are counted exactly
DF_SECONDS = 60.0  # how long a counted document frequency is reused
DF_CACHE_SIZE = 4_096


class DocumentFrequencies:
    """How many entries of a source hold each tsquery text (up to :data:`DF_CAP`).

    Cached for :data:`DF_SECONDS` and until this replica writes (:meth:`forget`; another
    replica's writes show after the expiry): counting costs as much as the ranking
    itself, and an idf barely moves with a few new entries.
    """

    def __init__(self, statements: Statements) -> None:
        self._sql = statements
        self._lock = threading.Lock()
        # (source, tsquery text) -> (entries holding it, monotonic expiry)
        self._cache: OrderedDict[tuple[str, str], tuple[int, float]] = OrderedDict()

    def forget(self) -> None:
        """Drop every cached count (the index changed)."""
        with self._lock:
            self._cache.clear()

    def counts(
        self,
        conn: Any,
        *,
        workspace_no: int,
        config: str,
        source: str,
        texts: Sequence[str],
        check: Callable[[], None],
    ) -> list[int]:
        """The count of each of ``texts``; ``check`` raises when the search is out of time."""
        now = time.monotonic()
        found: dict[str, int] = {}
        with self._lock:
            for text in texts:
                cached = self._cache.get((source, text))
                if cached is not None and cached[1] > now:
                    found[text] = cached[0]
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            check()
            counts = conn.execute(
                self._sql.frequencies,
                {
                    "ws": workspace_no,
                    "source": source,
                    "cfg": config,
                    "terms": missing,
                    "df_cap": DF_CAP,
                },
            ).scalars()
            expires = time.monotonic() + DF_SECONDS
            with self._lock:
                for text, count in zip(missing, counts, strict=True):
                    found[text] = int(count)
                    self._cache[(source, text)] = (int(count), expires)
                while len(self._cache) > DF_CACHE_SIZE:
                    self._cache.popitem(last=False)
        return [found[text] for text in texts]


def candidates(
    conn: Any,
    statements: Statements,
    frequencies: DocumentFrequencies,
    *,
    workspace_no: int,
    config: str,
    terms: list[QueryTerm],
    source: str,
    mode: SearchMode,
    path_prefix: str | None,
    pool: int,
    max_terms: int,
    check: Callable[[], None],
    since: str | None = None,
    until: str | None = None,
) -> list[Any] | None:
    """The best ``pool`` rows for ``terms``; None when the query has nothing to match.

    Each row starts with the workspace's generation; a workspace that is gone gives no
    row at all, a workspace without a match one row of NULLs after the generation.
    """
    count = frequencies.counts
    if mode != "phrase" and len(terms) > max_terms:
        texts = [term_tsquery(t) or "" for t in terms]
        found = count(
            conn,
            workspace_no=workspace_no,
            config=config,
            source=source,
            texts=texts,
            check=check,
        )
        frequency = dict(zip(terms, found, strict=True))
        terms = select_terms(terms, max_terms, frequency.__getitem__)
    expression = tsquery_text(terms, mode)
    if expression is None:
        return None
    scored = (
        [expression]
        if mode == "phrase"
        else [part for part in map(term_tsquery, terms) if part is not None]
    )
    dfs = count(
        conn, workspace_no=workspace_no, config=config, source=source, texts=scored, check=check
    )
    params: dict[str, Any] = {
        "ws": workspace_no,
        "source": source,
        "cfg": config,
        "terms": scored,
        "dfs": dfs,
        "query": expression,
        "weights": WEIGHTS,
        "pool": pool,
    }
    check()
    dated = since is not None or until is not None
    statement = statements.search(len(scored), prefix=bool(path_prefix), dated=dated)
    if path_prefix:
        params["prefix"] = path_prefix
    if dated:
        # open bounds as days no entry can be before or after
        params["since"], params["until"] = since or "0000-00-00", until or "9999-99-99"
    return list(conn.execute(statement, params).all())


def rank(rows: Sequence[Any], limit: int, neighbour_weight: float) -> list[SearchHit]:
    """The best ``limit`` hits of :func:`candidates` rows, lifted by their neighbours."""
    hits = [row for row in rows if row[1] is not None]
    if not hits:
        return []
    scores = {row[1]: float(row[10]) for row in hits}
    if neighbour_weight > 0:
        neighbour_scores(
            [(row[1], row[2], row[3], row[4]) for row in hits], scores, neighbour_weight
        )
    by_id = {row[1]: row for row in hits}
    best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
    return [
        SearchHit(row[2], row[5], row[6], row[7], round(score, 6), row[8], row[9])
        for entry_id, score in best
        for row in (by_id[entry_id],)
    ]
