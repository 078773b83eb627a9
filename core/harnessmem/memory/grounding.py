"""Time grounding: a fact's relative time expressions rewritten as absolute dates.

"Last Sunday my friends and I took a climbing class", written to a daily log as said,
points at the wrong day a week later. :func:`ground_times` rewrites it against the moment
it was said (2023-06-13): "On Sunday 2023-06-11 my friends and I took a climbing class".
The flush applies it to every fact it writes (``flush.ground_times``), against the time
of the message the fact came from (:func:`ground_facts`).

Two steps, so that words that only look like dates are never touched:

1. :func:`find_time_expressions` (:mod:`harnessmem.memory.time_expressions`) finds the
   spans that are relative time expressions, with patterns of its own ("yesterday", "last
   week", "on Thursday", "two days ago", "last weekend" ...), never month names, durations
   or a weekday already followed by a date (so grounding a grounded text changes nothing).
   :func:`has_time_words` is the cheap test before it: a text without any time word never
   loads ``dateparser``.
2. Each span is resolved by ``dateparser`` (imported on first use) relative to the
   moment said, in that moment's time zone, preferring past or future dates by the
   sentence's tense for a bare weekday ("I went there on Friday": the Friday before;
   "We ship on Thursday": the next). Weekends, which ``dateparser`` does not know, and
   vague spans ("a few days ago") are worked out here.

The written forms (the daily-log format every part of harnessmem relies on): a day "on
2023-06-12" ("on Sunday 2023-06-11" when a weekday was named), a week "in the week of
2023-06-05" (its Monday), a weekend "on the weekend of 2023-06-10" (its Saturday), a month
"in May 2023", a year "in 2022", a vague span "a few days before 2023-06-13". After a
preposition of its own ("since yesterday", "by Friday") the span's own "on"/"in" is left
out: "since 2023-06-12".

The flush's use is here too: :func:`ground_facts` grounds each fact against the time of
the message it came from, :func:`transcript_dates` dates a model's transcript.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import cache
from typing import Any, Final, Literal

from harnessmem.memory._time_words import ABBREVIATIONS, MONTHS, NUMBERS, WEEKDAYS
from harnessmem.memory.time_expressions import (
    TimeExpression,
    find_time_expressions,
    has_time_words,
)

__all__ = [
    "Resolver",
    "TimeExpression",
    "dateparser_resolve",
    "find_time_expressions",
    "ground_facts",
    "ground_times",
    "has_time_words",
    "source_message",
    "transcript_dates",
]

Granularity = Literal["day", "week", "weekend", "month", "year", "vague"]
Direction = Literal["past", "future", "tense"]

_SEASONS: Final = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
# Not "over" ("come over tomorrow") nor "around".
_PREPOSITION_WORDS = "on in since until till by before after from during through about"
#: Marks after which a clause starts (the dashes as characters, ruff would flag them).
_CLAUSE_ENDS = ".!?;:,-\u2013\u2014"
#: A verb right after a time that opens a clause: the time is the subject.
_SUBJECT_AFTER = re.compile(r"\s+(?:was|is|were|has|had|will|would|seems|seemed)\b", re.I)
_PREPOSITIONS: Final = frozenset(_PREPOSITION_WORDS.split())

_PAST_VERB_WORDS = """
    was were had did went got took made saw met ran bought came said told felt found gave
    left lost sent spent won began brought caught chose drove ate fell flew forgot heard held
    kept knew led paid rode sang sat slept spoke stood swam taught thought threw understood
    wore wrote became built drew drank grew hung hurt meant quit sold struck tried ago"""
_PAST_VERBS: Final = frozenset(_PAST_VERB_WORDS.split())
_NOT_PAST_WORDS = (
    "speed indeed proceed succeed exceed breed bleed hundred seed weed need feed red bed "
    "shed sacred naked wicked embed"
)
_NOT_PAST: Final = frozenset(_NOT_PAST_WORDS.split())
_FUTURE: Final = re.compile(
    r"\b(?:will|shall|gonna|going\s+to|plan(?:s|ning)?\s+(?:to|on)|about\s+to|hope\s+to|"
    r"want\s+to|would\s+like|tomorrow|upcoming|scheduled|due|next|soon|can't\s+wait)\b|'ll\b",
    re.I,
)
_WORDS = re.compile(r"[A-Za-z']+")

# -- resolving ------------------------------------------------------------------------------------


@cache
def _dateparser() -> Callable[..., datetime | None]:
    import dateparser  # lazily: ~0.1 s to import, more on the first parse

    return dateparser.parse  # type: ignore[no-any-return]


#: ``resolve(phrase, base, prefer)``: the day a phrase ("last sunday", "2 weeks ago",
#: "next month") names, relative to ``base`` (naive, local time), preferring the ``"past"``
#: or the ``"future"`` where it is ambiguous; None when it cannot tell.
Resolver = Callable[[str, datetime, str], "date | None"]


def dateparser_resolve(phrase: str, base: datetime, prefer: str) -> date | None:
    """The default :data:`Resolver`: ``phrase`` resolved by dateparser (``RELATIVE_BASE``
    ``base``, ``PREFER_DATES_FROM`` ``prefer``)."""
    settings = {"RELATIVE_BASE": base, "PREFER_DATES_FROM": prefer, "STRICT_PARSING": False}
    result = _dateparser()(phrase, languages=["en"], settings=settings)
    return result.date() if result is not None else None


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` around ``start:end``."""
    left = max(text.rfind(mark, 0, start) for mark in ".!?;\n")
    rights = [i for i in (text.find(mark, end) for mark in ".!?;\n") if i >= 0]
    return text[left + 1 : min(rights) if rights else len(text)]


