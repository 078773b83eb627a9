"""Time grounding: which date library resolves "yesterday" right, and what it costs a flush.

The data: LoCoMo dev's temporal questions (category 2) whose answer names a day, a month
or a year (:func:`bench.bench_temporal.answer_spans`), each with the turns its evidence
points at and their session's date. The evidence sentence says "I went to a support group
yesterday", the session is "1:56 pm on 8 May, 2023", the answer "7 May 2023". A sentence
counts as resolved when, after the approach wrote its dates in, it holds the answer's date
(an ISO day inside the answer's span, as the temporal bench reads memory).

Approaches, each on the same sentences:

- **as said**: the sentence untouched (the baseline);
- **dateparser / ctparse / parsedatetime alone**: the library's own search of the sentence
  (``dateparser.search.search_dates``, ``ctparse.ctparse``, ``parsedatetime``'s ``nlp``),
  each found expression replaced by the ISO day it resolves to;
- **harnessmem grounding**: :func:`harnessmem.memory.grounding.ground_times` (its own
  finder of time expressions, ``dateparser`` resolving each);
- **own spans, parsedatetime / ctparse resolves**: the same finder, the other library as
  the resolver of each phrase (``ground_times(..., resolve=)``): which library resolves
  the spans best.

A library that is not installed is reported as skipped. Also: 16 sentences written for the
bench (:data:`WRITTEN`: the formats every daily log uses, weekdays of plans and of past
events) scored the same way; false positives on sentences
with no relative time in them but words that look like dates ("We", "May I", "for 4
years"), the time per sentence, and what grounding adds to a flush (the extractive flush of
LoCoMo sessions with and without ``flush.ground_times``).
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import logging
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from bench._util import Row, paired_medians
from bench.bench_locomo import DATA
from bench.bench_temporal import Span, answer_spans

_SESSION = re.compile(r"^session_(\d+)$")
_ZONE = ZoneInfo("UTC")

#: Sentences without a relative time, with words that libraries take for dates.
NEGATIVES = (
    "We should plan a dance session soon!",
    "May I ask what you painted?",
    "March on, the parade goes down Main Street.",
    "Sun and sea are what I need.",
    "I've known these friends for 4 years.",
    "We meet at 5 pm at the studio.",
    "The release is v0.9.0 and it runs on port 6432.",
    "She was born on 8 May 1990.",
    "I ran 10 miles in 2 hours.",
    "Wed is short for Wednesday in the calendar app.",
    "Sat there for a while, thinking.",
    "It took three weeks to build the shelf.",
    "The meeting lasted an hour.",
    "I love Sundays at the lake.",
    "Every Monday I go to the gym.",
    "The second chapter is my favourite.",
    "August Wilson wrote great plays.",
    "I have 2 kids and 3 dogs.",
    "Over the last year my painting improved a lot.",
    "Dec 2022 was the release of version 12.",
)


_TUESDAY = dt.datetime(2023, 6, 13, 14, tzinfo=_ZONE)
_SATURDAY = dt.datetime(2026, 12, 5, 9, tzinfo=_ZONE)


def _day(text: str, last: str | None = None) -> list[Span]:
    first = dt.date.fromisoformat(text)
    return [Span(first, dt.date.fromisoformat(last) if last else first)]


#: Sentences written for the bench (the formats of the helpers' brief, plans and past
#: events by weekday), with when they were said and the day or stretch they name.
WRITTEN: tuple[tuple[str, dt.datetime, list[Span]], ...] = (
    ("Last Sunday my friends and I took a climbing class.", _TUESDAY, _day("2023-06-11")),
    ("Jon lost his job as a banker yesterday.", _TUESDAY, _day("2023-06-12")),
    ("I went to the conference two days ago.", _TUESDAY, _day("2023-06-11")),
    ("We met up last week.", _TUESDAY, _day("2023-06-05", "2023-06-11")),
    ("I got hurt last month.", _TUESDAY, _day("2023-05-01", "2023-05-31")),
    ("I read that book last year.", _TUESDAY, _day("2022-01-01", "2022-12-31")),
    ("The concert last night was loud.", _TUESDAY, _day("2023-06-12")),
    ("I joined a mentorship program last weekend.", _TUESDAY, _day("2023-06-10", "2023-06-11")),
    ("I joined a new activist group last Tues.", _TUESDAY, _day("2023-06-06")),
    ("We're going camping next month.", _TUESDAY, _day("2023-07-01", "2023-07-31")),
    ("The opening is tomorrow.", _TUESDAY, _day("2023-06-14")),
    ("Started at the gym three weeks ago.", _TUESDAY, _day("2023-05-22", "2023-05-28")),
    ("We ship v0.9.0 on Thursday.", _SATURDAY, _day("2026-12-10")),
    ("I went there on Friday.", _SATURDAY, _day("2026-12-04")),
    ("The deploy failed on Wednesday.", _SATURDAY, _day("2026-12-02")),
    ("We will decide on Monday.", _SATURDAY, _day("2026-12-07")),
)


def _session_time(text: str) -> dt.datetime:
    return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=_ZONE)


def cases() -> list[tuple[str, dt.datetime, list[Span]]]:
    """(evidence sentence, when it was said, the answer's spans) of LoCoMo dev's temporal
    questions whose answer names a date."""
    samples = json.loads(DATA.read_text(encoding="utf-8"))
    found: list[tuple[str, dt.datetime, list[Span]]] = []
    for sample in samples:
        talk = sample["conversation"]
        turns: dict[str, tuple[str, dt.datetime]] = {}
        for key, value in talk.items():
            if _SESSION.match(key) and isinstance(value, list):
                said = _session_time(talk[f"{key}_date_time"])
                for turn in value:
                    turns[turn["dia_id"]] = (turn["text"], said)
        for qa in sample["qa"]:
            if qa.get("category") != 2:
                continue
            spans = answer_spans(str(qa.get("answer", "")))
            if not spans:
                continue
            for evidence in qa.get("evidence", []):
                for piece in str(evidence).replace(";", " ").split():
                    if piece in turns:
                        text, said = turns[piece]
                        found.append((text, said, spans))
    return found


# -- the approaches: (text, said) -> text with its dates written in ------------------------------


def _replace(text: str, found: list[tuple[str, dt.date]]) -> str:
    for span, day in found:
        text = text.replace(span, day.isoformat(), 1)
    return text


def _dateparser_alone() -> Callable[[str, dt.datetime], str]:
    from dateparser.search import search_dates

    def run(text: str, said: dt.datetime) -> str:
        settings = {"RELATIVE_BASE": said.replace(tzinfo=None), "PREFER_DATES_FROM": "past"}
        found = search_dates(text, languages=["en"], settings=settings) or []
        return _replace(text, [(span, moment.date()) for span, moment in found])

    return run


def _ctparse_alone() -> Callable[[str, dt.datetime], str]:
    from ctparse import ctparse
    from ctparse.types import Interval, Time

    # ctparse logs every sentence it finds no time in.
    logging.getLogger("ctparse").setLevel(logging.CRITICAL)

    def day_of(value: Any, said: dt.datetime) -> dt.date | None:
        if isinstance(value, Interval):
            value = value.t_from
        if isinstance(value, Time) and value.year and value.month and value.day:
            return dt.date(value.year, value.month, value.day)
        if isinstance(value, Time) and value.year and value.month:
            return dt.date(value.year, value.month, 1)
        return None

    def run(text: str, said: dt.datetime) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = ctparse(text, ts=said.replace(tzinfo=None), timeout=1.0)
        if parsed is None:
            return text
        day = day_of(parsed.resolution, said)
        return f"{text} ({day.isoformat()})" if day is not None else text

    return run


def _parsedatetime_alone() -> Callable[[str, dt.datetime], str]:
    import parsedatetime

    calendar = parsedatetime.Calendar(version=parsedatetime.VERSION_CONTEXT_STYLE)

    def run(text: str, said: dt.datetime) -> str:
        found = calendar.nlp(text, sourceTime=said.replace(tzinfo=None)) or ()
        return _replace(text, [(item[4], item[0].date()) for item in found])

    return run


def _grounding() -> Callable[[str, dt.datetime], str]:
    from harnessmem.memory.grounding import ground_times

    return ground_times


def _grounding_with_parsedatetime() -> Callable[[str, dt.datetime], str]:
    """Our spans, each resolved by parsedatetime (it has no past/future preference)."""
    import parsedatetime

    from harnessmem.memory.grounding import ground_times

    calendar = parsedatetime.Calendar(version=parsedatetime.VERSION_CONTEXT_STYLE)

    def resolve(phrase: str, base: dt.datetime, prefer: str) -> dt.date | None:
        moment, context = calendar.parseDT(phrase, sourceTime=base)
        return moment.date() if context.hasDate else None

    return lambda text, said: ground_times(text, said, resolve=resolve)


def _grounding_with_ctparse() -> Callable[[str, dt.datetime], str]:
    """Our spans, each resolved by ctparse."""
    from ctparse import ctparse
    from ctparse.types import Interval, Time

    from harnessmem.memory.grounding import ground_times

    logging.getLogger("ctparse").setLevel(logging.CRITICAL)

    def resolve(phrase: str, base: dt.datetime, prefer: str) -> dt.date | None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = ctparse(phrase, ts=base, timeout=1.0)
        value = parsed.resolution if parsed is not None else None
        if isinstance(value, Interval):
            value = value.t_from
        if isinstance(value, Time) and value.year and value.month and value.day:
            return dt.date(value.year, value.month, value.day)
        return None

    return lambda text, said: ground_times(text, said, resolve=resolve)


APPROACHES: dict[str, tuple[str | None, Callable[[], Callable[[str, dt.datetime], str]]]] = {
    "as said (no grounding)": (None, lambda: lambda text, said: text),
    "dateparser alone (search_dates)": ("dateparser", _dateparser_alone),
    "ctparse alone": ("ctparse", _ctparse_alone),
    "parsedatetime alone (nlp)": ("parsedatetime", _parsedatetime_alone),
    "harnessmem grounding (own spans, dateparser resolves)": ("dateparser", _grounding),
    "own spans, parsedatetime resolves": ("parsedatetime", _grounding_with_parsedatetime),
    "own spans, ctparse resolves": ("ctparse", _grounding_with_ctparse),
}

_ISO = re.compile(r"\d{4}-\d\d-\d\d")


def score(
    approach: Callable[[str, dt.datetime], str],
    data: list[tuple[str, dt.datetime, list[Span]]],
) -> tuple[int, int, int, float]:
    """Sentences that hold the answer's date after ``approach``; sentences it wrote dates
    into, none of them the answer's; negatives it put a date in; seconds per sentence."""
    resolved = wrong = 0
    started = time.perf_counter()
    for text, said, spans in data:
        written = approach(text, said)
        if any(span.held_by(written) for span in spans):
            resolved += 1
        elif set(_ISO.findall(written)) - set(_ISO.findall(text)):
            wrong += 1
    seconds = (time.perf_counter() - started) / max(1, len(data))
    said = dt.datetime(2023, 6, 13, 14, tzinfo=_ZONE)
    false = sum(bool(_ISO.search(approach(text, said))) for text in NEGATIVES)
    return resolved, wrong, false, seconds


# -- the cost in a flush ---------------------------------------------------------------------------


def _flush_sessions(messages: list[dict[str, Any]], ground: bool, root: Path) -> Callable[[], None]:
    """A function that flushes ``messages`` session by session into a new workspace."""
    from harnessmem import MemoryHarness
    from harnessmem.testing import FakeClock

    sessions: dict[str, list[dict[str, Any]]] = {}
    for message in messages:
        sessions.setdefault(str(message["timestamp"])[:10], []).append(message)
    counter = iter(range(1_000_000))

    def run() -> None:
        workspace = root / f"{'on' if ground else 'off'}-{next(counter)}"
        clock = FakeClock(dt.datetime(2023, 11, 1, tzinfo=dt.UTC).timestamp())
        with MemoryHarness.open(
            workspace,
            clock=clock,
            maintenance={"enabled": False},
            plugins={"autoload": False},
            flush={"ground_times": ground, "dedup_search": False},
            consolidation={"enabled": False},
        ) as harness:
            for number, part in enumerate(sessions.values()):
                harness.flush(part, session_id=f"s{number}")

    return run


def flush_cost(quick: bool) -> tuple[float, float, int]:
    """Median seconds of flushing a LoCoMo conversation's sessions with and without
    grounding, and how many messages."""
    from harnessmem.messages import from_locomo

    samples = json.loads(DATA.read_text(encoding="utf-8"))
    messages = from_locomo(samples[0])
    if quick:
        messages = messages[:120]
    with tempfile.TemporaryDirectory(prefix="bench-dates-") as tmp:
        on = _flush_sessions(messages, True, Path(tmp))
        off = _flush_sessions(messages, False, Path(tmp))
        on()  # warm: dateparser's import and first parse are paid once per process
        with_ground, without = paired_medians(on, off, repeat=3 if quick else 5)
    return with_ground, without, len(messages)


def run(quick: bool) -> list[Row]:
    """Each library's share of LoCoMo evidence sentences resolved; grounding's flush cost."""
    if not DATA.is_file():
        print(f"bench dates: skipped, LoCoMo data missing ({DATA})", file=sys.stderr)
        return []
    data = cases()
    if quick:
        data = data[:40]
    rows: list[Row] = []
    baseline: float | None = None
    for name, (module, make) in APPROACHES.items():
        if module is not None and importlib.util.find_spec(module) is None:
            print(f"bench dates: {name} skipped, {module} is not installed", file=sys.stderr)
            rows.append(Row("dates", f"{name}: skipped ({module} not installed)", 0.0, "share"))
            continue
        approach = make()
        resolved, wrong, false, seconds = score(approach, data)
        written = score(approach, list(WRITTEN))[0]
        share = round(resolved / len(data), 3)
        if baseline is None:
            baseline = share
        rows.append(
            Row(
                "dates",
                f"LoCoMo evidence sentences resolved to the answer's date, {name}",
                share,
                "share",
                baseline="as said",
                baseline_value=baseline or None,
                notes=(
                    f"{resolved} of {len(data)} evidence sentences of category-2 questions "
                    f"whose answer names a date; {wrong} got a date that is not the answer's; "
                    f"{written} of {len(WRITTEN)} written sentences (the brief's formats, "
                    f"weekdays by tense) resolved; a date put into {false} of "
                    f"{len(NEGATIVES)} sentences without one; {seconds * 1e3:.2f} ms a sentence"
                ),
            )
        )
    with_ground, without, count = flush_cost(quick)
    rows.append(
        Row(
            "dates",
            "flush of a LoCoMo conversation's sessions, flush.ground_times on",
            with_ground,
            "s",
            baseline="flush.ground_times off",
            baseline_value=without,
            notes=(
                f"{count} messages of conv 1 flushed session by session (extractive, "
                f"no index dedup); {(with_ground - without) * 1e3:.0f} ms added in all"
            ),
        )
    )
    return rows
