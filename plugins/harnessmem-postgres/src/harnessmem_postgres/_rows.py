"""Pure row logic of the PostgreSQL index: entry diffs and neighbour ranking.

No database here, so both are tested directly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from harnessmem.backends import IndexEntry

__all__ = ["EntryDiff", "StoredEntry", "diff_entries", "neighbour_scores"]


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """An entry row as stored: its id, text and place in the file."""

    id: int
    content: str
    context: str
    seq: int
    section: int
    start_line: int
    end_line: int
    date: str | None


@dataclass
class EntryDiff:
    """What turns a file's stored rows into its new entries.

    ``gone``: ids to delete; ``moved``: ``(id, seq, section, start_line, end_line, date)``
    of rows whose text is unchanged but whose place moved; ``added``: ``(seq, entry)`` to
    insert.
    """

    gone: list[int] = field(default_factory=list)
    moved: list[tuple[int, int, int, int, int, str | None]] = field(default_factory=list)
    added: list[tuple[int, IndexEntry]] = field(default_factory=list)


def diff_entries(stored: Sequence[StoredEntry], entries: Sequence[IndexEntry]) -> EntryDiff:
    """Match entries to stored rows by their text; unchanged rows keep their id.

    An append to a daily log therefore inserts only the new bullets and rewrites no
    tsvector; an edit above moves line numbers with an UPDATE of plain columns.
    """
    pool: dict[tuple[str, str], list[StoredEntry]] = defaultdict(list)
    for row in stored:
        pool[(row.content, row.context)].append(row)
    diff = EntryDiff()
    for seq, entry in enumerate(entries):
        same = pool.get((entry.content, entry.context))
        if same:
            row = same.pop(0)
            place = (seq, entry.section, entry.start_line, entry.end_line, entry.date)
            if (row.seq, row.section, row.start_line, row.end_line, row.date) != place:
                diff.moved.append((row.id, *place))
        else:
            diff.added.append((seq, entry))
    diff.gone = [row.id for rows in pool.values() for row in rows]
    return diff


def neighbour_scores(
    places: Sequence[tuple[int, str, int, int]], scores: dict[int, float], weight: float
) -> None:
    """Add ``weight`` times the scores of matching section neighbours, in place.

    ``places`` holds ``(id, path, seq, section)`` of the candidates in ``scores``. Only
    candidates gain, and from the original scores: a match next to other matches (a
    question and its answer, a bullet and its detail) is likelier the passage wanted
    than an isolated one of the same rank. The same rule as the sqlite backend.
    """
    at = {(path, seq): (section, scores[entry_id]) for entry_id, path, seq, section in places}
    lent_to: dict[int, float] = {}
    for entry_id, path, seq, section in places:
        lent = 0.0
        for near in (seq - 1, seq + 1):
            neighbour = at.get((path, near))
            if neighbour is not None and neighbour[0] == section:
                lent += neighbour[1]
        if lent:
            lent_to[entry_id] = lent
    for entry_id, lent in lent_to.items():
        scores[entry_id] += weight * lent
