"""Where a fact came from: a MEMORY.md line, the daily-log entries, the messages as said.

Memory is written in three steps, and each leaves its trace in the workspace:

1. the flush writes a fact as a bullet of ``memory/YYYY-MM-DD.md`` under a heading that
   says when and from which session (``## Memory Flush — 2026-12-03T09:13:35Z · session
   tidewater-week``);
2. compaction logs the messages it takes out of the context in
   ``sessions/<id>.log.jsonl``, with the time each was said;
3. consolidation writes the fact into MEMORY.md, under the day it was learned.

:class:`FactTracer` walks them back. Given a MEMORY.md line (``"MEMORY.md:12"``) or the
words of a fact, it finds the MEMORY.md bullets that hold those words, then for each the
daily-log entries that say it (the log of its day first, then what the index finds), then
in each entry's session log the messages, said before that flush, whose words the entry
holds. Matching is by shared content words (stemmed, dates and "the user" aside), so a
fact reworded by the flush ("The user is Maya" from "I'm Maya") is still found.

What cannot be traced is said, not guessed: a fact saved by hand has no session; the
messages a flush read are logged only once compaction takes them out of the context, so
the last part of a session that was never compacted has no log lines yet.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harnessmem import layout
from harnessmem.memory import files as mf
from harnessmem.messages import content_text

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel

__all__ = ["FactTrace", "FactTracer", "LoggedFact", "SaidMessage", "TraceError"]

#: Share of a fact's content words an entry must hold to be where it came from.
ENTRY_SHARE = 0.6
#: Share of an entry's content words a message must hold to be where it was said.
MESSAGE_SHARE = 0.5

_LINE_REF = re.compile(r"^\s*MEMORY\.md:(\d+)\s*$", re.I)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_ISO_DAY = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_DAILY = re.compile(r"^memory/(?:.+/)?\d{4}-\d{2}-\d{2}\.md$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


class TraceError(ValueError):
    """The text to trace has nothing to look for, or names a MEMORY.md line that is not a fact."""


@dataclass(frozen=True)
class SaidMessage:
    """A message of a session log that holds a logged fact's words."""

    path: str  #: the session log, ``sessions/<id>.log.jsonl``
    line: int  #: its line there (what ``harness.get`` takes as ``start_line``)
    role: str
    said: str | None  #: when it was said (ISO 8601, UTC), when known
    quote: str  #: the sentences of the message that hold the fact's words
    share: float  #: the share of the fact's words the message holds


@dataclass(frozen=True)
class LoggedFact:
    """A daily-log entry that says the fact, and the messages it was taken from."""

    path: str  #: ``memory/YYYY-MM-DD.md``
    line: int
    text: str  #: the bullet as the flush (or a save) wrote it
    written: str | None  #: when the flush or save wrote it (its heading's time)
    session_id: str | None  #: the session it was flushed from (None for a save)
    share: float  #: the share of the fact's words the entry holds
    messages: tuple[SaidMessage, ...] = ()
    note: str = ""  #: why no message is listed, when none is


@dataclass(frozen=True)
class FactTrace:
    """One fact of memory, traced back to where it was learned."""

    fact: str  #: the fact traced: a MEMORY.md bullet, or the text asked about
    line: int | None  #: its line in MEMORY.md (None: not in MEMORY.md)
    date: str | None  #: the day MEMORY.md files it under (learned, or about)
    entries: tuple[LoggedFact, ...] = ()
    note: str = ""  #: why no entry is listed, when none is

    def lines(self) -> Iterator[str]:
        """The trace as text, one line at a time (what ``harnessmem why`` prints)."""
        where = f"MEMORY.md:{self.line}" if self.line is not None else "not in MEMORY.md"
        yield f"{where}{f' · {self.date}' if self.date else ''}"
        yield f"  {self.fact}"
        if self.note:
            yield f"  ({self.note})"
        for entry in self.entries:
            origin = f"session {entry.session_id}" if entry.session_id else "saved by hand"
            written = f" · {entry.written}" if entry.written else ""
            yield f"  <- {entry.path}:{entry.line}{written} · {origin}"
            yield f"       {entry.text}"
            if entry.note:
                yield f"       ({entry.note})"
            for message in entry.messages:
                said = f" · said {message.said}" if message.said else ""
                yield f"       <- {message.path}:{message.line} · {message.role}{said}"
                yield f"            “{message.quote}”"


