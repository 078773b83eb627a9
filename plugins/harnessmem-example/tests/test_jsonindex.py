"""The template index backend: it passes the conformance suite every backend runs, and a
harness finds it by the name in its entry point."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harnessmem import ConfigError, MemoryHarness
from harnessmem.backends import IndexBackend
from harnessmem.plugins import installed_plugins
from harnessmem.settings import PluginSettings
from harnessmem.testing import IndexBackendSuite
from harnessmem.testing.index_suite import MEMORY, sync_text
from harnessmem_example.jsonindex import JsonFileIndex


class TestJsonFileIndexConformance(IndexBackendSuite):
    """The whole suite: override the one fixture, an empty backend closed afterwards."""

    @pytest.fixture
    def index(self, tmp_path: Path) -> Iterator[IndexBackend]:
        backend = JsonFileIndex.create({}, index_path=tmp_path / "memory_index.db")
        yield backend
        backend.close()


def test_is_installed_through_its_entry_point() -> None:
    rows = {(row.kind, row.name): row for row in installed_plugins(PluginSettings())}
    assert rows["index", "jsonfile"].distribution == "harnessmem-example"
    assert rows["index", "jsonfile"].value == "harnessmem_example.jsonindex:JsonFileIndex"


def test_a_harness_opens_it_by_name_and_its_entries_outlive_the_harness(tmp_path: Path) -> None:
    def open_harness() -> MemoryHarness:
        return MemoryHarness.open(
            tmp_path / "ws",
            index={"backend": "jsonfile"},
            maintenance={"enabled": False},
            config=None,
        )

    with open_harness() as harness:
        assert type(harness.kernel.index) is JsonFileIndex
        harness.save("The staging database listens on port 5433")
        [hit] = harness.search("staging port")
        assert hit.path == "MEMORY.md"
        path = harness.kernel.index.path  # type: ignore[attr-defined]
    assert path.parent == tmp_path, "beside the workspace, where the SQLite file would be"
    reopened = JsonFileIndex.create({}, index_path=tmp_path / "memory_index.db")
    assert "MEMORY.md" not in reopened.files(), "another workspace (no URL) has its own file"
    with open_harness() as harness:
        assert "MEMORY.md" in harness.kernel.index.files(), "read back from the file"


def test_an_unreadable_file_starts_empty_and_counts_a_reset(tmp_path: Path) -> None:
    file = tmp_path / "index.json"
    index = JsonFileIndex.create({"path": str(file)})
    sync_text(index, "MEMORY.md", MEMORY)
    file.write_text("{not json")
    assert index.search("Alice") == []
    assert index.resets == 1
    sync_text(index, "MEMORY.md", MEMORY)
    assert [hit.path for hit in index.search("Alice")] == ["MEMORY.md"]


def test_options_are_checked_with_the_dotted_path() -> None:
    with pytest.raises(ConfigError, match=r"index\.options\.pth: unknown setting") as info:
        JsonFileIndex.create({"pth": "x.json"})
    assert "did you mean 'index.options.path'?" in info.value.message
    with pytest.raises(ConfigError, match=r"index\.options\.path: the jsonfile index needs"):
        JsonFileIndex.create({})
