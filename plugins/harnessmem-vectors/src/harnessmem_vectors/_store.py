"""The vector store: one SQLite file beside the full-text index, vectors cached by text hash.

Tables: ``files`` (workspace, path, source, content hash, embedder identity), ``entries``
(one row per embedded entry: its place, text and text hash) and ``vectors`` (identity and
text hash to the float32 vector). An entry whose text was embedded before, in any file or
workspace, costs a lookup, not an embedding: an append to a daily log embeds the new
bullets only, and a full rebuild embeds nothing that was already there.

Searches read a workspace's matrix once and keep it; after a write (this process's, or
another's, which ``PRAGMA data_version`` reveals) the next search reads the entries of the
files written alone (those whose content hash changed in the ``files`` table, and those
this process wrote), adds their rows and retires the old ones, and the counts of words
per entry follow by the same difference: a search after a daily-log append costs about
one without a write, not a reload of every vector.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harnessmem.backends.base import IndexEntry

__all__ = ["WORD", "Matrix", "VectorStore", "embedding_text"]

SCHEMA_VERSION = "2"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    workspace TEXT NOT NULL, path TEXT NOT NULL, source TEXT NOT NULL,
    content_hash TEXT NOT NULL, identity TEXT NOT NULL,
    PRIMARY KEY (workspace, path));
CREATE TABLE IF NOT EXISTS entries (
    workspace TEXT NOT NULL, path TEXT NOT NULL, ordinal INTEGER NOT NULL,
    source TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,
    content TEXT NOT NULL, context TEXT NOT NULL, date TEXT, text_hash BLOB NOT NULL,
    PRIMARY KEY (workspace, path, ordinal));
CREATE INDEX IF NOT EXISTS entries_by_source ON entries (workspace, source);
CREATE INDEX IF NOT EXISTS entries_by_text ON entries (text_hash);
CREATE TABLE IF NOT EXISTS vectors (
    identity TEXT NOT NULL, text_hash BLOB NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (identity, text_hash));
CREATE TABLE IF NOT EXISTS tokens (
    identity TEXT NOT NULL, token INTEGER NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (identity, token));
"""


def embedding_text(entry: IndexEntry) -> str:
    """What is embedded of an entry: its text without the list marker."""
    text = entry.content.strip()
    if text[:2] in ("- ", "* ", "+ "):
        text = text[2:]
    return text


def _text_hash(identity: str, text: str) -> bytes:
    return hashlib.blake2b(f"{identity}\0{text}".encode(), digest_size=16).digest()


#: A word, as :meth:`Matrix.word_share` counts them: letters and digits, any script.
WORD = re.compile(r"[^\W_]+")

#: An entry as the matrix reads it: path, start, end, text, context, date, text hash, vector.
_Fetched = tuple[str, int, int, str, str, str | None, bytes, bytes]


def _words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


