"""Search and reads of a workspace's memory: ``harness.search`` and ``harness.get``.

:class:`MemorySearcher` is the component behind them (``kernel.searcher``), and behind the
agent tools ``memory_search``, ``session_search`` and ``memory_get`` and recall. A query that
names a time ("last week", "on May 4th", "since March") ranks that period's entries first,
relative to the harness clock (``index.time_in_query``; see :mod:`harnessmem.memory.timequery`).
"""

from __future__ import annotations

import os
import posixpath
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from harnessmem import layout
from harnessmem.backends.base import SearchHit
from harnessmem.errors import PathNotAllowed, WorkspaceFileNotFound
from harnessmem.index.chunking import chunk_markdown
from harnessmem.memory.timequery import query_time
from harnessmem.telemetry import names

if TYPE_CHECKING:
    from harnessmem.backends.base import SearchMode
    from harnessmem.kernel import Kernel
    from harnessmem.memory.timequery import QueryTime

__all__ = ["MemorySearcher"]


class MemorySearcher:
    """Ranked search of memory and session logs, and confined reads of their lines."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.settings = kernel.settings
        self.workspace = kernel.workspace

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        mode: SearchMode = "any",
        source: str = "memory",
        session_id: str | None = None,
        since: date | str | None = None,
        until: date | str | None = None,
        via: str = "api",
    ) -> list[SearchHit]:
        """Ranked hits, best first (the arguments are :meth:`MemoryHarness.search`'s).

        A query that names a time ranks that period's entries first (``time_in_query``),
        then that week's daily-log entries, then the rest of the ranking. ``via`` says who
        searches (``api``, ``memory_search``, ``session_search``, ``recall``, ``flush``),
        for the ``search_memory`` span.
        """
        if limit <= 0:
            raise ValueError(f"search limit must be positive, got {limit}")
        limit = min(limit, self.settings.index.max_results)
        self.kernel.check_open()
        attributes = {
            names.SEARCH_VIA: via,
            names.SEARCH_SOURCE: "sessions" if session_id is not None else source,
            names.SEARCH_MODE: mode,
        }
        with self.kernel.telemetry.memory(
            names.SEARCH_MEMORY, session_id=session_id, attributes=attributes
        ) as span:
            span.text(names.MEMORY_QUERY_TEXT, query)
            hits = self._search(query, limit, mode, source, session_id, since, until)
            span.records(
                len(hits),
                [hit.content for hit in hits],
                [f"{hit.path}:{hit.start_line}-{hit.end_line}" for hit in hits],
            )
        return hits

    def _search(
        self,
        query: str,
        limit: int,
        mode: SearchMode,
        source: str,
        session_id: str | None,
        since: date | str | None,
        until: date | str | None,
    ) -> list[SearchHit]:
        index = self.kernel.sync

        def run(text: str, start: date | str | None, end: date | str | None) -> list[SearchHit]:
            return index.search(
                text,
                limit,
                mode=mode,
                source="sessions" if session_id is not None else source,
                session_id=session_id,
                timeout=self.settings.index.search_timeout or None,
                since=start,
                until=end,
            )

        named = None
        if since is None and until is None and self.settings.index.time_in_query:
            named = self._query_time(query)
        if named is None:
            return run(query, since, until)
        # The days the query names first, then the rest of the ranking: an answer whose
        # entry has no date (or another one) is still found.
        hits = run(named.query, named.since, named.until)
        # The rest keep the time words: a fact that names those days in its text ("in
        # September 2023", written before then) still ranks by them.
        if named.since is None or named.until is None or (named.until - named.since).days > 6:
            # A month or an open range is a loose hint ("during September 2023" of a plan
            # told in May): its hits take turns with the whole ranking's.
            return _interleave(hits, run(query, None, None), limit)
        if len(hits) < limit and source == "memory" and session_id is None:
            # A query about those days whose other words match little ("what did we talk
            # about on May 2nd?"): the days' own facts come next, in the order written.
            hits += self._days_facts(named.since, named.until, limit - len(hits), hits)
        if len(hits) >= limit:
            return hits[:limit]
        return _interleave(hits, run(query, None, None), limit, turns=False)

    def _days_facts(
        self, since: date | None, until: date | None, limit: int, shown: list[SearchHit]
    ) -> list[SearchHit]:
        """The entries of the daily logs of ``since``..``until`` (at most a week of them),
        in file order, as hits, leaving out those in ``shown``."""
        if since is None or until is None or (until - since).days > 6:
            return []
        seen = {(h.path, h.start_line) for h in shown}
        found: list[SearchHit] = []
        day = since
        while day <= until and len(found) < limit:
            path = f"{layout.MEMORY_DIR}/{day.isoformat()}.md"
            day += timedelta(days=1)
            try:
                text = self.workspace.read_text(path)
            except FileNotFoundError:
                continue
            for entry in chunk_markdown(path, text):
                if (path, entry.start_line) not in seen and len(found) < limit:
                    found.append(
                        SearchHit(
                            path,
                            entry.start_line,
                            entry.end_line,
                            entry.content,
                            0.0,
                            entry.context,
                            entry.date,
                        )
                    )
        return found

    def _query_time(self, query: str) -> QueryTime | None:
        """The days ``query`` names, relative to the harness clock (see ``time_in_query``);
        a query without a month's name or a time word costs two regular expressions."""
        zone = ZoneInfo(self.settings.workspace.timezone)
        return query_time(query, datetime.fromtimestamp(self.kernel.clock(), zone))

    def get(self, path: str, start_line: int = 1, lines: int | None = None) -> str:
        """Lines of a memory file, session log or evicted result (1-based ``start_line``)."""
        if start_line < 1:
            raise ValueError(f"start_line must be >= 1, got {start_line}")
        if lines is not None and lines < 1:
            raise ValueError(f"lines must be >= 1, got {lines}")
        self.kernel.check_open()
        full = self.workspace.resolve(path)  # confinement first: the error names the problem
        normal = posixpath.normpath(path)
        readable = (*layout.READABLE_PREFIXES, self.settings.eviction.path.strip("/") + "/")
        hint = f"readable: {', '.join(layout.READABLE_FILES)}, {', '.join(readable)}"
        if normal not in layout.READABLE_FILES and not normal.startswith(readable):
            raise PathNotAllowed(
                f"{path!r} is not a memory file, session log or evicted tool result", hint=hint
            )
        root = self.workspace.local_root
        if root is not None:
            # A symlink inside the workspace must not lead to a file the agent may not read.
            real = Path(os.path.realpath(full)).relative_to(root).as_posix()
            if real not in layout.READABLE_FILES and not real.startswith(readable):
                raise PathNotAllowed(
                    f"{path!r} is a symlink to {real!r}, which is not a memory file, "
                    "session log or evicted tool result",
                    hint=hint,
                )
        try:
            text = self.workspace.read_text(normal)
        except FileNotFoundError as exc:
            raise WorkspaceFileNotFound(
                f"harness.get: {path!r} does not exist in {self.workspace.url}",
                hint="pass a path exactly as search printed it (memory_search, session_search)",
                path=normal,
            ) from exc
        all_lines = text.splitlines(keepends=True)
        end = None if lines is None else start_line - 1 + lines
        return "".join(all_lines[start_line - 1 : end])


def _interleave(
    first: list[SearchHit], second: list[SearchHit], limit: int, *, turns: bool = True
) -> list[SearchHit]:
    """``first`` and ``second`` as one list without repeats: taking turns, or (``turns``
    false) all of ``first`` then the rest of ``second``."""
    merged: list[SearchHit] = []
    seen: set[tuple[str, int]] = set()
    if turns:
        order = [h for pair in zip(first, second, strict=False) for h in pair]
        longer = first if len(first) > len(second) else second
        order += longer[min(len(first), len(second)) :]
    else:
        order = [*first, *second]
    for hit in order:
        if (hit.path, hit.start_line) not in seen and len(merged) < limit:
            seen.add((hit.path, hit.start_line))
            merged.append(hit)
    return merged
