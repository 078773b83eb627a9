"""The SQLite index's entry blocks: how up to ``BLOCK_SLOTS`` entries share one row
(:class:`EntryBlock`), and reading entries back, whole for a file or by id for a search."""

from __future__ import annotations

import sqlite3
import struct
import sys
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import accumulate
from operator import itemgetter
from typing import cast

from harnessmem.backends._fts import NEIGHBOUR_CHARS
from harnessmem.backends.base import EntryColumns, IndexEntry
from harnessmem.backends.sqlite._schema import BLOCK_SHIFT, BLOCK_SLOTS, FILE_SHIFT, file_blocks

__all__ = [
    "EntryBlock",
    "HitText",
    "StoredEntry",
    "load_hits",
    "load_places",
    "stored_entries",
    "stored_neighbours",
]

_FIELDS = 7  # ints a slot takes in a block's ``places`` (see EntryBlock)
_SWAP = sys.byteorder == "big"  # blocks are stored little-endian, whatever the machine


#: One stored entry: (id, content, context, seq, section, start_line, end_line, date).
StoredEntry = tuple[int, str, str, int, int, int, int, str | None]


class EntryBlock:
    """Up to ``BLOCK_SLOTS`` consecutive entries of one file, as one ``entry_blocks`` row.

    ``places`` is a little-endian int32 array, field after field over the ``m`` slots:
    ``seq``, ``section``, ``start_line``, ``end_line``, then the end offsets in ``texts``
    of the contents, the contexts and the dates (``m`` each; ``texts`` holds the contents
    of all slots, then their contexts, then their dates). A slot whose ``seq`` is -1 is
    empty (its entry was deleted); an empty date is None. Slot ``k`` of block ``b`` holds
    entry ``b << BLOCK_SHIFT | k``.
    """

    __slots__ = ("ints", "m", "texts")

    def __init__(self, places: bytes, texts: str) -> None:
        ints = array("i")
        ints.frombytes(places)
        if _SWAP:
            ints.byteswap()
        self.ints: Sequence[int] = ints
        self.m = len(ints) // _FIELDS
        self.texts = texts

    def place(self, slot: int) -> tuple[int, int]:
        """``(seq, section)`` of a slot (``seq`` -1: empty)."""
        if slot >= self.m:
            return -1, 0
        return self.ints[slot], self.ints[self.m + slot]

    def entry(self, slot: int) -> tuple[str, str, int, int, str | None] | None:
        """``(content, context, start_line, end_line, date)`` of a slot; None if empty."""
        ints, m = self.ints, self.m
        if slot >= m or ints[slot] < 0:
            return None
        ends = 4 * m + slot  # where the slot's content ends; its context ends m later
        texts = self.texts
        return (
            texts[ints[ends - 1] if slot else 0 : ints[ends]],
            texts[ints[ends + m - 1] : ints[ends + m]],
            ints[2 * m + slot],
            ints[3 * m + slot],
            texts[ints[ends + 2 * m - 1] : ints[ends + 2 * m]] or None,
        )

    def stored(self, first_id: int) -> list[StoredEntry]:
        """Every live entry, with its id (``first_id`` is slot 0's)."""
        found: list[StoredEntry] = []
        ints, m, texts = self.ints, self.m, self.texts
        starts = [0, *ints[4 * m : 7 * m - 1]]  # where each content, context, date begins
        for slot in range(m):
            if ints[slot] >= 0:
                ends = 4 * m + slot
                found.append(
                    (
                        first_id + slot,
                        texts[starts[slot] : ints[ends]],
                        texts[starts[m + slot] : ints[ends + m]],
                        ints[slot],
                        ints[m + slot],
                        ints[2 * m + slot],
                        ints[3 * m + slot],
                        texts[starts[2 * m + slot] : ints[ends + 2 * m]] or None,
                    )
                )
        return found

    @staticmethod
    def encode(first_seq: int, entries: Sequence[IndexEntry]) -> tuple[bytes, str]:
        """``(places, texts)`` of a block of consecutive new entries, seq from ``first_seq``.

        Column-wise with ``zip``, ``accumulate`` and one ``struct.pack`` rather than a loop
        over entries: this runs for every entry of a rebuild.
        """
        _, starts, ends, contents, contexts, dates, sections = zip(*entries, strict=True)
        if None in dates:
            dates = tuple(date or "" for date in dates)
        pieces = contents + contexts + dates
        count = len(entries)
        ints = [
            *range(first_seq, first_seq + count),
            *sections,
            *starts,
            *ends,
            *accumulate(map(len, pieces)),
        ]
        return struct.pack(f"<{len(ints)}i", *ints), "".join(pieces)

    @staticmethod
    def encode_columns(columns: EntryColumns, first: int, stop: int) -> tuple[bytes, str]:
        """:meth:`encode` of ``columns[first:stop]`` (seq from ``first``), straight from the
        columns the chunker filled: no entry tuple is built or taken apart."""
        dates = columns.dates[first:stop]
        pieces: list[str] = [*columns.contents[first:stop], *columns.contexts[first:stop]]
        # A daily log's dates are all set: no list built to replace None by "" then.
        pieces += [date or "" for date in dates] if None in dates else cast("list[str]", dates)
        ints = [
            *range(first, stop),
            *columns.sections[first:stop],
            *columns.starts[first:stop],
            *columns.ends[first:stop],
            *accumulate(map(len, pieces)),
        ]
        return struct.pack(f"<{len(ints)}i", *ints), "".join(pieces)

    @staticmethod
    def encode_slots(slots: Sequence[StoredEntry | None]) -> tuple[bytes, str]:
        """``(places, texts)`` of a block from its slots in order (None: empty slot)."""
        empty: StoredEntry = (0, "", "", -1, 0, 0, 0, None)
        rows = [slot if slot is not None else empty for slot in slots]
        pieces = [
            *(row[1] for row in rows),
            *(row[2] for row in rows),
            *(row[7] or "" for row in rows),
        ]
        ints = [
            *(row[3] for row in rows),
            *(row[4] for row in rows),
            *(row[5] for row in rows),
            *(row[6] for row in rows),
            *accumulate(map(len, pieces)),
        ]
        return struct.pack(f"<{len(ints)}i", *ints), "".join(pieces)


