"""The isolation tests of the index suite: two workspaces on one store never see, remove,
clear or count each other's entries, not even after the store rebuilt itself."""

from __future__ import annotations

from typing import ClassVar

import pytest

from harnessmem.backends.base import IndexBackend, SearchMode
from harnessmem.testing._index_base import IndexSuiteBase
from harnessmem.testing.index_texts import ALICE, BOB, OTHER_WORKSPACE, hit_paths, sync_text

__all__ = ["ISOLATION_TESTS", "IndexIsolationTests"]

_SCORED_MODES: tuple[SearchMode, ...] = ("any", "all")

#: The names of the isolation tests (a test that a leaky backend fails runs each).
ISOLATION_TESTS = (
    "test_workspaces_search_only_their_own_entries",
    "test_workspaces_keep_their_own_files_at_the_same_path_and_hash",
    "test_remove_in_one_workspace_leaves_the_other",
    "test_clear_of_one_workspace_leaves_the_other",
    "test_stats_count_one_workspace",
    "test_a_self_rebuild_keeps_workspaces_apart",
)


class IndexIsolationTests(IndexSuiteBase):
    """Workspaces kept apart on a shared store."""

    __harnessmem_suite__: ClassVar[bool] = True

    def other_workspace(self, index: IndexBackend) -> IndexBackend:
        """A second workspace on the store of ``index`` (closed by the test)."""
        return index.scoped(OTHER_WORKSPACE)

    def damage(self, index: IndexBackend) -> None:
        """Override: damage the store of ``index`` so that the backend rebuilds it itself.

        The default skips the self-rebuild test (a backend without a store to damage).
        """
        pytest.skip(f"{type(self).__name__} does not override damage()")

    # isolation ------------------------------------------------------------------------------

    def _two_workspaces(self, index: IndexBackend) -> IndexBackend:
        other = self.other_workspace(index)
        assert other.workspace_id == OTHER_WORKSPACE
        assert other.workspace_id != index.workspace_id
        sync_text(index, "MEMORY.md", ALICE, token="a")
        sync_text(other, "MEMORY.md", BOB, token="b")
        log = '{"role": "user", "content": "where is the staging server"}\n'
        sync_text(index, "sessions/alice.log.jsonl", log, source="sessions")
        sync_text(index, "memory/2026-01-01.md", "- Alice only: the zebra code\n")
        sync_text(other, "memory/2026-01-02.md", "- Bob only: the walrus code\n")
        return other

    def test_workspaces_search_only_their_own_entries(self, index: IndexBackend) -> None:
        """Two workspaces on one store: each search finds only its own workspace's entries.

        If this fails, every row must carry the workspace (``self.workspace_id``) and
        every search must filter on it, the path-prefix and session searches too.
        """
        other = self._two_workspaces(index)
        try:
            for query in ("staging password hint", "parks", "code", "zebra walrus"):
                for mode in _SCORED_MODES:
                    mine = index.search(query, limit=50, mode=mode)
                    theirs = other.search(query, limit=50, mode=mode)
                    assert all("Bob" not in hit.content for hit in mine), (query, mode)
                    assert all("Alice" not in hit.content for hit in theirs), (query, mode)
            assert [h.content for h in index.search("walrus")] == []
            assert [h.content for h in other.search("zebra")] == []
            assert len(index.search("lighthouse")) == 1
            assert other.search("lighthouse") == []
            assert other.search("staging", source="sessions") == []
            prefix = "sessions/alice."
            assert other.search("staging", source="sessions", path_prefix=prefix) == []
            assert len(index.search("staging", source="sessions", path_prefix=prefix)) == 1
            assert other.search("code", path_prefix="memory/") != []
            assert all("Bob" in h.content for h in other.search("code", path_prefix="memory/"))
        finally:
            other.close()

    def test_workspaces_keep_their_own_files_at_the_same_path_and_hash(
        self, index: IndexBackend
    ) -> None:
        """The same path (even at the same content hash) is a separate file in each workspace.

        If this fails, files are keyed by path alone: key them by (workspace, path), and
        compare a stored hash only with the same workspace's.
        """
        other = self._two_workspaces(index)
        try:
            assert set(index.files()) == {
                "MEMORY.md",
                "memory/2026-01-01.md",
                "sessions/alice.log.jsonl",
            }
            assert set(other.files()) == {"MEMORY.md", "memory/2026-01-02.md"}
            assert index.files()["MEMORY.md"].change_token == "a"
            assert other.files()["MEMORY.md"].change_token == "b"
            shared = "- A fact both workspaces hold: the moon is far.\n"
            assert sync_text(index, "memory/shared.md", shared) is True
            assert sync_text(other, "memory/shared.md", shared) is True, (
                "the other workspace does not hold the file yet"
            )
            assert hit_paths(other.search("moon")) == ["memory/shared.md"]
            index.remove("memory/shared.md")
            assert hit_paths(other.search("moon")) == ["memory/shared.md"]
            assert index.search("moon") == []
        finally:
            other.close()

    def test_remove_in_one_workspace_leaves_the_other(self, index: IndexBackend) -> None:
        """remove() of a path drops it from its workspace only.

        If this fails, deletes are keyed by path alone: add the workspace to the WHERE.
        """
        other = self._two_workspaces(index)
        try:
            assert index.remove("MEMORY.md") is True
            assert index.remove("memory/2026-01-02.md") is False, "a path of the other one"
            assert hit_paths(other.search("harbour")) == ["MEMORY.md"]
            assert "memory/2026-01-02.md" in other.files()
            assert other.remove("MEMORY.md") is True
            assert index.remove("MEMORY.md") is False
            assert hit_paths(index.search("zebra")) == ["memory/2026-01-01.md"]
        finally:
            other.close()

    def test_clear_of_one_workspace_leaves_the_other(self, index: IndexBackend) -> None:
        """clear() (the start of a full reindex) forgets one workspace's files, no more.

        If this fails, clear() empties the whole store: delete only this workspace's rows.
        """
        other = self._two_workspaces(index)
        try:
            before = other.files()
            other_entries = other.stats().entries
            index.clear()
            assert index.files() == {}
            assert index.search("lighthouse") == []
            assert other.files() == before
            assert other.stats().entries == other_entries
            assert hit_paths(other.search("walrus")) == ["memory/2026-01-02.md"]
            sync_text(index, "MEMORY.md", ALICE)
            other.clear()
            assert hit_paths(index.search("lighthouse")) == ["MEMORY.md"]
        finally:
            other.close()

    def test_stats_count_one_workspace(self, index: IndexBackend) -> None:
        """stats() counts the files and entries of its own workspace only.

        If this fails, the counts are of the whole store: filter them by workspace.
        """
        other = self._two_workspaces(index)
        try:
            mine, theirs = index.stats(), other.stats()
            assert mine.files == 3
            assert theirs.files == 2
            assert mine.entries == sum(f.entries for f in index.files().values())
            assert theirs.entries == sum(f.entries for f in other.files().values())
        finally:
            other.close()

    def test_a_self_rebuild_keeps_workspaces_apart(self, index: IndexBackend) -> None:
        """After the store rebuilt itself, every workspace learns it and none sees another's.

        A rebuild may lose every workspace's rows (they are derived data), but then each
        workspace's ``resets`` grows, so its harness hands every file again. If this fails,
        make the rebuild count a reset on every instance of the store, and check that the
        rebuilt store keys its rows by workspace as the first one did.
        """
        other = self._two_workspaces(index)
        try:
            resets = index.resets, other.resets
            self.damage(index)
            index.search("lighthouse")  # finds the damage and rebuilds
            assert index.resets > resets[0]
            found = hit_paths(other.search("walrus"))
            if other.resets == resets[1]:  # no reset counted: its rows must still be there
                assert found == ["memory/2026-01-02.md"]
            sync_text(index, "MEMORY.md", ALICE)
            sync_text(other, "MEMORY.md", BOB)
            assert all("Bob" not in h.content for h in index.search("parks staging", limit=50))
            assert all("Alice" not in h.content for h in other.search("parks staging", limit=50))
        finally:
            other.close()

    def test_a_scoped_instance_closes_alone(self, index: IndexBackend) -> None:
        """Closing a scoped instance leaves the store open for the others.

        If this fails, scoped() instances close the shared connections: only the
        instance the others came from may close them.
        """
        other = self._two_workspaces(index)
        other.close()
        other.close()
        assert hit_paths(index.search("zebra")) == ["memory/2026-01-01.md"]
        again = self.other_workspace(index)
        try:
            assert hit_paths(again.search("walrus")) == ["memory/2026-01-02.md"]
        finally:
            again.close()