def _tense(sentence: str) -> Literal["past", "future"]:
    """Whether ``sentence`` tells of the past (a past verb and nothing of the future):
    a bare weekday in it is then the one before, else the next ("we ship on Thursday")."""
    if _FUTURE.search(sentence):
        return "future"
    for word in _WORDS.findall(sentence.lower()):
        if word in _PAST_VERBS or (len(word) > 4 and word.endswith("ed") and word not in _NOT_PAST):
            return "past"
    return "future"


def _count(raw: str) -> int | None:
    raw = " ".join(raw.lower().split())
    if raw.isdigit():
        return int(raw)
    return NUMBERS.get(raw)


def _monday(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _last_saturday(day: date) -> date:
    """The Saturday of the weekend before ``day`` (said on a weekend: the one before it)."""
    back = (day.weekday() - 5) % 7 or 7
    saturday = day - timedelta(days=back)
    return saturday - timedelta(days=7) if day.weekday() == 6 else saturday


def _coming_saturday(day: date) -> date:
    """The Saturday of this weekend (said on a weekend: the current one)."""
    if day.weekday() == 6:
        return day - timedelta(days=1)
    return day + timedelta(days=(5 - day.weekday()) % 7)


@dataclass(frozen=True)
class _Resolved:
    core: str  # "2023-06-12", "Sunday 2023-06-11", "the week of 2023-06-05", "May 2023"
    preposition: str  # "on", "in", or "" (a vague span carries its own words)


def _resolve(
    expression: TimeExpression, text: str, said: datetime, parse: Resolver
) -> _Resolved | None:
    base = said.replace(tzinfo=None)
    today = base.date()
    kind, parts = expression.kind, expression.parts
    if kind == "weekday":
        lead = " ".join((parts.get("lead") or parts.get("lead2") or "").lower().split())
        if parts.get("weekday"):
            index = WEEKDAYS.index(parts["weekday"].lower())
        else:
            index = ABBREVIATIONS[parts["abbr"].lower().rstrip(".")]
        name = WEEKDAYS[index]
        if lead in ("last", "past", "this past"):
            phrase, prefer = f"last {name}", "past"
        elif lead == "next":
            phrase, prefer = f"next {name}", "future"
        elif lead in ("this", "coming", "this coming"):
            phrase, prefer = f"this {name}", "future"
        elif lead in ("since", "after", "from"):
            phrase, prefer = (
                name,
                "past"
                if lead == "since"
                else _tense(_sentence(text, expression.start, expression.end)),
            )
        elif lead in ("by", "until", "till", "before"):
            phrase, prefer = name, "future"
        else:  # "on Friday": by the tense of its sentence
            phrase, prefer = name, _tense(_sentence(text, expression.start, expression.end))
        day = parse(phrase, base, prefer)
        if day is None:
            return None
        return _Resolved(f"{name.title()} {day.isoformat()}", "on")
    if kind in ("yesterday", "today", "tomorrow", "night", "part"):
        phrase = {"night": "last night", "part": "today"}.get(kind, expression.text.lower())
        if phrase == "tonight":
            phrase = "today"
        day = parse(phrase, base, "past")
        return _Resolved(day.isoformat(), "on") if day is not None else None
    if kind == "month":
        which = " ".join(parts["which"].lower().split())
        number = MONTHS.index(parts["month"]) + 1
        year = today.year
        if which in ("last", "this past"):
            year -= 1 if number >= today.month else 0
        elif which in ("next", "this coming"):
            year += 1 if number <= today.month else 0
        return _Resolved(f"{MONTHS[number - 1]} {year}", "in")
    if kind == "season":
        which = " ".join(parts["which"].lower().split())
        season = parts["season"].lower()
        year = _season_year(today, _SEASONS[season], which)
        return _Resolved(f"the {season} of {year}", "in")
    if kind == "ordinal":
        nth = int(parts["nth"])
        future = parts["lead"].lower() in ("by", "until", "till") or (
            parts["lead"].lower() == "on"
            and _tense(_sentence(text, expression.start, expression.end)) == "future"
        )
        found = _nth_day(today, nth, future)
        return _Resolved(found.isoformat(), "on") if found is not None else None
    if kind == "day_before_yesterday":
        return _Resolved((today - timedelta(days=2)).isoformat(), "on")
    if kind == "day_after_tomorrow":
        return _Resolved((today + timedelta(days=2)).isoformat(), "on")
    if kind == "weekend":
        which = " ".join(parts["which"].lower().split())
        if which in ("last", "past", "this past"):
            saturday = _last_saturday(today)
        elif which == "next":
            saturday = _coming_saturday(today) + timedelta(days=7)
        else:
            saturday = _coming_saturday(today)
        return _Resolved(f"the weekend of {saturday.isoformat()}", "on")
    if kind == "weekends_ago":
        count = _count(parts["count"])
        if count is None:
            return None
        saturday = _last_saturday(today) - timedelta(days=7 * (count - 1))
        return _Resolved(f"the weekend of {saturday.isoformat()}", "on")
    if kind == "units_ago":
        unit = parts["unit"].lower()
        count = _count(parts["count"])
        if count is None:  # "a few days ago": vague, but anchored
            vague = " ".join(parts["count"].split())
            return _Resolved(f"{vague} {unit}s before {today.isoformat()}", "")
        day = parse(f"{count} {unit}{'s' if count > 1 else ''} ago", base, "past")
        return _Resolved(_at(day, unit), "on" if unit == "day" else "in") if day else None
    if kind == "unit":
        which = " ".join(parts["which"].lower().split())
        unit = parts["unit"].lower()
        word = {"this past": "last", "this coming": "next"}.get(which, which)
        if word == "this":
            return _Resolved(_at(today, unit), "in")
        found = parse(f"{word} {unit}", base, "past" if word == "last" else "future")
        return _Resolved(_at(found, unit), "in") if found is not None else None
    return None


def _season_year(today: date, start: int, which: str) -> int:
    """The year of the season starting in month ``start`` that "last", "this" or "next"
    names (a winter is the year of its December)."""
    starts = [date(year, start, 1) for year in range(today.year - 2, today.year + 2)]
    ends = [
        date(y + (m + 3 > 12), (m + 3 - 1) % 12 + 1, 1)
        for y, m in ((d.year, d.month) for d in starts)
    ]
    if which in ("last", "this past"):
        return max(d.year for d, end in zip(starts, ends, strict=True) if end <= today)
    if which in ("next", "this coming"):
        return min(d.year for d in starts if d > today)
    current = [d.year for d, end in zip(starts, ends, strict=True) if d <= today < end]
    if current:
        return current[0]
    return min(d.year for d in starts if d > today)


def _nth_day(today: date, nth: int, future: bool) -> date | None:
    """The day numbered ``nth`` of this month or the one before (``future``: after)."""
    if not 1 <= nth <= 31:
        return None
    year, month = today.year, today.month
    for _ in range(3):
        try:
            found = date(year, month, nth)
        except ValueError:
            found = None
        if found is not None and (found >= today if future else found <= today):
            return found
        month += 1 if future else -1
        if month == 0:
            year, month = year - 1, 12
        elif month == 13:
            year, month = year + 1, 1
    return None


def _at(day: date, unit: str) -> str:
    if unit == "day":
        return day.isoformat()
    if unit == "week":
        return f"the week of {_monday(day).isoformat()}"
    if unit == "month":
        return f"{MONTHS[day.month - 1]} {day.year}"
    return str(day.year)


def ground_times(text: str, said: datetime, *, resolve: Resolver | None = None) -> str:
    """``text`` with its relative time expressions resolved against ``said``.

    ``said`` is when the text was said, timezone-aware (the day is taken in its zone; the
    flush passes the message's time in ``workspace.timezone``). A text without time words
    comes back as it is without loading ``dateparser``; an expression ``dateparser``
    cannot resolve stays as written. ``resolve`` replaces dateparser as the resolver of each
    phrase (the bench compares libraries with it).
    """
    if said.tzinfo is None:
        raise ValueError("said must be timezone-aware (the day depends on the zone)")
    expressions = find_time_expressions(text)
    if not expressions:
        return text
    pieces: list[str] = []
    position = 0
    for expression in expressions:
        resolved = _resolve(expression, text, said, resolve or dateparser_resolve)
        if resolved is None:
            continue
        start = expression.start
        before = text[position:start]
        words = before.split()
        own = expression.parts.get("lead") or expression.parts.get("lead2") or ""
        lead_word = own.lower() if own.lower() in _PREPOSITIONS else ""
        previous = words[-1].lower() if words else ""
        if lead_word:
            # "on Friday", "by Friday": the span's own preposition is kept as said.
            replacement = f"{own} {resolved.core}" if lead_word != "on" else f"on {resolved.core}"
        elif (
            previous in _PREPOSITIONS
            or not resolved.preposition
            or text.startswith(("'s", "\u2019s"), expression.end)  # "today's meeting"
        ):
            replacement = resolved.core
        elif _SUBJECT_AFTER.match(text, expression.end) and (
            not before.strip() or before.rstrip()[-1] in _CLAUSE_ENDS or previous in ("and", "but")
        ):
            # "Last week was wild": the time is the subject, "The week of ... was wild".
            replacement = resolved.core
        else:
            replacement = f"{resolved.preposition} {resolved.core}"
        if text.startswith(("'s", "\u2019s"), expression.end) and _DAY_CORE.match(replacement):
            # "since last night's deploy": "since the 2026-11-27 deploy", not "2026-11-27's".
            replacement = f"the {replacement}"
            position = expression.end + 2
        else:
            position = expression.end
        if expression.text[:1].isupper() and replacement[:1].islower():
            replacement = replacement[:1].upper() + replacement[1:]
        pieces.append(before)
        pieces.append(replacement)
    pieces.append(text[position:])
    return "".join(pieces)


#: A day as grounding writes it, alone: "2023-06-12" or "Sunday 2023-06-11".
_DAY_CORE: Final = re.compile(r"(?:[A-Z][a-z]+day )?\d{4}-\d\d-\d\d$")


# -- the flush's use ------------------------------------------------------------------------------


def source_message(fact: str, texts: Sequence[str]) -> int | None:
    """The index of the text of ``texts`` (the messages' texts) that ``fact`` most likely
    came from: the one sharing the most content words with it (the latest on a tie); None
    when none shares a word."""
    from harnessmem.backends.extractive import term_set

    return _best_source(term_set(fact), [term_set(text) for text in texts])


def _best_source(wanted: frozenset[str] | set[str], terms: Sequence[Set[str]]) -> int | None:
    best, best_score = None, 0
    if not wanted:
        return None
    for index, found in enumerate(terms):
        score = len(wanted & found)
        if score and score >= best_score:
            best, best_score = index, score
    return best


def ground_facts(
    facts: Sequence[str],
    messages: Sequence[Mapping[str, Any]],
    *,
    now: float,
    timezone: str,
) -> list[str]:
    """``facts`` grounded (:func:`ground_times`), each against the time of its source
    message among ``messages`` (:func:`source_message`; its ``timestamp``, ``created_at``
    or ``time``), else against ``now`` (seconds since the epoch), in ``timezone``.

    When every message was said on the same day (the usual flush of a live conversation),
    no source is looked for: any of them gives the same dates.
    """
    if not any(has_time_words(fact) for fact in facts):
        return list(facts)
    from zoneinfo import ZoneInfo

    from harnessmem.messages import content_text, message_time

    zone = ZoneInfo(timezone)
    fallback = datetime.fromtimestamp(now, zone)
    times = [message_time(message, zone) for message in messages]
    moments = [fallback if t is None else datetime.fromtimestamp(t, zone) for t in times]
    one_day = len({moment.date() for moment in moments}) <= 1
    terms: list[Set[str]] | None = None
    grounded = []
    for fact in facts:
        if not find_time_expressions(fact):
            grounded.append(fact)
            continue
        said = moments[0] if one_day and moments else fallback
        if not one_day:
            from harnessmem.backends.extractive import term_set

            if terms is None:
                terms = [term_set(content_text(m.get("content"))) for m in messages]
            index = _best_source(term_set(fact), terms)
            if index is not None:
                said = moments[index]
        grounded.append(ground_times(fact, said))
    return grounded


def transcript_dates(
    messages: Sequence[Mapping[str, Any]], *, timezone: str, now: float
) -> list[str | None] | None:
    """The day each message was said (``YYYY-MM-DD`` in ``timezone``, None when it carries
    no time) for a model's transcript (:func:`harnessmem.prompts.render_conversation`'s
    ``dates``); None when there is no need: no message carries a time, or all were said
    today (``now``)."""
    from zoneinfo import ZoneInfo

    from harnessmem.messages import message_time

    zone = ZoneInfo(timezone)
    days: list[str | None] = []
    for message in messages:
        moment = message_time(message, zone) if isinstance(message, Mapping) else None
        days.append(
            None if moment is None else datetime.fromtimestamp(moment, zone).date().isoformat()
        )
    known = {day for day in days if day is not None}
    today = datetime.fromtimestamp(now, zone).date().isoformat()
    if not known or known == {today}:
        return None
    return days
