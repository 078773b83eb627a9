"""Formats and conventions of the memory files, shared by flush, consolidation and context.

Private: the entry headings of the memory files (their paths are :mod:`harnessmem.layout`'s)
plus the text rules the writers share (what a fact line is, how two facts
compare, how a model's ``NO_REPLY`` is recognised) and the best-effort follow-ups every
write makes (reindex the file, ask maintenance to consolidate).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from harnessmem.encoding import storable
from harnessmem.prompts import strip_markers

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel

logger = logging.getLogger("harnessmem.memory")

FLUSH_HEADING = "## Memory Flush — "
SAVE_HEADING = "## Memory Save — "
#: The heading of a daily-log (or MEMORY.md save) entry: its kind, when it was written
#: (ISO UTC) and, for a flush, the session it came from.
ENTRY_HEADING = re.compile(
    r"^## (?P<kind>Memory Flush|Memory Save) — (?P<when>\S+)(?: · session (?P<session>.+))?\s*$"
)
#: A day MEMORY.md files facts under, as a heading of its own: ``### 2026-11-20``.
DAY_HEADING = re.compile(r"^#{2,6}\s+(\d{4}-\d{2}-\d{2})\s*$")
#: A fact's own day, at its end: ``- Staging listens on 6432 (2026-11-20)``.
DAY_STAMP = re.compile(r"\s\((\d{4}-\d{2}-\d{2})\)\s*$")
_ANY_HEADING = re.compile(r"^(#{1,6})\s")
_SAVED_DAY = re.compile("^" + re.escape(SAVE_HEADING) + r"(\d{4}-\d{2}-\d{2})")


def heading_level(line: str) -> int:
    """The level of a markdown heading line (``## Facts``: 2); 0 for any other line."""
    heading = _ANY_HEADING.match(line)
    return len(heading.group(1)) if heading else 0


def heading_days(lines: Sequence[str]) -> list[str | None]:
    """The day each line of a MEMORY.md falls under: that of the nearest day heading
    that encloses it, by level. ``## 2026-11-20`` encloses the ``### Decisions`` under it
    (the day-first layout), ``### 2026-11-20`` the facts up to the next ``##`` (the
    older layout); a ``## Memory Save — <time>`` heading gives its day as well."""
    enclosing: list[tuple[int, str | None]] = []
    days: list[str | None] = []
    for line in lines:
        level = heading_level(line)
        if level:
            while enclosing and enclosing[-1][0] >= level:
                enclosing.pop()
            day = DAY_HEADING.match(line) or _SAVED_DAY.match(line)
            enclosing.append((level, day.group(1) if day else None))
        days.append(next((d for _, d in reversed(enclosing) if d), None))
    return days


_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
_NO_REPLY = re.compile(r"^no[\s_-]?reply\b", re.IGNORECASE)
# How models decline a job: "I cannot help with that.", "I'm sorry, but ...", "As an AI ...".
_REFUSAL = re.compile(
    r"^(?:(?:i am|i'm) (?:sorry|afraid|unable|not able)|sorry\b|i apologi[sz]e|"
    r"unfortunately,? i\b|as an ai\b|i (?:can ?not|can't|won't|will not|must decline|"
    r"(?:am|'m) not (?:able|allowed)|do not feel comfortable|don't feel comfortable)\b)",
    re.IGNORECASE,
)
_QUOTES = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "`": "", "*": ""}
)
_WORD = re.compile(r"[^\W_]{3,}|\d+", re.UNICODE)


# ------------------------------------------------------------------------------ time


def iso_utc(timestamp: float) -> str:
    """``2026-11-30T12:00:00Z``: the instant in entry headings (always UTC)."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_instant(value: object) -> datetime | None:
    """An ISO 8601 instant (``Z`` or an offset; naive taken as UTC), or None for anything
    else."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# ------------------------------------------------------------------------------ facts


def strip_fences(text: str) -> str:
    """``text`` without Markdown code-fence lines (models like to wrap answers in them)."""
    return "\n".join(line for line in text.splitlines() if not _FENCE.match(line))


