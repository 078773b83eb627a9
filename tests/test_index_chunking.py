"""The Markdown chunker's shortcut for runs of one-line bullets changes nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem import _chunking
from harnessmem._chunking import MAX_STORED_CHARS, chunk_markdown

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
