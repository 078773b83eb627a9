"""Memory over time on LoCoMo dev: are the dates of what was said still in memory?

Each LoCoMo dev conversation is replayed as ``harnessmem replay FILE --sample N
--keep-dates`` does, on the default offline set-up (the ``extractive`` model, the SQLite
index; plugins not autoloaded, the maintenance thread off: the replay consolidates when
the day changes and at the end). Then, for every temporal question (category 2) whose
answer names a day, a month or a year, memory is read line by line (MEMORY.md, every
daily log, archived ones too):

- **date in memory**: some line holds the answer's date, written out ("7 May 2023",
  "May 7, 2023") or as ISO ``2023-05-07``; a month ("June 2023") is held by ``June 2023``
  or by any ISO day of that month; a year by the year. An answer relative to a day ("The
  sunday before 25 May 2023", "The week before 9 June 2023") is held by that day or by the
  day it resolves to (Sunday ``2023-05-21``; for a week, any day of that week). This is
  the issue's measure (62 of 137 on main at c5e8275).
- **date with its fact**: the same, and the line shares at least two content words (or
  all of them, when the question has fewer) with the question, names of people aside, so
  that a date stamped on an unrelated fact of the same day does not count.

Also reported: the share of MEMORY.md bullets that carry a date (an ISO day anywhere in
the bullet), per conversation and for the bundled example replayed as the README's main
job does (dates moved to this week).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._util import Row
from bench.bench_locomo import DATA

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        1,
    )
    for name in names
}
_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY_FIRST = re.compile(
    rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+(?P<year>\d{{4}})\b", re.I
)
_MONTH_FIRST = re.compile(
    rf"\b{_MONTH}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>\d{{4}})\b", re.I
)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?P<year>\d{{4}})\b", re.I)
_YEAR = re.compile(r"(?<![\d-])(?P<year>(?:19|20)\d\d)(?![\d-])")
_ISO = re.compile(r"(?<!\d)(\d{4})-(\d\d)-(\d\d)(?!\d)")
_STAMP = re.compile(r"\s\(\d{4}-\d\d-\d\d\)(?=\s*$)")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_RELATIVE = re.compile(
    r"\bthe\s+(?P<unit>week|weekend|day|" + "|".join(_WEEKDAYS) + r")\s+before\b", re.I
)
_WORD = re.compile(r"[a-z]+")
_STOP_WORDS = (
    "a an the and or but of to in on at for with by from about as into is are was were be "
    "been do does did done has have had will would can could should when what which who whom "
    "whose where why how that this these those it its i you he she they we me him her them "
    "us my your his their our go went going get got take took make made"
)
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class Span:
    """A stretch of days an answer names: ``first`` to ``last``, inclusive."""

    first: dt.date
    last: dt.date

    def held_by(self, line: str) -> bool:
        """Whether ``line`` names a day in the span, or the span itself by name."""
        for match in _ISO.finditer(line):
            try:
                day = dt.date(int(match[1]), int(match[2]), int(match[3]))
            except ValueError:
                continue
            if self.first <= day <= self.last:
                return True
        if self.first == self.last:
            return any(
                _date_of(m) == self.first
                for pattern in (_DAY_FIRST, _MONTH_FIRST)
                for m in pattern.finditer(line)
            )
        if self.first.day == 1 and self.last == _month_end(self.first):
            return any(
                _MONTHS[m["month"].lower()] == self.first.month
                and int(m["year"]) == self.first.year
                for m in _MONTH_YEAR.finditer(line)
            )
        if (self.first.month, self.first.day, self.last.month, self.last.day) == (1, 1, 12, 31):
            return any(int(m["year"]) == self.first.year for m in _YEAR.finditer(line))
        return False


def _month_end(day: dt.date) -> dt.date:
    following = (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return following - dt.timedelta(days=1)


def _date_of(match: re.Match[str]) -> dt.date | None:
    try:
        return dt.date(int(match["year"]), _MONTHS[match["month"].lower()], int(match["day"]))
    except ValueError:
        return None


def answer_spans(answer: str) -> list[Span]:
    """The days, months or years an answer names (empty: it names none)."""
    spans: list[Span] = []
    taken: list[tuple[int, int]] = []
    for pattern in (_DAY_FIRST, _MONTH_FIRST):
        for match in pattern.finditer(answer):
            day = _date_of(match)
            if day is None:
                continue
            taken.append(match.span())
            spans.append(Span(day, day))
            relative = _RELATIVE.search(answer[: match.start()])
            if relative:
                spans.append(_before(relative["unit"].lower(), day))
    for match in _MONTH_YEAR.finditer(answer):
        if any(s <= match.start() < e for s, e in taken):
            continue
        first = dt.date(int(match["year"]), _MONTHS[match["month"].lower()], 1)
        taken.append(match.span())
        spans.append(Span(first, _month_end(first)))
    for match in _YEAR.finditer(answer):
        if any(s <= match.start() < e for s, e in taken):
            continue
        year = int(match["year"])
        spans.append(Span(dt.date(year, 1, 1), dt.date(year, 12, 31)))
    return spans


def _before(unit: str, day: dt.date) -> Span:
    """The day or week "the <unit> before ``day``" names."""
    if unit == "day":
        return Span(day - dt.timedelta(days=1), day - dt.timedelta(days=1))
    if unit == "week":
        monday = day - dt.timedelta(days=day.weekday() + 7)
        return Span(monday, monday + dt.timedelta(days=6))
    if unit == "weekend":
        saturday = day - dt.timedelta(days=(day.weekday() - 5) % 7 or 7)
        return Span(saturday, saturday + dt.timedelta(days=1))
    target = _WEEKDAYS.index(unit)
    back = (day.weekday() - target) % 7 or 7
    return Span(day - dt.timedelta(days=back), day - dt.timedelta(days=back))


def _stem(word: str) -> str:
    return word[:5]


def content_words(text: str, names: Iterable[str] = ()) -> frozenset[str]:
    """The question's words that say what it is about (stemmed; names and stop words out)."""
    left_out = _STOP | {n.lower() for n in names}
    return frozenset(
        _stem(w) for w in _WORD.findall(text.lower()) if w not in left_out and len(w) > 2
    )