def has_bullets(text: str) -> bool:
    """Whether ``text`` holds a list item (``-``, ``*``, ``+``, ``•``, ``1.``): a model's
    answer with one is read as facts, bullet by bullet."""
    return any(_BULLET.match(line) for line in text.splitlines())


def is_no_reply(text: str) -> bool:
    """Whether a model answer means "nothing to write".

    Tolerates whitespace, quotes, emphasis, code fences, trailing punctuation, ``NO REPLY``
    / ``no-reply`` spellings and a short explanation after it, as long as the answer holds
    no fact bullets.
    """
    body = strip_fences(text).strip()
    if not body:
        return True
    if has_bullets(body):
        return False
    lines = [line for line in body.splitlines() if line.strip()]
    first = lines[0].strip().strip("'\"`*_>").strip()
    return bool(_NO_REPLY.match(first))


def is_refusal(text: str) -> bool:
    """Whether a model answer declines the job instead of doing it.

    Only an answer without bullets whose first line is an apology or a refusal ("I cannot
    help with that.", "I'm sorry, but ..."): read line by line it would become "facts".
    An answer with bullets is never one (its bullets are the facts).
    """
    body = strip_fences(text)
    lines = [line for line in body.splitlines() if line.strip()]
    if not lines or has_bullets(body):
        return False
    first = lines[0].strip().strip("'\"`*_>").strip().replace("\u2019", "'")
    return bool(_REFUSAL.match(first))


def parse_facts(text: str) -> list[str]:
    """The facts of a model answer or a Markdown entry: bullet texts, markers removed.

    When the text has bullets, only bullets count (an indented line continues the bullet
    before it; prose around the list is dropped). Without bullets, each line that is not
    a heading, a ``NO_REPLY`` or a preamble ending in ``:`` counts as one fact, unless
    the answer is a refusal (:func:`is_refusal`: then there is none). The harness's own
    notes ("[harnessmem: … left out …]", see :func:`harnessmem.prompts.strip_markers`)
    are never part of a fact.
    """
    if is_refusal(text):
        return []
    body = strip_fences(text)
    lines = body.splitlines()
    bulleted = has_bullets(body)
    facts: list[str] = []
    current = False
    for line in lines:
        stripped = line.strip()
        if not stripped or _NO_REPLY.match(stripped.strip("'\"`*_")):
            current = False
            continue
        match = _BULLET.match(line)
        if match:
            facts.append(line[match.end() :].strip())
            current = True
        elif bulleted:
            if current and line[:1].isspace():
                facts[-1] = f"{facts[-1]} {stripped}"
            else:
                current = False
        elif not stripped.startswith("#") and not stripped.endswith(":"):
            facts.append(stripped)
    return [kept for fact in facts if (kept := strip_markers(fact).strip())]


# memory_save keeps a checkbox as text (it says whether the thing is done); parse_facts's
# _BULLET drops it, which is right for a model's answer and wrong for a saved fact.
_SAVE_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_RULE = re.compile(r"^\s*([-*_])(?:\s*\1){2,}\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")


def saved_facts(text: str) -> tuple[list[str], list[str]]:
    """The facts of a ``memory_save`` text, and the lines left out, each with why.

    Unlike :func:`parse_facts`, nothing the caller wrote is dropped silently: a bullet is
    a fact (an indented line continues it), and so is every other line of prose, before,
    between or after bullets, code fences included (a fence line itself is markup, the
    lines inside are kept). Left out, and said so: Markdown headings, which name a
    section but state nothing. Blank lines, fence lines and horizontal rules are markup.
    """
    facts: list[str] = []
    left_out: list[str] = []
    current = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or _FENCE.match(line) or _RULE.match(line):
            current = current and bool(stripped)  # a blank line ends a bullet
            continue
        if _HEADING.match(line):
            left_out.append(f"{_clip(stripped)!r} (a heading, not a fact)")
            current = False
            continue
        match = _SAVE_BULLET.match(line)
        if match:
            facts.append(line[match.end() :].strip())
        elif current and line[:1].isspace():
            facts[-1] = f"{facts[-1]} {stripped}"
        else:
            facts.append(stripped)
        current = True
    return [fact for fact in facts if fact], left_out


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def normalise_fact(text: str) -> str:
    """The comparison key of a fact: case, bullet marker, emphasis, quotes, spacing and
    trailing punctuation do not count; nor does a lone surrogate, which is stored as
    U+FFFD (see :mod:`harnessmem.encoding`), so a fact compares equal to its stored copy."""
    key = unicodedata.normalize("NFKC", storable(text))
    match = _BULLET.match(key)
    if match:
        key = key[match.end() :]
    key = key.translate(_QUOTES).replace("__", "")
    key = " ".join(key.split()).casefold()
    return key.rstrip(" .;,!。")


