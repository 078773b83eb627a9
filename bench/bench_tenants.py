"""Many tenants in one index: one tenant's search against the same search in an index of its own.

Corpus: 1,000 tenants (100 in a quick run) with 50 bullets each, drawn from the word
frequencies of the LoCoMo conversations as ``bench/bench_index.py`` draws them (a fixed
seed), five daily logs of ten bullets per tenant, all in one SQLite index file: every
tenant's entries hold the same common words, so a query matches entries of every tenant
and the index must skip the others' (its rowid range per workspace) rather than rank them.

- *search, one tenant of 1,000 in one index*: ``IndexBackend.search(query, 10)`` of one
  tenant's scoped instance, against the same search of an index file that holds only that
  tenant's 50 entries; the two alternate query by query (200 content-word queries of 2-5
  words, three rounds; 50 and one round in a quick run). The goal (issue 19) is 1.5x.
- *harness search*: the same tenant through ``HarnessPool.harness(tenant).search`` (which
  also checks the tenant's files for changes first) against ``MemoryHarness.open`` on a copy
  of its workspace with an index of its own.
- *pool memory*: Python heap (``tracemalloc``) per open harness in a ``HarnessPool`` of N
  open tenants (maintenance on: one shared thread, one shared index) against N harnesses
  opened one by one (each with its own index connections and maintenance thread); thread
  counts in the notes.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from bench._util import Row, interleaved_times, search_rows
from bench.bench_index import _corpus, _queries, _vocabulary
from harnessmem import HarnessPool, MemoryHarness
from harnessmem.backends.base import FileUpdate
from harnessmem.backends.sqlite import SQLiteIndex
from harnessmem.index import chunk_markdown, content_hash

PER_TENANT = 50
LOGS = 5
OPTIONS = {"plugins": {"autoload": False}}


def _logs(bullets: list[str]) -> dict[str, str]:
    """A tenant's daily logs: ``LOGS`` files of its bullets under a flush heading."""
    per = len(bullets) // LOGS
    return {
        f"memory/2026-03-{day + 1:02d}.md": f"## Memory Flush — 2026-03-{day + 1:02d}T10:00:00Z "
        "· session s\n" + "".join(f"- {b}\n" for b in bullets[day * per : (day + 1) * per])
        for day in range(LOGS)
    }


def _updates(files: dict[str, str]) -> list[FileUpdate]:
    return [
        FileUpdate(path, content_hash(text.encode()), chunk_markdown(path, text))
        for path, text in files.items()
    ]


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def _search_rows(quick: bool, scratch: Path) -> list[Row]:
    tenants = 100 if quick else 1_000
    words, weights = _vocabulary()
    bullets = _corpus(tenants * PER_TENANT, words, weights)
    queries = _queries(words, weights, content_only=True)[: 50 if quick else 200]
    rounds = 1 if quick else 3
    agents = scratch / "agents"
    measured = tenants // 2
    name = f"tenant-{measured:04d}"
    files = {n: _logs(bullets[n * PER_TENANT : (n + 1) * PER_TENANT]) for n in range(tenants)}
    _write(agents / name, files[measured])
    key = (agents / name).resolve().as_uri()

    shared = SQLiteIndex.create({}, index_path=agents / "memory_index.db")
    alone = SQLiteIndex.create({}, index_path=scratch / "alone" / "memory_index.db")
    rows: list[Row] = []
    try:
        for n in range(tenants):
            tenant_key = key if n == measured else (agents / f"tenant-{n:04d}").resolve().as_uri()
            view = shared.scoped(tenant_key)
            view.sync_files(_updates(files[n]))
            view.close()
        mine = shared.scoped(key)
        alone_view = alone.scoped(key)
        alone_view.sync_files(_updates(files[measured]))
        assert mine.stats().entries == alone_view.stats().entries == PER_TENANT
        for query in queries:  # the same entries match on both sides (bm25's corpus figures
            # are the file's, so scores and the order among them may differ)
            found = {(h.path, h.start_line) for h in mine.search(query, PER_TENANT)}
            assert found == {(h.path, h.start_line) for h in alone_view.search(query, 50)}
        rows += _compare(
            (mine.search, alone_view.search),
            (queries, rounds),
            f"one tenant of {tenants:,} in one index ({tenants * PER_TENANT:,} entries)",
            "the same search, index of that tenant alone",
            f"{len(queries)} content-word queries x {rounds}; goal 1.5x (issue 19)",
        )
    finally:
        shared.close()
        alone.close()

    # The same through the harness: a pool on the shared file, a harness on a copy alone.
    copy = scratch / "copy" / name
    shutil.copytree(agents / name, copy)
    opened = {"maintenance": {"enabled": False}, **OPTIONS}
    with (
        HarnessPool(str(agents / "{tenant}"), max_open=4, **opened) as pool,
        MemoryHarness.open(
            copy, workspace={"index_path": str(scratch / "copy.db")}, **opened
        ) as single,
    ):
        pooled = pool.harness(name)
        assert pooled.reindex().indexed == 0, "the pool finds the tenant's files indexed"
        single.reindex()
        rows += _compare(
            (pooled.search, single.search),
            (queries, rounds),
            f"harness, one tenant of {tenants:,} (HarnessPool)",
            "MemoryHarness on the same files, index of its own",
            "includes the check of the tenant's files for changes before each search",
        )
    return rows


