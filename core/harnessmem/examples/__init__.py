"""Example data that ships with harnessmem.

``tidewater-week.jsonl``: three working days of a coding agent ("Tide") and the maintainer
of a small tide-prediction service, written for harnessmem: 133 OpenAI chat messages, one
a line, each with a ``timestamp``; tool calls (shell, file reads and edits, searches) and
two huge tool outputs (a verbose test run and production logs, over 80,000 characters
each). Replayed with the default settings it compacts three times, evicts both huge
outputs, flushes facts into three daily logs and consolidates MEMORY.md::

    harnessmem replay --example
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["EXAMPLE", "example_path"]

#: The file name of the bundled example conversation.
EXAMPLE = "tidewater-week.jsonl"


def example_path(name: str = EXAMPLE) -> Path:
    """The path of a bundled example file."""
    path = Path(__file__).with_name(name)
    if not path.is_file():
        raise FileNotFoundError(path)
    return path
