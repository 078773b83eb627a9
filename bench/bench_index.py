"""Index build and search through the harness against raw sqlite3 FTS5 on the same rows.

Corpus: N bullets of 8-30 words drawn from the word frequencies of the LoCoMo
conversations (a fixed seed; a synthetic Zipf vocabulary when the data is missing),
spread over 365 daily logs (``memory/YYYY-MM-DD.md``, a year of them, each last
modified on its day, the newest an hour before the run).

- *build*: ``harness.reindex()`` on a workspace without an index (open the backend and
  create its schema; list, read, hash and chunk the files; write entry blocks, file
  records and FTS rows) against raw sqlite3: one FTS5 table with the harness's tokenizer
  in a file, the same bullet texts inserted with ``executemany`` in one transaction.
  That table holds the text only; the harness also stores each entry's path, line
  range, date, heading context and order, and each file's hash and change token. A
  second row therefore compares with raw sqlite3 storing that much too (a rowid table of
  path, lines, date, text and heading plus a contentless FTS5 table, one transaction):
  the cost of the harness itself, apart from the cost of what it keeps. A third row's raw
  side also indexes each entry's predecessor in its file, as the harness's FTS5 table
  does (its bm25 ranks by it). Builds of the four alternate, five times in a full run
  (three in a quick one); medians are reported.
- *search*: ``harness.search(query, limit=10)`` — which first checks for changed files
  (the folder, MEMORY.md and the logs changed in the last two days; a full sweep of all
  365 every ``index.refresh_interval``), then parses the query, runs FTS5 with bm25 and
  ranks neighbours — against
  raw ``SELECT rowid, content FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10`` with the
  query's words quoted and OR-ed; each query runs on both sides in turn (three rounds of
  the query set in a full run, one in a quick one), so load hits both alike. Two query
  sets of 2-5 words: *natural* (drawn by word frequency, so stop words are common; the
  harness drops them, the raw query cannot) and *content words* (stop words excluded, so
  both sides search the same terms).
- *ranking statement alone* (content words): the first statement of the sqlite backend's
  search, run on the harness's own index file with sqlite3 (the entries matched in their
  text or headings, ranked with bm25 over the text, headings and the entry before; 50
  candidates for the neighbour lift), and the same statement without the entry before's
  share (matched and ranked in text and headings only), each against the raw query: what
  the ranking costs by itself, before hits are loaded, repeats folded and files checked.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench._util import Row, interleaved_times, search_rows
from harnessmem.backends.sqlite import TOKENIZER

LOCOMO = (
    Path(
        os.environ.get("SHARED_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    / "locomo-dev"
    / "locomo-dev.json"
)
FILES = 365
QUERIES = 200


def _vocabulary() -> tuple[list[str], list[int]]:
    words: Counter[str] = Counter()
    if LOCOMO.is_file():
        for sample in json.loads(LOCOMO.read_text(encoding="utf-8")):
            for key, turns in sample["conversation"].items():
                if re.fullmatch(r"session_\d+", key):
                    for turn in turns:
                        words.update(re.findall(r"[a-z']+", str(turn["text"]).lower()))
    if not words:  # a Zipf vocabulary of made-up words
        rnd = random.Random(7)
        for rank in range(1, 8_000):
            word = "".join(rnd.choice("bcdfghjklmnprstvz") + rnd.choice("aeiou") for _ in range(3))
            words[word] = max(1, 100_000 // rank)
    items = words.most_common()
    return [w for w, _ in items], [c for _, c in items]


def _corpus(size: int, words: list[str], weights: list[int]) -> list[str]:
    rnd = random.Random(1)
    return [
        " ".join(rnd.choices(words, weights, k=rnd.randint(8, 30))).capitalize() + "."
        for _ in range(size)
    ]


def _write_workspace(root: Path, bullets: list[str]) -> None:
    (root / "memory").mkdir(parents=True)
    per_file = -(-len(bullets) // FILES)
    now = time.time()
    for day in range(FILES):
        part = bullets[day * per_file : (day + 1) * per_file]
        month, dom = divmod(day, 28)
        lines = [f"## Memory Flush — 2026-{month % 12 + 1:02d}-{dom + 1:02d}T10:00:00Z · session s"]
        lines += [f"- {text}" for text in part]
        name = f"memory/{2000 + day // 336}-{month % 12 + 1:02d}-{dom + 1:02d}.md"
        (root / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        # A year of logs, each last written on its own day, the newest an hour ago.
        written = now - 3_600 - (FILES - 1 - day) * 86_400
        os.utime(root / name, (written, written))
    os.utime(root / "memory", (now - 3_600, now - 3_600))


def _raw_build(path: Path, bullets: list[str]) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, tokenize='{TOKENIZER}')")
    with db:
        db.executemany("INSERT INTO t(content) VALUES (?)", ((f"- {b}",) for b in bullets))
    return db


def _placed_rows(bullets: list[str]) -> list[tuple[int, str, int, int, str, str, str]]:
    """(id, path, start, end, text, heading, date) of each bullet as _write_workspace lays it."""
    per_file = -(-len(bullets) // FILES)
    rows = []
    for n, text in enumerate(bullets):
        day, line = divmod(n, per_file)
        month, dom = divmod(day, 28)
        date = f"{2000 + day // 336}-{month % 12 + 1:02d}-{dom + 1:02d}"
        rows.append((n, f"memory/{date}.md", line + 2, line + 2, f"- {text}", "", date))
    return rows


def _raw_build_placed(
    path: Path, rows: list[tuple[int, str, int, int, str, str, str]], *, before: bool = False
) -> sqlite3.Connection:
    """Raw sqlite3 keeping what a hit shows: the rows, and contentless FTS5 over them;
    with ``before``, the FTS5 table also indexes the entry before each one in its file (the
    text the harness ranks by beside the entry's own, see bench_index's module doc)."""
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE entries(id INTEGER PRIMARY KEY, path TEXT, start_line INTEGER, "
        "end_line INTEGER, content TEXT, context TEXT, date TEXT)"
    )
    columns = "content, context, before" if before else "content, context"
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5({columns}, content='', tokenize='{TOKENIZER}')")
    with db:
        db.executemany("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        if before:
            db.executemany(
                "INSERT INTO t(rowid, content, context, before) VALUES (?, ?, ?, ?)",
                (
                    (row[0], row[4], row[5], prior[4] if prior and prior[1] == row[1] else "")
                    for prior, row in zip([None, *rows], rows, strict=False)
                ),
            )
        else:
            db.executemany(
                "INSERT INTO t(rowid, content, context) VALUES (?, ?, ?)",
                ((row[0], row[4], row[5]) for row in rows),
            )
    return db


def _queries(words: list[str], weights: list[int], *, content_only: bool) -> list[str]:
    from harnessmem.backends._fts import STOP_WORDS

    rnd = random.Random(2)
    if content_only:
        kept = [(w, c) for w, c in zip(words, weights, strict=True) if w not in STOP_WORDS]
        words, weights = [w for w, _ in kept], [c for _, c in kept]
    return [" ".join(rnd.choices(words, weights, k=rnd.randint(2, 5))) for _ in range(QUERIES)]


def _raw_search(db: sqlite3.Connection, query: str) -> list[tuple[int, str]]:
    terms = dict.fromkeys(re.findall(r"\w+", query.lower()))
    expression = " OR ".join(f'"{t}"' for t in terms)
    return db.execute(
        "SELECT rowid, content FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (expression,)
    ).fetchall()


def _ranking_statements(index: Path) -> tuple[sqlite3.Connection, Any, Any]:
    """The sqlite backend's ranking statement on its index file at ``index``, and the same
    without the entry before's share: each a function of a query (see the module doc)."""
    from harnessmem.backends._fts import fts5_expression, parse_query
    from harnessmem.backends.sqlite._schema import workspace_range
    from harnessmem.backends.sqlite._search import _WEIGHTS, _matched, _ranked_expression

    db = sqlite3.connect(index)
    (number,) = db.execute("SELECT workspace_no FROM workspaces").fetchone()
    low, high = workspace_range(number)
    sql = (
        f"SELECT rowid, bm25(memory_fts, {_WEIGHTS}) AS s FROM memory_fts "
        "WHERE memory_fts MATCH ? AND rowid BETWEEN ? AND ? ORDER BY s LIMIT 50"
    )

    def ranked(query: str) -> None:
        expression = _ranked_expression(parse_query(query), "any")
        db.execute(sql, (expression, low, high)).fetchall()

    def without_before(query: str) -> None:
        expression = _matched(fts5_expression(parse_query(query), "any"))
        db.execute(sql, (expression, low, high)).fetchall()

    return db, ranked, without_before