def _compare(
    searches: tuple[Callable[..., object], Callable[..., object]],
    plan: tuple[list[str], int],
    what: str,
    baseline: str,
    notes: str,
) -> list[Row]:
    """p50 and p95 rows of ``searches[0]`` against ``searches[1]``, query by query in turn."""
    ours, raw = searches
    queries, rounds = plan
    times = interleaved_times(lambda q: ours(q, 10), lambda q: raw(q, 10), queries, rounds)
    return search_rows("tenants", what, *times, baseline=baseline, notes=notes)


def _heap(open_many: Callable[[], list[MemoryHarness]]) -> tuple[int, int]:
    """(traced heap bytes, threads added) by ``open_many()``; then closes what it returned."""
    threads = threading.active_count()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        keep = open_many()
        after = tracemalloc.get_traced_memory()[0]
        grown = threading.active_count() - threads
    finally:
        tracemalloc.stop()
    for harness in keep:
        harness.close()
    return after - before, grown


def _memory_rows(quick: bool, scratch: Path) -> list[Row]:
    count = 20 if quick else 100
    names = [f"m{n:03d}" for n in range(count)]
    settings = {"maintenance": {"enabled": True}, **OPTIONS}
    with HarnessPool(str(scratch / "mem-pool" / "{tenant}"), max_open=count, **settings) as pool:
        pool.harness("warm").search("warm")  # imports, the shared index, the runner thread

        def in_pool() -> list[MemoryHarness]:
            opened = [pool.harness(n) for n in names]
            for harness in opened:
                harness.search("anything")  # builds its index instance and sync state
            return []  # the pool closes them

        pooled, pool_threads = _heap(in_pool)

    def alone() -> list[MemoryHarness]:
        opened = [MemoryHarness.open(scratch / "mem-alone" / n, **settings) for n in names]
        for harness in opened:
            harness.search("anything")
        return opened

    MemoryHarness.open(scratch / "mem-alone" / "warm", **settings).close()
    single, single_threads = _heap(alone)
    return [
        Row(
            bench="tenants",
            name=f"heap per open harness, HarnessPool of {count}",
            value=pooled / count,
            unit="bytes",
            baseline=f"{count} harnesses opened one by one",
            baseline_value=single / count,
            notes=f"threads the {count} added: {pool_threads} in the pool (its one maintenance "
            f"thread ran already), {single_threads} one by one; Python objects only",
        )
    ]


def run(quick: bool) -> list[Row]:
    """The search ratio at 1,000 tenants (100 in a quick run) and the pool's memory."""
    with tempfile.TemporaryDirectory(prefix="bench-tenants-") as tmp:
        scratch = Path(tmp)
        return _search_rows(quick, scratch) + _memory_rows(quick, scratch)
