"""The SQLite index's write path: :class:`BatchWriter` diffs a file's stored entries
against its new ones and writes the blocks and FTS5 rows of one transaction."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import chain, groupby
from operator import itemgetter
from typing import Any

from harnessmem.backends._fts import has_cjk, neighbour_texts, segment_cjk
from harnessmem.backends.base import EntryColumns, IndexEntry
from harnessmem.backends.sqlite._blocks import (
    EntryBlock,
    StoredEntry,
    stored_entries,
    stored_neighbours,
)
from harnessmem.backends.sqlite._schema import (
    BLOCK_SHIFT,
    BLOCK_SLOTS,
    FILE_SHIFT,
    FILE_SPAN,
    WORKSPACE_SHIFT,
)

__all__ = ["BatchWriter", "WorkspaceFull"]

_CONTENT, _CONTEXT = itemgetter(3), itemgetter(4)
# The FTS5 columns a row gives, rowid first, and its placeholders (see BatchWriter.fts).
_ALL = ("rowid, content, context, before", "?, ?, ?, ?")
_PLAIN = ("rowid, content, before", "?, ?, ?")
_BARE = ("rowid, content", "?, ?")


class WorkspaceFull(Exception):
    """A workspace handed out every file number it has; a full rebuild numbers it afresh."""


def _diff(
    stored: Sequence[StoredEntry],
    entries: Sequence[IndexEntry],
    old: dict[int, str],
    new: Sequence[str],
) -> tuple[list[StoredEntry], list[StoredEntry], list[tuple[int, IndexEntry]]]:
    """(entries to delete, entries with a new place, (seq, entry) to add) to reach ``entries``.

    ``old`` and ``new`` are the neighbour texts (:func:`stored_neighbours`, of ``stored``
    by id; :func:`neighbour_texts`, of ``entries`` in order): an entry is kept only when
    its text, context and neighbour text are unchanged.
    """
    pool: dict[tuple[str, str, str], list[StoredEntry]] = defaultdict(list)
    for row in stored:
        pool[(row[1], row[2], old[row[0]])].append(row)
    moved: list[StoredEntry] = []
    added: list[tuple[int, IndexEntry]] = []
    for seq, entry in enumerate(entries):
        same = pool.get((entry.content, entry.context, new[seq]))
        if same:
            row = same.pop(0)
            place = (seq, entry.section, entry.start_line, entry.end_line, entry.date)
            if tuple(row[3:]) != place:
                moved.append((row[0], row[1], row[2], *place))
        else:
            added.append((seq, entry))
    return [row for rows in pool.values() for row in rows], moved, added


class BatchWriter:
    """The entry changes of one write transaction, on its DBAPI connection.

    ``replace`` diffs the stored entries of a file against the new ones by their text:
    unchanged entries keep their id and FTS row (only line numbers move), so an append
    to a daily log writes just the new bullets and the blocks they land in. New files
    (all of a rebuild) skip the diff. New rows are inserted by ``finish`` with one
    ``executemany`` per table.
    """

    def __init__(self, db: sqlite3.Connection, workspace_no: int) -> None:
        self.db = db
        self.workspace_no = workspace_no
        self.next_file: int | None = None
        self.blocks: list[tuple[int, bytes, str]] = []
        # FTS rows as (table, columns, rows), inserted in the order given (a new file's
        # ids are above all before it): FTS5 writes its pending terms out as a segment
        # whenever a rowid is lower than the last one inserted. A file without heading
        # context leaves that column out (a one-entry file its neighbour too): an empty
        # column bound still costs FTS5 ~4% of its inserts, and a column left out indexes
        # the same (no tokens, size 0).
        self.fts: list[tuple[str, tuple[str, str], Iterable[tuple[Any, ...]]]] = []
        self.paths: set[str] = set()

    def file_no(self) -> int:
        """A file number of the workspace not in use (numbers are reused only after clear)."""
        if self.next_file is None:
            row = self.db.execute(
                "SELECT last_file_no FROM workspaces WHERE workspace_no = ?", (self.workspace_no,)
            ).fetchone()
            self.next_file = int(row[0]) + 1 if row else 1
        number = self.next_file
        if number >= 1 << WORKSPACE_SHIFT:
            raise WorkspaceFull(
                f"workspace number {self.workspace_no} used up its {number - 1:,} file numbers"
            )
        self.next_file += 1
        return self.workspace_no << WORKSPACE_SHIFT | number

    def replace(
        self, path: str, entries: Sequence[IndexEntry], old: tuple[int, str] | None, fts: str
    ) -> int:
        """Make ``entries`` the entries of ``path``; ``old`` is its (file_no, FTS table) if held.

        Returns the file number its entries now live under.
        """
        if path in self.paths:  # its pending rows must be stored before they can be diffed
            self.finish()
        self.paths.add(path)
        if old is None:
            number = self.file_no()
            self._add_new(number, entries, fts)
            return number
        number, table = old
        stored = stored_entries(self.db, number)
        low = number << FILE_SHIFT
        first = max((row[0] - low for row in stored), default=-1) + 1
        old_before = stored_neighbours(stored)
        new_before = _neighbours(entries)
        if table == fts:
            gone, moved, added = _diff(stored, entries, old_before, new_before)
        else:
            gone, moved, added = list(stored), [], list(enumerate(entries))
        wrapped = first + len(added) > FILE_SPAN
        if wrapped:  # rare: the file used up its id range; all entries anew, new number
            gone, moved = list(stored), []
        if gone:
            self.db.executemany(
                f"INSERT INTO {table}({table}, rowid, content, context, before) "
                "VALUES ('delete', ?, ?, ?, ?)",
                [(row[0], *map(segment_cjk, (row[1], row[2], old_before[row[0]]))) for row in gone],
            )
        if wrapped:
            self._write_blocks({}, [row[0] for row in stored])
            number = self.file_no()
            self._add_new(number, entries, fts)
            return number
        live = {row[0]: row for row in stored}
        for row in gone:
            del live[row[0]]
        for row in moved:
            live[row[0]] = row
        new_rows = []
        for i, (seq, entry) in enumerate(added):
            entry_id = low + first + i
            live[entry_id] = (
                entry_id,
                entry.content,
                entry.context,
                seq,
                entry.section,
                entry.start_line,
                entry.end_line,
                entry.date,
            )
            new_rows.append((entry_id, entry.content, entry.context, new_before[seq]))
        touched = {row[0] for row in gone} | {row[0] for row in moved}
        touched.update(row[0] for row in new_rows)
        self._write_blocks(live, touched)
        if new_rows:
            self.fts.append((fts, _ALL, _segmented(new_rows)))
        return number

    def _add_new(self, number: int, entries: Sequence[IndexEntry], fts: str) -> None:
        """Queue the blocks and FTS rows of a file's entries, none of them stored yet."""
        base = number << FILE_SHIFT
        cjk = False
        count = len(entries)
        columns = entries if isinstance(entries, EntryColumns) else None
        for offset in range(0, count, BLOCK_SLOTS):
            if columns is not None:
                stop = min(offset + BLOCK_SLOTS, count)
                places, texts = EntryBlock.encode_columns(columns, offset, stop)
            else:
                places, texts = EntryBlock.encode(offset, entries[offset : offset + BLOCK_SLOTS])
            self.blocks.append(((base + offset) >> BLOCK_SHIFT, places, texts))
            # ``texts`` holds every indexed text of the block; isascii() is nearly free.
            cjk = cjk or (not texts.isascii() and has_cjk(texts))
        ids = range(base, base + count)
        if columns is not None:
            contents: Sequence[str] = columns.contents
            contexts: Sequence[str] = columns.contexts
        else:
            contents, contexts = list(map(_CONTENT, entries)), list(map(_CONTEXT, entries))
        if any(contexts):
            rows = zip(ids, contents, contexts, _neighbours(entries), strict=True)
            self.fts.append((fts, _ALL, _segmented(rows) if cjk else rows))
        elif count > 1:
            before = _neighbours(entries)
            if cjk:
                contents, before = list(map(segment_cjk, contents)), list(map(segment_cjk, before))
            self.fts.append((fts, _PLAIN, zip(ids, contents, before, strict=True)))
        else:
            bare = map(segment_cjk, contents) if cjk else contents
            self.fts.append((fts, _BARE, zip(ids, bare, strict=True)))

    def _write_blocks(self, live: dict[int, StoredEntry], touched: Iterable[int]) -> None:
        """Rewrite the blocks holding ``touched`` entry ids from ``live``; drop emptied ones."""
        rewrite: list[tuple[int, bytes, str]] = []
        drop: list[tuple[int]] = []
        for block_id in sorted({entry_id >> BLOCK_SHIFT for entry_id in touched}):
            first = block_id << BLOCK_SHIFT
            slots = [live.get(first + k) for k in range(BLOCK_SLOTS)]
            while slots and slots[-1] is None:
                slots.pop()
            if slots:
                rewrite.append((block_id, *EntryBlock.encode_slots(slots)))
            else:
                drop.append((block_id,))
        if drop:
            self.db.executemany("DELETE FROM entry_blocks WHERE id = ?", drop)
        if rewrite:
            self.db.executemany(
                "INSERT OR REPLACE INTO entry_blocks(id, places, texts) VALUES (?, ?, ?)", rewrite
            )

    def finish(self) -> None:
        """Insert the new rows gathered by ``replace`` and record the last file number."""
        if self.blocks:
            self.db.executemany(
                "INSERT INTO entry_blocks(id, places, texts) VALUES (?, ?, ?)", self.blocks
            )
        # Consecutive rows of one table and one set of columns go in one executemany.
        for (table, (columns, marks)), parts in groupby(self.fts, key=itemgetter(0, 1)):
            self.db.executemany(
                f"INSERT INTO {table}({columns}) VALUES ({marks})",
                chain.from_iterable(part[2] for part in parts),
            )
        if self.next_file is not None:
            self.db.execute(
                "UPDATE workspaces SET last_file_no = ? WHERE workspace_no = ?",
                (self.next_file - 1, self.workspace_no),
            )
        self.blocks, self.paths, self.fts = [], set(), []


def _neighbours(entries: Sequence[IndexEntry]) -> list[str]:
    """:func:`neighbour_texts` of a file's entries, from its columns when it has them."""
    if isinstance(entries, EntryColumns):
        return neighbour_texts(entries.contents, entries.sections)
    return neighbour_texts([e.content for e in entries], [e.section for e in entries])


def _segmented(rows: Iterable[tuple[int, str, str, str]]) -> list[tuple[int, str, str, str]]:
    return [
        (row_id, segment_cjk(content), segment_cjk(context), segment_cjk(before))
        for row_id, content, context, before in rows
    ]
