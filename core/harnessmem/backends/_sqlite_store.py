"""The SQLite index's schema, write path and neighbour ranking (see ``backends.sqlite``).

Tables (schema version :data:`SCHEMA_VERSION`):

- ``meta(key, value)``: ``schema_version``, ``tokenizer``, ``last_file_no``;
- ``files(path, source, content_hash, change_token, entries, file_no, indexed_at)``;
- ``entries(id, path, seq, section, start_line, end_line, content, context, date)``, with
  ``id = file_no << FILE_SHIFT | n`` so that a file's entries are one rowid range;
- ``memory_fts``, ``sessions_fts``: contentless FTS5 over ``content`` and ``context``
  (CJK segmented, see ``_fts``), rowid = ``entries.id``.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from harnessmem.backends._fts import has_cjk, segment_cjk
from harnessmem.backends.base import INDEX_SOURCES, IndexEntry

__all__ = [
    "FILE_SHIFT",
    "FILE_SPAN",
    "FTS_TABLES",
    "SCHEMA_VERSION",
    "TOKENIZER",
    "BatchWriter",
    "is_corrupt",
    "neighbour_scores",
    "schema_statements",
]

#: Bumped whenever tables, tokenizer or the indexed text form change; another version rebuilds.
SCHEMA_VERSION = 1
TOKENIZER = "porter unicode61 remove_diacritics 2"
FILE_SHIFT = 24  # entry ids: file number << 24 | entry number (16.7 M entries a file)
FILE_SPAN = 1 << FILE_SHIFT
_CORRUPT_CODES = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB


def schema_statements(fts_tables: Sequence[str]) -> list[str]:
    """The DDL of an empty index with these FTS5 tables."""
    statements = [
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
        "CREATE TABLE files(path TEXT PRIMARY KEY, source TEXT NOT NULL, "
        "content_hash TEXT NOT NULL, change_token TEXT, entries INTEGER NOT NULL, "
        "file_no INTEGER NOT NULL UNIQUE, indexed_at REAL NOT NULL) WITHOUT ROWID",
        # id = file_no << FILE_SHIFT | n: see _BatchWriter.
        "CREATE TABLE entries(id INTEGER PRIMARY KEY, path TEXT NOT NULL, seq INTEGER NOT NULL, "
        "section INTEGER NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, "
        "content TEXT NOT NULL, context TEXT NOT NULL, date TEXT)",
    ]
    for table in fts_tables:
        statements += [
            f"CREATE VIRTUAL TABLE {table} USING fts5(content, context, content='', "
            f"tokenize='{TOKENIZER}')",
            # A bigger in-memory term buffer (8 MB, default 1 MB) means fewer, larger
            # segments to merge while a rebuild inserts 100,000s of rows: ~10% faster.
            f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', {8 * 1024 * 1024})",
        ]
    return statements


#: The FTS5 table of each source.
FTS_TABLES = {source: f"{source}_fts" for source in INDEX_SOURCES}


def is_corrupt(exc: BaseException) -> bool:
    """Whether ``exc`` (sqlite3 or SQLAlchemy) says the file is damaged or not a database."""
    orig = getattr(exc, "orig", exc)
    code = getattr(orig, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in _CORRUPT_CODES
    text = str(orig).lower()
    return "malformed" in text or "not a database" in text


def _diff(
    stored: Sequence[tuple[Any, ...]], entries: Sequence[IndexEntry]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[int, IndexEntry]]]:
    """(rows to delete, (place..., id) updates, (seq, entry) to insert) to reach ``entries``."""
    pool: dict[tuple[str, str], list[tuple[Any, ...]]] = defaultdict(list)
    for row in stored:
        pool[(row[1], row[2])].append(row)
    moved: list[tuple[Any, ...]] = []
    added: list[tuple[int, IndexEntry]] = []
    for seq, entry in enumerate(entries):
        same = pool.get((entry.content, entry.context))
        if same:
            row = same.pop(0)
            place = (seq, entry.section, entry.start_line, entry.end_line, entry.date)
            if tuple(row[3:]) != place:
                moved.append((*place, row[0]))
        else:
            added.append((seq, entry))
    return [row for rows in pool.values() for row in rows], moved, added


class BatchWriter:
    """The entry changes of one write transaction, on its DBAPI connection.

    Entry ids are ``file_no << FILE_SHIFT | n``: a file's entries form one rowid range,
    so finding them needs no secondary index (which would cost a fifth of a rebuild).
    ``replace`` diffs the stored entries of a file against the new ones by their text:
    unchanged entries keep their id and FTS row (only line numbers move), so an append
    to a daily log writes just the new bullets. New rows are inserted by ``finish`` with
    one ``executemany`` per table.
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.next_file: int | None = None
        self.rows: list[tuple[Any, ...]] = []
        self.fts_rows: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
        self.paths: set[str] = set()

    def file_no(self) -> int:
        """A file number never used before in this database (numbers are not reused)."""
        if self.next_file is None:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'last_file_no'").fetchone()
            self.next_file = int(row[0]) + 1 if row else 1
        number = self.next_file
        self.next_file += 1
        self.db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('last_file_no', ?)", (str(number),)
        )
        return number

    def replace(
        self, path: str, entries: Sequence[IndexEntry], old: tuple[int, str] | None, fts: str
    ) -> int:
        """Make ``entries`` the entries of ``path``; ``old`` is its (file_no, FTS table) if held.

        Returns the file number its entries now live under.
        """
        db = self.db
        if path in self.paths:  # its pending rows must be stored before they can be diffed
            self.finish()
        self.paths.add(path)
        stored: list[tuple[Any, ...]] = []
        number: int | None = None
        first = 0
        if old is not None:
            number, low = old[0], old[0] << FILE_SHIFT
            stored = db.execute(
                "SELECT id, content, context, seq, section, start_line, end_line, date "
                "FROM entries WHERE id BETWEEN ? AND ?",
                (low, low + FILE_SPAN - 1),
            ).fetchall()
            first = max((row[0] - low for row in stored), default=-1) + 1
        if old is not None and old[1] == fts:
            gone, moved, added = _diff(stored, entries)
        else:
            gone, moved, added = stored, [], list(enumerate(entries))
        if number is not None and first + len(added) > FILE_SPAN:
            # Rare: the file used up its id range; give it a new one, all entries anew.
            gone, moved, added, number = stored, [], list(enumerate(entries)), None
        if gone:
            table = old[1] if old is not None else fts
            db.executemany(
                f"INSERT INTO {table}({table}, rowid, content, context) VALUES ('delete', ?, ?, ?)",
                [(row[0], segment_cjk(row[1]), segment_cjk(row[2])) for row in gone],
            )
            db.executemany("DELETE FROM entries WHERE id = ?", [(row[0],) for row in gone])
        if moved:
            db.executemany(
                "UPDATE entries SET seq = ?, section = ?, start_line = ?, end_line = ?, date = ? "
                "WHERE id = ?",
                moved,
            )
        if number is None:
            number, first = self.file_no(), 0
        base = (number << FILE_SHIFT) + first
        # Tuple unpacking, not attribute access: this runs once per entry of a rebuild.
        rows = [
            (base + i, path, seq, section, start, end, content, context, date)
            for i, (seq, (_, start, end, content, context, date, section)) in enumerate(added)
        ]
        self.rows += rows
        # One scan of the file's new text decides whether any entry needs CJK bigrams.
        if rows and has_cjk("\n".join([row[6] for row in rows] + [row[7] for row in rows])):
            self.fts_rows[fts] += [
                (row[0], segment_cjk(row[6]), segment_cjk(row[7])) for row in rows
            ]
        else:
            self.fts_rows[fts] += [(row[0], row[6], row[7]) for row in rows]
        return number

    def finish(self) -> None:
        """Insert the new rows gathered by ``replace``."""
        if self.rows:
            self.db.executemany(
                "INSERT INTO entries(id, path, seq, section, start_line, end_line, content, "
                "context, date) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                self.rows,
            )
        for table, rows in self.fts_rows.items():
            self.db.executemany(
                f"INSERT INTO {table}(rowid, content, context) VALUES (?, ?, ?)", rows
            )
        self.rows, self.fts_rows, self.paths = [], defaultdict(list), set()


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
