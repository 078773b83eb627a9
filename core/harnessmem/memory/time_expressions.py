"""Finding relative time expressions: the spans of a text such as "yesterday", "last
week", "on Thursday" or "two days ago", which :mod:`harnessmem.memory.grounding` resolves.

Patterns of its own, so that words that only look like dates are never taken:
``dateparser``'s own search takes "We" for Wednesday, "May I" for May and "for 4 years"
for a date; here a weekday needs a word that makes it a day ("on", "last", "next", "this",
"by" ...), month names and durations are never expressions, and a weekday already followed
by a date is left alone (so grounding a grounded text changes nothing).
:func:`has_time_words` is the cheap test before it.

:func:`find_time_expressions` is public for other parts that need the same spans (a
search query that names a time).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from harnessmem.memory._time_words import ABBREVIATIONS, MONTHS, NUMBERS, WEEKDAYS

__all__ = ["TimeExpression", "find_time_expressions", "has_time_words"]

_VAGUE: Final = ("a few", "a couple of", "a couple", "several", "some")

#: Words without which a text holds no relative time expression (the cheap pre-check).
_TIME_WORDS: Final = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|this|past|coming|"
    + "|".join(WEEKDAYS)
    + r"|the\s+\d{1,2}(?:st|nd|rd|th))\b",
    re.I,
)

_NUMBER = r"(?P<count>\d{1,3}|" + "|".join(NUMBERS) + "|" + "|".join(_VAGUE) + ")"
_DAY_NAME = "|".join(WEEKDAYS)
_ABBREVIATION = "|".join(sorted(ABBREVIATIONS, key=len, reverse=True))
#: Words that make a weekday name a day ("on Friday", "last Friday", "by Friday").
_WEEKDAY_LEAD = (
    r"on|last|next|this|this\s+coming|coming|this\s+past|past|by|until|till|before|after|since|from"
)
#: "on Tuesday evenings": every Tuesday, not a day.
_HABIT = r"\s+(?:morning|afternoon|evening|night)s\b"
#: A date written after a weekday: the weekday is part of an absolute date already.
_DATE_AFTER = re.compile(
    r"^,?\s*(?:\d{4}-\d\d-\d\d|\d{1,2}(?:st|nd|rd|th)?\s+[A-Z][a-z]+|[A-Z][a-z]+\.?\s+\d{1,2}\b"
    r"|the\s+\d{1,2}(?:st|nd|rd|th))"
)
_MONTH_NAMES = "|".join(MONTHS)
_WHICH = r"last|this|next|this\s+past|this\s+coming"

#: Words after "on the 15th" that leave it a day (not "the 15th floor", "the 15th of May").
_AFTER_ORDINAL = (
    "and|but|at|in|when|after|before|to|for|with|so|because|as|or|then|"
    "(?-i:I|we|you|he|she|they|it)"
)
#: Words before "this fall" that make it a verb ("let this fall").
_FALL_VERB = re.compile(
    r"\b(?:let|lets|let's|make|makes|made|watch|watched|see|saw|help)\s*$", re.I
)

_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    # (kind, pattern); the first pattern that matches at a place wins (longest first).
    ("day_before_yesterday", r"the\s+day\s+before\s+yesterday"),
    ("day_after_tomorrow", r"the\s+day\s+after\s+tomorrow"),
    ("weekends_ago", rf"{_NUMBER}\s+weekends?\s+ago"),
    ("units_ago", rf"{_NUMBER}\s+(?P<unit>day|week|month|year)s?\s+ago"),
    (
        "weekday",
        rf"(?:(?P<lead>{_WEEKDAY_LEAD})\s+)(?P<weekday>{_DAY_NAME})(?!s\b|\w|{_HABIT})"
        rf"|(?:(?P<lead2>last|next|this|on|past)\s+)(?P<abbr>(?-i:{_ABBREVIATION.title()}))\b",
    ),
    ("weekend", r"(?P<which>last|this\s+past|past|this|next|this\s+coming|coming)\s+weekend"),
    (
        "unit",
        r"(?P<which>last|next|this|this\s+past|this\s+coming)\s+(?P<unit>week|month|year)\b",
    ),
    (
        "month",
        rf"(?P<which>{_WHICH})\s+(?P<month>(?-i:{_MONTH_NAMES}))\b",
    ),
    ("season", rf"(?P<which>{_WHICH})\s+(?P<season>summer|winter|spring|fall|autumn)\b"),
    (
        # "on the 15th", not "on the 15th of May" nor "the 15th May"
        "ordinal",
        r"(?P<lead>on|since|by|until|till|from|before|after)\s+the\s+(?P<nth>\d{1,2})"
        r"(?:st|nd|rd|th)\b(?=\s*(?:[.,;:!?)]|$)|\s+(?:" + _AFTER_ORDINAL + r")\b)",
    ),
    ("night", r"last\s+night"),
    ("part", r"this\s+(?:morning|afternoon|evening)"),
    ("yesterday", r"yesterday"),
    ("today", r"today|tonight"),
    ("tomorrow", r"tomorrow"),
)


def _numbered(pattern: str, number: int) -> str:
    """``pattern`` with its group names made unique: ``count`` of pattern 3 is ``count_3``."""
    return re.sub(r"\(\?P<(\w+)>", lambda m: f"(?P<{m[1]}_{number}>", pattern)


_FINDER: Final = re.compile(
    "|".join(
        rf"(?P<k{number}>\b(?:{_numbered(pattern, number)}))"
        for number, (_, pattern) in enumerate(_PATTERNS)
    ),
    re.I,
)
#: Words before a "last"/"next" span that make it a duration ("the last week", "over the
#: past year"), not a time.
_DURATION_BEFORE = re.compile(r"\b(?:the|for|every|each|all|whole|entire)\s*$", re.I)


@dataclass(frozen=True)
class TimeExpression:
    """One relative time expression of a text: ``text[start:end]``, its ``kind`` (the
    pattern that found it) and the named parts the pattern matched."""

    start: int
    end: int
    text: str
    kind: str
    parts: Mapping[str, str]


def has_time_words(text: str) -> bool:
    """Whether ``text`` holds a word that a relative time expression needs (cheap)."""
    return _TIME_WORDS.search(text) is not None


def find_time_expressions(text: str) -> list[TimeExpression]:
    """The relative time expressions of ``text``, in order (see the module doc for what
    counts: absolute dates, times of day, durations and month names do not)."""
    if not has_time_words(text):
        return []
    found: list[TimeExpression] = []
    for match in _FINDER.finditer(text):
        number = next(int(k[1:]) for k, v in match.groupdict().items() if k[0] == "k" and v)
        kind = _PATTERNS[number][0]
        parts = {
            key.rsplit("_", 1)[0]: value
            for key, value in match.groupdict().items()
            if value is not None and key.endswith(f"_{number}")
        }
        before = text[: match.start()]
        if kind in ("unit", "weekend") and _DURATION_BEFORE.search(before):
            continue  # "the last week", "for the past weekend": a stretch of time
        if kind == "season" and parts["season"].lower() == "fall" and _FALL_VERB.search(before):
            continue  # "let this fall apart"
        if kind == "weekday":
            if _DATE_AFTER.match(text[match.end() :]):
                continue  # "on Sunday 2023-06-11", "Friday, June 9": already absolute
            lead = (parts.get("lead") or parts.get("lead2") or "").lower()
            if lead == "past" and _DURATION_BEFORE.search(before):
                continue
        found.append(TimeExpression(match.start(), match.end(), match.group(0), kind, parts))
    return found