def fact_keys(text: str) -> set[str]:
    """Normalised keys of every non-heading line of a memory file (for write-time dedup)."""
    keys = set()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keys.add(normalise_fact(stripped))
    keys.discard("")
    return keys


def significant_words(text: str) -> set[str]:
    """Lower-cased words of three or more letters and all numbers: what a fact is about."""
    return {word.casefold() for word in _WORD.findall(unicodedata.normalize("NFKC", text))}


def entry_lines(text: str) -> list[str]:
    """Content lines of a memory file that state something (not headings, not blank)."""
    found = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and not _FENCE.match(stripped):
            found.append(stripped)
    return found


def split_entries(text: str) -> list[str]:
    """A daily log cut into its entries: each starts at a ``## `` heading line.

    Text before the first heading is its own entry. Joining the result gives ``text``.
    """
    entries: list[str] = []
    start = 0
    for match in re.finditer(r"(?m)^## ", text):
        if match.start() > start:
            entries.append(text[start : match.start()])
            start = match.start()
    if start < len(text):
        entries.append(text[start:])
    return entries


def bullet_block(facts: Iterable[str]) -> str:
    """``facts`` as Markdown bullets, one line each."""
    return "\n".join(f"- {' '.join(fact.split())}" for fact in facts)


def new_facts(facts: Iterable[str], *known: str) -> list[str]:
    """``facts`` in order, each once, without those a text of ``known`` holds already
    (compared by :func:`normalise_fact`): the write-time dedup of every writer."""
    keys: set[str] = set()
    for text in known:
        keys |= fact_keys(text)
    fresh = []
    for fact in facts:
        key = normalise_fact(fact)
        if key and key not in keys:
            keys.add(key)
            fresh.append(fact)
    return fresh


def last_heading(text: str) -> str:
    """The last ``## `` heading line of ``text`` ("" when it has none)."""
    for line in reversed(text.splitlines()):
        if line.startswith("## "):
            return line
    return ""


def saved_today(current: str, now: float) -> bool:
    """Whether MEMORY.md (``current``) ends with a ``memory_save`` entry of the day of
    ``now`` (UTC, as its heading is written), so that a save may go on under it."""
    heading = last_heading(current)
    return (
        heading.startswith(SAVE_HEADING) and heading[len(SAVE_HEADING) :][:10] == iso_utc(now)[:10]
    )


def entry_text(current: str, heading: str, facts: Sequence[str]) -> str:
    """What appending an entry (``heading``, then ``facts`` as bullets) adds to a memory file
    that holds ``current``: the entry after a blank line."""
    gap = "\n" if current and not current.endswith("\n") else ""
    return f"{gap}\n{heading}\n{bullet_block(facts)}\n"


# ------------------------------------------------------------------------------ follow-ups


def reindex_paths(kernel: Kernel, paths: Sequence[str]) -> str | None:
    """Bring the index up to date after a write; the problem as text, or None when fine.

    Syncs just ``paths`` (``harness.reindex(paths=...)``). A failure is logged and
    returned, not raised, because the write itself has succeeded and must not be reported
    as failed (the next reindex catches up).
    """
    try:
        kernel.reindex(paths=list(paths))
    except Exception as exc:
        logger.warning(
            "reindexing %s after a memory write failed (%s: %s); the next reindex retries",
            ", ".join(paths),
            type(exc).__name__,
            exc,
        )
        return f"reindex failed: {type(exc).__name__}: {exc}"
    return None


