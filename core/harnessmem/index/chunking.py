"""Chunkers: memory files cut into :class:`~harnessmem.backends.base.IndexEntry` units.

See :mod:`harnessmem.index` for what is indexed and how entries carry their context.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Sequence
from itertools import islice, repeat
from typing import Any

from harnessmem.backends.base import EntryColumns, IndexEntry
from harnessmem.layout import daily_log_date

__all__ = [
    "MAX_ENTRY_CHARS",
    "MAX_STORED_CHARS",
    "EntryColumns",
    "chunk_markdown",
    "chunk_session_log",
]

#: An entry grows line by line up to about this size; a longer paragraph is split at a
#: line boundary, so one hit never floods an agent's context.
MAX_ENTRY_CHARS = 2_000
#: What a single enormous line keeps in the index (the file keeps it all; memory_get reads it).
MAX_STORED_CHARS = 8_000


# An ATX heading: its opening hashes, then blank or the words (see _heading_words).
_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
_CLOSING = re.compile(r"[ \t]+#+$")  # "## Title ##": the trailing hashes are not words
_BULLET = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_RULE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_ISO_DATE = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")
# The seed's headings of flushed and saved facts: a date and a boundary, not a topic.
_LOG_HEADING = re.compile(r"^Memory (?:Flush|Save)\b", re.IGNORECASE)
# Builds a named tuple without the keyword-argument layer of its __new__ (half the cost).
_tuple_new = tuple.__new__
# Characters that can open a heading, bullet, fence or rule; other lines skip the regexes.
_MARKUP_START = frozenset("#-*+_`~0123456789 \t")
_GAP = frozenset(" \t")  # what follows a bullet marker
_BREAK = {"-": "- \t", "*": "* \t"}  # what a thematic break of that marker consists of
# First characters of a blank line (str.isspace()); other lines skip that call.
_BLANK = frozenset(c for c in map(chr, range(0x3000 + 1)) if c.isspace())
# Two or more one-line bullets in a row, none a thematic break ("- - -") nor long enough
# to be cut: all but the last are whole entries, cut without the line loop.
_BULLET_RUN = re.compile(
    r"^(?:(?!-(?:[ \t]*-){2,}[ \t]*$)(?!\*(?:[ \t]*\*){2,}[ \t]*$)"
    rf"[-*+][ \t][^\n]{{0,{MAX_STORED_CHARS - 2}}}\n){{2,}}",
    re.MULTILINE,
)


def _heading_words(rest: str) -> str:
    """The words of a heading from what follows its hashes, closing hashes dropped.

    Two plain steps rather than one regex with a lazy group, which backtracked at
    every character of every heading.
    """
    words = rest.lstrip(" \t").rstrip(" \t")
    if words.endswith("#") and (closing := _CLOSING.search(words)):
        words = words[: closing.start()]
    return words.strip()


def _bullet_runs(text: str, lines: list[str]) -> dict[int, int]:
    """First line number -> length of each run of ``_BULLET_RUN`` in ``text``.

    Empty unless ``lines`` (``text.splitlines()``) breaks exactly at the newlines of
    ``text``: another line break (CR, form feed, U+2028, ...) would shift the numbers.
    """
    if "\r" in text:
        return {}
    runs: dict[int, int] = {}
    number, position = 1, 0
    count = text.count
    for match in _BULLET_RUN.finditer(text):
        start, end = match.span()
        number += count("\n", position, start)
        runs[number] = length = count("\n", start, end)
        number += length
        position = end
    number += count("\n", position)
    # One more line when the text does not end with a line break.
    if len(lines) != number - 1 + (not text.endswith("\n")):
        return {}
    return runs


def chunk_markdown(path: str, text: str) -> EntryColumns:
    """Entries of a Markdown memory file: bullets, paragraphs and code blocks, in file order.

    A bullet runs until the next bullet, heading, rule or blank line (its continuation
    lines included); a paragraph runs until a blank line; both are split at a line
    boundary beyond ``MAX_ENTRY_CHARS``. Headings are not entries: they become the
    ``context`` of the entries below them and start a new ``section``.

    One pass with local state (a rebuild of 100,000 bullets spends a fifth of its time
    here): a run of one-line bullets, the bulk of a daily log, is found by one regex scan
    and added to the columns with ``map``; another one-line bullet is handled inline.
    """
    file_date = daily_log_date(path, archived=None)
    entries = EntryColumns(path)
    starts, ends, contents = entries.starts, entries.ends, entries.contents
    contexts, dates, sections = entries.contexts, entries.dates, entries.sections
    headings: list[tuple[int, str, str | None]] = []  # level, context words, date
    section = 0
    context = ""
    date = file_date

    def flush(lines: list[str], first: int) -> None:
        content = lines[0].strip() if len(lines) == 1 else "\n".join(lines).strip()
        if content:
            if len(content) > MAX_STORED_CHARS:
                content = content[: MAX_STORED_CHARS - 1] + "…"
            starts.append(first)
            ends.append(first + len(lines) - 1)
            contents.append(content)
            contexts.append(context)
            dates.append(date)
            sections.append(section)

    # The open entry is ``single`` (a one-line bullet, not yet in a list) or ``buf``.
    single: str | None = None
    buf: list[str] = []
    start = size = 0
    fence: str | None = None
    lines = text.splitlines()
    runs = _bullet_runs(text, lines)
    numbered = enumerate(lines, 1)
    for number, line in numbered:
        if fence is not None:  # inside a code block everything belongs to it
            buf.append(line)
            if line.lstrip().startswith(fence):
                flush(buf, start)
                buf, fence = [], None
            continue
        if not line:
            lead = ""
        else:
            lead = line[0]
            if lead in "-*+" and line[1:2] in _GAP:
                if single is not None:
                    content = single.strip()
                    if len(content) > MAX_STORED_CHARS:
                        content = content[: MAX_STORED_CHARS - 1] + "…"
                    starts.append(start)
                    ends.append(start)
                    contents.append(content)
                    contexts.append(context)
                    dates.append(date)
                    sections.append(section)
                elif buf:
                    flush(buf, start)
                    buf = []
                # "- - -" is a thematic break, not a bullet.
                if lead != "+" and line.count(lead) >= 3 and not line.lstrip(_BREAK[lead]):
                    single = None
                    continue
                run = runs.get(number, 0)
                if run:  # all but the run's last line are entries of one line each
                    numbers = range(number, number + run - 1)
                    starts += numbers
                    ends += numbers
                    contents += map(str.strip, lines[number - 1 : number + run - 2])
                    contexts += repeat(context, run - 1)
                    dates += repeat(date, run - 1)
                    sections += repeat(section, run - 1)
                    next(islice(numbered, run - 2, run - 2), None)  # on to that last line
                    single = None
                    continue
                single, start = line, number
                continue
        if single is not None:  # anything else continues or closes the one-line bullet
            buf, size, single = [single], len(single) + 1, None
        if not lead or (lead in _BLANK and line.isspace()):
            if buf:
                flush(buf, start)
                buf = []
            continue
        if lead in _MARKUP_START:
            if match := _HEADING.match(line):
                if buf:
                    flush(buf, start)
                    buf = []
                level, words = len(match.group(1)), _heading_words(line[match.end(1) :])
                while headings and headings[-1][0] >= level:
                    headings.pop()
                dated = _ISO_DATE.search(words)
                shown = "" if _LOG_HEADING.match(words) else words
                headings.append((level, shown, dated.group(1) if dated else None))
                section += 1
                context = " > ".join(h[1] for h in headings if h[1])
                if file_date is None:
                    date = next((h[2] for h in reversed(headings) if h[2]), None)
                continue
            if match := _FENCE.match(line):
                if buf:
                    flush(buf, start)
                buf, start, fence = [line], number, match.group(1)
                continue
            if _RULE.match(line):
                if buf:
                    flush(buf, start)
                    buf = []
                continue
            if _BULLET.match(line) and buf:  # an indented or numbered bullet starts anew
                flush(buf, start)
                buf = []
        # Plain text continues the current entry, up to about MAX_ENTRY_CHARS.
        if buf and size + len(line) > MAX_ENTRY_CHARS:
            flush(buf, start)
            buf = []
        if not buf:
            start, size = number, 0
        buf.append(line)
        size += len(line) + 1
    if single is not None:
        buf = [single]
    if buf:
        flush(buf, start)
    if file_date is None:
        _stamped_dates(contents, dates)
    return entries


#: The date stamp consolidation ends a MEMORY.md bullet with: `` (2026-11-29)``.
_STAMP = re.compile(r"\((\d{4}-\d{2}-\d{2})\)\s*$")


def _stamped_dates(contents: list[str], dates: list[str | None]) -> None:
    """Give an entry of a file that is not a daily log the date of its stamp, when it
    ends with one (a MEMORY.md fact, "- Ana prefers aisle seats (2026-11-29)"): the
    day it was learned, which ``since``/``until`` then find and hits show."""
    for index, content in enumerate(contents):
        if content.endswith(")") and (stamp := _STAMP.search(content[-14:])):
            dates[index] = stamp.group(1)


def _message_text(message: dict[str, Any]) -> str:
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            parts.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    role = message.get("role")
    name = message.get("name")
    label = f"{role} {name}" if isinstance(name, str) and name else role
    text = "\n".join(p for p in parts if p)
    return f"{label}: {text}" if isinstance(label, str) and label else text


#: Keys of a message's own time, as transcripts carry it.
_MESSAGE_TIME_KEYS = ("timestamp", "created_at", "time", "created")
#: Keys of a session log record's times, the best first: when the message was said (as
#: the session saw it), then when it was offloaded; then those of a bare message line.
_RECORD_TIME_KEYS = ("said", "ts", *_MESSAGE_TIME_KEYS)


def _stamp_date(value: Any, zone: dt.tzinfo) -> str | None:
    """The day of a timestamp in ``zone``: an ISO text with an offset is converted, one
    without is taken as written; a number is seconds since the epoch."""
    if isinstance(value, str):
        if (match := _ISO_DATE.match(value)) is None:
            return None
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            return match.group(1)
        return moment.astimezone(zone).date().isoformat() if moment.tzinfo else match.group(1)
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return dt.datetime.fromtimestamp(value, zone).date().isoformat()
        except (OverflowError, OSError, ValueError):
            return None
    return None


def _first_date(record: dict[str, Any], keys: Sequence[str], zone: dt.tzinfo) -> str | None:
    for key in keys:
        if key in record and (date := _stamp_date(record[key], zone)) is not None:
            return date
    return None


def _record_date(record: dict[str, Any], zone: dt.tzinfo) -> str | None:
    """The day a logged message was said: its own timestamp, else the record's."""
    inner = record.get("message")
    if isinstance(inner, dict) and (date := _first_date(inner, _MESSAGE_TIME_KEYS, zone)):
        return date
    return _first_date(record, _RECORD_TIME_KEYS, zone)


def chunk_session_log(path: str, text: str, timezone: str = "UTC") -> list[IndexEntry]:
    """One entry per message of a JSONL session log: ``role: text`` plus tool calls.

    A line holds a message, or a record with the message under ``message``; a line that
    is not JSON is indexed as it is. All messages form one section, so that an answer
    is a neighbour of the question before it. An entry's date is the day (in
    ``timezone``) the message was said: its own timestamp when it carries one, else the
    record's ``said``, else when it was offloaded (``ts``).
    """
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(timezone)
    entries: list[IndexEntry] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        date = None
        try:
            record = json.loads(line)
        except ValueError:
            content = line
        else:
            if isinstance(record, dict):
                date = _record_date(record, zone)
                inner = record.get("message")
                message = inner if isinstance(inner, dict) else record
                content = _message_text(message) if "role" in message else line
            else:
                content = line
        content = content.strip()
        if len(content) > MAX_STORED_CHARS:
            content = content[: MAX_STORED_CHARS - 1] + "…"
        if content:
            entries.append(IndexEntry(path, number, number, content, "", date, 0))
    return entries
