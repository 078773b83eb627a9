"""The SQLite index's schema: its tables, the numbering of workspaces, files, entries and
blocks, and the FTS5 table of each group of workspaces (see ``backends.sqlite``).

Tables (schema version :data:`SCHEMA_VERSION`):

- ``meta(key, value)``: ``schema_version``, ``tokenizer``;
- ``workspaces(workspace_no, key, last_file_no)``: one row per workspace the file serves
  (``key`` is ``IndexBackend.workspace_id``), with the last file number it handed out;
- ``files(workspace_no, path, source, content_hash, change_token, entries, file_no,
  indexed_at)``, keyed by ``(workspace_no, path)``;
- ``entry_blocks(id, places, texts)``: the entries themselves, up to :data:`BLOCK_SLOTS`
  to a row (see :class:`~harnessmem.backends.sqlite._blocks.EntryBlock`). Entry ids are
  ``file_no << FILE_SHIFT | n`` and file numbers ``workspace_no << WORKSPACE_SHIFT | m``,
  so a file's entries are one id range, a
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

from collections.abc import Sequence

from harnessmem.backends.base import INDEX_SOURCES

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
    "file_blocks",
    "fts_group",
    "fts_statements",
    "fts_table",
    "is_corrupt",
    "schema_statements",
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


def workspace_range(workspace_no: int) -> tuple[int, int]:
    """The first and last possible entry id of a workspace."""
    low = workspace_no << (WORKSPACE_SHIFT + FILE_SHIFT)
    return low, low + (1 << (WORKSPACE_SHIFT + FILE_SHIFT)) - 1


def file_blocks(file_no: int) -> tuple[int, int]:
    """The first and last possible block id of a file."""
    low = file_no << (FILE_SHIFT - BLOCK_SHIFT)
    return low, low + (FILE_SPAN >> BLOCK_SHIFT) - 1