def with_fact(line: str, wanted: frozenset[str]) -> bool:
    """Whether ``line`` shares enough of ``wanted`` (two words, or all when fewer)."""
    found = {_stem(w) for w in _WORD.findall(line.lower())}
    return len(wanted & found) >= min(2, len(wanted))


@dataclass
class Tally:
    asked: int = 0
    dated: int = 0
    with_fact: int = 0


def _memory_bullets(text: str) -> list[tuple[str, str, str]]:
    """MEMORY.md's bullets as (section, bullet, day): the day of the nearest day heading
    that encloses the bullet, by level (``## 2023-05-08`` over ``### Decisions``, or
    ``### 2023-05-08`` under ``## Facts``), the section of the nearest other heading
    ("Facts" for a bullet right under a day)."""
    enclosing: list[tuple[int, str]] = []
    found: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            while enclosing and enclosing[-1][0] >= level:
                enclosing.pop()
            enclosing.append((level, line.lstrip("#").strip()))
        elif line.lstrip().startswith("- "):
            days = [w for _, w in enclosing if _ISO.fullmatch(w)]
            sections = [w for level, w in enclosing if level > 1 and not _ISO.fullmatch(w)]
            found.append((sections[-1] if sections else "Facts", line, days[-1] if days else ""))
    return found


def memory_lines(root: Path) -> tuple[list[str], list[str]]:
    """The fact lines of memory (MEMORY.md and the daily logs, archived ones too; headings
    and old versions left out), and MEMORY.md's bullets, each with the day heading it is
    under ("## 2023-05-08") appended, so that a bullet carries its date."""
    lines: list[str] = []
    bullets: list[str] = []
    memory = root / "MEMORY.md"
    if memory.exists():
        for _, line, day in _memory_bullets(memory.read_text(encoding="utf-8")):
            bullets.append(f"{line} [{day}]" if day else line)
        lines += bullets
    for log in sorted((root / "memory").rglob("*.md")):
        if any(part.startswith(".") for part in log.relative_to(root).parts):
            continue  # .history (old MEMORY.md versions) is no part of memory as it is now
        lines += log.read_text(encoding="utf-8").splitlines()
    # Headings say when a flush ran, not when anything happened: facts only.
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")], bullets


def dated_share(bullets: list[str]) -> float:
    return sum(1 for b in bullets if _ISO.search(b)) / len(bullets) if bullets else 0.0


def date_tokens(root: Path) -> tuple[int, int]:
    """MEMORY.md's tokens as it is, and the same facts as MEMORY.md would hold them without
    dates (under their sections, no day headings, no stamps): what the dates cost in every
    system prompt."""
    from harnessmem.tokens import TokenCounter

    path = root / "MEMORY.md"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    sections: dict[str, list[str]] = {}
    for section, line, _ in _memory_bullets(text):
        sections.setdefault(section, []).append(_STAMP.sub("", line))
    title = [line for line in text.splitlines()[:1] if line.startswith("# ")]
    bare_text = "\n\n".join(
        title + [f"## {name}\n" + "\n".join(lines) for name, lines in sections.items()]
    )
    counter = TokenCounter()
    return counter.count_text(text), counter.count_text(bare_text + "\n" if bare_text else "")


