"""The hybrid plugin (``harnessmem-vectors``) against the default index and raw FTS5.

Corpus, workspace and queries are bench_index's (bullets drawn from the LoCoMo word
frequencies over 365 daily logs; *natural* queries of 2-5 words). In one run, per size:

- *build*: ``harness.reindex()`` with the ``vectors`` backend (its default options: the
  local all-MiniLM-L6-v2 embedder, a fresh vector file) against the default ``sqlite``
  backend, per 1,000 entries; the embedding time (the model's runs over every new text) is
  shown apart, as its own row.
- *search*: ``harness.search(query, limit=10)`` on the two harnesses and the raw FTS5
  table, each query run by the three in turn (one round in a quick run, three in a full
  one): p50 and p95 of the plugin against the default, and against raw FTS5.
- *first search after a write*: rounds of one bullet (drawn like the corpus's) appended
  to the newest daily log through the workspace, then ``harness.search(query, limit=10)``
  (which indexes the changed file first: its text, the new bullet's vector, the matrix and
  the word shares brought up to date), each round followed by a search without a write;
  p50 of the one against the other, on the harness of the search rows; and with the
  static embedder at the size of the issue (100,000 entries; 20,000 in a quick run), on a
  build of its own.

Sizes: the local model embeds about 70-200 entries a second on two cores, so its rows use
5,000 and 20,000 entries in a full run (2,000 and 5,000 in a quick one); a 100,000-entry
build would take most of an hour there.

Skipped, saying why, when the plugin or its weights package is not installed.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench._util import Row, percentile
from bench.bench_index import (
    QUERIES,
    _corpus,
    _queries,
    _raw_build,
    _raw_search,
    _vocabulary,
    _write_workspace,
)

if TYPE_CHECKING:
    from harnessmem import MemoryHarness

#: Write-then-search rounds of the *first search after a write* rows.
WRITE_ROUNDS = 30


def _write_rows(harness: MemoryHarness, root: Path, size: int, label: str, notes: str) -> list[Row]:
    """The *first search after a write* row of ``harness`` (its index warm)."""
    import random

    words, weights = _vocabulary()
    queries = _queries(words, weights, content_only=False)
    rnd = random.Random(3)
    newest = max((root / "memory").iterdir(), key=lambda p: p.stat().st_mtime)
    log = f"memory/{newest.name}"
    search, workspace = harness.search, harness.workspace
    after: list[float] = []
    plain: list[float] = []
    for n in range(WRITE_ROUNDS):
        bullet = " ".join(rnd.choices(words, weights, k=rnd.randint(8, 30))).capitalize()
        workspace.append_text(log, f"- {bullet}.\n")
        begun = time.perf_counter()
        search(queries[2 * n], limit=10)
        after.append(time.perf_counter() - begun)
        begun = time.perf_counter()
        search(queries[2 * n + 1], limit=10)
        plain.append(time.perf_counter() - begun)
    print(
        f"   {size:,}{label}: first search after a write p50 "
        f"{statistics.median(after) * 1e3:.1f} ms, without a write "
        f"{statistics.median(plain) * 1e3:.1f} ms"
    )
    return [
        Row(
            bench="vectors",
            name=f"first search after a write, {size:,} entries{label}",
            value=percentile(after, 0.5),
            unit="s",
            baseline="search without a write, same run",
            baseline_value=percentile(plain, 0.5),
            notes=f"{WRITE_ROUNDS} rounds: one bullet appended to the newest daily log, "
            f"then a search (indexes the change first), then one without a write; {notes}",
        )
    ]


def run(quick: bool) -> list[Row]:
    """Build and search rows at two corpus sizes."""
    try:
        from harnessmem_vectors.minilm import DISTRIBUTION, locate_model
    except ImportError:
        print("bench vectors: skipped, harnessmem-vectors is not installed", file=sys.stderr)
        return []
    if locate_model() is None:
        print(
            f"bench vectors: skipped, the weights package {DISTRIBUTION} is not installed",
            file=sys.stderr,
        )
        return []
    from harnessmem import MemoryHarness

    words, weights = _vocabulary()
    sizes = (2_000, 5_000) if quick else (5_000, 20_000)
    rounds = 1 if quick else 3
    rows: list[Row] = []
    for size in sizes:
        bullets = _corpus(size, words, weights)
        with tempfile.TemporaryDirectory(prefix="bench-vectors-") as tmp:
            root = Path(tmp) / "ws"
            _write_workspace(root, bullets)
            common = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}
            plain = MemoryHarness.open(
                root, workspace={"index_path": str(Path(tmp) / "plain.db")}, **common
            )
            started = time.perf_counter()
            entries = plain.reindex().entries
            plain_build = time.perf_counter() - started
            hybrid = MemoryHarness.open(
                root,
                index={"backend": "vectors"},
                workspace={"index_path": str(Path(tmp) / "hybrid.db")},
                **common,
            )
            store = hybrid.kernel.index.store  # type: ignore[attr-defined]
            embedder = hybrid.kernel.index.embedder  # type: ignore[attr-defined]
            started = time.perf_counter()
            hybrid.reindex()
            hybrid_build = time.perf_counter() - started
            embedding = store.embed_seconds
            per = 1_000 / entries
            notes = (
                f"{entries} entries in 365 daily logs; embedder {embedder.identity}; one build each"
            )
            rows += [
                Row(
                    bench="vectors",
                    name=f"build per 1,000 entries, {size:,} entries",
                    value=hybrid_build * per,
                    unit="s",
                    baseline="default sqlite index, same files",
                    baseline_value=plain_build * per,
                    notes=notes,
                ),
                Row(
                    bench="vectors",
                    name=f"build per 1,000 entries, embedding alone, {size:,} entries",
                    value=embedding * per,
                    unit="s",
                    baseline="the whole build of the vectors index",
                    baseline_value=hybrid_build * per,
                    notes="texts embedded (part of the build)",
                ),
            ]
            raw = _raw_build(Path(tmp) / "raw.db", bullets)
            queries = _queries(words, weights, content_only=False)
            sides = {
                "hybrid": lambda q, h=hybrid: h.search(q, limit=10),
                "default": lambda q, p=plain: p.search(q, limit=10),
                "raw": lambda q, db=raw: _raw_search(db, q),
            }
            for query in queries[:20]:  # warm the page caches and the matrix
                for fn in sides.values():
                    fn(query)
            times: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(rounds):
                for query in queries:
                    for name, fn in sides.items():
                        begun = time.perf_counter()
                        fn(query)
                        times[name].append(time.perf_counter() - begun)
            what = f"natural queries, {size:,} entries"
            notes = f"{QUERIES} queries of 2-5 words, {rounds} rounds, the three sides interleaved"
            for label, q in (("p50", 0.5), ("p95", 0.95)):
                rows.append(
                    Row(
                        bench="vectors",
                        name=f"search {label}, {what}",
                        value=percentile(times["hybrid"], q),
                        unit="s",
                        baseline="default sqlite index, same run",
                        baseline_value=percentile(times["default"], q),
                        notes=notes,
                    )
                )
                rows.append(
                    Row(
                        bench="vectors",
                        name=f"search {label}, {what}, against raw FTS5",
                        value=percentile(times["hybrid"], q),
                        unit="s",
                        baseline="raw sqlite3 FTS5, terms OR-ed, bm25",
                        baseline_value=percentile(times["raw"], q),
                        notes=notes,
                    )
                )
            rows += _write_rows(hybrid, root, size, "", f"embedder {embedder.identity}")
            print(
                f"   {size:,}: build {hybrid_build:.1f} s (embedding {embedding:.1f} s) vs "
                f"default {plain_build:.1f} s; search p50 hybrid "
                f"{statistics.median(times['hybrid']) * 1e3:.2f} ms, default "
                f"{statistics.median(times['default']) * 1e3:.2f} ms, raw "
                f"{statistics.median(times['raw']) * 1e3:.2f} ms"
            )
            raw.close()
            hybrid.close()
            plain.close()
    rows += _static_write_rows(20_000 if quick else 100_000, words, weights)
    return rows


def _static_write_rows(size: int, words: list[str], weights: list[int]) -> list[Row]:
    """The *first search after a write* row with the static embedder, on its own build."""
    from harnessmem import MemoryHarness

    bullets = _corpus(size, words, weights)
    with tempfile.TemporaryDirectory(prefix="bench-vectors-") as tmp:
        root = Path(tmp) / "ws"
        _write_workspace(root, bullets)
        with MemoryHarness.open(
            root,
            index={"backend": "vectors", "options": {"embedder": "static"}},
            workspace={"index_path": str(Path(tmp) / "static.db")},
            maintenance={"enabled": False},
            plugins={"autoload": False},
        ) as harness:
            harness.reindex()
            for query in _queries(words, weights, content_only=False)[-20:]:  # warm
                harness.search(query, limit=10)
            identity = harness.kernel.index.embedder.identity  # type: ignore[attr-defined]
            return _write_rows(
                harness,
                root,
                size,
                ", static embedder",
                f"embedder {identity} (the local model's build at this size takes minutes)",
            )


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
