"""What a search is: the modes, the request :meth:`IndexBackend.search` checked for a
backend's ``_search``, the hits it returns, the timeout it raises, and the date bounds
(:func:`check_dates` reads them, :func:`dated_within` applies them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from harnessmem.errors import HarnessMemError

if TYPE_CHECKING:
    from harnessmem.backends._fts import QueryTerm

__all__ = [
    "SearchHit",
    "SearchMode",
    "SearchRequest",
    "SearchTimeout",
    "check_dates",
    "dated_within",
]

SearchMode = Literal["any", "all", "phrase"]

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def check_dates(since: Any = None, until: Any = None) -> tuple[str | None, str | None]:
    """``since`` and ``until`` (a ``date``, a ``datetime`` or ``"YYYY-MM-DD"``; None: open)
    as ISO day strings; ``ValueError`` naming the bad one, or when ``since`` is after ``until``."""
    import datetime as dt

    def day(value: Any, name: str) -> str | None:
        if value is None:
            return None
        if isinstance(value, dt.datetime):
            return value.date().isoformat()
        if isinstance(value, dt.date):
            return value.isoformat()
        if isinstance(value, str) and _ISO_DAY.fullmatch(value.strip()):
            try:
                return dt.date.fromisoformat(value.strip()).isoformat()
            except ValueError:
                pass
        raise ValueError(f"{name} must be a date or 'YYYY-MM-DD'; got {value!r}")

    first, last = day(since, "since"), day(until, "until")
    if first is not None and last is not None and first > last:
        raise ValueError(f"since ({first}) is after until ({last})")
    return first, last


def dated_within(date: str | None, since: str | None, until: str | None) -> bool:
    """Whether an entry's ``date`` lies within ``since``..``until`` (both inclusive); an
    undated entry lies within no bound."""
    if since is None and until is None:
        return True
    if not date:
        return False
    day = date[:10]
    return (since is None or day >= since) and (until is None or day <= until)


class SearchTimeout(HarnessMemError, TimeoutError):
    """A search ran longer than ``index.search_timeout`` and was stopped."""


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """A search whose arguments :meth:`IndexBackend.search` checked, for ``_search``."""

    #: The query as the caller wrote it.
    text: str
    #: Its terms (:func:`harnessmem.backends.fulltext.parse_query`; stop words kept in
    #: ``phrase`` mode): never empty.
    terms: list[QueryTerm]
    limit: int
    source: str
    mode: SearchMode
    path_prefix: str | None
    #: Seconds before :class:`SearchTimeout` (None: no limit).
    timeout: float | None
    #: ISO days, checked; inclusive (None: unbounded on that side).
    since: str | None
    until: str | None


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result.

    ``path`` is relative to the workspace root; ``start_line`` and ``end_line``
    are 1-based and inclusive; a higher ``score`` is a better match (scores compare
    only within one result list). ``context`` is the path of headings above the entry
    (``"Projects > Kyoto"``), ``date`` the ISO day it belongs to, when known. ``also``
    lists other places that hold the same text (``"memory/2026-05-01.md:12-12"``), left
    out of the results so that each hit is a different memory
    (:func:`harnessmem.index.repeats.collapse_repeats`).
    """

    path: str
    start_line: int
    end_line: int
    content: str
    score: float
    context: str = ""
    date: str | None = None
    also: tuple[str, ...] = ()