def run(quick: bool) -> list[Row]:
    """Build and search rows at two corpus sizes."""
    import sqlalchemy  # noqa: F401  (imported once per process, not part of a build)

    from harnessmem import MemoryHarness

    words, weights = _vocabulary()
    sizes = (5_000, 20_000) if quick else (20_000, 100_000)
    repeat = 1 if quick else 3
    builds = 3 if quick else 5  # the first build in a process also imports modules
    rows: list[Row] = []
    for size in sizes:
        bullets = _corpus(size, words, weights)
        with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
            root = Path(tmp) / "ws"
            _write_workspace(root, bullets)
            raw_path = Path(tmp) / "raw.db"
            placed_path = Path(tmp) / "placed.db"
            placed = _placed_rows(bullets)
            before_path = Path(tmp) / "before.db"
            ours_build, raw_build, placed_build, before_build = [], [], [], []
            for _ in range(builds):
                for suffix in ("", "-wal", "-shm", "-journal"):
                    Path(f"{tmp}/memory_index.db{suffix}").unlink(missing_ok=True)
                    Path(f"{raw_path}{suffix}").unlink(missing_ok=True)
                    Path(f"{placed_path}{suffix}").unlink(missing_ok=True)
                    Path(f"{before_path}{suffix}").unlink(missing_ok=True)
                started = time.perf_counter()
                _raw_build(raw_path, bullets).close()
                raw_build.append(time.perf_counter() - started)
                started = time.perf_counter()
                _raw_build_placed(placed_path, placed).close()
                placed_build.append(time.perf_counter() - started)
                started = time.perf_counter()
                _raw_build_placed(before_path, placed, before=True).close()
                before_build.append(time.perf_counter() - started)
                with MemoryHarness.open(
                    root, maintenance={"enabled": False}, plugins={"autoload": False}
                ) as harness:
                    started = time.perf_counter()
                    result = harness.reindex()
                    ours_build.append(time.perf_counter() - started)
            entries = result.entries
            rows.append(
                Row(
                    bench="index",
                    name=f"build, {size:,} entries",
                    value=statistics.median(ours_build),
                    unit="s",
                    baseline="raw sqlite3 FTS5 inserts",
                    baseline_value=statistics.median(raw_build),
                    notes=f"{FILES} daily logs, {entries} entries; reindex from no database, "
                    "which also keeps each entry's path, lines, date and headings (the raw "
                    f"table: the text only); same tokenizer; median of {builds}",
                )
            )
            for keeping, baseline, builds_of_raw, notes in (
                (
                    "lines too",
                    "raw sqlite3 rows + contentless FTS5",
                    placed_build,
                    "the raw side also stores path, lines, date and heading per entry",
                ),
                (
                    "lines and the entry before",
                    "raw sqlite3 rows + contentless FTS5 with the entry before",
                    before_build,
                    "as above, and the FTS5 table also indexes each entry's predecessor "
                    "in its file, as the harness's does (it ranks by it)",
                ),
            ):
                rows.append(
                    Row(
                        bench="index",
                        name=f"build, {size:,} entries, raw keeping {keeping}",
                        value=statistics.median(ours_build),
                        unit="s",
                        baseline=baseline,
                        baseline_value=statistics.median(builds_of_raw),
                        notes=notes,
                    )
                )
            db = sqlite3.connect(raw_path)
            with MemoryHarness.open(
                root, maintenance={"enabled": False}, plugins={"autoload": False}
            ) as harness:
                harness.reindex()
                for label, content_only in (("natural", False), ("content words", True)):
                    queries = _queries(words, weights, content_only=content_only)
                    for query in queries[:20]:  # warm both page caches
                        harness.search(query, limit=10)
                        _raw_search(db, query)
                    ours, raw = interleaved_times(
                        lambda q: harness.search(q, limit=10),
                        lambda q, db=db: _raw_search(db, q),
                        queries,
                        repeat,
                    )
                    rows += search_rows(
                        "index",
                        f"{label} queries, {size:,} entries",
                        ours,
                        raw,
                        baseline="raw sqlite3 FTS5, terms OR-ed, bm25",
                        notes=f"{QUERIES} queries of 2-5 words, {repeat} rounds, "
                        f"interleaved; change check of {FILES} files included",
                    )
                queries = _queries(words, weights, content_only=True)
                ranking_db, ranked, without_before = _ranking_statements(
                    Path(tmp) / "memory_index.db"
                )
                for label, statement in (
                    ("ranking statement alone", ranked),
                    ("ranking without the entry before", without_before),
                ):
                    ours, raw = interleaved_times(
                        statement, lambda q, db=db: _raw_search(db, q), queries, repeat
                    )
                    rows += search_rows(
                        "index",
                        f"content words, {label}, {size:,} entries",
                        ours,
                        raw,
                        baseline="raw sqlite3 FTS5, terms OR-ed, bm25",
                        notes="the backend's first statement on its own index file "
                        "(see the module doc); the same queries and rounds",
                    )
                ranking_db.close()
            db.close()
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
