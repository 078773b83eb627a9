"""The ``postgres`` index (plugins/harnessmem-postgres): retrieval quality and search speed.

Skipped, with a note, when harnessmem-postgres is not installed or no PostgreSQL server
answers (``POSTGRES_BENCH_URL``, else ``postgres`` then ``root`` at 127.0.0.1:5432/test).
Everything runs in a schema of its own, dropped at the end.

- *LoCoMo*: the retrieval benchmark of ``bench_locomo`` (same workspaces, questions and
  scores: evidence recall@5, recall@10, hit@5) with ``index.backend = "postgres"``,
  against the default ``sqlite`` backend on the same questions in the same run.
- *search*: on the corpus of ``bench_index`` (bullets drawn from LoCoMo's word
  frequencies over 365 daily logs), ``harness.search(query, limit=10)`` — the change
  check of the workspace, the query builder, one SQL statement ranking with idf-weighted
  ``ts_rank_cd``, neighbour lifting — against a plain SQL query on the same table:
  ``SELECT id, content FROM entries WHERE workspace_no = %s AND source = 'memory' AND
  tsv @@ q ORDER BY ts_rank_cd(tsv, q) DESC LIMIT 10`` with the query's words quoted and
  OR-ed, sent through a bare psycopg connection. Each query runs on both sides in turn.
- *build*: ``harness.reindex()`` of that workspace against a raw bulk insert of the same
  bullets into a plain table with a stored ``tsvector`` and a GIN index.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench._util import Row, interleaved_times, search_rows

CANDIDATES = [
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "postgresql+psycopg://root@127.0.0.1:5432/test",
]
QUERIES = 200
_WORD = re.compile(r"\w+")


def _libpq(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def find_server() -> tuple[str | None, str]:
    """A SQLAlchemy URL of a server that answers, or None and why not."""
    try:
        import psycopg

        import harnessmem_postgres  # noqa: F401
    except ImportError as exc:
        return None, f"harnessmem-postgres is not installed ({exc})"
    given = os.environ.get("POSTGRES_BENCH_URL")
    problems = []
    for url in [given] if given else CANDIDATES:
        try:
            with psycopg.connect(_libpq(url), connect_timeout=3) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            problems.append(f"{url}: {str(exc).strip().splitlines()[0]}")
            continue
        return url, ""
    return None, "no PostgreSQL server answered: " + "; ".join(problems)


@contextmanager
def _schema(url: str) -> Iterator[str]:
    import psycopg

    name = f"harnessmem_bench_{uuid.uuid4().hex[:8]}"
    # Made here, not by the first backend that opens it: the raw baseline of the speed
    # step may come first (the LoCoMo step is skipped without its data).
    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(_libpq(url), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _locomo(url: str, schema: str) -> list[Row]:
    from bench.bench_locomo import CATEGORIES, DATA, evaluate

    if not DATA.is_file():
        print(f"   LoCoMo: skipped, data missing at {DATA}")
        return []
    data = json.loads(DATA.read_text(encoding="utf-8"))
    # Each conversation is its own workspace: its id is derived from its folder.
    ours, _, _, seconds = evaluate(data, {"url": url, "schema": schema}, backend="postgres")
    sqlite, plain, _, sqlite_seconds = evaluate(data)
    questions = ours.count("all")
    print(
        f"   LoCoMo: {questions} questions; harness.search took {seconds / questions * 1e3:.2f} "
        f"ms each on postgres, {sqlite_seconds / questions * 1e3:.2f} ms on sqlite"
    )
    print(
        f"   {'category':<12} {'n':>4}  {'metric':<10} {'postgres':>8} {'sqlite':>7} {'plain':>6}"
    )
    rows = []
    for category in ["all", *CATEGORIES.values()]:
        for metric in ("recall@5", "recall@10", "hit@5"):
            value, base = ours.mean(category, metric), sqlite.mean(category, metric)
            n = ours.count(category)
            print(
                f"   {category:<12} {n:>4}  {metric:<10} {value:>8.3f} {base:>7.3f} "
                f"{plain.mean(category, metric):>6.3f}"
            )
            if category == "all" or metric == "recall@5":
                rows.append(
                    Row(
                        bench="postgres",
                        name=f"LoCoMo {metric}, {category} ({n} questions)",
                        value=value,
                        unit="",
                        baseline="harness on the sqlite backend, same questions",
                        baseline_value=base,
                        notes=f"plain FTS5 table: {plain.mean(category, metric):.3f}; "
                        "higher is better",
                    )
                )
    return rows


def _plain_query(query: str) -> str | None:
    words = dict.fromkeys(w.lower() for w in _WORD.findall(query))
    return " | ".join(f"'{w}'" for w in words if "'" not in w) or None


def _raw_build(conn: Any, schema: str, bullets: list[str], *, gin_first: bool = False) -> float:
    """Seconds to load ``bullets`` into a fresh plain table with a stored tsvector and a
    GIN index over it: built after the rows (the fastest way), or, ``gin_first``, present
    while they go in, as in a table other workspaces share and search meanwhile."""
    gin = f'CREATE INDEX ON "{schema}".raw USING gin (tsv) WITH (fastupdate = off)'
    started = time.perf_counter()
    with conn.transaction():
        conn.execute(f'DROP TABLE IF EXISTS "{schema}".raw')
        conn.execute(
            f'CREATE TABLE "{schema}".raw (id bigserial PRIMARY KEY, content text NOT NULL, '
            "tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED)"
        )
        if gin_first:
            conn.execute(gin)
        conn.execute(
            f'INSERT INTO "{schema}".raw (content) SELECT unnest(%s::text[])',
            ([f"- {b}" for b in bullets],),
        )
        if not gin_first:
            conn.execute(f'CREATE INDEX ON "{schema}".raw USING gin (tsv)')
    return time.perf_counter() - started


def _speed(url: str, schema: str, quick: bool) -> list[Row]:
    import psycopg

    from bench.bench_index import FILES, _corpus, _queries, _vocabulary, _write_workspace
    from harnessmem import MemoryHarness

    words, weights = _vocabulary()
    sizes = (5_000,) if quick else (20_000, 100_000)
    rounds = 1 if quick else 3
    options = {"backend": "postgres", "options": {"url": url, "schema": schema}}
    opened: dict[str, Any] = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}
    rows: list[Row] = []
    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        for size in sizes:
            bullets = _corpus(size, words, weights)
            with tempfile.TemporaryDirectory(prefix="bench-postgres-") as tmp:
                root = Path(tmp) / "ws"
                _write_workspace(root, bullets)
                ours_build, raw_build, raw_gin_first = [], [], []
                for _ in range(rounds):
                    raw_build.append(_raw_build(conn, schema, bullets))
                    raw_gin_first.append(_raw_build(conn, schema, bullets, gin_first=True))
                    with MemoryHarness.open(root, index=options, **opened) as harness:
                        harness.kernel.index.clear()
                        started = time.perf_counter()
                        result = harness.reindex()
                        ours_build.append(time.perf_counter() - started)
                rows.append(
                    Row(
                        bench="postgres",
                        name=f"build, {size:,} entries",
                        value=statistics.median(ours_build),
                        unit="s",
                        baseline="raw bulk INSERT with a stored tsvector + GIN index",
                        baseline_value=statistics.median(raw_build),
                        notes=f"{FILES} daily logs, {result.entries} entries; reindex of an "
                        "empty workspace",
                    )
                )
                rows.append(
                    Row(
                        bench="postgres",
                        name=f"build, {size:,} entries, raw into a GIN index already there",
                        value=statistics.median(ours_build),
                        unit="s",
                        baseline="raw bulk INSERT, the GIN index made before the rows",
                        baseline_value=statistics.median(raw_gin_first),
                        notes="the shared entries table keeps its GIN index while a workspace "
                        "is reindexed (fastupdate off, as ours)",
                    )
                )
                with MemoryHarness.open(root, index=options, **opened) as harness:
                    harness.reindex()
                    backend: Any = harness.kernel.index
                    number = backend._workspace_no
                    plain = (
                        f'SELECT e.id, e.content FROM "{schema}".entries e, '
                        "to_tsquery('english', %s) q WHERE e.workspace_no = %s "
                        "AND e.source = 'memory' AND e.tsv @@ q "
                        "ORDER BY ts_rank_cd(e.tsv, q) DESC LIMIT 10"
                    )

                    def raw_search(query: str, plain: str = plain, number: int = number) -> None:
                        expression = _plain_query(query)
                        if expression is not None:
                            conn.execute(plain, (expression, number)).fetchall()

                    for label, content_only in (("natural", False), ("content words", True)):
                        queries = _queries(words, weights, content_only=content_only)[:QUERIES]
                        for query in queries[:20]:  # warm caches on both sides
                            harness.search(query, limit=10)
                            raw_search(query)
                        ours, raw = interleaved_times(
                            lambda q, h=harness: h.search(q, limit=10), raw_search, queries, rounds
                        )
                        rows += search_rows(
                            "postgres",
                            f"{label} queries, {size:,} entries",
                            ours,
                            raw,
                            baseline="plain SQL on the same table: words OR-ed, ts_rank_cd",
                            notes=f"{len(queries)} queries of 2-5 words, {rounds} "
                            f"rounds, interleaved; change check of {FILES} files "
                            "included",
                        )
                        if label != "natural":
                            continue
                        # The backend alone, asked for the 30 hits the harness asks it for
                        # (three times the limit): the harness's folding of repeats and its
                        # change check are the difference to the row above. Its cached word
                        # counts (idf) are dropped first and warmed on the same 20 queries,
                        # so that it counts words in its first round as the harness did.
                        backend._frequencies.forget()
                        for query in queries[:20]:
                            backend.search(query, 30)
                        alone, raw = interleaved_times(
                            lambda q, b=backend: b.search(q, 30), raw_search, queries, rounds
                        )
                        rows += search_rows(
                            "postgres",
                            f"{label} queries, the backend's search alone, {size:,} entries",
                            alone,
                            raw,
                            baseline="plain SQL on the same table: words OR-ed, ts_rank_cd",
                            notes="PostgresIndex.search(query, 30): the ranking statement "
                            "(and the word counts of words not counted in the last minute), "
                            "rows to hits, neighbour lift; no folding of repeats, no change check",
                        )
    for row in rows:
        base = (row.baseline_value or 0) * 1e3
        print(f"   {row.name}: {row.value * 1e3:.2f} ms, baseline {base:.2f} ms")
    return rows


def run(quick: bool) -> list[Row]:
    """LoCoMo recall against the sqlite backend; build and search speed against plain SQL."""
    url, why = find_server()
    if url is None:
        print(f"bench postgres: skipped, {why}", file=sys.stderr)
        return []
    with _schema(url) as schema:
        rows = _locomo(url, schema)
        rows += _speed(url, schema, quick)
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