class Matrix:
    """A workspace's embedded entries of one source, one row each.

    A matrix is never changed once handed out: a write gives a new one
    (:meth:`updated`) that shares the old one's vector buffer, where rows are only ever
    added past the old one's end. An entry rewritten or removed leaves its row dead
    (``live`` False, its similarity -inf) until dead rows pile up and the live ones are
    copied to a new buffer.
    """

    def __init__(self) -> None:
        self._buffer: Any = np.zeros((0, 0), dtype=np.float32)
        self.size = 0  # rows used, dead ones included
        self.entries = 0  # live rows
        self.live: Any = np.zeros(0, dtype=bool)
        self.places: list[tuple[str, int, int, str, str, str | None]] = []
        self._hashes: list[bytes] = []
        #: path -> (content hash, its rows in file order, (start, end) -> row)
        self.files: dict[str, tuple[str, list[int], dict[tuple[int, int], int]]] = {}
        self._entries_with: Counter[str] | None = None

    @property
    def vectors(self) -> Any:
        """The rows' vectors (float32, size x d; dead rows included: see :meth:`similarity`)."""
        return self._buffer[: self.size]

    def similarity(self, vector: Any) -> Any:
        """Each row's cosine to ``vector`` (unit rows), -inf for dead rows."""
        found = self.vectors @ vector
        if self.entries < self.size:
            found[~self.live] = -np.inf
        return found

    def row(self, path: str, start: int, end: int) -> int | None:
        """The live row of the entry at ``path``'s lines ``start``-``end``, if any."""
        held = self.files.get(path)
        return held[2].get((start, end)) if held is not None else None

    def word_share(self, word: str) -> float:
        """The share of the live rows whose text holds ``word`` (lower case, a :data:`WORD`).

        Counted over every row on first use (0.4-0.7 s per 100,000 entries of ~15 words
        here), then kept up to date by each write's rows alone.
        """
        counts = self._entries_with
        if counts is None:
            counts = Counter()
            for row in np.flatnonzero(self.live[: self.size]).tolist():
                counts.update(_words(self.places[row][3]))
            self._entries_with = counts
        return counts[word] / self.entries if self.entries else 0.0

    def updated(self, changed: dict[str, str | None], fetched: dict[str, list[_Fetched]]) -> Matrix:
        """A new matrix with ``changed`` paths (path -> content hash; None: gone) holding
        ``fetched``'s entries; an entry whose place, text and context are unchanged keeps
        its row (an append to a daily log adds the new bullets' rows alone)."""
        new = Matrix()
        new._buffer, new.size, new.entries = self._buffer, self.size, self.entries
        new.live = self.live.copy()
        new.places, new._hashes = list(self.places), list(self._hashes)
        new.files = dict(self.files)
        counts = self._entries_with.copy() if self._entries_with is not None else None
        added: list[_Fetched] = []
        plans: list[tuple[str, str, list[int | None]]] = []
        for path, content_hash in changed.items():
            old = new.files.pop(path, None)
            at = old[2] if old is not None else {}
            rows: list[int | None] = []
            kept: set[int] = set()
            for entry in fetched.get(path, []) if content_hash is not None else []:
                row = at.get((entry[1], entry[2]))
                if (
                    row is not None
                    and row not in kept
                    and new.places[row] == entry[:6]
                    and new._hashes[row] == entry[6]
                ):
                    kept.add(row)
                    rows.append(row)
                else:
                    rows.append(None)
                    added.append(entry)
            for row in old[1] if old is not None else []:
                if row not in kept and new.live[row]:
                    new.live[row] = False
                    new.entries -= 1
                    if counts is not None:
                        counts.subtract(_words(new.places[row][3]))
            if content_hash is not None:
                plans.append((path, content_hash, rows))
        if added:
            vectors = np.frombuffer(b"".join(e[7] for e in added), dtype=np.float32)
            vectors = vectors.reshape(len(added), -1)
            new._append(vectors)
            for entry in added:
                new.places.append(entry[:6])
                new._hashes.append(entry[6])
                if counts is not None:
                    counts.update(_words(entry[3]))
        fresh = iter(range(new.size - len(added), new.size))
        for path, content_hash, rows in plans:
            placed = [row if row is not None else next(fresh) for row in rows]
            lookup = {new.places[row][1:3]: row for row in placed}
            new.files[path] = (content_hash, placed, lookup)
        new._entries_with = counts
        if new.size - new.entries > new.entries // 4 + 1_024:
            new._compact()
        return new

    def _append(self, vectors: Any) -> None:
        count, dimensions = vectors.shape
        end = self.size + count
        if self._buffer.shape[1] != dimensions and self.size == 0:
            self._buffer = np.zeros((0, dimensions), dtype=np.float32)
        if end > len(self._buffer):
            grown = np.empty((end + end // 16 + 64, dimensions), dtype=np.float32)
            grown[: self.size] = self._buffer[: self.size]
            self._buffer = grown
        self._buffer[self.size : end] = vectors
        self.live = np.concatenate([self.live[: self.size], np.ones(count, dtype=bool)])
        self.size = end
        self.entries += count

    def _compact(self) -> None:
        """Copy the live rows to a new buffer (no snapshot sees them move)."""
        keep = np.flatnonzero(self.live[: self.size])
        moved = np.full(self.size, -1, dtype=np.int64)
        moved[keep] = np.arange(len(keep))
        self._buffer = np.ascontiguousarray(self._buffer[keep])
        self.places = [self.places[row] for row in keep.tolist()]
        self._hashes = [self._hashes[row] for row in keep.tolist()]
        remap = moved.tolist()
        self.files = {
            path: (
                content_hash,
                [remap[row] for row in rows],
                {key: remap[row] for key, row in lookup.items()},
            )
            for path, (content_hash, rows, lookup) in self.files.items()
        }
        self.size = self.entries = len(keep)
        self.live = np.ones(self.size, dtype=bool)


class VectorStore:
    """The vector file, shared by the instances of every workspace (see the module doc)."""

    def __init__(self, path: Path, *, busy_timeout: float) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.resets = 0
        self.embedded = 0  # texts embedded by this process (cache misses)
        self.embed_seconds = 0.0
        self._cache: dict[tuple[str, str, str], tuple[tuple[int, int], Matrix]] = {}
        #: Paths this process wrote since a cached matrix was read (data_version only
        #: counts other connections' writes, and a rewrite may keep a file's hash).
        self._touched: dict[tuple[str, str, str], set[str]] = {}
        self._generation = 0
        self.loaded_files = 0  # files whose entries a matrix read again (first reads too)
        self._db = self._connect(busy_timeout)
        self.prune()

    def _connect(self, busy_timeout: float) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(2):
            db = sqlite3.connect(
                self.path, timeout=busy_timeout, check_same_thread=False, isolation_level=None
            )
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
                row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                if row is None:
                    db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
                elif row[0] != SCHEMA_VERSION:
                    raise sqlite3.DatabaseError(f"schema version {row[0]}")
                return db
            except sqlite3.DatabaseError:
                db.close()
                if attempt:
                    raise
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
                self.resets += 1
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self.lock:
            self._db.close()

    # reading ------------------------------------------------------------------------------

    def current(self, workspace: str, identity: str) -> dict[str, str]:
        """The workspace's embedded paths and their content hashes (for ``identity``)."""
        with self.lock:
            rows = self._db.execute(
                "SELECT path, content_hash FROM files WHERE workspace = ? AND identity = ?",
                (workspace, identity),
            ).fetchall()
        return dict(rows)

    def matrix(self, workspace: str, source: str, identity: str) -> Matrix | None:
        """The workspace's vectors of ``source``; None when it has none.

        Kept between searches; after a write (this process's, or another's, which ``PRAGMA
        data_version`` reveals) only the files whose content hash changed, and the ones
        this process wrote, are read again (:meth:`Matrix.updated`).
        """
        with self.lock:
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            key = (workspace, source, identity)
            stamp = (version, self._generation)
            cached = self._cache.get(key)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            base = cached[1] if cached is not None else Matrix()
            touched = self._touched.pop(key, set())
            self._db.execute("BEGIN")  # one snapshot of the files and their entries
            try:
                listing: dict[str, str] = dict(
                    self._db.execute(
                        "SELECT path, content_hash FROM files "
                        "WHERE workspace = ? AND source = ? AND identity = ?",
                        (workspace, source, identity),
                    ).fetchall()
                )
                changed: dict[str, str | None] = {
                    path: listing.get(path)
                    for path in listing.keys() | base.files.keys()
                    if path in touched
                    or listing.get(path) != (base.files[path][0] if path in base.files else None)
                }
                fetched = self._fetch(workspace, source, identity, changed, len(listing))
            finally:
                self._db.execute("COMMIT")
            self.loaded_files += len(changed)
            found = base.updated(changed, fetched) if changed else base
            if not found.entries:
                self._cache.pop(key, None)
                return None
            self._cache[key] = (stamp, found)
            return found

    def _fetch(
        self,
        workspace: str,
        source: str,
        identity: str,
        changed: dict[str, str | None],
        files: int,
    ) -> dict[str, list[Any]]:
        """The entries and vectors of the ``changed`` paths still there, by path."""
        wanted = [path for path, content_hash in changed.items() if content_hash is not None]
        select = (
            "SELECT e.path, e.start_line, e.end_line, e.content, e.context, e.date, "
            "e.text_hash, v.vector FROM entries e "
            "JOIN vectors v ON v.identity = ? AND v.text_hash = e.text_hash "
        )
        found: dict[str, list[Any]] = {}
        if len(wanted) > max(32, files // 4):  # most of them: one pass over the source
            keep = set(wanted)
            for row in self._db.execute(
                select + "WHERE e.workspace = ? AND e.source = ? ORDER BY e.path, e.ordinal",
                (identity, workspace, source),
            ):
                if row[0] in keep:
                    found.setdefault(row[0], []).append(row)
            return found
        for path in wanted:
            found[path] = self._db.execute(
                select + "WHERE e.workspace = ? AND e.path = ? ORDER BY e.ordinal",
                (identity, workspace, path),
            ).fetchall()
        return found

    def load_tokens(self, identity: str) -> dict[int, bytes]:
        """The static embedder's token vectors computed so far (see :mod:`.static`)."""
        with self.lock:
            rows = self._db.execute(
                "SELECT token, vector FROM tokens WHERE identity = ?", (identity,)
            ).fetchall()
        return {int(token): bytes(vector) for token, vector in rows}

    # writing ------------------------------------------------------------------------------

    def save_tokens(self, identity: str, rows: list[tuple[int, bytes]]) -> None:
        """Keep token vectors (kept by a prune too: they serve every workspace)."""
        with self.lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT OR IGNORE INTO tokens VALUES (?, ?, ?)",
                    [(identity, token, vector) for token, vector in rows],
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def write_file(
        self,
        workspace: str,
        path: str,
        source: str,
        content_hash: str,
        entries: Sequence[IndexEntry],
        identity: str,
        embed: Callable[[list[str]], Any],
        context: int = 0,
    ) -> None:
        """Make ``entries`` the embedded entries of ``path``; embed only unseen texts.

        ``context``: how many entries before each (in the file) are embedded with it.
        """
        texts = [embedding_text(e) for e in entries]
        if context:
            texts = [
                " ".join([*texts[max(0, n - context) : n], text]) for n, text in enumerate(texts)
            ]
        hashes = [_text_hash(identity, t) for t in texts]
        with self.lock:
            known = self._known(identity, hashes)
        missing: dict[bytes, str] = {}
        for digest, text in zip(hashes, texts, strict=True):
            if digest not in known:
                missing.setdefault(digest, text)
        new_rows: list[tuple[str, bytes, bytes]] = []
        if missing:
            import time

            started = time.perf_counter()
            vectors = embed(list(missing.values()))
            self.embed_seconds += time.perf_counter() - started
            self.embedded += len(missing)
            new_rows = [
                (identity, digest, np.asarray(v, dtype=np.float32).tobytes())
                for digest, v in zip(missing, vectors, strict=True)
            ]
        with self.lock:
            self._touch(workspace, path)
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)", new_rows)
                db.execute(
                    "DELETE FROM entries WHERE workspace = ? AND path = ?", (workspace, path)
                )
                db.executemany(
                    "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            workspace,
                            path,
                            n,
                            source,
                            e.start_line,
                            e.end_line,
                            e.content,
                            e.context,
                            e.date,
                            digest,
                        )
                        for n, (e, digest) in enumerate(zip(entries, hashes, strict=True))
                    ],
                )
                db.execute(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)",
                    (workspace, path, source, content_hash, identity),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def _touch(self, workspace: str, path: str | None) -> None:
        """Note a write to ``path`` of ``workspace`` (every path when None) for the
        matrices read before it (the caller holds the lock)."""
        self._generation += 1
        for key, (_, matrix) in self._cache.items():
            if key[0] == workspace:
                self._touched.setdefault(key, set()).update(
                    matrix.files if path is None else (path,)
                )

    def _known(self, identity: str, hashes: list[bytes]) -> set[bytes]:
        found: set[bytes] = set()
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            found.update(
                row[0]
                for row in self._db.execute(
                    f"SELECT text_hash FROM vectors WHERE identity = ? AND text_hash IN ({marks})",
                    (identity, *part),
                )
            )
        return found

    def remove(self, workspace: str, path: str | None = None) -> None:
        """Forget ``path`` of ``workspace`` (every path when None).

        Their vectors stay cached (a rebuild after ``clear`` embeds nothing again) until
        the next :meth:`prune`, which opening the file runs.
        """
        where, args = "workspace = ?", [workspace]
        if path is not None:
            where, args = where + " AND path = ?", [workspace, path]
        with self.lock:
            self._touch(workspace, path)
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(f"DELETE FROM entries WHERE {where}", args)
                self._db.execute(f"DELETE FROM files WHERE {where}", args)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def scrub(self) -> bool:
        """Rewrite the file so removed entries leave its bytes: their cached vectors are
        dropped (:meth:`prune`), ``VACUUM`` with secure delete on rebuilds every page from
        the live rows, and a ``TRUNCATE`` checkpoint empties the WAL. False when another
        connection kept the WAL from being emptied."""
        with self.lock:
            self.prune()
            self._generation += 1
            self._db.execute("PRAGMA secure_delete = ON")
            self._db.execute("VACUUM")
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return not busy

    def prune(self) -> int:
        """Drop cached vectors no entry uses any more; how many."""
        with self.lock:
            cursor = self._db.execute(
                "DELETE FROM vectors WHERE NOT EXISTS (SELECT 1 FROM entries e "
                "WHERE e.text_hash = vectors.text_hash)"
            )
            return cursor.rowcount

    def counts(self, workspace: str) -> tuple[int, int]:
        """The workspace's embedded entries, and the vectors cached in the file."""
        with self.lock:
            entries = self._db.execute(
                "SELECT count(*) FROM entries WHERE workspace = ?", (workspace,)
            ).fetchone()[0]
            vectors = self._db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        return int(entries), int(vectors)
