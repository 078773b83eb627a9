"""The vector store: one SQLite file beside the full-text index, vectors cached by text hash.

Tables: ``files`` (workspace, path, source, content hash, embedder identity), ``entries``
(one row per embedded entry: its place, text and text hash) and ``vectors`` (identity and
text hash to the float32 vector). An entry whose text was embedded before, in any file or
workspace, costs a lookup, not an embedding: an append to a daily log embeds the new
bullets only, and a full rebuild embeds nothing that was already there.

Searches read a workspace's matrix once and keep it until a write (this process's, or
another's, which ``PRAGMA data_version`` reveals) changes the file.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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


@dataclass
class Matrix:
    """A workspace's embedded entries of one source, row for row."""

    vectors: Any  # float32, n x d
    places: list[tuple[str, int, int, str, str, str | None]]  # path, start, end, text, ctx, date
    rows: dict[tuple[str, int, int], int]  # (path, start, end) -> row
    _entries_with: Counter[str] | None = field(default=None, repr=False)

    def word_share(self, word: str) -> float:
        """The share of the rows whose text holds ``word`` (lower case, a :data:`WORD`).

        Counted over every row on first use, then kept with the matrix (which a write
        replaces): one pass, 0.4-0.7 s per 100,000 entries of ~15 words here.
        """
        counts = self._entries_with
        if counts is None:
            counts = Counter()
            for place in self.places:
                counts.update(set(WORD.findall(place[3].lower())))
            self._entries_with = counts
        return counts[word] / len(self.places)


class VectorStore:
    """The vector file, shared by the instances of every workspace (see the module doc)."""

    def __init__(self, path: Path, *, busy_timeout: float) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.resets = 0
        self.embedded = 0  # texts embedded by this process (cache misses)
        self.embed_seconds = 0.0
        self._cache: dict[tuple[str, str, str], tuple[int, Matrix]] = {}
        self._generation = 0
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
        """The workspace's vectors of ``source``; None when it has none."""
        with self.lock:
            version = self._db.execute("PRAGMA data_version").fetchone()[0]
            key = (workspace, source, identity)
            stamp = version * 1_000_003 + self._generation
            cached = self._cache.get(key)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            rows = self._db.execute(
                "SELECT e.path, e.start_line, e.end_line, e.content, e.context, e.date, v.vector "
                "FROM entries e JOIN vectors v ON v.identity = ? AND v.text_hash = e.text_hash "
                "WHERE e.workspace = ? AND e.source = ? ORDER BY e.path, e.ordinal",
                (identity, workspace, source),
            ).fetchall()
            if not rows:
                self._cache.pop(key, None)
                return None
            vectors = np.frombuffer(b"".join(r[6] for r in rows), dtype=np.float32)
            places = [r[:6] for r in rows]
            at = {(p[0], p[1], p[2]): n for n, p in enumerate(places)}
            found = Matrix(vectors.reshape(len(rows), -1), places, at)
            self._cache[key] = (stamp, found)
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
            self._generation += 1
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
            self._generation += 1
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
