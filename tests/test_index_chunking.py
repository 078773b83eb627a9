"""The Markdown chunker: its shortcut for runs of one-line bullets changes nothing, and its
columns read (and encode) as the entries they hold."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem.backends.base import IndexEntry
from harnessmem.backends.sqlite._blocks import EntryBlock
from harnessmem.backends.sqlite._schema import BLOCK_SLOTS
from harnessmem.index import chunking as _chunking
from harnessmem.index.chunking import MAX_STORED_CHARS, chunk_markdown

_LINES = [
    "- a fact",
    "- b fact ",
    "* star",
    "+ plus",
    "-",
    "-\tx",
    "- - -",
    "* * *",
    "+ + +",
    "---",
    "# Topic",
    "## Memory Flush — 2026-01-02",
    "### Trip 2025-03-04",
    "```",
    "~~~",
    "1. first",
    "   - indented",
    "continued text",
    "",
    "  ",
    "\u3000",
    "- " + "w" * (MAX_STORED_CHARS + 5),
    "- " + "w" * (MAX_STORED_CHARS - 2),
    "- 寿司が好き",
]
_TEXT = st.builds(
    lambda lines, end: "\n".join(lines) + end,
    st.lists(st.sampled_from(_LINES), max_size=40),
    st.sampled_from(["", "\n", "\n\n", "\r\n"]),
)


@settings(max_examples=400, deadline=None)
@given(text=_TEXT, path=st.sampled_from(["MEMORY.md", "memory/2026-01-01.md"]))
def test_bullet_runs_cut_as_the_line_loop_does(text: str, path: str) -> None:
    """If this fails, compare _BULLET_RUN with the bullet branch of chunk_markdown."""
    fast = chunk_markdown(path, text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_chunking, "_bullet_runs", lambda _text, _lines: {})
        assert fast == chunk_markdown(path, text)


def test_line_numbers_survive_other_line_breaks() -> None:
    """Form feeds, U+2028 and CR break lines for splitlines(); the shortcut steps aside."""
    for brk in ("\x0c", "\u2028", "\r", "\x1e"):
        text = f"- one\n- two{brk}- three\n- four\n- five\n"
        assert [e.start_line for e in chunk_markdown("MEMORY.md", text)] == [1, 2, 3, 4, 5]


@settings(max_examples=200, deadline=None)
@given(text=_TEXT, path=st.sampled_from(["MEMORY.md", "memory/2026-01-01.md"]))
def test_entry_columns_read_as_a_list_of_entries(text: str, path: str) -> None:
    """EntryColumns is a Sequence[IndexEntry] like the list it replaces, to any backend."""
    columns = chunk_markdown(path, text)
    entries = list(columns)
    assert all(type(entry) is IndexEntry for entry in entries)
    assert len(columns) == len(entries)
    assert [columns[i] for i in range(len(columns))] == entries
    assert [columns[-i] for i in range(1, len(columns) + 1)] == entries[::-1]
    assert columns[1:-1:2] == entries[1:-1:2]
    assert columns == entries
    assert columns == tuple(entries)
    assert (columns != entries[:-1]) == bool(entries)
    assert repr(columns) == f"EntryColumns({entries!r})"
    if entries:
        assert columns.index(entries[-1]) <= len(entries) - 1
        assert entries[0] in columns
    with pytest.raises(IndexError):
        columns[len(entries)]


@settings(max_examples=200, deadline=None)
@given(text=_TEXT, path=st.sampled_from(["MEMORY.md", "memory/2026-01-01.md"]))
def test_blocks_encoded_from_columns_equal_blocks_encoded_from_entries(
    text: str, path: str
) -> None:
    """If this fails, EntryBlock.encode_columns lays out places or texts unlike encode."""
    columns = chunk_markdown(path, text)
    entries = list(columns)
    for first in range(0, len(entries), BLOCK_SLOTS):
        stop = min(first + BLOCK_SLOTS, len(entries))
        assert EntryBlock.encode_columns(columns, first, stop) == EntryBlock.encode(
            first, entries[first:stop]
        )


def test_a_stamped_memory_md_bullet_takes_the_date_of_its_stamp() -> None:
    """MEMORY.md facts end with the day they were learned; the entry carries it, so that
    ``since``/``until`` find them and hits show it. A daily log keeps its own date."""
    text = (
        "# Memory\n\n## Facts\n"
        "- Staging listens on port 6432 (2026-11-20)\n"
        "- An old fact without a stamp\n"
        "- A fact on two\n  lines (2026-10-01)\n"
        "- Port (5433) was the old one\n"
    )
    entries = chunk_markdown("MEMORY.md", text)
    assert entries.dates == ["2026-11-20", None, "2026-10-01", None]
    log = chunk_markdown("memory/2026-11-02.md", "## Memory Flush\n- a fact (2026-11-29)\n")
    assert log.dates == ["2026-11-02"]
