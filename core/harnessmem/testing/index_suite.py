"""Conformance suite for :class:`harnessmem.backends.base.IndexBackend` implementations.

Subclass :class:`IndexBackendSuite` in a test module (its name must start with ``Test``)
and override one fixture, ``index``, which must yield an empty backend and close it
afterwards::

    class TestMyIndex(IndexBackendSuite):
        @pytest.fixture
        def index(self, tmp_path):
            backend = MyIndex.create({"dsn": ...}, index_path=tmp_path / "index.db")
            yield backend
            backend.close()

Entries are cut by the harness's own chunker (:func:`harnessmem.index.chunk_markdown`),
so the backend sees exactly what it sees in production. Tests of what a backend does
not declare in ``capabilities`` skip with the reason; a second instance on the same
store (for ``persistent``) is built by :meth:`IndexBackendSuite.reopen`, which a subclass
may override.

Isolation: a second workspace on the same store is ``index.scoped(OTHER_WORKSPACE)``
(:meth:`IndexBackendSuite.other_workspace`); the isolation tests sync both and check that
no search, ``files``, ``stats``, ``remove``, ``clear`` or self-rebuild of one reaches the
other's entries. A backend that can damage its own store (the SQLite file, say) overrides
:meth:`IndexBackendSuite.damage` so that the self-rebuild test runs; otherwise it skips.

The tests live by concern: finding in :mod:`~harnessmem.testing.index_search`, keeping in
step in :mod:`~harnessmem.testing.index_sync`, isolation in
:mod:`~harnessmem.testing.index_isolation`, the texts they sync in
:mod:`~harnessmem.testing.index_texts`; this module gathers them and adds the concurrency,
persistence and limits tests.
"""

from __future__ import annotations

import threading
from typing import ClassVar

import pytest

from harnessmem.backends.base import IndexBackend, SearchTimeout
from harnessmem.testing.index_isolation import ISOLATION_TESTS, IndexIsolationTests
from harnessmem.testing.index_search import IndexSearchTests
from harnessmem.testing.index_sync import IndexSyncTests
from harnessmem.testing.index_texts import (
    BOB,
    MEMORY,
    NASTY_QUERIES,
    OTHER_WORKSPACE,
    hit_paths,
    sync_text,
)

__all__ = [
    "ISOLATION_TESTS",
    "MEMORY",
    "NASTY_QUERIES",
    "OTHER_WORKSPACE",
    "IndexBackendSuite",
    "sync_text",
]


class IndexBackendSuite(IndexSearchTests, IndexSyncTests, IndexIsolationTests):
    """The contract every index backend meets; override the ``index`` fixture."""

    __harnessmem_suite__: ClassVar[bool] = True

    def reopen(self, index: IndexBackend) -> IndexBackend:
        """A second instance on the same store, as another process would open it."""
        return type(index).create(index.options, **index.context)

    # concurrency, persistence, limits -------------------------------------------------------

    def test_threads_sync_and_search_at_once(self, index: IndexBackend) -> None:
        """Threads syncing different files while others search: no errors, nothing lost.

        If this fails, check connection handling per thread and write locking.
        """
        self.require(index, "concurrent")
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            try:
                for round_ in range(3):
                    text = "\n".join(f"- thread{n} round{round_} item {i}" for i in range(20))
                    sync_text(index, f"memory/t{n}.md", text)
            except BaseException as exc:
                errors.append(exc)

        def reader() -> None:
            try:
                for _ in range(20):
                    index.search("item round2", limit=5)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        threads += [threading.Thread(target=reader) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        for n in range(4):
            hits = index.search(f"thread{n} round2", limit=50, mode="all")
            assert len(hits) == 20, n
        assert index.stats().entries == 80

    def test_a_second_instance_sees_the_data(self, index: IndexBackend) -> None:
        """Another instance on the same store (another process) finds what one synced.

        If this fails, check that writes are committed, and reopen() in your suite.
        """
        self.require(index, "persistent")
        sync_text(index, "MEMORY.md", MEMORY)
        other = self.reopen(index)
        try:
            assert hit_paths(other.search("Alice")) == ["MEMORY.md"]
            sync_text(other, "memory/2026-04-01.md", "- narwhal sighting\n")
            assert hit_paths(index.search("narwhal")) == ["memory/2026-04-01.md"]
            elsewhere = other.scoped(OTHER_WORKSPACE)
            try:
                assert elsewhere.search("narwhal") == [], "another workspace on a new instance"
                sync_text(elsewhere, "MEMORY.md", BOB)
                assert index.search("harbour") == []
            finally:
                elsewhere.close()
        finally:
            other.close()

    def test_search_stops_at_the_timeout(self, index: IndexBackend) -> None:
        """A search that runs past ``timeout`` raises SearchTimeout; a normal one finishes.

        If this fails, install an interrupt (SQLite: a progress handler) for the query.
        """
        self.require(index, "timeout")
        text = "\n".join(f"- common word number {i} of many" for i in range(3_000))
        sync_text(index, "memory/2026-05-01.md", text)
        assert len(index.search("common word", limit=3, timeout=30.0)) == 3
        with pytest.raises(SearchTimeout):
            index.search("common word many", limit=3, timeout=1e-9)
        assert len(index.search("common", limit=3, timeout=30.0)) == 3, "usable afterwards"

    def test_close_is_idempotent(self, index: IndexBackend) -> None:
        """close() may be called twice.

        If this fails, guard close() against a second call.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        index.close()
        index.close()