def stored_entries(db: sqlite3.Connection, file_no: int) -> list[StoredEntry]:
    """Every stored entry of a file, in id order."""
    low, high = file_blocks(file_no)
    found: list[StoredEntry] = []
    for block_id, places, texts in db.execute(
        "SELECT id, places, texts FROM entry_blocks WHERE id BETWEEN ? AND ? ORDER BY id",
        (low, high),
    ):
        found += EntryBlock(places, texts).stored(block_id << BLOCK_SHIFT)
    return found


def stored_neighbours(stored: Sequence[StoredEntry]) -> dict[int, str]:
    """The ``before`` column FTS5 was given for each stored entry, by id.

    Rebuilt from the stored order: an entry's neighbour is the entry of the seq before in
    its section, which :meth:`BatchWriter.replace` keeps true (an entry whose neighbour
    changed is indexed anew).
    """
    found: dict[int, str] = {}
    last: StoredEntry | None = None
    for row in sorted(stored, key=itemgetter(3)):
        near = last is not None and last[3] == row[3] - 1 and last[4] == row[4]
        found[row[0]] = last[1][:NEIGHBOUR_CHARS] if near and last is not None else ""
        last = row
    return found


def _blocks_of(entry_ids: Iterable[int]) -> dict[int, list[int]]:
    by_block: dict[int, list[int]] = defaultdict(list)
    for entry_id in entry_ids:
        by_block[entry_id >> BLOCK_SHIFT].append(entry_id)
    return by_block


def load_places(db: sqlite3.Connection, entry_ids: Iterable[int]) -> list[tuple[int, int, int]]:
    """``(id, seq, section)`` of the stored entries among ``entry_ids`` that share a file.

    Only entries of the same file can be neighbours, so a candidate alone in its file
    needs no place (most of them, in a search over hundreds of files). Selects
    ``places`` only: SQLite then reads a block's row just up to that column.
    """
    by_file: dict[int, list[int]] = defaultdict(list)
    for entry_id in entry_ids:
        by_file[entry_id >> FILE_SHIFT].append(entry_id)
    by_block = _blocks_of(i for ids in by_file.values() if len(ids) > 1 for i in ids)
    if not by_block:
        return []
    marks = ", ".join("?" * len(by_block))
    found: list[tuple[int, int, int]] = []
    for block_id, places in db.execute(
        f"SELECT id, places FROM entry_blocks WHERE id IN ({marks})", list(by_block)
    ):
        block = EntryBlock(places, "")
        for entry_id in by_block[block_id]:
            seq, section = block.place(entry_id & (BLOCK_SLOTS - 1))
            if seq >= 0:
                found.append((entry_id, seq, section))
    return found


#: What a search shows of an entry: (path, start_line, end_line, content, context, date).
HitText = tuple[str, int, int, str, str, str | None]


def load_hits(db: sqlite3.Connection, entry_ids: Iterable[int]) -> dict[int, HitText]:
    """Path, lines and text of the stored entries among ``entry_ids``, by id."""
    by_block = _blocks_of(entry_ids)
    marks = ", ".join("?" * len(by_block))
    found: dict[int, HitText] = {}
    for block_id, places, texts, path in db.execute(
        "SELECT b.id, b.places, b.texts, f.path FROM entry_blocks b "
        f"JOIN files f ON f.file_no = b.id >> {FILE_SHIFT - BLOCK_SHIFT} "
        f"WHERE b.id IN ({marks})",
        list(by_block),
    ):
        block = EntryBlock(places, texts)
        for entry_id in by_block[block_id]:
            entry = block.entry(entry_id & (BLOCK_SLOTS - 1))
            if entry is not None:
                content, context, start, end, date = entry
                found[entry_id] = (path, start, end, content, context, date)
    return found
