"""The SQLite index's schema, write path and neighbour ranking (see ``backends.sqlite``).

Tables (schema version :data:`SCHEMA_VERSION`):

- ``meta(key, value)``: ``schema_version``, ``tokenizer``;
- ``workspaces(workspace_no, key, last_file_no)``: one row per workspace the file serves
  (``key`` is ``IndexBackend.workspace_id``), with the last file number it handed out;
- ``files(workspace_no, path, source, content_hash, change_token, entries, file_no,
  indexed_at)``, keyed by ``(workspace_no, path)``;
- ``entry_blocks(id, places, texts)``: the entries themselves, up to :data:`BLOCK_SLOTS`
  to a row (see :class:`EntryBlock`). Entry ids are ``file_no << FILE_SHIFT | n`` and file
  numbers ``workspace_no << WORKSPACE_SHIFT | m``, so a file's entries are one id range, a
  workspace's entries one larger range (:func:`workspace_range`, which every search of
  that workspace is confined to), and entry ``id`` lives in block ``id >> BLOCK_SHIFT``;
- ``memory_fts``, ``sessions_fts``: contentless FTS5 over ``content``, ``context`` and
  ``before`` (the text of the entry before in its section,
  :func:`~harnessmem.backends._fts.neighbour_texts`; it ranks, never matches alone), CJK
  segmented (see ``_fts``), rowid = entry id, for the first
  :data:`WORKSPACES_PER_TABLE` workspaces; ``memory_fts_<g>``, ``sessions_fts_<g>`` for
  group ``g`` of the next ones, made when its first workspace joins (:func:`fts_table`).
  A search is confined to its workspace's rowid range, but FTS5's bm25 counts a term's
  rows over its whole table (its idf), and that count, not the range, is what a search
  costs beyond the raw query: a table per small group of workspaces keeps a tenant's
  search near what it costs alone, where one table for a thousand tenants cost 4x (and
  a table per workspace costs ~7 ms to create and slows every connection's first use).

Why blocks rather than a row per entry: a row per entry cost a rebuild as much as a
third of the raw FTS5 inserts (one B-tree insert and nine bound values per entry);
a block of 64 costs one insert and two values, and a search reads at most a few blocks.
"""

from __future__ import annotations

import sqlite3
import struct
import sys
from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import accumulate, chain
from operator import itemgetter
from typing import Any, cast

from harnessmem.backends._fts import NEIGHBOUR_CHARS, has_cjk, neighbour_texts, segment_cjk
from harnessmem.backends.base import INDEX_SOURCES, EntryColumns, IndexEntry

__all__ = [
    "BLOCK_SHIFT",
    "BLOCK_SLOTS",
    "FILE_SHIFT",
    "FILE_SPAN",
    "FTS_TABLES",
    "MAX_WORKSPACES",
    "SCHEMA_VERSION",
    "TOKENIZER",
    "WORKSPACES_PER_TABLE",
    "WORKSPACE_SHIFT",
    "BatchWriter",
    "EntryBlock",
    "HitText",
    "StoredEntry",
    "WorkspaceFull",
    "file_blocks",
    "fts_group",
    "fts_statements",
    "fts_table",
    "is_corrupt",
    "load_hits",
    "load_places",
    "neighbour_scores",
    "schema_statements",
    "stored_entries",
    "workspace_range",
]

#: Bumped whenever tables, tokenizer or the indexed text form change; another version rebuilds.
SCHEMA_VERSION = 5
TOKENIZER = "porter unicode61 remove_diacritics 2"
FILE_SHIFT = 22  # entry ids: file number << 22 | entry number (4.2 M entries a file)
FILE_SPAN = 1 << FILE_SHIFT
# File numbers: workspace number << 23 | file of the workspace (8.4 M new files of one
# workspace between two full rebuilds, which number them afresh); 18 bits of workspace
# number keep entry ids within SQLite's 63-bit rowids.
WORKSPACE_SHIFT = 23
MAX_WORKSPACES = (1 << (63 - FILE_SHIFT - WORKSPACE_SHIFT)) - 1
BLOCK_SHIFT = 6  # entries of a block: id >> 6 is the block's id
BLOCK_SLOTS = 1 << BLOCK_SHIFT
_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
_FIELDS = 7  # ints a slot takes in a block's ``places`` (see EntryBlock)
_SWAP = sys.byteorder == "big"  # blocks are stored little-endian, whatever the machine


def fts_statements(table: str) -> list[str]:
    """The DDL of one FTS5 table with its settings."""
    return [
        f"CREATE VIRTUAL TABLE {table} USING fts5(content, context, before, content='', "
        f"tokenize='{TOKENIZER}')",
        # A bigger in-memory term buffer (8 MB, default 1 MB) means fewer, larger
        # segments to merge while a rebuild inserts 100,000s of rows: ~10% faster.
        f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', {8 * 1024 * 1024})",
        # Merge 8 segments of a level at a time, not 4 (FTS4's setting): a rebuild
        # of 100,000 entries then merges nothing, 15% of its FTS5 cost; searches
        # were no slower at 20,000 or 100,000 entries (bench/bench_index.py).
        f"INSERT INTO {table}({table}, rank) VALUES ('automerge', 8)",
    ]