@dataclass
class _Files:
    """Workspace texts read once per trace (a missing file reads as None)."""

    read: Callable[[str], str]
    texts: dict[str, str | None] = field(default_factory=dict)

    def __call__(self, path: str) -> str | None:
        if path not in self.texts:
            try:
                self.texts[path] = self.read(path)
            except FileNotFoundError:
                self.texts[path] = None
        return self.texts[path]


def _terms(text: str) -> frozenset[str]:
    """A fact's content words, without its days and without "the user" (a flush writes
    "The user ..." for "I ...")."""
    from harnessmem.backends.extractive import term_set

    return term_set(_ISO_DAY.sub(" ", text)) - _GENERIC


def _share(part: frozenset[str], whole: frozenset[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def _bullet_text(line: str) -> str:
    return _BULLET.sub("", line, count=1).strip()


class FactTracer:
    """Traces facts back to their daily-log entries and session messages (a component:
    use ``harness.trace(...)``)."""

    def __init__(self, services: Kernel) -> None:
        self.kernel = services

    def trace(self, text: str, *, limit: int = 3) -> list[FactTrace]:
        """The MEMORY.md facts that ``text`` names (a line, ``"MEMORY.md:12"``, or the words
        of a fact), best first and at most ``limit``, each traced to its sources; when no
        MEMORY.md fact holds the words, one trace of ``text`` itself through the daily logs.

        Raises :class:`TraceError` when ``text`` has no word to look for or names a line of
        MEMORY.md that holds no fact.
        """
        if limit <= 0:
            raise ValueError(f"trace limit must be positive, got {limit}")
        files = _Files(self.kernel.workspace.read_text)
        memory = files(layout.MEMORY_FILE) or ""
        reference = _LINE_REF.match(text)
        if reference:
            facts = [self._memory_line(memory, int(reference.group(1)))]
        else:
            wanted = _terms(text)
            if not wanted:
                raise TraceError(f"nothing to trace in {text!r}: it has no content word")
            facts = self._memory_facts(memory, wanted, limit)
        if not facts:
            return [self._trace(files, text.strip(), None, None)]
        return [self._trace(files, fact, number, day) for fact, number, day in facts]

    # -- MEMORY.md --------------------------------------------------------------------

    @staticmethod
    def _dated_bullets(memory: str) -> Iterator[tuple[int, str, str | None]]:
        """(line number, fact, day) of each bullet of MEMORY.md; the day is the bullet's
        stamp, else the day heading it is under."""
        lines = memory.splitlines()
        for number, (line, heading_day) in enumerate(
            zip(lines, mf.heading_days(lines), strict=True), 1
        ):
            if line.startswith("#") or not _BULLET.match(line):
                continue
            fact = _bullet_text(line)
            stamp = mf.DAY_STAMP.search(fact)
            if stamp:
                yield number, fact[: stamp.start()].rstrip(), stamp.group(1)
            else:
                yield number, fact, heading_day

    def _memory_line(self, memory: str, number: int) -> tuple[str, int, str | None]:
        for line, fact, day in self._dated_bullets(memory):
            if line == number:
                return fact, line, day
        lines = len(memory.splitlines())
        raise TraceError(
            f"MEMORY.md:{number} is not a fact: MEMORY.md has {lines} lines, and facts are its "
            "list items (harnessmem search shows a fact's MEMORY.md line)"
        )

    def _memory_facts(
        self, memory: str, wanted: frozenset[str], limit: int
    ) -> list[tuple[str, int, str | None]]:
        scored = []
        for number, fact, day in self._dated_bullets(memory):
            share = _share(wanted, _terms(fact))
            if share >= ENTRY_SHARE:
                scored.append((-share, number, fact, day))
        scored.sort()
        return [(fact, number, day) for _, number, fact, day in scored[:limit]]

    # -- daily logs -------------------------------------------------------------------

    def _trace(self, files: _Files, fact: str, line: int | None, day: str | None) -> FactTrace:
        wanted = _terms(fact)
        entries = [
            self._with_messages(files, entry)
            for entry in self._entries(files, fact, wanted, day)[:3]
        ]
        note = ""
        if not entries:
            note = (
                "no daily log says it: it was saved into MEMORY.md directly, or its logs "
                "were forgotten or pruned"
            )
        return FactTrace(fact, line, day, tuple(entries), note)

    def _candidates(self, fact: str, day: str | None) -> list[tuple[str, int]]:
        """(path, line) of daily-log lines that may say ``fact``: every line of its day's
        log, then the lines of the index's best hits."""
        places: list[tuple[str, int]] = []
        if day:
            places += [(f"{layout.MEMORY_DIR}/{day}.md", 0)]
        hits = self.kernel.searcher.search(fact, 20, source="memory", via="trace")
        for hit in hits:
            if _DAILY.match(hit.path):
                places += [(hit.path, n) for n in range(hit.start_line, hit.end_line + 1)]
        return places

    def _entries(
        self, files: _Files, fact: str, wanted: frozenset[str], day: str | None
    ) -> list[LoggedFact]:
        found: dict[tuple[str, int], LoggedFact] = {}
        for path, number in self._candidates(fact, day):
            text = files(path)
            if text is None:
                continue
            lines = text.splitlines()
            numbers = range(1, len(lines) + 1) if number == 0 else [number]
            for at in numbers:
                if (path, at) in found or at > len(lines) or not _BULLET.match(lines[at - 1]):
                    continue
                said = _bullet_text(lines[at - 1])
                share = _share(wanted, _terms(said))
                if share >= ENTRY_SHARE:
                    written, session = _heading_above(lines, at)
                    found[path, at] = LoggedFact(path, at, said, written, session, share)
        # The best match first; among equals the earliest, where the fact was first learned.
        return sorted(found.values(), key=lambda e: (-e.share, e.path, e.line))

    # -- session logs -----------------------------------------------------------------

    def _with_messages(self, files: _Files, entry: LoggedFact) -> LoggedFact:
        from dataclasses import replace

        if entry.session_id is None:
            return replace(entry, note="saved by hand or by the agent's memory_save: no session")
        path = layout.session_log_path(entry.session_id)
        text = files(path)
        if text is None:
            return replace(
                entry,
                note=f"{path} does not exist: that session's messages were never compacted "
                "(only the messages compaction takes out of the context are logged)",
            )
        messages = _said(path, text, _terms(entry.text), entry.written)
        if not messages:
            return replace(
                entry,
                note=f"no message of {path} said before this flush holds its words: they were "
                "still in the context, not logged yet",
            )
        return replace(entry, messages=tuple(messages))


def _heading_above(lines: Sequence[str], number: int) -> tuple[str | None, str | None]:
    """(when, session id) of the daily-log heading over line ``number``."""
    for line in reversed(lines[: number - 1]):
        if line.startswith("## "):
            match = mf.ENTRY_HEADING.match(line)
            if match is None:
                return None, None
            return match.group("when"), match.group("session")
    return None, None


def _said(path: str, text: str, wanted: frozenset[str], written: str | None) -> list[SaidMessage]:
    """The messages of a session log, said before ``written``, that hold most of ``wanted``:
    the best three, in the order they were said."""
    deadline = mf.parse_instant(written)
    scored: list[SaidMessage] = []
    for number, raw in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        inner = record.get("message")
        message = inner if isinstance(inner, dict) else record
        said = mf.parse_instant(message.get("timestamp")) or mf.parse_instant(record.get("said"))
        if deadline is not None and said is not None and said > deadline:
            continue
        body = content_text(message.get("content"))
        share = _share(wanted, _terms(body))
        if share >= MESSAGE_SHARE:
            when = said.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if said else None
            role = str(message.get("role", "?"))
            scored.append(SaidMessage(path, number, role, when, _quote(body, wanted), share))
    best = sorted(scored, key=lambda m: -m.share)[:3]
    return sorted(best, key=lambda m: m.line)


def _quote(body: str, wanted: frozenset[str], most: int = 400) -> str:
    """The sentences of ``body`` that hold ``wanted``'s words, in order, at most ``most``
    characters."""
    sentences = [s.strip() for s in _SENTENCE.split(body) if s.strip()]
    holding = [s for s in sentences if _terms(s) & wanted]
    quote = " ".join(holding or sentences)
    return quote if len(quote) <= most else quote[: most - 1].rstrip() + "…"


def _generic() -> frozenset[str]:
    from harnessmem.backends.extractive import term_set

    return term_set("user users assistant")


_GENERIC = _generic()
