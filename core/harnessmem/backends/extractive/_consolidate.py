"""The offline consolidation: a daily log's facts merged into MEMORY.md, each under the day
it was learned, within a token budget; a fact a newer one replaces leaves it."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harnessmem.backends.extractive._filters import DECISION, PREFERENCE
from harnessmem.backends.extractive._replacement import record_fields, replaces
from harnessmem.backends.extractive._text import (
    MARKDOWN_HEADING,
    is_bullet,
    near_duplicate,
    strip_bullet,
    term_set,
)

_KEY_VALUE = re.compile(r"^(?P<key>[^:]{2,40}):\s+\S")
_POSSESSIVE_VALUE = re.compile(
    r"^(?P<key>(?:[\w .-]{1,30}?'s?|the user's|my)\s+[a-z][\w -]{0,30}?)\s+(?:is|are)\s+\S", re.I
)


def _fact_key(text: str) -> str | None:
    """The attribute a fact sets (``"ana's email"``, ``"deadline"``), if it reads as one; a
    record's are its fields ("the user's reservation details: baggage, cabin class")."""
    fields = record_fields(text)
    if fields:
        labels = sorted(" ".join(sorted(label)) for label in fields)
        return f"{text.partition(':')[0].casefold()}: {', '.join(labels)}"
    for pattern in (_POSSESSIVE_VALUE, _KEY_VALUE):
        match = pattern.match(text)
        if match:
            return " ".join(match.group("key").casefold().split())
    return None


#: The section of a fact that is none of the others: in the day-first layout its bullets
#: sit right under the day's heading.
FACTS = "Facts"


def _category(text: str) -> str:
    if PREFERENCE.search(text) or re.search(r"\b(?:likes|loves|prefers|enjoys|hates)\b", text):
        return "Preferences"
    if DECISION.search(text) or re.search(r"\b(?:decided|chose|agreed)\b", text, re.I):
        return "Decisions"
    return FACTS


@dataclass
class _Cluster:
    text: str
    section: str
    terms: frozenset[str]
    key: str | None
    count: int
    first: int
    last: int
    date: str | None = None


#: The date stamp a MEMORY.md fact ends with: the day it was learned.
STAMP = re.compile(r"\s\((?P<date>\d{4}-\d{2}-\d{2})\)\s*$")
_DAY = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")
#: A heading that is a day: the facts under it were learned that day.
_DATE_HEADING = re.compile(r"\d{4}-\d{2}-\d{2}$")
#: A memory_save's heading in MEMORY.md: its facts were learned on its (UTC) day.
_SAVE_HEADING = re.compile(r"Memory Save — (\d{4}-\d{2}-\d{2})")


def split_stamp(fact: str) -> tuple[str, str | None]:
    """``("Staging listens on 6432", "2026-11-20")`` from ``"Staging listens on 6432
    (2026-11-20)"``; the fact as it is and None without a stamp."""
    match = STAMP.search(fact)
    if match is None:
        return fact, None
    return fact[: match.start()].rstrip(), match.group("date")


def _memory_lines(text: str) -> tuple[str | None, list[tuple[str | None, str, str | None]]]:
    """A MEMORY.md as its title and ``(section, fact, date)`` triples: a fact's date is
    its own stamp, else that of the nearest day heading above it that encloses it
    (``## 2026-11-20`` over ``### Decisions``, or ``### 2026-11-20`` under ``## Facts``;
    a ``## Memory Save — <time>`` heading gives its day too)."""
    title: str | None = None
    # The headings that enclose the next line: (level, section or None, day or None).
    open_headings: list[tuple[int, str | None, str | None]] = []
    facts: list[tuple[str | None, str, str | None]] = []
    for line in text.splitlines():
        heading = MARKDOWN_HEADING.match(line)
        if heading:
            level, words = len(heading.group(1)), heading.group(2).strip()
            if level == 1 and title is None and not facts:
                title = line.strip()
                continue
            while open_headings and open_headings[-1][0] >= level:
                open_headings.pop()
            if _DATE_HEADING.match(words):
                open_headings.append((level, None, words[:10]))
            elif saved := _SAVE_HEADING.match(words):
                open_headings.append((level, None, saved.group(1)))
            else:
                open_headings.append((level, words, None))
            continue
        if line.strip():
            section = next((h[1] for h in reversed(open_headings) if h[1]), None)
            day = next((h[2] for h in reversed(open_headings) if h[2]), None)
            fact, date = split_stamp(strip_bullet(line))
            facts.append((section, fact, date or day))
    return title, facts


