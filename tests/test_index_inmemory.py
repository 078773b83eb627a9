"""The in-memory reference index backend meets the contract, and the harness runs on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessmem import MemoryHarness
from harnessmem.backends.base import FileUpdate, IndexBackend
from harnessmem.backends.inmemory import InMemoryIndex
from harnessmem.errors import ConfigError
from harnessmem.testing import IndexBackendSuite


class TestInMemoryIndexConformance(IndexBackendSuite):
    @pytest.fixture
    def index(self) -> Iterator[IndexBackend]:
        backend = InMemoryIndex.create({})
        yield backend
        backend.close()


def test_a_harness_searches_memory_through_it(tmp_path: Path) -> None:
    with MemoryHarness.open(tmp_path / "ws", index={"backend": "inmemory"}) as harness:
        harness.workspace.write_text("MEMORY.md", "# Memory\n\n- Staging listens on port 5433.\n")
        hits = harness.search("staging port")
        assert [(hit.path, hit.start_line) for hit in hits] == [("MEMORY.md", 3)]
        assert type(harness.kernel.index).__name__ == "InMemoryIndex"


def test_it_knows_no_options() -> None:
    with pytest.raises(ConfigError, match=r"index\.options\.path"):
        InMemoryIndex.create({"path": "x"})


def test_an_index_backend_without_a_sync_method_is_refused_when_built() -> None:
    class Empty(InMemoryIndex):
        pass

    class Bare(IndexBackend):
        def files(self):  # type: ignore[no-untyped-def]
            return {}

        def remove(self, path):  # type: ignore[no-untyped-def]
            return False

        def _search(self, request):  # type: ignore[no-untyped-def]
            return []

        def stats(self):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    Empty(InMemoryIndex.Options())  # inherits _sync_files
    with pytest.raises(TypeError, match=r"Bare without a _sync_files method"):
        Bare(IndexBackend.Options())


def test_a_backend_that_implements_sync_file_still_syncs_batches() -> None:
    """A backend written before ``_sync_files`` gets ``sync_files`` through its ``sync_file``."""
    seen: list[tuple[str, str]] = []

    class OldStyle(InMemoryIndex):
        def sync_file(self, path, content_hash, entries, *, source="memory", change_token=None):  # type: ignore[no-untyped-def]
            seen.append((path, source))
            return True

    index = OldStyle(InMemoryIndex.Options())
    assert index.sync_files([FileUpdate("a.md", "h", []), FileUpdate("b.md", "h", [], "sessions")])
    assert seen == [("a.md", "memory"), ("b.md", "sessions")]
