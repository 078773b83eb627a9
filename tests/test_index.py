"""What gets indexed (chunkers) and how the harness keeps the index in step (IndexSync)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.backends.base import SearchTimeout
from harnessmem.index import (
    MAX_ENTRY_CHARS,
    MAX_STORED_CHARS,
    ReindexResult,
    chunk_markdown,
    chunk_session_log,
    session_log_path,
    source_of,
)
from harnessmem.testing import FakeClock

if TYPE_CHECKING:
    from conftest import WorkspaceTarget

# -- chunkers ---------------------------------------------------------------------------------


def _spans(entries: list[Any]) -> list[tuple[int, int, str]]:
    return [(e.start_line, e.end_line, e.content) for e in entries]


def test_bullets_with_continuations_paragraphs_and_code() -> None:
    text = (
        "- first fact\n"  # 1
        "  continues here\n"  # 2
        "  - nested detail\n"  # 3
        "* star bullet\n"  # 4
        "1. numbered\n"  # 5
        "\n"  # 6
        "A paragraph\n"  # 7
        "over two lines.\n"  # 8
        "\n"  # 9
        "```python\n"  # 10
        "x = 1\n"  # 11
        "\n"  # 12
        "# not a heading\n"  # 13
        "```\n"  # 14
        "---\n"  # 15
        "- after a rule\n"  # 16
    )
    assert _spans(chunk_markdown("MEMORY.md", text)) == [
        (1, 2, "- first fact\n  continues here"),
        (3, 3, "- nested detail"),
        (4, 4, "* star bullet"),
        (5, 5, "1. numbered"),
        (7, 8, "A paragraph\nover two lines."),
        (10, 14, "```python\nx = 1\n\n# not a heading\n```"),
        (16, 16, "- after a rule"),
    ]


def test_headings_give_context_sections_and_dates() -> None:
    text = (
        "# Memory\n"
        "## Travel\n"
        "- aisle seats\n"
        "### Japan\n"
        "- Kyoto in March\n"
        "## Memory Flush — 2026-11-30T10:00:00Z · session chat-1\n"
        "- flushed fact\n"
    )
    entries = chunk_markdown("MEMORY.md", text)
    assert [(e.context, e.date) for e in entries] == [
        ("Memory > Travel", None),
        ("Memory > Travel > Japan", None),
        ("Memory", "2026-11-30"),  # the seed's flush heading: a date, no context words
    ]
    assert len({e.section for e in entries}) == 3
    daily = chunk_markdown("memory/2026-12-01.md", text)
    assert {e.date for e in daily} == {"2026-12-01"}, "a daily log's name gives the date"


def test_long_paragraphs_split_and_huge_lines_are_cut() -> None:
    line = "word " * 100
    paragraph = "\n".join([line] * 12)
    entries = chunk_markdown("MEMORY.md", paragraph)
    assert len(entries) > 1
    assert all(len(e.content) <= MAX_ENTRY_CHARS + len(line) for e in entries)
    assert entries[0].start_line == 1
    assert entries[-1].end_line == 12
    assert [e.start_line for e in entries[1:]] == [e.end_line + 1 for e in entries[:-1]]
    (huge,) = chunk_markdown("MEMORY.md", "x" * (MAX_STORED_CHARS * 2))
    assert len(huge.content) == MAX_STORED_CHARS
    assert huge.content.endswith("…")


def test_session_logs_give_one_entry_per_message() -> None:
    lines = [
        {"seq": 1, "ts": "2026-11-30T10:00:00Z", "message": {"role": "user", "content": "hi"}},
        {
            "seq": 2,
            "ts": "2026-11-30T10:00:01Z",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "function": {"name": "lookup", "arguments": '{"q": "tokyo"}'}}
                ],
            },
        },
        {"role": "tool", "name": "lookup", "content": [{"type": "text", "text": "sunny"}]},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\n\nnot json at all\n"
    entries = chunk_session_log("sessions/s.log.jsonl", text)
    assert _spans(entries) == [
        (1, 1, "user: hi"),
        (2, 2, 'assistant: lookup({"q": "tokyo"})'),
        (3, 3, "tool lookup: sunny"),
        (5, 5, "not json at all"),
    ]
    assert [e.date for e in entries] == ["2026-11-30", "2026-11-30", None, None]


def test_what_is_indexed() -> None:
    assert source_of("MEMORY.md") == "memory"
    assert source_of("memory/2026-11-30.md") == "memory"
    assert source_of("memory/archive/2026-01-01.md") is None
    assert source_of("memory/archive/2026-01-01.md", include_archive=True) == "memory"
    assert source_of("memory/.history/MEMORY.md") is None
    assert source_of("memory/notes.txt") is None
    assert source_of("sessions/a.log.jsonl") == "sessions"
    assert source_of("sessions/a.offload.json") is None
    assert source_of("large_tool_results/s/x.txt") is None
    assert session_log_path("chat-42") == "sessions/chat-42.log.jsonl"
    assert session_log_path("chat 42").startswith("sessions/chat_42-")


def test_session_logs_are_where_transcripts_write_them() -> None:
    from harnessmem.memory.transcripts import transcript_path

    for session in ("chat-42", "a/b", "日本"):
        assert session_log_path(session) == transcript_path(session)


# -- the harness keeps the index in step --------------------------------------------------------


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(time.time())


OPTIONS: dict[str, Any] = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}


@pytest.fixture
def harness(workspace_target: WorkspaceTarget, clock: FakeClock) -> Iterator[MemoryHarness]:
    """A harness whose searches see every change made before them.

    Locally that is the default; on S3 a search looks for changes at most every
    ``index.refresh_interval`` (30 s), so these tests set it to 0 there.
    ``test_another_replica_s_writes_show_at_the_next_sweep`` covers the default.
    """
    index = {"refresh_interval": 0} if workspace_target.is_s3 else {}
    with workspace_target.open(clock=clock, index=index, **OPTIONS) as opened:
        yield opened


#: For tests of what only a local folder has: mtimes set by hand, folder mtimes, symlinks.
local_only = pytest.mark.parametrize("workspace_target", ["local"], indirect=True)


def _write(harness: MemoryHarness, path: str, text: str, *, age_days: float = 0) -> None:
    """Write a file as another process would: behind the harness's back (and its index's)."""
    harness.workspace.write_text(path, text)
    if age_days:
        local = harness.workspace.local_path(path)
        if local is not None:  # an object store's LastModified is the upload time
            when = time.time() - age_days * 86_400
            os.utime(local, (when, when))


def _found(harness: MemoryHarness, query: str) -> list[tuple[str, int]]:
    return [(hit.path, hit.start_line) for hit in harness.search(query)]


def test_search_sees_new_changed_and_deleted_files(harness: MemoryHarness) -> None:
    """No reindex call, no sleep: each search catches up with what changed before it."""
    assert harness.search("otter") == []
    _write(harness, "memory/2026-11-30.md", "- an otter at the river\n")
    assert _found(harness, "otter") == [("memory/2026-11-30.md", 1)]
    harness.workspace.append_text("memory/2026-11-30.md", "- a beaver downstream\n")
    assert _found(harness, "beaver") == [("memory/2026-11-30.md", 2)]
    harness.workspace.write_text("MEMORY.md", "# Memory\n- otters hold hands\n")
    assert sorted(_found(harness, "otter")) == [("MEMORY.md", 2), ("memory/2026-11-30.md", 1)]
    harness.workspace.delete("memory/2026-11-30.md")
    assert _found(harness, "otter") == [("MEMORY.md", 2)]
    assert harness.search("beaver") == []


@local_only
def test_old_files_are_checked_by_the_periodic_sweep(
    harness: MemoryHarness, clock: FakeClock
) -> None:
    """An in-place edit of a log untouched for days shows up within refresh_interval."""
    _write(harness, "memory/2026-01-01.md", "- the old fact\n", age_days=30)
    root = harness.workspace.local_root
    assert root is not None
    path = root / "memory/2026-01-01.md"
    old = time.time() - 3 * 86_400
    os.utime(root / "memory", (old, old))
    assert _found(harness, "old fact") == [("memory/2026-01-01.md", 1)]
    path.write_text("- the edited fact about walruses\n", encoding="utf-8")
    os.utime(path, (old, old))  # as if edited long ago: not a hot file
    os.utime(root / "memory", (old, old))
    assert harness.search("walruses") == [], "between sweeps, cold files are not stat'ed"
    clock.advance(31)
    assert _found(harness, "walruses") == [("memory/2026-01-01.md", 1)]


def test_reindex_reports_what_it_did(harness: MemoryHarness) -> None:
    _write(harness, "MEMORY.md", "- alpha\n")
    _write(harness, "memory/2026-11-29.md", "- beta\n- gamma\n")
    _write(harness, "memory/notes.txt", "- not indexed\n")
    first = harness.reindex()
    assert isinstance(first, ReindexResult)
    assert (first.checked, first.indexed, first.entries, first.removed) == (2, 2, 3, 0)
    again = harness.reindex()
    assert (again.indexed, again.unchanged) == (0, 2)
    full = harness.reindex(full=True)
    assert (full.full, full.indexed, full.entries) == (True, 2, 3)
    assert "2 indexed (3 entries)" in str(full)
    harness.workspace.delete("MEMORY.md")
    assert harness.reindex(paths=["MEMORY.md", "AGENTS.md", "../x"]).removed == 1
    _write(harness, "memory/2026-11-29.md", "- delta\n")
    narrow = harness.reindex(paths=["memory/2026-11-29.md"])
    assert (narrow.checked, narrow.indexed) == (1, 1)
    assert _found(harness, "delta") == [("memory/2026-11-29.md", 1)]


def test_reopening_reads_only_changed_files(workspace_target: WorkspaceTarget) -> None:
    with workspace_target.open(**OPTIONS) as harness:
        for day in range(1, 6):
            _write(harness, f"memory/2026-01-0{day}.md", f"- day {day} fact\n", age_days=10)
        assert harness.reindex().indexed == 5
    with workspace_target.open(**OPTIONS) as harness:
        _write(harness, "memory/2026-01-03.md", "- day three changed\n")
        result = harness.reindex()
        assert (result.indexed, result.unchanged) == (1, 4), "tokens survive in the index"


def test_session_logs_are_searched_by_session(harness: MemoryHarness) -> None:
    for session, text in (("chat-1", "the wifi password is hunter2"), ("chat-2", "wifi is down")):
        record = {
            "seq": 1,
            "ts": "2026-11-30T10:00:00Z",
            "message": {"role": "user", "content": text},
        }
        _write(harness, session_log_path(session), json.dumps(record) + "\n")
    assert harness.search("wifi") == [], "session logs are not memory"
    assert len(harness.search("wifi", source="sessions")) == 2
    (hit,) = harness.search("wifi", session_id="chat-1")
    assert hit.path == "sessions/chat-1.log.jsonl"
    assert "hunter2" in hit.content
    assert hit.date == "2026-11-30"


def test_archive_is_indexed_only_when_asked(
    workspace_target: WorkspaceTarget, tmp_path: Path
) -> None:
    with workspace_target.open(**OPTIONS) as harness:
        _write(harness, "memory/archive/2020-01-01.md", "- the zanzibar itinerary\n")
        assert harness.search("zanzibar") == []
    with workspace_target.open(
        index={"include_archive": True},
        workspace={"index_path": str(tmp_path / "archive.db")},
        **OPTIONS,
    ) as harness:
        assert _found(harness, "zanzibar") == [("memory/archive/2020-01-01.md", 1)]


def test_limit_is_capped_by_max_results(workspace_target: WorkspaceTarget) -> None:
    with workspace_target.open(index={"max_results": 3}, **OPTIONS) as harness:
        _write(harness, "MEMORY.md", "".join(f"- pebble {i}\n" for i in range(10)))
        assert len(harness.search("pebble", limit=50)) == 3
        with pytest.raises(ValueError, match="positive"):
            harness.search("pebble", limit=0)


def test_search_timeout_setting_applies(tmp_path: Path) -> None:
    with MemoryHarness.open(
        tmp_path / "ws",
        index={"search_timeout": 1e-9},
        maintenance={"enabled": False},
        plugins={"autoload": False},
    ) as harness:
        _write(harness, "MEMORY.md", "".join(f"- common word {i}\n" for i in range(3_000)))
        with pytest.raises(SearchTimeout, match=r"index\.search_timeout"):
            harness.search("common word")


def test_corrupt_database_rebuilds_and_search_still_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    options: dict[str, Any] = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}
    with MemoryHarness.open(tmp_path / "ws", **options) as harness:
        _write(harness, "MEMORY.md", "- the lighthouse keeper\n")
        assert _found(harness, "lighthouse") == [("MEMORY.md", 1)]
        db = harness.kernel.index_path
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"\x00garbage" * 512)
    caplog.set_level(logging.WARNING, logger="harnessmem.index")
    with MemoryHarness.open(tmp_path / "ws", **options) as harness:
        assert _found(harness, "lighthouse") == [("MEMORY.md", 1)]
    assert [r.getMessage() for r in caplog.records if "corrupt" in r.getMessage()] != []


def test_corruption_while_running_is_repaired_on_the_next_search(harness: MemoryHarness) -> None:
    _write(harness, "MEMORY.md", "- the lighthouse keeper\n")
    assert _found(harness, "lighthouse") == [("MEMORY.md", 1)]
    db = harness.kernel.index_path
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    assert _found(harness, "lighthouse") == [("MEMORY.md", 1)], "rebuilt and re-synced"


def test_schema_version_mismatch_rebuilds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import sqlite3
    from contextlib import closing

    options: dict[str, Any] = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}
    with MemoryHarness.open(tmp_path / "ws", **options) as harness:
        _write(harness, "MEMORY.md", "- the lighthouse keeper\n")
        harness.reindex()
        db = harness.kernel.index_path
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    caplog.set_level(logging.WARNING, logger="harnessmem.index")
    with MemoryHarness.open(tmp_path / "ws", **options) as harness:
        assert _found(harness, "lighthouse") == [("MEMORY.md", 1)]
    assert any("schema version 999" in r.getMessage() for r in caplog.records)


def test_memory_workspace_is_searchable() -> None:
    import uuid

    url = f"memory://hm-index-{uuid.uuid4().hex}"
    with MemoryHarness.open(
        url, maintenance={"enabled": False}, plugins={"autoload": False}
    ) as harness:
        assert harness.workspace.protocol == "memory"
        harness.workspace.write_text("memory/2026-11-30.md", "- a remote otter\n")
        assert _found(harness, "otter") == [("memory/2026-11-30.md", 1)]
        harness.workspace.append_text("memory/2026-11-30.md", "- and a remote beaver\n")
        assert _found(harness, "beaver") == [("memory/2026-11-30.md", 2)]
        harness.kernel.index.close()


def test_another_replica_s_writes_show_at_the_next_sweep(
    workspace_target: WorkspaceTarget, tmp_path: Path, clock: FakeClock
) -> None:
    """Two replicas, each with its own index cache, on one workspace: what one writes (a
    flush, a memory_save) the other's search finds at its next sweep, at the latest one
    index.refresh_interval later (S3: an ETag that moved; locally sooner, by mtime)."""
    from harnessmem.testing import ScriptedModel

    def replica(name: str) -> MemoryHarness:
        return workspace_target.open(
            model=ScriptedModel(["- the lighthouse keeper is called Ada"]),
            clock=clock,
            workspace={"index_path": str(tmp_path / name / "memory_index.db")},
            **OPTIONS,
        )

    with replica("a") as writer, replica("b") as reader:
        assert reader.search("lighthouse") == []  # b's first sweep: nothing yet
        flushed = writer.flush(
            [{"role": "user", "content": "Ada keeps the lighthouse"}], session_id="s"
        )
        writer.save("- Ada's boat is called Petrel")
        assert _found(writer, "lighthouse"), "the writer's own index follows its writes"
        if workspace_target.is_s3:
            assert reader.search("Petrel") == [], "between sweeps, a remote index asks nothing"
        clock.advance(reader.settings.index.refresh_interval or 30.0)
        assert [h.path for h in reader.search("lighthouse")] == [flushed.path]
        assert [h.path for h in reader.search("Petrel")] == ["MEMORY.md"]
        writer.workspace.write_text("MEMORY.md", "- Ada's boat is now called Tern\n")
        clock.advance(31)
        assert [h.path for h in reader.search("Tern")] == ["MEMORY.md"]
        assert reader.search("Petrel") == [], "the changed file was indexed again"


def test_threads_search_while_a_log_grows(harness: MemoryHarness) -> None:
    """Concurrent searches while another thread appends: no errors, every bullet found."""
    import threading

    errors: list[BaseException] = []
    done = threading.Event()

    def search() -> None:
        try:
            while not done.is_set():
                harness.search("heron", limit=5)
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=search) for _ in range(4)]
    for reader in readers:
        reader.start()
    try:
        for i in range(30):
            harness.workspace.append_text("memory/2026-11-30.md", f"- heron sighting {i}\n")
            harness.search("heron")
    finally:
        done.set()
        for reader in readers:
            reader.join()
    assert errors == []
    assert len(harness.search("heron sighting", limit=50)) == 30


@local_only
def test_a_memory_file_linking_out_is_never_indexed(
    harness: MemoryHarness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = tmp_path / "host-notes.md"
    outside.write_text("- the host secret\n")
    root = harness.workspace.local_root
    assert root is not None
    (root / "MEMORY.md").symlink_to(outside)
    caplog.set_level(logging.WARNING, logger="harnessmem.index")
    for _ in range(3):
        assert harness.search("secret") == []
    assert len([r for r in caplog.records if "not indexing MEMORY.md" in r.getMessage()]) <= 1


def test_a_utf16_memory_md_is_indexed_as_text(harness: MemoryHarness) -> None:
    """A MEMORY.md saved as UTF-16 (issue 17) is searchable, with the lines memory_get reads."""
    harness.workspace.write_bytes(
        "MEMORY.md", "# Memory\n- Ana lives in São Paulo\n".encode("utf-16")
    )
    [hit] = harness.search("Paulo")
    assert (hit.path, hit.start_line) == ("MEMORY.md", 2)
    assert "São Paulo" in hit.content
    assert harness.get("MEMORY.md", start_line=2, lines=1) == "- Ana lives in São Paulo\n"