def request_consolidation(kernel: Kernel, why: str) -> bool:
    """Ask the maintenance scheduler for an opportunistic consolidation, if there is one.

    Never raises: the request is a hint, and the scheduler throttles it anyway. True when
    the scheduler took it (False: throttled, no scheduler, or the request failed).
    """
    request = getattr(kernel, "request_maintenance", None)
    if not callable(request):
        return False
    try:
        return bool(request())
    except Exception as exc:
        logger.warning(
            "asking for maintenance after %s failed: %s: %s", why, type(exc).__name__, exc
        )
        return False


def utc_now_compact(timestamp: float) -> str:
    """``20261130T120000Z``: a timestamp fit for a file name."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y%m%dT%H%M%SZ")


# ------------------------------------------------------------------------------ fact units

_UNIT_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_words(text: str) -> set[str]:
    """Every word of ``text``, NFKC-normalised and case-folded: what ``forget`` and the
    tombstones compare (unlike :func:`significant_words`, short words count too)."""
    return {w.casefold() for w in _UNIT_WORD.findall(unicodedata.normalize("NFKC", text))}


def fact_units(lines: Sequence[str]) -> list[tuple[int, int]]:
    """The facts of a Markdown memory file's ``lines``, as ``(first, end)`` line ranges
    (0-based, end exclusive): a list item with its indented continuation lines, or one
    line of prose. Headings, blank lines and code-fence lines belong to no fact."""
    units: list[tuple[int, int]] = []
    bullet = False
    for number, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or _HEADING.match(line) or _FENCE.match(line):
            bullet = False
            continue
        if bullet and line[:1].isspace() and not _SAVE_BULLET.match(line):
            units[-1] = (units[-1][0], number + 1)
            continue
        bullet = bool(_SAVE_BULLET.match(line))
        units.append((number, number + 1))
    return units


def rewrite_units(
    text: str, chosen: Callable[[str], bool], replacement: str | None = None
) -> tuple[str, list[tuple[int, str]]]:
    """``text`` without the facts ``chosen`` accepts (or with each replaced by
    ``replacement``, keeping its list marker); and the ``(line, fact text)`` of each.

    A ``## `` entry heading left without any fact is removed with it, so no empty
    "Memory Flush" entry stays behind. Line numbers are 1-based, of ``text``.
    """
    lines = text.splitlines(keepends=True)
    bare = [line.rstrip("\r\n") for line in lines]
    drop: set[int] = set()
    new_line: dict[int, str] = {}
    found: list[tuple[int, str]] = []
    for first, end in fact_units(bare):
        unit = " ".join(line.strip() for line in bare[first:end])
        if not chosen(unit):
            continue
        found.append((first + 1, unit))
        drop.update(range(first, end))
        if replacement is not None:
            match = _SAVE_BULLET.match(bare[first])
            marker = match.group(0) if match else ""
            ending = lines[first][len(bare[first]) :] or "\n"
            new_line[first] = f"{marker}{' '.join(replacement.split())}{ending}"
    if not found:
        return text, []
    if replacement is None:
        drop |= _emptied_headings(bare, drop)
    kept = [new_line.get(n, line) for n, line in enumerate(lines) if n not in drop or n in new_line]
    return "".join(kept), found


def _emptied_headings(bare: Sequence[str], drop: set[int]) -> set[int]:
    """The lines of the ``## `` entries whose every fact is in ``drop``."""
    extra: set[int] = set()
    starts = [n for n, line in enumerate(bare) if line.startswith("## ")]
    for position, start in enumerate(starts):
        end = starts[position + 1] if position + 1 < len(starts) else len(bare)
        body = [n for n in range(start + 1, end) if bare[n].strip()]
        if body and all(n in drop for n in body):
            extra.update(range(start, end))  # with the blank line before the next heading
            before = start - 1
            while end == len(bare) and before >= 0 and not bare[before].strip():
                extra.add(before)  # the last entry: the blank line before it goes too
                before -= 1
    return extra
