"""The in-memory reference index backend meets the contract, and the harness runs on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessmem import MemoryHarness
from harnessmem.backends.base import IndexBackend
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