def schema_statements(fts_tables: Sequence[str]) -> list[str]:
    """The DDL of an empty index with these FTS5 tables."""
    statements = [
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        "CREATE TABLE workspaces(workspace_no INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, "
        "last_file_no INTEGER NOT NULL DEFAULT 0)",
        "CREATE TABLE files(workspace_no INTEGER NOT NULL, path TEXT NOT NULL, "
        "source TEXT NOT NULL, content_hash TEXT NOT NULL, change_token TEXT, "
        "entries INTEGER NOT NULL, file_no INTEGER NOT NULL UNIQUE, indexed_at REAL NOT NULL, "
        # The first and last date of the file's entries (None: none dated), so that a search
        # between two dates reads only the files that may hold such entries.
        "first_date TEXT, last_date TEXT, "
        "PRIMARY KEY (workspace_no, path)) WITHOUT ROWID",
        # id = entry id >> BLOCK_SHIFT: see EntryBlock.
        "CREATE TABLE entry_blocks(id INTEGER PRIMARY KEY, places BLOB NOT NULL, "
        "texts TEXT NOT NULL)",
    ]
    for table in fts_tables:
        statements += fts_statements(table)
    return statements


#: The FTS5 table of each source for the first group of workspaces (see :func:`fts_table`).
FTS_TABLES = {source: f"{source}_fts" for source in INDEX_SOURCES}
#: Workspaces whose entries share one FTS5 table per source.
WORKSPACES_PER_TABLE = 16


def fts_group(workspace_no: int) -> int:
    """The group of FTS5 tables a workspace's entries go to (workspace numbers start at 1)."""
    return (workspace_no - 1) // WORKSPACES_PER_TABLE


def fts_table(source: str, workspace_no: int) -> str:
    """The FTS5 table of ``source`` that holds workspace ``workspace_no``'s entries."""
    group = fts_group(workspace_no)
    return FTS_TABLES[source] if group == 0 else f"{FTS_TABLES[source]}_{group}"


def is_corrupt(exc: BaseException) -> bool:
    """Whether ``exc`` (sqlite3 or SQLAlchemy) says the file is damaged or not a database."""
    orig = getattr(exc, "orig", exc)
    code = getattr(orig, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in _CORRUPT_CODES
    text = str(orig).lower()
    return "malformed" in text or "not a database" in text


#: One stored entry: (id, content, context, seq, section, start_line, end_line, date).
StoredEntry = tuple[int, str, str, int, int, int, int, str | None]

_CONTENT, _CONTEXT = itemgetter(3), itemgetter(4)


class WorkspaceFull(Exception):
    """A workspace handed out every file number it has; a full rebuild numbers it afresh."""


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


def workspace_range(workspace_no: int) -> tuple[int, int]:
    """The first and last possible entry id of a workspace."""
    low = workspace_no << (WORKSPACE_SHIFT + FILE_SHIFT)
    return low, low + (1 << (WORKSPACE_SHIFT + FILE_SHIFT)) - 1


def file_blocks(file_no: int) -> tuple[int, int]:
    """The first and last possible block id of a file."""
    low = file_no << (FILE_SHIFT - BLOCK_SHIFT)
    return low, low + (FILE_SPAN >> BLOCK_SHIFT) - 1


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
        # FTS rows by table, with their context and neighbour; rows of one-entry files
        # without headings apart, content only: empty columns still cost FTS5 a few %.
        self.fts_rows: dict[str, list[Iterable[tuple[int, str, str, str]]]] = defaultdict(list)
        self.fts_bare: dict[str, list[Iterable[tuple[int, str]]]] = defaultdict(list)
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
            self.fts_rows[fts].append(_segmented(new_rows))
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
        before = _neighbours(entries)
        if count > 1 or any(contexts):
            rows = zip(ids, contents, contexts, before, strict=True)
            self.fts_rows[fts].append(_segmented(rows) if cjk else rows)
        elif cjk:
            bare = zip(ids, map(segment_cjk, contents), strict=True)
            self.fts_bare[fts].append(bare)
        else:
            self.fts_bare[fts].append(zip(ids, contents, strict=True))

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
        for table, parts in self.fts_rows.items():
            self.db.executemany(
                f"INSERT INTO {table}(rowid, content, context, before) VALUES (?, ?, ?, ?)",
                chain.from_iterable(parts),
            )
        for table, bare in self.fts_bare.items():
            self.db.executemany(
                f"INSERT INTO {table}(rowid, content) VALUES (?, ?)", chain.from_iterable(bare)
            )
        if self.next_file is not None:
            self.db.execute(
                "UPDATE workspaces SET last_file_no = ? WHERE workspace_no = ?",
                (self.next_file - 1, self.workspace_no),
            )
        self.blocks, self.paths = [], set()
        self.fts_rows, self.fts_bare = defaultdict(list), defaultdict(list)


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


def neighbour_scores(places: Sequence[Any], scores: dict[int, float], weight: float) -> None:
    """Add ``weight`` times the scores of matching section neighbours, in place.

    ``places`` holds ``(id, seq, section)`` of the candidates in ``scores``; the file is
    ``id >> FILE_SHIFT``. Only candidates gain, from their original scores: a match next
    to other matches is likelier the passage wanted than an isolated one with the same
    bm25.
    """
    at = {
        (entry_id >> FILE_SHIFT, seq): (section, scores[entry_id])
        for entry_id, seq, section in places
    }
    lent_to: dict[int, float] = {}
    for entry_id, seq, section in places:
        lent = 0.0
        for near in (seq - 1, seq + 1):
            neighbour = at.get((entry_id >> FILE_SHIFT, near))
            if neighbour is not None and neighbour[0] == section:
                lent += neighbour[1]
        if lent:
            lent_to[entry_id] = lent
    for entry_id, lent in lent_to.items():
        scores[entry_id] += weight * lent