def _entry_facts(text: str) -> list[tuple[str, str | None]]:
    """The facts of daily-log entries with the day each was learned: bullets and plain
    lines; headings and NO_REPLY skipped. The day is the log's, from the ``### <path>``
    line the request puts before each log's text, else from the entry's heading."""
    facts: list[tuple[str, str | None]] = []
    date: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        heading = MARKDOWN_HEADING.match(stripped)
        if heading:
            day = _DAY.search(heading.group(2))
            if day is not None and (len(heading.group(1)) == 3 or date is None):
                date = day.group(1)  # the log's path; else the entry's own time
            continue
        if not stripped or stripped.startswith("```"):
            continue
        if re.match(r"^no[\s_-]?reply\b", stripped.strip("'\"`*_"), re.I):
            continue
        if stripped.startswith(("<!--", "&lt;")):
            continue
        fact = strip_bullet(stripped) if is_bullet(stripped) else stripped
        if fact:
            fact, own = split_stamp(fact)
            facts.append((fact, own or date))
    return facts


def consolidate(
    memory: str,
    entries: str,
    *,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
    threshold: float,
) -> str:
    """The new MEMORY.md: ``memory`` merged with ``entries``, within ``budget_tokens``.

    Every fact keeps the day it was learned: the facts are grouped under one
    ``## 2026-11-20`` heading a day, other sections than Facts as ``### Decisions`` inside
    it (the older layout, ``### 2026-11-20`` under each section, and a bullet's own stamp,
    ``- fact (2026-11-20)``, are read as well); merging a restated fact keeps the newer
    wording and its day. A newer entry that replaces an older fact (:func:`replaces`)
    retires it: it leaves MEMORY.md (the daily logs and ``.history`` keep it)."""
    title, old = _memory_lines(memory)
    clusters: list[_Cluster] = []
    items = [(section, fact, date, True) for section, fact, date in old]
    items += [(None, fact, date, False) for fact, date in _entry_facts(entries)]
    for order, (section, fact, date, from_memory) in enumerate(items):
        found = term_set(fact)
        key = _fact_key(fact)
        match = next(
            (c for c in clusters if near_duplicate(found, c.terms, threshold)), None
        ) or next((c for c in clusters if key is not None and c.key == key), None)
        if match is None:
            if not from_memory:
                # What this newer fact replaces leaves the current facts.
                clusters = [c for c in clusters if not replaces(fact, c.text)]
            clusters.append(
                _Cluster(fact, section or _category(fact), found, key, 1, order, order, date)
            )
            continue
        match.count += 1
        match.last = order
        if not from_memory:  # the newer wording (or value) wins, with its day
            match.text, match.terms, match.key = fact, found, key
            match.date = date or match.date

    def render(kept: Sequence[_Cluster]) -> str:
        # Day first: one "## 2026-11-20" heading a day (oldest first), its facts under it
        # and the facts of other sections under "### Decisions" and the like; undated facts
        # before the days, under their sections. A heading per day and section (or a stamp
        # on each bullet, ~8 tokens) would cost more in every system prompt: 1.14x the
        # undated text on the bundled example, against 1.07x this way.
        undated: dict[str, list[str]] = {}
        days: dict[str, dict[str, list[str]]] = {}
        for cluster in sorted(kept, key=lambda c: c.first):
            bullet = f"- {cluster.text}"
            if cluster.date:
                days.setdefault(cluster.date, {}).setdefault(cluster.section, []).append(bullet)
            else:
                undated.setdefault(cluster.section, []).append(bullet)
        parts = [title] if title else []
        parts += [f"## {name}\n" + "\n".join(bullets) for name, bullets in undated.items()]
        for day in sorted(days):
            sections = days[day]
            blocks = [f"## {day}"]
            if FACTS in sections:
                blocks[0] += "\n" + "\n".join(sections[FACTS])
            blocks += [f"### {n}\n" + "\n".join(b) for n, b in sections.items() if n != FACTS]
            parts.append("\n\n".join(blocks))
        return "\n\n".join(parts) + "\n" if parts else ""

    total = max(1, len(items))
    kept = list(clusters)

    def keep_score(cluster: _Cluster) -> float:
        return 1.5 * math.log2(1 + cluster.count) + 2.0 * cluster.last / total

    text = render(kept)
    if count_tokens(text) <= budget_tokens:
        return text
    cost = {id(c): count_tokens(c.text) + 2 for c in kept}
    used = sum(cost.values())
    for cluster in sorted(kept, key=lambda c: (keep_score(c), c.last)):
        if used <= budget_tokens * 0.95:
            break
        kept.remove(cluster)
        used -= cost[id(cluster)]
    text = render(kept)
    while kept and count_tokens(text) > budget_tokens:
        kept.remove(min(kept, key=lambda c: (keep_score(c), c.last)))
        text = render(kept)
    return text
