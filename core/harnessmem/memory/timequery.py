"""The time a search query names: "last week", "yesterday", "On May 4th", "in May 2023".

:func:`query_time` reads a query for the days it is about, relative to the moment of the
search, and gives them back as a ``since``/``until`` range together with the query
without its time words (which then need not match). Relative expressions are found and
resolved by :mod:`harnessmem.memory.grounding`, as facts are when they are written (so
"last week" means the same week in a question as in the fact that answers it); dates
named without a year ("On May 4th") are the latest such day not after the search; a
month ("in May 2023", "since March") spans its days. "since", "after", "before" and
"until" open the range on one side.

The search (:meth:`harnessmem.MemoryHarness.search`) ranks the entries of that range
first, then fills the rest of the limit from the whole index: an answer whose entry has
no date, or a different one, is still found.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Final

from harnessmem.memory.grounding import find_time_expressions, ground_times

__all__ = ["QueryTime", "query_time"]

_MONTHS: Final = {
    name.lower(): number
    for number in range(1, 13)
    for name in (calendar.month_name[number], calendar.month_abbr[number])
}
_MONTH: Final = (
    r"(?P<month>january|february|march|april|may|june|july|august|september|october|"
    r"november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_SIDE: Final = r"(?:(?P<side>on|in|during|since|after|before|until|till|by)\s+)?"
_ORDINAL: Final = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR: Final = r"(?:(?:,\s*|\s+)(?P<year>\d{4}))?"
#: A named day or month: "May 4th", "4 May 2023", "the 4th of May", "May 2023", "in May".
_NAMED: Final = re.compile(
    rf"\b{_SIDE}(?:{_MONTH}\s+{_ORDINAL}{_YEAR}|(?:the\s+)?{_ORDINAL.replace('day', 'day2')}"
    rf"(?:\s+of)?\s+{_MONTH.replace('month', 'month2')}{_YEAR.replace('year', 'year2')}|"
    rf"{_MONTH.replace('month', 'month3')}{_YEAR.replace('year', 'year3')}|"
    rf"{_MONTH.replace('month', 'month4')}\s+(?P<year4>\d{{4}}))\b",
    re.I,
)
#: What grounding writes for a relative expression (see harnessmem.memory.grounding).
_GROUNDED: Final = re.compile(
    r"\b(?:(?P<side>on|in|since|after|before|until|by)\s+)?(?:the\s+)?"
    r"(?:(?P<span>week|weekend) of\s+(?P<start>\d{4}-\d\d-\d\d)|"
    r"(?:[A-Z][a-z]+day\s+)?(?P<day>\d{4}-\d\d-\d\d)|"
    rf"{_MONTH}\s+(?P<year>\d{{4}})|(?P<alone>\d{{4}}))\b",
    re.I,
)
_FILLER: Final = re.compile(r"^[\s,;:.!?-]+|[\s,;:-]+$")


@dataclass(frozen=True)
class QueryTime:
    """The days a query names (``since``/``until``, inclusive; either may be open) and
    the query without its time words (the whole query when nothing else is left)."""

    since: date | None
    until: date | None
    query: str


def _month_span(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _sided(side: str | None, first: date, last: date) -> tuple[date | None, date | None]:
    side = (side or "").lower()
    if side in ("since",):
        return first, None
    if side == "after":
        return last + timedelta(days=1), None
    if side in ("before",):
        return None, first - timedelta(days=1)
    if side in ("until", "till", "by"):
        return None, last
    return first, last


def _named(match: re.Match[str], today: date) -> tuple[date, date] | None:
    """The days a named date or month spans; a date without a year is the latest such
    day not after ``today``."""
    groups = match.groupdict()
    month_name = groups["month"] or groups["month2"] or groups["month3"] or groups["month4"]
    month = _MONTHS.get(month_name.lower().rstrip(".")[:3] if month_name else "")
    if month is None:
        month = _MONTHS.get((month_name or "").lower())
    if month is None:
        return None
    if groups["month3"] and not groups["side"]:
        return None  # a bare month name ("May I ask") names no time
    year_text = groups["year"] or groups["year2"] or groups["year3"] or groups["year4"]
    day_text = groups["day"] or groups["day2"]
    year = int(year_text) if year_text else today.year
    try:
        if day_text is None:
            first, last = _month_span(year, month)
            if not year_text and first > today:
                first, last = _month_span(year - 1, month)
            return first, last
        day = date(year, month, int(day_text))
        if not year_text and day > today:
            day = date(year - 1, month, int(day_text))
    except ValueError:
        return None
    return day, day


def _grounded(match: re.Match[str]) -> tuple[date, date] | None:
    groups = match.groupdict()
    if groups["start"]:
        first = date.fromisoformat(groups["start"])
        return first, first + timedelta(days=6 if groups["span"].lower() == "week" else 1)
    if groups["day"]:
        day = date.fromisoformat(groups["day"])
        return day, day
    if groups["month"]:
        month = _MONTHS.get(groups["month"].lower().rstrip(".")[:3])
        return _month_span(int(groups["year"]), month) if month else None
    if groups["alone"]:
        year = int(groups["alone"])
        return (date(year, 1, 1), date(year, 12, 31)) if 1900 < year < 2200 else None
    return None


def query_time(query: str, now: datetime) -> QueryTime | None:
    """The days ``query`` names, relative to ``now`` (timezone-aware, in the workspace's
    zone), and the query without its time words; None when it names no time."""
    today = now.date()
    ranges: list[tuple[date | None, date | None]] = []
    cuts: list[tuple[int, int]] = []
    for match in _NAMED.finditer(query):
        span = _named(match, today)
        if span is not None:
            ranges.append(_sided(match.group("side"), *span))
            cuts.append(match.span())
    # A day named outright anchors the question ("last week, as mentioned on November 6,
    # 2023"): its relative words are then about that day, not about today.
    relative = [] if ranges else find_time_expressions(query)
    for expression in relative:
        # Grounded with the words before it, which give the tense ("what did I do on
        # Thursday": the last one); this expression's form is the last one written.
        grounded = ground_times(query[: expression.end], now)
        matches = list(_GROUNDED.finditer(grounded))
        found = matches[-1] if matches else None
        span = _grounded(found) if found else None
        if span is None:
            continue
        side = _side_before(query, expression.start) or found.group("side") if found else None
        ranges.append(_sided(side, *span))
        start = expression.start
        lead = re.search(r"\b(?:since|after|before|until|till|during)\s+$", query[:start], re.I)
        cuts.append((lead.start() if lead else start, expression.end))
    if not ranges:
        return None
    since = min((r[0] for r in ranges if r[0] is not None), default=None)
    until = max((r[1] for r in ranges if r[1] is not None), default=None)
    if since is not None and until is not None and until < since:
        since, until = until, since
    text = query
    for start, end in sorted(cuts, reverse=True):
        text = text[:start] + " " + text[end:]
    text = _FILLER.sub("", re.sub(r"\s+([?!.,;:])", r"\1", " ".join(text.split())))
    return QueryTime(since, until, text if re.search(r"\w", text) else query)


def _side_before(query: str, start: int) -> str | None:
    lead = re.search(r"\b(since|after|before|until|till)\s+$", query[:start], re.I)
    return lead.group(1) if lead else None
