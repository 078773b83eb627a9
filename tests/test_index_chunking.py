"""The Markdown chunker: its shortcut for runs of one-line bullets changes nothing, and its
columns read (and encode) as the entries they hold."""

from __future__ import annotations

import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem.backends.base import IndexEntry
from harnessmem.backends.sqlite import SQLiteIndex
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
    """The same text with CRLF line ends has the same lines, and takes the line loop
    throughout (a CR turns the shortcut for runs of one-line bullets off): both must give
    the same entries. If this fails, compare _BULLET_RUN with the bullet branch of
    chunk_markdown."""
    crlf = text.replace("\r\n", "\n").replace("\n", "\r\n")
    assert crlf.splitlines() == text.splitlines()
    assert chunk_markdown(path, text) == chunk_markdown(path, crlf)


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


def _stored(db_path: Path) -> list[tuple[object, ...]]:
    """What an index file holds: its rows, but the time each file was indexed."""
    with closing(sqlite3.connect(db_path)) as db:
        rows = [("blocks", *row) for row in db.execute("SELECT * FROM entry_blocks ORDER BY id")]
        files = db.execute(
            "SELECT workspace_no, path, source, content_hash, entries, file_no, first_date, "
            "last_date FROM files ORDER BY path"
        )
        rows += [("files", *row) for row in files]
        for word in ("fact", "star", "plus", "first", "indented", "continued", "寿司", "w*"):
            found = db.execute(
                "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid", (word,)
            )
            rows += [(word, *row) for row in found]
    return rows


@settings(max_examples=100, deadline=None)
@given(text=_TEXT, path=st.sampled_from(["MEMORY.md", "memory/2026-01-01.md"]))
def test_an_index_stores_columns_as_it_stores_a_list_of_entries(text: str, path: str) -> None:
    """The sqlite index writes EntryColumns (what the chunker gives) through a shortcut;
    the file it writes must be the one a plain list of the same entries gives. If this
    fails, compare EntryBlock.encode_columns with EntryBlock.encode."""
    columns = chunk_markdown(path, text)
    with tempfile.TemporaryDirectory() as folder:
        stored = []
        for name, entries in (("columns", columns), ("list", list(columns))):
            db_path = Path(folder) / f"{name}.db"
            with closing(SQLiteIndex.create({}, index_path=db_path)) as index:
                index.sync_file(path, "hash", entries)
            stored.append(_stored(db_path))
    assert stored[0] == stored[1]


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
