"""An index backend that keeps everything in a Python dict: the reference to copy.

It is small on purpose. It shows what :class:`~harnessmem.backends.base.IndexBackend` asks
of a backend and nothing else, and it passes :class:`~harnessmem.testing.IndexBackendSuite`
(``tests/test_index_inmemory.py``). It is also handy in tests and for short-lived agents:
``index.backend = "inmemory"``. Nothing survives the process (no ``persistent``
capability), and every search scans every entry, so keep it to a few thousand entries.

How it meets the contract:

- ``sync_file`` replaces a file's entries in one assignment under a lock, so a reader
  sees the old entries or the new ones, never half of each; the same hash only updates
  the change token and returns False.
- Every file is kept under the instance's ``workspace_id``: instances made with
  :meth:`scoped` share one dict of workspaces and each sees only its own, so that
  a search, ``remove`` or ``clear`` of one workspace never reaches another's files.
- ``search`` reads the query with :func:`~harnessmem.backends.fulltext.parse_query` (as
  every backend must, through ``_search_terms``), tokenises entries the same way, and
  ranks with BM25 over the content plus a lower weight for the headings above it.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from harnessmem.backends.base import (
    BackendOptions,
    FileUpdate,
    IndexBackend,
    IndexedFile,
    IndexEntry,
    IndexStats,
    SearchHit,
    SearchRequest,
    dated_within,
)
from harnessmem.backends.fulltext import QueryTerm, segment_cjk

__all__ = ["InMemoryIndex"]

_TOKEN = re.compile(r"[^\W_]+")
_K1, _B = 1.2, 0.75  # the usual BM25 constants
_CONTEXT_WEIGHT = 0.3  # a word in the headings counts for less than one in the entry


def tokens(text: str) -> list[str]:
    """The words of ``text`` as queries see them: NFKC, lower case, CJK as bigrams."""
    return _TOKEN.findall(segment_cjk(unicodedata.normalize("NFKC", text)).lower())


@dataclass(frozen=True, slots=True)
class _Stored:
    entry: IndexEntry
    words: tuple[str, ...]
    context_words: frozenset[str]


@dataclass(frozen=True, slots=True)
class _File:
    source: str
    content_hash: str
    change_token: str | None
    entries: tuple[_Stored, ...]


def _matches(term: QueryTerm, words: Sequence[str]) -> int:
    """How often ``term`` (its tokens in a row) occurs in ``words``."""
    first, rest = term.tokens[0], term.tokens[1:]
    count = 0
    for at, word in enumerate(words):
        head = word.startswith(first) if term.prefix else word == first
        if head and tuple(words[at + 1 : at + 1 + len(rest)]) == rest:
            count += 1
    return count


class InMemoryIndex(IndexBackend):
    """Entries in a dict keyed by workspace and path; BM25 ranking; lost when the process ends."""

    name: ClassVar[str] = "inmemory"
    capabilities: ClassVar[frozenset[str]] = frozenset({"phrase", "cjk", "concurrent", "dates"})

    class Options(BackendOptions):
        """No options."""

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        super().__init__(options, **context)
        # workspace id -> path -> file; shared by the instances scoped() makes.
        self._workspaces: dict[str, dict[str, _File]] = {}
        self._lock = threading.Lock()

    def scoped(self, workspace_id: str, **context: Any) -> Self:
        other = super().scoped(workspace_id, **context)
        other._workspaces, other._lock = self._workspaces, self._lock
        return other

    @property
    def _files(self) -> dict[str, _File]:
        """This workspace's files (the lock must be held)."""
        return self._workspaces.setdefault(self.workspace_id, {})

    def files(self) -> dict[str, IndexedFile]:
        with self._lock:
            return {
                path: IndexedFile(path, f.source, f.content_hash, f.change_token, len(f.entries))
                for path, f in self._files.items()
            }

    def _sync_files(self, updates: Iterable[FileUpdate]) -> list[bool]:
        return [self._sync(update) for update in updates]

    def _sync(self, update: FileUpdate) -> bool:
        path, content_hash, change_token = update.path, update.content_hash, update.change_token
        with self._lock:
            held = self._files.get(path)
            if held is not None and held.content_hash == content_hash:
                self._files[path] = _File(held.source, content_hash, change_token, held.entries)
                return False
        stored = tuple(
            _Stored(e, tuple(tokens(e.content)), frozenset(tokens(e.context)))
            for e in update.entries
        )
        with self._lock:
            self._files[path] = _File(update.source, content_hash, change_token, stored)
        return True

    def remove(self, path: str) -> bool:
        with self._lock:
            return self._files.pop(path, None) is not None

    def clear(self) -> None:
        with self._lock:
            self._files.clear()

    def _search(self, request: SearchRequest) -> list[SearchHit]:
        terms, limit, mode, path_prefix = (
            request.terms,
            request.limit,
            request.mode,
            request.path_prefix,
        )
        source, since, until = request.source, request.since, request.until
        bounded = since is not None or until is not None
        if mode == "phrase":
            terms = [QueryTerm(tuple(t for term in terms for t in term.tokens))]
        with self._lock:
            candidates = [
                (path, stored)
                for path, held in self._files.items()
                if held.source == source and path.startswith(path_prefix or "")
                for stored in held.entries
            ]
        if not candidates:
            return []
        average = sum(len(s.words) for _, s in candidates) / len(candidates) or 1.0
        counts = [[_matches(term, s.words) for term in terms] for _, s in candidates]
        frequency = [sum(1 for row in counts if row[i]) for i in range(len(terms))]
        idf = [
            math.log(1 + (len(candidates) - n + 0.5) / (n + 0.5)) for n in frequency
        ]  # BM25's idf, never negative
        scored: list[tuple[float, int]] = []
        for number, ((_, stored), row) in enumerate(zip(candidates, counts, strict=True)):
            in_context = [all(t in stored.context_words for t in term.tokens) for term in terms]
            found = [bool(n) or c for n, c in zip(row, in_context, strict=True)]
            if not any(found) or (mode != "any" and not all(found)):
                continue
            if bounded and not dated_within(stored.entry.date, since, until):
                continue  # ranked among all entries, kept only when dated within the bounds
            norm = _K1 * (1 - _B + _B * len(stored.words) / average)
            score = sum(
                weight * (n * (_K1 + 1) / (n + norm) + _CONTEXT_WEIGHT * c)
                for weight, n, c in zip(idf, row, in_context, strict=True)
            )
            scored.append((score, number))
        scored.sort(key=lambda item: (-item[0], item[1]))
        hits = []
        for score, number in scored[:limit]:
            path, stored = candidates[number]
            e = stored.entry
            hits.append(
                SearchHit(path, e.start_line, e.end_line, e.content, score, e.context, e.date)
            )
        return hits

    def stats(self) -> IndexStats:
        with self._lock:
            entries = sum(len(f.entries) for f in self._files.values())
            return IndexStats(files=len(self._files), entries=entries)
