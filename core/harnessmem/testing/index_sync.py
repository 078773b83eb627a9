"""The keeping-in-step tests of the index suite: syncing a changed file, removing one, and
what ``files()``, ``stats()`` and ``clear()`` report."""

from __future__ import annotations

from typing import ClassVar

from harnessmem.backends.base import IndexBackend
from harnessmem.index import chunk_markdown, content_hash
from harnessmem.testing._index_base import IndexSuiteBase
from harnessmem.testing.index_texts import MEMORY, hit_paths, sync_text

__all__ = ["IndexSyncTests"]


class IndexSyncTests(IndexSuiteBase):
    """Keeping the index in step with the files it mirrors."""

    __harnessmem_suite__: ClassVar[bool] = True

    # keeping in step ------------------------------------------------------------------------

    def test_sync_is_skipped_at_the_same_hash(self, index: IndexBackend) -> None:
        """The same content hash is a no-op (False) and never duplicates entries.

        If this fails, compare the stored content hash before replacing entries.
        """
        assert sync_text(index, "MEMORY.md", MEMORY, token="t1") is True
        assert sync_text(index, "MEMORY.md", MEMORY, token="t2") is False
        assert len(index.search("Alice")) == 1
        assert index.stats().entries == len(chunk_markdown("MEMORY.md", MEMORY))
        assert index.files()["MEMORY.md"].change_token == "t2", "the token must be updated"

    def test_changed_file_replaces_its_entries(self, index: IndexBackend) -> None:
        """New content replaces the old: old words vanish, new ones appear, lines move.

        If this fails, check that sync_file deletes the entries it no longer receives
        and updates line numbers of the ones that moved.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        changed = MEMORY.replace("- Bob runs the Berlin office.", "- Carol runs the Lisbon office.")
        changed = "Intro line one.\n\n" + changed
        sync_text(index, "MEMORY.md", changed)
        assert index.search("Berlin") == []
        (hit,) = index.search("Lisbon")
        assert changed.splitlines()[hit.start_line - 1] == "- Carol runs the Lisbon office."
        (moved,) = index.search("kaiseki")
        assert (moved.start_line, moved.end_line) == (7, 8)
        assert index.stats().entries == len(chunk_markdown("MEMORY.md", changed))

    def test_append_keeps_earlier_entries(self, index: IndexBackend) -> None:
        """Appending bullets to a log adds them and keeps the earlier ones found.

        If this fails, check the replacement of a file's entries when most are unchanged.
        """
        text = "## Memory Flush\n- first fact about otters\n"
        sync_text(index, "memory/2026-03-01.md", text)
        text += "- second fact about beavers\n"
        sync_text(index, "memory/2026-03-01.md", text)
        assert [h.start_line for h in index.search("otters")] == [2]
        assert [h.start_line for h in index.search("beavers")] == [3]
        assert index.stats().entries == 2

    def test_other_files_are_left_alone(self, index: IndexBackend) -> None:
        """Syncing or removing one file never touches another's entries.

        If this fails, deletes are not restricted to the path being synced.
        """
        sync_text(index, "memory/2026-01-01.md", "- walrus in January\n")
        sync_text(index, "memory/2026-01-02.md", "- walrus in February\n")
        sync_text(index, "memory/2026-01-02.md", "- no more marine mammals\n")
        assert hit_paths(index.search("walrus")) == ["memory/2026-01-01.md"]
        index.remove("memory/2026-01-02.md")
        assert hit_paths(index.search("walrus")) == ["memory/2026-01-01.md"]

    def test_remove_forgets_a_file(self, index: IndexBackend) -> None:
        """remove drops a file's entries and its record; a second remove returns False.

        If this fails, check that remove deletes entries, full-text rows and the file row.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        assert index.remove("MEMORY.md") is True
        assert index.search("Alice") == []
        assert "MEMORY.md" not in index.files()
        assert index.remove("MEMORY.md") is False
        assert index.stats().entries == 0

    def test_files_and_stats_describe_the_index(self, index: IndexBackend) -> None:
        """files() gives source, hash, token and entry count; stats() counts it all.

        If this fails, check what sync_file records per file.
        """
        sync_text(index, "MEMORY.md", MEMORY, token="tok")
        sync_text(
            index, "sessions/s.log.jsonl", '{"role": "user", "content": "hi"}\n', source="sessions"
        )
        files = index.files()
        assert set(files) == {"MEMORY.md", "sessions/s.log.jsonl"}
        memory = files["MEMORY.md"]
        assert memory.source == "memory"
        assert memory.content_hash == content_hash(MEMORY.encode())
        assert memory.change_token == "tok"
        assert memory.entries == len(chunk_markdown("MEMORY.md", MEMORY))
        assert files["sessions/s.log.jsonl"].source == "sessions"
        stats = index.stats()
        assert stats.files == 2
        assert stats.entries == memory.entries + 1

    def test_clear_empties_the_index(self, index: IndexBackend) -> None:
        """clear() forgets every file.

        If this fails, check that clear removes entries and file records of every source.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        sync_text(
            index, "sessions/s.log.jsonl", '{"role": "user", "content": "hi"}\n', source="sessions"
        )
        index.clear()
        assert index.files() == {}
        assert index.stats().entries == 0
        assert index.search("Alice") == []