def _replay(path: Path, sample: int | None, workspace: Path, keep_dates: bool) -> str:
    from harnessmem import MemoryHarness
    from harnessmem.replay import ReplayClock, read_transcript, replay

    loaded = read_transcript(path, sample=sample)
    clock = ReplayClock()
    with MemoryHarness.open(
        workspace, clock=clock, maintenance={"enabled": False}, plugins={"autoload": False}
    ) as harness:
        replay(
            harness,
            loaded.messages,
            session_id=loaded.conversation or path.stem,
            clock=clock,
            keep_dates=keep_dates,
        )
    return loaded.conversation or path.stem


def evaluate(
    samples: list[dict[str, Any]], tmp: Path
) -> tuple[Tally, list[float], list[str], list[tuple[int, int]]]:
    """Replay each sample and score its temporal questions."""
    tally = Tally()
    shares: list[float] = []
    misses: list[str] = []
    tokens: list[tuple[int, int]] = []
    for number, sample in enumerate(samples):
        root = tmp / f"conv-{number}" / "workspace"
        _replay(DATA, number, root, keep_dates=True)
        lines, bullets = memory_lines(root)
        shares.append(dated_share(bullets))
        tokens.append(date_tokens(root))
        conversation = sample["conversation"]
        names = {conversation.get("speaker_a", ""), conversation.get("speaker_b", "")}
        for qa in sample["qa"]:
            if qa.get("category") != 2:
                continue
            spans = answer_spans(str(qa.get("answer", "")))
            if not spans:
                continue
            tally.asked += 1
            wanted = content_words(qa["question"], names)
            holding = [line for line in lines if any(s.held_by(line) for s in spans)]
            tally.dated += bool(holding)
            if any(with_fact(line, wanted) for line in holding):
                tally.with_fact += 1
            else:
                misses.append(f"{sample['sample_id']}: {qa['question']} -> {qa['answer']}")
    return tally, shares, misses, tokens


def _example_share(tmp: Path) -> tuple[float, tuple[int, int]]:
    from harnessmem.examples import example_path

    root = tmp / "example" / "workspace"
    _replay(example_path(), None, root, keep_dates=False)
    return dated_share(memory_lines(root)[1]), date_tokens(root)


def run(quick: bool) -> list[Row]:
    """Temporal answers whose date is in memory, and MEMORY.md bullets that carry a date."""
    try:
        samples = json.loads(DATA.read_text(encoding="utf-8"))
    except FileNotFoundError:
        print(f"bench temporal: skipped, LoCoMo data missing ({DATA})", file=sys.stderr)
        return []
    if quick:
        samples = samples[:1]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-temporal-") as tmp:
        tally, shares, misses, tokens = evaluate(samples, Path(tmp))
        example, example_tokens = _example_share(Path(tmp))
    seconds = time.perf_counter() - started
    for miss in misses[:15]:
        print(f"  bench temporal miss: {miss}", file=sys.stderr)
    asked = max(1, tally.asked)
    note = (
        f"{tally.asked} temporal questions of {len(samples)} LoCoMo dev conversation(s) whose "
        f"answer names a day, month or year; replays took {seconds:.0f} s"
    )
    return [
        Row(
            "temporal",
            "answer's date in a fact line of memory (issue 33's measure; 0 on main at c5e8275)",
            round(tally.dated / asked, 3),
            "share",
            notes=f"{tally.dated} of {tally.asked}; {note}",
        ),
        Row(
            "temporal",
            "answer's date in a line that also names the fact (two question words)",
            round(tally.with_fact / asked, 3),
            "share",
            notes=f"{tally.with_fact} of {tally.asked}",
        ),
        Row(
            "temporal",
            "MEMORY.md bullets with a date, LoCoMo conversations (lowest)",
            round(min(shares), 3) if shares else 0.0,
            "share",
            notes="per conversation: " + ", ".join(f"{s:.2f}" for s in shares),
        ),
        Row(
            "temporal",
            "MEMORY.md bullets with a date, the bundled example",
            round(example, 3),
            "share",
        ),
        Row(
            "temporal",
            "MEMORY.md tokens with its dates, LoCoMo conversations (all)",
            sum(t[0] for t in tokens),
            "tokens",
            baseline="the same facts without dates",
            baseline_value=sum(t[1] for t in tokens),
            notes="per conversation: " + ", ".join(f"{a} vs {b}" for a, b in tokens),
        ),
        Row(
            "temporal",
            "MEMORY.md tokens with its dates, the bundled example",
            example_tokens[0],
            "tokens",
            baseline="the same facts without dates",
            baseline_value=example_tokens[1],
        ),
    ]
